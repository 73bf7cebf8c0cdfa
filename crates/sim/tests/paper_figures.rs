//! Ferry's targets against the DTN-RPC paper (docs/performance.md, "Targets"), measured in the
//! simulator (`sim::paper`): the dtn-path RTT across the 32-node chain (paper ≈ 40 s, target
//! ≤ 1 s) and the Islands experiment with 100 MB files (Fig. 5; paper 27.8–41.9 % of calls
//! without a result, target: half the paper's loss in 210 s, none in 420 s). Each figure test
//! also checks that its verdict turns to a failure when the network is made slower, so a pass
//! means something.
//!
//! The whole Fig. 5 (six cells, three seeds, 30 calls, both budgets) takes about an hour on two
//! cores: `ferry sim --rpc fig5` runs it, and so does the ignored `fig5_every_cell_every_seed`
//! (`cargo test --release -p ferry-sim --test paper_figures -- --ignored fig5_every`). Here, in
//! CI's debug build, the explicit cell with 50 % servers runs its first ten calls with one seed:
//! every call moves 100 MB out and back and every node floods it on, and in any and all mode the
//! file goes to all 64 nodes, whose engines each hash (and for explicit calls open) every copy.
//!
//! The tests marked `ignore = "engine bug: …"` show bugs in `crates/rpc` and `crates/node` found
//! by these experiments; they fail (or hang, caught by a timeout) until the bug is fixed.

#![allow(clippy::disallowed_methods)]

use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use node::StrategyKind;
use rpc::{CallRequest, CallState, Param, ParamType, Target};
use sim::paper::{ChainRtt, Fig5, Fig5Cell, PAPER_BUDGET_MS};
use sim::rpc::{Behaviour, RpcApp, procedure};
use sim::{LinkParams, Scenario, Sim, Topology, node_id};
use wire::rpc::{Mode, Transport, Value};

// ----- dtn-path RTT over the paper's Chained topology -----

#[test]
fn chain_rtt_by_dtn_is_under_a_second_and_the_check_can_fail() {
    let rtt = ChainRtt {
        seeds: vec![1],
        transports: vec![Transport::Dtn],
        ..ChainRtt::default()
    };
    let table = rtt.run().expect("no invariant broken");
    eprintln!("{table}");
    let row = &table.rows[0];
    assert_eq!(row.calls, 30);
    assert_eq!(row.no_result, 0, "{table}");
    assert_eq!(row.result_via.get("dtn"), Some(&30), "{table}");
    let max = *row.rtts_ms.last().unwrap();
    assert!(max <= 1_000, "dtn RTT max {max} ms over 31 hops:\n{table}");
    // 31 hops × 5 ms each way is the floor; a figure below it would mean the links were skipped.
    assert!(row.rtts_ms[0] >= 2 * 31 * 5, "{table}");
    assert!(table.passes(), "{table}");

    // The same check fails on slower links: 40 ms per hop puts the floor at 2.5 s.
    let slow = ChainRtt {
        calls: 3,
        link: LinkParams {
            latency_ms: 40,
            ..rtt.link
        },
        ..rtt.clone()
    };
    let table = slow.run().expect("no invariant broken");
    assert!(!table.passes(), "40 ms links should miss 1 s:\n{table}");
}

// ----- Fig. 5: Islands, 100 MB -----

/// The Fig. 5 setup as the CI test runs it: the paper's explicit cell with 50 % servers (the
/// one the paper gives a figure for, 41.9 %), its first ten calls, seed 1, and the file budget
/// raised past the engine's bug (see `fig5_with_the_engines_file_budget`). The same run with all
/// 30 calls and seeds 1–3 is in `ferry sim --rpc fig5`.
fn fig5_ci() -> Fig5 {
    Fig5 {
        seeds: vec![1],
        cells: vec![Fig5Cell {
            mode: Mode::Explicit,
            servers_percent: 50,
        }],
        calls: 10,
        file_budget: 100_000_000_000,
        debug: std::env::var_os("FERRY_FIG5_DEBUG").is_some(),
        ..Fig5::default()
    }
}

fn check_runs(table: &sim::paper::Fig5Table) {
    for row in &table.rows {
        assert_eq!(row.calls(), table.setup.calls * table.setup.seeds.len());
        for run in &row.runs {
            assert!(run.max_executions <= 1, "a call ran twice: {run:?}");
            assert_eq!(
                run.results_realtime + run.results_dtn + run.no_result,
                run.calls,
                "{run:?}"
            );
            assert!(run.no_path <= run.no_result, "{run:?}");
            assert_eq!(run.result_ms.len(), run.calls - run.no_result, "{run:?}");
        }
    }
}

