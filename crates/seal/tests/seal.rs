//! The envelope from outside: round trips, forgeries, truncations, the fixed format.

use std::sync::LazyLock;

use proptest::prelude::*;
use seal::{
    ENCRYPTED_OVERHEAD, Identity, OpenError, Opened, PublicKey, SIGNED_OVERHEAD, sealed_len,
};

/// RFC 8032 §7.1 TEST 1.
const RFC_SECRET: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const RFC_PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// Made once: each key generation is a scalar multiplication.
static ALICE: LazyLock<Identity> =
    LazyLock::new(|| Identity::from_secret(unhex(RFC_SECRET).try_into().unwrap()));
static BOB: LazyLock<Identity> = LazyLock::new(|| Identity::from_secret([0xb0; 32]));
static MALLORY: LazyLock<Identity> = LazyLock::new(|| Identity::from_secret([0x66; 32]));

fn alice() -> &'static Identity {
    &ALICE
}

fn bob() -> &'static Identity {
    &BOB
}

fn mallory() -> &'static Identity {
    &MALLORY
}

#[test]
fn rfc8032_secret_gives_rfc8032_public_key() {
    let id = alice();
    assert_eq!(id.public().to_string(), RFC_PUBLIC);
    assert_eq!(id.public(), RFC_PUBLIC.parse::<PublicKey>().unwrap());
    assert_eq!(hex(&*id.secret_bytes()), RFC_SECRET);
}

#[test]
fn signed_round_trip() {
    let (a, b) = (alice(), bob());
    for body in [&b""[..], b"x", &[0u8; 1000][..]] {
        let sealed = a.seal(body, None, [0; 32]).unwrap();
        assert_eq!(sealed.len(), body.len() + SIGNED_OVERHEAD);
        let expected = Opened {
            sender: a.public(),
            encrypted: false,
            body: body.to_vec(),
        };
        // Anyone opens a signed-only envelope, the sender included.
        assert_eq!(b.open(&sealed), Ok(expected.clone()));
        assert_eq!(a.open(&sealed), Ok(expected));
        let signed = seal::verify(&sealed).unwrap();
        assert_eq!(signed.sender, a.public());
        assert_eq!(signed.recipient, None);
        assert!(!signed.encrypted());
        assert_eq!(signed.content, body);
        assert_eq!(seal::peek_sender(&sealed), Some(a.public()));
    }
}

#[test]
fn encrypted_round_trip() {
    let (a, b) = (alice(), bob());
    for body in [&b""[..], b"x", &[0u8; 1000][..]] {
        let sealed = a.seal(body, Some(&b.public()), [7; 32]).unwrap();
        assert_eq!(sealed.len(), body.len() + ENCRYPTED_OVERHEAD);
        assert_eq!(
            b.open(&sealed),
            Ok(Opened {
                sender: a.public(),
                encrypted: true,
                body: body.to_vec(),
            })
        );
        // A relay sees who and to whom, not what.
        let signed = seal::verify(&sealed).unwrap();
        assert_eq!(signed.sender, a.public());
        assert_eq!(signed.recipient, Some(b.public()));
        assert!(signed.encrypted());
        assert_eq!(signed.content.len(), body.len() + 16);
        if body.len() > 8 {
            assert!(
                !sealed.windows(body.len()).any(|w| w == body),
                "the body shows in clear"
            );
        }
    }
    // To oneself works too.
    let sealed = a.seal(b"note", Some(&a.public()), [1; 32]).unwrap();
    assert_eq!(a.open(&sealed).unwrap().body, b"note");
}

#[test]
fn encrypted_to_another_node_is_not_for_us() {
    let (a, b, c) = (alice(), bob(), mallory());
    let sealed = a.seal(b"for bob", Some(&b.public()), [0; 32]).unwrap();
    assert_eq!(c.open(&sealed), Err(OpenError::NotForUs));
    assert_eq!(a.open(&sealed), Err(OpenError::NotForUs));
}

/// Mallory takes Alice's envelope to Bob, strips the signature, puts her own key in the sender
/// field and signs it: the signature is good, but the ciphertext was made with Alice's key in the
/// associated data, so Bob cannot be made to believe Mallory wrote it.
#[test]
fn ciphertext_re_signed_by_a_third_party_does_not_decrypt() {
    let (a, b, m) = (alice(), bob(), mallory());
    let sealed = a.seal(b"secret plans", Some(&b.public()), [3; 32]).unwrap();
    let mut forged = sealed[..sealed.len() - 64].to_vec();
    forged[2..34].copy_from_slice(&m.public().0);
    let signing = ed25519_dalek::SigningKey::from_bytes(&m.secret_bytes());
    let signature = ed25519_dalek::Signer::sign(&signing, &forged).to_bytes();
    forged.extend_from_slice(&signature);

    let signed = seal::verify(&forged).expect("Mallory's signature is good");
    assert_eq!(signed.sender, m.public());
    assert_eq!(b.open(&forged), Err(OpenError::Decrypt));
    // The untouched envelope still opens.
    assert_eq!(b.open(&sealed).unwrap().sender, a.public());
}

