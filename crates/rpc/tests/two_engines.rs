//! Two engines on two nodes joined by an instantaneous link, driven by hand with explicit time,
//! their shells played by the test: what a restart of the caller does to a call it made by stream.

use bytes::Bytes;
use node::{Frame, LinkChange, LinkId, Node, NodeConfig, TransferResult};
use rpc::{
    CallRequest, CallState, Job, ParamType, ProcedureSpec, Rpc, RpcConfig, RpcEvent, Target,
};
use seal::Identity;
use std::time::Duration;
use store::{MemoryStore, RpcTable};
use wire::rpc::{Transport, Value};
use wire::{DtnTime, Eid};

const NOW: DtnTime = DtnTime::from_millis(820_454_400_000);
const CLIENT: usize = 0;
const SERVER: usize = 1;

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn name(i: usize) -> Eid {
    eid(["dtn://client/", "dtn://server/"][i])
}

fn secret(i: usize) -> [u8; 32] {
    [i as u8 + 1; 32]
}

/// The client and the server, the link between them, the jobs the server's shell was asked to
/// run, and whether the client's shell commits its engine's records (it writes them deferred, as
/// the daemon does: what it never commits, a crash loses).
struct Pair {
    nodes: Vec<Node>,
    engines: Vec<Rpc>,
    up: bool,
    jobs: Vec<Job>,
    client_commits: bool,
    now: DtnTime,
}

impl Pair {
    fn new() -> Self {
        let mut nodes = Vec::new();
        let mut engines = Vec::new();
        for i in [CLIENT, SERVER] {
            let mut config = NodeConfig::new(name(i));
            config.seed = i as u64 + 1;
            let mut node = Node::new(config, Box::new(MemoryStore::new(1 << 24)), NOW);
            engines.push(Self::engine(i, &mut node, NOW));
            nodes.push(node);
        }
        let mut pair = Self {
            nodes,
            engines,
            up: false,
            jobs: Vec::new(),
            client_commits: true,
            now: NOW,
        };
        pair.link(true);
        pair
    }

    /// Node `i`'s engine, started on its node's store (a new one, or one a restart kept).
    fn engine(i: usize, node: &mut Node, now: DtnTime) -> Rpc {
        let mut config = RpcConfig::default();
        if i == SERVER {
            config
                .procedures
                .push(ProcedureSpec::new("echo", vec![ParamType::Text]));
        } else {
            config.pinned_keys =
                vec![(name(SERVER), Identity::from_secret(secret(SERVER)).public())];
        }
        let mut rpc = Rpc::new(
            config,
            Identity::from_secret(secret(i)),
            [i as u8 + 8; 32],
            node,
            now,
        );
        if i == CLIENT {
            rpc.defer_record_writes(true);
        }
        rpc
    }

    fn link(&mut self, up: bool) {
        self.up = up;
        for (i, j) in [(CLIENT, SERVER), (SERVER, CLIENT)] {
            let change = if up {
                LinkChange::Up {
                    link: LinkId(j as u64),
                    peer: None,
                    mtu: None,
                    bandwidth_bps: 0,
                    contact: None,
                }
            } else {
                LinkChange::Down {
                    link: LinkId(j as u64),
                }
            };
            self.nodes[i].handle_link(self.now, change);
        }
        self.settle();
    }

    /// Carries every frame across at once and hands every event to its engine until both nodes
    /// are quiet; then each shell commits (the client's only while `client_commits`).
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for i in [CLIENT, SERVER] {
                let j = 1 - i;
                while let Some(t) = self.nodes[i].poll_transmit() {
                    moved = true;
                    if !self.up {
                        continue;
                    }
                    match t.frame {
                        Frame::Beacon(b) => {
                            self.nodes[j].handle_beacon(self.now, LinkId(i as u64), b)
                        }
                        Frame::Bundle(b) => {
                            let id = b.id();
                            self.nodes[j].handle_bundle(self.now, LinkId(i as u64), b);
                            if t.report {
                                self.nodes[i].handle_transfer(
                                    self.now,
                                    LinkId(j as u64),
                                    &id,
                                    TransferResult::Complete,
                                );
                            }
                        }
                    }
                }
                while let Some(e) = self.nodes[i].poll_event() {
                    moved = true;
                    self.engines[i].handle_node_event(self.now, &mut self.nodes[i], &e);
                }
                while let Some(e) = self.engines[i].poll_event() {
                    moved = true;
                    if let RpcEvent::Execute(job) = e {
                        assert_eq!(i, SERVER);
                        self.jobs.push(job);
                    }
                }
            }
            if !moved {
                if self.client_commits {
                    self.engines[CLIENT].write_records(&mut self.nodes[CLIENT]);
                }
                return;
            }
        }
        panic!("the two nodes did not settle");
    }

    /// Advances time to `t`, firing every node's and engine's timer on the way.
    fn advance_to(&mut self, t: DtnTime) {
        loop {
            let next = (0..2)
                .flat_map(|i| [self.nodes[i].poll_timeout(), self.engines[i].poll_timeout()])
                .flatten()
                .min()
                .filter(|&at| at <= t);
            let Some(at) = next else { break };
            self.now = self.now.max(at);
            for i in [CLIENT, SERVER] {
                if self.nodes[i].poll_timeout().is_some_and(|d| d <= self.now) {
                    self.nodes[i].handle_timeout(self.now);
                }
                if self.engines[i]
                    .poll_timeout()
                    .is_some_and(|d| d <= self.now)
                {
                    self.engines[i].handle_timeout(self.now, &mut self.nodes[i]);
                }
            }
            self.settle();
        }
        self.now = t;
    }

    /// The client's process is killed: its engine goes with whatever it had not committed, its
    /// link goes down; it starts again from its store (the link still down).
    fn crash_and_restart_client(&mut self) {
        self.link(false);
        let config = self.nodes[CLIENT].config().clone();
        let placeholder = Node::new(config.clone(), Box::new(MemoryStore::new(0)), self.now);
        let old = std::mem::replace(&mut self.nodes[CLIENT], placeholder);
        let mut node = Node::new(config, old.into_store(), self.now);
        self.engines[CLIENT] = Self::engine(CLIENT, &mut node, self.now);
        self.nodes[CLIENT] = node;
        self.client_commits = true;
    }
}

