//! Ferry RPC messages (DTN-RPC's control channel), carried as bundle payloads between the RPC
//! engines of two nodes, inside a signed (and usually encrypted) envelope that the `seal` crate
//! makes. This module only turns values into bytes and back.
//!
//! Every message is one CBOR array that starts with the format version and a kind (call, ack,
//! result, reject, started, done, cancel, hello). The layout of each, the encoding
//! (deterministic CBOR, RFC 8949 §4.2.1) and everything decoding refuses are in
//! `docs/protocol.md`, section 4; `crates/rpc/tests/protocol.rs` checks the document's vectors
//! against this module. Decoding is strict, so the encoding is canonical: bytes that decode
//! encode again to exactly the same bytes. It never panics. The codec checks syntax only:
//! whether a mode and a server agree, or a file name is safe to use, is the RPC engine's to judge.
//! `Bytes` fields (a bytes value, a result's value, a reject's stderr tail) are slices of the
//! received buffer, not copies.
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

/// Largest encoded message (before the envelope): 8 KiB. With the envelope (178 bytes when
/// encrypted) and a bundle's blocks (about 100) it fits one datagram of the real-time transport
/// with room to spare.
pub const MAX_CONTROL_LEN: usize = 8 * 1024;

/// Largest stderr tail a reject carries.
pub const MAX_STDERR_TAIL: usize = 2 * 1024;

/// The fewest bytes a [`FileRef`] takes in a message: its array head, the 32-byte hash with its
/// head, a size below 24 and an empty name.
pub const MIN_FILE_REF_LEN: usize = 1 + 2 + 32 + 1 + 1;

/// More files than this can never be named in one RESULT (it would exceed [`MAX_CONTROL_LEN`]
/// whatever their names and sizes): a server need not read further to know the answer is
/// `OutputTooLarge`.
pub const MAX_RESULT_FILES: usize = MAX_CONTROL_LEN / MIN_FILE_REF_LEN;

/// A call's identity: 128 random bits chosen by the caller. Shown as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId(pub [u8; 16]);

/// The order of the bytes (as the derived one), compared as one big-endian 128-bit number: call
/// ids key the engine's maps, and a `memcmp` call per comparison cost more than the rest.
impl Ord for CallId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        u128::from_be_bytes(self.0).cmp(&u128::from_be_bytes(other.0))
    }
}

impl PartialOrd for CallId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::fmt_hex(f, &self.0)
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
        // Hex digits only: `from_str_radix` alone would also take a sign ("+0" is 0), and a
        // non-ASCII string could not be sliced in pairs.
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
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
    /// 10: the server failed for a reason of its own (detail says which); the call did not
    /// complete and will not be run again.
    Internal,
    /// 11: the procedure ran (to its end, or until the server's crash or restart stopped it),
    /// but its result was lost when the server crashed; it will not be run again, so whatever
    /// it does may have been done (detail says what the server knows of the run).
    ResultLost,
    /// 12: the server was stopped while the procedure ran; the procedure was killed and will
    /// not be run again (a call that reaches the server again is answered from its record).
    ServerStopped,
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

/// A node introduces itself: the envelope's signature carries its public key, so that callers
/// can encrypt calls to it before it ever answers one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The node.
    pub node: Eid,
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
    /// A node introduces itself (no call).
    Hello(Hello),
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
    /// A reject's stderr tail is longer than [`MAX_STDERR_TAIL`]; keep only its end.
    #[error("the stderr tail is {len} bytes, over the {max}-byte limit: keep only its end")]
    StderrTailTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl Mode {
    /// Every mode, in the order of their numbers.
    pub const ALL: [Mode; 3] = [Mode::Explicit, Mode::Any, Mode::All];

    /// The number on the wire (stable).
    pub fn number(self) -> u64 {
        match self {
            Mode::Explicit => 0,
            Mode::Any => 1,
            Mode::All => 2,
        }
    }

    /// The mode a number stands for, if any.
    pub fn from_number(n: u64) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.number() == n)
    }

    /// The name used on the command line and in logs (stable): `explicit`, `any`, `all`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Explicit => "explicit",
            Mode::Any => "any",
            Mode::All => "all",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of `explicit`, `any`, `all`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown call mode `{0}` (expected explicit, any or all)")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    /// The exact name, as [`Mode::name`] gives it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

