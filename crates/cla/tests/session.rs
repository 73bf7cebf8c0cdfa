//! The sans-IO TCPCLv4 session: two sessions wired back to back in memory, and a scripted peer
//! for negotiation, timers, refusal, cuts, orderly close and hostile input.

mod common;

use bytes::{Bytes, BytesMut};
use cla::tcpcl::{
    PeerInfo, ReceiveBudget, Role, SessTermReason, Session, SessionConfig, SessionError,
    SessionEvent, XferRefuseReason,
};
use common::{Pair, Scripted, bundle, config, encoded};
use proptest::prelude::*;
use wire::tcpcl::{
    ContactHeader, ExtensionItem, Message, MsgReject, MsgRejectReason, SegmentFlags, SessInit,
    SessTerm, SessTermFlags, XferAck, XferRefuse, XferSegment,
};

fn segment(id: u64, start: bool, end: bool, data: &[u8]) -> Message {
    Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(start, end),
        transfer_id: id,
        extensions: Vec::new(),
        data: Bytes::copy_from_slice(data),
    })
}

fn sess_term(reply: bool, reason: SessTermReason) -> Message {
    Message::SessTerm(SessTerm {
        flags: SessTermFlags(if reply { SessTermFlags::REPLY } else { 0 }),
        reason,
    })
}

fn terminated_reason(events: &[SessionEvent]) -> Option<(String, bool)> {
    events.iter().find_map(|e| match e {
        SessionEvent::Terminated {
            reason, by_peer, ..
        } => Some((reason.clone(), *by_peer)),
        _ => None,
    })
}

// ----- transfers between two sessions -----

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Bundles of any size (up to 1.5 MiB, so many segments) arrive byte-identical and in order
    /// whatever the chunking, both ways at once; every one is acknowledged (Sent, ids 0, 1, …).
    #[test]
    fn bundles_arrive_intact_in_order(
        a_sizes in prop::collection::vec(0usize..1_500_000, 1..4),
        b_sizes in prop::collection::vec(0usize..100_000, 0..3),
        max_segment in 1u64..300_000,
        b_segment_mru in 1_000u64..2_000_000,
        max_chunk in 1usize..100_000,
        seed in any::<u64>(),
        budget in 1usize..4,
        direct in any::<bool>(),
    ) {
        let a_config = SessionConfig { max_segment, ..config("a") };
        let b_config = SessionConfig { segment_mru: b_segment_mru, ..config("b") };
        let mut p = Pair::established(a_config, b_config);
        p.rng = common::Rng(seed);
        p.max_chunk = max_chunk;
        p.budget = budget;
        // Either side reads as the connection task does (segment data straight into its
        // transfer) or everything through its receive buffer.
        p.a.direct = direct;
        p.b.direct = direct;
        let a_bundles: Vec<_> = a_sizes.iter().enumerate().map(|(i, &n)| encoded(n, i as u64)).collect();
        let b_bundles: Vec<_> = b_sizes.iter().enumerate().map(|(i, &n)| encoded(n, 100 + i as u64)).collect();
        for (i, b) in a_bundles.iter().enumerate() {
            prop_assert_eq!(p.a.session.send(b.clone(), false), Ok(i as u64));
        }
        for (i, b) in b_bundles.iter().enumerate() {
            prop_assert_eq!(p.b.session.send(b.clone(), false), Ok(i as u64));
        }
        p.run();
        let want_b: Vec<Bytes> = a_bundles.iter().map(|b| b.to_bytes()).collect();
        let want_a: Vec<Bytes> = b_bundles.iter().map(|b| b.to_bytes()).collect();
        prop_assert_eq!(p.b.received(), want_b);
        prop_assert_eq!(p.a.received(), want_a);
        prop_assert_eq!(p.a.sent_ids(), (0..a_bundles.len() as u64).collect::<Vec<_>>());
        prop_assert_eq!(p.b.sent_ids(), (0..b_bundles.len() as u64).collect::<Vec<_>>());
        prop_assert!(p.a.terminated().is_none() && p.b.terminated().is_none());
        prop_assert_eq!(p.a.session.queued_bytes(), 0);
        // Segments respect both limits: ours and the peer's segment MRU.
        let cap = max_segment.min(b_segment_mru) as usize;
        for m in &p.a.sent {
            if let Message::XferSegment(s) = m {
                prop_assert!(s.data.len() <= cap);
            }
        }
        // Every segment was acknowledged, with the cumulative length.
        let segments = p.a.sent.iter().filter(|m| matches!(m, Message::XferSegment(_))).count();
        let acks = p.b.sent.iter().filter(|m| matches!(m, Message::XferAck(_))).count();
        prop_assert_eq!(segments, acks);
    }
}

#[test]
fn with_confirm_received_the_last_ack_waits_for_the_owner() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 100_000,
            ..config("a")
        },
        SessionConfig {
            confirm_received: true,
            ..config("b")
        },
    );
    p.a.session.send(encoded(250_000, 1), false).unwrap();
    p.a.session.send(encoded(10, 2), false).unwrap();
    p.run();
    // Both arrived, every segment but each transfer's last was acknowledged, nothing is Sent.
    assert_eq!(p.b.received().len(), 2);
    assert!(p.a.sent_ids().is_empty(), "{:?}", p.a.events);
    let acks =
        p.b.sent
            .iter()
            .filter(|m| matches!(m, Message::XferAck(_)))
            .count();
    assert_eq!(acks, 2, "the two non-final segments of the big bundle");
    // Confirmations release them, in any order; a repeated or unknown one changes nothing.
    p.b.session.confirm(1);
    p.b.session.confirm(1);
    p.b.session.confirm(77);
    p.run();
    assert_eq!(p.a.sent_ids(), [1]);
    p.b.session.confirm(0);
    p.run();
    assert_eq!(p.a.sent_ids(), [1, 0]);
    // An orderly close waits for confirmations still held.
    p.a.session.send(encoded(10, 3), false).unwrap();
    p.run();
    p.b.session.close(p.now, SessTermReason::Unknown);
    p.run();
    assert!(
        p.b.terminated().is_none(),
        "ended with an unconfirmed bundle"
    );
    p.b.session.confirm(2);
    p.run();
    assert_eq!(p.a.sent_ids(), [1, 0, 2]);
    assert!(p.b.terminated().is_some() && p.a.terminated().is_some());
}

