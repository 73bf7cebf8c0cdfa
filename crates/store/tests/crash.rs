//! Crash test: a child process stores bundles and is SIGKILLed at a random moment, 200 times
//! over the same store; after each kill the store is reopened and must hold every bundle whose
//! flush the child acknowledged, byte for byte, and nothing partial. Beside most bundles the child
//! keeps an RPC value (as the daemon keeps a delivered bundle's payload in its inbox), put and
//! removed in the same batch as the bundle, some large enough for a value file, and re-puts one
//! such value per batch (a replaced value file), so value files are held to the same standard.
//!
//! The child is this test binary run again with `--crash-child` (`harness = false`, so `main`
//! decides), which keeps writer and checker in one file with one definition of the bundles, and
//! needs no extra binary target in the library's package. Protocol on the child's stdout, one line
//! each, written only after the event it reports:
//!
//! - `- <seq>`: the child is about to remove bundle `seq` (and its RPC value) in the current
//!   batch (may or may not become durable: the bundle may be present or absent after a crash);
//! - `+ <seq>`: bundle `seq` (and its RPC value) was inserted and the flush that made it durable
//!   returned Ok;
//! - `= <seq>`: the removal of `seq` was flushed: it must be absent from now on.
//!
//! A bundle and its value join one batch each time, so after any crash they are present together
//! or absent together.
//!
//! Kill delays come from a seeded generator (`FERRY_CRASH_SEED` overrides the seed; it is
//! printed on failure); where in its work the child dies then depends on the scheduler.

// An I/O test: processes, files, the clock for the kill delay, the environment for the seed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use store::{BundleStore as _, Tables as _};
use wire::DtnTime;

use bytes::Bytes;
use store::{
    BundleMeta, DiskStore, LOCK_FILE, PAYLOAD_DIR, PAYLOAD_FILE_MIN, RESERVE_FILE, Retention,
    RpcTable, Store, StoredBundle,
};
use wire::{Bundle, BundleId, CreationTimestamp, Eid, PrimaryBlock};

const TEST_NAME: &str = "sigkill_at_random_points_loses_no_acknowledged_bundle";
const CYCLES: u64 = 200;
const DEFAULT_SEED: u64 = 0x00f3_7722_c4a5_0001;
/// The child keeps the store near this many bundles by removing the oldest, so that 200 cycles
/// do not grow it without bound.
const KEEP: u64 = 48;
/// Longest kill delay. Long enough for several batches, short enough for 200 cycles in seconds.
const MAX_DELAY_MS: u64 = 40;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--crash-child") {
        if let Err(e) = child(&args[1..]) {
            eprintln!("crash child: {e}");
            std::process::exit(2);
        }
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("{TEST_NAME}: test");
        return;
    }
    // `cargo test NAME` passes NAME to every test binary: honour it like libtest would.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| TEST_NAME.contains(f.as_str())) {
        println!("crash: 0 passed, 0 failed (filtered out)");
        return;
    }
    let seed = std::env::var("FERRY_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let start = Instant::now();
    match parent(seed) {
        Ok(summary) => {
            println!(
                "test {TEST_NAME} ... ok ({summary}, {:.1?})",
                start.elapsed()
            );
            println!("crash: 1 passed, 0 failed");
        }
        Err(e) => {
            println!(
                "test {TEST_NAME} ... FAILED (seed {seed}, rerun with FERRY_CRASH_SEED={seed})"
            );
            println!("{e}");
            println!("crash: 0 passed, 1 failed");
            std::process::exit(101);
        }
    }
}

/// splitmix64: a seeded sequence without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn id(seq: u64) -> BundleId {
    BundleId {
        source: Eid::dtn("crash", "writer").expect("valid id"),
        creation: CreationTimestamp {
            time: DtnTime::from_millis(1),
            sequence: seq,
        },
        fragment: None,
    }
}

