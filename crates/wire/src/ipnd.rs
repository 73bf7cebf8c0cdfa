//! dtn7-rs's discovery beacons ("IPND-ng": the IP Neighbor Discovery draft's beacon, IPND version
//! 7, written in CBOR), so that Ferry and `dtnd` find each other. Ferry's own format is
//! [`crate::Beacon`]; this one is only for talking to dtn7-rs.
//!
//! One beacon is one UDP datagram (dtnd: port [`IPND_PORT`], group [`IPND_GROUP_V4`]), a CBOR
//! array whose optional fields are announced by the flags:
//!
//! ```text
//! [ version (7), flags, sender (EID), sequence (u32), ? service block, ? period (seconds) ]
//! flags         = 0x01 sender present (always) | 0x02 service block | 0x04 period
//! service block = [ [ * [ name (text), port (uint) / null ] ], { * tag (0..=255) => bytes } ]
//! ```
//!
//! The convergence layer names are dtn7-rs's own (`"tcp"` is TCPCLv4); a receiver dials the
//! named port at the address the beacon came from. dtnd writes a service's bytes as an array of
//! small integers (serde's encoding of a `Vec<u8>`) and reads only that form; the IPND-ng note
//! says a byte string. [`IpndBeacon::decode`] takes both, [`IpndBeacon::encode`] writes what dtnd
//! reads.
//!
//! A beacon comes from anyone on the link, so decoding is strict and bounded: the flags must
//! agree with the fields present, every list and string has a bound ([`MAX_CLAS`],
//! [`MAX_CLA_NAME`], [`MAX_SERVICES`], [`MAX_SERVICE_LEN`]), a service tag appears once, and no
//! byte may follow the beacon. The reserved flag bits (3 to 7) are ignored, so a later version
//! that sets them is still heard; they are not kept. dtnd itself is more lenient (it takes a
//! beacon whose flags and fields disagree); it never writes one.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use bytes::{BufMut, Bytes};

use crate::cbor::{self, Arg, Reader};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};

/// The UDP port dtn7-rs sends beacons to and listens on.
pub const IPND_PORT: u16 = 3003;
/// The IPv4 multicast group dtnd sends its beacons to unless told otherwise (`-E`).
pub const IPND_GROUP_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 26);
/// The only IPND version there is in CBOR (the draft's version 4 used SDNVs).
pub const IPND_VERSION: u64 = 7;

/// Flag: the sender's EID is present. dtn7-rs always sets it; a beacon without it is refused.
pub const FLAG_SENDER: u64 = 0x01;
/// Flag: a service block follows the sequence number.
pub const FLAG_SERVICES: u64 = 0x02;
/// Flag: the beacon period is the last field.
pub const FLAG_PERIOD: u64 = 0x04;

/// Most convergence layers one beacon may list (dtnd lists the few it runs).
pub const MAX_CLAS: usize = 16;
/// Longest convergence layer name, in bytes (dtnd's are words like `"tcp"` and `"httppull"`).
pub const MAX_CLA_NAME: usize = 64;
/// Most services one beacon may carry.
pub const MAX_SERVICES: usize = 16;
/// Longest service value, in bytes (dtnd's longest, an address, is a line of text).
pub const MAX_SERVICE_LEN: usize = 256;

/// The service tag dtn7-rs reserves for a free-form text of at most 64 bytes.
pub const SERVICE_CUSTOM_STRING: u8 = 63;

/// A dtn7-rs discovery beacon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpndBeacon {
    /// The sender's node id (never `dtn:none`).
    pub node: Eid,
    /// dtnd counts beacons per destination address, wrapping at 2^32.
    pub sequence: u32,
    /// How to reach the sender, in its order of preference.
    pub clas: Vec<IpndCla>,
    /// Services by tag (dtn7-rs defines 63 text, 127 location, 191 battery, 255 address).
    pub services: BTreeMap<u8, Vec<u8>>,
    /// Seconds until the sender's next beacon, if it says (dtnd only with `-b`). dtnd forgets a
    /// peer after twice this, or after its own peer timeout (20 s) when there is none.
    pub period_secs: Option<u64>,
}

/// One convergence layer a beacon announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpndCla {
    /// dtn7-rs's name for it: `"tcp"` (TCPCLv4), `"mtcp"`, `"http"`, `"udp"`, …
    pub name: String,
    /// Its port; without one, a receiver uses its own default for that layer.
    pub port: Option<u16>,
}

