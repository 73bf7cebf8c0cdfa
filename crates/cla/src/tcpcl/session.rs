//! The session state machine: negotiation, message dispatch, timers and termination.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};
use wire::EncodedBundle;
use wire::tcpcl::{
    ContactHeader, FrameLimits, FrameStatus, Message, MsgReject, MsgRejectReason, SessInit,
    SessTerm, SessTermFlags, SessTermReason, TcpclError, XferRefuse, XferRefuseReason, XferSegment,
};

use super::incoming::{Incoming, Limits, SegmentOutcome, StreamStart};
use super::outgoing::{AckOutcome, Outgoing};
use super::{
    PeerInfo, Role, SessionConfig, SessionError, SessionEvent, TlsFailure, TlsPeer, TlsPolicy,
    sess_term_text,
};

/// Where the session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the peer's contact header.
    Contact,
    /// Both contact headers set CAN_TLS: the owner runs the TLS handshake; no input is taken.
    StartTls,
    /// Contact headers exchanged (and TLS up, if it was negotiated); waiting for the peer's
    /// SESS_INIT.
    SessInit,
    /// Negotiated; transfers may flow (see `Session::ending` for an orderly close under way).
    Established,
    /// Over; `SessionEvent::Terminated` was emitted.
    Terminated,
}

/// An orderly termination under way (RFC 9174 §6.1).
#[derive(Debug)]
struct Ending {
    reason: String,
    by_peer: bool,
    /// We sent our SESS_TERM (or reply).
    sent: bool,
    /// The peer's SESS_TERM (or reply) arrived.
    received: bool,
}

/// One TCPCLv4 session, without I/O. See the [module documentation](super).
///
/// Time is milliseconds on any monotonic clock the owner chooses, passed as `now_ms`.
#[derive(Debug)]
pub struct Session {
    role: Role,
    config: SessionConfig,
    limits: FrameLimits,
    phase: Phase,
    peer: Option<PeerInfo>,
    ending: Option<Ending>,
    /// Encoded control messages (contact header, SESS_INIT, acks, refusals, keepalives,
    /// SESS_TERM, MSG_REJECT), written before the next data segment.
    control: VecDeque<Bytes>,
    control_bytes: usize,
    events: VecDeque<SessionEvent>,
    outgoing: Outgoing,
    incoming: Incoming,
    /// Final acknowledgements of received bundles the owner has not confirmed yet (with
    /// [`SessionConfig::confirm_received`]), by transfer id.
    held_acks: std::collections::BTreeMap<u64, wire::tcpcl::XferAck>,
    /// The names of the peer's certificate, once TLS is up.
    tls_peer: Option<TlsPeer>,
    /// Why the session failed, when it was for a reason of TLS (for `Terminated`).
    tls_failure: Option<TlsFailure>,
    created_ms: u64,
    last_sent_ms: u64,
    last_received_ms: u64,
}

/// A continuation segment with at least this much of its data still to come is streamed into its
/// transfer (see [`Session::direct_room`]); less is not worth a read of its own.
const STREAM_MIN: u64 = 16 * 1024;

/// How much the connection's next read should take ([`Session::read_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSize {
    /// Whatever has arrived, up to the reader's usual read.
    Any,
    /// The frame at the front of the buffer needs this many more bytes: room for all of them.
    Frame(usize),
    /// Only this many bytes: the next segment's header, so its data can go straight into its
    /// transfer.
    Header(usize),
}

/// The largest segment we send, given the peer's segment MRU.
fn segment_size(config: &SessionConfig, peer: &PeerInfo) -> u64 {
    config.max_segment.max(1).min(peer.segment_mru)
}

/// Whether `id` has URI syntax (RFC 3986: a scheme, a colon, something after it, and only
/// printable ASCII). RFC 9174 §4.6 wants a URI; what kind of node id is acceptable is the
/// node's policy, not the session's.
fn is_uri(id: &str) -> bool {
    let Some((scheme, rest)) = id.split_once(':') else {
        return false;
    };
    let mut s = scheme.chars();
    s.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && id.bytes().all(|b| b.is_ascii_graphic())
}

