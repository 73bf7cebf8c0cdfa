//! The contact header (RFC 9174 §4.2): the six bytes each side sends first, before any message.

use std::fmt;

use bytes::{Buf, BufMut, BytesMut};

use super::error::TcpclError;
use super::frame::FrameStatus;

/// The magic that opens every contact header: "dtn!".
pub const MAGIC: [u8; 4] = *b"dtn!";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 4;

/// Contact header flags. Bits other than [`ContactFlags::CAN_TLS`] are reserved: kept as received
/// and otherwise ignored.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ContactFlags(pub u8);

impl ContactFlags {
    /// The sender can use TLS and wants to be offered it.
    pub const CAN_TLS: u8 = 0x01;

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

impl fmt::Debug for ContactFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContactFlags({:#04x})", self.0)
    }
}

/// A TCPCLv4 contact header: magic, version 4, flags.
///
/// The version is not a field: a header with any other version does not decode but fails with
/// [`TcpclError::UnsupportedVersion`], which carries the version for the session's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ContactHeader {
    /// The header's flags.
    pub flags: ContactFlags,
}

impl ContactHeader {
    /// Encoded size: magic (4), version (1), flags (1).
    pub const ENCODED_LEN: usize = 6;

    /// A header that does or does not offer TLS, with no reserved bits.
    pub fn new(can_tls: bool) -> Self {
        Self {
            flags: ContactFlags(if can_tls { ContactFlags::CAN_TLS } else { 0 }),
        }
    }

    /// Whether the sender can use TLS.
    pub fn can_tls(&self) -> bool {
        self.flags.contains(ContactFlags::CAN_TLS)
    }

    /// How far a received prefix goes towards a contact header, without consuming it.
    ///
    /// Fails as soon as the bytes so far cannot begin a valid header: a wrong magic byte is
    /// reported at once (a peer speaking something else, e.g. HTTP, is turned away without waiting
    /// for six bytes) and so is a wrong version. Otherwise `NeedMore(6 - buf.len())` or
    /// `Complete(6)`; bytes after the sixth belong to the first message and are not looked at.
    pub fn peek_frame(buf: &[u8]) -> Result<FrameStatus, TcpclError> {
        if buf.iter().zip(MAGIC).any(|(&got, want)| got != want) {
            return Err(TcpclError::BadMagic);
        }
        if let Some(&version) = buf.get(MAGIC.len())
            && version != VERSION
        {
            return Err(TcpclError::UnsupportedVersion(version));
        }
        Ok(match Self::ENCODED_LEN.checked_sub(buf.len()) {
            Some(n) if n > 0 => FrameStatus::NeedMore(n),
            _ => FrameStatus::Complete(Self::ENCODED_LEN),
        })
    }

    /// Decodes a buffer that holds exactly one contact header.
    pub fn decode(buf: &[u8]) -> Result<Self, TcpclError> {
        match Self::peek_frame(buf)? {
            FrameStatus::NeedMore(_) => Err(TcpclError::Truncated {
                what: "contact header",
                needed: Self::ENCODED_LEN as u64,
                available: buf.len(),
            }),
            FrameStatus::Complete(n) if buf.len() > n => {
                Err(TcpclError::TrailingBytes(buf.len() - n))
            }
            FrameStatus::Complete(_) => Ok(Self {
                // Complete means six bytes are there; `get` keeps that reasoning out of the
                // panic path.
                flags: ContactFlags(buf.get(5).copied().unwrap_or(0)),
            }),
        }
    }

    /// Takes a contact header off the front of a receive buffer once all six bytes are there.
    ///
    /// `Ok(None)`: more bytes are needed and `buf` is untouched. `Ok(Some(_))`: the six bytes were
    /// removed; what follows them stays in `buf`. `Err`: `buf` is untouched.
    pub fn decode_from(buf: &mut BytesMut) -> Result<Option<Self>, TcpclError> {
        match Self::peek_frame(buf)? {
            FrameStatus::NeedMore(_) => Ok(None),
            FrameStatus::Complete(n) => {
                let header = Self::decode(buf.get(..n).unwrap_or_default())?;
                buf.advance(n);
                Ok(Some(header))
            }
        }
    }

    /// The six bytes on the wire.
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let [m0, m1, m2, m3] = MAGIC;
        [m0, m1, m2, m3, VERSION, self.flags.0]
    }

    /// Appends the six bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&self.to_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(
            ContactHeader::new(true).to_bytes(),
            [0x64, 0x74, 0x6e, 0x21, 0x04, 0x01]
        );
        assert_eq!(
            ContactHeader::new(false).to_bytes(),
            [0x64, 0x74, 0x6e, 0x21, 0x04, 0x00]
        );
        let h = ContactHeader::decode(&[0x64, 0x74, 0x6e, 0x21, 0x04, 0x81]).unwrap();
        assert!(h.can_tls());
        assert_eq!(h.flags, ContactFlags(0x81), "reserved bits are kept");
        let mut out = BytesMut::new();
        h.encode(&mut out);
        assert_eq!(&out[..], &[0x64, 0x74, 0x6e, 0x21, 0x04, 0x81]);
    }

    #[test]
    fn prefixes_need_more() {
        let bytes = ContactHeader::new(true).to_bytes();
        for i in 0..bytes.len() {
            assert_eq!(
                ContactHeader::peek_frame(&bytes[..i]),
                Ok(FrameStatus::NeedMore(6 - i))
            );
        }
        assert_eq!(
            ContactHeader::peek_frame(&bytes),
            Ok(FrameStatus::Complete(6))
        );
    }

    #[test]
    fn bad_magic_is_refused_early() {
        assert_eq!(ContactHeader::peek_frame(b"GE"), Err(TcpclError::BadMagic));
        assert_eq!(
            ContactHeader::peek_frame(b"dtn?\x04\x00"),
            Err(TcpclError::BadMagic)
        );
        assert_eq!(
            ContactHeader::decode(b"GET / HTTP/1.1"),
            Err(TcpclError::BadMagic)
        );
    }

    #[test]
    fn other_versions_are_named() {
        assert_eq!(
            ContactHeader::peek_frame(b"dtn!\x03"),
            Err(TcpclError::UnsupportedVersion(3))
        );
        assert_eq!(
            ContactHeader::decode(b"dtn!\x05\x00"),
            Err(TcpclError::UnsupportedVersion(5))
        );
    }

    #[test]
    fn decode_wants_exactly_six_bytes() {
        assert_eq!(
            ContactHeader::decode(b"dtn!\x04"),
            Err(TcpclError::Truncated {
                what: "contact header",
                needed: 6,
                available: 5
            })
        );
        assert_eq!(
            ContactHeader::decode(b"dtn!\x04\x00\x04"),
            Err(TcpclError::TrailingBytes(1))
        );
    }

    #[test]
    fn decode_from_takes_only_the_header() {
        let mut buf = BytesMut::from(&b"dtn!\x04"[..]);
        assert_eq!(ContactHeader::decode_from(&mut buf), Ok(None));
        assert_eq!(&buf[..], b"dtn!\x04");
        buf.extend_from_slice(b"\x01\x04");
        assert_eq!(
            ContactHeader::decode_from(&mut buf),
            Ok(Some(ContactHeader::new(true)))
        );
        assert_eq!(&buf[..], b"\x04", "the first message stays");

        let mut bad = BytesMut::from(&b"dtn!\x03\x00"[..]);
        assert_eq!(
            ContactHeader::decode_from(&mut bad),
            Err(TcpclError::UnsupportedVersion(3))
        );
        assert_eq!(bad.len(), 6, "untouched on error");
    }
}
