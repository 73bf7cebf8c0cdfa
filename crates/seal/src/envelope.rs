//! Signed and encrypted envelopes: layout, sealing, opening. The layout and the sealing are
//! documented in `docs/protocol.md`, sections 2 and 3.

use chacha20poly1305::aead::{AeadInPlace as _, KeyInit as _};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};
use curve25519_dalek::MontgomeryPoint;
use ed25519_dalek::Signer as _;
use zeroize::Zeroizing;

use crate::identity::Identity;
use crate::key::PublicKey;

/// The envelope format version this crate writes and reads (the first byte).
pub const VERSION: u8 = 1;

/// Flag bit: the body is encrypted (the header holds a recipient and an ephemeral key).
const FLAG_ENCRYPTED: u8 = 0x01;

const KEY_LEN: usize = 32;
const SIGNATURE_LEN: usize = 64;
const TAG_LEN: usize = 16;
/// Version, flags, sender.
const SIGNED_HEADER_LEN: usize = 2 + KEY_LEN;
/// Version, flags, sender, recipient, ephemeral key.
const ENCRYPTED_HEADER_LEN: usize = 2 + 3 * KEY_LEN;

/// Bytes a signed-only envelope adds to its body: 98 (version, flags, sender key, signature).
pub const SIGNED_OVERHEAD: usize = SIGNED_HEADER_LEN + SIGNATURE_LEN;

/// Bytes an encrypted envelope adds to its body: 178 (version, flags, sender key, recipient key,
/// ephemeral key, authentication tag, signature).
pub const ENCRYPTED_OVERHEAD: usize = ENCRYPTED_HEADER_LEN + TAG_LEN + SIGNATURE_LEN;

/// BLAKE3 context for the encryption key: `derive_key(KEY_CONTEXT, shared ‖ ephemeral ‖
/// recipient)`.
const KEY_CONTEXT: &str = "ferry-seal v1 envelope encryption key";

/// The nonce: always zero, because every envelope's key is its own (it is derived from the
/// envelope's ephemeral key, and an ephemeral secret is used again only for the same body to the
/// same recipient, which gives the same ciphertext again).
const NONCE: [u8; 12] = [0; 12];

/// The length of the envelope [`Identity::seal`] makes of a body of `body_len` bytes.
pub const fn sealed_len(body_len: usize, encrypted: bool) -> usize {
    body_len
        + if encrypted {
            ENCRYPTED_OVERHEAD
        } else {
            SIGNED_OVERHEAD
        }
}

/// A verified (and, if it was encrypted, decrypted) envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Who signed it.
    pub sender: PublicKey,
    /// Whether it was encrypted (to us).
    pub encrypted: bool,
    /// The message body.
    pub body: Vec<u8>,
}

/// An envelope whose signature was checked, as anyone can see it without the recipient's key
/// (what [`verify`] returns: a relay's view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signed<'a> {
    /// Who signed it.
    pub sender: PublicKey,
    /// Whom it is encrypted to; `None` if it is not encrypted.
    pub recipient: Option<PublicKey>,
    /// The body if the envelope is not encrypted; the ciphertext followed by its 16-byte
    /// authentication tag if it is.
    pub content: &'a [u8],
}

impl Signed<'_> {
    /// Whether the body is encrypted.
    pub fn encrypted(&self) -> bool {
        self.recipient.is_some()
    }
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// An envelope of another version (the first byte), or no envelope at all.
    #[error("envelope version {0}, this node reads version {VERSION}")]
    Version(u8),
    /// Cut short, unknown flags, or a sender key that is no valid Ed25519 key.
    #[error("malformed envelope: {0}")]
    Malformed(&'static str),
    /// The signature does not match the content and the claimed sender.
    #[error("bad signature")]
    BadSignature,
    /// Encrypted to another node.
    #[error("encrypted to another node")]
    NotForUs,
    /// Signed, but its ephemeral key is of small order: no shared secret (a sender that means no
    /// harm never makes one).
    #[error("the envelope's ephemeral key is of small order")]
    WeakEphemeralKey,
    /// The signature is good but the ciphertext does not decrypt (tampered, re-signed by
    /// another sender, or made with the wrong key).
    #[error("decryption failed")]
    Decrypt,
}

/// Why [`Identity::seal`] could not seal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The recipient's key is not a valid Ed25519 public key (see [`PublicKey::is_valid`]).
    #[error("the recipient key {0} is not a valid Ed25519 public key")]
    InvalidRecipient(PublicKey),
}

