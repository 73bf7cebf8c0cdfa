//! `GET /metrics` of two real daemons on loopback, scraped over HTTP and parsed: calls made
//! (answered and refused) move the caller's call counters and latency histograms and the
//! server's served counters; a bundle sent moves the receiver's delivery histogram and bytes
//! received. Every wait is bounded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use daemon::Running;
use daemon::calls::{CallSpec, ParamSpec, WaitFor};
use daemon::control::{Request, SendRequest};

use crate::common::{TempDir, free_port, loopback_config};

/// One scrape, parsed: each sample by its name and its labels as written (`a="x",b="y"`).
#[derive(Debug)]
struct Scrape(BTreeMap<(String, String), f64>);

impl Scrape {
    fn get(&self, name: &str, labels: &str) -> f64 {
        self.0
            .get(&(name.to_owned(), labels.to_owned()))
            .copied()
            .unwrap_or(0.0)
    }

    fn has(&self, name: &str) -> bool {
        self.0.keys().any(|(n, _)| n == name)
    }
}

/// Parses an OpenMetrics text exposition strictly enough to catch a broken one: every sample
/// belongs to a family declared by a `# TYPE` line before it (counters' samples end in
/// `_total`, histograms' in `_bucket`, `_sum` or `_count`), no series appears twice, values
/// are numbers, and the text ends with `# EOF`.
fn parse(text: &str) -> Scrape {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(
                families.insert(name.into(), kind.into()).is_none(),
                "{name} declared twice"
            );
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => {
                let l = l.strip_suffix('}').expect("labels end with }");
                assert!(!l.is_empty(), "an empty label set: {line}");
                (n, l)
            }
            None => (series, ""),
        };
        let family = [
            ("counter", "_total"),
            ("histogram", "_bucket"),
            ("histogram", "_sum"),
            ("histogram", "_count"),
            ("gauge", ""),
        ]
        .iter()
        .find_map(|(kind, suffix)| {
            let f = name.strip_suffix(suffix)?;
            (families.get(f).map(String::as_str) == Some(*kind)).then_some(f)
        });
        assert!(family.is_some(), "sample of no declared family: {line}");
        assert!(
            samples
                .insert((name.to_owned(), labels.to_owned()), value)
                .is_none(),
            "series twice: {line}"
        );
    }
    Scrape(samples)
}

fn config(name: &str, dir: &Path, port: u16, peers: &[SocketAddr], serve: bool) -> daemon::Config {
    let mut c = loopback_config(name, dir, port);
    if serve {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/node.toml");
        c.rpc = daemon::Config::load(&examples, "test")
            .expect("examples/node.toml loads")
            .rpc;
    }
    c.keepalive = Duration::from_secs(1);
    c.peers = peers.to_vec();
    c.api_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    c
}

/// `GET /metrics` over HTTP, as a scraper asks.
async fn scrape(node: &Running) -> Scrape {
    let url = format!("http://{}/metrics", node.api_addr.expect("the API listens"));
    let auth = format!("Bearer {}", node.api_token);
    let (content_type, text) = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into();
        let mut response = agent
            .get(&url)
            .header("authorization", &auth)
            .call()
            .expect("GET /metrics answers 200");
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (content_type, response.body_mut().read_to_string().unwrap())
    })
    .await
    .unwrap();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    parse(&text)
}

fn call(procedure: &str, params: Vec<ParamSpec>) -> CallSpec {
    CallSpec {
        target: "bravo".into(),
        procedure: procedure.into(),
        params,
        ..CallSpec::default()
    }
}

async fn call_to_end(node: &Running, spec: CallSpec) -> String {
    let made = node.control.call(spec).await.unwrap();
    let done = node
        .control
        .wait_call(&made.id, WaitFor::default(), Duration::from_secs(30))
        .await
        .unwrap();
    assert!(done.finished(), "not finished within 30 s: {done:#?}");
    done.state
}

