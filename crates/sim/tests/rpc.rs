//! DTN-RPC in the simulator: every addressing mode and transport on the paper's topologies, with
//! broken paths, duplicates, restarts, deadlines, rejections, nested calls and load.

use node::StrategyKind;
use rpc::{CallRequest, CallState, Param, ParamType, Target};
use sim::rpc::{Behaviour, RpcApp, procedure};
use sim::{Scenario, Sim, Topology, node_id};
use wire::rpc::{Message, Transport, Value};

const _: Transport = Transport::Auto;

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
}
