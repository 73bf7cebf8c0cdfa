//! A blocking client of the `ferry node` local HTTP/JSON API, shared by the client commands
//! (`status`, `send`, `recv`, `ping`, …).
//!
//! It turns every failure into a [`ClientError`] a person can act on: no daemon at the address,
//! an error the API reported (`{"code", "message"}`), or a broken exchange. It never retries: the
//! commands decide what a failure means for them.

use std::fmt;
use std::io::{self, Read};
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use ureq::http::Response;
use ureq::{Body, BodyReader, SendBody};

use crate::api::ApiError;

/// Where `ferry node` listens for its API unless configured otherwise.
pub(crate) const DEFAULT_API: &str = "127.0.0.1:4550";

/// How long to wait for a connection: the API is local, so a slow connect means trouble.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an ordinary request may wait for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Added to a long poll's `wait` for the answer's own way back.
const LONG_POLL_SLACK: Duration = Duration::from_secs(15);
/// JSON answers larger than this are refused (a listing of a very full store stays below it).
const JSON_LIMIT: u64 = 256 << 20;
/// Error bodies are read up to this much.
const ERROR_BODY_LIMIT: u64 = 64 << 10;

/// The options every client command takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct ApiArgs {
    /// Address of the node's local API: HOST:PORT or http://HOST:PORT.
    #[arg(long, value_name = "ADDR", env = "FERRY_API", default_value = DEFAULT_API)]
    pub(crate) api: String,
    /// Print the API's JSON instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Why a request to the API failed.
#[derive(Debug)]
pub(crate) enum ClientError {
    /// Nothing answered at the address: no daemon runs there (or its API is off).
    Unreachable {
        /// The address as the user gave it.
        api: String,
        /// What the operating system said.
        error: String,
    },
    /// The API answered with its error body.
    Api {
        /// HTTP status.
        status: u16,
        /// Stable machine-readable code (`no_route`, `not_found`, …).
        code: String,
        /// What went wrong, for people.
        message: String,
    },
    /// A failing HTTP status without the API's error body (not a ferry node, or a proxy).
    Http {
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The exchange broke after connecting: timeout, closed connection, unreadable JSON.
    Transport {
        /// The address as the user gave it.
        api: String,
        /// What happened.
        error: String,
    },
}

impl ClientError {
    /// Whether the API said the thing asked about does not exist (HTTP 404).
    pub(crate) fn is_not_found(&self) -> bool {
        match self {
            ClientError::Api { status, .. } | ClientError::Http { status, .. } => *status == 404,
            _ => false,
        }
    }

    /// Whether the request reached the API and the API refused it (as opposed to the API being
    /// unreachable or the exchange breaking).
    pub(crate) fn is_api_error(&self) -> bool {
        matches!(self, ClientError::Api { .. } | ClientError::Http { .. })
    }

    /// Classifies a transport failure: connecting failed, or something later did.
    fn from_ureq(api: &str, e: ureq::Error) -> Self {
        use io::ErrorKind as K;
        let api = api.to_owned();
        let unreachable = |error: String| ClientError::Unreachable {
            api: api.clone(),
            error,
        };
        match e {
            ureq::Error::Io(e)
                if matches!(
                    e.kind(),
                    K::ConnectionRefused
                        | K::HostUnreachable
                        | K::NetworkUnreachable
                        | K::AddrNotAvailable
                ) =>
            {
                unreachable(e.to_string())
            }
            ureq::Error::HostNotFound => unreachable("host not found".into()),
            ureq::Error::ConnectionFailed => unreachable("connection failed".into()),
            ureq::Error::Timeout(t @ (ureq::Timeout::Connect | ureq::Timeout::Resolve)) => {
                unreachable(format!("timed out ({t})"))
            }
            ureq::Error::Io(e) => ClientError::Transport {
                api,
                error: e.to_string(),
            },
            e => ClientError::Transport {
                api,
                error: e.to_string(),
            },
        }
    }

