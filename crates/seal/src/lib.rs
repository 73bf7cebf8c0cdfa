//! Ferry's message security: node identities and the envelope every RPC message travels in.
//!
//! Every node has one Ed25519 key pair, its [`Identity`]; the 32-byte public key ([`PublicKey`])
//! names the node to the RPC layer (allow-lists, the dedup cache). The same key, mapped to its
//! X25519 form, receives encrypted messages, so one key per node is all a peer needs to know (the
//! use of one key for both is analysed in "On using the same key pair for Ed25519 and an X25519
//! based KEM", IACR ePrint 2021/509).
//!
//! [`Identity::seal`] wraps a message body in an envelope that is always signed by the sender and,
//! when a recipient is given, encrypted to it (X25519 with a fresh ephemeral key per message, a key
//! derived with BLAKE3, ChaCha20-Poly1305; the sender's key is bound into the associated data, so
//! a re-signed ciphertext does not decrypt). [`Identity::open`] checks the signature first, then
//! decrypts; [`verify`] checks the signature alone (what a relay could do). Anything forged,
//! modified, truncated, extended or addressed to another node is an [`OpenError`], never a panic.
//!
//! # The envelope, version 1
//!
//! ```text
//! offset     length  field
//! 0          1       version = 1
//! 1          1       flags: bit 0 set = encrypted; every other bit zero
//! 2          32      sender: Ed25519 public key
//! signed only:
//! 34         n       body
//! 34 + n     64      signature
//! encrypted:
//! 34         32      recipient: Ed25519 public key
//! 66         32      ephemeral: X25519 public key
//! 98         n       ciphertext (as long as the body)
//! 98 + n     16      tag (Poly1305)
//! 114 + n    64      signature
//! ```
//!
//! - `version` is 1 ([`VERSION`]); any other is [`OpenError::Version`].
//! - `flags`: bit 0 means encrypted; any other bit set is [`OpenError::Malformed`].
//! - `sender`, `recipient`: Ed25519 public keys (RFC 8032 encoding); `ephemeral`: an X25519
//!   public key (RFC 7748 u-coordinate). There are no length fields: the body runs from the end
//!   of the header to 64 bytes before the end of the envelope (or 80, the tag, if encrypted).
//! - `signature`: Ed25519 (RFC 8032, pure) by `sender` over every byte before it, checked with
//!   ed25519-dalek's `verify_strict` (canonical encodings only, no small-order keys), and the
//!   sender key must be the canonical encoding of a point of large order
//!   ([`PublicKey::is_valid`]).
//! - Encryption: the ephemeral secret `e` is `BLAKE3-keyed(k, entropy ‖ recipient ‖ body)`, where
//!   `k = BLAKE3-derive_key("ferry-seal v1 ephemeral secret key", sender's seed)`;
//!   `ephemeral = X25519(e, 9)` (keyed by the sender's secret, so entropy that repeats or that
//!   others can predict, a simulator's seed say, costs no secrecy). The recipient's X25519 public key is its Ed25519 key in
//!   Montgomery form; it opens with the (clamped) Ed25519 scalar `SHA-512(seed)[..32]`.
//!   `shared = X25519(e, recipient)`, refused if all zero;
//!   `key = BLAKE3-derive_key("ferry-seal v1 envelope encryption key", shared ‖ ephemeral ‖
//!   recipient)`. ChaCha20-Poly1305 (RFC 8439) with that key, an all-zero nonce (each key seals
//!   one body) and the whole header (version to ephemeral, 98 bytes) as associated data.
//!
//! Overhead: [`SIGNED_OVERHEAD`] = 98 bytes, [`ENCRYPTED_OVERHEAD`] = 178 bytes;
//! [`sealed_len`] gives an envelope's length.
//!
//! Because the signature covers every byte, a relay can check any envelope ([`verify`]) and
//! nobody but the sender can change one; because the associated data holds the sender's key, a
//! third party who strips the signature and signs the ciphertext as its own sender gets an envelope
//! that verifies but does not decrypt ([`OpenError::Decrypt`]). What this does not give: replay
//! protection (the RPC layer's dedup cache keeps that), hiding who talks to whom (both keys travel
//! in clear), or forward secrecy against the loss of a recipient's long-term key.
//!
//! # Pairwise envelopes
//!
//! Two nodes that know each other's keys can skip the signature and the ephemeral key: a
//! [`PairKey`] ([`Identity::pair_key`], one X25519 multiplication per peer, kept) seals and opens
//! with authenticated encryption alone, under a key derived from the static-static X25519 secret
//! only the two of them can compute. Flags `0x03`; layout and reasoning in `pairwise.rs`. Only the
//! recipient can check one (a relay's [`verify`] refuses it): the RPC layer uses them for
//! messages to one known node, and signed envelopes for what goes to many.
//!
//! Besides envelopes, [`Identity::sign`] and [`verify_signature`] make and check detached
//! signatures bound to a context string; what they sign can never be taken for an envelope.
//!
//! **What it never does.** No I/O, no clock, no random source of its own: the caller passes the
//! entropy for ephemeral keys (the RPC engine draws it from its seeded generator, which the daemon
//! seeds from the operating system), and [`Identity::seal`] is a pure function of its inputs.
//! Storing the secret key (a 0600 file) is the daemon's part. It never panics on received bytes,
//! and never allocates more than the envelope's own length to open one.

#![forbid(unsafe_code)]

mod envelope;
mod identity;
mod key;
mod pairwise;

pub use envelope::{
    ENCRYPTED_OVERHEAD, OpenError, Opened, SIGNED_OVERHEAD, SealError, Signed, VERSION,
    peek_sender, sealed_len, verify,
};
pub use identity::{Identity, verify_signature};
pub use key::{ParseKeyError, PublicKey};
pub use pairwise::{PAIRWISE_OVERHEAD, PairKey, pairwise_sender};
/// A value zeroed when dropped (from the `zeroize` crate): what [`Identity::secret_bytes`]
/// returns, re-exported so callers can name it and hold their own secrets in one.
pub use zeroize::Zeroizing;
