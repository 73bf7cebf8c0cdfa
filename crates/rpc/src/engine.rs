//! The engine: one [`Rpc`] per node, beside its [`Node`]. Client and server halves share it
//! because a node is usually both (and a procedure may itself call out).

use crate::port::NodePort;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use node::stream::{StreamEvent, StreamId};
use node::{Class, Event, Outgoing, SendError};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use seal::{Identity, PublicKey};
use store::{RpcTable, StoreError};
use wire::rpc::{
    Ack, Call, CallId, CallResult, Cancel, EncodeError, FileRef, Message, Mode, Notice, Reject,
    RejectCode, Transport, Value,
};
use wire::{DtnTime, Eid};

use crate::ParamType;
use crate::config::{ProcedureSpec, RpcConfig, Timers};
use crate::record::{Reader, RecordError, Writer};
use crate::require::{Facts, ParseError, Requirement, Verdict};
use crate::shared_memo::{SharedMemo, hash_of};
use archive::Archive;
use persist::Writes;

/// The endpoint demux of RPC control messages (`dtn://<node>/~rpc`).
pub const RPC_DEMUX: &str = "~rpc";
/// The endpoint demux of the data channel (`dtn://<node>/~rpc-data`).
pub const DATA_DEMUX: &str = "~rpc-data";

/// Where a bundle of the engine's goes: the control channel (by the given class) or the data
/// channel (always dtn).
#[derive(Debug, Clone, Copy)]
enum Channel {
    Control(Class),
    Data,
}

/// A stream frame longer than this is a protocol error (a control message and its envelope).
const MAX_FRAME: usize = wire::rpc::MAX_CONTROL_LEN + 1024;
/// Real-time bundles live at most this long: a datagram nobody took by then is stale.
const MAX_DATAGRAM_LIFETIME: Duration = Duration::from_secs(30);
/// Any-mode notices from other servers are remembered this long at most.
const NOTICE_MEMORY: Duration = Duration::from_secs(24 * 3_600);
/// A node is introduced to another (a hello sent) at most this often.
const HELLO_INTERVAL: Duration = Duration::from_secs(60);
/// Priority of RPC bundles in the store (expedited).
const PRIORITY: u8 = 2;
/// Most pair keys kept.
const MAX_PAIR_KEYS: usize = 4096;

/// Who a call is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One named node (explicit mode).
    Node(Eid),
    /// Any node that offers the procedure: the first result wins.
    Any,
    /// Every node that offers it: all results until the deadline.
    All,
}

impl Target {
    fn mode(&self) -> Mode {
        match self {
            Target::Node(_) => Mode::Explicit,
            Target::Any => Mode::Any,
            Target::All => Mode::All,
        }
    }
}

/// A parameter as the caller gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A value sent inside the call (a `bytes` value over the inline limit goes as a file).
    Value(Value),
    /// A file, sent on the data channel.
    File {
        /// Its name for the server's convenience.
        name: String,
        /// Its content.
        content: Bytes,
    },
}

/// What a client asks for.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// Explicit, any or all.
    pub target: Target,
    /// The procedure's name.
    pub procedure: String,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// Requirements the server must meet (empty: none).
    pub requirements: String,
    /// How the call travels.
    pub transport: Transport,
    /// When the call stops mattering; `None`: now plus the timers' full span.
    pub deadline: Option<DtnTime>,
    /// The call's timers; `None`: the engine's.
    pub timers: Option<Timers>,
}

impl CallRequest {
    /// A call with default transport (auto), no requirements and the default deadline.
    pub fn new(target: Target, procedure: &str, params: Vec<Param>) -> Self {
        Self {
            target,
            procedure: procedure.to_string(),
            params,
            requirements: String::new(),
            transport: Transport::Auto,
            deadline: None,
            timers: None,
        }
    }
}

/// A store failure the engine met while keeping its durable state. The engine goes on with
/// what it holds in memory (a failed write is retried with the record's next change; a failed
/// read keeps what it could not read); the shell takes these with [`Rpc::take_errors`] and logs
/// and counts them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Writing to one of the engine's tables failed.
    #[error("writing the rpc {} table: {source}", table.name())]
    Write {
        /// The table.
        table: RpcTable,
        /// The store's error.
        source: store::StoreError,
    },
    /// Reading one of the engine's tables failed.
    #[error("reading the rpc {} table: {source}", table.name())]
    Read {
        /// The table.
        table: RpcTable,
        /// The store's error.
        source: store::StoreError,
    },
    /// A reply could not be handed to the node: it waits in the outbox and is tried again.
    #[error("reply to {caller} waits in the outbox: {source}")]
    ReplyQueued {
        /// Whom the reply is for.
        caller: Eid,
        /// Why the node did not take it.
        source: SendError,
    },
}

/// Why a call could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The requirements do not parse.
    #[error("requirements: {0}")]
    Requirements(ParseError),
    /// The stream transport needs one named server.
    #[error("the stream transport needs an explicit server")]
    StreamNeedsServer,
    /// A real-time transport was forced but the server is not reachable now.
    #[error("{0} is not reachable now (try --transport auto or dtn)")]
    NotReachable(Eid),
    /// The deadline is not in the future.
    #[error("the deadline has already passed")]
    DeadlinePassed,
    /// The call does not fit one control message.
    #[error(transparent)]
    TooLarge(#[from] EncodeError),
    /// A node id that cannot carry RPC endpoints.
    #[error("{0} is not a dtn node id")]
    BadTarget(Eid),
    /// The node refused to send (its store is full, …).
    #[error(transparent)]
    Send(#[from] SendError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such call.
    #[error("no such call")]
    UnknownCall,
    /// The call's files do not fit this node's file budget, even after dropping the files
    /// finished calls no longer need ([`RpcConfig::max_file_bytes`]).
    #[error(
        "the call's files ({needed} bytes this node does not hold yet) do not fit its RPC file \
         budget of {budget} bytes, even after dropping finished calls' files"
    )]
    FileBudget {
        /// Bytes of files this node would have to keep anew.
        needed: u64,
        /// The budget.
        budget: u64,
    },
}

/// Identifies one execution the engine asked the shell to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

/// An execution for the shell to run: the call passed every check and its files are here.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Report the outcome with this id.
    pub id: JobId,
    /// The call.
    pub call: CallId,
    /// The caller's node.
    pub caller: Eid,
    /// The caller's key.
    pub caller_key: PublicKey,
    /// The procedure.
    pub procedure: String,
    /// The parameters, in order, checked against the declaration.
    pub params: Vec<Value>,
    /// The content of every file parameter, verified against its hash.
    pub files: Vec<(FileRef, Bytes)>,
    /// The call's deadline.
    pub deadline: DtnTime,
    /// The call's execution was cut off by a restart of this node (its record said it was
    /// running): the shell must find out whether the procedure had started, and ask
    /// [`Rpc::resume`] whether to run it or how to answer instead. A shell that cannot know
    /// must treat it as started.
    pub resumed: bool,
}

/// What the shell knows of an execution a restart cut off (see [`Job::resumed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorRun {
    /// The procedure's process never started (the shell's durable record of executions says so):
    /// running it now runs it once.
    NeverStarted,
    /// It started, or may have. `detail` says what the shell knows of how it ended ("it ran to
    /// its end (exit status 0)", "it was still running and was killed at restart").
    Started {
        /// For the caller.
        detail: String,
    },
}

/// How an execution ended, as the shell reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The procedure succeeded.
    Success {
        /// Its output (stdout).
        value: Bytes,
        /// Files it produced (name, content).
        files: Vec<(String, Bytes)>,
        /// How long it ran.
        run_ms: u64,
    },
    /// It failed (or could not run).
    Failure {
        /// Why.
        code: RejectCode,
        /// Detail for the caller.
        detail: String,
        /// Its exit status, if it exited.
        exit_status: Option<i64>,
        /// The end of its stderr.
        stderr_tail: Bytes,
    },
}

/// How a message reached this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    /// A real-time datagram.
    Datagram,
    /// A stream.
    Stream(StreamId),
    /// A store-carry-forward bundle.
    Dtn,
    /// This node called itself.
    Local,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::Datagram => "datagram",
            Via::Stream(_) => "stream",
            Via::Dtn => "dtn",
            Via::Local => "local",
        }
    }

    fn code(self) -> u8 {
        match self {
            Via::Datagram => 0,
            Via::Stream(_) => 1,
            Via::Dtn => 2,
            Via::Local => 3,
        }
    }

    fn from_code(code: u8) -> Via {
        match code {
            0 => Via::Datagram,
            3 => Via::Local,
            // A stream does not survive a restart: what came by stream is answered by dtn.
            _ => Via::Dtn,
        }
    }
}

