//! The persistent store: SQLite (WAL mode; the store syncs the WAL itself) for metadata, indexes,
//! small bundles and small RPC values; one file per large bundle or large RPC value.
//!
//! ```text
//!   <dir>/store.db, store.db-wal   bundles (metadata + indexes), bodies (inline bundles),
//!                                  sent (bundle × peer), rpc_<table> for each RpcTable (key,
//!                                  inline value or the id and length of its file),
//!                                  rpc_file_ids (file id sequence)
//!   <dir>/payloads/<rid>           encoded bundles of at least payload_file_min bytes
//!   <dir>/payloads/rpc-<fid>       RPC values of at least payload_file_min bytes
//!   <dir>/reserve                  256 KiB held back for removals on a full disk
//! ```
//!
//! (`<rid>` and `<fid>` are 16 lowercase hex digits; `payload_file_min` is [`PAYLOAD_FILE_MIN`]
//! unless [`DiskOptions`] lowers it.) Large RPC values leave the database for the same reasons as
//! large bundles: the daemon keeps every delivered bundle in [`RpcTable::Inbox`] until an
//! application takes it, and a blob would be copied through the WAL twice (commit, checkpoint)
//! and could not exceed SQLite's maximum length of 10⁹ bytes.
//!
//! **Commit protocol.** Every mutation joins one open SQLite transaction. A large bundle is written
//! to `payloads/<rid>` at insert time, a large RPC value to `payloads/rpc-<fid>` at put time, each
//! written and synced on a thread of its own, so the disk works while the caller goes on (a read
//! in the same batch is answered from the buffers being written). [`Store::commit`] then: waits
//! for the writes and syncs of every payload file of the batch,
//! syncs the `payloads` directory (their names), and commits the transaction, which appends it
//! to the WAL; a sync of the WAL ([`Store::flush`] does it inline, a [`Syncer`] on another
//! thread) makes the whole batch durable at once. A payload file is therefore reachable only through a
//! committed row, and a committed row only ever names a file whose bytes and name were durable
//! before the commit: a half-written file is never visible, so no temporary name and rename are
//! needed (the row is the rename). Files of removed bundles and of removed or replaced RPC values
//! are unlinked only after the change committed, so a rolled-back or crashed batch never lost
//! one. Bundle row ids and RPC file ids come from `AUTOINCREMENT` and are never reused once
//! committed, so a file name never refers to two values, and a pending unlink never hits a newer
//! file.
//!
//! **Recovery** at [`DiskStore::open`]: SQLite replays its WAL (an uncommitted batch vanishes);
//! then every file in `payloads` that no committed row names (a crashed batch's files, files whose
//! unlink did not happen) is removed, and every row whose file is missing or has the wrong length
//! is dropped and reported in [`Recovery`] so the node can send "deleted" status reports (and the
//! owner of an RPC table learns which entries are gone).
//!
//! **Failures.** A failed mutation or flush rolls the open batch back (the store then holds what
//! the last successful flush made durable) and the next `flush` fails too, so a caller never
//! acknowledges a bundle of a batch that was rolled back. SQLite's `SQLITE_FULL` and the OS's
//! `ENOSPC`/`EDQUOT` become [`StoreError::DiskFull`].
//!
//! **A full disk** must not lock the store: removing bundles needs a few WAL pages before it
//! frees anything. A reserve file of 256 KiB stands in the store directory; when the disk fills
//! it is deleted, so removals can commit, and written again after a later successful flush once
//! as much again is free beside it.
//!
//! **Single writer.** The store holds an exclusive lock on `<dir>/lock` (`flock`) from before
//! the database is opened until it is dropped: a second process (or a second open in this one)
//! gets an error instead of racing the recovery scan.
//!
//! **Schema versions.** The database's `user_version` is [`SCHEMA_VERSION`]; an older store is
//! migrated at open, in the same transaction that checks the version, and a newer one is
//! refused untouched ("has schema version N; this build knows M"). So a build never works on
//! tables it does not know: version 2 (RPC value files) keeps a version-1 build from deleting
//! them as orphans, version 3 split the one `rpc` table into one per [`RpcTable`], and version 4
//! added `rpc_purged` (the node's purge set), which a version-3 build would neither load nor
//! scan for value files; a version-3 build refuses a version-4 store rather than run without
//! the purge set and deliver again what was delivered. Opening a version-3 store creates the
//! table, empty.
//!
//! **Checkpoints off the writer's thread.** The writing connection never checkpoints by itself
//! (`wal_autocheckpoint=0`): a checkpoint of a 32 MiB WAL copies its pages into the database and
//! syncs both, about 100 ms that held every commit (and the daemon's loop that makes them) each
//! time. Instead [`Syncer::sync`], which already runs off the writer's thread, starts a
//! `PASSIVE` checkpoint on a connection of its own, on a thread of its own, once the WAL holds
//! [`CHECKPOINT_WAL_BYTES`] of frames; commits go on meanwhile, the writer's next commit copies
//! the few pages committed since, and the writer then starts the WAL over. So the database uses
//! SQLite's normal locking mode (a `-shm` index shared by the two connections), not the
//! exclusive one. An owner that commits but never syncs, neither by [`Store::flush`] nor by a
//! [`Syncer`], therefore never checkpoints either, but for `bound_wal` when the WAL outgrows
//! half the free space; and if the thread's checkpoint fails, the writer's next commit copies
//! the whole WAL itself, as before.

// This module is an I/O shell by design: it owns files, directories and the environment lookup of
// the default data directory. The sans-IO bans of clippy.toml do not apply here.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use wire::{Bundle, BundleId, CreationTimestamp, DtnTime, Eid};

use crate::keys::{
    decode_eid, decode_id, eid_key, id_key, origin_prefix, origin_upper, time_from_sql, time_to_sql,
};
use crate::{
    BundleMeta, BundleStore, Inserted, Rank, Result, Retention, RpcTable, Store, StoreError,
    StoredBundle, Tables, Usage, plan_eviction,
};

/// Bundles whose encoded length, and RPC values whose length, is at least this many bytes are kept
/// in a payload file of their own; smaller ones inline in the database. A file costs a sync of
/// its own (and its name's), an inline value a second copy (into the WAL at the commit, into the
/// database at the checkpoint) but no sync beyond the batch's one. 512 KiB: with 64 KiB, 1,000
/// bundles of 100 KiB crossed a link, durable at both ends, at 40 MB/s in files against 128
/// MB/s inline (`ferry bench queue`, docs/performance.md), while 1 MiB bundles in files ran at
/// half the disk's sequential rate.
pub const PAYLOAD_FILE_MIN: u64 = 512 * 1024;

/// The database file's name inside the store directory.
pub const DB_FILE: &str = "store.db";

/// The directory of payload files inside the store directory.
pub const PAYLOAD_DIR: &str = "payloads";

/// The prefix of the names of RPC value files in the payload directory (`rpc-<fid>`); bundle
/// files are named by their row id alone.
pub const RPC_FILE_PREFIX: &str = "rpc-";

/// The name of the reserve file inside the store directory.
pub const RESERVE_FILE: &str = "reserve";

/// Size of the reserve file: disk space held back so that, once the disk is full, removing
/// bundles can still commit (a removal appends pages to the WAL before it frees any payload
/// file). Deleted when the disk fills, written again after the next successful flush.
const RESERVE_BYTES: usize = 256 * 1024;

/// The schema version this code writes (SQLite `user_version`). Version 2 added RPC value files;
/// the bump also keeps a version-1 build, which would take `rpc-*` files for orphans and delete
/// them, from opening a store that has them. Version 3 split the one `rpc` table, keyed by
/// (table name, key), into a table per [`RpcTable`] keyed by key alone: every lookup and insert
/// compared the name's text at each step of the B-tree, a fifth of an RPC record's write.
/// Version 4 added [`RpcTable::Purged`] (`rpc_purged`); see "Schema versions" in the module
/// documentation.
const SCHEMA_VERSION: i64 = 4;

/// The file the store holds locked while it is open (see "Single writer").
pub const LOCK_FILE: &str = "lock";

/// A WAL at least this long is checkpointed by the next [`Syncer::sync`] (8192 pages of 4 KiB,
/// not SQLite's 1000: a checkpoint copies the newest version of each page once, and the same few
/// pages (the RPC tables' leaves, the indexes' roots) change in every commit, so a longer WAL
/// copies far fewer pages per commit; at 64 RPC calls in flight checkpoints took 12 % of the CPU
/// at 1000 pages). The WAL is truncated to `journal_size_limit` when the writer starts it over.
pub const CHECKPOINT_WAL_BYTES: u64 = 32 * 1024 * 1024;

/// A WAL frame: a page of the default 4 KiB and its 24-byte header.
const WAL_FRAME_BYTES: u64 = 4096 + 24;

