//! Two hosts joined by a hand-driven link, in explicit time, with syncs that end only when a test
//! says so: nothing a host promises (a procedure run, a store-carry-forward bundle, an inbox
//! wake-up, an answer to an application) comes out before the commit that made it true is
//! durable, and a sync that fails keeps none of it.

use std::time::Duration;

use bytes::Bytes;
use host::{Commit, Host, HostConfig, Output, PipelineConfig};
use node::{Frame, LinkChange, LinkId, Node, NodeConfig, Outgoing, TransferResult};
use rpc::{CallRequest, CallState, Job, Param, ParamType, ProcedureSpec, Rpc, RpcConfig, Target};
use seal::Identity;
use store::MemoryStore;
use wire::rpc::{CallId, Value};
use wire::{DtnTime, Eid};

const START: DtnTime = DtnTime::from_millis(820_454_400_000);
const LINK: LinkId = LinkId(1);

/// A sync's failure, as the disk store reports one.
fn io_error(what: &str) -> store::StoreError {
    store::StoreError::Io {
        context: "syncing the store's log".into(),
        source: std::io::Error::other(what.to_string()),
    }
}

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

/// What one host's shell saw.
#[derive(Default)]
struct Seen {
    executed: Vec<Job>,
    released: Vec<(u32, Option<String>)>,
    delivered: usize,
}

struct Side {
    host: Host<u32>,
    seen: Seen,
    /// A sync the host asked for and the test has not ended yet: how many commits it covers.
    syncing: Option<u64>,
    /// Whether syncs end as soon as they start.
    auto_sync: bool,
}

/// Two hosts, `client` (index 0) and `server` (index 1, offering `echo`), joined by one link.
struct Pair {
    sides: [Side; 2],
    now: DtnTime,
}

fn side(node_id: &str, secret: u8, procedures: Vec<ProcedureSpec>) -> Side {
    let mut node = Node::new(
        NodeConfig::new(eid(node_id)),
        Box::new(MemoryStore::new(1 << 24)),
        START,
    );
    let config = RpcConfig {
        procedures,
        ..RpcConfig::default()
    };
    let rpc = Rpc::new(
        config,
        Identity::from_secret([secret; 32]),
        [secret; 32],
        &mut node,
        START,
    );
    let host = Host::new(
        node,
        Some(rpc),
        HostConfig {
            pipeline: PipelineConfig {
                commit_delay: Duration::from_millis(10),
                sync_delay: Duration::from_millis(100),
                // The memory store has no syncs; the pipeline is told it has, so that the test
                // decides when each one ends.
                has_syncer: true,
            },
            echo_service: Some("echo".into()),
            discard_service: Some("discard".into()),
            inboxes: true,
            null_procedure: None,
        },
    )
    .unwrap();
    Side {
        host,
        seen: Seen::default(),
        syncing: None,
        auto_sync: true,
    }
}

impl Pair {
    fn new() -> Self {
        Self::named("dtn://client/", "dtn://server/")
    }

    /// The pair with these node ids.
    fn named(client: &str, server: &str) -> Self {
        let echo = ProcedureSpec::new("echo", vec![ParamType::Text]);
        let mut pair = Pair {
            sides: [side(client, 1, vec![]), side(server, 2, vec![echo])],
            now: START,
        };
        for (i, peer) in [(0, server), (1, client)] {
            pair.sides[i].host.node_mut().handle_link(
                START,
                LinkChange::Up {
                    link: LINK,
                    peer: Some(eid(peer)),
                    mtu: None,
                    bandwidth_bps: 0,
                    contact: None,
                },
            );
        }
        // The engines introduce themselves and learn each other's keys.
        pair.settle();
        pair
    }

    /// One round on side `i`: its events, a commit, a sync if due (ended at once if
    /// `auto_sync`), its outputs (bundles cross the link at once).
    fn round(&mut self, i: usize) -> bool {
        let now = self.now;
        let side = &mut self.sides[i];
        side.host.handle_timeout(now);
        let mut busy = side.host.handle_events(now, usize::MAX).busy;
        match side.host.commit(now, |store| store.commit()) {
            Commit::Failed(e) => panic!("a memory store's commit failed: {e}"),
            Commit::Deferred | Commit::Done => {}
        }
        if side.syncing.is_none()
            && let Some(upto) = side.host.poll_sync(now)
        {
            side.syncing = Some(upto);
        }
        if side.auto_sync
            && let Some(upto) = side.syncing.take()
        {
            side.host.synced(now, upto, Ok(()));
        }
        let mut frames = Vec::new();
        while let Some(output) = side.host.poll_output() {
            busy = true;
            match output {
                Output::Transmit(t) => {
                    if let Frame::Bundle(b) = t.frame {
                        if t.report {
                            side.host.node_mut().handle_transfer(
                                now,
                                LINK,
                                &b.id(),
                                TransferResult::Complete,
                            );
                        }
                        frames.push(b);
                    }
                }
                Output::Execute(job) => side.seen.executed.push(job),
                Output::Release { token, error } => side.seen.released.push((token, error)),
                Output::Delivered => side.seen.delivered += 1,
                Output::Resume(job) => panic!("nothing was cut off: {job:?}"),
                Output::Error(e) => panic!("{e}"),
                Output::Abort { .. } | Output::Node(_) | Output::Rpc(_) => {}
            }
        }
        let other = &mut self.sides[1 - i].host;
        for b in frames {
            other.node_mut().handle_bundle(now, LINK, b);
        }
        busy
    }

