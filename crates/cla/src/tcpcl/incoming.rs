//! The receiving half of a session: the one incoming transfer in progress (RFC 9174 forbids
//! interleaving), its reassembly, and what to answer to each segment.

use bytes::{Bytes, BytesMut};
use wire::tcpcl::{XferAck, XferRefuseReason, XferSegment};

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
    /// Everything received, once a second segment with data arrived.
    joined: Option<BytesMut>,
    received: u64,
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
        } else if let Some(joined) = &mut self.joined {
            joined.extend_from_slice(&data);
        } else {
            let needed = self.received.saturating_add(len);
            let reserve = self.announced.unwrap_or(0).min(PREALLOCATE_MAX).max(needed);
            let mut joined = BytesMut::with_capacity(usize::try_from(reserve).unwrap_or(0));
            joined.extend_from_slice(&self.first);
            joined.extend_from_slice(&data);
            self.first = Bytes::new();
            self.joined = Some(joined);
        }
        self.received = self.received.saturating_add(len);
    }

    fn take(self) -> Bytes {
        match self.joined {
            Some(joined) => joined.freeze(),
            None => self.first,
        }
    }
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
        let len = seg.data.len() as u64;
        // The budget is asked last: a transfer over the MRU is refused without spending it.
        if t.received.saturating_add(len) > transfer_mru || !t.reservation.grow(len) {
            let id = t.id;
            *self = if seg.flags.is_end() {
                Self::Idle
            } else {
                Self::Discarding(id)
            };
            return SegmentOutcome::Refuse(id, XferRefuseReason::NoResources);
        }
        let data = seg.data.clone();
        t.push(seg.data);
        let ack = XferAck {
            flags: seg.flags,
            transfer_id: t.id,
            acknowledged_length: t.received,
        };
        // A transfer that ends with its first data (a small bundle in one segment) is reported
        // as received only: there is nothing left to refuse, and the owner would look at its
        // primary block twice.
        let started = if !t.started && !data.is_empty() && !seg.flags.is_end() {
            t.started = true;
            Some((data, t.announced))
        } else {
            None
        };
        let complete = if seg.flags.is_end() {
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
                *self = Self::Discarding(transfer_id);
                true
            }
            _ => false,
        }
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
