//! Ferry's message security: node identities and the envelope every RPC message travels in.
//!
//! Every node has one Ed25519 key pair, its [`Identity`]; the 32-byte public key ([`PublicKey`])
//! names the node to the RPC layer (allow-lists, the dedup cache). The same key, mapped to its
//! X25519 form, receives encrypted messages, so one key per node is all a peer needs to know.
//!
//! [`Identity::seal`] wraps a message body in an envelope that is always signed by the sender and,
//! when a recipient is given, encrypted to it (X25519 with a fresh ephemeral key per message, a key
//! derived with BLAKE3, ChaCha20-Poly1305; the sender's key is bound into the associated data, so
//! a re-signed ciphertext does not decrypt). [`Identity::open`] checks the signature first, then
//! decrypts; [`verify`] checks the signature alone (what a relay could do). Anything forged,
//! modified, truncated or addressed to another node is an [`OpenError`], never a panic.
//!
//! **What it never does.** No I/O, no clock, no random source of its own: the caller passes the
//! entropy for ephemeral keys (the RPC engine draws it from its seeded generator, which the daemon
//! seeds from the operating system). Storing the secret key (a 0600 file) is the daemon's part.

#![forbid(unsafe_code)]

/// A node's public key: an Ed25519 verifying key. Shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey(pub [u8; 32]);

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// A node's key pair. The secret never leaves it except through [`Identity::secret_bytes`].
pub struct Identity {
    _private: (),
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

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Not an envelope of a version this crate reads, or cut short.
    #[error("malformed envelope: {0}")]
    Malformed(&'static str),
    /// The signature does not match the content and the claimed sender.
    #[error("bad signature")]
    BadSignature,
    /// Encrypted to another node.
    #[error("encrypted to another node")]
    NotForUs,
    /// The signature is good but the ciphertext does not decrypt (tampered or misdirected).
    #[error("decryption failed")]
    Decrypt,
}
