//! Property tests of the TCPCLv4 codec: every message survives encode → decode, the incremental
//! framer agrees with the encoder on every prefix, streams of messages come apart one by one
//! however they are cut, and arbitrary or damaged bytes give errors, never panics.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use wire::tcpcl::{
    ContactFlags, ContactHeader, ExtensionItem, FrameLimits, FrameStatus, Message, MsgReject,
    MsgRejectReason, SegmentFlags, SessInit, SessTerm, SessTermFlags, SessTermReason, TcpclError,
    XferAck, XferRefuse, XferRefuseReason, XferSegment,
};

/// Limits above anything the strategies generate.
const ROOMY: FrameLimits = FrameLimits {
    max_segment_data: 1 << 20,
    max_extensions_len: 1 << 16,
};

/// No limits at all: framing then follows the declared lengths only.
const UNLIMITED: FrameLimits = FrameLimits {
    max_segment_data: u64::MAX,
    max_extensions_len: u32::MAX,
};

fn extension_item() -> impl Strategy<Value = ExtensionItem> {
    prop_oneof![
        (any::<u64>(), any::<bool>()).prop_map(|(total, critical)| ExtensionItem {
            critical,
            ..ExtensionItem::transfer_length(total)
        }),
        (any::<bool>(), any::<u16>(), vec(any::<u8>(), 0..40)).prop_map(
            |(critical, item_type, value)| ExtensionItem {
                critical,
                item_type,
                value: Bytes::from(value),
            }
        ),
    ]
}

fn sess_init() -> impl Strategy<Value = SessInit> {
    (
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        "\\PC{0,30}",
        vec(extension_item(), 0..4),
    )
        .prop_map(
            |(keepalive_interval, segment_mru, transfer_mru, node_id, extensions)| SessInit {
                keepalive_interval,
                segment_mru,
                transfer_mru,
                node_id,
                extensions,
            },
        )
}

