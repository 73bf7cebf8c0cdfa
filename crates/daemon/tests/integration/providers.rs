//! An application serving procedures over `/v1/providers`, spoken to byte by byte: the protocol's
//! refusals (a first message that is not `register`, a bad declaration, a name served already,
//! one provider too many), a call handed over only after its durable record, the record gone
//! and `kept` sent once the answer is durable, a result the node will not use refused, and a
//! bad message costing only itself. Every message the node sends is checked against the
//! `ProviderMessage` schema of openapi.yaml.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{Server, check, examples, server, start_with, websocket};

type Ws = tungstenite::WebSocket<std::net::TcpStream>;

fn send(ws: &mut Ws, value: Value) {
    ws.send(tungstenite::Message::Text(value.to_string().into()))
        .unwrap();
}

/// The next text message, checked against the schema.
fn next(s: &Server, ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("a message within 10 s") {
            tungstenite::Message::Text(t) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                let schema = &s.spec["components"]["schemas"]["ProviderMessage"];
                if let Err(e) = check(&s.spec, schema, &v, "message") {
                    panic!("the node sent {v}, not a ProviderMessage: {e}");
                }
                return v;
            }
            tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A call of `sense` from this node to itself.
fn call_sense(s: &Server, what: &str) -> Value {
    let body = json!({ "target": "dtn://alpha/", "procedure": "sense",
                       "params": [{ "text": what }] });
    s.call(
        "post",
        "/v1/calls",
        Some(("application/json", body.to_string().as_bytes())),
    )
    .json()
}

fn register(s: &Server, procedures: Value) -> (Ws, Value) {
    let mut ws = websocket(s, "/v1/providers").expect("upgrade");
    send(&mut ws, json!({ "register": { "procedures": procedures } }));
    let answer = next(s, &mut ws);
    (ws, answer)
}

#[test]
fn a_provider_is_held_to_the_protocol_and_its_calls_to_their_records() {
    let (rt, running, dir) = start_with(|c| c.rpc = examples().rpc);
    let s = server(&running);

    // The first message must be a registration.
    let mut ws = websocket(&s, "/v1/providers").unwrap();
    send(&mut ws, json!({ "fail": { "job": "x", "message": "no" } }));
    assert_eq!(next(&s, &mut ws)["error"]["code"], "bad_request");
    // A declaration is checked, naming the field at fault.
    let (_, answer) = register(
        &s,
        json!([{ "name": "p", "params": [{ "name": "x", "type": "str" }] }]),
    );
    assert_eq!(answer["error"]["code"], "bad_request");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("params") && message.contains("str"),
        "{message}"
    );
    // A name the configuration serves is refused.
    let (_, answer) = register(&s, json!([{ "name": "echo" }]));
    assert_eq!(answer["error"]["code"], "conflict", "{answer}");

    let (mut ws, answer) = register(
        &s,
        json!([{ "name": "sense", "params": [{ "name": "what", "type": "text" }],
                 "returns": "text", "max_output": 64 }]),
    );
    assert_eq!(answer["registered"]["procedures"], json!(["sense"]));
    // Another provider may not take it while this one is connected.
    let (_, answer) = register(&s, json!([{ "name": "sense" }]));
    assert_eq!(answer["error"]["code"], "conflict");
    let procedures = s.call("get", "/v1/procedures", None).json();
    let sense = procedures
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "sense")
        .unwrap()
        .clone();
    assert_eq!(sense["served_by"], "application");
    assert_eq!(sense["connected"], true);
    assert_eq!(
        sense["parameters"],
        json!([{ "name": "what", "type": "text" }])
    );

    // A call to it (from this node) is handed over once its record is durable.
    let made = call_sense(&s, "wind");
    let call = next(&s, &mut ws);
    let job = call["call"]["job"].as_str().unwrap().to_owned();
    assert_eq!(
        call["call"]["params"],
        json!([{ "name": "what", "type": "text", "value": "wind" }])
    );
    let record = dir.path().join("executions").join(&job);
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(text.contains("provider sense"), "{text}");

    // A bad message costs only itself; a result for no job is refused.
    ws.send(tungstenite::Message::Text("not json".into()))
        .unwrap();
    assert_eq!(next(&s, &mut ws)["error"]["code"], "bad_request");
    send(
        &mut ws,
        json!({ "result": { "job": "nothing", "value": "x" } }),
    );
    assert_eq!(next(&s, &mut ws)["refused"]["job"], "nothing");

    // The answer: the caller has it, the provider is told `kept` once it is durable, and the
    // record is gone.
    send(
        &mut ws,
        json!({ "result": { "job": job, "value": "wind 4 m/s" } }),
    );
    assert_eq!(next(&s, &mut ws), json!({ "kept": { "job": job } }));
    // `kept` goes with the sync that made the answer durable; the record's removal follows on
    // a blocking thread.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while record.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the record stays after the answer is durable"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = made["id"].as_str().unwrap();
    let done = s
        .call("get", &format!("/v1/calls/{id}/wait?timeout=10s"), None)
        .json();
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["replies"][0]["value_text"], "wind 4 m/s");

    // A result over max_output is refused and the call answered output_too_large.
    let made = call_sense(&s, "rain");
    let job = next(&s, &mut ws)["call"]["job"]
        .as_str()
        .unwrap()
        .to_owned();
    send(
        &mut ws,
        json!({ "result": { "job": job, "value": "x".repeat(65) } }),
    );
    assert!(
        next(&s, &mut ws)["refused"]["reason"]
            .as_str()
            .unwrap()
            .contains("max_output")
    );
    let id = made["id"].as_str().unwrap();
    let done = s
        .call("get", &format!("/v1/calls/{id}/wait?timeout=10s"), None)
        .json();
    assert_eq!(done["replies"][0]["code"], "output_too_large", "{done}");

    // At most 16 providers: the 17th is refused (this one is the first).
    let mut kept = Vec::new();
    for i in 1..16 {
        let (ws, answer) = register(&s, json!([{ "name": format!("p{i}") }]));
        assert!(answer.get("registered").is_some(), "{answer}");
        kept.push(ws);
    }
    let (_, answer) = register(&s, json!([{ "name": "one_too_many" }]));
    assert_eq!(answer["error"]["code"], "conflict");
    let metrics = s.call("get", "/metrics", None);
    let metrics = String::from_utf8_lossy(&metrics.body);
    assert!(
        metrics.contains("ferry_providers_connected 16"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ferry_provider_registrations_refused_total 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ferry_provider_results_refused_total 1"),
        "{metrics}"
    );
    drop(kept);
    std::thread::sleep(Duration::from_millis(100));
    rt.block_on(running.shut_down());
}
