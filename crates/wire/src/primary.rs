//! The primary block (RFC 9171 §4.3.1) and the identity of a bundle.

use std::fmt;
use std::time::Duration;

use bytes::{BufMut, Bytes};

use crate::cbor::{self, Reader};
use crate::crc::{self, CrcType};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};

/// The Bundle Protocol version this crate speaks.
pub const BP_VERSION: u64 = 7;

pub use crate::time::DtnTime;

/// Seconds from the Unix epoch to the DTN epoch (2000-01-01T00:00:00Z).
pub const DTN_EPOCH_UNIX_SECS: u64 = 946_684_800;

/// Bundle processing control flags (RFC 9171 §4.2.3).
///
/// Unknown and reserved bits are kept as they arrived (the primary block is immutable) and
/// otherwise ignored.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BundleFlags(pub u64);

impl BundleFlags {
    /// The bundle is a fragment.
    pub const IS_FRAGMENT: u64 = 0x01;
    /// The payload is an administrative record.
    pub const ADMIN_RECORD: u64 = 0x02;
    /// The bundle must not be fragmented.
    pub const MUST_NOT_FRAGMENT: u64 = 0x04;
    /// Acknowledgement by the application is requested.
    pub const APP_ACK_REQUESTED: u64 = 0x20;
    /// Status time is requested in all status reports.
    pub const STATUS_TIME_REQUESTED: u64 = 0x40;
    /// Report reception.
    pub const REPORT_RECEPTION: u64 = 0x4000;
    /// Report forwarding.
    pub const REPORT_FORWARDING: u64 = 0x1_0000;
    /// Report delivery.
    pub const REPORT_DELIVERY: u64 = 0x2_0000;
    /// Report deletion.
    pub const REPORT_DELETION: u64 = 0x4_0000;
    /// All four status report requests.
    pub const ANY_REPORT: u64 = Self::REPORT_RECEPTION
        | Self::REPORT_FORWARDING
        | Self::REPORT_DELIVERY
        | Self::REPORT_DELETION;

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u64) -> bool {
        self.0 & bits == bits
    }

    /// These flags with `bits` set or cleared.
    #[must_use]
    pub fn with(self, bits: u64, on: bool) -> Self {
        if on {
            Self(self.0 | bits)
        } else {
            Self(self.0 & !bits)
        }
    }

    /// Whether any status report is requested.
    pub fn any_report_requested(self) -> bool {
        self.0 & Self::ANY_REPORT != 0
    }
}

impl fmt::Debug for BundleFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BundleFlags({:#x})", self.0)
    }
}

/// When and in which order a bundle was created at its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CreationTimestamp {
    /// DTN time of creation; 0 when the source has no accurate clock.
    pub time: DtnTime,
    /// Sequence number distinguishing bundles created in the same millisecond.
    pub sequence: u64,
}

impl CreationTimestamp {
    /// Appends the CBOR encoding, `[time, sequence]`.
    pub(crate) fn encode(&self, out: &mut impl BufMut) {
        cbor::put_array(out, 2);
        cbor::put_uint(out, self.time.as_millis());
        cbor::put_uint(out, self.sequence);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut a = r.array()?;
        r.expect_next(&mut a, "creation timestamp")?;
        let time = r.uint()?;
        r.expect_next(&mut a, "creation timestamp")?;
        let sequence = r.uint()?;
        r.expect_end(&mut a, "creation timestamp")?;
        Ok(Self {
            time: DtnTime::from_millis(time),
            sequence,
        })
    }
}

/// Where a fragment's payload lies in the original application data unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FragmentInfo {
    /// Offset of this fragment's payload in the ADU.
    pub offset: u64,
    /// Length of the whole ADU.
    pub total_adu_len: u64,
}

/// The primary block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryBlock {
    /// Processing flags. The fragment bit is derived from `fragment` when encoding.
    pub flags: BundleFlags,
    /// CRC protecting this block.
    pub crc_type: CrcType,
    /// Where the bundle goes.
    pub destination: Eid,
    /// Which node created it (`dtn:none` if anonymous).
    pub source: Eid,
    /// Where status reports go.
    pub report_to: Eid,
    /// Creation time and sequence number.
    pub creation: CreationTimestamp,
    /// Milliseconds after creation at which the bundle expires.
    pub lifetime_ms: u64,
    /// Present if and only if the bundle is a fragment.
    pub fragment: Option<FragmentInfo>,
}

