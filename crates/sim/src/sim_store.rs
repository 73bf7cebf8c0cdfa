//! The simulated nodes' store: a [`MemoryStore`] whose large RPC files are held once for the whole
//! network.
//!
//! The RPC engine keeps every data-channel file it receives in its node's store (`RpcTable::Files`,
//! key = the content's BLAKE3 hash, value = 8 bytes of expiry then the content). A broadcast file
//! parameter reaches every node, so a 100 MB file on 64 nodes would cost 6.4 GB of copies. Here a
//! large value is interned: every node that stores the same value (same hash, same expiry, same
//! length) holds a reference to one shared buffer, as the simulator's bundle payloads are shared.
//! What each node sees is unchanged: the same keys, the same bytes, the same answers.
//!
//! With the simulator's disk model ([`crate::DiskModel`]) the store also keeps what a disk would
//! hold ([`Disk`]): a snapshot at every commit that changed something (a process crash restarts
//! from the last one) and the snapshot the last finished sync covered (a power cut restarts from
//! that one, losing every commit after it). Snapshots share payloads and file buffers; only the
//! maps are copied.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use store::{
    BundleMeta, BundleStore, Inserted, MemoryStore, Result, RpcTable, Store, StoredBundle, Tables,
    Usage,
};
use wire::{BundleId, CreationTimestamp, DtnTime, Eid};

/// Values at least this long are interned.
const INTERN_MIN: usize = 64 * 1024;

/// What names an interned value: its key (the content hash), its length and its first 8 bytes
/// (the expiry).
type ValueKey = (Bytes, usize, [u8; 8]);

/// Large RPC file values shared by every node of a run.
#[derive(Default, Clone)]
pub(crate) struct Interner(Arc<Mutex<BTreeMap<ValueKey, Bytes>>>);

impl Interner {
    /// The shared buffer holding `head` followed by `body` (`head` is the 8-byte expiry), made
    /// if no node holds it yet: only the first node a file reaches copies it.
    fn intern(&self, key: &[u8], head: &[u8; 8], body: &[u8]) -> Bytes {
        let len = head.len() + body.len();
        let k = (Bytes::copy_from_slice(key), len, *head);
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = map.get(&k) {
            // The key is the hash of the content after the prefix: equal keys, lengths and
            // prefixes are equal values. Spot-check both ends of the content anyway.
            let edge = body.len().min(4096);
            let held = &v[head.len()..];
            if held[..edge] == body[..edge]
                && held[held.len() - edge..] == body[body.len() - edge..]
            {
                return v.clone();
            }
        }
        let mut joined = Vec::with_capacity(len);
        joined.extend_from_slice(head);
        joined.extend_from_slice(body);
        let v = Bytes::from(joined);
        // Buffers no node holds any more are let go.
        map.retain(|_, held| !held.is_unique());
        map.insert(k, v.clone());
        v
    }
}

/// A node's whole store at one moment.
#[derive(Clone)]
pub(crate) struct Snapshot {
    inner: MemoryStore,
    files: BTreeMap<Bytes, Bytes>,
}

/// What a simulated disk holds of one node's store, shared by the store (which takes a snapshot
/// at each commit) and the simulator (which runs the syncs and the crashes).
#[derive(Default)]
pub(crate) struct Disk {
    /// The store as of its last commit: a process crash restarts from here.
    committed: Option<Arc<Snapshot>>,
    /// What the sync under way will make durable (every commit before it started).
    syncing: Option<Arc<Snapshot>>,
    /// What survives a power cut.
    durable: Option<Arc<Snapshot>>,
    /// Commits that changed the store, and how many of them a power cut took.
    pub(crate) commits: u64,
    pub(crate) lost_commits: u64,
    /// Commits covered by the last finished sync.
    durable_commits: u64,
    syncing_commits: u64,
}

/// One node's [`Disk`], shared.
pub(crate) type DiskHandle = Arc<Mutex<Disk>>;

fn lock(disk: &DiskHandle) -> std::sync::MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A sync starts: it covers every commit so far.
pub(crate) fn begin_sync(disk: &DiskHandle) {
    let mut d = lock(disk);
    d.syncing = d.committed.clone();
    d.syncing_commits = d.commits;
}