#[test]
fn fig5_explicit_calls_lose_under_half_the_papers_share_in_210_s() {
    let table = fig5_ci().run().expect("no invariant broken");
    eprintln!("{table}");
    check_runs(&table);
    // Real time carried some calls, dtn others (the islands split and join under them).
    let row = &table.rows[0];
    assert!(
        row.sum_results_realtime() > 0 && row.sum_called_dtn() > 0,
        "{table}"
    );
    assert!(table.passes(), "{table}");
}

#[test]
fn fig5_explicit_calls_lose_nothing_in_420_s() {
    let fig5 = Fig5 {
        budget_ms: 2 * PAPER_BUDGET_MS,
        ..fig5_ci()
    };
    let table = fig5.run().expect("no invariant broken");
    eprintln!("{table}");
    check_runs(&table);
    assert!(table.rows.iter().all(|r| r.target_percent == 0.0));
    assert!(table.passes(), "{table}");
}

#[test]
fn fig5_check_fails_with_half_the_time() {
    // With 105 s a call, a 100 MB file cannot go out and back across the islands' 3 to 8 hops
    // (8 s a hop at 100 Mbit/s) while they split and join. The same check must say so.
    let fig5 = Fig5 {
        budget_ms: PAPER_BUDGET_MS / 2,
        calls: 6,
        ..fig5_ci()
    };
    let table = fig5.run().expect("no invariant broken");
    eprintln!("{table}");
    check_runs(&table);
    assert!(!table.passes(), "{table}");
    assert!(table.rows[0].mean_no_result_percent() > 50.0, "{table}");
}