/// The identity of a bundle (RFC 9171 §4.2.7 and §5.9): source, creation timestamp, and for a
/// fragment its offset and payload length.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BundleId {
    /// Source node id.
    pub source: Eid,
    /// Creation timestamp.
    pub creation: CreationTimestamp,
    /// For a fragment: (offset, payload length).
    pub fragment: Option<(u64, u64)>,
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}",
            self.source, self.creation.time, self.creation.sequence
        )?;
        if let Some((offset, len)) = self.fragment {
            write!(f, "-{offset}+{len}")?;
        }
        Ok(())
    }
}

impl PrimaryBlock {
    /// A primary block with CRC-32C, no flags and no fragment information.
    pub fn new(
        destination: Eid,
        source: Eid,
        creation: CreationTimestamp,
        lifetime_ms: u64,
    ) -> Self {
        Self {
            flags: BundleFlags::default(),
            crc_type: CrcType::Crc32c,
            report_to: source.clone(),
            destination,
            source,
            creation,
            lifetime_ms,
            fragment: None,
        }
    }

    /// The flags as they are encoded: the fragment bit follows `fragment`.
    pub fn encoded_flags(&self) -> BundleFlags {
        self.flags
            .with(BundleFlags::IS_FRAGMENT, self.fragment.is_some())
    }

    /// Whether the payload is an administrative record.
    pub fn is_admin_record(&self) -> bool {
        self.flags.contains(BundleFlags::ADMIN_RECORD)
    }

    /// The DTN time at which the bundle expires, if its creation time is known.
    pub fn expiry(&self) -> Option<DtnTime> {
        (!self.creation.time.is_unknown())
            .then(|| self.creation.time + Duration::from_millis(self.lifetime_ms))
    }

    fn field_count(&self) -> u64 {
        8 + if self.fragment.is_some() { 2 } else { 0 } + u64::from(self.crc_type != CrcType::None)
    }

    /// The length of [`PrimaryBlock::encode`]'s output, without encoding (or computing a CRC).
    pub(crate) fn encoded_len(&self) -> usize {
        let creation = 1
            + cbor::head_len(self.creation.time.as_millis())
            + cbor::head_len(self.creation.sequence);
        let fragment = self.fragment.map_or(0, |f| {
            cbor::head_len(f.offset) + cbor::head_len(f.total_adu_len)
        });
        cbor::head_len(self.field_count())
            + cbor::head_len(BP_VERSION)
            + cbor::head_len(self.encoded_flags().0)
            + cbor::head_len(self.crc_type.code())
            + self.destination.encoded_len()
            + self.source.encoded_len()
            + self.report_to.encoded_len()
            + creation
            + cbor::head_len(self.lifetime_ms)
            + fragment
            + crc_field_len(self.crc_type)
    }

    /// The block's canonical encoding, CRC included: what BPSec's integrity and authentication
    /// cover (RFC 9172 §3.7). Decoding is strict (deterministic CBOR, CRCs checked), so for a
    /// received block these are the bytes that arrived.
    pub fn to_cbor(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode(&mut out);
        out
    }

