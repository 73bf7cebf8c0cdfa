//! Test vectors: fixed identities, entropy and bodies, and the exact envelopes they give.
//!
//! The vectors are the ```` ```vector NAME ```` blocks of `docs/protocol.md` ("Test vectors"),
//! read from the document (`common/vector_blocks.rs`). Each envelope block lists its fields in
//! order; the envelope is their concatenation. Every vector is checked three ways:
//! this crate seals the same bytes from the same inputs, an independent construction from the
//! primitives (what the format's description says, written again here with `blake3`,
//! `curve25519-dalek`, `ed25519-dalek`, `sha2` and `chacha20poly1305`) gives them too, and
//! opening them gives back the body and the sender. If a vector fails, the format changed and
//! deployed nodes would no longer read what this one writes: bump the envelope version instead.

use chacha20poly1305::aead::{AeadInPlace as _, KeyInit as _};
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305};
use curve25519_dalek::MontgomeryPoint;
use curve25519_dalek::edwards::CompressedEdwardsY;
use ed25519_dalek::{Signer as _, SigningKey};
use seal::{Identity, Opened, PublicKey};
use sha2::Digest as _;

#[path = "common/vector_blocks.rs"]
mod vector_blocks;
use vector_blocks::Vectors;

/// An envelope block: its bytes, after checking that its fields are `layout`'s, in order, and
/// as long as it says (`None`: the body's length).
fn envelope(v: &Vectors, name: &str, layout: &[(&str, Option<usize>)], body_len: usize) -> Vec<u8> {
    let expected: Vec<&str> = layout.iter().map(|(f, _)| *f).collect();
    assert_eq!(v.field_names(name), expected, "vector {name}: fields");
    for ((field, value), (_, len)) in v.block(name).iter().zip(layout) {
        assert_eq!(
            value.len(),
            len.unwrap_or(body_len),
            "vector {name}: length of {field}"
        );
    }
    v.bytes(name)
}

const SIGNED_LAYOUT: &[(&str, Option<usize>)] = &[
    ("version", Some(1)),
    ("flags", Some(1)),
    ("sender", Some(32)),
    ("body", None),
    ("signature", Some(64)),
];
const ENCRYPTED_LAYOUT: &[(&str, Option<usize>)] = &[
    ("version", Some(1)),
    ("flags", Some(1)),
    ("sender", Some(32)),
    ("recipient", Some(32)),
    ("ephemeral", Some(32)),
    ("ciphertext", None),
    ("tag", Some(16)),
    ("signature", Some(64)),
];
const PAIRWISE_LAYOUT: &[(&str, Option<usize>)] = &[
    ("version", Some(1)),
    ("flags", Some(1)),
    ("sender", Some(32)),
    ("recipient", Some(32)),
    ("nonce", Some(24)),
    ("ciphertext", None),
    ("tag", Some(16)),
];

