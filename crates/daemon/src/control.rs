//! What the local API asks of the daemon's event loop, and what it answers.
//!
//! The event loop owns the node; everything else (HTTP handlers, WebSocket subscriptions, tests)
//! talks to it through a [`ControlHandle`]: a request goes down a channel with a one-shot reply.
//! These types are also the JSON bodies of the HTTP API (`openapi.yaml` describes them), so their
//! field names are a stable interface.

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};

pub use crate::calls::{CallInfo, CallOutcome, CallSpec, ProcedureInfo, WaitFor};
pub use crate::keys::{AcceptKey, KeyInfo, PresentedKeyInfo};

/// A request to the event loop.
#[derive(Debug)]
pub enum Request {
    /// Node id, uptime, counters, store usage.
    Status(oneshot::Sender<Status>),
    /// Current neighbours.
    Peers(oneshot::Sender<Vec<PeerInfo>>),
    /// Mesh routes.
    Routes(oneshot::Sender<Vec<RouteInfo>>),
    /// Bundles held in the store.
    Bundles(oneshot::Sender<Vec<BundleInfo>>),
    /// Create and send a bundle whose payload is in the request (text or base64).
    Send(SendRequest, oneshot::Sender<Result<SendReply, ApiError>>),
    /// Create and send a bundle with this payload (the request's `payload` fields are ignored).
    SendBytes {
        /// Destination, lifetime, class and the rest.
        request: SendRequest,
        /// The payload.
        payload: bytes::Bytes,
        /// The answer.
        reply: oneshot::Sender<Result<SendReply, ApiError>>,
    },
    /// Up to `max` bundles waiting for a local endpoint, oldest first, with a sequence number
    /// above `after` if given. Nothing leaves the inbox until [`Request::Ack`].
    Peek {
        /// The endpoint, e.g. `dtn://me/inbox` or just the service part `inbox`.
        endpoint: String,
        /// At most this many.
        max: usize,
        /// Only bundles with a larger sequence number (a subscriber's position).
        after: Option<u64>,
        /// Whether to include payloads (base64) in the answer.
        with_payload: bool,
        /// The answer.
        reply: oneshot::Sender<Result<Vec<Received>, ApiError>>,
    },
    /// The payload of one waiting bundle.
    Payload {
        /// The endpoint.
        endpoint: String,
        /// The bundle's sequence number in that inbox.
        seq: u64,
        /// The answer: the payload, or `not_found`.
        reply: oneshot::Sender<Result<bytes::Bytes, ApiError>>,
    },
    /// An application has a bundle safely: it leaves the inbox (durably, before the answer).
    Ack {
        /// The endpoint.
        endpoint: String,
        /// The bundle's sequence number in that inbox.
        seq: u64,
        /// Ok once removed, `not_found` if it was not waiting.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// Status reports received for bundles this node sent (for `ferry trace`).
    Reports {
        /// Only reports about bundles from this source and creation time (`source-time-sequence`
        /// as in [`SendReply::id`]); all when `None`.
        bundle: Option<String>,
        /// The answer.
        reply: oneshot::Sender<Result<Vec<ReportInfo>, ApiError>>,
    },
    /// Metrics in Prometheus text format.
    Metrics(oneshot::Sender<String>),
    /// From a procedure provider's socket (`/v1/providers`).
    Provider(crate::providers::ProviderRequest),
    /// Make a remote procedure call; answered once the call is durable.
    Call(CallSpec, oneshot::Sender<Result<CallInfo, ApiError>>),
    /// Make a remote procedure call and wait for its end, in one request: for a caller that
    /// waits for the result anyway ([`ControlHandle::call_and_wait`]). Nothing waits for the
    /// call to be durable: a crash in the next fsync's time would fail the wait, not leave the
    /// caller believing in a call the node forgot.
    CallNow {
        /// The call.
        spec: CallSpec,
        /// The id of the call (or why it could not be made), when it did not end at once; the
        /// caller reads it only if it stops waiting before the end (so it is not formatted as
        /// text unless it is needed).
        made: oneshot::Sender<Result<wire::rpc::CallId, ApiError>>,
        /// The call once it ended (at once, or when its last reply came).
        done: oneshot::Sender<Result<CallInfo, ApiError>>,
    },
    /// `CallNow` answered with the call's outcome rather than its report
    /// ([`ControlHandle::call_for_outcome`]).
    CallForOutcome {
        /// The call.
        spec: CallSpec,
        /// As in `CallNow`.
        made: oneshot::Sender<Result<wire::rpc::CallId, ApiError>>,
        /// The call's outcome once it ended.
        done: oneshot::Sender<Result<CallOutcome, ApiError>>,
    },
    /// One call's outcome as it stands.
    GetOutcome {
        /// The call.
        id: wire::rpc::CallId,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<CallOutcome, ApiError>>,
    },
    /// The calls this node made (without timelines), oldest first.
    Calls(oneshot::Sender<Vec<CallInfo>>),
    /// One call, with its timeline.
    GetCall {
        /// Its id, 32 hex digits.
        id: String,
        /// The answer, or `not_found`.
        reply: oneshot::Sender<Result<CallInfo, ApiError>>,
    },
    /// Answer once the call has finished, or has more of what `more` names (replies, arrived
    /// result files; at once if it already has). What arrived is answered as soon as it is
    /// known, before it is durable: a result a crash loses is asked for again after the restart
    /// (the server keeps it), so nothing a caller saw goes missing for good.
    WaitCall {
        /// Its id.
        id: String,
        /// What the caller waits for besides the call's end.
        more: WaitFor,
        /// The call then, or `not_found` (also when it is forgotten while waited for).
        reply: oneshot::Sender<Result<CallInfo, ApiError>>,
    },
    /// Cancel a call: the servers are told, a running execution is stopped.
    CancelCall {
        /// Its id.
        id: String,
        /// The call as it stands afterwards.
        reply: oneshot::Sender<Result<CallInfo, ApiError>>,
    },
    /// Forget a finished call (a waiting one is cancelled first).
    ForgetCall {
        /// Its id.
        id: String,
        /// Ok once removed.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// A data-channel file this node holds (a result's or a parameter's).
    File {
        /// Its BLAKE3 hash, 64 hex digits.
        hash: String,
        /// The content, or `not_found`.
        reply: oneshot::Sender<Result<bytes::Bytes, ApiError>>,
    },
    /// The procedures this node serves.
    Procedures(oneshot::Sender<Vec<ProcedureInfo>>),
    /// The calls this node serves or served that it keeps in memory, the latest deadline first.
    Served(oneshot::Sender<Vec<crate::calls::ServedInfo>>),
    /// The keys this node knows for other nodes, and keys they presented that are not those.
    Keys(oneshot::Sender<Vec<KeyInfo>>),
    /// The operator accepts a key for a node (a reinstalled node's new one); answered once it
    /// is durable.
    AcceptKey {
        /// The node, as a user names it (`dtn://bravo/` or `bravo`).
        node: String,
        /// The key, 64 hex digits; `None`: the key the node presented.
        key: Option<String>,
        /// The key as now known.
        reply: oneshot::Sender<Result<KeyInfo, ApiError>>,
    },
    /// The operator forgets the key of a node: the next signed message naming it teaches it
    /// again. Answered once durable.
    ForgetKey {
        /// The node.
        node: String,
        /// Ok once forgotten, `not_found` if no key was known.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
}

/// Sends requests to the event loop.
#[derive(Debug, Clone)]
pub struct ControlHandle {
    tx: mpsc::Sender<Request>,
    deliveries: watch::Receiver<u64>,
    calls: watch::Receiver<u64>,
}

/// The event loop's ends of a [`ControlHandle`].
#[derive(Debug)]
pub struct ControlEnds {
    /// Requests to answer.
    pub requests: mpsc::Receiver<Request>,
    /// Bumped after every batch of deliveries to inboxes is durable, so waiting receivers
    /// look again.
    pub deliveries: watch::Sender<u64>,
    /// Bumped after a change to a call this node made is durable, so waiting clients look
    /// again.
    pub calls: watch::Sender<u64>,
}

/// How a wait for a call's end went (see [`ControlHandle::make_and_wait`]).
enum Waited<T> {
    /// The call ended (or could not be made): the answer.
    Ended(Result<T, ApiError>),
    /// The wait ended first: the call's id.
    GaveUp(wire::rpc::CallId),
}

impl ControlHandle {
    /// A handle and the ends the event loop holds.
    pub fn channel(depth: usize) -> (Self, ControlEnds) {
        let (tx, requests) = mpsc::channel(depth);
        let (deliveries, deliveries_rx) = watch::channel(0);
        let (calls, calls_rx) = watch::channel(0);
        (
            Self {
                tx,
                deliveries: deliveries_rx,
                calls: calls_rx,
            },
            ControlEnds {
                requests,
                deliveries,
                calls,
            },
        )
    }

    /// A receiver that changes whenever new bundles wait in some inbox.
    pub fn deliveries(&self) -> watch::Receiver<u64> {
        self.deliveries.clone()
    }

    /// Waits up to `wait` until at least one bundle waits for `endpoint` (above `after`), then
    /// returns up to `max` of them without taking them (see [`Request::Peek`]). Returns an empty
    /// list when `wait` passes first.
    pub async fn wait_for(
        &self,
        endpoint: &str,
        max: usize,
        after: Option<u64>,
        with_payload: bool,
        wait: std::time::Duration,
    ) -> Result<Vec<Received>, ApiError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.deliveries();
        loop {
            // Mark the current value seen before looking, so a delivery between the look and
            // the wait still wakes us.
            changes.borrow_and_update();
            let found = self
                .ask(|reply| Request::Peek {
                    endpoint: endpoint.to_owned(),
                    max,
                    after,
                    with_payload,
                    reply,
                })
                .await??;
            if !found.is_empty() {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ApiError::shutting_down()),
                Err(_) => return Ok(Vec::new()),
            }
        }
    }

    /// A receiver that changes whenever a call this node made changed.
    pub fn call_changes(&self) -> watch::Receiver<u64> {
        self.calls.clone()
    }

    /// Makes a call (see [`Request::Call`]).
    pub async fn call(&self, spec: CallSpec) -> Result<CallInfo, ApiError> {
        self.ask(|reply| Request::Call(spec, reply)).await?
    }

    /// Makes a call and waits up to `wait` for it to finish (the blocking convenience, like a
    /// unary call of request/response RPC systems). Returns the call as it stands then. The call
    /// is not first made durable: what the caller gets is the end of the call, and the node
    /// records it durably all the same, on the way.
    pub async fn call_and_wait(
        &self,
        spec: CallSpec,
        wait: std::time::Duration,
    ) -> Result<CallInfo, ApiError> {
        self.call_and_wait_holding(spec, wait, None::<()>).await
    }

    /// [`call_and_wait`](Self::call_and_wait), keeping `held` until the event loop has taken
    /// the call (made it, or refused it), then dropping it: the API's upload slot of a call
    /// with large parameters, which are the loop's from then on. Without anything held it is
    /// `call_and_wait` as it was: one wake-up when the call ends, none when it is taken.
    pub async fn call_and_wait_holding<H>(
        &self,
        spec: CallSpec,
        wait: std::time::Duration,
        held: Option<H>,
    ) -> Result<CallInfo, ApiError> {
        match self
            .make_and_wait(wait, held, |made, done| Request::CallNow {
                spec,
                made,
                done,
            })
            .await?
        {
            Waited::Ended(answer) => answer,
            // Not yet ended: the call as it stands (the node drops the abandoned wait).
            Waited::GaveUp(id) => self.get_call(&id.to_string()).await,
        }
    }

    /// Makes a call and waits up to `wait` for it to finish, as [`call_and_wait`] does, and
    /// answers with the call's [`CallOutcome`]: its state and replies as the engine keeps them,
    /// where `call_and_wait` gives the report the HTTP API shows (ids, keys and values as text,
    /// the timeline). For a program making many calls and wanting their results; the report
    /// is one [`get_call`] away.
    ///
    /// [`call_and_wait`]: Self::call_and_wait
    /// [`get_call`]: Self::get_call
    pub async fn call_for_outcome(
        &self,
        spec: CallSpec,
        wait: std::time::Duration,
    ) -> Result<CallOutcome, ApiError> {
        match self
            .make_and_wait(wait, None::<()>, |made, done| Request::CallForOutcome {
                spec,
                made,
                done,
            })
            .await?
        {
            Waited::Ended(answer) => answer,
            Waited::GaveUp(id) => self.ask(|reply| Request::GetOutcome { id, reply }).await?,
        }
    }

    /// Sends the request `make` builds (a call to make, with where its id and its end go) and
    /// waits up to `wait` for the end; `held`, if any, is dropped as soon as the loop has taken
    /// the request.
    async fn make_and_wait<T, H>(
        &self,
        wait: std::time::Duration,
        held: Option<H>,
        make: impl FnOnce(
            oneshot::Sender<Result<wire::rpc::CallId, ApiError>>,
            oneshot::Sender<Result<T, ApiError>>,
        ) -> Request,
    ) -> Result<Waited<T>, ApiError> {
        // One request, not a call and then a wait: each round trip to the event loop costs two
        // task wake-ups, a large part of a short call's time.
        let (made, made_answer) = oneshot::channel();
        let (done, done_answer) = oneshot::channel();
        let deadline = tokio::time::Instant::now() + wait;
        self.tx
            .send(make(made, done))
            .await
            .map_err(|_| ApiError::shutting_down())?;
        if let Some(held) = held {
            // The loop answers `made` as it takes the request, or drops it when the call ended
            // at once (then `done` holds the answer): either way the request is the loop's now.
            let made = made_answer.await;
            drop(held);
            return match made {
                Err(_) => match done_answer.await {
                    Ok(answer) => Ok(Waited::Ended(answer)),
                    Err(_) => Err(ApiError::shutting_down()),
                },
                Ok(Err(e)) => Err(e),
                Ok(Ok(id)) => match tokio::time::timeout_at(deadline, done_answer).await {
                    Ok(Ok(answer)) => Ok(Waited::Ended(answer)),
                    Ok(Err(_)) => Err(ApiError::shutting_down()),
                    Err(_) => Ok(Waited::GaveUp(id)),
                },
            };
        }
        let gave_up = match tokio::time::timeout_at(deadline, done_answer).await {
            Ok(Ok(answer)) => return Ok(Waited::Ended(answer)),
            // Not made (the reason is in `made`), or the node is shutting down.
            Ok(Err(_)) => false,
            Err(_) => true,
        };
        let id = made_answer.await.map_err(|_| ApiError::shutting_down())??;
        if !gave_up {
            return Err(ApiError::shutting_down());
        }
        Ok(Waited::GaveUp(id))
    }

    /// One call as it stands, with its timeline.
    pub async fn get_call(&self, id: &str) -> Result<CallInfo, ApiError> {
        self.ask(|reply| Request::GetCall {
            id: id.to_owned(),
            reply,
        })
        .await?
    }

    /// Waits up to `wait` for the call to finish, or for more of what `more` names (replies,
    /// arrived result files; `WaitFor::default()`: only the end). Returns the call as it stands
    /// then.
    pub async fn wait_call(
        &self,
        id: &str,
        more: WaitFor,
        wait: std::time::Duration,
    ) -> Result<CallInfo, ApiError> {
        let waited = self.ask(|reply| Request::WaitCall {
            id: id.to_owned(),
            more,
            reply,
        });
        match tokio::time::timeout(wait, waited).await {
            Ok(answer) => answer?,
            // Not yet: the call as it stands (the node drops the abandoned wait).
            Err(_) => self.get_call(id).await,
        }
    }

    /// Acknowledges a bundle taken from an inbox (see [`Request::Ack`]).
    pub async fn ack(&self, endpoint: &str, seq: u64) -> Result<(), ApiError> {
        self.ask(|reply| Request::Ack {
            endpoint: endpoint.to_owned(),
            seq,
            reply,
        })
        .await?
    }

    /// Passes a provider socket's request on (answers, if any, come by the request's own
    /// channel).
    pub async fn provider(
        &self,
        request: crate::providers::ProviderRequest,
    ) -> Result<(), ApiError> {
        self.tx
            .send(Request::Provider(request))
            .await
            .map_err(|_| ApiError::shutting_down())
    }

    /// Sends a request built around a fresh reply channel and waits for the answer.
    pub async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Request,
    ) -> Result<T, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| ApiError::shutting_down())?;
        answer.await.map_err(|_| ApiError::shutting_down())
    }
}