/// Payload files whose syncs are under way: once this many are, the next write waits for them,
/// so that a batch of many large bundles holds a bounded number of descriptors and threads.
const MAX_UNSYNCED_FILES: usize = 64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS bundles (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    key BLOB NOT NULL UNIQUE,       -- keys::id_key: sorts like BundleId
    dest BLOB NOT NULL,             -- keys::eid_key of the destination
    expiry INTEGER NOT NULL,        -- keys::time_to_sql
    priority INTEGER NOT NULL,
    retention INTEGER NOT NULL,     -- Retention::code
    received_at INTEGER NOT NULL,   -- keys::time_to_sql
    size INTEGER NOT NULL,          -- encoded length
    in_file INTEGER NOT NULL        -- 1: payloads/<rid>, 0: bodies
);
CREATE INDEX IF NOT EXISTS bundles_dest ON bundles (dest, key);
CREATE INDEX IF NOT EXISTS bundles_expiry ON bundles (expiry, key);
CREATE INDEX IF NOT EXISTS bundles_rank ON bundles (retention, priority, expiry, key);
CREATE TABLE IF NOT EXISTS bodies (rid INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sent (
    rid INTEGER NOT NULL,
    peer BLOB NOT NULL,
    PRIMARY KEY (rid, peer)
) WITHOUT ROWID;
-- One table per RpcTable (rpc_dedup, rpc_pending, ...: RPC_TABLE_SCHEMA), created with these.
-- Rows are inserted only to draw an id from AUTOINCREMENT, then deleted: sqlite_sequence keeps
-- the highest id ever committed, so a file id is never reused.
CREATE TABLE IF NOT EXISTS rpc_file_ids (fid INTEGER PRIMARY KEY AUTOINCREMENT);
";

/// An RPC table (`{t}` is its name): a value inline in `v`, or empty there and kept in
/// `payloads/rpc-<file>` of `size` bytes. The index: unique, since two rows never share a file;
/// partial, since only the few file-backed rows are indexed (recovery lists them).
const RPC_TABLE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rpc_{t} (
    k BLOB NOT NULL PRIMARY KEY,
    v BLOB NOT NULL,
    file INTEGER,
    size INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS rpc_{t}_by_file ON rpc_{t} (file) WHERE file IS NOT NULL;
";

/// Schema version 1 to 2: RPC values may live in files.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE rpc ADD COLUMN file INTEGER;
ALTER TABLE rpc ADD COLUMN size INTEGER;
";

/// The SQL of one statement on the table of `$table`: `$before`, the table's name, `$after`.
/// Literal per table, so that a statement's text costs nothing to make and finds its prepared
/// statement in the connection's cache.
macro_rules! rpc_sql {
    ($table:expr, $before:literal, $after:literal) => {
        match $table {
            RpcTable::Dedup => concat!($before, "rpc_dedup", $after),
            RpcTable::Pending => concat!($before, "rpc_pending", $after),
            RpcTable::Outbox => concat!($before, "rpc_outbox", $after),
            RpcTable::Inbox => concat!($before, "rpc_inbox", $after),
            RpcTable::InboxPayload => concat!($before, "rpc_inbox_payload", $after),
            RpcTable::Files => concat!($before, "rpc_files", $after),
            RpcTable::Keys => concat!($before, "rpc_keys", $after),
            RpcTable::Purged => concat!($before, "rpc_purged", $after),
        }
    };
}

/// How to open a [`DiskStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskOptions {
    /// The limit on the sum of the stored bundles' encoded lengths.
    pub quota: u64,
    /// Bundles of at least this many encoded bytes go to payload files (default
    /// [`PAYLOAD_FILE_MIN`]; tests lower it to exercise files with small bundles).
    pub payload_file_min: u64,
}

impl DiskOptions {
    /// Options with this quota and the default payload file threshold.
    pub fn new(quota: u64) -> Self {
        Self {
            quota,
            payload_file_min: PAYLOAD_FILE_MIN,
        }
    }
}

/// What the recovery scan at open found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bundles whose payload file was missing or had the wrong length: they were dropped from the
    /// store, and the node should report them deleted. Ascending by id.
    pub dropped: Vec<BundleMeta>,
    /// Files in the payload directory that no stored bundle or RPC value named (left by a crash
    /// before a commit, or after a removal's commit and before its unlink), now removed.
    pub orphans_removed: u64,
    /// RPC entries (table, key) whose value file was missing or had the wrong length: they were
    /// dropped from their table. Ascending by table, then key.
    pub rpc_dropped: Vec<(RpcTable, Bytes)>,
}

/// A file in the payload directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FileName {
    /// `<rid>`: the encoded bundle of row `rid` of `bundles`.
    Bundle(i64),
    /// `rpc-<fid>`: the value of the `rpc` row whose `file` is `fid`.
    Rpc(i64),
}

impl FileName {
    fn to_name(self) -> String {
        match self {
            Self::Bundle(rid) => format!("{rid:016x}"),
            Self::Rpc(fid) => format!("{RPC_FILE_PREFIX}{fid:016x}"),
        }
    }

    /// The inverse of `to_name`; `None` for a name the store never writes.
    fn parse(name: &str) -> Option<Self> {
        let hex = |digits: &str| {
            (digits.len() == 16
                && digits
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| i64::from_str_radix(digits, 16).ok())
            .flatten()
        };
        match name.strip_prefix(RPC_FILE_PREFIX) {
            Some(digits) => hex(digits).map(Self::Rpc),
            None => hex(name).map(Self::Bundle),
        }
    }
}

/// Payload files and unlinks of the open (not yet flushed) batch.
#[derive(Default)]
struct Batch {
    /// Whether any mutation joined the open transaction.
    dirty: bool,
    /// Payload files this batch created: removed again if the batch rolls back.
    created: Vec<FileName>,
    /// Created files being written and synced, each on a thread of its own (see
    /// [`DiskStore::write_file`]); the commit waits for every one.
    unsynced: Vec<std::thread::JoinHandle<Result<()>>>,
    /// What those files hold, until their writes are known to have ended: a read of one of
    /// them in the same batch is answered from here, not from a file still being written.
    writing: BTreeMap<FileName, Vec<Bytes>>,
    /// Whether a created file's name must still be synced into the payload directory.
    dir_unsynced: bool,
    /// Files to unlink once the batch committed.
    unlink: Vec<FileName>,
}

/// Why the last batch was rolled back, reported by the next `flush`.
struct Lost {
    disk_full: bool,
    message: String,
}

/// A crash-safe persistent [`Store`]. See the module documentation for the commit protocol.
pub struct DiskStore {
    conn: Connection,
    /// `<dir>/lock`, locked for as long as the store is open. Declared after `conn`, so the
    /// connection closes before the lock is given up.
    _lock: File,
    payload_dir: PathBuf,
    /// The payload directory, open to be synced.
    payload_dir_handle: File,
    options: DiskOptions,
    /// Number and total size of stored bundles, as the open transaction sees them.
    bundles: u64,
    used: u64,
    batch: Batch,
    lost: Option<Lost>,
    reserve: PathBuf,
    /// Whether the reserve file is in place.
    reserve_present: bool,
    /// Whether a commit since the last sync by `flush` may not be durable yet.
    commits_unsynced: bool,
    /// The WAL's length when `bound_wal` last compared it with the free space.
    wal_checked_at: u64,
    syncer: Syncer,
    /// The syncer's checkpoints this store has followed up (see `finish_checkpoint`).
    checkpoints_seen: u64,
}

impl DiskStore {
    /// Opens (creating if needed) the store in `dir` with a quota of `quota` bytes, runs the
    /// recovery scan and returns the store with what the scan repaired.
    pub fn open(dir: &Path, quota: u64) -> Result<(Self, Recovery)> {
        Self::open_with(dir, DiskOptions::new(quota))
    }

    /// Opens the store in Ferry's default data directory (see
    /// [`default_data_dir`](crate::default_data_dir)), creating it if missing.
    pub fn open_default(quota: u64) -> Result<(Self, Recovery)> {
        let xdg = std::env::var_os("XDG_DATA_HOME");
        let home = std::env::var_os("HOME");
        let dir = crate::default_data_dir(xdg.as_deref(), home.as_deref()).ok_or_else(|| {
            StoreError::Io {
                context: "finding the default data directory".into(),
                source: io::Error::new(
                    io::ErrorKind::NotFound,
                    "neither XDG_DATA_HOME nor HOME is an absolute path",
                ),
            }
        })?;
        Self::open(&dir, quota)
    }

