//! The fuzz targets' seed corpora, replayed in every test run (the fuzzers themselves need
//! nightly): every bundle seed is a valid bundle whose re-encoding is stable, and every TCPCLv4
//! seed stream frames into messages that round-trip or ends in an error, never a panic; every
//! dtn7-rs beacon seed decodes and round-trips (those captured from dtnd byte for byte).

// Reading the checked-in corpus files is this test's job.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use wire::ipnd::IpndBeacon;
use wire::tcpcl::{ContactHeader, FrameLimits, Message};
use wire::{AdminRecord, Bundle};

fn seeds(target: &str) -> Vec<(String, Bytes)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut found: Vec<(String, Bytes)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                Bytes::from(std::fs::read(&p).unwrap()),
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn bundle_seeds_decode_and_reencode_stably() {
    let seeds = seeds("bundle_decode");
    assert!(
        seeds.len() >= 10,
        "the bundle seed corpus is missing ({} seeds)",
        seeds.len()
    );
    for (name, bytes) in seeds {
        let bundle = Bundle::decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let wire = bundle.encode().to_bytes();
        let again =
            Bundle::decode(wire.clone()).unwrap_or_else(|e| panic!("{name} re-encoded: {e}"));
        assert_eq!(again, bundle, "{name}");
        assert_eq!(
            again.encode().to_bytes(),
            wire,
            "{name}: re-encoding is not stable"
        );
        if bundle.primary.is_admin_record() {
            let record =
                AdminRecord::decode(&bundle.payload.data).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                AdminRecord::decode(&record.encode()).unwrap(),
                record,
                "{name}"
            );
        }
    }
}

#[test]
fn tcpcl_seeds_frame_and_round_trip() {
    let seeds = seeds("tcpcl_decode");
    assert!(
        seeds.len() >= 10,
        "the TCPCL seed corpus is missing ({} seeds)",
        seeds.len()
    );
    let mut decoded = 0;
    for (name, bytes) in seeds {
        // The first byte configures the fuzz target (see fuzz/fuzz_targets/tcpcl_decode.rs);
        // bit 4 says a contact header comes first.
        let Some((&config, stream)) = bytes.split_first() else {
            continue;
        };
        let mut rx = BytesMut::from(stream);
        if config & 0x10 != 0 && ContactHeader::decode_from(&mut rx).ok().flatten().is_none() {
            continue;
        }
        let limits = FrameLimits {
            max_segment_data: u64::MAX,
            max_extensions_len: u32::MAX,
        };
        while let Ok(Some(message)) = Message::decode_from(&mut rx, limits) {
            let frame = message.to_bytes().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(frame.len(), message.encoded_len(), "{name}");
            assert_eq!(Message::decode(frame).unwrap(), message, "{name}");
            decoded += 1;
        }
    }
    assert!(decoded >= 20, "only {decoded} messages in the TCPCL seeds");
}

#[test]
fn ipnd_seeds_decode_and_round_trip() {
    let seeds = seeds("ipnd_decode");
    assert!(
        seeds.len() >= 4,
        "the IPND seed corpus is missing ({} seeds)",
        seeds.len()
    );
    for (name, bytes) in seeds {
        let beacon = IpndBeacon::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = beacon.encode();
        assert_eq!(IpndBeacon::decode(&again).unwrap(), beacon, "{name}");
        // dtnd's own beacons come back byte for byte (what Ferry writes is what dtnd wrote), and
        // so does the beacon a Ferry node sends (node, TCPCL port, the mark, the period).
        if name.starts_with("seed-dtnd") || name.starts_with("seed-ferry") {
            assert_eq!(again, bytes, "{name}");
        }
    }
}