/// An envelope taken apart, not yet verified.
struct Parts<'a> {
    /// Everything the signature covers.
    signed: &'a [u8],
    /// The header: the AEAD's associated data.
    header: &'a [u8],
    sender: PublicKey,
    /// Recipient and ephemeral X25519 public key, if encrypted.
    encryption: Option<(PublicKey, [u8; 32])>,
    content: &'a [u8],
    signature: [u8; SIGNATURE_LEN],
}

fn parse(sealed: &[u8]) -> Result<Parts<'_>, OpenError> {
    let Some(&[version, flags]) = sealed.first_chunk::<2>() else {
        return match sealed.first() {
            Some(&v) if v != VERSION => Err(OpenError::Version(v)),
            _ => Err(OpenError::Malformed("cut short")),
        };
    };
    if version != VERSION {
        return Err(OpenError::Version(version));
    }
    if flags == crate::pairwise::FLAGS_PAIRWISE {
        return Err(OpenError::Malformed(
            "a pairwise envelope (it has no signature; only its recipient can open it)",
        ));
    }
    if flags & !FLAG_ENCRYPTED != 0 {
        return Err(OpenError::Malformed("unknown flags"));
    }
    let encrypted = flags & FLAG_ENCRYPTED != 0;
    let (header_len, min_len) = if encrypted {
        (ENCRYPTED_HEADER_LEN, ENCRYPTED_OVERHEAD)
    } else {
        (SIGNED_HEADER_LEN, SIGNED_OVERHEAD)
    };
    if sealed.len() < min_len {
        return Err(OpenError::Malformed("cut short"));
    }
    let short = OpenError::Malformed("cut short");
    let (signed, signature) = sealed
        .split_last_chunk::<SIGNATURE_LEN>()
        .ok_or(short.clone())?;
    let (header, content) = signed.split_at_checked(header_len).ok_or(short.clone())?;
    let keys = &header[2..];
    let key = |i: usize| -> Result<[u8; 32], OpenError> {
        keys.get(i * KEY_LEN..(i + 1) * KEY_LEN)
            .and_then(|k| k.try_into().ok())
            .ok_or(OpenError::Malformed("cut short"))
    };
    let sender = PublicKey(key(0)?);
    let encryption = if encrypted {
        Some((PublicKey(key(1)?), key(2)?))
    } else {
        None
    };
    Ok(Parts {
        signed,
        header,
        sender,
        encryption,
        content,
        signature: *signature,
    })
}

fn parse_and_verify(sealed: &[u8]) -> Result<Parts<'_>, OpenError> {
    let parts = parse(sealed)?;
    let key = parts.sender.verifying_key().ok_or(OpenError::Malformed(
        "the sender key is not a valid Ed25519 key",
    ))?;
    key.verify_strict(
        parts.signed,
        &ed25519_dalek::Signature::from_bytes(&parts.signature),
    )
    .map_err(|_| OpenError::BadSignature)?;
    Ok(parts)
}

/// Checks an envelope's signature, and nothing else: what any node can do without the recipient's
/// key (a relay deciding whether to carry it, say). Does not decrypt.
pub fn verify(sealed: &[u8]) -> Result<Signed<'_>, OpenError> {
    let parts = parse_and_verify(sealed)?;
    Ok(Signed {
        sender: parts.sender,
        recipient: parts.encryption.map(|(recipient, _)| recipient),
        content: parts.content,
    })
}

/// The sender an envelope claims, **unverified**, if it looks like an envelope of this version
/// (for logging or picking a queue before the real check; never for a decision).
pub fn peek_sender(sealed: &[u8]) -> Option<PublicKey> {
    parse(sealed).ok().map(|parts| parts.sender)
}

/// The ChaCha20-Poly1305 key of one envelope.
fn envelope_key(
    shared: &[u8; 32],
    ephemeral: &[u8; 32],
    recipient: &PublicKey,
) -> Zeroizing<[u8; 32]> {
    let mut hasher = blake3::Hasher::new_derive_key(KEY_CONTEXT);
    hasher.update(shared);
    hasher.update(ephemeral);
    hasher.update(&recipient.0);
    Zeroizing::new(*hasher.finalize().as_bytes())
}