/// What the engine tells its shell.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcEvent {
    /// Run this procedure and report with [`Rpc::finished`].
    Execute(Job),
    /// Stop this execution if it still runs; its outcome no longer matters.
    Abort {
        /// The execution.
        job: JobId,
        /// Why (for logs).
        reason: &'static str,
    },
    /// Something happened to a call this node made (an ack, a reply, a phase change).
    CallChanged(CallId),
    /// A call this node made is over (see [`Rpc::call_view`]).
    CallFinished(CallId),
    /// A message naming `node` as its sender was signed by another key than the one known for
    /// it, and dropped: announced the first time while the node's presented key is kept (see
    /// [`Rpc::keys`]), for the shell to tell the operator.
    KeyMismatch {
        /// The node the message claimed to come from.
        node: Eid,
        /// The key known for it.
        known: PublicKey,
        /// The key the message was signed by.
        presented: PublicKey,
        /// What the message was: `hello`, `call`, `cancel`, `reply` or `notice`.
        message: &'static str,
    },
}

/// Where a call this node made stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CallState {
    /// Waiting for replies.
    Waiting,
    /// It has its result (explicit, any) or results (all, at the deadline).
    Succeeded,
    /// It was refused or failed (the replies say why).
    Failed,
    /// The deadline passed without a result.
    Expired,
    /// The caller cancelled it.
    Cancelled,
}

impl CallState {
    /// A stable name (`waiting`, `succeeded`, …).
    pub fn name(self) -> &'static str {
        match self {
            CallState::Waiting => "waiting",
            CallState::Succeeded => "succeeded",
            CallState::Failed => "failed",
            CallState::Expired => "expired",
            CallState::Cancelled => "cancelled",
        }
    }

    fn code(self) -> u8 {
        match self {
            CallState::Waiting => 0,
            CallState::Succeeded => 1,
            CallState::Failed => 2,
            CallState::Expired => 3,
            CallState::Cancelled => 4,
        }
    }

    fn from_code(code: u8) -> Result<Self, RecordError> {
        Ok(match code {
            0 => CallState::Waiting,
            1 => CallState::Succeeded,
            2 => CallState::Failed,
            3 => CallState::Expired,
            4 => CallState::Cancelled,
            _ => return Err(RecordError("call state")),
        })
    }
}

/// A reply a call received.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// When it arrived.
    pub at: DtnTime,
    /// How.
    pub via: &'static str,
    /// The server's key (it signed the reply).
    pub server_key: PublicKey,
    /// A result or a rejection.
    pub message: Message,
    /// Files of a result still on their way.
    pub missing_files: usize,
}

/// A call this node serves or served and keeps in memory, as a listing shows it
/// ([`Rpc::served_views`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedView {
    /// The call's id.
    pub id: CallId,
    /// Who called: where the reply goes.
    pub caller: Eid,
    /// Explicit, any or all.
    pub mode: Mode,
    /// The procedure asked for.
    pub procedure: String,
    /// When the call stops mattering.
    pub deadline: DtnTime,
    /// `waiting_files` (accepted, its file parameters on their way), `running`, `answered`
    /// (a result or a refusal is stored for the caller) or `skipped` (another server took it,
    /// or the caller cancelled it).
    pub state: &'static str,
    /// Whether an ack went to the caller.
    pub acked: bool,
}

/// A call this node made, as the shell and its users see it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallView {
    /// The call as sent.
    pub call: Call,
    /// When it was made.
    pub created: DtnTime,
    /// Where it stands.
    pub state: CallState,
    /// Servers that acknowledged it.
    pub acks: Vec<Eid>,
    /// Replies, in order of arrival.
    pub replies: Vec<Reply>,
    /// What happened, in order: (time, text).
    pub timeline: Vec<(DtnTime, String)>,
}

impl CallView {
    /// Borrowed, as [`Rpc::call_ref`] gives a call kept in memory.
    pub fn as_ref(&self) -> CallRef<'_> {
        CallRef {
            call: &self.call,
            created: self.created,
            state: self.state,
            acks: &self.acks,
            replies: &self.replies,
            timeline: TimelineRef {
                lines: &self.timeline,
                derived: &[],
                call: &self.call,
                replies: &self.replies,
                state: self.state,
            },
        }
    }
}

/// A call's timeline as a [`CallRef`] borrows it. The lines every call has (how it was called,
/// each reply, how it ended: `client::Derived`) are kept as the few fields they are written
/// from, and written out only when read: as text they were three allocations a call, kept as
/// long as the call stays in memory (thousands of calls), and read for few of them.
#[derive(Debug, Clone, Copy)]
pub struct TimelineRef<'a> {
    /// Every line: its time, and its text unless `derived` names it (then empty).
    lines: &'a [(DtnTime, String)],
    /// The lines written when read, by index, in order.
    derived: &'a [(usize, client::Derived)],
    call: &'a Call,
    replies: &'a [Reply],
    state: CallState,
}

impl<'a> TimelineRef<'a> {
    /// How many lines there are.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines in order: (time, text).
    pub fn iter(&self) -> impl Iterator<Item = (DtnTime, Cow<'a, str>)> + 'a {
        let this = *self;
        let mut derived = this.derived.iter().peekable();
        this.lines.iter().enumerate().map(move |(i, (at, text))| {
            match derived.next_if(|(line, _)| *line == i) {
                Some((_, d)) => (*at, Cow::Owned(d.text(this.call, this.replies, this.state))),
                None => (*at, Cow::Borrowed(text.as_str())),
            }
        })
    }

    /// The lines as text, to keep.
    pub fn to_vec(&self) -> Vec<(DtnTime, String)> {
        self.iter()
            .map(|(at, text)| (at, text.into_owned()))
            .collect()
    }
}

impl ClientCall {
    fn timeline(&self) -> TimelineRef<'_> {
        TimelineRef {
            lines: &self.timeline,
            derived: &self.derived,
            call: &self.call,
            replies: &self.replies,
            state: self.state,
        }
    }
}

/// A [`CallView`] borrowed from the engine: what a shell reads to answer about a call without
/// copying it first (it is read once per finished call, and again per progress poll).
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    /// The call as sent.
    pub call: &'a Call,
    /// When it was made.
    pub created: DtnTime,
    /// Where it stands.
    pub state: CallState,
    /// Servers that acknowledged it.
    pub acks: &'a [Eid],
    /// Replies, in order of arrival.
    pub replies: &'a [Reply],
    /// What happened, in order: (time, text).
    pub timeline: TimelineRef<'a>,
}

