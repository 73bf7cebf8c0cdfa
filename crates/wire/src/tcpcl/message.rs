//! The TCPCLv4 messages (RFC 9174 §4.3 – §5.2): one-byte type code, then fixed big-endian fields,
//! then (for SESS_INIT and XFER_SEGMENT) length-prefixed variable parts.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::cursor::Cursor;
use super::error::TcpclError;
use super::extension::{self, ExtensionItem};

/// Size of a SESS_INIT without node id and extension items: type, keepalive (2), segment MRU (8),
/// transfer MRU (8), node id length (2), extension items length (4).
pub(super) const SESS_INIT_FIXED_LEN: u64 = 25;
/// Size of an XFER_SEGMENT header without START (no extension items field): type, flags,
/// transfer id (8), data length (8).
pub(super) const SEGMENT_FIXED_LEN: u64 = 18;
/// Offset of the extension items length in an XFER_SEGMENT with START (after type, flags, id).
pub(super) const SEGMENT_EXT_LEN_AT: u64 = 10;
/// Size of the extension items length field.
pub(super) const EXT_LEN_LEN: u64 = 4;
/// Offset of the node id length in a SESS_INIT.
pub(super) const NODE_ID_LEN_AT: u64 = 19;
/// SESS_INIT and XFER_SEGMENT aside, every message has a fixed size.
pub(super) const XFER_ACK_LEN: u64 = 18;
pub(super) const XFER_REFUSE_LEN: u64 = 10;
pub(super) const KEEPALIVE_LEN: u64 = 1;
pub(super) const SESS_TERM_LEN: u64 = 3;
pub(super) const MSG_REJECT_LEN: u64 = 3;

/// The message type codes of RFC 9174 §4.1 (Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MessageType {
    /// 0x01: a segment of a transfer's data.
    XferSegment,
    /// 0x02: acknowledges received segment data.
    XferAck,
    /// 0x03: refuses a transfer.
    XferRefuse,
    /// 0x04: keeps an idle session alive.
    Keepalive,
    /// 0x05: ends the session.
    SessTerm,
    /// 0x06: rejects a message the receiver cannot process.
    MsgReject,
    /// 0x07: negotiates session parameters.
    SessInit,
}

impl MessageType {
    /// The type for a code, or `None` for a code RFC 9174 does not define.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => Self::XferSegment,
            0x02 => Self::XferAck,
            0x03 => Self::XferRefuse,
            0x04 => Self::Keepalive,
            0x05 => Self::SessTerm,
            0x06 => Self::MsgReject,
            0x07 => Self::SessInit,
            _ => return None,
        })
    }

    /// The code on the wire (the message header).
    pub fn code(self) -> u8 {
        match self {
            Self::XferSegment => 0x01,
            Self::XferAck => 0x02,
            Self::XferRefuse => 0x03,
            Self::Keepalive => 0x04,
            Self::SessTerm => 0x05,
            Self::MsgReject => 0x06,
            Self::SessInit => 0x07,
        }
    }
}

/// Defines a reason-code enum: the named codes of an RFC table plus `Other(u8)` for the rest, so
/// a code from a newer peer is kept rather than refused.
macro_rules! reason_codes {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A code without a name here (unassigned, reserved or private), kept as received.
            /// Decoding never produces `Other` with a named code.
            Other(u8),
        }

        impl $name {
            /// The reason for a code; codes without a name become `Other`.
            pub fn from_code(code: u8) -> Self {
                match code {
                    $( $code => Self::$variant, )*
                    other => Self::Other(other),
                }
            }

            /// The code on the wire.
            pub fn code(self) -> u8 {
                match self {
                    $( Self::$variant => $code, )*
                    Self::Other(code) => code,
                }
            }
        }

        impl From<u8> for $name {
            fn from(code: u8) -> Self {
                Self::from_code(code)
            }
        }

        impl From<$name> for u8 {
            fn from(reason: $name) -> u8 {
                reason.code()
            }
        }
    };
}

