//! The receiving half of a session: the one incoming transfer in progress (RFC 9174 forbids
//! interleaving), its reassembly, and what to answer to each segment.

use bytes::{Buf, Bytes, BytesMut};
use wire::tcpcl::{SegmentFlags, SegmentHeader, XferAck, XferRefuseReason, XferSegment};

use super::budget::{ReceiveBudget, Reservation};

/// The most a multi-segment reassembly buffer reserves up front from an announced Transfer
/// Length. The announcement is the peer's word: reserving 4 GiB because a peer said so would hand
/// it our memory before it sent a byte. Above this the buffer grows as data actually arrives.
const PREALLOCATE_MAX: u64 = 16 << 20;

/// What to do about one received segment.
#[derive(Debug)]
pub(super) enum SegmentOutcome {
    /// Acknowledge it; `started` is the data for `IncomingStarted` if this is the first data of
    /// a transfer that goes on, `complete` the whole bundle if this was its last segment.
    Accepted {
        ack: XferAck,
        started: Option<(Bytes, Option<u64>)>,
        complete: Option<Bytes>,
    },
    /// Refuse the transfer (XFER_REFUSE with this reason); its remaining segments are dropped.
    Refuse(u64, XferRefuseReason),
    /// A segment of a transfer this side refused: dropped without an acknowledgement.
    Discarded,
    /// The peer broke the protocol; the session ends.
    Violation(String),
}

/// One incoming transfer being reassembled.
#[derive(Debug)]
struct Transfer {
    id: u64,
    /// The first data received, kept as the received slice so a single-segment bundle (or a cut
    /// after the first segment) is handed over without a copy.
    first: Bytes,
    /// Everything received, once a second segment with data arrived; while a segment is streamed
    /// in (see [`Streamed`]) also the part of its data that has arrived.
    joined: Option<BytesMut>,
    /// Bytes of the segments received whole (what was acknowledged).
    received: u64,
    /// The segment whose data is being read straight into `joined`, if one is.
    streamed: Option<Streamed>,
    announced: Option<u64>,
    /// Whether `IncomingStarted` was reported (it waits for the first data: dtn7-rs may open a
    /// transfer with an empty START segment).
    started: bool,
    /// What the received bytes took from the node's budget; given back when this is dropped.
    reservation: Reservation,
}

impl Transfer {
    fn push(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        let len = data.len() as u64;
        if self.received == 0 {
            self.first = data;
        } else {
            self.joined_with_room(len).extend_from_slice(&data);
        }
        self.received = self.received.saturating_add(len);
    }

    /// Everything of the segments received whole: a segment streamed in part is left out, as it
    /// was never acknowledged.
    fn take(self) -> Bytes {
        match self.joined {
            Some(mut joined) => {
                joined.truncate(usize::try_from(self.received).unwrap_or(usize::MAX));
                joined.freeze()
            }
            None => self.first,
        }
    }

    /// Whether `len` more bytes fit the transfer MRU and the node's budget; if so, the budget is
    /// taken. The budget is asked last: a transfer over the MRU is refused without spending it.
    fn admit(&mut self, len: u64, transfer_mru: u64) -> bool {
        self.received.saturating_add(len) <= transfer_mru && self.reservation.grow(len)
    }

    /// The joined buffer, made from `first` if this is the second segment with data, with room
    /// for `more` bytes (and for the announced length, up to [`PREALLOCATE_MAX`]).
    fn joined_with_room(&mut self, more: u64) -> &mut BytesMut {
        let needed = self.received.saturating_add(more);
        let announced = self.announced.unwrap_or(0).min(PREALLOCATE_MAX);
        let joined = self.joined.get_or_insert_with(|| {
            let reserve = announced.max(needed);
            let mut joined = BytesMut::with_capacity(usize::try_from(reserve).unwrap_or(0));
            joined.extend_from_slice(&self.first);
            self.first = Bytes::new();
            joined
        });
        let room = usize::try_from(needed)
            .unwrap_or(usize::MAX)
            .saturating_sub(joined.len());
        joined.reserve(room);
        joined
    }
}