#[test]
fn progress_is_reported_per_acknowledged_segment() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 100_000,
            ..config("a")
        },
        config("b"),
    );
    let big = encoded(250_000, 1);
    let total = big.len() as u64;
    p.a.session.send(big, false).unwrap();
    p.run();
    let progress: Vec<u64> =
        p.a.events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Progress {
                    transfer_id: 0,
                    acknowledged,
                    total: t,
                } => {
                    assert_eq!(*t, total);
                    Some(*acknowledged)
                }
                _ => None,
            })
            .collect();
    // The first segment of several carries at most 64 KiB (the receiver copies it once), the
    // others up to `max_segment`.
    assert_eq!(progress, [65_536, 165_536]);
    assert_eq!(p.a.sent_ids(), [0]);
    let started: Vec<_> =
        p.b.events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::IncomingStarted {
                    transfer_id,
                    first_data,
                    total_length,
                } => Some((*transfer_id, first_data.len(), *total_length)),
                _ => None,
            })
            .collect();
    assert_eq!(started, [(0, 65_536, Some(total))]);
}

#[test]
fn urgent_bundles_go_before_queued_ones_after_the_one_in_progress() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 10_000,
            ..config("a")
        },
        config("b"),
    );
    let bundles: Vec<_> = (0..4).map(|i| encoded(50_000, i)).collect();
    p.a.session.send(bundles[0].clone(), false).unwrap();
    // Let the first transfer start.
    p.a.transmit(0, 1);
    assert_eq!(p.a.session.send(bundles[1].clone(), false), Ok(1));
    assert_eq!(p.a.session.send(bundles[2].clone(), true), Ok(2));
    assert_eq!(p.a.session.send(bundles[3].clone(), true), Ok(3));
    p.run();
    let order: Vec<Bytes> = [0, 2, 3, 1]
        .iter()
        .map(|&i| bundles[i].to_bytes())
        .collect();
    assert_eq!(p.b.received(), order);
    assert_eq!(p.a.sent_ids(), [0, 2, 3, 1]);
}

// ----- negotiation -----

#[test]
fn negotiation_takes_the_smaller_keepalive_and_each_sides_mrus() {
    let a = SessionConfig {
        keepalive_interval_s: 30,
        ..config("a")
    };
    let b = SessionConfig {
        keepalive_interval_s: 7,
        segment_mru: 10_000,
        transfer_mru: 2_000_000,
        ..config("b")
    };
    let mut p = Pair::established(a, b);
    assert_eq!(
        p.a.session.peer(),
        Some(&PeerInfo {
            node_id: "dtn://b/".into(),
            keepalive_interval_s: 7,
            segment_mru: 10_000,
            transfer_mru: 2_000_000,
            tls: false,
        })
    );
    assert_eq!(
        p.b.session.peer(),
        Some(&PeerInfo {
            node_id: "dtn://a/".into(),
            keepalive_interval_s: 7,
            segment_mru: 1 << 20,
            transfer_mru: 4 << 30,
            tls: false,
        })
    );
    assert!(matches!(p.a.events[0], SessionEvent::Established(_)));
    // The segment size is capped by the peer's segment MRU (ours is 256 KiB).
    p.a.session.send(encoded(50_000, 1), false).unwrap();
    p.run();
    let sizes: Vec<usize> =
        p.a.sent
            .iter()
            .filter_map(|m| match m {
                Message::XferSegment(s) => Some(s.data.len()),
                _ => None,
            })
            .collect();
    assert!(
        sizes.len() >= 5 && sizes.iter().all(|&n| n <= 10_000),
        "{sizes:?}"
    );
    // Larger than the peer's transfer MRU: refused before anything is sent.
    assert!(matches!(
        p.a.session.send(encoded(2_000_000, 2), false),
        Err(SessionError::TooLarge {
            limit: 2_000_000,
            ..
        })
    ));
}

#[test]
fn keepalive_zero_on_either_side_disables_keepalives_but_not_the_idle_timeout() {
    let mut p = Pair::established(
        SessionConfig {
            keepalive_interval_s: 0,
            ..config("a")
        },
        SessionConfig {
            idle_timeout_ms: 100_000,
            ..config("b")
        },
    );
    assert_eq!(p.b.session.peer().unwrap().keepalive_interval_s, 0);
    // Each side's own idle timeout: a peer that declines keepalives cannot hold a session open
    // forever by saying nothing.
    assert_eq!(p.a.session.poll_timeout(), Some(600_000));
    assert_eq!(p.b.session.poll_timeout(), Some(100_000));
    p.advance_to(99_999);
    assert!(p.a.session.is_established() && p.b.session.is_established());
    assert!(!p.a.sent.contains(&Message::Keepalive));
    assert!(!p.b.sent.contains(&Message::Keepalive));
    p.advance_to(100_000);
    assert!(
        p.b.sent
            .contains(&sess_term(false, SessTermReason::IdleTimeout))
    );
    let (reason, by_peer) = terminated_reason(&p.b.events).unwrap();
    assert_eq!(
        (reason.as_str(), by_peer),
        ("idle timeout: nothing received for 100000 ms", false)
    );
    // With 0 configured there is no idle timeout at all.
    let mut p = Pair::established(
        SessionConfig {
            keepalive_interval_s: 0,
            idle_timeout_ms: 0,
            ..config("a")
        },
        SessionConfig {
            idle_timeout_ms: 0,
            ..config("b")
        },
    );
    assert_eq!(p.a.session.poll_timeout(), None);
    p.advance_to(10_000_000);
    assert!(p.a.session.is_established() && p.b.session.is_established());
}

#[test]
fn ignoring_the_peers_transfer_mru_lets_larger_bundles_through() {
    let a = SessionConfig {
        ignore_peer_transfer_mru: true,
        ..config("a")
    };
    let b = SessionConfig {
        transfer_mru: 64_000,
        segment_mru: 64_000,
        ..config("b")
    };
    let mut p = Pair::established(a, b.clone());
    let big = encoded(200_000, 1);
    assert_eq!(p.a.session.send(big.clone(), false), Ok(0));
    p.run();
    // The peer enforces its own MRU: it refuses, as RFC 9174 lets it.
    let refused = p.a.events.iter().any(|e| {
        matches!(
            e,
            SessionEvent::Refused {
                transfer_id: 0,
                reason: XferRefuseReason::NoResources,
                ..
            }
        )
    });
    assert!(refused, "{:?}", p.a.events);
    // A peer that announces a small MRU but takes more (as dtn7-rs does) gets the bundle.
    let b_lenient = SessionConfig {
        segment_mru: 64_000,
        ..config("b")
    };
    let mut p = Pair::established(
        SessionConfig {
            ignore_peer_transfer_mru: true,
            ..config("a")
        },
        b_lenient,
    );
    p.a.session.send(big.clone(), false).unwrap();
    p.run();
    assert_eq!(p.b.received(), [big.to_bytes()]);
}

/// Two sessions where a sends segments of up to 256 KiB and b reads as the connection task does
/// (segment data straight into its transfer), the bytes crossing in chunks of up to `max_chunk`.
fn streaming_pair(max_chunk: usize) -> Pair {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 256 << 10,
            ..config("a")
        },
        config("b"),
    );
    p.b.direct = true;
    p.max_chunk = max_chunk;
    p
}