impl CallRef<'_> {
    /// A copy to keep.
    pub fn to_view(&self) -> CallView {
        CallView {
            call: self.call.clone(),
            created: self.created,
            state: self.state,
            acks: self.acks.to_vec(),
            replies: self.replies.to_vec(),
            timeline: self.timeline.to_vec(),
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RpcStats {
    /// Calls this node made.
    pub calls_made: u64,
    /// Calls this node accepted to run.
    pub calls_accepted: u64,
    /// Calls this node refused.
    pub calls_rejected: u64,
    /// Executions that finished.
    pub executions: u64,
    /// Copies of a call already known (answered from the cache, never run again).
    pub duplicates: u64,
    /// Messages refused: bad signature, tampered, not decryptable, unreadable.
    pub forged: u64,
    /// Messages dropped because their signer is not the key known for the node they claim to
    /// come from (a caller, a server, a hello's node), or replies naming another server than
    /// the one an explicit call named.
    pub key_mismatches: u64,
    /// Presented keys forgotten to keep that table within its bound (see [`Rpc::keys`]).
    pub presented_keys_dropped: u64,
    /// New nodes' keys not learnt because [`MAX_LEARNT_KEYS`] keys are known already.
    pub keys_not_learnt: u64,
    /// Replies for no call of ours, or arriving after the call ended.
    pub unmatched: u64,
    /// Any-mode calls skipped or stopped because another server took them.
    pub skipped: u64,
    /// Any-mode notices ignored: their signer is not among `RpcConfig::trusted_servers`.
    pub untrusted_notices: u64,
    /// Data-channel files refused (over the budget) or not matching their hash.
    pub files_refused: u64,
    /// Durable records that did not parse at start (skipped).
    pub damaged_records: u64,
    /// Executions a restart cut off that had started: answered `result_lost`, or run again
    /// (idempotent procedures, counted in `reruns` too).
    pub interrupted: u64,
    /// Executions of idempotent procedures run again after a restart cut them off.
    pub reruns: u64,
    /// Executions stopped, and their callers answered `server_stopped`, by a graceful stop.
    pub stopped: u64,
    /// New calls from other nodes dropped unheard because the node keeps
    /// [`RpcConfig::max_served_calls`] served-call records.
    pub served_table_full: u64,
    /// New calls dropped unheard because their caller has
    /// [`RpcConfig::max_served_calls_per_caller`] served-call records.
    pub served_caller_full: u64,
}

// ----- internal state -----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sent by datagram or stream, waiting for an ack until `until`.
    RealTime { until: DtnTime },
    /// Acknowledged, waiting for the result until `until`.
    Acked { until: DtnTime },
    /// On dtn (sent, or just listening): waits until the deadline.
    Dtn,
    /// Over.
    Finished,
}

impl Phase {
    fn code(self) -> (u8, u64) {
        match self {
            Phase::RealTime { until } => (0, until.as_millis()),
            Phase::Acked { until } => (1, until.as_millis()),
            Phase::Dtn => (2, 0),
            Phase::Finished => (3, 0),
        }
    }

    fn from_code(code: u8, until: u64) -> Result<Self, RecordError> {
        Ok(match code {
            0 => Phase::RealTime {
                until: DtnTime::from_millis(until),
            },
            1 => Phase::Acked {
                until: DtnTime::from_millis(until),
            },
            2 => Phase::Dtn,
            3 => Phase::Finished,
            _ => return Err(RecordError("phase")),
        })
    }
}

/// A call this node made.
#[derive(Debug, Clone)]
struct ClientCall {
    call: Call,
    /// The call encoded: what was sealed, and what its record keeps (a call never changes after
    /// it is made, so it is encoded once, not at every write of its record).
    call_bytes: Bytes,
    /// The sealed call, resent as is.
    sealed: Bytes,
    timers: Timers,
    created: DtnTime,
    phase: Phase,
    /// Whether the call was handed to dtn already.
    sent_dtn: bool,
    /// The real-time transport in use, if any.
    realtime: Option<Transport>,
    state: CallState,
    finished_at: Option<DtnTime>,
    acks: Vec<Eid>,
    replies: Vec<Reply>,
    /// What happened: (time, text), the text empty for the lines `derived` names.
    timeline: Vec<(DtnTime, String)>,
    /// Timeline lines (by index, in order) written from the rest of the record when read (see
    /// [`TimelineRef`]): the record, too, keeps a code for them instead of their text.
    derived: Vec<(usize, client::Derived)>,
    /// Where its record's row sorts.
    row: RowOrder,
    // Not persisted: a stream does not survive a restart.
    stream: Option<StreamId>,
    next_resend: Option<DtnTime>,
    /// When its timer is armed: a finished call takes its timer out instead of leaving a stale
    /// entry for up to `ack_ms` (at thousands of calls a second, hundreds of thousands).
    armed: Option<DtnTime>,
}

/// A call this node serves: its caller's key and the call id.
///
/// Ordered by call id first: ids are random, so comparisons end on the id (a 128-bit compare)
/// where the caller's key (32 bytes, the same for every call from one caller) came first and was
/// compared in full at every step of a map lookup, a tenth of a server's instructions per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ServeKey {
    id: CallId,
    caller: PublicKey,
}

impl ServeKey {
    fn new(caller: PublicKey, id: CallId) -> Self {
        Self { id, caller }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServeState {
    /// Accepted; waits for its files.
    WaitingFiles,
    /// Running as this job.
    Running(JobId),
    /// Answered: the reply is stored.
    Answered,
    /// Another server took it (any mode), or the caller cancelled it: no reply.
    Skipped,
}

#[derive(Debug, Clone)]
struct Serving {
    call: Call,
    caller_key: PublicKey,
    state: ServeState,
    /// The last path the call came by: replies go back along it while it lives.
    via: Via,
    /// When to acknowledge, if the result is not ready by then.
    ack_at: Option<DtnTime>,
    /// An any-mode call starts no earlier than this (see `RpcConfig::any_start_jitter_ms`).
    start_at: Option<DtnTime>,
    /// When the timer `Rpc::arm_serving` set goes off, if it is set: taken out again once the
    /// call needs none, so that a call answered at once leaves no timer behind to go off for
    /// nothing.
    armed: Option<DtnTime>,
    /// The sealed reply (result or reject), once answered.
    reply: Option<Bytes>,
    /// The reply still has to be handed to the network (the outbox).
    unsent: bool,
    /// Whether the store's outbox has a row for this call (what `unsent` was when last written).
    outbox_row: bool,
    /// An ACK went to the caller: it no longer sends the call again when its stream breaks,
    /// so a reply on a stream needs the outbox (see `Rpc::needs_outbox_row`).
    acked: bool,
    /// The reply went on this stream; if the stream is lost before it is acknowledged, it goes
    /// by dtn.
    reply_stream: Option<StreamId>,
    /// Where its dedup and outbox rows sort.
    row: RowOrder,
}

#[derive(Debug)]
enum StreamRole {
    Client(CallId),
    Server,
}

#[derive(Debug)]
struct StreamState {
    role: StreamRole,
    buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Call(CallId),
    Serve(ServeKey),
    Sweep,
}

/// The DTN-RPC engine of one node. See the crate documentation for how to drive it.
pub struct Rpc {
    config: RpcConfig,
    me: Eid,
    rpc_endpoint: Eid,
    /// Servers' RPC endpoints (`dtn://<server>/rpc`), made once per server instead of formatted
    /// and checked for every call; emptied when it reaches [`MAX_ENDPOINTS_KEPT`].
    rpc_endpoints: BTreeMap<Eid, Eid>,
    data_endpoint: Eid,
    rng: ChaCha20Rng,
    // Boxed: an insert or removal in a B-tree node moves the values after it, and these are
    // hundreds of bytes each (a call and its timeline).
    calls: BTreeMap<CallId, Box<ClientCall>>,
    serving: BTreeMap<ServeKey, Box<Serving>>,
    /// The served calls not yet answered (waiting for files or running): what `admit` counts
    /// and what a new file may unblock, without walking every call served in the last hours.
    unfinished: BTreeSet<ServeKey>,
    /// Replies sent on a stream and not yet confirmed, by stream.
    reply_streams: BTreeSet<(StreamId, ServeKey)>,
    /// Records changed by the current input, and the rows they become.
    writes: Writes,
    by_call: BTreeMap<CallId, BTreeSet<PublicKey>>,
    /// What may leave memory for the store, and how far it has.
    archive: Archive,
    /// Served-call records kept, in memory and in the store, and each caller's share.
    served: served::ServedCount,
    jobs: BTreeMap<JobId, ServeKey>,
    next_job: u64,
    /// This node's identity and what it knows of other nodes' keys.
    trust: keys::Trust,
    /// Any-mode notices from other servers: call id → (done?, forget at).
    notices: BTreeMap<CallId, (bool, DtnTime)>,
    streams: BTreeMap<StreamId, StreamState>,
    /// Data-channel files held.
    files: HeldFiles,
    facts: Facts,
    timers: BTreeSet<(DtnTime, Timer)>,
    events: VecDeque<RpcEvent>,
    /// Messages this node sent to itself, processed after the current input.
    local: VecDeque<Bytes>,
    stats: RpcStats,
    errors: Vec<StateError>,
    /// What this engine computes alike with other engines of the process (file hashes, opened
    /// files, verified envelopes), if the shell shares a memo ([`Rpc::share_memo`]).
    memo: Option<SharedMemo>,
    /// Whether data-channel files are sealed with stand-ins ([`Rpc::stand_in_file_seals`]).
    stand_in_file_seals: bool,
}

/// Data-channel files held: by hash, with their size and expiry, and their total size.
#[derive(Debug, Default)]
struct HeldFiles {
    held: BTreeMap<[u8; 32], (u64, DtnTime)>,
    bytes: u64,
}

fn endpoint(node: &Eid, demux: &str) -> Option<Eid> {
    match node {
        Eid::Dtn(d) => Eid::dtn(d.node_name(), demux).ok(),
        _ => None,
    }
}

/// How many servers' RPC endpoints [`Rpc::rpc_endpoint_of`] keeps.
const MAX_ENDPOINTS_KEPT: usize = 1024;

fn broadcast(demux: &str) -> Eid {
    // `~all` and the demuxes are plain ASCII: this cannot fail.
    Eid::dtn(node::BROADCAST_NODE_NAME, demux).unwrap_or(Eid::Null)
}

fn frame(sealed: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(4 + sealed.len());
    out.extend_from_slice(&(sealed.len() as u32).to_be_bytes());
    out.extend_from_slice(sealed);
    Bytes::from(out)
}

/// The files of a call's results so far.
fn result_files(c: &ClientCall) -> impl Iterator<Item = &FileRef> {
    c.replies.iter().flat_map(|r| match &r.message {
        Message::Result(res) => res.files.as_slice(),
        _ => &[],
    })
}

/// Where a call's or a served call's row sorts in its table.
///
/// New rows sort by the time their record was made, then by id: the calls of a busy minute fill
/// the last pages of the table, so a commit of many new records writes a few pages, not one page
/// each at a random place (ids are random). Rows an earlier version wrote keep their bare id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowOrder {
    Since(DtnTime),
    Bare,
}

/// Room the staging buffer of RPC rows keeps between commits (see [`persist::Writes::write`]).
const STAGED_BYTES_KEPT: usize = 256 * 1024;

impl RowOrder {
    /// The row key for an id under this order.
    fn key(self, id: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + id.len());
        self.write_key(id, &mut out);
        out
    }