impl Session {
    /// A session on a connection that was just established. The active side queues its contact
    /// header at once.
    pub fn new(role: Role, config: SessionConfig, now_ms: u64) -> Self {
        let mut s = Self {
            role,
            limits: FrameLimits::new(config.segment_mru),
            config,
            phase: Phase::Contact,
            peer: None,
            ending: None,
            control: VecDeque::new(),
            control_bytes: 0,
            events: VecDeque::new(),
            outgoing: Outgoing::default(),
            incoming: Incoming::default(),
            held_acks: Default::default(),
            tls_peer: None,
            tls_failure: None,
            created_ms: now_ms,
            last_sent_ms: now_ms,
            last_received_ms: now_ms,
        };
        if role == Role::Active {
            s.push_contact_header();
        }
        s
    }

    // ----- input -----

    /// Consumes every complete frame at the front of `rx` (bytes the socket produced). A partial
    /// frame stays in `rx` for the next call. Never panics; once the session is over, `rx` is
    /// cleared. After [`SessionEvent::StartTls`] nothing more is consumed: the bytes that
    /// followed the peer's contact header (its TLS handshake) stay in `rx` for the owner.
    pub fn receive(&mut self, now_ms: u64, rx: &mut BytesMut) {
        if !rx.is_empty() {
            // Any byte counts as life: a large segment arriving slowly is not idleness.
            self.last_received_ms = self.last_received_ms.max(now_ms);
        }
        // Each round consumes a frame (or some of a streamed segment's data) or returns, so
        // hostile input cannot make this spin.
        loop {
            if self.phase == Phase::Terminated {
                rx.clear();
                return;
            }
            if self.phase == Phase::StartTls {
                return;
            }
            if self.phase == Phase::Contact {
                match ContactHeader::decode_from(rx) {
                    Ok(None) => return,
                    Ok(Some(header)) => self.on_contact_header(header),
                    Err(TcpclError::UnsupportedVersion(version)) => self.version_mismatch(version),
                    Err(e) => self.fail(None, format!("not a TCPCL peer: {e}")),
                }
                continue;
            }
            if self.incoming.awaits_segment_data() {
                if rx.is_empty() {
                    return;
                }
                if let Some(outcome) = self.incoming.stream_from(rx) {
                    self.on_segment_outcome(outcome);
                }
                continue;
            }
            if self.phase == Phase::Established && self.begin_stream(rx) {
                continue;
            }
            match Message::decode_from(rx, self.limits) {
                Ok(None) => return,
                Ok(Some(message)) => self.on_message(now_ms, message),
                Err(e) => self.on_decode_error(e),
            }
        }
    }

    /// How much the connection's next read into `rx` should take, so that a large segment's data
    /// lands where it stays: room for the whole rest of a frame whose length is known, and only
    /// a segment header between the segments of a transfer being received, so that the data
    /// after it is read straight into the transfer ([`Session::direct_room`]) instead of into
    /// `rx` and copied from there.
    pub fn read_size(&self, rx: &[u8]) -> ReadSize {
        if self.phase != Phase::Established || self.incoming.awaits_segment_data() {
            return ReadSize::Any;
        }
        if rx.is_empty() && self.incoming.between_segments() {
            return ReadSize::Header(XferSegment::CONTINUATION_HEADER_LEN);
        }
        match Message::peek_frame(rx, self.limits) {
            Ok(FrameStatus::NeedMore(n)) => ReadSize::Frame(n),
            _ => ReadSize::Any,
        }
    }

    /// Room to read the connection's next bytes into directly, and how many may go there: while
    /// the data of a large segment of a transfer being received is on its way and `rx` is empty,
    /// that data goes straight into the transfer's buffer, instead of into `rx` and then, copied,
    /// onto the rest of the transfer. Report what was read with [`Session::direct_read`].
    pub fn direct_room(&mut self) -> Option<(&mut BytesMut, usize)> {
        if self.phase != Phase::Established {
            return None;
        }
        self.incoming.direct_room()
    }

    /// `n` bytes (at least one) were read into [`Session::direct_room`].
    pub fn direct_read(&mut self, now_ms: u64, n: usize) {
        if n == 0 {
            return;
        }
        self.last_received_ms = self.last_received_ms.max(now_ms);
        if let Some(outcome) = self.incoming.direct_read(n) {
            self.on_segment_outcome(outcome);
        }
    }

    /// The connection's read side reached EOF or failed: the session is over (reported as the
    /// peer's doing).
    pub fn receive_closed(&mut self, _now_ms: u64) {
        if self.phase == Phase::Terminated {
            return;
        }
        let (reason, by_peer) = match &self.ending {
            Some(e) => (
                format!("{} (then the connection closed)", e.reason),
                e.by_peer,
            ),
            None if self.phase == Phase::Established => ("connection closed".into(), true),
            None => (
                "connection closed before the session was established".into(),
                true,
            ),
        };
        self.terminate(reason, by_peer);
    }