#[test]
fn a_large_transfers_data_is_read_straight_into_its_buffer_and_arrives_intact() {
    let mut p = streaming_pair(64 << 10);
    let bundles = [encoded(1 << 20, 1), encoded(3 << 20, 2), encoded(1000, 3)];
    for b in &bundles {
        p.a.session.send(b.clone(), false).unwrap();
    }
    p.run();
    let want: Vec<Bytes> = bundles.iter().map(|b| b.to_bytes()).collect();
    assert_eq!(p.b.received(), want);
    assert_eq!(p.a.sent_ids(), [0, 1, 2]);
    // Of the two large bundles, all but each first segment (64 KiB) and what came in a read
    // with a segment header went straight into the transfer.
    let large = (4 << 20) as usize;
    assert!(
        p.b.direct_bytes > large * 9 / 10,
        "{} of {large} bytes read directly",
        p.b.direct_bytes
    );
    // Every segment acknowledged with its cumulative length, as when nothing is streamed.
    let acks: Vec<u64> =
        p.b.sent
            .iter()
            .filter_map(|m| match m {
                Message::XferAck(a) if a.transfer_id == 0 => Some(a.acknowledged_length),
                _ => None,
            })
            .collect();
    let total = bundles[0].len() as u64;
    let mut expected = vec![65_536];
    while *expected.last().unwrap() < total {
        expected.push((expected.last().unwrap() + (256 << 10)).min(total));
    }
    assert_eq!(acks, expected);
}

#[test]
fn refusing_while_a_segment_streams_in_drops_the_rest_and_the_next_bundle_goes_through() {
    let mut p = streaming_pair(20_000);
    let bundles = [encoded(1 << 20, 1), encoded(300_000, 2)];
    for b in &bundles {
        p.a.session.send(b.clone(), false).unwrap();
    }
    // Refused once part of a segment after the first went straight into the transfer.
    assert!(p.run_until(|p| p.b.direct_bytes > 0));
    p.b.session.refuse(0, XferRefuseReason::NotAcceptable);
    p.run();
    assert_eq!(p.b.received(), [bundles[1].to_bytes()]);
    assert!(p.a.terminated().is_none() && p.b.terminated().is_none());
    assert!(
        p.a.events
            .iter()
            .any(|e| matches!(e, SessionEvent::Refused { transfer_id: 0, .. })),
        "{:?}",
        p.a.events
    );
    assert_eq!(p.a.sent_ids(), [1]);
}

#[test]
fn a_streamed_segment_that_does_not_fit_the_budget_refuses_its_transfer_before_its_data() {
    let budget = ReceiveBudget::new(512 << 10);
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 256 << 10,
            ..config("a")
        },
        SessionConfig {
            receive_budget: Some(budget.clone()),
            ..config("b")
        },
    );
    p.b.direct = true;
    p.max_chunk = 30_000;
    let bundles = [encoded(1 << 20, 1), encoded(200_000, 2)];
    for b in &bundles {
        p.a.session.send(b.clone(), false).unwrap();
    }
    // 64 KiB and 256 KiB fit in 512 KiB; the third segment's 256 KiB do not, which is known
    // from its header: the transfer is refused then, and none of that segment's data is kept.
    assert!(p.run_until(|p| {
        p.a.events
            .iter()
            .any(|e| matches!(e, SessionEvent::Refused { .. }))
    }));
    assert!(budget.in_use() <= 512 << 10);
    p.run();
    assert_eq!(p.b.received(), [bundles[1].to_bytes()]);
    let refused: Vec<_> =
        p.a.events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Refused {
                    transfer_id,
                    reason,
                    acknowledged,
                } => Some((*transfer_id, *reason, *acknowledged)),
                _ => None,
            })
            .collect();
    assert_eq!(
        refused,
        [(0, XferRefuseReason::NoResources, 65_536 + (256 << 10))]
    );
    assert_eq!((budget.in_use(), budget.refused()), (0, 1));
    assert!(p.a.terminated().is_none() && p.b.terminated().is_none());
}

#[test]
fn a_cut_while_a_segment_streams_in_keeps_only_the_acknowledged_segments() {
    let mut p = streaming_pair(30_000);
    let big = encoded(1 << 20, 1);
    p.a.session.send(big.clone(), false).unwrap();
    // Cut half way through the third segment (64 KiB + 256 KiB acknowledged before it).
    assert!(p.run_until(|p| p.b.direct_bytes > 256 << 10));
    p.b.session.receive_closed(p.now);
    p.b.drain_events();
    let kept = p.b.events.iter().find_map(|e| match e {
        SessionEvent::Terminated { partial, .. } => partial.clone(),
        _ => None,
    });
    let (_, prefix) = kept.expect("the received prefix is reported");
    assert_eq!(prefix.len(), 65_536 + (256 << 10));
    assert_eq!(&prefix[..], &big.to_bytes()[..prefix.len()]);
}