    /// Rounds on both sides, time moving 5 ms a round, until both are quiet (at most 200).
    fn settle(&mut self) {
        for _ in 0..200 {
            let a = self.round(0);
            let b = self.round(1);
            self.now += Duration::from_millis(5);
            if !a && !b && self.sides.iter().all(|s| s.syncing.is_none()) {
                return;
            }
        }
    }

    fn client(&mut self) -> &mut Side {
        &mut self.sides[0]
    }

    fn server(&mut self) -> &mut Side {
        &mut self.sides[1]
    }

    fn call(&mut self) -> CallId {
        let now = self.now;
        let (rpc, node) = self.client().host.rpc_mut().unwrap();
        let mut request = CallRequest::new(
            Target::Node(eid("dtn://server/")),
            "echo",
            vec![Param::Value(Value::Text("hi".into()))],
        );
        request.deadline = Some(now + Duration::from_millis(600_000));
        rpc.call(now, node, request).unwrap()
    }

    fn state(&self, id: &CallId) -> CallState {
        self.sides[0].host.rpc().unwrap().call_state(id).unwrap()
    }

    /// A few rounds on both sides, one after the other.
    fn rounds(&mut self, n: usize) {
        for _ in 0..n {
            self.round(0);
            self.round(1);
        }
    }

    /// A call from the client that reached the server while the server's syncs wait for the
    /// test: the call's id, and the commits the server's pending sync covers.
    fn call_waiting_for_the_servers_sync(&mut self) -> (CallId, u64) {
        self.server().auto_sync = false;
        let id = self.call();
        // The call leaves the client (its sync ends at once) and reaches the server, which
        // commits it and asks for a sync.
        self.rounds(4);
        let upto = self
            .server()
            .syncing
            .take()
            .expect("the server asked for a sync");
        (id, upto)
    }

    /// Ends the server's sync of `upto` commits with `result`; its syncs end at once again.
    fn end_servers_sync(&mut self, upto: u64, result: store::Result<()>) {
        let now = self.now;
        let server = self.server();
        server.host.synced(now, upto, result);
        server.auto_sync = true;
    }
}

#[test]
fn a_procedure_runs_only_once_its_call_is_durable_on_the_server() {
    let mut pair = Pair::new();
    let (id, upto) = pair.call_waiting_for_the_servers_sync();
    assert!(
        pair.server().seen.executed.is_empty(),
        "the procedure started before its call was durable"
    );
    pair.end_servers_sync(upto, Ok(()));
    pair.round(1);
    let executed = &pair.server().seen.executed;
    assert_eq!(executed.len(), 1, "the sync released the execution");
    assert_eq!(executed[0].call, id);
    assert_eq!(pair.state(&id), CallState::Waiting);
}

#[test]
fn a_failed_sync_runs_nothing_and_tells_the_caller_why() {
    let mut pair = Pair::new();
    let (id, upto) = pair.call_waiting_for_the_servers_sync();
    pair.end_servers_sync(upto, Err(io_error("the disk is gone")));
    pair.settle();
    assert!(pair.server().seen.executed.is_empty());
    assert_eq!(pair.state(&id), CallState::Failed);
    let view = pair.sides[0].host.rpc().unwrap().call_view(&id).unwrap();
    let said = format!("{:?}", view.replies);
    assert!(
        said.contains("could not be recorded") && said.contains("the disk is gone"),
        "{said}"
    );
}

#[test]
fn a_call_aborted_before_it_was_durable_never_runs() {
    let mut pair = Pair::new();
    let (id, upto) = pair.call_waiting_for_the_servers_sync();
    // The caller cancels; the cancel reaches the server while its sync still runs.
    let now = pair.now;
    let (rpc, node) = pair.client().host.rpc_mut().unwrap();
    rpc.cancel(now, node, id).unwrap();
    pair.rounds(4);
    pair.end_servers_sync(upto, Ok(()));
    pair.settle();
    assert!(
        pair.server().seen.executed.is_empty(),
        "a cancelled call that never started must not start"
    );
    assert_eq!(pair.state(&id), CallState::Cancelled);
}

