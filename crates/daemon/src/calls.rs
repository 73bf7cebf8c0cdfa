//! The RPC part of the local API's vocabulary: what a client sends to make a call, and how a
//! call, its results and its timeline look in JSON. These are HTTP bodies (`openapi.yaml`
//! describes them), so field names are a stable interface.
//!
//! This module only converts: [`CallSpec`] into the engine's [`rpc::CallRequest`], and the
//! engine's [`rpc::CallView`] into [`CallInfo`]. It never touches the node or a socket.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use wire::rpc::{Message, Transport, Value};
use wire::{DtnTime, Eid};

use crate::control::ApiError;

/// `POST /v1/calls`: a call to make.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CallSpec {
    /// `any`, `all`, or a node: `dtn://bravo/` or just `bravo`.
    pub target: String,
    /// The procedure's name.
    pub procedure: String,
    /// Its parameters, in order.
    #[serde(default)]
    pub params: Vec<ParamSpec>,
    /// What the server must satisfy, e.g. `battery >= 50 && has(gps)`.
    #[serde(default)]
    pub requirements: Option<String>,
    /// `auto` (default), `datagram`, `stream` or `dtn`.
    #[serde(default)]
    pub transport: Option<String>,
    /// How long the call matters, from now (`10m`, `90s`); default: the timers' full span
    /// (ack + result + dtn, 3.5 min with the paper's timers).
    #[serde(default)]
    pub deadline: Option<String>,
    /// How long to wait for an ack before going by dtn (default 30 s).
    #[serde(default)]
    pub ack_timeout: Option<String>,
    /// How long to wait for the result after an ack before going by dtn (default 90 s).
    #[serde(default)]
    pub result_timeout: Option<String>,
}

/// One parameter: `{"text": "hi"}`, `{"int": 3}`, `{"float": 0.5}`, `{"bool": true}`,
/// `{"bytes": "<base64>"}` or `{"file": {"name": "a.jpg", "base64": "…"}}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ParamSpec {
    /// Text.
    Text(String),
    /// A 64-bit integer.
    Int(i64),
    /// A number.
    Float(f64),
    /// A flag.
    Bool(bool),
    /// Bytes, base64.
    Bytes(String),
    /// A file, sent on the data channel.
    File(FileSpec),
}

/// A file parameter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileSpec {
    /// Its name (a hint for the server).
    pub name: String,
    /// Its content, base64.
    pub base64: String,
}

impl CallSpec {
    /// The engine's request, with durations resolved against `now` and `default_timers`.
    pub fn to_request(
        &self,
        now: DtnTime,
        default_timers: rpc::Timers,
    ) -> Result<rpc::CallRequest, ApiError> {
        let bad = |m: String| ApiError::new("bad_request", m);
        let target = match self.target.trim() {
            "any" => rpc::Target::Any,
            "all" => rpc::Target::All,
            "" => return Err(bad("target: give a node id, `any` or `all`".into())),
            node => rpc::Target::Node(parse_node(node).map_err(|e| bad(format!("target: {e}")))?),
        };
        if self.procedure.is_empty() {
            return Err(bad("procedure: missing".into()));
        }
        let mut params = Vec::with_capacity(self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            let b64 = |s: &str| {
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map(Bytes::from)
                    .map_err(|e| bad(format!("parameter {}: base64: {e}", i + 1)))
            };
            params.push(match p {
                ParamSpec::Text(t) => rpc::Param::Value(Value::Text(t.clone())),
                ParamSpec::Int(n) => rpc::Param::Value(Value::Int(*n)),
                ParamSpec::Float(x) => rpc::Param::Value(Value::Float(*x)),
                ParamSpec::Bool(b) => rpc::Param::Value(Value::Bool(*b)),
                ParamSpec::Bytes(s) => rpc::Param::Value(Value::Bytes(b64(s)?)),
                ParamSpec::File(f) => rpc::Param::File {
                    name: f.name.clone(),
                    content: b64(&f.base64)?,
                },
            });
        }
        let transport = match &self.transport {
            None => Transport::Auto,
            Some(t) => t.parse().map_err(|_| {
                bad(format!(
                    "transport: {t:?} is not one of auto, datagram, stream, dtn"
                ))
            })?,
        };
        let duration = |field: &str, text: &Option<String>| -> Result<Option<u64>, ApiError> {
            text.as_deref()
                .map(|t| {
                    humantime::parse_duration(t)
                        .map(|d: Duration| d.as_millis() as u64)
                        .map_err(|e| bad(format!("{field}: {t:?}: {e}")))
                })
                .transpose()
        };
        let mut timers = default_timers;
        let mut custom = false;
        if let Some(ms) = duration("ack_timeout", &self.ack_timeout)? {
            timers.ack_timeout = Duration::from_millis(ms);
            custom = true;
        }
        if let Some(ms) = duration("result_timeout", &self.result_timeout)? {
            timers.result_timeout = Duration::from_millis(ms);
            custom = true;
        }
        let deadline = match duration("deadline", &self.deadline)? {
            Some(0) => return Err(bad("deadline: must be after now".into())),
            Some(ms) => Some(now.saturating_add(Duration::from_millis(ms))),
            None => None,
        };
        Ok(rpc::CallRequest {
            target,
            procedure: self.procedure.clone(),
            params,
            requirements: self.requirements.clone().unwrap_or_default(),
            transport,
            deadline,
            timers: custom.then_some(timers),
        })
    }
}