#[test]
fn a_single_segment_bundle_is_a_slice_of_the_receive_buffer() {
    let mut s = Scripted::passive(config("b"), 30);
    let frame = segment(0, true, true, b"a whole bundle")
        .to_bytes()
        .unwrap();
    let mut rx = BytesMut::from(&frame[..]);
    let range = rx.as_ptr_range();
    s.session.receive(0, &mut rx);
    let events = s.events();
    let Some(SessionEvent::Received { bundle, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(&bundle[..], b"a whole bundle");
    assert!(range.contains(&bundle.as_ptr()), "not copied");
}

#[test]
fn send_before_establishment_is_refused() {
    let mut s = Session::new(Role::Active, config("a"), 0);
    assert_eq!(
        s.send(encoded(10, 0), false),
        Err(SessionError::NotEstablished)
    );
    assert!(!s.is_established());
    assert!(s.peer().is_none());
}

#[test]
fn passive_side_waits_for_the_active_contact_header_and_sess_init() {
    let mut s = Scripted::fresh(Role::Passive, config("b"));
    assert!(
        s.raw_output().is_empty(),
        "passive speaks only when spoken to"
    );
    let mut hello = BytesMut::new();
    ContactHeader::new(true).encode(&mut hello); // CAN_TLS: we go on without TLS
    s.feed(&hello);
    assert_eq!(&s.raw_output()[..], &ContactHeader::new(false).to_bytes());
    s.send(&Message::SessInit(SessInit {
        keepalive_interval: 10,
        segment_mru: 1000,
        transfer_mru: 5000,
        node_id: "ipn:7.0".into(),
        extensions: vec![ExtensionItem {
            critical: false,
            item_type: 99,
            value: Bytes::from_static(b"ignored"),
        }],
    }));
    let out = s.output();
    let [Message::SessInit(init)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(init.node_id, "dtn://b/");
    assert!(init.extensions.is_empty());
    assert_eq!(
        s.events(),
        [SessionEvent::Established(PeerInfo {
            node_id: "ipn:7.0".into(),
            keepalive_interval_s: 10,
            segment_mru: 1000,
            transfer_mru: 5000,
            tls: false,
        })]
    );
}

#[test]
fn active_side_sends_contact_header_then_sess_init_after_the_peers_header() {
    let mut s = Scripted::fresh(Role::Active, config("a"));
    assert_eq!(&s.raw_output()[..], &ContactHeader::new(false).to_bytes());
    assert!(s.output().is_empty());
    s.feed(&ContactHeader::new(false).to_bytes());
    assert!(matches!(s.output().as_slice(), [Message::SessInit(_)]));
}

#[test]
fn version_mismatch_passive_answers_with_header_and_sess_term() {
    let mut s = Scripted::fresh(Role::Passive, config("b"));
    s.feed(b"dtn!\x03\x00");
    let raw = s.raw_output();
    assert_eq!(&raw[..6], b"dtn!\x04\x00");
    assert_eq!(&raw[6..], &[0x05, 0x00, 0x02]);
    let (reason, by_peer) = terminated_reason(&s.events()).unwrap();
    assert!(reason.contains("version mismatch"), "{reason}");
    assert!(!by_peer);
    assert!(s.session.is_terminated());
}

#[test]
fn version_mismatch_active_sends_sess_term() {
    let mut s = Scripted::fresh(Role::Active, config("a"));
    let _ = s.raw_output();
    s.feed(b"dtn!\x05\x00");
    assert_eq!(&s.raw_output()[..], &[0x05, 0x00, 0x02]);
    assert!(s.session.is_terminated());
}

#[test]
fn not_tcpcl_is_dropped_without_a_word() {
    let mut s = Scripted::fresh(Role::Passive, config("b"));
    s.feed(b"GET / HTTP/1.1\r\n");
    assert!(s.raw_output().is_empty());
    assert!(s.session.is_terminated());
    assert!(s.rx.is_empty());
}

#[test]
fn invalid_node_id_and_critical_session_extensions_end_the_session() {
    let hello = ContactHeader::new(false).to_bytes();
    for (node_id, critical) in [("", false), ("no scheme", false), ("dtn://ok/", true)] {
        let mut s = Scripted::fresh(Role::Passive, config("b"));
        s.feed(&hello);
        let _ = s.raw_output();
        s.send(&Message::SessInit(SessInit {
            keepalive_interval: 10,
            segment_mru: 1000,
            transfer_mru: 5000,
            node_id: node_id.into(),
            extensions: if critical {
                vec![ExtensionItem {
                    critical: true,
                    item_type: 42,
                    value: Bytes::new(),
                }]
            } else {
                Vec::new()
            },
        }));
        assert_eq!(
            s.output(),
            [sess_term(false, SessTermReason::ContactFailure)],
            "{node_id:?}"
        );
        assert!(s.session.is_terminated());
    }
}

// ----- timers -----

#[test]
fn contact_timeout_before_and_after_the_contact_header() {
    let mut s = Session::new(Role::Passive, config("b"), 1000);
    assert_eq!(s.poll_timeout(), Some(11_000));
    s.handle_timeout(10_999);
    assert!(!s.is_terminated());
    s.handle_timeout(11_000);
    assert!(s.is_terminated());
    assert!(
        s.poll_transmit(11_000).is_none(),
        "no SESS_TERM before contact"
    );
    let Some(SessionEvent::Terminated { reason, .. }) = s.poll_event() else {
        panic!()
    };
    assert_eq!(reason, "contact timeout");
    assert_eq!(s.poll_timeout(), None);

    // After the contact headers, a SESS_TERM "Contact Failure" goes out.
    let mut s = Scripted::fresh(Role::Active, config("a"));
    s.feed(&ContactHeader::new(false).to_bytes());
    let _ = s.output();
    s.session.handle_timeout(10_000);
    assert_eq!(
        s.output(),
        [sess_term(false, SessTermReason::ContactFailure)]
    );
}

#[test]
fn keepalives_go_out_on_schedule_and_keep_the_session_up() {
    let a = SessionConfig {
        keepalive_interval_s: 10,
        ..config("a")
    };
    let mut p = Pair::established(a, config("b"));
    p.advance_to(60_000);
    for side in [&p.a, &p.b] {
        let keepalives = side
            .sent
            .iter()
            .filter(|m| **m == Message::Keepalive)
            .count();
        // One every 5 s (half the negotiated 10 s) of not sending anything else.
        assert_eq!(keepalives, 12, "{keepalives}");
        assert!(side.session.is_established());
        side.check_terminated_once();
    }
    // Traffic postpones them: the next is due 5 s after the last message sent.
    p.a.session.send(encoded(10, 1), false).unwrap();
    p.run();
    assert_eq!(p.a.session.poll_timeout(), Some(65_000));
}

#[test]
fn idle_timeout_after_twice_the_keepalive_without_input() {
    let cfg = SessionConfig {
        keepalive_interval_s: 2,
        ..config("b")
    };
    let mut s = Scripted::passive(cfg, 2);
    s.now = 3_999;
    s.session.handle_timeout(3_999);
    assert!(!s.session.is_terminated());
    assert_eq!(
        s.output(),
        [Message::Keepalive],
        "sent after 1 s, at 3.999 s the next"
    );
    s.session.handle_timeout(4_000);
    assert!(s.session.is_terminated());
    assert_eq!(s.output(), [sess_term(false, SessTermReason::IdleTimeout)]);
    let (reason, by_peer) = terminated_reason(&s.events()).unwrap();
    assert!(reason.starts_with("idle timeout"), "{reason}");
    assert!(!by_peer);
}

#[test]
fn input_resets_the_idle_timer() {
    let mut s = Scripted::passive(config("b"), 2);
    for t in (1000..20_000).step_by(1000) {
        s.now = t;
        s.send(&Message::Keepalive);
        s.session.handle_timeout(t);
    }
    assert!(s.session.is_established());
}

// ----- refusal -----

#[test]
fn refusing_mid_transfer_stops_it_and_the_next_bundle_goes_through() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 65_536,
            ..config("a")
        },
        config("b"),
    );
    p.budget = 1;
    let big = encoded(1 << 20, 1);
    let total = big.len() as u64;
    let small = encoded(1000, 2);
    p.a.session.send(big, false).unwrap();
    p.a.session.send(small.clone(), false).unwrap();
    assert!(p.run_until(|p| {
        p.b.events
            .iter()
            .any(|e| matches!(e, SessionEvent::IncomingStarted { transfer_id: 0, .. }))
    }));
    p.b.session.refuse(0, XferRefuseReason::Completed);
    p.run();
    let refused = p.a.events.iter().find_map(|e| match e {
        SessionEvent::Refused {
            transfer_id: 0,
            reason,
            acknowledged,
        } => Some((*reason, *acknowledged)),
        _ => None,
    });
    let (reason, acknowledged) = refused.expect("sender sees the refusal");
    assert_eq!(reason, XferRefuseReason::Completed);
    assert!(
        acknowledged >= 65_536 && acknowledged < total,
        "{acknowledged}"
    );
    assert_eq!(p.b.received(), [small.to_bytes()]);
    assert_eq!(p.a.sent_ids(), [1]);
    // The refused transfer's remaining segments were dropped without acknowledgement.
    let acked_for_0 =
        p.b.sent
            .iter()
            .filter(|m| matches!(m, Message::XferAck(a) if a.transfer_id == 0))
            .count();
    let segments_of_0 =
        p.a.sent
            .iter()
            .filter(|m| matches!(m, Message::XferSegment(s) if s.transfer_id == 0))
            .count();
    assert!(acked_for_0 < segments_of_0 && segments_of_0 < 16);
    assert!(
        !p.a.sent.iter().any(
            |m| matches!(m, Message::XferSegment(s) if s.transfer_id == 0 && s.flags.is_end())
        )
    );
    // Refusing again, or a finished transfer, does nothing.
    p.b.session.refuse(0, XferRefuseReason::Completed);
    p.b.session.refuse(1, XferRefuseReason::Completed);
    assert!(p.b.session.poll_transmit(p.now).is_none());
}

