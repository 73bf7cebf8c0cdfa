//! A store on a small tmpfs that fills up: the error must say the disk is full, the store must
//! stay usable, and every bundle flushed before must still be there, intact, after a reopen.
//!
//! Needs root to mount the tmpfs (CI and the development machines run as root). Without it the
//! test says why on stderr and passes without checking anything.

// An I/O test: it mounts a file system and runs `mount`/`umount`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::{bundle, id};
use store::BundleStore as _;
use store::{DiskStore, PAYLOAD_FILE_MIN, Recovery, Store, StoreError};
use wire::DtnTime;

#[path = "support/tmpfs.rs"]
mod tmpfs;
use tmpfs::mount_tmpfs;

#[test]
fn a_full_disk_is_reported_and_loses_nothing_flushed() {
    // Only bundles kept inline: SQLite runs out of room first (SQLITE_FULL).
    let message = fill_and_check("inline", 4, 3 << 20, |seq| {
        20_000 + (seq % 7) as usize * 1_000
    });
    if let Some(message) = message {
        assert!(message.contains("database"), "{message}");
    }
}

#[test]
fn a_payload_file_that_does_not_fit_is_reported_and_loses_nothing_flushed() {
    // Only large bundles: writing a payload file runs out of room first, in the middle of a
    // batch of seven, so the bundles inserted before it in that batch are rolled back with it.
    // Room for a few batches of them beside the database and the reserve.
    let size = 3 * 7 * (PAYLOAD_FILE_MIN + 50_000);
    let message = fill_and_check("large", 7, size, |_| PAYLOAD_FILE_MIN as usize + 50_000);
    if let Some(message) = message {
        assert!(message.contains("writing"), "{message}");
        assert!(message.contains("were rolled back"), "{message}");
    }
}

/// Fills a tmpfs of `size` bytes with bundles of `len(seq)` bytes, `per_flush` per flush, and
/// checks the failure and what survives it. Returns the error message, or `None` if no tmpfs
/// could be mounted.
fn fill_and_check(
    name: &str,
    per_flush: usize,
    size: u64,
    len: impl Fn(u64) -> usize,
) -> Option<String> {
    let temp = tempfile::tempdir().expect("tempdir");
    let mount = match mount_tmpfs(temp.path(), &size.to_string()) {
        Ok(mount) => mount,
        Err(why) => {
            eprintln!(
                "SKIPPED the {name} full-disk test: cannot mount a tmpfs (mounting needs root): \
                 {why}"
            );
            return None;
        }
    };
    let dir = mount.0.join("store");
    let (mut store, _) = DiskStore::open(&dir, u64::MAX).expect("open");

    // Insert and flush until the disk refuses.
    let mut flushed = Vec::new();
    let mut batch = Vec::new();
    let mut failure = None;
    let mut failed_in_flush = false;
    for seq in 0..10_000u64 {
        let len = len(seq);
        if let Err(e) = store.insert(DtnTime::from_millis(1), bundle(seq, len)) {
            failure = Some(e);
            break;
        }
        batch.push((seq, len));
        if batch.len() == per_flush {
            if let Err(e) = store.flush() {
                failure = Some(e);
                failed_in_flush = true;
                break;
            }
            flushed.append(&mut batch);
        }
    }
    let failure = failure.expect("a small file system must fill up");
    let message = failure.to_string();
    assert!(matches!(failure, StoreError::DiskFull(_)), "{failure:?}");
    assert!(message.starts_with("disk full while "), "{message}");
    assert!(
        flushed.len() >= 8,
        "the disk filled too early to test anything: {message}"
    );
    eprintln!("{name}: {} bundles flushed, then: {message}", flushed.len());

    // An insert that fails rolls back the batch it joined: the next flush must fail too, so
    // that none of that batch is acknowledged. A failed flush reports its loss itself.
    if !failed_in_flush && !batch.is_empty() {
        assert!(
            store.flush().is_err(),
            "a flush after a lost batch must fail"
        );
    }
    // Still usable: everything flushed is readable, and removing bundles frees space for more.
    for &(seq, len) in &flushed {
        assert_eq!(store.get(&id(seq)).expect("get"), Some(bundle(seq, len)));
    }
    let unflushed: Vec<u64> = batch.iter().map(|&(seq, _)| seq).collect();
    for seq in &unflushed {
        assert!(!store.contains(&id(*seq)).expect("contains"), "{seq}");
    }
    let (freed, kept) = flushed.split_at(4);
    for &(seq, _) in freed {
        assert!(store.remove(&id(seq)).expect("remove"));
    }
    store.flush().expect("a removal fits on a full disk");
    store
        .insert(DtnTime::from_millis(1), bundle(1_000_000, 500))
        .expect("insert after freeing");
    store.flush().expect("flush after freeing");
    drop(store);

    let (store, recovery) = DiskStore::open(&dir, u64::MAX).expect("reopen on the full disk");
    assert_eq!(recovery, Recovery::default());
    for &(seq, len) in kept {
        assert_eq!(store.get(&id(seq)).expect("get"), Some(bundle(seq, len)));
    }
    for &(seq, _) in freed {
        assert!(!store.contains(&id(seq)).expect("contains"));
    }
    assert!(store.contains(&id(1_000_000)).expect("contains"));
    assert_eq!(store.usage().expect("usage").bundles, kept.len() as u64 + 1);
    drop(store);
    drop(mount);
    Some(message)
}
