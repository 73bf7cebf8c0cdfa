//! The node's Ed25519 identity: created on first start, the secret kept in a 0600 file.
