//! Model-based test: random operation sequences run against `MemoryStore` (the model) and
//! `DiskStore` with the same quota; after every operation every query must answer the same,
//! including which bundles an insert evicted and every `Full` error. `Reopen` drops the disk store
//! without flushing and opens it again: it must come back with exactly what was flushed, so the
//! model is rebuilt by replaying the operations up to the last flush.

// Integration tests of an I/O crate: temporary directories are file system access by design.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use bytes::Bytes;
use proptest::prelude::*;
use store::{
    BundleMeta, DiskOptions, DiskStore, MemoryStore, Retention, RpcTable, Store, StoreError,
    StoredBundle,
};
use store::{BundleStore as _, Tables as _};
use wire::DtnTime;
use wire::{Bundle, BundleId, CreationTimestamp, Eid, PrimaryBlock};

/// Small enough that eviction and `Full` happen often.
const QUOTA: u64 = 8_000;
/// Low so that the payload-file path is exercised by small bundles and RPC values (the default is
/// 64 KiB).
const FILE_MIN: u64 = 1_000;

fn source(i: u8) -> Eid {
    match i % 3 {
        0 => Eid::dtn("alpha", "").unwrap(),
        1 => Eid::dtn("alpha", "x").unwrap(),
        _ => Eid::ipn(7, 0),
    }
}

fn destination(i: u8) -> Eid {
    match i % 3 {
        0 => Eid::dtn("b", "app").unwrap(),
        1 => Eid::ipn(2, 1),
        _ => Eid::Null,
    }
}

fn peer(i: u8) -> Eid {
    if i.is_multiple_of(2) {
        Eid::dtn("p", "").unwrap()
    } else {
        Eid::ipn(9, 0)
    }
}

fn creation(i: u8) -> CreationTimestamp {
    CreationTimestamp {
        time: DtnTime::from_millis(1 + u64::from(i % 2)),
        sequence: u64::from(i / 2),
    }
}

fn fragment(i: u8) -> Option<(u64, u64)> {
    match i % 3 {
        0 => None,
        1 => Some((0, 10)),
        _ => Some((10, 5)),
    }
}

/// An id from a pool of 3 sources × 4 creation timestamps × 3 fragment variants.
#[derive(Debug, Clone, Copy)]
struct IdSel {
    source: u8,
    creation: u8,
    fragment: u8,
}

impl IdSel {
    fn id(self) -> BundleId {
        BundleId {
            source: source(self.source),
            creation: creation(self.creation),
            fragment: fragment(self.fragment),
        }
    }
}

fn all_ids() -> Vec<BundleId> {
    let mut out = Vec::new();
    for source in 0..3 {
        for creation in 0..4 {
            for fragment in 0..3 {
                out.push(
                    IdSel {
                        source,
                        creation,
                        fragment,
                    }
                    .id(),
                );
            }
        }
    }
    out
}

/// Every RPC table is exercised.
const TABLES: u8 = RpcTable::ALL.len() as u8;

fn table(i: u8) -> RpcTable {
    RpcTable::ALL[usize::from(i) % RpcTable::ALL.len()]
}

#[derive(Debug, Clone)]
enum Op {
    Insert {
        now: u64,
        id: IdSel,
        destination: u8,
        expiry: u64,
        priority: u8,
        retention: u8,
        size: usize,
    },
    Remove(IdSel),
    MarkSent(IdSel, u8),
    /// Table, key, and the value's seed and length.
    RpcPut(u8, u8, u8, usize),
    /// Table, and three rows of key, value seed and length, put together in that order.
    RpcPutMany(u8, [(u8, u8, usize); 3]),
    RpcRemove(u8, u8),
    Flush,
    Reopen,
}

fn id_sel() -> impl Strategy<Value = IdSel> {
    (0u8..3, 0u8..4, 0u8..3).prop_map(|(source, creation, fragment)| IdSel {
        source,
        creation,
        fragment,
    })
}

