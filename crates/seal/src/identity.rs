//! [`Identity`]: a node's key pair, and detached signatures.

use ed25519_dalek::{Signer as _, SigningKey};
use zeroize::Zeroizing;

use crate::key::PublicKey;

/// BLAKE3 context that turns the Ed25519 seed into the key that derives ephemeral secrets.
const EPHEMERAL_KEY_CONTEXT: &str = "ferry-seal v1 ephemeral secret key";

/// What a detached signature signs before the caller's context (see [`Identity::sign`]).
const DETACHED_PREFIX: &[u8] = b"ferry-seal detached v1\0";

/// A node's key pair. The secret never leaves it except through [`Identity::secret_bytes`], and
/// every copy this value holds is zeroed when it is dropped.
#[derive(Clone)]
pub struct Identity {
    /// The Ed25519 key (ed25519-dalek zeroes it on drop).
    pub(crate) signing: SigningKey,
    /// Our X25519 secret: the Ed25519 scalar bytes (`SigningKey::to_scalar_bytes`), unclamped;
    /// X25519 clamps them, giving the secret whose public key is our Ed25519 key's Montgomery
    /// form.
    pub(crate) x25519: Zeroizing<[u8; 32]>,
    /// Keys the BLAKE3 hash that makes each envelope's ephemeral secret (see `envelope.rs`).
    pub(crate) ephemeral_key: Zeroizing<[u8; 32]>,
    /// Keys the BLAKE3 hash that makes each pairwise envelope's nonce (see `pairwise.rs`).
    pub(crate) pairwise_nonce_key: Zeroizing<[u8; 32]>,
    pub(crate) public: PublicKey,
}

impl Identity {
    /// The identity whose Ed25519 secret key (the 32-byte seed of RFC 8032) is `secret`. Any 32
    /// bytes are a secret key; draw them from a good random source. The caller's copy of
    /// `secret` is the caller's to zero.
    pub fn from_secret(secret: [u8; 32]) -> Identity {
        let signing = SigningKey::from_bytes(&secret);
        let x25519 = Zeroizing::new(signing.to_scalar_bytes());
        let ephemeral_key = Zeroizing::new(blake3::derive_key(EPHEMERAL_KEY_CONTEXT, &secret));
        let pairwise_nonce_key = Zeroizing::new(blake3::derive_key(
            crate::pairwise::NONCE_KEY_CONTEXT,
            &secret,
        ));
        let public = PublicKey(signing.verifying_key().to_bytes());
        Identity {
            signing,
            x25519,
            ephemeral_key,
            pairwise_nonce_key,
            public,
        }
    }

    /// The secret key (the seed given to [`Identity::from_secret`]), to be stored. The returned
    /// copy is zeroed when dropped.
    pub fn secret_bytes(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.signing.to_bytes())
    }

    /// The public key: this node's name to its peers.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// A detached Ed25519 signature of `message` for the purpose named by `context` (a fixed
    /// string such as `"ferry beacon"`), to be checked with [`verify_signature`] and the same
    /// context.
    ///
    /// What is signed is `"ferry-seal detached v1\0" ‖ BLAKE3(context) ‖ message`, never the
    /// message alone: a detached signature can never pass for an envelope's (those sign bytes
    /// that start with the envelope version, 1) nor for one made for another context.
    pub fn sign(&self, context: &str, message: &[u8]) -> [u8; 64] {
        self.signing
            .sign(&detached_message(context, message))
            .to_bytes()
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        write!(f, "Identity({})", self.public)
    }
}

/// Checks a signature made by [`Identity::sign`] with the same `context`: true if `key` (a valid
/// key, see [`PublicKey::is_valid`]) signed exactly `message`. Strict: refuses non-canonical and
/// small-order encodings, so a signature has one valid form.
pub fn verify_signature(
    key: &PublicKey,
    context: &str,
    message: &[u8],
    signature: &[u8; 64],
) -> bool {
    let Some(key) = key.verifying_key() else {
        return false;
    };
    key.verify_strict(
        &detached_message(context, message),
        &ed25519_dalek::Signature::from_bytes(signature),
    )
    .is_ok()
}

fn detached_message(context: &str, message: &[u8]) -> Vec<u8> {
    let mut signed = Vec::with_capacity(DETACHED_PREFIX.len() + 32 + message.len());
    signed.extend_from_slice(DETACHED_PREFIX);
    signed.extend_from_slice(blake3::hash(context.as_bytes()).as_bytes());
    signed.extend_from_slice(message);
    signed
}

#[cfg(test)]
mod tests {
    use curve25519_dalek::MontgomeryPoint;

    use super::*;

    fn unhex<const N: usize>(s: &str) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// RFC 8032 §7.1, TEST 1: the secret gives the public key, and the key signs the empty
    /// message as the RFC says (so the Ed25519 underneath is plain RFC 8032).
    #[test]
    fn rfc8032_test_vector_1() {
        let secret = unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let id = Identity::from_secret(secret);
        assert_eq!(
            id.public().to_string(),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        assert_eq!(*id.secret_bytes(), secret);
        let signature = id.signing.sign(b"").to_bytes();
        let expected: [u8; 64] = unhex(
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
        );
        assert_eq!(signature, expected);
    }

    /// Our X25519 secret belongs to our Ed25519 key's Montgomery form, which is what senders
    /// encrypt to.
    #[test]
    fn x25519_secret_matches_montgomery_public_key() {
        for seed in [[0u8; 32], [7; 32], [0xff; 32]] {
            let id = Identity::from_secret(seed);
            let ours = MontgomeryPoint::mul_base_clamped(*id.x25519);
            let theirs = id.public.verifying_key().unwrap().to_montgomery();
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn detached_signatures_are_bound_to_key_context_and_message() {
        let a = Identity::from_secret([1; 32]);
        let b = Identity::from_secret([2; 32]);
        let sig = a.sign("ferry test", b"hello");
        assert!(verify_signature(&a.public(), "ferry test", b"hello", &sig));
        assert!(!verify_signature(&b.public(), "ferry test", b"hello", &sig));
        assert!(!verify_signature(
            &a.public(),
            "ferry other",
            b"hello",
            &sig
        ));
        assert!(!verify_signature(&a.public(), "ferry test", b"hellO", &sig));
        assert!(!verify_signature(
            &PublicKey([0; 32]),
            "ferry test",
            b"hello",
            &sig
        ));
        for bit in 0..512 {
            let mut bad = sig;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(!verify_signature(&a.public(), "ferry test", b"hello", &bad));
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let id = Identity::from_secret([0xab; 32]);
        let shown = format!("{id:?}");
        assert_eq!(shown, format!("Identity({})", id.public()));
        assert!(!shown.contains("abababab"));
    }
}
