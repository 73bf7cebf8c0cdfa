//! Property tests of the BPv7 codec (and the discovery beacon): every value the types can hold (within RFC 9171's rules)
//! survives encode → decode unchanged, re-encoding is byte-stable, and arbitrary or mutated input
//! never panics.

use bytes::Bytes;
use proptest::prelude::*;
use wire::DtnTime;
use wire::{
    AdminRecord, Beacon, BlockFlags, Bundle, BundleFlags, Capabilities, ClaEndpoint, ClaKind,
    CrcType, CreationTimestamp, DecodeErrorKind, Eid, ExtensionBlock, ExtensionData, FragmentInfo,
    HopCount, PayloadBlock, PrimaryBlock, Reassembly, StatusAssertion, StatusReason, StatusReport,
};

fn crc_type() -> impl Strategy<Value = CrcType> {
    prop_oneof![
        Just(CrcType::None),
        Just(CrcType::Crc16),
        Just(CrcType::Crc32c)
    ]
}

fn dtn_eid() -> impl Strategy<Value = Eid> {
    ("[a-zA-Z0-9][a-zA-Z0-9.~_-]{0,20}", "[!-~]{0,24}")
        .prop_map(|(node, demux)| Eid::dtn(&node, &demux).expect("generated from the grammar"))
}

fn eid() -> impl Strategy<Value = Eid> {
    prop_oneof![
        1 => Just(Eid::Null),
        4 => dtn_eid(),
        4 => (any::<u64>(), any::<u64>()).prop_map(|(n, s)| Eid::ipn(n, s)),
    ]
}

fn non_null_eid() -> impl Strategy<Value = Eid> {
    eid().prop_filter("a source that reports", |e| !e.is_null())
}

fn extension_data() -> impl Strategy<Value = ExtensionData> {
    prop_oneof![
        non_null_eid().prop_map(|e| ExtensionData::PreviousNode(e.node_id())),
        any::<u64>().prop_map(ExtensionData::BundleAge),
        (1u64..=255, any::<u64>())
            .prop_map(|(limit, count)| ExtensionData::HopCount(HopCount { limit, count })),
        (
            prop_oneof![Just(11u64), Just(12), 192u64..=255, 13u64..191],
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(block_type, data)| ExtensionData::Unknown {
                block_type,
                data: Bytes::from(data)
            }),
    ]
}

/// Block flags with any bits except "report if unprocessable" (forbidden in admin records and
/// anonymous bundles, which the bundle strategy may produce).
fn block_flags() -> impl Strategy<Value = BlockFlags> {
    any::<u64>().prop_map(|f| BlockFlags(f & !BlockFlags::REPORT_IF_UNPROCESSABLE))
}

prop_compose! {
    fn bundle()(
        destination in eid(),
        source in eid(),
        report_to in eid(),
        time in prop_oneof![Just(0u64), any::<u64>()],
        sequence in any::<u64>(),
        lifetime_ms in any::<u64>(),
        raw_flags in any::<u64>(),
        primary_crc in crc_type(),
        payload in proptest::collection::vec(any::<u8>(), 0..2048),
        payload_crc in crc_type(),
        payload_flags in block_flags(),
        fragment in proptest::option::of((any::<u32>(), any::<u32>())),
        extensions in proptest::collection::vec((extension_data(), block_flags(), crc_type()), 0..5),
        age in any::<u64>(),
    ) -> Bundle {
        let mut flags = BundleFlags(raw_flags);
        if source.is_null() || flags.contains(BundleFlags::ADMIN_RECORD) {
            flags = flags.with(BundleFlags::ANY_REPORT, false);
        }
        if source.is_null() {
            flags = flags.with(BundleFlags::MUST_NOT_FRAGMENT, true);
        }
        let fragment = fragment.map(|(offset, extra)| FragmentInfo {
            offset: u64::from(offset),
            total_adu_len: u64::from(offset) + payload.len() as u64 + u64::from(extra),
        });
        let primary = PrimaryBlock {
            flags,
            crc_type: primary_crc,
            destination,
            source,
            report_to,
            creation: CreationTimestamp {
                time: DtnTime::from_millis(time),
                sequence,
            },
            lifetime_ms,
            fragment,
        };
        // At most one block of each type the RFC limits to one; numbers from 2 upwards.
        let mut blocks: Vec<ExtensionBlock> = Vec::new();
        for (data, flags, crc_type) in extensions {
            let t = data.block_type();
            if matches!(t, 6 | 7 | 10) && blocks.iter().any(|b| b.data.block_type() == t) {
                continue;
            }
            blocks.push(ExtensionBlock { number: blocks.len() as u64 + 2, flags, crc_type, data });
        }
        if time == 0 && !blocks.iter().any(|b| b.data.block_type() == 7) {
            blocks.push(ExtensionBlock::new(blocks.len() as u64 + 2, ExtensionData::BundleAge(age)));
        }
        Bundle {
            primary: PrimaryBlock { flags: primary.encoded_flags(), ..primary },
            extensions: blocks,
            payload: PayloadBlock { flags: payload_flags, crc_type: payload_crc, data: Bytes::from(payload), origin: None },
        }
    }
}