/// dtn7-rs's name for TCPCLv4.
pub const CLA_TCP: &str = "tcp";

/// The CBOR simple value `null` (a convergence layer without a port).
const NULL: u8 = 0xf6;

impl IpndBeacon {
    /// The TCPCLv4 port the beacon announces, if any.
    pub fn tcp_port(&self) -> Option<u16> {
        self.clas
            .iter()
            .find(|c| c.name == CLA_TCP)
            .and_then(|c| c.port)
    }

    /// The flags this beacon is written with: what [`IpndBeacon::encode`] includes.
    pub fn flags(&self) -> u64 {
        let mut flags = FLAG_SENDER;
        if self.has_service_block() {
            flags |= FLAG_SERVICES;
        }
        if self.period_secs.is_some() {
            flags |= FLAG_PERIOD;
        }
        flags
    }

    /// dtnd leaves an empty service block out (and so does this encoder).
    fn has_service_block(&self) -> bool {
        !self.clas.is_empty() || !self.services.is_empty()
    }

    /// Encodes the beacon as dtnd writes and reads it: definite lengths, shortest integers,
    /// services as arrays of byte values. What the beacon holds is written as it is: lists or
    /// strings beyond the bounds make bytes that [`IpndBeacon::decode`] refuses.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(64);
        let items = 4 + u64::from(self.has_service_block()) + u64::from(self.period_secs.is_some());
        cbor::put_array(&mut out, items);
        cbor::put_uint(&mut out, IPND_VERSION);
        cbor::put_uint(&mut out, self.flags());
        self.node.encode(&mut out);
        cbor::put_uint(&mut out, u64::from(self.sequence));
        if self.has_service_block() {
            cbor::put_array(&mut out, 2);
            cbor::put_array(&mut out, self.clas.len() as u64);
            for cla in &self.clas {
                cbor::put_array(&mut out, 2);
                cbor::put_text(&mut out, &cla.name);
                match cla.port {
                    Some(port) => cbor::put_uint(&mut out, u64::from(port)),
                    None => out.put_u8(NULL),
                }
            }
            cbor::put_head(&mut out, cbor::MAP, self.services.len() as u64);
            for (tag, value) in &self.services {
                cbor::put_uint(&mut out, u64::from(*tag));
                cbor::put_array(&mut out, value.len() as u64);
                for byte in value {
                    cbor::put_uint(&mut out, u64::from(*byte));
                }
            }
        }
        if let Some(period) = self.period_secs {
            cbor::put_uint(&mut out, period);
        }
        Bytes::from(out)
    }

    /// Decodes a beacon that fills `buf` exactly.
    pub fn decode(buf: &Bytes) -> Result<Self, DecodeError> {
        const WHAT: &str = "IPND beacon";
        let mut r = Reader::new(buf);
        let array_at = r.position();
        let mut a = r.array()?;
        // The flags say which optional fields follow; the count must agree (read first, so an
        // indefinite array is walked once, bounded, before anything is believed).
        let items = r.count_items(a)?;
        if !(4..=6).contains(&items) {
            return Err(DecodeError::new(
                array_at,
                K::BadArrayLength {
                    what: WHAT,
                    len: items,
                },
            ));
        }
        r.expect_next(&mut a, WHAT)?;
        let version_at = r.position();
        if r.uint()? != IPND_VERSION {
            return Err(invalid(version_at, "IPND version other than 7"));
        }
        r.expect_next(&mut a, WHAT)?;
        let flags_at = r.position();
        let flags = r.uint()?;
        if flags > 0xff {
            return Err(invalid(flags_at, "flags wider than 8 bits"));
        }
        if flags & FLAG_SENDER == 0 {
            return Err(invalid(flags_at, "the sender-present flag is not set"));
        }
        let with_services = flags & FLAG_SERVICES != 0;
        let with_period = flags & FLAG_PERIOD != 0;
        if items != 4 + u64::from(with_services) + u64::from(with_period) {
            return Err(invalid(flags_at, "flags disagree with the fields present"));
        }
        r.expect_next(&mut a, WHAT)?;
        let node_at = r.position();
        let node = Eid::decode(&mut r, buf)?;
        if node.is_null() {
            return Err(invalid(node_at, "the sender is dtn:none"));
        }
        r.expect_next(&mut a, WHAT)?;
        let sequence_at = r.position();
        let sequence = u32::try_from(r.uint()?)
            .map_err(|_| invalid(sequence_at, "sequence number wider than 32 bits"))?;
        let (clas, services) = if with_services {
            r.expect_next(&mut a, WHAT)?;
            decode_service_block(&mut r, buf)?
        } else {
            (Vec::new(), BTreeMap::new())
        };
        let period_secs = if with_period {
            r.expect_next(&mut a, WHAT)?;
            Some(r.uint()?)
        } else {
            None
        };
        r.expect_end(&mut a, WHAT)?;
        if !r.is_empty() {
            return Err(r.err(K::TrailingBytes));
        }
        Ok(Self {
            node,
            sequence,
            clas,
            services,
            period_secs,
        })
    }
}

