//! [`EventQueue`]: the simulator's events in the order they run, by time (whole milliseconds)
//! and, within one millisecond, in the order they were scheduled.
//!
//! Most events fall due within milliseconds of being scheduled (a transmission's end, a frame's
//! arrival), so the near future is a ring of buckets, one per millisecond, each a FIFO: pushing
//! and popping cost no comparisons. Events further off wait in a binary heap and move into the
//! ring when their millisecond comes within its reach. The order is exactly that of a heap
//! ordered by (time, sequence number): the ring only ever gets an event of a millisecond after
//! every event of that millisecond that waited in the heap, which were scheduled earlier.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Milliseconds the ring reaches ahead of the earliest bucket (a power of two).
const RING: u64 = 1 << 12;

/// Events in (time, scheduling order) order; see the module doc.
pub(crate) struct EventQueue<T> {
    /// Bucket `t % RING` holds the events of millisecond `t`, for `base <= t < base + RING`.
    ring: Vec<VecDeque<T>>,
    /// The earliest millisecond the ring holds: the time of the last event popped.
    base: u64,
    /// Events in the ring.
    in_ring: usize,
    /// Events at `base + RING` or later when scheduled, with their sequence numbers.
    later: BinaryHeap<Reverse<Later<T>>>,
    /// The sequence number of the last event scheduled.
    seq: u64,
}

struct Later<T> {
    at: u64,
    seq: u64,
    event: T,
}

impl<T> Ord for Later<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<T> PartialOrd for Later<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Later<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Later<T> {}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        Self {
            ring: (0..RING).map(|_| VecDeque::new()).collect(),
            base: 0,
            in_ring: 0,
            later: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> EventQueue<T> {
    /// Schedules `event` at millisecond `at`, after every event already scheduled for `at`.
    /// An event before the time of the last event popped is put at that time, after the events
    /// there (the simulator schedules nothing in its past).
    pub(crate) fn push(&mut self, at: u64, event: T) {
        self.seq += 1;
        let at = at.max(self.base);
        if at < self.base + RING {
            self.ring[(at % RING) as usize].push_back(event);
            self.in_ring += 1;
        } else {
            self.later.push(Reverse(Later {
                at,
                seq: self.seq,
                event,
            }));
        }
    }

    /// Removes and returns the next event and its time, unless it is due after `until`.
    pub(crate) fn pop_until(&mut self, until: u64) -> Option<(u64, T)> {
        if self.in_ring == 0 {
            // Nothing near: the first event waiting further off is next.
            let at = self.later.peek()?.0.at;
            if at > until {
                return None;
            }
            self.advance(at);
        }
        // The ring holds an event, so one of its buckets is not empty.
        let mut at = self.base;
        while self.ring[(at % RING) as usize].is_empty() {
            at += 1;
            if at > until {
                return None;
            }
        }
        self.advance(at);
        let event = self.ring[(at % RING) as usize].pop_front()?;
        self.in_ring -= 1;
        Some((at, event))
    }

    /// Moves the ring's start to millisecond `to` (every bucket before it is empty) and brings
    /// in the events now within its reach, in the order they were scheduled.
    fn advance(&mut self, to: u64) {
        self.base = to;
        while let Some(Reverse(first)) = self.later.peek() {
            if first.at >= self.base + RING {
                break;
            }
            let Some(Reverse(e)) = self.later.pop() else {
                break;
            };
            self.ring[(e.at % RING) as usize].push_back(e.event);
            self.in_ring += 1;
        }
    }

    /// Events waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.in_ring + self.later.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a binary heap ordered by (time, sequence) pops: the order the queue must keep.
    #[derive(Default)]
    struct Reference {
        heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
        seq: u64,
        now: u64,
    }

    impl Reference {
        fn push(&mut self, at: u64, event: u32) {
            self.seq += 1;
            self.heap.push(Reverse((at.max(self.now), self.seq, event)));
        }

        fn pop_until(&mut self, until: u64) -> Option<(u64, u32)> {
            let &Reverse((at, _, _)) = self.heap.peek()?;
            if at > until {
                return None;
            }
            let Reverse((at, _, event)) = self.heap.pop()?;
            self.now = at;
            Some((at, event))
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// Schedule this many events, each this far after the last popped time.
        Push(Vec<u64>),
        /// Pop events up to this far after the last popped time.
        Pop(u64, usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        // Delays near and far (beyond the ring), and many equal ones, for ties.
        let delay = prop_oneof![
            4 => 0u64..8,
            2 => 0u64..3 * RING,
            1 => Just(RING - 1),
            1 => Just(RING),
            1 => 0u64..40 * RING,
        ];
        prop_oneof![
            3 => prop::collection::vec(delay, 1..20).prop_map(Step::Push),
            2 => (0u64..2 * RING, 1usize..30).prop_map(|(d, n)| Step::Pop(d, n)),
        ]
    }

    proptest! {
        #[test]
        fn pops_in_the_order_of_a_heap_by_time_then_scheduling(
            steps in prop::collection::vec(step(), 1..60),
        ) {
            let mut queue = EventQueue::default();
            let mut reference = Reference::default();
            let mut now = 0;
            let mut next = 0u32;
            for step in steps {
                match step {
                    Step::Push(delays) => {
                        for d in delays {
                            queue.push(now + d, next);
                            reference.push(now + d, next);
                            next += 1;
                        }
                    }
                    Step::Pop(d, n) => {
                        for _ in 0..n {
                            let got = queue.pop_until(now + d);
                            prop_assert_eq!(got, reference.pop_until(now + d));
                            match got {
                                Some((at, _)) => now = at,
                                None => break,
                            }
                        }
                    }
                }
                prop_assert_eq!(queue.len(), reference.heap.len());
            }
            while let Some(got) = queue.pop_until(u64::MAX) {
                prop_assert_eq!(Some(got), reference.pop_until(u64::MAX));
            }
            prop_assert_eq!(reference.pop_until(u64::MAX), None);
        }
    }

    #[test]
    fn an_event_in_the_past_runs_now_after_those_of_now() {
        let mut queue = EventQueue::default();
        queue.push(10, "a");
        queue.push(10, "b");
        assert_eq!(queue.pop_until(100), Some((10, "a")));
        queue.push(3, "late");
        assert_eq!(queue.pop_until(100), Some((10, "b")));
        assert_eq!(queue.pop_until(100), Some((10, "late")));
        assert_eq!(queue.pop_until(100), None);
    }

    #[test]
    fn far_events_keep_their_order_with_near_ones_of_the_same_time() {
        let mut queue = EventQueue::default();
        let far = 3 * RING + 5;
        queue.push(far, 1);
        queue.push(1, 0);
        assert_eq!(queue.pop_until(u64::MAX), Some((1, 0)));
        // Scheduled later for the same millisecond: runs after the one that waited.
        queue.push(far, 2);
        queue.push(2 * RING, 3);
        assert_eq!(queue.pop_until(far - 1), Some((2 * RING, 3)));
        queue.push(far, 4);
        assert_eq!(queue.pop_until(far - 1), None);
        assert_eq!(queue.pop_until(far), Some((far, 1)));
        assert_eq!(queue.pop_until(far), Some((far, 2)));
        assert_eq!(queue.pop_until(far), Some((far, 4)));
        assert_eq!(queue.pop_until(u64::MAX), None);
    }
}
