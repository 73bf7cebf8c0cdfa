//! Where a Ferry node keeps the bundles it has accepted, and where the RPC layer keeps the state
//! that must survive a restart (its dedup and result cache, pending calls, result outbox).
//!
//! ```text
//!   node / rpc ──insert, remove, mark_sent, rpc_put──►  Store  ──flush()──► durable
//!              ◄──get, by_destination, not_sent_to, …──        (acks go out only after flush)
//! ```
//!
//! One trait, [`Store`], with two implementations: [`MemoryStore`] (bounded, for tests, the
//! simulator and diskless nodes; no I/O) and [`DiskStore`] (crash-safe: SQLite in WAL mode for
//! metadata, indexes, small bundles and small RPC values, one payload file per bundle or RPC value
//! of at least [`PAYLOAD_FILE_MIN`] bytes). Both answer every query
//! identically, in the same order, with the same evictions (a model-based test holds this).
//!
//! ```no_run
//! # fn main() -> Result<(), store::StoreError> {
//! use store::{DiskStore, Store};
//! // `$XDG_DATA_HOME/ferry` or `$HOME/.local/share/ferry`, created if missing; 1 GiB quota.
//! let (mut store, recovery) = DiskStore::open_default(1 << 30)?;
//! for lost in &recovery.dropped {
//!     // A bundle whose payload file did not survive: report it deleted.
//!     eprintln!("dropped {}", lost.id);
//! }
//! store.flush()?;
//! # Ok(()) }
//! ```
//!
//! **Durability contract.** Mutations take effect at once for every later read, and become durable
//! together at the next [`Store::flush`]: a crash loses what was not flushed, never part of it. The
//! caller (the daemon's event loop) therefore releases acknowledgements for accepted bundles only
//! after `flush` returned `Ok`; many bundles share one flush (group commit). A flush is two steps
//! that a caller may also take apart: [`Store::commit`] (the batch is whole and survives a crash
//! of the process) and [`Syncer::sync`] from another thread (it survives a power loss), so that
//! the caller goes on working while the disk syncs and releases the acknowledgements after.
//!
//! **Eviction policy** (see [`Rank`]): when an insert would exceed the quota, the store first drops
//! expired bundles, then bundles that rank strictly below the new one: first bundles merely carried
//! for others, then those this node must still deliver locally, then those it originated; within a
//! class lower priority goes first, then the one expiring soonest. If that cannot make room the insert
//! fails with [`StoreError::Full`] and nothing is changed.
//!
//! This crate never reads a clock (time is passed in as [`DtnTime`]) and never decides routing.
//! Its only I/O is in `DiskStore` (module `disk`, the one place where clippy's file bans are
//! lifted) and the environment lookup of [`DiskStore::open_default`].

#![forbid(unsafe_code)]

mod data_dir;
mod disk;
mod keys;
mod memory;

use bytes::Bytes;
use wire::{Bundle, BundleId, CreationTimestamp, DtnTime, Eid};

pub use data_dir::{APP_DIR, default_data_dir};
pub use disk::{
    CHECKPOINT_WAL_BYTES, DB_FILE, DiskOptions, DiskStore, LOCK_FILE, PAYLOAD_DIR,
    PAYLOAD_FILE_MIN, RESERVE_FILE, RPC_FILE_PREFIX, Recovery, Syncer,
};
pub use memory::MemoryStore;

/// Why a bundle is kept, which decides the order of eviction: lower classes go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Retention {
    /// Carried on behalf of others (store-carry-forward).
    Carried = 0,
    /// Addressed to an endpoint of this node and not yet handed to the application.
    MustDeliver = 1,
    /// Created by this node's applications.
    Originated = 2,
}

impl Retention {
    /// The stable numeric code used by persistent stores.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The class for a stored code; unknown codes are treated as the most protected class.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => Self::Carried,
            1 => Self::MustDeliver,
            _ => Self::Originated,
        }
    }
}

