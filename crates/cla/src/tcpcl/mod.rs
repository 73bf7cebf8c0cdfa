//! A sans-IO TCPCLv4 session (RFC 9174).
//!
//! A [`Session`] is one TCP connection's worth of protocol state. The owner feeds it what the
//! socket produced ([`Session::receive`], [`Session::receive_closed`]), the passing of time
//! ([`Session::handle_timeout`] at [`Session::poll_timeout`]) and commands ([`Session::send`],
//! [`Session::refuse`], [`Session::close`]); it drains bytes to write
//! ([`Session::poll_transmit`]) and [`SessionEvent`]s ([`Session::poll_event`]).
//!
//! ```text
//!   Contact ──contact headers──► SessInit ──SESS_INIT both ways──► Established ──► Terminated
//!      │                            ▲                                │ SESS_TERM ▲
//!      └─ both CAN_TLS ─► StartTls ─┘ tls_established                └─ ending ──┘ (transfers in
//!         (owner runs TLS)                                                          progress finish)
//! ```
//!
//! TLS (RFC 9174 §4.4): with [`SessionConfig::tls`] other than [`TlsPolicy::Off`] our contact
//! header sets CAN_TLS. When both headers do, the session pauses after the exchange: it emits
//! [`SessionEvent::StartTls`], writes nothing more and consumes no more input (the bytes after
//! the peer's contact header are the TLS handshake and stay in the receive buffer for the owner).
//! The owner runs the handshake and calls [`Session::tls_established`] with the names of the
//! peer's validated certificate (or [`Session::tls_failed`]); SESS_INIT then goes over TLS, and
//! the peer's node id must be one of the certificate's URI names (§4.4.3) or the session ends
//! with SESS_TERM "Contact Failure". With [`TlsPolicy::Require`] a peer whose header lacks
//! CAN_TLS is refused the same way. The session never sees a certificate or a key: validating
//! the chain is the owner's (the adapter's rustls).
//!
//! The active side (which opened the connection) sends its contact header at once and its
//! SESS_INIT once the passive side's contact header arrived; the passive side answers each only
//! after the active side's arrived (RFC 9174 §4.2, §4.6). Bundles go out one transfer at a time,
//! cut into segments no larger than the peer's segment MRU and this side's `max_segment`; an
//! incoming transfer is acknowledged segment by segment and handed over whole.
//!
//! Interoperability notes (dtn7-rs 0.21 is a test peer): acknowledgement flags are not trusted
//! (dtn7-rs sends empty flags on later acks), so a transfer is complete when its acknowledged
//! length reaches its size; transfer ids of the peer are only required to differ from the one in
//! progress (dtn7-rs starts at 1); a transfer extension of type 1 whose value is not 8 bytes is
//! ignored unless critical (dtn7-rs puts a bundle id string under that type); an empty START
//! segment is accepted, and [`SessionEvent::IncomingStarted`] waits for the first data; keepalives
//! go out after half the negotiated interval without sending, because dtn7-rs ends a session that
//! was silent for one interval after anything but a KEEPALIVE.

mod budget;
mod incoming;
mod outgoing;
mod session;

pub use budget::ReceiveBudget;
use bytes::Bytes;
pub use session::{ReadSize, Session};
pub use wire::tcpcl::{SessTermReason, XferRefuseReason};