fn rpc_row() -> impl Strategy<Value = (u8, u8, usize)> {
    (
        0u8..4,
        any::<u8>(),
        prop_oneof![0usize..20, 900usize..2_500],
    )
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![4 => 0usize..900, 1 => 900usize..2_500];
    prop_oneof![
        8 => (0u64..200, id_sel(), 0u8..3, 0u64..200, 0u8..3, 0u8..3, size).prop_map(
            |(now, id, destination, expiry, priority, retention, size)| Op::Insert {
                now,
                id,
                destination,
                expiry,
                priority,
                retention,
                size,
            }
        ),
        2 => id_sel().prop_map(Op::Remove),
        2 => (id_sel(), 0u8..2).prop_map(|(id, p)| Op::MarkSent(id, p)),
        // Lengths on both sides of FILE_MIN: inline values, value files, and replacements of
        // either by either.
        2 => (0u8..TABLES, 0u8..4, any::<u8>(), prop_oneof![0usize..20, 900usize..2_500])
            .prop_map(|(t, k, v, len)| Op::RpcPut(t, k, v, len)),
        // The same, three at once: a key may come twice (the later value wins), a value file
        // may sit between inline values, an inline value may replace a file-backed row.
        1 => (0u8..TABLES, [rpc_row(), rpc_row(), rpc_row()])
            .prop_map(|(t, rows)| Op::RpcPutMany(t, rows)),
        1 => (0u8..TABLES, 0u8..4).prop_map(|(t, k)| Op::RpcRemove(t, k)),
        2 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn stored(
    id: IdSel,
    destination_sel: u8,
    expiry: u64,
    priority: u8,
    retention: u8,
    size: usize,
) -> StoredBundle {
    let id = id.id();
    let destination = destination(destination_sel);
    let primary = PrimaryBlock::new(destination.clone(), id.source.clone(), id.creation, 1_000);
    let payload: Vec<u8> = (0..size).map(|i| (i as u8) ^ (expiry as u8)).collect();
    StoredBundle {
        meta: BundleMeta {
            id,
            destination,
            expiry: DtnTime::from_millis(expiry),
            priority,
            retention: Retention::from_code(retention),
            received_at: DtnTime::from_millis(expiry / 2),
        },
        bundle: Bundle::new(primary, Bytes::from(payload)),
    }
}

fn rpc_value(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed ^ (i as u8)).collect()
}

/// What an operation returned, comparable across stores (`Full` by its fields, other errors by
/// message, which makes any unexpected disk error a mismatch).
fn outcome<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(StoreError::Full {
            needed,
            available,
            quota,
        }) => format!("full {needed} {available} {quota}"),
        Err(other) => format!("error {other}"),
    }
}

fn apply(store: &mut dyn Store, op: &Op) -> String {
    match *op {
        Op::Insert {
            now,
            id,
            destination,
            expiry,
            priority,
            retention,
            size,
        } => outcome(store.insert(
            DtnTime::from_millis(now),
            stored(id, destination, expiry, priority, retention, size),
        )),
        Op::Remove(id) => outcome(store.remove(&id.id())),
        Op::MarkSent(id, p) => outcome(store.mark_sent(&id.id(), &peer(p))),
        Op::RpcPut(t, k, v, len) => outcome(store.rpc_put(table(t), &[k], &rpc_value(v, len))),
        Op::RpcPutMany(t, rows) => {
            let keys = rows.map(|(k, _, _)| [k]);
            let values = rows.map(|(_, v, len)| rpc_value(v, len));
            let rows: Vec<(&[u8], &[u8])> = keys
                .iter()
                .zip(&values)
                .map(|(k, v)| (&k[..], &v[..]))
                .collect();
            outcome(store.rpc_put_many(table(t), &rows))
        }
        Op::RpcRemove(t, k) => outcome(store.rpc_remove(table(t), &[k])),
        Op::Flush => outcome(store.flush()),
        Op::Reopen => unreachable!("handled by the driver"),
    }
}

/// Every query of the trait, as text.
fn snapshot(store: &dyn Store) -> Vec<String> {
    let mut out = vec![outcome(store.list()), outcome(store.usage())];
    for id in all_ids() {
        out.push(outcome(store.contains(&id)));
        out.push(outcome(store.get(&id)));
    }
    for d in 0..3 {
        out.push(outcome(store.by_destination(&destination(d))));
    }
    for time in [0, 1, 50, 99, 100, 150, 199, u64::MAX] {
        out.push(outcome(store.expiring_by(DtnTime::from_millis(time))));
    }
    for p in 0..2 {
        out.push(outcome(store.not_sent_to(&peer(p))));
    }
    for s in 0..3 {
        for c in 0..4 {
            out.push(outcome(store.fragments_of(&source(s), creation(c))));
        }
    }
    for t in 0..TABLES {
        out.push(outcome(store.rpc_scan(table(t))));
        for head in [0, 3, FILE_MIN as usize + 1] {
            out.push(outcome(store.rpc_scan_heads(table(t), head)));
        }
        for k in 0..4 {
            out.push(outcome(store.rpc_get(table(t), &[k])));
        }
        // Ranges: open and closed above, empty, cut by the limit; bounds between and on keys.
        for (from, to) in [
            (&[][..], None),
            (&[1][..], None),
            (&[1][..], Some(&[3][..])),
            (&[0, 5][..], Some(&[2, 0][..])),
            (&[3][..], Some(&[1][..])),
        ] {
            for limit in [0, 1, 2, usize::MAX] {
                out.push(outcome(store.rpc_range(table(t), from, to, limit)));
            }
        }
    }
    out
}

fn open(dir: &std::path::Path) -> DiskStore {
    let options = DiskOptions {
        quota: QUOTA,
        payload_file_min: FILE_MIN,
    };
    let (store, recovery) = DiskStore::open_with(dir, options).expect("open");
    // Dropping a store rolls its open batch back and removes that batch's files, so a clean
    // reopen has nothing to repair.
    assert_eq!(recovery, store::Recovery::default());
    store
}