    /// Appends the encoded block, CRC included.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        cbor::put_array(out, self.field_count());
        cbor::put_uint(out, BP_VERSION);
        cbor::put_uint(out, self.encoded_flags().0);
        cbor::put_uint(out, self.crc_type.code());
        self.destination.encode(out);
        self.source.encode(out);
        self.report_to.encode(out);
        self.creation.encode(out);
        cbor::put_uint(out, self.lifetime_ms);
        if let Some(frag) = self.fragment {
            cbor::put_uint(out, frag.offset);
            cbor::put_uint(out, frag.total_adu_len);
        }
        put_crc(out, start, self.crc_type);
    }

    /// An upper bound of the encoded size, for reserving buffer space.
    pub(crate) fn encoded_len_hint(&self) -> usize {
        1 + 1
            + 9
            + 1
            + self.destination.encoded_len()
            + self.source.encoded_len()
            + self.report_to.encoded_len()
            + 1
            + 9
            + 9
            + 9
            + 18
            + 5
    }

    /// Decodes the primary block at the reader's position and checks its CRC.
    pub(crate) fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<Self, DecodeError> {
        let start = r.position();
        let mut a = r.array()?;
        let n = r.count_items(a)?;
        if !(8..=11).contains(&n) {
            return Err(DecodeError::new(
                start,
                K::BadArrayLength {
                    what: "primary block",
                    len: n,
                },
            ));
        }
        r.expect_next(&mut a, "primary block")?;
        let version_at = r.position();
        let version = r.uint()?;
        if version != BP_VERSION {
            return Err(DecodeError::new(version_at, K::UnsupportedVersion(version)));
        }
        r.expect_next(&mut a, "primary block")?;
        let flags = BundleFlags(r.uint()?);
        r.expect_next(&mut a, "primary block")?;
        let crc_at = r.position();
        let crc_type = CrcType::from_code(r.uint()?).map_err(|k| DecodeError::new(crc_at, k))?;
        let is_fragment = flags.contains(BundleFlags::IS_FRAGMENT);
        let expected = 8 + if is_fragment { 2 } else { 0 } + u64::from(crc_type != CrcType::None);
        if n != expected {
            return Err(DecodeError::new(
                start,
                K::BadArrayLength {
                    what: "primary block",
                    len: n,
                },
            ));
        }
        r.expect_next(&mut a, "primary block")?;
        let destination = Eid::decode(r, buf)?;
        r.expect_next(&mut a, "primary block")?;
        let source = Eid::decode(r, buf)?;
        r.expect_next(&mut a, "primary block")?;
        let report_to = Eid::decode(r, buf)?;
        r.expect_next(&mut a, "primary block")?;
        let creation = CreationTimestamp::decode(r)?;
        r.expect_next(&mut a, "primary block")?;
        let lifetime_ms = r.uint()?;
        let fragment = if is_fragment {
            r.expect_next(&mut a, "primary block")?;
            let offset = r.uint()?;
            r.expect_next(&mut a, "primary block")?;
            let total_adu_len = r.uint()?;
            Some(FragmentInfo {
                offset,
                total_adu_len,
            })
        } else {
            None
        };
        check_crc(r, &mut a, buf, start, crc_type, 0, "primary block")?;
        Ok(Self {
            flags,
            crc_type,
            destination,
            source,
            report_to,
            creation,
            lifetime_ms,
            fragment,
        })
    }
}

/// Appends the CRC field of a block whose encoding began at `start` in `out` and whose fields
/// have all been written; the CRC covers the block with its CRC value zeroed.
/// The length of the CRC field [`put_crc`] appends.
pub(crate) fn crc_field_len(crc_type: CrcType) -> usize {
    match crc_type {
        CrcType::None => 0,
        crc => cbor::head_len(crc.value_len() as u64) + crc.value_len(),
    }
}

pub(crate) fn put_crc(out: &mut Vec<u8>, start: usize, crc_type: CrcType) {
    if crc_type == CrcType::None {
        return;
    }
    cbor::put_head(out, cbor::BYTES, crc_type.value_len() as u64);
    let mut digest = crc_type.digest();
    digest.update(&out[start..]);
    digest.update_zeroed_value();
    let (value, len) = crc::value_to_be(crc_type, digest.finish());
    out.put_slice(&value[..len]);
}

/// Reads the CRC field (if the CRC type has one) and the end of the block's array, then checks the
/// CRC over the block's received bytes `[start, end)` with the CRC value taken as zeros.
pub(crate) fn check_crc(
    r: &mut Reader<'_>,
    a: &mut cbor::Array,
    buf: &Bytes,
    start: usize,
    crc_type: CrcType,
    block: u64,
    what: &'static str,
) -> Result<(), DecodeError> {
    if crc_type == CrcType::None {
        return r.expect_end(a, what);
    }
    r.expect_next(a, what)?;
    let field_at = r.position();
    let value = r.bytes()?;
    if value.len() != crc_type.value_len() {
        return Err(DecodeError::new(field_at, K::BadCrcLength { block }));
    }
    r.expect_end(a, what)?;
    let end = r.position();
    let mut digest = crc_type.digest();
    digest.update(&buf[start..value.start]);
    // An indefinite-length block ends with a break after the CRC; the RFC includes it.
    digest.update_zeroed_value_then(&buf[value.end..end]);
    let computed = digest.finish();
    let carried = crc::value_from_be(&buf[value]);
    if computed != carried {
        return Err(DecodeError::new(
            start,
            K::CrcMismatch {
                block,
                carried,
                computed,
            },
        ));
    }
    Ok(())
}