/// What the store knows about a bundle besides its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleMeta {
    /// The bundle's identity (source, creation timestamp, fragment offset and length).
    pub id: BundleId,
    /// Its destination endpoint.
    pub destination: Eid,
    /// When it expires (DTN time, ms). Computed by the node, also for sources without a clock.
    pub expiry: DtnTime,
    /// Priority for eviction, higher is kept longer (0 = bulk, 1 = normal, 2 = expedited).
    pub priority: u8,
    /// Why the node keeps it.
    pub retention: Retention,
    /// When this node accepted it (DTN time, ms).
    pub received_at: DtnTime,
}

impl BundleMeta {
    /// The key eviction sorts by: smaller ranks are evicted first.
    pub fn rank(&self) -> Rank {
        Rank {
            retention: self.retention,
            priority: self.priority,
            expiry: self.expiry,
        }
    }
}

/// The eviction order: by retention class, then priority, then expiry (sooner goes first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank {
    /// Retention class.
    pub retention: Retention,
    /// Priority.
    pub priority: u8,
    /// Expiry time.
    pub expiry: DtnTime,
}

/// A stored bundle: its metadata and the bundle itself.
///
/// The bundle is kept decoded so that its payload (`Bytes`) is shared, never copied: a memory store
/// holds the same payload buffer as every other node in a simulation, and a persistent store writes
/// the encoded header blocks and the payload one after the other without joining them. Its size is
/// `bundle.encode().len()` (computed with `Bundle::encoded_sizes`, which skips the payload CRC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBundle {
    /// Metadata.
    pub meta: BundleMeta,
    /// The bundle.
    pub bundle: Bundle,
}

/// What an insert did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inserted {
    /// False when a bundle with the same id was already stored (the store is unchanged).
    pub new: bool,
    /// Bundles removed to make room, in eviction order (expired ones first).
    pub evicted: Vec<BundleId>,
}

/// How full the store is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Number of bundles.
    pub bundles: u64,
    /// Sum of the bundles' encoded lengths.
    pub bytes: u64,
    /// The configured limit on `bytes`.
    pub quota: u64,
}

/// Key/value tables for durable state beside the bundles (the RPC layer's, the daemon's inboxes,
/// the node's purge set).
/// Keys and values are opaque to the store; they commit in the same flush as bundles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RpcTable {
    /// Dedup and result cache, keyed by (caller, call id).
    Dedup,
    /// Calls this node made that await results.
    Pending,
    /// Results waiting to be (re)sent until their deadline.
    Outbox,
    /// Bundles delivered to a local endpoint that no application has taken yet (the daemon's
    /// inboxes), so a delivery survives a restart of the daemon: their descriptions.
    Inbox,
    /// The payloads of those bundles, under the same keys as their descriptions.
    InboxPayload,
    /// The RPC data channel's files (parameters and results), keyed by content hash.
    Files,
    /// Public keys the RPC layer learnt or was given for other nodes, keyed by node id.
    Keys,
    /// The node's purge set: whole bundles delivered (here or, as neighbours said, elsewhere),
    /// so that a copy offered again after a restart is refused. Key: the bundle's whole-bundle
    /// key, 8 bytes big-endian; value: until when the entry holds, 8 bytes big-endian.
    Purged,
}

impl RpcTable {
    /// Every table, in a fixed order.
    pub const ALL: [RpcTable; 8] = [
        RpcTable::Dedup,
        RpcTable::Pending,
        RpcTable::Outbox,
        RpcTable::Inbox,
        RpcTable::InboxPayload,
        RpcTable::Files,
        RpcTable::Keys,
        RpcTable::Purged,
    ];

    /// A stable name, used by persistent stores.
    pub fn name(self) -> &'static str {
        match self {
            Self::Dedup => "dedup",
            Self::Pending => "pending",
            Self::Outbox => "outbox",
            Self::Inbox => "inbox",
            Self::InboxPayload => "inbox_payload",
            Self::Files => "files",
            Self::Keys => "keys",
            Self::Purged => "purged",
        }
    }
}