/// A node name a user gave that is not a node id (its `Display` shows the text and why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a node id: {reason}")]
pub struct NodeNameError {
    /// The text.
    pub text: String,
    /// Why the endpoint parser refused it (the text as a full endpoint id).
    #[source]
    pub reason: wire::ParseEidError,
}

/// A node named by a user: `dtn://bravo/`, `dtn://bravo`, or `bravo`.
pub fn parse_node(text: &str) -> Result<Eid, NodeNameError> {
    let full = if text.contains(':') {
        text.to_owned()
    } else {
        format!("dtn://{text}/")
    };
    let eid: Eid = full.parse().map_err(|reason| NodeNameError {
        text: text.to_owned(),
        reason,
    })?;
    Ok(eid.node_id())
}

/// How a call stands, for a program that wants its answer rather than a report
/// ([`ControlHandle::call_for_outcome`](crate::ControlHandle::call_for_outcome)): the engine's
/// own types, nothing formatted. [`CallInfo`] is the same call as the HTTP API shows it, with
/// ids, keys and values as text and the timeline; building it is most of the work a quick call
/// costs the client's event loop besides the call itself.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The call's id.
    pub id: wire::rpc::CallId,
    /// Where it stands: `Waiting` if the wait ended before the call did.
    pub state: rpc::CallState,
    /// Its replies, in order of arrival.
    pub replies: Vec<rpc::Reply>,
}

impl CallOutcome {
    /// The call's outcome, taken from the engine's view of it.
    pub fn from_view(view: rpc::CallRef<'_>) -> Self {
        Self {
            id: view.call.id,
            state: view.state,
            replies: view.replies.to_vec(),
        }
    }

    /// Whether the call ended (succeeded, failed, expired, cancelled).
    pub fn finished(&self) -> bool {
        self.state != rpc::CallState::Waiting
    }

    /// The first result among the replies (the result, for a call to one node), if any.
    pub fn result(&self) -> Option<&wire::rpc::CallResult> {
        self.replies.iter().find_map(|r| match &r.message {
            Message::Result(result) => Some(result),
            _ => None,
        })
    }
}

/// A call this node made (`GET /v1/calls/{id}`; the list leaves out the timeline).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CallInfo {
    /// The call id, 32 hex digits.
    pub id: String,
    /// The procedure.
    pub procedure: String,
    /// `any`, `all`, or the server's node id.
    pub target: String,
    /// The transport asked for.
    pub transport: String,
    /// `waiting`, `succeeded`, `failed`, `expired` or `cancelled`.
    pub state: String,
    /// When it was made, ms since the DTN epoch.
    pub created_ms: u64,
    /// When it stops mattering, ms since the DTN epoch.
    pub deadline_ms: u64,
    /// Servers that acknowledged it.
    pub acks: Vec<String>,
    /// Results and refusals, in order of arrival.
    pub replies: Vec<ReplyInfo>,
    /// What happened, in order (empty in lists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineEntry>,
}

/// One result or refusal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplyInfo {
    /// The server's node id.
    pub server: String,
    /// The server's public key (hex): it signed the reply.
    pub server_key: String,
    /// When it arrived, ms since the DTN epoch.
    pub at_ms: u64,
    /// How it came: `datagram`, `stream`, `dtn` or `local`.
    pub via: String,
    /// Whether the procedure succeeded (`result`) or not (`reject`).
    pub ok: bool,
    /// The result value (stdout) as text, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_text: Option<String>,
    /// The result value, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
    /// Result files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileInfo>,
    /// How long the procedure ran, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ms: Option<u64>,
    /// For a refusal: its stable code name (`not_offered`, `predicate_failed`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For a refusal: what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For a failed execution: its exit status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
    /// For a failed execution: the end of its stderr (lossy UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

