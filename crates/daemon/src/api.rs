//! The local API: HTTP/JSON and a WebSocket, served by axum, bound to 127.0.0.1 by default.
//! `openapi.yaml` (served at `/v1/openapi.yaml`) describes every route;
//! `tests/integration/api.rs` checks the running server against it.
//!
//! Handlers own no state: each turns a request into a [`Request`] for the event loop and its
//! answer into JSON. Work that needs no node state (base64, JSON, waiting) happens here, off the
//! event loop. Every error is a JSON [`ApiError`] with a stable code, including the ones axum
//! would answer in plain text (unknown route, wrong method, a body that is not JSON, a body
//! above `api.max_payload`). Bodies are read by [`crate::api_body`], within their limits.
//!
//! Receiving is at-least-once: reading an inbox takes nothing; `DELETE …/bundles/{seq}` (or
//! `{"ack": seq}` on the WebSocket) removes a bundle once the application has it, so a client
//! that dies mid-download loses nothing.
//!
//! Remote procedure calls: `POST /v1/calls` answers once the call is durable; a client then
//! follows it by long poll (`…/wait`) or WebSocket (`…/watch`), both woken by the event loop's
//! call-change signal rather than by polling, and fetches result files by hash.

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;

use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::api_body::{self, Bodies, RAW_ROUTE};
use crate::api_guard::{self, Guard};
use crate::control::{ApiError, CallInfo, CallSpec, ControlHandle, Received, Request, SendRequest};

/// The OpenAPI description of this API.
pub const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

/// The longest a receive may wait for a bundle (`wait=`), and a call for its end (`timeout=`).
const MAX_WAIT: Duration = Duration::from_secs(300);
/// How long `GET /v1/calls/{id}/wait` waits when not told.
const DEFAULT_CALL_WAIT: Duration = Duration::from_secs(30);
/// How long a call watcher waits for the client's answer to its closing frame.
const WS_CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Most bundles one receive returns.
const MAX_BATCH: usize = 1000;
/// How many bundles a WebSocket subscriber is sent ahead of its acknowledgements.
const WS_WINDOW: usize = 64;

/// The router, reading bodies within the limits of `bodies` (see [`crate::api_body`]), behind
/// `guard` (see [`crate::api_guard`]: host, origin, token and declared-length checks before any
/// route runs).
pub fn router(control: ControlHandle, bodies: Bodies, guard: Guard) -> Router {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/peers", get(peers))
        .route("/v1/routes", get(routes))
        .route("/v1/bundles", get(bundles).post(send_json))
        .route("/v1/bundles/raw", post(send_raw))
        .route("/v1/endpoints/{endpoint}/bundles", get(receive))
        .route("/v1/endpoints/{endpoint}/bundles/{seq}", delete(ack))
        .route(
            "/v1/endpoints/{endpoint}/bundles/{seq}/payload",
            get(payload),
        )
        .route("/v1/endpoints/{endpoint}/subscribe", get(subscribe))
        .route("/v1/reports", get(reports))
        .route("/v1/calls", get(calls).post(make_call))
        .route("/v1/calls/{id}", get(get_call).delete(forget_call))
        .route("/v1/calls/{id}/wait", get(wait_call))
        .route("/v1/calls/{id}/cancel", post(cancel_call))
        .route("/v1/calls/{id}/watch", get(watch_call))
        .route("/v1/files/{hash}", get(file))
        .route("/v1/procedures", get(procedures))
        .route("/v1/served", get(served))
        .route("/v1/providers", get(provide))
        .route("/v1/keys", get(keys))
        .route(
            "/v1/keys/{node}",
            axum::routing::put(accept_key).delete(forget_key),
        )
        .route("/metrics", get(metrics))
        .route("/v1/openapi.yaml", get(openapi))
        .route("/", get(crate::dashboard::index))
        .route("/dashboard/{file}", get(crate::dashboard::asset))
        .fallback(|| async { ApiError::new("not_found", "no such route; see /v1/openapi.yaml") })
        .method_not_allowed_fallback(|| async {
            ApiError::new("method_not_allowed", "this route does not take that method")
        })
        // No route takes axum's `Bytes`: every body is read by `Bodies::read`, which holds it
        // to its route's limit as it streams in.
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyTimeoutLayer::new(api_guard::BODY_IDLE))
        .layer(axum::middleware::from_fn_with_state(
            guard,
            api_guard::guard,
        ))
        .with_state(Api { control, bodies })
}

