//! What an attacker can do to security blocks and what they protect: every bit flip of a
//! signed and of an encrypted bundle refused, wrong keys refused, truncated and random abstract
//! security blocks refused without a panic; round trips of the block encoding, of sign/verify
//! and of encrypt/decrypt through the wire; the policy at source, relay and destination.

use bpsec::bcb::{self, EncryptSpec};
use bpsec::bib::{self, ShaVariant, SignSpec};
use bpsec::{
    AbstractSecurityBlock, DecryptRule, EncryptRule, IvSource, Key, Pattern, Policy, Refused,
    SCOPE_ALL, SecurityError, SignRule, VerifyRule,
};
use bytes::Bytes;
use proptest::prelude::*;
use wire::{BlockFlags, Bundle, CreationTimestamp, DtnTime, Eid, PrimaryBlock};

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn plain(payload: &[u8]) -> Bundle {
    let primary = PrimaryBlock::new(
        eid("dtn://b/inbox"),
        eid("dtn://a/app"),
        CreationTimestamp {
            time: DtnTime::from_millis(800_000_000_000),
            sequence: 7,
        },
        3_600_000,
    );
    Bundle::new(primary, Bytes::copy_from_slice(payload))
}

fn sign_spec<'a>(source: &'a Eid, key: &'a Key, number: u64) -> SignSpec<'a> {
    SignSpec {
        block_number: number,
        flags: BlockFlags::default(),
        source,
        sha: ShaVariant::Sha256,
        scope: SCOPE_ALL,
        key,
        wrap_under: None,
    }
}

fn encrypt_spec<'a>(source: &'a Eid, key: &'a Key, number: u64) -> EncryptSpec<'a> {
    EncryptSpec {
        block_number: number,
        flags: BlockFlags::default(),
        source,
        iv: [9; 12],
        scope: SCOPE_ALL,
        key,
        wrap_under: None,
    }
}

fn signed(payload: &[u8], key: &Key) -> Bundle {
    let mut b = plain(payload);
    let src = eid("dtn://a/");
    let block = bib::sign(&mut b, &[0, 1], &sign_spec(&src, key, 2)).unwrap();
    b.extensions.insert(0, block);
    b
}

fn policy_at(key: &Key, required: bool) -> Policy {
    Policy {
        verify: vec![VerifyRule {
            sources: Pattern::parse("dtn://a/*").unwrap(),
            key: key.clone(),
            required,
        }],
        decrypt: vec![DecryptRule {
            sources: Pattern::parse("dtn://a/*").unwrap(),
            key: key.clone(),
            required,
        }],
        ..Policy::default()
    }
}

/// Decodes `wire` and runs the destination's policy on it: `Some(payload)` if it would be
/// delivered.
fn accepted(wire: Vec<u8>, policy: &Policy) -> Option<Bytes> {
    let mut b = Bundle::decode(Bytes::from(wire)).ok()?;
    policy.receive(&mut b, &eid("dtn://b/"), true).ok()?;
    Some(b.payload.data)
}

#[test]
fn every_bit_flip_of_a_signed_bundle_is_refused_or_harmless() {
    let key = Key::new(&[0x42; 32]);
    let original = signed(b"pay me 100", &key);
    let wire = original.encode().to_bytes().to_vec();
    let policy = Policy {
        decrypt: vec![],
        ..policy_at(&key, true)
    };
    assert_eq!(
        accepted(wire.clone(), &policy).as_deref(),
        Some(&b"pay me 100"[..])
    );
    let bib_data = original.extensions[0].data.content_bytes();
    let bib_at = wire
        .windows(bib_data.len())
        .position(|w| w == &bib_data[..])
        .unwrap();
    let mut harmless = 0;
    for i in 0..wire.len() {
        for bit in 0..8 {
            let mut m = wire.clone();
            m[i] ^= 1 << bit;
            if let Some(payload) = accepted(m.clone(), &policy) {
                // What the BIB covers (primary block, payload, both headers) never changes
                // unnoticed; a flip may pass only where nothing is covered: the bits of the
                // BIB's own context flags that RFC 9172 leaves reserved.
                assert_eq!(&payload[..], b"pay me 100", "flip at byte {i} bit {bit}");
                let got = Bundle::decode(Bytes::from(m)).unwrap();
                assert_eq!(got.primary, original.primary);
                assert!(
                    (bib_at..bib_at + bib_data.len()).contains(&i),
                    "flip at {i}.{bit}"
                );
                harmless += 1;
            }
        }
    }
    assert!(harmless <= 8, "{harmless} flips passed");
}

