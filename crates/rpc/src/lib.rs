//! Ferry's DTN-RPC engine, sans-IO: remote procedure calls that survive disconnection.
//!
//! ```text
//!   shell (daemon, simulator)
//!     │ call / cancel / finished(job, outcome)          poll_event: Execute, Abort,
//!     │ handle_node_event(node event) / handle_timeout   CallChanged, CallFinished
//!     ▼                                                             ▲
//!   Rpc ── send / stream_open / stream_send ──►  Node  ── store ──► RPC tables
//! ```
//!
//! One [`Rpc`] sits beside each [`node::Node`]. As a **client** it makes calls in the three
//! addressing modes of the DTN-RPC paper (explicit, any, all) and moves them between transports as
//! the paper's Fig. 2 does: an explicit call to a reachable server goes on a stream, otherwise by
//! dtn; any/all calls are broadcast as datagrams every second until an acknowledgement, and by dtn
//! when the acknowledgement (30 s) or the result after it (90 s) does not come. A call whose stream
//! path breaks keeps waiting and takes its result from dtn. Calls waiting, their replies and a
//! timeline of what happened are kept in the store, so a restarted client still receives late
//! results. As a **server** it checks each call (offered, caller allowed, parameters typed,
//! the server-wide then the procedure's then the call's own predicates) and hands it to the shell
//! to run; it runs each (caller, call id) at most once, however many copies arrive by however many
//! transports, and across restarts: the dedup table keeps the answer and duplicates get it. The
//! reply goes back along the path the call came by if that path still exists when the reply is
//! ready, else by dtn; what cannot be handed to the node waits in the outbox until the deadline.
//! Any-mode servers tell each other when they start and finish, so the others skip or stop.
//!
//! Every message is sealed ([`seal`]): signed by its sender, replies encrypted to the caller, and
//! calls encrypted to their server when its key is known (pinned or learnt from a signed message).
//! Forged, tampered or misdirected messages are dropped and counted ([`RpcStats::forged`]), and
//! so is a message that names a node whose key is known but is signed by another key
//! ([`RpcStats::key_mismatches`]; the operator sees the key it presented in [`Rpc::keys`] and
//! accepts a reinstalled node's new key with [`Rpc::accept_key`]).
//! Files (file parameters, file results, outputs above the inline limit) go on the data channel:
//! bundles of their own, named by BLAKE3 hash and verified on arrival.
//!
//! **What it never does.** It reads no clock, socket, file or random source of its own (time is
//! `now`, randomness a seed, durable state the node's store), and it never runs a procedure: the
//! shell does, and reports the [`Outcome`]. It makes no routing decision; it only asks the node
//! whether a server is reachable now.

#![forbid(unsafe_code)]

mod config;
mod engine;
mod port;
mod record;
pub mod require;
mod shared_memo;

pub use config::{ProcedureSpec, RpcConfig, Timers};
pub use engine::{
    CallError, CallRef, CallRequest, CallState, CallView, DATA_DEMUX, Job, JobId, KeyError,
    KeySource, KnownKey, MAX_LEARNT_KEYS, Outcome, Param, ParamError, PresentedKey, PriorRun,
    RPC_DEMUX, Reply, Rpc, RpcEvent, RpcStats, ServedView, StateError, Target, TimelineRef, Via,
    check_params,
};
pub use port::NodePort;
pub use record::RecordError;
pub use shared_memo::SharedMemo;

use std::fmt;
use std::str::FromStr;

/// The declared type of a procedure's parameter (in the node's configuration), checked against
/// a call's [`wire::rpc::Value`]s before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ParamType {
    /// `bool`: true or false.
    Bool,
    /// `int`: a signed 64-bit integer.
    Int,
    /// `float`: a number (an int is accepted too).
    Float,
    /// `text`: UTF-8 text without NUL.
    Text,
    /// `bytes`: arbitrary bytes (the procedure receives them as a file path).
    Bytes,
    /// `file`: a file on the data channel (the procedure receives its path).
    File,
}

impl ParamType {
    /// Every type, in a fixed order.
    pub const ALL: [ParamType; 6] = [
        ParamType::Bool,
        ParamType::Int,
        ParamType::Float,
        ParamType::Text,
        ParamType::Bytes,
        ParamType::File,
    ];

    /// The name used in configuration files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Text => "text",
            ParamType::Bytes => "bytes",
            ParamType::File => "file",
        }
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type name that is not one of `bool`, `int`, `float`, `text`, `bytes`, `file`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown parameter type `{0}` (expected bool, int, float, text, bytes or file)")]
pub struct UnknownParamType(pub String);

impl FromStr for ParamType {
    type Err = UnknownParamType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ParamType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownParamType(s.to_string()))
    }
}