#[derive(Clone)]
struct Api {
    control: ControlHandle,
    bodies: Bodies,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// An answer as JSON, every instant with its RFC 3339 twin ([`crate::api_time`]).
fn json<T: serde::Serialize>(value: T) -> Response {
    json_with(StatusCode::OK, value)
}

fn json_with<T: serde::Serialize>(status: StatusCode, value: T) -> Response {
    match serde_json::to_value(value) {
        Ok(v) => (status, axum::Json(crate::api_time::with_utc_twins(v))).into_response(),
        Err(e) => {
            ApiError::new("internal", format!("the answer cannot be written: {e}")).into_response()
        }
    }
}

async fn status(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Status).await?))
}

async fn peers(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Peers).await?))
}

async fn routes(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Routes).await?))
}

async fn bundles(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Bundles).await?))
}

fn query_error(e: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::new("bad_request", e.body_text())
}

/// `POST /v1/bundles`: a JSON [`SendRequest`].
async fn send_json(State(api): State<Api>, headers: HeaderMap, body: Body) -> ApiResult<Response> {
    let api_body::Read { bytes, slot } = api.bodies.read("/v1/bundles", &headers, body).await?;
    let mut req: SendRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            "bad_request",
            format!("the body is not a send request: {e}"),
        )
    })?;
    // The JSON goes before its base64 is decoded, so the two are not held at once.
    drop(bytes);
    // Decode base64 here rather than on the event loop.
    let payload = req.take_payload()?;
    if payload.len() as u64 > api.bodies.limit(RAW_ROUTE) {
        return Err(api.bodies.payload_too_large(payload.len()));
    }
    let sent = send(&api, req, payload).await;
    drop(slot);
    sent
}

/// The options of `POST /v1/bundles/raw`, from the query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSend {
    destination: String,
    source: Option<String>,
    lifetime: Option<String>,
    class: Option<String>,
    #[serde(default)]
    report: bool,
    priority: Option<u8>,
}

/// `POST /v1/bundles/raw?destination=…`: the body is the payload, read as it streams in and
/// refused the moment it crosses `api.max_payload` ([`Bodies::read`]).
async fn send_raw(
    State(api): State<Api>,
    query: Result<Query<RawSend>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    // The options are checked before a byte of the body is read.
    let Query(q) = query.map_err(query_error)?;
    let body = api.bodies.read(RAW_ROUTE, &headers, body).await?;
    let req = SendRequest {
        source: q.source,
        lifetime: q.lifetime,
        class: q.class,
        report: q.report,
        priority: q.priority,
        ..SendRequest::to(q.destination)
    };
    // The slot is held until the loop has the payload (and answered that it is durable).
    let sent = send(&api, req, body.bytes).await;
    drop(body.slot);
    sent
}

async fn send(api: &Api, request: SendRequest, payload: Bytes) -> ApiResult<Response> {
    let reply = api
        .control
        .ask(|reply| Request::SendBytes {
            request,
            payload,
            reply,
        })
        .await??;
    Ok(json_with(StatusCode::CREATED, reply))
}

/// `?max=&wait=&payload=` of a receive.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiveQuery {
    max: Option<usize>,
    wait: Option<String>,
    payload: Option<bool>,
}

/// A waiting time from the query parameter `name` (`30s`, `2m`): `default` when absent, at
/// most [`MAX_WAIT`].
fn parse_wait(name: &str, text: Option<&str>, default: Duration) -> ApiResult<Duration> {
    let Some(text) = text else {
        return Ok(default);
    };
    let d = humantime::parse_duration(text)
        .map_err(|e| ApiError::new("bad_request", format!("{name} {text:?}: {e}")))?;
    if d > MAX_WAIT {
        return Err(ApiError::new(
            "bad_request",
            format!(
                "{name} {text:?} is longer than the limit of {}s",
                MAX_WAIT.as_secs()
            ),
        ));
    }
    Ok(d)
}