    /// The connection failed (e.g. a write error): the session is over, nothing more is sent.
    pub fn abort(&mut self, _now_ms: u64, reason: &str) {
        if self.phase == Phase::Terminated {
            return;
        }
        self.control.clear();
        self.control_bytes = 0;
        self.terminate(format!("connection failed: {reason}"), true);
    }

    /// Whether the connection looks stalled at `now_ms`: a transfer is in progress and nothing
    /// has been received for `quiet_ms`. A healthy transfer brings acknowledgements all the
    /// time; after an outage TCP retransmits on a timer that doubles with each try, so such a
    /// connection can stay silent for many seconds after the link came back, and a new one is
    /// faster (the owner asks when a link came up).
    pub fn stalled(&self, now_ms: u64, quiet_ms: u64) -> bool {
        self.phase == Phase::Established
            && self.outgoing.in_progress()
            && now_ms.saturating_sub(self.last_received_ms) >= quiet_ms
    }

    /// The TLS handshake that [`SessionEvent::StartTls`] asked for succeeded; `peer` holds the
    /// names of the peer's certificate, which the owner validated. The session goes on over TLS
    /// (the active side's SESS_INIT is queued now). Does nothing unless the session waits for
    /// TLS.
    pub fn tls_established(&mut self, _now_ms: u64, peer: TlsPeer) {
        if self.phase != Phase::StartTls {
            return;
        }
        self.tls_peer = Some(peer);
        self.phase = Phase::SessInit;
        if self.role == Role::Active {
            self.push_sess_init();
        }
    }

    /// The TLS handshake failed: the session ends without a SESS_TERM (the connection is in no
    /// state to carry one). Does nothing unless the session waits for TLS.
    pub fn tls_failed(&mut self, _now_ms: u64, reason: &str) {
        if self.phase != Phase::StartTls {
            return;
        }
        self.control.clear();
        self.control_bytes = 0;
        self.tls_failure = Some(TlsFailure::Handshake);
        self.terminate(format!("TLS handshake failed: {reason}"), false);
    }

    // ----- output -----