impl Transport {
    /// Every transport, in the order of their numbers.
    pub const ALL: [Transport; 4] = [
        Transport::Auto,
        Transport::Datagram,
        Transport::Stream,
        Transport::Dtn,
    ];

    /// The number on the wire (stable).
    pub fn number(self) -> u64 {
        match self {
            Transport::Auto => 0,
            Transport::Datagram => 1,
            Transport::Stream => 2,
            Transport::Dtn => 3,
        }
    }

    /// The transport a number stands for, if any.
    pub fn from_number(n: u64) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.number() == n)
    }

    /// The name used on the command line and in logs (stable): `auto`, `datagram`, `stream`,
    /// `dtn`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Datagram => "datagram",
            Transport::Stream => "stream",
            Transport::Dtn => "dtn",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A transport name that is not one of `auto`, `datagram`, `stream`, `dtn`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown transport `{0}` (expected auto, datagram, stream or dtn)")]
pub struct UnknownTransport(pub String);

impl std::str::FromStr for Transport {
    type Err = UnknownTransport;

    /// The exact name, as [`Transport::name`] gives it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownTransport(s.to_string()))
    }
}

impl RejectCode {
    /// The codes this crate names, in the order of their numbers (1 to 12).
    pub const KNOWN: [RejectCode; 12] = [
        RejectCode::NotOffered,
        RejectCode::BadArguments,
        RejectCode::PredicateFailed,
        RejectCode::NotAllowed,
        RejectCode::ExecutionFailed,
        RejectCode::TimedOut,
        RejectCode::OutputTooLarge,
        RejectCode::Expired,
        RejectCode::Cancelled,
        RejectCode::Internal,
        RejectCode::ResultLost,
        RejectCode::ServerStopped,
    ];

    /// The number on the wire (stable).
    pub fn number(self) -> u64 {
        match self {
            RejectCode::NotOffered => 1,
            RejectCode::BadArguments => 2,
            RejectCode::PredicateFailed => 3,
            RejectCode::NotAllowed => 4,
            RejectCode::ExecutionFailed => 5,
            RejectCode::TimedOut => 6,
            RejectCode::OutputTooLarge => 7,
            RejectCode::Expired => 8,
            RejectCode::Cancelled => 9,
            RejectCode::Internal => 10,
            RejectCode::ResultLost => 11,
            RejectCode::ServerStopped => 12,
            RejectCode::Other(n) => n,
        }
    }

    /// The code a number stands for: a named one for 1 to 12, else [`RejectCode::Other`]. So
    /// `Other(3)` is sent as 3 and comes back as [`RejectCode::PredicateFailed`]:
    /// `from_number(code.number())` is the canonical form of a code.
    pub fn from_number(n: u64) -> RejectCode {
        RejectCode::KNOWN
            .into_iter()
            .find(|c| c.number() == n)
            .unwrap_or(RejectCode::Other(n))
    }

    /// A stable snake_case name for logs and APIs (`not_offered`, `bad_arguments`, …; `other`
    /// for every code this crate does not name).
    pub fn name(self) -> &'static str {
        match self {
            RejectCode::NotOffered => "not_offered",
            RejectCode::BadArguments => "bad_arguments",
            RejectCode::PredicateFailed => "predicate_failed",
            RejectCode::NotAllowed => "not_allowed",
            RejectCode::ExecutionFailed => "execution_failed",
            RejectCode::TimedOut => "timed_out",
            RejectCode::OutputTooLarge => "output_too_large",
            RejectCode::Expired => "expired",
            RejectCode::Cancelled => "cancelled",
            RejectCode::Internal => "internal",
            RejectCode::ResultLost => "result_lost",
            RejectCode::ServerStopped => "server_stopped",
            RejectCode::Other(_) => "other",
        }
    }
}

impl std::fmt::Display for RejectCode {
    /// The name; an unnamed code also shows its number (`other(42)`), which is all it says.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RejectCode::Other(n) => write!(f, "other({n})"),
            known => f.write_str(known.name()),
        }
    }
}

impl Message {
    /// The call this message is about (a hello is about none).
    pub fn call_id(&self) -> Option<CallId> {
        match self {
            Message::Call(m) => Some(m.id),
            Message::Ack(m) => Some(m.id),
            Message::Result(m) => Some(m.id),
            Message::Reject(m) => Some(m.id),
            Message::Started(m) | Message::Done(m) => Some(m.id),
            Message::Cancel(m) => Some(m.id),
            Message::Hello(_) => None,
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
            Message::Hello(_) => "hello",
        }
    }