/// What this side announces and accepts. `Default` gives RFC-friendly values for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Our node id, a URI (e.g. `dtn://alpha/` or `ipn:1.0`), sent in SESS_INIT.
    pub node_id: String,
    /// The keepalive interval we offer, in seconds; 0 offers none. The session uses the smaller
    /// of both offers (0 if either is 0).
    pub keepalive_interval_s: u16,
    /// The largest segment we accept (our segment MRU).
    pub segment_mru: u64,
    /// The largest bundle we accept (our transfer MRU). An incoming transfer never holds more.
    pub transfer_mru: u64,
    /// The largest segment we send; the peer's segment MRU caps it further.
    pub max_segment: u64,
    /// The node-wide bound on the bytes every session holds in unfinished incoming transfers,
    /// shared by the sessions given clones of it. A segment that does not fit refuses its
    /// transfer (XFER_REFUSE "No Resources"). `None`: each transfer is bounded by the transfer
    /// MRU alone.
    pub receive_budget: Option<ReceiveBudget>,
    /// The contact header and SESS_INIT exchange must finish within this many milliseconds.
    pub contact_timeout_ms: u64,
    /// A session whose negotiated keepalive is 0 (either side offered none) ends with SESS_TERM
    /// "Idle timeout" after nothing was received for this long, so a peer cannot hold a session
    /// open forever by declining keepalives. With keepalives, twice the interval applies.
    pub idle_timeout_ms: u64,
    /// Send bundles larger than the peer's transfer MRU anyway, leaving it to the peer to refuse
    /// them. Off by default: RFC 9174 §4.7 makes the peer's transfer MRU our transfer MTU, and
    /// [`Session::send`] refuses larger bundles so the node fragments them. dtn7-rs 0.21
    /// announces a transfer MRU of 64000 bytes yet accepts any size, and cannot reassemble
    /// fragments (it marks its own bundles "must not fragment"), so a node exchanging larger
    /// bundles with it needs this.
    pub ignore_peer_transfer_mru: bool,
    /// Hold back the final XFER_ACK of each received bundle until the owner calls
    /// [`Session::confirm`] (after storing it durably). The sender treats that acknowledgement
    /// as the bundle having arrived and may delete its copy, so a receiver that crashed between
    /// the acknowledgement and its store's commit would lose the bundle. Off by default.
    pub confirm_received: bool,
    /// Whether we offer TLS (CAN_TLS in our contact header) and whether we insist on it. The
    /// owner must be able to run a handshake when this is not [`TlsPolicy::Off`].
    pub tls: TlsPolicy,
}

/// Whether a session offers TLS (RFC 9174 §4.3, §4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TlsPolicy {
    /// CAN_TLS is not set: no TLS, whatever the peer offers (a peer that requires it refuses).
    #[default]
    Off,
    /// CAN_TLS is set: TLS if the peer sets it too, plain TCPCL with a peer that does not.
    Offer,
    /// CAN_TLS is set and a peer that does not set it is refused (SESS_TERM "Contact Failure").
    Require,
}

/// What the owner learnt of the peer from the TLS handshake: the names of its certificate,
/// which the owner validated against its trust anchors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TlsPeer {
    /// The URI subjectAltNames of the peer's end-entity certificate (RFC 9174 §4.4.1 NODE-ID).
    /// The peer's SESS_INIT node id must be one of them.
    pub node_ids: Vec<String>,
}

/// Why a session ended for a reason of TLS, for the owner's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlsFailure {
    /// The handshake failed (a certificate not signed by a trusted root, no certificate, a
    /// protocol error, the contact timeout).
    Handshake,
    /// The peer's node id is not a URI name of its certificate (RFC 9174 §4.4.3).
    NodeIdNotInCertificate,
    /// This side requires TLS and the peer did not offer it.
    Required,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            node_id: String::new(),
            keepalive_interval_s: 30,
            segment_mru: 1 << 20,
            transfer_mru: 4 << 30,
            max_segment: 256 << 10,
            receive_budget: None,
            contact_timeout_ms: 10_000,
            idle_timeout_ms: 600_000,
            ignore_peer_transfer_mru: false,
            confirm_received: false,
            tls: TlsPolicy::Off,
        }
    }
}

/// Which end of the TCP connection this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// We opened the connection: we send our contact header first.
    Active,
    /// We accepted the connection: we answer the peer's contact header and SESS_INIT.
    Passive,
}

/// What the peer announced in its SESS_INIT, with the negotiated keepalive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerInfo {
    /// The peer's node id (a URI, checked for URI syntax only).
    pub node_id: String,
    /// The negotiated keepalive interval in seconds (the smaller offer; 0: no keepalives).
    pub keepalive_interval_s: u16,
    /// The largest segment the peer accepts.
    pub segment_mru: u64,
    /// The largest bundle the peer accepts.
    pub transfer_mru: u64,
    /// Whether the session runs over TLS, which also means `node_id` is one of the names of the
    /// peer's validated certificate.
    pub tls: bool,
}

