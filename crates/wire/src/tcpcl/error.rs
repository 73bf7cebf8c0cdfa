//! The one error type of TCPCLv4 framing, decoding and encoding.

use std::str::Utf8Error;

/// Why bytes are not an acceptable TCPCLv4 contact header or message, or why a value cannot be
/// encoded.
///
/// Every malformed input ends in one of these; nothing panics. The variants a session answers on
/// the wire carry what the answer needs: [`TcpclError::UnsupportedVersion`] the peer's version
/// (for SESS_TERM "Version mismatch"), [`TcpclError::UnknownMessageType`] the type byte (for
/// MSG_REJECT "Message Type Unknown").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TcpclError {
    /// The contact header does not start with `dtn!`: the peer does not speak TCPCL.
    #[error("contact header does not start with the magic \"dtn!\"")]
    BadMagic,
    /// The contact header names a protocol version other than 4.
    #[error("TCPCL version {0} (only 4 is supported)")]
    UnsupportedVersion(u8),
    /// A message type code RFC 9174 does not define. The rest of the stream cannot be framed.
    #[error("unknown message type {0:#04x}")]
    UnknownMessageType(u8),
    /// A declared length is above the limit the reader was given, so the message is refused
    /// before any of it is waited for or buffered.
    #[error("{what} of {declared} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Which length (e.g. "segment data", "transfer extension items").
        what: &'static str,
        /// The length the peer declared (for a whole frame, its total length).
        declared: u64,
        /// The limit it exceeds.
        limit: u64,
    },
    /// The frame ends before a field does (or, for a variable-length field, before the length
    /// it declares).
    #[error("{what} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the frame.
        available: usize,
    },
    /// Bytes follow the end of the message (or contact header) in a buffer that should hold
    /// exactly one.
    #[error("{0} bytes follow the end of the message")]
    TrailingBytes(usize),
    /// The SESS_INIT node id is not UTF-8.
    #[error("node id is not UTF-8: {0}")]
    InvalidNodeId(#[source] Utf8Error),
    /// Fewer bytes remain in an extension items field than an item header (5 bytes) needs.
    #[error("extension item header needs 5 bytes but only {available} remain in the items")]
    ExtensionItemTruncated {
        /// Bytes left in the extension items field.
        available: usize,
    },
    /// An extension item's value runs past the end of the extension items field.
    #[error(
        "extension item of type {item_type} declares {declared} bytes but only {available} remain in the items"
    )]
    ExtensionItemOverrun {
        /// The item's type.
        item_type: u16,
        /// The value length the item declares.
        declared: u16,
        /// Bytes left in the extension items field after the item's header.
        available: usize,
    },
    /// A Transfer Length extension item whose value is not a single 8-byte integer.
    #[error("transfer length extension value has {0} bytes (must be 8)")]
    InvalidTransferLength(usize),
    /// A value too long for its length field, so it cannot be encoded (a node id over 65535
    /// bytes, an extension value over 65535 bytes, extension items over 2^32 - 1 bytes).
    #[error("{what} of {len} bytes cannot be encoded (at most {max})")]
    Unencodable {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The most its length field can express.
        max: u64,
    },
}