    /// Encodes the message (deterministic CBOR); refuses one over [`MAX_CONTROL_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        codec::encode(self)
    }

    /// How many bytes [`Message::encode`] would write, without writing them (it refuses a
    /// message whose length is over [`MAX_CONTROL_LEN`]).
    pub fn encoded_len(&self) -> usize {
        codec::message_len(self)
    }

    /// Encodes `Message::Call(call)` from a borrowed call (the engine writes its records with
    /// it, without copying each call first).
    pub fn encode_call(call: &Call) -> Result<Vec<u8>, EncodeError> {
        codec::encode_call(call)
    }

    /// Decodes a message; `Bytes` fields are slices of `bytes`.
    pub fn decode(bytes: &Bytes) -> Result<Message, DecodeError> {
        codec::decode(bytes)
    }
}

mod codec {
    //! Encoding and decoding of [`Message`](super::Message).
    //!
    //! `encode` first computes the encoded length (`message_len`), so that a message over the
    //! limit is refused before anything is written or copied, then writes into a buffer of exactly
    //! that size.

    use bytes::BufMut;

    use super::*;
    use crate::cbor::{self, Arg, Reader};
    use crate::error::DecodeErrorKind as K;

    const KIND_CALL: u64 = 1;
    const KIND_ACK: u64 = 2;
    const KIND_RESULT: u64 = 3;
    const KIND_REJECT: u64 = 4;
    const KIND_STARTED: u64 = 5;
    const KIND_DONE: u64 = 6;
    const KIND_CANCEL: u64 = 7;
    const KIND_HELLO: u64 = 8;

    const TAG_BOOL: u64 = 0;
    const TAG_INT: u64 = 1;
    const TAG_FLOAT: u64 = 2;
    const TAG_TEXT: u64 = 3;
    const TAG_BYTES: u64 = 4;
    const TAG_FILE: u64 = 5;

    /// CBOR `null` (major type 7, simple value 22).
    const NULL: u8 = 0xf6;
    /// The head of a CBOR double-precision float (major type 7, additional information 27).
    const FLOAT64: u8 = 0xfb;

    /// Fields of a CALL after the version and the kind.
    const CALL_FIELDS: u64 = 9;

    const ID_LEN: usize = 16;
    const HASH_LEN: usize = 32;

    // ---- encoding ----

    /// What `encode(&Message::Call(call.clone()))` gives, without the copy.
    pub(super) fn encode_call(call: &Call) -> Result<Vec<u8>, EncodeError> {
        let len = 3 + call_len(call);
        if len > MAX_CONTROL_LEN {
            return Err(EncodeError::TooLarge {
                len,
                max: MAX_CONTROL_LEN,
            });
        }
        let mut out = Vec::with_capacity(len);
        cbor::put_array(&mut out, 2 + CALL_FIELDS);
        cbor::put_uint(&mut out, RPC_VERSION);
        cbor::put_uint(&mut out, KIND_CALL);
        put_call(&mut out, call);
        debug_assert_eq!(out.len(), len, "call_len disagrees with put_call");
        Ok(out)
    }

    fn put_call(out: &mut Vec<u8>, m: &Call) {
        put_id(out, m.id);
        m.caller.encode(out);
        cbor::put_uint(out, m.mode.number());
        match &m.server {
            Some(server) => server.encode(out),
            None => out.put_u8(NULL),
        }
        cbor::put_text(out, &m.procedure);
        cbor::put_array(out, m.params.len() as u64);
        for value in &m.params {
            put_value(out, value);
        }
        cbor::put_text(out, &m.requirements);
        cbor::put_uint(out, m.deadline.as_millis());
        cbor::put_uint(out, m.transport.number());
    }

    fn call_len(m: &Call) -> usize {
        id_len()
            + m.caller.encoded_len()
            + uint_len(m.mode.number())
            + m.server.as_ref().map_or(1, Eid::encoded_len)
            + string_len(m.procedure.len())
            + uint_len(m.params.len() as u64)
            + m.params.iter().map(value_len).sum::<usize>()
            + string_len(m.requirements.len())
            + uint_len(m.deadline.as_millis())
            + uint_len(m.transport.number())
    }