impl Identity {
    /// Wraps `body` in an envelope signed by this identity and, if `to` is given, encrypted to
    /// that node (which may be this one).
    ///
    /// `entropy` makes the envelope's ephemeral key (it is unused when `to` is `None`): pass 32
    /// fresh random bytes. The ephemeral secret is a keyed BLAKE3 hash (keyed by a value derived
    /// from our secret key) of `entropy`, the recipient and the body, so the same inputs give
    /// the same envelope (the function is deterministic) and repeated or predictable entropy
    /// costs no secrecy: at worst, the same body sealed twice to the same node with the same
    /// entropy gives the same envelope twice.
    ///
    /// The result is [`sealed_len`]`(body.len(), to.is_some())` bytes long. Fails only if `to`
    /// is not a valid public key.
    pub fn seal(
        &self,
        body: &[u8],
        to: Option<&PublicKey>,
        entropy: [u8; 32],
    ) -> Result<Vec<u8>, SealError> {
        let mut out = Vec::with_capacity(sealed_len(body.len(), to.is_some()));
        out.push(VERSION);
        match to {
            None => {
                out.push(0);
                out.extend_from_slice(&self.public.0);
                out.extend_from_slice(body);
            }
            Some(recipient) => {
                let montgomery = recipient
                    .verifying_key()
                    .ok_or(SealError::InvalidRecipient(*recipient))?
                    .to_montgomery();
                let mut hasher = blake3::Hasher::new_keyed(&self.ephemeral_key);
                hasher.update(&entropy);
                hasher.update(&recipient.0);
                hasher.update(body);
                let ephemeral_secret = Zeroizing::new(*hasher.finalize().as_bytes());
                let ephemeral = MontgomeryPoint::mul_base_clamped(*ephemeral_secret).to_bytes();
                let shared = Zeroizing::new(montgomery.mul_clamped(*ephemeral_secret).to_bytes());
                // A valid (not small-order) recipient key never gives zero; checked anyway, as
                // X25519 asks.
                if *shared == [0; 32] {
                    return Err(SealError::InvalidRecipient(*recipient));
                }
                let key = envelope_key(&shared, &ephemeral, recipient);

                out.push(FLAG_ENCRYPTED);
                out.extend_from_slice(&self.public.0);
                out.extend_from_slice(&recipient.0);
                out.extend_from_slice(&ephemeral);
                out.extend_from_slice(body);
                let (header, plaintext) = out.split_at_mut(ENCRYPTED_HEADER_LEN);
                let tag = ChaCha20Poly1305::new(Key::from_slice(&key[..]))
                    .encrypt_in_place_detached(Nonce::from_slice(&NONCE), header, plaintext)
                    .expect("ChaCha20-Poly1305 encrypts up to 256 GiB");
                out.extend_from_slice(&tag);
            }
        }
        let signature = self.signing.sign(&out).to_bytes();
        out.extend_from_slice(&signature);
        debug_assert_eq!(out.len(), sealed_len(body.len(), to.is_some()));
        Ok(out)
    }

