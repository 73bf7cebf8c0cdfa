//! The HTTP/WebSocket API of a running daemon, checked against `openapi.yaml`: every route the
//! server has is described and every described route answers; every JSON answer (errors
//! included) matches its schema; receiving is at-least-once (read, fetch the payload, delete);
//! the WebSocket delivers and removes only what was acknowledged; calls to a neighbour serving
//! the example procedures, made over HTTP, bring back their values, files and timelines, by long
//! poll and by WebSocket. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

use crate::common::{TempDir, loopback_config};

const SPEC: &str = include_str!("../../openapi.yaml");
const ROUTER_SOURCE: &str = include_str!("../../src/api.rs");

fn spec() -> Yaml {
    serde_yaml_ng::from_str(SPEC).expect("openapi.yaml parses")
}

/// Resolves `{"$ref": "#/components/…"}`.
fn resolve<'a>(spec: &'a Yaml, schema: &'a Yaml) -> &'a Yaml {
    match schema.get("$ref").and_then(Yaml::as_str) {
        Some(r) => {
            let mut node = spec;
            for part in r.trim_start_matches("#/").split('/') {
                node = node
                    .get(part)
                    .unwrap_or_else(|| panic!("dangling $ref {r}"));
            }
            resolve(spec, node)
        }
        None => schema,
    }
}

/// Checks `value` against the subset of JSON Schema the spec uses: type, required, properties
/// (no others allowed), items, enum, minimum, maximum. Returns where it fails.
pub(crate) fn check(spec: &Yaml, schema: &Yaml, value: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(spec, schema);
    if let Some(options) = schema.get("enum").and_then(Yaml::as_sequence) {
        let ok = options.iter().any(|o| match (o, value) {
            (Yaml::String(a), Value::String(b)) => a == b,
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {value} is not one of the enum's values"));
        }
    }
    match schema.get("type").and_then(Yaml::as_str) {
        Some("object") => {
            let obj = value
                .as_object()
                .ok_or_else(|| format!("{at}: expected an object, got {value}"))?;
            let props = schema.get("properties").and_then(Yaml::as_mapping);
            for req in schema
                .get("required")
                .and_then(Yaml::as_sequence)
                .into_iter()
                .flatten()
            {
                let key = req.as_str().unwrap();
                if !obj.contains_key(key) {
                    return Err(format!("{at}: required field {key:?} missing"));
                }
            }
            for (key, v) in obj {
                let sub = props
                    .and_then(|p| p.get(key.as_str()))
                    .ok_or_else(|| format!("{at}: field {key:?} is not in the schema"))?;
                check(spec, sub, v, &format!("{at}.{key}"))?;
            }
            Ok(())
        }
        Some("array") => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("{at}: expected an array, got {value}"))?;
            let sub = schema.get("items").expect("array schema without items");
            for (i, v) in items.iter().enumerate() {
                check(spec, sub, v, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        Some("string") => value
            .is_string()
            .then_some(())
            .ok_or_else(|| format!("{at}: expected a string, got {value}")),
        Some("boolean") => value
            .is_boolean()
            .then_some(())
            .ok_or_else(|| format!("{at}: expected a boolean, got {value}")),
        Some("integer") => {
            let n = value
                .as_u64()
                .ok_or_else(|| format!("{at}: expected a non-negative integer, got {value}"))?;
            if let Some(max) = schema.get("maximum").and_then(Yaml::as_u64)
                && n > max
            {
                return Err(format!("{at}: {n} is above the maximum {max}"));
            }
            Ok(())
        }
        // A schema without a type takes any value (a call parameter's `value`).
        None if schema.get("$ref").is_none() => Ok(()),
        other => Err(format!(
            "{at}: the checker does not know schema type {other:?}"
        )),
    }
}

/// The schema of `path`'s `method` answer with `status` (or `default`), JSON only.
fn response_schema<'a>(spec: &'a Yaml, path: &str, method: &str, status: u16) -> &'a Yaml {
    let op = &spec["paths"][path][method];
    let responses = &op["responses"];
    let response = responses
        .get(status.to_string().as_str())
        .or_else(|| responses.get("default"))
        .unwrap_or_else(|| panic!("{method} {path} does not describe status {status}"));
    let response = resolve(spec, response);
    response["content"]["application/json"]
        .get("schema")
        .unwrap_or_else(|| panic!("{method} {path} {status} has no JSON schema"))
}

pub(crate) struct Server {
    base: String,
    addr: SocketAddr,
    /// `Bearer <the node's API token>`.
    authorization: String,
    agent: ureq::Agent,
    pub(crate) spec: Yaml,
}

pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    content_type: String,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "answer {} is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

impl Server {
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<(&str, &[u8])>) -> Answer {
        let url = format!("{}{path}", self.base);
        let auth = self.authorization.as_str();
        let response = match (method, body) {
            ("get", None) => self.agent.get(&url).header("authorization", auth).call(),
            ("delete", None) => self.agent.delete(&url).header("authorization", auth).call(),
            ("post", Some((ct, b))) => self
                .agent
                .post(&url)
                .header("authorization", auth)
                .header("content-type", ct)
                .send(b),
            ("put", Some((ct, b))) => self
                .agent
                .put(&url)
                .header("authorization", auth)
                .header("content-type", ct)
                .send(b),
            ("put", None) => self
                .agent
                .put(&url)
                .header("authorization", auth)
                .send_empty(),
            _ => panic!("test misuse: {method} with body {}", body.is_some()),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .unwrap();
        Answer {
            status: response.status().as_u16(),
            body,
            content_type,
        }
    }

    /// Calls and checks the JSON answer against the spec's schema for `spec_path`.
    fn checked(
        &self,
        method: &str,
        spec_path: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
        expect: u16,
    ) -> Value {
        let answer = self.call(method, path, body);
        assert_eq!(
            answer.status,
            expect,
            "{method} {path}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert!(
            answer.content_type.starts_with("application/json"),
            "{method} {path}: content type {:?}",
            answer.content_type
        );
        let value = answer.json();
        let schema = response_schema(&self.spec, spec_path, method, answer.status);
        if let Err(e) = check(&self.spec, schema, &value, "body") {
            panic!("{method} {path} answered {value} which does not match the spec: {e}");
        }
        value
    }
}

fn config(dir: &std::path::Path) -> daemon::Config {
    let mut c = loopback_config("alpha", dir, 0);
    c.store_quota = 64_000_000;
    c.api_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    c.api_max_payload = 2 << 20;
    c
}

fn start() -> (tokio::runtime::Runtime, daemon::Running, TempDir) {
    start_with(|_| {})
}

