//! Canonical blocks (RFC 9171 §4.3.2) and the extension blocks every BPv7 node must understand
//! (§4.4): previous node, bundle age, hop count. Blocks of other types are kept byte for byte.

use std::fmt;

use bytes::Bytes;

use crate::cbor::{self, Reader};
use crate::crc::CrcType;
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::primary::{check_crc, put_crc};

/// Block type code of the payload block.
pub const BLOCK_PAYLOAD: u64 = 1;
/// Block type code of the previous node block.
pub const BLOCK_PREVIOUS_NODE: u64 = 6;
/// Block type code of the bundle age block.
pub const BLOCK_BUNDLE_AGE: u64 = 7;
/// Block type code of the hop count block.
pub const BLOCK_HOP_COUNT: u64 = 10;

/// The block number of the payload block, always.
pub const PAYLOAD_BLOCK_NUMBER: u64 = 1;

/// Block processing control flags (RFC 9171 §4.2.4). Unknown bits are kept and ignored.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BlockFlags(pub u64);

impl BlockFlags {
    /// The block must be replicated in every fragment.
    pub const REPLICATE_IN_EVERY_FRAGMENT: u64 = 0x01;
    /// Transmit a status report if the block can't be processed.
    pub const REPORT_IF_UNPROCESSABLE: u64 = 0x02;
    /// Delete the bundle if the block can't be processed.
    pub const DELETE_BUNDLE_IF_UNPROCESSABLE: u64 = 0x04;
    /// Discard the block if it can't be processed.
    pub const DISCARD_IF_UNPROCESSABLE: u64 = 0x10;

    /// Whether all of `bits` are set.
    pub fn contains(self, bits: u64) -> bool {
        self.0 & bits == bits
    }
}

impl fmt::Debug for BlockFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockFlags({:#x})", self.0)
    }
}

/// Hop limit and hop count (block type 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HopCount {
    /// The most hops the bundle may take, 1 to 255.
    pub limit: u64,
    /// Hops taken so far.
    pub count: u64,
}

impl HopCount {
    /// Whether the bundle has taken more hops than it may.
    pub fn exceeded(&self) -> bool {
        self.count > self.limit
    }
}

/// What an extension block carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtensionData {
    /// The node that forwarded the bundle here (type 6).
    PreviousNode(Eid),
    /// Milliseconds since creation, as of the last forwarding (type 7).
    BundleAge(u64),
    /// Hop limit and count (type 10).
    HopCount(HopCount),
    /// A block type this crate does not interpret, kept as received.
    Unknown {
        /// Block type code.
        block_type: u64,
        /// Block-type-specific data (a slice of the received bundle).
        data: Bytes,
    },
}

impl ExtensionData {
    /// The block type code.
    pub fn block_type(&self) -> u64 {
        match self {
            ExtensionData::PreviousNode(_) => BLOCK_PREVIOUS_NODE,
            ExtensionData::BundleAge(_) => BLOCK_BUNDLE_AGE,
            ExtensionData::HopCount(_) => BLOCK_HOP_COUNT,
            ExtensionData::Unknown { block_type, .. } => *block_type,
        }
    }

    /// The block-type-specific data as it goes on the wire (the content of the block's byte
    /// string): what BPSec signs and encrypts. A slice, not a copy, for blocks kept as received.
    pub fn content_bytes(&self) -> Bytes {
        match self {
            ExtensionData::Unknown { data, .. } => data.clone(),
            other => {
                let mut out = Vec::with_capacity(other.content_len());
                other.encode_content(&mut out);
                Bytes::from(out)
            }
        }
    }

    /// The length of what [`ExtensionData::encode_content`] writes.
    fn content_len(&self) -> usize {
        match self {
            ExtensionData::PreviousNode(eid) => eid.encoded_len(),
            ExtensionData::BundleAge(ms) => cbor::head_len(*ms),
            ExtensionData::HopCount(h) => 1 + cbor::head_len(h.limit) + cbor::head_len(h.count),
            ExtensionData::Unknown { data, .. } => data.len(),
        }
    }