/// The power-cut soak's finding: a call sent by stream, acknowledged and answered on the stream,
/// whose caller was killed before it committed the result. The server counts the reply as
/// delivered (the stream acknowledged it: no outbox row), so it never sends it again of its own;
/// the restarted caller must ask again by dtn, and the server answers the copy from its dedup
/// record without running the procedure a second time.
#[test]
fn a_caller_killed_before_keeping_a_stream_result_asks_again_by_dtn_and_it_runs_once() {
    let mut pair = Pair::new();
    let mut request = CallRequest::new(
        Target::Node(name(SERVER)),
        "echo",
        vec![rpc::Param::Value(Value::Text("hi".into()))],
    );
    request.transport = Transport::Stream;
    request.deadline = Some(NOW + Duration::from_millis(600_000));
    let id = pair.engines[CLIENT]
        .call(NOW, &mut pair.nodes[CLIENT], request)
        .expect("the server is reachable");
    pair.settle();
    assert_eq!(pair.jobs.len(), 1, "the server runs the call");

    // The procedure outlasts the server's ack delay: the caller is acknowledged, and commits.
    pair.advance_to(NOW + Duration::from_millis(1_000));
    let view = pair.engines[CLIENT].call_view(&id).unwrap();
    assert_eq!(view.acks, [name(SERVER)], "{:#?}", view.timeline);

    // The result goes on the stream and arrives; the caller dies before committing it.
    pair.client_commits = false;
    let job = pair.jobs.remove(0);
    pair.engines[SERVER].finished(
        pair.now,
        &mut pair.nodes[SERVER],
        job.id,
        rpc::Outcome::Success {
            value: Bytes::from_static(b"hi back"),
            files: vec![],
            run_ms: 500,
        },
    );
    pair.settle();
    pair.advance_to(NOW + Duration::from_millis(5_000));
    assert_eq!(
        pair.engines[CLIENT].call_state(&id),
        Some(CallState::Succeeded),
        "in the client's memory only"
    );
    let server = pair.nodes[SERVER].store();
    assert_eq!(server.rpc_scan(RpcTable::Outbox).unwrap(), vec![]);
    assert_eq!(server.rpc_scan(RpcTable::Dedup).unwrap().len(), 1);
    assert!(pair.engines[CLIENT].has_records_to_write());
    pair.crash_and_restart_client();
    assert_eq!(
        pair.engines[CLIENT].call_state(&id),
        Some(CallState::Waiting),
        "the result was never committed"
    );
    pair.link(true);

    pair.advance_to(NOW + Duration::from_millis(700_000));
    let view = pair.engines[CLIENT].call_view(&id).unwrap();
    let timeline: Vec<&str> = view.timeline.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(view.state, CallState::Succeeded, "{timeline:#?}");
    assert!(
        timeline.iter().any(|t| t.contains("call sent by dtn")),
        "{timeline:#?}"
    );
    assert_eq!(view.replies.len(), 1, "{timeline:#?}");
    assert_eq!(view.replies[0].via, "dtn", "{timeline:#?}");
    assert!(
        view.replies[0].at < NOW + Duration::from_millis(10_000),
        "at once, not at the deadline"
    );
    let stats = pair.engines[SERVER].stats();
    assert_eq!(stats.executions, 1, "{stats:?}");
    assert!(stats.duplicates >= 1, "{stats:?}");
    assert!(pair.jobs.is_empty(), "never run again");
}