#[test]
#[ignore = "minutes in release: every cell, every seed, both budgets (ferry sim --rpc fig5)"]
fn fig5_every_cell_every_seed() {
    let mut failed = Vec::new();
    for budget_ms in [PAPER_BUDGET_MS, 2 * PAPER_BUDGET_MS] {
        let fig5 = Fig5 {
            budget_ms,
            file_budget: 100_000_000_000,
            ..Fig5::default()
        };
        // The topology itself leaves some calls no path in time; those are reported, not excused.
        let table = fig5.run().expect("no invariant broken");
        eprintln!("{table}");
        if !table.passes() {
            failed.push(table.to_string());
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn fig5_with_the_engines_file_budget() {
    let fig5 = Fig5 {
        budget_ms: 2 * PAPER_BUDGET_MS,
        calls: 30,
        file_budget: rpc::RpcConfig::default().max_file_bytes,
        ..fig5_ci()
    };
    let table = fig5.run().expect("no invariant broken");
    eprintln!("{table}");
    let refused: u64 = table
        .rows
        .iter()
        .flat_map(|r| &r.runs)
        .map(|r| r.client_files_refused)
        .sum();
    assert_eq!(refused, 0, "{table}");
    assert!(table.passes(), "{table}");
}

// ----- engine bugs the experiments found -----

fn file(tag: u8, size: usize) -> Param {
    let mut content = vec![tag; size];
    content[0] = 0xf1;
    Param::File {
        name: format!("f{tag}.bin"),
        content: Bytes::from(content),
    }
}

fn echo_files(app: &mut RpcApp, i: usize) {
    app.offer(
        i,
        procedure(
            "echo",
            &[ParamType::File],
            Behaviour::EchoFiles { run_ms: 10 },
        ),
    );
}

/// Runs `build` on a thread and fails if the run does not end within `limit` of wall time: an
/// engine that loops forever inside one event never returns to the simulator.
fn within<T: Send + 'static>(limit: Duration, build: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(build());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the run did not end within {limit:?}: an engine loops"))
}

#[test]
fn any_call_waiting_for_its_file_does_not_spin() {
    // Server::try_start returned without clearing `start_at` while a file was missing, and
    // arm_serving re-armed the timer at that past `start_at`: handle_timeout popped it again,
    // for ever. The file (1 MB at 10 Mbit/s: 0.8 s) always arrives after the jitter (≤ 250 ms).
    let state = within(Duration::from_secs(30), || {
        let mut app = RpcApp::new(2);
        echo_files(&mut app, 1);
        app.script(
            1,
            CallRequest::new(Target::Any, "echo", vec![file(1, 1_000_000)]),
        );
        let scenario = Scenario::new(
            1,
            Topology::Hub { nodes: 2 },
            StrategyKind::Epidemic,
            60_000,
        );
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(5_000, 0, 1);
        sim.run_in_place().expect("no invariant broken");
        sim.app().outcome(1).map(|v| v.state)
    });
    assert_eq!(state, Some(CallState::Succeeded));
}

#[test]
fn a_waiting_calls_result_file_is_not_refused_for_finished_calls_files() {
    // Eight calls, one every 10 s, each sending 100 MB and getting 100 MB back, on one 1 Gbit/s
    // link: each is done in 2 s. An engine kept every data-channel file (parameters received,
    // results made, its own parameters, results received) until the deadline of its call, 210 s,
    // however long ago the call ended, and refused any file that did not fit its 1 GiB budget:
    // the server refused the sixth parameter file (`files_refused`) though it reached the node,
    // the call waited for it until its deadline, holding the procedure's one slot, and the next
    // calls were refused ("running 1 of at most 1"). A client refused result files the same way
    // (in Fig. 5's any 50 % cell, where calls are quick, most of the loss was this). Now files
    // no call needs any more make room (`Rpc::make_room_for_files`).
    let mut app = RpcApp::new(2);
    echo_files(&mut app, 1);
    for tag in 0..8u8 {
        app.script(
            u64::from(tag),
            CallRequest::new(
                Target::Node(node_id(1)),
                "echo",
                vec![file(tag, 100_000_000)],
            ),
        );
    }
    let mut scenario = Scenario::new(
        1,
        Topology::Hub { nodes: 2 },
        StrategyKind::Epidemic,
        120_000,
    );
    scenario.link.bandwidth_bps = 1_000_000_000;
    scenario.quota = 10_000_000_000;
    let mut sim = Sim::with_app(scenario, app);
    for tag in 0..8 {
        sim.schedule_action(5_000 + tag * 10_000, 0, tag);
    }
    sim.run_in_place().expect("no invariant broken");
    let app = sim.app();
    let refused: u64 = (0..2)
        .map(|n| sim.engine(n).unwrap().stats().files_refused)
        .sum();
    let ended: Vec<Option<CallState>> = (0..8).map(|t| app.outcome(t).map(|v| v.state)).collect();
    assert_eq!(refused, 0, "calls: {ended:?}");
    assert!(
        ended.iter().all(|s| *s == Some(CallState::Succeeded)),
        "{ended:?}"
    );
}

#[test]
fn finished_calls_results_make_room_for_a_waiting_calls_result() {
    // A client keeping 5 MB of data-channel files calls four servers in turn, one every 20 s,
    // each answering with a 4 MB picture of its own (Fig. 5 at scale: 30 calls returning 100 MB
    // against 1 GiB). The engine counted the result files of every finished call it still kept
    // (for `retention_ms`, an hour) as needed, so the second picture did not fit and was refused,
    // and its call waited for it until its deadline. Now the result of the call that finished
    // longest ago makes room, and that call's timeline says so.
    let servers = 4;
    let mut app = RpcApp::new(servers + 1);
    app.configure(0, |c| c.max_file_bytes = 5_000_000);
    for s in 1..=servers {
        app.offer(
            s,
            procedure(
                "picture",
                &[],
                Behaviour::File {
                    size: 4_000_000,
                    run_ms: 100,
                },
            ),
        );
        app.script(
            s as u64,
            CallRequest::new(Target::Node(node_id(s)), "picture", vec![]),
        );
    }
    let scenario = Scenario::new(
        1,
        Topology::Hub { nodes: servers + 1 },
        StrategyKind::Epidemic,
        90_000,
    );
    let mut sim = Sim::with_app(scenario, app);
    for s in 1..=servers as u64 {
        sim.schedule_action(5_000 + (s - 1) * 20_000, 0, s);
    }
    sim.run_in_place().expect("no invariant broken");
    let app = sim.app();
    let engine = sim.engine(0).unwrap();
    let ended: Vec<Option<CallState>> = (1..=servers as u64)
        .map(|t| app.outcome(t).map(|v| v.state))
        .collect();
    assert!(
        ended.iter().all(|s| *s == Some(CallState::Succeeded)),
        "{ended:?}"
    );
    assert_eq!(engine.stats().files_refused, 0);
    for tag in 1..=servers as u64 {
        let id = app.made_by(tag).unwrap().id.clone().unwrap();
        let view = engine.call_view(&id).expect("a finished call is kept");
        let dropped: Vec<&String> = view
            .timeline
            .iter()
            .map(|(_, text)| text)
            .filter(|text| text.contains("dropped to make room for newer files"))
            .collect();
        let picture = match &view.replies[0].message {
            wire::rpc::Message::Result(r) => r.files[0].hash,
            other => panic!("{other:?}"),
        };
        let held = engine.file(sim.node(0), &picture).is_some();
        // Each picture made room for the next: only the last call's is still here.
        let last = tag == servers as u64;
        assert_eq!(dropped.len(), usize::from(!last), "{:#?}", view.timeline);
        assert_eq!(held, last, "call {tag}");
    }
}

#[test]
fn result_files_over_the_servers_file_budget_end_the_call_with_a_reason() {
    // Files a server makes count against its file budget like the files it receives: a result
    // that cannot fit even after the server drops what it may is answered "output too large",
    // with the sizes, instead of being kept over the budget.
    let mut app = RpcApp::new(2);
    app.configure(1, |c| c.max_file_bytes = 5_000_000);
    app.offer(
        1,
        procedure(
            "picture",
            &[],
            Behaviour::File {
                size: 8_000_000,
                run_ms: 100,
            },
        ),
    );
    app.script(
        1,
        CallRequest::new(Target::Node(node_id(1)), "picture", vec![]),
    );
    let scenario = Scenario::new(
        1,
        Topology::Hub { nodes: 2 },
        StrategyKind::Epidemic,
        60_000,
    );
    let mut sim = Sim::with_app(scenario, app);
    sim.schedule_action(5_000, 0, 1);
    sim.run_in_place().expect("no invariant broken");
    let app = sim.app();
    let view = app.outcome(1).expect("the call ended");
    assert_eq!(view.state, CallState::Failed, "{:#?}", view.timeline);
    match &view.replies[0].message {
        wire::rpc::Message::Reject(r) => {
            assert_eq!(r.code, wire::rpc::RejectCode::OutputTooLarge);
            assert!(
                r.detail.contains("8000000 bytes") && r.detail.contains("5000000"),
                "{}",
                r.detail
            );
        }
        other => panic!("{other:?}"),
    }
    let server = sim.engine(1).unwrap();
    assert_eq!(server.stats().files_refused, 1);
}

#[test]
fn an_auto_call_to_an_unreachable_server_goes_by_dtn_at_once() {
    // Two islands that never meet: node 5 is unreachable from node 0. Fig. 2 (and docs/rpc.md):
    // explicit and not reachable → dtn.
    let mut app = RpcApp::new(6);
    app.offer(
        5,
        procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms: 1 }),
    );
    app.script(
        1,
        CallRequest::new(
            Target::Node(node_id(5)),
            "echo",
            vec![Param::Value(Value::Text("x".into()))],
        ),
    );
    let topology = Topology::Islands {
        nodes: 6,
        islands: 2,
        period_ms: 10_000_000,
    };
    let scenario = Scenario::new(1, topology, StrategyKind::Epidemic, 30_000);
    let mut sim = Sim::with_app(scenario, app);
    sim.schedule_action(5_000, 0, 1);
    sim.run_in_place().expect("no invariant broken");
    let view = sim.engine(0).and_then(|e| {
        let id = sim.app().made_by(1)?.id.clone().ok()?;
        e.call_view(&id)
    });
    let view = view.expect("the call was made");
    let (_, first) = &view.timeline[0];
    assert!(first.contains(" by dtn"), "{:#?}", view.timeline);
}