reason_codes! {
    /// Why a session ends (SESS_TERM reason codes, RFC 9174 §4.7 Table 8).
    SessTermReason {
        /// 0: no reason given.
        Unknown = 0,
        /// 1: the session was idle too long.
        IdleTimeout = 1,
        /// 2: the peer's contact header has a version this node does not speak.
        VersionMismatch = 2,
        /// 3: the node is too busy to handle the session.
        Busy = 3,
        /// 4: contact header or SESS_INIT parameters are unacceptable.
        ContactFailure = 4,
        /// 5: the node ran out of resources for the session.
        ResourceExhaustion = 5,
    }
}

reason_codes! {
    /// Why a transfer is refused (XFER_REFUSE reason codes, RFC 9174 §5.2.4 Table 7).
    XferRefuseReason {
        /// 0: no reason given.
        Unknown = 0,
        /// 1: the receiver already has the whole bundle.
        Completed = 1,
        /// 2: the receiver lacks resources for the bundle.
        NoResources = 2,
        /// 3: the receiver wants the bundle sent again (e.g. it was corrupted).
        Retransmit = 3,
        /// 4: a transfer extension or the bundle itself is not acceptable.
        NotAcceptable = 4,
        /// 5: a transfer extension failed processing.
        ExtensionFailure = 5,
        /// 6: the session is ending.
        SessionTerminating = 6,
    }
}

reason_codes! {
    /// Why a message is rejected (MSG_REJECT reason codes, RFC 9174 §5.1.2 Table 6).
    MsgRejectReason {
        /// 1: the message type code is unknown.
        MessageTypeUnknown = 1,
        /// 2: the message type is known but not supported.
        MessageUnsupported = 2,
        /// 3: the message was not expected in the session's current state.
        MessageUnexpected = 3,
    }
}

/// SESS_TERM flags. Bits other than [`SessTermFlags::REPLY`] are reserved: kept as received and
/// otherwise ignored.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SessTermFlags(pub u8);

impl SessTermFlags {
    /// This SESS_TERM answers one received from the peer.
    pub const REPLY: u8 = 0x01;

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

impl fmt::Debug for SessTermFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessTermFlags({:#04x})", self.0)
    }
}

/// XFER_SEGMENT (and XFER_ACK) flags. Bits other than START and END are reserved: kept as
/// received and otherwise ignored.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SegmentFlags(pub u8);

impl SegmentFlags {
    /// The last segment of its transfer.
    pub const END: u8 = 0x01;
    /// The first segment of its transfer (the only one that carries transfer extension items).
    pub const START: u8 = 0x02;

    /// Flags with START and END as given and no reserved bits.
    pub fn new(start: bool, end: bool) -> Self {
        Self(if start { Self::START } else { 0 } | if end { Self::END } else { 0 })
    }

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }

    /// Whether START is set.
    pub fn is_start(self) -> bool {
        self.contains(Self::START)
    }

    /// Whether END is set.
    pub fn is_end(self) -> bool {
        self.contains(Self::END)
    }
}

impl fmt::Debug for SegmentFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SegmentFlags({:#04x})", self.0)
    }
}

/// SESS_INIT (type 0x07): the session parameters one side offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessInit {
    /// Seconds between keepalives the sender wants; 0 disables keepalives.
    pub keepalive_interval: u16,
    /// The largest segment data the sender accepts in one XFER_SEGMENT.
    pub segment_mru: u64,
    /// The largest transfer (bundle) the sender accepts.
    pub transfer_mru: u64,
    /// The sender's node id, a URI (e.g. `ipn:1.0`, `dtn://node/`). Only UTF-8 is checked here;
    /// whether it is an acceptable node id is the session's call.
    pub node_id: String,
    /// Session extension items (RFC 9174 defines none; all are kept as received).
    pub extensions: Vec<ExtensionItem>,
}

/// SESS_TERM (type 0x05): ends the session, or acknowledges that the peer ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessTerm {
    /// Flags (REPLY).
    pub flags: SessTermFlags,
    /// Why.
    pub reason: SessTermReason,
}

