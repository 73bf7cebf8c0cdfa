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

mod common;
use common::{TempDir, free_port, loopback_config};

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
        .wait_call(&call.id, None, within)
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
    let pb = free_port();
    let b = daemon::start(server("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let a = daemon::start(client("alpha", dirs.0.path(), free_port(), &[tcpcl(pb)]))
        .await
        .unwrap();
    wait_for_peers(&a, 1).await;
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
    a.shut_down().await;
    b.shut_down().await;
}