fn invalid(at: usize, why: &'static str) -> DecodeError {
    DecodeError::new(at, K::InvalidBeacon(why))
}

type ServiceBlock = (Vec<IpndCla>, BTreeMap<u8, Vec<u8>>);

fn decode_service_block(r: &mut Reader<'_>, buf: &Bytes) -> Result<ServiceBlock, DecodeError> {
    const WHAT: &str = "IPND service block";
    // dtnd writes `[]` for an empty block only where it leaves the block out, and our flags
    // check requires a block here: two items, always.
    let mut block = r.array()?;
    r.expect_next(&mut block, WHAT)?;
    let mut list = r.array()?;
    let mut clas = Vec::with_capacity(list.capacity_hint(MAX_CLAS));
    while r.has_next(&mut list)? {
        if clas.len() == MAX_CLAS {
            return Err(r.err(K::InvalidBeacon("more than 16 convergence layers")));
        }
        clas.push(decode_cla(r, buf)?);
    }
    r.expect_next(&mut block, WHAT)?;
    let services = decode_services(r, buf)?;
    r.expect_end(&mut block, WHAT)?;
    Ok((clas, services))
}

fn decode_cla(r: &mut Reader<'_>, buf: &Bytes) -> Result<IpndCla, DecodeError> {
    const WHAT: &str = "IPND convergence layer";
    let mut a = r.array()?;
    r.expect_next(&mut a, WHAT)?;
    let name_at = r.position();
    let range = r.text_unchecked()?;
    if range.len() > MAX_CLA_NAME {
        return Err(invalid(name_at, "convergence layer name over 64 bytes"));
    }
    let name = std::str::from_utf8(&buf[range])
        .map_err(|_| DecodeError::new(name_at, K::InvalidCbor("text string is not UTF-8")))?
        .to_owned();
    r.expect_next(&mut a, WHAT)?;
    let port = if r.peek()? == NULL {
        r.head()?;
        None
    } else {
        let port_at = r.position();
        Some(
            u16::try_from(r.uint()?)
                .map_err(|_| invalid(port_at, "convergence layer port above 65535"))?,
        )
    };
    r.expect_end(&mut a, WHAT)?;
    Ok(IpndCla { name, port })
}

fn decode_services(r: &mut Reader<'_>, buf: &Bytes) -> Result<BTreeMap<u8, Vec<u8>>, DecodeError> {
    let map_at = r.position();
    let count = match r.head()? {
        (cbor::MAP, Arg::Value(n)) => n,
        (cbor::MAP, Arg::Indefinite) => {
            return Err(invalid(map_at, "indefinite-length services map"));
        }
        _ => {
            return Err(DecodeError::new(
                map_at,
                K::UnexpectedType { expected: "map" },
            ));
        }
    };
    if count > MAX_SERVICES as u64 {
        return Err(invalid(map_at, "more than 16 services"));
    }
    let mut services = BTreeMap::new();
    for _ in 0..count {
        let tag_at = r.position();
        let tag = u8::try_from(r.uint()?).map_err(|_| invalid(tag_at, "service tag above 255"))?;
        let value = decode_service_value(r, buf)?;
        if services.insert(tag, value).is_some() {
            return Err(invalid(tag_at, "a service tag appears twice"));
        }
    }
    Ok(services)
}