#[test]
fn a_transfer_above_our_transfer_mru_is_refused_with_no_resources() {
    let mut s = Scripted::passive(
        SessionConfig {
            transfer_mru: 100_000,
            ..config("b")
        },
        30,
    );
    s.send(&Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(true, false),
        transfer_id: 5,
        extensions: vec![ExtensionItem::transfer_length(200_000)],
        data: Bytes::from_static(b"\x9f\x89"),
    }));
    assert_eq!(
        s.output(),
        [Message::XferRefuse(XferRefuse {
            reason: XferRefuseReason::NoResources,
            transfer_id: 5
        })]
    );
    // Its remaining segments are dropped; the next transfer is fine.
    s.send(&segment(5, false, true, b"rest"));
    s.send(&segment(6, true, true, b"next"));
    assert_eq!(
        s.output(),
        [Message::XferAck(XferAck {
            flags: SegmentFlags::new(true, true),
            transfer_id: 6,
            acknowledged_length: 4
        })]
    );
    let events = s.events();
    assert!(events.contains(&SessionEvent::Received {
        transfer_id: 6,
        bundle: Bytes::from_static(b"next")
    }));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SessionEvent::IncomingStarted { transfer_id: 5, .. }))
    );
}

/// The attack of issue 25: sessions that START a transfer and send continuation segments without
/// END. Each session may keep up to the transfer MRU, but together they keep no more than the
/// node's receive budget: the segment that would exceed it is refused, and what the refused
/// transfer held is given back at once.
#[test]
fn sessions_sharing_a_receive_budget_hold_no_more_than_it_together() {
    let budget = ReceiveBudget::new(3 << 20);
    let cfg = SessionConfig {
        receive_budget: Some(budget.clone()),
        segment_mru: 1 << 20,
        ..config("b")
    };
    let mib = Bytes::from(vec![7u8; 1 << 20]);
    let mut sessions: Vec<Scripted> = (0..4).map(|_| Scripted::passive(cfg.clone(), 30)).collect();
    let mut refused = Vec::new();
    for round in 0..4u64 {
        for (i, s) in sessions.iter_mut().enumerate() {
            s.send(&Message::XferSegment(XferSegment {
                flags: SegmentFlags::new(round == 0, false),
                transfer_id: 1,
                extensions: Vec::new(),
                data: mib.clone(),
            }));
            for m in s.output() {
                if let Message::XferRefuse(r) = m {
                    assert_eq!(r.reason, XferRefuseReason::NoResources);
                    refused.push(i);
                }
            }
            assert!(budget.in_use() <= 3 << 20, "{}", budget.in_use());
        }
    }
    // Round 0: three sessions get 1 MiB each, the fourth is refused. Round 1: the first session's
    // second MiB does not fit and is refused, which frees its first; the second session takes
    // that room, the third is refused. Round 2: the second session takes its third MiB, and in
    // round 3 its fourth does not fit either.
    assert_eq!(refused, [3, 0, 2, 1]);
    assert_eq!(budget.refused(), 4);
    assert_eq!(
        budget.in_use(),
        0,
        "every refused transfer gave its bytes back"
    );
    // A refused peer's next transfer is taken again once there is room.
    sessions[0].send(&segment(2, true, true, b"small"));
    assert!(sessions[0].events().contains(&SessionEvent::Received {
        transfer_id: 2,
        bundle: Bytes::from_static(b"small")
    }));
    // A session that ends mid-transfer gives its bytes back too.
    sessions[2].send(&Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(true, false),
        transfer_id: 3,
        extensions: Vec::new(),
        data: mib.clone(),
    }));
    assert_eq!(budget.in_use(), 1 << 20);
    drop(sessions);
    assert_eq!(budget.in_use(), 0);
}