/// `examples/node.toml`, whose `rpc` serves echo, photo, slow and sum.
pub(crate) fn examples() -> daemon::Config {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/node.toml");
    daemon::Config::load(&file, "test").expect("examples/node.toml loads")
}

/// `alpha`, serving nothing, connected to `bravo`, which serves the examples; both with their
/// API.
struct Pair {
    rt: tokio::runtime::Runtime,
    alpha: daemon::Running,
    bravo: daemon::Running,
    _dirs: (TempDir, TempDir),
}

impl Pair {
    fn start() -> Self {
        let rt = runtime();
        let dirs = (TempDir::new("api"), TempDir::new("api"));
        let mut b = config(dirs.1.path());
        b.node_id = daemon::config::parse_node_id("dtn://bravo/").unwrap();
        b.rpc = examples().rpc;
        let bravo = rt.block_on(daemon::start(b)).unwrap();
        let mut a = config(dirs.0.path());
        a.peers = bravo.tcpcl_addrs.clone();
        a.keepalive = Duration::from_secs(1);
        let alpha = rt.block_on(daemon::start(a)).unwrap();
        let s = server(&alpha);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while s.checked("get", "/v1/status", "/v1/status", None, 200)["peers"] != 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "no session within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            rt,
            alpha,
            bravo,
            _dirs: dirs,
        }
    }

    fn alpha(&self) -> Server {
        server(&self.alpha)
    }

    fn bravo(&self) -> Server {
        server(&self.bravo)
    }

    fn shut_down(self) {
        self.rt.block_on(self.alpha.shut_down());
        self.rt.block_on(self.bravo.shut_down());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn start_with(
    adjust: impl FnOnce(&mut daemon::Config),
) -> (tokio::runtime::Runtime, daemon::Running, TempDir) {
    let dir = TempDir::new("api");
    let rt = runtime();
    let mut c = config(dir.path());
    adjust(&mut c);
    let running = rt.block_on(daemon::start(c)).unwrap();
    (rt, running, dir)
}

pub(crate) fn server(running: &daemon::Running) -> Server {
    let addr = running.api_addr.expect("the API listens");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    Server {
        base: format!("http://{addr}"),
        addr,
        authorization: format!("Bearer {}", running.api_token),
        agent,
        spec: spec(),
    }
}

#[test]
fn every_route_is_described_and_every_described_route_answers() {
    let spec = spec();
    let described: BTreeSet<String> = spec["paths"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let served: BTreeSet<String> = ROUTER_SOURCE
        .match_indices(".route(")
        .map(|(i, _)| {
            let rest = &ROUTER_SOURCE[i..];
            let start = rest.find('"').unwrap() + 1;
            let end = start + rest[start..].find('"').unwrap();
            rest[start..end].to_owned()
        })
        .collect();
    assert!(served.len() >= 10, "found only {served:?} in api.rs");
    assert_eq!(
        served, described,
        "api.rs routes and openapi.yaml paths differ"
    );

    // Every described operation answers with something other than the unknown-route error.
    let (_rt, running, _dir) = start();
    let s = server(&running);
    for (path, ops) in spec["paths"].as_mapping().unwrap() {
        let path = path.as_str().unwrap();
        let concrete = path
            .replace("{endpoint}", "inbox")
            .replace("{seq}", "0")
            .replace("{id}", &"0".repeat(32))
            .replace("{hash}", &"0".repeat(64))
            .replace("{node}", "bravo")
            .replace("{file}", "app.js");
        for method in ops.as_mapping().unwrap().keys() {
            let method = method.as_str().unwrap();
            let body: Option<(&str, &[u8])> =
                matches!(method, "post" | "put").then_some(("application/json", b"{}"));
            let answer = s.call(method, &concrete, body);
            if answer.status == 404 && answer.content_type.starts_with("application/json") {
                assert_ne!(
                    answer.json()["message"].as_str().unwrap_or(""),
                    "no such route; see /v1/openapi.yaml",
                    "{method} {path} is described but not served"
                );
            }
            assert_ne!(
                answer.status, 405,
                "{method} {path} is described but not allowed"
            );
        }
    }
    drop(running);
}

#[test]
fn answers_match_the_spec_and_receiving_is_at_least_once() {
    let (rt, running, _dir) = start();
    let s = server(&running);

    let status = s.checked("get", "/v1/status", "/v1/status", None, 200);
    assert_eq!(status["node_id"], "dtn://alpha/");
    assert!(
        status["listening"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("http://127.0.0.1:")),
        "{status}"
    );
    assert_eq!(
        s.checked("get", "/v1/peers", "/v1/peers", None, 200),
        Value::Array(vec![])
    );
    s.checked("get", "/v1/routes", "/v1/routes", None, 200);

    // Send to this node's own inbox, as JSON and raw; both are delivered locally.
    let sent = s.checked(
        "post",
        "/v1/bundles",
        "/v1/bundles",
        Some((
            "application/json",
            br#"{"destination":"dtn://alpha/inbox","payload":"hello","report":true}"#,
        )),
        201,
    );
    assert_eq!(sent["size"], 5);
    let binary: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    s.checked(
        "post",
        "/v1/bundles/raw",
        "/v1/bundles/raw?destination=dtn%3A%2F%2Falpha%2Finbox&lifetime=10m&priority=2",
        Some(("application/octet-stream", &binary)),
        201,
    );

    // Long poll: both wait; metadata only.
    let waiting = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/inbox/bundles?wait=5s&payload=false&max=10",
        None,
        200,
    );
    let waiting = waiting.as_array().unwrap();
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    assert!(waiting.iter().all(|r| r.get("payload_base64").is_none()));
    assert_eq!(waiting[1]["size"], binary.len());
    // The full endpoint id, percent-encoded, names the same inbox; reading took nothing.
    let again = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/dtn%3A%2F%2Falpha%2Finbox/bundles",
        None,
        200,
    );
    assert_eq!(again.as_array().unwrap().len(), 2);
    assert_eq!(again[0]["payload_base64"], "aGVsbG8=");

    let seq = waiting[1]["seq"].as_u64().unwrap();
    let payload = s.call(
        "get",
        &format!("/v1/endpoints/inbox/bundles/{seq}/payload"),
        None,
    );
    assert_eq!(payload.status, 200);
    assert_eq!(payload.content_type, "application/octet-stream");
    assert!(
        payload.body == binary,
        "the raw payload came back different"
    );
    let deleted = s.call(
        "delete",
        &format!("/v1/endpoints/inbox/bundles/{seq}"),
        None,
    );
    assert_eq!(deleted.status, 204);
    let error = s.checked(
        "delete",
        "/v1/endpoints/{endpoint}/bundles/{seq}",
        &format!("/v1/endpoints/inbox/bundles/{seq}"),
        None,
        404,
    );
    assert_eq!(error["code"], "not_found");
    let left = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/inbox/bundles",
        None,
        200,
    );
    assert_eq!(left.as_array().unwrap().len(), 1);

    let stored = s.checked("get", "/v1/bundles", "/v1/bundles", None, 200);
    assert!(stored.is_array());
    s.checked("get", "/v1/reports", "/v1/reports", None, 200);
    let metrics = s.call("get", "/metrics", None);
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("# TYPE ferry_bundles_delivered counter"),
        "{text}"
    );
    assert!(text.contains("ferry_inbox_bundles 1"), "{text}");
    // The purge set's bound (docs/security.md) is counted where operators look.
    for metric in [
        "# TYPE ferry_purge_set_entries gauge",
        "# TYPE ferry_purge_set_full counter",
        "ferry_purge_set_full_total 0",
        "# TYPE ferry_summary_purge_keys_ignored counter",
    ] {
        assert!(text.contains(metric), "{metric}: {text}");
    }
    let yaml = s.call("get", "/v1/openapi.yaml", None);
    assert_eq!(yaml.body, SPEC.as_bytes());

    // Errors: each a JSON Error with its stable code and status.
    for (method, spec_path, path, body, status, code) in [
        (
            "post",
            "/v1/bundles",
            "/v1/bundles",
            Some(("application/json", &b"{not json"[..])),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/bundles",
            "/v1/bundles",
            Some(("application/json", &br#"{"destination":"nowhere"}"#[..])),
            400,
            "bad_endpoint",
        ),
        (
            "post",
            "/v1/bundles",
            "/v1/bundles",
            Some((
                "application/json",
                &br#"{"destination":"dtn://b/x","class":"datagram"}"#[..],
            )),
            409,
            "no_route",
        ),
        (
            "post",
            "/v1/bundles/raw",
            "/v1/bundles/raw",
            Some(("application/octet-stream", &b"x"[..])),
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/endpoints/{endpoint}/bundles",
            "/v1/endpoints/inbox/bundles?wait=1year",
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/endpoints/{endpoint}/bundles",
            "/v1/endpoints/dtn%3A%2F%2Fother%2Fx/bundles",
            None,
            400,
            "bad_endpoint",
        ),
        (
            "get",
            "/v1/endpoints/{endpoint}/bundles/{seq}/payload",
            "/v1/endpoints/inbox/bundles/999/payload",
            None,
            404,
            "not_found",
        ),
        (
            "get",
            "/v1/status",
            "/v1/nothing-here",
            None,
            404,
            "not_found",
        ),
    ] {
        let e = s.checked(method, spec_path, path, body, status);
        assert_eq!(e["code"], code, "{method} {path}: {e}");
    }
    let wrong_method = s.call("put", "/v1/status", Some(("application/json", b"{}")));
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.json()["code"], "method_not_allowed");
    // A body over the limit is refused by its declared length, before a byte of it is sent: a
    // request that says 10 GB is not read for a minute first. (An HTTP client that sends the
    // whole body before reading sees the connection close under it instead.)
    for declared in [3u64 << 20, 10_000_000_000] {
        let mut conn = std::net::TcpStream::connect(s.addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            conn,
            "POST /v1/bundles/raw?destination=dtn%3A%2F%2Falpha%2Finbox HTTP/1.1\r\nHost: {}\r\n\
             Authorization: {}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {declared}\r\n\r\n",
            s.addr, s.authorization
        )
        .unwrap();
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(
            answer.contains("\"code\":\"payload_too_large\""),
            "{answer}"
        );
    }

    rt.block_on(running.shut_down());
}