    pub(super) fn encode(message: &Message) -> Result<Vec<u8>, EncodeError> {
        if let Message::Reject(m) = message
            && m.stderr_tail.len() > MAX_STDERR_TAIL
        {
            return Err(EncodeError::StderrTailTooLarge {
                len: m.stderr_tail.len(),
                max: MAX_STDERR_TAIL,
            });
        }
        let len = message_len(message);
        if len > MAX_CONTROL_LEN {
            return Err(EncodeError::TooLarge {
                len,
                max: MAX_CONTROL_LEN,
            });
        }
        let mut out = Vec::with_capacity(len);
        put_message(&mut out, message);
        debug_assert_eq!(out.len(), len, "message_len disagrees with put_message");
        Ok(out)
    }

    fn put_message(out: &mut Vec<u8>, message: &Message) {
        let (kind, fields) = kind_and_fields(message);
        cbor::put_array(out, 2 + fields);
        cbor::put_uint(out, RPC_VERSION);
        cbor::put_uint(out, kind);
        match message {
            Message::Call(m) => put_call(out, m),
            Message::Ack(m) => {
                put_id(out, m.id);
                m.server.encode(out);
            }
            Message::Result(m) => {
                put_id(out, m.id);
                m.server.encode(out);
                cbor::put_bytes(out, &m.value);
                cbor::put_array(out, m.files.len() as u64);
                for file in &m.files {
                    put_file(out, file);
                }
                cbor::put_uint(out, m.run_ms);
            }
            Message::Reject(m) => {
                put_id(out, m.id);
                m.server.encode(out);
                cbor::put_uint(out, m.code.number());
                cbor::put_text(out, &m.detail);
                match m.exit_status {
                    Some(status) => put_int(out, status),
                    None => out.put_u8(NULL),
                }
                cbor::put_bytes(out, &m.stderr_tail);
            }
            Message::Started(m) | Message::Done(m) => {
                put_id(out, m.id);
                m.server.encode(out);
            }
            Message::Cancel(m) => {
                put_id(out, m.id);
                m.caller.encode(out);
            }
            Message::Hello(m) => m.node.encode(out),
        }
    }

    /// The kind number and how many fields follow the version and the kind.
    fn kind_and_fields(message: &Message) -> (u64, u64) {
        match message {
            Message::Call(_) => (KIND_CALL, CALL_FIELDS),
            Message::Ack(_) => (KIND_ACK, 2),
            Message::Result(_) => (KIND_RESULT, 5),
            Message::Reject(_) => (KIND_REJECT, 6),
            Message::Started(_) => (KIND_STARTED, 2),
            Message::Done(_) => (KIND_DONE, 2),
            Message::Cancel(_) => (KIND_CANCEL, 2),
            Message::Hello(_) => (KIND_HELLO, 1),
        }
    }

    fn put_id(out: &mut Vec<u8>, id: CallId) {
        cbor::put_bytes(out, &id.0);
    }

    /// A signed integer: major type 0 for n ≥ 0, major type 1 (which codes -1 - m) for n < 0.
    fn put_int(out: &mut Vec<u8>, n: i64) {
        match u64::try_from(n) {
            Ok(n) => cbor::put_uint(out, n),
            // For negative n, -1 - n is !n in two's complement, and lies in 0..=i64::MAX.
            Err(_) => cbor::put_head(out, cbor::NINT, !n as u64),
        }
    }

    fn put_value(out: &mut Vec<u8>, value: &Value) {
        cbor::put_array(out, 2);
        match value {
            Value::Bool(b) => {
                cbor::put_uint(out, TAG_BOOL);
                cbor::put_bool(out, *b);
            }
            Value::Int(n) => {
                cbor::put_uint(out, TAG_INT);
                put_int(out, *n);
            }
            Value::Float(x) => {
                cbor::put_uint(out, TAG_FLOAT);
                // Always the 8-byte form, never a shorter one that would hold the same value:
                // one encoding per value, and the bits (NaN payloads too) survive unchanged.
                out.put_u8(FLOAT64);
                out.put_u64(x.to_bits());
            }
            Value::Text(s) => {
                cbor::put_uint(out, TAG_TEXT);
                cbor::put_text(out, s);
            }
            Value::Bytes(b) => {
                cbor::put_uint(out, TAG_BYTES);
                cbor::put_bytes(out, b);
            }
            Value::File(f) => {
                cbor::put_uint(out, TAG_FILE);
                put_file(out, f);
            }
        }
    }