#[test]
fn a_stored_bundle_leaves_and_an_inbox_wakes_only_once_durable() {
    let mut pair = Pair::new();
    pair.client().auto_sync = false;
    pair.server().auto_sync = false;
    let now = pair.now;
    let out = Outgoing::new(
        eid("dtn://client/app"),
        eid("dtn://server/inbox"),
        Bytes::from_static(b"hello"),
    );
    pair.client().host.node_mut().send(now, out).unwrap();
    pair.round(0);
    pair.round(1);
    assert!(
        pair.server().host.inboxes().is_empty(),
        "the bundle left the client before it was durable there"
    );
    let client = pair.client();
    let upto = client.syncing.take().expect("the client asked for a sync");
    client.host.synced(now, upto, Ok(()));
    pair.round(0);
    pair.round(1);
    let server = pair.server();
    assert_eq!(server.host.inboxes().len(), 1, "kept in the inbox at once");
    assert_eq!(server.seen.delivered, 0, "but nobody told before the sync");
    let upto = server.syncing.take().expect("the server asked for a sync");
    server.host.synced(now, upto, Ok(()));
    pair.round(1);
    assert_eq!(pair.server().seen.delivered, 1);
}

#[test]
fn an_answer_waits_for_the_sync_that_covers_it_and_fails_with_it() {
    let mut pair = Pair::new();
    let server = pair.server();
    server.auto_sync = false;
    // An application's acknowledgement, say: it must not be answered before it is durable.
    server.host.promise(7);
    pair.round(1);
    let now = pair.now;
    let server = pair.server();
    assert!(server.seen.released.is_empty());
    let upto = server
        .syncing
        .take()
        .expect("a promise asks for a sync at once");
    // A second promise joins after that sync started: the sync does not cover it.
    server.host.promise(8);
    pair.round(1);
    let server = pair.server();
    server.host.synced(now, upto, Ok(()));
    pair.round(1);
    assert_eq!(pair.server().seen.released, vec![(7, None)]);
    let server = pair.server();
    let upto = server.syncing.take().expect("the second commit's sync");
    server.host.synced(now, upto, Err(io_error("I/O error")));
    pair.round(1);
    let released = &pair.server().seen.released;
    assert_eq!(released.len(), 2);
    assert_eq!(released[0], (7, None));
    assert_eq!(released[1].0, 8);
    let error = released[1].1.as_deref().expect("the failed sync's error");
    assert!(error.contains("I/O error"), "{error}");
}

#[test]
fn the_echo_service_answers_from_the_host() {
    let mut pair = Pair::new();
    let now = pair.now;
    let out = Outgoing::new(
        eid("dtn://client/ping"),
        eid("dtn://server/echo"),
        Bytes::from_static(b"are you there"),
    );
    pair.client().host.node_mut().send(now, out).unwrap();
    pair.settle();
    let client = &pair.sides[0].host;
    let waiting = client
        .inboxes()
        .peek(client.node().store(), "dtn://client/ping", 10, None, true)
        .unwrap();
    assert_eq!(
        waiting.len(),
        1,
        "the echo came back into the asker's inbox"
    );
    assert_eq!(
        waiting[0].payload,
        Some(Bytes::from_static(b"are you there"))
    );
    assert!(
        pair.sides[1].host.inboxes().is_empty(),
        "not kept by the echo"
    );
}

#[test]
fn an_ipn_node_echoes_on_service_7() {
    let mut pair = Pair::named("ipn:1.0", "ipn:2.0");
    let now = pair.now;
    let out = Outgoing::new(
        eid("ipn:1.4000"),
        eid("ipn:2.7"),
        Bytes::from_static(b"ping"),
    );
    pair.client().host.node_mut().send(now, out).unwrap();
    pair.settle();
    let client = &pair.sides[0].host;
    let waiting = client
        .inboxes()
        .peek(client.node().store(), "ipn:1.4000", 10, None, true)
        .unwrap();
    assert_eq!(waiting.len(), 1, "the echo came back");
    assert_eq!(waiting[0].payload, Some(Bytes::from_static(b"ping")));
    assert!(pair.sides[1].host.inboxes().is_empty());
}

#[test]
fn the_discard_service_keeps_nothing_and_other_services_keep_their_bundles() {
    for (client, server, discard, other) in [
        (
            "dtn://client/",
            "dtn://server/",
            "dtn://server/discard",
            "dtn://server/inbox",
        ),
        ("ipn:1.0", "ipn:2.0", "ipn:2.9", "ipn:2.8"),
    ] {
        let mut pair = Pair::named(client, server);
        let now = pair.now;
        let source = if client.starts_with("ipn") {
            "ipn:1.5"
        } else {
            "dtn://client/trace"
        };
        for to in [discard, other] {
            let out = Outgoing::new(eid(source), eid(to), Bytes::from_static(b"trace"));
            pair.client().host.node_mut().send(now, out).unwrap();
        }
        pair.settle();
        let server_side = &pair.sides[1].host;
        let store = server_side.node().store();
        assert!(
            server_side
                .inboxes()
                .peek(store, discard, 10, None, false)
                .unwrap()
                .is_empty(),
            "{discard} keeps nothing"
        );
        assert_eq!(
            server_side
                .inboxes()
                .peek(store, other, 10, None, false)
                .unwrap()
                .len(),
            1,
            "{other} keeps its bundle"
        );
        // Nothing came back to the client either: discard is no echo.
        let client_side = &pair.sides[0].host;
        assert!(
            client_side
                .inboxes()
                .peek(client_side.node().store(), source, 10, None, false)
                .unwrap()
                .is_empty()
        );
    }
}