#[test]
fn every_bit_flip_of_an_encrypted_payload_is_refused_or_harmless() {
    let key = Key::new(&[0x17; 16]);
    let mut b = plain(b"secret plans");
    let src = eid("dtn://a/");
    let block = bcb::encrypt(&mut b, &[1], &encrypt_spec(&src, &key, 2)).unwrap();
    b.extensions.insert(0, block);
    assert!(!b.payload.data.windows(6).any(|w| w == b"secret"));
    let wire = b.encode().to_bytes().to_vec();
    // Encryption required: a BCB retyped or removed on the way is noticed too.
    let policy = Policy {
        verify: vec![],
        ..policy_at(&key, true)
    };
    assert_eq!(
        accepted(wire.clone(), &policy).as_deref(),
        Some(&b"secret plans"[..])
    );
    for i in 0..wire.len() {
        for bit in 0..8 {
            let mut m = wire.clone();
            m[i] ^= 1 << bit;
            if let Some(p) = accepted(m, &policy) {
                assert_eq!(
                    &p[..],
                    b"secret plans",
                    "flip at {i}.{bit} altered the plaintext"
                );
            }
        }
    }
}

#[test]
fn wrong_keys_are_refused() {
    let key = Key::new(&[1; 32]);
    let other = Key::new(&[2; 32]);
    let b = signed(b"x", &key);
    assert!(matches!(
        bib::verify(&b, 2, &other),
        Err(SecurityError::IntegrityFailed {
            block: 2,
            target: 0
        })
    ));
    let mut e = plain(b"y");
    let src = eid("dtn://a/");
    let block = bcb::encrypt(&mut e, &[1], &encrypt_spec(&src, &key, 2)).unwrap();
    e.extensions.insert(0, block);
    let before = e.clone();
    assert!(matches!(
        bcb::decrypt(&mut e, 2, &other),
        Err(SecurityError::DecryptionFailed {
            block: 2,
            target: 1
        })
    ));
    assert_eq!(e, before, "a failed decryption changes nothing");
    // A 16-byte key where the block says A256GCM.
    assert!(matches!(
        bcb::decrypt(&mut e, 2, &Key::new(&[1; 16])),
        Err(SecurityError::BadKey { .. })
    ));
    // Key wrap: the wrong key-encryption key does not unwrap.
    let wrapped = bpsec::wrap_key(&key, &Key::new(&[5; 16])).unwrap();
    assert!(bpsec::unwrap_key(&other, &wrapped, 9).is_err());
    assert_eq!(
        bpsec::unwrap_key(&key, &wrapped, 9).unwrap(),
        Key::new(&[5; 16])
    );
}

#[test]
fn truncated_and_extended_blocks_are_refused() {
    let key = Key::new(&[3; 32]);
    let b = signed(b"abc", &key);
    let wire::ExtensionData::Unknown { data, .. } = &b.extensions[0].data else {
        panic!("BIB kept as bytes");
    };
    assert!(AbstractSecurityBlock::decode(data).is_ok());
    for n in 0..data.len() {
        assert!(
            AbstractSecurityBlock::decode(&data.slice(..n)).is_err(),
            "a prefix of {n} bytes decoded"
        );
    }
    let mut longer = data.to_vec();
    longer.push(0);
    assert!(AbstractSecurityBlock::decode(&Bytes::from(longer)).is_err());
}

