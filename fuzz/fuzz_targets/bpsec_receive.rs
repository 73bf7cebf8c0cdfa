//! Feeds arbitrary bytes to BPSec: as an abstract security block (`bpsec::AbstractSecurityBlock`),
//! and as the data of a BIB and of a BCB in a bundle that a node with keys for every source
//! receives as its destination (`bpsec::Policy::receive`): what a stranger's security blocks
//! reach.
//!
//! Nothing may panic. A block that decodes re-encodes to one that decodes to the same block
//! (the "parameters present" flag follows the parameters). A bundle that passes keeps its
//! payload's length (a BCB's ciphertext is as long as its plaintext).

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use bpsec::{AbstractSecurityBlock, DecryptRule, Key, Pattern, Policy, VerifyRule};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::{
    BlockFlags, Bundle, CreationTimestamp, DtnTime, Eid, ExtensionBlock, ExtensionData,
    PrimaryBlock,
};

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    if let Ok(asb) = AbstractSecurityBlock::decode(&data) {
        let again = AbstractSecurityBlock::decode(&Bytes::from(asb.encode()))
            .unwrap_or_else(|e| panic!("the encoding of {asb:?} does not decode: {e}"));
        let mut expected = asb.clone();
        expected.context_flags = if asb.parameters.is_empty() {
            asb.context_flags & !1
        } else {
            asb.context_flags | 1
        };
        assert_eq!(again, expected);
    }
    let me: Eid = "ipn:1.0".parse().unwrap();
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
        let mut b = Bundle::new(
            primary,
            Bytes::from_static(b"Ready to generate a 32-byte payload"),
        );
        b.extensions.push(ExtensionBlock {
            flags: BlockFlags(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT),
            ..ExtensionBlock::new(
                2,
                ExtensionData::Unknown {
                    block_type,
                    data: data.clone(),
                },
            )
        });
        let len = b.payload.data.len();
        if policy.receive(&mut b, &me, true).is_ok() {
            assert_eq!(b.payload.data.len(), len);
        }
    }
});
