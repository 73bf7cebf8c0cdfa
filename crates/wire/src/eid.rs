//! Endpoint ids (RFC 9171 §4.2.5.1): `dtn:none`, `dtn://node/demux` and `ipn:node.service`.

use std::fmt;
use std::str::FromStr;

use bytes::{BufMut, Bytes};

use crate::cbor::{self, Reader};
use crate::error::{DecodeError, DecodeErrorKind as K};

/// URI scheme code of the `dtn` scheme.
pub const SCHEME_DTN: u64 = 1;
/// URI scheme code of the `ipn` scheme.
pub const SCHEME_IPN: u64 = 2;

/// A bundle endpoint id.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Eid {
    /// `dtn:none`, the null endpoint: it has no members; an anonymous bundle's source.
    Null,
    /// A `dtn://node-name/demux` endpoint.
    Dtn(DtnEid),
    /// An `ipn:node.service` endpoint.
    Ipn {
        /// Node number.
        node: u64,
        /// Service number; 0 names the node's administrative endpoint.
        service: u64,
    },
}

/// The scheme-specific part of a `dtn` endpoint id other than `dtn:none`: `//node-name/demux`.
///
/// Holds the text as it arrived (a slice of the received bundle, so decoding does not allocate)
/// and the position of the slash that ends the node name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DtnEid {
    ssp: Bytes,
    name_end: usize,
}

/// Why a string is not an endpoint id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid endpoint id {input:?}: {reason}")]
pub struct ParseEidError {
    input: String,
    reason: &'static str,
}

impl DtnEid {
    /// Checks the SSP syntax `//node-name/demux` and records where the node name ends.
    fn from_ssp(ssp: Bytes) -> Result<Self, &'static str> {
        let rest = ssp
            .strip_prefix(b"//")
            .ok_or("a dtn SSP starts with // or is none")?;
        let slash = rest
            .iter()
            .position(|&b| b == b'/')
            .ok_or("no / after the node name")?;
        // The ABNF's reg-name may be empty, but such an id names no node and cannot serve as a
        // node id or route to one; refused, as bp7 refuses it.
        if slash == 0 {
            return Err("empty node name");
        }
        let name = &rest[..slash];
        if !name.iter().all(|&b| REG_NAME[usize::from(b)]) || !percent_escapes_are_complete(name) {
            return Err("node name is not a URI reg-name");
        }
        if !rest[slash + 1..]
            .iter()
            .all(|&b| (0x21..=0x7e).contains(&b))
        {
            return Err("demux is not visible US-ASCII");
        }
        Ok(Self {
            ssp,
            name_end: 2 + slash,
        })
    }

    /// A `dtn://node/demux` id from its parts.
    pub fn new(node_name: &str, demux: &str) -> Result<Self, ParseEidError> {
        let text = format!("//{node_name}/{demux}");
        Self::from_ssp(Bytes::from(text.into_bytes())).map_err(|reason| ParseEidError {
            input: format!("dtn://{node_name}/{demux}"),
            reason,
        })
    }

    fn as_str(&self) -> &str {
        // The constructor accepted only US-ASCII.
        std::str::from_utf8(&self.ssp).expect("checked ASCII")
    }

    /// The node name (between `//` and the next `/`).
    pub fn node_name(&self) -> &str {
        &self.as_str()[2..self.name_end]
    }

    /// The demux part (after the node name's `/`); empty for a node's administrative endpoint.
    pub fn demux(&self) -> &str {
        &self.as_str()[self.name_end + 1..]
    }
}

/// RFC 3986 reg-name characters (unreserved / pct-encoded / sub-delims), as a table because the
/// check runs on every received dtn endpoint id.
const REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')'
            )
            || matches!(c, b'*' | b'+' | b',' | b';' | b'=');
        b += 1;
    }
    table
};

/// RFC 3986 pct-encoded: every `%` is followed by two hexadecimal digits.
fn percent_escapes_are_complete(name: &[u8]) -> bool {
    name.iter().enumerate().filter(|&(_, &b)| b == b'%').all(|(i, _)| {
        matches!(name.get(i + 1..i + 3), Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit())
    })
}

