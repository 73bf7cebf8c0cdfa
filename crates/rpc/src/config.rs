//! What an engine is configured with: the paper's timers and the procedures this node offers.

use std::collections::BTreeSet;
use std::time::Duration;

use seal::PublicKey;

use crate::ParamType;
use crate::require::Requirement;

/// The timers of one call (the DTN-RPC paper's defaults), all bounded by the call's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// How long a real-time call (datagram or stream) waits for an acknowledgement or a result
    /// before it falls back to dtn: 30 s.
    pub ack_timeout: Duration,
    /// How long a call waits for its result after an acknowledgement before it also goes by dtn:
    /// 90 s.
    pub result_timeout: Duration,
    /// How long a call waits on dtn before it gives up: 90 s more.
    pub dtn_timeout: Duration,
    /// How often a datagram call is resent until acknowledged: 1 s.
    pub resend_interval: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            ack_timeout: Duration::from_secs(30),
            result_timeout: Duration::from_secs(90),
            dtn_timeout: Duration::from_secs(90),
            resend_interval: Duration::from_secs(1),
        }
    }
}

impl Timers {
    /// The deadline a call gets when its caller names none: every phase at its full length.
    pub fn default_span(&self) -> Duration {
        self.ack_timeout
            .saturating_add(self.result_timeout)
            .saturating_add(self.dtn_timeout)
    }
}

/// A procedure this node offers, as far as the engine needs to know it: name, types, who may
/// call it, when, and how many at once. How it runs (executable, argv, caps) is the shell's.
#[derive(Debug, Clone)]
pub struct ProcedureSpec {
    /// The name calls use (matched exactly).
    pub name: String,
    /// The declared parameter types, in order.
    pub params: Vec<ParamType>,
    /// Callers allowed to call it; `None` allows everyone.
    pub allow: Option<BTreeSet<PublicKey>>,
    /// The procedure's own predicate, checked after the server-wide one.
    pub require: Requirement,
    /// At most this many executions at once; more calls are refused (predicate failed).
    pub max_concurrent: u32,
    /// Running it twice does no harm: an execution a crash or restart cut off is run again
    /// (still one result per call) instead of being answered `result_lost`.
    pub idempotent: bool,
}

impl ProcedureSpec {
    /// A procedure open to everyone, without predicates, one execution at a time.
    pub fn new(name: &str, params: Vec<ParamType>) -> Self {
        Self {
            name: name.to_string(),
            params,
            allow: None,
            require: Requirement::always(),
            max_concurrent: 1,
            idempotent: false,
        }
    }
}

/// An engine's configuration.
#[derive(Debug, Clone)]
pub struct RpcConfig {
    /// Timers for calls whose caller sets none.
    pub timers: Timers,
    /// A server that has a result this soon after the call arrived answers with the result alone;
    /// otherwise it acknowledges the call first (real-time transports only).
    pub ack_delay: Duration,
    /// An any-mode server waits a random time up to this before it starts a call, listening for
    /// another server's STARTED notice: a broadcast reaches every server at about the same time,
    /// and without the wait they would all start before hearing of each other.
    pub any_start_jitter: Duration,
    /// How often results that could not be handed to the node are retried, and acknowledged
    /// datagram calls re-asked.
    pub retry_interval: Duration,
    /// How long a server remembers a call after its deadline (duplicates still get the stored
    /// answer meanwhile), and a client a finished call nobody removed.
    pub retention: Duration,
    /// Finished calls kept in memory, of the calls this node made and of those it served
    /// (each): beyond it, the calls that finished first (served: with the earliest deadline)
    /// live only in the store until `retention` is up, read back when asked for. A finished
    /// call with result files, and one a reply of which is still on its way, stays in memory.
    ///
    /// 256 by default. Not more: memory a finished call frees is reused by a call made that many
    /// calls later, so with thousands kept every new call's records landed in memory no cache
    /// had held since, and the leaving call was read from cold memory too (with 4096 a `null`
    /// call cost ≈55 µs of CPU and a node's rate fell through a long run; with 256, ≈49 µs and
    /// no fall). What is older is one SQLite read away (by id), and 256 still lists a screenful.
    pub finished_in_memory: usize,
    /// Served-call records kept at once, in memory and in the store together (each stays until
    /// its call's deadline plus `retention`). When this many are kept, a new call from another
    /// node is dropped unheard: no record, no reply, never run; a later copy is served once
    /// there is room. 1,000,000 by default (a null call's record is a few hundred bytes).
    pub max_served_calls: usize,
    /// Served-call records one caller (by key) may have among them, so that one peer cannot
    /// take the whole table: 250,000 by default, a quarter of it.
    pub max_served_calls_per_caller: usize,
    /// The server-wide predicate, checked before a procedure's own.
    pub accept: Requirement,
    /// The procedures this node offers.
    pub procedures: Vec<ProcedureSpec>,
    /// Keys known in advance for other nodes (node id → key), preferred over learnt ones.
    pub pinned_keys: Vec<(wire::Eid, PublicKey)>,
    /// Data-channel files kept at once (bytes). When a new file does not fit, files no call needs
    /// go first, then result files of finished calls (the call that finished longest ago first);
    /// if it still does not fit, it is refused.
    pub max_file_bytes: u64,
    /// Largest `bytes` parameter or result value sent inside the control message; larger ones
    /// go on the data channel as a file.
    pub inline_limit: usize,
    /// The servers whose any-mode STARTED and DONE notices this node acts on, by key; `None`:
    /// any signer's (the paper's behaviour). A notice makes this node skip or stop a call, so a
    /// node that signs notices for calls it never ran could keep them from being served; where
    /// the servers are known, list them. Notices from others are counted and ignored.
    pub trusted_servers: Option<BTreeSet<PublicKey>>,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            timers: Timers::default(),
            ack_delay: Duration::from_millis(300),
            any_start_jitter: Duration::from_millis(250),
            retry_interval: Duration::from_secs(5),
            retention: Duration::from_secs(3_600),
            finished_in_memory: 256,
            max_served_calls: 1_000_000,
            max_served_calls_per_caller: 250_000,
            accept: Requirement::always(),
            procedures: Vec::new(),
            pinned_keys: Vec::new(),
            max_file_bytes: 1 << 30,
            inline_limit: 4 * 1024,
            trusted_servers: None,
        }
    }
}