/// The bundle with sequence number `seq`: size and contents are functions of `seq`, so the
/// checker rebuilds exactly what the child stored. One in three is at least `PAYLOAD_FILE_MIN`
/// (a payload file), the others about 1 KiB (inline).
fn bundle(seq: u64) -> StoredBundle {
    let mut rng = Rng(seq.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let len = if seq.is_multiple_of(3) {
        PAYLOAD_FILE_MIN as usize + rng.below(16 * 1024) as usize
    } else {
        1024
    };
    let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let id = id(seq);
    let destination = Eid::ipn(5, 1);
    let primary = PrimaryBlock::new(
        destination.clone(),
        id.source.clone(),
        id.creation,
        1_000_000,
    );
    StoredBundle {
        meta: BundleMeta {
            id,
            destination,
            expiry: DtnTime::from_millis(1_000_000),
            priority: 1,
            retention: Retention::Carried,
            received_at: DtnTime::from_millis(seq),
        },
        bundle: Bundle::new(primary, Bytes::from(payload)),
    }
}

/// The table of the values kept beside bundles.
const TABLE: RpcTable = RpcTable::InboxPayload;

fn rpc_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The RPC value kept beside bundle `seq`, a function of `seq` like the bundle: none for the
/// bundles that are in files, at least `PAYLOAD_FILE_MIN` bytes (a value file) for one in three,
/// 512 bytes (inline) for the others.
fn rpc_value(seq: u64) -> Option<Vec<u8>> {
    let mut rng = Rng(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let len = match seq % 3 {
        0 => return None,
        1 => PAYLOAD_FILE_MIN as usize + rng.below(16 * 1024) as usize,
        _ => 512,
    };
    Some((0..len).map(|_| rng.next() as u8).collect())
}

/// The child: inserts and removes bundles in small batches until it is killed.
fn child(args: &[String]) -> Result<(), String> {
    let [dir, first, seed] = args else {
        return Err(format!(
            "usage: --crash-child DIR FIRST_SEQ SEED, got {args:?}"
        ));
    };
    let first: u64 = first.parse().map_err(|e| format!("first seq: {e}"))?;
    let seed: u64 = seed.parse().map_err(|e| format!("seed: {e}"))?;
    let (mut store, _) = DiskStore::open(Path::new(dir), u64::MAX).map_err(|e| e.to_string())?;
    let mut rng = Rng(seed);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut seq = first;
    // Bounded: the parent kills the child long before; this only stops a runaway child.
    for _ in 0..100_000 {
        let mut removed = Vec::new();
        let held = store.list().map_err(|e| e.to_string())?;
        let cut = held.len().saturating_sub(KEEP as usize);
        for meta in &held[..cut] {
            let seq = meta.id.creation.sequence;
            writeln!(out, "- {seq}").map_err(|e| e.to_string())?;
            store.remove(&meta.id).map_err(|e| e.to_string())?;
            store
                .rpc_remove(TABLE, &rpc_key(seq))
                .map_err(|e| e.to_string())?;
            removed.push(seq);
        }
        // The same value again under the same key: its file is replaced by a new one, and the
        // old one unlinked after the commit.
        let kept: Vec<u64> = held[cut..]
            .iter()
            .map(|meta| meta.id.creation.sequence)
            .filter(|seq| seq % 3 == 1)
            .collect();
        if !kept.is_empty() {
            let again = kept[rng.below(kept.len() as u64) as usize];
            let value = rpc_value(again).expect("one in three has a large value");
            store
                .rpc_put(TABLE, &rpc_key(again), &value)
                .map_err(|e| e.to_string())?;
        }
        let count = 1 + rng.below(8);
        let batch: Vec<u64> = (seq..seq + count).collect();
        seq += count;
        for &s in &batch {
            store
                .insert(DtnTime::from_millis(1), bundle(s))
                .map_err(|e| e.to_string())?;
            if let Some(value) = rpc_value(s) {
                store
                    .rpc_put(TABLE, &rpc_key(s), &value)
                    .map_err(|e| e.to_string())?;
            }
        }
        store.flush().map_err(|e| e.to_string())?;
        for s in batch {
            writeln!(out, "+ {s}").map_err(|e| e.to_string())?;
        }
        for s in removed {
            writeln!(out, "= {s}").map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What the parent knows from the acknowledgements it has seen.
#[derive(Default)]
struct Expected {
    /// Acknowledged and not announced for removal: must be present.
    present: BTreeSet<u64>,
    /// Announced for removal, not yet confirmed: may be present or absent.
    maybe: BTreeSet<u64>,
    /// Removal acknowledged: must be absent.
    gone: BTreeSet<u64>,
}

impl Expected {
    fn apply(&mut self, line: &str) -> Result<(), String> {
        let (op, seq) = line
            .split_once(' ')
            .ok_or_else(|| format!("bad line {line:?}"))?;
        let seq: u64 = seq.parse().map_err(|e| format!("bad line {line:?}: {e}"))?;
        match op {
            "+" => {
                self.present.insert(seq);
            }
            "-" => {
                self.present.remove(&seq);
                self.maybe.insert(seq);
            }
            "=" => {
                self.maybe.remove(&seq);
                self.gone.insert(seq);
            }
            _ => return Err(format!("bad line {line:?}")),
        }
        Ok(())
    }
}

fn parent(seed: u64) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rng = Rng(seed);
    let mut expected = Expected::default();
    let mut acknowledged = 0u64;
    let mut next_seq = 0u64;
    let mut orphans = 0u64;
    // On a loaded machine a child may not get to its first acknowledgement within 40 ms; the
    // long delays then stretch (up to 16 times) until children acknowledge again, so the test
    // still kills children mid-work rather than only during start-up.
    let mut stretch = 1u64;
    for cycle in 0..CYCLES {
        // Mostly anywhere in the first 40 ms; sometimes within the first 2 ms, while the child
        // is still opening the store and running its own recovery scan.
        let early = rng.below(8) == 0;
        let delay = if early {
            Duration::from_micros(rng.below(2_000))
        } else {
            Duration::from_micros(rng.below(MAX_DELAY_MS * 1_000) * stretch)
        };
        let acknowledged_before = acknowledged;
        let child = Command::new(&exe)
            .arg("--crash-child")
            .arg(dir.path())
            .arg(next_seq.to_string())
            .arg(rng.next().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning the child: {e}"))?;
        let mut child = child;
        std::thread::sleep(delay);
        // SIGKILL on Unix: no destructor, no flush, no chance to tidy up.
        child
            .kill()
            .map_err(|e| format!("killing the child: {e}"))?;
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        if output.status.signal() != Some(9) {
            return Err(format!(
                "cycle {cycle}: the child ended before it was killed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        // Only complete lines count: a line cut by the kill was not an acknowledgement.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in complete.lines() {
            expected.apply(line)?;
            if let Some(seq) = line.strip_prefix("+ ") {
                acknowledged += 1;
                next_seq = next_seq.max(seq.parse::<u64>().map_err(|e| e.to_string())? + 1);
            }
        }
        // Sequence numbers the child used but never acknowledged may be stored (flushed, then
        // killed before the line): the next child starts past all of them.
        next_seq += 64;
        orphans += check(dir.path(), &expected).map_err(|e| format!("cycle {cycle}: {e}"))?;
        if !early && acknowledged == acknowledged_before && delay.as_millis() >= 20 {
            stretch = (stretch * 2).min(16);
        } else if acknowledged > acknowledged_before {
            stretch = (stretch / 2).max(1);
        }
    }
    if acknowledged < CYCLES {
        return Err(format!(
            "only {acknowledged} acknowledged bundles in {CYCLES} cycles: the kills came too early \
             to test anything"
        ));
    }
    Ok(format!(
        "{CYCLES} kills, {acknowledged} acknowledged bundles, {} confirmed removals, {orphans} \
         orphan files removed by recovery",
        expected.gone.len()
    ))
}

/// Reopens the store and checks it against what was acknowledged. Returns the orphans removed.
fn check(dir: &Path, expected: &Expected) -> Result<u64, String> {
    let (store, recovery) = DiskStore::open(dir, u64::MAX).map_err(|e| format!("reopen: {e}"))?;
    if !recovery.dropped.is_empty() || !recovery.rpc_dropped.is_empty() {
        return Err(format!(
            "recovery dropped committed bundles or rpc values (their file was missing or \
             short): {:?} {:?}",
            recovery.dropped, recovery.rpc_dropped
        ));
    }
    let listed = store.list().map_err(|e| e.to_string())?;
    let mut present = BTreeSet::new();
    let mut in_files = 0;
    for meta in &listed {
        let seq = meta.id.creation.sequence;
        let want = bundle(seq);
        let got = store
            .get(&meta.id)
            .map_err(|e| format!("bundle {seq} is listed but unreadable: {e}"))?
            .ok_or_else(|| format!("bundle {seq} is listed but not stored"))?;
        if got.meta != want.meta {
            return Err(format!("bundle {seq}: metadata differs: {:?}", got.meta));
        }
        let (got_bytes, want_bytes) = (
            got.bundle.encode().to_bytes(),
            want.bundle.encode().to_bytes(),
        );
        if got_bytes != want_bytes {
            return Err(format!(
                "bundle {seq}: stored bytes differ from what was inserted"
            ));
        }
        if want_bytes.len() as u64 >= PAYLOAD_FILE_MIN {
            in_files += 1;
        }
        let value = store
            .rpc_get(TABLE, &rpc_key(seq))
            .map_err(|e| format!("the value of bundle {seq} is unreadable: {e}"))?;
        if value.as_deref() != rpc_value(seq).as_deref() {
            return Err(format!(
                "bundle {seq}: its rpc value is {}",
                value.map_or("missing".into(), |v| format!("{} other bytes", v.len()))
            ));
        }
        if value.is_some_and(|v| v.len() as u64 >= PAYLOAD_FILE_MIN) {
            in_files += 1;
        }
        present.insert(seq);
    }
    let values = store.rpc_scan(TABLE).map_err(|e| e.to_string())?;
    if values.len() != present.iter().filter(|s| rpc_value(**s).is_some()).count() {
        return Err(format!(
            "{} rpc values for {} bundles: a value outlived its bundle or came without it",
            values.len(),
            present.len()
        ));
    }
    if let Some(missing) = expected.present.difference(&present).next() {
        return Err(format!("acknowledged bundle {missing} is missing"));
    }
    if let Some(back) = expected.gone.intersection(&present).next() {
        return Err(format!(
            "bundle {back} is back after its removal was acknowledged"
        ));
    }
    // Nothing partial or temporary beside the committed state: one payload file per bundle or
    // rpc value kept in a file, and in the store directory only the database, its WAL, the payload directory and
    // the reserve file (and while the process lived, SQLite's shared WAL index and the store's
    // lock file).
    let files = std::fs::read_dir(dir.join(PAYLOAD_DIR))
        .map_err(|e| e.to_string())?
        .count();
    if files != in_files {
        return Err(format!(
            "{files} payload files for {in_files} bundles and rpc values kept in files after \
             recovery"
        ));
    }
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let name = entry.map_err(|e| e.to_string())?.file_name();
        let name = name.to_string_lossy();
        if !matches!(
            name.as_ref(),
            "store.db" | "store.db-wal" | "store.db-shm" | PAYLOAD_DIR | RESERVE_FILE | LOCK_FILE
        ) {
            return Err(format!("unexpected file {name} in the store directory"));
        }
    }
    Ok(recovery.orphans_removed)
}