/// A continuation segment whose header was taken off the stream before its data arrived: its
/// data goes straight into the transfer's buffer (no copy of a whole segment in the receive
/// buffer first, and none again to join it to the rest), read there directly by the connection
/// when nothing else is buffered.
#[derive(Debug, Clone, Copy)]
struct Streamed {
    flags: SegmentFlags,
    data_len: u64,
    /// Data bytes still to come.
    remaining: u64,
}

/// What [`Incoming::begin_stream`] made of a segment header.
#[derive(Debug)]
pub(super) enum StreamStart {
    /// The header was taken: the caller removes it from its buffer, and the segment's data goes
    /// to [`Incoming::stream_from`] and [`Incoming::direct_room`].
    Streaming,
    /// Not a segment to stream; it is handled when it has arrived whole.
    Whole,
    /// The transfer is refused (over its MRU or the node's budget), exactly as
    /// [`Incoming::on_segment`] would have refused it; the segment is dropped when whole.
    Refused(SegmentOutcome),
}

/// What bounds the bytes an incoming transfer keeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits<'a> {
    /// Our transfer MRU: the most one transfer keeps.
    pub(super) transfer_mru: u64,
    /// The node's budget for every session's unfinished transfers together, if it has one.
    pub(super) budget: Option<&'a ReceiveBudget>,
}

/// The incoming direction's state.
#[derive(Debug, Default)]
pub(super) enum Incoming {
    /// No transfer in progress.
    #[default]
    Idle,
    /// A transfer is being received.
    Receiving(Box<TransferSlot>),
    /// This side refused the transfer with this id; its remaining segments are dropped until
    /// its END or the START of the next transfer.
    Discarding(u64),
    /// This side refused the transfer with this id while one of its segments was streamed in:
    /// the rest of that segment's data is dropped as it comes, then the transfer is
    /// `Discarding` (or over, if that segment was its END).
    Skipping {
        refused: u64,
        remaining: u64,
        end: bool,
    },
}

/// A boxed transfer, so `Incoming` stays small.
#[derive(Debug)]
pub(super) struct TransferSlot(Transfer);

impl Incoming {
    /// Whether a transfer is being received (an orderly close waits for it).
    pub(super) fn in_progress(&self) -> bool {
        matches!(self, Self::Receiving(_))
    }

    /// Handles one segment. `limits` bound what is kept; `accept_new` is false once the session
    /// is ending (a new transfer is then refused with "Session Terminating").
    pub(super) fn on_segment(
        &mut self,
        seg: XferSegment,
        limits: Limits<'_>,
        accept_new: bool,
    ) -> SegmentOutcome {
        let id = seg.transfer_id;
        if seg.flags.is_start() {
            match self {
                Self::Receiving(t) => {
                    return SegmentOutcome::Violation(format!(
                        "START of transfer {id} while transfer {} is in progress",
                        t.0.id
                    ));
                }
                // The peer moved on from a transfer this side refused (it need not send that
                // one's END), or starts afresh.
                Self::Discarding(_) | Self::Idle => *self = Self::Idle,
                Self::Skipping { .. } => {
                    return SegmentOutcome::Violation(
                        "internal: a segment while a refused one's data is dropped".into(),
                    );
                }
            }
            return self.start(seg, limits, accept_new);
        }
        match self {
            Self::Idle => SegmentOutcome::Violation(format!(
                "segment of transfer {id} without START and no transfer in progress"
            )),
            Self::Discarding(refused) if *refused == id => {
                if seg.flags.is_end() {
                    *self = Self::Idle;
                }
                SegmentOutcome::Discarded
            }
            Self::Discarding(refused) => SegmentOutcome::Violation(format!(
                "segment of transfer {id} without START after transfer {refused} was refused"
            )),
            Self::Skipping { .. } => SegmentOutcome::Violation(
                "internal: a segment while a refused one's data is dropped".into(),
            ),
            Self::Receiving(t) if t.0.id != id => SegmentOutcome::Violation(format!(
                "segment of transfer {id} while transfer {} is in progress",
                t.0.id
            )),
            Self::Receiving(_) => self.continue_transfer(seg, limits.transfer_mru),
        }
    }

