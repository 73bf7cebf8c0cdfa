//! How many served-call records the node keeps, in memory and in the store together, and how
//! many of them each caller has.
//!
//! A server keeps a record of every call that reached it (answered, refused or skipped) until
//! the call's deadline plus `retention`, so that a late copy gets the same answer and never runs
//! again. The deadline is the caller's: without a bound, a peer sending calls with new ids and
//! far deadlines, even to procedures the node does not offer, grows the store's tables for as
//! long as it keeps sending.
//!
//! The bound never drops a record early (that would let a late copy of its call run again).
//! When the node keeps [`RpcConfig::max_served_calls`] records, or the caller
//! [`RpcConfig::max_served_calls_per_caller`], a new call is dropped unheard: no record, no
//! reply. It has not run, so at most once still holds, and a later copy is served once there is
//! room; its caller, told nothing, waits out its deadline as for a lost bundle. The node's own
//! calls to itself are always kept (its user is trusted, as with the purge set's own entries).
//!
//! The counts follow every way a record comes and goes: a new record, the rows found at start,
//! the in-memory sweep and the sweep of rows that left memory. A record that leaves memory or
//! comes back from the store is the same record and changes nothing.

use std::collections::BTreeMap;

use seal::PublicKey;

/// The served-call records kept, and each caller's share.
#[derive(Debug, Default)]
pub(super) struct ServedCount {
    total: usize,
    by_caller: BTreeMap<PublicKey, usize>,
}

/// Why a new call finds no room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoRoom {
    /// The node keeps its most served-call records.
    Total,
    /// This caller has its most.
    Caller,
}

impl ServedCount {
    /// Records kept, all callers together.
    pub(super) fn total(&self) -> usize {
        self.total
    }

    /// Whether a new record from `caller` fits both bounds.
    pub(super) fn room_for(
        &self,
        caller: &PublicKey,
        total: usize,
        per_caller: usize,
    ) -> Result<(), NoRoom> {
        if self.total >= total {
            return Err(NoRoom::Total);
        }
        if self.by_caller.get(caller).copied().unwrap_or(0) >= per_caller {
            return Err(NoRoom::Caller);
        }
        Ok(())
    }

    /// A record of `caller`'s came to be (or was found in the store at start).
    pub(super) fn add(&mut self, caller: PublicKey) {
        self.total += 1;
        *self.by_caller.entry(caller).or_default() += 1;
    }

    /// A record of `caller`'s is gone for good.
    pub(super) fn remove(&mut self, caller: &PublicKey) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.by_caller.get_mut(caller) {
            *n -= 1;
            if *n == 0 {
                self.by_caller.remove(caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_is_checked_and_removal_makes_room_again() {
        let (a, b) = (PublicKey([1; 32]), PublicKey([2; 32]));
        let mut count = ServedCount::default();
        count.add(a);
        count.add(a);
        assert_eq!(count.room_for(&a, 3, 2), Err(NoRoom::Caller));
        assert_eq!(count.room_for(&b, 3, 2), Ok(()));
        count.add(b);
        assert_eq!(count.room_for(&b, 3, 2), Err(NoRoom::Total));
        count.remove(&a);
        assert_eq!(count.room_for(&a, 3, 2), Ok(()));
        count.remove(&a);
        count.remove(&b);
        assert_eq!(count.total(), 0);
        assert!(
            count.by_caller.is_empty(),
            "a caller with no records leaves no entry"
        );
        // A row found at start whose caller was never counted (a damaged value) costs nothing
        // when it goes.
        count.remove(&b);
        assert_eq!(count.total(), 0);
    }
}
