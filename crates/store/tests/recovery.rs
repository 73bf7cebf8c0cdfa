//! The recovery scan at open, the exclusive lock, and what the store refuses.

// Integration tests of an I/O crate: they damage the store's files on purpose.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::fs;
use store::{BundleStore as _, Tables as _};
use wire::DtnTime;

use bytes::Bytes;
use common::{bundle, id};
use store::{
    DiskStore, PAYLOAD_DIR, PAYLOAD_FILE_MIN, RPC_FILE_PREFIX, Recovery, RpcTable, Store,
    StoreError,
};

const LARGE: usize = PAYLOAD_FILE_MIN as usize;

fn payload_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join(PAYLOAD_DIR))
        .expect("payload dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn orphan_files_are_removed_and_stored_bundles_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        assert_eq!(recovery, Recovery::default());
        store
            .insert(DtnTime::from_millis(1), bundle(1, LARGE))
            .expect("insert");
        store.flush().expect("flush");
    }
    let kept = payload_files(dir.path());
    assert_eq!(kept.len(), 1);
    // What a crash leaves: a file of a batch that never committed (a plausible name), and junk.
    fs::write(
        dir.path().join(PAYLOAD_DIR).join("00000000000000ff"),
        b"partial",
    )
    .expect("write");
    fs::write(dir.path().join(PAYLOAD_DIR).join("x.tmp"), b"junk").expect("write");

    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(recovery.orphans_removed, 2);
    assert!(recovery.dropped.is_empty());
    assert_eq!(payload_files(dir.path()), kept);
    let got = store.get(&id(1)).expect("get").expect("kept");
    assert_eq!(got, bundle(1, LARGE));
}

#[test]
fn missing_or_short_payload_files_are_reported_and_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        store
            .insert(DtnTime::from_millis(1), bundle(1, LARGE))
            .expect("insert");
        store
            .insert(DtnTime::from_millis(1), bundle(2, LARGE + 10))
            .expect("insert");
        store
            .insert(DtnTime::from_millis(1), bundle(3, 100))
            .expect("insert");
        store
            .insert(DtnTime::from_millis(1), bundle(4, LARGE))
            .expect("insert");
        store
            .mark_sent(&id(2), &wire::Eid::ipn(9, 0))
            .expect("mark");
        store.flush().expect("flush");
    }
    let files = payload_files(dir.path());
    assert_eq!(files.len(), 3, "bundles 1, 2 and 4 are in files");
    // Files are named by ascending row id: bundle 1's first, then 2's, then 4's.
    let payloads = dir.path().join(PAYLOAD_DIR);
    fs::remove_file(payloads.join(&files[0])).expect("remove bundle 1's file");
    let short = fs::read(payloads.join(&files[1])).expect("read bundle 2's file");
    fs::write(payloads.join(&files[1]), &short[..short.len() - 1]).expect("truncate");

    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    let dropped: Vec<_> = recovery.dropped.iter().map(|m| m.id.clone()).collect();
    assert_eq!(dropped, vec![id(1), id(2)]);
    assert_eq!(recovery.dropped[0], bundle(1, LARGE).meta);
    assert_eq!(recovery.orphans_removed, 0);
    let listed: Vec<_> = store
        .list()
        .expect("list")
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, vec![id(3), id(4)]);
    let usage = store.usage().expect("usage");
    assert_eq!(usage.bundles, 2);
    let expected_bytes: u64 = [bundle(3, 100), bundle(4, LARGE)]
        .iter()
        .map(|b| b.bundle.encode().len() as u64)
        .sum();
    assert_eq!(usage.bytes, expected_bytes);
    assert_eq!(store.get(&id(4)).expect("get"), Some(bundle(4, LARGE)));
    // The short file went with its row; the repair was committed, so a second open finds nothing.
    assert_eq!(payload_files(dir.path()), vec![files[2].clone()]);
    drop(store);
    let (_, again) = DiskStore::open(dir.path(), u64::MAX).expect("reopen again");
    assert_eq!(again, Recovery::default());
}

/// RPC value `seed` of `len` bytes.
fn value(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed ^ (i as u8)).collect()
}

