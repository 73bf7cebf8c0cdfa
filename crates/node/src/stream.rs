//! The stream forwarding class: reliable, ordered sessions between two endpoints over the current
//! mesh path, with an explicit "path lost" when the path goes.
//!
//! ```text
//!   open / send / close / reset ─► Streams ─► poll_segment ─► node wraps a round's OutSegments
//!                                    ▲        (those of two endpoints share one) in bundles of
//!                                    │        class stream, routed along the mesh
//!                                    │                                          │
//!   peer's segments ─► handle_segment┘                     peer node ─► its Streams::handle_segment
//!   mesh: node unreachable ─► path_lost          poll_event ─► Opened / Data / Finished / Closed /
//!   timers ─► handle_timeout, poll_timeout                     PathLost
//! ```
//!
//! **Sequencing.** Every segment of a stream carries one sequence number: the OPEN marker is 0
//! (it may carry the first data), then each data segment of at most `max_segment` bytes, then
//! the CLOSE marker, which rides on the last data segment if the node has not taken that yet
//! (so a request sent and closed at once, and a reply, are one segment each). Acknowledgements are cumulative (`acknowledged` = next sequence number
//! expected) and ride on every outgoing segment. Up to `window` segments are unacknowledged at a
//! time; the receiver holds segments that arrive early (within two windows and `max_buffered`
//! bytes) and delivers in order, exactly once. A lost segment is resent when its retransmission
//! timer expires (RFC 6298 estimate, doubling on each expiry up to `max_rto_ms`), on the third
//! duplicate acknowledgement, or when a partial acknowledgement shows it overdue.
//!
//! **Opening.** The opener picks a random 64-bit stream id from the seed. Both ends may pick the
//! same id, so a stream is known by (local endpoint, remote endpoint, id, which side opened it)
//! and every segment from the opener carries `FROM_OPENER`. Until the OPEN marker is acknowledged
//! the opener sets `OPEN` on every segment it sends, so the receiver creates the stream from
//! whichever arrives first even when the path reorders. Any other segment for an unknown stream
//! is answered with a RESET (a RESET itself gets no answer).
//!
//! **Acknowledgements are coalesced.** Receiving marks a stream as owing an acknowledgement; the
//! pure ACK is made only when the node drains [`Streams::poll_segment`] and only if no data
//! segment of that stream went out first to carry it, so a batch of received segments costs at
//! most one pure ACK per stream. Segments are built when polled, so they carry the freshest
//! acknowledgement, and one acknowledged meanwhile is not sent at all.
//!
//! **Ending.** `Closed` once both sides closed and everything we sent was acknowledged; the
//! stream is then remembered for `linger_ms` (bounded by `max_streams`) so a retransmitted CLOSE
//! whose acknowledgement was lost is acknowledged again instead of reset. `PathLost` when data has
//! gone unacknowledged for `liveness_ms`, when the mesh reports the peer's node unreachable
//! ([`Streams::path_lost`]) or when the peer resets the stream. **Liveness is judged only while
//! something is unacknowledged**: an idle stream sends nothing, costs no timer and stays open
//! however long it is quiet; a side that only receives learns of a dead path from the mesh
//! ([`Streams::path_lost`]) or from the RESET its peer sends when it gives up. What the caller
//! does after `PathLost` (the RPC layer falls back to store-carry-forward) is not this module's
//! business.
//!
//! **What it never does.** No I/O, no clock (time arrives as `now`), no randomness but the seed
//! given to [`Streams::new`], no congestion control beyond the fixed window (the mesh paths are
//! short and the window is the bound). Every buffer is bounded (`max_streams`, `max_buffered`,
//! `window`): a full one is an error for a command and a dropped segment for peer input, never
//! growth and never a panic.
//!
//! **How to drive it.** Inputs: [`Streams::handle_segment`], [`Streams::path_lost`],
//! [`Streams::handle_timeout`]. Commands: [`Streams::open`], [`Streams::send`],
//! [`Streams::close`], [`Streams::reset`]. After any of them drain [`Streams::poll_segment`] and
//! [`Streams::poll_event`], then ask [`Streams::poll_timeout`] when to call
//! [`Streams::handle_timeout`]. Getters: [`Streams::unacknowledged`], [`Streams::endpoints`],
//! [`Streams::len`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use wire::{DtnTime, Eid, StreamSegment};

/// Limits and timers of the stream class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// Largest data per segment, bytes (at least 1).
    pub max_segment: usize,
    /// Most unacknowledged segments in flight per stream (at least 1).
    pub window: usize,
    /// Retransmission timeout before the first round-trip sample.
    pub initial_rto: Duration,
    /// Smallest retransmission timeout once round trips were measured.
    pub min_rto: Duration,
    /// Largest retransmission timeout: backoff stops doubling here.
    pub max_rto: Duration,
    /// A stream whose data stays unacknowledged this long has lost its path.
    pub liveness: Duration,
    /// How long a cleanly closed stream is remembered, to acknowledge a late retransmission of
    /// the peer's CLOSE instead of resetting it. About the lifetime of a stream bundle.
    pub linger: Duration,
    /// Most streams at once (open ones; as many closed ones again are remembered).
    pub max_streams: usize,
    /// Most bytes per stream queued or unacknowledged (`send` refuses more), and most bytes per
    /// stream held out of order on receipt.
    pub max_buffered: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            max_segment: 1_200,
            window: 64,
            initial_rto: Duration::from_millis(500),
            min_rto: Duration::from_millis(200),
            // Low, because liveness judges the path by the tries that fit in it: over a path
            // losing 30 % each way (a simulated 30 KB transfer, 400 seeds), a cap of 8 s let 20 %
            // of streams be declared lost, 2 s 6 %, 1 s none. A retry is one segment a second.
            max_rto: Duration::from_secs(1),
            liveness: Duration::from_secs(10),
            linger: Duration::from_secs(60),
            max_streams: 1_024,
            max_buffered: 16 << 20,
        }
    }
}

/// A stream, as known to this node: a local handle, unique per [`Streams`] and never reused.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct StreamId(pub u64);

/// What happened on a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A peer opened a stream to one of our endpoints.
    Opened {
        /// The stream.
        id: StreamId,
        /// Our endpoint.
        local: Eid,
        /// The peer's endpoint.
        remote: Eid,
    },
    /// Data from the peer, in order, exactly once.
    Data {
        /// The stream.
        id: StreamId,
        /// The bytes.
        data: Bytes,
    },
    /// The peer closed its side and all its data was delivered.
    Finished {
        /// The stream.
        id: StreamId,
    },
    /// Both sides closed and everything we sent was acknowledged; the stream's state is freed.
    Closed {
        /// The stream.
        id: StreamId,
    },
    /// The path is lost: data stayed unacknowledged for `liveness_ms`, the peer's node became
    /// unreachable, or the peer reset the stream. The stream's state is freed.
    PathLost {
        /// The stream.
        id: StreamId,
        /// Bytes given to `send` that the peer did not acknowledge: they may not have arrived.
        unacknowledged: u64,
    },
}

/// A stream command that could not be carried out (misuse of the API, or a full buffer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// No such stream: never opened, or already ended (closed, reset or lost).
    #[error("unknown stream")]
    UnknownStream,
    /// Our side of the stream is already closed.
    #[error("the stream is closed for sending")]
    Closed,
    /// The stream holds `max_buffered` bytes already; wait for acknowledgements.
    #[error("stream buffer full")]
    BufferFull,
    /// `max_streams` streams are open already.
    #[error("too many streams")]
    TooManyStreams,
}

/// A segment for the node to carry from our endpoint `from` to the peer's endpoint `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutSegment {
    /// Our endpoint (the bundle's source).
    pub from: Eid,
    /// The peer's endpoint (the bundle's destination).
    pub to: Eid,
    /// The segment.
    pub segment: StreamSegment,
}

/// How a stream is named on the wire, seen from this node: (stream id, opened by us, a 64-bit
/// digest of the local and remote endpoint ids, [`endpoints_digest`]).
///
/// A digest, not the two ids: a stream per RPC call means several lookups, an insert and a
/// removal in these maps per call on every node, and keys holding two endpoint ids were ~100
/// bytes each (moved about in the B-tree nodes), cloned (reference counts, an allocation on a
/// first clone) and dropped every time. Two streams get the same key by chance only if both
/// their random ids and their endpoints' digests collide (about 2^-128 for a given pair); a
/// crafted collision is caught by comparing the endpoints of the stream found
/// ([`Streams::handle_segment`]).
type WireKey = (u64, bool, u64);

