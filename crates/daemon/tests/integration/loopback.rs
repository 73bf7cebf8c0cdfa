//! Two real daemons on loopback, talking TCPCLv4: bundles both ways, a 1 MiB file byte-identical,
//! bundles that wait for a peer that is down, an inbox that survives a restart, the echo service,
//! and a session cut mid-transfer whose remainder alone crosses after reconnecting (reactive
//! fragmentation, both ends). Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use daemon::control::{Received, Request, SendReply, SendRequest};
use daemon::{Config, Running};

use crate::common::{TempDir, free_port, loopback_config};

fn config(name: &str, dir: &Path, port: u16, peers: &[SocketAddr]) -> Config {
    let mut c = loopback_config(name, dir, port);
    c.keepalive = Duration::from_secs(2);
    c.udp_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    c.peers = peers.to_vec();
    c
}

async fn send(node: &Running, destination: &str, payload: &[u8]) -> SendReply {
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(payload)),
        lifetime: Some("10m".into()),
        ..SendRequest::to(destination)
    };
    node.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap()
}

/// Waits (bounded) for `count` bundles at `endpoint`, and takes them (acknowledges each).
async fn receive(node: &Running, endpoint: &str, count: usize, within: Duration) -> Vec<Received> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "only {} of {count} bundles reached {endpoint} within {within:?}",
            got.len()
        );
        let more = node
            .control
            .wait_for(endpoint, count - got.len(), None, true, left)
            .await
            .unwrap();
        for r in &more {
            node.control.ack(endpoint, r.seq).await.unwrap();
        }
        got.extend(more);
    }
    got
}

fn payload(r: &Received) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(r.payload_base64.as_deref().expect("asked with payloads"))
        .unwrap()
}

async fn peers(node: &Running) -> usize {
    node.control.ask(Request::Status).await.unwrap().peers
}