    /// Opens the store in `dir` with explicit options.
    pub fn open_with(dir: &Path, options: DiskOptions) -> Result<(Self, Recovery)> {
        let payload_dir = dir.join(PAYLOAD_DIR);
        make_private_dir(dir)?;
        fs::create_dir_all(&payload_dir)
            .map_err(|e| io_err(format!("creating {}", payload_dir.display()), e))?;
        let lock = lock_dir(dir)?;
        let conn = Connection::open(dir.join(DB_FILE))
            .map_err(|e| db_err(format!("opening {}", dir.join(DB_FILE).display()), e))?;
        configure(&conn, dir)?;
        // The database file, its WAL, the payload directory and the store directory itself may
        // have just been created: make their names durable before anything is committed.
        sync_dir(dir)?;
        sync_dir(&payload_dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
        let payload_dir_handle = File::open(&payload_dir)
            .map_err(|e| io_err(format!("opening {}", payload_dir.display()), e))?;
        let mut store = Self {
            conn,
            _lock: lock,
            payload_dir,
            payload_dir_handle,
            options,
            bundles: 0,
            used: 0,
            batch: Batch::default(),
            lost: None,
            reserve: dir.join(RESERVE_FILE),
            reserve_present: false,
            commits_unsynced: false,
            wal_checked_at: 0,
            syncer: Syncer {
                wal: Arc::new(dir.join(format!("{DB_FILE}-wal"))),
                db: Arc::new(dir.join(DB_FILE)),
                checkpoint_at: CHECKPOINT_WAL_BYTES,
                checkpointing: Arc::new(AtomicBool::new(false)),
                closed: Arc::new(AtomicBool::new(false)),
                checkpoints: Arc::new(AtomicU64::new(0)),
                wal_frames: Arc::new(AtomicU64::new(0)),
            },
            checkpoints_seen: 0,
        };
        // Set after the pragmas: `wal_autocheckpoint` installs a hook of its own.
        let frames = Arc::clone(&store.syncer.wal_frames);
        store
            .conn
            .wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: i32| {
                frames.store(u64::try_from(pages).unwrap_or(0), Ordering::Release);
                Ok(())
            }))
            .map_err(|e| db_err("watching the WAL", e))?;
        let recovery = store.recover()?;
        store.refill_reserve();
        store.recount()?;
        Ok((store, recovery))
    }

    /// The options the store was opened with.
    pub fn options(&self) -> DiskOptions {
        self.options
    }

    fn payload_path(&self, name: FileName) -> PathBuf {
        self.payload_dir.join(name.to_name())
    }

    /// A payload file's bytes: from memory while this batch's write of it may still run,
    /// else from the file.
    fn read_payload(&self, name: FileName) -> Result<Vec<u8>> {
        if let Some(parts) = self.batch.writing.get(&name) {
            return Ok(parts.concat());
        }
        let path = self.payload_path(name);
        fs::read(&path).map_err(|e| io_err(format!("reading {}", path.display()), e))
    }

    /// Reconciles payload files with committed rows (see the module documentation).
    fn recover(&mut self) -> Result<Recovery> {
        let mut bundle_files: BTreeMap<i64, (BundleMeta, u64)> = BTreeMap::new();
        {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT rid, key, dest, expiry, priority, retention, received_at, size
                     FROM bundles WHERE in_file = 1",
                )
                .map_err(|e| db_err("listing payload files", e))?;
            let mut rows = stmt
                .query([])
                .map_err(|e| db_err("listing payload files", e))?;
            while let Some(row) = rows
                .next()
                .map_err(|e| db_err("listing payload files", e))?
            {
                let rid: i64 = row.get(0).map_err(|e| db_err("listing payload files", e))?;
                let key: Vec<u8> = row.get(1).map_err(|e| db_err("listing payload files", e))?;
                let meta = meta_from_row(&key, row, 2)?;
                let size = size_from_sql(row.get(7).map_err(|e| db_err("listing sizes", e))?)?;
                bundle_files.insert(rid, (meta, size));
            }
        }
        let mut rpc_files: BTreeMap<i64, ((RpcTable, Bytes), u64)> = BTreeMap::new();
        for table in RpcTable::ALL {
            let context = "listing rpc value files";
            let mut stmt = self
                .conn
                .prepare(rpc_sql!(
                    table,
                    "SELECT file, k, size FROM ",
                    " WHERE file IS NOT NULL"
                ))
                .map_err(|e| db_err(context, e))?;
            let mut rows = stmt.query([]).map_err(|e| db_err(context, e))?;
            while let Some(row) = rows.next().map_err(|e| db_err(context, e))? {
                let fid: i64 = row.get(0).map_err(|e| db_err(context, e))?;
                let key: Vec<u8> = row.get(1).map_err(|e| db_err(context, e))?;
                let size = size_from_sql(row.get(2).map_err(|e| db_err(context, e))?)?;
                rpc_files.insert(fid, ((table, Bytes::from(key)), size));
            }
        }
        let mut recovery = Recovery::default();
        let mut intact = BTreeSet::new();
        let mut bad_length = BTreeSet::new();
        let entries = fs::read_dir(&self.payload_dir)
            .map_err(|e| io_err(format!("scanning {}", self.payload_dir.display()), e))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| io_err(format!("scanning {}", self.payload_dir.display()), e))?;
            let path = entry.path();
            let named = entry.file_name().to_str().and_then(FileName::parse);
            let expected = named.and_then(|name| match name {
                FileName::Bundle(rid) => bundle_files.get(&rid).map(|(_, size)| (name, *size)),
                FileName::Rpc(fid) => rpc_files.get(&fid).map(|(_, size)| (name, *size)),
            });
            let Some((name, size)) = expected else {
                remove_orphan(&path)?;
                recovery.orphans_removed += 1;
                continue;
            };
            let len = entry
                .metadata()
                .map_err(|e| io_err(format!("checking {}", path.display()), e))?
                .len();
            if len == size {
                intact.insert(name);
            } else {
                bad_length.insert(name);
            }
        }
        let broken: Vec<i64> = bundle_files
            .keys()
            .copied()
            .filter(|rid| !intact.contains(&FileName::Bundle(*rid)))
            .collect();
        let broken_rpc: Vec<i64> = rpc_files
            .keys()
            .copied()
            .filter(|fid| !intact.contains(&FileName::Rpc(*fid)))
            .collect();
        if broken.is_empty() && broken_rpc.is_empty() && recovery.orphans_removed == 0 {
            return Ok(recovery);
        }
        self.begin()?;
        for rid in &broken {
            self.delete_rows(*rid)
                .map_err(|e| db_err("dropping bundles with missing payloads", e))?;
        }
        for fid in &broken_rpc {
            let Some(((table, _), _)) = rpc_files.get(fid) else {
                continue;
            };
            self.conn
                .prepare_cached(rpc_sql!(*table, "DELETE FROM ", " WHERE file = ?1"))
                .and_then(|mut stmt| stmt.execute([fid]))
                .map_err(|e| db_err("dropping rpc values with missing files", e))?;
        }
        self.conn
            .execute_batch("COMMIT")
            .map_err(|e| db_err("committing the recovery", e))?;
        // The rows are gone for good; now their wrong-length files can go too.
        for name in &bad_length {
            remove_orphan(&self.payload_path(*name))?;
        }
        self.payload_dir_handle
            .sync_all()
            .map_err(|e| io_err("syncing the payload directory after recovery", e))?;
        let mut dropped: Vec<BundleMeta> = broken
            .iter()
            .filter_map(|rid| bundle_files.remove(rid).map(|(meta, _)| meta))
            .collect();
        dropped.sort_by(|a, b| a.id.cmp(&b.id));
        recovery.dropped = dropped;
        let mut rpc_dropped: Vec<(RpcTable, Bytes)> = broken_rpc
            .iter()
            .filter_map(|fid| rpc_files.remove(fid).map(|(entry, _)| entry))
            .collect();
        rpc_dropped.sort();
        recovery.rpc_dropped = rpc_dropped;
        Ok(recovery)
    }

    /// After the syncer's checkpoint thread copied the WAL as it was when it started, copies
    /// what was committed meanwhile (a few pages), so that the next transaction starts the WAL
    /// over: the writer may only do that once every frame is in the database, and a WAL that is
    /// committed to all the time is never all copied by the thread alone.
    fn finish_checkpoint(&mut self) {
        let finished = self.syncer.checkpoints.load(Ordering::Acquire);
        if finished == self.checkpoints_seen || self.syncer.checkpointing() {
            return;
        }
        self.checkpoints_seen = finished;
        // Best effort, like the thread's: a WAL not started over grows until the next one.
        let copied = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok(row.get::<_, i64>(1)? == row.get::<_, i64>(2)?)
            });
        if copied.unwrap_or(false) {
            // All of it is in the database: the next transaction starts the WAL over, so no
            // sync before it needs to start another checkpoint.
            self.syncer.wal_frames.store(0, Ordering::Release);
        }
    }

    /// Keeps the WAL's file at most half the disk's free space, by a checkpoint that truncates
    /// it. A checkpoint copies the WAL into the database, which may have to grow by as much:
    /// a WAL that outgrew the free space could never be checkpointed, nor could anything be
    /// removed once the disk is full, as removals need room in the WAL too. Looks at the free
    /// space only each time the WAL has grown by the reserve's size (the reserve covers the
    /// growth in between), so a large disk costs a `stat` a commit.
    fn bound_wal(&mut self) {
        let Ok(wal_len) = fs::metadata(self.syncer.wal.as_path()).map(|m| m.len()) else {
            return;
        };
        if wal_len < self.wal_checked_at {
            // Truncated since: start again from here.
            self.wal_checked_at = wal_len;
            return;
        }
        if wal_len < self.wal_checked_at + RESERVE_BYTES as u64 {
            return;
        }
        self.wal_checked_at = wal_len;
        let Ok(stat) = nix::sys::statvfs::statvfs(&self.payload_dir) else {
            return;
        };
        let free =
            u64::try_from(u128::from(stat.blocks_available()) * stat.fragment_size() as u128)
                .unwrap_or(u64::MAX);
        if wal_len > free / 2
            && self
                .conn
                .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .is_ok()
        {
            self.wal_checked_at = 0;
        }
    }

    /// Writes the reserve file if it is missing. Best effort: on a full disk it stays missing
    /// until a later flush has freed space.
    fn refill_reserve(&mut self) {
        if self.reserve_present {
            return;
        }
        // Real zeros, not `set_len`: a sparse file would hold back nothing. Twice the reserve is
        // written and the second half given back, so the reserve only returns where as much
        // again stays free beside it: removing inline bundles frees database pages but no disk
        // space (the WAL keeps its size until a checkpoint), and a reserve refilled right after
        // such a removal would take the very space the next commit needs. The zeros are
        // allocated, not a constant: a 256 KiB constant sat in the binary's read-only data, and
        // once written from at start stayed resident in every node (docs/performance.md,
        // "Footprint"); an allocation this large is returned to the system when dropped.
        let zeros = vec![0u8; RESERVE_BYTES];
        let written = File::create(&self.reserve).and_then(|mut file| {
            file.write_all(&zeros)?;
            file.write_all(&zeros)?;
            file.set_len(RESERVE_BYTES as u64)
        });
        match written {
            Ok(()) => self.reserve_present = true,
            Err(_) => {
                let _ = fs::remove_file(&self.reserve);
            }
        }
    }

    /// Gives the reserve's space back to the file system after the disk filled up.
    fn release_reserve(&mut self) {
        if fs::remove_file(&self.reserve).is_ok() || self.reserve_present {
            self.reserve_present = false;
        }
    }

    /// Recomputes the usage counters from the database.
    fn recount(&mut self) -> Result<()> {
        let (bundles, used): (i64, i64) = self
            .conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM bundles",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(|e| db_err("computing usage", e))?;
        self.bundles = size_from_sql(bundles)?;
        self.used = size_from_sql(used)?;
        Ok(())
    }

    /// Opens the batch's transaction if none is open.
    fn begin(&mut self) -> Result<()> {
        if self.conn.is_autocommit() {
            self.conn
                .execute_batch("BEGIN")
                .map_err(|e| db_err("starting a transaction", e))?;
        }
        Ok(())
    }

    /// Runs one mutation inside the batch; if it fails, the whole batch is rolled back.
    fn mutate<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.begin()?;
        match op(self) {
            Ok(value) => {
                self.batch.dirty = true;
                Ok(value)
            }
            Err(err) => Err(self.abort(err)),
        }
    }

    /// Rolls the open batch back after `err`, so the store holds exactly what the last successful
    /// flush made durable; remembers the loss for the next flush if earlier mutations of the
    /// batch were lost with it. Returns `err`, its message extended by what was rolled back.
    fn abort(&mut self, err: StoreError) -> StoreError {
        // A failed statement may already have made SQLite roll back (SQLITE_FULL, IOERR).
        if !self.conn.is_autocommit() {
            // If even the rollback fails, SQLite has rolled back on its own or the connection is
            // unusable; either way the recount below says what the store now holds.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        if matches!(err, StoreError::DiskFull(_)) {
            self.release_reserve();
            // The WAL only grows between checkpoints (every 8192 pages), and a removal needs
            // room in it too: on a disk that filled before a checkpoint came, nothing could be
            // removed any more. A checkpoint copies the WAL into the database (mostly pages it
            // already has) and truncates it, giving its space back.
            let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        }
        let batch = std::mem::take(&mut self.batch);
        drop(batch.unsynced);
        for name in batch.created {
            // A file left behind is an orphan that the next open removes.
            let _ = fs::remove_file(self.payload_path(name));
        }
        let recount = self.recount();
        let (disk_full, message) = match &err {
            StoreError::DiskFull(m) => (true, m.clone()),
            other => (false, other.to_string()),
        };
        let rolled_back = batch.dirty || self.lost.is_some();
        if rolled_back {
            self.lost = Some(Lost {
                disk_full: disk_full || self.lost.as_ref().is_some_and(|l| l.disk_full),
                message: message.clone(),
            });
        }
        if let Err(recount) = recount {
            return recount;
        }
        if !rolled_back {
            return err;
        }
        let note = "; the unflushed changes since the last flush were rolled back";
        match err {
            StoreError::DiskFull(m) => StoreError::DiskFull(format!("{m}{note}")),
            StoreError::Io { context, source } => StoreError::Io {
                context: format!("{context}{note}"),
                source,
            },
            StoreError::Database { context, message } => StoreError::Database {
                context: format!("{context}{note}"),
                message,
            },
            other => other,
        }
    }

    /// Waits for the syncs of the payload files written since the last commit and then syncs
    /// their directory entries.
    fn sync_payloads(&mut self) -> Result<()> {
        self.wait_for_file_syncs()?;
        if self.batch.dir_unsynced {
            self.payload_dir_handle
                .sync_all()
                .map_err(|e| io_err("syncing the payload directory", e))?;
            self.batch.dir_unsynced = false;
        }
        Ok(())
    }

    /// Waits for every payload file's write and sync started by [`DiskStore::write_file`]; the
    /// first error, after all have ended.
    fn wait_for_file_syncs(&mut self) -> Result<()> {
        let mut first_error = None;
        self.batch.writing.clear();
        for write in std::mem::take(&mut self.batch.unsynced) {
            let result = match write.join() {
                Ok(result) => result,
                Err(_) => Err(StoreError::Io {
                    context: "writing a payload file".into(),
                    source: io::Error::other("the writing thread panicked"),
                }),
            };
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// An RPC value from its row's `v, file, size` columns: inline, or read from its file.
    fn rpc_value(
        &self,
        table: RpcTable,
        inline: Vec<u8>,
        file: Option<i64>,
        size: Option<i64>,
    ) -> Result<Bytes> {
        let Some(fid) = file else {
            return Ok(Bytes::from(inline));
        };
        let value = self.read_payload(FileName::Rpc(fid))?;
        let size = size_from_sql(size.ok_or_else(|| {
            StoreError::Corrupt(format!("an rpc {} value file has no length", table.name()))
        })?)?;
        if value.len() as u64 != size {
            return Err(StoreError::Corrupt(format!(
                "an rpc {} value has {} stored bytes, expected {size}",
                table.name(),
                value.len()
            )));
        }
        Ok(Bytes::from(value))
    }

    fn exists(&self, key: &[u8]) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT 1 FROM bundles WHERE key = ?1")
            .map_err(|e| db_err("looking up a bundle", e))?;
        stmt.exists([key])
            .map_err(|e| db_err("looking up a bundle", e))
    }

    /// The candidates `plan_eviction` needs, exactly as `MemoryStore` chooses them: every expired
    /// bundle, then unexpired ones by ascending (rank, id) until their sizes cover `needed` or
    /// the rank reaches `incoming`.
    fn eviction_candidates(
        &self,
        now: DtnTime,
        incoming: Rank,
        needed: u64,
    ) -> Result<Vec<(BundleId, Rank, u64)>> {
        let context = "choosing bundles to evict";
        let mut out = Vec::new();
        let mut covered = 0u64;
        let read = |row: &rusqlite::Row<'_>| -> Result<(BundleId, Rank, u64)> {
            let key: Vec<u8> = row.get(0).map_err(|e| db_err(context, e))?;
            let id = decode_id(&key).ok_or_else(|| corrupt_key(&key))?;
            let rank = Rank {
                retention: Retention::from_code(
                    row.get::<_, u8>(1).map_err(|e| db_err(context, e))?,
                ),
                priority: row.get(2).map_err(|e| db_err(context, e))?,
                expiry: time_from_sql(row.get(3).map_err(|e| db_err(context, e))?),
            };
            let size = size_from_sql(row.get(4).map_err(|e| db_err(context, e))?)?;
            Ok((id, rank, size))
        };
        {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT key, retention, priority, expiry, size FROM bundles
                     WHERE expiry <= ?1 ORDER BY expiry, key",
                )
                .map_err(|e| db_err(context, e))?;
            let mut rows = stmt
                .query([time_to_sql(now)])
                .map_err(|e| db_err(context, e))?;
            while let Some(row) = rows.next().map_err(|e| db_err(context, e))? {
                let candidate = read(row)?;
                covered = covered.saturating_add(candidate.2);
                out.push(candidate);
            }
        }
        if covered >= needed {
            return Ok(out);
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT key, retention, priority, expiry, size FROM bundles INDEXED BY bundles_rank
                 WHERE expiry > ?1 ORDER BY retention, priority, expiry, key",
            )
            .map_err(|e| db_err(context, e))?;
        let mut rows = stmt
            .query([time_to_sql(now)])
            .map_err(|e| db_err(context, e))?;
        while let Some(row) = rows.next().map_err(|e| db_err(context, e))? {
            let candidate = read(row)?;
            if candidate.1 >= incoming {
                break;
            }
            covered = covered.saturating_add(candidate.2);
            out.push(candidate);
            if covered >= needed {
                break;
            }
        }
        Ok(out)
    }

    /// Adds the rows (and payload file) of a new bundle. Part of a batch.
    fn add(&mut self, key: &[u8], stored: &StoredBundle, size: u64) -> Result<()> {
        let meta = &stored.meta;
        let in_file = size >= self.options.payload_file_min;
        let context = || format!("storing bundle {}", meta.id);
        let rid = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "INSERT INTO bundles
                     (key, dest, expiry, priority, retention, received_at, size, in_file)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(|e| db_err(context(), e))?;
            stmt.execute(params![
                key,
                eid_key(&meta.destination),
                time_to_sql(meta.expiry),
                meta.priority,
                meta.retention.code(),
                time_to_sql(meta.received_at),
                size_to_sql(size)?,
                in_file,
            ])
            .map_err(|e| db_err(context(), e))?;
            self.conn.last_insert_rowid()
        };
        let encoded = stored.bundle.encode();
        if in_file {
            self.write_file(
                FileName::Bundle(rid),
                encoded.parts().map(Bytes::clone).to_vec(),
            )?;
        } else {
            let mut stmt = self
                .conn
                .prepare_cached("INSERT INTO bodies (rid, data) VALUES (?1, ?2)")
                .map_err(|e| db_err(context(), e))?;
            stmt.execute(params![rid, encoded.to_bytes().as_ref()])
                .map_err(|e| db_err(context(), e))?;
        }
        self.bundles += 1;
        self.used += size;
        Ok(())
    }

    /// Creates a payload file and has `parts` written into it and synced on a thread of its
    /// own; the batch's commit waits for that (and then syncs the file's name). Part of a batch.
    fn write_file(&mut self, name: FileName, parts: Vec<Bytes>) -> Result<()> {
        let path = self.payload_path(name);
        // Recorded before the first byte is written, so a failed write is cleaned up too.
        self.batch.created.push(name);
        self.batch.dir_unsynced = true;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| io_err(format!("creating {}", path.display()), e))?;
        if self.batch.unsynced.len() >= MAX_UNSYNCED_FILES {
            self.wait_for_file_syncs()?;
        }
        self.batch.writing.insert(name, parts.clone());
        // Written and synced off the caller's thread: copying a large value into the page cache
        // takes about a millisecond a mebibyte, which the daemon's event loop would otherwise
        // spend instead of taking the next bundle, and the disk starts on the file at once.
        // The protocol is unchanged: the row that names the file commits after the commit
        // waited for this. The parts are shared buffers, not copies. Syncs of several files
        // at once also let the file system fold their metadata into one journal commit.
        let write = std::thread::Builder::new()
            .name("ferry-file-write".into())
            .spawn(move || {
                for part in &parts {
                    file.write_all(part)
                        .map_err(|e| io_err(format!("writing {}", path.display()), e))?;
                }
                file.sync_data()
                    .map_err(|e| io_err(format!("syncing {}", path.display()), e))
            })
            .map_err(|e| io_err("starting a payload file's write", e))?;
        self.batch.unsynced.push(write);
        Ok(())
    }

    /// Deletes the row under (table, key), if any; its value's file, if it has one, is unlinked
    /// after the batch commits. Returns whether there was a row. Part of a batch.
    /// Puts a value the one-statement upsert of [`Store::rpc_put_many`] does not write (one for
    /// a file, or one replacing a row whose value is in a file), inside an open batch: delete,
    /// then insert (what REPLACE does), so that a replaced value's file is known and unlinked
    /// after the commit.
    /// `owned` is the value as shared buffers when the caller has them (then `value` is not
    /// read): a file is written from them rather than from a copy.
    fn replace_rpc_row(
        &mut self,
        table: RpcTable,
        key: &[u8],
        value: &[u8],
        owned: Option<&[Bytes]>,
    ) -> Result<()> {
        let context = || format!("writing the rpc {} table", table.name());
        let size = owned.map_or(value.len(), |parts| parts.iter().map(Bytes::len).sum()) as u64;
        let sql_size = size_to_sql(size)?;
        self.rpc_delete(table, key)?;
        if size < self.options.payload_file_min {
            let joined: Vec<u8>;
            let value = match owned {
                Some(parts) => {
                    joined = parts.concat();
                    &joined[..]
                }
                None => value,
            };
            return self
                .conn
                .prepare_cached(rpc_sql!(table, "INSERT INTO ", " (k, v) VALUES (?1, ?2)"))
                .and_then(|mut stmt| stmt.execute(params![key, value]))
                .map(drop)
                .map_err(|e| db_err(context(), e));
        }
        let fid = self
            .conn
            .prepare_cached("INSERT INTO rpc_file_ids DEFAULT VALUES")
            .and_then(|mut stmt| stmt.insert([]))
            .and_then(|fid| {
                // Only the sequence is wanted; see the schema.
                self.conn
                    .prepare_cached("DELETE FROM rpc_file_ids WHERE fid = ?1")?
                    .execute([fid])?;
                Ok(fid)
            })
            .map_err(|e| db_err(context(), e))?;
        let parts = match owned {
            Some(parts) => parts.to_vec(),
            None => vec![Bytes::copy_from_slice(value)],
        };
        self.write_file(FileName::Rpc(fid), parts)?;
        self.conn
            .prepare_cached(rpc_sql!(
                table,
                "INSERT INTO ",
                " (k, v, file, size) VALUES (?1, X'', ?2, ?3)"
            ))
            .and_then(|mut stmt| stmt.execute(params![key, fid, sql_size]))
            .map(drop)
            .map_err(|e| db_err(context(), e))
    }

    fn rpc_delete(&mut self, table: RpcTable, key: &[u8]) -> Result<bool> {
        let context = || format!("removing from the rpc {} table", table.name());
        let found: Option<Option<i64>> = self
            .conn
            .prepare_cached(rpc_sql!(
                table,
                "DELETE FROM ",
                " WHERE k = ?1 RETURNING file"
            ))
            .and_then(|mut stmt| stmt.query_row(params![key], |row| row.get(0)).optional())
            .map_err(|e| db_err(context(), e))?;
        let Some(file) = found else {
            return Ok(false);
        };
        if let Some(fid) = file {
            self.batch.unlink.push(FileName::Rpc(fid));
        }
        Ok(true)
    }

    /// Removes a bundle's rows; its payload file is unlinked after the batch commits. Part of a
    /// batch.
    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        let context = "removing a bundle";
        let found: Option<(i64, i64, bool)> = {
            let mut stmt = self
                .conn
                .prepare_cached("DELETE FROM bundles WHERE key = ?1 RETURNING rid, size, in_file")
                .map_err(|e| db_err(context, e))?;
            stmt.query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .optional()
                .map_err(|e| db_err(context, e))?
        };
        let Some((rid, size, in_file)) = found else {
            return Ok(false);
        };
        self.delete_dependents(rid)
            .map_err(|e| db_err(context, e))?;
        if in_file {
            self.batch.unlink.push(FileName::Bundle(rid));
        }
        self.bundles = self.bundles.saturating_sub(1);
        self.used = self.used.saturating_sub(size_from_sql(size)?);
        Ok(true)
    }

    /// Deletes a bundle row and what hangs off it (recovery: the usage is recounted after).
    fn delete_rows(&self, rid: i64) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM bundles WHERE rid = ?1")?
            .execute([rid])?;
        self.delete_dependents(rid)
    }

    fn delete_dependents(&self, rid: i64) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM bodies WHERE rid = ?1")?
            .execute([rid])?;
        self.conn
            .prepare_cached("DELETE FROM sent WHERE rid = ?1")?
            .execute([rid])?;
        Ok(())
    }

    /// Ids from a query whose first column is a bundle key.
    fn ids(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        context: &str,
    ) -> Result<Vec<BundleId>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| db_err(context, e))?;
        let mut rows = stmt.query(params).map_err(|e| db_err(context, e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| db_err(context, e))? {
            let key: Vec<u8> = row.get(0).map_err(|e| db_err(context, e))?;
            out.push(decode_id(&key).ok_or_else(|| corrupt_key(&key))?);
        }
        Ok(out)
    }
}

