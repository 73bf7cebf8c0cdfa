//! Incremental framing: how many bytes the message at the front of a receive buffer needs, decided
//! from its fixed fields and length prefixes alone, without consuming or allocating.

use bytes::BytesMut;

use super::error::TcpclError;
use super::message::{
    EXT_LEN_LEN, KEEPALIVE_LEN, MSG_REJECT_LEN, Message, MessageType, NODE_ID_LEN_AT,
    SEGMENT_EXT_LEN_AT, SEGMENT_FIXED_LEN, SESS_INIT_FIXED_LEN, SESS_TERM_LEN, SegmentFlags,
    XFER_ACK_LEN, XFER_REFUSE_LEN,
};

/// The header of a continuation XFER_SEGMENT (one without START) whose header has arrived, whatever
/// of its data has: what a reader needs to put the data straight where it belongs
/// ([`Message::peek_segment_header`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentHeader {
    /// The segment's flags (END or not; never START).
    pub flags: SegmentFlags,
    /// The transfer it belongs to.
    pub transfer_id: u64,
    /// Bytes before the data: type code, flags, transfer id, data length.
    pub header_len: usize,
    /// Bytes of data that follow the header.
    pub data_len: u64,
}

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

    /// The header of the XFER_SEGMENT at the front of `buf`, if it is a segment without START whose
    /// header (type code to data length) has arrived; `None` for anything else, or before then.
    /// The data length is checked against `limits` as [`Message::peek_frame`] checks it.
    pub fn peek_segment_header(
        buf: &[u8],
        limits: FrameLimits,
    ) -> Result<Option<SegmentHeader>, TcpclError> {
        if buf.first() != Some(&MessageType::XferSegment.code()) {
            return Ok(None);
        }
        let Some(&flags) = buf.get(1) else {
            return Ok(None);
        };
        let flags = SegmentFlags(flags);
        if flags.is_start() {
            return Ok(None);
        }
        let (Some(id), Some(data)) = (be::<8>(buf, 2), be::<8>(buf, SEGMENT_EXT_LEN_AT)) else {
            return Ok(None);
        };
        let data_len = u64::from_be_bytes(data);
        check("segment data", data_len, limits.max_segment_data)?;
        Ok(Some(SegmentHeader {
            flags,
            transfer_id: u64::from_be_bytes(id),
            header_len: SEGMENT_FIXED_LEN as usize,
            data_len,
        }))
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_segment_data: 1000,
        max_extensions_len: 100,
    };

    fn peek(buf: &[u8]) -> Result<FrameStatus, TcpclError> {
        Message::peek_frame(buf, LIMITS)
    }

    use FrameStatus::{Complete, NeedMore};

    #[test]
    fn empty_buffer_needs_the_type_code() {
        assert_eq!(peek(&[]), Ok(NeedMore(1)));
    }

    #[test]
    fn fixed_size_messages() {
        assert_eq!(peek(&[0x04]), Ok(Complete(1)));
        assert_eq!(peek(&[0x04, 0x04, 0x04]), Ok(Complete(1)));
        assert_eq!(peek(&[0x05]), Ok(NeedMore(2)));
        assert_eq!(peek(&[0x06, 1, 2]), Ok(Complete(3)));
        assert_eq!(peek(&[0x03, 0]), Ok(NeedMore(8)));
        assert_eq!(peek(&[0x02]), Ok(NeedMore(17)));
    }

    #[test]
    fn segment_needs_grow_as_lengths_arrive() {
        let mut seg = vec![0x01];
        assert_eq!(peek(&seg), Ok(NeedMore(17)), "no START assumed yet");
        seg.push(SegmentFlags::START);
        assert_eq!(peek(&seg), Ok(NeedMore(20)), "START adds the items length");
        seg.extend_from_slice(&[0; 8]); // transfer id
        seg.extend_from_slice(&[0, 0, 0, 5]); // 5 bytes of items
        assert_eq!(peek(&seg), Ok(NeedMore(13)));
        seg.extend_from_slice(&[0x00, 0x00, 0x09, 0x00, 0x00]); // one empty item
        seg.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(peek(&seg), Ok(NeedMore(1)), "data length not complete");
        seg.push(4);
        assert_eq!(
            peek(&seg),
            Ok(NeedMore(4)),
            "exact once the data length is known"
        );
        seg.extend_from_slice(b"dat");
        assert_eq!(peek(&seg), Ok(NeedMore(1)));
        seg.push(b'a');
        assert_eq!(peek(&seg), Ok(Complete(31)));
        seg.push(0x04);
        assert_eq!(
            peek(&seg),
            Ok(Complete(31)),
            "the next message is not looked at"
        );
        assert!(Message::decode(bytes::Bytes::copy_from_slice(&seg[..31])).is_ok());
    }

    #[test]
    fn a_continuation_segment_header_is_read_before_its_data() {
        let mut seg = vec![0x01, SegmentFlags::END];
        seg.extend_from_slice(&7u64.to_be_bytes());
        seg.extend_from_slice(&900u64.to_be_bytes()[..7]);
        let header = |b: &[u8]| Message::peek_segment_header(b, LIMITS);
        assert_eq!(header(&seg), Ok(None), "data length not complete");
        seg.push(900u64.to_be_bytes()[7]);
        seg.extend_from_slice(b"some of the data");
        assert_eq!(
            header(&seg),
            Ok(Some(SegmentHeader {
                flags: SegmentFlags(SegmentFlags::END),
                transfer_id: 7,
                header_len: 18,
                data_len: 900,
            }))
        );
        // More than the limits allow is refused at once, as by `peek_frame`.
        seg[10..18].copy_from_slice(&1001u64.to_be_bytes());
        assert!(matches!(header(&seg), Err(TcpclError::TooLarge { .. })));
        // A START segment, another message, or an empty buffer: not for this.
        seg[1] = SegmentFlags::START;
        assert_eq!(header(&seg), Ok(None));
        assert_eq!(header(&[0x04]), Ok(None));
        assert_eq!(header(&[]), Ok(None));
    }

    #[test]
    fn sess_init_needs_grow_as_lengths_arrive() {
        let mut init = vec![0x07];
        assert_eq!(peek(&init), Ok(NeedMore(24)));
        init.extend_from_slice(&[0; 18]);
        init.extend_from_slice(&[0x00, 0x03]);
        assert_eq!(peek(&init), Ok(NeedMore(25 + 3 - 21)));
        init.extend_from_slice(b"a:b");
        init.extend_from_slice(&[0, 0, 0]);
        assert_eq!(peek(&init), Ok(NeedMore(1)));
        init.push(5);
        assert_eq!(peek(&init), Ok(NeedMore(5)));
        init.extend_from_slice(&[0x01, 0xff, 0xff, 0x00, 0x00]);
        assert_eq!(peek(&init), Ok(Complete(33)));
    }

    #[test]
    fn huge_segment_is_refused_when_its_length_arrives() {
        let mut seg = vec![0x01, 0x00];
        seg.extend_from_slice(&[0; 8]);
        seg.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(
            peek(&seg),
            Err(TcpclError::TooLarge {
                what: "segment data",
                declared: u64::MAX,
                limit: 1000
            })
        );
        // At the limit is fine.
        seg.truncate(10);
        seg.extend_from_slice(&1000u64.to_be_bytes());
        assert_eq!(peek(&seg), Ok(NeedMore(1000)));
    }

    #[test]
    fn huge_extension_items_are_refused_when_their_length_arrives() {
        let mut seg = vec![0x01, 0x03];
        seg.extend_from_slice(&[0; 8]);
        seg.extend_from_slice(&[0, 0, 0, 101]);
        assert_eq!(
            peek(&seg),
            Err(TcpclError::TooLarge {
                what: "transfer extension items",
                declared: 101,
                limit: 100
            })
        );
        let mut init = vec![0x07];
        init.extend_from_slice(&[0; 18]);
        init.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            peek(&init),
            Err(TcpclError::TooLarge {
                what: "session extension items",
                declared: u32::MAX.into(),
                limit: 100
            })
        );
    }

    #[test]
    fn unlimited_data_length_cannot_overflow() {
        let limits = FrameLimits {
            max_segment_data: u64::MAX,
            max_extensions_len: u32::MAX,
        };
        let mut seg = vec![0x01, 0x02];
        seg.extend_from_slice(&[0; 8]);
        seg.extend_from_slice(&[0xff; 4]);
        assert_eq!(
            Message::peek_frame(&seg, limits),
            Ok(NeedMore(22 + 0xffff_ffff - 14))
        );
        seg.resize(14 + 0xffff, 0);
        // Still waiting for the items, however large the limits.
        assert!(matches!(Message::peek_frame(&seg, limits), Ok(NeedMore(_))));
        let mut seg = vec![0x01, 0x00];
        seg.extend_from_slice(&[0; 8]);
        seg.extend_from_slice(&[0xff; 8]);
        assert!(matches!(
            Message::peek_frame(&seg, limits),
            Err(TcpclError::TooLarge { .. })
        ));
        assert_eq!(limits.max_frame_len(), u64::MAX);
    }

    #[test]
    fn unknown_types_are_named() {
        for code in [0x00, 0x08, 0x64, 0xff] {
            assert_eq!(peek(&[code]), Err(TcpclError::UnknownMessageType(code)));
        }
    }

    #[test]
    fn decode_from_leaves_partial_frames_alone() {
        let mut buf = BytesMut::from(&[0x02, 0x03, 0, 0][..]);
        assert_eq!(Message::decode_from(&mut buf, LIMITS), Ok(None));
        assert_eq!(&buf[..], &[0x02, 0x03, 0, 0]);
        let mut bad = BytesMut::from(&[0x09, 0x00][..]);
        assert_eq!(
            Message::decode_from(&mut bad, LIMITS),
            Err(TcpclError::UnknownMessageType(9))
        );
        assert_eq!(bad.len(), 2);
    }

    #[test]
    fn max_frame_len_bounds_both_large_messages() {
        assert_eq!(LIMITS.max_frame_len(), 25 + 65_535 + 100);
        let big = FrameLimits::new(1 << 20);
        assert_eq!(
            big.max_extensions_len,
            FrameLimits::DEFAULT_MAX_EXTENSIONS_LEN
        );
        assert_eq!(big.max_frame_len(), 22 + 65_536 + (1 << 20));
    }
}
