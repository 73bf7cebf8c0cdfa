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
//! The byte layouts of the three kinds of envelope (signed `0x00`, encrypted `0x01`, pairwise
//! `0x03`), how each is sealed (key agreement, key derivation, nonces and why they do not
//! repeat, what is signed and with which key, what is associated data) and test vectors are in
//! `docs/protocol.md` (sections 2, 3 and 6); `tests/vectors.rs` checks this crate against the
//! vectors printed there. Overheads: [`SIGNED_OVERHEAD`] = 98 bytes, [`ENCRYPTED_OVERHEAD`] =
//! 178, [`PAIRWISE_OVERHEAD`] = 106; [`sealed_len`] gives an envelope's length.
//!
//! Because the signature covers every byte, a relay can check any signed or encrypted envelope
//! ([`verify`]) and nobody but the sender can change one; because the associated data holds the
//! sender's key, a third party who strips the signature and signs the ciphertext as its own
//! sender gets an envelope that verifies but does not decrypt ([`OpenError::Decrypt`]). What
//! this does not give: replay protection (the RPC layer's dedup cache keeps that), hiding who
//! talks to whom (both keys travel in clear), or forward secrecy against the loss of a
//! recipient's long-term key.
//!
//! # Pairwise envelopes
//!
//! Two nodes that know each other's keys can skip the signature and the ephemeral key: a
//! [`PairKey`] ([`Identity::pair_key`], one X25519 multiplication per peer, kept) seals and opens
//! with authenticated encryption alone, under a key derived from the static-static X25519 secret
//! only the two of them can compute. Only the recipient can check one (a relay's [`verify`]
//! refuses it): the RPC layer uses them for messages to one known node, and signed envelopes for
//! what goes to many.
//!
//! One AEAD implementation serves both encrypted kinds: RustCrypto's `chacha20poly1305`
//! (`ChaCha20Poly1305` and `XChaCha20Poly1305`).
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
pub use pairwise::{HOLLOW_TAG, PAIRWISE_HEADER_LEN, PAIRWISE_OVERHEAD, PairKey, pairwise_sender};
/// A value zeroed when dropped (from the `zeroize` crate): what [`Identity::secret_bytes`]
/// returns, re-exported so callers can name it and hold their own secrets in one.
pub use zeroize::Zeroizing;