impl BundleStore for DiskStore {
    fn insert(&mut self, now: DtnTime, bundle: StoredBundle) -> Result<Inserted> {
        // What is stored is read back with `Bundle::decode`, which validates: refuse now what
        // could not be read later.
        bundle
            .bundle
            .validate()
            .map_err(|reason| StoreError::Invalid {
                id: bundle.meta.id.clone(),
                reason: format!(
                    "{}",
                    wire::DecodeError {
                        offset: 0,
                        kind: reason
                    }
                ),
            })?;
        let key = id_key(&bundle.meta.id);
        if self.exists(&key)? {
            return Ok(Inserted {
                new: false,
                evicted: Vec::new(),
            });
        }
        let (head, payload, tail) = bundle.bundle.encoded_sizes();
        let needed = (head + payload + tail) as u64;
        let incoming = bundle.meta.rank();
        let quota = self.options.quota;
        // Decided before the batch is touched, so that `Full` changes nothing.
        let evicted = if self.used.saturating_add(needed) > quota {
            let candidates = self.eviction_candidates(now, incoming, needed)?;
            plan_eviction(now, incoming, needed, self.used, quota, candidates).map_err(
                |available| StoreError::Full {
                    needed,
                    available,
                    quota,
                },
            )?
        } else {
            Vec::new()
        };
        self.mutate(|store| {
            for victim in &evicted {
                store.delete(&id_key(victim))?;
            }
            store.add(&key, &bundle, needed)
        })?;
        Ok(Inserted { new: true, evicted })
    }

