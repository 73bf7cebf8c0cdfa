//! DTN-RPC in the simulator: every addressing mode and transport on the paper's topologies, with
//! broken paths, duplicates, restarts, deadlines, rejections, nested calls and load.

use node::StrategyKind;
use rpc::{CallRequest, CallState, Param, ParamType, Target};
use sim::rpc::{Behaviour, RpcApp, procedure};
use sim::{Scenario, Sim, Topology, node_id};
use std::time::Duration;
use store::RpcTable;
use wire::rpc::{Message, Mode, Transport, Value};

fn text(s: &str) -> Param {
    Param::Value(Value::Text(s.to_string()))
}

fn echo_everywhere(app: &mut RpcApp, nodes: usize, run_ms: u64) {
    for i in 0..nodes {
        app.offer(
            i,
            procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms }),
        );
    }
}

fn result_value(view: &rpc::CallView) -> Vec<String> {
    view.replies
        .iter()
        .filter_map(|r| match &r.message {
            Message::Result(res) => Some(String::from_utf8_lossy(&res.value).into_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn explicit_call_over_a_live_chain_uses_a_stream() {
    let nodes = 4;
    let mut app = RpcApp::new(nodes);
    echo_everywhere(&mut app, nodes, 50);
    app.script(
        1,
        CallRequest::new(Target::Node(node_id(3)), "echo", vec![text("hi")]),
    );
    let scenario = Scenario::new(
        1,
        Topology::Chained { nodes },
        StrategyKind::Epidemic,
        60_000,
    );
    let mut sim = Sim::with_app(scenario, app);
    sim.schedule_action(10_000, 0, 1);
    sim.run_in_place().expect("no violation");
    let app = sim.app();
    let view = app.outcome(1).expect("the call finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert_eq!(result_value(view), vec!["hi@3".to_string()]);
    assert_eq!(view.replies[0].via, "stream", "{:#?}", view.timeline);
    assert_eq!(app.max_executions(), 1);
    // Node 1 had never heard from node 3, three hops away: their hellos, exchanged when the
    // mesh made them reachable, taught each the other's key, so the call was encrypted.
    let sent = &view.timeline[0].1;
    assert!(sent.ends_with(", encrypted"), "{sent}");
    // The stream delivered the result: the server keeps it for duplicates (dedup), and its
    // outbox, which a restart would resend from, is empty again.
    let store = sim.node(3).store();
    assert_eq!(store.rpc_scan(RpcTable::Dedup).expect("scan").len(), 1);
    assert_eq!(store.rpc_scan(RpcTable::Outbox).expect("scan"), vec![]);
}

/// One simulated run: `setup` configures the app and schedules, the run goes to `duration_ms`.
fn run(
    seed: u64,
    topology: Topology,
    duration_ms: u64,
    setup: impl FnOnce(&mut RpcApp),
    schedule: impl FnOnce(&mut Sim<RpcApp>),
) -> Sim<RpcApp> {
    let mut app = RpcApp::new(topology.nodes());
    setup(&mut app);
    let scenario = Scenario::new(seed, topology, StrategyKind::Epidemic, duration_ms);
    let mut sim = Sim::with_app(scenario, app);
    schedule(&mut sim);
    if let Err(v) = sim.run_in_place() {
        panic!("{v}");
    }
    sim
}

fn request(target: Target, transport: Transport, deadline_s: u64) -> CallRequest {
    let mut r = CallRequest::new(target, "echo", vec![text("x")]);
    r.transport = transport;
    r.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(deadline_s * 1_000));
    r
}

#[test]
fn every_mode_and_transport_on_hub_chained_and_islands() {
    let topologies = [
        ("hub", Topology::Hub { nodes: 8 }),
        ("chained", Topology::Chained { nodes: 6 }),
        (
            "islands",
            Topology::Islands {
                nodes: 12,
                islands: 3,
                period_ms: 20_000,
            },
        ),
    ];
    let modes = [
        ("explicit", Mode::Explicit),
        ("any", Mode::Any),
        ("all", Mode::All),
    ];
    let transports = [
        Transport::Auto,
        Transport::Datagram,
        Transport::Stream,
        Transport::Dtn,
    ];
    for (name, topology) in topologies {
        let nodes = topology.nodes();
        // In Islands, node 1 shares node 0's island; the last node is in another one.
        let far = nodes - 1;
        for (mode_name, mode) in modes {
            for transport in transports {
                if transport == Transport::Stream && mode != Mode::Explicit {
                    continue; // refused at the call: covered below
                }
                let forced_realtime = matches!(transport, Transport::Datagram | Transport::Stream);
                let target = match mode {
                    Mode::Explicit if forced_realtime && name == "islands" => {
                        Target::Node(node_id(1))
                    }
                    Mode::Explicit => Target::Node(node_id(far)),
                    Mode::Any => Target::Any,
                    Mode::All => Target::All,
                };
                let deadline_s = 400;
                let sim = run(
                    7,
                    topology.clone(),
                    deadline_s * 1_000 + 1_000,
                    |app| {
                        echo_everywhere(app, nodes, 200);
                        app.script(1, request(target.clone(), transport, deadline_s));
                    },
                    |sim| sim.schedule_action(5_000, 0, 1),
                );
                let app = sim.app();
                let case = format!("{name} {mode_name} {transport}");
                let made = app.made_by(1).expect("the script ran");
                assert!(made.id.is_ok(), "{case}: {:?}", made.id);
                let view = app
                    .outcome(1)
                    .unwrap_or_else(|| panic!("{case}: the call never finished"));
                assert_eq!(
                    view.state,
                    CallState::Succeeded,
                    "{case}: {:#?}",
                    view.timeline
                );
                let results = result_value(view);
                assert!(
                    app.max_executions() <= 1,
                    "{case}: a call ran twice on one server"
                );
                match mode {
                    Mode::Explicit => {
                        let server = if forced_realtime && name == "islands" {
                            1
                        } else {
                            far
                        };
                        assert_eq!(results, vec![format!("x@{server}")], "{case}");
                    }
                    Mode::Any => assert_eq!(results.len(), 1, "{case}: {results:?}"),
                    Mode::All => {
                        assert!(!results.is_empty(), "{case}");
                        if name != "islands" {
                            // Everyone else is connected all along: every server answers.
                            assert_eq!(results.len(), nodes - 1, "{case}: {results:?}");
                        }
                    }
                }
                let vias: Vec<&str> = view.replies.iter().map(|r| r.via).collect();
                match (mode, transport) {
                    (_, Transport::Dtn) => {
                        assert!(vias.iter().all(|v| *v == "dtn"), "{case}: {vias:?}")
                    }
                    (Mode::Explicit, Transport::Stream) => assert_eq!(vias, ["stream"], "{case}"),
                    (Mode::Explicit, Transport::Datagram) => {
                        assert_eq!(vias, ["datagram"], "{case}")
                    }
                    (Mode::Explicit, Transport::Auto) if name != "islands" => {
                        assert_eq!(vias, ["stream"], "{case}")
                    }
                    (Mode::Any | Mode::All, Transport::Auto | Transport::Datagram)
                        if name != "islands" =>
                    {
                        assert!(vias.iter().all(|v| *v == "datagram"), "{case}: {vias:?}")
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn a_stream_call_without_a_server_or_a_route_is_refused_at_once() {
    let sim = run(
        3,
        Topology::Islands {
            nodes: 8,
            islands: 2,
            period_ms: 1_000_000,
        },
        20_000,
        |app| {
            echo_everywhere(app, 8, 10);
            app.script(1, request(Target::Any, Transport::Stream, 100));
            app.script(2, request(Target::Node(node_id(7)), Transport::Stream, 100));
            app.script(
                3,
                request(Target::Node(node_id(7)), Transport::Datagram, 100),
            );
        },
        |sim| {
            for tag in 1..=3 {
                sim.schedule_action(5_000, 0, tag);
            }
        },
    );
    let app = sim.app();
    let err = |tag| match app.made_by(tag).unwrap().id.clone().unwrap_err() {
        sim::rpc::NotMade::Refused(e) => e,
        other => panic!("{other}"),
    };
    assert!(
        matches!(*err(1), rpc::CallError::StreamNeedsServer),
        "{}",
        err(1)
    );
    assert!(
        matches!(*err(2), rpc::CallError::NotReachable(_)),
        "{}",
        err(2)
    );
    assert!(
        matches!(*err(3), rpc::CallError::NotReachable(_)),
        "{}",
        err(3)
    );
}

fn slow(app: &mut RpcApp, i: usize, run_ms: u64) {
    app.offer(
        i,
        procedure("slow", &[ParamType::Text], Behaviour::Echo { run_ms }),
    );
}

fn slow_request(target: Target, deadline_s: u64) -> CallRequest {
    let mut r = CallRequest::new(target, "slow", vec![text("s")]);
    r.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(deadline_s * 1_000));
    r
}

#[test]
fn path_broken_after_the_call_the_result_arrives_by_dtn() {
    // 0 - 1 - 2; the call goes by stream at 5 s, the link 1-2 breaks at 8 s while the procedure
    // runs (20 s) and comes back at 60 s.
    let sim = run(
        11,
        Topology::Chained { nodes: 3 },
        200_000,
        |app| {
            slow(app, 2, 20_000);
            app.script(1, slow_request(Target::Node(node_id(2)), 300));
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_link(8_000, 1, 2, false);
            sim.schedule_link(60_000, 1, 2, true);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    for (at, line) in &view.timeline {
        eprintln!("+{:.3} s  {line}", (*at - sim::SIM_EPOCH).as_secs_f64());
    }
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert_eq!(result_value(view), ["s@2"]);
    assert_eq!(view.replies[0].via, "dtn", "{:#?}", view.timeline);
    assert!(view.replies[0].at >= sim::SIM_EPOCH + Duration::from_millis(60_000));
    let text: Vec<&str> = view.timeline.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        text[0].starts_with("called dtn://n2/ by stream"),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|t| t.starts_with("ack from dtn://n2/")),
        "{text:#?}"
    );
    assert!(text.iter().any(|t| t.contains("path lost")), "{text:#?}");
    assert_eq!(app.max_executions(), 1);
}

#[test]
fn a_call_arriving_by_datagram_and_by_dtn_runs_once() {
    // The server acknowledges only after 5 s, the client waits 2 s for an ack: it sends the call
    // by dtn as well, while the first copy runs.
    let sim = run(
        12,
        Topology::Chained { nodes: 3 },
        100_000,
        |app| {
            slow(app, 2, 10_000);
            app.configure(2, |c| c.ack_delay = Duration::from_millis(5_000));
            let mut r = slow_request(Target::Node(node_id(2)), 90);
            r.transport = Transport::Auto;
            r.timers = Some(rpc::Timers {
                ack_timeout: Duration::from_millis(2_000),
                ..rpc::Timers::default()
            });
            app.script(1, r);
        },
        |sim| sim.schedule_action(5_000, 0, 1),
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    let text: Vec<&str> = view.timeline.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        text.iter().any(|t| t.contains("call sent by dtn")),
        "{text:#?}"
    );
    let server = sim.engine(2).unwrap().stats();
    assert!(server.duplicates >= 1, "{server:?}");
    assert_eq!(server.executions, 1);
    assert_eq!(app.max_executions(), 1);
}

#[test]
fn a_server_restarted_with_a_pending_result_still_delivers_it() {
    // The result is ready at 25 s while the only link to the client is down: it waits in the
    // server's store. The server restarts at 40 s; the link returns at 60 s.
    let sim = run(
        13,
        Topology::Chained { nodes: 2 },
        200_000,
        |app| {
            slow(app, 1, 20_000);
            let mut r = slow_request(Target::Node(node_id(1)), 300);
            r.transport = Transport::Dtn;
            app.script(1, r);
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_link(10_000, 0, 1, false);
            sim.schedule_restart(40_000, 1);
            sim.schedule_link(60_000, 0, 1, true);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert!(view.replies[0].at >= sim::SIM_EPOCH + Duration::from_millis(60_000));
    assert_eq!(app.max_executions(), 1);
}

#[test]
fn a_server_restarted_while_running_reports_it_and_never_runs_it_again() {
    let sim = run(
        14,
        Topology::Chained { nodes: 2 },
        120_000,
        |app| {
            slow(app, 1, 30_000);
            let mut r = slow_request(Target::Node(node_id(1)), 100);
            r.transport = Transport::Dtn;
            app.script(1, r);
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_restart(15_000, 1);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Failed, "{:#?}", view.timeline);
    match &view.replies[0].message {
        Message::Reject(r) => {
            // It ran: the caller is told its result was lost, not that it never ran.
            assert_eq!(r.code, wire::rpc::RejectCode::ResultLost);
            assert!(
                r.detail.contains("the procedure ran") && r.detail.contains("restarted"),
                "{}",
                r.detail
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(app.max_executions(), 1);
}

#[test]
fn an_idempotent_procedure_cut_off_by_a_restart_runs_again_and_answers_once() {
    let sim = run(
        14,
        Topology::Chained { nodes: 2 },
        120_000,
        |app| {
            let mut p = procedure(
                "slow",
                &[ParamType::Text],
                Behaviour::Echo { run_ms: 30_000 },
            );
            p.spec.idempotent = true;
            app.offer(1, p);
            let mut r = slow_request(Target::Node(node_id(1)), 100);
            r.transport = Transport::Dtn;
            app.script(1, r);
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_restart(15_000, 1);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert_eq!(view.replies.len(), 1, "one result");
    // Run again from the restart (15 s) for its 30 s: the result cannot be the first run's.
    assert!(view.replies[0].at >= sim::SIM_EPOCH + Duration::from_millis(45_000));
    assert_eq!(
        app.max_executions(),
        2,
        "the cut-off run and the one after the restart"
    );
}

#[test]
fn a_client_restarted_with_a_pending_call_receives_the_late_result() {
    let sim = run(
        15,
        Topology::Chained { nodes: 3 },
        200_000,
        |app| {
            slow(app, 2, 30_000);
            app.script(1, slow_request(Target::Node(node_id(2)), 300));
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_restart(10_000, 0);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished after the restart");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    let text: Vec<&str> = view.timeline.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        text.iter().any(|t| t.contains("resumed after a restart")),
        "{text:#?}"
    );
    assert_eq!(app.max_executions(), 1);
}

#[test]
fn a_call_nobody_can_reach_expires_at_its_deadline() {
    let sim = run(
        16,
        Topology::Islands {
            nodes: 6,
            islands: 2,
            period_ms: 10_000_000,
        },
        100_000,
        |app| {
            echo_everywhere(app, 6, 10);
            app.script(1, request(Target::Node(node_id(5)), Transport::Auto, 40));
        },
        |sim| sim.schedule_action(5_000, 0, 1),
    );
    let view = sim.app().outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Expired, "{:#?}", view.timeline);
    let (at, last) = view.timeline.last().unwrap();
    assert_eq!(*at, sim::SIM_EPOCH + Duration::from_millis(40_000));
    assert!(last.contains("deadline"), "{last}");
}

#[test]
fn predicates_and_allow_lists_reject_with_a_reason() {
    let sim = run(
        17,
        Topology::Hub { nodes: 3 },
        60_000,
        |app| {
            let mut gps = procedure("locate", &[], Behaviour::Echo { run_ms: 1 });
            gps.spec.require = "has(gps)".parse().unwrap();
            app.offer(1, gps);
            let mut private = procedure("private", &[], Behaviour::Echo { run_ms: 1 });
            private.spec.allow = Some([app.key(2)].into_iter().collect());
            app.offer(1, private);
            echo_everywhere(app, 3, 1);
            let mut battery = CallRequest::new(Target::Node(node_id(1)), "echo", vec![text("b")]);
            battery.requirements = "battery >= 50".into();
            app.script(
                1,
                CallRequest::new(Target::Node(node_id(1)), "locate", vec![]),
            );
            app.script(
                2,
                CallRequest::new(Target::Node(node_id(1)), "private", vec![]),
            );
            app.script(3, battery);
            app.script(
                4,
                CallRequest::new(Target::Node(node_id(1)), "nothing", vec![]),
            );
            app.script(
                5,
                CallRequest::new(Target::Node(node_id(1)), "echo", vec![]),
            );
            app.script(
                6,
                CallRequest::new(Target::Node(node_id(1)), "private", vec![]),
            );
        },
        |sim| {
            for tag in 1..=5 {
                sim.schedule_action(5_000, 0, tag);
            }
            sim.schedule_action(5_000, 2, 6);
        },
    );
    let app = sim.app();
    let reject = |tag| {
        let view = app.outcome(tag).expect("finished");
        assert_eq!(view.state, CallState::Failed, "{:#?}", view.timeline);
        match &view.replies[0].message {
            Message::Reject(r) => (r.code, r.detail.clone()),
            other => panic!("{other:?}"),
        }
    };
    use wire::rpc::RejectCode as C;
    let (code, detail) = reject(1);
    assert_eq!(code, C::PredicateFailed);
    assert!(detail.contains("has(gps)"), "{detail}");
    assert_eq!(reject(2).0, C::NotAllowed);
    let (code, detail) = reject(3);
    assert_eq!(code, C::PredicateFailed);
    assert!(detail.contains("battery"), "{detail}");
    assert_eq!(reject(4).0, C::NotOffered);
    let (code, detail) = reject(5);
    assert_eq!(code, C::BadArguments);
    assert!(detail.contains("expected 1 parameters"), "{detail}");
    // The allowed key gets through.
    assert_eq!(app.outcome(6).unwrap().state, CallState::Succeeded);
    assert_eq!(sim.engine(1).unwrap().stats().executions, 1);
}

#[test]
fn nested_calls_a_to_b_to_a_complete_without_deadlock() {
    let sim = run(
        18,
        Topology::Chained { nodes: 2 },
        60_000,
        |app| {
            app.offer(
                1,
                procedure(
                    "relay",
                    &[ParamType::Text],
                    Behaviour::Nested {
                        target: Target::Node(node_id(0)),
                        procedure: "echo".into(),
                    },
                ),
            );
            app.offer(
                0,
                procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms: 10 }),
            );
            app.script(1, {
                let mut r =
                    CallRequest::new(Target::Node(node_id(1)), "relay", vec![text("cycle")]);
                r.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(50_000));
                r
            });
        },
        |sim| sim.schedule_action(5_000, 0, 1),
    );
    let view = sim.app().outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert_eq!(result_value(view), ["1<cycle@0"]);
}

#[test]
fn a_thousand_calls_in_flight_to_many_servers() {
    thousand_calls(None);
}

#[test]
fn a_thousand_calls_with_few_finished_calls_kept_in_memory() {
    // Every node keeps 8 finished calls in memory: the rest leave it as the run goes, and
    // every call still ends once, with its result, run once.
    thousand_calls(Some(8));
}

fn thousand_calls(finished_in_memory: Option<usize>) {
    let nodes = 11;
    let calls = 1_000u64;
    let sim = run(
        19,
        Topology::Hub { nodes },
        120_000,
        |app| {
            echo_everywhere(app, nodes, 2_000);
            for i in 0..nodes {
                app.configure(i, |c| {
                    for p in &mut c.procedures {
                        p.max_concurrent = 1_000;
                    }
                    if let Some(n) = finished_in_memory {
                        c.finished_in_memory = n;
                    }
                });
            }
            for tag in 0..calls {
                let server = 1 + (tag as usize % (nodes - 1));
                let mut r = CallRequest::new(
                    Target::Node(node_id(server)),
                    "echo",
                    vec![text(&format!("c{tag}:"))],
                );
                r.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(100_000));
                app.script(tag, r);
            }
        },
        |sim| {
            for tag in 0..calls {
                sim.schedule_action(5_000 + tag, 0, tag);
            }
        },
    );
    let app = sim.app();
    let mut ok = 0;
    for tag in 0..calls {
        let view = app
            .outcome(tag)
            .unwrap_or_else(|| panic!("call {tag} never finished"));
        assert_eq!(
            view.state,
            CallState::Succeeded,
            "call {tag}: {:#?}",
            view.timeline
        );
        let server = 1 + (tag as usize % (nodes - 1));
        assert_eq!(result_value(view), [format!("c{tag}:@{server}")]);
        ok += 1;
    }
    assert_eq!(ok, calls);
    assert_eq!(app.max_executions(), 1);
    if let Some(n) = finished_in_memory {
        for i in 0..nodes {
            let (made, served) = sim.engine(i).unwrap().calls_in_memory();
            assert!(
                made <= n && served <= n,
                "node {i}: {made} made, {served} served"
            );
        }
    }
}

#[test]
fn any_mode_runs_on_one_server_when_the_others_hear_it_started() {
    // Everyone offers a 10 s procedure; the first server to accept tells the others.
    let sim = run(
        20,
        Topology::Hub { nodes: 6 },
        60_000,
        |app| {
            for i in 0..6 {
                slow(app, i, 10_000);
            }
            app.script(1, slow_request(Target::Any, 50));
        },
        |sim| sim.schedule_action(5_000, 0, 1),
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    let runs: u32 = app.executions.values().sum();
    let skipped: u64 = (1..6).map(|i| sim.engine(i).unwrap().stats().skipped).sum();
    // The broadcast reaches the five servers at once; each waits a random moment before it
    // starts, and those that hear STARTED first skip the call. Two that start within the time a
    // notice takes to cross hear each other's STARTED, and the one with the larger key stops:
    // whatever the draw, one execution runs to its end.
    let completed = runs - app.aborted as u32;
    assert_eq!(
        completed, 1,
        "runs {runs}, skipped {skipped}, aborted {}",
        app.aborted
    );
    assert!(
        runs <= 2,
        "runs {runs}: a third should have heard a STARTED"
    );
    assert_eq!(skipped, 4);
}

#[test]
fn any_mode_notices_count_only_from_trusted_servers() {
    // The same call, but servers 1–5 trust only server 1's notices (an operator who knows which
    // nodes serve): a notice from any other signer is ignored and counted, never a reason to
    // skip or stop a call. Whether another server starts before server 1 depends on the random
    // start waits, so several seeds are run, and in some of them one does.
    let mut untrusted_in_all = 0;
    for seed in 20..26 {
        let sim = run(
            seed,
            Topology::Hub { nodes: 6 },
            60_000,
            |app| {
                let trusted: std::collections::BTreeSet<_> = [app.key(1)].into();
                for i in 0..6 {
                    slow(app, i, 10_000);
                    app.configure(i, |c| c.trusted_servers = Some(trusted.clone()));
                }
                app.script(1, slow_request(Target::Any, 50));
            },
            |sim| sim.schedule_action(5_000, 0, 1),
        );
        let app = sim.app();
        let view = app.outcome(1).expect("finished");
        assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
        let stats: Vec<rpc::RpcStats> = (1..6).map(|i| sim.engine(i).unwrap().stats()).collect();
        untrusted_in_all += stats.iter().map(|s| s.untrusted_notices).sum::<u64>();
        let skipped: u64 = stats.iter().map(|s| s.skipped).sum();
        // Only server 1's notices count: whoever else started first, the servers that did not
        // run the call to its end skipped it (before starting, or stopping when server 1's
        // STARTED came) because of server 1 alone, and every other server's STARTED/DONE
        // reached them and was ignored.
        let runs: u32 = app.executions.values().sum();
        let completed = u64::from(runs) - app.aborted;
        assert_eq!(
            completed + skipped,
            5,
            "seed {seed}: runs {runs}, aborted {}, skipped {skipped}",
            app.aborted
        );
        // Server 1 skipped nothing unless it heard itself: it trusts its own key only, and
        // ignores the others' notices too.
        assert_eq!(stats[0].skipped, 0, "seed {seed}: {stats:?}");
    }
    assert!(
        untrusted_in_all > 0,
        "no untrusted notice was sent in any seed"
    );
}

#[test]
fn a_procedure_runs_at_most_its_concurrency_limit_at_once() {
    // "slow" runs 10 s with the default limit of one execution at a time. The second call comes
    // while the first runs and is refused with the count; the third comes after the first
    // finished and runs (the count went down again).
    let sim = run(
        19,
        Topology::Hub { nodes: 3 },
        60_000,
        |app| {
            slow(app, 1, 10_000);
            for tag in 1..=3 {
                app.script(tag, slow_request(Target::Node(node_id(1)), 50));
            }
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_action(6_000, 2, 2);
            sim.schedule_action(20_000, 2, 3);
        },
    );
    let app = sim.app();
    assert_eq!(app.outcome(1).unwrap().state, CallState::Succeeded);
    let second = app.outcome(2).expect("finished");
    assert_eq!(second.state, CallState::Failed, "{:#?}", second.timeline);
    match &second.replies[0].message {
        Message::Reject(r) => {
            assert_eq!(r.code, wire::rpc::RejectCode::PredicateFailed);
            assert!(r.detail.contains("running 1 of at most 1"), "{}", r.detail);
        }
        other => panic!("{other:?}"),
    }
    let third = app.outcome(3).expect("finished");
    assert_eq!(third.state, CallState::Succeeded, "{:#?}", third.timeline);
    assert_eq!(sim.engine(1).unwrap().stats().executions, 2);
}

#[test]
fn a_result_whose_file_misses_the_deadline_says_so() {
    // 0 - 1; a 4 MB file result (3.4 s at 10 Mbit/s) follows a result sent at about 6 s; the
    // link breaks at 6.5 s and comes back only after the call's 15 s deadline.
    let sim = run(
        20,
        Topology::Chained { nodes: 2 },
        40_000,
        |app| {
            app.offer(
                1,
                procedure(
                    "picture",
                    &[],
                    Behaviour::File {
                        size: 4_000_000,
                        run_ms: 1_000,
                    },
                ),
            );
            let mut r = CallRequest::new(Target::Node(node_id(1)), "picture", vec![]);
            r.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(15_000));
            app.script(1, r);
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_link(6_500, 0, 1, false);
            sim.schedule_link(30_000, 0, 1, true);
        },
    );
    let view = sim.app().outcome(1).expect("finished");
    assert_eq!(view.state, CallState::Failed, "{:#?}", view.timeline);
    assert_eq!(view.replies.len(), 1, "{:#?}", view.timeline);
    assert!(view.replies[0].missing_files > 0);
    let (_, last) = view.timeline.last().unwrap();
    assert_eq!(
        last,
        "failed: deadline: a result came but its files did not"
    );
}

#[test]
fn a_server_restarted_before_its_stream_reply_got_through_answers_the_call_again_by_dtn() {
    // 0 - 1 - 2, 6 ms a hop. The call reaches n2 by stream at ≈5012 ms, the 100 ms procedure
    // answers at ≈5112 ms, before any ack: the reply goes on the stream with no outbox row (the
    // caller still holds the call as unacknowledged). Link 0-1 breaks at 5115 ms with the reply
    // on its way, and n2 restarts at 5117 ms, before it hears of the break: the reply is gone
    // with its stream. The caller, whose stream broke before an ack, sends the call by dtn; when
    // the link returns at 20 s, n2 answers the copy from its dedup record, without running it.
    let sim = run(
        21,
        Topology::Chained { nodes: 3 },
        120_000,
        |app| {
            slow(app, 2, 100);
            app.script(1, slow_request(Target::Node(node_id(2)), 100));
        },
        |sim| {
            sim.schedule_action(5_000, 0, 1);
            sim.schedule_link(5_115, 0, 1, false);
            sim.schedule_restart(5_117, 2);
            sim.schedule_link(20_000, 0, 1, true);
        },
    );
    let app = sim.app();
    let view = app.outcome(1).expect("finished");
    let text: Vec<String> = view
        .timeline
        .iter()
        .map(|(at, t)| format!("+{} ms  {t}", (*at - sim::SIM_EPOCH).as_millis()))
        .collect();
    for line in &text {
        eprintln!("{line}");
    }
    assert_eq!(view.state, CallState::Succeeded, "{text:#?}");
    assert!(
        text.iter()
            .any(|t| t.contains("stream path lost before an ack")),
        "{text:#?}"
    );
    assert_eq!(view.replies[0].via, "dtn", "{text:#?}");
    assert!(
        view.replies[0].at >= sim::SIM_EPOCH + Duration::from_millis(20_000),
        "{text:#?}"
    );
    assert_eq!(result_value(view), ["s@2"]);
    assert_eq!(app.max_executions(), 1);
    assert!(sim.engine(2).unwrap().stats().duplicates >= 1);
}

/// The daemon's commit and sync ordering (the host core every simulated node runs) under power
/// cuts in the paper's Islands dynamics: every few seconds some node (client, server or relay)
/// loses every commit its last finished sync did not cover. No call runs twice on a server, and
/// every call that became durable at its client (what the daemon answers its caller on) ends
/// with an answer or a reason.
#[test]
fn power_cuts_in_the_islands_never_run_a_call_twice_nor_lose_a_durable_call() {
    let nodes = 16;
    let topology = Topology::Islands {
        nodes,
        islands: 4,
        period_ms: 20_000,
    };
    let mut app = RpcApp::new(nodes);
    // Two seconds of running time: power cuts land while procedures run.
    echo_everywhere(&mut app, nodes, 2_000);
    let mut rng = sim::Rng::new(7);
    let calls = 60u64;
    for tag in 0..calls {
        let target = match tag % 3 {
            0 => Target::Any,
            1 => Target::All,
            _ => Target::Node(node_id(rng.below(nodes as u64) as usize)),
        };
        // Transparent (stream or datagram while there is a path, then DTN) and DTN alone.
        let transport = if tag % 2 == 0 {
            Transport::Dtn
        } else {
            Transport::Auto
        };
        let made_at_s = 10 + tag * 3;
        app.script(tag, request(target, transport, made_at_s + 120));
    }
    let mut scenario = Scenario::new(7, topology, StrategyKind::Epidemic, 420_000);
    scenario.workload.bundles = 0;
    // A slow disk (a worn SD card's fsync): each sync takes 250 ms, and commits nobody waits
    // for wait up to 100 ms more, so a cut often lands between a commit and its sync.
    scenario.disk = Some(sim::DiskModel { sync_ms: 250 });
    let mut sim = Sim::with_app(scenario, app);
    for tag in 0..calls {
        let client = rng.below(nodes as u64) as usize;
        sim.schedule_action((10 + tag * 3) * 1_000, client, tag);
    }
    // A power cut somewhere every 0.2-1.2 s until the last deadline is near.
    let mut at = 12_000;
    let mut cuts = 0;
    while at < 280_000 {
        sim.schedule_power_cut(at, rng.below(nodes as u64) as usize);
        cuts += 1;
        at += 200 + rng.below(1_000);
    }
    if let Err(v) = sim.run_in_place() {
        panic!("{v}");
    }
    let (commits, lost): (u64, u64) = (0..nodes)
        .map(|i| sim.commits(i))
        .fold((0, 0), |(c, l), (ci, li)| (c + ci, l + li));
    assert!(
        lost > 0,
        "{cuts} power cuts lost none of {commits} commits: the disk model is not biting"
    );
    let app = sim.app();
    assert_eq!(
        app.max_executions(),
        1,
        "a call ran twice on a server after a power cut"
    );
    let durable: Vec<_> = app.made.iter().filter(|m| m.durable_at.is_some()).collect();
    assert!(
        durable.len() * 10 >= calls as usize * 9,
        "only {} of {calls} calls became durable",
        durable.len()
    );
    let mut answered = 0;
    for made in &durable {
        let view = app.outcome(made.tag).unwrap_or_else(|| {
            panic!(
                "call {} was durable at node {} and never ended",
                made.tag, made.node
            )
        });
        assert_ne!(view.state, CallState::Waiting);
        if view.state == CallState::Succeeded {
            answered += 1;
        }
    }
    assert!(
        answered * 2 >= durable.len(),
        "only {answered} of {} durable calls were answered",
        durable.len()
    );
    eprintln!(
        "{cuts} power cuts lost {lost} of {commits} commits; {} of {calls} calls durable, \
         {answered} answered; {} executions",
        durable.len(),
        app.executions.len()
    );
}