    fn start(&mut self, seg: XferSegment, limits: Limits<'_>, accept_new: bool) -> SegmentOutcome {
        let transfer_mru = limits.transfer_mru;
        let id = seg.transfer_id;
        let refuse = |this: &mut Self, reason| {
            // A refused single-segment transfer has nothing left to drop.
            *this = if seg.flags.is_end() {
                Self::Idle
            } else {
                Self::Discarding(id)
            };
            SegmentOutcome::Refuse(id, reason)
        };
        if !accept_new {
            return refuse(self, XferRefuseReason::SessionTerminating);
        }
        let mut announced = None;
        for item in &seg.extensions {
            match item.as_transfer_length() {
                Some(Ok(n)) => {
                    // RFC 9174 §5.2.5.1 allows one; a receiver that acted on the first decided.
                    announced.get_or_insert(n);
                }
                // Not an 8-byte length: dtn7-rs sends a bundle id under type 1. Harmless unless
                // the peer insists.
                Some(Err(_)) | None if item.critical => {
                    return refuse(self, XferRefuseReason::ExtensionFailure);
                }
                Some(Err(_)) | None => {}
            }
        }
        if announced.is_some_and(|n| n > transfer_mru) || seg.data.len() as u64 > transfer_mru {
            // RFC 9174 Table 7: "No Resources" asks the sender to fragment before retrying.
            return refuse(self, XferRefuseReason::NoResources);
        }
        *self = Self::Receiving(Box::new(TransferSlot(Transfer {
            id,
            first: Bytes::new(),
            joined: None,
            received: 0,
            streamed: None,
            announced,
            started: false,
            reservation: Reservation::new(limits.budget.cloned()),
        })));
        self.continue_transfer(seg, transfer_mru)
    }

    fn continue_transfer(&mut self, seg: XferSegment, transfer_mru: u64) -> SegmentOutcome {
        let Self::Receiving(slot) = self else {
            return SegmentOutcome::Violation("internal: no transfer in progress".into());
        };
        let t = &mut slot.0;
        if t.streamed.is_some() {
            return SegmentOutcome::Violation("internal: a segment while one streams in".into());
        }
        if !t.admit(seg.data.len() as u64, transfer_mru) {
            let id = t.id;
            return self.refuse_for_resources(id, seg.flags);
        }
        let data = seg.data.clone();
        t.push(seg.data);
        // A transfer that ends with its first data (a small bundle in one segment) is reported
        // as received only: there is nothing left to refuse, and the owner would look at its
        // primary block twice.
        let started = if !t.started && !data.is_empty() && !seg.flags.is_end() {
            t.started = true;
            Some((data, t.announced))
        } else {
            None
        };
        self.accepted(seg.flags, started)
    }

    /// Refuses the transfer in progress for want of room (RFC 9174 Table 7, "No Resources"):
    /// its remaining segments are dropped, unless the one refused was its last.
    fn refuse_for_resources(&mut self, id: u64, flags: SegmentFlags) -> SegmentOutcome {
        *self = if flags.is_end() {
            Self::Idle
        } else {
            Self::Discarding(id)
        };
        SegmentOutcome::Refuse(id, XferRefuseReason::NoResources)
    }

    /// The outcome of a segment of the transfer in progress whose data is all counted in
    /// `received`: its XFER_ACK, and the whole transfer if the segment was its last.
    fn accepted(
        &mut self,
        flags: SegmentFlags,
        started: Option<(Bytes, Option<u64>)>,
    ) -> SegmentOutcome {
        let Self::Receiving(slot) = self else {
            return SegmentOutcome::Violation("internal: no transfer in progress".into());
        };
        let t = &slot.0;
        let ack = XferAck {
            flags,
            transfer_id: t.id,
            acknowledged_length: t.received,
        };
        let complete = if flags.is_end() {
            match std::mem::take(self) {
                Self::Receiving(slot) => Some(slot.0.take()),
                _ => None,
            }
        } else {
            None
        };
        SegmentOutcome::Accepted {
            ack,
            started,
            complete,
        }
    }