/// `GET /v1/endpoints/{endpoint}/bundles`: what waits, oldest first; nothing is taken.
async fn receive(
    State(api): State<Api>,
    Path(endpoint): Path<String>,
    query: Result<Query<ReceiveQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(query_error)?;
    let wait = parse_wait("wait", q.wait.as_deref(), Duration::ZERO)?;
    let max = q.max.unwrap_or(100).clamp(1, MAX_BATCH);
    let found = api
        .control
        .wait_for(&endpoint, max, None, q.payload.unwrap_or(true), wait)
        .await?;
    Ok(json(found))
}

/// `GET /v1/endpoints/{endpoint}/bundles/{seq}/payload`: the raw payload.
async fn payload(
    State(api): State<Api>,
    Path((endpoint, seq)): Path<(String, u64)>,
) -> ApiResult<Response> {
    let bytes = api
        .control
        .ask(|reply| Request::Payload {
            endpoint,
            seq,
            reply,
        })
        .await??;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

/// `DELETE /v1/endpoints/{endpoint}/bundles/{seq}`: the application has it.
async fn ack(
    State(api): State<Api>,
    Path((endpoint, seq)): Path<(String, u64)>,
) -> ApiResult<StatusCode> {
    api.control.ack(&endpoint, seq).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/endpoints/{endpoint}/subscribe`: a WebSocket.
async fn subscribe(
    State(api): State<Api>,
    Path(endpoint): Path<String>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    // Refuse a bad endpoint with an HTTP error before upgrading.
    api.control
        .wait_for(&endpoint, 1, None, false, Duration::ZERO)
        .await?;
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            "bad_request",
            format!("this route is a WebSocket: {}", e.body_text()),
        )
    })?;
    // A browser offers its token as a subprotocol beside this one (`crate::dashboard`).
    let upgrade = upgrade.protocols([crate::dashboard::WS_PROTOCOL]);
    Ok(upgrade.on_upgrade(move |socket| serve_subscriber(api.control, endpoint, socket)))
}

/// A message from a WebSocket subscriber.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscriberMessage {
    ack: u64,
}

/// Sends every bundle that waits or arrives as a JSON [`Received`] text message, at most
/// [`WS_WINDOW`] ahead of the subscriber's `{"ack": seq}` messages; acknowledged bundles leave
/// the inbox. Unacknowledged ones stay and go to the next subscriber.
async fn serve_subscriber(control: ControlHandle, endpoint: String, mut socket: WebSocket) {
    let mut after: Option<u64> = None;
    let mut unacked: std::collections::BTreeSet<u64> = Default::default();
    loop {
        let room = WS_WINDOW.saturating_sub(unacked.len());
        tokio::select! {
            found = control.wait_for(&endpoint, room.max(1), after, true, MAX_WAIT), if room > 0 => {
                let found: Vec<Received> = match found {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = socket.send(ws_json(&e)).await;
                        return;
                    }
                };
                for r in found {
                    after = Some(r.seq);
                    unacked.insert(r.seq);
                    if socket.send(ws_json(&r)).await.is_err() {
                        return;
                    }
                }
            }
            message = socket.recv() => {
                let text = match message {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                };
                let reply = match serde_json::from_str::<SubscriberMessage>(text.as_str()) {
                    Ok(m) => control.ack(&endpoint, m.ack).await.map(|()| m.ack),
                    Err(e) => Err(ApiError::new(
                        "bad_request",
                        format!("expected {{\"ack\": seq}}: {e}"),
                    )),
                };
                match reply {
                    Ok(seq) => {
                        unacked.remove(&seq);
                    }
                    Err(e) => {
                        if socket.send(ws_json(&e)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn ws_json<T: serde::Serialize>(value: &T) -> Message {
    Message::Text(
        serde_json::to_value(value)
            .map(crate::api_time::with_utc_twins)
            .and_then(|v| serde_json::to_string(&v))
            .unwrap_or_else(|e| format!("{{\"code\":\"internal\",\"message\":\"{e}\"}}"))
            .into(),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportsQuery {
    bundle: Option<String>,
}

async fn reports(
    State(api): State<Api>,
    query: Result<Query<ReportsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(query_error)?;
    let reports = api
        .control
        .ask(|reply| Request::Reports {
            bundle: q.bundle,
            reply,
        })
        .await??;
    Ok(json(reports))
}

/// `POST /v1/calls`: a JSON [`CallSpec`]; answered once the call is durable.
async fn make_call(
    State(api): State<Api>,
    query: Result<Query<MakeCallQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(query_error)?;
    let wait = match q.wait {
        Some(_) => Some(parse_wait("wait", q.wait.as_deref(), DEFAULT_CALL_WAIT)?),
        None => None,
    };
    let api_body::Read { bytes, slot } = api.bodies.read("/v1/calls", &headers, body).await?;
    let spec: CallSpec = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new("bad_request", format!("the body is not a call: {e}")))?;
    drop(bytes);
    if let Some(wait) = wait {
        // The slot (a call with large parameters) goes once the loop has taken the call, not
        // when its result comes, which may be minutes away.
        let call = api.control.call_and_wait_holding(spec, wait, slot).await?;
        return Ok(json_with(StatusCode::CREATED, call));
    }
    let call = api.control.call(spec).await;
    drop(slot);
    Ok(json_with(StatusCode::CREATED, call?))
}

/// `?wait=` of `POST /v1/calls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MakeCallQuery {
    wait: Option<String>,
}

/// `GET /v1/calls`: the calls this node made, oldest first, without timelines.
async fn calls(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Calls).await?))
}