/// The bodies the vectors seal, by the name their blocks end in (as the document says).
fn bodies() -> [(&'static str, Vec<u8>); 3] {
    [
        ("empty", Vec::new()),
        ("short", b"ferry".to_vec()),
        // 00 01 02 … ff, four times.
        ("1k", (0..1024).map(|i| (i % 256) as u8).collect()),
    ]
}

/// The independent construction: the envelope format as its description says, from the
/// primitives, sharing no code with the crate.
mod spec {
    use super::*;

    pub(super) const VERSION: u8 = 1;

    /// The X25519 secret of an Ed25519 seed: the first half of SHA-512(seed) (RFC 8032 §5.1.5;
    /// X25519 clamps it).
    pub(super) fn x25519_secret(seed: &[u8; 32]) -> [u8; 32] {
        sha2::Sha512::digest(seed)[..32].try_into().unwrap()
    }

    /// An Ed25519 public key in Montgomery form: its X25519 public key.
    pub(super) fn montgomery(public: &[u8; 32]) -> MontgomeryPoint {
        CompressedEdwardsY(*public)
            .decompress()
            .expect("a valid key")
            .to_montgomery()
    }

    pub(super) fn sign(seed: &[u8; 32], message: &[u8]) -> [u8; 64] {
        SigningKey::from_bytes(seed).sign(message).to_bytes()
    }

    pub(super) fn public(seed: &[u8; 32]) -> [u8; 32] {
        SigningKey::from_bytes(seed).verifying_key().to_bytes()
    }

    pub(super) fn signed(seed: &[u8; 32], body: &[u8]) -> Vec<u8> {
        let mut out = vec![VERSION, 0x00];
        out.extend_from_slice(&public(seed));
        out.extend_from_slice(body);
        let signature = sign(seed, &out);
        out.extend_from_slice(&signature);
        out
    }

    /// What an encrypted envelope derives on the way: the ephemeral secret, the ephemeral public
    /// key, the shared secret and the ChaCha20-Poly1305 key.
    pub(super) struct Derived {
        pub(super) ephemeral_secret: [u8; 32],
        pub(super) ephemeral: [u8; 32],
        pub(super) shared: [u8; 32],
        pub(super) key: [u8; 32],
    }

    pub(super) fn encrypted_derivation(
        seed: &[u8; 32],
        recipient: &[u8; 32],
        entropy: &[u8; 32],
        body: &[u8],
    ) -> Derived {
        let k = blake3::derive_key("ferry-seal v1 ephemeral secret key", seed);
        let mut input = entropy.to_vec();
        input.extend_from_slice(recipient);
        input.extend_from_slice(body);
        let ephemeral_secret = *blake3::keyed_hash(&k, &input).as_bytes();
        let ephemeral = MontgomeryPoint::mul_base_clamped(ephemeral_secret).to_bytes();
        let shared = montgomery(recipient)
            .mul_clamped(ephemeral_secret)
            .to_bytes();
        let mut material = shared.to_vec();
        material.extend_from_slice(&ephemeral);
        material.extend_from_slice(recipient);
        let key = blake3::derive_key("ferry-seal v1 envelope encryption key", &material);
        Derived {
            ephemeral_secret,
            ephemeral,
            shared,
            key,
        }
    }

    pub(super) fn encrypted(
        seed: &[u8; 32],
        recipient: &[u8; 32],
        entropy: &[u8; 32],
        body: &[u8],
    ) -> Vec<u8> {
        let d = encrypted_derivation(seed, recipient, entropy, body);
        let mut header = vec![VERSION, 0x01];
        header.extend_from_slice(&public(seed));
        header.extend_from_slice(recipient);
        header.extend_from_slice(&d.ephemeral);
        let mut ciphertext = body.to_vec();
        let tag = ChaCha20Poly1305::new(&d.key.into())
            .encrypt_in_place_detached(&[0u8; 12].into(), &header, &mut ciphertext)
            .unwrap();
        let mut out = header;
        out.extend_from_slice(&ciphertext);
        out.extend_from_slice(&tag);
        let signature = sign(seed, &out);
        out.extend_from_slice(&signature);
        out
    }

    /// The static-static secret and the pairwise key of two nodes.
    pub(super) fn pair_key(seed: &[u8; 32], peer: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
        let shared = montgomery(peer).mul_clamped(x25519_secret(seed)).to_bytes();
        let me = public(seed);
        let (lo, hi) = if me <= *peer {
            (me, *peer)
        } else {
            (*peer, me)
        };
        let mut material = shared.to_vec();
        material.extend_from_slice(&lo);
        material.extend_from_slice(&hi);
        (
            shared,
            blake3::derive_key("ferry-seal v1 pairwise key", &material),
        )
    }

    pub(super) fn pairwise_nonce(
        seed: &[u8; 32],
        peer: &[u8; 32],
        entropy: &[u8; 32],
        body: &[u8],
    ) -> [u8; 24] {
        let k = blake3::derive_key("ferry-seal v1 pairwise nonce key", seed);
        let mut input = entropy.to_vec();
        input.extend_from_slice(peer);
        input.extend_from_slice(body);
        blake3::keyed_hash(&k, &input).as_bytes()[..24]
            .try_into()
            .unwrap()
    }

    pub(super) fn pairwise(
        seed: &[u8; 32],
        peer: &[u8; 32],
        entropy: &[u8; 32],
        body: &[u8],
    ) -> Vec<u8> {
        let (_, key) = pair_key(seed, peer);
        let nonce = pairwise_nonce(seed, peer, entropy, body);
        let mut header = vec![VERSION, 0x03];
        header.extend_from_slice(&public(seed));
        header.extend_from_slice(peer);
        header.extend_from_slice(&nonce);
        let mut ciphertext = body.to_vec();
        let tag = XChaCha20Poly1305::new(&key.into())
            .encrypt_in_place_detached(&nonce.into(), &header, &mut ciphertext)
            .unwrap();
        let mut out = header;
        out.extend_from_slice(&ciphertext);
        out.extend_from_slice(&tag);
        out
    }

    /// What a detached signature signs.
    pub(super) fn detached_message(context: &str, message: &[u8]) -> Vec<u8> {
        let mut signed = b"ferry-seal detached v1\0".to_vec();
        signed.extend_from_slice(blake3::hash(context.as_bytes()).as_bytes());
        signed.extend_from_slice(message);
        signed
    }
}

/// Alice (sender) and Bob (recipient) from the `keys` block: seeds, and the public keys they
/// must give.
struct Keys {
    alice_seed: [u8; 32],
    bob_seed: [u8; 32],
    alice: Identity,
    bob: Identity,
    entropy: [u8; 32],
}

fn keys(v: &Vectors) -> Keys {
    let alice_seed = v.array::<32>("keys", "alice-seed");
    let bob_seed = v.array::<32>("keys", "bob-seed");
    Keys {
        alice: Identity::from_secret(alice_seed),
        bob: Identity::from_secret(bob_seed),
        alice_seed,
        bob_seed,
        entropy: v.array::<32>("keys", "entropy"),
    }
}

/// Every block of the document that is not rpc's (`rpc-*`, `control-*`: rpc's
/// `tests/protocol.rs` checks those) is one a test below checks: none is printed and left
/// unchecked.
#[test]
fn every_block_is_checked() {
    let v = Vectors::load();
    let mut known = vec![
        "keys".to_string(),
        "encrypted-short-derivation".to_string(),
        "pairwise-key".to_string(),
        "detached".to_string(),
    ];
    for kind in ["signed", "encrypted", "pairwise"] {
        known.extend(bodies().map(|(body, _)| format!("{kind}-{body}")));
    }
    known.sort();
    let found: Vec<&str> = v
        .names()
        .filter(|n| !n.starts_with("rpc-") && !n.starts_with("control-"))
        .collect();
    assert_eq!(found, known);
}

#[test]
fn identities_give_the_documented_keys() {
    let v = Vectors::load();
    let k = keys(&v);
    for (who, id, seed) in [
        ("alice", &k.alice, k.alice_seed),
        ("bob", &k.bob, k.bob_seed),
    ] {
        let public = v.array::<32>("keys", &format!("{who}-public"));
        assert_eq!(id.public(), PublicKey(public), "{who}'s public key");
        assert_eq!(spec::public(&seed), public, "{who}'s public key (spec)");
        let x25519 = v.array::<32>("keys", &format!("{who}-x25519"));
        assert_eq!(
            spec::montgomery(&public).to_bytes(),
            x25519,
            "{who}'s X25519 key"
        );
        // The X25519 secret belongs to that public key.
        assert_eq!(
            MontgomeryPoint::mul_base_clamped(spec::x25519_secret(&seed)).to_bytes(),
            x25519,
            "{who}'s X25519 secret"
        );
    }
}

#[test]
fn signed_envelopes() {
    let v = Vectors::load();
    let k = keys(&v);
    for (name, body) in bodies() {
        let block = format!("signed-{name}");
        let expected = envelope(&v, &block, SIGNED_LAYOUT, body.len());
        assert_eq!(
            hex::encode(k.alice.seal(&body, None, k.entropy).unwrap()),
            hex::encode(&expected),
            "{block}: sealed"
        );
        assert_eq!(
            hex::encode(spec::signed(&k.alice_seed, &body)),
            hex::encode(&expected),
            "{block}: as specified"
        );
        let opened = Opened {
            sender: k.alice.public(),
            encrypted: false,
            body: body.clone(),
        };
        assert_eq!(k.bob.open(&expected), Ok(opened.clone()), "{block}");
        assert_eq!(k.alice.open(&expected), Ok(opened), "{block}");
        let signed = seal::verify(&expected).unwrap();
        assert_eq!(
            (signed.sender, signed.recipient, signed.content),
            (k.alice.public(), None, &body[..])
        );
    }
}

#[test]
fn encrypted_envelopes() {
    let v = Vectors::load();
    let k = keys(&v);
    for (name, body) in bodies() {
        let block = format!("encrypted-{name}");
        let expected = envelope(&v, &block, ENCRYPTED_LAYOUT, body.len());
        assert_eq!(
            hex::encode(
                k.alice
                    .seal(&body, Some(&k.bob.public()), k.entropy)
                    .unwrap()
            ),
            hex::encode(&expected),
            "{block}: sealed"
        );
        assert_eq!(
            hex::encode(spec::encrypted(
                &k.alice_seed,
                &k.bob.public().0,
                &k.entropy,
                &body
            )),
            hex::encode(&expected),
            "{block}: as specified"
        );
        assert_eq!(
            k.bob.open(&expected),
            Ok(Opened {
                sender: k.alice.public(),
                encrypted: true,
                body: body.clone(),
            }),
            "{block}"
        );
        assert_eq!(
            k.alice.open(&expected),
            Err(seal::OpenError::NotForUs),
            "{block}"
        );
        let signed = seal::verify(&expected).unwrap();
        assert_eq!(
            (signed.sender, signed.recipient, signed.content.len()),
            (k.alice.public(), Some(k.bob.public()), body.len() + 16)
        );
    }
}

/// The values an encrypted envelope derives, for an implementer to check theirs step by step;
/// Bob's side (his X25519 secret with the ephemeral key) reaches the same shared secret.
#[test]
fn encrypted_envelope_derivation() {
    let v = Vectors::load();
    let k = keys(&v);
    let d = spec::encrypted_derivation(&k.alice_seed, &k.bob.public().0, &k.entropy, b"ferry");
    let block = "encrypted-short-derivation";
    assert_eq!(d.ephemeral_secret, v.array::<32>(block, "ephemeral-secret"));
    assert_eq!(d.shared, v.array::<32>(block, "shared"));
    assert_eq!(d.key, v.array::<32>(block, "key"));
    assert_eq!(d.ephemeral, v.array::<32>("encrypted-short", "ephemeral"));
    let bobs = MontgomeryPoint(d.ephemeral)
        .mul_clamped(spec::x25519_secret(&k.bob_seed))
        .to_bytes();
    assert_eq!(bobs, d.shared);
}

#[test]
fn pairwise_envelopes() {
    let v = Vectors::load();
    let k = keys(&v);
    let ab = k.alice.pair_key(&k.bob.public()).unwrap();
    let ba = k.bob.pair_key(&k.alice.public()).unwrap();
    for (name, body) in bodies() {
        let block = format!("pairwise-{name}");
        let expected = envelope(&v, &block, PAIRWISE_LAYOUT, body.len());
        assert_eq!(
            hex::encode(ab.seal(&body, k.entropy)),
            hex::encode(&expected),
            "{block}: sealed"
        );
        assert_eq!(
            hex::encode(spec::pairwise(
                &k.alice_seed,
                &k.bob.public().0,
                &k.entropy,
                &body
            )),
            hex::encode(&expected),
            "{block}: as specified"
        );
        let opened = Ok(Opened {
            sender: k.alice.public(),
            encrypted: true,
            body: body.clone(),
        });
        assert_eq!(ba.open(&expected), opened, "{block}");
        assert_eq!(k.bob.open(&expected), opened, "{block}");
        assert_eq!(seal::pairwise_sender(&expected), Some(k.alice.public()));
        // No signature: nobody but Bob can check it.
        assert!(seal::verify(&expected).is_err(), "{block}");
    }
}

/// The pair's keys: both sides compute the same static-static secret and key.
#[test]
fn pairwise_key_derivation() {
    let v = Vectors::load();
    let k = keys(&v);
    let (shared, key) = spec::pair_key(&k.alice_seed, &k.bob.public().0);
    assert_eq!(
        spec::pair_key(&k.bob_seed, &k.alice.public().0),
        (shared, key)
    );
    assert_eq!(shared, v.array::<32>("pairwise-key", "shared"));
    assert_eq!(key, v.array::<32>("pairwise-key", "key"));
    let nonce = spec::pairwise_nonce(&k.alice_seed, &k.bob.public().0, &k.entropy, b"ferry");
    assert_eq!(&nonce[..], v.field("pairwise-short", "nonce"));
}

#[test]
fn detached_signature() {
    let v = Vectors::load();
    let k = keys(&v);
    let context = std::str::from_utf8(v.field("detached", "context")).unwrap();
    let message = v.field("detached", "message");
    let signature = v.array::<64>("detached", "signature");
    assert_eq!(
        spec::detached_message(context, message),
        v.field("detached", "signed")
    );
    assert_eq!(k.alice.sign(context, message), signature);
    assert_eq!(
        spec::sign(&k.alice_seed, &spec::detached_message(context, message)),
        signature
    );
    assert!(seal::verify_signature(
        &k.alice.public(),
        context,
        message,
        &signature
    ));
}

/// Envelopes of every kind at lengths around ChaCha20's 64-byte blocks and Poly1305's 16-byte
/// ones, and a large one: the crate and the independent construction agree, and a digest of
/// them all is what it was when the vectors were taken.
#[test]
fn every_length_gives_the_same_bytes_as_specified() {
    const LENGTHS: &[usize] = &[
        0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 150, 255, 256, 1000, 1024, 4096, 8192, 70_000,
    ];
    let v = Vectors::load();
    let k = keys(&v);
    let ab = k.alice.pair_key(&k.bob.public()).unwrap();
    let bob = k.bob.public();
    let mut digests = [
        blake3::Hasher::new(),
        blake3::Hasher::new(),
        blake3::Hasher::new(),
    ];
    for &len in LENGTHS {
        let body: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let entropy = [len as u8; 32];
        let made = [
            k.alice.seal(&body, None, entropy).unwrap(),
            k.alice.seal(&body, Some(&bob), entropy).unwrap(),
            ab.seal(&body, entropy),
        ];
        let specified = [
            spec::signed(&k.alice_seed, &body),
            spec::encrypted(&k.alice_seed, &bob.0, &entropy, &body),
            spec::pairwise(&k.alice_seed, &bob.0, &entropy, &body),
        ];
        for ((made, specified), digest) in made.iter().zip(&specified).zip(&mut digests) {
            assert!(made == specified, "{len} bytes: not as specified");
            digest.update(made);
        }
    }
    let digests = digests.map(|d| d.finalize().to_hex().to_string());
    assert_eq!(digests, SWEEP_DIGESTS);
}

/// BLAKE3 of the concatenated envelopes of `every_length_gives_the_same_bytes_as_specified`:
/// signed, encrypted, pairwise.
const SWEEP_DIGESTS: [&str; 3] = [
    "e35fd0b2bb024e45d42b386ac48073d18846213ac6b7330d1b8321754703e076",
    "3e5e687a1148730afe705216a5bb6e55d60b4931dc54668ffbd6d675f91f0831",
    "ff85bba64c9d04a8a3663df2742d1d81eb35485a616e7582802317de3d3dd7c8",
];
