//! [`HeldIndex`]: what the node keeps in memory about each bundle in its store, so that routing
//! never scans the store. One type keeps the four views of the held bundles (by id, by bundle
//! key, by the whole bundle a piece belongs to, by expiry) in step: every change goes through
//! [`HeldIndex::insert`] or [`HeldIndex::remove`].

use std::collections::{BTreeMap, BTreeSet};

use wire::{Bundle, BundleFlags, BundleId, DtnTime, Eid, bundle_key};

use crate::classes::{copies_of, is_broadcast};

/// What the node keeps in memory about one stored bundle.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) key: u64,
    /// Key of the whole bundle (fragment info removed): what the purge set names.
    pub(crate) adu_key: u64,
    pub(crate) dest_node: Eid,
    pub(crate) expiry: DtnTime,
    pub(crate) copies: Option<u64>,
    pub(crate) payload_len: u64,
    pub(crate) flags: BundleFlags,
    pub(crate) report_to: Eid,
    pub(crate) broadcast: bool,
}

impl Held {
    /// The index entry of a bundle that expires at `expiry`.
    pub(crate) fn of(bundle: &Bundle, expiry: DtnTime) -> Self {
        let id = bundle.id();
        Held {
            key: bundle_key(&id),
            adu_key: adu_key(&id),
            dest_node: bundle.primary.destination.node_id(),
            expiry,
            copies: copies_of(bundle),
            payload_len: bundle.payload.data.len() as u64,
            flags: bundle.primary.flags,
            report_to: bundle.primary.report_to.clone(),
            broadcast: is_broadcast(&bundle.primary.destination),
        }
    }
}

/// The key of the whole bundle a fragment belongs to.
pub(crate) fn adu_key(id: &BundleId) -> u64 {
    bundle_key(&BundleId {
        fragment: None,
        ..id.clone()
    })
}

/// The held bundles, by id, by key, by whole bundle and by expiry.
#[derive(Debug, Default)]
pub(crate) struct HeldIndex {
    by_id: BTreeMap<BundleId, Held>,
    /// Keys of the held bundles (a summary vector lists these).
    keys: BTreeSet<u64>,
    /// The held pieces of each whole bundle, by the whole bundle's key.
    by_adu: BTreeMap<u64, BTreeSet<BundleId>>,
    expiries: BTreeSet<(DtnTime, BundleId)>,
}

/// What [`HeldIndex::remove`] took out.
pub(crate) struct Removed {
    pub(crate) held: Held,
    /// Whether it was the last piece of its whole bundle held here.
    pub(crate) last_piece: bool,
}

impl HeldIndex {
    pub(crate) fn insert(&mut self, id: BundleId, held: Held) {
        if let Some(old) = self.by_id.get(&id) {
            // Re-indexed under a new expiry (or the same): the old expiry entry must not outlive it.
            self.expiries.remove(&(old.expiry, id.clone()));
        }
        self.expiries.insert((held.expiry, id.clone()));
        self.keys.insert(held.key);
        self.by_adu
            .entry(held.adu_key)
            .or_default()
            .insert(id.clone());
        self.by_id.insert(id, held);
    }

    pub(crate) fn remove(&mut self, id: &BundleId) -> Option<Removed> {
        let held = self.by_id.remove(id)?;
        self.expiries.remove(&(held.expiry, id.clone()));
        self.keys.remove(&held.key);
        let mut last_piece = false;
        if let Some(pieces) = self.by_adu.get_mut(&held.adu_key) {
            pieces.remove(id);
            if pieces.is_empty() {
                self.by_adu.remove(&held.adu_key);
                last_piece = true;
            }
        }
        Some(Removed { held, last_piece })
    }

    pub(crate) fn get(&self, id: &BundleId) -> Option<&Held> {
        self.by_id.get(id)
    }

    /// The entry, to change what may change while a bundle is held (its spray copies).
    pub(crate) fn copies_mut(&mut self, id: &BundleId) -> Option<&mut Option<u64>> {
        self.by_id.get_mut(id).map(|h| &mut h.copies)
    }

    pub(crate) fn contains(&self, id: &BundleId) -> bool {
        self.by_id.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether a bundle with this key is held (a whole bundle, or one piece by its own key).
    pub(crate) fn holds_key(&self, key: u64) -> bool {
        self.keys.contains(&key)
    }

    /// Whether any piece of the whole bundle with this key is held.
    pub(crate) fn holds_piece_of(&self, adu_key: u64) -> bool {
        self.by_adu.contains_key(&adu_key)
    }

    /// The held pieces of the whole bundle with this key (the bundle itself if held whole).
    pub(crate) fn pieces_of(&self, adu_key: u64) -> impl Iterator<Item = &BundleId> {
        self.by_adu.get(&adu_key).into_iter().flatten()
    }

    /// Held bundles, ascending by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&BundleId, &Held)> {
        self.by_id.iter()
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = &BundleId> {
        self.by_id.keys()
    }

    /// The bundle that expires first, and when.
    pub(crate) fn first_expiry(&self) -> Option<(DtnTime, &BundleId)> {
        self.expiries.first().map(|(t, id)| (*t, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::CreationTimestamp;

    fn id(seq: u64, fragment: Option<u64>) -> BundleId {
        BundleId {
            source: Eid::dtn("a", "x").unwrap(),
            creation: CreationTimestamp {
                time: DtnTime::from_millis(5),
                sequence: seq,
            },
            fragment: fragment.map(|offset| (offset, 50)),
        }
    }

    fn held(id: &BundleId, expiry: DtnTime) -> Held {
        Held {
            key: bundle_key(id),
            adu_key: adu_key(id),
            dest_node: Eid::dtn("b", "").unwrap(),
            expiry,
            copies: None,
            payload_len: 10,
            flags: BundleFlags::default(),
            report_to: Eid::Null,
            broadcast: false,
        }
    }

    #[test]
    fn the_views_stay_in_step() {
        let mut index = HeldIndex::default();
        let first = id(1, Some(0));
        let second = id(1, Some(50));
        index.insert(first.clone(), held(&first, DtnTime::from_millis(30)));
        index.insert(second.clone(), held(&second, DtnTime::from_millis(20)));
        let whole = adu_key(&first);
        assert_eq!(whole, adu_key(&second));
        assert!(index.holds_piece_of(whole));
        assert!(index.holds_key(bundle_key(&first)));
        assert_eq!(
            index.first_expiry(),
            Some((DtnTime::from_millis(20), &second))
        );

        let removed = index.remove(&second).unwrap();
        assert!(!removed.last_piece);
        assert_eq!(
            index.first_expiry(),
            Some((DtnTime::from_millis(30), &first))
        );
        assert!(!index.holds_key(bundle_key(&second)));

        let removed = index.remove(&first).unwrap();
        assert!(removed.last_piece);
        assert!(!index.holds_piece_of(whole));
        assert_eq!(index.first_expiry(), None);
        assert_eq!(index.len(), 0);
        assert!(index.remove(&first).is_none());
    }

    #[test]
    fn reinserting_moves_the_expiry() {
        let mut index = HeldIndex::default();
        let b = id(2, None);
        index.insert(b.clone(), held(&b, DtnTime::from_millis(10)));
        index.insert(b.clone(), held(&b, DtnTime::from_millis(40)));
        assert_eq!(index.first_expiry(), Some((DtnTime::from_millis(40), &b)));
        index.remove(&b);
        assert_eq!(index.first_expiry(), None);
    }
}
