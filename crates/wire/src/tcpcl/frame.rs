//! Incremental framing: how many bytes the message at the front of a receive buffer needs, decided
//! from its fixed fields and length prefixes alone, without consuming or allocating.

use bytes::BytesMut;

use super::error::TcpclError;
use super::message::{
    EXT_LEN_LEN, KEEPALIVE_LEN, MSG_REJECT_LEN, Message, MessageType, NODE_ID_LEN_AT,
    SEGMENT_EXT_LEN_AT, SEGMENT_FIXED_LEN, SESS_INIT_FIXED_LEN, SESS_TERM_LEN, SegmentFlags,
    XFER_ACK_LEN, XFER_REFUSE_LEN,
};

/// How far a receive buffer goes towards the frame at its front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameStatus {
    /// The buffer starts with a whole frame of this many bytes (it may hold more after it).
    Complete(usize),
    /// At least this many more bytes (always at least 1) are needed. Exact once every length
    /// field of the frame has arrived; before that, the least the bytes so far allow.
    NeedMore(usize),
}

/// The largest lengths a reader accepts from its peer. A message that declares more is refused
/// with [`TcpclError::TooLarge`] as soon as its length field arrives, so a reader never waits for,
/// or buffers, more than [`FrameLimits::max_frame_len`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameLimits {
    /// The most data one XFER_SEGMENT may carry: the segment MRU this side announced in its
    /// SESS_INIT (RFC 9174 §4.6).
    pub max_segment_data: u64,
    /// The most bytes of extension items one SESS_INIT or XFER_SEGMENT may carry.
    pub max_extensions_len: u32,
}

impl FrameLimits {
    /// The default for [`FrameLimits::max_extensions_len`]. RFC 9174 defines a single 13-byte
    /// transfer extension and no session extension, so 64 KiB leaves room for many unknown
    /// items while keeping the extension share of a frame small.
    pub const DEFAULT_MAX_EXTENSIONS_LEN: u32 = 64 * 1024;

    /// Limits for a session whose segment MRU is `max_segment_data`, with
    /// [`FrameLimits::DEFAULT_MAX_EXTENSIONS_LEN`] for extension items.
    pub fn new(max_segment_data: u64) -> Self {
        Self {
            max_segment_data,
            max_extensions_len: Self::DEFAULT_MAX_EXTENSIONS_LEN,
        }
    }

    /// The longest frame these limits let through (a SESS_INIT with the longest node id, or an
    /// XFER_SEGMENT with START and the most data), saturating at `u64::MAX`: a bound for the
    /// reader's buffer.
    pub fn max_frame_len(&self) -> u64 {
        let ext = u64::from(self.max_extensions_len);
        let sess_init = SESS_INIT_FIXED_LEN + u64::from(u16::MAX) + ext;
        let segment = (SEGMENT_FIXED_LEN + EXT_LEN_LEN + ext).saturating_add(self.max_segment_data);
        sess_init.max(segment)
    }
}

