//! Another implementation of RFC 9173, `hardy-bpv7` (0.6), reads what this crate makes: a
//! bundle signed with HMAC-SHA-384 over every scope and encrypted with AES-256-GCM, payload and
//! BIB together, is decrypted and verified there with the same keys, for many payloads.

use bpsec::bib::ShaVariant;
use bpsec::{EncryptRule, IvSource, Key, Pattern, Policy, SCOPE_ALL, SignRule};
use bytes::Bytes;
use hardy_bpv7::bpsec::key::{
    EncAlgorithm, Key as HardyKey, KeyAlgorithm, KeySet, Operation, Type,
};
use hardy_bpv7::bundle::ParsedBundle;
use wire::{Bundle, CreationTimestamp, DtnTime, Eid, PrimaryBlock};

const MAC: [u8; 32] = [0x5a; 32];
const AES: [u8; 32] = [0xc3; 32];

fn hardy_keys() -> KeySet {
    KeySet::new(vec![
        HardyKey {
            key_type: Type::OctetSequence { key: MAC.into() },
            key_algorithm: Some(KeyAlgorithm::HS384),
            operations: Some([Operation::Verify].into_iter().collect()),
            ..HardyKey::default()
        },
        HardyKey {
            key_type: Type::OctetSequence { key: AES.into() },
            key_algorithm: Some(KeyAlgorithm::Direct),
            enc_algorithm: Some(EncAlgorithm::A256GCM),
            operations: Some([Operation::Decrypt].into_iter().collect()),
            ..HardyKey::default()
        },
    ])
}

fn protected(payload: &[u8], sequence: u64, ivs: &mut IvSource) -> Vec<u8> {
    let policy = Policy {
        sign: vec![SignRule {
            destinations: Pattern::parse("*").unwrap(),
            key: Key::new(&MAC),
            sha: ShaVariant::Sha384,
            scope: SCOPE_ALL,
        }],
        encrypt: vec![EncryptRule {
            destinations: Pattern::parse("*").unwrap(),
            key: Key::new(&AES),
            scope: SCOPE_ALL,
        }],
        ..Policy::default()
    };
    let primary = PrimaryBlock::new(
        "ipn:2.1".parse().unwrap(),
        "ipn:1.1".parse().unwrap(),
        CreationTimestamp {
            time: DtnTime::from_millis(800_000_000_000),
            sequence,
        },
        3_600_000,
    );
    let mut b = Bundle::new(primary, Bytes::copy_from_slice(payload));
    let me: Eid = "ipn:1.0".parse().unwrap();
    let done = policy.protect(&mut b, &me, ivs, true).unwrap();
    assert!(done.signed && done.encrypted);
    b.encode().to_bytes().to_vec()
}

#[test]
fn hardy_decrypts_and_verifies_what_ferry_protects() {
    let keys = hardy_keys();
    let mut ivs = IvSource::new([7; 8]);
    for (i, len) in [0usize, 1, 15, 16, 17, 100, 1000, 70_000]
        .into_iter()
        .enumerate()
    {
        let payload: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
        let data = protected(&payload, i as u64, &mut ivs);
        let parsed = ParsedBundle::parse_with_keys(&data, &keys)
            .unwrap_or_else(|e| panic!("hardy parses Ferry's {len}-byte bundle: {e:?}"));
        let plain = parsed
            .bundle
            .block_data(1, &data, &keys)
            .unwrap_or_else(|e| panic!("hardy decrypts the {len}-byte payload: {e:?}"));
        assert_eq!(plain.as_ref(), &payload[..], "payload of {len} bytes");
        assert!(
            parsed.bundle.verify_block(1, &data, &keys).unwrap(),
            "hardy verifies the BIB (it has one)"
        );
        // And a flipped ciphertext byte does not decrypt there either.
        if len > 0 {
            let mut bad = data.clone();
            let at = bad.len() - 6 - len / 2;
            bad[at] ^= 0x40;
            let broken = ParsedBundle::parse_with_keys(&bad, &keys).map(|p| {
                p.bundle
                    .block_data(1, &bad, &keys)
                    .map(|d| d.as_ref().to_vec())
            });
            assert!(
                !matches!(broken, Ok(Ok(ref d)) if d == &payload),
                "an altered ciphertext of {len} bytes decrypted to the original"
            );
        }
    }
}