    fn get(&self, id: &BundleId) -> Result<Option<StoredBundle>> {
        let context = || format!("reading bundle {id}");
        let row = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT b.rid, b.dest, b.expiry, b.priority, b.retention, b.received_at,
                            b.size, b.in_file, d.data
                     FROM bundles b LEFT JOIN bodies d ON d.rid = b.rid WHERE b.key = ?1",
                )
                .map_err(|e| db_err(context(), e))?;
            stmt.query_row([id_key(id)], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    // substr of an empty blob is NULL.
                    row.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
                    row.get::<_, i64>(2)?,
                    row.get::<_, u8>(3)?,
                    row.get::<_, u8>(4)?,
                    row.get::<_, i64>(5)?,
                    row.get::<_, i64>(6)?,
                    row.get::<_, bool>(7)?,
                    row.get::<_, Option<Vec<u8>>>(8)?,
                ))
            })
            .optional()
            .map_err(|e| db_err(context(), e))?
        };
        let Some((rid, dest, expiry, priority, retention, received_at, size, in_file, body)) = row
        else {
            return Ok(None);
        };
        let size = size_from_sql(size)?;
        let bytes = if in_file {
            self.read_payload(FileName::Bundle(rid))?
        } else {
            body.ok_or_else(|| StoreError::Corrupt(format!("bundle {id} has no stored bytes")))?
        };
        if bytes.len() as u64 != size {
            return Err(StoreError::Corrupt(format!(
                "bundle {id} has {} stored bytes, expected {size}",
                bytes.len()
            )));
        }
        let bundle = Bundle::decode(Bytes::from(bytes))
            .map_err(|e| StoreError::Corrupt(format!("bundle {id} does not decode: {e}")))?;
        let meta = BundleMeta {
            id: id.clone(),
            destination: decode_eid(&dest).ok_or_else(|| corrupt_key(&dest))?,
            expiry: time_from_sql(expiry),
            priority,
            retention: Retention::from_code(retention),
            received_at: time_from_sql(received_at),
        };
        Ok(Some(StoredBundle { meta, bundle }))
    }

    fn contains(&self, id: &BundleId) -> Result<bool> {
        self.exists(&id_key(id))
    }

    fn remove(&mut self, id: &BundleId) -> Result<bool> {
        let key = id_key(id);
        if !self.exists(&key)? {
            return Ok(false);
        }
        self.mutate(|store| store.delete(&key))
    }

    fn list(&self) -> Result<Vec<BundleMeta>> {
        let context = "listing bundles";
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT key, dest, expiry, priority, retention, received_at FROM bundles
                 ORDER BY key",
            )
            .map_err(|e| db_err(context, e))?;
        let mut rows = stmt.query([]).map_err(|e| db_err(context, e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| db_err(context, e))? {
            let key: Vec<u8> = row.get(0).map_err(|e| db_err(context, e))?;
            out.push(meta_from_row(&key, row, 1)?);
        }
        Ok(out)
    }

    fn by_destination(&self, destination: &Eid) -> Result<Vec<BundleId>> {
        self.ids(
            "SELECT key FROM bundles WHERE dest = ?1 ORDER BY key",
            [eid_key(destination)],
            "listing bundles by destination",
        )
    }

    fn expiring_by(&self, time: DtnTime) -> Result<Vec<BundleId>> {
        self.ids(
            "SELECT key FROM bundles WHERE expiry <= ?1 ORDER BY expiry, key",
            [time_to_sql(time)],
            "listing expiring bundles",
        )
    }

    fn not_sent_to(&self, peer: &Eid) -> Result<Vec<BundleId>> {
        self.ids(
            "SELECT key FROM bundles b
             WHERE NOT EXISTS (SELECT 1 FROM sent s WHERE s.rid = b.rid AND s.peer = ?1)
             ORDER BY key",
            [eid_key(peer)],
            "listing bundles not sent to a peer",
        )
    }

    fn mark_sent(&mut self, id: &BundleId, peer: &Eid) -> Result<()> {
        let key = id_key(id);
        if !self.exists(&key)? {
            return Ok(());
        }
        let peer = eid_key(peer);
        self.mutate(|store| {
            store
                .conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO sent (rid, peer)
                     SELECT rid, ?2 FROM bundles WHERE key = ?1",
                )
                .and_then(|mut stmt| stmt.execute(params![key, peer]))
                .map_err(|e| db_err("recording a transmission", e))?;
            Ok(())
        })
    }

    fn fragments_of(&self, source: &Eid, creation: CreationTimestamp) -> Result<Vec<BundleId>> {
        let prefix = origin_prefix(source, creation);
        let upper = origin_upper(&prefix);
        self.ids(
            "SELECT key FROM bundles WHERE key >= ?1 AND key < ?2 ORDER BY key",
            params![prefix, upper],
            "listing fragments",
        )
    }

    fn usage(&self) -> Result<Usage> {
        Ok(Usage {
            bundles: self.bundles,
            bytes: self.used,
            quota: self.options.quota,
        })
    }
}

impl Tables for DiskStore {
    fn rpc_put(&mut self, table: RpcTable, key: &[u8], value: &[u8]) -> Result<()> {
        self.rpc_put_many(table, &[(key, value)])
    }

    fn rpc_put_bytes(&mut self, table: RpcTable, key: &[u8], value: &Bytes) -> Result<()> {
        if (value.len() as u64) < self.options.payload_file_min {
            return self.rpc_put(table, key, value);
        }
        self.mutate(|store| {
            store.replace_rpc_row(table, key, value, Some(std::slice::from_ref(value)))
        })
    }

    fn rpc_put_parts(
        &mut self,
        table: RpcTable,
        key: &[u8],
        head: &[u8],
        body: &Bytes,
    ) -> Result<()> {
        if ((head.len() + body.len()) as u64) < self.options.payload_file_min {
            return self.rpc_put(table, key, &[head, &body[..]].concat());
        }
        // Given the parts, `replace_rpc_row` reads no `value`.
        let parts = [Bytes::copy_from_slice(head), body.clone()];
        self.mutate(|store| store.replace_rpc_row(table, key, &[], Some(&parts)))
    }

    fn rpc_put_many(&mut self, table: RpcTable, rows: &[(&[u8], &[u8])]) -> Result<()> {
        let context = || format!("writing the rpc {} table", table.name());
        self.mutate(|store| {
            let mut next = 0;
            while next < rows.len() {
                // A run of small values with one statement, fetched from rusqlite's cache once
                // for the run instead of once a row (each fetch hashes the SQL text and copies
                // it back into the cache). It writes a new row, or a small value over a small
                // one; over a row whose value is in a file it writes nothing.
                {
                    let mut upsert = store
                        .conn
                        .prepare_cached(rpc_sql!(
                            table,
                            "INSERT INTO ",
                            " (k, v) VALUES (?1, ?2)
                             ON CONFLICT (k) DO UPDATE SET v = excluded.v WHERE file IS NULL"
                        ))
                        .map_err(|e| db_err(context(), e))?;
                    while let Some(&(key, value)) = rows.get(next) {
                        if value.len() as u64 >= store.options.payload_file_min
                            || upsert
                                .execute(params![key, value])
                                .map_err(|e| db_err(context(), e))?
                                != 1
                        {
                            break;
                        }
                        next += 1;
                    }
                }
                // A value for a file, or one replacing a file-backed row: the general way.
                if let Some(&(key, value)) = rows.get(next) {
                    store.replace_rpc_row(table, key, value, None)?;
                    next += 1;
                }
            }
            Ok(())
        })
    }

    fn rpc_get(&self, table: RpcTable, key: &[u8]) -> Result<Option<Bytes>> {
        let context = || format!("reading the rpc {} table", table.name());
        let row = self
            .conn
            .prepare_cached(rpc_sql!(
                table,
                "SELECT v, file, size FROM ",
                " WHERE k = ?1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(params![key], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
            })
            .map_err(|e| db_err(context(), e))?;
        row.map(|(inline, file, size)| self.rpc_value(table, inline, file, size))
            .transpose()
    }

    fn rpc_remove(&mut self, table: RpcTable, key: &[u8]) -> Result<bool> {
        // Checked first so that removing an absent key does not open (or dirty) a batch.
        let exists = self
            .conn
            .prepare_cached(rpc_sql!(table, "SELECT 1 FROM ", " WHERE k = ?1"))
            .and_then(|mut stmt| stmt.exists(params![key]))
            .map_err(|e| db_err(format!("reading the rpc {} table", table.name()), e))?;
        if !exists {
            return Ok(false);
        }
        self.mutate(|store| store.rpc_delete(table, key))
    }