/// Runs `ops` on both stores, comparing as it goes; returns what each operation returned.
fn run(ops: &[Op]) -> Result<Vec<String>, TestCaseError> {
    let mut outcomes = Vec::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut disk = open(dir.path());
    let mut model = MemoryStore::new(QUOTA);
    let mut durable: Vec<Op> = Vec::new();
    let mut pending: Vec<Op> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Reopen => {
                drop(disk);
                disk = open(dir.path());
                pending.clear();
                model = MemoryStore::new(QUOTA);
                for op in &durable {
                    apply(&mut model, op);
                }
            }
            Op::Flush => {
                prop_assert_eq!(apply(&mut disk, op), apply(&mut model, op));
                durable.append(&mut pending);
            }
            _ => {
                let expected = apply(&mut model, op);
                let actual = apply(&mut disk, op);
                prop_assert_eq!(&actual, &expected, "step {}: {:?}", step, op);
                outcomes.push(actual);
                pending.push(op.clone());
            }
        }
        let expected = snapshot(&model);
        let actual = snapshot(&disk);
        for (a, e) in actual.iter().zip(&expected) {
            prop_assert_eq!(a, e, "after step {}: {:?}", step, op);
        }
    }
    // No payload file without a row once the batch committed (files of removed bundles and of
    // removed or replaced RPC values are unlinked only after the change is durable).
    prop_assert!(disk.flush().is_ok());
    let names: Vec<String> = std::fs::read_dir(dir.path().join(store::PAYLOAD_DIR))
        .expect("payload dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let (rpc_files, files): (Vec<&String>, Vec<&String>) = names
        .iter()
        .partition(|name| name.starts_with(store::RPC_FILE_PREFIX));
    let rpc_in_files = RpcTable::ALL
        .iter()
        .flat_map(|t| model.rpc_scan(*t).expect("scan"))
        .filter(|(_, v)| v.len() as u64 >= FILE_MIN)
        .count();
    prop_assert_eq!(rpc_files.len(), rpc_in_files);
    let files = files.len();
    let in_files = model
        .list()
        .expect("list")
        .iter()
        .filter(|m| {
            let b = model.get(&m.id).expect("get").expect("listed");
            b.bundle.encode().len() as u64 >= FILE_MIN
        })
        .count();
    prop_assert_eq!(files, in_files);
    Ok(outcomes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn disk_store_behaves_like_memory_store(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}

/// A fixed sequence that fills the quota so that evictions and refusals are certainly covered,
/// whatever the random cases happen to draw.
#[test]
fn eviction_and_refusal_match_the_model() {
    let mut ops = Vec::new();
    for i in 0..12u8 {
        ops.push(Op::Insert {
            now: 10,
            id: IdSel {
                source: i % 3,
                creation: i % 4,
                fragment: i / 4,
            },
            destination: i % 3,
            expiry: 20 + u64::from(i) * 10,
            priority: i % 3,
            retention: i % 3,
            size: 600 + usize::from(i) * 150,
        });
        if i % 4 == 3 {
            ops.push(Op::Flush);
        }
    }
    // Larger than the whole quota: refused whatever is stored.
    ops.push(Op::Insert {
        now: 10,
        id: IdSel {
            source: 2,
            creation: 3,
            fragment: 2,
        },
        destination: 0,
        expiry: 500,
        priority: 2,
        retention: 2,
        size: QUOTA as usize,
    });
    ops.push(Op::Reopen);
    let outcomes = run(&ops).expect("model and disk store agree");
    assert!(
        outcomes
            .iter()
            .any(|o| o.contains("new: true, evicted: [BundleId")),
        "no insert evicted anything: {outcomes:#?}"
    );
    assert!(
        outcomes.iter().any(|o| o.starts_with("full ")),
        "no insert was refused: {outcomes:#?}"
    );
}

/// A fixed sequence through every transition of an RPC value between inline and file, flushed
/// and not, across reopens, whatever the random cases happen to draw.
#[test]
fn rpc_value_files_match_the_model_across_reopen() {
    let large = FILE_MIN as usize;
    let ops = vec![
        Op::RpcPut(3, 0, 1, large),
        Op::RpcPut(3, 1, 2, large + 500),
        Op::RpcPut(4, 0, 3, 10),
        Op::Flush,
        Op::Reopen,
        // Replaced (file by inline, file by file, inline by file) and removed, then lost unflushed:
        // the old files must still be there and read back.
        Op::RpcPut(3, 0, 4, 5),
        Op::RpcPut(3, 1, 5, large + 1),
        Op::RpcPut(4, 0, 6, large),
        Op::RpcRemove(3, 1),
        Op::Reopen,
        // The same changes flushed: the old files go, the new ones stay.
        Op::RpcPut(3, 0, 4, 5),
        Op::RpcPut(3, 1, 5, large + 1),
        Op::RpcPut(4, 0, 6, large),
        Op::RpcPut(4, 0, 7, large + 2),
        Op::Flush,
        Op::Reopen,
        Op::RpcRemove(4, 0),
        Op::Flush,
        Op::Reopen,
    ];
    let outcomes = run(&ops).expect("model and disk store agree");
    assert!(
        outcomes.iter().all(|o| o.starts_with("ok ")),
        "{outcomes:#?}"
    );
}
