//! The memory every session of a node may hold in unfinished incoming transfers, together.
//!
//! A transfer is reassembled in memory until its last segment arrives. The transfer MRU bounds
//! one transfer; it does not bound how many sessions hold one, and a peer that starts a
//! transfer and never ends it keeps what it sent. A [`ReceiveBudget`] is shared by all of a
//! node's sessions: each segment's bytes are taken from it before they are kept, and given back
//! when the transfer is handed over, refused or cut. A segment that does not fit makes the
//! session refuse its transfer with XFER_REFUSE "No Resources" (RFC 9174 Table 7: the sender
//! may retry later, or fragment), and the budget counts the refusal.
//!
//! This is the one piece of state sessions share, so it is atomic; it holds no clock and no I/O,
//! and a session without a budget keeps the transfer MRU as its only bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
struct Shared {
    limit: u64,
    in_use: AtomicU64,
    refused: AtomicU64,
}

/// A node-wide bound on the bytes of unfinished incoming transfers. Cloning shares it.
#[derive(Debug, Clone)]
pub struct ReceiveBudget(Arc<Shared>);

impl ReceiveBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self(Arc::new(Shared {
            limit,
            in_use: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }))
    }

    /// The bound, in bytes.
    pub fn limit(&self) -> u64 {
        self.0.limit
    }

    /// Bytes held by unfinished transfers now.
    pub fn in_use(&self) -> u64 {
        self.0.in_use.load(Ordering::Relaxed)
    }

    /// Transfers refused because the budget was spent, since it was made.
    pub fn refused(&self) -> u64 {
        self.0.refused.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit; a refusal is counted.
    pub(super) fn try_take(&self, bytes: u64) -> bool {
        let taken = self
            .0
            .in_use
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&n| n <= self.0.limit)
            })
            .is_ok();
        if !taken {
            self.0.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    fn give_back(&self, bytes: u64) {
        self.0.in_use.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl PartialEq for ReceiveBudget {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ReceiveBudget {}

/// Bytes one transfer took from a budget; given back when dropped, so no path that ends a
/// transfer (completion, refusal, a cut, the session's end) can forget them.
#[derive(Debug, Default)]
pub(super) struct Reservation {
    budget: Option<ReceiveBudget>,
    bytes: u64,
}

impl Reservation {
    pub(super) fn new(budget: Option<ReceiveBudget>) -> Self {
        Self { budget, bytes: 0 }
    }

    /// Takes `bytes` more; false (nothing taken) if the budget cannot hold them.
    pub(super) fn grow(&mut self, bytes: u64) -> bool {
        match &self.budget {
            Some(b) if !b.try_take(bytes) => false,
            _ => {
                self.bytes = self.bytes.saturating_add(bytes);
                true
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_counted_and_given_back() {
        let budget = ReceiveBudget::new(100);
        let mut a = Reservation::new(Some(budget.clone()));
        let mut b = Reservation::new(Some(budget.clone()));
        assert!(a.grow(60));
        assert!(!b.grow(41), "61 + 41 > 100");
        assert!(b.grow(40));
        assert_eq!((budget.in_use(), budget.refused()), (100, 1));
        drop(a);
        assert_eq!(budget.in_use(), 40);
        drop(b);
        assert_eq!(budget.in_use(), 0);
        let mut unbounded = Reservation::new(None);
        assert!(unbounded.grow(u64::MAX));
    }
}
