//! The subjectAltNames of an X.509 certificate, read from its DER encoding: the URI names are
//! node ids (RFC 9174 §4.4.1 NODE-ID), the DNS names and IP addresses name hosts (DNS-ID,
//! IP-ID). Pure: no I/O, never panics on any input, every length checked before it is used.
//!
//! Only the path to the extension is walked (Certificate → tbsCertificate → extensions →
//! subjectAltName → GeneralNames); rustls/webpki validates the certificate itself, and this is
//! read only from a certificate that passed that validation.

use std::net::IpAddr;

/// The subjectAltName entries Ferry looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AltNames {
    /// uniformResourceIdentifier entries (node ids such as `dtn://alpha/`).
    pub uris: Vec<String>,
    /// dNSName entries.
    pub dns: Vec<String>,
    /// iPAddress entries.
    pub ips: Vec<IpAddr>,
}

/// Why a certificate's names could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// The bytes are not the DER structure of a certificate.
    #[error("malformed certificate: {0}")]
    Malformed(&'static str),
}

/// DER universal and context tags used on the path.
const SEQUENCE: u8 = 0x30;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
/// `[3] EXPLICIT Extensions` in tbsCertificate.
const EXTENSIONS: u8 = 0xa3;
/// GeneralName choices (implicit, primitive).
const GN_DNS: u8 = 0x82;
const GN_URI: u8 = 0x86;
const GN_IP: u8 = 0x87;
/// id-ce-subjectAltName, 2.5.29.17.
const SAN_OID: &[u8] = &[0x55, 0x1d, 0x11];

/// One TLV off the front of `input`: (tag, value, rest).
fn tlv(input: &[u8]) -> Result<(u8, &[u8], &[u8]), CertError> {
    let (&tag, rest) = input
        .split_first()
        .ok_or(CertError::Malformed("truncated"))?;
    if tag & 0x1f == 0x1f {
        return Err(CertError::Malformed("multi-byte tag"));
    }
    let (&first, rest) = rest
        .split_first()
        .ok_or(CertError::Malformed("truncated"))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(CertError::Malformed("bad length"));
        }
        let (bytes, rest) = rest.split_at(n);
        let len = bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, rest)
    };
    if rest.len() < len {
        return Err(CertError::Malformed("length beyond the input"));
    }
    let (value, rest) = rest.split_at(len);
    Ok((tag, value, rest))
}

/// The value of a TLV that must have `tag`.
fn expect<'a>(
    input: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), CertError> {
    match tlv(input)? {
        (t, value, rest) if t == tag => Ok((value, rest)),
        _ => Err(CertError::Malformed(what)),
    }
}

/// The subjectAltNames of a DER certificate. A certificate without the extension has none.
pub fn alt_names(der: &[u8]) -> Result<AltNames, CertError> {
    let (cert, _) = expect(der, SEQUENCE, "not a certificate")?;
    let (mut tbs, _) = expect(cert, SEQUENCE, "no tbsCertificate")?;
    let mut names = AltNames::default();
    // tbsCertificate: [0] version, serial, signature, issuer, validity, subject, spki,
    // [1] issuerUniqueID, [2] subjectUniqueID, [3] extensions; only [3] matters here.
    while !tbs.is_empty() {
        let (tag, value, rest) = tlv(tbs)?;
        tbs = rest;
        if tag != EXTENSIONS {
            continue;
        }
        let (mut exts, _) = expect(value, SEQUENCE, "extensions are not a sequence")?;
        while !exts.is_empty() {
            let (ext, rest) = expect(exts, SEQUENCE, "an extension is not a sequence")?;
            exts = rest;
            let (oid, mut ext) = expect(ext, OID, "an extension without an id")?;
            if oid != SAN_OID {
                continue;
            }
            if let Ok((BOOLEAN, _, rest)) = tlv(ext) {
                ext = rest;
            }
            let (value, _) = expect(ext, OCTET_STRING, "an extension without a value")?;
            let (mut general, _) = expect(value, SEQUENCE, "subjectAltName is not a sequence")?;
            while !general.is_empty() {
                let (tag, value, rest) = tlv(general)?;
                general = rest;
                match tag {
                    GN_URI | GN_DNS => {
                        let text = std::str::from_utf8(value)
                            .ok()
                            .filter(|t| t.is_ascii())
                            .ok_or(CertError::Malformed("a name that is not IA5 text"))?;
                        let list = if tag == GN_URI {
                            &mut names.uris
                        } else {
                            &mut names.dns
                        };
                        list.push(text.to_owned());
                    }
                    GN_IP => match value.len() {
                        4 => names.ips.push(IpAddr::from(
                            <[u8; 4]>::try_from(value).map_err(|_| CertError::Malformed("ip"))?,
                        )),
                        16 => names.ips.push(IpAddr::from(
                            <[u8; 16]>::try_from(value).map_err(|_| CertError::Malformed("ip"))?,
                        )),
                        _ => return Err(CertError::Malformed("an IP address of odd length")),
                    },
                    // otherName, rfc822Name, directoryName and the rest name nothing we use.
                    _ => {}
                }
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cert(sans: Vec<rcgen::SanType>) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = sans;
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_uri_dns_and_ip_names() {
        let der = cert(vec![
            rcgen::SanType::URI("dtn://alpha/".try_into().unwrap()),
            rcgen::SanType::DnsName("alpha.example".try_into().unwrap()),
            rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()),
            rcgen::SanType::IpAddress("::1".parse().unwrap()),
            rcgen::SanType::URI("ipn:7.0".try_into().unwrap()),
        ]);
        let names = alt_names(&der).unwrap();
        assert_eq!(names.uris, ["dtn://alpha/", "ipn:7.0"]);
        assert_eq!(names.dns, ["alpha.example"]);
        assert_eq!(
            names.ips,
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
    }

    #[test]
    fn a_certificate_without_names_has_none() {
        assert_eq!(alt_names(&cert(Vec::new())).unwrap(), AltNames::default());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(alt_names(&[]).is_err());
        assert!(alt_names(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        let der = cert(vec![rcgen::SanType::URI(
            "dtn://alpha/".try_into().unwrap(),
        )]);
        for cut in 0..der.len() {
            let _ = alt_names(&der[..cut]);
        }
    }

    proptest! {
        #[test]
        fn any_mutation_is_handled(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
            let mut der = cert(vec![rcgen::SanType::URI("dtn://alpha/".try_into().unwrap())]);
            for (i, b) in flips {
                let at = i.index(der.len());
                der[at] ^= b;
            }
            let _ = alt_names(&der);
        }
    }
}