/// `GET /v1/status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// This node's id, e.g. `dtn://alpha/`.
    pub node_id: String,
    /// Ferry's version.
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// Store-carry-forward strategy in use.
    pub strategy: String,
    /// Neighbours now.
    pub peers: usize,
    /// Bundles in the store.
    pub stored_bundles: u64,
    /// Bytes in the store.
    pub stored_bytes: u64,
    /// The store's quota in bytes.
    pub store_quota: u64,
    /// Bundles waiting in local inboxes.
    pub inbox_bundles: u64,
    /// Counters.
    pub counters: Counters,
    /// Addresses the convergence layers listen on (`tcpcl://127.0.0.1:4556`, `udp://…`).
    pub listening: Vec<String>,
    /// This node's Ed25519 public key (hex): what it signs calls and results with, and what
    /// other nodes list in `allow`. (Defaults when absent, so clients read older nodes.)
    #[serde(default)]
    pub public_key: String,
    /// Remote procedure call counters.
    #[serde(default)]
    pub rpc: RpcCounters,
}

/// Remote procedure call counters.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RpcCounters {
    /// Calls this node made.
    pub calls_made: u64,
    /// Calls this node accepted to run.
    pub calls_accepted: u64,
    /// Calls it refused.
    pub calls_rejected: u64,
    /// Executions started.
    pub executions: u64,
    /// Duplicate calls answered from the result cache.
    pub duplicates: u64,
    /// Messages dropped for a bad signature, a failed decryption or garbage.
    pub forged: u64,
    /// Any-mode notices ignored: their signer is not a trusted server (`[rpc] trusted_servers`).
    pub untrusted_notices: u64,
    /// Messages dropped because they were signed by another key than the one known for the
    /// node they name as their sender (`ferry keys` shows the key they presented).
    #[serde(default)]
    pub key_mismatches: u64,
    /// Executions running now.
    pub running: u64,
    /// Calls this node made that it keeps in memory: those waiting and the latest finished
    /// (`[rpc] finished_in_memory`; older ones are read from the store when asked for).
    #[serde(default)]
    pub calls_in_memory: u64,
    /// Calls this node served that it keeps in memory, likewise.
    #[serde(default)]
    pub served_in_memory: u64,
    /// Bytes of data-channel files (parameters and results) this node holds now.
    #[serde(default)]
    pub file_bytes: u64,
    /// The most it holds (`[rpc] file_budget`).
    #[serde(default)]
    pub file_budget: u64,
}