fn rpc_files(dir: &std::path::Path) -> Vec<String> {
    payload_files(dir)
        .into_iter()
        .filter(|name| name.starts_with(RPC_FILE_PREFIX))
        .collect()
}

#[test]
fn rpc_values_whose_file_is_missing_or_short_are_dropped_and_orphans_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        store
            .insert(DtnTime::from_millis(1), bundle(1, LARGE))
            .expect("insert");
        let puts: [(RpcTable, &[u8], Vec<u8>); 4] = [
            (RpcTable::InboxPayload, b"a", value(1, LARGE)),
            (RpcTable::InboxPayload, b"b", value(2, LARGE + 7)),
            (RpcTable::InboxPayload, b"c", value(3, 100)),
            (RpcTable::Dedup, b"a", value(4, LARGE)),
        ];
        for (table, key, value) in &puts {
            store.rpc_put(*table, key, value).expect("put");
        }
        store.flush().expect("flush");
    }
    // Value files are named by ascending file id: a's, then b's, then Dedup a's.
    let files = rpc_files(dir.path());
    assert_eq!(files.len(), 3, "{files:?}");
    assert_eq!(payload_files(dir.path()).len(), 4, "and bundle 1's file");
    let payloads = dir.path().join(PAYLOAD_DIR);
    fs::remove_file(payloads.join(&files[0])).expect("remove a's file");
    let short = fs::read(payloads.join(&files[1])).expect("read b's file");
    fs::write(payloads.join(&files[1]), &short[..short.len() - 1]).expect("truncate");
    // A value file of a batch that never committed.
    fs::write(
        payloads.join(format!("{RPC_FILE_PREFIX}00000000000000ff")),
        b"partial",
    )
    .expect("write");

    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(
        recovery.rpc_dropped,
        vec![
            (RpcTable::InboxPayload, Bytes::from_static(b"a")),
            (RpcTable::InboxPayload, Bytes::from_static(b"b")),
        ]
    );
    assert_eq!(recovery.orphans_removed, 1);
    assert!(recovery.dropped.is_empty());
    let scan = store.rpc_scan(RpcTable::InboxPayload).expect("scan");
    assert_eq!(
        scan,
        vec![(Bytes::from_static(b"c"), Bytes::from(value(3, 100)))]
    );
    assert_eq!(
        store.rpc_get(RpcTable::Dedup, b"a").expect("get"),
        Some(Bytes::from(value(4, LARGE)))
    );
    assert_eq!(store.get(&id(1)).expect("get"), Some(bundle(1, LARGE)));
    // The short file went with its row and the orphan is gone; the repair was committed, so a
    // second open finds nothing.
    assert_eq!(rpc_files(dir.path()), vec![files[2].clone()]);
    drop(store);
    let (_, again) = DiskStore::open(dir.path(), u64::MAX).expect("reopen again");
    assert_eq!(again, Recovery::default());
}

#[test]
fn replaced_and_removed_rpc_value_files_are_unlinked_only_after_the_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = RpcTable::InboxPayload;
    {
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        store.rpc_put(table, b"a", &value(1, LARGE)).expect("put");
        store.rpc_put(table, b"b", &value(2, LARGE)).expect("put");
        store.flush().expect("flush");
        assert_eq!(rpc_files(dir.path()).len(), 2);
        store
            .rpc_put(table, b"a", &value(3, LARGE + 1))
            .expect("replace by a file");
        store
            .rpc_put(table, b"b", &value(4, 10))
            .expect("replace inline");
        // Visible at once; the old files stay until the change is durable.
        assert_eq!(
            store.rpc_get(table, b"a").expect("get"),
            Some(Bytes::from(value(3, LARGE + 1)))
        );
        assert_eq!(rpc_files(dir.path()).len(), 3);
    }
    let (mut store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(recovery, Recovery::default());
    assert_eq!(
        store.rpc_scan(table).expect("scan"),
        vec![
            (Bytes::from_static(b"a"), Bytes::from(value(1, LARGE))),
            (Bytes::from_static(b"b"), Bytes::from(value(2, LARGE))),
        ]
    );
    let before = rpc_files(dir.path());
    store
        .rpc_put(table, b"a", &value(3, LARGE + 1))
        .expect("replace by a file");
    assert!(store.rpc_remove(table, b"b").expect("remove"));
    assert_eq!(rpc_files(dir.path()).len(), 3);
    store.flush().expect("flush");
    let after = rpc_files(dir.path());
    assert_eq!(after.len(), 1);
    assert!(
        !before.contains(&after[0]),
        "a new file id: {before:?} {after:?}"
    );
    drop(store);
    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(recovery, Recovery::default());
    assert_eq!(
        store.rpc_scan(table).expect("scan"),
        vec![(Bytes::from_static(b"a"), Bytes::from(value(3, LARGE + 1)))]
    );
}

