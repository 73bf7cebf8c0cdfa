//! The sending half of a session: queued bundles, the transfer whose segments are going out, and
//! transfers waiting for their acknowledgements.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use wire::EncodedBundle;
use wire::tcpcl::{ExtensionItem, SegmentFlags, XferAck, XferSegment};

/// One outgoing transfer.
#[derive(Debug)]
struct Transfer {
    id: u64,
    /// The bundle's parts (head, payload, tail): segment data are slices of these.
    parts: [Bytes; 3],
    total: u64,
    /// Bytes handed out in segments so far.
    sent: u64,
    /// Bytes the peer acknowledged.
    acked: u64,
    /// Whether the START segment went out (a zero-length bundle still needs one).
    started: bool,
    urgent: bool,
}

/// The most data the first segment of a transfer of several carries. A receiver keeps a
/// transfer's first segment as it arrived (the whole bundle, if it is the only one), and the rest
/// of a longer transfer streams into one buffer the first is copied into when the second comes
/// (`incoming.rs`): a small first segment makes that copy small.
const FIRST_SEGMENT_MAX: u64 = 64 * 1024;

impl Transfer {
    fn fully_sent(&self) -> bool {
        self.started && self.sent >= self.total
    }

    fn unacked(&self) -> u64 {
        self.total.saturating_sub(self.acked)
    }

    /// The next segment (header then data slices), at most `max` bytes of data; the first of a
    /// transfer of several at most [`FIRST_SEGMENT_MAX`].
    fn next_segment(&mut self, max: u64) -> Vec<Bytes> {
        let start = !self.started;
        let rest = self.total.saturating_sub(self.sent);
        let max = if start && rest > max {
            max.min(FIRST_SEGMENT_MAX)
        } else {
            max
        };
        let len = rest.min(max);
        let end = self.sent.saturating_add(len) >= self.total;
        // RFC 9174 §5.2.5.1: the Transfer Length extension SHOULD NOT be sent on a transfer of
        // one segment; on a longer one it lets the receiver refuse early and preallocate.
        let extensions = if start && !end {
            vec![ExtensionItem::transfer_length(self.total)]
        } else {
            Vec::new()
        };
        let header = XferSegment {
            flags: SegmentFlags::new(start, end),
            transfer_id: self.id,
            extensions,
            data: Bytes::new(),
        };
        let mut head = BytesMut::with_capacity(header.header_len());
        let mut out = Vec::with_capacity(4);
        // `encode_header` writes the data length of `header.data` (empty here) as its last 8
        // bytes; the data are slices of up to three parts, so the real length is patched in
        // rather than joining the slices into one `Bytes` (which would copy the bundle).
        if header.encode_header(&mut head).is_ok() && head.len() >= 8 {
            let at = head.len() - 8;
            head[at..].copy_from_slice(&len.to_be_bytes());
            out.push(head.freeze());
        }
        let mut offset = 0u64;
        let (from, to) = (self.sent, self.sent.saturating_add(len));
        for part in &self.parts {
            let part_len = part.len() as u64;
            let (lo, hi) = (from.max(offset), to.min(offset + part_len));
            if lo < hi {
                // In bounds: offset <= lo < hi <= offset + part_len.
                out.push(part.slice((lo - offset) as usize..(hi - offset) as usize));
            }
            offset += part_len;
        }
        self.started = true;
        self.sent = to;
        out
    }
}

/// What an XFER_ACK or XFER_REFUSE meant for our transfers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AckOutcome {
    /// Part of the transfer is acknowledged.
    Progress { id: u64, acked: u64, total: u64 },
    /// The whole transfer is acknowledged.
    Sent { id: u64 },
    /// Nothing new: a repeated acknowledgement, or one for a transfer that already finished.
    Stale,
    /// A transfer id this side never used: answered with MSG_REJECT "Message Unexpected".
    Unexpected,
    /// The peer acknowledged bytes that were never sent.
    Violation(String),
}

/// The outgoing direction's state.
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    /// Not started; urgent ones first, each kind in the order queued.
    queue: VecDeque<Transfer>,
    /// Segments going out.
    sending: Option<Transfer>,
    /// All segments out, acknowledgement pending. Their bytes are let go (`parts` emptied): a
    /// session never sends a segment twice, and what a cut session leaves unacknowledged is
    /// sent again from the owner's store, not from here.
    awaiting: VecDeque<Transfer>,
    /// Transfers whose last segment went out since [`Outgoing::take_written`] was last asked.
    written: Vec<u64>,
    next_id: u64,
}