/// XFER_SEGMENT (type 0x01): one segment of a transfer's data.
///
/// Transfer extension items exist on the wire only in a segment with START; encoding a segment
/// without START leaves `extensions` out, so keep them empty there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XferSegment {
    /// START, END and reserved bits.
    pub flags: SegmentFlags,
    /// The transfer this segment belongs to.
    pub transfer_id: u64,
    /// Transfer extension items (START segments only).
    pub extensions: Vec<ExtensionItem>,
    /// The segment's data; after decoding, a slice of the received frame.
    pub data: Bytes,
}

/// XFER_ACK (type 0x02): acknowledges the data of a transfer received so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct XferAck {
    /// The flags of the segment being acknowledged.
    pub flags: SegmentFlags,
    /// The transfer being acknowledged.
    pub transfer_id: u64,
    /// Bytes of the transfer received so far, counted from its first segment.
    pub acknowledged_length: u64,
}

/// XFER_REFUSE (type 0x03): the receiver does not want (the rest of) a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct XferRefuse {
    /// Why.
    pub reason: XferRefuseReason,
    /// The transfer refused.
    pub transfer_id: u64,
}

/// MSG_REJECT (type 0x06): the receiver could not process a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MsgReject {
    /// Why.
    pub reason: MsgRejectReason,
    /// The type code (first byte) of the rejected message.
    pub rejected_header: u8,
}

/// A TCPCLv4 message (everything after the contact header is a sequence of these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// SESS_INIT.
    SessInit(SessInit),
    /// SESS_TERM.
    SessTerm(SessTerm),
    /// XFER_SEGMENT.
    XferSegment(XferSegment),
    /// XFER_ACK.
    XferAck(XferAck),
    /// XFER_REFUSE.
    XferRefuse(XferRefuse),
    /// KEEPALIVE (no body).
    Keepalive,
    /// MSG_REJECT.
    MsgReject(MsgReject),
}

impl XferSegment {
    /// Bytes before the data of a segment without START (type code, flags, transfer id, data
    /// length): what a reader takes to learn where the next segment's data goes.
    pub const CONTINUATION_HEADER_LEN: usize = SEGMENT_FIXED_LEN as usize;

    /// The Transfer Length the segment announces, if it carries that extension (the first one if
    /// several); an error if its value is not 8 bytes.
    pub fn transfer_length(&self) -> Result<Option<u64>, TcpclError> {
        extension::transfer_length(&self.extensions)
    }

    /// The XFER_ACK for this segment: its flags and transfer id, and `acknowledged_length`, the
    /// bytes of the transfer received up to and including this segment.
    pub fn ack(&self, acknowledged_length: u64) -> XferAck {
        XferAck {
            flags: self.flags,
            transfer_id: self.transfer_id,
            acknowledged_length,
        }
    }

    /// Size of everything before the data (type code through data length).
    pub fn header_len(&self) -> usize {
        let fixed = SEGMENT_FIXED_LEN as usize;
        if self.flags.is_start() {
            fixed
                .saturating_add(EXT_LEN_LEN as usize)
                .saturating_add(extension::items_len_unchecked(&self.extensions))
        } else {
            fixed
        }
    }

    /// Appends everything before the data (type code, flags, transfer id, extension items if
    /// START, data length), so the session can write this header and [`XferSegment::data`] with
    /// one vectored write instead of copying the data.
    ///
    /// Fails, writing nothing, if the extension items cannot be encoded.
    pub fn encode_header(&self, out: &mut BytesMut) -> Result<(), TcpclError> {
        let items = if self.flags.is_start() {
            Some(extension::items_len(
                &self.extensions,
                "transfer extension items",
            )?)
        } else {
            None
        };
        out.reserve(self.header_len());
        out.put_u8(MessageType::XferSegment.code());
        out.put_u8(self.flags.0);
        out.put_u64(self.transfer_id);
        if let Some(items_len) = items {
            out.put_u32(items_len);
            extension::put_items(out, &self.extensions);
        }
        out.put_u64(self.data.len() as u64);
        Ok(())
    }
}