#[test]
fn unflushed_changes_are_gone_after_reopen_and_leave_no_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        store
            .insert(DtnTime::from_millis(1), bundle(1, LARGE))
            .expect("insert");
        store.flush().expect("flush");
        store
            .insert(DtnTime::from_millis(1), bundle(2, LARGE))
            .expect("insert");
        assert!(store.remove(&id(1)).expect("remove"));
        // Visible at once, before any flush.
        assert!(store.contains(&id(2)).expect("contains"));
        assert!(!store.contains(&id(1)).expect("contains"));
        assert_eq!(payload_files(dir.path()).len(), 2);
    }
    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(recovery, Recovery::default());
    assert_eq!(store.get(&id(1)).expect("get"), Some(bundle(1, LARGE)));
    assert!(!store.contains(&id(2)).expect("contains"));
    assert_eq!(payload_files(dir.path()).len(), 1);
}

#[test]
fn committed_changes_outlive_the_store_and_a_syncer_on_another_thread_makes_them_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
        let syncer = store.syncer().expect("a disk store defers its syncs");
        store
            .insert(DtnTime::from_millis(1), bundle(1, LARGE))
            .expect("insert");
        store
            .insert(DtnTime::from_millis(1), bundle(2, 10))
            .expect("insert");
        store.rpc_put(RpcTable::Dedup, b"k", b"v").expect("rpc_put");
        assert!(store.commit().expect("commit"), "a batch was committed");
        assert!(
            !store.commit().expect("commit"),
            "nothing is left to commit"
        );
        // The owner goes on while another thread syncs the write-ahead log.
        let syncing = std::thread::spawn(move || syncer.sync());
        store
            .insert(DtnTime::from_millis(1), bundle(3, 10))
            .expect("insert");
        syncing.join().expect("sync thread").expect("sync");
        // Dropped without a flush: the committed batch stays, the open one is rolled back.
    }
    let (store, recovery) = DiskStore::open(dir.path(), u64::MAX).expect("reopen");
    assert_eq!(recovery, Recovery::default());
    assert_eq!(store.get(&id(1)).expect("get"), Some(bundle(1, LARGE)));
    assert_eq!(store.get(&id(2)).expect("get"), Some(bundle(2, 10)));
    assert!(!store.contains(&id(3)).expect("contains"));
    assert_eq!(
        store.rpc_get(RpcTable::Dedup, b"k").expect("rpc_get"),
        Some(Bytes::from_static(b"v"))
    );
    assert_eq!(payload_files(dir.path()).len(), 1);
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
    let err = DiskStore::open(dir.path(), u64::MAX)
        .err()
        .expect("a second open must fail while the first holds the store");
    assert!(err.to_string().contains("another process"), "{err}");
}

#[test]
fn a_bundle_that_would_not_decode_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut store, _) = DiskStore::open(dir.path(), u64::MAX).expect("open");
    let mut invalid = bundle(1, 10);
    // RFC 9171 §4.2.2: an unknown creation time requires a bundle age block.
    invalid.bundle.primary.creation.time = DtnTime::from_millis(0);
    let err = store
        .insert(DtnTime::from_millis(1), invalid)
        .expect_err("refused");
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert_eq!(store.usage().expect("usage").bundles, 0);
    store
        .flush()
        .expect("a refused bundle does not poison the batch");
}

#[test]
fn default_data_dir_follows_xdg() {
    let dir = store::default_data_dir(Some("/srv/data".as_ref()), Some("/home/n".as_ref()));
    assert_eq!(dir, Some(std::path::PathBuf::from("/srv/data/ferry")));
}