    /// Appends the row key for an id under this order to `out`.
    fn write_key(self, id: &[u8], out: &mut Vec<u8>) {
        if let Self::Since(at) = self {
            out.extend_from_slice(&at.to_be_bytes());
        }
        out.extend_from_slice(id);
    }

    /// The order of a row key of an id of `id_len` bytes; `None` if the key is neither form.
    fn of_key(key: &[u8], id_len: usize) -> Option<Self> {
        if key.len() == id_len {
            return Some(Self::Bare);
        }
        let (at, _) = key.split_first_chunk::<8>()?;
        (key.len() == 8 + id_len).then(|| Self::Since(DtnTime::from_be_bytes(*at)))
    }
}

fn serve_key_bytes(key: &ServeKey) -> [u8; 48] {
    let mut out = [0; 48];
    out[..32].copy_from_slice(&key.caller.0);
    out[32..].copy_from_slice(&key.id.0);
    out
}

/// Whether `value` may stand for a parameter declared as `ty`.
fn type_matches(ty: ParamType, value: &Value) -> bool {
    matches!(
        (ty, value),
        (ParamType::Bool, Value::Bool(_))
            | (ParamType::Int, Value::Int(_))
            | (ParamType::Float, Value::Float(_) | Value::Int(_))
            | (ParamType::Text, Value::Text(_))
            | (ParamType::Bytes, Value::Bytes(_) | Value::File(_))
            | (ParamType::File, Value::File(_))
    )
}

fn value_type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Text(_) => "text",
        Value::Bytes(_) => "bytes",
        Value::File(_) => "file",
    }
}

impl Rpc {
    /// An engine for the node `node` with this identity. `seed` feeds the engine's only random
    /// source (call ids, ephemeral keys): the daemon passes fresh OS randomness at every start,
    /// the simulator a seed. Durable state in the node's store (calls still waiting, the dedup
    /// cache, the outbox, learnt keys, files) is loaded: a restarted engine carries on.
    pub fn new(
        config: RpcConfig,
        identity: Identity,
        seed: [u8; 32],
        node: &mut dyn NodePort,
        now: DtnTime,
    ) -> Self {
        let me = node.id().clone();
        let pinned: BTreeMap<Eid, PublicKey> = config.pinned_keys.iter().cloned().collect();
        let mut rpc = Self {
            rpc_endpoint: endpoint(&me, RPC_DEMUX).unwrap_or(Eid::Null),
            rpc_endpoints: BTreeMap::new(),
            data_endpoint: endpoint(&me, DATA_DEMUX).unwrap_or(Eid::Null),
            me,
            config,
            trust: keys::Trust::new(identity, pinned),
            rng: ChaCha20Rng::from_seed(seed),
            calls: BTreeMap::new(),
            serving: BTreeMap::new(),
            unfinished: BTreeSet::new(),
            reply_streams: BTreeSet::new(),
            writes: Writes::default(),
            by_call: BTreeMap::new(),
            archive: Archive::default(),
            served: served::ServedCount::default(),
            jobs: BTreeMap::new(),
            next_job: 1,
            notices: BTreeMap::new(),
            streams: BTreeMap::new(),
            files: HeldFiles::default(),
            facts: Facts::new(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            local: VecDeque::new(),
            stats: RpcStats::default(),
            errors: Vec::new(),
            memo: None,
            stand_in_file_seals: false,
        };
        rpc.load(node, now);
        rpc.write_dirty(node);
        rpc.timers.insert((now, Timer::Sweep));
        rpc
    }

    // ----- accessors -----

    /// This node's public key.
    pub fn public_key(&self) -> PublicKey {
        self.trust.identity.public()
    }

    /// Counters.
    pub fn stats(&self) -> RpcStats {
        self.stats
    }

    /// Bytes of data-channel files held now, and the budget they are held to
    /// ([`RpcConfig::max_file_bytes`]).
    pub fn file_use(&self) -> (u64, u64) {
        (self.files.bytes, self.config.max_file_bytes)
    }

    /// Leaves the call, dedup and outbox records each input changes to [`Rpc::write_records`]
    /// instead of writing them at the input's end, so that a shell can put the input's messages
    /// on the wire (a reply, a call) before the store's work. The shell must then call
    /// `write_records` before every commit of the store: what it commits is what the engine's
    /// state says. Off by default; `host::Host` turns it on, so the daemon and the simulator
    /// both write at its commits.
    pub fn defer_record_writes(&mut self, defer: bool) {
        self.writes.deferred = defer;
    }

    /// Writes the records changed since the last write (each once, however often it changed).
    pub fn write_records(&mut self, node: &mut dyn NodePort) {
        self.write_dirty(node);
    }

    /// Whether records changed since the last [`Rpc::write_records`].
    pub fn has_records_to_write(&self) -> bool {
        !(self.writes.calls.is_empty()
            && self.writes.serving.is_empty()
            && self.writes.outbox.is_empty())
    }

    /// Store errors met while keeping state (drained): the shell logs them.
    pub fn take_errors(&mut self) -> Vec<StateError> {
        std::mem::take(&mut self.errors)
    }

    /// The key known for a node (pinned in the configuration, else learnt from a signed message).
    pub fn key_of(&self, node: &Eid) -> Option<PublicKey> {
        self.trust
            .pinned
            .get(node)
            .copied()
            .or_else(|| self.trust.learnt.get(node).map(|l| l.key))
    }

    /// A call this node made and keeps in memory: still waiting, or among the latest
    /// [`RpcConfig::finished_in_memory`] finished (a finished call with result files stays
    /// too). [`Rpc::call_record`] also finds the calls that left memory.
    pub fn call_view(&self, id: &CallId) -> Option<CallView> {
        self.call_ref(id).map(|c| c.to_view())
    }

    /// A call this node made and did not remove, from memory or, if it left memory, read back
    /// from the store.
    pub fn call_record(&self, node: &dyn NodePort, id: &CallId) -> Option<CallView> {
        if let Some(c) = self.call_ref(id) {
            return Some(c.to_view());
        }
        let c = self.call_from_store(node, id)?;
        let timeline = c.timeline().to_vec();
        Some(CallView {
            call: c.call,
            created: c.created,
            state: c.state,
            acks: c.acks,
            replies: c.replies,
            timeline,
        })
    }

    /// A call this node keeps in memory, borrowed (see [`CallRef`] and [`Rpc::call_view`]).
    pub fn call_ref(&self, id: &CallId) -> Option<CallRef<'_>> {
        self.calls.get(id).map(|c| CallRef {
            call: &c.call,
            created: c.created,
            state: c.state,
            acks: &c.acks,
            replies: &c.replies,
            timeline: c.timeline(),
        })
    }

    /// The state of a call this node made, without copying the rest of it.
    pub fn call_state(&self, id: &CallId) -> Option<CallState> {
        self.calls.get(id).map(|c| c.state)
    }

    /// How many calls this node keeps in memory: (made here, served here), waiting and
    /// finished (see [`RpcConfig::finished_in_memory`]).
    pub fn calls_in_memory(&self) -> (usize, usize) {
        (self.calls.len(), self.serving.len())
    }

    /// How many served-call records this node keeps, in memory and in the store together
    /// (bounded by [`RpcConfig::max_served_calls`]).
    pub fn served_records(&self) -> usize {
        self.served.total()
    }

