//! Ferry RPC messages (DTN-RPC's control channel), carried as bundle payloads between the RPC
//! engines of two nodes, inside a signed (and usually encrypted) envelope that the `seal` crate
//! makes. This module only turns values into bytes and back.
//!
//! Every message is one CBOR array that starts with the format version and a kind:
//!
//! ```text
//! call    = [ 1, 1, id, caller (EID), mode, server (EID or null), procedure (text), [ * value ],
//!             requirements (text), deadline (DTN ms), transport ]
//! ack     = [ 1, 2, id, server (EID) ]
//! result  = [ 1, 3, id, server (EID), value (bytes), [ * file ], run ms ]
//! reject  = [ 1, 4, id, server (EID), code, detail (text), exit status (int or null),
//!             stderr tail (bytes) ]
//! started = [ 1, 5, id, server (EID) ]
//! done    = [ 1, 6, id, server (EID) ]
//! cancel  = [ 1, 7, id, caller (EID) ]
//! id      = bytes .size 16
//! value   = [ 0, bool ] / [ 1, int ] / [ 2, float64 ] / [ 3, text ] / [ 4, bytes ] / [ 5, file ]
//! file    = [ hash (bytes .size 32, BLAKE3), size, name (text) ]
//! ```
//!
//! Replies carry the call's 128-bit id and are matched by it. Files never travel inside a message:
//! a [`FileRef`] names one by content hash and size, and the file itself is a bundle of its own
//! (the data channel). So a message is small: [`Message::encode`] refuses one larger than
//! [`MAX_CONTROL_LEN`], which leaves room for the envelope and the bundle's blocks in one UDP
//! datagram of the real-time transport.

use bytes::Bytes;

use crate::eid::Eid;
use crate::error::DecodeError;
use crate::primary::DtnTime;

/// The RPC message format version this crate writes and reads.
pub const RPC_VERSION: u64 = 1;

/// Largest encoded message (before the envelope): 8 KiB. With the envelope (about 150 bytes) and a
/// bundle's blocks (about 100) it fits one datagram of the real-time transport with room to spare.
pub const MAX_CONTROL_LEN: usize = 8 * 1024;

/// Largest stderr tail a reject carries.
pub const MAX_STDERR_TAIL: usize = 2 * 1024;

/// A call's identity: 128 random bits chosen by the caller. Shown as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub [u8; 16]);

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CallId({self})")
    }
}

impl std::str::FromStr for CallId {
    type Err = ParseCallIdError;

    /// 32 hex digits (either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.len() != 32 || !s.is_ascii() {
            return Err(ParseCallIdError);
        }
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| ParseCallIdError)?;
        }
        Ok(CallId(id))
    }
}

/// A call id that is not 32 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a call id is 32 hex digits")]
pub struct ParseCallIdError;

/// How a call addresses its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// One named server.
    Explicit,
    /// Any server that offers the procedure: the first result wins.
    Any,
    /// Every server that offers the procedure: all results until the deadline.
    All,
}

/// How the call travels (the paper's Fig. 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// Decide as the paper's transparent mode does: explicit and reachable → stream, else dtn;
    /// any/all → datagram broadcast until an ack, then dtn.
    Auto,
    /// Best-effort real-time datagrams (broadcast for any/all), resent until acknowledged.
    Datagram,
    /// A reliable stream over the current mesh path (explicit calls only).
    Stream,
    /// Store-carry-forward bundles.
    Dtn,
}

/// A file on the data channel, named by its content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileRef {
    /// BLAKE3 digest of the content.
    pub hash: [u8; 32],
    /// Length of the content in bytes.
    pub size: u64,
    /// A file name for the receiver's convenience (no directories; may be empty).
    pub name: String,
}

/// A typed parameter or result item.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// true or false.
    Bool(bool),
    /// A signed 64-bit integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(String),
    /// Arbitrary bytes.
    Bytes(Bytes),
    /// A file, carried on the data channel.
    File(FileRef),
}

/// A procedure call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call's id.
    pub id: CallId,
    /// The caller's node id: where replies go.
    pub caller: Eid,
    /// Explicit, any or all.
    pub mode: Mode,
    /// The server, for an explicit call.
    pub server: Option<Eid>,
    /// The procedure's name (matched exactly).
    pub procedure: String,
    /// The parameters, in order.
    pub params: Vec<Value>,
    /// The call's own requirements, an expression such as `battery >= 50 && has(gps)`; empty if
    /// none.
    pub requirements: String,
    /// When the call stops mattering (DTN ms): its bundles' lifetime ends here.
    pub deadline: DtnTime,
    /// The transport the caller chose.
    pub transport: Transport,
}

