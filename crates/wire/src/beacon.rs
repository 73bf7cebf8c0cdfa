//! Discovery beacons: what a node broadcasts so that neighbours learn its id, how to reach it, and
//! when to consider it gone.
//!
//! A beacon is one CBOR array, small enough for one UDP datagram:
//!
//! ```text
//! [ version (1), node id (EID), sequence, period ms, capabilities, [ * convergence layer ] ]
//! convergence layer = [ kind, port ] / [ kind, port, address text ]
//! ```
//!
//! A convergence layer without an address is reachable at the address the beacon came from, so a
//! node need not know its own addresses to announce itself. The period tells receivers how often
//! to expect the next beacon; the node layer expires a neighbour after a few missed periods. The
//! sequence number lets receivers drop beacons that arrive out of order.

use bytes::Bytes;

use crate::cbor::{self, Reader};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};

/// The beacon format version this crate writes and reads.
pub const BEACON_VERSION: u64 = 1;

/// A discovery beacon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beacon {
    /// The announcing node's id.
    pub node: Eid,
    /// Increases with every beacon the node sends.
    pub sequence: u64,
    /// Milliseconds until the node's next beacon.
    pub period_ms: u64,
    /// What the node offers.
    pub capabilities: Capabilities,
    /// How to reach it.
    pub convergence_layers: Vec<ClaEndpoint>,
}

/// Capability bits. Unknown bits are kept and ignored, so newer nodes can announce more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(pub u64);

impl Capabilities {
    /// Forwards bundles for others (store-carry-forward).
    pub const DTN_RELAY: u64 = 0x01;
    /// Takes part in real-time mesh routing (datagram and stream classes).
    pub const MESH_ROUTING: u64 = 0x02;
    /// Serves remote procedure calls.
    pub const RPC_SERVER: u64 = 0x04;

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u64) -> bool {
        self.0 & bits == bits
    }
}

/// One way to reach the announcing node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaEndpoint {
    /// Which convergence layer.
    pub kind: ClaKind,
    /// Its port.
    pub port: u16,
    /// Its address, when it is not the beacon's source address (an IP literal or host name).
    pub address: Option<String>,
}

/// Convergence layer kinds that beacons announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaKind {
    /// TCPCLv4 (RFC 9174).
    TcpclV4,
    /// Ferry's UDP convergence layer (one bundle per datagram).
    Udp,
    /// A kind this crate does not know, kept so that it can be relayed or logged.
    Other(u64),
}

impl ClaKind {
    /// The code on the wire.
    pub fn code(self) -> u64 {
        match self {
            ClaKind::TcpclV4 => 1,
            ClaKind::Udp => 2,
            ClaKind::Other(code) => code,
        }
    }

    /// The kind for a code.
    pub fn from_code(code: u64) -> Self {
        match code {
            1 => ClaKind::TcpclV4,
            2 => ClaKind::Udp,
            other => ClaKind::Other(other),
        }
    }
}

impl Beacon {
    /// Encodes the beacon.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(64);
        cbor::put_array(&mut out, 6);
        cbor::put_uint(&mut out, BEACON_VERSION);
        self.node.encode(&mut out);
        cbor::put_uint(&mut out, self.sequence);
        cbor::put_uint(&mut out, self.period_ms);
        cbor::put_uint(&mut out, self.capabilities.0);
        cbor::put_array(&mut out, self.convergence_layers.len() as u64);
        for cla in &self.convergence_layers {
            cbor::put_array(&mut out, if cla.address.is_some() { 3 } else { 2 });
            cbor::put_uint(&mut out, cla.kind.code());
            cbor::put_uint(&mut out, u64::from(cla.port));
            if let Some(address) = &cla.address {
                cbor::put_text(&mut out, address);
            }
        }
        Bytes::from(out)
    }

    /// Decodes a beacon that fills `buf` exactly.
    pub fn decode(buf: &Bytes) -> Result<Self, DecodeError> {
        const WHAT: &str = "beacon";
        let mut r = Reader::new(buf);
        let mut a = r.array()?;
        r.expect_next(&mut a, WHAT)?;
        let version_at = r.position();
        let version = r.uint()?;
        if version != BEACON_VERSION {
            return Err(DecodeError::new(
                version_at,
                K::InvalidBeacon("unsupported beacon version"),
            ));
        }
        r.expect_next(&mut a, WHAT)?;
        let node = Eid::decode(&mut r, buf)?;
        r.expect_next(&mut a, WHAT)?;
        let sequence = r.uint()?;
        r.expect_next(&mut a, WHAT)?;
        let period_ms = r.uint()?;
        r.expect_next(&mut a, WHAT)?;
        let capabilities = Capabilities(r.uint()?);
        r.expect_next(&mut a, WHAT)?;
        let mut list = r.array()?;
        let mut convergence_layers = Vec::new();
        while r.has_next(&mut list)? {
            convergence_layers.push(decode_cla(&mut r, buf)?);
        }
        r.expect_end(&mut a, WHAT)?;
        if !r.is_empty() {
            return Err(r.err(K::TrailingBytes));
        }
        Ok(Self {
            node,
            sequence,
            period_ms,
            capabilities,
            convergence_layers,
        })
    }
}