    fn put_file(out: &mut Vec<u8>, file: &FileRef) {
        cbor::put_array(out, 3);
        cbor::put_bytes(out, &file.hash);
        cbor::put_uint(out, file.size);
        cbor::put_text(out, &file.name);
    }

    // ---- encoded lengths (mirror the put_* functions above) ----

    fn uint_len(n: u64) -> usize {
        cbor::head_len(n)
    }

    fn string_len(len: usize) -> usize {
        cbor::head_len(len as u64) + len
    }

    fn int_len(n: i64) -> usize {
        match u64::try_from(n) {
            Ok(n) => cbor::head_len(n),
            Err(_) => cbor::head_len(!n as u64),
        }
    }

    fn id_len() -> usize {
        string_len(ID_LEN)
    }

    fn file_len(file: &FileRef) -> usize {
        1 + string_len(HASH_LEN) + uint_len(file.size) + string_len(file.name.len())
    }

    fn value_len(value: &Value) -> usize {
        // The array head and the tag (each one byte: the tags are below 24).
        2 + match value {
            Value::Bool(_) => 1,
            Value::Int(n) => int_len(*n),
            Value::Float(_) => 9,
            Value::Text(s) => string_len(s.len()),
            Value::Bytes(b) => string_len(b.len()),
            Value::File(f) => file_len(f),
        }
    }

    pub(super) fn message_len(message: &Message) -> usize {
        // The array head (fewer than 24 items), the version and the kind: one byte each.
        3 + match message {
            Message::Call(m) => call_len(m),
            Message::Ack(m) => id_len() + m.server.encoded_len(),
            Message::Result(m) => {
                id_len()
                    + m.server.encoded_len()
                    + string_len(m.value.len())
                    + uint_len(m.files.len() as u64)
                    + m.files.iter().map(file_len).sum::<usize>()
                    + uint_len(m.run_ms)
            }
            Message::Reject(m) => {
                id_len()
                    + m.server.encoded_len()
                    + uint_len(m.code.number())
                    + string_len(m.detail.len())
                    + m.exit_status.map_or(1, int_len)
                    + string_len(m.stderr_tail.len())
            }
            Message::Started(m) | Message::Done(m) => id_len() + m.server.encoded_len(),
            Message::Cancel(m) => id_len() + m.caller.encoded_len(),
            Message::Hello(m) => m.node.encoded_len(),
        }
    }

    // ---- decoding ----

    pub(super) fn decode(buf: &Bytes) -> Result<Message, DecodeError> {
        const WHAT: &str = "RPC message";
        // Nothing longer is ever sent, so nothing longer is read: every message that decodes
        // can be encoded again.
        if buf.len() > MAX_CONTROL_LEN {
            return Err(DecodeError::new(
                MAX_CONTROL_LEN,
                K::InvalidControl("RPC message over the 8 KiB limit"),
            ));
        }
        let mut r = Reader::new(buf);
        let len = array_len(&mut r)?;
        if len < 2 {
            return Err(DecodeError::new(0, K::BadArrayLength { what: WHAT, len }));
        }
        let version_at = r.position();
        if r.uint()? != RPC_VERSION {
            return Err(DecodeError::new(
                version_at,
                K::InvalidControl("unsupported RPC message version"),
            ));
        }
        let kind_at = r.position();
        let kind = r.uint()?;
        let (what, fields) = match kind {
            KIND_CALL => ("call", 9),
            KIND_ACK => ("ack", 2),
            KIND_RESULT => ("result", 5),
            KIND_REJECT => ("reject", 6),
            KIND_STARTED => ("started", 2),
            KIND_DONE => ("done", 2),
            KIND_CANCEL => ("cancel", 2),
            KIND_HELLO => ("hello", 1),
            _ => {
                return Err(DecodeError::new(
                    kind_at,
                    K::InvalidControl("unknown RPC message kind"),
                ));
            }
        };
        // The length is checked before any field is read, so a field never runs into what
        // follows the array.
        if len != 2 + fields {
            return Err(DecodeError::new(0, K::BadArrayLength { what, len }));
        }
        let message = match kind {
            KIND_CALL => Message::Call(decode_call(&mut r, buf)?),
            KIND_ACK => {
                let (id, server) = id_and_eid(&mut r, buf)?;
                Message::Ack(Ack { id, server })
            }
            KIND_RESULT => Message::Result(decode_result(&mut r, buf)?),
            KIND_REJECT => Message::Reject(decode_reject(&mut r, buf)?),
            KIND_STARTED | KIND_DONE => {
                let (id, server) = id_and_eid(&mut r, buf)?;
                let notice = Notice { id, server };
                if kind == KIND_STARTED {
                    Message::Started(notice)
                } else {
                    Message::Done(notice)
                }
            }
            KIND_CANCEL => {
                let (id, caller) = id_and_eid(&mut r, buf)?;
                Message::Cancel(Cancel { id, caller })
            }
            _ => Message::Hello(Hello {
                node: eid(&mut r, buf)?,
            }),
        };
        if !r.is_empty() {
            return Err(r.err(K::TrailingBytes));
        }
        Ok(message)
    }

