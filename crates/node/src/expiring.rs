//! [`ExpiringMap`]: entries that each hold until a time, found by key and dropped in the order
//! they expire. The node's purge set, its table of real-time bundles seen and the mesh's
//! link-state database are all such tables; one type keeps their two indexes in step.

use std::collections::{BTreeMap, BTreeSet};

use wire::DtnTime;

/// A map whose entries each hold until a time (see the module doc). Keys are ordered and
/// iterated in key order; [`ExpiringMap::pop_expired`] and [`ExpiringMap::pop_earliest`] take
/// entries in the order they expire (ties by key), so every use is deterministic.
#[derive(Debug, Clone)]
pub(crate) struct ExpiringMap<K, V> {
    entries: BTreeMap<K, (DtnTime, V)>,
    by_expiry: BTreeSet<(DtnTime, K)>,
}

impl<K: Ord + Clone, V> Default for ExpiringMap<K, V> {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone, V> ExpiringMap<K, V> {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `key` has an entry (expired or not: expiry happens in
    /// [`ExpiringMap::pop_expired`]).
    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(_, v)| v)
    }

    /// Until when `key` holds.
    #[cfg(test)]
    pub(crate) fn until(&self, key: &K) -> Option<DtnTime> {
        self.entries.get(key).map(|(t, _)| *t)
    }

    /// Adds or replaces `key`'s entry, holding until `until`; returns the old entry.
    pub(crate) fn insert(&mut self, key: K, until: DtnTime, value: V) -> Option<(DtnTime, V)> {
        let old = self.entries.insert(key.clone(), (until, value));
        if let Some((old_until, _)) = &old {
            if *old_until == until {
                return old;
            }
            self.by_expiry.remove(&(*old_until, key.clone()));
        }
        self.by_expiry.insert((until, key));
        old
    }

    /// Removes `key`'s entry, if it has one; returns its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let (until, value) = self.entries.remove(key)?;
        self.by_expiry.remove(&(until, key.clone()));
        Some(value)
    }

    /// When the first entry expires.
    pub(crate) fn next_expiry(&self) -> Option<DtnTime> {
        self.by_expiry.first().map(|(t, _)| *t)
    }

    /// Removes and returns an entry whose time is `now` or earlier, the earliest first.
    pub(crate) fn pop_expired(&mut self, now: DtnTime) -> Option<(K, V)> {
        if self.next_expiry()? > now {
            return None;
        }
        self.pop_earliest().map(|(k, _, v)| (k, v))
    }

    /// Removes and returns the entry that expires first (to make room in a bounded table).
    pub(crate) fn pop_earliest(&mut self) -> Option<(K, DtnTime, V)> {
        let (until, key) = self.by_expiry.pop_first()?;
        let (_, value) = self.entries.remove(&key)?;
        Some((key, until, value))
    }

    /// Keys in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }

    /// Values in key order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.values().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> DtnTime {
        DtnTime::from_millis(ms)
    }

    #[test]
    fn entries_expire_in_time_order_and_renewals_move_them() {
        let mut m: ExpiringMap<u64, &str> = ExpiringMap::new();
        m.insert(1, t(30), "a");
        m.insert(2, t(10), "b");
        m.insert(3, t(20), "c");
        assert_eq!(m.next_expiry(), Some(t(10)));
        // Renewing 2 moves it after 3; renewing to the same time changes nothing.
        assert_eq!(m.insert(2, t(25), "b2"), Some((t(10), "b")));
        assert_eq!(m.insert(3, t(20), "c"), Some((t(20), "c")));
        assert_eq!(m.next_expiry(), Some(t(20)));
        assert_eq!(m.pop_expired(t(19)), None);
        assert_eq!(m.pop_expired(t(25)), Some((3, "c")));
        assert_eq!(m.pop_expired(t(25)), Some((2, "b2")));
        assert_eq!(m.pop_expired(t(25)), None);
        assert_eq!(m.len(), 1);
        assert_eq!(m.until(&1), Some(t(30)));
        assert_eq!(m.pop_earliest(), Some((1, t(30), "a")));
        assert_eq!(m.next_expiry(), None, "no index entry outlives its entry");
    }

    #[test]
    fn the_earliest_goes_first_to_make_room() {
        let mut m: ExpiringMap<u64, ()> = ExpiringMap::new();
        for (k, ms) in [(5, 50), (6, 40), (7, 40)] {
            m.insert(k, t(ms), ());
        }
        assert_eq!(m.pop_earliest(), Some((6, t(40), ())), "ties go by key");
        assert_eq!(m.pop_earliest(), Some((7, t(40), ())));
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), vec![5]);
    }
}
