//! TCPCLv4 (RFC 9174): the contact header and the session and transfer messages, with an
//! incremental framer for stream readers. No I/O: these functions turn bytes into values and back.
//!
//! ```text
//!   TCP stream:  contact header (6 bytes) │ message │ message │ …
//!                                          └ type code (1 byte), fixed fields, length-prefixed parts
//! ```
//!
//! # Reading a stream
//!
//! Append whatever the socket yields to a [`BytesMut`](bytes::BytesMut), then take complete frames
//! off its front. First the contact header with [`ContactHeader::decode_from`], then messages with
//! [`Message::decode_from`]; both return `Ok(None)` and leave the buffer untouched until a whole
//! frame has arrived. A message's segment data and extension values are slices of the receive
//! buffer, never copies.
//!
//! [`FrameLimits`] bounds what the peer may declare (segment data: this side's segment MRU), so a
//! message announcing a 2^64-byte segment is refused with [`TcpclError::TooLarge`] as soon as its
//! length field arrives; the buffer never needs more than [`FrameLimits::max_frame_len`] bytes.
//!
//! ```
//! use bytes::BytesMut;
//! use wire::tcpcl::{ContactHeader, FrameLimits, Message, SessInit, TcpclError};
//!
//! // What a peer sends: its contact header, SESS_INIT, then a KEEPALIVE.
//! let mut sent = BytesMut::new();
//! ContactHeader::new(false).encode(&mut sent);
//! let init = SessInit {
//!     keepalive_interval: 30,
//!     segment_mru: 64 * 1024,
//!     transfer_mru: 1 << 30,
//!     node_id: "ipn:2.0".into(),
//!     extensions: Vec::new(),
//! };
//! Message::SessInit(init.clone()).encode(&mut sent)?;
//! Message::Keepalive.encode(&mut sent)?;
//!
//! // The reader: bytes arrive in arbitrary pieces.
//! let limits = FrameLimits::new(64 * 1024); // our segment MRU
//! let mut rx = BytesMut::new();
//! let mut contact = None;
//! let mut received = Vec::new();
//! for piece in sent.chunks(5) {
//!     rx.extend_from_slice(piece); // in real life: socket.read_buf(&mut rx)
//!     if contact.is_none() {
//!         contact = ContactHeader::decode_from(&mut rx)?;
//!         if contact.is_none() {
//!             continue;
//!         }
//!     }
//!     while let Some(message) = Message::decode_from(&mut rx, limits)? {
//!         received.push(message);
//!     }
//! }
//! assert_eq!(contact, Some(ContactHeader::new(false)));
//! assert_eq!(received, [Message::SessInit(init), Message::Keepalive]);
//! assert!(rx.is_empty());
//! # Ok::<(), TcpclError>(())
//! ```
//!
//! A reader that wants to size its next read calls [`Message::peek_frame`] (or
//! [`ContactHeader::peek_frame`]) itself: `NeedMore(n)` is a lower bound on the bytes still
//! missing, exact once the frame's length fields have arrived; `Complete(len)` delimits the frame
//! for [`Message::decode`].
//!
//! Errors are the peer's fault and end the session, with the answers RFC 9174 asks for:
//! [`TcpclError::UnsupportedVersion`] carries the version for a SESS_TERM "Version mismatch";
//! [`TcpclError::UnknownMessageType`] carries the type code for a MSG_REJECT "Message Type
//! Unknown" (after which the stream cannot be framed, so the session terminates too). Semantic
//! checks (a critical extension this node does not support, a segment above the transfer MRU, a
//! message unexpected in the session's state) are the session's, not this module's.
//!
//! # Writing
//!
//! [`Message::encode`] appends a whole message. For XFER_SEGMENT, [`XferSegment::encode_header`]
//! appends everything up to and including the data length, so the header and
//! [`XferSegment::data`] go out in one vectored write without copying the data.

mod contact;
mod cursor;
mod error;
mod extension;
mod frame;
mod message;

pub use contact::{ContactFlags, ContactHeader, MAGIC, VERSION};
pub use error::TcpclError;
pub use extension::ExtensionItem;
pub use frame::{FrameLimits, FrameStatus, SegmentHeader};
pub use message::{
    Message, MessageType, MsgReject, MsgRejectReason, SegmentFlags, SessInit, SessTerm,
    SessTermFlags, SessTermReason, XferAck, XferRefuse, XferRefuseReason, XferSegment,
};