fn xfer_segment() -> impl Strategy<Value = XferSegment> {
    (
        any::<u8>(),
        any::<u64>(),
        vec(extension_item(), 0..4),
        vec(any::<u8>(), 0..300),
    )
        .prop_map(|(flags, transfer_id, extensions, data)| {
            let flags = SegmentFlags(flags);
            XferSegment {
                flags,
                transfer_id,
                // Extension items exist on the wire only with START.
                extensions: if flags.is_start() {
                    extensions
                } else {
                    Vec::new()
                },
                data: Bytes::from(data),
            }
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        sess_init().prop_map(Message::SessInit),
        (any::<u8>(), any::<u8>()).prop_map(|(flags, reason)| Message::SessTerm(SessTerm {
            flags: SessTermFlags(flags),
            reason: SessTermReason::from_code(reason),
        })),
        xfer_segment().prop_map(Message::XferSegment),
        (any::<u8>(), any::<u64>(), any::<u64>()).prop_map(|(flags, transfer_id, acked)| {
            Message::XferAck(XferAck {
                flags: SegmentFlags(flags),
                transfer_id,
                acknowledged_length: acked,
            })
        }),
        (any::<u8>(), any::<u64>()).prop_map(|(reason, transfer_id)| Message::XferRefuse(
            XferRefuse {
                reason: XferRefuseReason::from_code(reason),
                transfer_id,
            }
        )),
        Just(Message::Keepalive),
        (any::<u8>(), any::<u8>()).prop_map(|(reason, header)| Message::MsgReject(MsgReject {
            reason: MsgRejectReason::from_code(reason),
            rejected_header: header,
        })),
    ]
}

fn encode(m: &Message) -> Bytes {
    m.to_bytes().expect("generated messages are encodable")
}

/// The shortest prefix of `m`'s encoding from which the framer knows the exact length: after the
/// last length field.
fn exact_from(m: &Message) -> usize {
    match m {
        Message::SessInit(s) => 25 + s.node_id.len(),
        Message::XferSegment(s) => s.header_len(),
        _ => 1,
    }
}

/// The errors a correctly framed message may still fail with: its content, not its framing.
fn is_content_error(e: &TcpclError) -> bool {
    matches!(
        e,
        TcpclError::InvalidNodeId(_)
            | TcpclError::ExtensionItemTruncated { .. }
            | TcpclError::ExtensionItemOverrun { .. }
    )
}

/// The tests sit in a module named after the file so that `cargo test tcpcl` selects them along
/// with the unit tests of `wire::tcpcl`.
mod tcpcl {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn messages_round_trip(m in message()) {
            let bytes = encode(&m);
            prop_assert_eq!(bytes.len(), m.encoded_len());
            prop_assert_eq!(bytes.first().copied(), Some(m.message_type().code()));
            prop_assert_eq!(Message::peek_frame(&bytes, ROOMY), Ok(FrameStatus::Complete(bytes.len())));
            prop_assert_eq!(Message::decode(bytes.clone()), Ok(m.clone()));
            // Re-encoding is byte-stable.
            prop_assert_eq!(encode(&Message::decode(bytes.clone()).unwrap()), bytes);
        }

        #[test]
        fn every_prefix_needs_more(m in message()) {
            let bytes = encode(&m);
            let len = bytes.len();
            let mut least = 0;
            for i in 0..len {
                let prefix = &bytes[..i];
                let status = Message::peek_frame(prefix, ROOMY);
                let Ok(FrameStatus::NeedMore(n)) = status else {
                    return Err(TestCaseError::fail(format!("prefix {i} of {len}: {status:?}")));
                };
                prop_assert!(n >= 1);
                prop_assert!(i + n <= len, "prefix {} of {}: asks for {} more", i, len, n);
                prop_assert!(i + n >= least, "the lower bound never falls");
                least = i + n;
                if i == 0 {
                    prop_assert_eq!(n, 1, "the type code comes first");
                } else if i >= exact_from(&m) {
                    prop_assert_eq!(i + n, len, "exact once the lengths are known (prefix {})", i);
                }
                prop_assert!(Message::decode(Bytes::copy_from_slice(prefix)).is_err());
                let mut buf = BytesMut::from(prefix);
                prop_assert_eq!(Message::decode_from(&mut buf, ROOMY), Ok(None));
                prop_assert_eq!(&buf[..], prefix);
            }
        }

        #[test]
        fn trailing_bytes_are_the_next_frame(m in message(), next in message()) {
            let bytes = encode(&m);
            let mut both = BytesMut::from(&bytes[..]);
            both.extend_from_slice(&encode(&next));
            prop_assert_eq!(Message::peek_frame(&both, ROOMY), Ok(FrameStatus::Complete(bytes.len())));
            prop_assert_eq!(
                Message::decode(both.clone().freeze()),
                Err(TcpclError::TrailingBytes(next.encoded_len()))
            );
        }

        #[test]
        fn streams_come_apart_however_they_are_cut(
            contact in any::<u8>(),
            messages in vec(message(), 0..8),
            cuts in vec(1usize..64, 1..64),
        ) {
            let mut sent = BytesMut::new();
            ContactHeader { flags: ContactFlags(contact) }.encode(&mut sent);
            for m in &messages {
                m.encode(&mut sent).unwrap();
            }
            let sent = sent.freeze();

            let mut rx = BytesMut::new();
            let mut header = None;
            let mut received = Vec::new();
            let mut at = 0;
            let mut cut = cuts.iter().cycle();
            while at < sent.len() {
                let n = (*cut.next().unwrap()).min(sent.len() - at);
                rx.extend_from_slice(&sent[at..at + n]);
                at += n;
                if header.is_none() {
                    header = ContactHeader::decode_from(&mut rx).unwrap();
                    if header.is_none() {
                        continue;
                    }
                }
                while let Some(m) = Message::decode_from(&mut rx, ROOMY).unwrap() {
                    received.push(m);
                }
            }
            prop_assert_eq!(header.map(|h| h.flags.0), Some(contact));
            prop_assert_eq!(received, messages);
            prop_assert!(rx.is_empty());
        }

        #[test]
        fn segment_data_is_not_copied(s in xfer_segment()) {
            let bytes = encode(&Message::XferSegment(s.clone()));
            let Ok(Message::XferSegment(d)) = Message::decode(bytes.clone()) else {
                return Err(TestCaseError::fail("not a segment"));
            };
            let within = bytes.as_ptr_range();
            if !d.data.is_empty() {
                prop_assert!(within.contains(&d.data.as_ptr()));
            }
            for item in d.extensions.iter().filter(|i| !i.value.is_empty()) {
                prop_assert!(within.contains(&item.value.as_ptr()));
            }
            // The header and the data, written apart, are the whole message.
            let mut header = BytesMut::new();
            s.encode_header(&mut header).unwrap();
            prop_assert_eq!(header.len(), s.header_len());
            header.extend_from_slice(&s.data);
            prop_assert_eq!(header.freeze(), bytes);
        }

        #[test]
        fn contact_headers_round_trip(flags in any::<u8>()) {
            let h = ContactHeader { flags: ContactFlags(flags) };
            let bytes = h.to_bytes();
            prop_assert_eq!(ContactHeader::decode(&bytes), Ok(h));
            prop_assert_eq!(h.can_tls(), flags & 1 == 1);
            for i in 0..bytes.len() {
                prop_assert_eq!(
                    ContactHeader::peek_frame(&bytes[..i]),
                    Ok(FrameStatus::NeedMore(bytes.len() - i))
                );
            }
        }

        #[test]
        fn declared_data_lengths_are_checked_before_waiting(
            declared in any::<u64>(),
            limit in any::<u64>(),
            start in any::<bool>(),
            present in vec(any::<u8>(), 0..64),
        ) {
            let mut buf = vec![0x01, if start { SegmentFlags::START } else { 0 }];
            buf.extend_from_slice(&[0; 8]);
            if start {
                buf.extend_from_slice(&[0; 4]);
            }
            let header_len = buf.len() + 8;
            buf.extend_from_slice(&declared.to_be_bytes());
            buf.extend_from_slice(&present);
            let limits = FrameLimits { max_segment_data: limit, max_extensions_len: 0 };
            let status = Message::peek_frame(&buf, limits);
            if declared > limit {
                prop_assert_eq!(
                    status,
                    Err(TcpclError::TooLarge { what: "segment data", declared, limit })
                );
            } else {
                let total = header_len as u128 + u128::from(declared);
                let have = buf.len() as u128;
                match status {
                    Ok(FrameStatus::Complete(n)) => prop_assert!(total <= have && n as u128 == total),
                    Ok(FrameStatus::NeedMore(n)) => prop_assert_eq!(n as u128, total - have),
                    Err(e) => prop_assert!(matches!(e, TcpclError::TooLarge { .. }), "{:?}", e),
                }
            }
            // Decoding the buffer as a frame never reads past it.
            let decoded = Message::decode(Bytes::from(buf));
            if u128::from(declared) + header_len as u128 > (header_len + present.len()) as u128 {
                prop_assert!(
                    matches!(decoded, Err(TcpclError::Truncated { what: "segment data", .. })),
                    "{:?}",
                    decoded
                );
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..128)) {
            for limits in [ROOMY, UNLIMITED, FrameLimits { max_segment_data: 4, max_extensions_len: 4 }] {
                match Message::peek_frame(&bytes, limits) {
                    Ok(FrameStatus::Complete(len)) => {
                        prop_assert!(len >= 1 && len <= bytes.len());
                        if let Err(e) = Message::decode(Bytes::copy_from_slice(&bytes[..len])) {
                            prop_assert!(is_content_error(&e), "framed but {:?}", e);
                        }
                    }
                    Ok(FrameStatus::NeedMore(n)) => prop_assert!(n >= 1),
                    Err(e) => prop_assert!(
                        matches!(e, TcpclError::UnknownMessageType(_) | TcpclError::TooLarge { .. }),
                        "{:?}",
                        e
                    ),
                }
                let mut buf = BytesMut::from(&bytes[..]);
                let _ = Message::decode_from(&mut buf, limits);
            }
            if let Ok(m) = Message::decode(Bytes::from(bytes.clone())) {
                // Whatever decodes is exactly one frame.
                prop_assert_eq!(
                    Message::peek_frame(&bytes, UNLIMITED),
                    Ok(FrameStatus::Complete(bytes.len()))
                );
                prop_assert!(m.encoded_len() <= bytes.len());
            }
            let _ = ContactHeader::peek_frame(&bytes);
            let _ = ContactHeader::decode(&bytes);
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = ContactHeader::decode_from(&mut buf);
        }

        #[test]
        fn typed_garbage_never_panics(
            code in 1u8..=7,
            flags in prop_oneof![Just(0u8), Just(SegmentFlags::START), any::<u8>()],
            rest in vec(any::<u8>(), 0..96),
        ) {
            // A valid type code and flags make the framer go past the first bytes.
            let mut bytes = vec![code, flags];
            bytes.extend_from_slice(&rest);
            if let Ok(FrameStatus::Complete(len)) = Message::peek_frame(&bytes, UNLIMITED)
                && let Err(e) = Message::decode(Bytes::copy_from_slice(&bytes[..len]))
            {
                prop_assert!(is_content_error(&e), "framed but {:?}", e);
            }
            let _ = Message::decode(Bytes::from(bytes));
        }

        #[test]
        fn damaged_messages_never_panic(m in message(), at in any::<prop::sample::Index>(), x in 1u8..=255) {
            let mut bytes = encode(&m).to_vec();
            let i = at.index(bytes.len());
            bytes[i] ^= x;
            if let Ok(FrameStatus::Complete(len)) = Message::peek_frame(&bytes, UNLIMITED)
                && let Err(e) = Message::decode(Bytes::copy_from_slice(&bytes[..len]))
            {
                prop_assert!(is_content_error(&e), "framed but {:?}", e);
            }
            let _ = Message::decode(Bytes::from(bytes));
        }
    }

    #[test]
    fn unknown_message_type_is_answered_with_its_code() {
        // What a session does: reject the message by its header, then terminate.
        let mut rx = BytesMut::from(&[0x2a, 0x00, 0x01][..]);
        let Err(TcpclError::UnknownMessageType(code)) = Message::decode_from(&mut rx, ROOMY) else {
            panic!("an unknown type must be refused");
        };
        let reject = Message::MsgReject(MsgReject {
            reason: MsgRejectReason::MessageTypeUnknown,
            rejected_header: code,
        });
        assert_eq!(&encode(&reject)[..], &[0x06, 0x01, 0x2a]);
        assert_eq!(rx.len(), 3, "the buffer is left as it was");
    }

    #[test]
    fn version_mismatch_carries_the_version() {
        let mut rx = BytesMut::from(&b"dtn!\x03\x00"[..]);
        assert_eq!(
            ContactHeader::decode_from(&mut rx),
            Err(TcpclError::UnsupportedVersion(3))
        );
    }

    #[test]
    fn a_2_pow_64_segment_is_refused_from_an_18_byte_buffer() {
        let mut rx = BytesMut::from(
            &[
                0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff,
            ][..],
        );
        assert_eq!(
            Message::decode_from(&mut rx, FrameLimits::new(64 * 1024)),
            Err(TcpclError::TooLarge {
                what: "segment data",
                declared: u64::MAX,
                limit: 64 * 1024
            })
        );
        assert_eq!(rx.len(), 18);
    }

    #[test]
    fn transfer_length_is_read_from_the_first_segment() {
        let first = XferSegment {
            flags: SegmentFlags::new(true, false),
            transfer_id: 1,
            extensions: vec![
                ExtensionItem {
                    critical: true,
                    item_type: 0x7777,
                    value: Bytes::from_static(b"?"),
                },
                ExtensionItem::transfer_length(5000),
            ],
            data: Bytes::from_static(b"hello"),
        };
        let decoded = Message::decode(encode(&Message::XferSegment(first))).unwrap();
        let Message::XferSegment(s) = decoded else {
            panic!("not a segment")
        };
        assert_eq!(s.transfer_length(), Ok(Some(5000)));
        // The unknown critical item is kept for the session to refuse.
        assert!(s.extensions[0].critical);
        assert_eq!(s.extensions[0].item_type, 0x7777);
        assert_eq!(&s.extensions[0].value[..], b"?");
    }
}
