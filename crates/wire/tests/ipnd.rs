//! Property tests of dtn7-rs's discovery beacon codec (`wire::ipnd`): every beacon within the
//! bounds survives encode → decode unchanged and re-encodes to the same bytes; truncated,
//! mutated and arbitrary input never panics, and a beacon that decodes re-encodes to bytes that
//! decode to it again.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use wire::Eid;
use wire::ipnd::{IpndBeacon, IpndCla, MAX_CLA_NAME, MAX_CLAS, MAX_SERVICE_LEN, MAX_SERVICES};

fn node() -> impl Strategy<Value = Eid> {
    prop_oneof![
        "[a-zA-Z0-9][a-zA-Z0-9.~_-]{0,20}"
            .prop_map(|n| Eid::dtn(&n, "").expect("generated from the grammar")),
        (any::<u64>(), any::<u64>()).prop_map(|(n, s)| Eid::ipn(n, s)),
    ]
}

fn cla() -> impl Strategy<Value = IpndCla> {
    (
        proptest::string::string_regex(&format!("[a-z0-9é]{{0,{}}}", MAX_CLA_NAME / 2)).unwrap(),
        proptest::option::of(any::<u16>()),
    )
        .prop_map(|(name, port)| IpndCla { name, port })
}

fn beacon() -> impl Strategy<Value = IpndBeacon> {
    (
        node(),
        any::<u32>(),
        proptest::collection::vec(cla(), 0..=MAX_CLAS),
        proptest::collection::btree_map(
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..=MAX_SERVICE_LEN),
            0..=MAX_SERVICES,
        ),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(node, sequence, clas, services, period_secs)| IpndBeacon {
            node,
            sequence,
            clas,
            services,
            period_secs,
        })
}

proptest! {
    #[test]
    fn beacons_round_trip_byte_stable(b in beacon()) {
        let bytes = b.encode();
        let back = IpndBeacon::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &b);
        prop_assert_eq!(back.encode(), bytes);
    }

    #[test]
    fn truncations_and_mutations_never_panic(
        b in beacon(),
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let bytes = b.encode();
        let n = cut.index(bytes.len());
        prop_assert!(IpndBeacon::decode(&bytes.slice(..n)).is_err());
        let mut v = bytes.to_vec();
        for (at, x) in flips {
            let i = at.index(v.len());
            v[i] ^= x;
        }
        if let Ok(decoded) = IpndBeacon::decode(&Bytes::from(v)) {
            prop_assert_eq!(IpndBeacon::decode(&decoded.encode()).unwrap(), decoded);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = IpndBeacon::decode(&Bytes::from(bytes));
    }
}

/// An empty service map and no convergence layers leave the block out, as dtnd does; flags say so.
#[test]
fn an_empty_service_block_is_left_out() {
    let b = IpndBeacon {
        node: "dtn://x/".parse().unwrap(),
        sequence: 1,
        clas: Vec::new(),
        services: BTreeMap::new(),
        period_secs: Some(0),
    };
    assert_eq!(b.flags(), 0x05);
    let bytes = b.encode();
    assert_eq!(bytes[0], 0x85);
    assert_eq!(IpndBeacon::decode(&bytes).unwrap(), b);
}