#[test]
fn a_websocket_subscriber_gets_waiting_and_new_bundles_and_removes_only_what_it_acks() {
    let (rt, running, _dir) = start();
    let s = server(&running);
    let send = |text: &str| {
        s.checked(
            "post",
            "/v1/bundles",
            "/v1/bundles",
            Some((
                "application/json",
                format!(r#"{{"destination":"dtn://alpha/feed","payload":"{text}"}}"#).as_bytes(),
            )),
            201,
        );
    };
    send("before");

    let mut ws = websocket(&s, "/v1/endpoints/feed/subscribe").expect("WebSocket upgrade");
    let mut next = || -> Value {
        loop {
            match ws.read().expect("a message within 10 s") {
                tungstenite::Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    let schema = &s.spec["components"]["schemas"]["Received"];
                    check(&s.spec, schema, &v, "message").unwrap();
                    return v;
                }
                tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    let first = next();
    assert_eq!(first["payload_base64"], "YmVmb3Jl");
    send("after");
    let second = next();
    assert_eq!(second["payload_base64"], "YWZ0ZXI=");
    ws.send(tungstenite::Message::Text(
        format!(r#"{{"ack":{}}}"#, first["seq"]).into(),
    ))
    .unwrap();
    // A bad message gets an Error back and the subscription stays.
    ws.send(tungstenite::Message::Text("hello".into())).unwrap();
    let error = loop {
        if let tungstenite::Message::Text(t) = ws.read().unwrap() {
            break serde_json::from_str::<Value>(t.as_str()).unwrap();
        }
    };
    assert_eq!(error["code"], "bad_request");
    ws.close(None).unwrap();

    // Only the acknowledged bundle left the inbox.
    let left = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/feed/bundles",
        None,
        200,
    );
    let left = left.as_array().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["seq"], second["seq"]);

    // A bad endpoint is refused before the upgrade, with a JSON error.
    let refused = s.call("get", "/v1/endpoints/dtn%3A%2F%2Fother%2Fx/subscribe", None);
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    rt.block_on(running.shut_down());
}

#[test]
fn a_bundle_nobody_takes_leaves_the_inbox_when_its_lifetime_ends() {
    let (rt, running, _dir) = start();
    let s = server(&running);
    for (lifetime, text) in [("1s", "short"), ("1h", "long")] {
        s.checked(
            "post",
            "/v1/bundles",
            "/v1/bundles",
            Some((
                "application/json",
                format!(r#"{{"destination":"dtn://alpha/late","payload":"{text}","lifetime":"{lifetime}"}}"#)
                    .as_bytes(),
            )),
            201,
        );
    }
    let waiting = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/late/bundles?wait=5s",
        None,
        200,
    );
    assert_eq!(waiting.as_array().unwrap().len(), 2, "{waiting}");
    let short = &waiting[0];
    assert!(short["expiry_ms"].as_u64().unwrap() < waiting[1]["expiry_ms"].as_u64().unwrap());
    // Bounded: the loop's timer fires at the expiry; allow scheduling slack.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = s.checked(
            "get",
            "/v1/endpoints/{endpoint}/bundles",
            "/v1/endpoints/late/bundles",
            None,
            200,
        );
        let left = left.as_array().unwrap();
        if left.len() == 1 {
            assert_eq!(
                left[0]["payload_base64"], "bG9uZw==",
                "the long-lived one stays"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the expired bundle is still waiting: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(running.shut_down());
}

/// A WebSocket to `path` on `addr`, each read bounded to 10 s, or the HTTP status and body
/// of a refused upgrade.
pub(crate) fn websocket(
    s: &Server,
    path: &str,
) -> Result<tungstenite::WebSocket<std::net::TcpStream>, (u16, Vec<u8>)> {
    use tungstenite::client::IntoClientRequest as _;
    let stream = std::net::TcpStream::connect(s.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("ws://{}{path}", s.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", s.authorization.parse().unwrap());
    match tungstenite::client(request, stream) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => Err((
            response.status().as_u16(),
            response.body().clone().unwrap_or_default(),
        )),
        Err(e) => panic!("{path}: {e}"),
    }
}

/// Reads a call watcher's messages until the server closes: the calls it sent (each checked
/// against the `Call` schema) and the close code.
fn watched(
    s: &Server,
    ws: &mut tungstenite::WebSocket<std::net::TcpStream>,
) -> (
    Vec<Value>,
    Option<tungstenite::protocol::frame::coding::CloseCode>,
) {
    let schema = &s.spec["components"]["schemas"]["Call"];
    let mut calls = Vec::new();
    loop {
        match ws.read().expect("a message or the close within 10 s") {
            tungstenite::Message::Text(t) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if let Err(e) = check(&s.spec, schema, &v, "message") {
                    panic!("the watcher sent {v}, which is not a Call: {e}");
                }
                calls.push(v);
            }
            tungstenite::Message::Close(frame) => return (calls, frame.map(|f| f.code)),
            tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn calls_made_over_http_bring_back_values_files_and_reasons() {
    let pair = Pair::start();
    let s = pair.alpha();
    let post_call = |body: &str, expect: u16| -> Value {
        s.checked(
            "post",
            "/v1/calls",
            "/v1/calls",
            Some(("application/json", body.as_bytes())),
            expect,
        )
    };
    let wait = |id: &str| -> Value {
        s.checked(
            "get",
            "/v1/calls/{id}/wait",
            &format!("/v1/calls/{id}/wait?timeout=15s"),
            None,
            200,
        )
    };

    // What each serves: alpha only the built-in `ferry.procedures` and `null`, bravo what
    // examples/node.toml says too.
    let builtin = s.checked("get", "/v1/procedures", "/v1/procedures", None, 200);
    assert_eq!(builtin.as_array().map(Vec::len), Some(2), "{builtin}");
    assert_eq!(builtin[0]["name"], "ferry.procedures");
    assert_eq!(builtin[1]["name"], "null");
    assert_eq!(builtin[1]["params"], serde_json::json!([]));
    assert_eq!(builtin[1]["served_by"], "node");
    let procedures = pair
        .bravo()
        .checked("get", "/v1/procedures", "/v1/procedures", None, 200);
    let names: Vec<&str> = procedures
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["echo", "ferry.procedures", "null", "photo", "slow", "sum"],
        "{procedures}"
    );
    let params = |name: &str| {
        procedures
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["params"]
            .clone()
    };
    assert_eq!(params("echo"), serde_json::json!(["text"]));
    assert_eq!(params("sum"), serde_json::json!(["int", "int"]));
    let photo = procedures
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "photo")
        .unwrap();
    assert_eq!(photo["require"], "has(camera)");

    // Echo: the text comes back byte for byte.
    let text = "it's $(not) a \"shell\"; * ü";
    let body = serde_json::json!({
        "target": "dtn://bravo/",
        "procedure": "echo",
        "params": [{"text": text}],
    });
    let made = post_call(&body.to_string(), 201);
    let echo_id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(echo_id.len(), 32, "{made}");
    assert_eq!(made["procedure"], "echo");
    assert!(
        !made["timeline"].as_array().unwrap().is_empty(),
        "a new call has a timeline: {made}"
    );
    let done = wait(&echo_id);
    assert_eq!(done["state"], "succeeded", "{done}");
    let reply = &done["replies"][0];
    assert_eq!(reply["ok"], true, "{done}");
    assert_eq!(reply["value_text"], text);
    assert_eq!(reply["server"], "dtn://bravo/");
    assert_eq!(reply["via"], "stream");
    let bravo = pair
        .bravo()
        .checked("get", "/v1/status", "/v1/status", None, 200);
    assert_eq!(reply["server_key"], bravo["public_key"]);
    assert_eq!(bravo["rpc"]["executions"], 1, "{bravo}");
    let alpha = s.checked("get", "/v1/status", "/v1/status", None, 200);
    assert_eq!(alpha["rpc"]["calls_made"], 1, "{alpha}");
    // Bravo lists the call among those it served; alpha served none.
    let served = pair
        .bravo()
        .checked("get", "/v1/served", "/v1/served", None, 200);
    assert_eq!(served.as_array().map(Vec::len), Some(1), "{served}");
    assert_eq!(served[0]["id"], echo_id.as_str());
    assert_eq!(served[0]["caller"], "dtn://alpha/");
    assert_eq!(served[0]["procedure"], "echo");
    assert_eq!(served[0]["mode"], "explicit");
    assert_eq!(served[0]["state"], "answered");
    assert_eq!(served[0]["deadline_ms"], done["deadline_ms"], "{served}");
    assert_eq!(
        s.checked("get", "/v1/served", "/v1/served", None, 200),
        serde_json::json!([])
    );

    // With `wait`, one request makes the call and brings its end.
    let body = serde_json::json!({
        "target": "dtn://bravo/",
        "procedure": "echo",
        "params": [{"text": "at once"}],
    });
    let done = s.checked(
        "post",
        "/v1/calls",
        "/v1/calls?wait=15s",
        Some(("application/json", body.to_string().as_bytes())),
        201,
    );
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["replies"][0]["value_text"], "at once", "{done}");
    let at_once = done["id"].as_str().unwrap();
    let forgotten = s.call("delete", &format!("/v1/calls/{at_once}"), None);
    assert_eq!(forgotten.status, 204);
    s.checked(
        "post",
        "/v1/calls",
        "/v1/calls?wait=forever",
        Some(("application/json", body.to_string().as_bytes())),
        400,
    );

    // The list has it, without a timeline; the call itself has one.
    let list = s.checked("get", "/v1/calls", "/v1/calls", None, 200);
    let listed = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == echo_id.as_str())
        .unwrap_or_else(|| panic!("{echo_id} is not in {list}"));
    assert_eq!(listed["state"], "succeeded");
    assert!(listed.get("timeline").is_none(), "{listed}");
    let one = s.checked(
        "get",
        "/v1/calls/{id}",
        &format!("/v1/calls/{echo_id}"),
        None,
        200,
    );
    assert!(one["timeline"].as_array().unwrap().len() >= 2, "{one}");

    // A file result, fetched by hash.
    let made = post_call(
        r#"{"target":"bravo","procedure":"photo","params":[{"int":40}]}"#,
        201,
    );
    let photo_id = made["id"].as_str().unwrap().to_owned();
    let photo = wait(&photo_id);
    assert_eq!(photo["state"], "succeeded", "{photo}");
    let reply = &photo["replies"][0];
    assert!(
        reply["value_text"]
            .as_str()
            .unwrap()
            .starts_with("photo.pgm: 40x40"),
        "{reply}"
    );
    let file = &reply["files"][0];
    assert_eq!(file["name"], "photo.pgm");
    assert_eq!(file["arrived"], true);
    let bytes = s.call(
        "get",
        &format!("/v1/files/{}", file["hash"].as_str().unwrap()),
        None,
    );
    assert_eq!(bytes.status, 200);
    assert_eq!(bytes.content_type, "application/octet-stream");
    assert_eq!(bytes.body.len() as u64, file["size"].as_u64().unwrap());
    assert!(bytes.body.starts_with(b"P2\n"), "not a PGM");

    // A procedure bravo does not serve: the call fails with its reason.
    let made = post_call(r#"{"target":"bravo","procedure":"nope"}"#, 201);
    let nope_id = made["id"].as_str().unwrap().to_owned();
    let refused = wait(&nope_id);
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(refused["replies"][0]["ok"], false);
    assert_eq!(refused["replies"][0]["code"], "not_offered");

    // A long poll that times out answers with the call as it stands; cancelling ends it.
    let made = post_call(
        r#"{"target":"bravo","procedure":"slow","params":[{"int":30}]}"#,
        201,
    );
    let slow_id = made["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let still = s.checked(
        "get",
        "/v1/calls/{id}/wait",
        &format!("/v1/calls/{slow_id}/wait?timeout=300ms&replies=0&files=0"),
        None,
        200,
    );
    assert_eq!(still["state"], "waiting", "{still}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let cancelled = s.checked(
        "post",
        "/v1/calls/{id}/cancel",
        &format!("/v1/calls/{slow_id}/cancel"),
        Some(("application/json", b"")),
        200,
    );
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // So does a call made with `wait` that does not end in time: the call as it stands, with
    // the id to follow it by.
    let started = std::time::Instant::now();
    let still = s.checked(
        "post",
        "/v1/calls",
        "/v1/calls?wait=300ms",
        Some((
            "application/json",
            br#"{"target":"bravo","procedure":"slow","params":[{"int":30}]}"#,
        )),
        201,
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(still["state"], "waiting", "{still}");
    let still_id = still["id"].as_str().unwrap();
    let cancelled = s.checked(
        "post",
        "/v1/calls/{id}/cancel",
        &format!("/v1/calls/{still_id}/cancel"),
        Some(("application/json", b"")),
        200,
    );
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    let forgotten = s.call("delete", &format!("/v1/calls/{still_id}"), None);
    assert_eq!(forgotten.status, 204);

    // An `all` call gathers replies until its deadline; `replies=N` answers at the N+1st.
    let made = post_call(
        r#"{"target":"all","procedure":"echo","params":[{"text":"roll call"}],"deadline":"2m"}"#,
        201,
    );
    let all_id = made["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let first = s.checked(
        "get",
        "/v1/calls/{id}/wait",
        &format!("/v1/calls/{all_id}/wait?timeout=15s&replies=0"),
        None,
        200,
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{first}");
    assert_eq!(first["state"], "waiting", "{first}");
    assert_eq!(first["replies"][0]["value_text"], "roll call", "{first}");

    // Forgotten, finished or not: gone.
    let forgotten = s.call("delete", &format!("/v1/calls/{all_id}"), None);
    assert_eq!(forgotten.status, 204);
    let forgotten = s.call("delete", &format!("/v1/calls/{echo_id}"), None);
    assert_eq!(
        forgotten.status,
        204,
        "{}",
        String::from_utf8_lossy(&forgotten.body)
    );
    let gone = s.checked(
        "get",
        "/v1/calls/{id}",
        &format!("/v1/calls/{echo_id}"),
        None,
        404,
    );
    assert_eq!(gone["code"], "not_found");

    // Errors: each a JSON Error with its stable code and status.
    let unknown = "0123456789abcdef0123456789abcdef";
    for (method, spec_path, path, body, status, code) in [
        (
            "get",
            "/v1/calls/{id}",
            format!("/v1/calls/{unknown}"),
            None,
            404,
            "not_found",
        ),
        (
            "get",
            "/v1/calls/{id}",
            "/v1/calls/not-a-call".into(),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/calls/{id}",
            format!("/v1/calls/{unknown}00"),
            None,
            400,
            "bad_request",
        ),
        (
            "delete",
            "/v1/calls/{id}",
            format!("/v1/calls/{echo_id}"),
            None,
            404,
            "not_found",
        ),
        (
            "post",
            "/v1/calls/{id}/cancel",
            format!("/v1/calls/{unknown}/cancel"),
            Some(""),
            404,
            "not_found",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{unknown}/wait"),
            None,
            404,
            "not_found",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{slow_id}/wait?timeout=1year"),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{slow_id}/wait?timeout=soon"),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{slow_id}/wait?replies=some"),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{slow_id}/wait?files=-1"),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/calls/{id}/wait",
            format!("/v1/calls/{slow_id}/wait?wait=1s"),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/files/{hash}",
            format!("/v1/files/{}", "ab".repeat(32)),
            None,
            404,
            "not_found",
        ),
        (
            "get",
            "/v1/files/{hash}",
            "/v1/files/abc".into(),
            None,
            400,
            "bad_request",
        ),
        (
            "get",
            "/v1/files/{hash}",
            format!("/v1/files/{}", "zz".repeat(32)),
            None,
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some("{not json"),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(r#"{"target":"bravo"}"#),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(r#"{"target":"","procedure":"echo"}"#),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(r#"{"target":"bravo","procedure":"echo","transport":"pigeon"}"#),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(r#"{"target":"bravo","procedure":"echo","params":[{"bytes":"***"}]}"#),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(
                r#"{"target":"bravo","procedure":"echo","params":[{"file":{"name":"a","base64":"%%"}}]}"#,
            ),
            400,
            "bad_request",
        ),
        (
            "post",
            "/v1/calls",
            "/v1/calls".into(),
            Some(r#"{"target":"dtn://charlie/","procedure":"echo","transport":"datagram"}"#),
            409,
            "no_route",
        ),
    ] {
        let body = body.map(|b| ("application/json", b.as_bytes()));
        let e = s.checked(method, spec_path, &path, body, status);
        assert_eq!(e["code"], code, "{method} {path}: {e}");
    }
    // A refused call was never made; the forgotten ones are gone.
    let list = s.checked("get", "/v1/calls", "/v1/calls", None, 200);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [photo_id.as_str(), nope_id.as_str(), slow_id.as_str()],
        "oldest first"
    );
    pair.shut_down();
}

#[test]
fn a_call_watcher_gets_each_change_once_and_a_close_after_the_end() {
    let pair = Pair::start();
    let s = pair.alpha();
    let call = |body: &str| -> String {
        let made = s.checked(
            "post",
            "/v1/calls",
            "/v1/calls",
            Some(("application/json", body.as_bytes())),
            201,
        );
        made["id"].as_str().unwrap().to_owned()
    };

    let slow = call(r#"{"target":"bravo","procedure":"slow","params":[{"int":1}]}"#);
    let mut ws = websocket(&s, &format!("/v1/calls/{slow}/watch")).expect("a WebSocket");
    // Other calls change while this one runs: each wakes the watcher, which sends nothing new.
    for i in 0..3 {
        let echo = call(&format!(
            r#"{{"target":"bravo","procedure":"echo","params":[{{"text":"{i}"}}]}}"#
        ));
        let done = s.checked(
            "get",
            "/v1/calls/{id}/wait",
            &format!("/v1/calls/{echo}/wait?timeout=15s"),
            None,
            200,
        );
        assert_eq!(done["state"], "succeeded", "{done}");
    }
    let (calls, close) = watched(&s, &mut ws);
    assert!(calls.len() >= 2, "{calls:?}");
    assert_eq!(calls[0]["state"], "waiting", "sent at once: {calls:?}");
    assert!(calls.iter().all(|c| c["id"] == slow.as_str()));
    assert!(
        !calls[0]["timeline"].as_array().unwrap().is_empty(),
        "with its timeline"
    );
    let last = calls.last().unwrap();
    assert_eq!(last["state"], "succeeded", "{last}");
    assert!(
        last["replies"][0]["value_text"]
            .as_str()
            .unwrap()
            .starts_with("slept 1 s")
    );
    assert!(
        calls[..calls.len() - 1]
            .iter()
            .all(|c| c["state"] == "waiting"),
        "nothing after the end: {calls:?}"
    );
    for pair in calls.windows(2) {
        assert_ne!(pair[0], pair[1], "a message repeats the one before");
    }
    assert_eq!(
        close,
        Some(tungstenite::protocol::frame::coding::CloseCode::Normal)
    );

    // A finished call: one message, then the close.
    let mut ws = websocket(&s, &format!("/v1/calls/{slow}/watch")).expect("a WebSocket");
    let (calls, close) = watched(&s, &mut ws);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["state"], "succeeded");
    assert_eq!(
        close,
        Some(tungstenite::protocol::frame::coding::CloseCode::Normal)
    );

    // Unknown and malformed ids are refused before the upgrade, with a JSON error.
    for (path, status) in [
        ("/v1/calls/0123456789abcdef0123456789abcdef/watch", 404),
        ("/v1/calls/nope/watch", 400),
    ] {
        let (got, body) = match websocket(&s, path) {
            Ok(_) => panic!("{path}: upgraded"),
            Err(refused) => refused,
        };
        assert_eq!(got, status, "{path}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        let schema = &s.spec["components"]["schemas"]["Error"];
        check(&s.spec, schema, &body, "body").unwrap();
    }
    pair.shut_down();
}

// A call to the node's own id is served at once, and its reply handled at once, with no other
// event to wake the engine.
#[test]
fn a_node_calls_itself() {
    let (rt, running, _dir) = start_with(|c| c.rpc = examples().rpc);
    let s = server(&running);
    let made = s.checked(
        "post",
        "/v1/calls",
        "/v1/calls",
        Some((
            "application/json",
            br#"{"target":"dtn://alpha/","procedure":"echo","params":[{"text":"me"}]}"#,
        )),
        201,
    );
    let done = s.checked(
        "get",
        "/v1/calls/{id}/wait",
        &format!(
            "/v1/calls/{}/wait?timeout=15s",
            made["id"].as_str().unwrap()
        ),
        None,
        200,
    );
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["replies"][0]["value_text"], "me");
    assert_eq!(done["replies"][0]["via"], "local");
    rt.block_on(running.shut_down());
}

/// Issue 25, defect 2: any web page could use the API. A request without the node's token, one
/// for a rebound host name, one from a page of another origin (a WebSocket too) and JSON sent as
/// `text/plain` are refused with their own codes, and none of them reaches a route.
#[test]
fn strangers_and_web_pages_are_refused_before_any_route_runs() {
    let (rt, running, _dir) = start();
    let s = server(&running);
    let addr = s.addr;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let refused = |response: Result<ureq::http::Response<ureq::Body>, ureq::Error>| {
        let mut response = response.unwrap();
        let status = response.status().as_u16();
        let body: Value = serde_json::from_reader(response.body_mut().as_reader()).unwrap();
        let schema = response_schema(&s.spec, "/v1/status", "get", status);
        check(&s.spec, schema, &body, "body").unwrap();
        (status, body["code"].as_str().unwrap().to_owned())
    };
    let url = format!("http://{addr}/v1/status");
    assert_eq!(
        refused(agent.get(&url).call()),
        (401, "unauthorized".to_owned())
    );
    assert_eq!(
        refused(
            agent
                .get(&url)
                .header("authorization", "Bearer 0000")
                .call()
        ),
        (401, "unauthorized".to_owned())
    );
    assert_eq!(
        refused(
            agent
                .get(&url)
                .header("authorization", &s.authorization)
                .header("host", "attacker.example:4550")
                .call()
        ),
        (403, "forbidden_host".to_owned())
    );
    assert_eq!(
        refused(
            agent
                .get(&url)
                .header("authorization", &s.authorization)
                .header("origin", "http://evil.example")
                .call()
        ),
        (403, "forbidden_origin".to_owned())
    );
    // A page's form posting JSON as text/plain makes no call.
    let calls = format!("http://{addr}/v1/calls");
    let body = r#"{"target":"dtn://alpha/","procedure":"null","params":[]}"#;
    assert_eq!(
        refused(
            agent
                .post(&calls)
                .header("authorization", &s.authorization)
                .header("content-type", "text/plain")
                .send(body)
        ),
        (415, "unsupported_media_type".to_owned())
    );
    assert_eq!(
        s.checked("get", "/v1/calls", "/v1/calls", None, 200),
        serde_json::json!([]),
        "no call was made"
    );
    // A WebSocket from another origin is refused before the upgrade.
    use tungstenite::client::IntoClientRequest as _;
    let mut request = format!("ws://{addr}/v1/endpoints/inbox/subscribe")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", s.authorization.parse().unwrap());
    request
        .headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    let stream = std::net::TcpStream::connect(addr).unwrap();
    match tungstenite::client(request, stream) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
            assert_eq!(response.status().as_u16(), 403);
        }
        Ok(_) => panic!("a page of another origin opened a WebSocket"),
        Err(e) => panic!("{e}"),
    }
    // With the token, from a program (no Origin), the same requests work.
    s.checked("get", "/v1/status", "/v1/status", None, 200);
    rt.block_on(running.shut_down());
}

/// The value of the metric `name` in a `/metrics` answer.
fn metric_value(s: &Server, name: &str) -> u64 {
    let text = String::from_utf8(s.call("get", "/metrics", None).body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

#[test]
fn a_key_a_server_presented_is_shown_and_once_accepted_its_reply_is_taken() {
    let pair = Pair::start();
    let a = pair.alpha();
    let bravo_key = pair
        .bravo()
        .checked("get", "/v1/status", "/v1/status", None, 200)["public_key"]
        .as_str()
        .unwrap()
        .to_owned();
    // alpha learns bravo's key from its hello when their session comes up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let keys = a.checked("get", "/v1/keys", "/v1/keys", None, 200);
        if keys
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["node"] == "dtn://bravo/")
        {
            assert_eq!(keys[0]["key"], bravo_key.as_str(), "{keys}");
            assert_eq!(keys[0]["source"], "hello", "{keys}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no key learnt: {keys}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // As if bravo had been reinstalled: alpha holds another key for it (a valid one, alpha's
    // own), named by the whole node id percent-encoded.
    let other = a.checked("get", "/v1/status", "/v1/status", None, 200)["public_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = format!(r#"{{"key":"{other}"}}"#);
    let set = a.checked(
        "put",
        "/v1/keys/{node}",
        "/v1/keys/dtn%3A%2F%2Fbravo%2F",
        Some(("application/json", body.as_bytes())),
        200,
    );
    assert_eq!(
        (&set["key"], &set["source"]),
        (&other.as_str().into(), &"accepted".into())
    );

    // A call any server may answer goes signed to every node; bravo's reply, signed by its
    // real key, is ignored, and the call says so once.
    let made = a.checked(
        "post",
        "/v1/calls",
        "/v1/calls",
        Some((
            "application/json",
            br#"{"target":"any","procedure":"echo","params":[{"text":"hi"}],"deadline":"60s"}"#,
        )),
        201,
    );
    let id = made["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/calls/{id}");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let line = loop {
        let call = a.checked("get", "/v1/calls/{id}", &path, None, 200);
        let lines: Vec<String> = call["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["text"].as_str().unwrap().to_owned())
            .filter(|t| t.contains("was signed by key"))
            .collect();
        // Two mismatches at least (the ack and the result), of which the call shows one line.
        // A hello of bravo's that crossed the key's replacement is a mismatch too, but no
        // reply: so the line is waited for as well.
        if metric_value(&a, "ferry_rpc_key_mismatch_total") >= 2 && !lines.is_empty() {
            assert_eq!(lines.len(), 1, "one line however many copies: {call}");
            assert_eq!(call["state"], "waiting", "{call}");
            break lines[0].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no mismatch: {call}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        line.starts_with(&format!(
            "a reply from dtn://bravo/ was signed by key {bravo_key}"
        )),
        "{line}"
    );
    assert!(line.contains("ferry keys accept dtn://bravo/"), "{line}");
    let status = a.checked("get", "/v1/status", "/v1/status", None, 200);
    assert!(
        status["rpc"]["key_mismatches"].as_u64().unwrap() >= 2,
        "{status}"
    );
    let keys = a.checked("get", "/v1/keys", "/v1/keys", None, 200);
    assert_eq!(keys[0]["presented"]["key"], bravo_key.as_str(), "{keys}");

    // Accepting what bravo presented (no key named): the call's next copy is answered and taken.
    let accepted = a.checked("put", "/v1/keys/{node}", "/v1/keys/bravo", None, 200);
    assert_eq!(accepted["key"], bravo_key.as_str(), "{accepted}");
    let done = a.checked(
        "get",
        "/v1/calls/{id}/wait",
        &format!("{path}/wait?timeout=20s"),
        None,
        200,
    );
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["replies"][0]["value_text"], "hi");

    // Refusals, each a JSON Error with its stable code.
    for (method, path, body, status, code) in [
        (
            "put",
            "/v1/keys/bravo",
            Some(r#"{"key":"12"}"#),
            400,
            "bad_request",
        ),
        ("put", "/v1/keys/alpha", Some(r#"{}"#), 400, "bad_request"),
        ("put", "/v1/keys/nobody", None, 404, "not_found"),
        ("delete", "/v1/keys/nobody", None, 404, "not_found"),
    ] {
        let body = body.map(|b| ("application/json", b.as_bytes()));
        let spec_path = "/v1/keys/{node}";
        let e = a.checked(method, spec_path, path, body, status);
        assert_eq!(e["code"], code, "{method} {path}: {e}");
    }
    let answer = a.call("delete", "/v1/keys/bravo", None);
    assert_eq!(answer.status, 204);
    pair.shut_down();
}

/// Writes a request's head (`Transfer-Encoding: chunked`, or `Content-Length` when `length` is
/// given) by hand, as a client that streams its body would.
fn request_head(s: &Server, path: &str, content_type: &str, length: Option<usize>) -> Vec<u8> {
    let framing = match length {
        Some(n) => format!("Content-Length: {n}"),
        None => "Transfer-Encoding: chunked".to_owned(),
    };
    format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nContent-Type: {content_type}\r\n\
         {framing}\r\n\r\n",
        s.addr, s.authorization
    )
    .into_bytes()
}

/// One chunk of a chunked body.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// Reads an HTTP/1.1 answer whose body has a `Content-Length`, without waiting for the
/// connection to close: (status, body).
fn read_answer(conn: &mut std::net::TcpStream) -> (u16, Value) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or_else(|| panic!("no content-length in {head}"));
            if got.len() >= end + 4 + length {
                let status = head[9..12].parse().unwrap();
                let body = serde_json::from_slice(&got[end + 4..end + 4 + length]).unwrap();
                return (status, body);
            }
        }
        let n = conn
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("no answer yet ({e}): {}", String::from_utf8_lossy(&got)));
        assert!(
            n > 0,
            "closed before answering: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

/// A body that declares no length is held to `api.max_payload` as it streams in: one byte past
/// the limit and the node answers 413 at once, without waiting for the rest (the client has not
/// ended the body, and never does), stores nothing and counts it; a body of exactly the limit,
/// chunked unevenly, arrives intact. The same holds for a JSON route at its own limit.
#[test]
fn a_chunked_body_is_refused_the_moment_it_passes_the_limit_and_one_within_arrives_intact() {
    let (rt, running, _dir) = start();
    let s = server(&running);
    let limit: usize = 2 << 20; // config(): api_max_payload
    let raw = "/v1/bundles/raw?destination=dtn%3A%2F%2Falpha%2Finbox";

    let mut conn = std::net::TcpStream::connect(s.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(&request_head(&s, raw, "application/octet-stream", None))
        .unwrap();
    let piece = vec![0x5au8; 64 << 10];
    for _ in 0..limit / piece.len() {
        conn.write_all(&chunk(&piece)).unwrap();
    }
    // One byte more than the limit, and the body is left open: no terminating chunk.
    conn.write_all(&chunk(b"!")).unwrap();
    let (status, body) = read_answer(&mut conn);
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    drop(conn);
    assert_eq!(metric_value(&s, "ferry_api_payload_too_large_total"), 1);
    assert_eq!(
        s.checked("get", "/v1/bundles", "/v1/bundles", None, 200),
        serde_json::json!([]),
        "nothing was stored"
    );
    assert_eq!(
        s.checked(
            "get",
            "/v1/endpoints/{endpoint}/bundles",
            "/v1/endpoints/inbox/bundles?payload=false",
            None,
            200
        ),
        serde_json::json!([]),
        "nothing was delivered"
    );

    // A JSON route's limit is the payload's base64 with some JSON around it.
    let json_limit = limit * 4 / 3 + 4096;
    let mut conn = std::net::TcpStream::connect(s.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(&request_head(&s, "/v1/calls", "application/json", None))
        .unwrap();
    let spaces = vec![b' '; json_limit / 3];
    for _ in 0..3 {
        conn.write_all(&chunk(&spaces)).unwrap();
    }
    conn.write_all(&chunk(&vec![b' '; json_limit - 3 * spaces.len() + 1]))
        .unwrap();
    let (status, body) = read_answer(&mut conn);
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    drop(conn);
    assert_eq!(metric_value(&s, "ferry_api_payload_too_large_total"), 2);
    assert_eq!(
        s.checked("get", "/v1/calls", "/v1/calls", None, 200),
        serde_json::json!([]),
        "no call was made"
    );

    // Exactly the limit, in uneven chunks, then the end of the body: sent intact.
    let payload: Vec<u8> = (0..limit as u32)
        .map(|i| (i * 31 + i / 977) as u8)
        .collect();
    let mut conn = std::net::TcpStream::connect(s.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(&request_head(&s, raw, "application/octet-stream", None))
        .unwrap();
    let mut at = 0;
    for (i, size) in [1usize, 7, 65_536, 300_001, 4_093]
        .iter()
        .cycle()
        .enumerate()
    {
        if at == payload.len() || i > 10_000 {
            break;
        }
        let end = (at + size).min(payload.len());
        conn.write_all(&chunk(&payload[at..end])).unwrap();
        at = end;
    }
    assert_eq!(at, payload.len());
    conn.write_all(b"0\r\n\r\n").unwrap();
    let (status, body) = read_answer(&mut conn);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["size"], limit);
    let waiting = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/inbox/bundles?wait=5s&payload=false",
        None,
        200,
    );
    let seq = waiting[0]["seq"].as_u64().unwrap();
    let got = s.call(
        "get",
        &format!("/v1/endpoints/inbox/bundles/{seq}/payload"),
        None,
    );
    assert_eq!(got.status, 200);
    assert!(got.body == payload, "the payload came back different");
    assert_eq!(metric_value(&s, "ferry_api_payload_too_large_total"), 2);
    rt.block_on(running.shut_down());
}

/// With `api.max_uploads = 1`, a second large upload waits, unread, while the first one's body
/// is still coming, and is counted; it goes on once the first is done, and both are sent. Small
/// requests (the metrics, a small send) are not held up meanwhile.
#[test]
fn a_large_upload_waits_for_a_slot_while_small_requests_go_on() {
    let (rt, running, _dir) = start_with(|c| c.api_max_uploads = 1);
    let s = server(&running);
    let raw = "/v1/bundles/raw?destination=dtn%3A%2F%2Falpha%2Finbox";
    let size = 1 << 20;

    // The first declares 1 MiB and sends half of it: it holds the only slot.
    let mut first = std::net::TcpStream::connect(s.addr).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    first
        .write_all(&request_head(
            &s,
            raw,
            "application/octet-stream",
            Some(size),
        ))
        .unwrap();
    first.write_all(&vec![1u8; size / 2]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metric_value(&s, "ferry_api_uploads") != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first upload took no slot"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The second sends its whole body; it is not answered while the first holds the slot.
    let mut second = std::net::TcpStream::connect(s.addr).unwrap();
    second
        .write_all(&request_head(
            &s,
            raw,
            "application/octet-stream",
            Some(size),
        ))
        .unwrap();
    let body = vec![2u8; size];
    let writer = std::thread::spawn(move || {
        second.write_all(&body).unwrap();
        second
    });
    while metric_value(&s, "ferry_api_uploads_waited_total") != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second upload did not wait"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A small send is not held up.
    s.checked(
        "post",
        "/v1/bundles/raw",
        raw,
        Some(("application/octet-stream", b"small")),
        201,
    );
    assert_eq!(metric_value(&s, "ferry_api_uploads"), 1);

    // The first ends; then the second goes on.
    first.write_all(&vec![1u8; size / 2]).unwrap();
    let (status, answer) = read_answer(&mut first);
    assert_eq!(status, 201, "{answer}");
    let mut second = writer.join().unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (status, answer) = read_answer(&mut second);
    assert_eq!(status, 201, "{answer}");
    assert_eq!(metric_value(&s, "ferry_api_uploads"), 0);
    let waiting = s.checked(
        "get",
        "/v1/endpoints/{endpoint}/bundles",
        "/v1/endpoints/inbox/bundles?wait=5s&payload=false",
        None,
        200,
    );
    let sizes: Vec<u64> = waiting
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [5, size as u64, size as u64]);
    rt.block_on(running.shut_down());
}
