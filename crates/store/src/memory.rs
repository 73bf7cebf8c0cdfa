//! A bounded in-memory store: for tests, the simulator and nodes without a disk.
//!
//! Bundles are kept as the decoded `Bundle` they were inserted with, so a payload replicated to many
//! simulated nodes is shared, not copied. `flush` does nothing: there is nothing to make durable.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use wire::{Bundle, BundleId, CreationTimestamp, DtnTime, Eid};

use crate::{
    BundleMeta, BundleStore, Inserted, Rank, Result, RpcTable, Store, StoreError, StoredBundle,
    Tables, Usage, plan_eviction,
};

#[derive(Clone)]
struct Entry {
    meta: BundleMeta,
    bundle: Bundle,
    size: u64,
    sent_to: BTreeSet<Eid>,
}

/// A store in memory with a byte quota. All operations are logarithmic except the scans
/// (`list`, `not_sent_to`), which are linear. A clone is a snapshot (payloads are shared, not
/// copied): the simulator keeps one per commit to model what a power cut leaves.
#[derive(Clone)]
pub struct MemoryStore {
    quota: u64,
    used: u64,
    bundles: BTreeMap<BundleId, Entry>,
    by_destination: BTreeSet<(Eid, BundleId)>,
    by_expiry: BTreeSet<(DtnTime, BundleId)>,
    by_rank: BTreeSet<(Rank, BundleId)>,
    rpc: BTreeMap<(RpcTable, Bytes), Bytes>,
    /// Bytes of the tables' values (keys not counted).
    table_bytes: u64,
    /// Whether the tables' values count against the quota too ([`MemoryStore::counting_tables`]).
    tables_in_quota: bool,
}

impl MemoryStore {
    /// An empty store that holds at most `quota` bytes of encoded bundles.
    pub fn new(quota: u64) -> Self {
        Self {
            quota,
            used: 0,
            bundles: BTreeMap::new(),
            by_destination: BTreeSet::new(),
            by_expiry: BTreeSet::new(),
            by_rank: BTreeSet::new(),
            rpc: BTreeMap::new(),
            table_bytes: 0,
            tables_in_quota: false,
        }
    }

    /// The same store with its tables' values counted against the quota beside the bundles:
    /// for a daemon whose only store is memory, where an inbox that no application reads, or
    /// calls' files, would otherwise grow with what strangers send. A put that does not fit is
    /// refused with [`StoreError::Full`] (tables are never evicted). Usage then reports both.
    pub fn counting_tables(mut self) -> Self {
        self.tables_in_quota = true;
        self
    }

    /// The quota left for bundles.
    fn bundle_quota(&self) -> u64 {
        if self.tables_in_quota {
            self.quota.saturating_sub(self.table_bytes)
        } else {
            self.quota
        }
    }

    /// Puts a table value, counting its bytes (and refusing it when tables count against the
    /// quota and it does not fit).
    fn put_value(&mut self, table: RpcTable, key: &[u8], value: Bytes) -> Result<()> {
        let key = (table, Bytes::copy_from_slice(key));
        let old = self.rpc.get(&key).map_or(0, |v| v.len() as u64);
        let needed = value.len() as u64;
        let others = self.used + self.table_bytes - old;
        if self.tables_in_quota && others.saturating_add(needed) > self.quota {
            return Err(StoreError::Full {
                needed,
                available: self.quota.saturating_sub(others),
                quota: self.quota,
            });
        }
        self.table_bytes = self.table_bytes - old + needed;
        self.rpc.insert(key, value);
        Ok(())
    }

    fn unlink(&mut self, id: &BundleId) -> Option<Entry> {
        let entry = self.bundles.remove(id)?;
        let meta = &entry.meta;
        self.by_destination
            .remove(&(meta.destination.clone(), id.clone()));
        self.by_expiry.remove(&(meta.expiry, id.clone()));
        self.by_rank.remove(&(meta.rank(), id.clone()));
        self.used -= entry.size;
        Some(entry)
    }