fn status_report() -> impl Strategy<Value = StatusReport> {
    let assertion =
        proptest::option::of(
            proptest::option::of(any::<u64>()).prop_map(|time| StatusAssertion {
                time: time.map(DtnTime::from_millis),
            }),
        );
    (
        [
            assertion.clone(),
            assertion.clone(),
            assertion.clone(),
            assertion,
        ],
        any::<u64>(),
        eid(),
        any::<u64>(),
        any::<u64>(),
        proptest::option::of((any::<u64>(), any::<u64>())),
    )
        .prop_map(
            |(
                [received, forwarded, delivered, deleted],
                reason,
                source,
                time,
                sequence,
                fragment,
            )| StatusReport {
                received,
                forwarded,
                delivered,
                deleted,
                reason: StatusReason::from_code(reason),
                source,
                creation: CreationTimestamp {
                    time: DtnTime::from_millis(time),
                    sequence,
                },
                fragment,
            },
        )
}

fn beacon() -> impl Strategy<Value = Beacon> {
    let cla = (
        any::<u64>(),
        any::<u16>(),
        proptest::option::of("[ -~]{0,40}"),
    )
        .prop_map(|(kind, port, address)| ClaEndpoint {
            kind: ClaKind::from_code(kind % 5),
            port,
            address,
        });
    (
        non_null_eid(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(cla, 0..4),
    )
        .prop_map(
            |(node, sequence, period_ms, caps, convergence_layers)| Beacon {
                node: node.node_id(),
                sequence,
                period_ms,
                capabilities: Capabilities(caps),
                convergence_layers,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fragments_survive_the_wire_and_reassemble_in_any_order(
        b in bundle(),
        max_payload in 1usize..700,
        order in any::<u64>(),
    ) {
        // Make the bundle fragmentable: whole, and without the must-not-fragment flag (which an
        // anonymous bundle must keep).
        if b.primary.source.is_null() {
            return Ok(());
        }
        let mut b = b;
        b.primary.fragment = None;
        b.primary.flags = b.primary.flags.with(BundleFlags::MUST_NOT_FRAGMENT | BundleFlags::IS_FRAGMENT, false);
        let mut pieces = b.fragment(max_payload).unwrap();
        prop_assert_eq!(pieces.len(), b.payload.data.len().div_ceil(max_payload).max(1));
        if pieces.len() == 1 {
            prop_assert_eq!(&pieces[0], &b);
            return Ok(());
        }
        // Rotate by a random amount: reassembly must not depend on arrival order.
        let k = (order % pieces.len() as u64) as usize;
        pieces.rotate_left(k);
        let mut decoded = pieces.iter().map(|p| Bundle::decode(p.encode().to_bytes()).unwrap());
        let mut r = Reassembly::new(decoded.next().unwrap()).unwrap();
        for p in decoded {
            prop_assert!(!r.is_complete());
            r.insert(p).unwrap();
        }
        prop_assert_eq!(r.finish().unwrap(), b);
    }

    #[test]
    fn any_cut_of_a_valid_bundle_leaves_nothing_or_a_fragment_the_rest_completes(
        b in bundle(),
        cut in any::<prop::sample::Index>(),
    ) {
        let enc = b.encode();
        let wire = enc.to_bytes();
        let n = cut.index(wire.len());
        let kept = wire::decode_cut_transfer(wire.slice(..n)).map_err(|e| TestCaseError::fail(format!("cut at {n}: {e}")))?;
        let delivered = enc.payload_bytes_within(n);
        match kept {
            None => prop_assert!(delivered == 0 || b.primary.flags.contains(BundleFlags::MUST_NOT_FRAGMENT)),
            Some(k) if k == b => {}
            Some(fragment) => {
                prop_assert_eq!(&fragment.payload.data[..], &b.payload.data[..delivered]);
                if let Some(f) = b.primary.fragment {
                    // A cut fragment is a fragment of the same ADU at the same offset.
                    prop_assert_eq!(fragment.primary.fragment, Some(f));
                    return Ok(());
                }
                let mut r = Reassembly::new(fragment).unwrap();
                if delivered < b.payload.data.len() {
                    r.insert(b.split_at(delivered).unwrap().1).unwrap();
                }
                prop_assert_eq!(r.finish().map_err(|_| TestCaseError::fail("incomplete"))?, b);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_cut_transfer_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = wire::decode_cut_transfer(Bytes::from(bytes));
    }

    #[test]
    fn beacons_round_trip(b in beacon()) {
        prop_assert_eq!(Beacon::decode(&b.encode()).unwrap(), b);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_beacon_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Beacon::decode(&Bytes::from(bytes));
    }

    #[test]
    fn bundles_round_trip(b in bundle()) {
        prop_assert_eq!(b.validate(), Ok(()));
        let encoded = b.encode();
        let parts = encoded.parts();
        // The sizes are counted without encoding; they must be what encoding gives.
        prop_assert_eq!(b.encoded_sizes(), (parts[0].len(), parts[1].len(), parts[2].len()));
        let wire = encoded.to_bytes();
        let back = Bundle::decode(wire.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &b);
        prop_assert_eq!(back.encode().to_bytes(), wire);
    }

    #[test]
    fn eids_round_trip_through_text(e in eid()) {
        let text = e.to_string();
        prop_assert_eq!(text.parse::<Eid>().unwrap(), e);
    }

    #[test]
    fn status_reports_round_trip(r in status_report()) {
        let record = AdminRecord::StatusReport(r);
        let bytes = record.encode();
        prop_assert_eq!(AdminRecord::decode(&bytes).unwrap(), record);
    }

    #[test]
    fn unknown_admin_records_are_kept(record_type in 2u64.., content in proptest::collection::vec((1u64 << 32).., 0..4)) {
        // Content: a CBOR array of unsigned integers written by hand, each needing all 8 bytes
        // (so the 9-byte encoding is the deterministic one).
        let mut cbor = vec![0x80 | content.len() as u8];
        for v in &content {
            cbor.push(0x1b);
            cbor.extend_from_slice(&v.to_be_bytes());
        }
        let record = AdminRecord::Unknown { record_type, content: Bytes::from(cbor) };
        prop_assert_eq!(AdminRecord::decode(&record.encode()).unwrap(), record);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Bundle::decode(Bytes::from(bytes.clone()));
        let _ = AdminRecord::decode(&Bytes::from(bytes));
    }

    #[test]
    fn mutated_bundles_never_panic_and_decode_canonically(
        b in bundle(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut wire = b.encode().to_bytes().to_vec();
        for (at, value) in edits {
            let i = at.index(wire.len());
            wire[i] = value;
        }
        if let Ok(back) = Bundle::decode(Bytes::from(wire)) {
            // Whatever decodes is a valid bundle that re-encodes and decodes to itself.
            let again = Bundle::decode(back.encode().to_bytes()).unwrap();
            prop_assert_eq!(again, back);
        }
    }

    #[test]
    fn truncation_is_always_an_error(b in bundle(), cut in any::<prop::sample::Index>()) {
        let wire = b.encode().to_bytes();
        let n = cut.index(wire.len());
        let err = Bundle::decode(wire.slice(..n)).unwrap_err();
        prop_assert!(matches!(err.kind, DecodeErrorKind::Truncated | DecodeErrorKind::LengthExceedsInput { .. }), "{}", err);
    }
}