/// What a [`Session`] reports, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// Both contact headers set CAN_TLS: the owner writes what [`Session::poll_transmit`] still
    /// gives (our contact header), runs the TLS handshake on the connection (client when
    /// [`Role::Active`], server when passive) starting with the bytes left in the receive
    /// buffer, then calls [`Session::tls_established`] or [`Session::tls_failed`]. Until then
    /// the session takes no input and writes nothing.
    StartTls,
    /// The session is up; bundles can be sent.
    Established(PeerInfo),
    /// The first data of an incoming transfer arrived and more is to come; the owner may
    /// [`Session::refuse`] the rest. `first_data` is that data (it starts with the bundle's
    /// primary block). A transfer whose first data is also its last is reported as
    /// [`SessionEvent::Received`] only.
    /// `total_length` is the peer's Transfer Length extension, if it sent one.
    IncomingStarted {
        /// The peer's transfer id.
        transfer_id: u64,
        /// The data received so far (the first segment that carried any).
        first_data: Bytes,
        /// The announced length of the whole transfer.
        total_length: Option<u64>,
    },
    /// A whole incoming bundle. When it came in one segment this is a slice of the receive
    /// buffer, not a copy.
    Received {
        /// The peer's transfer id.
        transfer_id: u64,
        /// The bundle's bytes.
        bundle: Bytes,
    },
    /// The peer acknowledged part of an outgoing transfer (not emitted for the final
    /// acknowledgement, which is [`SessionEvent::Sent`]).
    Progress {
        /// Our transfer id.
        transfer_id: u64,
        /// Bundle bytes acknowledged so far.
        acknowledged: u64,
        /// The bundle's size.
        total: u64,
    },
    /// The last segment of an outgoing transfer was handed out by [`Session::poll_transmit`]:
    /// the session holds none of its bytes any more, and its acknowledgement is to come (from
    /// a Ferry peer once the bundle is durable there). An owner that bounds the bytes it has
    /// handed to a session counts this one out now, so that the next bundle is on the wire
    /// while the peer makes this one durable.
    Written {
        /// Our transfer id.
        transfer_id: u64,
    },
    /// The peer acknowledged the whole bundle.
    Sent {
        /// Our transfer id.
        transfer_id: u64,
    },
    /// The peer refused an outgoing transfer; no more of it is sent.
    Refused {
        /// Our transfer id.
        transfer_id: u64,
        /// The peer's reason.
        reason: XferRefuseReason,
        /// Bundle bytes it had acknowledged before refusing.
        acknowledged: u64,
    },
    /// The session ended. Emitted exactly once, always the last event.
    Terminated {
        /// Why, for logs.
        reason: String,
        /// Whether the peer ended it (its SESS_TERM, or the connection failed under us) rather
        /// than this side (a close, a timeout, a protocol violation by the peer).
        by_peer: bool,
        /// Every outgoing transfer not fully acknowledged, by transfer id, with the bundle bytes
        /// that were (0 for bundles never started), in id order: the owner may fragment
        /// reactively and send the rest elsewhere.
        unfinished: Vec<(u64, u64)>,
        /// The prefix received of an incoming transfer that was cut (transfer id, bytes), if any
        /// bytes arrived and the transfer had not been refused.
        partial: Option<(u64, Bytes)>,
        /// Set when the session ended for a reason of TLS.
        tls_failure: Option<TlsFailure>,
    },
}

/// Why [`Session::send`] did not queue a bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The contact header and SESS_INIT exchange has not finished yet.
    #[error("the session is not established yet")]
    NotEstablished,
    /// A SESS_TERM was sent or received, or the session is over: no new transfer may start.
    #[error("the session is closing or closed")]
    Closing,
    /// The bundle is larger than the peer's transfer MRU; it must be fragmented first.
    #[error("bundle of {len} bytes exceeds the peer's transfer MRU of {limit} bytes")]
    TooLarge {
        /// The bundle's encoded size.
        len: u64,
        /// The peer's transfer MRU.
        limit: u64,
    },
    /// The peer announced a segment MRU of 0: it accepts no data at all.
    #[error("the peer's segment MRU is 0: it accepts no data")]
    PeerAcceptsNoData,
    /// Every 64-bit transfer id was used; the session is being ended ("Resource exhaustion").
    #[error("transfer ids are exhausted")]
    TransferIdsExhausted,
}

/// A short text for a SESS_TERM reason, for [`SessionEvent::Terminated`]'s `reason`.
pub fn sess_term_text(reason: SessTermReason) -> String {
    match reason {
        SessTermReason::Unknown => "no reason given".into(),
        SessTermReason::IdleTimeout => "idle timeout".into(),
        SessTermReason::VersionMismatch => "version mismatch".into(),
        SessTermReason::Busy => "busy".into(),
        SessTermReason::ContactFailure => "contact failure".into(),
        SessTermReason::ResourceExhaustion => "resource exhaustion".into(),
        SessTermReason::Other(code) => format!("reason code {code}"),
    }
}