#[test]
fn dtn7_style_transfer_is_received() {
    // dtn7-rs ids start at 1, an optional empty START carries a bundle id under extension
    // type 1, later acks and segments have no flags.
    let mut s = Scripted::passive(config("b"), 30);
    s.send(&Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(true, false),
        transfer_id: 1,
        extensions: vec![ExtensionItem {
            critical: false,
            item_type: 1,
            value: Bytes::from_static(b"dtn://d7/-754000000000-0"),
        }],
        data: Bytes::new(),
    }));
    s.send(&segment(1, false, false, b"abc"));
    s.send(&segment(1, false, true, b"de"));
    let acks: Vec<u64> = s
        .output()
        .iter()
        .map(|m| match m {
            Message::XferAck(a) => a.acknowledged_length,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(acks, [0, 3, 5]);
    assert_eq!(
        s.events(),
        [
            SessionEvent::IncomingStarted {
                transfer_id: 1,
                first_data: Bytes::from_static(b"abc"),
                total_length: None
            },
            SessionEvent::Received {
                transfer_id: 1,
                bundle: Bytes::from_static(b"abcde")
            }
        ]
    );
}

// ----- cuts and closes -----

#[test]
fn a_cut_transfer_leaves_acked_bytes_at_the_sender_and_a_fragment_at_the_receiver() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 65_536,
            ..config("a")
        },
        config("b"),
    );
    p.budget = 1;
    let original = common::bundle(1 << 20, 7);
    let enc = original.encode();
    let whole = enc.to_bytes();
    p.a.session.send(enc.clone(), false).unwrap();
    let queued = p.a.session.queued_bytes();
    assert_eq!(queued, whole.len() as u64);
    assert!(p.run_until(|p| {
        p.a.events
            .iter()
            .filter(|e| matches!(e, SessionEvent::Progress { .. }))
            .count()
            >= 4
    }));
    p.a.session.receive_closed(p.now);
    p.b.session.receive_closed(p.now);
    p.a.drain_events();
    p.b.drain_events();
    p.a.check_terminated_once();
    p.b.check_terminated_once();
    let Some(SessionEvent::Terminated {
        unfinished,
        by_peer,
        partial: None,
        ..
    }) = p.a.terminated()
    else {
        panic!("{:?}", p.a.events.last())
    };
    assert!(by_peer);
    let [(0, acked)] = unfinished.as_slice() else {
        panic!("{unfinished:?}")
    };
    assert!(*acked >= 4 * 65_536 && *acked < whole.len() as u64);
    let Some(SessionEvent::Terminated {
        partial: Some((0, prefix)),
        unfinished,
        ..
    }) = p.b.terminated()
    else {
        panic!("{:?}", p.b.events.last())
    };
    assert!(unfinished.is_empty());
    assert!(prefix.len() as u64 >= *acked && prefix.len() < whole.len());
    assert_eq!(prefix[..], whole[..prefix.len()]);
    // The prefix is a valid fragment carrying the payload bytes that arrived.
    let fragment = wire::decode_cut_transfer(prefix.clone())
        .unwrap()
        .expect("a fragment");
    let n = enc.payload_bytes_within(prefix.len());
    assert!(n > 0);
    assert_eq!(fragment.payload.data[..], original.payload.data[..n]);
    assert_eq!(fragment.primary.fragment.map(|f| f.offset), Some(0));
    // The sender knows where the rest starts.
    let (_, rest) = original
        .split_at(enc.payload_bytes_within(*acked as usize))
        .unwrap();
    assert!(!rest.payload.data.is_empty());
}

#[test]
fn orderly_close_by_the_sender_finishes_the_transfer_in_progress() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 65_536,
            ..config("a")
        },
        config("b"),
    );
    p.budget = 1;
    let big = encoded(500_000, 1);
    let later = encoded(10, 2);
    p.a.session.send(big.clone(), false).unwrap();
    p.a.session.send(later, false).unwrap();
    p.step();
    p.step();
    p.a.session.close(p.now, SessTermReason::Unknown);
    assert!(!p.a.session.is_established());
    assert_eq!(
        p.a.session.send(encoded(1, 3), false),
        Err(SessionError::Closing)
    );
    p.run();
    assert_eq!(p.b.received(), [big.to_bytes()]);
    assert_eq!(p.a.sent_ids(), [0]);
    for side in [&p.a, &p.b] {
        side.check_terminated_once();
    }
    let Some(SessionEvent::Terminated {
        by_peer: false,
        unfinished,
        partial: None,
        ..
    }) = p.a.terminated()
    else {
        panic!("{:?}", p.a.events.last())
    };
    assert_eq!(unfinished, &[(1, 0)], "the bundle never started is listed");
    assert!(matches!(
        p.b.terminated(),
        Some(SessionEvent::Terminated {
            by_peer: true,
            partial: None,
            ..
        })
    ));
    assert!(
        p.a.sent
            .contains(&sess_term(false, SessTermReason::Unknown))
    );
    assert!(p.b.sent.contains(&sess_term(true, SessTermReason::Unknown)));
}

#[test]
fn orderly_close_by_the_receiver_lets_the_incoming_transfer_finish() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 65_536,
            ..config("a")
        },
        config("b"),
    );
    p.budget = 1;
    let big = encoded(500_000, 1);
    p.a.session.send(big.clone(), false).unwrap();
    assert!(p.run_until(|p| {
        p.b.events
            .iter()
            .any(|e| matches!(e, SessionEvent::IncomingStarted { .. }))
    }));
    p.b.session.close(p.now, SessTermReason::Busy);
    p.run();
    assert_eq!(p.b.received(), [big.to_bytes()]);
    assert_eq!(p.a.sent_ids(), [0]);
    let (reason, by_peer) = terminated_reason(&p.a.events).unwrap();
    assert!(by_peer && reason.contains("busy"), "{reason}");
    let (_, by_peer) = terminated_reason(&p.b.events).unwrap();
    assert!(!by_peer);
    p.a.check_terminated_once();
    p.b.check_terminated_once();
}

#[test]
fn after_sess_term_a_new_incoming_transfer_is_refused_as_session_terminating() {
    let mut s = Scripted::passive(config("b"), 30);
    s.session.close(0, SessTermReason::Unknown);
    assert_eq!(s.output(), [sess_term(false, SessTermReason::Unknown)]);
    s.send(&segment(0, true, true, b"late"));
    assert_eq!(
        s.output(),
        [Message::XferRefuse(XferRefuse {
            reason: XferRefuseReason::SessionTerminating,
            transfer_id: 0
        })]
    );
    assert!(!s.session.is_terminated());
    s.send(&sess_term(true, SessTermReason::Unknown));
    assert!(s.session.is_terminated());
    let (_, by_peer) = terminated_reason(&s.events()).unwrap();
    assert!(!by_peer);
}

#[test]
fn the_peers_sess_term_is_answered_with_reply_and_the_same_reason() {
    let mut s = Scripted::passive(config("b"), 30);
    s.send(&sess_term(false, SessTermReason::ResourceExhaustion));
    assert_eq!(
        s.output(),
        [sess_term(true, SessTermReason::ResourceExhaustion)]
    );
    assert!(s.session.is_terminated());
    let (reason, by_peer) = terminated_reason(&s.events()).unwrap();
    assert!(
        by_peer && reason.contains("resource exhaustion"),
        "{reason}"
    );
}

#[test]
fn closing_waits_a_bounded_time_for_the_reply() {
    let mut s = Scripted::passive(
        SessionConfig {
            keepalive_interval_s: 0,
            ..config("b")
        },
        0,
    );
    s.session.close(0, SessTermReason::Unknown);
    assert_eq!(s.session.poll_timeout(), Some(10_000));
    s.session.handle_timeout(10_000);
    assert!(s.session.is_terminated());
}

// ----- protocol violations and hostile input -----

fn ends_with_sess_term(s: &mut Scripted, code: SessTermReason) {
    let out = s.output();
    assert_eq!(out.last(), Some(&sess_term(false, code)), "{out:?}");
    assert!(s.session.is_terminated());
    let (reason, by_peer) = terminated_reason(&s.events()).unwrap();
    assert!(!by_peer, "{reason}");
}

#[test]
fn a_segment_above_our_segment_mru_ends_the_session() {
    let mut s = Scripted::passive(
        SessionConfig {
            segment_mru: 1000,
            ..config("b")
        },
        30,
    );
    // Refused as soon as its length field arrives, before its data.
    let seg = segment(0, true, true, &[0u8; 1001]).to_bytes().unwrap();
    s.feed(&seg[..30]);
    ends_with_sess_term(&mut s, SessTermReason::ResourceExhaustion);
}