    /// Writes the block-type-specific data (the content of the byte string).
    fn encode_content(&self, out: &mut Vec<u8>) {
        match self {
            ExtensionData::PreviousNode(eid) => eid.encode(out),
            ExtensionData::BundleAge(ms) => cbor::put_uint(out, *ms),
            ExtensionData::HopCount(h) => {
                cbor::put_array(out, 2);
                cbor::put_uint(out, h.limit);
                cbor::put_uint(out, h.count);
            }
            ExtensionData::Unknown { data, .. } => out.extend_from_slice(data),
        }
    }

    /// Interprets the block-type-specific data at `range` of `buf`, of a block of type
    /// `block_type`.
    fn decode(
        block_type: u64,
        number: u64,
        buf: &Bytes,
        range: std::ops::Range<usize>,
    ) -> Result<Self, K> {
        let invalid = |reason| K::InvalidBlock {
            block: number,
            reason,
        };
        // Only the blocks that keep a slice of the input pay for a `Bytes` reference count;
        // bundle age and hop count are read from the borrowed bytes.
        Ok(match block_type {
            BLOCK_PREVIOUS_NODE => {
                let data = buf.slice(range);
                ExtensionData::PreviousNode(
                    parse_exactly(&data, |r| Eid::decode(r, &data))
                        .ok_or(invalid("previous node is not exactly one endpoint id"))?,
                )
            }
            BLOCK_BUNDLE_AGE => ExtensionData::BundleAge(
                parse_exactly(&buf[range], |r| r.uint())
                    .ok_or(invalid("bundle age is not exactly one unsigned integer"))?,
            ),
            BLOCK_HOP_COUNT => {
                let hops = parse_exactly(&buf[range], |r| {
                    let mut a = r.array()?;
                    r.expect_next(&mut a, "hop count")?;
                    let limit = r.uint()?;
                    r.expect_next(&mut a, "hop count")?;
                    let count = r.uint()?;
                    r.expect_end(&mut a, "hop count")?;
                    Ok(HopCount { limit, count })
                })
                .ok_or(invalid("hop count is not exactly [limit, count]"))?;
                if !(1..=255).contains(&hops.limit) {
                    return Err(invalid("hop limit outside 1..=255"));
                }
                ExtensionData::HopCount(hops)
            }
            _ => ExtensionData::Unknown {
                block_type,
                data: buf.slice(range),
            },
        })
    }
}

/// Parses `bytes` with `parse`, which must consume all of them.
fn parse_exactly<T>(
    bytes: &[u8],
    parse: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Option<T> {
    let mut r = Reader::new(bytes);
    let value = parse(&mut r).ok()?;
    r.is_empty().then_some(value)
}

/// A canonical block other than the payload block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionBlock {
    /// Block number, unique in the bundle, never 0 or 1.
    pub number: u64,
    /// Processing flags.
    pub flags: BlockFlags,
    /// CRC protecting this block.
    pub crc_type: CrcType,
    /// The content.
    pub data: ExtensionData,
}

impl ExtensionBlock {
    /// A block with no flags and no CRC (RFC 9171 leaves CRCs on extension blocks optional).
    pub fn new(number: u64, data: ExtensionData) -> Self {
        Self {
            number,
            flags: BlockFlags::default(),
            crc_type: CrcType::None,
            data,
        }
    }

    /// Appends the encoded block.
    /// The length of [`ExtensionBlock::encode`]'s output, without encoding (or computing a CRC).
    pub(crate) fn encoded_len(&self) -> usize {
        let content = self.data.content_len();
        block_header_len(
            self.data.block_type(),
            self.number,
            self.flags,
            self.crc_type,
        ) + cbor::head_len(content as u64)
            + content
            + crate::primary::crc_field_len(self.crc_type)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        let start = out.len();
        put_block_header(
            out,
            self.data.block_type(),
            self.number,
            self.flags,
            self.crc_type,
        );
        scratch.clear();
        self.data.encode_content(scratch);
        cbor::put_bytes(out, scratch);
        put_crc(out, start, self.crc_type);
    }
}