    /// The next message to write, as buffers for one vectored write, in order: control messages
    /// first, then the next data segment (its header, then slices of the bundle's own buffers).
    /// One message per call, so acknowledgements never wait behind a whole bundle.
    pub fn poll_transmit(&mut self, now_ms: u64) -> Option<Vec<Bytes>> {
        if let Some(message) = self.control.pop_front() {
            self.control_bytes = self.control_bytes.saturating_sub(message.len());
            self.last_sent_ms = self.last_sent_ms.max(now_ms);
            return Some(vec![message]);
        }
        if self.phase != Phase::Established {
            return None;
        }
        let peer = self.peer.as_ref()?;
        if peer.segment_mru == 0 {
            return None;
        }
        let max = segment_size(&self.config, peer);
        // RFC 9174 §6.1: no new transfer after a SESS_TERM, the one in progress finishes.
        let segment = self.outgoing.next_segment(max, self.ending.is_none())?;
        for transfer_id in self.outgoing.take_written() {
            self.events.push_back(SessionEvent::Written { transfer_id });
        }
        self.last_sent_ms = self.last_sent_ms.max(now_ms);
        Some(segment)
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// When [`Session::handle_timeout`] next has something to do (absolute milliseconds).
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Terminated => None,
            Phase::Contact | Phase::StartTls | Phase::SessInit => Some(self.contact_deadline()),
            Phase::Established => {
                let mut next = self.ending_deadline();
                if let Some(limit) = self.idle_limit_ms() {
                    let idle = self.last_received_ms.saturating_add(limit);
                    next = Some(next.map_or(idle, |n| n.min(idle)));
                }
                let k = self.keepalive_ms();
                if k > 0 {
                    // A KEEPALIVE already waiting to go needs no further wake-up.
                    if self.control.is_empty() {
                        let keepalive = self.last_sent_ms.saturating_add(k / 2);
                        next = Some(next.map_or(keepalive, |n| n.min(keepalive)));
                    }
                }
                next
            }
        }
    }

    /// Acts on the timers: the contact timeout, sending a KEEPALIVE when nothing was sent for
    /// half the negotiated interval, the idle timeout (nothing received for twice the interval,
    /// or for [`SessionConfig::idle_timeout_ms`] without keepalives: SESS_TERM "Idle timeout"), and the limit on waiting for the peer during an orderly close.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        match self.phase {
            Phase::Terminated => {}
            Phase::StartTls => {
                if now_ms >= self.contact_deadline() {
                    // Half a handshake on the wire: no SESS_TERM can follow.
                    self.control.clear();
                    self.control_bytes = 0;
                    self.tls_failure = Some(TlsFailure::Handshake);
                    self.fail(None, "contact timeout during the TLS handshake".into());
                }
            }
            Phase::Contact | Phase::SessInit => {
                if now_ms >= self.contact_deadline() {
                    // A SESS_TERM only once contact headers were exchanged (RFC 9174 §6.1).
                    let term =
                        (self.phase == Phase::SessInit).then_some(SessTermReason::ContactFailure);
                    self.fail(term, "contact timeout".into());
                }
            }
            Phase::Established => {
                let k = self.keepalive_ms();
                if let Some(limit) = self.idle_limit_ms()
                    && now_ms >= self.last_received_ms.saturating_add(limit)
                {
                    let term = self
                        .ending
                        .as_ref()
                        .is_none_or(|e| !e.sent)
                        .then_some(SessTermReason::IdleTimeout);
                    self.fail(
                        term,
                        format!("idle timeout: nothing received for {limit} ms"),
                    );
                    return;
                }
                if self.ending_deadline().is_some_and(|d| now_ms >= d) {
                    self.fail(None, "the peer did not finish closing the session".into());
                    return;
                }
                // Half the interval: dtn7-rs ends a session one interval after its last
                // non-KEEPALIVE message, measured from when ours arrived.
                if k > 0
                    && self.control.is_empty()
                    && now_ms >= self.last_sent_ms.saturating_add(k / 2)
                {
                    self.push_message(&Message::Keepalive);
                }
            }
        }
    }

    // ----- commands -----

    /// Queues a bundle and returns its transfer id (0, 1, 2, … in the order queued). Urgent
    /// bundles go before queued non-urgent ones, after the transfer in progress: transfers are
    /// never interleaved. Ids are assigned when queued, so with urgent bundles they go out of
    /// order (RFC 9174 §5.2.1 only requires them to be unique).
    pub fn send(&mut self, bundle: EncodedBundle, urgent: bool) -> Result<u64, SessionError> {
        match self.phase {
            Phase::Contact | Phase::StartTls | Phase::SessInit => {
                return Err(SessionError::NotEstablished);
            }
            Phase::Terminated => return Err(SessionError::Closing),
            Phase::Established if self.ending.is_some() => return Err(SessionError::Closing),
            Phase::Established => {}
        }
        let Some(peer) = &self.peer else {
            return Err(SessionError::NotEstablished);
        };
        let len = bundle.len() as u64;
        if len > peer.transfer_mru && !self.config.ignore_peer_transfer_mru {
            return Err(SessionError::TooLarge {
                len,
                limit: peer.transfer_mru,
            });
        }
        if peer.segment_mru == 0 {
            return Err(SessionError::PeerAcceptsNoData);
        }
        if self.outgoing.next_id().is_none() {
            self.close_with(SessTermReason::ResourceExhaustion, "transfer ids exhausted");
            return Err(SessionError::TransferIdsExhausted);
        }
        Ok(self.outgoing.enqueue(&bundle, urgent))
    }

    /// Refuses an incoming transfer (after [`SessionEvent::IncomingStarted`]): sends XFER_REFUSE
    /// and discards its remaining segments. Does nothing if the transfer already completed.
    pub fn refuse(&mut self, transfer_id: u64, reason: XferRefuseReason) {
        if self.phase != Phase::Established || !self.incoming.refuse(transfer_id) {
            return;
        }
        self.push_message(&Message::XferRefuse(XferRefuse {
            reason,
            transfer_id,
        }));
        self.check_ended();
    }

    /// With [`SessionConfig::confirm_received`]: the owner has the bundle of `transfer_id`
    /// (from [`SessionEvent::Received`]) safely, so its final XFER_ACK goes out. Unknown or
    /// already confirmed ids are ignored.
    pub fn confirm(&mut self, transfer_id: u64) {
        if self.phase == Phase::Terminated {
            return;
        }
        if let Some(ack) = self.held_acks.remove(&transfer_id) {
            self.push_message(&Message::XferAck(ack));
            self.check_ended();
        }
    }

    /// Orderly shutdown: SESS_TERM, finish the transfers in progress (bundles not started are
    /// reported as unfinished), wait for the peer's SESS_TERM reply, then terminate. Before the
    /// session is established, it ends at once.
    pub fn close(&mut self, _now_ms: u64, reason: SessTermReason) {
        self.close_with(reason, &format!("closed: {}", sess_term_text(reason)));
    }

    fn close_with(&mut self, reason: SessTermReason, text: &str) {
        match self.phase {
            Phase::Terminated => {}
            Phase::Contact | Phase::StartTls => self.fail(None, text.into()),
            Phase::SessInit => self.fail(Some(reason), text.into()),
            Phase::Established => {
                if self.ending.is_none() {
                    self.push_sess_term(false, reason);
                    self.ending = Some(Ending {
                        reason: text.into(),
                        by_peer: false,
                        sent: true,
                        received: false,
                    });
                }
                self.check_ended();
            }
        }
    }

    // ----- queries -----

    /// What the peer announced, once its SESS_INIT arrived.
    pub fn peer(&self) -> Option<&PeerInfo> {
        self.peer.as_ref()
    }

    /// Whether the session waits for the owner's TLS handshake ([`SessionEvent::StartTls`]).
    pub fn is_starting_tls(&self) -> bool {
        self.phase == Phase::StartTls
    }

    /// Whether bundles can be sent: negotiated and not closing.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established && self.ending.is_none()
    }

    /// Whether the session is over. The owner closes the connection once this is true and
    /// [`Session::poll_transmit`] returns `None`.
    pub fn is_terminated(&self) -> bool {
        self.phase == Phase::Terminated
    }

    /// Bundle bytes queued or sent and not yet acknowledged.
    pub fn queued_bytes(&self) -> u64 {
        self.outgoing.queued_bytes()
    }

    /// Bytes of control messages waiting to be written. Each received segment queues an
    /// acknowledgement, so an owner stops reading while this is large: a peer that sends but
    /// never reads cannot grow it without bound.
    pub fn transmit_backlog(&self) -> usize {
        self.control_bytes
    }

    // ----- internals -----

    fn keepalive_ms(&self) -> u64 {
        self.peer
            .as_ref()
            .map_or(0, |p| u64::from(p.keepalive_interval_s) * 1000)
    }

    /// How long the peer may stay silent before the session ends: twice the negotiated
    /// keepalive, or without keepalives the configured idle timeout (`None`: 0, never).
    fn idle_limit_ms(&self) -> Option<u64> {
        match self.keepalive_ms() {
            0 => (self.config.idle_timeout_ms > 0).then_some(self.config.idle_timeout_ms),
            k => Some(2 * k),
        }
    }

    fn contact_deadline(&self) -> u64 {
        self.created_ms
            .saturating_add(self.config.contact_timeout_ms)
    }

    /// While closing, how long the peer may stay silent before we stop waiting for it.
    fn ending_deadline(&self) -> Option<u64> {
        self.ending.as_ref()?;
        let patience = self.config.contact_timeout_ms.max(2 * self.keepalive_ms());
        Some(self.last_received_ms.saturating_add(patience))
    }

    fn push_control(&mut self, bytes: Bytes) {
        self.control_bytes = self.control_bytes.saturating_add(bytes.len());
        self.control.push_back(bytes);
    }

    fn push_message(&mut self, message: &Message) {
        match message.to_bytes() {
            Ok(bytes) => self.push_control(bytes),
            // Only SESS_INIT and XFER_SEGMENT can be unencodable, and neither goes this way.
            Err(e) => tracing::warn!("cannot encode {:?}: {e}", message.message_type()),
        }
    }

    fn push_contact_header(&mut self) {
        let can_tls = self.config.tls != TlsPolicy::Off;
        self.push_control(Bytes::copy_from_slice(
            &ContactHeader::new(can_tls).to_bytes(),
        ));
    }

    fn push_sess_init(&mut self) -> bool {
        let init = Message::SessInit(SessInit {
            keepalive_interval: self.config.keepalive_interval_s,
            segment_mru: self.config.segment_mru,
            transfer_mru: self.config.transfer_mru,
            node_id: self.config.node_id.clone(),
            // Never any session extension: dtn7-rs fails on a SESS_INIT that has some.
            extensions: Vec::new(),
        });
        match init.to_bytes() {
            Ok(bytes) => {
                self.push_control(bytes);
                true
            }
            Err(e) => {
                self.fail(
                    Some(SessTermReason::ContactFailure),
                    format!("our SESS_INIT cannot be encoded: {e}"),
                );
                false
            }
        }
    }

    fn push_sess_term(&mut self, reply: bool, reason: SessTermReason) {
        let flags = SessTermFlags(if reply { SessTermFlags::REPLY } else { 0 });
        self.push_message(&Message::SessTerm(SessTerm { flags, reason }));
    }

    fn push_reject(&mut self, reason: MsgRejectReason, rejected_header: u8) {
        self.push_message(&Message::MsgReject(MsgReject {
            reason,
            rejected_header,
        }));
    }

    /// Ends the session now: emits `Terminated` with what was left unfinished. Control
    /// messages already queued (a SESS_TERM, a MSG_REJECT) still go out; no more data does.
    fn terminate(&mut self, reason: String, by_peer: bool) {
        if self.phase == Phase::Terminated {
            return;
        }
        self.phase = Phase::Terminated;
        let unfinished = self.outgoing.take_unfinished();
        let partial = self.incoming.take_partial();
        tracing::debug!(%reason, by_peer, "TCPCL session terminated");
        self.events.push_back(SessionEvent::Terminated {
            reason,
            by_peer,
            unfinished,
            partial,
            tls_failure: self.tls_failure,
        });
    }

    /// Ends the session on this side's decision (a violation by the peer, a timeout, a local
    /// error), with a SESS_TERM if `term` is given and none was sent yet.
    fn fail(&mut self, term: Option<SessTermReason>, reason: String) {
        if self.phase == Phase::Terminated {
            return;
        }
        let already_sent = self.ending.as_ref().is_some_and(|e| e.sent);
        if let Some(code) = term
            && !already_sent
        {
            self.push_sess_term(false, code);
        }
        self.terminate(reason, false);
    }

    /// A protocol violation by the peer once negotiated: SESS_TERM and the end.
    fn violation(&mut self, what: String) {
        let code = if self.phase == Phase::SessInit {
            SessTermReason::ContactFailure
        } else {
            SessTermReason::Unknown
        };
        self.fail(Some(code), format!("protocol violation: {what}"));
    }

    /// An orderly close is finished once both SESS_TERMs crossed and no transfer is in progress.
    fn check_ended(&mut self) {
        let Some(e) = &self.ending else {
            return;
        };
        if e.sent
            && e.received
            && !self.outgoing.in_progress()
            && !self.incoming.in_progress()
            && self.held_acks.is_empty()
        {
            let (reason, by_peer) = (e.reason.clone(), e.by_peer);
            self.terminate(reason, by_peer);
        }
    }

    fn on_contact_header(&mut self, header: ContactHeader) {
        if self.role == Role::Passive {
            self.push_contact_header();
        }
        self.phase = Phase::SessInit;
        // RFC 9174 §4.3: TLS is used exactly when both contact headers set CAN_TLS.
        match (self.config.tls, header.can_tls()) {
            (TlsPolicy::Off, _) | (TlsPolicy::Offer, false) => {}
            (TlsPolicy::Offer | TlsPolicy::Require, true) => {
                self.phase = Phase::StartTls;
                self.events.push_back(SessionEvent::StartTls);
                return;
            }
            (TlsPolicy::Require, false) => {
                // §4.4.4: a policy that requires TLS ends the session with "Contact Failure".
                self.tls_failure = Some(TlsFailure::Required);
                return self.fail(
                    Some(SessTermReason::ContactFailure),
                    "the peer does not offer TLS, which this node requires".into(),
                );
            }
        }
        if self.role == Role::Active {
            self.push_sess_init();
        }
    }

    /// RFC 9174 §4.3: the passive side sends its contact header and then SESS_TERM "Version
    /// mismatch"; the active side only the SESS_TERM.
    fn version_mismatch(&mut self, version: u8) {
        if self.role == Role::Passive {
            self.push_contact_header();
        }
        self.push_sess_term(false, SessTermReason::VersionMismatch);
        self.terminate(
            format!("version mismatch: the peer speaks TCPCL version {version}"),
            false,
        );
    }

    fn on_decode_error(&mut self, e: TcpclError) {
        match e {
            // RFC 9174 §5.1.2: MSG_REJECT "Message Type Unknown" and close. The stream cannot
            // be framed any further, so no SESS_TERM exchange can follow.
            TcpclError::UnknownMessageType(code) => {
                self.push_reject(MsgRejectReason::MessageTypeUnknown, code);
                self.terminate(format!("unknown message type {code:#04x}"), false);
            }
            // A segment above our segment MRU (or oversized extensions): we will not buffer it.
            TcpclError::TooLarge { .. } => self.fail(
                Some(SessTermReason::ResourceExhaustion),
                format!("protocol violation: {e}"),
            ),
            other => self.violation(format!("malformed message: {other}")),
        }
    }

    fn on_message(&mut self, now_ms: u64, message: Message) {
        match self.phase {
            Phase::SessInit => match message {
                Message::SessInit(init) => self.on_sess_init(init),
                Message::SessTerm(t) => self.on_sess_term(t),
                other => self.violation(format!("{:?} before SESS_INIT", other.message_type())),
            },
            Phase::Established => self.on_established_message(now_ms, message),
            Phase::Contact | Phase::StartTls | Phase::Terminated => {}
        }
    }

    fn on_sess_init(&mut self, init: SessInit) {
        if init.node_id.is_empty() || !is_uri(&init.node_id) {
            return self.fail(
                Some(SessTermReason::ContactFailure),
                format!("invalid peer node id {:?}", init.node_id),
            );
        }
        // RFC 9174 §4.7: an unknown critical session extension ends the session.
        if let Some(item) = init.extensions.iter().find(|i| i.critical) {
            return self.fail(
                Some(SessTermReason::ContactFailure),
                format!("unsupported critical session extension {}", item.item_type),
            );
        }
        // RFC 9174 §4.4.3: over TLS the node id is authenticated by the peer's certificate.
        if let Some(tls) = &self.tls_peer
            && !tls.node_ids.contains(&init.node_id)
        {
            self.tls_failure = Some(TlsFailure::NodeIdNotInCertificate);
            let names = tls.node_ids.join(", ");
            return self.fail(
                Some(SessTermReason::ContactFailure),
                format!(
                    "node id {} not in the peer's certificate (its URI names: [{names}])",
                    init.node_id
                ),
            );
        }
        if self.role == Role::Passive && !self.push_sess_init() {
            return;
        }
        let peer = PeerInfo {
            node_id: init.node_id,
            keepalive_interval_s: init
                .keepalive_interval
                .min(self.config.keepalive_interval_s),
            segment_mru: init.segment_mru,
            transfer_mru: init.transfer_mru,
            tls: self.tls_peer.is_some(),
        };
        self.phase = Phase::Established;
        self.peer = Some(peer.clone());
        self.events.push_back(SessionEvent::Established(peer));
    }

    fn on_established_message(&mut self, _now_ms: u64, message: Message) {
        match message {
            Message::SessInit(_) => {
                self.push_reject(MsgRejectReason::MessageUnexpected, message_code(&message))
            }
            Message::SessTerm(t) => self.on_sess_term(t),
            Message::XferSegment(s) => self.on_segment(s),
            Message::XferAck(ack) => {
                let outcome = self.outgoing.on_ack(&ack);
                self.on_ack_outcome(outcome, 0x02);
            }
            Message::XferRefuse(r) => match self.outgoing.on_refuse(r.transfer_id) {
                Ok(acknowledged) => {
                    self.events.push_back(SessionEvent::Refused {
                        transfer_id: r.transfer_id,
                        reason: r.reason,
                        acknowledged,
                    });
                    self.check_ended();
                }
                Err(outcome) => self.on_ack_outcome(outcome, 0x03),
            },
            Message::Keepalive => {}
            Message::MsgReject(r) => {
                // Informational (RFC 9174 §5.1.2); nothing here depends on an answer.
                tracing::debug!(?r, "peer rejected a message");
            }
        }
    }

    fn on_ack_outcome(&mut self, outcome: AckOutcome, header: u8) {
        match outcome {
            AckOutcome::Progress { id, acked, total } => {
                self.events.push_back(SessionEvent::Progress {
                    transfer_id: id,
                    acknowledged: acked,
                    total,
                })
            }
            AckOutcome::Sent { id } => {
                self.events
                    .push_back(SessionEvent::Sent { transfer_id: id });
                self.check_ended();
            }
            AckOutcome::Stale => {}
            AckOutcome::Unexpected => self.push_reject(MsgRejectReason::MessageUnexpected, header),
            AckOutcome::Violation(what) => self.violation(what),
        }
    }

    /// Takes the header of a continuation segment off `rx` if its data is to be streamed into
    /// its transfer (see [`Session::direct_room`]): one whose data has not all arrived and
    /// whose rest is worth reading on its own. Returns whether it did, or refused the transfer.
    fn begin_stream(&mut self, rx: &mut BytesMut) -> bool {
        let Ok(Some(header)) = Message::peek_segment_header(rx, self.limits) else {
            // A framing error is reported by the whole-frame decode that follows.
            return false;
        };
        let arrived = (rx.len() - header.header_len.min(rx.len())) as u64;
        if header.data_len.saturating_sub(arrived) < STREAM_MIN {
            return false;
        }
        let limits = Limits {
            transfer_mru: self.config.transfer_mru,
            budget: self.config.receive_budget.as_ref(),
        };
        match self.incoming.begin_stream(header, limits) {
            StreamStart::Streaming => {
                rx.advance(header.header_len);
                true
            }
            StreamStart::Whole => false,
            StreamStart::Refused(outcome) => {
                // The segment stays in `rx` and is dropped once whole, with the transfer's rest.
                self.on_segment_outcome(outcome);
                false
            }
        }
    }

    fn on_segment(&mut self, segment: XferSegment) {
        let accept_new = self.ending.is_none();
        let limits = Limits {
            transfer_mru: self.config.transfer_mru,
            budget: self.config.receive_budget.as_ref(),
        };
        let outcome = self.incoming.on_segment(segment, limits, accept_new);
        self.on_segment_outcome(outcome);
    }

    fn on_segment_outcome(&mut self, outcome: SegmentOutcome) {
        match outcome {
            SegmentOutcome::Accepted {
                ack,
                started,
                complete,
            } => {
                if complete.is_some() && self.config.confirm_received {
                    // The last acknowledgement tells the sender it may let the bundle go: it
                    // waits until the owner has the bundle safely (`confirm`).
                    self.held_acks.insert(ack.transfer_id, ack);
                } else {
                    self.push_message(&Message::XferAck(ack));
                }
                if let Some((first_data, total_length)) = started {
                    self.events.push_back(SessionEvent::IncomingStarted {
                        transfer_id: ack.transfer_id,
                        first_data,
                        total_length,
                    });
                }
                if let Some(bundle) = complete {
                    self.events.push_back(SessionEvent::Received {
                        transfer_id: ack.transfer_id,
                        bundle,
                    });
                    self.check_ended();
                }
            }
            SegmentOutcome::Refuse(transfer_id, reason) => {
                self.push_message(&Message::XferRefuse(XferRefuse {
                    reason,
                    transfer_id,
                }));
                self.check_ended();
            }
            SegmentOutcome::Discarded => {}
            SegmentOutcome::Violation(what) => self.violation(what),
        }
    }

    fn on_sess_term(&mut self, t: SessTerm) {
        let text = sess_term_text(t.reason);
        if self.phase != Phase::Established {
            // Before negotiation there is nothing to finish: answer and end.
            if !t.flags.contains(SessTermFlags::REPLY) {
                self.push_sess_term(true, t.reason);
            }
            return self.terminate(format!("the peer ended the session: {text}"), true);
        }
        match &mut self.ending {
            None => {
                // RFC 9174 §6.1: answer with the same reason and the REPLY flag; transfers in
                // progress may finish, no new one starts.
                self.push_sess_term(true, t.reason);
                self.ending = Some(Ending {
                    reason: format!("the peer ended the session: {text}"),
                    by_peer: true,
                    sent: true,
                    received: true,
                });
            }
            // Our SESS_TERM's reply, or the peer's own crossing ours: either way both are said.
            Some(e) => e.received = true,
        }
        self.check_ended();
    }
}

fn message_code(message: &Message) -> u8 {
    message.message_type().code()
}

#[cfg(test)]
mod tests {
    use super::is_uri;

    #[test]
    fn node_ids_must_be_uris() {
        for ok in ["dtn://alpha/", "ipn:1.0", "dtn:none", "x-y+z.1:a"] {
            assert!(is_uri(ok), "{ok}");
        }
        for bad in [
            "",
            "alpha",
            ":x",
            "1dtn://a/",
            "dtn:",
            "dtn://a b/",
            "dtn://\u{e9}/",
        ] {
            assert!(!is_uri(bad), "{bad}");
        }
    }
}