impl Eid {
    /// A `dtn://node/demux` endpoint id.
    pub fn dtn(node_name: &str, demux: &str) -> Result<Self, ParseEidError> {
        DtnEid::new(node_name, demux).map(Eid::Dtn)
    }

    /// An `ipn:node.service` endpoint id.
    pub fn ipn(node: u64, service: u64) -> Self {
        Eid::Ipn { node, service }
    }

    /// Whether this is `dtn:none`.
    pub fn is_null(&self) -> bool {
        matches!(self, Eid::Null)
    }

    /// Whether the endpoint has at most one member (RFC 9171 §4.2.5.1.1: a dtn demux starting with
    /// `~` names a group).
    pub fn is_singleton(&self) -> bool {
        match self {
            Eid::Null => false,
            Eid::Dtn(d) => !d.demux().starts_with('~'),
            Eid::Ipn { .. } => true,
        }
    }

    /// The node's administrative endpoint this id belongs to (`dtn://node/`, `ipn:node.0`).
    pub fn node_id(&self) -> Eid {
        match self {
            Eid::Null => Eid::Null,
            // `//name/` is a prefix of the SSP: a slice of the same bytes, no allocation (this
            // runs several times per bundle forwarded).
            Eid::Dtn(d) => Eid::Dtn(DtnEid {
                ssp: d.ssp.slice(..d.name_end + 1),
                name_end: d.name_end,
            }),
            Eid::Ipn { node, .. } => Eid::Ipn {
                node: *node,
                service: 0,
            },
        }
    }

    /// Decodes a CBOR-encoded endpoint id; `buf` is the whole received buffer, so that a dtn SSP
    /// can be kept as a slice of it.
    pub(crate) fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<Self, DecodeError> {
        let mut a = r.array()?;
        r.expect_next(&mut a, "endpoint id")?;
        let scheme_at = r.position();
        let scheme = r.uint()?;
        r.expect_next(&mut a, "endpoint id")?;
        let ssp_at = r.position();
        let eid = match scheme {
            SCHEME_DTN => {
                if r.peek()? >> 5 == cbor::UINT {
                    match r.uint()? {
                        0 => Eid::Null,
                        _ => {
                            return Err(DecodeError::new(
                                ssp_at,
                                K::InvalidEid("dtn SSP number other than 0"),
                            ));
                        }
                    }
                } else {
                    // from_ssp accepts only US-ASCII, which is stricter than UTF-8, so the
                    // reader need not check UTF-8 first.
                    let ssp = buf.slice(r.text_unchecked()?);
                    Eid::Dtn(
                        DtnEid::from_ssp(ssp)
                            .map_err(|why| DecodeError::new(ssp_at, K::InvalidEid(why)))?,
                    )
                }
            }
            SCHEME_IPN => {
                let mut pair = r.array()?;
                r.expect_next(&mut pair, "ipn SSP")?;
                let node = r.uint()?;
                r.expect_next(&mut pair, "ipn SSP")?;
                let service = r.uint()?;
                r.expect_end(&mut pair, "ipn SSP")?;
                Eid::Ipn { node, service }
            }
            other => return Err(DecodeError::new(scheme_at, K::UnknownEidScheme(other))),
        };
        r.expect_end(&mut a, "endpoint id")?;
        Ok(eid)
    }

    /// Decodes the endpoint id that starts `buf` (a CBOR sequence may follow it), for the
    /// structures of other crates that embed one (BPSec's security source): the id and the
    /// number of bytes it took.
    pub fn decode_prefix(buf: &Bytes) -> Result<(Self, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let eid = Self::decode(&mut r, buf)?;
        Ok((eid, r.position()))
    }

    /// Appends the CBOR encoding (RFC 9171 §4.2.5.1), for structures of other crates that embed
    /// an endpoint id.
    pub fn encode_cbor(&self, out: &mut Vec<u8>) {
        self.encode(out);
    }