    fn rpc_range(
        &self,
        table: RpcTable,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let context = format!("reading the rpc {} table", table.name());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // One statement for both forms: no upper bound is a NULL `to`.
        let mut stmt = self
            .conn
            .prepare_cached(rpc_sql!(
                table,
                "SELECT k, v, file, size FROM ",
                " WHERE k >= ?1 AND (?2 IS NULL OR k < ?2) ORDER BY k LIMIT ?3"
            ))
            .map_err(|e| db_err(&context, e))?;
        let rows = stmt
            .query_map(params![from, to, limit], |row| {
                Ok((
                    row.get::<_, Vec<u8>>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                    row.get::<_, Option<i64>>(3)?,
                ))
            })
            .map_err(|e| db_err(&context, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, inline, file, size) = row.map_err(|e| db_err(&context, e))?;
            out.push((Bytes::from(key), self.rpc_value(table, inline, file, size)?));
        }
        Ok(out)
    }

    fn rpc_scan_heads(&self, table: RpcTable, head: usize) -> Result<Vec<(Bytes, Bytes, u64)>> {
        let context = format!("scanning the rpc {} table", table.name());
        let head_sql = i64::try_from(head).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(rpc_sql!(
                table,
                "SELECT k, substr(v, 1, ?1), length(v), file, size FROM ",
                " ORDER BY k"
            ))
            .map_err(|e| db_err(&context, e))?;
        let rows = stmt
            .query_map(params![head_sql], |row| {
                Ok((
                    row.get::<_, Vec<u8>>(0)?,
                    // substr of an empty blob is NULL.
                    row.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
                    row.get::<_, i64>(2)?,
                    row.get::<_, Option<i64>>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                ))
            })
            .map_err(|e| db_err(&context, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, inline_head, inline_len, file, size) =
                row.map_err(|e| db_err(&context, e))?;
            let Some(fid) = file else {
                out.push((
                    Bytes::from(key),
                    Bytes::from(inline_head),
                    size_from_sql(inline_len)?,
                ));
                continue;
            };
            let size = size_from_sql(size.ok_or_else(|| {
                StoreError::Corrupt(format!("an rpc {} value file has no length", table.name()))
            })?)?;
            let want = usize::try_from(size).unwrap_or(usize::MAX).min(head);
            let first = if let Some(parts) = self.batch.writing.get(&FileName::Rpc(fid)) {
                parts
                    .iter()
                    .flat_map(|p| p.iter().copied())
                    .take(want)
                    .collect()
            } else {
                let path = self.payload_path(FileName::Rpc(fid));
                let mut first = vec![0u8; want];
                File::open(&path)
                    .and_then(|mut f| io::Read::read_exact(&mut f, &mut first))
                    .map_err(|e| io_err(format!("reading {}", path.display()), e))?;
                first
            };
            out.push((Bytes::from(key), Bytes::from(first), size));
        }
        Ok(out)
    }
}

impl Store for DiskStore {
    fn flush(&mut self) -> Result<()> {
        self.commit()?;
        if std::mem::take(&mut self.commits_unsynced) {
            self.syncer.sync()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<bool> {
        let open = !self.conn.is_autocommit();
        if open {
            let committed = self.sync_payloads().and_then(|()| {
                self.conn
                    .execute_batch("COMMIT")
                    .map_err(|e| db_err("committing a batch", e))
            });
            if let Err(err) = committed {
                let err = self.abort(err);
                // This error reports the loss; the next flush has nothing to confess.
                self.lost = None;
                return Err(err);
            }
            self.commits_unsynced = true;
            self.finish_checkpoint();
            self.bound_wal();
            let batch = std::mem::take(&mut self.batch);
            for name in batch.unlink {
                // The removal is committed; a file whose unlink fails is an orphan the next open
                // removes, so the commit still succeeded. (A power loss before the WAL is synced
                // may bring the row back without its file: the open drops such rows.)
                let _ = fs::remove_file(self.payload_path(name));
            }
            self.refill_reserve();
        }
        match self.lost.take() {
            None => Ok(open),
            Some(lost) => {
                let message = format!(
                    "an earlier failure rolled back the changes since the previous commit ({})",
                    lost.message
                );
                Err(if lost.disk_full {
                    StoreError::DiskFull(message)
                } else {
                    StoreError::Database {
                        context: "committing".into(),
                        message,
                    }
                })
            }
        }
    }

    fn has_uncommitted(&self) -> bool {
        !self.conn.is_autocommit()
    }

    fn commit_waits_for_disk(&self) -> bool {
        !self.batch.unsynced.is_empty() || self.batch.dir_unsynced
    }

    fn syncer(&self) -> Option<Syncer> {
        Some(self.syncer.clone())
    }
}

/// Makes a [`DiskStore`]'s commits durable, from any thread: it syncs the database's write-ahead
/// log, which holds every commit since the last checkpoint (a checkpoint syncs what it copies
/// before the log is reused). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Syncer {
    wal: Arc<PathBuf>,
    db: Arc<PathBuf>,
    /// The WAL length in bytes from which a sync starts a checkpoint.
    checkpoint_at: u64,
    /// Whether a checkpoint thread is running (one at a time).
    checkpointing: Arc<AtomicBool>,
    /// Set when the store is dropped: no checkpoint starts after it. A checkpoint's connection
    /// outliving the store would keep the database busy, and the store opened again in the
    /// same process (a restart, a test) would be refused as if another process had it.
    closed: Arc<AtomicBool>,
    /// Checkpoints the thread finished.
    checkpoints: Arc<AtomicU64>,
    /// Frames in the WAL after the last commit (SQLite's WAL hook says; the file's length does
    /// not, as a WAL started over keeps its length).
    wal_frames: Arc<AtomicU64>,
}

impl Syncer {
    /// Syncs every commit made before this call started. Opens the log anew each time, so a log
    /// SQLite replaced is never the one synced. Then, if the log holds at least
    /// [`CHECKPOINT_WAL_BYTES`] of frames, starts a checkpoint on a thread of its own (see the
    /// module documentation) and returns without waiting for it.
    pub fn sync(&self) -> Result<()> {
        let context = || format!("syncing {}", self.wal.display());
        // The log exists from the first commit until the store closes (the store's connection
        // keeps it), so a missing one is an error, not nothing to do.
        File::open(self.wal.as_path())
            .and_then(|wal| wal.sync_data())
            .map_err(|e| io_err(context(), e))?;
        if self.wal_frames.load(Ordering::Acquire) * WAL_FRAME_BYTES >= self.checkpoint_at {
            self.start_checkpoint();
        }
        Ok(())
    }

    /// Checkpoints the WAL on a new thread, unless a checkpoint is running. A checkpoint that
    /// fails leaves the WAL to grow until the next one (`bound_wal` keeps it within the free
    /// space); nothing committed depends on it.
    fn start_checkpoint(&self) {
        // SeqCst with the store's drop: either the drop sees this checkpoint running and waits
        // for it, or this sees the store closed.
        if self.checkpointing.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.closed.load(Ordering::SeqCst) {
            self.checkpointing.store(false, Ordering::SeqCst);
            return;
        }
        let db = Arc::clone(&self.db);
        let running = Arc::clone(&self.checkpointing);
        let finished = Arc::clone(&self.checkpoints);
        let spawned = std::thread::Builder::new()
            .name("ferry-checkpoint".into())
            .spawn(move || {
                if let Err(e) = checkpoint(&db) {
                    tracing::warn!("{e}");
                }
                finished.fetch_add(1, Ordering::AcqRel);
                running.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.checkpointing.store(false, Ordering::SeqCst);
        }
    }

    /// Whether a checkpoint started by [`Syncer::sync`] is still running.
    pub fn checkpointing(&self) -> bool {
        self.checkpointing.load(Ordering::Acquire)
    }
}

/// A `PASSIVE` checkpoint of the database at `db` on a connection of its own: it copies every
/// page committed to the WAL into the database without waiting for (or holding up) the writer.
/// SQLite syncs the database only when the copy reached the end of the WAL, which a writer
/// committing all the time rarely lets happen; then the writer's `finish_checkpoint` copies the
/// rest and its sync would write out all the pages copied here (70-100 ms for a 32 MiB WAL, on
/// the writer's thread). So this syncs the database itself, and the writer's sync finds only
/// the last few pages to write.
fn checkpoint(db: &Path) -> Result<()> {
    let context = || format!("checkpointing {}", db.display());
    Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|conn| {
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
    })
    .map_err(|e| db_err(context(), e))?;
    File::open(db)
        .and_then(|f| f.sync_data())
        .map_err(|e| io_err(format!("syncing {}", db.display()), e))
}

/// Creates `dir` (and its parents) if missing, and makes it the owner's alone (mode 0700): the
/// bundles, inboxes and call records below it are nobody else's to read, whatever the umask
/// made of the files inside.
fn make_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_err(format!("creating {}", dir.display()), e))?;
    let mode = fs::metadata(dir)
        .map_err(|e| io_err(format!("reading {}", dir.display()), e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & 0o700)).map_err(|e| {
            io_err(
                format!("making {} private (others may read it)", dir.display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// How long opening a store waits for a lock held by someone else before saying so.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(250);

/// Takes the store directory's lock (see "Single writer"), or says another process has it.
fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_err(format!("opening {}", path.display()), e))?;
    // A lock held for a moment is not another owner: a process this one forks (the daemon runs
    // procedures; a test runs `mount`) shares the lock's open file until it execs and the file
    // closes on exec. A store closed and opened again in that window would be refused (seen
    // in `tests/disk_full.rs`). A real owner holds it for its whole life.
    let give_up = std::time::Instant::now() + LOCK_PATIENCE;
    let locked = loop {
        match file.try_lock() {
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => break other,
        }
    };
    match locked {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(StoreError::Database {
            context: format!("opening the store in {}", dir.display()),
            message: "another process has it open".into(),
        }),
        Err(fs::TryLockError::Error(e)) => Err(io_err(format!("locking {}", path.display()), e)),
    }
}

impl Drop for DiskStore {
    fn drop(&mut self) {
        // A checkpoint thread holds a connection of its own; the store is closed when it ends.
        // A passive checkpoint takes at most what copying and syncing the log takes, so the
        // wait is bounded by the log's size (`bound_wal`), not by anyone else's lock; the
        // deadline is for a disk that stopped answering.
        self.syncer.closed.store(true, Ordering::SeqCst);
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.syncer.checkpointing.load(Ordering::SeqCst) {
            if std::time::Instant::now() >= give_up {
                tracing::warn!("closing the store while a checkpoint still runs");
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Unflushed changes are not durable by contract; roll them back explicitly so that their
        // payload files do not outlive them until the next open.
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
            for name in std::mem::take(&mut self.batch.created) {
                let _ = fs::remove_file(self.payload_path(name));
            }
        }
    }
}

/// Pragmas and schema.
fn configure(conn: &Connection, dir: &Path) -> Result<()> {
    // Any statement here may be the first to touch the file and find another process's lock.
    let err = |context: &str, e: rusqlite::Error| match e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            StoreError::Database {
                context: format!("opening the store in {}", dir.display()),
                message: "another process has it open".into(),
            }
        }
        other => db_err(context, other),
    };
    let context = "configuring the database";
    // Fail at once rather than wait: the lock is held for the owner's whole lifetime.
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(|e| err(context, e))?;
    // Query planner stability: without it the bundled SQLite re-prepares a cached statement
    // whenever a new value is bound to a parameter its plan could depend on (the lookup by key
    // with its LEFT JOIN was re-prepared on every call: 19 % of the CPU of sending small
    // bundles). Our queries have one sensible plan each.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| err(context, e))?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(|e| err(context, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Database {
            context: context.into(),
            message: format!("the database refused WAL mode (journal_mode is {mode})"),
        });
    }
    // NORMAL: a commit writes the WAL without syncing it (it survives a crash of the process, not
    // a power loss); checkpoints still sync the WAL before copying it and the database before
    // reusing the WAL, so the database is whole after a power loss either way. The store makes
    // commits durable by syncing the WAL itself (`Syncer`): inline in `flush`, or on another
    // thread while its owner goes on. FULL would sync inside every COMMIT, holding the caller.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| err(context, e))?;
    // After a checkpoint the WAL is truncated to this size, so one huge batch does not leave a
    // huge file behind.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)
        .map_err(|e| err(context, e))?;
    // This connection never checkpoints on its own: the syncer does, off this thread (see
    // "Checkpoints off the writer's thread"; `bound_wal` is the exception, when the disk fills).
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(|e| err(context, e))?;
    // 4 MiB of page cache (SQLite's default is 2): the interior pages of every index and the
    // pages being appended to stay in it; leaves read now and then (an old RPC record, a bundle
    // picked at random) come from the operating system's cache. 32 MiB, as before, held up to
    // 64 MiB in a process with two nodes and cost the time of growing it: each new page a
    // fresh allocation and page faults (a fresh node making 40 000 RPC calls: 16 100 → 9 400
    // faults, 4-5 % more calls a second); reading 32 768 stored 1 KiB bundles in random order
    // is ≈5 % slower with the smaller cache.
    conn.pragma_update(None, "cache_size", -4_096)
        .map_err(|e| err(context, e))?;
    // Room for the node's statements and the hot ones of each RPC table.
    conn.set_prepared_statement_cache_capacity(64);
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| err(context, e))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| err(context, e))?;
    if version > SCHEMA_VERSION {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(StoreError::Corrupt(format!(
            "the store in {} has schema version {version}; this build knows {SCHEMA_VERSION}",
            dir.display()
        )));
    }
    // Version 0 is a new database: SCHEMA creates the current tables. Versions 1 and 2 have the
    // tables already (SCHEMA leaves them as they are) and one `rpc` table for all RPC tables,
    // which version 1 has without the file columns. Version 3 lacks `rpc_purged`, which
    // `create_rpc_tables` adds beside the tables it has.
    let migrated = conn
        .execute_batch(SCHEMA)
        .and_then(|()| match version {
            1 => conn.execute_batch(MIGRATE_1_TO_2),
            _ => Ok(()),
        })
        .map_err(|e| err("creating the schema", e))
        .and_then(|()| match version {
            1 | 2 => split_rpc_table(conn),
            _ => create_rpc_tables(conn).map_err(|e| err("creating the schema", e)),
        })
        // Only when it changes: a store that is up to date opens without writing a page, so it
        // opens on a full disk too (the transaction still takes the exclusive lock).
        .and_then(|()| match version {
            SCHEMA_VERSION => Ok(()),
            _ => conn
                .pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(|e| err("creating the schema", e)),
        });
    if let Err(e) = migrated {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(e);
    }
    conn.execute_batch("COMMIT")
        .map_err(|e| err("creating the schema", e))
}

