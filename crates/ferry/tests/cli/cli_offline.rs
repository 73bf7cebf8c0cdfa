//! The client commands (`ferry status`, `send`, `recv`, …) without a real daemon: against an
//! address where nothing listens, and against a fake API (a few lines of HTTP/1.1 on a std
//! `TcpListener`) that answers canned bodies and records what it was asked, in order.
//!
//! Every wait is bounded: the fake server stops by itself, and `ferry` is killed if it runs long.

// Tests of the I/O shell use sockets, files and the clock.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one `ferry` run may take before the test gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(20);
/// How long a fake server lives at most.
const SERVER_LIMIT: Duration = Duration::from_secs(30);

/// A request as the fake server saw it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    /// Path and query, as sent.
    target: String,
    body: Vec<u8>,
}

/// A canned answer.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, body: &str) -> Self {
        Reply {
            status,
            content_type: "application/json",
            body: body.as_bytes().to_vec(),
        }
    }

    fn bytes(body: &[u8]) -> Self {
        Reply {
            status: 200,
            content_type: "application/octet-stream",
            body: body.to_vec(),
        }
    }

    fn no_content() -> Self {
        Reply {
            status: 204,
            content_type: "application/json",
            body: Vec::new(),
        }
    }
}

/// A fake node API on 127.0.0.1: one request per connection, answered by `handler`.
struct FakeApi {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApi {
    fn start(handler: impl Fn(&Request) -> Reply + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + SERVER_LIMIT;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Some(request) = read_request(&stream) {
                                log.lock().unwrap().push(request.clone());
                                write_reply(stream, handler(&request));
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        FakeApi {
            addr,
            log,
            stop,
            thread: Some(thread),
        }
    }

    fn api(&self) -> String {
        self.addr.to_string()
    }

    /// `METHOD target` of every request so far, in order.
    fn requests(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect()
    }

    fn bodies(&self) -> Vec<Vec<u8>> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut len = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        body,
    })
}

fn write_reply(mut stream: TcpStream, reply: Reply) {
    let reason = match reply.status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        404 => "Not Found",
        409 => "Conflict",
        _ => "Whatever",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nconnection: close\r\n",
        reply.status
    );
    if reply.status != 204 {
        head.push_str(&format!(
            "content-type: {}\r\ncontent-length: {}\r\n",
            reply.content_type,
            reply.body.len()
        ));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&reply.body);
    let _ = stream.flush();
}

/// Runs `ferry args…` with FERRY_API unset, killing it if it outlives [`RUN_LIMIT`].
fn ferry(args: &[&str]) -> Output {
    ferry_with(args, |_| {})
}

fn ferry_with(args: &[&str], setup: impl FnOnce(&mut Command)) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.args(args)
        .env_remove("FERRY_API")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut cmd);
    let mut child = cmd.spawn().expect("run ferry");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ferry {args:?} ran longer than {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ferry-cli-offline-{}-{name}", std::process::id()))
}

/// A port on 127.0.0.1 where nothing listens (bound, then closed again).
fn dead_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

const STATUS: &str = r#"{"node_id":"dtn://fake/","version":"0.1.0","uptime_s":42,
    "strategy":"epidemic","peers":0,"stored_bundles":0,"stored_bytes":0,"store_quota":1073741824,
    "inbox_bundles":0,"counters":{"bundles_received":0,"bundles_sent":0,"bytes_sent":0,
    "delivered":0,"duplicates":0,"dropped":0},"listening":["tcpcl://127.0.0.1:4556"]}"#;

