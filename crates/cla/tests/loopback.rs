//! The tokio adapter over real TCP on 127.0.0.1: bundles both ways, a connection cut
//! mid-transfer, refusals, and sessions that never come up.

// An I/O test: it binds sockets and uses tokio's clock for timeouts.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use cla::tcp::{SessionHandle, TcpclEvent, Unfinished, connect, spawn_session};
use cla::tcpcl::{Role, SessionConfig};
use common::{config, encoded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;

type Events = mpsc::Receiver<(u64, TcpclEvent)>;

const LIMIT: Duration = Duration::from_secs(20);

/// Two adapters connected over loopback: `a` (link 1) connected to `b` (link 2).
async fn pair(
    a: SessionConfig,
    b: SessionConfig,
) -> (SessionHandle, Events, SessionHandle, Events) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx_a, rx_a) = mpsc::channel(16);
    let (tx_b, rx_b) = mpsc::channel(16);
    let accept = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        spawn_session(stream, Role::Passive, b, 2, tx_b)
    });
    let a = connect(addr, a, 1, tx_a).await.unwrap();
    let b = accept.await.unwrap();
    (a, rx_a, b, rx_b)
}

async fn next(events: &mut Events, link: u64) -> TcpclEvent {
    let (l, e) = timeout(LIMIT, events.recv())
        .await
        .expect("an event in time")
        .expect("the channel is open");
    assert_eq!(l, link);
    e
}

/// Collects events until `done` says so; returns them.
async fn collect(
    events: &mut Events,
    link: u64,
    mut done: impl FnMut(&[TcpclEvent]) -> bool,
) -> Vec<TcpclEvent> {
    let mut all = Vec::new();
    while !done(&all) {
        all.push(next(events, link).await);
    }
    all
}

/// Waits for Down and checks it is the last event (the channel closes after it).
async fn down(events: &mut Events, link: u64) -> (String, Vec<Unfinished>, Option<Bytes>) {
    loop {
        if let TcpclEvent::Down {
            reason,
            unfinished,
            partial,
            ..
        } = next(events, link).await
        {
            let after = timeout(LIMIT, events.recv()).await.expect("channel closes");
            assert!(after.is_none(), "an event after Down: {after:?}");
            return (reason, unfinished, partial);
        }
    }
}