fn create_rpc_tables(conn: &Connection) -> rusqlite::Result<()> {
    for table in RpcTable::ALL {
        conn.execute_batch(&RPC_TABLE_SCHEMA.replace("{t}", table.name()))?;
    }
    Ok(())
}

/// Schema version 2 to 3: the rows of the one `rpc` table move to the table of their name. A row
/// under a name this build does not know stops the migration (nothing is dropped): the store
/// stays at version 2 and the error says how many rows.
fn split_rpc_table(conn: &Connection) -> Result<()> {
    let context = "splitting the rpc table";
    let names: Vec<String> = RpcTable::ALL
        .iter()
        .map(|t| format!("'{}'", t.name()))
        .collect();
    let unknown: i64 = conn
        .query_row(
            &format!(
                "SELECT count(*) FROM rpc WHERE tbl NOT IN ({})",
                names.join(", ")
            ),
            [],
            |row| row.get(0),
        )
        .map_err(|e| db_err(context, e))?;
    if unknown > 0 {
        return Err(StoreError::Corrupt(format!(
            "{unknown} rows of the store's rpc table belong to no table this build knows; \
             left as they are (schema version 2)"
        )));
    }
    // The old table's file index is named like the new files table.
    conn.execute_batch("DROP INDEX IF EXISTS rpc_files")
        .and_then(|()| create_rpc_tables(conn))
        .and_then(|()| {
            for table in RpcTable::ALL {
                conn.execute(
                    &format!(
                        "INSERT INTO rpc_{0} (k, v, file, size)
                         SELECT k, v, file, size FROM rpc WHERE tbl = '{0}'",
                        table.name()
                    ),
                    [],
                )?;
            }
            conn.execute_batch("DROP TABLE rpc")
        })
        .map_err(|e| db_err(context, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(format!("syncing {}", dir.display()), e))
}

fn remove_orphan(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(format!("removing {}", path.display()), e)),
    }
}

/// Metadata from the columns `dest, expiry, priority, retention, received_at` starting at `at`.
fn meta_from_row(key: &[u8], row: &rusqlite::Row<'_>, at: usize) -> Result<BundleMeta> {
    let context = "reading bundle metadata";
    let dest: Vec<u8> = row.get(at).map_err(|e| db_err(context, e))?;
    Ok(BundleMeta {
        id: decode_id(key).ok_or_else(|| corrupt_key(key))?,
        destination: decode_eid(&dest).ok_or_else(|| corrupt_key(&dest))?,
        expiry: time_from_sql(row.get(at + 1).map_err(|e| db_err(context, e))?),
        priority: row.get(at + 2).map_err(|e| db_err(context, e))?,
        retention: Retention::from_code(row.get(at + 3).map_err(|e| db_err(context, e))?),
        received_at: time_from_sql(row.get(at + 4).map_err(|e| db_err(context, e))?),
    })
}

fn corrupt_key(key: &[u8]) -> StoreError {
    StoreError::Corrupt(format!("undecodable key {key:02x?}"))
}

fn size_to_sql(size: u64) -> Result<i64> {
    i64::try_from(size).map_err(|_| StoreError::Corrupt(format!("size {size} out of range")))
}

fn size_from_sql(size: i64) -> Result<u64> {
    u64::try_from(size).map_err(|_| StoreError::Corrupt(format!("negative size {size}")))
}

/// An SQLite error; `SQLITE_FULL` becomes [`StoreError::DiskFull`].
fn db_err(context: impl Into<String>, err: rusqlite::Error) -> StoreError {
    let context = context.into();
    match &err {
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::DiskFull => {
            StoreError::DiskFull(format!("{context} (database: {err})"))
        }
        _ => StoreError::Database {
            context,
            message: err.to_string(),
        },
    }
}

/// An I/O error; a full disk or exhausted disk quota becomes [`StoreError::DiskFull`].
fn io_err(context: impl Into<String>, err: io::Error) -> StoreError {
    let context = context.into();
    if matches!(
        err.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) {
        StoreError::DiskFull(format!("{context}: {err}"))
    } else {
        StoreError::Io {
            context,
            source: err,
        }
    }
}