/// The sync under way ended: what it covered is durable.
pub(crate) fn end_sync(disk: &DiskHandle) {
    let mut d = lock(disk);
    if let Some(s) = d.syncing.take() {
        d.durable = Some(s);
        d.durable_commits = d.syncing_commits;
    }
}

/// The node crashed: the store it restarts with. A power cut leaves what the last sync made
/// durable (commits after it are lost, and counted); a process crash what the last commit wrote.
pub(crate) fn after_crash(disk: &DiskHandle, power_cut: bool) -> Option<Snapshot> {
    let mut d = lock(disk);
    d.syncing = None;
    if power_cut {
        d.lost_commits += d.commits - d.durable_commits;
        d.commits = d.durable_commits;
        d.committed = d.durable.clone();
    }
    d.committed.as_deref().cloned()
}

/// A memory store whose large RPC file values are interned across the network.
pub(crate) struct SimStore {
    inner: MemoryStore,
    files: BTreeMap<Bytes, Bytes>,
    interner: Interner,
    /// The disk model's view of this store, if the run has one.
    disk: Option<DiskHandle>,
    /// Whether something changed since the last commit.
    dirty: bool,
}

impl SimStore {
    pub(crate) fn new(quota: u64, interner: Interner, disk: Option<DiskHandle>) -> Self {
        Self {
            inner: MemoryStore::new(quota),
            files: BTreeMap::new(),
            interner,
            disk,
            dirty: false,
        }
    }

    /// The store a crashed node restarts with (empty if its disk held nothing yet).
    pub(crate) fn restored(
        snapshot: Option<Snapshot>,
        quota: u64,
        interner: Interner,
        disk: DiskHandle,
    ) -> Self {
        let mut store = Self::new(quota, interner, Some(disk));
        if let Some(s) = snapshot {
            store.inner = s.inner;
            store.files = s.files;
        }
        store
    }
}

impl BundleStore for SimStore {
    fn insert(&mut self, now: DtnTime, bundle: StoredBundle) -> Result<Inserted> {
        self.dirty = true;
        self.inner.insert(now, bundle)
    }

    fn get(&self, id: &BundleId) -> Result<Option<StoredBundle>> {
        self.inner.get(id)
    }

    fn contains(&self, id: &BundleId) -> Result<bool> {
        self.inner.contains(id)
    }

    fn remove(&mut self, id: &BundleId) -> Result<bool> {
        self.dirty = true;
        self.inner.remove(id)
    }

    fn list(&self) -> Result<Vec<BundleMeta>> {
        self.inner.list()
    }

    fn by_destination(&self, destination: &Eid) -> Result<Vec<BundleId>> {
        self.inner.by_destination(destination)
    }

    fn expiring_by(&self, time: DtnTime) -> Result<Vec<BundleId>> {
        self.inner.expiring_by(time)
    }

    fn not_sent_to(&self, peer: &Eid) -> Result<Vec<BundleId>> {
        self.inner.not_sent_to(peer)
    }

    fn mark_sent(&mut self, id: &BundleId, peer: &Eid) -> Result<()> {
        self.dirty = true;
        self.inner.mark_sent(id, peer)
    }

    fn fragments_of(&self, source: &Eid, creation: CreationTimestamp) -> Result<Vec<BundleId>> {
        self.inner.fragments_of(source, creation)
    }

    fn usage(&self) -> Result<Usage> {
        self.inner.usage()
    }
}

impl Tables for SimStore {
    fn rpc_put(&mut self, table: RpcTable, key: &[u8], value: &[u8]) -> Result<()> {
        self.dirty = true;
        if table != RpcTable::Files {
            return self.inner.rpc_put(table, key, value);
        }
        let value = match value.split_first_chunk::<8>() {
            Some((head, body)) if value.len() >= INTERN_MIN => {
                self.interner.intern(key, head, body)
            }
            _ => Bytes::copy_from_slice(value),
        };
        self.files.insert(Bytes::copy_from_slice(key), value);
        Ok(())
    }