    fn decode_call(r: &mut Reader<'_>, buf: &Bytes) -> Result<Call, DecodeError> {
        let id = call_id(r, buf)?;
        let caller = eid(r, buf)?;
        let mode_at = r.position();
        let mode = Mode::from_number(r.uint()?)
            .ok_or_else(|| DecodeError::new(mode_at, K::InvalidControl("unknown call mode")))?;
        let server = if r.peek()? == NULL {
            r.head()?;
            None
        } else {
            Some(eid(r, buf)?)
        };
        let procedure = text(r, buf)?;
        let count = array_len(r)?;
        // No capacity from the declared count: it is only bounded by the input's length.
        let mut params = Vec::new();
        for _ in 0..count {
            params.push(value(r, buf)?);
        }
        let requirements = text(r, buf)?;
        let deadline = r.uint()?;
        let transport_at = r.position();
        let transport = Transport::from_number(r.uint()?).ok_or_else(|| {
            DecodeError::new(transport_at, K::InvalidControl("unknown transport"))
        })?;
        Ok(Call {
            id,
            caller,
            mode,
            server,
            procedure,
            params,
            requirements,
            deadline: DtnTime::from_millis(deadline),
            transport,
        })
    }

    fn decode_result(r: &mut Reader<'_>, buf: &Bytes) -> Result<CallResult, DecodeError> {
        let (id, server) = id_and_eid(r, buf)?;
        let value = buf.slice(r.bytes()?);
        let count = array_len(r)?;
        let mut files = Vec::new();
        for _ in 0..count {
            files.push(file(r, buf)?);
        }
        let run_ms = r.uint()?;
        Ok(CallResult {
            id,
            server,
            value,
            files,
            run_ms,
        })
    }

    fn decode_reject(r: &mut Reader<'_>, buf: &Bytes) -> Result<Reject, DecodeError> {
        let (id, server) = id_and_eid(r, buf)?;
        let code = RejectCode::from_number(r.uint()?);
        let detail = text(r, buf)?;
        let exit_status = if r.peek()? == NULL {
            r.head()?;
            None
        } else {
            Some(int(r)?)
        };
        let tail_at = r.position();
        let range = r.bytes()?;
        if range.len() > MAX_STDERR_TAIL {
            return Err(DecodeError::new(
                tail_at,
                K::InvalidControl("stderr tail over 2 KiB"),
            ));
        }
        Ok(Reject {
            id,
            server,
            code,
            detail,
            exit_status,
            stderr_tail: buf.slice(range),
        })
    }

    /// Reads the head of a definite-length array and returns its number of items.
    fn array_len(r: &mut Reader<'_>) -> Result<u64, DecodeError> {
        // Deterministic CBOR has one encoding per message; an indefinite-length array would be a
        // second one.
        if r.peek()? == cbor::ARRAY_INDEFINITE {
            return Err(r.err(K::InvalidCbor(
                "indefinite-length array where a definite one is required",
            )));
        }
        let array = r.array()?;
        // Definite: this is the declared count (already checked against the remaining input);
        // nothing is walked.
        r.count_items(array)
    }

    /// Reads the head of a definite-length array that must have exactly `n` items.
    fn fixed_array(r: &mut Reader<'_>, what: &'static str, n: u64) -> Result<(), DecodeError> {
        let at = r.position();
        let len = array_len(r)?;
        if len != n {
            return Err(DecodeError::new(at, K::BadArrayLength { what, len }));
        }
        Ok(())
    }