fn decode_cla(r: &mut Reader<'_>, buf: &Bytes) -> Result<ClaEndpoint, DecodeError> {
    const WHAT: &str = "convergence layer";
    let mut a = r.array()?;
    r.expect_next(&mut a, WHAT)?;
    let kind = ClaKind::from_code(r.uint()?);
    r.expect_next(&mut a, WHAT)?;
    let port_at = r.position();
    let port = u16::try_from(r.uint()?)
        .map_err(|_| DecodeError::new(port_at, K::InvalidBeacon("port above 65535")))?;
    let address = if r.has_next(&mut a)? {
        let text_at = r.position();
        let range = r.text_unchecked()?;
        let text = std::str::from_utf8(&buf[range])
            .map_err(|_| DecodeError::new(text_at, K::InvalidCbor("text string is not UTF-8")))?;
        Some(text.to_owned())
    } else {
        None
    };
    r.expect_end(&mut a, WHAT)?;
    Ok(ClaEndpoint {
        kind,
        port,
        address,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Beacon {
        Beacon {
            node: "dtn://drone-7/".parse().unwrap(),
            sequence: 300,
            period_ms: 1000,
            capabilities: Capabilities(Capabilities::DTN_RELAY | Capabilities::RPC_SERVER),
            convergence_layers: vec![
                ClaEndpoint {
                    kind: ClaKind::TcpclV4,
                    port: 4556,
                    address: None,
                },
                ClaEndpoint {
                    kind: ClaKind::Udp,
                    port: 4556,
                    address: Some("fe80::1%wlan0".into()),
                },
            ],
        }
    }

    #[test]
    fn layout_and_round_trip() {
        let bytes = sample().encode();
        #[rustfmt::skip]
        let expected_head: &[u8] = &[
            0x86, 0x01,                                   // 6 items, version 1
            0x82, 0x01, 0x6a, b'/', b'/', b'd', b'r', b'o', b'n', b'e', b'-', b'7', b'/',
            0x19, 0x01, 0x2c,                             // sequence 300
            0x19, 0x03, 0xe8,                             // period 1000 ms
            0x05,                                         // relay | rpc server
            0x82,                                         // two convergence layers
            0x82, 0x01, 0x19, 0x11, 0xcc,                 // [TCPCLv4, 4556]
            0x83, 0x02, 0x19, 0x11, 0xcc, 0x6d,           // [UDP, 4556, "fe80::1%wlan0"]
        ];
        assert_eq!(&bytes[..expected_head.len()], expected_head);
        assert_eq!(Beacon::decode(&bytes).unwrap(), sample());
    }

    #[test]
    fn unknown_kinds_and_capabilities_are_kept() {
        let mut b = sample();
        b.capabilities = Capabilities(1 << 40 | Capabilities::MESH_ROUTING);
        b.convergence_layers.push(ClaEndpoint {
            kind: ClaKind::Other(77),
            port: 1,
            address: None,
        });
        let back = Beacon::decode(&b.encode()).unwrap();
        assert_eq!(back, b);
        assert!(back.capabilities.contains(Capabilities::MESH_ROUTING));
    }

    #[test]
    fn malformed_beacons_are_refused() {
        let good = sample().encode();
        for n in 0..good.len() {
            assert!(Beacon::decode(&good.slice(..n)).is_err(), "prefix {n}");
        }
        let mut v = good.to_vec();
        v[1] = 0x02;
        assert!(matches!(
            Beacon::decode(&Bytes::from(v)).unwrap_err().kind,
            K::InvalidBeacon("unsupported beacon version")
        ));
        let mut v = good.to_vec();
        v.push(0);
        assert_eq!(
            Beacon::decode(&Bytes::from(v)).unwrap_err().kind,
            K::TrailingBytes
        );
        // Port 70000.
        let mut b = sample();
        b.convergence_layers.truncate(1);
        let mut v = b.encode().to_vec();
        let at = v.windows(3).position(|w| w == [0x19, 0x11, 0xcc]).unwrap();
        v.splice(at..at + 3, [0x1a, 0x00, 0x01, 0x11, 0x70]);
        assert!(matches!(
            Beacon::decode(&Bytes::from(v)).unwrap_err().kind,
            K::InvalidBeacon("port above 65535")
        ));
    }
}