impl Outgoing {
    /// The id the next queued bundle gets, if any is left.
    pub(super) fn next_id(&self) -> Option<u64> {
        (self.next_id < u64::MAX).then_some(self.next_id)
    }

    /// Queues a bundle; urgent ones go after the urgent ones already queued, before the rest.
    pub(super) fn enqueue(&mut self, bundle: &EncodedBundle, urgent: bool) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        let [head, payload, tail] = bundle.parts();
        let t = Transfer {
            id,
            parts: [head.clone(), payload.clone(), tail.clone()],
            total: bundle.len() as u64,
            sent: 0,
            acked: 0,
            started: false,
            urgent,
        };
        if urgent {
            let at = self.queue.iter().take_while(|q| q.urgent).count();
            self.queue.insert(at, t);
        } else {
            self.queue.push_back(t);
        }
        id
    }

    /// The next segment to write: of the transfer in progress, else (if `may_start`) of the
    /// next queued one.
    pub(super) fn next_segment(&mut self, max: u64, may_start: bool) -> Option<Vec<Bytes>> {
        if self.sending.is_none() && may_start {
            self.sending = self.queue.pop_front();
        }
        let t = self.sending.as_mut()?;
        let segment = t.next_segment(max.max(1));
        if t.fully_sent()
            && let Some(mut done) = self.sending.take()
        {
            done.parts = Default::default();
            self.written.push(done.id);
            self.awaiting.push_back(done);
        }
        Some(segment)
    }

    /// The transfers whose last segment [`Outgoing::next_segment`] handed out since the last
    /// call, in that order.
    pub(super) fn take_written(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.written)
    }

    /// Whether a transfer has started and is not finished (an orderly close waits for it).
    pub(super) fn in_progress(&self) -> bool {
        self.sending.is_some() || !self.awaiting.is_empty()
    }

    fn find(&mut self, id: u64) -> Option<&mut Transfer> {
        self.sending
            .iter_mut()
            .chain(self.awaiting.iter_mut())
            .find(|t| t.id == id)
    }

    fn remove(&mut self, id: u64) -> Option<Transfer> {
        if self.sending.as_ref().is_some_and(|t| t.id == id) {
            return self.sending.take();
        }
        let at = self.awaiting.iter().position(|t| t.id == id)?;
        self.awaiting.remove(at)
    }

    fn unknown(&self, id: u64) -> AckOutcome {
        if id < self.next_id {
            // Finished, refused or not started: a late or crossing message, not an error.
            AckOutcome::Stale
        } else {
            AckOutcome::Unexpected
        }
    }

    /// Handles an XFER_ACK. Its flags are not checked: dtn7-rs acknowledges later segments with
    /// empty flags, so completion is the acknowledged length reaching the bundle's size.
    pub(super) fn on_ack(&mut self, ack: &XferAck) -> AckOutcome {
        let id = ack.transfer_id;
        let Some(t) = self.find(id) else {
            return self.unknown(id);
        };
        let len = ack.acknowledged_length;
        if len > t.sent {
            return AckOutcome::Violation(format!(
                "acknowledgement of {len} bytes of transfer {id}, of which {} were sent",
                t.sent
            ));
        }
        if len < t.acked {
            return AckOutcome::Stale;
        }
        let advanced = len > t.acked || (len == 0 && t.total == 0);
        t.acked = len;
        if t.fully_sent() && t.acked >= t.total {
            self.remove(id);
            AckOutcome::Sent { id }
        } else if advanced {
            AckOutcome::Progress {
                id,
                acked: len,
                total: t.total,
            }
        } else {
            AckOutcome::Stale
        }
    }

    /// Handles an XFER_REFUSE: the transfer is dropped. `Ok(acknowledged bytes)`, or what the
    /// refusal of an unknown transfer means.
    pub(super) fn on_refuse(&mut self, id: u64) -> Result<u64, AckOutcome> {
        match self.remove(id) {
            Some(t) => Ok(t.acked),
            None => Err(self.unknown(id)),
        }
    }

    /// Bundle bytes queued or in flight and not acknowledged.
    pub(super) fn queued_bytes(&self) -> u64 {
        self.sending
            .iter()
            .chain(&self.awaiting)
            .chain(&self.queue)
            .map(Transfer::unacked)
            .sum()
    }

    /// Every transfer not fully acknowledged (id, acknowledged bytes), in id order; the
    /// direction is emptied.
    pub(super) fn take_unfinished(&mut self) -> Vec<(u64, u64)> {
        let mut all: Vec<(u64, u64)> = self
            .sending
            .take()
            .into_iter()
            .chain(self.awaiting.drain(..))
            .chain(self.queue.drain(..))
            .map(|t| (t.id, t.acked))
            .collect();
        all.sort_unstable();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::DtnTime;
    use wire::tcpcl::{FrameLimits, Message};

    fn bundle(len: usize) -> EncodedBundle {
        use wire::{Bundle, CreationTimestamp, Eid, PrimaryBlock};
        let primary = PrimaryBlock::new(
            Eid::ipn(2, 1),
            Eid::ipn(1, 0),
            CreationTimestamp {
                time: DtnTime::from_millis(1),
                sequence: 0,
            },
            1000,
        );
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        Bundle::new(primary, Bytes::from(payload)).encode()
    }

    fn decode(parts: &[Bytes]) -> XferSegment {
        let mut buf = BytesMut::new();
        for p in parts {
            buf.extend_from_slice(p);
        }
        match Message::decode_from(&mut buf, FrameLimits::new(u64::MAX >> 1)) {
            Ok(Some(Message::XferSegment(s))) if buf.is_empty() => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn segments_are_slices_and_carry_flags_and_length() {
        let b = bundle(100);
        let whole = b.to_bytes();
        let payload_ptr = b.parts()[1].as_ptr_range();
        let mut out = Outgoing::default();
        let id = out.enqueue(&b, false);
        let mut data = Vec::new();
        let mut flags = Vec::new();
        let mut extension_lengths = Vec::new();
        let mut slices_of_payload = 0;
        while let Some(parts) = out.next_segment(40, true) {
            slices_of_payload += parts[1..]
                .iter()
                .filter(|p| payload_ptr.contains(&p.as_ptr()))
                .count();
            let s = decode(&parts);
            assert_eq!(s.transfer_id, id);
            assert!(s.data.len() <= 40);
            flags.push((s.flags.is_start(), s.flags.is_end()));
            extension_lengths.push(s.transfer_length().unwrap());
            data.extend_from_slice(&s.data);
            if s.flags.is_end() {
                break;
            }
        }
        assert_eq!(data, whole);
        assert!(slices_of_payload >= 3, "payload goes out by reference");
        assert_eq!(flags.first(), Some(&(true, false)));
        assert_eq!(flags.last(), Some(&(false, true)));
        assert_eq!(extension_lengths[0], Some(whole.len() as u64));
        assert!(extension_lengths[1..].iter().all(Option::is_none));
        assert!(out.in_progress());
        assert_eq!(out.queued_bytes(), whole.len() as u64);
    }

    #[test]
    fn one_segment_has_no_transfer_length() {
        let b = bundle(10);
        let mut out = Outgoing::default();
        out.enqueue(&b, false);
        let s = decode(&out.next_segment(1 << 20, true).unwrap());
        assert_eq!(s.flags, SegmentFlags::new(true, true));
        assert!(s.extensions.is_empty());
        assert!(out.next_segment(1 << 20, true).is_none());
    }

    #[test]
    fn acks_complete_by_length_not_flags() {
        let b = bundle(100);
        let total = b.len() as u64;
        let mut out = Outgoing::default();
        let id = out.enqueue(&b, false);
        while out.next_segment(50, true).is_some() {}
        let ack = |len| XferAck {
            flags: SegmentFlags(0),
            transfer_id: id,
            acknowledged_length: len,
        };
        assert_eq!(
            out.on_ack(&ack(50)),
            AckOutcome::Progress {
                id,
                acked: 50,
                total
            }
        );
        assert_eq!(out.on_ack(&ack(40)), AckOutcome::Stale);
        assert!(matches!(
            out.on_ack(&ack(total + 1)),
            AckOutcome::Violation(_)
        ));
        assert_eq!(out.on_ack(&ack(total)), AckOutcome::Sent { id });
        assert_eq!(out.on_ack(&ack(total)), AckOutcome::Stale);
        assert_eq!(
            out.on_ack(&XferAck {
                transfer_id: 9,
                ..ack(1)
            }),
            AckOutcome::Unexpected
        );
        assert!(!out.in_progress());
    }

    #[test]
    fn urgent_goes_first_among_queued() {
        let mut out = Outgoing::default();
        let a = out.enqueue(&bundle(1), false);
        let b = out.enqueue(&bundle(1), false);
        let c = out.enqueue(&bundle(1), true);
        let d = out.enqueue(&bundle(1), true);
        let order: Vec<u64> = std::iter::from_fn(|| out.next_segment(1 << 20, true))
            .map(|p| decode(&p).transfer_id)
            .collect();
        assert_eq!(order, [c, d, a, b]);
        assert_eq!(out.take_unfinished(), [(a, 0), (b, 0), (c, 0), (d, 0)]);
    }
}