#[test]
fn sequencing_violations_end_the_session() {
    let cases: [&[Message]; 3] = [
        &[segment(0, true, false, b"a"), segment(1, true, false, b"b")],
        &[segment(0, true, true, b"a"), segment(0, false, true, b"b")],
        &[segment(0, true, false, b"a"), segment(9, false, true, b"b")],
    ];
    for messages in cases {
        let mut s = Scripted::passive(config("b"), 30);
        for m in messages {
            s.send(m);
        }
        ends_with_sess_term(&mut s, SessTermReason::Unknown);
    }
}

#[test]
fn an_ack_beyond_what_was_sent_ends_the_session() {
    let mut s = Scripted::passive(config("b"), 30);
    s.session.send(encoded(100, 0), false).unwrap();
    let _ = s.output();
    s.send(&Message::XferAck(XferAck {
        flags: SegmentFlags::new(true, true),
        transfer_id: 0,
        acknowledged_length: 10_000,
    }));
    ends_with_sess_term(&mut s, SessTermReason::Unknown);
}

#[test]
fn unknown_message_types_get_msg_reject_and_the_end() {
    let mut s = Scripted::passive(config("b"), 30);
    s.feed(&[0x09, 1, 2, 3]);
    assert_eq!(
        s.output(),
        [Message::MsgReject(MsgReject {
            reason: MsgRejectReason::MessageTypeUnknown,
            rejected_header: 0x09
        })]
    );
    assert!(s.session.is_terminated());
}

#[test]
fn unexpected_messages_get_msg_reject_and_the_session_goes_on() {
    let mut s = Scripted::passive(config("b"), 30);
    s.send(&Message::XferAck(XferAck {
        flags: SegmentFlags(0),
        transfer_id: 77,
        acknowledged_length: 1,
    }));
    s.send(&Message::XferRefuse(XferRefuse {
        reason: XferRefuseReason::Unknown,
        transfer_id: 78,
    }));
    s.send(&Message::SessInit(SessInit {
        keepalive_interval: 1,
        segment_mru: 1,
        transfer_mru: 1,
        node_id: "dtn://again/".into(),
        extensions: Vec::new(),
    }));
    let reject = |reason, rejected_header| {
        Message::MsgReject(MsgReject {
            reason,
            rejected_header,
        })
    };
    assert_eq!(
        s.output(),
        [
            reject(MsgRejectReason::MessageUnexpected, 0x02),
            reject(MsgRejectReason::MessageUnexpected, 0x03),
            reject(MsgRejectReason::MessageUnexpected, 0x07),
        ]
    );
    assert!(s.session.is_established());
    // Late acknowledgements of a finished transfer are not errors at all.
    s.session.send(encoded(10, 0), false).unwrap();
    let out = s.output();
    let Message::XferSegment(seg) = &out[0] else {
        panic!()
    };
    let ack = Message::XferAck(seg.ack(seg.data.len() as u64));
    s.send(&ack);
    s.send(&ack);
    assert!(s.output().is_empty());
    assert_eq!(
        s.events(),
        [
            SessionEvent::Written { transfer_id: 0 },
            SessionEvent::Sent { transfer_id: 0 }
        ]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random bytes after a valid handshake: no panic, no unbounded buffering, and the session
    /// either goes on or ends with exactly one Terminated.
    #[test]
    fn hostile_bytes_after_the_handshake(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
        chunks in prop::collection::vec(1usize..64, 1..32),
        prefix in prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 6, 7]),
    ) {
        let mut s = Scripted::passive(SessionConfig { segment_mru: 2048, ..config("b") }, 5);
        let mut input = vec![prefix];
        input.extend_from_slice(&bytes);
        let mut at = 0;
        for (i, n) in chunks.iter().cycle().enumerate() {
            if at >= input.len() || i > 10_000 { break; }
            let end = (at + n).min(input.len());
            s.feed(&input[at..end]);
            at = end;
            prop_assert!(s.rx.len() <= 2048 + 64 * 1024 + 64);
            let _ = s.raw_output();
        }
        s.session.handle_timeout(1_000_000);
        let _ = s.raw_output();
        let events = s.events();
        let n = events.iter().filter(|e| matches!(e, SessionEvent::Terminated { .. })).count();
        prop_assert!(n <= 1);
        if s.session.is_terminated() {
            prop_assert_eq!(n, 1);
            let last_is_terminated = matches!(events.last(), Some(SessionEvent::Terminated { .. }));
            prop_assert!(last_is_terminated);
        }
    }

    /// A transfer whose later segments a peer may lie about (another transfer id, START again,
    /// a data length over the segment MRU, the transfer MRU or the budget, data cut short so
    /// the next frame is read as data, junk after), read as the connection task reads (segment
    /// data straight into its transfer) in chunks: exactly what a reader given every byte at
    /// once (no segment is then streamed) makes of it: the same bundles, the same messages
    /// answered, the same end; no panic, buffers bounded, the budget given back. A transfer
    /// whose segments are all whole and consistent is delivered intact.
    #[test]
    fn streamed_segments_are_read_as_whole_ones_whatever_the_peer_sends(
        first in 1usize..2000,
        segments in prop::collection::vec(
            (0u8..10, 16_000u64..70_000, 0u8..8, any::<bool>()), 1..5),
        junk in prop::collection::vec(any::<u8>(), 0..64),
        with_junk in any::<bool>(),
        chunks in prop::collection::vec(1_000usize..40_000, 1..16),
    ) {
        let junk = if with_junk { junk } else { Vec::new() };
        let budget = ReceiveBudget::new(250_000);
        let cfg = SessionConfig {
            segment_mru: 64_000,
            transfer_mru: 300_000,
            receive_budget: Some(budget.clone()),
            ..config("b")
        };
        let mut wire = Vec::new();
        let mut sent = vec![1u8; first];
        wire.extend_from_slice(&segment(9, true, false, &sent).to_bytes().unwrap());
        let mut consistent = true;
        let mut ended = false;
        for (i, &(lie, len, cut, end)) in segments.iter().enumerate() {
            let data = vec![i as u8 + 2; len as usize];
            let (id, start) = match lie {
                0 => (10, false), // another transfer's segment
                1 => (9, true),   // START while the transfer is in progress
                _ => (9, false),
            };
            let mut frame = segment(id, start, end, &data).to_bytes().unwrap().to_vec();
            if cut == 0 {
                // Cut short: the next frame's first bytes are read as this segment's data.
                frame.truncate(frame.len() - 1000);
                consistent = false;
            }
            if lie < 2 || len > 64_000 {
                consistent = false;
            }
            sent.extend_from_slice(&data);
            wire.extend_from_slice(&frame);
            if end {
                ended = true;
                break;
            }
        }
        wire.extend_from_slice(&junk);

        let mut whole = Scripted::passive(cfg.clone(), 30);
        whole.feed(&wire);
        whole.session.handle_timeout(1_000_000);
        let whole_out = whole.output();
        let whole_events = whole.events();

        let mut streamed = Scripted::passive(cfg, 30);
        let mut at = 0;
        // Every chunk is at least 1,000 bytes: at most a few hundred rounds.
        for n in chunks.iter().cycle() {
            if at >= wire.len() { break; }
            let end = (at + n).min(wire.len());
            streamed.feed_direct(&wire[at..end]);
            at = end;
            // A partial frame (at most the segment MRU and a header) and one chunk.
            prop_assert!(streamed.rx.len() <= 64_000 + 40_000 + 64, "{}", streamed.rx.len());
        }
        streamed.session.handle_timeout(1_000_000);
        let streamed_out = streamed.output();
        let streamed_events = streamed.events();

        prop_assert_eq!(&streamed_out, &whole_out);
        prop_assert_eq!(&streamed_events, &whole_events);
        let ends = streamed_events.iter().filter(|e| matches!(e, SessionEvent::Terminated { .. })).count();
        prop_assert!(ends <= 1);
        if ended && consistent && sent.len() <= 250_000 && junk.is_empty() {
            let whole_bundle = SessionEvent::Received {
                transfer_id: 9,
                bundle: Bytes::from(sent.clone()),
            };
            prop_assert!(streamed_events.contains(&whole_bundle));
        }
        drop((whole, streamed));
        prop_assert_eq!(budget.in_use(), 0);
    }

    /// Random bytes instead of a contact header, on either role.
    #[test]
    fn hostile_bytes_from_the_start(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        active in any::<bool>(),
        magic in any::<bool>(),
    ) {
        let role = if active { Role::Active } else { Role::Passive };
        let mut s = Scripted::fresh(role, config("x"));
        let mut input = if magic { b"dtn!\x04\x00".to_vec() } else { Vec::new() };
        input.extend_from_slice(&bytes);
        for chunk in input.chunks(7) {
            s.feed(chunk);
            let _ = s.raw_output();
        }
        s.session.receive_closed(0);
        let events = s.events();
        prop_assert_eq!(
            events.iter().filter(|e| matches!(e, SessionEvent::Terminated { .. })).count(),
            1
        );
    }

    /// Well-formed but arbitrary messages after the handshake (segments with random ids and
    /// flags, acks, refusals, keepalives, SESS_TERMs): no panic, and what is kept stays within
    /// the transfer MRU.
    #[test]
    fn hostile_messages_after_the_handshake(
        script in prop::collection::vec((0u8..6, 0u64..3, 0u8..4, 0usize..3000), 1..64),
    ) {
        let mut s = Scripted::passive(SessionConfig { transfer_mru: 5000, ..config("b") }, 5);
        s.session.send(encoded(5000, 1), false).unwrap();
        for (kind, id, flags, len) in script {
            let m = match kind {
                0 | 1 => Message::XferSegment(XferSegment {
                    flags: SegmentFlags(flags),
                    transfer_id: id,
                    extensions: Vec::new(),
                    data: Bytes::from(vec![7u8; len]),
                }),
                2 => Message::XferAck(XferAck { flags: SegmentFlags(flags), transfer_id: id, acknowledged_length: len as u64 }),
                3 => Message::XferRefuse(XferRefuse { reason: XferRefuseReason::from_code(flags), transfer_id: id }),
                4 => Message::Keepalive,
                _ => sess_term(flags & 1 == 1, SessTermReason::from_code(flags)),
            };
            s.send(&m);
            let _ = s.raw_output();
            for e in s.events() {
                match e {
                    SessionEvent::Received { bundle, .. } => prop_assert!(bundle.len() <= 5000),
                    SessionEvent::Terminated { partial: Some((_, p)), .. } => prop_assert!(p.len() <= 5000),
                    _ => {}
                }
            }
            if s.session.is_terminated() { break; }
        }
    }
}