    /// Appends the CBOR encoding.
    pub(crate) fn encode(&self, out: &mut impl BufMut) {
        cbor::put_array(out, 2);
        match self {
            Eid::Null => {
                cbor::put_uint(out, SCHEME_DTN);
                cbor::put_uint(out, 0);
            }
            Eid::Dtn(d) => {
                cbor::put_uint(out, SCHEME_DTN);
                // The SSP's bytes as they are (checked ASCII when made): a text string.
                cbor::put_head(out, cbor::TEXT, d.ssp.len() as u64);
                out.put_slice(&d.ssp);
            }
            Eid::Ipn { node, service } => {
                cbor::put_uint(out, SCHEME_IPN);
                cbor::put_array(out, 2);
                cbor::put_uint(out, *node);
                cbor::put_uint(out, *service);
            }
        }
    }

    /// The size of the CBOR encoding.
    pub(crate) fn encoded_len(&self) -> usize {
        1 + 1
            + match self {
                Eid::Null => 1,
                Eid::Dtn(d) => cbor::head_len(d.ssp.len() as u64) + d.ssp.len(),
                Eid::Ipn { node, service } => 1 + cbor::head_len(*node) + cbor::head_len(*service),
            }
    }
}

impl FromStr for Eid {
    type Err = ParseEidError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ParseEidError {
            input: s.to_owned(),
            reason,
        };
        if s == "dtn:none" {
            return Ok(Eid::Null);
        }
        if let Some(ssp) = s.strip_prefix("dtn:") {
            return DtnEid::from_ssp(Bytes::copy_from_slice(ssp.as_bytes()))
                .map(Eid::Dtn)
                .map_err(fail);
        }
        if let Some(ssp) = s.strip_prefix("ipn:") {
            let (node, service) = ssp
                .split_once('.')
                .ok_or_else(|| fail("ipn id needs node.service"))?;
            let number = |part: &str| {
                // 1*DIGIT: no sign, no spaces, no empty part.
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(fail("ipn numbers are decimal digits"));
                }
                part.parse::<u64>()
                    .map_err(|_| fail("ipn number does not fit 64 bits"))
            };
            return Ok(Eid::Ipn {
                node: number(node)?,
                service: number(service)?,
            });
        }
        Err(fail("unknown scheme (expected dtn: or ipn:)"))
    }
}

impl Eid {
    /// Appends the endpoint's URI to `out`, the text [`Display`](fmt::Display) writes, without
    /// going through the formatting machinery (text built for every call, such as the lines of
    /// a call's timeline, names endpoints in a few pushes).
    pub fn push_to(&self, out: &mut String) {
        match self {
            Eid::Null => out.push_str("dtn:none"),
            Eid::Dtn(d) => {
                out.push_str("dtn:");
                out.push_str(d.as_str());
            }
            Eid::Ipn { .. } => {
                use fmt::Write as _;
                // Writing to a String cannot fail.
                let _ = write!(out, "{self}");
            }
        }
    }
}

impl fmt::Display for Eid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Eid::Null => f.write_str("dtn:none"),
            Eid::Dtn(d) => write!(f, "dtn:{}", d.as_str()),
            Eid::Ipn { node, service } => write!(f, "ipn:{node}.{service}"),
        }
    }
}