impl Message {
    /// The message's type.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::SessInit(_) => MessageType::SessInit,
            Self::SessTerm(_) => MessageType::SessTerm,
            Self::XferSegment(_) => MessageType::XferSegment,
            Self::XferAck(_) => MessageType::XferAck,
            Self::XferRefuse(_) => MessageType::XferRefuse,
            Self::Keepalive => MessageType::Keepalive,
            Self::MsgReject(_) => MessageType::MsgReject,
        }
    }

    /// Encoded size. For a value [`Message::encode`] refuses (a field too long for its length
    /// prefix) the size it would have, saturating at `usize::MAX`.
    pub fn encoded_len(&self) -> usize {
        match self {
            Self::SessInit(s) => (SESS_INIT_FIXED_LEN as usize)
                .saturating_add(s.node_id.len())
                .saturating_add(extension::items_len_unchecked(&s.extensions)),
            Self::SessTerm(_) => SESS_TERM_LEN as usize,
            Self::XferSegment(s) => s.header_len().saturating_add(s.data.len()),
            Self::XferAck(_) => XFER_ACK_LEN as usize,
            Self::XferRefuse(_) => XFER_REFUSE_LEN as usize,
            Self::Keepalive => KEEPALIVE_LEN as usize,
            Self::MsgReject(_) => MSG_REJECT_LEN as usize,
        }
    }

    /// Appends the encoded message. An XFER_SEGMENT's data is copied; to avoid that, write
    /// [`XferSegment::encode_header`] and the data with one vectored write.
    ///
    /// Fails, writing nothing, if a field is too long for its length prefix (see
    /// [`TcpclError::Unencodable`]).
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), TcpclError> {
        match self {
            Self::SessInit(s) => {
                let node_id_len =
                    u16::try_from(s.node_id.len()).map_err(|_| TcpclError::Unencodable {
                        what: "node id",
                        len: s.node_id.len(),
                        max: u16::MAX.into(),
                    })?;
                let items_len = extension::items_len(&s.extensions, "session extension items")?;
                out.reserve(self.encoded_len());
                out.put_u8(MessageType::SessInit.code());
                out.put_u16(s.keepalive_interval);
                out.put_u64(s.segment_mru);
                out.put_u64(s.transfer_mru);
                out.put_u16(node_id_len);
                out.put_slice(s.node_id.as_bytes());
                out.put_u32(items_len);
                extension::put_items(out, &s.extensions);
            }
            Self::SessTerm(t) => {
                out.put_u8(MessageType::SessTerm.code());
                out.put_u8(t.flags.0);
                out.put_u8(t.reason.code());
            }
            Self::XferSegment(s) => {
                // Check the items before reserving, so one reservation covers header and data
                // and an unencodable value reserves nothing.
                if s.flags.is_start() {
                    extension::items_len(&s.extensions, "transfer extension items")?;
                }
                out.reserve(self.encoded_len());
                s.encode_header(out)?;
                out.put_slice(&s.data);
            }
            Self::XferAck(a) => {
                out.put_u8(MessageType::XferAck.code());
                out.put_u8(a.flags.0);
                out.put_u64(a.transfer_id);
                out.put_u64(a.acknowledged_length);
            }
            Self::XferRefuse(r) => {
                out.put_u8(MessageType::XferRefuse.code());
                out.put_u8(r.reason.code());
                out.put_u64(r.transfer_id);
            }
            Self::Keepalive => out.put_u8(MessageType::Keepalive.code()),
            Self::MsgReject(m) => {
                out.put_u8(MessageType::MsgReject.code());
                out.put_u8(m.reason.code());
                out.put_u8(m.rejected_header);
            }
        }
        Ok(())
    }

    /// The encoded message in a buffer of its own.
    pub fn to_bytes(&self) -> Result<Bytes, TcpclError> {
        // Capacity up front, so that `encode`'s own reserve finds room and the buffer is handed
        // over whole (an XFER_ACK per bundle each way: a growing buffer cost more than the
        // message). Capped: `encoded_len` of an unencodable value could be absurd, and `encode`
        // checks the lengths before it reserves the rest.
        const MOST_UP_FRONT: usize = 64 * 1024;
        let mut out = BytesMut::with_capacity(self.encoded_len().min(MOST_UP_FRONT));
        self.encode(&mut out)?;
        Ok(out.freeze())
    }

    /// Decodes a frame that holds exactly one message (as delimited by
    /// [`Message::peek_frame`]).
    ///
    /// Segment data and extension item values are slices of `frame`; nothing proportional to
    /// them is copied. Reserved flag bits are kept and unknown reason codes become `Other`; a
    /// frame too short for what it declares, bytes after the message, a node id that is not UTF-8
    /// or extension items that overrun their field are errors.
    pub fn decode(frame: Bytes) -> Result<Self, TcpclError> {
        let mut r = Cursor::new(&frame);
        let code = r.u8("message type")?;
        let ty = MessageType::from_code(code).ok_or(TcpclError::UnknownMessageType(code))?;
        let message = match ty {
            MessageType::SessInit => {
                let keepalive_interval = r.u16("keepalive interval")?;
                let segment_mru = r.u64("segment MRU")?;
                let transfer_mru = r.u64("transfer MRU")?;
                let node_id_len = r.u16("node id length")?;
                let node_id = r.bytes(node_id_len.into(), "node id")?;
                let node_id = std::str::from_utf8(&node_id)
                    .map_err(TcpclError::InvalidNodeId)?
                    .to_owned();
                let items_len = r.u32("session extension items length")?;
                let items = r.bytes(items_len.into(), "session extension items")?;
                Self::SessInit(SessInit {
                    keepalive_interval,
                    segment_mru,
                    transfer_mru,
                    node_id,
                    extensions: extension::decode_items(&items)?,
                })
            }
            MessageType::SessTerm => Self::SessTerm(SessTerm {
                flags: SessTermFlags(r.u8("SESS_TERM flags")?),
                reason: SessTermReason::from_code(r.u8("SESS_TERM reason")?),
            }),
            MessageType::XferSegment => {
                let flags = SegmentFlags(r.u8("XFER_SEGMENT flags")?);
                let transfer_id = r.u64("transfer id")?;
                let extensions = if flags.is_start() {
                    let items_len = r.u32("transfer extension items length")?;
                    let items = r.bytes(items_len.into(), "transfer extension items")?;
                    extension::decode_items(&items)?
                } else {
                    Vec::new()
                };
                let data_len = r.u64("data length")?;
                let data = r.bytes(data_len, "segment data")?;
                Self::XferSegment(XferSegment {
                    flags,
                    transfer_id,
                    extensions,
                    data,
                })
            }
            MessageType::XferAck => Self::XferAck(XferAck {
                flags: SegmentFlags(r.u8("XFER_ACK flags")?),
                transfer_id: r.u64("transfer id")?,
                acknowledged_length: r.u64("acknowledged length")?,
            }),
            MessageType::XferRefuse => Self::XferRefuse(XferRefuse {
                reason: XferRefuseReason::from_code(r.u8("XFER_REFUSE reason")?),
                transfer_id: r.u64("transfer id")?,
            }),
            MessageType::Keepalive => Self::Keepalive,
            MessageType::MsgReject => Self::MsgReject(MsgReject {
                reason: MsgRejectReason::from_code(r.u8("MSG_REJECT reason")?),
                rejected_header: r.u8("rejected message header")?,
            }),
        };
        r.finish()?;
        Ok(message)
    }
}