/// The length of what [`put_block_header`] writes.
pub(crate) fn block_header_len(
    block_type: u64,
    number: u64,
    flags: BlockFlags,
    crc_type: CrcType,
) -> usize {
    // The array has 5 or 6 items: a one-byte head.
    1 + cbor::head_len(block_type)
        + cbor::head_len(number)
        + cbor::head_len(flags.0)
        + cbor::head_len(crc_type.code())
}

/// The header fields shared by every canonical block, up to the block-type-specific data.
pub(crate) fn put_block_header(
    out: &mut Vec<u8>,
    block_type: u64,
    number: u64,
    flags: BlockFlags,
    crc_type: CrcType,
) {
    cbor::put_array(out, if crc_type == CrcType::None { 5 } else { 6 });
    cbor::put_uint(out, block_type);
    cbor::put_uint(out, number);
    cbor::put_uint(out, flags.0);
    cbor::put_uint(out, crc_type.code());
}

/// A canonical block as decoded: its header and its data's place in the buffer.
#[derive(Debug)]
pub(crate) struct RawBlock {
    pub(crate) block_type: u64,
    pub(crate) number: u64,
    pub(crate) flags: BlockFlags,
    pub(crate) crc_type: CrcType,
    pub(crate) data: std::ops::Range<usize>,
}

/// A canonical block's fields before its block-type-specific data.
pub(crate) struct BlockHeader {
    pub(crate) block_type: u64,
    pub(crate) number: u64,
    pub(crate) flags: BlockFlags,
    pub(crate) crc_type: CrcType,
}

impl BlockHeader {
    /// Reads the four fields after the block's array head `a`, leaving the reader before the
    /// data's byte string.
    pub(crate) fn read(r: &mut Reader<'_>, a: &mut cbor::Array) -> Result<Self, DecodeError> {
        r.expect_next(a, "canonical block")?;
        let block_type = r.uint()?;
        r.expect_next(a, "canonical block")?;
        let number = r.uint()?;
        r.expect_next(a, "canonical block")?;
        let flags = BlockFlags(r.uint()?);
        r.expect_next(a, "canonical block")?;
        let crc_at = r.position();
        let crc_type = CrcType::from_code(r.uint()?).map_err(|k| DecodeError::new(crc_at, k))?;
        Ok(Self {
            block_type,
            number,
            flags,
            crc_type,
        })
    }
}

impl RawBlock {
    /// Decodes one canonical block and checks its CRC.
    pub(crate) fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<Self, DecodeError> {
        let start = r.position();
        let mut a = r.array()?;
        let n = r.count_items(a)?;
        if !(5..=6).contains(&n) {
            return Err(DecodeError::new(
                start,
                K::BadArrayLength {
                    what: "canonical block",
                    len: n,
                },
            ));
        }
        let BlockHeader {
            block_type,
            number,
            flags,
            crc_type,
        } = BlockHeader::read(r, &mut a)?;
        if n != 5 + u64::from(crc_type != CrcType::None) {
            return Err(DecodeError::new(
                start,
                K::BadArrayLength {
                    what: "canonical block",
                    len: n,
                },
            ));
        }
        r.expect_next(&mut a, "canonical block")?;
        let data = r.bytes()?;
        check_crc(r, &mut a, buf, start, crc_type, number, "canonical block")?;
        Ok(Self {
            block_type,
            number,
            flags,
            crc_type,
            data,
        })
    }

    /// Interprets the block as an extension block.
    pub(crate) fn into_extension(
        self,
        at: usize,
        buf: &Bytes,
    ) -> Result<ExtensionBlock, DecodeError> {
        let data = ExtensionData::decode(self.block_type, self.number, buf, self.data)
            .map_err(|k| DecodeError::new(at, k))?;
        Ok(ExtensionBlock {
            number: self.number,
            flags: self.flags,
            crc_type: self.crc_type,
            data,
        })
    }
}