/// Node counters.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    /// Bundles received on links.
    pub bundles_received: u64,
    /// Bundle transmissions.
    pub bundles_sent: u64,
    /// Bytes of those transmissions.
    pub bytes_sent: u64,
    /// Bundles delivered to local endpoints.
    pub delivered: u64,
    /// Duplicates ignored.
    pub duplicates: u64,
    /// Bundles dropped.
    pub dropped: u64,
}

/// One neighbour (`GET /v1/peers`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeerInfo {
    /// Its node id.
    pub node_id: String,
    /// How it is connected: `tcpcl` (and `udp` when it also announced a UDP endpoint).
    pub cla: Vec<String>,
    /// The remote socket address of the session (for a session the peer opened, its port is
    /// an ephemeral one).
    pub address: String,
    /// Where the peer listens for TCPCL sessions, if known: the address dialled for a session
    /// this side opened, else the one its beacons announce from the session's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_address: Option<String>,
    /// Whether this side opened the session.
    pub outbound: bool,
    /// Seconds since the session came up.
    pub up_s: u64,
    /// Bytes queued for it and not yet acknowledged.
    pub queued_bytes: u64,
}

/// One mesh route (`GET /v1/routes`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RouteInfo {
    /// The destination node.
    pub destination: String,
    /// The neighbour to send through.
    pub next_hop: String,
    /// Hops.
    pub hops: u32,
    /// Where the route comes from: `mesh` (a path up now) or `plan` (the contact plan's
    /// earliest journey, for a node the mesh does not reach now).
    #[serde(default = "mesh")]
    pub via: String,
    /// A planned route: when the contact with the next hop starts, milliseconds since the DTN
    /// epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub departs_ms: Option<u64>,
    /// A planned route: when a bundle sent now can arrive at the earliest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrives_ms: Option<u64>,
}