#[test]
fn a_session_is_stalled_only_with_a_transfer_in_progress_and_nothing_heard_for_a_while() {
    let mut p = Pair::established(
        SessionConfig {
            max_segment: 1_000,
            ..config("a")
        },
        config("b"),
    );
    // Established at time 0, the last byte heard then.
    assert!(
        !p.a.session.stalled(60_000, 2_000),
        "idle: nothing to wait for"
    );
    p.a.session.send(encoded(50_000, 1), false).unwrap();
    // Its first segments go out; the link breaks before any acknowledgement comes back.
    p.a.transmit(p.now, 5_000);
    p.a.wire.clear();
    assert!(!p.a.session.stalled(1_999, 2_000));
    assert!(p.a.session.stalled(2_000, 2_000));
    // The peer is heard from again (a keepalive, an ack): not stalled.
    p.b.session.send(encoded(10, 2), false).unwrap();
    p.now += 2_500;
    p.b.transmit(p.now, 100_000);
    let wire = p.b.wire.split();
    p.a.rx.extend_from_slice(&wire);
    p.a.session.receive(p.now, &mut p.a.rx);
    assert!(!p.a.session.stalled(p.now + 1_000, 2_000));
}

#[test]
fn a_transfer_is_reported_written_with_its_last_segment_and_its_bytes_are_let_go() {
    let mut s = Scripted::passive(config("b"), 30);
    let b = bundle(700_000, 1);
    let payload = b.payload.data.clone();
    s.session.send(b.encode(), false).unwrap();
    drop(b);
    // Segment by segment (ours are 256 KiB at most): the report comes with the last one, once.
    let mut written_at = Vec::new();
    let mut segments = 0;
    while let Some(parts) = s.session.poll_transmit(s.now) {
        segments += 1;
        drop(parts);
        for e in s.events() {
            assert_eq!(e, SessionEvent::Written { transfer_id: 0 });
            written_at.push(segments);
        }
        // Until then the session holds the bundle's bytes; after, nothing of them.
        assert_eq!(
            payload.is_unique(),
            !written_at.is_empty(),
            "segment {segments}"
        );
    }
    assert!(segments >= 3, "{segments}");
    assert_eq!(written_at, [segments]);
    // The acknowledgement still completes it.
    let total = s.session.queued_bytes();
    assert!(total > 700_000, "{total}");
    s.send(&Message::XferAck(XferAck {
        flags: SegmentFlags::new(false, true),
        transfer_id: 0,
        acknowledged_length: total,
    }));
    assert_eq!(s.events(), [SessionEvent::Sent { transfer_id: 0 }]);
    assert_eq!(s.session.queued_bytes(), 0);
}