#[test]
fn hostile_counts_are_refused_before_allocation() {
    // 2^32 targets declared.
    let huge = Bytes::from_static(&[0x9a, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert!(AbstractSecurityBlock::decode(&huge).is_err());
    // 65 targets, more than the bound, all present.
    let mut many = vec![0x98, 65];
    many.extend(2..67u8);
    assert!(matches!(
        AbstractSecurityBlock::decode(&Bytes::from(many)),
        Err(bpsec::AsbError::TooMany { .. })
    ));
    // A target named twice, and no target at all.
    let dup = Bytes::from_static(&[
        0x82, 0x01, 0x01, 0x01, 0x00, 0x82, 0x01, 0x00, 0x82, 0x80, 0x80,
    ]);
    assert!(AbstractSecurityBlock::decode(&dup).is_err());
    let none = Bytes::from_static(&[0x80, 0x01, 0x00, 0x82, 0x01, 0x00, 0x80]);
    assert!(AbstractSecurityBlock::decode(&none).is_err());
}

#[test]
fn rfc_9172_target_rules_are_enforced() {
    let key = Key::new(&[4; 32]);
    let src = eid("dtn://a/");
    let mut b = signed(b"p", &key);
    // RFC 9172 §3.8: a BIB's targets other than the primary block lose their CRC.
    assert_eq!(b.payload.crc_type, wire::CrcType::None);
    assert_eq!(b.primary.crc_type, wire::CrcType::Crc32c);
    // A second BIB on a target that has one; a BIB on a BIB.
    assert!(matches!(
        bib::sign(&mut b, &[1], &sign_spec(&src, &key, 3)),
        Err(SecurityError::Conflict { target: 1, .. })
    ));
    assert!(matches!(
        bib::sign(&mut b, &[2], &sign_spec(&src, &key, 3)),
        Err(SecurityError::BadTarget { target: 2, .. })
    ));
    // A BCB on the primary block, and on the payload without its BIB.
    let mut e = b.clone();
    assert!(matches!(
        bcb::encrypt(&mut e, &[0], &encrypt_spec(&src, &key, 3)),
        Err(SecurityError::BadTarget { target: 0, .. })
    ));
    assert!(matches!(
        bcb::encrypt(&mut e, &[1], &encrypt_spec(&src, &key, 3)),
        Err(SecurityError::Conflict { target: 1, .. })
    ));
    assert_eq!(e, b, "a refused encryption changes nothing");
    // With the BIB it works, and the BCB asks to be replicated in every fragment.
    let block = bcb::encrypt(&mut e, &[2, 1], &encrypt_spec(&src, &key, 3)).unwrap();
    assert!(
        block
            .flags
            .contains(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT)
    );
}

#[test]
fn policy_signs_and_encrypts_for_matching_destinations_only() {
    let hmac = Key::new(&[7; 32]);
    let aes = Key::new(&[8; 32]);
    let sender = Policy {
        sign: vec![SignRule {
            destinations: Pattern::parse("dtn://b/*").unwrap(),
            key: hmac.clone(),
            sha: ShaVariant::Sha384,
            scope: SCOPE_ALL,
        }],
        encrypt: vec![EncryptRule {
            destinations: Pattern::parse("dtn://b/*").unwrap(),
            key: aes.clone(),
            scope: SCOPE_ALL,
        }],
        ..Policy::default()
    };
    let me = eid("dtn://a/");
    let mut ivs = IvSource::new([1; 8]);
    let mut b = plain(b"hello b");
    let done = sender.protect(&mut b, &me, &mut ivs, true).unwrap();
    assert!(done.signed && done.encrypted);
    let wire = b.encode().to_bytes();

    // A relay with no keys carries both blocks untouched.
    let mut relayed = Bundle::decode(wire.clone()).unwrap();
    let r = Policy::default()
        .receive(&mut relayed, &eid("dtn://r/"), true)
        .unwrap();
    assert_eq!((r.verified, r.decrypted), (0, 0));
    assert_eq!(relayed.encode().to_bytes(), wire);

    // The destination with both keys decrypts, then verifies.
    let receiver = Policy {
        verify: vec![VerifyRule {
            sources: Pattern::parse("dtn://a/*").unwrap(),
            key: hmac.clone(),
            required: true,
        }],
        decrypt: vec![DecryptRule {
            sources: Pattern::parse("*").unwrap(),
            key: aes.clone(),
            required: false,
        }],
        ..Policy::default()
    };
    let mut got = Bundle::decode(wire.clone()).unwrap();
    let r = receiver.receive(&mut got, &eid("dtn://b/"), true).unwrap();
    assert_eq!((r.verified, r.decrypted), (1, 1));
    assert_eq!(&got.payload.data[..], b"hello b");

    // Without the AES key the destination refuses it; without a signature, too.
    let mut got = Bundle::decode(wire.clone()).unwrap();
    let no_aes = Policy {
        decrypt: vec![],
        ..receiver.clone()
    };
    assert!(matches!(
        no_aes.receive(&mut got, &eid("dtn://b/"), true),
        Err(Refused::Confidentiality(SecurityError::NoKey { .. }))
    ));
    let mut unsigned = plain(b"forged");
    unsigned.primary.source = eid("dtn://a/app");
    assert_eq!(
        receiver.receive(&mut unsigned, &eid("dtn://b/"), true),
        Err(Refused::MissingIntegrity)
    );

    // Another destination: nothing added. IVs never repeat.
    let mut other = plain(b"x");
    other.primary.destination = eid("dtn://c/inbox");
    assert_eq!(
        sender.protect(&mut other, &me, &mut ivs, true).unwrap(),
        Default::default()
    );
    let mut second = plain(b"hello b");
    sender.protect(&mut second, &me, &mut ivs, true).unwrap();
    assert_ne!(
        second.payload.data, b.payload.data,
        "a new IV, another ciphertext"
    );
}

fn arb_eid() -> impl Strategy<Value = Eid> {
    prop_oneof![
        (0u64..1 << 40, 0u64..1 << 20).prop_map(|(n, s)| Eid::ipn(n, s)),
        "[a-z]{1,8}".prop_map(|n| format!("dtn://{n}/x").parse().unwrap()),
    ]
}

fn arb_item() -> impl Strategy<Value = (u64, Bytes)> {
    (
        any::<u64>(),
        prop_oneof![
            any::<u64>().prop_map(uint_item),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|v| bytes_item(&v)),
        ],
    )
}

/// The shortest encoding of an unsigned integer.
fn uint_item(v: u64) -> Bytes {
    let out = if v < 24 {
        vec![v as u8]
    } else if let Ok(x) = u8::try_from(v) {
        vec![24, x]
    } else if let Ok(x) = u16::try_from(v) {
        [&[25u8][..], &x.to_be_bytes()].concat()
    } else if let Ok(x) = u32::try_from(v) {
        [&[26u8][..], &x.to_be_bytes()].concat()
    } else {
        [&[27u8][..], &v.to_be_bytes()].concat()
    };
    Bytes::from(out)
}

fn bytes_item(v: &[u8]) -> Bytes {
    let mut out = Vec::new();
    if v.len() < 24 {
        out.push(0x40 | v.len() as u8);
    } else {
        out.extend_from_slice(&[0x58, v.len() as u8]);
    }
    out.extend_from_slice(v);
    Bytes::from(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn asb_round_trips(
        targets in proptest::collection::btree_set(any::<u64>(), 1..8),
        context_id in any::<i64>(),
        flags in any::<u64>(),
        source in arb_eid(),
        params in proptest::collection::btree_map(any::<u64>(), arb_item().prop_map(|(_, v)| v), 0..5),
        results_seed in proptest::collection::vec(proptest::collection::vec(arb_item(), 0..3), 8),
    ) {
        let targets: Vec<u64> = targets.into_iter().collect();
        let results: Vec<_> = results_seed.into_iter().take(targets.len()).collect();
        let asb = AbstractSecurityBlock {
            context_flags: if params.is_empty() { flags & !1 } else { flags | 1 },
            targets,
            context_id,
            source,
            parameters: params.into_iter().collect(),
            results,
        };
        let enc = Bytes::from(asb.encode());
        prop_assert_eq!(AbstractSecurityBlock::decode(&enc).unwrap(), asb);
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = AbstractSecurityBlock::decode(&Bytes::from(data));
    }

    #[test]
    fn sign_verify_and_encrypt_decrypt_round_trip_through_the_wire(
        payload in proptest::collection::vec(any::<u8>(), 0..3000),
        hmac_key in proptest::collection::vec(any::<u8>(), 1..80),
        aes_key in prop_oneof![Just(16usize), Just(32usize)]
            .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n)),
        sha in prop_oneof![Just(ShaVariant::Sha256), Just(ShaVariant::Sha384), Just(ShaVariant::Sha512)],
        scope in 0u64..8,
        iv in any::<[u8; 12]>(),
        wrap in any::<bool>(),
    ) {
        let hmac_key = Key::new(&hmac_key);
        let aes_key = Key::new(&aes_key);
        let kek = Key::new(&[0x33; 16]);
        let src = eid("dtn://a/");
        let mut b = plain(&payload);
        let bib_block = bib::sign(&mut b, &[1], &SignSpec { sha, scope, ..sign_spec(&src, &hmac_key, 5) }).unwrap();
        b.extensions.insert(0, bib_block);
        let spec = EncryptSpec {
            iv,
            scope,
            wrap_under: wrap.then_some(&kek),
            ..encrypt_spec(&src, &aes_key, 6)
        };
        let bcb_block = bcb::encrypt(&mut b, &[5, 1], &spec).unwrap();
        b.extensions.insert(0, bcb_block);
        let mut got = Bundle::decode(b.encode().to_bytes()).unwrap();
        let key = if wrap { &kek } else { &aes_key };
        bcb::decrypt(&mut got, 6, key).unwrap();
        prop_assert_eq!(&got.payload.data[..], &payload[..]);
        bib::verify(&got, 5, &hmac_key).unwrap();
    }
}

#[test]
fn a_second_security_block_on_the_same_target_is_refused_on_receipt() {
    let key = Key::new(&[6; 32]);
    // A stranger copies a BIB under other numbers: each copy would cost an HMAC of the payload.
    let mut b = signed(&[1; 4096], &key);
    for n in 10..20 {
        let mut copy = b.extensions[0].clone();
        copy.number = n;
        b.extensions.push(copy);
    }
    let policy = policy_at(&key, false);
    assert!(matches!(
        policy.receive(&mut b, &eid("dtn://r/"), true),
        Err(Refused::Integrity(SecurityError::Conflict { .. }))
    ));
    // Two BCBs over the payload, at the destination.
    let mut e = plain(b"twice");
    let src = eid("dtn://a/");
    let block = bcb::encrypt(&mut e, &[1], &encrypt_spec(&src, &key, 2)).unwrap();
    let mut copy = block.clone();
    copy.number = 3;
    e.extensions.push(block);
    e.extensions.push(copy);
    assert!(matches!(
        policy.receive(&mut e, &eid("dtn://b/"), true),
        Err(Refused::Confidentiality(SecurityError::Conflict { .. }))
    ));
}