    /// Refuses the transfer in progress if it has this id. Returns whether it did (false: the
    /// transfer already completed, or never existed).
    pub(super) fn refuse(&mut self, transfer_id: u64) -> bool {
        match self {
            Self::Receiving(t) if t.0.id == transfer_id => {
                *self = match t.0.streamed {
                    Some(s) => Self::Skipping {
                        refused: transfer_id,
                        remaining: s.remaining,
                        end: s.flags.is_end(),
                    },
                    None => Self::Discarding(transfer_id),
                };
                true
            }
            _ => false,
        }
    }

    /// Looks at the header of a continuation segment whose data has not all arrived, and takes
    /// it to stream its data in if it continues the transfer in progress and fits its limits
    /// (checked, and the budget taken, as [`Incoming::on_segment`] does for a whole segment).
    /// Only a transfer whose first data came is streamed into: that data is what
    /// `IncomingStarted` reports, as a slice of its own.
    pub(super) fn begin_stream(
        &mut self,
        header: SegmentHeader,
        limits: Limits<'_>,
    ) -> StreamStart {
        let Self::Receiving(slot) = self else {
            return StreamStart::Whole;
        };
        let t = &mut slot.0;
        if t.id != header.transfer_id || t.streamed.is_some() || t.received == 0 {
            return StreamStart::Whole;
        }
        let len = header.data_len;
        if !t.admit(len, limits.transfer_mru) {
            let id = t.id;
            return StreamStart::Refused(self.refuse_for_resources(id, header.flags));
        }
        t.joined_with_room(len);
        t.streamed = Some(Streamed {
            flags: header.flags,
            data_len: len,
            remaining: len,
        });
        StreamStart::Streaming
    }

    /// Whether a transfer whose first data came is in progress with no segment streaming in: its
    /// next segment's header is what the connection most likely brings next.
    pub(super) fn between_segments(&self) -> bool {
        matches!(self, Self::Receiving(t) if t.0.received > 0 && t.0.streamed.is_none())
    }

    /// Whether the data of a streamed segment is still to come: the next bytes of the
    /// connection are that data, for [`Incoming::stream_from`] (or [`Incoming::direct_room`]).
    pub(super) fn awaits_segment_data(&self) -> bool {
        match self {
            Self::Receiving(t) => t.0.streamed.is_some(),
            Self::Skipping { .. } => true,
            _ => false,
        }
    }

    /// Takes what `rx` holds of a streamed segment's data off its front. The segment's outcome
    /// once its last byte is in (for a refused transfer, its data dropped: none).
    pub(super) fn stream_from(&mut self, rx: &mut BytesMut) -> Option<SegmentOutcome> {
        match self {
            Self::Skipping {
                refused,
                remaining,
                end,
            } => {
                let n = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(rx.len());
                rx.advance(n);
                *remaining -= n as u64;
                if *remaining == 0 {
                    *self = if *end {
                        Self::Idle
                    } else {
                        Self::Discarding(*refused)
                    };
                }
                None
            }
            Self::Receiving(slot) => {
                let t = &mut slot.0;
                let s = t.streamed.as_mut()?;
                // `begin_stream` made the buffer; without it nothing could be consumed, and the
                // session must not wait for bytes it would never take.
                let Some(joined) = t.joined.as_mut() else {
                    return Some(SegmentOutcome::Violation(
                        "internal: a streamed segment without its buffer".into(),
                    ));
                };
                let n = usize::try_from(s.remaining)
                    .unwrap_or(usize::MAX)
                    .min(rx.len());
                joined.extend_from_slice(&rx[..n]);
                rx.advance(n);
                s.remaining -= n as u64;
                self.finish_streamed()
            }
            _ => None,
        }
    }

    /// Room for the connection to read a streamed segment's data into directly, and how much of
    /// it is still to come; `None` unless a segment is streamed into a transfer.
    pub(super) fn direct_room(&mut self) -> Option<(&mut BytesMut, usize)> {
        let Self::Receiving(slot) = self else {
            return None;
        };
        let t = &mut slot.0;
        let s = t.streamed?;
        let remaining = usize::try_from(s.remaining).unwrap_or(usize::MAX);
        Some((t.joined.as_mut()?, remaining))
    }