/// A number that must have grown by exactly `by` between two scrapes.
fn grew(before: &Scrape, after: &Scrape, name: &str, labels: &str, by: f64) {
    let (b, a) = (before.get(name, labels), after.get(name, labels));
    assert_eq!(
        a - b,
        by,
        "{name}{{{labels}}} went from {b} to {a}, not up by {by}:\n{after:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_bundles_move_the_scraped_metrics() {
    let dirs = (TempDir::new("metrics"), TempDir::new("metrics"));
    let pb = free_port();
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[], true))
        .await
        .unwrap();
    let a = daemon::start(config(
        "alpha",
        dirs.0.path(),
        free_port(),
        &[SocketAddr::from(([127, 0, 0, 1], pb))],
        false,
    ))
    .await
    .unwrap();
    for i in 0.. {
        if a.control.ask(Request::Status).await.unwrap().peers == 1 {
            break;
        }
        assert!(i < 500, "no peer within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (a0, b0) = (scrape(&a).await, scrape(&b).await);
    assert_eq!(
        a0.get(
            "ferry_build_info",
            concat!("version=\"", env!("CARGO_PKG_VERSION"), "\"")
        ),
        1.0
    );
    for process in [
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(a0.has(process), "no {process}: {a0:#?}");
    }
    assert!(a0.get("process_resident_memory_bytes", "") > 0.0);

    // One answered call, one refused (bravo does not offer `fly`).
    let answered = call_to_end(&a, call("echo", vec![ParamSpec::Text("hi".into())])).await;
    assert_eq!(answered, "succeeded");
    assert_eq!(call_to_end(&a, call("fly", vec![])).await, "failed");

    let (a1, b1) = (scrape(&a).await, scrape(&b).await);
    let made = "mode=\"explicit\",transport=\"auto\"";
    grew(&a0, &a1, "ferry_rpc_calls_made_total", made, 2.0);
    let explicit = "mode=\"explicit\"";
    grew(
        &a0,
        &a1,
        "ferry_rpc_calls_finished_total",
        "mode=\"explicit\",outcome=\"succeeded\",code=\"none\"",
        1.0,
    );
    grew(
        &a0,
        &a1,
        "ferry_rpc_calls_finished_total",
        "mode=\"explicit\",outcome=\"failed\",code=\"not_offered\"",
        1.0,
    );
    grew(&a0, &a1, "ferry_rpc_call_seconds_count", explicit, 2.0);
    grew(
        &a0,
        &a1,
        "ferry_rpc_call_first_result_seconds_count",
        explicit,
        1.0,
    );
    // Every call ended within the 30 s bound, so it is below the +Inf bucket and in the
    // 64-minute one (0.01 × 4^9 s); the sum is their time, more than nothing.
    grew(
        &a0,
        &a1,
        "ferry_rpc_call_seconds_bucket",
        "le=\"2621.44\",mode=\"explicit\"",
        2.0,
    );
    assert!(
        a1.get("ferry_rpc_call_seconds_sum", explicit)
            > a0.get("ferry_rpc_call_seconds_sum", explicit)
    );
    // The server saw one call accepted and run, one refused; the caller served none.
    grew(
        &b0,
        &b1,
        "ferry_rpc_calls_served_total",
        "result=\"accepted\"",
        1.0,
    );
    grew(
        &b0,
        &b1,
        "ferry_rpc_calls_served_total",
        "result=\"rejected\"",
        1.0,
    );
    grew(
        &b0,
        &b1,
        "ferry_rpc_executions_finished_total",
        "outcome=\"success\",code=\"none\"",
        1.0,
    );
    grew(
        &a0,
        &a1,
        "ferry_rpc_calls_served_total",
        "result=\"accepted\"",
        0.0,
    );
    grew(&b0, &b1, "ferry_rpc_calls_made_total", made, 0.0);

    // A bundle alpha → bravo: bravo's delivery histogram counts it, its bytes are received.
    let payload = vec![7u8; 3000];
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(&payload)),
        lifetime: Some("10m".into()),
        ..SendRequest::to("dtn://bravo/inbox")
    };
    a.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let got = b
        .control
        .wait_for("dtn://bravo/inbox", 1, None, true, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "the bundle did not arrive within 20 s");
    let b2 = scrape(&b).await;
    grew(&b1, &b2, "ferry_bundle_delivery_seconds_count", "", 1.0);
    grew(&b1, &b2, "ferry_bundles_delivered_total", "", 1.0);
    let bytes = b2.get("ferry_bytes_received_total", "") - b1.get("ferry_bytes_received_total", "");
    assert!(
        bytes >= payload.len() as f64,
        "{bytes} bytes received for a {}-byte payload",
        payload.len()
    );

    // A bundle for a node nobody reaches, living 1 s: alpha holds it, then drops it as expired.
    let a2 = scrape(&a).await;
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(b"late")),
        lifetime: Some("1s".into()),
        ..SendRequest::to("dtn://nowhere/inbox")
    };
    a.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let expired = "reason=\"expired\"";
    let mut a3 = scrape(&a).await;
    for _ in 0..100 {
        if a3.get("ferry_bundle_drops_total", expired) > a2.get("ferry_bundle_drops_total", expired)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        a3 = scrape(&a).await;
    }
    grew(&a2, &a3, "ferry_bundle_drops_total", expired, 1.0);
    grew(&a2, &a3, "ferry_bundles_dropped_total", "", 1.0);

    a.shut_down().await;
    b.shut_down().await;
}