    /// Opens an envelope: checks that it is well formed and that its sender signed it, then, if
    /// it is encrypted, that it is encrypted to us, and decrypts it. Anything forged, modified,
    /// truncated, extended or addressed to another node is an error.
    ///
    /// A pairwise envelope (see [`PairKey`](crate::PairKey)) is opened too, at the cost of one
    /// X25519 multiplication; a receiver that hears often from the same peers keeps their
    /// [`PairKey`](crate::PairKey)s and opens with those instead.
    pub fn open(&self, sealed: &[u8]) -> Result<Opened, OpenError> {
        if let Some(sender) = crate::pairwise::pairwise_sender(sealed) {
            let key = self
                .pair_key(&sender)
                .map_err(|_| OpenError::Malformed("the sender key is not a valid Ed25519 key"))?;
            return key.open(sealed);
        }
        let parts = parse_and_verify(sealed)?;
        let Some((recipient, ephemeral)) = parts.encryption else {
            return Ok(Opened {
                sender: parts.sender,
                encrypted: false,
                body: parts.content.to_vec(),
            });
        };
        if recipient != self.public {
            return Err(OpenError::NotForUs);
        }
        let shared = Zeroizing::new(
            MontgomeryPoint(ephemeral)
                .mul_clamped(*self.x25519)
                .to_bytes(),
        );
        if *shared == [0; 32] {
            return Err(OpenError::WeakEphemeralKey);
        }
        let key = envelope_key(&shared, &ephemeral, &recipient);
        let (ciphertext, tag) = parts
            .content
            .split_last_chunk::<TAG_LEN>()
            .ok_or(OpenError::Malformed("cut short"))?;
        let mut body = ciphertext.to_vec();
        ChaCha20Poly1305::new(Key::from_slice(&key[..]))
            .decrypt_in_place_detached(
                Nonce::from_slice(&NONCE),
                parts.header,
                &mut body,
                Tag::from_slice(tag),
            )
            .map_err(|_| OpenError::Decrypt)?;
        Ok(Opened {
            sender: parts.sender,
            encrypted: true,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overheads_are_as_documented() {
        assert_eq!(SIGNED_OVERHEAD, 98);
        assert_eq!(ENCRYPTED_OVERHEAD, 178);
        let a = Identity::from_secret([1; 32]);
        let b = Identity::from_secret([2; 32]);
        for len in [0, 1, 100, 8192] {
            let body = vec![0x5a; len];
            let signed = a.seal(&body, None, [0; 32]).unwrap();
            assert_eq!(signed.len(), sealed_len(len, false));
            let encrypted = a.seal(&body, Some(&b.public()), [0; 32]).unwrap();
            assert_eq!(encrypted.len(), sealed_len(len, true));
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let a = Identity::from_secret([1; 32]);
        let b = Identity::from_secret([2; 32]);
        let signed = a.seal(b"hi", None, [0; 32]).unwrap();
        assert_eq!(signed[0], VERSION);
        assert_eq!(signed[1], 0);
        assert_eq!(signed[2..34], a.public().0);
        assert_eq!(&signed[34..36], b"hi");
        let encrypted = a.seal(b"hi", Some(&b.public()), [9; 32]).unwrap();
        assert_eq!(encrypted[0], VERSION);
        assert_eq!(encrypted[1], FLAG_ENCRYPTED);
        assert_eq!(encrypted[2..34], a.public().0);
        assert_eq!(encrypted[34..66], b.public().0);
        assert_ne!(&encrypted[98..100], b"hi");
        // The ephemeral key is the X25519 public key of the derived ephemeral secret.
        let mut hasher = blake3::Hasher::new_keyed(&a.ephemeral_key);
        hasher.update(&[9; 32]);
        hasher.update(&b.public().0);
        hasher.update(b"hi");
        let secret = *hasher.finalize().as_bytes();
        assert_eq!(
            encrypted[66..98],
            MontgomeryPoint::mul_base_clamped(secret).to_bytes()
        );
    }

    #[test]
    fn entropy_body_and_recipient_each_change_the_ephemeral_key() {
        let a = Identity::from_secret([1; 32]);
        let b = Identity::from_secret([2; 32]).public();
        let c = Identity::from_secret([3; 32]).public();
        let eph = |body: &[u8], to: &PublicKey, entropy| {
            a.seal(body, Some(to), entropy).unwrap()[66..98].to_vec()
        };
        let base = eph(b"x", &b, [0; 32]);
        assert_eq!(base, eph(b"x", &b, [0; 32]));
        assert_ne!(base, eph(b"y", &b, [0; 32]));
        assert_ne!(base, eph(b"x", &c, [0; 32]));
        assert_ne!(base, eph(b"x", &b, [1; 32]));
        // And another sender with the same inputs draws another ephemeral key.
        let d = Identity::from_secret([4; 32]);
        assert_ne!(
            base,
            d.seal(b"x", Some(&b), [0; 32]).unwrap()[66..98].to_vec()
        );
    }

    #[test]
    fn refuses_to_seal_to_an_invalid_key() {
        let a = Identity::from_secret([1; 32]);
        let mut small_order = [0u8; 32];
        small_order[0] = 1;
        for bad in [PublicKey([0; 32]), PublicKey(small_order)] {
            assert_eq!(
                a.seal(b"x", Some(&bad), [0; 32]),
                Err(SealError::InvalidRecipient(bad))
            );
        }
    }

    #[test]
    fn a_small_order_ephemeral_key_is_refused_even_when_signed() {
        let a = Identity::from_secret([1; 32]);
        let b = Identity::from_secret([2; 32]);
        let mut sealed = a.seal(b"x", Some(&b.public()), [0; 32]).unwrap();
        sealed[66..98].copy_from_slice(&[0; 32]); // u = 0: small order
        sealed.truncate(sealed.len() - SIGNATURE_LEN);
        let signature = a.signing.sign(&sealed).to_bytes();
        sealed.extend_from_slice(&signature);
        assert_eq!(b.open(&sealed), Err(OpenError::WeakEphemeralKey));
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            OpenError::Version(2).to_string(),
            "envelope version 2, this node reads version 1"
        );
        assert_eq!(
            SealError::InvalidRecipient(PublicKey([0; 32])).to_string(),
            format!(
                "the recipient key {} is not a valid Ed25519 public key",
                "0".repeat(64)
            )
        );
    }
}