    /// The smallest set of candidates that `plan_eviction` needs to see: every expired bundle and
    /// the lowest-ranked others until their sizes cover `needed`.
    fn eviction_candidates(
        &self,
        now: DtnTime,
        incoming: Rank,
        needed: u64,
    ) -> Vec<(BundleId, Rank, u64)> {
        let size = |id: &BundleId| self.bundles[id].size;
        let mut out: Vec<(BundleId, Rank, u64)> = self
            .by_expiry
            .iter()
            .take_while(|(expiry, _)| *expiry <= now)
            .map(|(_, id)| (id.clone(), self.bundles[id].meta.rank(), size(id)))
            .collect();
        let mut covered: u64 = out.iter().map(|c| c.2).sum();
        for (rank, id) in &self.by_rank {
            if covered >= needed || *rank >= incoming {
                break;
            }
            if rank.expiry <= now {
                continue; // already listed as expired
            }
            covered += size(id);
            out.push((id.clone(), *rank, size(id)));
        }
        out
    }
}

impl BundleStore for MemoryStore {
    fn insert(&mut self, now: DtnTime, bundle: StoredBundle) -> Result<Inserted> {
        let id = bundle.meta.id.clone();
        if self.bundles.contains_key(&id) {
            return Ok(Inserted {
                new: false,
                evicted: Vec::new(),
            });
        }
        let (head, payload, tail) = bundle.bundle.encoded_sizes();
        let needed = (head + payload + tail) as u64;
        let incoming = bundle.meta.rank();
        let candidates = self.eviction_candidates(now, incoming, needed);
        let quota = self.bundle_quota();
        let evicted = plan_eviction(now, incoming, needed, self.used, quota, candidates).map_err(
            |available| StoreError::Full {
                needed,
                available,
                quota: self.quota,
            },
        )?;
        for victim in &evicted {
            self.unlink(victim);
        }
        let meta = bundle.meta;
        self.by_destination
            .insert((meta.destination.clone(), id.clone()));
        self.by_expiry.insert((meta.expiry, id.clone()));
        self.by_rank.insert((meta.rank(), id.clone()));
        self.used += needed;
        self.bundles.insert(
            id,
            Entry {
                meta,
                bundle: bundle.bundle,
                size: needed,
                sent_to: BTreeSet::new(),
            },
        );
        Ok(Inserted { new: true, evicted })
    }

    fn get(&self, id: &BundleId) -> Result<Option<StoredBundle>> {
        Ok(self.bundles.get(id).map(|e| StoredBundle {
            meta: e.meta.clone(),
            bundle: e.bundle.clone(),
        }))
    }

    fn contains(&self, id: &BundleId) -> Result<bool> {
        Ok(self.bundles.contains_key(id))
    }

    fn remove(&mut self, id: &BundleId) -> Result<bool> {
        Ok(self.unlink(id).is_some())
    }

    fn list(&self) -> Result<Vec<BundleMeta>> {
        Ok(self.bundles.values().map(|e| e.meta.clone()).collect())
    }

    fn by_destination(&self, destination: &Eid) -> Result<Vec<BundleId>> {
        Ok(self
            .by_destination
            .iter()
            .skip_while(|(d, _)| d < destination)
            .take_while(|(d, _)| d == destination)
            .map(|(_, id)| id.clone())
            .collect())
    }

    fn expiring_by(&self, time: DtnTime) -> Result<Vec<BundleId>> {
        Ok(self
            .by_expiry
            .iter()
            .take_while(|(expiry, _)| *expiry <= time)
            .map(|(_, id)| id.clone())
            .collect())
    }

    fn not_sent_to(&self, peer: &Eid) -> Result<Vec<BundleId>> {
        Ok(self
            .bundles
            .iter()
            .filter(|(_, e)| !e.sent_to.contains(peer))
            .map(|(id, _)| id.clone())
            .collect())
    }

    fn mark_sent(&mut self, id: &BundleId, peer: &Eid) -> Result<()> {
        if let Some(entry) = self.bundles.get_mut(id) {
            entry.sent_to.insert(peer.clone());
        }
        Ok(())
    }