fn mesh() -> String {
    "mesh".into()
}

/// One stored bundle (`GET /v1/bundles`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BundleInfo {
    /// Its id: `source-creation_ms-sequence`, plus `-offset+length` for a fragment.
    pub id: String,
    /// Destination endpoint.
    pub destination: String,
    /// Encoded size in bytes.
    pub size: u64,
    /// Expiry, milliseconds since the DTN epoch (2000-01-01T00:00:00Z).
    pub expiry_ms: u64,
    /// Why it is held: `carried`, `must-deliver` or `originated`.
    pub retention: String,
}

/// `POST /v1/bundles` (JSON; payload as UTF-8 text or base64).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SendRequest {
    /// Destination endpoint, e.g. `dtn://bravo/inbox`.
    pub destination: String,
    /// Source endpoint on this node; defaults to the node id.
    #[serde(default)]
    pub source: Option<String>,
    /// The payload as text.
    #[serde(default)]
    pub payload: Option<String>,
    /// The payload as base64 (exactly one of `payload`, `payload_base64`).
    #[serde(default)]
    pub payload_base64: Option<String>,
    /// Lifetime, e.g. `1h`, `90s`; default 1 h.
    #[serde(default)]
    pub lifetime: Option<String>,
    /// `dtn` (default), `datagram` or `stream`.
    #[serde(default)]
    pub class: Option<String>,
    /// Ask for status reports (received, forwarded, delivered, deleted).
    #[serde(default)]
    pub report: bool,
    /// Eviction priority, 0 bulk, 1 normal (default), 2 expedited.
    #[serde(default)]
    pub priority: Option<u8>,
}

