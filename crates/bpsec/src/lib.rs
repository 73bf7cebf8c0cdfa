//! Bundle Protocol Security (BPSec, RFC 9172) with the default security contexts of RFC 9173:
//! BIB-HMAC-SHA2 (integrity) and BCB-AES-GCM (confidentiality).
//!
//! ```text
//!   send:    Bundle ──► Policy::protect ──► + BIB (HMAC of the payload's IPPT)
//!                                           + BCB (payload and BIB encrypted in place, tags)
//!   receive: Bundle ──► Policy::receive ──► BCBs for this node decrypted and removed,
//!                                           BIBs with a known key verified, or Refused
//! ```
//!
//! What it does: encodes and decodes the abstract security block ([`AbstractSecurityBlock`]),
//! builds the IPPT and AAD of RFC 9173 (§3.7, §4.7) from a [`wire::Bundle`], signs and
//! verifies BIBs ([`bib`]), encrypts and decrypts BCBs ([`bcb`]), wraps and unwraps keys
//! (RFC 3394), and applies a node's [`Policy`]. The cryptography is RustCrypto's (`hmac`,
//! `sha2`, `aes-gcm`, `aes-kw`); MACs and tags are compared in constant time.
//!
//! What it never does: read a clock, a file, the environment or a random source. Keys arrive
//! as [`Key`]s (zeroed when dropped, never printed), IVs from an [`IvSource`] whose fixed field
//! the shell draws. A security block from a stranger never panics and never allocates beyond
//! fixed bounds ([`asb::MAX_TARGETS`], [`asb::MAX_PARAMETERS`], [`asb::MAX_RESULTS`]): every
//! fault is a typed [`AsbError`] or [`SecurityError`].
//!
//! Drive it from the node: [`Policy::protect`] on each bundle it originates, before storing it;
//! [`Policy::receive`] on each bundle it accepts, before storing, forwarding or delivering it.

#![forbid(unsafe_code)]

pub mod asb;
pub mod bcb;
pub mod bib;
mod cbor;
mod error;
mod key;
mod policy;
mod target;

pub use asb::AbstractSecurityBlock;
pub use error::{AsbError, SecurityError};
pub use key::{Key, unwrap_key, wrap_key};
pub use policy::{
    DecryptRule, EncryptRule, IvSource, Pattern, Policy, Protected, Received, Refused, SignRule,
    VerifyRule,
};
pub use target::{SCOPE_ALL, SCOPE_PRIMARY, SCOPE_SECURITY_HEADER, SCOPE_TARGET_HEADER};

/// Block type code of the Block Integrity Block (RFC 9172 §3.7).
pub const BLOCK_BIB: u64 = 11;
/// Block type code of the Block Confidentiality Block (RFC 9172 §3.8).
pub const BLOCK_BCB: u64 = 12;
