//! A stateful target: drives `node` and `rpc` together through the simulator with a network,
//! calls, link changes and restarts all drawn from the input, and checks the invariants Ferry
//! owes every run.
//!
//! The input is read as a script: a header (seed, node count, topology, loss, what the servers
//! do) and then 6-byte steps, each a call (from, target, mode, transport, deadline), a restart
//! of a node, or a link going down or up between two nodes. Invariants:
//!
//! - the simulator's own: no bundle delivered twice, none that was never sent, none altered,
//!   none held past its lifetime, every store within its quota (`Sim::run` returns `Ok`);
//! - at most once: no call ran twice on any server;
//! - every call that was made ended by its deadline (plus the engine's timer slack).

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use libfuzzer_sys::fuzz_target;
use node::StrategyKind;
use rpc::{CallRequest, Param, ParamType, Target};
use sim::rpc::{Behaviour, RpcApp, procedure};
use sim::{SIM_EPOCH, Scenario, Sim, Topology, node_id};
use std::time::Duration;
use wire::rpc::{Transport, Value};

/// Virtual length of a run.
const RUN_MS: u64 = 240_000;
/// How long after its deadline a call may take to be noticed as ended (timers fire on the next
/// sweep).
const END_SLACK_MS: u64 = 5_000;

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let (header, steps) = data.split_at(12);
    let seed = u64::from_le_bytes(header[..8].try_into().unwrap());
    let nodes = 2 + usize::from(header[8] % 5);
    let topology = match header[9] % 3 {
        0 => Topology::Hub { nodes },
        1 => Topology::Chained { nodes },
        _ => Topology::Islands {
            nodes: nodes.max(4),
            islands: 2,
            period_ms: 5_000 + u64::from(header[10]) * 500,
        },
    };
    let nodes = topology.nodes();
    let mut app = RpcApp::new(nodes);
    let run_ms = u64::from(header[11] % 16) * 500;
    for i in 0..nodes {
        let behaviour = if (header[11] >> 4) & (1 << (i % 4)) != 0 {
            Behaviour::Fail { run_ms }
        } else {
            Behaviour::Echo { run_ms }
        };
        app.offer(i, procedure("echo", &[ParamType::Text], behaviour));
    }
    let mut scenario = Scenario::new(seed, topology, StrategyKind::Epidemic, RUN_MS);
    scenario.link.loss = f64::from(header[10] % 4) * 0.1;
    scenario.workload.bundles = 0;
    let mut calls = Vec::new();
    let mut schedule = Vec::new();
    for (tag, step) in steps.chunks_exact(6).take(24).enumerate() {
        let at_ms = 1_000 + u64::from(step[1]) * 800;
        let a = usize::from(step[2]) % nodes;
        let b = usize::from(step[3]) % nodes;
        match step[0] % 8 {
            0..=4 => {
                let target = match step[0] % 3 {
                    0 => Target::Node(node_id(b)),
                    1 => Target::Any,
                    _ => Target::All,
                };
                let mut request = CallRequest::new(
                    target,
                    "echo",
                    vec![Param::Value(Value::Text(format!("{tag}")))],
                );
                request.transport = match step[4] % 4 {
                    0 => Transport::Auto,
                    1 => Transport::Datagram,
                    2 => Transport::Stream,
                    _ => Transport::Dtn,
                };
                let deadline_ms = at_ms + 2_000 + u64::from(step[5]) * 400;
                request.deadline = Some(SIM_EPOCH + Duration::from_millis(deadline_ms));
                let tag = tag as u64;
                app.script(tag, request);
                calls.push((tag, deadline_ms));
                schedule.push((at_ms, a, Some(tag), None));
            }
            5 => schedule.push((at_ms, a, None, None)),
            _ if a != b => schedule.push((at_ms, a, None, Some((b, step[0] % 8 == 6)))),
            _ => {}
        }
    }
    let mut sim = Sim::with_app(scenario, app);
    for (at_ms, a, call, link) in schedule {
        match (call, link) {
            (Some(tag), _) => sim.schedule_action(at_ms, a, tag),
            (None, Some((b, up))) => sim.schedule_link(at_ms, a, b, up),
            (None, None) => sim.schedule_restart(at_ms, a),
        }
    }
    if let Err(v) = sim.run_in_place() {
        panic!("{v}");
    }
    let app = sim.app();
    assert!(app.max_executions() <= 1, "a call ran twice");
    for (tag, deadline_ms) in calls {
        let Some(made) = app.made_by(tag) else {
            continue;
        };
        if made.id.is_err() || deadline_ms + END_SLACK_MS > RUN_MS {
            continue;
        }
        assert!(
            app.outcome(tag).is_some(),
            "call {tag} (deadline {deadline_ms} ms) had not ended at {RUN_MS} ms"
        );
    }
});