impl SendRequest {
    /// Takes the payload out of the request: `payload` as UTF-8 text or `payload_base64`
    /// decoded (at most one of them; neither is an empty payload).
    pub fn take_payload(&mut self) -> Result<bytes::Bytes, ApiError> {
        use base64::Engine as _;
        let bad = |m: String| ApiError::new("bad_request", m);
        match (self.payload.take(), self.payload_base64.take()) {
            (Some(text), None) => Ok(bytes::Bytes::from(text.into_bytes())),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(bytes::Bytes::from)
                .map_err(|e| bad(format!("payload_base64: {e}"))),
            (None, None) => Ok(bytes::Bytes::new()),
            (Some(_), Some(_)) => {
                Err(bad("give either payload or payload_base64, not both".into()))
            }
        }
    }

    /// A request for `destination` with every option at its default (no payload, lifetime 1 h,
    /// class dtn, no reports, normal priority); set the others with struct update syntax.
    pub fn to(destination: impl Into<String>) -> Self {
        Self {
            destination: destination.into(),
            ..Self::default()
        }
    }
}

/// The answer to a send.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SendReply {
    /// The bundle id, `source-creation_ms-sequence`.
    pub id: String,
    /// Payload bytes.
    pub size: u64,
}

/// A bundle waiting for a local application (`GET /v1/endpoints/{endpoint}/bundles`, and each
/// WebSocket message of `GET /v1/endpoints/{endpoint}/subscribe`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Received {
    /// Its place in the endpoint's inbox: what `DELETE …/bundles/{seq}` and a WebSocket
    /// `{"ack": seq}` name.
    pub seq: u64,
    /// The bundle id.
    pub id: String,
    /// Its source endpoint.
    pub source: String,
    /// The endpoint it was for.
    pub destination: String,
    /// Creation time, milliseconds since the DTN epoch.
    pub created_ms: u64,
    /// When the bundle's lifetime ends, ms since the DTN epoch; it leaves the inbox then.
    pub expiry_ms: u64,
    /// Payload bytes.
    pub size: u64,
    /// The payload, base64 (absent when asked for metadata only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