/// A result file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileInfo {
    /// The name the procedure gave it.
    pub name: String,
    /// Its BLAKE3 hash, hex: `GET /v1/files/{hash}` fetches it.
    pub hash: String,
    /// Bytes.
    pub size: u64,
    /// Whether it has arrived (files travel apart from the result).
    pub arrived: bool,
    /// Bytes of it here so far while it arrives in pieces (fragments, or what a cut link
    /// brought); absent before its first piece and once it is whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
}

/// How much of a result file this node has (see [`CallInfo::from_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileHere {
    /// All of it.
    All,
    /// This many bytes so far.
    Part(u64),
    /// Nothing yet.
    Nothing,
}

/// What a waiter for a call waits for besides its end (`ControlHandle::wait_call`): by
/// default nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitFor {
    /// More replies than this (an all-mode caller following results as they come).
    pub replies: Option<usize>,
    /// More arrived result files than this (a caller showing files as they come).
    pub files: Option<usize>,
}

/// One line of a call's timeline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TimelineEntry {
    /// When, ms since the DTN epoch.
    pub at_ms: u64,
    /// Milliseconds since the call was made.
    pub offset_ms: u64,
    /// What happened.
    pub text: String,
}

/// A call this node serves or served (`GET /v1/served`), from what it keeps in memory. A
/// server keeps no time it took a call; the deadline (the caller's clock) orders them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServedInfo {
    /// The call id, 32 hex digits.
    pub id: String,
    /// The caller's node id.
    pub caller: String,
    /// `explicit`, `any` or `all`.
    pub mode: String,
    /// The procedure asked for.
    pub procedure: String,
    /// When the call stops mattering, ms since the DTN epoch.
    pub deadline_ms: u64,
    /// `waiting_files`, `running`, `answered` (a result or a refusal is kept for the caller)
    /// or `skipped` (another server took it, or the caller cancelled it).
    pub state: String,
    /// Whether this node acknowledged it to the caller.
    pub acked: bool,
}

impl From<rpc::ServedView> for ServedInfo {
    fn from(v: rpc::ServedView) -> Self {
        Self {
            id: v.id.to_string(),
            caller: v.caller.to_string(),
            mode: v.mode.name().to_owned(),
            procedure: v.procedure,
            deadline_ms: v.deadline.as_millis(),
            state: v.state.to_owned(),
            acked: v.acked,
        }
    }
}

/// A procedure this node serves (`GET /v1/procedures`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcedureInfo {
    /// Its name.
    pub name: String,
    /// Its parameter types, in order.
    pub params: Vec<String>,
    /// Its parameters, in order, with their names where declared (for typed stubs).
    #[serde(default)]
    pub parameters: Vec<ParamInfo>,
    /// What its value is (`text`, `bytes`, `json`), where declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<String>,
    /// Who runs it: `program` (an executable of the configuration), `application` (a provider
    /// connected to the API) or `node` (built in).
    #[serde(default)]
    pub served_by: String,
    /// For a procedure an application serves: whether it is connected now (calls wait for it
    /// a while when it is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Most executions at once.
    pub max_concurrent: u32,
    /// Its own predicate, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<String>,
    /// Whether only listed callers may call it.
    pub restricted: bool,
    /// How many times its program was started since the node started (runs the node cut off
    /// and started again after a restart count again; the built-in `null` runs none).
    #[serde(default)]
    pub executions: u64,
}

/// One parameter of a procedure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ParamInfo {
    /// Its name, where declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: String,
}

impl CallInfo {
    /// Whether the call is over.
    pub fn finished(&self) -> bool {
        self.state != "waiting"
    }

    /// How many result files have arrived, over all replies.
    pub fn arrived_files(&self) -> usize {
        self.replies
            .iter()
            .flat_map(|r| &r.files)
            .filter(|f| f.arrived)
            .count()
    }

    /// Whether the call has what a waiter for `more` waits for: its end, or more of what
    /// `more` names.
    pub fn has(&self, more: WaitFor) -> bool {
        self.finished()
            || more.replies.is_some_and(|n| self.replies.len() > n)
            || more.files.is_some_and(|n| self.arrived_files() > n)
    }