    /// The calls this node serves or served that it keeps in memory, the latest deadline
    /// first, at most `max` of them.
    pub fn served_views(&self, max: usize) -> Vec<ServedView> {
        let mut views: Vec<ServedView> = self
            .serving
            .iter()
            .map(|(key, s)| ServedView {
                id: key.id,
                caller: s.call.caller.clone(),
                mode: s.call.mode,
                procedure: s.call.procedure.clone(),
                deadline: s.call.deadline,
                state: match s.state {
                    ServeState::WaitingFiles => "waiting_files",
                    ServeState::Running(_) => "running",
                    ServeState::Answered => "answered",
                    ServeState::Skipped => "skipped",
                },
                acked: s.acked,
            })
            .collect();
        // A served call keeps no time it was taken; its deadline is the caller's time of making
        // it plus its span, so the latest deadline first is, for like spans, the latest made.
        views.sort_by(|a, b| b.deadline.cmp(&a.deadline).then(a.id.cmp(&b.id)));
        views.truncate(max);
        views
    }

    /// The ids of the calls this node keeps in memory (see [`Rpc::call_view`]), oldest first.
    pub fn call_ids(&self) -> Vec<CallId> {
        let mut ids: Vec<(DtnTime, CallId)> =
            self.calls.iter().map(|(id, c)| (c.created, *id)).collect();
        ids.sort();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// A data-channel file this node holds (a result's or a parameter's), verified. `None` if it
    /// is not here: not arrived (yet), expired (a result file lives as long as its call is kept),
    /// or dropped to make room for newer files (a finished call's result file: its timeline says
    /// so; see [`RpcConfig::max_file_bytes`]).
    pub fn file(&self, node: &dyn NodePort, hash: &[u8; 32]) -> Option<Bytes> {
        node.tables().rpc_get_body(RpcTable::Files, hash, 8).ok()?
    }

    /// How much of each result file of call `id` that arrives in pieces is here, by hash: what
    /// a shell shows while a large file travels. A file is matched to an arriving bundle by its
    /// server and its length (as sent, or sealed for us); a file that comes whole, has not
    /// started, or has arrived is not listed.
    pub fn files_arriving(&self, node: &dyn NodePort, id: &CallId) -> Vec<([u8; 32], u64)> {
        let Some(c) = self.calls.get(id) else {
            return Vec::new();
        };
        let mut pieces: Vec<node::Arriving<'_>> = node
            .arriving()
            .into_iter()
            .filter(|a| *a.destination == self.data_endpoint)
            .collect();
        let mut out = Vec::new();
        for r in &c.replies {
            let Message::Result(res) = &r.message else {
                continue;
            };
            let server = res.server.node_id();
            for f in res
                .files
                .iter()
                .filter(|f| !self.files.held.contains_key(&f.hash))
            {
                let sealed = f.size.saturating_add(seal::PAIRWISE_OVERHEAD as u64);
                let found = pieces.iter().position(|a| {
                    a.source.node_id() == server && (a.total == f.size || a.total == sealed)
                });
                if let Some(i) = found {
                    out.push((f.hash, pieces.swap_remove(i).received));
                }
            }
        }
        out
    }

    /// Whether this node holds a data-channel file (without reading it; [`Rpc::file`] reads it).
    pub fn holds_file(&self, hash: &[u8; 32]) -> bool {
        self.files.held.contains_key(hash)
    }

    /// Executions running now.
    pub fn running(&self) -> usize {
        self.jobs.len()
    }

    /// Shares with other engines of the process (the simulator's nodes) what they compute alike:
    /// the hashes of files whose buffers they share, so that a file is hashed once however many
    /// nodes it reaches; the content a large file sealed to this engine by one of them was
    /// sealed from, rather than decrypting a copy; and the signature checks of small signed
    /// envelopes, so that a hello is verified once however many nodes hear it. What the engine
    /// finds is the same either way.
    pub fn share_memo(&mut self, memo: SharedMemo) {
        self.memo = Some(memo);
    }

    /// **For simulators only**: seals the data-channel files this engine sends to one node with
    /// a stand-in of the same length and header, the content in the clear
    /// ([`seal::PairKey::seal_stand_in`]), and opens such stand-ins as they come. Every engine
    /// of the network must be told, as no other engine opens a stand-in. Calls and results
    /// (the control channel) are still sealed for real. With a shared memo, a large file's
    /// stand-in is hollow ([`seal::PairKey::hollow_stand_in`]): its body is left zero and the
    /// memo carries the content, found by the envelope's header
    /// ([`SharedMemo::hollow_misses`] counts any not found).
    ///
    /// A simulator's nodes compute in no simulated time, and nothing but a file's length and
    /// its route decides what a simulated network does, so the outcome is the same as with real
    /// envelopes; what is saved is the cipher over every byte of every file for one node (a
    /// server of an `all` call seals its whole result for the caller).
    pub fn stand_in_file_seals(&mut self) {
        self.stand_in_file_seals = true;
    }

    /// The hash a file is named by.
    fn hash_file(&self, content: &Bytes) -> [u8; 32] {
        match &self.memo {
            Some(memo) => memo.hash(content),
            None => hash_of(content),
        }
    }

    /// What the server-wide and per-call predicates are checked against. The shell refreshes it;
    /// `running` is the engine's own.
    pub fn set_facts(&mut self, facts: Facts) {
        self.facts = facts;
    }

    /// Offers one more procedure from now on (an application registered it with the shell);
    /// whether it did. A name already offered is refused: one name, one procedure, so a
    /// caller's call can never reach a procedure it did not mean.
    pub fn offer(&mut self, spec: ProcedureSpec) -> bool {
        if self.offers(&spec.name) {
            return false;
        }
        self.config.procedures.push(spec);
        true
    }

    /// Stops offering a procedure: calls arriving from now on are refused as not offered (a
    /// broadcast call ignored); its calls already admitted keep their jobs, which the shell
    /// ends. Whether it was offered.
    pub fn withdraw(&mut self, name: &str) -> bool {
        let before = self.config.procedures.len();
        self.config.procedures.retain(|p| p.name != name);
        self.config.procedures.len() != before
    }

    /// Whether a procedure of this name is offered.
    pub fn offers(&self, name: &str) -> bool {
        self.config.procedures.iter().any(|p| p.name == name)
    }

    // ----- driving -----

    /// The next event for the shell.
    pub fn poll_event(&mut self) -> Option<RpcEvent> {
        self.events.pop_front()
    }

    /// When [`Rpc::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Offers a node event to the engine; returns whether it was the engine's (deliveries to the
    /// RPC endpoints, the RPC streams). Everything else is for the shell.
    pub fn handle_node_event(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        event: &Event,
    ) -> bool {
        let mine = match event {
            Event::Delivered(d) => {
                let demux = match &d.destination {
                    Eid::Dtn(dtn) => dtn.demux(),
                    _ => "",
                };
                if demux == RPC_DEMUX {
                    let via = if d.class.is_real_time() {
                        Via::Datagram
                    } else {
                        Via::Dtn
                    };
                    self.handle_sealed(now, node, d.payload.clone(), via);
                    true
                } else if demux == DATA_DEMUX {
                    let content = self.open_file(d.payload.clone());
                    self.handle_file(now, node, content, d.expiry);
                    true
                } else {
                    false
                }
            }
            Event::Stream(s) => self.handle_stream(now, node, s),
            // A node this one can reach now: if its key is unknown, introduce ourselves, and
            // its answering hello teaches us its key, so calls to it can be encrypted. The
            // event is the shell's too.
            // Not to another implementation (no RPC engine answers there): a neighbour gets its
            // hello once it showed it speaks Ferry, a node further away once the mesh reaches it
            // (over links both ends advertised, so through Ferry nodes).
            Event::SpeaksFerry { node: n } | Event::Reachable { node: n, hops: 2.. } => {
                if self.key_of(&n.node_id()).is_none() && !node.is_foreign(&n.node_id()) {
                    self.introduce(now, node, &n.node_id());
                }
                false
            }
            _ => false,
        };
        self.finish_input(now, node);
        mine
    }

    /// Fires the timers that are due.
    pub fn handle_timeout(&mut self, now: DtnTime, node: &mut dyn NodePort) {
        while let Some(&(at, timer)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            match timer {
                Timer::Call(id) => {
                    if let Some(c) = self.calls.get_mut(&id) {
                        c.armed = None;
                    }
                    self.client_timer(now, node, id)
                }
                Timer::Serve(key) => {
                    if let Some(s) = self.serving.get_mut(&key)
                        && s.armed == Some(at)
                    {
                        s.armed = None;
                    }
                    self.serve_timer(now, node, key)
                }
                Timer::Sweep => self.sweep(now, node),
            }
        }
        self.finish_input(now, node);
    }

    /// What every public entry point that changes state ends with: messages this node sent
    /// to itself are handled, then the records changed meanwhile are written (once each).
    fn finish_input(&mut self, now: DtnTime, node: &mut dyn NodePort) {
        self.drain_local(now, node);
        if !self.writes.deferred {
            self.write_dirty(node);
        }
    }

    fn drain_local(&mut self, now: DtnTime, node: &mut dyn NodePort) {
        // Bounded: each local message is a reply or notice, which produces no further local
        // message except a call's single reply.
        let mut budget = 1_000;
        while let Some(sealed) = self.local.pop_front() {
            self.handle_sealed(now, node, sealed, Via::Local);
            budget -= 1;
            if budget == 0 {
                break;
            }
        }
    }

    // ----- sealing and sending -----

    fn entropy(&mut self) -> [u8; 32] {
        let mut e = [0u8; 32];
        self.rng.fill_bytes(&mut e);
        e
    }

    /// Seals a message: to one node whose key we know, a pairwise envelope (authenticated
    /// encryption under the key only the two share); to every node, a signed one.
    fn seal(&mut self, message: &Message, to: Option<PublicKey>) -> Result<Bytes, EncodeError> {
        let body = message.encode()?;
        Ok(self.seal_body(&body, to))
    }

    /// Seals an encoded message (see [`Rpc::seal`]).
    fn seal_body(&mut self, body: &[u8], to: Option<PublicKey>) -> Bytes {
        let entropy = self.entropy();
        if let Some(pair) = to.and_then(|peer| self.pair_key(&peer)) {
            return Bytes::from(pair.seal(body, entropy));
        }
        // Only an invalid recipient key fails, and keys here were checked (pinned ones by the
        // configuration, learnt ones by a signature): signed alone rather than not at all.
        let sealed = self
            .trust
            .identity
            .seal(body, None, entropy)
            .unwrap_or_default();
        Bytes::from(sealed)
    }

    /// A data-channel file for one node whose key we know, sealed pairwise so relays cannot
    /// read it (they cannot change it unnoticed either way: it is named by its hash); for every
    /// node, or one whose key we do not know, as it is.
    fn seal_file(&mut self, content: Bytes, to: Option<PublicKey>) -> Bytes {
        let entropy = self.entropy();
        let (stand_in, memo) = (self.stand_in_file_seals, self.memo.clone());
        let Some(pair) = to.and_then(|peer| self.pair_key(&peer)) else {
            return content;
        };
        match (&memo, stand_in) {
            (Some(memo), true) => memo.seal_stand_in(pair, &content, entropy),
            (None, true) => Bytes::from(pair.seal_stand_in(&content, entropy)),
            (memo, false) => {
                let sealed = Bytes::from(pair.seal(&content, entropy));
                if let Some(memo) = memo {
                    memo.sealed(&sealed, pair.peer(), &content);
                }
                sealed
            }
        }
    }

    /// A received data-channel file: opened if it is sealed for us, else as it came (a file is
    /// taken only if a call or result names its hash, so a forged one is never used).
    fn open_file(&mut self, payload: Bytes) -> Bytes {
        if seal::pairwise_sender(&payload).is_none() {
            return payload;
        }
        let me = self.trust.identity.public();
        if let Some(content) = self.memo.as_ref().and_then(|m| m.opened(&payload, &me)) {
            return content;
        }
        if self.stand_in_file_seals
            && let Some(sender) = seal::pairwise_sender(&payload)
            && let Some(pair) = self.pair_key(&sender)
        {
            if let Ok(body) = pair.open_stand_in(&payload) {
                return payload.slice(body);
            }
            if let Ok(header) = pair.open_hollow_stand_in(&payload) {
                // Not remembered: a miss the simulator counts and fails the run for; the bytes
                // as they came are no file anybody named.
                let memo = self.memo.as_ref();
                return memo
                    .and_then(|m| m.hollow_content(header))
                    .unwrap_or(payload);
            }
        }
        match self.open(&payload) {
            Ok(opened) => Bytes::from(opened.body),
            Err(_) => payload,
        }
    }

    /// The key shared with `peer`, computed on first use; `None` if `peer` is no valid key.
    fn pair_key(&mut self, peer: &PublicKey) -> Option<&seal::PairKey> {
        if !self.trust.pair_keys.contains_key(peer) {
            let pair = self.trust.identity.pair_key(peer).ok()?;
            if self.trust.pair_keys.len() >= MAX_PAIR_KEYS {
                self.trust.pair_keys.clear();
            }
            self.trust.pair_keys.insert(*peer, pair);
        }
        self.trust.pair_keys.get(peer)
    }

    /// Opens an envelope: a pairwise one with the key shared with its sender, a signed one by its
    /// signature.
    fn open(&mut self, sealed: &[u8]) -> Result<seal::Opened, seal::OpenError> {
        match seal::pairwise_sender(sealed) {
            Some(sender) => match self.pair_key(&sender) {
                Some(pair) => pair.open(sealed),
                None => Err(seal::OpenError::Malformed("invalid sender key")),
            },
            None => {
                if let Some(opened) = self.trust.verified.get(sealed) {
                    return Ok(opened.clone());
                }
                let shared = self.memo.as_ref();
                let (opened, fresh) = match shared.and_then(|m| m.verified(sealed)) {
                    Some(opened) => (opened, false),
                    None => (self.trust.identity.open(sealed)?, true),
                };
                if !opened.encrypted && sealed.len() <= keys::MAX_REMEMBERED_ENVELOPE {
                    if let Some(memo) = shared.filter(|_| fresh) {
                        memo.note_verified(sealed, &opened);
                    }
                    if self.trust.verified.len() >= keys::MAX_REMEMBERED_ENVELOPES {
                        self.trust.verified.clear();
                    }
                    self.trust
                        .verified
                        .insert(Bytes::copy_from_slice(sealed), opened.clone());
                }
                Ok(opened)
            }
        }
    }

    /// Sends a sealed message to `to` (a node id, or `None` for every node) by `class`.
    fn send_bundle(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        to: Option<&Eid>,
        channel: Channel,
        payload: Bytes,
        deadline: DtnTime,
    ) -> Result<(), SendError> {
        let (demux, class) = match channel {
            Channel::Control(class) => (RPC_DEMUX, class),
            Channel::Data => (DATA_DEMUX, Class::Dtn),
        };
        let destination = match to {
            Some(n) => endpoint(n, demux).ok_or_else(|| SendError::NoRoute(n.clone()))?,
            None => broadcast(demux),
        };
        let mut lifetime = (deadline - now).max(Duration::from_millis(1));
        if class.is_real_time() {
            lifetime = lifetime.min(MAX_DATAGRAM_LIFETIME);
        }
        let source = if demux == DATA_DEMUX {
            self.data_endpoint.clone()
        } else {
            self.rpc_endpoint.clone()
        };
        let out = Outgoing {
            class,
            lifetime_ms: wire::time::millis(lifetime),
            priority: PRIORITY,
            ..Outgoing::new(source, destination, payload)
        };
        node.send(now, out).map(|_| ())
    }

    /// The RPC endpoint of the node `server` (`Eid::Null` if it has none).
    fn rpc_endpoint_of(&mut self, server: &Eid) -> Eid {
        if let Some(e) = self.rpc_endpoints.get(server) {
            return e.clone();
        }
        let e = endpoint(server, RPC_DEMUX).unwrap_or(Eid::Null);
        if self.rpc_endpoints.len() >= MAX_ENDPOINTS_KEPT {
            self.rpc_endpoints.clear();
        }
        self.rpc_endpoints.insert(server.clone(), e.clone());
        e
    }

    fn persist(
        &mut self,
        node: &mut dyn NodePort,
        table: RpcTable,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        let result = match value {
            Some(v) => node.tables_mut().rpc_put(table, key, v),
            None => node.tables_mut().rpc_remove(table, key).map(|_| ()),
        };
        if let Err(source) = result {
            self.errors.push(StateError::Write { table, source });
        }
    }

    /// Sends this node's hello (signed: the signature carries its key) to `to` by datagram,
    /// unless it did so within [`HELLO_INTERVAL`].
    fn introduce(&mut self, now: DtnTime, node: &mut dyn NodePort, to: &Eid) {
        if *to == self.me
            || self
                .trust
                .hellos
                .get(to)
                .is_some_and(|&at| now < at.saturating_add(HELLO_INTERVAL))
        {
            return;
        }
        if self.trust.hellos.len() >= 4096 {
            self.trust
                .hellos
                .retain(|_, at| now < at.saturating_add(HELLO_INTERVAL));
        }
        self.trust.hellos.insert(to.clone(), now);
        if self.trust.hello.is_none() {
            let hello = Message::Hello(wire::rpc::Hello {
                node: self.me.clone(),
            });
            self.trust.hello = self.seal(&hello, None).ok();
        }
        if let Some(sealed) = self.trust.hello.clone() {
            let until = now.saturating_add(MAX_DATAGRAM_LIFETIME);
            let channel = Channel::Control(Class::Datagram);
            // Not reachable after all: the next reachability event tries again.
            let _ = self.send_bundle(now, node, Some(to), channel, sealed, until);
        }
    }

    // ----- receiving -----

    fn handle_sealed(&mut self, now: DtnTime, node: &mut dyn NodePort, sealed: Bytes, via: Via) {
        let opened = match self.open(&sealed) {
            Ok(o) => o,
            Err(_) => {
                self.stats.forged += 1;
                return;
            }
        };
        let message = match Message::decode(&Bytes::from(opened.body)) {
            Ok(m) => m,
            Err(_) => {
                self.stats.forged += 1;
                return;
            }
        };
        let sender = opened.sender;
        match message {
            Message::Call(call) => self.serve_call(now, node, call, sender, via),
            Message::Cancel(cancel) => self.serve_cancel(now, node, cancel, sender),
            Message::Hello(hello) => {
                let from = hello.node.node_id();
                // A hello with another key than the known one is not answered: the key is
                // kept as presented, for the operator to accept if the node was reinstalled.
                if !self.learn_key(now, node, &from, sender, KeySource::Hello) {
                    return;
                }
                // Its sender does not know our key (that is why it says hello): answer in kind.
                self.introduce(now, node, &from);
            }
            Message::Started(n) => self.serve_notice(now, node, n, sender, false),
            Message::Done(n) => self.serve_notice(now, node, n, sender, true),
            Message::Ack(_) | Message::Result(_) | Message::Reject(_) => {
                // Replies are always encrypted to the caller: one that is not was not made by a
                // Ferry server for us.
                if !opened.encrypted && via != Via::Local {
                    self.stats.forged += 1;
                    return;
                }
                self.client_reply(now, node, message, sender, via);
            }
        }
    }

    fn handle_stream(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        event: &StreamEvent,
    ) -> bool {
        match event {
            StreamEvent::Opened { id, local, .. } => {
                let ours = matches!(local, Eid::Dtn(d) if d.demux() == RPC_DEMUX);
                if ours {
                    self.streams.insert(
                        *id,
                        StreamState {
                            role: StreamRole::Server,
                            buf: Vec::new(),
                        },
                    );
                }
                ours
            }
            StreamEvent::Data { id, data } => {
                let Some(state) = self.streams.get_mut(id) else {
                    return false;
                };
                // Frames whole in this piece are slices of it (a call or a reply usually is one
                // piece); only a frame split across pieces is gathered in `buf`.
                let mut input = if state.buf.is_empty() {
                    data.clone()
                } else {
                    state.buf.extend_from_slice(data);
                    Bytes::from(std::mem::take(&mut state.buf))
                };
                // Usually one frame: it needs no list of its own.
                let mut first = None;
                let mut more = Vec::new();
                let mut bad = false;
                while let Some(head) = input.get(..4) {
                    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
                    if len > MAX_FRAME {
                        bad = true;
                        break;
                    }
                    if input.len() < 4 + len {
                        break;
                    }
                    let frame = input.slice(4..4 + len);
                    if first.is_none() {
                        first = Some(frame);
                    } else {
                        more.push(frame);
                    }
                    input = input.slice(4 + len..);
                }
                state.buf = input.to_vec();
                if bad {
                    self.stats.forged += 1;
                    self.streams.remove(id);
                    let _ = node.stream_close(now, *id);
                    return true;
                }
                for f in first.into_iter().chain(more) {
                    self.handle_sealed(now, node, f, Via::Stream(*id));
                }
                true
            }
            StreamEvent::Finished { id } => {
                if !self.streams.contains_key(id) {
                    return false;
                }
                // The peer is done sending; we close our side once we have nothing more to say.
                if matches!(
                    self.streams.get(id).map(|s| &s.role),
                    Some(StreamRole::Client(_))
                ) {
                    let _ = node.stream_close(now, *id);
                }
                true
            }
            StreamEvent::Closed { id } => {
                let Some(state) = self.streams.remove(id) else {
                    return false;
                };
                if let StreamRole::Server = state.role {
                    self.stream_delivered(node, *id);
                }
                true
            }
            StreamEvent::PathLost { id, unacknowledged } => {
                let Some(state) = self.streams.remove(id) else {
                    return false;
                };
                match state.role {
                    StreamRole::Client(call) => self.client_path_lost(now, node, call),
                    StreamRole::Server => {
                        if *unacknowledged == 0 {
                            self.stream_delivered(node, *id);
                        } else {
                            self.server_path_lost(now, node, *id);
                        }
                    }
                }
                true
            }
        }
    }

    fn handle_file(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        content: Bytes,
        expiry: DtnTime,
    ) {
        let hash = self.hash_file(&content);
        if self
            .fit_new_files(now, node, &[(hash, content.len() as u64)])
            .is_err()
        {
            return;
        }
        self.keep_file(node, hash, &content, expiry);
        // Calls waiting for this file may start; results waiting for it may be complete.
        let waiting: Vec<ServeKey> = self
            .unfinished
            .iter()
            .filter(|k| self.serving[k].state == ServeState::WaitingFiles)
            .copied()
            .collect();
        for key in waiting {
            self.try_start(now, node, key);
        }
        let ids: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| c.replies.iter().any(|r| r.missing_files > 0))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.client_files_arrived(now, node, id);
        }
    }

    /// Frees at least `size` bytes of the file budget, if it can, in two steps.
    ///
    /// First, files no call needs, soonest to expire first: the parameters of this node's
    /// finished calls, the files of served calls already answered (the parameters were used, the
    /// result files went out as bundles of their own), files nobody named.
    ///
    /// Then, if that was not enough, the result files of this node's finished calls, the call
    /// that finished longest ago first (a file several finished calls share counts as finished
    /// when the last of them finished), each such call's timeline saying so; but only if that
    /// makes room, so results are not lost for a file that is refused anyway. Never dropped: a
    /// file a call still waiting needs (its parameters, the files of its results so far) or a
    /// served call not yet answered needs (its parameters), even if finished calls share it.
    fn make_room_for_files(&mut self, now: DtnTime, node: &mut dyn NodePort, size: u64) {
        let budget = self.config.max_file_bytes;
        let file_params = |params: &[Value]| -> Vec<[u8; 32]> {
            params
                .iter()
                .filter_map(|v| match v {
                    Value::File(f) => Some(f.hash),
                    _ => None,
                })
                .collect()
        };
        let result_files = |c: &ClientCall| -> Vec<FileRef> { result_files(c).cloned().collect() };
        let mut protected: BTreeSet<[u8; 32]> = BTreeSet::new();
        for key in &self.unfinished {
            protected.extend(file_params(&self.serving[key].call.params));
        }
        // Result files of finished calls → when the last call that has it finished.
        let mut finished: BTreeMap<[u8; 32], DtnTime> = BTreeMap::new();
        for c in self.calls.values() {
            let results = result_files(c).into_iter().map(|f| f.hash);
            match c.finished_at {
                Some(at) if c.state != CallState::Waiting => {
                    for hash in results {
                        let last = finished.entry(hash).or_insert(at);
                        *last = (*last).max(at);
                    }
                }
                _ => {
                    protected.extend(file_params(&c.call.params));
                    protected.extend(results);
                }
            }
        }
        let fits = |rpc: &Self| rpc.files.bytes.saturating_add(size) <= budget;

        let mut spare: Vec<(DtnTime, [u8; 32], u64)> = self
            .files
            .held
            .iter()
            .filter(|(h, _)| !protected.contains(*h) && !finished.contains_key(*h))
            .map(|(h, (size, expiry))| (*expiry, *h, *size))
            .collect();
        spare.sort();
        for (_, hash, _) in spare {
            if fits(self) {
                return;
            }
            self.drop_file(node, &hash);
        }

        let mut old: Vec<(DtnTime, [u8; 32], u64)> = finished
            .into_iter()
            .filter(|(h, _)| !protected.contains(h))
            .filter_map(|(h, at)| self.files.held.get(&h).map(|(size, _)| (at, h, *size)))
            .collect();
        let freeable: u64 = old.iter().map(|(_, _, size)| size).sum();
        if fits(self)
            || self
                .files
                .bytes
                .saturating_sub(freeable)
                .saturating_add(size)
                > budget
        {
            return;
        }
        old.sort();
        let mut dropped = BTreeSet::new();
        for (_, hash, _) in old {
            if fits(self) {
                break;
            }
            self.drop_file(node, &hash);
            dropped.insert(hash);
        }
        let affected: Vec<(CallId, Vec<FileRef>)> = self
            .calls
            .iter()
            .filter(|(_, c)| c.state != CallState::Waiting)
            .map(|(id, c)| {
                let mut seen = BTreeSet::new();
                let mut files = result_files(c);
                files.retain(|f| dropped.contains(&f.hash) && seen.insert(f.hash));
                (*id, files)
            })
            .filter(|(_, files)| !files.is_empty())
            .collect();
        for (id, files) in affected {
            for f in files {
                let short = wire::hex(&f.hash[..4]);
                self.note(
                    now,
                    id,
                    format!(
                        "result file {} ({short}…, {}) dropped to make room for newer files \
                         (file budget {})",
                        f.name,
                        client::plural(f.size, "byte"),
                        client::plural(budget, "byte"),
                    ),
                );
            }
            self.events.push_back(RpcEvent::CallChanged(id));
            self.save_call(node, id);
        }
    }

    /// The result files of the calls this node keeps, each with when the last call that has it
    /// goes (a finished call `retention` after it finished, a waiting one then after its
    /// deadline).
    fn result_files_kept_until(&self, retention: Duration) -> BTreeMap<[u8; 32], DtnTime> {
        let mut until: BTreeMap<[u8; 32], DtnTime> = BTreeMap::new();
        for c in self.calls.values() {
            let end = c
                .finished_at
                .unwrap_or(c.call.deadline)
                .saturating_add(retention);
            for f in result_files(c) {
                let t = until.entry(f.hash).or_insert(end);
                *t = (*t).max(end);
            }
        }
        until
    }

    /// Forgets a data-channel file: gone from the budget and the store.
    fn drop_file(&mut self, node: &mut dyn NodePort, hash: &[u8; 32]) {
        if let Some((size, _)) = self.files.held.remove(hash) {
            self.files.bytes -= size;
        }
        self.persist(node, RpcTable::Files, hash, None);
    }

    /// Makes room in the file budget for those of `files` (hash, size) this node does not hold
    /// yet (see [`Rpc::make_room_for_files`]). `Err((needed, budget))` if they do not fit even
    /// then: files this node makes (a call's parameters, a procedure's results) count against
    /// the budget like the files it receives.
    fn fit_new_files(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        files: &[([u8; 32], u64)],
    ) -> Result<(), (u64, u64)> {
        let mut seen = BTreeSet::new();
        let needed: u64 = files
            .iter()
            .filter(|(h, _)| !self.files.held.contains_key(h) && seen.insert(*h))
            .map(|(_, size)| size)
            .sum();
        let budget = self.config.max_file_bytes;
        if self.files.bytes.saturating_add(needed) > budget {
            self.make_room_for_files(now, node, needed);
        }
        if self.files.bytes.saturating_add(needed) > budget {
            self.stats.files_refused += 1;
            return Err((needed, budget));
        }
        Ok(())
    }

    /// Keeps a file this node made (its hash given), until `expiry` at least.
    fn keep_file(
        &mut self,
        node: &mut dyn NodePort,
        hash: [u8; 32],
        content: &Bytes,
        expiry: DtnTime,
    ) {
        match self.files.held.entry(hash) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert((content.len() as u64, expiry));
                self.files.bytes += content.len() as u64;
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let held = e.get_mut();
                held.1 = held.1.max(expiry);
            }
        }
        // The content goes to the store as it is: a store that can share it (the simulator's)
        // does not have to copy a file of hundreds of megabytes for every node it reaches.
        let head = expiry.as_millis().to_le_bytes();
        if let Err(source) = node
            .tables_mut()
            .rpc_put_parts(RpcTable::Files, &hash, &head, content)
        {
            self.errors.push(StateError::Write {
                table: RpcTable::Files,
                source,
            });
        }
    }

    // ----- timers -----

    fn arm(&mut self, at: DtnTime, timer: Timer) {
        self.timers.insert((at, timer));
    }

    fn sweep(&mut self, now: DtnTime, node: &mut dyn NodePort) {
        let retention = self.config.retention;
        let old_calls: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                c.finished_at
                    .is_some_and(|t| t.saturating_add(retention) <= now)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in old_calls {
            if let Some(c) = self.calls.remove(&id) {
                self.persist(node, RpcTable::Pending, &c.row.key(&id.0), None);
            }
        }
        let old_serving: Vec<ServeKey> = self
            .serving
            .iter()
            .filter(|(_, s)| {
                s.call.deadline.saturating_add(retention) <= now
                    && !matches!(s.state, ServeState::Running(_))
            })
            .map(|(k, _)| *k)
            .collect();
        for key in old_serving {
            self.forget_serving(node, &key);
        }
        let old_files: Vec<[u8; 32]> = self
            .files
            .held
            .iter()
            .filter(|(_, (_, expiry))| *expiry <= now)
            .map(|(h, _)| *h)
            .collect();
        if !old_files.is_empty() {
            // A result file lives as long as the call this node keeps (its bundle's lifetime
            // ended with the call's deadline): `ferry result` an hour later still has the
            // picture. In memory only; after a restart the next sweep extends it again. The file
            // budget may still drop it, and the call's timeline then says so.
            let kept_results = self.result_files_kept_until(retention);
            for hash in old_files {
                match kept_results.get(&hash) {
                    Some(&until) if until > now => {
                        if let Some(entry) = self.files.held.get_mut(&hash) {
                            entry.1 = until;
                        }
                    }
                    _ => self.drop_file(node, &hash),
                }
            }
        }
        self.notices.retain(|_, (_, until)| *until > now);
        // The records that left memory: a long backlog is taken a part at a time.
        let more = self.sweep_stored(now, node);
        let next = if more {
            Duration::from_secs(1)
        } else {
            retention.clamp(Duration::from_secs(1), Duration::from_secs(60))
        };
        self.arm(now + next, Timer::Sweep);
    }

    fn forget_serving(&mut self, node: &mut dyn NodePort, key: &ServeKey) {
        let removed = self.serving.remove(key);
        if let Some(s) = &removed {
            self.unfinished.remove(key);
            if let Some(stream) = s.reply_stream {
                self.reply_streams.remove(&(stream, *key));
            }
        }
        if let Some(set) = self.by_call.get_mut(&key.id) {
            set.remove(&key.caller);
            if set.is_empty() {
                self.by_call.remove(&key.id);
            }
        }
        let Some(s) = removed else {
            return;
        };
        self.served.remove(&key.caller);
        if self.archive.serving.get(&(s.call.deadline, key.id)) == Some(&key.caller) {
            self.archive.serving.remove(&(s.call.deadline, key.id));
        }
        let k = s.row.key(&serve_key_bytes(key));
        self.persist(node, RpcTable::Dedup, &k, None);
        if s.outbox_row {
            self.persist(node, RpcTable::Outbox, &k, None);
        }
    }
}

mod archive;
mod client;
mod keys;
mod persist;
mod served;
mod server;

pub use keys::{KeyError, KeySource, KnownKey, MAX_LEARNT_KEYS, PresentedKey};

pub use server::{ParamError, check_params};

/// A client node `dtn://client/` and its engine, the call `x` to `dtn://server/` made at 1000
/// (by dtn: no path here): what the submodules' unit tests start from.
#[cfg(test)]
fn test_call() -> (node::Node, Rpc, CallId) {
    let mut node = node::Node::new(
        node::NodeConfig::new("dtn://client/".parse().expect("a node id")),
        Box::new(store::MemoryStore::new(1 << 20)),
        DtnTime::from_millis(1_000),
    );
    let mut rpc = Rpc::new(
        RpcConfig::default(),
        Identity::from_secret([1; 32]),
        [3; 32],
        &mut node,
        DtnTime::from_millis(1_000),
    );
    let server: Eid = "dtn://server/".parse().expect("a node id");
    let request = crate::CallRequest::new(crate::Target::Node(server), "x", vec![]);
    let id = rpc
        .call(DtnTime::from_millis(1_000), &mut node, request)
        .expect("a call");
    (node, rpc, id)
}
