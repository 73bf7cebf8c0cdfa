//! Bundles for the integration tests.

use bytes::Bytes;
use store::{BundleMeta, Retention, StoredBundle};
use wire::DtnTime;
use wire::{Bundle, BundleId, CreationTimestamp, Eid, PrimaryBlock};

/// The id of test bundle `seq`.
pub(crate) fn id(seq: u64) -> BundleId {
    BundleId {
        source: Eid::dtn("tester", "").expect("valid id"),
        creation: CreationTimestamp {
            time: DtnTime::from_millis(1),
            sequence: seq,
        },
        fragment: None,
    }
}

/// Test bundle `seq` with a payload of `len` bytes whose contents depend on `seq`.
pub(crate) fn bundle(seq: u64, len: usize) -> StoredBundle {
    let id = id(seq);
    let destination = Eid::ipn(3, 1);
    let primary = PrimaryBlock::new(destination.clone(), id.source.clone(), id.creation, 1_000);
    let payload: Vec<u8> = (0..len).map(|i| (i as u64 ^ seq) as u8).collect();
    StoredBundle {
        meta: BundleMeta {
            id,
            destination,
            expiry: DtnTime::from_millis(1_001),
            priority: 1,
            retention: Retention::Carried,
            received_at: DtnTime::from_millis(1),
        },
        bundle: Bundle::new(primary, Bytes::from(payload)),
    }
}