/// A service's bytes: an array of integers 0..=255 (dtnd's form) or a byte string (the note's).
fn decode_service_value(r: &mut Reader<'_>, buf: &Bytes) -> Result<Vec<u8>, DecodeError> {
    let at = r.position();
    if r.peek()? >> 5 == cbor::BYTES {
        let range = r.bytes()?;
        if range.len() > MAX_SERVICE_LEN {
            return Err(invalid(at, "service value over 256 bytes"));
        }
        return Ok(buf[range].to_vec());
    }
    let mut a = r.array()?;
    let mut value = Vec::with_capacity(a.capacity_hint(MAX_SERVICE_LEN));
    while r.has_next(&mut a)? {
        if value.len() == MAX_SERVICE_LEN {
            return Err(invalid(at, "service value over 256 bytes"));
        }
        let byte_at = r.position();
        value
            .push(u8::try_from(r.uint()?).map_err(|_| invalid(byte_at, "service byte above 255"))?);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Bytes {
        let s: String = s.split_whitespace().collect();
        Bytes::from(
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect::<Vec<u8>>(),
        )
    }

    /// Captured from `dtnd -n d7cap -C tcp:port=4556 -i 1s` (dtn7-rs 0.21.0) on a veth in a
    /// network namespace: its third beacon to 224.0.0.26:3003.
    const DTND_TCP: &str = "85 07 03 82 01 68 2f2f64376361702f 02 82 81 82 63 746370 19 11cc a0";
    /// The same with `-C mtcp:port=16162 -b` (the period announced, 1 s), its fifth beacon.
    const DTND_TCP_MTCP_PERIOD: &str = "86 07 07 82 01 68 2f2f64376361702f 04 82 \
         82 82 63 746370 19 11cc 82 64 6d746370 19 3f22 a0 01";

    fn d7cap() -> Eid {
        "dtn://d7cap/".parse().unwrap()
    }

    #[test]
    fn decodes_what_dtnd_sends() {
        let b = IpndBeacon::decode(&hex(DTND_TCP)).unwrap();
        assert_eq!(
            b,
            IpndBeacon {
                node: d7cap(),
                sequence: 2,
                clas: vec![IpndCla {
                    name: "tcp".into(),
                    port: Some(4556)
                }],
                services: BTreeMap::new(),
                period_secs: None,
            }
        );
        assert_eq!(b.tcp_port(), Some(4556));
        // What dtnd reads back is byte for byte what it wrote.
        assert_eq!(b.encode(), hex(DTND_TCP));

        let b = IpndBeacon::decode(&hex(DTND_TCP_MTCP_PERIOD)).unwrap();
        assert_eq!(b.sequence, 4);
        assert_eq!(b.period_secs, Some(1));
        assert_eq!(
            b.clas,
            vec![
                IpndCla {
                    name: "tcp".into(),
                    port: Some(4556)
                },
                IpndCla {
                    name: "mtcp".into(),
                    port: Some(16162)
                },
            ]
        );
        assert_eq!(b.encode(), hex(DTND_TCP_MTCP_PERIOD));
    }

    #[test]
    fn services_are_written_as_dtnd_reads_them_and_read_in_both_forms() {
        let b = IpndBeacon {
            node: Eid::ipn(9, 0),
            sequence: 70_000,
            clas: vec![IpndCla {
                name: "tcp".into(),
                port: None,
            }],
            services: BTreeMap::from([(SERVICE_CUSTOM_STRING, b"hi".to_vec())]),
            period_secs: Some(2),
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x86, 0x07, 0x07,
            0x82, 0x02, 0x82, 0x09, 0x00,             // ipn:9.0
            0x1a, 0x00, 0x01, 0x11, 0x70,             // sequence 70000
            0x82, 0x81, 0x82, 0x63, b't', b'c', b'p', 0xf6,
            0xa1, 0x18, 0x3f, 0x82, 0x18, b'h', 0x18, b'i',
            0x02,
        ];
        assert_eq!(&b.encode()[..], expected);
        assert_eq!(IpndBeacon::decode(&b.encode()).unwrap(), b);
        // The IPND-ng note's byte string form decodes to the same services.
        let mut v = expected.to_vec();
        let at = v.len() - 6;
        v.splice(at..at + 5, [0x42, b'h', b'i']);
        assert_eq!(IpndBeacon::decode(&Bytes::from(v)).unwrap(), b);
    }

    fn err(bytes: &[u8]) -> K {
        IpndBeacon::decode(&Bytes::copy_from_slice(bytes))
            .unwrap_err()
            .kind
    }

    #[test]
    fn each_kind_of_damage_is_its_own_error() {
        let good = hex(DTND_TCP_MTCP_PERIOD);
        for n in 0..good.len() {
            assert!(IpndBeacon::decode(&good.slice(..n)).is_err(), "prefix {n}");
        }
        let mut v = good.to_vec();
        v.push(0);
        assert_eq!(err(&v), K::TrailingBytes);
        let mut v = good.to_vec();
        v[1] = 0x04;
        assert_eq!(err(&v), K::InvalidBeacon("IPND version other than 7"));
        let mut v = good.to_vec();
        v[2] = 0x06;
        assert_eq!(
            err(&v),
            K::InvalidBeacon("the sender-present flag is not set")
        );
        // Reserved bits are heard past.
        let mut v = good.to_vec();
        v.splice(2..3, [0x18, 0x87]);
        assert_eq!(
            IpndBeacon::decode(&Bytes::from(v)).unwrap(),
            IpndBeacon::decode(&good).unwrap()
        );
        let mut v = good.to_vec();
        v[2] = 0x03; // no period flag, but a period is there
        assert_eq!(
            err(&v),
            K::InvalidBeacon("flags disagree with the fields present")
        );
        assert!(matches!(
            err(&[0x83, 0x07, 0x01, 0x00]),
            K::BadArrayLength { .. }
        ));
        // dtn:none as the sender.
        assert_eq!(
            err(&[0x84, 0x07, 0x01, 0x82, 0x01, 0x00, 0x00]),
            K::InvalidBeacon("the sender is dtn:none")
        );
        // Sequence 2^32.
        let v = [
            0x84, 0x07, 0x01, 0x82, 0x02, 0x82, 0x01, 0x00, 0x1b, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        assert_eq!(
            err(&v),
            K::InvalidBeacon("sequence number wider than 32 bits")
        );
        // Port 70000.
        let mut v = good.to_vec();
        let at = v.windows(3).position(|w| w == [0x19, 0x11, 0xcc]).unwrap();
        v.splice(at..at + 3, [0x1a, 0x00, 0x01, 0x11, 0x70]);
        assert_eq!(
            err(&v),
            K::InvalidBeacon("convergence layer port above 65535")
        );
        // A non-shortest integer, as everywhere in this crate.
        let mut v = good.to_vec();
        v.splice(1..2, [0x18, 0x07]);
        assert_eq!(err(&v), K::NotDeterministic);
    }

    #[test]
    fn lists_and_strings_are_bounded() {
        let beacon = |clas: usize, name: usize, services: usize, len: usize| IpndBeacon {
            node: d7cap(),
            sequence: 0,
            clas: (0..clas)
                .map(|_| IpndCla {
                    name: "t".repeat(name),
                    port: Some(1),
                })
                .collect(),
            services: (0..services as u8).map(|t| (t, vec![7; len])).collect(),
            period_secs: None,
        };
        let at_bounds = beacon(MAX_CLAS, MAX_CLA_NAME, MAX_SERVICES, MAX_SERVICE_LEN);
        assert_eq!(IpndBeacon::decode(&at_bounds.encode()).unwrap(), at_bounds);
        for (over, why) in [
            (
                beacon(MAX_CLAS + 1, 3, 0, 0),
                "more than 16 convergence layers",
            ),
            (
                beacon(1, MAX_CLA_NAME + 1, 0, 0),
                "convergence layer name over 64 bytes",
            ),
            (beacon(1, 3, MAX_SERVICES + 1, 1), "more than 16 services"),
            (
                beacon(1, 3, 1, MAX_SERVICE_LEN + 1),
                "service value over 256 bytes",
            ),
        ] {
            assert_eq!(err(&over.encode()), K::InvalidBeacon(why), "{why}");
        }
        // A tag twice, a tag above 255, a byte above 255, an indefinite map.
        let head = hex("85 07 03 82 01 68 2f2f64376361702f 02 82 80");
        let with = |services: &str| [&head[..], &hex(services)[..]].concat();
        assert_eq!(
            err(&with("a2 01 80 01 80")),
            K::InvalidBeacon("a service tag appears twice")
        );
        assert_eq!(
            err(&with("a1 19 0100 80")),
            K::InvalidBeacon("service tag above 255")
        );
        assert_eq!(
            err(&with("a1 01 81 19 0100")),
            K::InvalidBeacon("service byte above 255")
        );
        assert_eq!(
            err(&with("bf 01 80 ff")),
            K::InvalidBeacon("indefinite-length services map")
        );
        assert_eq!(err(&with("80")), K::UnexpectedType { expected: "map" });
    }
}
