//! What can go wrong: a malformed abstract security block ([`AsbError`]) and a security operation
//! that cannot be carried out or does not check out ([`SecurityError`]).

/// Why the bytes of a BIB or BCB are not an abstract security block (RFC 9172 §3.6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AsbError {
    /// The block ends inside an item, or a declared length runs past its end.
    #[error("truncated at byte {at}")]
    Truncated {
        /// Byte offset in the block-type-specific data.
        at: usize,
    },
    /// Ill-formed or non-deterministic CBOR.
    #[error("ill-formed or non-deterministic CBOR at byte {at}")]
    BadCbor {
        /// Byte offset.
        at: usize,
    },
    /// An item of another type than the structure has there.
    #[error("expected {what} at byte {at}")]
    Unexpected {
        /// Byte offset.
        at: usize,
        /// What was expected.
        what: &'static str,
    },
    /// More items than this implementation accepts.
    #[error("more than {max} {what}")]
    TooMany {
        /// What there are too many of.
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// A value nested deeper than this implementation walks.
    #[error("nesting too deep at byte {at}")]
    TooDeep {
        /// Byte offset.
        at: usize,
    },
    /// The security source is not an endpoint id.
    #[error("bad security source: {0}")]
    BadSource(wire::DecodeError),
    /// A rule of RFC 9172 §3.6 broken: no target, a target twice, a results list that does not
    /// match the targets, a parameter id twice, bytes after the last field.
    #[error("invalid abstract security block: {0}")]
    Invalid(&'static str),
}

/// Why a security operation was not carried out, or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// The security block is malformed.
    #[error("malformed security block {block}: {error}")]
    Malformed {
        /// Its block number.
        block: u64,
        /// What is wrong.
        error: AsbError,
    },
    /// The block is of another security context than this operation's.
    #[error("security block {block} uses context {context}, not {expected}")]
    WrongContext {
        /// Its block number.
        block: u64,
        /// The context it names.
        context: i64,
        /// The context this operation implements.
        expected: i64,
    },
    /// A context parameter with a value this implementation does not support (a SHA or AES
    /// variant, an IV length) or of the wrong type.
    #[error("security block {block}: unsupported or invalid parameter {parameter}")]
    BadParameter {
        /// Its block number.
        block: u64,
        /// The parameter id.
        parameter: u64,
    },
    /// A target's results lack the one this context needs (the MAC, the authentication tag).
    #[error("security block {block}: no result for target {target}")]
    MissingResult {
        /// Its block number.
        block: u64,
        /// The target.
        target: u64,
    },
    /// A target the bundle does not have, or one RFC 9172 forbids for this service (a BCB on
    /// the primary block, a BIB on a security block).
    #[error("security block {block}: target {target} is absent or not allowed")]
    BadTarget {
        /// Its block number.
        block: u64,
        /// The target's block number.
        target: u64,
    },
    /// No block of that number, or not a security block of the expected type.
    #[error("no security block {0} of the expected type")]
    NoSuchBlock(u64),
    /// The key has a length the context cannot use (AES takes 16 or 32 bytes, key wrap a
    /// multiple of 8 of at least 16).
    #[error("key of {len} bytes does not fit {what}")]
    BadKey {
        /// What it was for.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A wrapped key did not unwrap under the key-encryption key (wrong key, or altered).
    #[error("security block {block}: wrapped key does not unwrap")]
    Unwrap {
        /// Its block number.
        block: u64,
    },
    /// A MAC did not verify (altered target, or another key).
    #[error("security block {block}: integrity check failed for target {target}")]
    IntegrityFailed {
        /// Its block number.
        block: u64,
        /// The target.
        target: u64,
    },
    /// Decryption failed: the authentication tag did not verify (altered, or another key).
    #[error("security block {block}: decryption failed for target {target}")]
    DecryptionFailed {
        /// Its block number.
        block: u64,
        /// The target.
        target: u64,
    },
    /// No rule of the policy gives a key for this block's security source.
    #[error("security block {block}: no key for its security source")]
    NoKey {
        /// Its block number.
        block: u64,
    },
    /// The IV counter of this key is used up: encrypting more would repeat an IV.
    #[error("AES-GCM invocation counter exhausted: no IV left for this run")]
    IvExhausted,
    /// A target of this service already has one (RFC 9172 §3.2: one BIB and one BCB per
    /// target), or a BIB's target is encrypted (it must be signed before it is encrypted).
    #[error("security block {block}: target {target} already protected")]
    Conflict {
        /// The block being added.
        block: u64,
        /// The target.
        target: u64,
    },
}
