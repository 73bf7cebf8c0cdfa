//! The web dashboard of a running daemon (`daemon::dashboard`), over real sockets: its page and
//! assets are served without the token but with a strict Content-Security-Policy, and still
//! refuse a foreign `Host` (DNS rebinding) and a foreign `Origin`; the token a browser offers
//! as a WebSocket subprotocol opens a call watcher, a wrong one or a foreign page does not, and
//! a token in the query string is never taken. The page in a real browser is
//! `clients/python/tests/test_dashboard.py`.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::{TempDir, loopback_config};

/// An HTTP/1.1 answer, read whole.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map_or("", |(_, v)| v.as_str())
    }
}

/// `GET path` with exactly these headers besides `Connection: close` (raw, so that `Host`
/// can be anything).
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn start() -> (tokio::runtime::Runtime, daemon::Running, TempDir) {
    let dir = TempDir::new("dashboard");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut c = loopback_config("alpha", dir.path(), 0);
    c.api_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let running = rt.block_on(daemon::start(c)).unwrap();
    (rt, running, dir)
}

#[test]
fn the_page_and_its_assets_need_no_token_but_a_strict_policy_and_the_host_checks() {
    let (rt, running, _dir) = start();
    let addr = running.api_addr.unwrap();
    let host = addr.to_string();
    let own = [("Host", host.as_str())];

    let page = get(addr, "/", &own);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.header("content-type").starts_with("text/html"));
    let csp = page.header("content-security-policy");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} not in {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), "nosniff");
    assert_eq!(page.header("x-frame-options"), "DENY");
    assert!(page.body.contains(r#"<script src="/dashboard/app.js""#));
    assert!(!page.body.contains("<script>"), "no inline script");

    for (asset, content_type) in [
        ("app.js", "text/javascript"),
        ("style.css", "text/css"),
        ("icon.svg", "image/svg+xml"),
        ("index.html", "text/html"),
    ] {
        let a = get(addr, &format!("/dashboard/{asset}"), &own);
        assert_eq!(a.status, 200, "{asset}");
        assert!(
            a.header("content-type").starts_with(content_type),
            "{asset}"
        );
        assert_eq!(a.header("content-security-policy"), csp, "{asset}");
        // Nothing is loaded from elsewhere: the field has no internet.
        for outside in [
            "src=\"http",
            "href=\"http",
            "url(http",
            "@import",
            "//fonts.",
        ] {
            assert!(!a.body.contains(outside), "{asset} loads {outside}…");
        }
    }
    let missing = get(addr, "/dashboard/../Cargo.toml", &own);
    assert_eq!(missing.status, 404);
    // The API itself still needs the token.
    assert_eq!(get(addr, "/v1/status", &own).status, 401);

    // A rebound name, or another page, gets nothing: not even the page.
    let rebound = get(addr, "/", &[("Host", "attacker.example")]);
    assert_eq!(rebound.status, 403);
    assert!(rebound.body.contains("forbidden_host"), "{}", rebound.body);
    let foreign = get(
        addr,
        "/dashboard/app.js",
        &[("Host", &host), ("Origin", "http://evil.example")],
    );
    assert_eq!(foreign.status, 403);
    assert!(
        foreign.body.contains("forbidden_origin"),
        "{}",
        foreign.body
    );
    rt.block_on(running.shut_down());
}

/// A WebSocket upgrade of `path` as a browser page makes it: no `Authorization`, an `Origin`,
/// and `protocols` offered. The subprotocol the server picked, or the refusal's status.
fn browser_websocket(
    addr: SocketAddr,
    path: &str,
    origin: &str,
    protocols: &str,
) -> Result<(tungstenite::WebSocket<TcpStream>, String), u16> {
    use tungstenite::client::IntoClientRequest as _;
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("origin", origin.parse().unwrap());
    headers.insert("sec-websocket-protocol", protocols.parse().unwrap());
    match tungstenite::client(request, stream) {
        Ok((ws, response)) => {
            let picked = response
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            Ok((ws, picked))
        }
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("{path}: {e}"),
    }
}

#[test]
fn a_browser_watches_a_call_with_the_token_as_a_subprotocol_and_only_so() {
    let (rt, running, _dir) = start();
    let addr = running.api_addr.unwrap();
    let token = running.api_token.clone();
    // A call to this node's own built-in `null`, finished before the watch.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let made: serde_json::Value = agent
        .post(&format!("http://{addr}/v1/calls?wait=10s"))
        .header("authorization", &format!("Bearer {token}"))
        .header("content-type", "application/json")
        .send(r#"{"target": "dtn://alpha/", "procedure": "null"}"#.as_bytes())
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    let id = made["id"].as_str().expect("a call id").to_owned();
    let path = format!("/v1/calls/{id}/watch");
    let own = format!("http://{addr}");
    let offered = format!("ferry, ferry-token.{token}");

    let (mut ws, picked) =
        browser_websocket(addr, &path, &own, &offered).expect("the token opens the watcher");
    assert_eq!(
        picked, "ferry",
        "the server picks the fixed protocol, never echoes the token"
    );
    match ws.read().expect("the call") {
        tungstenite::Message::Text(t) => {
            let call: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
            assert_eq!(call["id"], id.as_str());
            assert!(!call["timeline"].as_array().unwrap().is_empty(), "{call}");
        }
        other => panic!("expected the call, got {other:?}"),
    }

    // Every WebSocket route takes it so, and picks the fixed protocol (a browser fails a
    // socket whose server picked none of those it offered).
    for other in ["/v1/endpoints/inbox/subscribe", "/v1/providers"] {
        let (_ws, picked) = browser_websocket(addr, other, &own, &offered)
            .unwrap_or_else(|status| panic!("{other}: {status}"));
        assert_eq!(picked, "ferry", "{other}");
    }

    let wrong = format!("ferry, ferry-token.{}", "0".repeat(64));
    assert_eq!(
        browser_websocket(addr, &path, &own, &wrong).err(),
        Some(401),
        "a wrong token"
    );
    assert_eq!(
        browser_websocket(addr, &path, &own, "ferry").err(),
        Some(401),
        "no token"
    );
    assert_eq!(
        browser_websocket(addr, &path, "http://evil.example", &offered).err(),
        Some(403),
        "another page, with the right token"
    );
    assert_eq!(
        browser_websocket(addr, &format!("{path}?token={token}"), &own, "ferry").err(),
        Some(401),
        "never from the query string"
    );
    rt.block_on(running.shut_down());
}
