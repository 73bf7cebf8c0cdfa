//! The simulated nodes' store: a [`MemoryStore`] whose RPC files are kept as they were handed
//! over, never copied.
//!
//! The RPC engine keeps every data-channel file it receives in its node's store (`RpcTable::Files`,
//! key = the content's BLAKE3 hash, value = 8 bytes of expiry then the content), put in those two
//! parts ([`Tables::rpc_put_parts`]) and read back as the content ([`Tables::rpc_get_body`]). A
//! broadcast file parameter reaches every node, so a 100 MB file on 64 nodes would cost 6.4 GB of
//! copies; here each node keeps the two parts apart, and the content is the buffer the engine
//! handed over, which the simulator's nodes share as they share bundle payloads. What each node
//! sees is unchanged: the same keys, the same bytes, the same answers (a read of the whole value
//! joins the parts).
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

/// An RPC file value: its head (the expiry, as the engine puts it; the first bytes of a value
/// put whole) and the rest, kept apart.
#[derive(Clone)]
struct FileValue {
    head: Bytes,
    body: Bytes,
}

impl FileValue {
    fn whole(value: &[u8]) -> Self {
        let (head, body) = value.split_at(value.len().min(8));
        Self {
            head: Bytes::copy_from_slice(head),
            body: Bytes::copy_from_slice(body),
        }
    }

    fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// The value as one buffer (a copy of both parts unless one is empty).
    fn joined(&self) -> Bytes {
        match (self.head.is_empty(), self.body.is_empty()) {
            (true, _) => self.body.clone(),
            (_, true) => self.head.clone(),
            _ => Bytes::from([&self.head[..], &self.body[..]].concat()),
        }
    }

    /// The value without its first `skip` bytes, `None` if it is shorter.
    fn after(&self, skip: usize) -> Option<Bytes> {
        match skip.checked_sub(self.head.len()) {
            Some(into_body) => (into_body <= self.body.len()).then(|| self.body.slice(into_body..)),
            None => Some(self.joined().slice(skip..)),
        }
    }
}

/// A node's whole store at one moment.
#[derive(Clone)]
pub(crate) struct Snapshot {
    inner: MemoryStore,
    files: BTreeMap<Bytes, FileValue>,
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

/// A memory store whose RPC files are kept as they were handed over.
pub(crate) struct SimStore {
    inner: MemoryStore,
    files: BTreeMap<Bytes, FileValue>,
    /// The disk model's view of this store, if the run has one.
    disk: Option<DiskHandle>,
    /// Whether something changed since the last commit.
    dirty: bool,
}

impl SimStore {
    pub(crate) fn new(quota: u64, disk: Option<DiskHandle>) -> Self {
        Self {
            inner: MemoryStore::new(quota),
            files: BTreeMap::new(),
            disk,
            dirty: false,
        }
    }

    /// The store a crashed node restarts with (empty if its disk held nothing yet).
    pub(crate) fn restored(snapshot: Option<Snapshot>, quota: u64, disk: DiskHandle) -> Self {
        let mut store = Self::new(quota, Some(disk));
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
        self.files
            .insert(Bytes::copy_from_slice(key), FileValue::whole(value));
        Ok(())
    }

    fn rpc_put_parts(
        &mut self,
        table: RpcTable,
        key: &[u8],
        head: &[u8],
        body: &Bytes,
    ) -> Result<()> {
        if table != RpcTable::Files {
            return self.inner.rpc_put_parts(table, key, head, body);
        }
        self.dirty = true;
        let value = FileValue {
            head: Bytes::copy_from_slice(head),
            body: body.clone(),
        };
        self.files.insert(Bytes::copy_from_slice(key), value);
        Ok(())
    }

    fn rpc_get(&self, table: RpcTable, key: &[u8]) -> Result<Option<Bytes>> {
        if table != RpcTable::Files {
            return self.inner.rpc_get(table, key);
        }
        Ok(self.files.get(key).map(FileValue::joined))
    }

    fn rpc_get_body(&self, table: RpcTable, key: &[u8], head: usize) -> Result<Option<Bytes>> {
        if table != RpcTable::Files {
            return self.inner.rpc_get_body(table, key, head);
        }
        Ok(self.files.get(key).and_then(|v| v.after(head)))
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
            .map(|(k, v)| (k.clone(), v.joined()))
            .collect())
    }

    fn rpc_scan_heads(&self, table: RpcTable, head: usize) -> Result<Vec<(Bytes, Bytes, u64)>> {
        if table != RpcTable::Files {
            return self.inner.rpc_scan_heads(table, head);
        }
        Ok(self
            .files
            .iter()
            .map(|(k, v)| {
                let first = match head.checked_sub(v.head.len()) {
                    None => v.head.slice(..head),
                    Some(0) => v.head.clone(),
                    Some(more) => {
                        let body = &v.body[..more.min(v.body.len())];
                        Bytes::from([&v.head[..], body].concat())
                    }
                };
                (k.clone(), first, v.len() as u64)
            })
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
    fn files_are_kept_as_handed_over_and_answers_unchanged() {
        let mut a = SimStore::new(1 << 20, None);
        let mut b = SimStore::new(1 << 20, None);
        let mut value = vec![0u8; 8];
        value.extend((0..200_000u32).map(|k| k as u8));
        let key = [7u8; 32];
        let (head, body) = value.split_at(8);
        let body = Bytes::copy_from_slice(body);
        a.rpc_put_parts(RpcTable::Files, &key, head, &body).unwrap();
        b.rpc_put_parts(RpcTable::Files, &key, head, &body).unwrap();
        // The content is the buffer handed over, in both nodes.
        let ca = a.rpc_get_body(RpcTable::Files, &key, 8).unwrap().unwrap();
        let cb = b.rpc_get_body(RpcTable::Files, &key, 8).unwrap().unwrap();
        assert_eq!(ca.as_ptr(), body.as_ptr());
        assert_eq!(cb.as_ptr(), body.as_ptr());
        // The whole value reads as the joined parts, and as a value put whole.
        let mut c = SimStore::new(1 << 20, None);
        c.rpc_put(RpcTable::Files, &key, &value).unwrap();
        for store in [&a, &c] {
            let whole = store.rpc_get(RpcTable::Files, &key).unwrap().unwrap();
            assert_eq!(&whole[..], &value[..]);
            let rest = store
                .rpc_get_body(RpcTable::Files, &key, 3)
                .unwrap()
                .unwrap();
            assert_eq!(&rest[..], &value[3..]);
            let heads = store.rpc_scan_heads(RpcTable::Files, 8).unwrap();
            assert_eq!(heads.len(), 1);
            assert_eq!(&heads[0].1[..], &value[..8]);
            assert_eq!(heads[0].2, value.len() as u64);
            let longer = store.rpc_scan_heads(RpcTable::Files, 12).unwrap();
            assert_eq!(&longer[0].1[..], &value[..12]);
        }
        // Another expiry in one node leaves the other's as it was.
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
        // Short values, and other tables.
        a.rpc_put(RpcTable::Files, b"k", b"1234").unwrap();
        assert_eq!(
            &a.rpc_get(RpcTable::Files, b"k").unwrap().unwrap()[..],
            b"1234"
        );
        assert!(a.rpc_get_body(RpcTable::Files, b"k", 8).unwrap().is_none());
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