macro_rules! into_message {
    ($($variant:ident),*) => {
        $(
            impl From<$variant> for Message {
                fn from(m: $variant) -> Self {
                    Self::$variant(m)
                }
            }
        )*
    };
}

into_message!(
    SessInit,
    SessTerm,
    XferSegment,
    XferAck,
    XferRefuse,
    MsgReject
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `message`, checks the bytes are `expected` and `encoded_len` agrees, and checks
    /// `expected` decodes back to `message`.
    fn layout(message: Message, expected: &[u8]) {
        let mut out = BytesMut::new();
        message.encode(&mut out).unwrap();
        assert_eq!(&out[..], expected);
        assert_eq!(message.encoded_len(), expected.len());
        assert_eq!(
            Message::decode(Bytes::copy_from_slice(expected)),
            Ok(message)
        );
    }

    #[test]
    fn sess_init_layout() {
        layout(
            Message::SessInit(SessInit {
                keepalive_interval: 30,
                segment_mru: 0x1_0000,
                transfer_mru: 0x4000_0000,
                node_id: "ipn:2.0".into(),
                extensions: vec![ExtensionItem {
                    critical: true,
                    item_type: 5,
                    value: Bytes::from_static(b"ab"),
                }],
            }),
            &[
                0x07, // SESS_INIT
                0x00, 0x1e, // keepalive 30 s
                0, 0, 0, 0, 0, 0x01, 0x00, 0x00, // segment MRU
                0, 0, 0, 0, 0x40, 0x00, 0x00, 0x00, // transfer MRU
                0x00, 0x07, b'i', b'p', b'n', b':', b'2', b'.', b'0', // node id
                0x00, 0x00, 0x00, 0x07, // session extension items length
                0x01, 0x00, 0x05, 0x00, 0x02, b'a', b'b', // one critical item
            ],
        );
    }

    #[test]
    fn sess_init_minimal_layout() {
        layout(
            Message::SessInit(SessInit {
                keepalive_interval: 0,
                segment_mru: 0,
                transfer_mru: 0,
                node_id: String::new(),
                extensions: Vec::new(),
            }),
            &[
                0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        );
    }

    #[test]
    fn sess_term_layout() {
        layout(
            Message::SessTerm(SessTerm {
                flags: SessTermFlags(SessTermFlags::REPLY),
                reason: SessTermReason::VersionMismatch,
            }),
            &[0x05, 0x01, 0x02],
        );
        layout(
            Message::SessTerm(SessTerm {
                flags: SessTermFlags(0),
                reason: SessTermReason::Other(0xc8),
            }),
            &[0x05, 0x00, 0xc8],
        );
    }

    #[test]
    fn start_segment_layout() {
        layout(
            Message::XferSegment(XferSegment {
                flags: SegmentFlags::new(true, true),
                transfer_id: 0x0102_0304_0506_0708,
                extensions: vec![ExtensionItem::transfer_length(3)],
                data: Bytes::from_static(b"abc"),
            }),
            &[
                0x01, // XFER_SEGMENT
                0x03, // START | END
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // transfer id
                0x00, 0x00, 0x00, 0x0d, // transfer extension items length
                0x00, 0x00, 0x01, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x03, // Transfer Length 3
                0, 0, 0, 0, 0, 0, 0, 0x03, // data length
                b'a', b'b', b'c',
            ],
        );
    }

    #[test]
    fn middle_and_end_segment_layout() {
        layout(
            Message::XferSegment(XferSegment {
                flags: SegmentFlags(0),
                transfer_id: 9,
                extensions: Vec::new(),
                data: Bytes::from_static(b"xy"),
            }),
            &[
                0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0x09, 0, 0, 0, 0, 0, 0, 0, 0x02, b'x', b'y',
            ],
        );
        layout(
            Message::XferSegment(XferSegment {
                flags: SegmentFlags(SegmentFlags::END),
                transfer_id: 9,
                extensions: Vec::new(),
                data: Bytes::new(),
            }),
            &[
                0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x09, 0, 0, 0, 0, 0, 0, 0, 0x00,
            ],
        );
    }

    #[test]
    fn start_segment_with_no_extensions_still_has_the_length_field() {
        layout(
            Message::XferSegment(XferSegment {
                flags: SegmentFlags(SegmentFlags::START),
                transfer_id: 1,
                extensions: Vec::new(),
                data: Bytes::from_static(b"z"),
            }),
            &[
                0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, b'z',
            ],
        );
    }

    #[test]
    fn xfer_ack_layout() {
        layout(
            Message::XferAck(XferAck {
                flags: SegmentFlags(SegmentFlags::START),
                transfer_id: 0x0a0b,
                acknowledged_length: 0x0100_0000_0000,
            }),
            &[
                0x02, 0x02, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b, 0, 0, 0x01, 0, 0, 0, 0, 0,
            ],
        );
    }

    #[test]
    fn xfer_refuse_layout() {
        layout(
            Message::XferRefuse(XferRefuse {
                reason: XferRefuseReason::Retransmit,
                transfer_id: 0xffff_ffff_ffff_fffe,
            }),
            &[0x03, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe],
        );
    }

    #[test]
    fn keepalive_layout() {
        layout(Message::Keepalive, &[0x04]);
    }

    #[test]
    fn msg_reject_layout() {
        layout(
            Message::MsgReject(MsgReject {
                reason: MsgRejectReason::MessageTypeUnknown,
                rejected_header: 0x09,
            }),
            &[0x06, 0x01, 0x09],
        );
        layout(
            Message::MsgReject(MsgReject {
                reason: MsgRejectReason::Other(0),
                rejected_header: 0x04,
            }),
            &[0x06, 0x00, 0x04],
        );
    }

    #[test]
    fn reason_codes_round_trip_and_name_what_they_can() {
        for code in 0..=255u8 {
            assert_eq!(SessTermReason::from_code(code).code(), code);
            assert_eq!(XferRefuseReason::from_code(code).code(), code);
            assert_eq!(MsgRejectReason::from_code(code).code(), code);
            assert_eq!(
                matches!(SessTermReason::from(code), SessTermReason::Other(_)),
                code > 5
            );
            assert_eq!(
                matches!(XferRefuseReason::from(code), XferRefuseReason::Other(_)),
                code > 6
            );
            assert_eq!(
                matches!(MsgRejectReason::from(code), MsgRejectReason::Other(_)),
                !(1..=3).contains(&code)
            );
            match MessageType::from_code(code) {
                Some(t) => assert_eq!(t.code(), code),
                None => assert!(code == 0 || code > 7),
            }
        }
        assert_eq!(u8::from(XferRefuseReason::SessionTerminating), 6);
        assert_eq!(SessTermReason::from(1), SessTermReason::IdleTimeout);
    }

    #[test]
    fn reserved_flag_bits_are_kept() {
        let m = Message::decode(Bytes::from_static(&[0x05, 0xff, 0x03])).unwrap();
        let Message::SessTerm(t) = m else {
            panic!("not a SESS_TERM: {m:?}")
        };
        assert!(t.flags.contains(SessTermFlags::REPLY));
        assert_eq!(t.flags, SessTermFlags(0xff));
        assert_eq!(t.reason, SessTermReason::Busy);
    }

    #[test]
    fn segment_data_is_a_slice_of_the_frame() {
        let frame = Bytes::from_static(&[
            0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0x05, 0x00, 0x00, 0x07, 0x00, 0x00, 0,
            0, 0, 0, 0, 0, 0, 0x04, b'd', b'a', b't', b'a',
        ]);
        let Ok(Message::XferSegment(s)) = Message::decode(frame.clone()) else {
            panic!("not a segment")
        };
        let within = frame.as_ptr_range();
        assert!(within.contains(&s.data.as_ptr()));
        assert_eq!(&s.data[..], b"data");
        assert_eq!(s.extensions.len(), 1);
        assert!(
            within.contains(&s.extensions[0].value.as_ptr()) || s.extensions[0].value.is_empty()
        );
    }

    #[test]
    fn encode_header_stops_before_the_data() {
        let s = XferSegment {
            flags: SegmentFlags::new(true, false),
            transfer_id: 7,
            extensions: vec![ExtensionItem::transfer_length(1000)],
            data: Bytes::from_static(b"payload"),
        };
        let mut header = BytesMut::new();
        s.encode_header(&mut header).unwrap();
        assert_eq!(header.len(), s.header_len());
        assert_eq!(header.len(), 18 + 4 + 13);
        let mut whole = header.clone();
        whole.extend_from_slice(&s.data);
        assert_eq!(
            Message::XferSegment(s.clone()).to_bytes().unwrap(),
            whole.freeze()
        );
        assert_eq!(s.transfer_length(), Ok(Some(1000)));
        assert_eq!(
            s.ack(7),
            XferAck {
                flags: s.flags,
                transfer_id: 7,
                acknowledged_length: 7
            }
        );
    }

    #[test]
    fn extensions_of_a_non_start_segment_are_not_written() {
        let s = XferSegment {
            flags: SegmentFlags(SegmentFlags::END),
            transfer_id: 7,
            extensions: vec![ExtensionItem::transfer_length(1000)],
            data: Bytes::new(),
        };
        assert_eq!(s.header_len(), 18);
        assert_eq!(Message::from(s).to_bytes().unwrap().len(), 18);
    }

    #[test]
    fn unencodable_values_write_nothing() {
        let mut out = BytesMut::new();
        let long_id = Message::SessInit(SessInit {
            keepalive_interval: 0,
            segment_mru: 0,
            transfer_mru: 0,
            node_id: "a".repeat(65_536),
            extensions: Vec::new(),
        });
        assert_eq!(
            long_id.encode(&mut out),
            Err(TcpclError::Unencodable {
                what: "node id",
                len: 65_536,
                max: 65_535
            })
        );
        let big_item = ExtensionItem {
            critical: false,
            item_type: 2,
            value: Bytes::from(vec![0; 70_000]),
        };
        let segment = Message::XferSegment(XferSegment {
            flags: SegmentFlags(SegmentFlags::START),
            transfer_id: 0,
            extensions: vec![big_item],
            data: Bytes::from_static(b"x"),
        });
        assert!(matches!(
            segment.encode(&mut out),
            Err(TcpclError::Unencodable {
                what: "extension item value",
                ..
            })
        ));
        assert!(out.is_empty());
        // A node id of exactly 65535 bytes is fine.
        let max_id = Message::SessInit(SessInit {
            keepalive_interval: 0,
            segment_mru: 0,
            transfer_mru: 0,
            node_id: "a".repeat(65_535),
            extensions: Vec::new(),
        });
        let bytes = max_id.to_bytes().unwrap();
        assert_eq!(bytes.len(), 25 + 65_535);
        assert_eq!(Message::decode(bytes), Ok(max_id));
    }

    #[test]
    fn malformed_frames_are_named() {
        let decode = |b: &'static [u8]| Message::decode(Bytes::from_static(b));
        assert_eq!(
            decode(&[]),
            Err(TcpclError::Truncated {
                what: "message type",
                needed: 1,
                available: 0
            })
        );
        assert_eq!(decode(&[0x00]), Err(TcpclError::UnknownMessageType(0)));
        assert_eq!(decode(&[0x08]), Err(TcpclError::UnknownMessageType(8)));
        assert_eq!(decode(&[0x04, 0x04]), Err(TcpclError::TrailingBytes(1)));
        assert_eq!(
            decode(&[0x03, 0x01, 0, 0]),
            Err(TcpclError::Truncated {
                what: "transfer id",
                needed: 8,
                available: 2
            })
        );
        // A segment declaring 2^64 - 1 bytes of data, with one present.
        assert_eq!(
            decode(&[
                0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                b'a'
            ]),
            Err(TcpclError::Truncated {
                what: "segment data",
                needed: u64::MAX,
                available: 1
            })
        );
        // Transfer extension items declared longer than the frame.
        assert_eq!(
            decode(&[
                0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0
            ]),
            Err(TcpclError::Truncated {
                what: "transfer extension items",
                needed: 0xffff_ffff,
                available: 1
            })
        );
        // An item inside the session extension items overruns them: the field is 6 bytes, the
        // item declares 2 bytes of value after its 5-byte header.
        let mut init = vec![0x07, 0, 0];
        init.extend_from_slice(&[0; 16]);
        init.extend_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x00, 0x06]);
        init.extend_from_slice(&[0x00, 0x00, 0x01, 0x00, 0x02, b'a']);
        assert_eq!(
            Message::decode(Bytes::from(init)),
            Err(TcpclError::ExtensionItemOverrun {
                item_type: 1,
                declared: 2,
                available: 1
            })
        );
        // A node id that is not UTF-8.
        let mut init = vec![0x07, 0, 0];
        init.extend_from_slice(&[0; 16]);
        init.extend_from_slice(&[0x00, 0x02, 0xc3, 0x28, 0, 0, 0, 0]);
        assert!(matches!(
            Message::decode(Bytes::from(init)),
            Err(TcpclError::InvalidNodeId(_))
        ));
    }
}