    /// The engine's view as JSON. `file_here` says how much of a result file is here;
    /// `with_timeline` keeps the timeline (the list leaves it out).
    pub fn from_view(
        view: rpc::CallRef<'_>,
        file_here: impl Fn(&[u8; 32]) -> FileHere,
        with_timeline: bool,
    ) -> Self {
        let call = view.call;
        let target = match (&call.server, call.mode) {
            (Some(s), _) => s.to_string(),
            (None, mode) => mode.name().to_owned(),
        };
        // Sized for the replies there are (`collect` after a filter starts at four).
        let mut replies = Vec::with_capacity(view.replies.len());
        replies.extend(
            view.replies
                .iter()
                .filter_map(|r| reply_info(r, &file_here)),
        );
        let timeline = if with_timeline {
            view.timeline
                .iter()
                .map(|(at, text)| TimelineEntry {
                    at_ms: at.as_millis(),
                    offset_ms: wire::time::millis(at - view.created),
                    text: text.into_owned(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            id: call.id.to_string(),
            procedure: call.procedure.clone(),
            target,
            transport: call.transport.name().to_owned(),
            state: view.state.name().to_owned(),
            created_ms: view.created.as_millis(),
            deadline_ms: call.deadline.as_millis(),
            acks: view.acks.iter().map(ToString::to_string).collect(),
            replies,
            timeline,
        }
    }
}

fn reply_info(r: &rpc::Reply, file_here: &impl Fn(&[u8; 32]) -> FileHere) -> Option<ReplyInfo> {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut info = ReplyInfo {
        server: String::new(),
        server_key: r.server_key.to_string(),
        at_ms: r.at.as_millis(),
        via: r.via.to_owned(),
        ok: false,
        value_text: None,
        value_base64: None,
        files: Vec::new(),
        run_ms: None,
        code: None,
        detail: None,
        exit_status: None,
        stderr_tail: None,
    };
    match &r.message {
        Message::Result(res) => {
            info.server = res.server.to_string();
            info.ok = true;
            info.value_text = std::str::from_utf8(&res.value).ok().map(str::to_owned);
            info.value_base64 = Some(b64(&res.value));
            info.run_ms = Some(res.run_ms);
            info.files = res
                .files
                .iter()
                .map(|f| {
                    let here = file_here(&f.hash);
                    FileInfo {
                        name: f.name.clone(),
                        hash: wire::hex(&f.hash),
                        size: f.size,
                        arrived: here == FileHere::All,
                        received: match here {
                            FileHere::Part(n) => Some(n),
                            _ => None,
                        },
                    }
                })
                .collect();
        }
        Message::Reject(rej) => {
            info.server = rej.server.to_string();
            info.code = Some(rej.code.name().to_owned());
            info.detail = Some(rej.detail.clone());
            info.exit_status = rej.exit_status;
            if !rej.stderr_tail.is_empty() {
                info.stderr_tail = Some(String::from_utf8_lossy(&rej.stderr_tail).into_owned());
            }
        }
        _ => return None,
    }
    Some(info)
}

/// A 32-byte hash from 64 hex digits.
pub fn parse_hash(text: &str) -> Result<[u8; 32], ApiError> {
    let bad = || {
        ApiError::new(
            "bad_request",
            format!("{text:?} is not a 64-digit hex hash"),
        )
    };
    if text.len() != 64 || !text.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_is_answered_at_the_end_or_on_more_of_what_it_follows() {
        let file = |arrived| FileInfo {
            name: "f".into(),
            hash: "00".repeat(32),
            size: 1,
            arrived,
            received: None,
        };
        let reply = |files| ReplyInfo {
            server: "dtn://b/".into(),
            server_key: "00".repeat(32),
            at_ms: 0,
            via: "dtn".into(),
            ok: true,
            value_text: None,
            value_base64: None,
            files,
            run_ms: None,
            code: None,
            detail: None,
            exit_status: None,
            stderr_tail: None,
        };
        let mut call = CallInfo {
            id: "00".repeat(16),
            procedure: "photo".into(),
            target: "all".into(),
            transport: "auto".into(),
            state: "waiting".into(),
            created_ms: 0,
            deadline_ms: 1,
            acks: Vec::new(),
            replies: vec![
                reply(vec![file(true), file(false)]),
                reply(vec![file(true)]),
            ],
            timeline: Vec::new(),
        };
        assert_eq!(call.arrived_files(), 2);
        let wait = |replies, files| WaitFor { replies, files };
        assert!(!call.has(WaitFor::default()), "only the end");
        assert!(!call.has(wait(Some(2), Some(2))), "nothing new");
        assert!(call.has(wait(Some(1), None)), "a reply more than seen");
        assert!(call.has(wait(None, Some(1))), "a file more than seen");
        call.replies[0].files[1].arrived = true;
        assert!(call.has(wait(Some(2), Some(2))), "the third file came");
        call.state = "succeeded".into();
        assert!(call.has(WaitFor::default()), "the end");
    }

    fn spec(target: &str) -> CallSpec {
        CallSpec {
            target: target.into(),
            procedure: "echo".into(),
            ..CallSpec::default()
        }
    }

    #[test]
    fn targets_are_any_all_or_a_node() {
        let t = rpc::Timers::default();
        assert_eq!(
            spec("any")
                .to_request(DtnTime::from_millis(0), t)
                .unwrap()
                .target,
            rpc::Target::Any
        );
        assert_eq!(
            spec("all")
                .to_request(DtnTime::from_millis(0), t)
                .unwrap()
                .target,
            rpc::Target::All
        );
        let bravo: Eid = "dtn://bravo/".parse().unwrap();
        for name in ["bravo", "dtn://bravo/", "dtn://bravo/inbox"] {
            assert_eq!(
                spec(name)
                    .to_request(DtnTime::from_millis(0), t)
                    .unwrap()
                    .target,
                rpc::Target::Node(bravo.clone()),
                "{name}"
            );
        }
        let e = spec("").to_request(DtnTime::from_millis(0), t).unwrap_err();
        assert_eq!(e.code, "bad_request");
        // A name that is no node id: refused, saying which text and why.
        let e = spec("dtn://")
            .to_request(DtnTime::from_millis(0), t)
            .unwrap_err();
        assert_eq!(e.code, "bad_request");
        assert!(
            e.message.starts_with("target: \"dtn://\" is not a node id"),
            "{}",
            e.message
        );
        let e = parse_node("dtn://").unwrap_err();
        assert_eq!(e.text, "dtn://");
    }

    #[test]
    fn params_deadline_and_timers_convert() {
        let mut s = spec("any");
        s.params = vec![
            ParamSpec::Text("a b".into()),
            ParamSpec::Int(-3),
            ParamSpec::Bytes("AAE=".into()),
            ParamSpec::File(FileSpec {
                name: "x.txt".into(),
                base64: "aGk=".into(),
            }),
        ];
        s.deadline = Some("10m".into());
        s.ack_timeout = Some("5s".into());
        let r = s
            .to_request(DtnTime::from_millis(1_000), rpc::Timers::default())
            .unwrap();
        assert_eq!(r.deadline, Some(DtnTime::from_millis(601_000)));
        assert_eq!(r.timers.unwrap().ack_timeout, Duration::from_secs(5));
        assert_eq!(r.timers.unwrap().result_timeout, Duration::from_secs(90));
        assert_eq!(r.params[1], rpc::Param::Value(Value::Int(-3)));
        assert_eq!(
            r.params[2],
            rpc::Param::Value(Value::Bytes(Bytes::from_static(&[0, 1])))
        );
        assert_eq!(
            r.params[3],
            rpc::Param::File {
                name: "x.txt".into(),
                content: Bytes::from_static(b"hi")
            }
        );
        assert!(
            spec("any")
                .to_request(DtnTime::from_millis(0), rpc::Timers::default())
                .unwrap()
                .timers
                .is_none()
        );
    }

    #[test]
    fn bad_fields_name_themselves() {
        let t = rpc::Timers::default();
        let mut s = spec("any");
        s.transport = Some("carrier-pigeon".into());
        assert!(
            s.to_request(DtnTime::from_millis(0), t)
                .unwrap_err()
                .message
                .starts_with("transport")
        );
        let mut s = spec("any");
        s.deadline = Some("soon".into());
        assert!(
            s.to_request(DtnTime::from_millis(0), t)
                .unwrap_err()
                .message
                .starts_with("deadline")
        );
        let mut s = spec("any");
        s.params = vec![ParamSpec::Bytes("***".into())];
        assert!(
            s.to_request(DtnTime::from_millis(0), t)
                .unwrap_err()
                .message
                .starts_with("parameter 1")
        );
    }

    #[test]
    fn param_json_is_externally_tagged() {
        let p: Vec<ParamSpec> = serde_json::from_str(
            r#"[{"text":"hi"},{"int":3},{"float":0.5},{"bool":true},{"file":{"name":"a","base64":""}}]"#,
        )
        .unwrap();
        assert_eq!(p[1], ParamSpec::Int(3));
        assert_eq!(p[3], ParamSpec::Bool(true));
    }

    #[test]
    fn hashes_parse_from_hex() {
        let h = [0xabu8; 32];
        assert_eq!(parse_hash(&wire::hex(&h)).unwrap(), h);
        assert!(parse_hash("ab").is_err());
        assert!(parse_hash(&"zz".repeat(32)).is_err());
    }
}
