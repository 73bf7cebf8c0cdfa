//! The `bpsec_receive` fuzz target's seed corpus (RFC 9173's abstract security blocks),
//! replayed in every test run (the fuzzer itself needs nightly): each seed decodes, re-encodes
//! to its own bytes, and neither it nor any of its prefixes panics a receiving node.

// Reading the checked-in corpus files is this test's job.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

use bpsec::{AbstractSecurityBlock, DecryptRule, Key, Pattern, Policy, VerifyRule};
use bytes::Bytes;
use wire::{Bundle, CreationTimestamp, DtnTime, ExtensionBlock, ExtensionData, PrimaryBlock};

fn seeds() -> Vec<(String, Bytes)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/bpsec_receive");
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
fn bpsec_seeds_decode_reencode_and_never_panic_a_receiver() {
    let seeds = seeds();
    assert!(
        seeds.len() >= 6,
        "the seed corpus is missing ({} seeds)",
        seeds.len()
    );
    let policy = Policy {
        verify: vec![VerifyRule {
            sources: Pattern::parse("*").unwrap(),
            key: Key::new(&[0x1a; 16]),
            required: false,
        }],
        decrypt: vec![DecryptRule {
            sources: Pattern::parse("*").unwrap(),
            key: Key::new(&[0x71; 16]),
            required: false,
        }],
        ..Policy::default()
    };
    for (name, data) in seeds {
        let asb = AbstractSecurityBlock::decode(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(asb.encode(), data.to_vec(), "{name} re-encodes to itself");
        for n in 0..=data.len() {
            for block_type in [bpsec::BLOCK_BIB, bpsec::BLOCK_BCB] {
                let primary = PrimaryBlock::new(
                    "ipn:1.2".parse().unwrap(),
                    "ipn:2.1".parse().unwrap(),
                    CreationTimestamp {
                        time: DtnTime::from_millis(800_000_000_000),
                        sequence: 1,
                    },
                    60_000,
                );
                let mut b = Bundle::new(primary, Bytes::from_static(b"payload"));
                b.extensions.push(ExtensionBlock::new(
                    2,
                    ExtensionData::Unknown {
                        block_type,
                        data: data.slice(..n),
                    },
                ));
                // The keys are not the seeds' (and the targets' numbers differ): refused, or
                // left alone, never a panic.
                let _ = policy.receive(&mut b, &"ipn:1.0".parse().unwrap(), true);
            }
        }
    }
}
