//! The bound on served-call records, under any mix of callers, copies, time and restarts: the
//! engine's count is always the store's rows, no caller holds more than its share, the table
//! never grows past its bound, and no call runs twice.

use bytes::Bytes;
use node::{Class, Delivery, Event, Node, NodeConfig};
use proptest::prelude::*;
use rpc::{ParamType, ProcedureSpec, Rpc, RpcConfig, RpcEvent};
use seal::Identity;
use std::collections::BTreeMap;
use std::time::Duration;
use store::{MemoryStore, RpcTable, Store};
use wire::rpc::{Call, CallId, Message, Mode, Transport, Value};
use wire::{BundleId, CreationTimestamp, DtnTime, Eid};

const START: DtnTime = DtnTime::from_millis(820_454_400_000);
const TOTAL: usize = 7;
const PER_CALLER: usize = 3;
const CALLERS: u8 = 3;

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn engine(node: &mut Node, now: DtnTime) -> Rpc {
    let mut config = RpcConfig {
        max_served_calls: TOTAL,
        max_served_calls_per_caller: PER_CALLER,
        finished_in_memory: 2,
        ..RpcConfig::default()
    };
    config
        .procedures
        .push(ProcedureSpec::new("echo", vec![ParamType::Text]));
    Rpc::new(config, Identity::from_secret([2; 32]), [9; 32], node, now)
}

fn server_node(store: Box<dyn Store + Send>, now: DtnTime) -> Node {
    Node::new(NodeConfig::new(eid("dtn://server/")), store, now)
}

fn caller_identity(caller: u8) -> Identity {
    Identity::from_secret([10 + caller; 32])
}

/// Call `id` of `caller`: its deadline follows from the id, so every copy carries the same one;
/// even ids name `echo` (accepted and run), odd ones a procedure the server does not offer
/// (refused, the refusal recorded).
fn sealed_call(caller: u8, id: u8) -> Bytes {
    let message = Message::Call(Call {
        id: CallId([id; 16]),
        caller: eid(&format!("dtn://c{caller}/")),
        mode: Mode::Explicit,
        server: Some(eid("dtn://server/")),
        procedure: if id.is_multiple_of(2) {
            "echo"
        } else {
            "nothing"
        }
        .into(),
        params: vec![Value::Text("x".into())],
        requirements: String::new(),
        deadline: START + Duration::from_secs(600 * (u64::from(id) + 1)),
        transport: Transport::Dtn,
    });
    let to = Identity::from_secret([2; 32]).public();
    let sealed = caller_identity(caller)
        .seal(&message.encode().unwrap(), Some(&to), [id; 32])
        .unwrap();
    Bytes::from(sealed)
}

#[derive(Debug, Clone)]
enum Step {
    /// A call (or a copy of one) arrives.
    Call { caller: u8, id: u8 },
    /// Time passes by this many seconds (timers and sweeps run).
    Wait(u64),
    /// The server restarts on its store.
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..CALLERS, 0..12u8).prop_map(|(caller, id)| Step::Call { caller, id }),
        2 => (0..5_000u64).prop_map(Step::Wait),
        1 => Just(Step::Restart),
    ]
}

/// The dedup rows in the store, per caller key.
fn rows_by_caller(node: &Node) -> BTreeMap<Vec<u8>, usize> {
    let mut by = BTreeMap::new();
    for (key, _) in node.store().rpc_scan(RpcTable::Dedup).unwrap() {
        *by.entry(key[8..40].to_vec()).or_default() += 1;
    }
    by
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_count_is_the_stores_rows_and_no_bound_is_passed_whatever_arrives(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        let mut now = START;
        let mut node = server_node(Box::new(MemoryStore::new(1 << 24)), now);
        let mut rpc = engine(&mut node, now);
        let mut runs: BTreeMap<(u8, u8), usize> = BTreeMap::new();
        let mut seq = 0;
        for step in steps {
            match step {
                Step::Call { caller, id } => {
                    seq += 1;
                    let event = Event::Delivered(Delivery {
                        id: BundleId {
                            source: eid(&format!("dtn://c{caller}/~rpc")),
                            creation: CreationTimestamp { time: now, sequence: seq },
                            fragment: None,
                        },
                        destination: eid("dtn://server/~rpc"),
                        class: Class::Dtn,
                        created: now,
                        expiry: now + Duration::from_secs(60),
                        payload: sealed_call(caller, id),
                    });
                    prop_assert!(rpc.handle_node_event(now, &mut node, &event));
                    let jobs: Vec<rpc::Job> = std::iter::from_fn(|| rpc.poll_event())
                        .filter_map(|e| match e {
                            RpcEvent::Execute(job) => Some(job),
                            _ => None,
                        })
                        .collect();
                    for job in jobs {
                        *runs.entry((caller, id)).or_default() += 1;
                        rpc.finished(
                            now,
                            &mut node,
                            job.id,
                            rpc::Outcome::Success {
                                value: Bytes::from_static(b"x"),
                                files: vec![],
                                run_ms: 1,
                            },
                        );
                    }
                }
                Step::Wait(secs) => {
                    now += Duration::from_secs(secs);
                    while let Some(t) = rpc.poll_timeout().filter(|t| *t <= now) {
                        rpc.handle_timeout(t, &mut node);
                    }
                }
                Step::Restart => {
                    node = server_node(node.into_store(), now);
                    rpc = engine(&mut node, now);
                }
            }
            let by_caller = rows_by_caller(&node);
            let rows: usize = by_caller.values().sum();
            prop_assert_eq!(rpc.served_records(), rows, "the count is the store's rows");
            prop_assert!(rows <= TOTAL, "{rows} rows");
            prop_assert!(by_caller.values().all(|&n| n <= PER_CALLER), "{by_caller:?}");
            prop_assert!(runs.values().all(|&n| n == 1), "a call ran twice: {runs:?}");
        }
    }
}