async fn wait_for_peers(node: &Running, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while peers(node).await != n {
        assert!(Instant::now() < deadline, "no session within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_exchange_text_and_a_mebibyte_both_ways() {
    let dirs = (TempDir::new("daemon-test"), TempDir::new("daemon-test"));
    let (pa, pb) = (free_port(), free_port());
    let b_addr: SocketAddr = format!("127.0.0.1:{pb}").parse().unwrap();
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    // Only alpha knows bravo: the session alpha opens carries both directions.
    let a = daemon::start(config("alpha", dirs.0.path(), pa, &[b_addr]))
        .await
        .unwrap();
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;
    wait_for_peers(&b, 1, Duration::from_secs(10)).await;

    send(&a, "dtn://bravo/inbox", b"hello bravo").await;
    let got = receive(&b, "inbox", 1, Duration::from_secs(10)).await;
    assert_eq!(payload(&got[0]), b"hello bravo");
    assert_eq!(got[0].source, "dtn://alpha/");

    let big: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    send(&b, "dtn://alpha/files", &big).await;
    send(&a, "dtn://bravo/files", &big).await;
    let at_a = receive(&a, "files", 1, Duration::from_secs(20)).await;
    let at_b = receive(&b, "dtn://bravo/files", 1, Duration::from_secs(20)).await;
    assert_eq!(payload(&at_a[0]), big);
    assert_eq!(payload(&at_b[0]), big);

    // The echo service answers with the same payload to the source endpoint.
    let req = SendRequest {
        source: Some("pong".into()),
        payload: Some("ping 1".into()),
        lifetime: Some("1m".into()),
        ..SendRequest::to("dtn://bravo/echo")
    };
    a.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let echoed = receive(&a, "pong", 1, Duration::from_secs(10)).await;
    assert_eq!(payload(&echoed[0]), b"ping 1");
    assert_eq!(echoed[0].source, "dtn://bravo/echo");

    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_wait_for_a_peer_that_is_down_and_inboxes_survive_a_restart() {
    let dirs = (TempDir::new("daemon-test"), TempDir::new("daemon-test"));
    let (pa, pb) = (free_port(), free_port());
    let b_addr: SocketAddr = format!("127.0.0.1:{pb}").parse().unwrap();
    // Alpha starts alone, with bravo as a static peer that is not there yet.
    let a = daemon::start(config("alpha", dirs.0.path(), pa, &[b_addr]))
        .await
        .unwrap();
    for i in 0..5 {
        send(&a, "dtn://bravo/inbox", format!("queued {i}").as_bytes()).await;
    }
    let stored = a.control.ask(Request::Bundles).await.unwrap();
    assert_eq!(stored.len(), 5, "the bundles wait in alpha's store");

    // Bravo comes up; alpha reconnects (backoff at most a few seconds) and hands them over.
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    wait_for_peers(&b, 1, Duration::from_secs(15)).await;
    // Nobody reads bravo's inbox yet; wait until all five are there, then restart bravo.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let s = b.control.ask(Request::Status).await.unwrap();
        if s.inbox_bundles == 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "bravo's inbox holds {}",
            s.inbox_bundles
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.shut_down().await;
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let got = receive(&b, "inbox", 5, Duration::from_secs(5)).await;
    let mut texts: Vec<String> = got
        .iter()
        .map(|r| String::from_utf8(payload(r)).unwrap())
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        (0..5).map(|i| format!("queued {i}")).collect::<Vec<_>>()
    );
    // Acknowledged means gone, also for a second acknowledgement.
    let again = b
        .control
        .wait_for("inbox", 10, None, false, Duration::ZERO)
        .await
        .unwrap();
    assert!(again.is_empty());
    let err = b.control.ack("inbox", got[0].seq).await.unwrap_err();
    assert_eq!(err.code, "not_found");
    a.shut_down().await;
    b.shut_down().await;
}

/// Two nodes with memory stores: bundles cross both ways and a mebibyte arrives whole, nothing
/// is written to the data directory but the node's key, its API token and an empty directory of
/// execution records, and a restart keeps
/// nothing (what the memory store promises).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stores_carry_bundles_and_keep_nothing_on_disk() {
    let dirs = (TempDir::new("daemon-test"), TempDir::new("daemon-test"));
    let (pa, pb) = (free_port(), free_port());
    let b_addr: SocketAddr = format!("127.0.0.1:{pb}").parse().unwrap();
    let memory = |name, dir, port, peers: &[SocketAddr]| {
        let mut c = config(name, dir, port, peers);
        c.store = daemon::config::StoreKind::Memory;
        c
    };
    let b = daemon::start(memory("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    // Queued before bravo is known: held in alpha's memory until the session comes.
    let a = daemon::start(memory("alpha", dirs.0.path(), pa, &[b_addr]))
        .await
        .unwrap();
    let big: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    send(&a, "dtn://bravo/files", &big).await;
    send(&a, "dtn://bravo/inbox", b"hello bravo").await;
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;
    let files = receive(&b, "files", 1, Duration::from_secs(20)).await;
    assert_eq!(payload(&files[0]), big);
    send(&b, "dtn://alpha/inbox", b"hello alpha").await;
    assert_eq!(
        payload(&receive(&a, "inbox", 1, Duration::from_secs(10)).await[0]),
        b"hello alpha"
    );

    for dir in [dirs.0.path(), dirs.1.path()] {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["api-token", "executions", "identity"],
            "in {}",
            dir.display()
        );
        // Running executions' records (none here): the store's content is not on disk.
        assert_eq!(
            std::fs::read_dir(dir.join("executions")).unwrap().count(),
            0
        );
    }

    // Bravo's unread bundle is there, and gone with the process.
    let unread = b
        .control
        .wait_for("inbox", 1, None, false, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(unread.len(), 1);
    b.shut_down().await;
    let b = daemon::start(memory("bravo", dirs.1.path(), free_port(), &[]))
        .await
        .unwrap();
    let left = b
        .control
        .wait_for("inbox", 10, None, false, Duration::ZERO)
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "a memory store kept {} bundles",
        left.len()
    );
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_are_clear() {
    let dir = TempDir::new("daemon-test");
    let a = daemon::start(config("alpha", dir.path(), free_port(), &[]))
        .await
        .unwrap();
    let mut req = SendRequest {
        payload: Some("x".into()),
        ..SendRequest::to("not an eid")
    };
    let refused = |req: SendRequest| {
        let control = a.control.clone();
        async move {
            control
                .ask(|reply| Request::Send(req, reply))
                .await
                .unwrap()
                .expect_err("the send should be refused")
        }
    };
    let err = refused(req.clone()).await;
    assert_eq!(err.code, "bad_endpoint");
    req.destination = "dtn://bravo/x".into();
    req.class = Some("datagram".into());
    let err = refused(req.clone()).await;
    assert_eq!(err.code, "no_route", "{err}");
    req.class = None;
    req.lifetime = Some("soon".into());
    let err = refused(req.clone()).await;
    assert_eq!(err.code, "bad_request");
    assert!(err.message.contains("lifetime"), "{err}");
    let err = a
        .control
        .wait_for("dtn://bravo/inbox", 1, None, true, Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(err.code, "bad_endpoint");
    req.lifetime = None;
    req.priority = Some(7);
    let err = refused(req).await;
    assert_eq!(err.code, "bad_request");
    assert!(err.message.contains("priority"), "{err}");
    a.shut_down().await;
}

/// A TCP proxy to `target`: the first connection carries `cut_after` bytes from the client and is
/// then torn down in both directions (a link that dies mid-transfer); later connections pass
/// everything. Returns its address and a count of the client's bytes that later connections
/// carried.
async fn cutting_proxy(
    target: SocketAddr,
    cut_after: usize,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let later = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = later.clone();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                continue;
            };
            let (limit, count) = if std::mem::take(&mut first) {
                (cut_after, None)
            } else {
                (usize::MAX, Some(counter.clone()))
            };
            tokio::spawn(async move {
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut passed = 0;
                    while passed < limit {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n.min(limit - passed),
                        };
                        if sw.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                        passed += n;
                        if let Some(c) = &count {
                            c.fetch_add(n, Ordering::Relaxed);
                        }
                    }
                    // The link fails here: nothing more goes forward, while the receiver's
                    // acknowledgements of what did arrive still come back for a moment (without
                    // this the cut could beat every acknowledgement, and the sender would rightly
                    // resend it all).
                    tokio::time::sleep(Duration::from_millis(300)).await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                };
                // Whichever direction ends first ends both: dropping the halves closes them.
                tokio::select! {
                    _ = up => {}
                    _ = down => {}
                }
            });
        }
    });
    (addr, later)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_dies_mid_transfer_sends_only_the_remainder_after_reconnecting() {
    let dirs = (TempDir::new("daemon-test"), TempDir::new("daemon-test"));
    let (pa, pb) = (free_port(), free_port());
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    const SIZE: usize = 4 << 20;
    // The first session dies about half-way through the bundle.
    let (proxy, resent) = cutting_proxy(format!("127.0.0.1:{pb}").parse().unwrap(), SIZE / 2).await;
    let a = daemon::start(config("alpha", dirs.0.path(), pa, &[proxy]))
        .await
        .unwrap();
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;

    let big: Vec<u8> = (0..SIZE as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    send(&a, "dtn://bravo/files", &big).await;
    // alpha redials (backoff starts at 1 s); the second session carries the rest.
    let got = receive(&b, "files", 1, Duration::from_secs(30)).await;
    assert!(payload(&got[0]) == big, "the reassembled bundle differs");

    let at_b = b.control.ask(Request::Metrics).await.unwrap();
    assert_eq!(
        metric(&at_b, "ferry_reactive_fragments_received_total"),
        1,
        "bravo kept the prefix of the cut transfer"
    );
    // What crossed the second session: the remainder after what bravo had acknowledged, not
    // the whole bundle again.
    let resent = resent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        resent < SIZE,
        "the reconnected session carried {resent} bytes for a {SIZE}-byte bundle cut half-way"
    );
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_bundle_whose_payload_file_was_lost_is_not_listed_after_a_restart() {
    let dir = TempDir::new("daemon-test");
    let port = free_port();
    let a = daemon::start(config("alpha", dir.path(), port, &[]))
        .await
        .unwrap();
    // Large enough for a payload file of its own (the store keeps small values inline).
    let big = vec![7u8; 600_000];
    send(&a, "dtn://alpha/inbox", &big).await;
    send(&a, "dtn://alpha/inbox", b"small").await;
    let waiting = a
        .control
        .wait_for("inbox", 10, None, false, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(waiting.len(), 2);
    a.shut_down().await;

    // The disk loses the large payload's file while the node is down.
    let lost: Vec<_> = std::fs::read_dir(dir.path().join("payloads"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rpc-"))
        .collect();
    assert_eq!(lost.len(), 1, "one inbox payload file");
    std::fs::remove_file(lost[0].path()).unwrap();

    let a = daemon::start(config("alpha", dir.path(), port, &[]))
        .await
        .unwrap();
    let waiting = a
        .control
        .wait_for("inbox", 10, None, true, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(payload(&waiting[0]), b"small");
    let status = a.control.ask(Request::Status).await.unwrap();
    assert_eq!(status.inbox_bundles, 1);
    a.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ferry_nodes_that_dial_each_other_keep_one_session() {
    let dirs = (TempDir::new("daemon-test"), TempDir::new("daemon-test"));
    let (pa, pb) = (free_port(), free_port());
    let a_addr: SocketAddr = format!("127.0.0.1:{pa}").parse().unwrap();
    let b_addr: SocketAddr = format!("127.0.0.1:{pb}").parse().unwrap();
    // bravo first: its dial to alpha fails and is retried a second later, when alpha's own
    // session with it is up and has carried Ferry's control traffic. Both then see two
    // sessions with a Ferry peer and close the same one.
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[a_addr]))
        .await
        .unwrap();
    let a = daemon::start(config("alpha", dirs.0.path(), pa, &[b_addr]))
        .await
        .unwrap();
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;
    // Past bravo's redial and the closing of the second session.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(peers(&a).await, 1, "alpha keeps one session");
    assert_eq!(peers(&b).await, 1, "bravo keeps one session");
    // And it carries bundles both ways.
    send(&a, "dtn://bravo/inbox", b"to bravo").await;
    send(&b, "dtn://alpha/inbox", b"to alpha").await;
    let got = receive(&b, "inbox", 1, Duration::from_secs(10)).await;
    assert_eq!(payload(&got[0]), b"to bravo");
    let got = receive(&a, "inbox", 1, Duration::from_secs(10)).await;
    assert_eq!(payload(&got[0]), b"to alpha");
    a.shut_down().await;
    b.shut_down().await;
}