    /// The error of an answer with a failing status, from its body.
    fn from_body(status: u16, body: &str) -> Self {
        match serde_json::from_str::<ApiError>(body) {
            Ok(e) => ClientError::Api {
                status,
                code: e.code,
                message: e.message,
            },
            Err(_) => ClientError::Http {
                status,
                body: body.trim().chars().take(200).collect(),
            },
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Unreachable { api, error } => write!(
                f,
                "cannot reach the ferry node API at {api} (is `ferry node` running?): {error}"
            ),
            ClientError::Api { code, message, .. } => write!(f, "{message} ({code})"),
            ClientError::Http { status, body } if body.is_empty() => {
                write!(f, "the ferry node API answered HTTP {status}")
            }
            ClientError::Http { status, body } => {
                write!(f, "the ferry node API answered HTTP {status}: {body}")
            }
            ClientError::Transport { api, error } => {
                write!(f, "talking to the ferry node API at {api}: {error}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to one node's API (connections are pooled across requests).
pub(crate) struct Client {
    /// `http://host:port`, no trailing slash.
    base: String,
    /// The address as the user gave it, for messages.
    api: String,
    /// `Bearer <token>` for the node's API, if a token was found ([`crate::api_token`]).
    authorization: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    /// A client of the API at `api` (`host:port` or `http://host:port`). Connects lazily.
    pub(crate) fn new(api: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            // The API's errors are JSON bodies on 4xx/5xx answers: read them, don't fail early.
            .http_status_as_error(false)
            // The API is local: an HTTP_PROXY meant for the outside world must not capture it.
            .proxy(None)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_response(Some(ANSWER_TIMEOUT))
            .user_agent(concat!("ferry/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let base = base_url(api);
        Self {
            // The token is found by the port, so by the address with its default port filled in.
            authorization: crate::api_token::find(&base).map(|t| format!("Bearer {t}")),
            base,
            api: api.to_owned(),
            agent,
        }
    }

    /// The API token this client presents, if one was found.
    pub(crate) fn token(&self) -> Option<&str> {
        self.authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
    }

    /// The request with the token, if there is one.
    fn authorize<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.authorization {
            Some(value) => request.header("authorization", value),
            None => request,
        }
    }

    fn get(&self, path: &str) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        self.authorize(self.agent.get(self.url(path)))
    }

    fn post(&self, path: &str) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
        self.authorize(self.agent.post(self.url(path)))
    }

    /// `GET path` of a text answer (`/metrics`).
    pub(crate) fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let answer = self.get(path).call();
        let mut response = self.check(answer)?;
        response
            .body_mut()
            .with_config()
            .limit(JSON_LIMIT)
            .read_to_string()
            .map_err(|e| ClientError::Transport {
                api: self.api.clone(),
                error: e.to_string(),
            })
    }

    /// The full URL of an API path (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path`, the JSON answer as it came (for `--json`, and to parse further).
    pub(crate) fn get_value(&self, path: &str) -> Result<Value, ClientError> {
        self.get_json(path)
    }

    /// `GET path`, the JSON answer parsed.
    pub(crate) fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.get(path).call();
        self.json_answer(answer)
    }

    /// `GET path` of a long poll that may hold the answer back for `wait`.
    pub(crate) fn long_poll<T: DeserializeOwned>(
        &self,
        path: &str,
        wait: Duration,
    ) -> Result<T, ClientError> {
        let answer = self
            .get(path)
            .config()
            .timeout_recv_response(Some(wait + LONG_POLL_SLACK))
            .build()
            .call();
        self.json_answer(answer)
    }

    /// `POST path` with a JSON body; the JSON answer as it came.
    pub(crate) fn post_json(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<Value, ClientError> {
        let answer = self.post(path).send_json(body);
        self.json_answer(answer)
    }

    /// `POST path` without a body (an action on a resource); the JSON answer as it came.
    pub(crate) fn post_empty(&self, path: &str) -> Result<Value, ClientError> {
        let answer = self.post(path).send_empty();
        self.json_answer(answer)
    }

    /// `POST path` with `len` raw bytes read from `body`; the JSON answer as it came.
    pub(crate) fn post_raw(
        &self,
        path: &str,
        body: impl Read + 'static,
        len: u64,
    ) -> Result<Value, ClientError> {
        let answer = self
            .post(path)
            .content_type("application/octet-stream")
            // Given explicitly, so the body goes length-delimited rather than chunked even though
            // it is a reader (the daemon can refuse an oversized payload before reading it).
            .header("content-length", len)
            .send(SendBody::from_owned_reader(body));
        self.json_answer(answer)
    }

    /// `GET path` of raw bytes: the declared length (if any) and a reader of the body.
    pub(crate) fn get_stream(
        &self,
        path: &str,
    ) -> Result<(Option<u64>, BodyReader<'static>), ClientError> {
        let answer = self.get(path).call();
        let response = self.check(answer)?;
        let body = response.into_body();
        Ok((body.content_length(), body.into_reader()))
    }

    /// `PUT path` with a JSON body; the JSON answer as it came.
    pub(crate) fn put_json(&self, path: &str, body: &impl Serialize) -> Result<Value, ClientError> {
        let answer = self
            .authorize(self.agent.put(self.url(path)))
            .send_json(body);
        self.json_answer(answer)
    }

    /// `DELETE path`, expecting no body.
    pub(crate) fn delete(&self, path: &str) -> Result<(), ClientError> {
        let answer = self.authorize(self.agent.delete(self.url(path))).call();
        let mut response = self.check(answer)?;
        // Drain whatever there is, so the connection can be reused.
        let _ = io::copy(&mut response.body_mut().as_reader(), &mut io::sink());
        Ok(())
    }

    /// A successful answer, or the error it stands for.
    fn check(
        &self,
        answer: Result<Response<Body>, ureq::Error>,
    ) -> Result<Response<Body>, ClientError> {
        let mut response = answer.map_err(|e| ClientError::from_ureq(&self.api, e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let body = response
            .body_mut()
            .with_config()
            .limit(ERROR_BODY_LIMIT)
            .lossy_utf8(true)
            .read_to_string()
            .unwrap_or_default();
        Err(ClientError::from_body(status, &body))
    }

    fn json_answer<T: DeserializeOwned>(
        &self,
        answer: Result<Response<Body>, ureq::Error>,
    ) -> Result<T, ClientError> {
        let mut response = self.check(answer)?;
        let reader = response.body_mut().with_config().limit(JSON_LIMIT).reader();
        serde_json::from_reader(reader).map_err(|e| ClientError::Transport {
            api: self.api.clone(),
            error: format!("unexpected answer: {e}"),
        })
    }
}

/// `http://host:port` for an `--api` value, which may or may not name the scheme; without a port
/// it is the API's default, 4550 (`--api localhost` is `http://localhost:4550`).
fn base_url(api: &str) -> String {
    let api = api.trim().trim_end_matches('/');
    let (scheme, authority) = api.split_once("://").unwrap_or(("http", api));
    // A port follows the last colon, after an IPv6 address's closing bracket if there is one.
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let has_port = authority[host_end..].contains(':');
    let bare_ipv6 = host_end == 0 && authority.matches(':').count() > 1;
    if has_port && !bare_ipv6 {
        format!("{scheme}://{authority}")
    } else if bare_ipv6 {
        format!("{scheme}://[{authority}]:{DEFAULT_API_PORT}")
    } else {
        format!("{scheme}://{authority}:{DEFAULT_API_PORT}")
    }
}

/// The port of [`DEFAULT_API`].
const DEFAULT_API_PORT: u16 = 4550;

/// Percent-encodes `s` as one URL path segment or query value: everything but RFC 3986's
/// unreserved characters, so an endpoint id like `dtn://a/inbox` stays one segment.
pub(crate) fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `?k1=v1&k2=v2`, values percent-encoded; empty for no pairs.
pub(crate) fn query(pairs: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.push_str(&encode_component(v));
    }
    out
}

/// A duration as the API takes it (`30s`, `1500ms`): humantime syntax, no spaces.
pub(crate) fn api_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// `/v1/endpoints/{endpoint}`: a service name (`inbox`) or a full endpoint id, as one segment.
pub(crate) fn endpoint_path(endpoint: &str) -> String {
    format!("/v1/endpoints/{}", encode_component(endpoint))
}

/// The long-poll listing of bundles waiting at `endpoint`.
pub(crate) fn waiting_path(endpoint: &str, max: usize, wait: Duration, payload: bool) -> String {
    format!(
        "{}/bundles{}",
        endpoint_path(endpoint),
        query(&[
            ("max", max.to_string()),
            ("wait", api_duration(wait)),
            ("payload", payload.to_string()),
        ])
    )
}

/// One waiting bundle (`DELETE` acknowledges it); `…/payload` is its payload.
pub(crate) fn waiting_item_path(endpoint: &str, seq: u64) -> String {
    format!("{}/bundles/{seq}", endpoint_path(endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_ids_are_one_path_segment() {
        assert_eq!(endpoint_path("inbox"), "/v1/endpoints/inbox");
        assert_eq!(endpoint_path("ping-3fa2"), "/v1/endpoints/ping-3fa2");
        assert_eq!(
            endpoint_path("dtn://a/inbox"),
            "/v1/endpoints/dtn%3A%2F%2Fa%2Finbox"
        );
        assert_eq!(endpoint_path("ipn:5.1"), "/v1/endpoints/ipn%3A5.1");
        assert_eq!(encode_component("a b?&=#%ü"), "a%20b%3F%26%3D%23%25%C3%BC");
    }

    #[test]
    fn listing_and_item_paths() {
        assert_eq!(
            waiting_path("inbox", 3, Duration::from_secs(30), false),
            "/v1/endpoints/inbox/bundles?max=3&wait=30s&payload=false"
        );
        assert_eq!(
            waiting_path("dtn://b/x", 1, Duration::from_millis(1500), true),
            "/v1/endpoints/dtn%3A%2F%2Fb%2Fx/bundles?max=1&wait=1500ms&payload=true"
        );
        assert_eq!(
            waiting_item_path("dtn://b/x", 42),
            "/v1/endpoints/dtn%3A%2F%2Fb%2Fx/bundles/42"
        );
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(query(&[]), "");
        assert_eq!(
            query(&[
                ("bundle", "dtn://a/-848700477656-1".into()),
                ("x", "1+2".into())
            ]),
            "?bundle=dtn%3A%2F%2Fa%2F-848700477656-1&x=1%2B2"
        );
    }

    #[test]
    fn api_addresses_with_and_without_scheme() {
        assert_eq!(base_url("127.0.0.1:4550"), "http://127.0.0.1:4550");
        assert_eq!(base_url("http://[::1]:4550/"), "http://[::1]:4550");
        // Without a port, the API's default.
        assert_eq!(base_url("localhost"), "http://localhost:4550");
        assert_eq!(base_url("http://10.0.0.2/"), "http://10.0.0.2:4550");
        assert_eq!(base_url("[::1]"), "http://[::1]:4550");
        assert_eq!(base_url("::1"), "http://[::1]:4550");
        assert_eq!(base_url("localhost:8080"), "http://localhost:8080");
        assert!(DEFAULT_API.ends_with(&format!(":{DEFAULT_API_PORT}")));
        assert_eq!(
            Client::new("localhost:1").url("/v1/status"),
            "http://localhost:1/v1/status"
        );
    }

    #[test]
    fn durations_in_api_syntax_parse_back() {
        for d in [
            Duration::from_secs(3600),
            Duration::from_millis(1500),
            Duration::ZERO,
        ] {
            let text = api_duration(d);
            assert!(!text.contains(' '), "{text}");
            assert_eq!(humantime::parse_duration(&text).unwrap(), d);
        }
    }

    #[test]
    fn error_messages() {
        let e = ClientError::from_body(
            409,
            r#"{"code":"no_route","message":"no route to dtn://x/ now"}"#,
        );
        assert_eq!(e.to_string(), "no route to dtn://x/ now (no_route)");
        assert!(e.is_api_error() && !e.is_not_found());
        let e = ClientError::from_body(404, r#"{"code":"not_found","message":"no such bundle"}"#);
        assert!(e.is_not_found());
        let e = ClientError::from_body(502, "<html>Bad gateway</html>\n");
        assert_eq!(
            e.to_string(),
            "the ferry node API answered HTTP 502: <html>Bad gateway</html>"
        );
        let e = ClientError::from_ureq(
            "127.0.0.1:9",
            ureq::Error::Io(io::Error::from(io::ErrorKind::ConnectionRefused)),
        );
        assert!(
            e.to_string().starts_with(
                "cannot reach the ferry node API at 127.0.0.1:9 (is `ferry node` running?): "
            ),
            "{e}"
        );
        assert!(!e.is_api_error());
        let e = ClientError::from_ureq(
            "127.0.0.1:9",
            ureq::Error::Timeout(ureq::Timeout::RecvResponse),
        );
        assert!(matches!(e, ClientError::Transport { .. }), "{e}");
    }
}