    fn call_id(r: &mut Reader<'_>, buf: &Bytes) -> Result<CallId, DecodeError> {
        let at = r.position();
        let range = r.bytes()?;
        let id = <[u8; ID_LEN]>::try_from(&buf[range])
            .map_err(|_| DecodeError::new(at, K::InvalidControl("call id is not 16 bytes")))?;
        Ok(CallId(id))
    }

    /// An endpoint id, refused unless coded as [`Eid::encode`] codes it.
    fn eid(r: &mut Reader<'_>, buf: &Bytes) -> Result<Eid, DecodeError> {
        let at = r.position();
        let eid = Eid::decode(r, buf)?;
        // `Eid::decode` (shared with bundles) also accepts indefinite-length arrays. Those are
        // the only other encoding it lets through, and each makes the item longer, so a length
        // that differs from the canonical one means a second encoding of the same id.
        if r.position() - at != eid.encoded_len() {
            return Err(DecodeError::new(
                at,
                K::InvalidCbor("indefinite-length array in an endpoint id"),
            ));
        }
        Ok(eid)
    }

    fn id_and_eid(r: &mut Reader<'_>, buf: &Bytes) -> Result<(CallId, Eid), DecodeError> {
        let id = call_id(r, buf)?;
        let eid = eid(r, buf)?;
        Ok((id, eid))
    }

    fn text(r: &mut Reader<'_>, buf: &Bytes) -> Result<String, DecodeError> {
        let at = r.position();
        let range = r.text_unchecked()?;
        std::str::from_utf8(&buf[range])
            .map(str::to_owned)
            .map_err(|_| DecodeError::new(at, K::InvalidCbor("text string is not UTF-8")))
    }

    /// A signed 64-bit integer (major type 0 or 1).
    fn int(r: &mut Reader<'_>) -> Result<i64, DecodeError> {
        let at = r.position();
        let out_of_range = || DecodeError::new(at, K::InvalidControl("integer outside 64 bits"));
        match r.head()? {
            (cbor::UINT, Arg::Value(n)) => i64::try_from(n).map_err(|_| out_of_range()),
            // Major type 1 codes -1 - n; for n ≤ i64::MAX that is at least i64::MIN.
            (cbor::NINT, Arg::Value(n)) => {
                i64::try_from(n).map(|n| -1 - n).map_err(|_| out_of_range())
            }
            _ => Err(DecodeError::new(
                at,
                K::UnexpectedType {
                    expected: "integer",
                },
            )),
        }
    }

    /// A float in the 8-byte form only (see `put_value`).
    fn float64(r: &mut Reader<'_>) -> Result<f64, DecodeError> {
        let at = r.position();
        let not_float64 = || {
            DecodeError::new(
                at,
                K::UnexpectedType {
                    expected: "float64",
                },
            )
        };
        if r.peek()? != FLOAT64 {
            return Err(not_float64());
        }
        // After 0xfb the head's argument is the 8 bytes of the float (no shortest-form rule
        // applies to major type 7).
        match r.head()? {
            (cbor::SIMPLE, Arg::Value(bits)) => Ok(f64::from_bits(bits)),
            _ => Err(not_float64()),
        }
    }

    fn value(r: &mut Reader<'_>, buf: &Bytes) -> Result<Value, DecodeError> {
        fixed_array(r, "value", 2)?;
        let tag_at = r.position();
        Ok(match r.uint()? {
            TAG_BOOL => Value::Bool(r.bool()?),
            TAG_INT => Value::Int(int(r)?),
            TAG_FLOAT => Value::Float(float64(r)?),
            TAG_TEXT => Value::Text(text(r, buf)?),
            TAG_BYTES => Value::Bytes(buf.slice(r.bytes()?)),
            TAG_FILE => Value::File(file(r, buf)?),
            _ => {
                return Err(DecodeError::new(
                    tag_at,
                    K::InvalidControl("unknown value tag"),
                ));
            }
        })
    }

    fn file(r: &mut Reader<'_>, buf: &Bytes) -> Result<FileRef, DecodeError> {
        fixed_array(r, "file", 3)?;
        let hash_at = r.position();
        let range = r.bytes()?;
        let hash = <[u8; HASH_LEN]>::try_from(&buf[range]).map_err(|_| {
            DecodeError::new(hash_at, K::InvalidControl("file hash is not 32 bytes"))
        })?;
        let size = r.uint()?;
        let name = text(r, buf)?;
        Ok(FileRef { hash, size, name })
    }
}