    fn fragments_of(&self, source: &Eid, creation: CreationTimestamp) -> Result<Vec<BundleId>> {
        let start = BundleId {
            source: source.clone(),
            creation,
            fragment: None,
        };
        Ok(self
            .bundles
            .range(start..)
            .take_while(|(id, _)| &id.source == source && id.creation == creation)
            .map(|(id, _)| id.clone())
            .collect())
    }

    fn usage(&self) -> Result<Usage> {
        let tables = if self.tables_in_quota {
            self.table_bytes
        } else {
            0
        };
        Ok(Usage {
            bundles: self.bundles.len() as u64,
            bytes: self.used + tables,
            quota: self.quota,
        })
    }
}

impl Tables for MemoryStore {
    fn rpc_put(&mut self, table: RpcTable, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_value(table, key, Bytes::copy_from_slice(value))
    }

    fn rpc_put_bytes(&mut self, table: RpcTable, key: &[u8], value: &Bytes) -> Result<()> {
        self.put_value(table, key, value.clone())
    }

    fn rpc_get(&self, table: RpcTable, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.rpc.get(&(table, Bytes::copy_from_slice(key))).cloned())
    }

    fn rpc_remove(&mut self, table: RpcTable, key: &[u8]) -> Result<bool> {
        let removed = self.rpc.remove(&(table, Bytes::copy_from_slice(key)));
        if let Some(value) = &removed {
            self.table_bytes -= value.len() as u64;
        }
        Ok(removed.is_some())
    }

    fn rpc_range(
        &self,
        table: RpcTable,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        Ok(self
            .rpc
            .range((table, Bytes::copy_from_slice(from))..)
            .take_while(|((t, k), _)| *t == table && to.is_none_or(|to| k.as_ref() < to))
            .take(limit)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl Store for MemoryStore {
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Retention;

    #[test]
    fn tables_counted_against_the_quota_refuse_what_does_not_fit() {
        let mut s = MemoryStore::new(10_000).counting_tables();
        s.rpc_put(RpcTable::InboxPayload, b"a", &[1; 6_000])
            .unwrap();
        let err = s
            .rpc_put_bytes(RpcTable::InboxPayload, b"b", &Bytes::from(vec![2; 5_000]))
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Full {
                    needed: 5_000,
                    available: 4_000,
                    quota: 10_000
                }
            ),
            "{err:?}"
        );
        assert!(s.rpc_get(RpcTable::InboxPayload, b"b").unwrap().is_none());
        // Replacing a value counts only the difference; removing one gives its room back.
        s.rpc_put(RpcTable::InboxPayload, b"a", &[1; 9_000])
            .unwrap();
        assert_eq!(s.usage().unwrap().bytes, 9_000);
        s.rpc_remove(RpcTable::InboxPayload, b"a").unwrap();
        s.rpc_put(RpcTable::InboxPayload, b"b", &[2; 5_000])
            .unwrap();
        assert_eq!(s.usage().unwrap().bytes, 5_000);
        // Bundles get what the tables leave.
        let big = bundle(1, "b", DtnTime::from_millis(1_000), 5_500);
        assert!(matches!(
            s.insert(DtnTime::from_millis(0), big),
            Err(StoreError::Full { .. })
        ));
        let fits = bundle(2, "b", DtnTime::from_millis(1_000), 4_000);
        s.insert(DtnTime::from_millis(0), fits).unwrap();
        // Without counting_tables (the simulator's and tests' store) tables are not bounded.
        let mut plain = MemoryStore::new(10);
        plain
            .rpc_put(RpcTable::InboxPayload, b"a", &[1; 100])
            .unwrap();
        assert_eq!(plain.usage().unwrap().bytes, 0);
    }

    #[test]
    fn a_value_put_as_bytes_is_kept_without_a_copy() {
        let mut s = MemoryStore::new(1 << 20);
        let payload = Bytes::from(vec![7u8; 1 << 20]);
        s.rpc_put_bytes(RpcTable::InboxPayload, b"k", &payload)
            .unwrap();
        let got = s.rpc_get(RpcTable::InboxPayload, b"k").unwrap().unwrap();
        assert_eq!(got, payload);
        assert_eq!(
            got.as_ptr(),
            payload.as_ptr(),
            "the same buffer, not a copy"
        );
        // A put by slice still copies: the caller may reuse its buffer.
        s.rpc_put(RpcTable::InboxPayload, b"k", &payload).unwrap();
        let copied = s.rpc_get(RpcTable::InboxPayload, b"k").unwrap().unwrap();
        assert_eq!(copied, payload);
        assert_ne!(copied.as_ptr(), payload.as_ptr());
    }

    #[test]
    fn rpc_range_is_bounded_ordered_limited_and_per_table() {
        let mut s = MemoryStore::new(1 << 20);
        for k in [&b"a"[..], b"b", b"b\0", b"c", b"d"] {
            s.rpc_put(RpcTable::Pending, k, k).unwrap();
        }
        s.rpc_put(RpcTable::Dedup, b"b", b"other table").unwrap();
        let keys = |rows: Vec<(Bytes, Bytes)>| -> Vec<Vec<u8>> {
            rows.into_iter()
                .map(|(k, v)| {
                    assert_eq!(k, v, "the value under its key");
                    k.to_vec()
                })
                .collect()
        };
        let range = |from: &[u8], to: Option<&[u8]>, limit| {
            keys(s.rpc_range(RpcTable::Pending, from, to, limit).unwrap())
        };
        assert_eq!(range(b"b", Some(b"d"), 10), [&b"b"[..], b"b\0", b"c"]);
        assert_eq!(range(b"b", None, 2), [&b"b"[..], b"b\0"]);
        assert_eq!(range(b"", None, usize::MAX).len(), 5);
        assert!(range(b"c", Some(b"c"), 10).is_empty());
        assert!(range(b"e", None, 10).is_empty());
    }

    fn meta(seq: u64, dest: &str, expiry: DtnTime, retention: Retention) -> BundleMeta {
        BundleMeta {
            id: BundleId {
                source: Eid::dtn("src", "app").unwrap(),
                creation: CreationTimestamp {
                    time: DtnTime::from_millis(1),
                    sequence: seq,
                },
                fragment: None,
            },
            destination: Eid::dtn(dest, "app").unwrap(),
            expiry,
            priority: 1,
            retention,
            received_at: DtnTime::from_millis(0),
        }
    }

    /// A bundle whose encoded size is `size` plus a fixed header overhead (`OVERHEAD`).
    fn bundle(seq: u64, dest: &str, expiry: DtnTime, size: usize) -> StoredBundle {
        let meta = meta(seq, dest, expiry, Retention::Carried);
        let primary = wire::PrimaryBlock::new(
            meta.destination.clone(),
            meta.id.source.clone(),
            meta.id.creation,
            1_000,
        );
        let bundle = Bundle::new(primary, Bytes::from(vec![seq as u8; size]));
        StoredBundle { meta, bundle }
    }

    fn overhead() -> u64 {
        bundle(1, "b", DtnTime::from_millis(0), 10)
            .bundle
            .encode()
            .len() as u64
            - 10
    }

    #[test]
    fn insert_get_remove_and_indexes() {
        let mut s = MemoryStore::new(1_000);
        assert!(
            s.insert(
                DtnTime::from_millis(0),
                bundle(1, "b", DtnTime::from_millis(100), 10)
            )
            .unwrap()
            .new
        );
        assert!(
            s.insert(
                DtnTime::from_millis(0),
                bundle(2, "c", DtnTime::from_millis(50), 10)
            )
            .unwrap()
            .new
        );
        assert!(
            !s.insert(
                DtnTime::from_millis(0),
                bundle(1, "b", DtnTime::from_millis(100), 10)
            )
            .unwrap()
            .new
        );
        let id1 = meta(1, "b", DtnTime::from_millis(0), Retention::Carried).id;
        let id2 = meta(2, "c", DtnTime::from_millis(0), Retention::Carried).id;
        assert_eq!(s.get(&id1).unwrap().unwrap().bundle.payload.data.len(), 10);
        assert_eq!(
            s.by_destination(&Eid::dtn("b", "app").unwrap()).unwrap(),
            vec![id1.clone()]
        );
        assert_eq!(
            s.expiring_by(DtnTime::from_millis(60)).unwrap(),
            vec![id2.clone()]
        );
        let peer = Eid::dtn("p", "").unwrap();
        s.mark_sent(&id1, &peer).unwrap();
        assert_eq!(s.not_sent_to(&peer).unwrap(), vec![id2.clone()]);
        assert_eq!(s.usage().unwrap().bytes, 2 * (10 + overhead()));
        assert!(s.remove(&id1).unwrap());
        assert!(!s.remove(&id1).unwrap());
        assert_eq!(s.usage().unwrap().bytes, 10 + overhead());
    }

    #[test]
    fn full_store_evicts_expired_then_refuses() {
        let mut s = MemoryStore::new(25 + 2 * overhead());
        s.insert(
            DtnTime::from_millis(0),
            bundle(1, "b", DtnTime::from_millis(100), 10),
        )
        .unwrap();
        s.insert(
            DtnTime::from_millis(0),
            bundle(2, "b", DtnTime::from_millis(200), 10),
        )
        .unwrap();
        // At time 150 bundle 1 is expired and makes room.
        let ins = s
            .insert(
                DtnTime::from_millis(150),
                bundle(3, "b", DtnTime::from_millis(300), 10),
            )
            .unwrap();
        assert_eq!(
            ins.evicted,
            vec![meta(1, "b", DtnTime::from_millis(0), Retention::Carried).id]
        );
        // A carried bundle that expires sooner than every stored one ranks lowest: no room.
        let err = s
            .insert(
                DtnTime::from_millis(150),
                bundle(4, "b", DtnTime::from_millis(190), 10),
            )
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Full { available: 5, .. }),
            "{err}"
        );
        assert_eq!(s.usage().unwrap().bundles, 2);
        // One that expires later displaces the one expiring soonest.
        let ins = s
            .insert(
                DtnTime::from_millis(150),
                bundle(5, "b", DtnTime::from_millis(400), 10),
            )
            .unwrap();
        assert_eq!(
            ins.evicted,
            vec![meta(2, "b", DtnTime::from_millis(0), Retention::Carried).id]
        );
    }

    #[test]
    fn fragments_and_rpc_tables() {
        let mut s = MemoryStore::new(1_000);
        let mut a = bundle(7, "b", DtnTime::from_millis(100), 5);
        a.meta.id.fragment = Some((10, 5));
        let mut b = bundle(7, "b", DtnTime::from_millis(100), 5);
        b.meta.id.fragment = Some((0, 10));
        s.insert(DtnTime::from_millis(0), a).unwrap();
        s.insert(DtnTime::from_millis(0), b).unwrap();
        s.insert(
            DtnTime::from_millis(0),
            bundle(8, "b", DtnTime::from_millis(100), 5),
        )
        .unwrap();
        let frags = s
            .fragments_of(
                &Eid::dtn("src", "app").unwrap(),
                CreationTimestamp {
                    time: DtnTime::from_millis(1),
                    sequence: 7,
                },
            )
            .unwrap();
        let offsets: Vec<_> = frags.iter().map(|id| id.fragment.unwrap().0).collect();
        assert_eq!(offsets, vec![0, 10]);

        s.rpc_put(RpcTable::Dedup, b"k2", b"v2").unwrap();
        s.rpc_put(RpcTable::Dedup, b"k1", b"v1").unwrap();
        s.rpc_put(RpcTable::Outbox, b"k1", b"o").unwrap();
        assert_eq!(s.rpc_scan(RpcTable::Dedup).unwrap().len(), 2);
        assert_eq!(s.rpc_scan(RpcTable::Dedup).unwrap()[0].0.as_ref(), b"k1");
        assert!(s.rpc_remove(RpcTable::Outbox, b"k1").unwrap());
        assert_eq!(s.rpc_get(RpcTable::Outbox, b"k1").unwrap(), None);
        assert_eq!(
            s.rpc_get(RpcTable::Dedup, b"k1").unwrap().unwrap().as_ref(),
            b"v1"
        );
    }
}
