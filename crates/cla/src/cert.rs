//! The subjectAltNames of an X.509 certificate, read from its DER encoding: the URI names are
//! node ids (RFC 9174 §4.4.1 NODE-ID), the DNS names and IP addresses name hosts (DNS-ID,
//! IP-ID). Pure: no I/O, never panics on any input.
//!
//! The DER is parsed by x509-parser; rustls/webpki validates the certificate itself, and the
//! names are read only from a certificate that passed that validation (or from this node's own,
//! at start). A name of a kind Ferry uses that is not what its kind says (a URI or DNS name
//! that is not ASCII text, an IP address of neither 4 nor 16 bytes) makes the certificate
//! unreadable rather than being skipped: a certificate that names a node oddly names none.

use std::net::IpAddr;

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

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
    Malformed(String),
}

fn malformed(what: impl std::fmt::Display) -> CertError {
    CertError::Malformed(what.to_string())
}

/// GeneralName tags (RFC 5280 §4.2.1.6) of the names read here, for the ones x509-parser
/// could not decode.
const GN_DNS: u32 = 2;
const GN_URI: u32 = 6;

/// The subjectAltNames of a DER certificate (bytes after it are ignored). A certificate without
/// the extension has none; one with the extension twice is refused (RFC 5280 §4.2).
pub fn alt_names(der: &[u8]) -> Result<AltNames, CertError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(malformed)?;
    let mut names = AltNames::default();
    let Some(san) = cert.subject_alternative_name().map_err(malformed)? else {
        return Ok(names);
    };
    let text = |name: &str| {
        name.is_ascii()
            .then(|| name.to_owned())
            .ok_or_else(|| malformed("a name that is not IA5 text"))
    };
    for name in &san.value.general_names {
        match name {
            GeneralName::URI(uri) => names.uris.push(text(uri)?),
            GeneralName::DNSName(dns) => names.dns.push(text(dns)?),
            GeneralName::IPAddress(ip) => match *ip {
                [a, b, c, d] => names.ips.push(IpAddr::from([*a, *b, *c, *d])),
                bytes => match <[u8; 16]>::try_from(bytes) {
                    Ok(v6) => names.ips.push(IpAddr::from(v6)),
                    Err(_) => return Err(malformed("an IP address of odd length")),
                },
            },
            // Not UTF-8: x509-parser keeps the raw entry.
            GeneralName::Invalid(tag, _) if matches!(tag.0, GN_DNS | GN_URI) => {
                return Err(malformed("a name that is not IA5 text"));
            }
            // otherName, rfc822Name, directoryName and the rest name nothing we use.
            _ => {}
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

    /// `der` with the bytes of `from` replaced by `to`, of the same length (a certificate's
    /// signature is not checked here, only its structure).
    fn patched(der: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let at = der
            .windows(from.len())
            .position(|w| w == from)
            .expect("the name is in the certificate");
        let mut out = der.to_vec();
        out[at..at + to.len()].copy_from_slice(to);
        out
    }

    #[test]
    fn a_node_id_that_is_not_ascii_makes_the_certificate_unreadable() {
        let der = cert(vec![
            rcgen::SanType::URI("dtn://alpha/".try_into().unwrap()),
            rcgen::SanType::DnsName("alpha.example".try_into().unwrap()),
        ]);
        assert!(alt_names(&der).is_ok());
        // "alpha/" as "alpé/": UTF-8, not IA5.
        let accented = patched(&der, b"alpha/", "alp\u{e9}/".as_bytes());
        assert!(alt_names(&accented).is_err(), "{:?}", alt_names(&accented));
        // Not UTF-8 at all.
        let binary = patched(&der, b"alpha/", b"alph\xff/");
        assert!(alt_names(&binary).is_err(), "{:?}", alt_names(&binary));
        let dns = patched(&der, b"alpha.example", b"alph\xff.example");
        assert!(alt_names(&dns).is_err(), "{:?}", alt_names(&dns));
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