/// The server received and accepted a call and is running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The call.
    pub id: CallId,
    /// The server.
    pub server: Eid,
}

/// A call's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    /// The call.
    pub id: CallId,
    /// The server that ran it.
    pub server: Eid,
    /// The procedure's output (its stdout), binary-safe.
    pub value: Bytes,
    /// Files the procedure produced, on the data channel.
    pub files: Vec<FileRef>,
    /// How long the procedure ran, ms.
    pub run_ms: u64,
}

/// Why a server did not (or could not) answer a call with a result. The numbers are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RejectCode {
    /// 1: the server does not offer this procedure.
    NotOffered,
    /// 2: the parameters do not match the procedure's declaration (detail says how).
    BadArguments,
    /// 3: a predicate failed (detail names which one and the value seen).
    PredicateFailed,
    /// 4: the caller's key is not on the procedure's allow-list.
    NotAllowed,
    /// 5: the procedure ran and failed (exit status and stderr tail are set).
    ExecutionFailed,
    /// 6: the procedure ran past its time limit and was stopped.
    TimedOut,
    /// 7: the procedure's output exceeded its cap.
    OutputTooLarge,
    /// 8: the call's deadline passed before it could run or finish.
    Expired,
    /// 9: the caller cancelled the call.
    Cancelled,
    /// 10: the server failed for a reason of its own (detail says which), e.g. it restarted
    /// while the procedure ran; the call did not complete and will not be run again.
    Internal,
    /// Any other code, kept so that a newer peer's reply is still understood as a rejection.
    Other(u64),
}

/// A negative reply: the call was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The call.
    pub id: CallId,
    /// The server that refused it.
    pub server: Eid,
    /// Why.
    pub code: RejectCode,
    /// A human-readable detail (which predicate, which argument, …).
    pub detail: String,
    /// The procedure's exit status, when it ran and exited.
    pub exit_status: Option<i64>,
    /// The end of the procedure's stderr (at most [`MAX_STDERR_TAIL`] bytes).
    pub stderr_tail: Bytes,
}

/// A notice about an any-mode call from a server to the others: it started or finished the call,
/// so they skip it, or stop running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The call.
    pub id: CallId,
    /// The server.
    pub server: Eid,
}

/// The caller withdraws a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancel {
    /// The call.
    pub id: CallId,
    /// The caller.
    pub caller: Eid,
}

/// One RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call.
    Call(Call),
    /// An acknowledgement.
    Ack(Ack),
    /// A result.
    Result(CallResult),
    /// A rejection or error.
    Reject(Reject),
    /// Any-mode: a server started the call.
    Started(Notice),
    /// Any-mode: a server finished the call.
    Done(Notice),
    /// The caller cancels the call.
    Cancel(Cancel),
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded message would exceed [`MAX_CONTROL_LEN`]; large data belongs on the data
    /// channel (a file parameter or result).
    #[error(
        "the message is {len} bytes, over the {max}-byte control limit: send large data as a file"
    )]
    TooLarge {
        /// Its encoded length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl Message {
    /// The call this message is about.
    pub fn call_id(&self) -> CallId {
        match self {
            Message::Call(m) => m.id,
            Message::Ack(m) => m.id,
            Message::Result(m) => m.id,
            Message::Reject(m) => m.id,
            Message::Started(m) | Message::Done(m) => m.id,
            Message::Cancel(m) => m.id,
        }
    }

    /// A short name of the kind, for logs and timelines (`call`, `ack`, `result`, …).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Message::Call(_) => "call",
            Message::Ack(_) => "ack",
            Message::Result(_) => "result",
            Message::Reject(_) => "reject",
            Message::Started(_) => "started",
            Message::Done(_) => "done",
            Message::Cancel(_) => "cancel",
        }
    }

    /// Encodes the message (deterministic CBOR); refuses one over [`MAX_CONTROL_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        codec::encode(self)
    }

    /// Decodes a message; `Bytes` fields are slices of `bytes`.
    pub fn decode(bytes: &Bytes) -> Result<Message, DecodeError> {
        codec::decode(bytes)
    }
}

mod codec {
    //! Encoding and decoding of [`Message`](super::Message).
    use super::*;

    pub(super) fn encode(_message: &Message) -> Result<Vec<u8>, EncodeError> {
        unimplemented!("written by the wire-rpc codec work")
    }

    pub(super) fn decode(_bytes: &Bytes) -> Result<Message, DecodeError> {
        unimplemented!("written by the wire-rpc codec work")
    }
}