/// A status report about a bundle this node sent (`GET /v1/reports`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReportInfo {
    /// The bundle it is about.
    pub bundle: String,
    /// The node that reported.
    pub from: String,
    /// `received`, `forwarded`, `delivered` or `deleted`.
    pub status: String,
    /// The reporter's time for it, ms since the DTN epoch (0 if the reporter gave none).
    pub at_ms: u64,
    /// When it arrived here, ms since the DTN epoch.
    pub arrived_ms: u64,
    /// The RFC 9171 reason code.
    pub reason: u64,
}

/// An API error: a stable machine-readable code and a message for people. The HTTP status is
/// derived from the code.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// One of `bad_request`, `bad_endpoint`, `not_found`, `method_not_allowed`, `no_route`,
    /// `conflict` (a procedure name another provider serves),
    /// `store_full`, `payload_too_large`, `shutting_down`, `internal`, and the refusals of
    /// [`crate::api_guard`]: `unauthorized`, `forbidden_host`, `forbidden_origin`,
    /// `unsupported_media_type`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// The daemon is stopping (the event loop is gone).
    pub fn shutting_down() -> Self {
        Self::new("shutting_down", "the node is shutting down")
    }

    /// The HTTP status for this error's code.
    pub fn http_status(&self) -> u16 {
        match self.code.as_str() {
            "bad_request" | "bad_endpoint" => 400,
            "unauthorized" => 401,
            "forbidden_host" | "forbidden_origin" => 403,
            "not_found" => 404,
            "method_not_allowed" => 405,
            "payload_too_large" => 413,
            "unsupported_media_type" => 415,
            "no_route" | "conflict" => 409,
            "store_full" => 507,
            "shutting_down" => 503,
            _ => 500,
        }
    }
}