#[test]
fn an_auto_call_across_the_32_node_chain_is_answered_by_stream() {
    // The paper's Chained topology is 31 hops; its MSP calls across it took under a second.
    // Node::reachable reports the far end (link state knows the whole chain), so the engine picks
    // a stream; stream and datagram bundles carried a hop limit of 16 (now 64,
    // NodeConfig::datagram_hop_limit): the stream was lost after 10 s, the call went by dtn,
    // and the hellos (datagrams) never arrived, so the first call was only signed.
    let nodes = 32;
    let mut app = RpcApp::new(nodes);
    app.offer(
        nodes - 1,
        procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms: 0 }),
    );
    app.script(
        1,
        CallRequest::new(
            Target::Node(node_id(nodes - 1)),
            "echo",
            vec![Param::Value(Value::Text("x".into()))],
        ),
    );
    let scenario = Scenario::new(1, Topology::chained(), StrategyKind::Epidemic, 60_000);
    let mut sim = Sim::with_app(scenario, app);
    sim.schedule_action(10_000, 0, 1);
    sim.run_in_place().expect("no invariant broken");
    let view = sim.app().outcome(1).expect("the call ended");
    assert_eq!(view.state, CallState::Succeeded, "{:#?}", view.timeline);
    assert_eq!(view.replies[0].via, "stream", "{:#?}", view.timeline);
    assert!(
        view.replies[0].at - view.created <= Duration::from_millis(1_000),
        "{:#?}",
        view.timeline
    );
}