#[test]
fn no_daemon_is_a_clear_error() {
    let api = dead_address();
    let out = ferry(&["status", "--api", &api]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "unreachable: {err}");
    assert!(
        err.starts_with(&format!(
            "ferry: cannot reach the ferry node API at {api} (is `ferry node` running?): "
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    // The address can come from the environment too.
    let out = ferry_with(&["recv", "inbox"], |cmd| {
        cmd.env("FERRY_API", &api);
    });
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains(&format!("cannot reach the ferry node API at {api} ")),
        "{}",
        text(&out.stderr)
    );

    // With --json, the error is one JSON document on stdout, and stderr stays quiet.
    let out = ferry(&["peers", "--json", "--api", &api]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["status"], "unreachable");
    assert_eq!(doc["error"]["exit"], 3);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach the ferry node API"),
        "{doc}"
    );
}

#[test]
fn a_wrong_command_line_is_a_usage_error_as_json_too() {
    let out = ferry(&["send", "--json", "--lifetime", "0s", "bravo", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["status"], "usage");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--lifetime"),
        "{doc}"
    );
    // Our own checks of a command line say usage too.
    let out = ferry(&["call", "dtn://bravo/inbox", "echo", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("give a node: dtn://bravo/"),
        "{doc}"
    );
    // Metrics are OpenMetrics text: --json is refused, not ignored.
    let out = ferry(&["metrics", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("OpenMetrics"),
        "{doc}"
    );
    // Without --json, clap's own message and status.
    let out = ferry(&["send"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // Help is no error, with or without --json.
    let out = ferry(&["status", "--help", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let out = ferry(&["--help"]);
    assert!(text(&out.stdout).contains("Exit status:"));
}

#[test]
fn short_node_names_mean_the_same_in_every_command() {
    let fake = FakeApi::start(|r| match (r.method.as_str(), r.target.as_str()) {
        ("POST", "/v1/bundles") => Reply::json(201, r#"{"id":"dtn://fake/-1-1","size":2}"#),
        ("GET", t) if t.starts_with("/v1/reports?") => Reply::json(200, "[]"),
        _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
    });
    for (dest, expected) in [
        ("bravo", "dtn://bravo/inbox"),
        ("bravo/files", "dtn://bravo/files"),
        ("dtn://bravo/files", "dtn://bravo/files"),
        ("ipn:2.1", "ipn:2.1"),
    ] {
        let out = ferry(&["send", dest, "hi", "--api", &fake.api()]);
        assert!(out.status.success(), "{dest}: {}", text(&out.stderr));
        let sent: serde_json::Value =
            serde_json::from_slice(fake.bodies().last().unwrap()).unwrap();
        assert_eq!(sent["destination"], expected, "{dest}");
    }
    let out = ferry(&["trace", "bravo", "--timeout", "1s", "--api", &fake.api()]);
    assert_eq!(out.status.code(), Some(6), "no delivery report in time");
    let bodies = fake.bodies();
    let posted = bodies.iter().rev().find(|b| !b.is_empty()).unwrap();
    let sent: serde_json::Value = serde_json::from_slice(posted).unwrap();
    assert_eq!(sent["destination"], "dtn://bravo/discard");
}

#[test]
fn status_shows_the_node() {
    let fake = FakeApi::start(|r| match (r.method.as_str(), r.target.as_str()) {
        ("GET", "/v1/status") => Reply::json(200, STATUS),
        _ => Reply::json(404, r#"{"code":"not_found","message":"no such thing"}"#),
    });
    let out = ferry(&["status", "--api", &fake.api()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("dtn://fake/"), "{stdout}");
    assert!(stdout.contains("epidemic"), "{stdout}");

    let out = ferry(&[
        "status",
        "--json",
        "--api",
        &format!("http://{}", fake.api()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["node_id"], "dtn://fake/");
    assert_eq!(fake.requests(), ["GET /v1/status", "GET /v1/status"]);
}

#[test]
fn an_api_error_is_its_message_and_code() {
    let fake = FakeApi::start(|_| {
        Reply::json(
            409,
            r#"{"code":"no_route","message":"no route to dtn://x/ now"}"#,
        )
    });
    let out = ferry(&[
        "send",
        "dtn://x/inbox",
        "hello",
        "--class",
        "datagram",
        "--api",
        &fake.api(),
    ]);
    assert_eq!(out.status.code(), Some(4), "refused by the node");
    assert_eq!(
        text(&out.stderr),
        "ferry: no route to dtn://x/ now (no_route)\n"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(fake.requests(), ["POST /v1/bundles"]);
    let body: serde_json::Value = serde_json::from_slice(&fake.bodies()[0]).unwrap();
    assert_eq!(body["destination"], "dtn://x/inbox");
    assert_eq!(body["payload"], "hello");
    assert_eq!(body["class"], "datagram");
}

#[test]
fn a_file_is_sent_as_raw_bytes() {
    let fake = FakeApi::start(|r| match (r.method.as_str(), r.target.split('?').next()) {
        ("POST", Some("/v1/bundles/raw")) => {
            Reply::json(201, r#"{"id":"dtn://fake/-1000-0","size":4}"#)
        }
        // --report follows the bundle until its delivery is reported.
        ("GET", Some("/v1/reports")) => Reply::json(
            200,
            r#"[{"bundle":"dtn://fake/-1000-0","from":"dtn://x/","status":"delivered",
                "at_ms":1002,"arrived_ms":1003,"reason":0}]"#,
        ),
        _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
    });
    let file = temp_path("send.bin");
    std::fs::write(&file, [0u8, 1, 2, 255]).unwrap();
    let out = ferry(&[
        "send",
        "dtn://x/inbox",
        "--file",
        file.to_str().unwrap(),
        "--report",
        "--api",
        &fake.api(),
    ]);
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "dtn://fake/-1000-0\n");
    assert_eq!(
        fake.requests(),
        [
            "POST /v1/bundles/raw?destination=dtn%3A%2F%2Fx%2Finbox&lifetime=3600s&class=dtn&report=true",
            "GET /v1/reports?bundle=dtn%3A%2F%2Ffake%2F-1000-0"
        ]
    );
    assert_eq!(fake.bodies()[0], [0u8, 1, 2, 255]);
    assert!(
        text(&out.stderr).contains("+2 ms  dtn://x/ delivered"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn recv_writes_the_payload_before_it_acknowledges() {
    const LIST: &str = "/v1/endpoints/dtn%3A%2F%2Ffake%2Finbox/bundles";
    const ITEM: &str = "/v1/endpoints/dtn%3A%2F%2Ffake%2Finbox/bundles/7";
    let file = temp_path("recv.out");
    let _ = std::fs::remove_file(&file);
    // What the file held when the acknowledgement arrived.
    let at_delete: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    let fake = {
        let (file, at_delete) = (file.clone(), at_delete.clone());
        FakeApi::start(move |r| {
            let path = r.target.split('?').next().unwrap_or_default();
            match (r.method.as_str(), path) {
                ("GET", LIST) => Reply::json(
                    200,
                    r#"[{"seq":7,"id":"dtn://a/-1000-1","source":"dtn://a/",
                        "destination":"dtn://fake/inbox","created_ms":1000,"size":11}]"#,
                ),
                ("GET", p) if p == format!("{ITEM}/payload") => Reply::bytes(b"hello world"),
                ("DELETE", ITEM) => {
                    *at_delete.lock().unwrap() = std::fs::read(&file).ok();
                    Reply::no_content()
                }
                _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
            }
        })
    };
    let out = ferry(&[
        "recv",
        "dtn://fake/inbox",
        "-o",
        file.to_str().unwrap(),
        "--timeout",
        "10s",
        "--api",
        &fake.api(),
    ]);
    let written = std::fs::read(&file).ok();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests[0].starts_with(&format!("GET {LIST}?max=1&wait=")),
        "{requests:?}"
    );
    assert!(requests[0].ends_with("&payload=false"), "{requests:?}");
    assert_eq!(
        requests[1..],
        [format!("GET {ITEM}/payload"), format!("DELETE {ITEM}")],
        "GET list, GET payload, DELETE, in that order"
    );
    assert_eq!(
        at_delete.lock().unwrap().as_deref(),
        Some(&b"hello world"[..]),
        "the payload was in the file when the bundle was acknowledged"
    );
    assert_eq!(written.as_deref(), Some(&b"hello world"[..]));
    assert!(out.stdout.is_empty());
}

/// A node with two bundles waiting at `inbox`, "hello" (seq 1) and "world\n" (seq 2).
fn two_waiting() -> FakeApi {
    FakeApi::start(|r| {
        let path = r.target.split('?').next().unwrap_or_default();
        match (r.method.as_str(), path) {
            ("GET", "/v1/endpoints/inbox/bundles") => Reply::json(
                200,
                r#"[{"seq":1,"id":"dtn://a/-1-0","source":"dtn://a/","destination":"dtn://f/inbox",
                     "created_ms":1,"size":5},
                    {"seq":2,"id":"dtn://a/-1-1","source":"dtn://a/","destination":"dtn://f/inbox",
                     "created_ms":1,"size":6}]"#,
            ),
            ("GET", "/v1/endpoints/inbox/bundles/1/payload") => Reply::bytes(b"hello"),
            ("GET", "/v1/endpoints/inbox/bundles/2/payload") => Reply::bytes(b"world\n"),
            ("DELETE", _) => Reply::no_content(),
            _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
        }
    })
}

#[test]
fn recv_prints_payloads_and_acknowledges_each() {
    let fake = two_waiting();
    let out = ferry(&["recv", "inbox", "--count", "2", "--api", &fake.api()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\nworld\n");
    let requests = fake.requests();
    assert!(requests[0].starts_with("GET /v1/endpoints/inbox/bundles?max=2&"));
    assert_eq!(
        requests[1..],
        [
            "GET /v1/endpoints/inbox/bundles/1/payload",
            "DELETE /v1/endpoints/inbox/bundles/1",
            "GET /v1/endpoints/inbox/bundles/2/payload",
            "DELETE /v1/endpoints/inbox/bundles/2",
        ]
    );
}

#[test]
fn recv_times_out_with_a_count() {
    // A node with nothing waiting, which answers every long poll at once.
    let fake = FakeApi::start(|_| Reply::json(200, "[]"));
    let started = Instant::now();
    let out = ferry(&["recv", "inbox", "--timeout", "1s", "--api", &fake.api()]);
    assert_eq!(out.status.code(), Some(6), "nothing came in time");
    assert_eq!(text(&out.stderr), "ferry: received 0 of 1 within 1s\n");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.starts_with("GET /v1/endpoints/inbox/bundles?")),
        "{:?}",
        fake.requests()
    );
}

#[test]
fn output_file_and_several_bundles_do_not_mix() {
    let out = ferry(&["recv", "inbox", "-o", "x", "--count", "2"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        text(&out.stderr).contains("--count 1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn ping_round_trips_through_an_echo() {
    // The fake echoes: what is sent to dtn://b/echo waits at the ping endpoint next.
    let echoed: Arc<Mutex<Vec<String>>> = Arc::default();
    let fake = {
        let echoed = echoed.clone();
        FakeApi::start(move |r| {
            let path = r.target.split('?').next().unwrap_or_default();
            match (r.method.as_str(), path) {
                ("GET", "/v1/status") => Reply::json(200, STATUS),
                ("POST", "/v1/bundles") => {
                    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                    assert_eq!(body["destination"], "dtn://b/echo");
                    echoed
                        .lock()
                        .unwrap()
                        .push(body["payload_base64"].as_str().unwrap().to_owned());
                    Reply::json(201, r#"{"id":"dtn://fake/ping-1-1-0","size":64}"#)
                }
                ("GET", p) if p.starts_with("/v1/endpoints/ping-") => {
                    let waiting = std::mem::take(&mut *echoed.lock().unwrap());
                    if waiting.is_empty() {
                        // A long poll holds an empty answer back a little.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let items: Vec<serde_json::Value> = waiting
                        .into_iter()
                        .enumerate()
                        .map(|(i, b64)| {
                            serde_json::json!({"seq": i, "id": "dtn://b/echo-1-0",
                                "source": "dtn://b/echo", "destination": "dtn://fake/ping-x",
                                "created_ms": 1, "size": 64, "payload_base64": b64})
                        })
                        .collect();
                    Reply::json(200, &serde_json::Value::from(items).to_string())
                }
                ("DELETE", _) => Reply::no_content(),
                _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
            }
        })
    };
    let out = ferry(&[
        "ping",
        "dtn://b",
        "-c",
        "2",
        "-i",
        "50ms",
        "--timeout",
        "3s",
        "--api",
        &fake.api(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("64 bytes from dtn://b/: seq=1 time="),
        "{stdout}"
    );
    assert!(
        stdout.contains("64 bytes from dtn://b/: seq=2 time="),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 bundles transmitted, 2 received, 0% loss"),
        "{stdout}"
    );
    let requests = fake.requests();
    assert_eq!(requests[0], "GET /v1/status");
    let source_service = requests
        .iter()
        .find_map(|r| r.strip_prefix("GET /v1/endpoints/"))
        .and_then(|r| r.split('/').next())
        .unwrap();
    assert!(source_service.starts_with("ping-"), "{requests:?}");
    assert_eq!(
        requests.iter().filter(|r| r.starts_with("DELETE ")).count(),
        2,
        "every answer acknowledged: {requests:?}"
    );
}

#[test]
fn trace_prints_reports_until_delivered() {
    let polls = Arc::new(Mutex::new(0));
    let fake = {
        let polls = polls.clone();
        FakeApi::start(move |r| {
            let path = r.target.split('?').next().unwrap_or_default();
            match (r.method.as_str(), path) {
                ("POST", "/v1/bundles") => {
                    Reply::json(201, r#"{"id":"dtn://fake/-1000-3","size":11}"#)
                }
                ("GET", "/v1/reports") => {
                    let mut n = polls.lock().unwrap();
                    *n += 1;
                    let forwarded = r#"{"bundle":"dtn://fake/-1000-3","from":"dtn://b/",
                        "status":"forwarded","at_ms":1004,"arrived_ms":1010,"reason":0}"#;
                    let delivered = r#"{"bundle":"dtn://fake/-1000-3","from":"dtn://c/",
                        "status":"delivered","at_ms":0,"arrived_ms":2500,"reason":0}"#;
                    let body = if *n == 1 {
                        format!("[{forwarded}]")
                    } else {
                        format!("[{forwarded},{delivered}]")
                    };
                    Reply::json(200, &body)
                }
                _ => Reply::json(404, r#"{"code":"not_found","message":"no"}"#),
            }
        })
    };
    let out = ferry(&[
        "trace",
        "dtn://c/inbox",
        "--timeout",
        "10s",
        "--api",
        &fake.api(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    // An endpoint names its node; the trace goes to the node's discard service.
    assert!(lines[0].starts_with("trace dtn://fake/-1000-3 to dtn://c/,"));
    assert!(lines[2].starts_with("dtn://b/ ") && lines[2].contains("forwarded"));
    assert!(
        lines[2].contains("+4 ms") && lines[2].contains("+10 ms"),
        "{stdout}"
    );
    assert!(lines[3].starts_with("dtn://c/ ") && lines[3].contains("delivered"));
    assert!(lines[3].contains("+1.50 s"), "{stdout}");
    let requests = fake.requests();
    assert_eq!(requests[0], "POST /v1/bundles");
    assert_eq!(
        requests[1],
        "GET /v1/reports?bundle=dtn%3A%2F%2Ffake%2F-1000-3"
    );
    let sent: serde_json::Value = serde_json::from_slice(&fake.bodies()[0]).unwrap();
    assert_eq!(sent["report"], true);
    assert_eq!(sent["payload"], "ferry trace");
    assert_eq!(sent["lifetime"], "3600s");
}

#[test]
fn recv_into_a_directory_names_files_by_bundle_id() {
    let fake = two_waiting();
    let dir = temp_path("out-dir");
    let _ = std::fs::remove_dir_all(&dir);
    let out = ferry(&[
        "recv",
        "inbox",
        "-n",
        "2",
        "--out-dir",
        dir.to_str().unwrap(),
        "--json",
        "--api",
        &fake.api(),
    ]);
    let first = std::fs::read(dir.join("dtn___a_-1-0"));
    let second = std::fs::read(dir.join("dtn___a_-1-1"));
    let names = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first.unwrap(), b"hello");
    assert_eq!(second.unwrap(), b"world\n");
    assert_eq!(names, 2, "no temporary files left behind");
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["id"], "dtn://a/-1-0");
    assert!(lines[0]["file"].as_str().unwrap().ends_with("dtn___a_-1-0"));
}

#[test]
fn recv_json_carries_the_payload_in_base64() {
    let fake = two_waiting();
    let out = ferry(&["recv", "inbox", "-n", "2", "--json", "--api", &fake.api()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[0]["payload_base64"], "aGVsbG8=");
    assert_eq!(lines[1]["payload_base64"], "d29ybGQK");
}