/// FNV-1a (64 bits) over the two endpoint ids: deterministic, as everything in this crate is
/// (no per-process hash keys), and cheap for the ~40 bytes it reads.
fn endpoints_digest(local: &Eid, remote: &Eid) -> u64 {
    use std::hash::{Hash, Hasher};
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        fn finish(&self) -> u64 {
            self.0
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    local.hash(&mut h);
    remote.hash(&mut h);
    h.finish()
}

/// A segment given a sequence number and sent at least once (or about to be).
#[derive(Debug)]
struct Sent {
    /// OPEN or CLOSE marker (either may come with data), or 0 for plain data.
    flags: u64,
    data: Bytes,
    sent_at: DtnTime,
    /// Its acknowledgement may give a round-trip sample: it was sent once, and nothing was
    /// resent since (Karn's rule). A segment in flight while an older one is resent may be held
    /// at the receiver until the gap fills, and its acknowledgement would inflate the estimate.
    timed: bool,
    /// In the output queue, waiting for `poll_segment`; it is not queued twice.
    queued: bool,
    /// Handed to the node at least once; until then the OPEN marker may still take data.
    polled: bool,
}

#[derive(Debug)]
struct Stream {
    local: Eid,
    remote: Eid,
    wire_id: u64,
    opened_by_us: bool,
    /// [`endpoints_digest`] of `local` and `remote`, computed once: the stream's [`WireKey`] is
    /// needed again when it is removed and when it ends.
    digest: u64,

    // Sending.
    /// The next sequence number to assign.
    next_seq: u64,
    /// Numbered segments waiting for room in the window: (sequence, flags, data).
    pending: VecDeque<(u64, u64, Bytes)>,
    in_flight: BTreeMap<u64, Sent>,
    /// Every sequence number below this was acknowledged by the peer.
    acked_below: u64,
    /// Data bytes in `pending` and `in_flight`: what `send` accepted and the peer did not yet
    /// acknowledge.
    buffered: usize,
    /// Our CLOSE marker is numbered; `send` refuses more.
    closing: bool,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    /// When the (single, per stream, as in TCP) retransmission timer was last started.
    timer_start: DtnTime,
    /// When the acknowledgements last advanced, or something started to wait for one.
    last_progress: DtnTime,
    dup_acks: u32,

    // Receiving.
    /// The next sequence number expected from the peer.
    recv_next: u64,
    out_of_order: BTreeMap<u64, (u64, Bytes)>,
    out_of_order_bytes: usize,
    /// The peer's CLOSE marker was delivered.
    peer_closed: bool,
}

impl Stream {
    fn wire_key(&self) -> WireKey {
        (self.wire_id, self.opened_by_us, self.digest)
    }

    fn all_acked(&self) -> bool {
        self.pending.is_empty() && self.in_flight.is_empty()
    }

    /// The first sequence number not yet sent: nothing at or above it can be acknowledged.
    fn send_limit(&self) -> u64 {
        self.pending.front().map_or(self.next_seq, |p| p.0)
    }

    fn out(&self, flags: u64, sequence: u64, data: Bytes) -> OutSegment {
        OutSegment {
            from: self.local.clone(),
            to: self.remote.clone(),
            segment: StreamSegment {
                stream: self.wire_id,
                flags: flags | StreamSegment::ACK | opener_flag(self.opened_by_us),
                sequence,
                acknowledged: self.recv_next,
                data,
            },
        }
    }

    fn pure_ack(&self) -> OutSegment {
        // A pure ACK is not sequenced; its sequence number is informative only.
        self.out(0, self.send_limit(), Bytes::new())
    }

    fn rto_deadline(&self) -> Option<DtnTime> {
        (!self.in_flight.is_empty()).then(|| self.timer_start.saturating_add(self.rto))
    }

    fn liveness_deadline(&self, liveness: Duration) -> Option<DtnTime> {
        (!self.in_flight.is_empty()).then(|| self.last_progress + liveness)
    }

    /// Marks the oldest unacknowledged segment for resending and restarts the timer. Returns
    /// its sequence number if it must be queued (it is not queued already).
    fn retransmit_oldest(&mut self, now: DtnTime) -> Option<u64> {
        for sent in self.in_flight.values_mut() {
            sent.timed = false;
        }
        let (&seq, sent) = self.in_flight.iter_mut().next()?;
        sent.sent_at = now;
        self.timer_start = now;
        (!std::mem::replace(&mut sent.queued, true)).then_some(seq)
    }
}

/// What waits in the output queue. Stream segments are built when polled, so that they carry
/// the acknowledgement current then, and are skipped if acknowledged meanwhile.
#[derive(Debug)]
enum Queued {
    Sequenced { id: StreamId, seq: u64 },
    Ready(OutSegment),
}

/// Every stream of one node. Performs no I/O and reads no clock; see the module docs for how to
/// drive it.
#[derive(Debug)]
pub struct Streams {
    config: StreamConfig,
    rng: u64,
    next_local_id: u64,
    /// Boxed: a stream is a few hundred bytes, moved on every insert and removal in its B-tree
    /// node otherwise (a stream per RPC call).
    streams: BTreeMap<StreamId, Box<Stream>>,
    by_wire: BTreeMap<WireKey, StreamId>,
    /// Cleanly closed streams: when they closed, and the sequence number we expected next, for
    /// re-acknowledging.
    ended: BTreeMap<WireKey, (DtnTime, u64)>,
    /// `ended` in the order (and so the time) the streams closed, for expiry and eviction.
    ended_order: VecDeque<(DtnTime, WireKey)>,
    out: VecDeque<Queued>,
    /// Streams that received a sequenced segment and owe the peer an acknowledgement.
    ack_due: BTreeSet<StreamId>,
    events: VecDeque<StreamEvent>,
}

impl Streams {
    /// No streams yet. `seed` is the only source of randomness: it picks the wire ids of the
    /// streams this node opens.
    pub fn new(config: StreamConfig, seed: u64) -> Self {
        // Zeros would stall a stream (no room for a byte or a segment) or spin the driver (a
        // timer due again at the instant it ran): the smallest workable values replace them.
        let max_rto = config.max_rto.max(Duration::from_millis(1));
        let config = StreamConfig {
            max_segment: config.max_segment.max(1),
            window: config.window.max(1),
            initial_rto: config.initial_rto.clamp(Duration::from_millis(1), max_rto),
            min_rto: config.min_rto.clamp(Duration::from_millis(1), max_rto),
            max_rto,
            ..config
        };
        Self {
            config,
            rng: seed,
            next_local_id: 1,
            streams: BTreeMap::new(),
            by_wire: BTreeMap::new(),
            ended: BTreeMap::new(),
            ended_order: VecDeque::new(),
            out: VecDeque::new(),
            ack_due: BTreeSet::new(),
            events: VecDeque::new(),
        }
    }

    // ----- commands -----

    /// Opens a stream from our `local` endpoint to `remote`. The OPEN marker goes out at once and
    /// carries the first data if [`Streams::send`] is called before the node polls it.
    pub fn open(&mut self, now: DtnTime, local: Eid, remote: Eid) -> Result<StreamId, StreamError> {
        if self.streams.len() >= self.config.max_streams {
            return Err(StreamError::TooManyStreams);
        }
        let mut wire_id = self.random();
        let digest = endpoints_digest(&local, &remote);
        // A 64-bit collision among our own streams to one endpoint is unlikely, but it would
        // merge two streams; the loop ends because at most `max_streams` ids are taken.
        while self.by_wire.contains_key(&(wire_id, true, digest)) {
            wire_id = self.random();
        }
        let id = self.insert(now, local, remote, (wire_id, true, digest));
        if let Some(s) = self.streams.get_mut(&id) {
            s.pending.push_back((0, StreamSegment::OPEN, Bytes::new()));
            s.next_seq = 1;
        }
        self.flush(now, id);
        Ok(id)
    }

    /// Queues data on a stream, all or nothing: [`StreamError::BufferFull`] if it would hold
    /// more than `max_buffered` unacknowledged bytes.
    pub fn send(&mut self, now: DtnTime, id: StreamId, data: Bytes) -> Result<(), StreamError> {
        let max_segment = self.config.max_segment;
        let max_buffered = self.config.max_buffered;
        let s = self
            .streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream)?;
        if s.closing {
            return Err(StreamError::Closed);
        }
        if s.buffered.saturating_add(data.len()) > max_buffered {
            return Err(StreamError::BufferFull);
        }
        s.buffered += data.len();
        let mut rest = data;
        // An OPEN marker the node has not taken yet carries the first data: a short exchange
        // then costs one bundle, not two.
        if let Some(open) = s.in_flight.get_mut(&0)
            && s.opened_by_us
            && s.next_seq == 1
            && !open.polled
            && open.data.is_empty()
        {
            open.data = rest.split_to(rest.len().min(max_segment));
        }
        while !rest.is_empty() {
            let chunk = rest.split_to(rest.len().min(max_segment));
            s.pending.push_back((s.next_seq, 0, chunk));
            s.next_seq += 1;
        }
        self.flush(now, id);
        Ok(())
    }

    /// Closes our side: the peer gets `Finished` after everything sent so far. Closing twice is
    /// harmless.
    pub fn close(&mut self, now: DtnTime, id: StreamId) -> Result<(), StreamError> {
        let s = self
            .streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream)?;
        if !s.closing {
            s.closing = true;
            // The CLOSE rides on the last segment the node has not taken yet, as TCP's FIN on
            // its last data: a request sent and closed at once is one segment, and so is a
            // reply. Otherwise it is a marker of its own.
            let last_unsent = match s.pending.back_mut() {
                Some(last) => Some(&mut last.1),
                None => s
                    .in_flight
                    .values_mut()
                    .next_back()
                    .filter(|sent| !sent.polled)
                    .map(|sent| &mut sent.flags),
            };
            match last_unsent {
                Some(flags) => *flags |= StreamSegment::CLOSE,
                None => {
                    s.pending
                        .push_back((s.next_seq, StreamSegment::CLOSE, Bytes::new()));
                    s.next_seq += 1;
                }
            }
            self.flush(now, id);
        }
        Ok(())
    }

    /// Aborts a stream: the peer is sent a RESET (and gets `PathLost`), our state is freed
    /// without an event. Unknown streams are ignored.
    pub fn reset(&mut self, now: DtnTime, id: StreamId) {
        let _ = now; // Part of every command's signature; a reset needs no time.
        if let Some(s) = self.remove(id) {
            self.out.push_back(Queued::Ready(reset_for(&s)));
        }
    }

    // ----- inputs -----

    /// A segment from the peer endpoint `from` to our endpoint `to`.
    pub fn handle_segment(&mut self, now: DtnTime, from: &Eid, to: &Eid, segment: StreamSegment) {
        self.handle_segments(now, from, to, [segment]);
    }

    /// Segments from the peer endpoint `from` to our endpoint `to` (those of one bundle), in
    /// order.
    pub fn handle_segments(
        &mut self,
        now: DtnTime,
        from: &Eid,
        to: &Eid,
        segments: impl IntoIterator<Item = StreamSegment>,
    ) {
        // The endpoints' digest once for the bundle, not once a segment.
        let digest = endpoints_digest(to, from);
        for segment in segments {
            self.handle_one_segment(now, from, to, digest, segment);
        }
    }

    /// [`Streams::handle_segment`], given `digest` = `endpoints_digest(to, from)`.
    fn handle_one_segment(
        &mut self,
        now: DtnTime,
        from: &Eid,
        to: &Eid,
        digest: u64,
        segment: StreamSegment,
    ) {
        let flags = segment.flags;
        let from_opener = flags & StreamSegment::FROM_OPENER != 0;
        let is_reset = flags & StreamSegment::RESET != 0;
        let sequenced =
            flags & (StreamSegment::OPEN | StreamSegment::CLOSE) != 0 || !segment.data.is_empty();
        let key = (segment.stream, !from_opener, digest);
        // The digest in the key is not collision-resistant (FNV): a stream found by it is ours
        // only if its endpoints are the segment's too, so that a peer that crafts endpoint ids
        // with a live stream's digest can neither feed that stream nor take its place.
        let found = self.by_wire.get(&key).copied();
        let known = found.filter(|id| {
            self.streams
                .get(id)
                .is_some_and(|s| s.local == *to && s.remote == *from)
        });
        let id = match known {
            Some(id) => id,
            None => {
                if is_reset {
                    return; // Never answer a RESET: two ends must not reset each other forever.
                }
                if let Some(&(_, recv_next)) = self.ended.get(&key) {
                    // The peer missed the acknowledgement of its last segments (its CLOSE):
                    // repeat it. A bare acknowledgement needs no answer.
                    if sequenced {
                        self.out.push_back(Queued::Ready(bare_segment(
                            to,
                            from,
                            segment.stream,
                            StreamSegment::ACK | opener_flag(!from_opener),
                            recv_next,
                        )));
                    }
                    return;
                }
                let opens = from_opener && flags & StreamSegment::OPEN != 0;
                if !opens || found.is_some() || self.streams.len() >= self.config.max_streams {
                    // Not a stream we know, its key taken by another stream, or no room for it:
                    // tell the sender to stop.
                    self.out.push_back(Queued::Ready(bare_segment(
                        to,
                        from,
                        segment.stream,
                        StreamSegment::RESET | opener_flag(!from_opener),
                        0,
                    )));
                    return;
                }
                let id = self.insert(now, to.clone(), from.clone(), key);
                self.events.push_back(StreamEvent::Opened {
                    id,
                    local: to.clone(),
                    remote: from.clone(),
                });
                id
            }
        };
        if is_reset {
            self.lose(id);
            return;
        }
        if flags & StreamSegment::ACK != 0 {
            self.handle_ack(now, id, segment.acknowledged, !sequenced);
        }
        if sequenced {
            self.receive(id, segment.sequence, flags, segment.data);
        }
        self.flush(now, id);
        self.close_if_done(now, id);
    }

    /// The mesh says the node `remote_node` (`dtn://x/`; any endpoint of it will do) is
    /// unreachable: every stream whose remote endpoint is on it ends with `PathLost` at once. No
    /// RESET is sent, as there is no path to send it on.
    pub fn path_lost(&mut self, now: DtnTime, remote_node: &Eid) {
        let _ = now; // Part of every input's signature; losing a path needs no time.
        let node = remote_node.node_id();
        let lost: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| s.remote.node_id() == node)
            .map(|(&id, _)| id)
            .collect();
        for id in lost {
            self.lose(id);
        }
    }

    /// Runs the timers due at `now`: retransmissions and liveness.
    pub fn handle_timeout(&mut self, now: DtnTime) {
        self.expire_ended(now);
        let liveness = self.config.liveness;
        let max_rto = self.config.max_rto;
        let due: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| {
                s.rto_deadline().is_some_and(|t| t <= now)
                    || s.liveness_deadline(liveness).is_some_and(|t| t <= now)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            if s.liveness_deadline(liveness).is_some_and(|t| t <= now) {
                // Tell the peer, if it can still hear us: a side that only receives has no
                // timer of its own and would otherwise wait for the mesh to notice.
                let reset = reset_for(s);
                self.lose(id);
                self.out.push_back(Queued::Ready(reset));
                continue;
            }
            // Resend only the oldest segment: the receiver holds the later ones out of order,
            // and its acknowledgement says what else is missing.
            s.rto = s.rto.saturating_mul(2).min(max_rto);
            if let Some(seq) = s.retransmit_oldest(now) {
                self.out.push_back(Queued::Sequenced { id, seq });
            }
        }
    }

    // ----- outputs -----

    /// When [`Streams::handle_timeout`] is next due; `None` when nothing is unacknowledged.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        let liveness = self.config.liveness;
        self.streams
            .values()
            .flat_map(|s| [s.rto_deadline(), s.liveness_deadline(liveness)])
            .flatten()
            .min()
    }

    /// The next segment for the node to carry. Pure acknowledgements come last, one per stream
    /// that owes one and sent no data segment to carry it.
    pub fn poll_segment(&mut self) -> Option<OutSegment> {
        self.poll_data_segment().or_else(|| self.poll_pure_ack())
    }

    /// Whether a stream owes its peer a pure acknowledgement ([`Streams::poll_pure_ack`]).
    pub fn acks_due(&self) -> bool {
        !self.ack_due.is_empty()
    }

    /// Whether there is anything for the node to carry: a queued segment
    /// ([`Streams::poll_data_segment`]) or an owed acknowledgement ([`Streams::poll_pure_ack`]).
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.ack_due.is_empty()
    }

    /// The next segment for the node to carry, except pure acknowledgements: a node that polls
    /// these later, once its application answered what arrived, lets a reply carry the
    /// acknowledgement instead.
    pub fn poll_data_segment(&mut self) -> Option<OutSegment> {
        while let Some(queued) = self.out.pop_front() {
            match queued {
                Queued::Ready(out) => return Some(out),
                Queued::Sequenced { id, seq } => {
                    let Some(s) = self.streams.get_mut(&id) else {
                        continue; // Ended meanwhile.
                    };
                    let Some(sent) = s.in_flight.get_mut(&seq) else {
                        continue; // Acknowledged meanwhile.
                    };
                    sent.queued = false;
                    sent.polled = true;
                    let (flags, data) = (sent.flags, sent.data.clone());
                    // Until the OPEN marker is acknowledged every segment may create the stream
                    // at the receiver (see the module docs).
                    let open = if s.opened_by_us && s.acked_below == 0 {
                        StreamSegment::OPEN
                    } else {
                        0
                    };
                    self.ack_due.remove(&id);
                    return Some(s.out(flags | open, seq, data));
                }
            }
        }
        None
    }

    /// The next pure acknowledgement owed (one per stream that sent no data segment to carry it).
    pub fn poll_pure_ack(&mut self) -> Option<OutSegment> {
        while let Some(id) = self.ack_due.pop_first() {
            if let Some(s) = self.streams.get(&id) {
                return Some(s.pure_ack());
            }
        }
        None
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    // ----- getters -----

    /// Bytes given to [`Streams::send`] on a stream and not yet acknowledged by the peer
    /// (queued or in flight); `None` for an unknown stream.
    pub fn unacknowledged(&self, id: StreamId) -> Option<u64> {
        self.streams.get(&id).map(|s| s.buffered as u64)
    }

    /// The local and remote endpoints of a stream.
    pub fn endpoints(&self, id: StreamId) -> Option<(&Eid, &Eid)> {
        self.streams.get(&id).map(|s| (&s.local, &s.remote))
    }

    /// Number of open streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    // ----- internals -----

    /// A new stream between `local` and `remote`, named on the wire by `key` (whose digest is
    /// theirs).
    fn insert(&mut self, now: DtnTime, local: Eid, remote: Eid, key: WireKey) -> StreamId {
        let id = StreamId(self.next_local_id);
        self.next_local_id += 1;
        let (wire_id, opened_by_us, digest) = key;
        // A stream id reused by the peer within the linger time starts afresh.
        self.ended.remove(&key);
        self.by_wire.insert(key, id);
        self.streams.insert(
            id,
            Box::new(Stream {
                local,
                remote,
                wire_id,
                opened_by_us,
                digest,
                next_seq: 0,
                pending: VecDeque::new(),
                in_flight: BTreeMap::new(),
                acked_below: 0,
                buffered: 0,
                closing: false,
                srtt: None,
                rttvar: Duration::ZERO,
                rto: self.config.initial_rto,
                timer_start: now,
                last_progress: now,
                dup_acks: 0,
                recv_next: 0,
                out_of_order: BTreeMap::new(),
                out_of_order_bytes: 0,
                peer_closed: false,
            }),
        );
        id
    }

    fn remove(&mut self, id: StreamId) -> Option<Box<Stream>> {
        let s = self.streams.remove(&id)?;
        self.by_wire.remove(&s.wire_key());
        self.ack_due.remove(&id);
        Some(s)
    }

    fn lose(&mut self, id: StreamId) {
        if let Some(s) = self.remove(id) {
            self.events.push_back(StreamEvent::PathLost {
                id,
                unacknowledged: s.buffered as u64,
            });
        }
    }

    /// Sends what the window allows.
    fn flush(&mut self, now: DtnTime, id: StreamId) {
        let window = self.config.window;
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        while s.in_flight.len() < window {
            let Some((seq, flags, data)) = s.pending.pop_front() else {
                break;
            };
            if s.in_flight.is_empty() {
                // Liveness and the timer count from when something starts to wait for an
                // answer, not from the last answer of an idle stream.
                s.last_progress = now;
                s.timer_start = now;
            }
            s.in_flight.insert(
                seq,
                Sent {
                    flags,
                    data,
                    sent_at: now,
                    timed: true,
                    queued: true,
                    polled: false,
                },
            );
            self.out.push_back(Queued::Sequenced { id, seq });
        }
    }

    fn handle_ack(&mut self, now: DtnTime, id: StreamId, acknowledged: u64, pure: bool) {
        let config = &self.config;
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        // Never believe an acknowledgement of what was not sent.
        let acknowledged = acknowledged.min(s.send_limit());
        if acknowledged <= s.acked_below {
            // The third duplicate pure acknowledgement says the oldest segment was lost while
            // later ones arrived: resend it now rather than at the timeout (fast retransmit).
            // Acknowledgements riding on the peer's data repeat for another reason.
            if pure && acknowledged == s.acked_below && !s.in_flight.is_empty() {
                s.dup_acks = s.dup_acks.saturating_add(1);
                if s.dup_acks == 3
                    && let Some(seq) = s.retransmit_oldest(now)
                {
                    self.out.push_back(Queued::Sequenced { id, seq });
                }
            }
            return;
        }
        s.dup_acks = 0;
        s.acked_below = acknowledged;
        // Taken from the front one by one: `split_off` allocated a node for the part kept even
        // when nothing was left (every acknowledgement of a one-segment stream, as an RPC call's).
        while let Some(entry) = s.in_flight.first_entry()
            && *entry.key() < acknowledged
        {
            let (seq, sent) = entry.remove_entry();
            s.buffered = s.buffered.saturating_sub(sent.data.len());
            // Round-trip samples only from the segment this acknowledgement answers directly,
            // and only if it is still timed (see `Sent::timed`).
            if sent.timed && seq + 1 == acknowledged {
                let sample = now - sent.sent_at;
                match s.srtt {
                    None => {
                        s.srtt = Some(sample);
                        s.rttvar = sample / 2;
                    }
                    Some(srtt) => {
                        s.rttvar = (3 * s.rttvar + srtt.abs_diff(sample)) / 4;
                        s.srtt = Some((7 * srtt + sample) / 8);
                    }
                }
            }
        }
        s.rto = s
            .srtt
            .map_or(config.initial_rto, |srtt| {
                srtt.saturating_add(s.rttvar.saturating_mul(4))
            })
            .clamp(config.min_rto, config.max_rto);
        s.last_progress = now;
        s.timer_start = now;
        // A partial acknowledgement: if the new oldest segment went out more than a round trip
        // ago it was lost as well; resend it without waiting for the timer.
        let round_trip = s
            .srtt
            .unwrap_or(config.initial_rto)
            .saturating_add(s.rttvar);
        if s.in_flight
            .values()
            .next()
            .is_some_and(|sent| now - sent.sent_at > round_trip)
            && let Some(seq) = s.retransmit_oldest(now)
        {
            self.out.push_back(Queued::Sequenced { id, seq });
        }
    }

    fn receive(&mut self, id: StreamId, seq: u64, flags: u64, data: Bytes) {
        let reach = (self.config.window as u64).saturating_mul(2);
        let max_buffered = self.config.max_buffered;
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        // Duplicates are acknowledged again too: the peer may have missed the first answer.
        self.ack_due.insert(id);
        if seq < s.recv_next || s.peer_closed || s.out_of_order.contains_key(&seq) {
            // A duplicate, or (after the peer's CLOSE) something a correct peer never sends.
            return;
        }
        if seq > s.recv_next {
            // Hold it until the gap fills, within bounds; past them it is dropped and comes
            // again once the gap is acknowledged.
            if seq - s.recv_next < reach
                && s.out_of_order_bytes.saturating_add(data.len()) <= max_buffered
            {
                s.out_of_order_bytes += data.len();
                s.out_of_order.insert(seq, (flags, data));
            }
            return;
        }
        let mut next = Some((flags, data));
        while let Some((flags, data)) = next {
            s.recv_next += 1;
            if !data.is_empty() {
                self.events.push_back(StreamEvent::Data { id, data });
            }
            if flags & StreamSegment::CLOSE != 0 {
                s.peer_closed = true;
                self.events.push_back(StreamEvent::Finished { id });
                // Whatever is held beyond the CLOSE a correct peer never sent.
                s.out_of_order.clear();
                s.out_of_order_bytes = 0;
                break;
            }
            next = s.out_of_order.remove(&s.recv_next).inspect(|(_, d)| {
                s.out_of_order_bytes -= d.len();
            });
        }
    }

    /// Frees a stream once both sides closed and everything we sent was acknowledged, and
    /// remembers it for a while (see [`StreamConfig::linger_ms`]).
    fn close_if_done(&mut self, now: DtnTime, id: StreamId) {
        let done = self
            .streams
            .get(&id)
            .is_some_and(|s| s.closing && s.peer_closed && s.all_acked());
        if !done {
            return;
        }
        let owes_ack = self.ack_due.contains(&id);
        let Some(s) = self.remove(id) else {
            return;
        };
        if owes_ack {
            // The acknowledgement of the peer's CLOSE is made now, as the stream is gone by the
            // time the node polls.
            self.out.push_back(Queued::Ready(s.pure_ack()));
        }
        self.events.push_back(StreamEvent::Closed { id });
        let key = s.wire_key();
        if self.config.max_streams == 0 {
            return;
        }
        while self.ended_order.len() >= self.config.max_streams {
            if let Some((at, old)) = self.ended_order.pop_front()
                && self.ended.get(&old).is_some_and(|e| e.0 == at)
            {
                self.ended.remove(&old);
            }
        }
        self.ended.insert(key, (now, s.recv_next));
        self.ended_order.push_back((now, key));
    }

    /// Forgets closed streams older than the linger time. Not on a timer of its own: the list is
    /// bounded, and an entry kept a little longer does no harm.
    fn expire_ended(&mut self, now: DtnTime) {
        let linger = self.config.linger;
        while let Some((at, key)) = self.ended_order.front() {
            if now - *at < linger {
                break;
            }
            // Only if it is still the same entry: a key reused and closed again is newer.
            if self.ended.get(key).is_some_and(|e| e.0 == *at) {
                self.ended.remove(key);
            }
            self.ended_order.pop_front();
        }
    }

    /// splitmix64 over the seed: distinct, well-mixed ids even from neighbouring seeds.
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn opener_flag(opened_by_us: bool) -> u64 {
    if opened_by_us {
        StreamSegment::FROM_OPENER
    } else {
        0
    }
}

fn reset_for(s: &Stream) -> OutSegment {
    bare_segment(
        &s.local,
        &s.remote,
        s.wire_id,
        StreamSegment::RESET | opener_flag(s.opened_by_us),
        0,
    )
}

/// A segment that carries no sequenced content (an acknowledgement or a reset).
fn bare_segment(from: &Eid, to: &Eid, stream: u64, flags: u64, acknowledged: u64) -> OutSegment {
    OutSegment {
        from: from.clone(),
        to: to.clone(),
        segment: StreamSegment {
            stream,
            flags,
            sequence: 0,
            acknowledged,
            data: Bytes::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ep(s: &str) -> Eid {
        s.parse().unwrap()
    }

    fn message(len: usize, salt: u8) -> Bytes {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 8) as u8 ^ salt)
            .collect::<Vec<u8>>()
            .into()
    }

    fn seg(
        stream: u64,
        flags: u64,
        sequence: u64,
        acknowledged: u64,
        data: &[u8],
    ) -> StreamSegment {
        StreamSegment {
            stream,
            flags,
            sequence,
            acknowledged,
            data: Bytes::copy_from_slice(data),
        }
    }

    fn drain(s: &mut Streams) -> Vec<OutSegment> {
        std::iter::from_fn(|| s.poll_segment()).collect()
    }

    fn events(s: &mut Streams) -> Vec<StreamEvent> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    const O: u64 = StreamSegment::OPEN;
    const C: u64 = StreamSegment::CLOSE;
    const A: u64 = StreamSegment::ACK;
    const R: u64 = StreamSegment::RESET;
    const F: u64 = StreamSegment::FROM_OPENER;

    /// Two `Streams` joined by a seeded channel that loses, duplicates and reorders, in virtual
    /// time. Every segment either side emits is recorded in `trace`.
    struct Pair {
        ends: [Streams; 2],
        names: [Eid; 2],
        now: DtnTime,
        rng: u64,
        loss_percent: u64,
        in_flight: Vec<(DtnTime, usize, OutSegment)>,
        events: [Vec<StreamEvent>; 2],
        trace: Vec<(DtnTime, usize, OutSegment)>,
        silent: bool,
    }

    impl Pair {
        fn new(config: StreamConfig, seed: u64, loss_percent: u64) -> Self {
            Self {
                ends: [
                    Streams::new(config.clone(), seed),
                    Streams::new(config, seed ^ 0xb),
                ],
                names: [ep("dtn://a/app"), ep("dtn://b/app")],
                now: DtnTime::from_millis(1_000),
                rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                loss_percent,
                in_flight: Vec::new(),
                events: [Vec::new(), Vec::new()],
                trace: Vec::new(),
                silent: false,
            }
        }

        fn rand(&mut self, n: u64) -> u64 {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.rng % n
        }

        fn open(&mut self, side: usize) -> StreamId {
            let (l, r) = (self.names[side].clone(), self.names[1 - side].clone());
            self.ends[side].open(self.now, l, r).unwrap()
        }

        /// Moves what both ends emit into the channel (or the void) and records their events.
        fn collect(&mut self) {
            for side in 0..2 {
                while let Some(out) = self.ends[side].poll_segment() {
                    self.trace.push((self.now, side, out.clone()));
                    if self.silent || self.rand(100) < self.loss_percent {
                        continue;
                    }
                    // 10-50 ms one way, so segments overtake each other; 5 % arrive twice.
                    let delay = 10 + self.rand(40);
                    if self.rand(100) < 5 {
                        let later = self.now
                            + Duration::from_millis(delay)
                            + Duration::from_millis(self.rand(100));
                        self.in_flight.push((later, side, out.clone()));
                    }
                    self.in_flight
                        .push((self.now + Duration::from_millis(delay), side, out));
                }
                while let Some(e) = self.ends[side].poll_event() {
                    self.events[side].push(e);
                }
            }
        }

        /// Runs the network until `until`, or until nothing is in flight and no timer is set.
        fn run(&mut self, until: DtnTime) {
            self.collect();
            loop {
                let next_arrival = self.in_flight.iter().map(|f| f.0).min();
                let next_timer = self.ends.iter().filter_map(|e| e.poll_timeout()).min();
                let Some(t) = next_arrival.into_iter().chain(next_timer).min() else {
                    break;
                };
                if t > until {
                    break;
                }
                self.now = self.now.max(t);
                let (due, rest): (Vec<_>, Vec<_>) =
                    self.in_flight.drain(..).partition(|f| f.0 <= self.now);
                self.in_flight = rest;
                for (_, from_side, out) in due {
                    let to = 1 - from_side;
                    self.ends[to].handle_segment(self.now, &out.from, &out.to, out.segment);
                    self.collect();
                }
                for end in &mut self.ends {
                    if end.poll_timeout().is_some_and(|d| d <= self.now) {
                        end.handle_timeout(self.now);
                    }
                }
                self.collect();
            }
            // Virtual time passes to `until` even when nothing happens.
            self.now = self.now.max(until);
        }

        fn received(&self, side: usize, id: StreamId) -> Vec<u8> {
            self.events[side]
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::Data { id: i, data } if *i == id => Some(data.to_vec()),
                    _ => None,
                })
                .flatten()
                .collect()
        }

        fn opened(&self, side: usize) -> Vec<StreamId> {
            self.events[side]
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::Opened { id, .. } => Some(*id),
                    _ => None,
                })
                .collect()
        }

        fn count(&self, side: usize, f: impl Fn(&StreamEvent) -> bool) -> usize {
            self.events[side].iter().filter(|e| f(e)).count()
        }
    }

    fn is_lost(e: &StreamEvent) -> bool {
        matches!(e, StreamEvent::PathLost { .. })
    }

    /// Both sides send and close over a lossy, duplicating, reordering channel; with a liveness
    /// long enough to ride out any loss streak, everything arrives exactly once, in order, and
    /// both sides end with `Closed`.
    /// The maps key a stream by a digest of its endpoints, which a peer could collide on
    /// purpose: a segment whose key finds a stream with other endpoints neither reaches that
    /// stream nor opens one in its place, and the stream goes on for its own peer.
    #[test]
    fn a_crafted_key_collision_neither_feeds_nor_replaces_the_stream() {
        let (me, peer, evil) = (ep("dtn://me/app"), ep("dtn://b/app"), ep("dtn://evil/app"));
        let mut s = Streams::new(StreamConfig::default(), 1);
        s.handle_segment(
            DtnTime::from_millis(1_000),
            &peer,
            &me,
            seg(7, O | F, 0, 0, b"hi"),
        );
        let opened = events(&mut s);
        let Some(StreamEvent::Opened { id, .. }) = opened.first() else {
            panic!("not opened: {opened:?}");
        };
        let id = *id;
        drain(&mut s);
        // What a colliding digest would make: evil's key finds the stream of `peer`.
        s.by_wire
            .insert((7, false, endpoints_digest(&me, &evil)), id);
        for flags in [O | F, F, R | F] {
            s.handle_segment(
                DtnTime::from_millis(1_010),
                &evil,
                &me,
                seg(7, flags, 1, 0, b"forged"),
            );
        }
        assert_eq!(
            events(&mut s),
            Vec::new(),
            "evil reached or opened a stream"
        );
        let out = drain(&mut s);
        assert!(
            out.iter().all(|o| o.to == evil && o.segment.flags & R != 0),
            "{out:?}"
        );
        assert_eq!(out.len(), 2, "a RESET for each but the RESET: {out:?}");
        // The stream still takes its own peer's data.
        s.handle_segment(
            DtnTime::from_millis(1_020),
            &peer,
            &me,
            seg(7, F, 1, 0, b" there"),
        );
        assert_eq!(
            events(&mut s),
            vec![StreamEvent::Data {
                id,
                data: Bytes::from_static(b" there")
            }]
        );
    }

    #[test]
    fn data_arrives_exactly_once_in_order_at_up_to_30_percent_loss() {
        let config = StreamConfig {
            liveness: Duration::from_millis(600_000),
            ..StreamConfig::default()
        };
        for loss in [0, 10, 20, 30] {
            for seed in 1..=40 {
                let mut p = Pair::new(config.clone(), seed, loss);
                let ab = p.open(0);
                let there = message(40_000 + seed as usize * 37, seed as u8);
                let back = message(9_000, !seed as u8);
                p.ends[0].send(p.now, ab, there.clone()).unwrap();
                p.ends[0].close(p.now, ab).unwrap();
                p.run(p.now + Duration::from_millis(2_000));
                let ba = *p.opened(1).first().unwrap_or_else(|| {
                    panic!("seed {seed} loss {loss}: not opened {:?}", p.events[1])
                });
                p.ends[1].send(p.now, ba, back.clone()).unwrap();
                p.ends[1].close(p.now, ba).unwrap();
                p.run(p.now + Duration::from_millis(3_600_000));
                let what = format!("seed {seed} loss {loss}");
                assert_eq!(p.received(1, ba), there.to_vec(), "{what}");
                assert_eq!(p.received(0, ab), back.to_vec(), "{what}");
                for (side, id) in [(0, ab), (1, ba)] {
                    let evs = &p.events[side];
                    assert_eq!(
                        p.count(side, |e| *e == StreamEvent::Finished { id }),
                        1,
                        "{what}"
                    );
                    // Closed is the stream's last event, after its Finished.
                    assert_eq!(
                        evs.iter().rev().find(|e| match e {
                            StreamEvent::Data { id: i, .. }
                            | StreamEvent::Finished { id: i }
                            | StreamEvent::Closed { id: i }
                            | StreamEvent::PathLost { id: i, .. }
                            | StreamEvent::Opened { id: i, .. } => *i == id,
                        }),
                        Some(&StreamEvent::Closed { id }),
                        "{what}: {evs:?}"
                    );
                    assert!(p.ends[side].is_empty(), "{what}");
                }
                assert_eq!(p.opened(1).len(), 1, "{what}");
            }
        }
    }

    /// With the default 10 s liveness a long enough loss streak may end a stream, but then with
    /// `PathLost` on the sender, and what arrived is still an in-order, duplicate-free prefix.
    #[test]
    fn default_liveness_at_30_percent_loss_completes_or_reports_the_loss() {
        let mut lost = 0;
        for seed in 1..=40 {
            let mut p = Pair::new(StreamConfig::default(), seed, 30);
            let id = p.open(0);
            let data = message(30_000, seed as u8);
            p.ends[0].send(p.now, id, data.clone()).unwrap();
            p.ends[0].close(p.now, id).unwrap();
            p.run(p.now + Duration::from_millis(600_000));
            let theirs = p.opened(1);
            let got = theirs.first().map_or(Vec::new(), |&t| p.received(1, t));
            assert!(data.starts_with(&got), "seed {seed}: not a prefix");
            if p.count(0, is_lost) == 1 {
                lost += 1;
            } else {
                assert_eq!(got.len(), data.len(), "seed {seed}");
                assert_eq!(p.count(0, |e| *e == StreamEvent::Closed { id }), 0);
                assert_eq!(p.ends[0].unacknowledged(id), Some(0), "seed {seed}");
            }
        }
        assert!(lost <= 2, "{lost} of 40 streams lost their path");
    }

    #[test]
    fn close_handshake_finishes_the_receiver_and_closes_both() {
        let mut p = Pair::new(StreamConfig::default(), 3, 0);
        let ab = p.open(0);
        p.ends[0].send(p.now, ab, message(3_000, 1)).unwrap();
        p.ends[0].close(p.now, ab).unwrap();
        assert_eq!(
            p.ends[0].send(p.now, ab, message(1, 1)),
            Err(StreamError::Closed)
        );
        p.run(p.now + Duration::from_millis(1_000));
        let ba = p.opened(1)[0];
        assert_eq!(p.events[1].last(), Some(&StreamEvent::Finished { id: ba }));
        // Half closed: B may still send, A still receives.
        assert_eq!(p.ends[0].len(), 1);
        p.ends[1].send(p.now, ba, message(100, 2)).unwrap();
        p.ends[1].close(p.now, ba).unwrap();
        p.run(p.now + Duration::from_millis(5_000));
        assert_eq!(p.received(0, ab), message(100, 2).to_vec());
        assert!(p.events[0].ends_with(&[
            StreamEvent::Finished { id: ab },
            StreamEvent::Closed { id: ab }
        ]));
        assert_eq!(p.events[1].last(), Some(&StreamEvent::Closed { id: ba }));
        assert!(p.ends[0].is_empty() && p.ends[1].is_empty());
        assert_eq!(p.ends[0].poll_timeout(), None);

        // A's final acknowledgement may be lost: B's CLOSE, sent again, is acknowledged again
        // rather than reset.
        let close = p
            .trace
            .iter()
            .rev()
            .find(|(_, side, o)| *side == 1 && o.segment.flags & C != 0)
            .map(|(_, _, o)| o.clone())
            .unwrap();
        p.ends[0].handle_segment(p.now, &close.from, &close.to, close.segment.clone());
        let answer = drain(&mut p.ends[0]);
        assert_eq!(answer.len(), 1);
        assert_eq!(answer[0].segment.flags, A | F);
        assert_eq!(answer[0].segment.acknowledged, close.segment.sequence + 1);
        assert!(events(&mut p.ends[0]).is_empty());
        // Once the linger time is over it is an unknown stream like any other.
        let later = p.now + StreamConfig::default().linger;
        p.ends[0].handle_timeout(later);
        p.ends[0].handle_segment(later, &close.from, &close.to, close.segment);
        assert_eq!(drain(&mut p.ends[0])[0].segment.flags, R | F);
    }

    #[test]
    fn silence_while_data_waits_is_a_lost_path_but_idleness_is_not() {
        let config = StreamConfig::default();
        let mut p = Pair::new(config.clone(), 5, 0);
        let id = p.open(0);
        p.run(p.now + Duration::from_millis(1_000));
        let theirs = p.opened(1)[0];
        // Idle for an hour: no timer, no traffic, still open on both sides.
        assert_eq!(p.ends[0].poll_timeout(), None);
        assert_eq!(p.ends[1].poll_timeout(), None);
        let before = p.trace.len();
        p.run(p.now + Duration::from_millis(3_600_000));
        assert_eq!(p.trace.len(), before);
        assert_eq!((p.ends[0].len(), p.ends[1].len()), (1, 1));

        p.silent = true;
        let start = p.now;
        p.ends[0].send(start, id, message(5_000, 3)).unwrap();
        p.run(start + config.liveness - Duration::from_millis(1));
        assert_eq!(p.count(0, is_lost), 0);
        p.run(start + config.liveness);
        assert_eq!(
            p.events[0].last(),
            Some(&StreamEvent::PathLost {
                id,
                unacknowledged: 5_000
            })
        );
        assert!(p.ends[0].is_empty());
        assert_eq!(p.ends[0].poll_timeout(), None);
        // Retransmissions backed off, and the peer was told, for when it can hear again.
        let sent: Vec<_> = p.trace[before..]
            .iter()
            .map(|(t, _, o)| (*t - start, o))
            .collect();
        assert!(sent.len() < 20, "{} segments", sent.len());
        assert_eq!(sent.last().unwrap().1.segment.flags, R | F);
        p.silent = false;
        let reset = sent.last().unwrap().1.clone();
        p.ends[1].handle_segment(p.now, &reset.from, &reset.to, reset.segment);
        assert_eq!(
            events(&mut p.ends[1]),
            [StreamEvent::PathLost {
                id: theirs,
                unacknowledged: 0
            }]
        );
    }

    #[test]
    fn an_unreachable_node_loses_its_streams_at_once() {
        let mut p = Pair::new(StreamConfig::default(), 6, 0);
        let id = p.open(0);
        let other = p.ends[0]
            .open(p.now, ep("dtn://a/x"), ep("dtn://c/y"))
            .unwrap();
        p.ends[0].send(p.now, id, message(2_000, 0)).unwrap();
        drain(&mut p.ends[0]);
        p.ends[0].path_lost(p.now, &ep("dtn://d/"));
        assert_eq!(p.ends[0].len(), 2, "another node's loss changes nothing");
        p.ends[0].path_lost(p.now, &ep("dtn://b/"));
        assert_eq!(
            events(&mut p.ends[0]),
            [StreamEvent::PathLost {
                id,
                unacknowledged: 2_000
            }]
        );
        // No RESET: there is no path to send it on.
        assert!(drain(&mut p.ends[0]).is_empty());
        assert_eq!(p.ends[0].len(), 1);
        assert_eq!(
            p.ends[0].send(p.now, id, message(1, 0)),
            Err(StreamError::UnknownStream)
        );
        // Any endpoint of the node names it.
        p.ends[0].path_lost(p.now, &ep("dtn://c/other"));
        assert_eq!(events(&mut p.ends[0]).len(), 1);
        assert!(p.ends[0].unacknowledged(other).is_none());
    }

    #[test]
    fn streams_opened_from_both_sides_with_one_id_stay_apart() {
        let mut p = Pair::new(StreamConfig::default(), 7, 10);
        // The same seed on both ends: both pick the same wire id for their first stream.
        p.ends[1] = Streams::new(StreamConfig::default(), 7);
        let ab = p.open(0);
        let ba = p.open(1);
        let ids: Vec<u64> = [0, 1]
            .into_iter()
            .map(|side| {
                let out = p.ends[side].poll_segment().unwrap();
                let stream = out.segment.stream;
                p.in_flight
                    .push((p.now + Duration::from_millis(10), side, out));
                stream
            })
            .collect();
        assert_eq!(ids[0], ids[1]);
        p.ends[0].send(p.now, ab, message(5_000, 1)).unwrap();
        p.ends[1].send(p.now, ba, message(7_000, 2)).unwrap();
        p.run(p.now + Duration::from_millis(10_000));
        let (at_b, at_a) = (p.opened(1)[0], p.opened(0)[0]);
        assert_ne!(at_b, ba);
        assert_ne!(at_a, ab);
        assert_eq!(p.received(1, at_b), message(5_000, 1).to_vec());
        assert_eq!(p.received(0, at_a), message(7_000, 2).to_vec());
        assert!(p.received(0, ab).is_empty() && p.received(1, ba).is_empty());
        assert_eq!((p.ends[0].len(), p.ends[1].len()), (2, 2));
        assert_eq!(p.ends[0].unacknowledged(ab), Some(0));
    }

    #[test]
    fn bounded_buffers_give_buffer_full_and_bounded_receipt() {
        let config = StreamConfig {
            max_buffered: 1_000,
            max_segment: 100,
            window: 4,
            max_streams: 1,
            ..StreamConfig::default()
        };
        let mut s = Streams::new(config.clone(), 1);
        let id = s
            .open(DtnTime::from_millis(0), ep("dtn://a/x"), ep("dtn://b/y"))
            .unwrap();
        assert_eq!(
            s.send(DtnTime::from_millis(0), id, message(1_001, 0)),
            Err(StreamError::BufferFull)
        );
        s.send(DtnTime::from_millis(0), id, message(600, 0))
            .unwrap();
        s.send(DtnTime::from_millis(0), id, message(400, 0))
            .unwrap();
        assert_eq!(
            s.send(DtnTime::from_millis(0), id, message(1, 0)),
            Err(StreamError::BufferFull)
        );
        assert_eq!(s.unacknowledged(id), Some(1_000));
        // Only the window is in flight: the OPEN marker (with the first 100 bytes) and three more.
        let out = drain(&mut s);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|o| o.segment.data.len() <= 100));
        assert_eq!(out[0].segment.flags, O | A | F);
        assert_eq!(out[0].segment.data.len(), 100);
        // Acknowledging frees room.
        let ack = seg(out[0].segment.stream, A, 0, 2, b"");
        s.handle_segment(
            DtnTime::from_millis(10),
            &ep("dtn://b/y"),
            &ep("dtn://a/x"),
            ack,
        );
        assert_eq!(s.unacknowledged(id), Some(800));
        s.send(DtnTime::from_millis(10), id, message(200, 0))
            .unwrap();
        assert_eq!(drain(&mut s).len(), 2, "two more fit the window");
        assert_eq!(
            s.open(DtnTime::from_millis(10), ep("dtn://a/x"), ep("dtn://c/y")),
            Err(StreamError::TooManyStreams)
        );
        assert_eq!(
            s.send(DtnTime::from_millis(0), StreamId(99), Bytes::new()),
            Err(StreamError::UnknownStream)
        );
        assert_eq!(
            s.close(DtnTime::from_millis(0), StreamId(99)),
            Err(StreamError::UnknownStream)
        );

        // Receipt: out-of-order data is held within two windows and max_buffered bytes.
        let mut r = Streams::new(config, 2);
        let (from, to) = (ep("dtn://b/y"), ep("dtn://a/x"));
        r.handle_segment(
            DtnTime::from_millis(0),
            &from,
            &to,
            seg(9, O | F, 0, 0, b""),
        );
        let big = [7u8; 400];
        for seq in 2..20 {
            r.handle_segment(DtnTime::from_millis(0), &from, &to, seg(9, F, seq, 0, &big));
        }
        let stream = r.streams.values().next().unwrap();
        assert_eq!(
            stream.out_of_order.keys().copied().collect::<Vec<_>>(),
            [2, 3]
        );
        assert!(stream.out_of_order_bytes <= 1_000);
        r.handle_segment(DtnTime::from_millis(0), &from, &to, seg(9, F, 1, 0, &big));
        let data: usize = events(&mut r)
            .iter()
            .map(|e| match e {
                StreamEvent::Data { data, .. } => data.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(data, 1_200);
        assert_eq!(drain(&mut r).last().unwrap().segment.acknowledged, 4);
    }

    #[test]
    fn unknown_stream_segments_get_a_reset_and_a_reset_gets_nothing() {
        let config = StreamConfig {
            max_streams: 1,
            ..StreamConfig::default()
        };
        let mut s = Streams::new(config, 1);
        let (peer, me) = (ep("dtn://d/z"), ep("dtn://a/x"));
        for (flags, data) in [(F, &b"x"[..]), (A, b""), (C | F, b""), (O, b"y")] {
            s.handle_segment(
                DtnTime::from_millis(0),
                &peer,
                &me,
                seg(42, flags, 3, 0, data),
            );
            let reply = drain(&mut s);
            assert_eq!(reply.len(), 1, "flags {flags:#x}");
            let r = &reply[0];
            assert_eq!((&r.from, &r.to, r.segment.stream), (&me, &peer, 42));
            // The RESET names the stream as the sender knows it: our answer to the opener
            // does not carry FROM_OPENER, and the reverse.
            assert_eq!(r.segment.flags, R | (F & !flags), "flags {flags:#x}");
        }
        s.handle_segment(
            DtnTime::from_millis(0),
            &peer,
            &me,
            seg(42, R | F, 0, 0, b""),
        );
        s.handle_segment(DtnTime::from_millis(0), &peer, &me, seg(42, R, 0, 0, b""));
        assert!(drain(&mut s).is_empty());
        assert!(events(&mut s).is_empty() && s.is_empty());
        // No room for another stream: the OPEN is refused the same way.
        s.open(DtnTime::from_millis(0), me.clone(), ep("dtn://b/y"))
            .unwrap();
        drain(&mut s);
        s.handle_segment(
            DtnTime::from_millis(0),
            &peer,
            &me,
            seg(43, O | F, 0, 0, b""),
        );
        assert_eq!(drain(&mut s)[0].segment.flags, R);
        assert!(events(&mut s).is_empty());
    }

    #[test]
    fn a_peer_reset_is_a_lost_path() {
        let mut s = Streams::new(StreamConfig::default(), 1);
        let (me, peer) = (ep("dtn://a/x"), ep("dtn://b/y"));
        let id = s
            .open(DtnTime::from_millis(0), me.clone(), peer.clone())
            .unwrap();
        s.send(DtnTime::from_millis(0), id, message(10, 0)).unwrap();
        let wire = drain(&mut s)[0].segment.stream;
        // A RESET for the other direction's stream of the same id is not ours.
        s.handle_segment(
            DtnTime::from_millis(5),
            &peer,
            &me,
            seg(wire, R | F, 0, 0, b""),
        );
        assert!(events(&mut s).is_empty());
        s.handle_segment(DtnTime::from_millis(5), &peer, &me, seg(wire, R, 0, 0, b""));
        assert_eq!(
            events(&mut s),
            [StreamEvent::PathLost {
                id,
                unacknowledged: 10
            }]
        );
        assert!(drain(&mut s).is_empty() && s.is_empty());
    }

    #[test]
    fn a_batch_of_received_segments_costs_one_pure_ack() {
        let mut s = Streams::new(StreamConfig::default(), 1);
        let (peer, me) = (ep("dtn://b/y"), ep("dtn://a/x"));
        // Reordered: data overtakes the OPEN marker. Each early segment carries OPEN, so the
        // first to arrive creates the stream.
        for seq in [3, 1, 0, 2, 2, 0, 4] {
            let data = [seq as u8; 10];
            s.handle_segment(
                DtnTime::from_millis(0),
                &peer,
                &me,
                seg(5, O | A | F, seq, 0, &data[..]),
            );
        }
        let out = drain(&mut s);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].segment.flags, A);
        assert_eq!(out[0].segment.acknowledged, 5);
        let evs = events(&mut s);
        let id = StreamId(1);
        assert_eq!(
            evs[0],
            StreamEvent::Opened {
                id,
                local: me.clone(),
                remote: peer.clone()
            }
        );
        let data: Vec<u8> = evs[1..]
            .iter()
            .flat_map(|e| match e {
                StreamEvent::Data { data, .. } => data.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(data, (0..5u8).flat_map(|i| [i; 10]).collect::<Vec<_>>());
        // A duplicate is acknowledged again, not delivered again.
        s.handle_segment(
            DtnTime::from_millis(1),
            &peer,
            &me,
            seg(5, A | F, 1, 0, b"dup"),
        );
        assert_eq!(drain(&mut s)[0].segment.acknowledged, 5);
        assert!(events(&mut s).is_empty());
        // When we have data to send, the acknowledgement rides on it: no pure ACK.
        s.handle_segment(
            DtnTime::from_millis(2),
            &peer,
            &me,
            seg(5, A | F, 5, 0, b"more"),
        );
        s.send(DtnTime::from_millis(2), id, message(10, 0)).unwrap();
        let out = drain(&mut s);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].segment.flags, out[0].segment.sequence), (A, 0));
        assert_eq!(out[0].segment.acknowledged, 6);
    }

    #[test]
    fn open_then_send_is_one_segment_and_open_rides_until_acknowledged() {
        let mut s = Streams::new(StreamConfig::default(), 1);
        let (me, peer) = (ep("dtn://a/x"), ep("dtn://b/y"));
        let id = s
            .open(DtnTime::from_millis(0), me.clone(), peer.clone())
            .unwrap();
        s.send(DtnTime::from_millis(0), id, Bytes::from_static(b"hello"))
            .unwrap();
        let out = drain(&mut s);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].segment.flags, O | A | F);
        assert_eq!(
            (out[0].segment.sequence, &out[0].segment.data[..]),
            (0, &b"hello"[..])
        );
        let wire = out[0].segment.stream;
        s.send(DtnTime::from_millis(1), id, Bytes::from_static(b"again"))
            .unwrap();
        assert_eq!(
            drain(&mut s)[0].segment.flags,
            O | A | F,
            "OPEN not acknowledged yet"
        );
        s.handle_segment(DtnTime::from_millis(2), &peer, &me, seg(wire, A, 0, 1, b""));
        s.send(DtnTime::from_millis(2), id, Bytes::from_static(b"third"))
            .unwrap();
        let out = drain(&mut s);
        assert_eq!(
            out.len(),
            1,
            "the ACK for sequence 1 is not here yet: nothing resent"
        );
        assert_eq!((out[0].segment.flags, out[0].segment.sequence), (A | F, 2));
    }

    #[test]
    fn a_request_and_its_reply_take_three_segments() {
        let (a_ep, b_ep) = (ep("dtn://a/x"), ep("dtn://b/y"));
        let mut a = Streams::new(StreamConfig::default(), 1);
        let mut b = Streams::new(StreamConfig::default(), 2);
        // A opens, sends the request and closes at once: one segment carries all three.
        let id = a
            .open(DtnTime::from_millis(0), a_ep.clone(), b_ep.clone())
            .unwrap();
        a.send(DtnTime::from_millis(0), id, Bytes::from_static(b"request"))
            .unwrap();
        a.close(DtnTime::from_millis(0), id).unwrap();
        let out = drain(&mut a);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].segment.flags, O | C | A | F);
        assert_eq!(&out[0].segment.data[..], b"request");
        b.handle_segment(
            DtnTime::from_millis(1),
            &a_ep,
            &b_ep,
            out[0].segment.clone(),
        );
        let got = events(&mut b);
        let StreamEvent::Opened { id: bid, .. } = got[0] else {
            panic!("{got:?}");
        };
        assert_eq!(
            got[1..],
            [
                StreamEvent::Data {
                    id: bid,
                    data: Bytes::from_static(b"request")
                },
                StreamEvent::Finished { id: bid }
            ]
        );
        // B replies and closes: one segment, acknowledging A's.
        b.send(DtnTime::from_millis(2), bid, Bytes::from_static(b"reply"))
            .unwrap();
        b.close(DtnTime::from_millis(2), bid).unwrap();
        let out = drain(&mut b);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].segment.flags, C | A);
        assert_eq!(
            (out[0].segment.acknowledged, &out[0].segment.data[..]),
            (1, &b"reply"[..])
        );
        a.handle_segment(
            DtnTime::from_millis(3),
            &b_ep,
            &a_ep,
            out[0].segment.clone(),
        );
        assert_eq!(
            events(&mut a),
            [
                StreamEvent::Data {
                    id,
                    data: Bytes::from_static(b"reply")
                },
                StreamEvent::Finished { id },
                StreamEvent::Closed { id }
            ]
        );
        // A's pure acknowledgement of B's reply closes B too.
        let out = drain(&mut a);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (out[0].segment.flags, out[0].segment.acknowledged),
            (A | F, 1)
        );
        b.handle_segment(
            DtnTime::from_millis(4),
            &a_ep,
            &b_ep,
            out[0].segment.clone(),
        );
        assert_eq!(events(&mut b), [StreamEvent::Closed { id: bid }]);
        // A CLOSE after the last segment went out is a marker of its own.
        let id = a
            .open(DtnTime::from_millis(5), a_ep.clone(), b_ep.clone())
            .unwrap();
        a.send(DtnTime::from_millis(5), id, Bytes::from_static(b"x"))
            .unwrap();
        assert_eq!(drain(&mut a).len(), 1);
        a.close(DtnTime::from_millis(5), id).unwrap();
        let out = drain(&mut a);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (
                out[0].segment.flags & C,
                out[0].segment.sequence,
                out[0].segment.data.len()
            ),
            (C, 1, 0)
        );
    }

    #[test]
    fn a_reply_made_before_the_pure_ack_is_polled_carries_the_ack() {
        let (a_ep, b_ep) = (ep("dtn://a/x"), ep("dtn://b/y"));
        let mut a = Streams::new(StreamConfig::default(), 1);
        let mut b = Streams::new(StreamConfig::default(), 2);
        let id = a
            .open(DtnTime::from_millis(0), a_ep.clone(), b_ep.clone())
            .unwrap();
        a.send(DtnTime::from_millis(0), id, Bytes::from_static(b"request"))
            .unwrap();
        a.close(DtnTime::from_millis(0), id).unwrap();
        let request = drain(&mut a).remove(0);
        b.handle_segment(DtnTime::from_millis(1), &a_ep, &b_ep, request.segment);
        // B owes an acknowledgement, but a node polling only data segments makes none yet.
        assert!(b.acks_due());
        assert!(b.poll_data_segment().is_none());
        let bid = match events(&mut b)[0] {
            StreamEvent::Opened { id, .. } => id,
            ref other => panic!("{other:?}"),
        };
        b.send(DtnTime::from_millis(2), bid, Bytes::from_static(b"reply"))
            .unwrap();
        b.close(DtnTime::from_millis(2), bid).unwrap();
        let reply = b.poll_data_segment().expect("the reply");
        assert_eq!(reply.segment.acknowledged, 1, "the reply carries the ack");
        assert!(!b.acks_due(), "nothing left to acknowledge on its own");
        assert!(b.poll_segment().is_none());
    }

    #[test]
    fn lost_segments_are_resent_with_backoff() {
        let config = StreamConfig::default();
        let mut s = Streams::new(config.clone(), 1);
        let id = s
            .open(DtnTime::from_millis(0), ep("dtn://a/x"), ep("dtn://b/y"))
            .unwrap();
        drain(&mut s);
        let mut times = Vec::new();
        while let Some(t) = s.poll_timeout() {
            s.handle_timeout(t);
            if let Some(out) = s.poll_segment() {
                assert_eq!(out.segment.sequence, 0);
                times.push((t, out.segment.flags));
            }
        }
        // Doubling from 500 ms, capped at 1 s; at 10 s without an acknowledgement, a RESET.
        let resent = O | A | F;
        let mut expected: Vec<(DtnTime, u64)> = (0..10)
            .map(|i| (DtnTime::from_millis(500 + i * 1_000), resent))
            .collect();
        expected.push((DtnTime::from_millis(10_000), R | F));
        assert_eq!(times, expected);
        assert_eq!(
            events(&mut s),
            [StreamEvent::PathLost {
                id,
                unacknowledged: 0
            }]
        );
    }

    #[test]
    fn a_degenerate_config_still_makes_progress() {
        let config = StreamConfig {
            max_segment: 0,
            window: 0,
            initial_rto: Duration::from_millis(0),
            min_rto: Duration::from_millis(0),
            max_rto: Duration::from_millis(0),
            ..StreamConfig::default()
        };
        let mut p = Pair::new(config, 12, 10);
        let id = p.open(0);
        p.ends[0].send(p.now, id, message(50, 1)).unwrap();
        p.ends[0].close(p.now, id).unwrap();
        p.run(p.now + Duration::from_millis(60_000));
        let theirs = p.opened(1)[0];
        assert_eq!(p.received(1, theirs), message(50, 1).to_vec());
        assert!(p.ends[0].poll_timeout().is_none_or(|t| t > p.now));
    }

    #[test]
    fn the_same_seed_gives_the_same_segment_trace() {
        let run = |seed| {
            let mut p = Pair::new(StreamConfig::default(), seed, 20);
            let id = p.open(0);
            p.ends[0].send(p.now, id, message(20_000, 9)).unwrap();
            p.ends[0].close(p.now, id).unwrap();
            p.run(p.now + Duration::from_millis(60_000));
            (p.trace, p.events)
        };
        for seed in [9, 10, 11] {
            assert_eq!(run(seed), run(seed), "seed {seed}");
        }
        assert_ne!(run(9).0, run(10).0);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn any_segment() -> impl Strategy<Value = (bool, StreamSegment)> {
            (
                any::<bool>(),
                prop_oneof![Just(7u64), Just(8u64), any::<u64>()],
                0u64..0x40,
                prop_oneof![0u64..300, any::<u64>()],
                prop_oneof![0u64..300, any::<u64>()],
                0usize..300,
            )
                .prop_map(|(from_b, stream, flags, sequence, acknowledged, len)| {
                    (
                        from_b,
                        StreamSegment {
                            stream,
                            flags,
                            sequence,
                            acknowledged,
                            data: Bytes::from(vec![1u8; len]),
                        },
                    )
                })
        }

        proptest! {
            /// Whatever peers send, nothing panics and every bound holds.
            #[test]
            fn peer_input_never_panics_or_overflows_a_bound(
                inputs in proptest::collection::vec((any_segment(), 0u64..2_000), 1..200),
                seed in any::<u64>(),
            ) {
                let config = StreamConfig {
                    max_streams: 4,
                    max_buffered: 2_000,
                    window: 8,
                    max_segment: 100,
                    ..StreamConfig::default()
                };
                let mut s = Streams::new(config, seed);
                let me = ep("dtn://a/x");
                let peers = [ep("dtn://b/y"), ep("dtn://c/y")];
                let mine = s.open(DtnTime::from_millis(0), me.clone(), peers[0].clone()).unwrap();
                let _ = s.send(DtnTime::from_millis(0), mine, message(1_500, 0));
                let mut now = 0;
                for ((from_c, segment), dt) in inputs {
                    now += dt;
                    s.handle_segment(DtnTime::from_millis(now), &peers[usize::from(from_c)], &me, segment);
                    if s.poll_timeout().is_some_and(|t| t <= DtnTime::from_millis(now)) {
                        s.handle_timeout(DtnTime::from_millis(now));
                    }
                    for out in drain(&mut s) {
                        prop_assert!(out.segment.data.len() <= 100);
                    }
                    events(&mut s);
                    prop_assert!(s.len() <= 4);
                    prop_assert!(s.ended.len() <= 4 && s.ended_order.len() <= 4);
                    for st in s.streams.values() {
                        prop_assert!(st.out_of_order_bytes <= 2_000);
                        prop_assert!(st.out_of_order.len() <= 16);
                        prop_assert!(st.in_flight.len() <= 8);
                        prop_assert!(st.buffered <= 2_000);
                    }
                }
            }
        }
    }
}