    /// `n` bytes were read into [`Incoming::direct_room`]. The segment's outcome once its last
    /// byte is in.
    pub(super) fn direct_read(&mut self, n: usize) -> Option<SegmentOutcome> {
        let Self::Receiving(slot) = self else {
            return None;
        };
        let s = slot.0.streamed.as_mut()?;
        s.remaining = s.remaining.saturating_sub(n as u64);
        self.finish_streamed()
    }

    /// Ends a streamed segment whose data is all in: acknowledged as a whole one would be.
    fn finish_streamed(&mut self) -> Option<SegmentOutcome> {
        let Self::Receiving(slot) = self else {
            return None;
        };
        let t = &mut slot.0;
        let s = t.streamed.filter(|s| s.remaining == 0)?;
        t.streamed = None;
        t.received = t.received.saturating_add(s.data_len);
        Some(self.accepted(s.flags, None))
    }

    /// The prefix received of the transfer in progress, if any bytes arrived (for a cut).
    pub(super) fn take_partial(&mut self) -> Option<(u64, Bytes)> {
        match std::mem::take(self) {
            Self::Receiving(slot) if slot.0.received > 0 => {
                let id = slot.0.id;
                Some((id, slot.0.take()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::tcpcl::{ExtensionItem, SegmentFlags};

    fn mru(transfer_mru: u64) -> Limits<'static> {
        Limits {
            transfer_mru,
            budget: None,
        }
    }

    fn seg(id: u64, start: bool, end: bool, data: &'static [u8]) -> XferSegment {
        XferSegment {
            flags: SegmentFlags::new(start, end),
            transfer_id: id,
            extensions: Vec::new(),
            data: Bytes::from_static(data),
        }
    }

    #[test]
    fn single_segment_is_not_copied() {
        let mut inc = Incoming::default();
        let s = seg(3, true, true, b"bundle");
        let ptr = s.data.as_ptr();
        let SegmentOutcome::Accepted {
            ack,
            started,
            complete,
        } = inc.on_segment(s, mru(100), true)
        else {
            panic!("not accepted")
        };
        assert_eq!(ack.acknowledged_length, 6);
        assert_eq!(ack.flags, SegmentFlags::new(true, true));
        assert!(
            started.is_none(),
            "a transfer complete at once is not also started"
        );
        let bundle = complete.unwrap();
        assert_eq!(bundle.as_ptr(), ptr);
        assert!(!inc.in_progress());
    }

    #[test]
    fn reassembles_and_acks_cumulatively() {
        let mut inc = Incoming::default();
        let mut acks = Vec::new();
        let mut done = None;
        for s in [
            seg(0, true, false, b"ab"),
            seg(0, false, false, b""),
            seg(0, false, false, b"cd"),
            seg(0, false, true, b"e"),
        ] {
            match inc.on_segment(s, mru(100), true) {
                SegmentOutcome::Accepted { ack, complete, .. } => {
                    acks.push(ack.acknowledged_length);
                    done = complete.or(done);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(acks, [2, 2, 4, 5]);
        assert_eq!(&done.unwrap()[..], b"abcde");
    }

    #[test]
    fn empty_start_defers_started() {
        let mut inc = Incoming::default();
        let mut first = seg(1, true, false, b"");
        first.extensions.push(ExtensionItem {
            critical: false,
            item_type: ExtensionItem::TRANSFER_LENGTH,
            value: Bytes::from_static(b"dtn://x/-1-0"),
        });
        let SegmentOutcome::Accepted { started, .. } = inc.on_segment(first, mru(100), true) else {
            panic!()
        };
        assert!(started.is_none());
        let SegmentOutcome::Accepted { started, .. } =
            inc.on_segment(seg(1, false, false, b"xy"), mru(100), true)
        else {
            panic!()
        };
        assert_eq!(started, Some((Bytes::from_static(b"xy"), None)));
    }

    #[test]
    fn over_mru_is_refused_and_the_rest_dropped() {
        let mut inc = Incoming::default();
        let mut first = seg(4, true, false, b"abc");
        first.extensions.push(ExtensionItem::transfer_length(1000));
        assert!(matches!(
            inc.on_segment(first, mru(100), true),
            SegmentOutcome::Refuse(4, XferRefuseReason::NoResources)
        ));
        assert!(matches!(
            inc.on_segment(seg(4, false, false, b"d"), mru(100), true),
            SegmentOutcome::Discarded
        ));
        assert!(matches!(
            inc.on_segment(seg(4, false, true, b"e"), mru(100), true),
            SegmentOutcome::Discarded
        ));
        assert!(matches!(
            inc.on_segment(seg(4, false, true, b"e"), mru(100), true),
            SegmentOutcome::Violation(_)
        ));
        // Without an announcement, growing past the MRU is refused when it happens.
        let mut inc = Incoming::default();
        assert!(matches!(
            inc.on_segment(seg(5, true, false, b"0123456789"), mru(15), true),
            SegmentOutcome::Accepted { .. }
        ));
        assert!(matches!(
            inc.on_segment(seg(5, false, false, b"0123456789"), mru(15), true),
            SegmentOutcome::Refuse(5, XferRefuseReason::NoResources)
        ));
        assert!(inc.take_partial().is_none());
    }

    #[test]
    fn a_shared_budget_refuses_what_does_not_fit_and_is_given_back() {
        let budget = ReceiveBudget::new(25);
        let limits = Limits {
            transfer_mru: 100,
            budget: Some(&budget),
        };
        let (mut a, mut b) = (Incoming::default(), Incoming::default());
        assert!(matches!(
            a.on_segment(seg(1, true, false, b"0123456789"), limits, true),
            SegmentOutcome::Accepted { .. }
        ));
        assert!(matches!(
            b.on_segment(seg(7, true, false, b"0123456789"), limits, true),
            SegmentOutcome::Accepted { .. }
        ));
        assert_eq!(budget.in_use(), 20);
        // Another 10 bytes for `b` would be 30 of 25: its transfer is refused and its bytes freed.
        assert!(matches!(
            b.on_segment(seg(7, false, false, b"0123456789"), limits, true),
            SegmentOutcome::Refuse(7, XferRefuseReason::NoResources)
        ));
        assert_eq!((budget.in_use(), budget.refused()), (10, 1));
        // `a` goes on within the budget, and what it held is given back when it is handed over.
        let SegmentOutcome::Accepted { complete, .. } =
            a.on_segment(seg(1, false, true, b"abcde"), limits, true)
        else {
            panic!("a's last segment fits")
        };
        assert_eq!(&complete.unwrap()[..], b"0123456789abcde");
        assert_eq!(budget.in_use(), 0);
        // A transfer cut mid-way gives back its bytes too.
        let mut c = Incoming::default();
        c.on_segment(seg(2, true, false, b"xyz"), limits, true);
        assert_eq!(budget.in_use(), 3);
        assert!(c.take_partial().is_some());
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn sequencing_violations() {
        let mut inc = Incoming::default();
        assert!(matches!(
            inc.on_segment(seg(0, false, true, b"x"), mru(100), true),
            SegmentOutcome::Violation(_)
        ));
        let mut inc = Incoming::default();
        inc.on_segment(seg(0, true, false, b"x"), mru(100), true);
        assert!(matches!(
            inc.on_segment(seg(1, true, false, b"x"), mru(100), true),
            SegmentOutcome::Violation(_)
        ));
        let mut inc = Incoming::default();
        inc.on_segment(seg(0, true, false, b"x"), mru(100), true);
        assert!(matches!(
            inc.on_segment(seg(1, false, false, b"x"), mru(100), true),
            SegmentOutcome::Violation(_)
        ));
    }

    #[test]
    fn critical_unknown_extension_is_refused() {
        let mut inc = Incoming::default();
        let mut first = seg(2, true, true, b"x");
        first.extensions.push(ExtensionItem {
            critical: true,
            item_type: 0x77,
            value: Bytes::new(),
        });
        assert!(matches!(
            inc.on_segment(first, mru(100), true),
            SegmentOutcome::Refuse(2, XferRefuseReason::ExtensionFailure)
        ));
        assert!(!inc.in_progress());
        assert!(matches!(
            inc.on_segment(seg(3, true, true, b"x"), mru(100), false),
            SegmentOutcome::Refuse(3, XferRefuseReason::SessionTerminating)
        ));
    }
}