#[test]
fn a_broadcast_file_cut_on_the_way_is_delivered_whole_later() {
    // 0 - 1 - 2, all-mode call from 0, echo server at 2, a 10 MB file (8 s a hop at 10 Mbit/s).
    // The link 1-2 goes down halfway through the file's transfer (17 s). Node 2 kept the half
    // that arrived as a fragment (reactive fragmentation) and delivered it as if it were the
    // file: the engine got 5 MB that matched no hash, and the node, counting the broadcast
    // bundle as seen, refused the whole one when it was offered again and never delivered the
    // rest (in Fig. 5's all 5 % cell, seed 1, calls 26 and 29: islands that got a cut prefix
    // refused the whole file over bridges that were up for three minutes, and no server ran).
    // Now the pieces of a broadcast bundle are delivered once reassembled, and the whole is
    // taken. Two repairs: 1-2 comes back at 40 s (node 1 sends the rest, a fragment), or it
    // does not and a link 0-2 comes up at 40 s (node 0 offers the whole bundle).
    for back in [(1, 2), (0, 2)] {
        let mut app = RpcApp::new(3);
        echo_files(&mut app, 2);
        let mut request = CallRequest::new(Target::All, "echo", vec![file(7, 10_000_000)]);
        request.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(120_000));
        app.script(1, request);
        let scenario = Scenario::new(
            1,
            Topology::Chained { nodes: 3 },
            StrategyKind::Epidemic,
            150_000,
        );
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(5_000, 0, 1);
        sim.schedule_link(17_000, 1, 2, false);
        sim.schedule_link(40_000, back.0, back.1, true);
        sim.run_in_place().expect("no invariant broken");
        let app = sim.app();
        let view = app.outcome(1).expect("the call ended");
        assert_eq!(
            view.state,
            CallState::Succeeded,
            "back by {back:?}: {:#?}",
            view.timeline
        );
        assert_eq!(app.max_executions(), 1, "{:#?}", view.timeline);
        let reply = &view.replies[0];
        assert_eq!(reply.missing_files, 0, "{:#?}", view.timeline);
        assert!(
            reply.at >= sim::SIM_EPOCH + Duration::from_millis(40_000),
            "{:#?}",
            view.timeline
        );
    }
}

#[test]
fn a_result_file_cut_on_the_way_shows_how_much_of_it_is_here() {
    // 0 - 1, explicit call from 0 to the echo server 1 with a 10 MB file (8 s at 10 Mbit/s
    // each way): the parameter file arrives at 13 s, the result goes at once (by stream on the
    // live path, or by dtn when asked) ahead of the result file, which takes 13-21 s. The link
    // goes down at 17 s, halfway through the result file; the call waits, and the client shows
    // how much of the file is here.
    for transport in [Transport::Auto, Transport::Dtn] {
        let mut app = RpcApp::new(2);
        echo_files(&mut app, 1);
        let mut request =
            CallRequest::new(Target::Node(node_id(1)), "echo", vec![file(7, 10_000_000)]);
        request.deadline = Some(sim::SIM_EPOCH + Duration::from_millis(300_000));
        request.transport = transport;
        app.script(1, request);
        let scenario = Scenario::new(
            1,
            Topology::Chained { nodes: 2 },
            StrategyKind::Epidemic,
            60_000,
        );
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(5_000, 0, 1);
        sim.schedule_link(17_000, 0, 1, false);
        sim.run_in_place().expect("no invariant broken");
        let app = sim.app();
        assert!(
            app.outcome(1).is_none(),
            "{transport:?}: the call still waits for its file: {:#?}",
            app.outcome(1).map(|v| &v.timeline)
        );
        let id = *app.made_by(1).unwrap().id.as_ref().unwrap();
        let engine = sim.engine(0).unwrap();
        let view = engine.call_view(&id).unwrap();
        assert_eq!(view.replies.len(), 1, "{transport:?}: {:#?}", view.timeline);
        assert_eq!(view.replies[0].missing_files, 1, "{:#?}", view.timeline);
        let arriving = engine.files_arriving(sim.node(0), &id);
        assert_eq!(arriving.len(), 1, "{transport:?}: {:#?}", view.timeline);
        let wire::rpc::Message::Result(res) = &view.replies[0].message else {
            panic!("a result")
        };
        assert_eq!(arriving[0].0, res.files[0].hash);
        let here = arriving[0].1;
        assert!(
            (2_000_000..9_000_000).contains(&here),
            "{transport:?}: {here} bytes of 10 MB here"
        );
    }
}