fn count(events: &[TcpclEvent], f: impl Fn(&TcpclEvent) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

fn received(events: &[TcpclEvent]) -> Vec<Bytes> {
    events
        .iter()
        .filter_map(|e| match e {
            TcpclEvent::Received { bundle, .. } => Some(bundle.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_cross_both_ways_and_close_cleanly() {
    let (a, mut ea, b, mut eb) = pair(config("a"), config("b")).await;
    // Sent before the session is up: it waits for it.
    let a_bundles = [encoded(1 << 20, 1), encoded(100, 2), encoded(5000, 3)];
    let b_bundles = [encoded(300, 4), encoded(1 << 20, 5), encoded(0, 6)];
    for (i, bundle) in a_bundles.iter().enumerate() {
        assert!(a.send(10 + i as u64, bundle.clone(), false));
    }
    for (i, bundle) in b_bundles.iter().enumerate() {
        assert!(b.send(20 + i as u64, bundle.clone(), false));
    }
    let done = |n: usize, e: &[TcpclEvent]| {
        count(e, |e| matches!(e, TcpclEvent::Sent { .. })) == n
            && count(e, |e| matches!(e, TcpclEvent::Received { .. })) == n
    };
    let (got_a, got_b) = tokio::join!(
        collect(&mut ea, 1, |e| done(3, e)),
        collect(&mut eb, 2, |e| done(3, e))
    );
    let TcpclEvent::Up {
        peer,
        outbound: true,
        ..
    } = &got_a[0]
    else {
        panic!("{:?}", got_a[0])
    };
    assert_eq!(peer.node_id, "dtn://b/");
    let TcpclEvent::Up {
        peer,
        outbound: false,
        remote,
    } = &got_b[0]
    else {
        panic!("{:?}", got_b[0])
    };
    assert_eq!(peer.node_id, "dtn://a/");
    assert!(remote.ip().is_loopback());
    let want_b: Vec<Bytes> = a_bundles.iter().map(|b| b.to_bytes()).collect();
    let want_a: Vec<Bytes> = b_bundles.iter().map(|b| b.to_bytes()).collect();
    assert_eq!(received(&got_b), want_b);
    assert_eq!(received(&got_a), want_a);
    let sent = |e: &[TcpclEvent]| -> Vec<u64> {
        e.iter()
            .filter_map(|e| match e {
                TcpclEvent::Sent { tag } => Some(*tag),
                _ => None,
            })
            .collect()
    };
    assert_eq!(sent(&got_a), [10, 11, 12]);
    assert_eq!(sent(&got_b), [20, 21, 22]);
    assert!(
        count(&got_a, |e| matches!(
            e,
            TcpclEvent::Progress { tag: 10, .. }
        )) >= 3
    );
    // Only a transfer that goes on after its first segment is announced as incoming (the
    // 1 MiB bundle); the small ones arrive whole, with nothing left to refuse.
    let incoming: Vec<usize> = got_b
        .iter()
        .filter_map(|e| match e {
            TcpclEvent::Incoming { first_data, .. } => Some(first_data.len()),
            _ => None,
        })
        .collect();
    assert_eq!(incoming.len(), 1, "{incoming:?}");
    assert!(incoming[0] < 1 << 20);

    assert!(a.close());
    let ((ra, ua, pa), (rb, ub, pb)) = tokio::join!(down(&mut ea, 1), down(&mut eb, 2));
    assert!(ua.is_empty() && ub.is_empty() && pa.is_none() && pb.is_none());
    assert!(ra.starts_with("closed"), "{ra}");
    assert!(rb.contains("the peer ended the session"), "{rb}");
    // The task is gone: commands are refused.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!a.send(99, encoded(1, 9), false));
    assert!(a.is_closed() && b.is_closed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_bundles_queued_at_once_arrive_whole_and_in_order() {
    // Queued faster than the socket drains: the segments of many transfers (and, the other way,
    // their acknowledgements) share vectored writes, which the socket may take in part.
    let (a, mut ea, _b, mut eb) = pair(config("a"), config("b")).await;
    assert!(matches!(next(&mut ea, 1).await, TcpclEvent::Up { .. }));
    assert!(matches!(next(&mut eb, 2).await, TcpclEvent::Up { .. }));
    let n = 2_000u64;
    // Small ones, and one of 1 MiB (several segments) in the middle.
    let size = |i: u64| {
        if i == n / 2 {
            1 << 20
        } else {
            (i as usize * 37) % 3_000
        }
    };
    let bundles: Vec<_> = (0..n).map(|i| encoded(size(i), i)).collect();
    for (tag, bundle) in (0..).zip(&bundles) {
        assert!(a.send(tag, bundle.clone(), false));
    }
    let all = |n: u64, f: fn(&TcpclEvent) -> bool| move |e: &[TcpclEvent]| count(e, f) as u64 == n;
    let (got_a, got_b) = tokio::join!(
        collect(&mut ea, 1, all(n, |e| matches!(e, TcpclEvent::Sent { .. }))),
        collect(
            &mut eb,
            2,
            all(n, |e| matches!(e, TcpclEvent::Received { .. }))
        )
    );
    let want: Vec<Bytes> = bundles.iter().map(|b| b.to_bytes()).collect();
    assert!(
        received(&got_b) == want,
        "bundles arrived altered or out of order"
    );
    let sent: Vec<u64> = got_a
        .iter()
        .filter_map(|e| match e {
            TcpclEvent::Sent { tag } => Some(*tag),
            _ => None,
        })
        .collect();
    assert_eq!(sent, (0..n).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untracked_bundle_arrives_and_is_never_reported_to_its_sender() {
    let (a, mut ea, b, mut eb) = pair(config("a"), config("b")).await;
    let (untracked, tracked) = (encoded(200, 1), encoded(300, 2));
    assert!(a.send_untracked(untracked.clone(), true));
    assert!(a.send(7, tracked.clone(), false));
    // Both arrive, in order; the sender hears of the tracked one only.
    let got_b = collect(&mut eb, 2, |e| {
        count(e, |e| matches!(e, TcpclEvent::Received { .. })) == 2
    })
    .await;
    assert_eq!(received(&got_b), [untracked.to_bytes(), tracked.to_bytes()]);
    let got_a = collect(&mut ea, 1, |e| {
        count(e, |e| matches!(e, TcpclEvent::Sent { .. })) == 1
    })
    .await;
    assert!(matches!(got_a.last(), Some(TcpclEvent::Sent { tag: 7 })));
    // Before its acknowledgement, the tracked one was reported written out.
    let written: Vec<usize> = (0..got_a.len())
        .filter(|&i| matches!(got_a[i], TcpclEvent::Written { tag: 7 }))
        .collect();
    assert_eq!(written, [got_a.len() - 2], "{got_a:?}");
    // An untracked bundle still waiting when the session ends is not listed as unfinished.
    assert!(b.close());
    let _ = a.send_untracked(encoded(100, 3), false);
    let ((_, unfinished_a, _), (_, unfinished_b, _)) =
        tokio::join!(down(&mut ea, 1), down(&mut eb, 2));
    assert!(unfinished_a.is_empty(), "{unfinished_a:?}");
    assert!(unfinished_b.is_empty(), "{unfinished_b:?}");
    let after: Vec<TcpclEvent> = got_a
        .into_iter()
        .filter(|e| {
            !matches!(
                e,
                TcpclEvent::Up { .. }
                    | TcpclEvent::Written { tag: 7 }
                    | TcpclEvent::Sent { tag: 7 }
            )
        })
        .collect();
    assert!(
        after.is_empty(),
        "events about the untracked bundle: {after:?}"
    );
}

/// A TCP proxy that forwards `cut_after` bytes from the client to the server, keeps the other
/// direction open for a moment (acknowledgements get back), then drops both connections.
async fn cutting_proxy(target: SocketAddr, cut_after: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = TcpStream::connect(target).await.unwrap();
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        let back = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut sr, &mut cw).await;
        });
        let mut forwarded = 0;
        let mut buf = vec![0u8; 16 * 1024];
        while forwarded < cut_after {
            let n = cr.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            let n = n.min(cut_after - forwarded);
            sw.write_all(&buf[..n]).await.unwrap();
            forwarded += n;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        back.abort();
        let _ = back.await;
        drop((cr, sw));
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_mid_transfer_reports_acked_bytes_and_the_received_prefix() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    let (tx_b, mut eb) = mpsc::channel(16);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        // Keep the handle alive: dropping it would close the session.
        let handle = spawn_session(stream, Role::Passive, config("b"), 2, tx_b);
        tokio::time::sleep(LIMIT * 2).await;
        drop(handle);
    });
    let proxy = cutting_proxy(target, 400_000).await;
    let (tx_a, mut ea) = mpsc::channel(16);
    let a_config = SessionConfig {
        max_segment: 64 * 1024,
        ..config("a")
    };
    let a = connect(proxy, a_config, 1, tx_a).await.unwrap();
    let original = common::bundle(1 << 20, 7);
    let enc = original.encode();
    let whole = enc.to_bytes();
    assert!(a.send(5, enc.clone(), false));

    let ((ra, unfinished, _), (rb, _, partial)) = tokio::join!(down(&mut ea, 1), down(&mut eb, 2));
    let [
        Unfinished {
            tag: 5,
            acknowledged,
        },
    ] = unfinished.as_slice()
    else {
        panic!("{unfinished:?} ({ra})")
    };
    assert!(
        *acknowledged > 0 && *acknowledged < whole.len() as u64,
        "{acknowledged} ({ra})"
    );
    let prefix = partial.unwrap_or_else(|| panic!("no partial ({rb})"));
    assert!(prefix.len() as u64 >= *acknowledged && prefix.len() < 400_000);
    assert_eq!(prefix[..], whole[..prefix.len()]);
    let fragment = wire::decode_cut_transfer(prefix.clone())
        .unwrap()
        .expect("a fragment");
    let n = enc.payload_bytes_within(prefix.len());
    assert_eq!(fragment.payload.data[..], original.payload.data[..n]);
}

#[tokio::test]
async fn a_bundle_above_the_peers_transfer_mru_is_refused_at_once() {
    let b_config = SessionConfig {
        transfer_mru: 1000,
        ..config("b")
    };
    let (a, mut ea, b, mut eb) = pair(config("a"), b_config).await;
    assert!(a.send(1, encoded(5000, 1), false));
    assert!(a.send(2, encoded(10, 2), false));
    let got = collect(&mut ea, 1, |e| {
        e.iter().any(|e| matches!(e, TcpclEvent::Sent { tag: 2 }))
    })
    .await;
    assert!(got.contains(&TcpclEvent::Refused { tag: 1 }));
    // Dropping every handle closes the session.
    drop((a, b));
    let ((_, ua, _), (_, ub, _)) = tokio::join!(down(&mut ea, 1), down(&mut eb, 2));
    assert!(ua.is_empty() && ub.is_empty());
}

#[tokio::test]
async fn refusing_an_incoming_transfer_reaches_the_sender() {
    let a_config = SessionConfig {
        max_segment: 16 * 1024,
        ..config("a")
    };
    let (a, mut ea, b, mut eb) = pair(a_config, config("b")).await;
    assert!(a.send(1, encoded(4 << 20, 1), false));
    let got = collect(&mut eb, 2, |e| {
        e.iter().any(|e| matches!(e, TcpclEvent::Incoming { .. }))
    })
    .await;
    let Some(TcpclEvent::Incoming { transfer_id, .. }) = got.last() else {
        panic!()
    };
    assert!(b.refuse(*transfer_id));
    collect(&mut ea, 1, |e| e.contains(&TcpclEvent::Refused { tag: 1 })).await;
    assert!(a.send(2, encoded(10, 2), false));
    let got = collect(&mut eb, 2, |e| !received(e).is_empty()).await;
    assert_eq!(received(&got), [encoded(10, 2).to_bytes()]);
    b.close();
    let ((_, ua, _), (_, _, pb)) = tokio::join!(down(&mut ea, 1), down(&mut eb, 2));
    assert!(ua.is_empty() && pb.is_none());
}

#[tokio::test]
async fn a_peer_that_is_not_tcpcl_yields_down_without_up() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        let mut sink = [0u8; 64];
        let _ = s.read(&mut sink).await;
    });
    let (tx, mut events) = mpsc::channel(4);
    let handle = connect(addr, config("a"), 7, tx).await.unwrap();
    assert!(handle.send(3, encoded(10, 1), false));
    let (reason, unfinished, partial) = down(&mut events, 7).await;
    assert!(reason.contains("not a TCPCL peer"), "{reason}");
    assert_eq!(
        unfinished,
        [Unfinished {
            tag: 3,
            acknowledged: 0
        }]
    );
    assert!(partial.is_none());
}

#[tokio::test]
async fn a_silent_peer_hits_the_contact_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        tokio::time::sleep(LIMIT).await;
        drop(s);
    });
    let (tx, mut events) = mpsc::channel(4);
    let cfg = SessionConfig {
        contact_timeout_ms: 300,
        ..config("a")
    };
    let _handle = connect(addr, cfg, 7, tx).await.unwrap();
    let (reason, ..) = down(&mut events, 7).await;
    assert_eq!(reason, "contact timeout");
}
