//! Runs TCPCLv4's incremental framer and decoder over arbitrary bytes.
//!
//! Input: one configuration byte, then the stream.
//!
//! - bits 0-3: the size of the pieces the stream arrives in (1-15 bytes; 0: all at once);
//! - bit 4: the stream starts with a contact header;
//! - bits 5-6: the reader's [`FrameLimits`] (see [`limits`]).
//!
//! Nothing may panic, and:
//!
//! - the stream read piece by piece gives the same contact header, messages and error as the
//!   stream read whole;
//! - every message decoded re-encodes to a frame that decodes to the same message, re-encoding is
//!   byte-stable, `encoded_len` and the framer agree with the encoding, and an XFER_SEGMENT's
//!   header plus data is its whole encoding;
//! - every prefix of a complete frame is `NeedMore(n)` with `n` no more than what is missing;
//! - `Message::decode` of the raw stream, when it succeeds, agrees with the framer.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files (RUST_LIBFUZZER_DEBUG_PATH).
#![allow(clippy::disallowed_methods)]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use wire::tcpcl::{ContactHeader, FrameLimits, FrameStatus, Message, TcpclError};

/// The limits the configuration byte selects: the default, tiny ones (so `TooLarge` is reached),
/// the largest possible (so length arithmetic meets its edges), or none at all.
fn limits(config: u8) -> FrameLimits {
    match (config >> 5) & 0b11 {
        0 => FrameLimits::new(64 * 1024),
        1 => FrameLimits {
            max_segment_data: 16,
            max_extensions_len: 16,
        },
        2 => FrameLimits {
            max_segment_data: u64::MAX,
            max_extensions_len: u32::MAX,
        },
        _ => FrameLimits {
            max_segment_data: 0,
            max_extensions_len: 0,
        },
    }
}

/// What a reader gets from a stream.
#[derive(Debug, PartialEq)]
struct Outcome {
    contact: Option<ContactHeader>,
    messages: Vec<Message>,
    error: Option<TcpclError>,
    /// Bytes left in the receive buffer at the end (only when no error stopped the reader).
    left: usize,
    /// The frames the messages were decoded from, in order.
    frames: Vec<Bytes>,
}

/// Reads `stream` arriving in pieces of `piece` bytes, as a session would.
fn read(stream: &[u8], piece: usize, expect_contact: bool, limits: FrameLimits) -> Outcome {
    let mut out = Outcome {
        contact: None,
        messages: Vec::new(),
        error: None,
        left: 0,
        frames: Vec::new(),
    };
    let mut rx = BytesMut::new();
    let mut need_contact = expect_contact;
    for chunk in stream.chunks(piece.max(1)) {
        rx.extend_from_slice(chunk);
        if need_contact {
            match ContactHeader::decode_from(&mut rx) {
                Ok(None) => continue,
                Ok(Some(h)) => {
                    out.contact = Some(h);
                    need_contact = false;
                }
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            }
        }
        loop {
            // The frame the framer delimits, kept to check the decoder against.
            let frame = match Message::peek_frame(&rx, limits) {
                Ok(FrameStatus::Complete(len)) => Some(Bytes::copy_from_slice(&rx[..len])),
                _ => None,
            };
            match Message::decode_from(&mut rx, limits) {
                Ok(None) => {
                    assert!(frame.is_none(), "complete frame but decode_from wants more");
                    break;
                }
                Ok(Some(m)) => {
                    out.frames
                        .push(frame.expect("decode_from decoded an incomplete frame"));
                    out.messages.push(m);
                }
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            }
        }
    }
    out.left = rx.len();
    out
}

/// Checks a decoded message; `frame` is the frame the framer delimited for it, if it was framed
/// under `limits`.
fn check_message(m: &Message, frame: Option<&Bytes>, limits: FrameLimits) {
    let wire = m.to_bytes().expect("a decoded message is encodable");
    assert_eq!(m.encoded_len(), wire.len(), "encoded_len disagrees: {m:?}");
    let back = Message::decode(wire.clone())
        .unwrap_or_else(|e| panic!("re-encoded message does not decode: {e}\n{m:?}"));
    assert_eq!(&back, m, "encode → decode changed the message");
    assert_eq!(
        back.to_bytes().unwrap(),
        wire,
        "re-encoding is not byte-stable"
    );
    if let Message::XferSegment(s) = m {
        let mut head = BytesMut::new();
        s.encode_header(&mut head).unwrap();
        assert_eq!(head.len(), s.header_len(), "header_len disagrees");
        head.extend_from_slice(&s.data);
        assert_eq!(&head[..], &wire[..], "header + data is not the encoding");
        let _ = s.transfer_length();
    }
    let Some(frame) = frame else {
        return;
    };
    assert_eq!(
        Message::peek_frame(&wire, limits),
        Ok(FrameStatus::Complete(wire.len())),
        "the framer disagrees with the encoding of {m:?}"
    );
    // Every strict prefix of the received frame needs more, and never more than is missing.
    for p in 0..frame.len() {
        match Message::peek_frame(&frame[..p], limits) {
            Ok(FrameStatus::NeedMore(n)) => assert!(
                n >= 1 && p + n <= frame.len(),
                "prefix of {p} of a {}-byte frame: NeedMore({n})",
                frame.len()
            ),
            other => panic!("prefix of {p} of a {}-byte frame: {other:?}", frame.len()),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&config, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(config & 0x0f);
    let expect_contact = config & 0x10 != 0;
    let limits = limits(config);

    let whole = read(stream, stream.len(), expect_contact, limits);
    if piece != 0 {
        let pieces = read(stream, piece, expect_contact, limits);
        assert_eq!(pieces, whole, "reading in pieces of {piece} differs");
    }
    if let Some(h) = whole.contact {
        assert_eq!(ContactHeader::decode(&h.to_bytes()), Ok(h));
    }
    for (m, frame) in whole.messages.iter().zip(&whole.frames) {
        check_message(m, Some(frame), limits);
    }

    // The decoder alone, on the raw stream: if it is exactly one message, the framer agrees
    // (unless the limits refuse it).
    if let Ok(m) = Message::decode(Bytes::copy_from_slice(stream)) {
        let framed = match Message::peek_frame(stream, limits) {
            Err(TcpclError::TooLarge { .. }) => false,
            other => {
                assert_eq!(
                    other,
                    Ok(FrameStatus::Complete(stream.len())),
                    "decode accepted what the framer does not delimit: {m:?}"
                );
                true
            }
        };
        let frame = Bytes::copy_from_slice(stream);
        check_message(&m, framed.then_some(&frame), limits);
    }
    if let Ok(h) = ContactHeader::decode(stream) {
        assert_eq!(h.to_bytes()[..], stream[..]);
    }
});