/// `N` big-endian bytes at offset `at`, if they have all arrived.
fn be<const N: usize>(buf: &[u8], at: u64) -> Option<[u8; N]> {
    let at = usize::try_from(at).ok()?;
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn check(what: &'static str, declared: u64, limit: u64) -> Result<(), TcpclError> {
    if declared > limit {
        Err(TcpclError::TooLarge {
            what,
            declared,
            limit,
        })
    } else {
        Ok(())
    }
}

/// The least total length of the XFER_SEGMENT at the front of `buf`, given what has arrived.
fn segment_len(buf: &[u8], limits: FrameLimits) -> Result<u64, TcpclError> {
    let Some(&flags) = buf.get(1) else {
        // Without flags, the shortest shape: no START, no data.
        return Ok(SEGMENT_FIXED_LEN);
    };
    let mut data_len_at = SEGMENT_EXT_LEN_AT;
    if SegmentFlags(flags).is_start() {
        let Some(items) = be::<4>(buf, SEGMENT_EXT_LEN_AT).map(u32::from_be_bytes) else {
            return Ok(SEGMENT_FIXED_LEN + EXT_LEN_LEN);
        };
        let limit = limits.max_extensions_len;
        check("transfer extension items", items.into(), limit.into())?;
        data_len_at = SEGMENT_EXT_LEN_AT + EXT_LEN_LEN + u64::from(items);
    }
    let header_len = data_len_at + 8;
    let Some(data) = be::<8>(buf, data_len_at).map(u64::from_be_bytes) else {
        return Ok(header_len);
    };
    check("segment data", data, limits.max_segment_data)?;
    // Only a limit near 2^64 lets this overflow; such a frame cannot exist.
    header_len.checked_add(data).ok_or(TcpclError::TooLarge {
        what: "XFER_SEGMENT",
        declared: u64::MAX,
        limit: limits.max_frame_len(),
    })
}

/// The least total length of the SESS_INIT at the front of `buf`, given what has arrived.
fn sess_init_len(buf: &[u8], limits: FrameLimits) -> Result<u64, TcpclError> {
    let Some(node_id) = be::<2>(buf, NODE_ID_LEN_AT).map(u16::from_be_bytes) else {
        return Ok(SESS_INIT_FIXED_LEN);
    };
    // The node id length is a u16, so it needs no limit of its own.
    let items_len_at = NODE_ID_LEN_AT + 2 + u64::from(node_id);
    let Some(items) = be::<4>(buf, items_len_at).map(u32::from_be_bytes) else {
        return Ok(SESS_INIT_FIXED_LEN + u64::from(node_id));
    };
    check(
        "session extension items",
        items.into(),
        limits.max_extensions_len.into(),
    )?;
    Ok(SESS_INIT_FIXED_LEN + u64::from(node_id) + u64::from(items))
}

impl Message {
    /// How far `buf` goes towards the message at its front, without consuming or allocating.
    ///
    /// Looks only at the type code, the flags and the length fields. `Complete(len)` means
    /// `buf[..len]` is the whole message, ready for [`Message::decode`]; `NeedMore(n)` means at
    /// least `n` more bytes must arrive first. Errors end the session: an unknown type code
    /// ([`TcpclError::UnknownMessageType`], answered with MSG_REJECT) leaves the stream without
    /// framing, and a length above `limits` ([`TcpclError::TooLarge`]) is refused as soon as the
    /// length field arrives, before any of what it announces.
    pub fn peek_frame(buf: &[u8], limits: FrameLimits) -> Result<FrameStatus, TcpclError> {
        let Some(&code) = buf.first() else {
            return Ok(FrameStatus::NeedMore(1));
        };
        let ty = MessageType::from_code(code).ok_or(TcpclError::UnknownMessageType(code))?;
        let total = match ty {
            MessageType::XferSegment => segment_len(buf, limits)?,
            MessageType::XferAck => XFER_ACK_LEN,
            MessageType::XferRefuse => XFER_REFUSE_LEN,
            MessageType::Keepalive => KEEPALIVE_LEN,
            MessageType::SessTerm => SESS_TERM_LEN,
            MessageType::MsgReject => MSG_REJECT_LEN,
            MessageType::SessInit => sess_init_len(buf, limits)?,
        };
        // `usize` fits in `u64` on every platform Rust supports; saturate rather than assume.
        let have = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        match total.checked_sub(have) {
            Some(missing) if missing > 0 => usize::try_from(missing)
                .map(FrameStatus::NeedMore)
                .map_err(|_| TcpclError::TooLarge {
                    what: "frame",
                    declared: total,
                    limit: usize::MAX as u64,
                }),
            // total <= have <= usize::MAX, so the conversion cannot fail.
            _ => usize::try_from(total)
                .map(FrameStatus::Complete)
                .map_err(|_| TcpclError::TooLarge {
                    what: "frame",
                    declared: total,
                    limit: usize::MAX as u64,
                }),
        }
    }

    /// Takes the message at the front of a receive buffer off and decodes it, once it is whole.
    ///
    /// `Ok(None)`: more bytes are needed, and `buf` is untouched. `Ok(Some(message))`: the frame
    /// was split off `buf` (its data and extension values are slices of it, not copies) and the
    /// next message's bytes stay in `buf`. `Err` from framing ([`Message::peek_frame`]) leaves
    /// `buf` untouched; `Err` from decoding a whole frame has removed that frame, whose bounds
    /// were known. Either way the session cannot go on reading this stream.
    pub fn decode_from(
        buf: &mut BytesMut,
        limits: FrameLimits,
    ) -> Result<Option<Self>, TcpclError> {
        match Self::peek_frame(buf, limits)? {
            FrameStatus::NeedMore(_) => Ok(None),
            // `Complete(len)` promises `len <= buf.len()`, so the split is in bounds.
            FrameStatus::Complete(len) => Self::decode(buf.split_to(len).freeze()).map(Some),
        }
    }
}