#[test]
fn other_versions_are_refused() {
    let (a, b) = (alice(), bob());
    for to in [None, Some(&b.public())] {
        let sealed = a.seal(b"hello", to, [0; 32]).unwrap();
        for version in [0u8, 2, 0x66, 0xff] {
            let mut other = sealed.clone();
            other[0] = version;
            assert_eq!(b.open(&other), Err(OpenError::Version(version)));
            assert_eq!(seal::verify(&other), Err(OpenError::Version(version)));
            assert_eq!(seal::peek_sender(&other), None);
        }
    }
    assert_eq!(b.open(&[2]), Err(OpenError::Version(2)));
}

#[test]
fn unknown_flags_are_refused() {
    let (a, b) = (alice(), bob());
    let sealed = a.seal(b"hello", None, [0; 32]).unwrap();
    for flags in [0x02u8, 0x80, 0x07, 0xff] {
        let mut other = sealed.clone();
        other[1] = flags;
        assert_eq!(b.open(&other), Err(OpenError::Malformed("unknown flags")));
    }
    // 0x03 is a pairwise envelope's: a signed one relabelled so is refused all the same.
    let mut relabelled = sealed.clone();
    relabelled[1] = 0x03;
    assert!(b.open(&relabelled).is_err());
    assert!(seal::verify(&relabelled).is_err());
}

#[test]
fn every_truncation_and_extension_is_refused() {
    let (a, b) = (alice(), bob());
    for to in [None, Some(&b.public())] {
        let sealed = a.seal(b"a body of some length", to, [5; 32]).unwrap();
        for len in 0..sealed.len() {
            assert!(b.open(&sealed[..len]).is_err(), "cut at {len} opened");
            assert!(
                seal::verify(&sealed[..len]).is_err(),
                "cut at {len} verified"
            );
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert_eq!(b.open(&longer), Err(OpenError::BadSignature));
        // Dropping bytes from the front is no better.
        assert!(b.open(&sealed[1..]).is_err());
    }
}

/// Every bit of a small envelope of each kind, one at a time (the proptest below does the same
/// at random positions of random envelopes).
#[test]
fn every_single_bit_flip_is_refused() {
    let (a, b) = (alice(), bob());
    for to in [None, Some(&b.public())] {
        let sealed = a.seal(b"ferry", to, [9; 32]).unwrap();
        for i in 0..sealed.len() * 8 {
            let mut bad = sealed.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(b.open(&bad).is_err(), "bit {i} flipped, still opens");
            assert!(
                seal::verify(&bad).is_err(),
                "bit {i} flipped, still verifies"
            );
        }
    }
}

#[test]
fn a_sender_key_that_is_no_key_is_refused() {
    let (a, b) = (alice(), bob());
    let mut sealed = a.seal(b"hello", None, [0; 32]).unwrap();
    sealed[2..34].copy_from_slice(&[0; 32]);
    assert!(matches!(b.open(&sealed), Err(OpenError::Malformed(_))));
    // peek_sender does not check.
    assert_eq!(seal::peek_sender(&sealed), Some(PublicKey([0; 32])));
}

#[test]
fn sealed_len_matches() {
    assert_eq!(sealed_len(0, false), 98);
    assert_eq!(sealed_len(0, true), 178);
    assert_eq!(sealed_len(8192, true), 8192 + 178);
}

fn some_envelope() -> impl Strategy<Value = (Vec<u8>, bool)> {
    (
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
        any::<[u8; 32]>(),
    )
        .prop_map(|(body, encrypted, entropy)| {
            let to = bob().public();
            let sealed = alice()
                .seal(&body, encrypted.then_some(&to), entropy)
                .unwrap();
            (sealed, encrypted)
        })
}

proptest! {
    // 256 cases (of 4 flips each): quick because the workspace optimises the crypto crates even
    // in test builds.
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any one bit flipped anywhere makes the envelope fail to open and to verify.
    #[test]
    fn a_flipped_bit_anywhere_is_refused(
        (sealed, _) in some_envelope(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0..8u8), 4),
    ) {
        for (position, bit) in flips {
            let mut bad = sealed.clone();
            let i = position.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(bob().open(&bad).is_err(), "bit {} of byte {} flipped, still opens", bit, i);
            prop_assert!(seal::verify(&bad).is_err(), "bit {} of byte {} flipped, still verifies", bit, i);
        }
    }

    /// Random bytes never panic, and (almost surely) never open.
    #[test]
    fn random_bytes_are_refused_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        prop_assert!(bob().open(&bytes).is_err());
        prop_assert!(seal::verify(&bytes).is_err());
        let _ = seal::peek_sender(&bytes);
    }

    /// The same with a valid-looking start (version 1, either flag), so the parser gets past
    /// the first checks.
    #[test]
    fn random_bytes_after_a_good_prefix_are_refused_without_panic(
        flags in 0..2u8,
        rest in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = vec![1, flags];
        bytes.extend_from_slice(&rest);
        prop_assert!(bob().open(&bytes).is_err());
        prop_assert!(seal::verify(&bytes).is_err());
        prop_assert_eq!(seal::peek_sender(&bytes).is_some(), bytes.len() >= seal::sealed_len(0, flags == 1));
    }

    #[test]
    fn round_trips((sealed, encrypted) in some_envelope()) {
        let opened = bob().open(&sealed).unwrap();
        prop_assert_eq!(opened.encrypted, encrypted);
        prop_assert_eq!(opened.sender, alice().public());
    }
}