    fn rpc_put_parts(
        &mut self,
        table: RpcTable,
        key: &[u8],
        head: &[u8],
        body: &Bytes,
    ) -> Result<()> {
        match <&[u8; 8]>::try_from(head) {
            Ok(head) if table == RpcTable::Files && 8 + body.len() >= INTERN_MIN => {
                self.dirty = true;
                let value = self.interner.intern(key, head, body);
                self.files.insert(Bytes::copy_from_slice(key), value);
                Ok(())
            }
            _ => {
                let mut value = Vec::with_capacity(head.len() + body.len());
                value.extend_from_slice(head);
                value.extend_from_slice(body);
                self.rpc_put(table, key, &value)
            }
        }
    }

    fn rpc_get(&self, table: RpcTable, key: &[u8]) -> Result<Option<Bytes>> {
        if table != RpcTable::Files {
            return self.inner.rpc_get(table, key);
        }
        Ok(self.files.get(key).cloned())
    }

    fn rpc_remove(&mut self, table: RpcTable, key: &[u8]) -> Result<bool> {
        self.dirty = true;
        if table != RpcTable::Files {
            return self.inner.rpc_remove(table, key);
        }
        Ok(self.files.remove(key).is_some())
    }

    fn rpc_range(
        &self,
        table: RpcTable,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        if table != RpcTable::Files {
            return self.inner.rpc_range(table, from, to, limit);
        }
        Ok(self
            .files
            .range(Bytes::copy_from_slice(from)..)
            .take_while(|(k, _)| to.is_none_or(|to| k.as_ref() < to))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl Store for SimStore {
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn commit(&mut self) -> Result<bool> {
        let Some(disk) = &self.disk else {
            return Ok(true);
        };
        if !std::mem::take(&mut self.dirty) {
            return Ok(false);
        }
        let snapshot = Snapshot {
            inner: self.inner.clone(),
            files: self.files.clone(),
        };
        let mut d = lock(disk);
        d.committed = Some(Arc::new(snapshot));
        d.commits += 1;
        Ok(true)
    }

    fn has_uncommitted(&self) -> bool {
        self.disk.is_some() && self.dirty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_files_are_shared_and_answers_unchanged() {
        let interner = Interner::default();
        let mut a = SimStore::new(1 << 20, interner.clone(), None);
        let mut b = SimStore::new(1 << 20, interner.clone(), None);
        let mut value = vec![0u8; 8];
        value.extend((0..200_000u32).map(|k| k as u8));
        let key = [7u8; 32];
        a.rpc_put(RpcTable::Files, &key, &value).unwrap();
        b.rpc_put(RpcTable::Files, &key, &value).unwrap();
        let va = a.rpc_get(RpcTable::Files, &key).unwrap().unwrap();
        let vb = b.rpc_get(RpcTable::Files, &key).unwrap().unwrap();
        assert_eq!(&va[..], &value[..]);
        assert_eq!(va.as_ptr(), vb.as_ptr(), "one buffer for both nodes");
        // A value given in parts (expiry, content) is the same value, in the same buffer.
        let mut c = SimStore::new(1 << 20, interner.clone(), None);
        let (head, body) = value.split_at(8);
        c.rpc_put_parts(RpcTable::Files, &key, head, &Bytes::copy_from_slice(body))
            .unwrap();
        let vc = c.rpc_get(RpcTable::Files, &key).unwrap().unwrap();
        assert_eq!(vc.as_ptr(), va.as_ptr());
        // Another expiry is another value.
        let mut later = value.clone();
        later[0] = 1;
        b.rpc_put(RpcTable::Files, &key, &later).unwrap();
        assert_eq!(
            &b.rpc_get(RpcTable::Files, &key).unwrap().unwrap()[..],
            &later[..]
        );
        assert_eq!(
            &a.rpc_get(RpcTable::Files, &key).unwrap().unwrap()[..],
            &value[..]
        );
        // Small values and other tables are plain.
        a.rpc_put(RpcTable::Files, b"k", b"12345678x").unwrap();
        a.rpc_put(RpcTable::Pending, b"p", b"v").unwrap();
        let scan = a.rpc_scan(RpcTable::Files).unwrap();
        assert_eq!(scan.len(), 2);
        assert_eq!(&scan[0].0[..], &key[..]);
        assert!(a.rpc_remove(RpcTable::Files, &key).unwrap());
        assert!(a.rpc_get(RpcTable::Files, &key).unwrap().is_none());
        assert_eq!(
            &a.rpc_get(RpcTable::Pending, b"p").unwrap().unwrap()[..],
            b"v"
        );
    }
}
