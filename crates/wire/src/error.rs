//! The one error type of bundle decoding: where in the input, and what was wrong there.

use std::fmt;

/// Why a sequence of bytes is not an acceptable BPv7 bundle (or administrative record).
///
/// `offset` is the byte position in the decoded buffer at which the problem was found, so that a
/// log line or a fuzzer report points at the exact byte. Decoding never panics; every malformed
/// input ends in one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset into the input at which the problem was detected.
    pub offset: usize,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// The kinds of [`DecodeError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended inside an item.
    Truncated,
    /// A length prefix promises more bytes than the input holds (checked before anything is
    /// allocated or sliced).
    LengthExceedsInput {
        /// The length the item declared.
        declared: u64,
    },
    /// Bytes follow the end of the bundle.
    TrailingBytes,
    /// The bytes are not well-formed CBOR (reserved additional information, a misplaced break,
    /// invalid UTF-8 in a text string, an indefinite-length string).
    InvalidCbor(&'static str),
    /// An integer or length is not in its shortest form (RFC 9171 §4.1 requires the core
    /// deterministic encoding of RFC 8949).
    NotDeterministic,
    /// A well-formed item of the wrong CBOR type.
    UnexpectedType {
        /// What the format requires at this position.
        expected: &'static str,
    },
    /// Arrays nested deeper than any BPv7 structure needs.
    TooDeep,
    /// An array has a number of elements the format does not allow.
    BadArrayLength {
        /// Which structure.
        what: &'static str,
        /// The number of elements found.
        len: u64,
    },
    /// The primary block's version is not 7.
    UnsupportedVersion(u64),
    /// A CRC type other than 0, 1 or 2.
    UnknownCrcType(u64),
    /// The CRC carried by a block differs from the CRC of the received bytes.
    CrcMismatch {
        /// Block number (0 for the primary block).
        block: u64,
        /// The CRC the block carries.
        carried: u32,
        /// The CRC computed over the received bytes.
        computed: u32,
    },
    /// A CRC byte string of the wrong size for its CRC type.
    BadCrcLength {
        /// Block number (0 for the primary block).
        block: u64,
    },
    /// An endpoint id with an unknown URI scheme code.
    UnknownEidScheme(u64),
    /// An endpoint id that breaks its scheme's syntax.
    InvalidEid(&'static str),
    /// A block whose content breaks RFC 9171 (e.g. a hop limit of 0, data that does not fill
    /// the block-type-specific byte string).
    InvalidBlock {
        /// Block number.
        block: u64,
        /// The rule that was broken.
        reason: &'static str,
    },
    /// The bundle as a whole breaks a rule of RFC 9171 (e.g. no payload block, two blocks with
    /// one number, status reports requested for an anonymous bundle).
    InvalidBundle(&'static str),
    /// An administrative record that breaks RFC 9171 §6.1.
    InvalidAdminRecord(&'static str),
    /// A discovery beacon that breaks its format (see `Beacon`).
    InvalidBeacon(&'static str),
    /// A Ferry control message is malformed.
    InvalidControl(&'static str),
}

impl DecodeError {
    pub(crate) fn new(offset: usize, kind: DecodeErrorKind) -> Self {
        Self { offset, kind }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: ", self.offset)?;
        match &self.kind {
            DecodeErrorKind::Truncated => write!(f, "input ends inside an item"),
            DecodeErrorKind::LengthExceedsInput { declared } => {
                write!(f, "declared length {declared} exceeds the input")
            }
            DecodeErrorKind::TrailingBytes => write!(f, "bytes follow the end of the bundle"),
            DecodeErrorKind::InvalidCbor(why) => write!(f, "invalid CBOR: {why}"),
            DecodeErrorKind::NotDeterministic => {
                write!(f, "integer or length not in shortest form")
            }
            DecodeErrorKind::UnexpectedType { expected } => write!(f, "expected {expected}"),
            DecodeErrorKind::TooDeep => write!(f, "arrays nested too deeply"),
            DecodeErrorKind::BadArrayLength { what, len } => {
                write!(f, "{what} cannot have {len} elements")
            }
            DecodeErrorKind::UnsupportedVersion(v) => {
                write!(f, "bundle protocol version {v} (only 7 is supported)")
            }
            DecodeErrorKind::UnknownCrcType(t) => write!(f, "unknown CRC type {t}"),
            DecodeErrorKind::CrcMismatch {
                block,
                carried,
                computed,
            } => write!(
                f,
                "CRC mismatch in block {block}: carried {carried:#x}, computed {computed:#x}"
            ),
            DecodeErrorKind::BadCrcLength { block } => {
                write!(
                    f,
                    "CRC of block {block} has the wrong length for its CRC type"
                )
            }
            DecodeErrorKind::UnknownEidScheme(s) => write!(f, "unknown endpoint id scheme {s}"),
            DecodeErrorKind::InvalidEid(why) => write!(f, "invalid endpoint id: {why}"),
            DecodeErrorKind::InvalidBlock { block, reason } => {
                write!(f, "invalid block {block}: {reason}")
            }
            DecodeErrorKind::InvalidBundle(why) => write!(f, "invalid bundle: {why}"),
            DecodeErrorKind::InvalidAdminRecord(why) => {
                write!(f, "invalid administrative record: {why}")
            }
            DecodeErrorKind::InvalidBeacon(why) => write!(f, "invalid beacon: {why}"),
            DecodeErrorKind::InvalidControl(why) => write!(f, "invalid control message: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}