/// `GET /v1/calls/{id}`: one call with its timeline.
async fn get_call(State(api): State<Api>, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(json(api.control.get_call(&id).await?))
}

/// `?timeout=&replies=&files=` of a call's long poll.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitCallQuery {
    timeout: Option<String>,
    replies: Option<usize>,
    files: Option<usize>,
}

/// `GET /v1/calls/{id}/wait`: the call once it is finished, has more than `replies` replies
/// or more than `files` arrived result files, or `timeout` passed (then as it stands).
async fn wait_call(
    State(api): State<Api>,
    Path(id): Path<String>,
    query: Result<Query<WaitCallQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(query_error)?;
    let wait = parse_wait("timeout", q.timeout.as_deref(), DEFAULT_CALL_WAIT)?;
    let more = crate::calls::WaitFor {
        replies: q.replies,
        files: q.files,
    };
    Ok(json(api.control.wait_call(&id, more, wait).await?))
}

/// `POST /v1/calls/{id}/cancel`: the call as it stands after cancelling.
async fn cancel_call(State(api): State<Api>, Path(id): Path<String>) -> ApiResult<Response> {
    let call = api
        .control
        .ask(|reply| Request::CancelCall { id, reply })
        .await??;
    Ok(json(call))
}

/// `DELETE /v1/calls/{id}`: this node forgets the call.
async fn forget_call(State(api): State<Api>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    api.control
        .ask(|reply| Request::ForgetCall { id, reply })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/calls/{id}/watch`: a WebSocket.
async fn watch_call(
    State(api): State<Api>,
    Path(id): Path<String>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    // Refuse a malformed or unknown call with an HTTP error before upgrading, as a subscription
    // to a bad endpoint is.
    api.control.get_call(&id).await?;
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            "bad_request",
            format!("this route is a WebSocket: {}", e.body_text()),
        )
    })?;
    // The dashboard offers its token as a subprotocol beside this one (`crate::dashboard`).
    let upgrade = upgrade.protocols([crate::dashboard::WS_PROTOCOL]);
    Ok(upgrade.on_upgrade(move |socket| serve_watcher(api.control, id, socket)))
}

/// Sends the call as a JSON [`CallInfo`] text message now and again after every change, then
/// closes normally once it has sent a finished call. Stops when the client goes; an error
/// (the call was forgotten, the node stops) is sent as an [`ApiError`] message before closing.
async fn serve_watcher(control: ControlHandle, id: String, mut socket: WebSocket) {
    let mut changes = control.call_changes();
    let mut last: Option<CallInfo> = None;
    loop {
        // Mark the current value seen before looking, so a change between the look and the
        // wait still wakes us.
        changes.borrow_and_update();
        let call = match control.get_call(&id).await {
            Ok(call) => call,
            Err(e) => {
                if socket.send(ws_json(&e)).await.is_ok() {
                    close(socket, close_code::NORMAL, "error").await;
                }
                return;
            }
        };
        // A change to another call wakes every watcher; only news is sent.
        if last.as_ref() != Some(&call) {
            if socket.send(ws_json(&call)).await.is_err() {
                return;
            }
            if call.finished() {
                close(socket, close_code::NORMAL, "the call is finished").await;
                return;
            }
            last = Some(call);
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    let _ = socket.send(ws_json(&ApiError::shutting_down())).await;
                    close(socket, close_code::AWAY, "the node is shutting down").await;
                    return;
                }
            }
            message = socket.recv() => match message {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                // The client has nothing to say; pings are answered by axum.
                Some(Ok(_)) => {}
            },
        }
    }
}

/// Sends a closing frame and waits (a bounded time) for the client's, so the close is clean.
pub(crate) async fn close(mut socket: WebSocket, code: u16, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(WS_CLOSE_WAIT, async {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// `GET /v1/files/{hash}`: a data-channel file this node holds.
async fn file(State(api): State<Api>, Path(hash): Path<String>) -> ApiResult<Response> {
    let bytes = api
        .control
        .ask(|reply| Request::File { hash, reply })
        .await??;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

/// `GET /v1/providers`: a WebSocket on which an application serves procedures
/// ([`crate::provider_socket`]).
async fn provide(
    State(api): State<Api>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            "bad_request",
            format!("this route is a WebSocket: {}", e.body_text()),
        )
    })?;
    Ok(upgrade
        .protocols([crate::dashboard::WS_PROTOCOL])
        .max_message_size(crate::providers::MAX_PROVIDER_MESSAGE)
        .max_frame_size(crate::providers::MAX_PROVIDER_MESSAGE)
        .on_upgrade(move |socket| crate::provider_socket::serve(api.control, socket)))
}

/// `GET /v1/procedures`: what this node serves.
async fn procedures(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Procedures).await?))
}

/// `GET /v1/served`: the calls this node serves or served, the latest deadline first.
async fn served(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Served).await?))
}

/// `GET /v1/keys`: the keys this node knows for other nodes, with keys they presented lately
/// that are not those.
async fn keys(State(api): State<Api>) -> ApiResult<Response> {
    Ok(json(api.control.ask(Request::Keys).await?))
}

/// `PUT /v1/keys/{node}`: accept a key for a node (a JSON `AcceptKey`; without `key`, the key
/// it presented).
async fn accept_key(
    State(api): State<Api>,
    Path(node): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = api.bodies.read("/v1/keys", &headers, body).await?.bytes;
    let accept: crate::keys::AcceptKey = if body.iter().all(u8::is_ascii_whitespace) {
        Default::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                "bad_request",
                format!("the body is not {{\"key\": \"<64 hex digits>\"}}: {e}"),
            )
        })?
    };
    let key = api
        .control
        .ask(|reply| Request::AcceptKey {
            node,
            key: accept.key,
            reply,
        })
        .await??;
    Ok(json(key))
}

/// `DELETE /v1/keys/{node}`: forget the key of a node; the next signed message naming it
/// teaches it again.
async fn forget_key(State(api): State<Api>, Path(node): Path<String>) -> ApiResult<StatusCode> {
    api.control
        .ask(|reply| Request::ForgetKey { node, reply })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

async fn metrics(State(api): State<Api>) -> ApiResult<Response> {
    let text = api.control.ask(Request::Metrics).await?;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML).into_response()
}