// The node holds its store as `Box<dyn Store + Send>`.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<DiskStore>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema of version 1, before RPC value files.
    const SCHEMA_V1_RPC: &str = "
        CREATE TABLE rpc (
            tbl TEXT NOT NULL,
            k BLOB NOT NULL,
            v BLOB NOT NULL,
            PRIMARY KEY (tbl, k)
        ) WITHOUT ROWID;
        INSERT INTO rpc (tbl, k, v) VALUES ('inbox_payload', X'01', X'0a0b0c');
        PRAGMA user_version = 1;
    ";

    #[test]
    fn a_version_1_store_keeps_its_rpc_values_and_gains_value_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let conn = Connection::open(dir.path().join(DB_FILE)).expect("create");
            conn.execute_batch(SCHEMA_V1_RPC).expect("version 1 schema");
        }
        let options = DiskOptions {
            quota: u64::MAX,
            payload_file_min: 4,
        };
        let (mut store, recovery) = DiskStore::open_with(dir.path(), options).expect("migrate");
        assert_eq!(recovery, Recovery::default());
        let table = RpcTable::InboxPayload;
        assert_eq!(
            store.rpc_get(table, &[1]).expect("get"),
            Some(Bytes::from_static(&[10, 11, 12]))
        );
        store.rpc_put(table, &[2], b"in a file").expect("put");
        store.flush().expect("flush");
        drop(store);
        let (store, recovery) = DiskStore::open_with(dir.path(), options).expect("reopen");
        assert_eq!(recovery, Recovery::default());
        let version: i64 = store
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        assert_eq!(
            store.rpc_scan(table).expect("scan"),
            vec![
                (Bytes::from_static(&[1]), Bytes::from_static(&[10, 11, 12])),
                (Bytes::from_static(&[2]), Bytes::from_static(b"in a file")),
            ]
        );
        let files: Vec<_> = fs::read_dir(dir.path().join(PAYLOAD_DIR))
            .expect("payload dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            files,
            vec![std::ffi::OsString::from(FileName::Rpc(1).to_name())]
        );
    }

    /// The RPC table of version 2: one table for all, keyed by (table name, key).
    const SCHEMA_V2_RPC: &str = "
        CREATE TABLE rpc (
            tbl TEXT NOT NULL,
            k BLOB NOT NULL,
            v BLOB NOT NULL,
            file INTEGER,
            size INTEGER,
            PRIMARY KEY (tbl, k)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX rpc_files ON rpc (file) WHERE file IS NOT NULL;
        INSERT INTO rpc (tbl, k, v) VALUES ('dedup', X'01', X'0a');
        INSERT INTO rpc (tbl, k, v) VALUES ('pending', X'01', X'0b0b');
        INSERT INTO rpc (tbl, k, v) VALUES ('pending', X'02', X'0c');
        INSERT INTO rpc (tbl, k, v, file, size) VALUES ('files', X'03', X'', 5, 4);
        PRAGMA user_version = 2;
    ";

    #[test]
    fn the_store_directory_is_made_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        let parent = tempfile::tempdir().expect("tempdir");
        // Created by the store: 0700 whatever the umask.
        let fresh = parent.path().join("a/b");
        drop(DiskStore::open(&fresh, 1 << 20).expect("open"));
        assert_eq!(mode(&fresh), 0o700);
        // Made under umask 022 by someone else: others lose their access at open.
        let existing = parent.path().join("c");
        fs::create_dir(&existing).expect("mkdir");
        fs::set_permissions(&existing, fs::Permissions::from_mode(0o755)).expect("chmod");
        drop(DiskStore::open(&existing, 1 << 20).expect("open"));
        assert_eq!(mode(&existing), 0o700);
    }

    #[test]
    fn a_version_2_store_moves_each_rpc_row_to_the_table_of_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let conn = Connection::open(dir.path().join(DB_FILE)).expect("create");
            conn.execute_batch(SCHEMA_V2_RPC).expect("version 2 schema");
            fs::create_dir_all(dir.path().join(PAYLOAD_DIR)).expect("payload dir");
            fs::write(
                dir.path()
                    .join(PAYLOAD_DIR)
                    .join(FileName::Rpc(5).to_name()),
                b"file",
            )
            .expect("value file");
        }
        let (mut store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("migrate");
        assert_eq!(recovery, Recovery::default());
        let rows = |store: &DiskStore, table| store.rpc_scan(table).expect("scan");
        let b = |v: &'static [u8]| Bytes::from_static(v);
        assert_eq!(rows(&store, RpcTable::Dedup), vec![(b(&[1]), b(&[10]))]);
        assert_eq!(
            rows(&store, RpcTable::Pending),
            vec![(b(&[1]), b(&[11, 11])), (b(&[2]), b(&[12]))]
        );
        assert_eq!(rows(&store, RpcTable::Files), vec![(b(&[3]), b(b"file"))]);
        assert!(rows(&store, RpcTable::Outbox).is_empty());
        // The tables work as tables: a put replaces, a remove removes.
        store.rpc_put(RpcTable::Pending, &[1], b"new").expect("put");
        assert!(store.rpc_remove(RpcTable::Dedup, &[1]).expect("remove"));
        store.flush().expect("flush");
        drop(store);
        let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(
            recovery,
            Recovery::default(),
            "the value file is still named"
        );
        assert_eq!(rows(&store, RpcTable::Pending)[0], (b(&[1]), b(b"new")));
        assert!(rows(&store, RpcTable::Dedup).is_empty());
        let version: i64 = store
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        let old: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'rpc'",
                [],
                |row| row.get(0),
            )
            .expect("schema");
        assert_eq!(old, 0, "the old table is gone");
    }

    #[test]
    fn a_version_2_store_with_rows_of_an_unknown_rpc_table_is_left_as_it_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join(DB_FILE);
        {
            let conn = Connection::open(&db).expect("create");
            conn.execute_batch(SCHEMA_V2_RPC).expect("version 2 schema");
            conn.execute_batch("INSERT INTO rpc (tbl, k, v) VALUES ('later', X'09', X'09')")
                .expect("a row of a later build's table");
        }
        let Err(e) = DiskStore::open(dir.path(), u64::MAX) else {
            panic!("a store with rows of an unknown rpc table was migrated");
        };
        assert!(e.to_string().contains("1 rows"), "{e}");
        let conn = Connection::open(&db).expect("reopen by hand");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("version");
        assert_eq!(version, 2);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM rpc", [], |row| row.get(0))
            .expect("old table");
        assert_eq!(rows, 5);
    }

    fn user_version(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("version")
    }

    /// A purge entry as the node writes it: the whole-bundle key, then until when it holds.
    fn purge_row(key: u64, until: u64) -> ([u8; 8], [u8; 8]) {
        (key.to_be_bytes(), until.to_be_bytes())
    }

    #[test]
    fn the_purge_table_round_trips_in_both_stores_and_across_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut disk, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        let mut memory = crate::MemoryStore::new(u64::MAX);
        let table = RpcTable::Purged;
        let rows = [
            purge_row(7, 900),
            purge_row(3, 1_000),
            purge_row(u64::MAX, 5),
        ];
        for s in [&mut disk as &mut dyn Store, &mut memory] {
            for (k, v) in &rows {
                s.rpc_put(table, k, v).expect("put");
            }
            s.rpc_put(table, &rows[0].0, &1_200u64.to_be_bytes())
                .expect("replace");
            assert!(s.rpc_remove(table, &rows[1].0).expect("remove"));
            s.flush().expect("flush");
        }
        let expected = vec![
            (
                Bytes::copy_from_slice(&7u64.to_be_bytes()),
                Bytes::copy_from_slice(&1_200u64.to_be_bytes()),
            ),
            (
                Bytes::copy_from_slice(&rows[2].0),
                Bytes::copy_from_slice(&rows[2].1),
            ),
        ];
        assert_eq!(memory.rpc_scan(table).expect("scan"), expected);
        assert_eq!(disk.rpc_scan(table).expect("scan"), expected);
        // Nothing leaks into the other tables.
        for other in RpcTable::ALL.into_iter().filter(|&t| t != table) {
            assert!(disk.rpc_scan(other).expect("scan").is_empty(), "{other:?}");
        }
        drop(disk);
        let (disk, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(recovery, Recovery::default());
        assert_eq!(disk.rpc_scan(table).expect("scan"), expected);
    }

    #[test]
    fn a_version_3_store_keeps_its_rows_and_gains_the_purge_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join(DB_FILE);
        {
            // A store as a version-3 build leaves it: every table but rpc_purged.
            let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("create");
            store
                .rpc_put(RpcTable::Keys, b"dtn://a/", b"key")
                .expect("put");
            store.flush().expect("flush");
            store
                .conn
                .execute_batch(
                    "DROP TABLE rpc_purged;
                     PRAGMA user_version = 3;",
                )
                .expect("make it version 3");
        }
        {
            let conn = Connection::open(&db).expect("by hand");
            assert_eq!(user_version(&conn), 3);
        }
        let (mut store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("migrate");
        assert_eq!(recovery, Recovery::default());
        assert_eq!(user_version(&store.conn), SCHEMA_VERSION);
        assert_eq!(
            store.rpc_get(RpcTable::Keys, b"dtn://a/").expect("get"),
            Some(Bytes::from_static(b"key"))
        );
        assert!(store.rpc_scan(RpcTable::Purged).expect("scan").is_empty());
        let (k, v) = purge_row(42, 77);
        store.rpc_put(RpcTable::Purged, &k, &v).expect("put");
        store.flush().expect("flush");
        drop(store);
        let (store, _) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(
            store.rpc_scan(RpcTable::Purged).expect("scan"),
            vec![(Bytes::copy_from_slice(&k), Bytes::copy_from_slice(&v))]
        );
    }

    #[test]
    fn a_store_of_a_newer_schema_is_refused_untouched() {
        // As a version-3 build refuses a version-4 store (without its purge set it would deliver
        // again what it delivered).
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join(DB_FILE);
        drop(DiskStore::open(dir.path(), u64::MAX).expect("create"));
        {
            let conn = Connection::open(&db).expect("by hand");
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .expect("a later build's version");
        }
        let Err(e) = DiskStore::open(dir.path(), u64::MAX) else {
            panic!("a store of a newer schema was opened");
        };
        assert!(e.to_string().contains("this build knows"), "{e}");
        let conn = Connection::open(&db).expect("by hand");
        assert_eq!(user_version(&conn), SCHEMA_VERSION + 1);
    }

    #[test]
    fn commits_never_checkpoint_and_a_sync_past_the_threshold_does_off_the_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        store.syncer.checkpoint_at = 256 * 1024;
        let db_len = || fs::metadata(dir.path().join(DB_FILE)).expect("db").len();
        let wal_len = || {
            fs::metadata(dir.path().join(format!("{DB_FILE}-wal")))
                .expect("wal")
                .len()
        };
        let value = vec![7u8; 1000];
        // Two thousand small commits, well past the threshold: the writer copies nothing into
        // the database (SQLite's own checkpoint at 1000 pages would have).
        let before = db_len();
        for i in 0..2000u32 {
            store
                .rpc_put(RpcTable::Pending, &i.to_be_bytes(), &value)
                .expect("put");
            store.commit().expect("commit");
        }
        assert_eq!(db_len(), before, "a commit checkpointed");
        assert!(wal_len() > 2 * 1024 * 1024);
        // The sync starts a checkpoint and returns; the checkpoint copies the pages over.
        // Commits go on while it runs (what they add is copied by the writer's next commit).
        let syncer = store.syncer().expect("syncer");
        syncer.sync().expect("sync");
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut n = 2000u32;
        while syncer.checkpointing() && std::time::Instant::now() < give_up {
            store
                .rpc_put(RpcTable::Pending, &n.to_be_bytes(), &value)
                .expect("put");
            store.commit().expect("commit");
            n += 1;
        }
        assert!(!syncer.checkpointing(), "the checkpoint did not end");
        assert!(db_len() > before + 1024 * 1024, "nothing was checkpointed");
        // The writer starts the log over: as many commits again reuse the file instead of
        // doubling it. And everything is still there.
        let full = wal_len();
        let more = n + 2000;
        for i in n..more {
            store
                .rpc_put(RpcTable::Pending, &i.to_be_bytes(), &value)
                .expect("put");
            store.commit().expect("commit");
        }
        store.flush().expect("flush");
        assert!(
            wal_len() < full + full / 4,
            "the log was not started over: {} then {}",
            full,
            wal_len()
        );
        drop(store);
        let (store, _) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(
            store.rpc_scan(RpcTable::Pending).expect("scan").len(),
            more as usize
        );
    }

    #[test]
    fn a_store_dropped_while_it_checkpoints_waits_and_opens_again_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let value = vec![7u8; 1000];
        for round in 0..3u32 {
            let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
            store.syncer.checkpoint_at = 64 * 1024;
            for i in 0..500u32 {
                let key = (round * 1000 + i).to_be_bytes();
                store.rpc_put(RpcTable::Pending, &key, &value).expect("put");
                store.commit().expect("commit");
            }
            let syncer = store.syncer().expect("syncer");
            // Starts a checkpoint of about 2 MB of log on its own thread and returns.
            syncer.sync().expect("sync");
            drop(store);
            assert!(
                !syncer.checkpointing(),
                "the store closed under a checkpoint"
            );
            // The clone outlives the store: it starts no checkpoint any more.
            let _ = syncer.sync();
            assert!(
                !syncer.checkpointing(),
                "a checkpoint started after the close"
            );
        }
        let (store, _) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
        assert_eq!(store.rpc_scan(RpcTable::Pending).expect("scan").len(), 1500);
    }

    #[test]
    fn each_rpc_table_statement_names_the_table_the_schema_creates() {
        for table in RpcTable::ALL {
            assert_eq!(rpc_sql!(table, "", ""), format!("rpc_{}", table.name()));
        }
    }

    #[test]
    fn file_names_round_trip_and_foreign_names_are_refused() {
        for name in [
            FileName::Bundle(0),
            FileName::Bundle(0x1f),
            FileName::Rpc(7),
        ] {
            assert_eq!(FileName::parse(&name.to_name()), Some(name));
        }
        for foreign in [
            "x.tmp",
            "rpc-",
            "rpc-00000000000000FF",
            "+000000000000001",
            "1",
        ] {
            assert_eq!(FileName::parse(foreign), None, "{foreign}");
        }
    }
}
