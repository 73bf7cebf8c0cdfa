//! Durable throughput of `DiskStore`, with the baselines it must be judged against measured in the
//! same run on the same file system: one fsync per bundle, and `dd`'s sequential write bandwidth.
//!
//! `cargo bench -p ferry-store --bench durable` prints a table. Targets (issue #4): at least 20,000
//! durable 1 KiB bundles/s; 1 MiB bundles at at least half the `dd` bandwidth.
//!
//! The directory is under Cargo's target tmpdir (or `$FERRY_BENCH_DIR`), never `/tmp`, which may
//! be a tmpfs where every sync is free.

// A benchmark is an I/O shell: it reads the clock and writes files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::BundleStore as _;
use wire::DtnTime;

use bytes::Bytes;
use store::{BundleMeta, DiskStore, Retention, Store, StoredBundle};
use wire::{Bundle, BundleId, CreationTimestamp, Eid, PrimaryBlock};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

fn main() {
    let base = std::env::var_os("FERRY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("durable-bench"));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).expect("create the bench directory");
    let fs_type = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&base)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    println!("durable store benchmark in {} ({fs_type})", base.display());
    if fs_type == "tmpfs" {
        println!("WARNING: tmpfs makes every sync free; the figures mean nothing for durability");
    }
    println!();
    println!(
        "{:<46} {:>8} {:>9} {:>14} {:>11}",
        "measurement", "count", "seconds", "per second", "MB/s"
    );

    let small = payload(KIB - 60);
    let large = payload(MIB);

    // Baselines first, so the store's figures below read against them.
    fsync_per_file(&base.join("fsync-baseline"), 1_000);
    let dd_sync = dd(&base, &["conv=fdatasync"], 256);
    let dd_direct = dd(&base, &["oflag=direct"], 256);

    let dir = base.join("store-1k-256");
    let (rate_256, _) = inserts(&dir, "1 KiB inserts, 256 per flush", &small, 32_768, 256, 0);
    reads(&dir, "1 KiB reads (get, random order)", 32_768, 20_000, 0);
    let dir = base.join("store-1k-1024");
    let (rate_1024, _) = inserts(
        &dir,
        "1 KiB inserts, 1024 per flush",
        &small,
        32_768,
        1_024,
        0,
    );
    inserts(
        &base.join("store-1k-1"),
        "1 KiB inserts, 1 per flush",
        &small,
        1_000,
        1,
        0,
    );
    let dir = base.join("store-1m");
    let (_, mb_16) = inserts(&dir, "1 MiB inserts, 16 per flush", &large, 256, 16, 1);
    reads(&dir, "1 MiB reads (get, random order)", 256, 256, 1);
    let (_, mb_1) = inserts(
        &base.join("store-1m-1"),
        "1 MiB inserts, 1 per flush",
        &large,
        64,
        1,
        2,
    );

    let dd_best = dd_sync.max(dd_direct);
    println!();
    println!(
        "targets: 1 KiB durable inserts >= 20000/s: {:.0}/s at 256 per flush, {:.0}/s at 1024 per flush",
        rate_256, rate_1024
    );
    println!(
        "         1 MiB durable inserts >= 50% of dd ({dd_best:.0} MB/s): {:.0}% at 16 per flush, \
         {:.0}% at 1 per flush",
        100.0 * mb_16 / dd_best,
        100.0 * mb_1 / dd_best
    );
    let _ = fs::remove_dir_all(&base);
}

fn payload(len: usize) -> Bytes {
    // Not zeros: nothing on the way (file system, device) gets to compress or skip them.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    Bytes::from(
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect::<Vec<u8>>(),
    )
}