impl fmt::Debug for Eid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Debug for DtnEid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dtn:{}", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(eid: &Eid) -> Eid {
        let mut out = Vec::new();
        eid.encode(&mut out);
        assert_eq!(out.len(), eid.encoded_len());
        let buf = Bytes::from(out);
        let mut r = Reader::new(&buf);
        let back = Eid::decode(&mut r, &buf).unwrap();
        assert!(r.is_empty());
        back
    }

    #[test]
    fn text_forms_parse_and_print() {
        for s in [
            "dtn:none",
            "dtn://node-1/",
            "dtn://a.b/in~box/x",
            "dtn://n/~group",
            "dtn://a%41b/x",
            "ipn:0.0",
            "ipn:977000.18446744073709551615",
        ] {
            let eid: Eid = s.parse().unwrap();
            assert_eq!(eid.to_string(), s);
            let mut pushed = String::from("<");
            eid.push_to(&mut pushed);
            assert_eq!(pushed, format!("<{s}"));
            assert_eq!(round_trip(&eid), eid);
        }
        let d: Eid = "dtn://node/svc/a".parse().unwrap();
        let Eid::Dtn(ref inner) = d else {
            panic!("dtn")
        };
        assert_eq!((inner.node_name(), inner.demux()), ("node", "svc/a"));
        assert!(d.is_singleton());
        assert!(!"dtn://node/~all".parse::<Eid>().unwrap().is_singleton());
        assert_eq!(d.node_id().to_string(), "dtn://node/");
        // The node id is a slice of the endpoint's bytes: it must equal, order, encode and give
        // its parts as a parsed one does.
        let node: Eid = "dtn://node/".parse().unwrap();
        assert_eq!(d.node_id(), node);
        assert_eq!(d.node_id().cmp(&node), std::cmp::Ordering::Equal);
        assert_eq!(round_trip(&d.node_id()), node);
        assert_eq!(d.node_id().node_id(), node);
        let Eid::Dtn(ref n) = d.node_id() else {
            panic!("dtn")
        };
        assert_eq!((n.node_name(), n.demux()), ("node", ""));
    }

    #[test]
    fn bad_text_forms_are_refused() {
        for s in [
            "",
            "dtn:",
            "dtn:foo",
            "dtn:///x",
            "dtn://node",
            "dtn://no de/",
            "dtn://n/a b",
            "dtn://a%zz/x",
            "dtn://%/x",
            "dtn://a%4/x",
            "ipn:1",
            "ipn:1.",
            "ipn:-1.2",
            "ipn:1.99999999999999999999",
            "http://x/",
        ] {
            assert!(s.parse::<Eid>().is_err(), "{s} should not parse");
        }
    }

    #[test]
    fn rfc_encodings() {
        // dtn:none is [1, 0]; ipn:1.2 is [2, [1, 2]]; dtn://a/b is [1, "//a/b"].
        let enc = |e: &Eid| {
            let mut v = Vec::new();
            e.encode(&mut v);
            v
        };
        assert_eq!(enc(&Eid::Null), [0x82, 0x01, 0x00]);
        assert_eq!(enc(&Eid::ipn(1, 2)), [0x82, 0x02, 0x82, 0x01, 0x02]);
        assert_eq!(
            enc(&"dtn://a/b".parse().unwrap()),
            [0x82, 0x01, 0x65, b'/', b'/', b'a', b'/', b'b']
        );
    }

    #[test]
    fn bad_encodings_are_refused() {
        let dec = |b: &[u8]| {
            let buf = Bytes::copy_from_slice(b);
            Eid::decode(&mut Reader::new(&buf), &buf).map_err(|e| e.kind)
        };
        assert_eq!(dec(&[0x82, 0x03, 0x00]), Err(K::UnknownEidScheme(3)));
        assert!(matches!(dec(&[0x82, 0x01, 0x01]), Err(K::InvalidEid(_))));
        assert!(matches!(
            dec(&[0x82, 0x01, 0x63, b'a', b'b', b'c']),
            Err(K::InvalidEid(_))
        ));
        assert!(matches!(
            dec(&[0x83, 0x02, 0x82, 0x01, 0x02, 0x00]),
            Err(K::BadArrayLength { .. })
        ));
        assert!(matches!(
            dec(&[0x82, 0x02, 0x83, 0x01, 0x02, 0x03]),
            Err(K::BadArrayLength { .. })
        ));
        // Not UTF-8, and so not the US-ASCII a dtn SSP must be.
        assert!(matches!(
            dec(&[0x82, 0x01, 0x64, b'/', b'/', 0xff, b'/']),
            Err(K::InvalidEid("node name is not a URI reg-name"))
        ));
    }
}