/// Errors from a store. A full store is an expected condition the sender must be told about; the
/// others mean the backing medium failed, and nothing already flushed is lost.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The quota cannot take the bundle even after evicting everything ranked below it.
    #[error(
        "store full: the bundle needs {needed} bytes, {available} can be made free (quota {quota})"
    )]
    Full {
        /// Bytes the bundle needs.
        needed: u64,
        /// Bytes that are free or could be freed by eviction.
        available: u64,
        /// The configured quota.
        quota: u64,
    },
    /// The disk holding the store is full.
    #[error("disk full while {0}; bundles already stored are kept")]
    DiskFull(String),
    /// An I/O error of the backing medium.
    #[error("{context}: {source}")]
    Io {
        /// What the store was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The database reported an error.
    #[error("database error while {context}: {message}")]
    Database {
        /// What the store was doing.
        context: String,
        /// The database's message.
        message: String,
    },
    /// Stored data failed a consistency check.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The bundle breaks a rule of RFC 9171 that `Bundle::decode` checks, so a persistent store
    /// could not read it back; refused before anything is stored.
    #[error("bundle {id} cannot be stored: {reason}")]
    Invalid {
        /// The bundle's id.
        id: BundleId,
        /// The rule it breaks.
        reason: String,
    },
}

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The bundles a node holds, with their metadata, quota and eviction policy (see the crate
/// documentation). Methods return ids in a deterministic order (ascending [`BundleId`]) so that
/// callers stay deterministic. Part of a [`Store`]: its changes join the store's one batch.
pub trait BundleStore {
    /// Stores a bundle, evicting per the policy if the quota requires. `now` decides which bundles
    /// are expired. Inserting an id that is already stored changes nothing and reports `new: false`.
    fn insert(&mut self, now: DtnTime, bundle: StoredBundle) -> Result<Inserted>;

    /// The bundle with this id.
    fn get(&self, id: &BundleId) -> Result<Option<StoredBundle>>;

    /// Whether a bundle with this id is stored.
    fn contains(&self, id: &BundleId) -> Result<bool>;

    /// Removes a bundle; returns whether it was there.
    fn remove(&mut self, id: &BundleId) -> Result<bool>;

    /// Metadata of every stored bundle, ascending by id.
    fn list(&self) -> Result<Vec<BundleMeta>>;

    /// Ids of bundles for this destination endpoint.
    fn by_destination(&self, destination: &Eid) -> Result<Vec<BundleId>>;

    /// Ids of bundles whose expiry is at or before `time`, soonest first.
    fn expiring_by(&self, time: DtnTime) -> Result<Vec<BundleId>>;

    /// Ids of bundles not yet recorded as sent to `peer` (a node id).
    fn not_sent_to(&self, peer: &Eid) -> Result<Vec<BundleId>>;

    /// Records that a bundle was sent to `peer`. Unknown ids are ignored.
    fn mark_sent(&mut self, id: &BundleId, peer: &Eid) -> Result<()>;

    /// Ids of every stored fragment (and the whole bundle, if stored) of the bundle created by
    /// `source` at `creation`, ascending by offset.
    fn fragments_of(&self, source: &Eid, creation: CreationTimestamp) -> Result<Vec<BundleId>>;

    /// Current usage and quota.
    fn usage(&self) -> Result<Usage>;
}

/// Named key-value tables ([`RpcTable`]: the RPC engine's calls, dedup cache, outbox, keys and
/// files; the inboxes), keys and values as bytes, keys in ascending order. Part of a [`Store`]:
/// a table's changes join the same batch as the bundles', so one commit holds a bundle and the
/// records that refer to it.
pub trait Tables {
    /// Puts a value in an RPC table, replacing any value under the same key.
    fn rpc_put(&mut self, table: RpcTable, key: &[u8], value: &[u8]) -> Result<()>;

    /// Puts a value the caller holds as [`Bytes`], as [`Tables::rpc_put`] does: a store that
    /// keeps values in memory keeps this one as it is instead of copying it (an inbox's
    /// payload, a mebibyte or more).
    fn rpc_put_bytes(&mut self, table: RpcTable, key: &[u8], value: &Bytes) -> Result<()> {
        self.rpc_put(table, key, value)
    }

    /// Puts `head` followed by `body` as one value, as [`Tables::rpc_put`] does: for a large
    /// value made of a short header and content the caller holds already (an RPC file: its
    /// expiry, then its bytes), so that a store able to keep the content as it is need not have
    /// it copied into one buffer first. Reads return the joined value.
    fn rpc_put_parts(
        &mut self,
        table: RpcTable,
        key: &[u8],
        head: &[u8],
        body: &Bytes,
    ) -> Result<()> {
        self.rpc_put(table, key, &[head, &body[..]].concat())
    }

    /// The value of `key` without its first `head` bytes; `None` if there is none, or it is
    /// shorter: the content of a value put with [`Tables::rpc_put_parts`], which a store that
    /// keeps the parts apart gives as it was put, without joining them.
    fn rpc_get_body(&self, table: RpcTable, key: &[u8], head: usize) -> Result<Option<Bytes>> {
        let value = self.rpc_get(table, key)?;
        Ok(value.filter(|v| v.len() >= head).map(|v| v.slice(head..)))
    }

    /// Puts several values in one RPC table, in order, as [`Tables::rpc_put`] does each: for a
    /// store that writes many rows at a lower cost per row together (the disk store prepares
    /// its statement once for all of them). Stops at the first error.
    fn rpc_put_many(&mut self, table: RpcTable, rows: &[(&[u8], &[u8])]) -> Result<()> {
        for (key, value) in rows {
            self.rpc_put(table, key, value)?;
        }
        Ok(())
    }

    /// The value under a key.
    fn rpc_get(&self, table: RpcTable, key: &[u8]) -> Result<Option<Bytes>>;

    /// Removes a key; returns whether it was there.
    fn rpc_remove(&mut self, table: RpcTable, key: &[u8]) -> Result<bool>;

    /// Every (key, value) of a table, ascending by key.
    fn rpc_scan(&self, table: RpcTable) -> Result<Vec<(Bytes, Bytes)>> {
        self.rpc_range(table, &[], None, usize::MAX)
    }

    /// The (key, value) pairs of a table with `from <= key < to` (no upper bound if `to` is
    /// `None`), ascending by key, at most `limit` of them: a table read page by page (one
    /// that may hold millions of rows), or only the rows whose keys lead with a time before
    /// some instant.
    fn rpc_range(
        &self,
        table: RpcTable,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>>;

    /// Every key of a table with the first `head` bytes of its value and the value's whole
    /// length, ascending by key: what a scan at start needs from large values (a header) without
    /// reading them whole.
    fn rpc_scan_heads(&self, table: RpcTable, head: usize) -> Result<Vec<(Bytes, Bytes, u64)>> {
        Ok(self
            .rpc_scan(table)?
            .into_iter()
            .map(|(key, value)| {
                let len = value.len() as u64;
                (key, value.slice(..head.min(value.len())), len)
            })
            .collect())
    }
}

/// A node's storage: its bundles and its tables, changed in one batch that [`Store::commit`]
/// closes and a [`Syncer`] makes durable. See the crate documentation for the durability
/// contract.
pub trait Store: BundleStore + Tables {
    /// Makes every mutation so far durable (one transaction, one sync for the whole batch).
    fn flush(&mut self) -> Result<()>;

    /// Commits every mutation so far without waiting for the disk: the batch then survives a
    /// crash of this process, and becomes durable across a power loss once a [`Syncer::sync`]
    /// that started after this commit returned `Ok`. A store without a [`Store::syncer`] makes
    /// the batch as durable as it ever will be here (the default: a flush).
    ///
    /// This is what lets the daemon's event loop go on while the disk syncs: it commits, hands
    /// the sync to another thread, and releases what the batch promised when the sync is done.
    /// Returns whether there was anything to commit.
    fn commit(&mut self) -> Result<bool> {
        self.flush().map(|()| true)
    }

    /// Whether mutations since the last commit wait for one. A store whose every mutation is
    /// as durable as it gets at once says false (the default).
    fn has_uncommitted(&self) -> bool {
        false
    }

    /// Whether the next [`Store::commit`] waits for the disk (it syncs large values written in
    /// this batch), so that a caller on an async runtime moves it off its worker thread first.
    /// Other commits only hand their bytes to the operating system, except for an occasional
    /// checkpoint of a few megabytes.
    fn commit_waits_for_disk(&self) -> bool {
        false
    }

    /// What makes committed batches durable from another thread; `None` if [`Store::commit`]
    /// leaves nothing to sync.
    fn syncer(&self) -> Option<Syncer> {
        None
    }
}

/// Picks, among `candidates` (id, rank, size), the bundles to evict so that `needed` more bytes fit
/// under `quota` when `used` bytes are stored: expired first (`expiry <= now`), then ascending rank,
/// only ranks strictly below `incoming`. Returns `None` if that cannot make enough room.
///
/// Shared by every implementation so the policy is written once.
pub fn plan_eviction(
    now: DtnTime,
    incoming: Rank,
    needed: u64,
    used: u64,
    quota: u64,
    mut candidates: Vec<(BundleId, Rank, u64)>,
) -> std::result::Result<Vec<BundleId>, u64> {
    if used.saturating_add(needed) <= quota {
        return Ok(Vec::new());
    }
    // Expired bundles sort before all others; among them and among the rest, by rank then id.
    candidates.sort_by(|a, b| {
        let ka = (a.1.expiry > now, a.1, &a.0);
        let kb = (b.1.expiry > now, b.1, &b.0);
        ka.cmp(&kb)
    });
    let mut free = quota.saturating_sub(used);
    let mut plan = Vec::new();
    for (id, rank, size) in candidates {
        if free >= needed {
            break;
        }
        if rank.expiry > now && rank >= incoming {
            break;
        }
        free = free.saturating_add(size);
        plan.push(id);
    }
    if free >= needed { Ok(plan) } else { Err(free) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seq: u64) -> BundleId {
        BundleId {
            source: Eid::dtn("a", "").unwrap(),
            creation: CreationTimestamp {
                time: DtnTime::from_millis(1),
                sequence: seq,
            },
            fragment: None,
        }
    }

    fn rank(retention: Retention, priority: u8, expiry: DtnTime) -> Rank {
        Rank {
            retention,
            priority,
            expiry,
        }
    }

    #[test]
    fn no_eviction_when_it_fits() {
        let plan = plan_eviction(
            DtnTime::from_millis(0),
            rank(Retention::Carried, 0, DtnTime::from_millis(10)),
            10,
            0,
            10,
            vec![],
        );
        assert_eq!(plan, Ok(vec![]));
    }

    #[test]
    fn expired_go_first_even_if_ranked_higher() {
        let candidates = vec![
            (
                id(1),
                rank(Retention::Carried, 0, DtnTime::from_millis(1_000)),
                10,
            ),
            (
                id(2),
                rank(Retention::Originated, 2, DtnTime::from_millis(50)),
                10,
            ),
        ];
        let plan = plan_eviction(
            DtnTime::from_millis(100),
            rank(Retention::Carried, 1, DtnTime::from_millis(500)),
            10,
            20,
            20,
            candidates,
        );
        assert_eq!(plan, Ok(vec![id(2)]));
    }

    #[test]
    fn carried_before_originated_and_never_equal_or_higher_rank() {
        let candidates = vec![
            (
                id(1),
                rank(Retention::Originated, 0, DtnTime::from_millis(1_000)),
                10,
            ),
            (
                id(2),
                rank(Retention::Carried, 1, DtnTime::from_millis(1_000)),
                10,
            ),
            (
                id(3),
                rank(Retention::Carried, 0, DtnTime::from_millis(2_000)),
                10,
            ),
        ];
        let incoming = rank(Retention::MustDeliver, 0, DtnTime::from_millis(500));
        let plan = plan_eviction(
            DtnTime::from_millis(0),
            incoming,
            15,
            30,
            30,
            candidates.clone(),
        );
        assert_eq!(plan, Ok(vec![id(3), id(2)]));
        // The originated bundle outranks a must-deliver one: 30 bytes cannot be freed.
        assert_eq!(
            plan_eviction(DtnTime::from_millis(0), incoming, 30, 30, 30, candidates),
            Err(20)
        );
    }
}
