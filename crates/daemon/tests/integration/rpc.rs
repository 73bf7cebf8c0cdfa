//! Remote procedure calls between real daemons on loopback, serving the example procedures in
//! `examples/`: echo, a file result, a slow call whose path breaks mid-call (the result comes
//! back by dtn), refusals with their reasons, and any/all mode. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use daemon::Running;
use daemon::calls::{CallInfo, CallSpec, FileSpec, ParamSpec};
use daemon::control::Request;
use daemon::relay::Relay;

use crate::common::{TempDir, free_port, loopback_config};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A node serving the example procedures (examples/node.toml), dialing `peers`.
fn server(name: &str, dir: &Path, port: u16, peers: &[SocketAddr]) -> daemon::Config {
    let file = daemon::Config::load(&examples().join("node.toml"), "test")
        .expect("examples/node.toml loads");
    let mut c = client(name, dir, port, peers);
    c.rpc = file.rpc;
    c
}

/// A node serving nothing, dialing `peers`.
fn client(name: &str, dir: &Path, port: u16, peers: &[SocketAddr]) -> daemon::Config {
    let mut c = loopback_config(name, dir, port);
    c.keepalive = Duration::from_secs(1);
    c.peers = peers.to_vec();
    c
}

fn tcpcl(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

async fn wait_for_peers(node: &Running, n: usize) {
    for _ in 0..500 {
        if node.control.ask(Request::Status).await.unwrap().peers == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no {n} peers within 10 s");
}

/// Bravo serving the example procedures in `dirs.1`, alpha in `dirs.0` dialing it, once alpha
/// has it as a peer.
async fn alpha_calling_bravo(dirs: &(TempDir, TempDir)) -> (Running, Running) {
    let pb = free_port();
    let b = daemon::start(server("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
    (a, b)
}

fn call(target: &str, procedure: &str, params: Vec<ParamSpec>) -> CallSpec {
    CallSpec {
        target: target.into(),
        procedure: procedure.into(),
        params,
        ..CallSpec::default()
    }
}

async fn finish(node: &Running, call: &CallInfo, within: Duration) -> CallInfo {
    let done = node
        .control
        .wait_call(&call.id, daemon::calls::WaitFor::default(), within)
        .await
        .unwrap();
    assert!(
        done.finished(),
        "call {} not finished within {within:?}: {:#?}",
        call.id,
        done
    );
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_echo_call_returns_its_text_by_stream() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    let text = "it's $(not) a \"shell\"; *";
    let made = a
        .control
        .call(call("bravo", "echo", vec![ParamSpec::Text(text.into())]))
        .await
        .unwrap();
    assert_eq!(made.state, "waiting");
    let done = finish(&a, &made, Duration::from_secs(20)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    assert_eq!(done.replies.len(), 1);
    let r = &done.replies[0];
    assert!(r.ok);
    assert_eq!(r.value_text.as_deref(), Some(text));
    assert_eq!(r.server, "dtn://bravo/");
    assert_eq!(r.via, "stream");
    let status_b = b.control.ask(Request::Status).await.unwrap();
    assert_eq!(r.server_key, status_b.public_key);
    assert_eq!(status_b.rpc.executions, 1);
    assert!(!done.timeline.is_empty());

    // `null` is served in-process by every node, even one that declares no procedures.
    let made = b.control.call(call("alpha", "null", vec![])).await.unwrap();
    let done = finish(&b, &made, Duration::from_secs(20)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    assert_eq!(done.replies[0].value_text.as_deref(), Some(""));
    let status_a = a.control.ask(Request::Status).await.unwrap();
    assert_eq!(status_a.rpc.executions, 1);
    a.shut_down().await;
    b.shut_down().await;
}

/// A counter from the node's Prometheus metrics.
async fn metric(node: &Running, name: &str) -> u64 {
    let text = node.control.ask(Request::Metrics).await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A `null` call from `node` to bravo, by `call_and_wait`; it must succeed.
async fn null_call(node: &Running) -> CallInfo {
    let done = node
        .control
        .call_and_wait(call("bravo", "null", vec![]), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done.state, "succeeded", "{done:#?}");
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_calls_share_store_commits() {
    // A `call_and_wait` and its stream reply promise nothing that waits for the disk (the
    // caller waits for the result, not the record; real-time bundles are confirmed at once), so
    // their records join the next commit instead of costing a commit and a sync each. Before,
    // every call cost the caller two commits and the server two.
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let pb = free_port();
    let b = daemon::start(client("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
    null_call(&a).await;
    let before = (
        metric(&a, "ferry_store_commits_total").await,
        metric(&b, "ferry_store_commits_total").await,
    );
    const CALLS: u64 = 100;
    for _ in 0..CALLS {
        let done = null_call(&a).await;
        assert_eq!(done.replies[0].via, "stream");
    }
    let commits = (
        metric(&a, "ferry_store_commits_total").await - before.0,
        metric(&b, "ferry_store_commits_total").await - before.1,
    );
    assert!(
        commits.0 < CALLS && commits.1 < CALLS,
        "{CALLS} calls cost the caller {} commits and the server {}",
        commits.0,
        commits.1
    );
    // Shutting down commits what waited: the calls are there after a restart.
    let ids = a.control.ask(Request::Calls).await.unwrap().len();
    assert_eq!(ids as u64, CALLS + 1);
    a.shut_down().await;
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    let calls = a.control.ask(Request::Calls).await.unwrap();
    assert_eq!(calls.len() as u64, CALLS + 1);
    assert!(calls.iter().all(|c| c.state == "succeeded"), "{calls:#?}");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_calls_beyond_the_memory_bound_are_still_found_by_id() {
    // Both nodes keep 3 finished calls in memory; the rest are read back from the store.
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let bounded = |mut c: daemon::Config| {
        c.rpc.finished_in_memory = 3;
        c
    };
    let pb = free_port();
    let b = daemon::start(bounded(client("bravo", dirs.1.path(), pb, &[])))
        .await
        .unwrap();
    let a_config = || bounded(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]));
    let a = daemon::start(a_config()).await.unwrap();
    wait_for_peers(&a, 1).await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(null_call(&a).await.id);
    }
    let status = |node: &Running| {
        let control = node.control.clone();
        async move { control.ask(Request::Status).await.unwrap().rpc }
    };
    // Records leave memory once written, at the next store commit (within 10 ms).
    let mut counts = (0, 0);
    for _ in 0..100 {
        counts = (
            status(&a).await.calls_in_memory,
            status(&b).await.served_in_memory,
        );
        if counts == (3, 3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counts, (3, 3), "(made, served) in memory");
    assert_eq!(a.control.ask(Request::Calls).await.unwrap().len(), 3);
    // Every call is still there by its id, with its result and its timeline, also after a
    // restart.
    for id in &ids {
        let info = a.control.get_call(id).await.unwrap();
        assert_eq!(info.state, "succeeded", "{info:#?}");
        assert_eq!(info.replies.len(), 1);
        assert!(!info.timeline.is_empty());
    }
    a.shut_down().await;
    let a = daemon::start(a_config()).await.unwrap();
    assert_eq!(status(&a).await.calls_in_memory, 3);
    let first = a.control.get_call(&ids[0]).await.unwrap();
    assert_eq!(first.state, "succeeded", "{first:#?}");
    a.shut_down().await;
    b.shut_down().await;
}

/// Waits until `call` has been acknowledged (the server runs it).
async fn wait_for_ack(node: &Running, call: &CallInfo) {
    for _ in 0..500 {
        if !node
            .control
            .get_call(&call.id)
            .await
            .unwrap()
            .acks
            .is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("call {} not acknowledged within 10 s", call.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_comes_back_as_a_file_verified_by_its_hash() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    let made = a
        .control
        .call(call("dtn://bravo/", "photo", vec![ParamSpec::Int(64)]))
        .await
        .unwrap();
    let done = finish(&a, &made, Duration::from_secs(30)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    let r = &done.replies[0];
    assert!(
        r.value_text
            .as_deref()
            .unwrap()
            .starts_with("photo.pgm: 64x64")
    );
    assert_eq!(r.files.len(), 1);
    let f = &r.files[0];
    assert_eq!(f.name, "photo.pgm");
    assert!(f.arrived, "a finished call has its files");
    let content = a
        .control
        .ask(|reply| Request::File {
            hash: f.hash.clone(),
            reply,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(content.len() as u64, f.size);
    assert!(content.starts_with(b"P2\n64 64\n255\n"));
    assert_eq!(wire::hex(blake3::hash(&content).as_bytes()), f.hash);
    // A file parameter goes the other way on the data channel.
    let text = "a file parameter, sent on its own";
    let made = a
        .control
        .call(call(
            "bravo",
            "echo",
            vec![ParamSpec::File(FileSpec {
                name: "note.txt".into(),
                base64: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text),
            })],
        ))
        .await
        .unwrap();
    let done = finish(&a, &made, Duration::from_secs(30)).await;
    // echo declares text: a file is not one.
    assert_eq!(done.state, "failed", "{done:#?}");
    assert_eq!(done.replies[0].code.as_deref(), Some("bad_arguments"));
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_broken_mid_call_brings_the_result_by_dtn() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let pb = free_port();
    let b = daemon::start(server("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let link = Relay::start(tcpcl(pb)).await.unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[link.addr()]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
    let made = a
        .control
        .call(call("bravo", "slow", vec![ParamSpec::Text("2".into())]))
        .await
        .unwrap();
    wait_for_ack(&a, &made).await;
    link.cut();
    wait_for_peers(&a, 0).await;
    // The result is ready while the link is down; bravo keeps it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waiting = a.control.get_call(&made.id).await.unwrap();
    assert_eq!(waiting.state, "waiting", "{waiting:#?}");
    link.restore();
    let done = finish(&a, &made, Duration::from_secs(60)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    let r = &done.replies[0];
    assert_eq!(r.via, "dtn", "{done:#?}");
    assert!(r.value_text.as_deref().unwrap().starts_with("slept 2 s"));
    let b_status = b.control.ask(Request::Status).await.unwrap();
    assert_eq!(b_status.rpc.executions, 1, "it ran once");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_restarts_still_gets_its_result() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (pa, pb) = (free_port(), free_port());
    let b = daemon::start(server("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), pa, &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
    let made = a
        .control
        .call(call("bravo", "slow", vec![ParamSpec::Int(2)]))
        .await
        .unwrap();
    wait_for_ack(&a, &made).await;
    a.shut_down().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let a = daemon::start(client("alpha", dirs.0.path(), pa, &[tcpcl(pb)]))
        .await
        .unwrap();
    let done = finish(&a, &made, Duration::from_secs(60)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    assert_eq!(done.replies[0].via, "dtn");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_takes_the_first_result_and_all_collects_every_server() {
    let dirs = (
        TempDir::new("rpc"),
        TempDir::new("rpc"),
        TempDir::new("rpc"),
    );
    let (pb, pc) = (free_port(), free_port());
    let b = daemon::start(server("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let c = daemon::start(server("charlie", dirs.2.path(), pc, &[]))
        .await
        .unwrap();
    let a = daemon::start(client(
        "alpha",
        dirs.0.path(),
        free_port(),
        &[tcpcl(pb), tcpcl(pc)],
    ))
    .await
    .unwrap();
    wait_for_peers(&a, 2).await;

    let made = a
        .control
        .call(call(
            "any",
            "sum",
            vec![ParamSpec::Int(2), ParamSpec::Int(40)],
        ))
        .await
        .unwrap();
    let done = finish(&a, &made, Duration::from_secs(30)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    assert_eq!(done.replies.len(), 1, "{done:#?}");
    assert_eq!(
        done.replies[0].value_text.as_deref().map(str::trim),
        Some("42")
    );

    let mut spec = call("all", "echo", vec![ParamSpec::Text("roll call".into())]);
    spec.deadline = Some("3s".into());
    let made = a.control.call(spec).await.unwrap();
    let done = finish(&a, &made, Duration::from_secs(30)).await;
    assert_eq!(done.state, "succeeded", "{done:#?}");
    let mut servers: Vec<&str> = done.replies.iter().map(|r| r.server.as_str()).collect();
    servers.sort();
    assert_eq!(servers, ["dtn://bravo/", "dtn://charlie/"], "{done:#?}");
    assert!(
        done.replies
            .iter()
            .all(|r| r.value_text.as_deref() == Some("roll call"))
    );
    for node in [a, b, c] {
        node.shut_down().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_failures_say_why() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    let refused = |spec: CallSpec| {
        let a = &a;
        async move {
            let made = a.control.call(spec).await.unwrap();
            let done = finish(a, &made, Duration::from_secs(30)).await;
            assert_eq!(done.state, "failed", "{done:#?}");
            done.replies[0].clone()
        }
    };
    let r = refused(call("bravo", "fly", vec![])).await;
    assert_eq!(r.code.as_deref(), Some("not_offered"));
    let r = refused(call(
        "bravo",
        "sum",
        vec![ParamSpec::Text("2".into()), ParamSpec::Text("x".into())],
    ))
    .await;
    assert_eq!(r.code.as_deref(), Some("bad_arguments"));
    assert!(
        r.detail.as_deref().unwrap().contains("parameter 2"),
        "{r:?}"
    );
    let mut spec = call("bravo", "echo", vec![ParamSpec::Text("hi".into())]);
    spec.requirements = Some("has(gpu) || free_disk >= 1000TB".into());
    let r = refused(spec).await;
    assert_eq!(r.code.as_deref(), Some("predicate_failed"));
    assert!(r.detail.as_deref().unwrap().contains("free_disk"), "{r:?}");
    let r = refused(call("bravo", "photo", vec![ParamSpec::Int(0)])).await;
    assert_eq!(r.code.as_deref(), Some("execution_failed"));
    assert_eq!(r.exit_status, Some(2));
    assert!(
        r.stderr_tail
            .as_deref()
            .unwrap()
            .contains("SIZE must be 1 to 1000"),
        "{r:?}"
    );
    // A requirement that does not parse never leaves this node.
    let mut spec = call("bravo", "echo", vec![ParamSpec::Text("hi".into())]);
    spec.requirements = Some("battery >= ".into());
    let e = a.control.call(spec).await.unwrap_err();
    assert_eq!(e.code, "bad_request");
    assert!(e.message.contains('^'), "{e}");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_for_outcome_answers_with_the_replies_or_the_call_as_it_stands() {
    use rpc::CallState;
    use wire::rpc::{Message, RejectCode};
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    let wait = Duration::from_secs(20);

    // A result: the value as the server sent it, and the same call as the report shows it.
    let done = a
        .control
        .call_for_outcome(
            call("bravo", "echo", vec![ParamSpec::Text("hi".into())]),
            wait,
        )
        .await
        .unwrap();
    assert_eq!(done.state, CallState::Succeeded, "{done:#?}");
    assert!(done.finished());
    assert_eq!(done.replies.len(), 1);
    let result = done.result().expect("a result");
    assert_eq!(&result.value[..], b"hi");
    assert_eq!(result.server.to_string(), "dtn://bravo/");
    assert_eq!(done.replies[0].via, "stream");
    let report = a.control.get_call(&done.id.to_string()).await.unwrap();
    assert_eq!(report.state, "succeeded");
    assert_eq!(report.replies[0].value_text.as_deref(), Some("hi"));
    assert_eq!(
        report.replies[0].server_key,
        done.replies[0].server_key.to_string()
    );

    // A refusal: the reject and its code, no result.
    let refused = a
        .control
        .call_for_outcome(call("bravo", "no-such-procedure", vec![]), wait)
        .await
        .unwrap();
    assert_eq!(refused.state, CallState::Failed, "{refused:#?}");
    assert!(refused.result().is_none());
    match &refused.replies[..] {
        [r] => assert!(
            matches!(&r.message, Message::Reject(j) if j.code == RejectCode::NotOffered),
            "{r:#?}"
        ),
        other => panic!("one reply, not {other:#?}"),
    }

    // A wait that ends first: the call as it stands, under the id the node gave it.
    let started = std::time::Instant::now();
    let standing = a
        .control
        .call_for_outcome(
            call("bravo", "slow", vec![ParamSpec::Text("30".into())]),
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(standing.state, CallState::Waiting, "{standing:#?}");
    assert!(!standing.finished() && standing.replies.is_empty());
    let listed = a.control.get_call(&standing.id.to_string()).await.unwrap();
    assert_eq!(
        (listed.state.as_str(), listed.procedure.as_str()),
        ("waiting", "slow")
    );

    // Bad input is refused before anything is sent.
    let e = a
        .control
        .call_for_outcome(call("not a node id!", "null", vec![]), wait)
        .await
        .unwrap_err();
    assert_eq!(e.code, "bad_request", "{e}");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_ends_with_the_call_its_timeout_or_the_call_forgotten() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    // `slow 30` runs 30 s: a 300 ms wait ends with the call still waiting.
    let made = a
        .control
        .call(call("bravo", "slow", vec![ParamSpec::Text("30".into())]))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let still = a
        .control
        .wait_call(
            &made.id,
            daemon::calls::WaitFor::default(),
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert_eq!(still.state, "waiting", "{still:#?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // So does `call_and_wait`: the call it made, as it stands, under the id the node gave it.
    let started = std::time::Instant::now();
    let standing = a
        .control
        .call_and_wait(
            call("bravo", "slow", vec![ParamSpec::Text("30".into())]),
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert_eq!(standing.state, "waiting", "{standing:#?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let listed = a.control.get_call(&standing.id).await.unwrap();
    assert_eq!(listed.id, standing.id);
    assert_eq!(listed.procedure, "slow");
    // Two waits in progress when the call is forgotten both end, with not_found.
    let waits: Vec<_> = (0..2)
        .map(|_| {
            let control = a.control.clone();
            let id = made.id.clone();
            tokio::spawn(async move {
                control
                    .wait_call(
                        &id,
                        daemon::calls::WaitFor::default(),
                        Duration::from_secs(20),
                    )
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.control
        .ask(|reply| Request::ForgetCall {
            id: made.id.clone(),
            reply,
        })
        .await
        .unwrap()
        .unwrap();
    for w in waits {
        let ended = tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .expect("the wait ended when the call was forgotten")
            .unwrap();
        assert_eq!(ended.unwrap_err().code, "not_found");
    }
    // An unknown call is not_found at once.
    let unknown = a
        .control
        .wait_call(
            &"0".repeat(32),
            daemon::calls::WaitFor::default(),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(unknown.unwrap_err().code, "not_found");
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_file_does_not_fit_the_file_budget_is_refused_as_store_full() {
    let dir = TempDir::new("rpc");
    let mut config = client("alpha", dir.path(), free_port(), &[]);
    config.rpc.file_budget = 1_000;
    let a = daemon::start(config).await.unwrap();
    let file = |size: usize| {
        ParamSpec::File(FileSpec {
            name: "big.bin".into(),
            base64: base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                vec![7u8; size],
            ),
        })
    };
    let err = a
        .control
        .call(call("bravo", "echo", vec![file(2_000)]))
        .await
        .unwrap_err();
    assert_eq!(err.code, "store_full", "{err:?}");
    assert!(err.message.contains("file budget"), "{err:?}");
    assert!(a.control.ask(Request::Calls).await.unwrap().is_empty());
    // A file that fits goes (the call waits for bravo by dtn).
    let made = a
        .control
        .call(call("bravo", "echo", vec![file(500)]))
        .await
        .unwrap();
    assert_eq!(made.state, "waiting");
    a.shut_down().await;
}

/// A commit that promises nobody anything (a call's records, written 10 ms after a call) does
/// not get a sync of its own: such commits are synced together, at least every 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_nobody_waits_for_share_syncs() {
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let (a, b) = alpha_calling_bravo(&dirs).await;
    let wait = Duration::from_secs(20);
    // Let the start's own commits settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (commits, syncs) = (
        metric(&a, "ferry_store_commits_total").await,
        metric(&a, "ferry_store_syncs_total").await,
    );

    // Calls 15 ms apart: each one's records are committed on their own (a commit waits at most
    // 10 ms for company), so a sync per commit would be one per call.
    // The counters are read right after the last call, before its records are committed.
    let calls = 20;
    for i in 0..calls {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        let done = a
            .control
            .call_for_outcome(call("bravo", "null", vec![]), wait)
            .await
            .unwrap();
        assert_eq!(done.state, rpc::CallState::Succeeded, "{done:#?}");
    }
    let synced = metric(&a, "ferry_store_syncs_total").await - syncs;
    let commits = metric(&a, "ferry_store_commits_total").await - commits;
    assert!(commits >= calls - 1, "{commits} commits for {calls} calls");
    assert!(
        synced <= commits / 2,
        "{synced} syncs for {commits} commits that promised nothing: they should share syncs"
    );

    a.shut_down().await;
    b.shut_down().await;
}

/// A commit that promised nothing is synced even when nothing else happens on the node (its
/// own timer brings the sync): a lone node makes a call that waits (no path to the server), and
/// its caller stops waiting before the call's records are committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_nobody_waits_for_is_synced_on_a_quiet_node() {
    let dir = TempDir::new("rpc");
    let a = daemon::start(client("alpha", dir.path(), free_port(), &[]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let syncs = metric(&a, "ferry_store_syncs_total").await;
    let waiting = a
        .control
        .call_for_outcome(call("bravo", "null", vec![]), Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(waiting.state, rpc::CallState::Waiting, "{waiting:#?}");
    // Left alone (asking for its metrics would wake its loop, which would look by itself).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let synced = metric(&a, "ferry_store_syncs_total").await - syncs;
    assert!(synced >= 1, "the call's records were never synced");
    a.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_a_callers_share_of_served_records_are_dropped_unheard_and_counted() {
    // Bravo keeps at most 4 served-call records of any one caller (each until its deadline
    // plus an hour): alpha's fifth call is neither run nor answered, and waits out its
    // deadline as for a lost bundle.
    let dirs = (TempDir::new("rpc"), TempDir::new("rpc"));
    let pb = free_port();
    let mut bravo = client("bravo", dirs.1.path(), pb, &[]);
    bravo.rpc.max_served_calls_per_caller = 4;
    let b = daemon::start(bravo).await.unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
    for _ in 0..4 {
        null_call(&a).await;
    }
    let mut fifth = call("bravo", "null", vec![]);
    fifth.deadline = Some("3s".into());
    let unheard = a
        .control
        .call_for_outcome(fifth, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(unheard.finished(), "{unheard:#?}");
    assert!(unheard.replies.is_empty(), "{unheard:#?}");
    let status = b.control.ask(Request::Status).await.unwrap();
    assert_eq!(status.rpc.executions, 4, "the dropped call never ran");
    assert_eq!(metric(&b, "ferry_rpc_served_records").await, 4);
    // Every copy the caller sent (by stream, then by dtn) is dropped and counted.
    assert!(
        metric(
            &b,
            "ferry_rpc_calls_dropped_unheard_total{bound=\"caller\"}"
        )
        .await
            >= 1
    );
    assert_eq!(
        metric(&b, "ferry_rpc_calls_dropped_unheard_total{bound=\"total\"}").await,
        0
    );
    // Another node's calls still have room.
    let dir_c = TempDir::new("rpc");
    let c = daemon::start(client("charlie", dir_c.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&c, 1).await;
    null_call(&c).await;
    assert_eq!(metric(&b, "ferry_rpc_served_records").await, 5);
    a.shut_down().await;
    b.shut_down().await;
    c.shut_down().await;
}