fn bundle(series: u64, seq: u64, payload: &Bytes) -> StoredBundle {
    let source = Eid::ipn(1, 1);
    let destination = Eid::dtn("sink", "bench").expect("valid id");
    let creation = CreationTimestamp {
        time: DtnTime::from_millis(1_000 + series),
        sequence: seq,
    };
    let primary = PrimaryBlock::new(destination.clone(), source.clone(), creation, 3_600_000);
    StoredBundle {
        meta: BundleMeta {
            id: BundleId {
                source,
                creation,
                fragment: None,
            },
            destination,
            expiry: DtnTime::from_millis(1_000 + 3_600_000),
            priority: 1,
            retention: Retention::Carried,
            received_at: DtnTime::from_millis(1_000),
        },
        bundle: Bundle::new(primary, payload.clone()),
    }
}

fn row(what: &str, count: usize, elapsed: Duration, bytes: usize) -> (f64, f64) {
    let seconds = elapsed.as_secs_f64();
    let rate = count as f64 / seconds;
    let mb = bytes as f64 / seconds / 1e6;
    println!("{what:<46} {count:>8} {seconds:>9.3} {rate:>14.0} {mb:>11.1}");
    (rate, mb)
}

/// Inserts `count` bundles, flushing every `batch`; returns (bundles/s, MB/s).
fn inserts(
    dir: &Path,
    what: &str,
    payload: &Bytes,
    count: usize,
    batch: usize,
    series: u64,
) -> (f64, f64) {
    let (mut store, _) = DiskStore::open(dir, u64::MAX).expect("open the store");
    let bundles: Vec<StoredBundle> = (0..count as u64)
        .map(|i| bundle(series, i, payload))
        .collect();
    let size = bundles[0].bundle.encode().len();
    let start = Instant::now();
    for chunk in bundles.chunks(batch) {
        for b in chunk {
            store
                .insert(DtnTime::from_millis(1_000), b.clone())
                .expect("insert");
        }
        store.flush().expect("flush");
    }
    row(what, count, start.elapsed(), size * count)
}

/// Reads `reads` bundles of series `series` in a scattered order from a store holding `count`.
fn reads(dir: &Path, what: &str, count: usize, reads: usize, series: u64) {
    // Reopened, so the reads come through the store's own read path and not a warm statement.
    let (store, _) = DiskStore::open(dir, u64::MAX).expect("open the store");
    let ids: Vec<BundleId> = (0..reads as u64)
        .map(|i| {
            bundle(series, (i * 7_919) % count as u64, &Bytes::new())
                .meta
                .id
        })
        .collect();
    let start = Instant::now();
    let mut bytes = 0;
    for id in &ids {
        let b = store.get(id).expect("get").expect("stored");
        bytes += b.bundle.payload.data.len();
    }
    row(what, reads, start.elapsed(), bytes);
}

/// The naive durable store: one new file per bundle, written and fsynced before the ack.
fn fsync_per_file(dir: &Path, count: usize) {
    fs::create_dir_all(dir).expect("create the baseline directory");
    let data = vec![0x5au8; KIB];
    let start = Instant::now();
    for i in 0..count {
        let mut f = File::create(dir.join(format!("{i}"))).expect("create");
        f.write_all(&data).expect("write");
        f.sync_all().expect("fsync");
    }
    row(
        "baseline: 1 KiB file + fsync per bundle",
        count,
        start.elapsed(),
        count * KIB,
    );
    let _ = fs::remove_dir_all(dir);
}

/// `dd` writing `mib` MiB sequentially; returns MB/s as measured here (wall time of the process).
fn dd(dir: &Path, flags: &[&str], mib: usize) -> f64 {
    let target = dir.join("dd.bin");
    let start = Instant::now();
    let out = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .arg("bs=1M")
        .arg(format!("count={mib}"))
        .args(flags)
        .output()
        .expect("run dd");
    let elapsed = start.elapsed();
    assert!(out.status.success(), "dd failed: {out:?}");
    let _ = fs::remove_file(&target);
    let (_, mb) = row(
        &format!("baseline: dd bs=1M {}", flags.join(" ")),
        mib,
        elapsed,
        mib * MIB,
    );
    mb
}
