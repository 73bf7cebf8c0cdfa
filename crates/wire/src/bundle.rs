//! A whole bundle: decoding from a received buffer without copying the payload, and encoding into
//! a small header buffer plus the payload by reference.

use std::collections::BTreeSet;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

use crate::block::{
    BLOCK_PAYLOAD, BlockFlags, ExtensionBlock, ExtensionData, HopCount, PAYLOAD_BLOCK_NUMBER,
    RawBlock, block_header_len, put_block_header,
};
use crate::cbor::{self, Reader};
use crate::crc::{self, CrcType};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::primary::{BundleFlags, BundleId, PrimaryBlock, crc_field_len};

/// A BPv7 bundle.
///
/// Extension blocks keep the order in which they arrived; the payload block is always last on the
/// wire and always has block number 1, so it is held apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The primary block.
    pub primary: PrimaryBlock,
    /// Extension blocks, in wire order.
    pub extensions: Vec<ExtensionBlock>,
    /// The payload block.
    pub payload: PayloadBlock,
}

/// The payload block (type 1, number 1).
#[derive(Debug, Clone)]
pub struct PayloadBlock {
    /// Processing flags.
    pub flags: BlockFlags,
    /// CRC protecting the block.
    pub crc_type: CrcType,
    /// The application data unit or, in a fragment, a contiguous part of it. After decoding, a
    /// slice of the received buffer.
    pub data: Bytes,
    /// In a fragment cut in this process ([`Bundle::split_at`]), the whole ADU it was cut from,
    /// which `data` is a slice of; `None` otherwise (never encoded, never decoded, not compared).
    /// A [`crate::Reassembly`] of pieces that all still point into it gives it back rather than
    /// copying them into a new buffer: where bundles pass between nodes without being encoded,
    /// as in a simulator, a bundle cut into pieces and rebuilt at its destination stays one
    /// buffer. Boxed: it is rare, and every bundle carries the field.
    pub origin: Option<Box<Bytes>>,
}

impl PartialEq for PayloadBlock {
    fn eq(&self, other: &Self) -> bool {
        (self.flags, self.crc_type, &self.data) == (other.flags, other.crc_type, &other.data)
    }
}

impl Eq for PayloadBlock {}

/// Whether two blocks share a number: a scan for the few blocks bundles usually carry, a set for
/// the many a hostile bundle may (so the check stays O(n log n)).
fn has_duplicate_number(blocks: &[ExtensionBlock]) -> bool {
    if blocks.len() <= 16 {
        blocks
            .iter()
            .enumerate()
            .any(|(i, b)| blocks[..i].iter().any(|e| e.number == b.number))
    } else {
        let mut seen = BTreeSet::new();
        !blocks.iter().all(|b| seen.insert(b.number))
    }
}

/// What the RFC's reception procedure (§5.6 step 4) says to do about blocks of types this node
/// cannot process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnsupportedBlocks {
    /// A block asked for the bundle to be deleted ("Block unsupported").
    pub delete_bundle: bool,
    /// A block asked for a reception status report with reason "Block unsupported".
    pub report: bool,
    /// Numbers of the blocks removed because they asked to be discarded.
    pub discarded: Vec<u64>,
}

/// An encoded bundle: the header blocks in one small buffer and the payload by reference, so a
/// convergence layer can hand all three parts to one vectored write without copying the payload.
///
/// Implements [`bytes::Buf`], so it can also be consumed as a byte stream.
#[derive(Debug, Clone)]
pub struct EncodedBundle {
    head: Bytes,
    payload: Bytes,
    tail: Bytes,
}

impl EncodedBundle {
    /// The parts in wire order: blocks up to the payload's byte-string head, the payload, and the
    /// payload block's CRC with the closing break.
    pub fn parts(&self) -> [&Bytes; 3] {
        [&self.head, &self.payload, &self.tail]
    }

    /// The parts as `IoSlice`s for `write_vectored`.
    pub fn io_slices(&self) -> [IoSlice<'_>; 3] {
        [
            IoSlice::new(&self.head),
            IoSlice::new(&self.payload),
            IoSlice::new(&self.tail),
        ]
    }

    /// Total encoded length.
    pub fn len(&self) -> usize {
        self.head.len() + self.payload.len() + self.tail.len()
    }

    /// Whether nothing remains (only after the whole bundle was consumed as a `Buf`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bundle in one contiguous buffer (this copies the payload).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len());
        for part in self.parts() {
            out.extend_from_slice(part);
        }
        out.freeze()
    }
}

impl Buf for EncodedBundle {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.parts()
            .into_iter()
            .find(|p| !p.is_empty())
            .map_or(&[], |p| &p[..])
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(
            cnt <= self.remaining(),
            "advance past the end of an EncodedBundle"
        );
        for part in [&mut self.head, &mut self.payload, &mut self.tail] {
            let n = cnt.min(part.len());
            part.advance(n);
            cnt -= n;
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for part in self.parts() {
            if n == dst.len() {
                break;
            }
            if !part.is_empty() {
                dst[n] = IoSlice::new(part);
                n += 1;
            }
        }
        n
    }
}

impl Bundle {
    /// A bundle carrying `payload`, with no extension blocks and a CRC-32C on the payload block.
    pub fn new(primary: PrimaryBlock, payload: Bytes) -> Self {
        Self {
            primary,
            extensions: Vec::new(),
            payload: PayloadBlock {
                flags: BlockFlags::default(),
                crc_type: CrcType::Crc32c,
                data: payload,
                origin: None,
            },
        }
    }

    /// The bundle's identity.
    pub fn id(&self) -> BundleId {
        BundleId {
            source: self.primary.source.clone(),
            creation: self.primary.creation,
            fragment: self
                .primary
                .fragment
                .map(|f| (f.offset, self.payload.data.len() as u64)),
        }
    }

    /// The first extension block of `block_type`.
    pub fn extension(&self, block_type: u64) -> Option<&ExtensionBlock> {
        self.extensions
            .iter()
            .find(|b| b.data.block_type() == block_type)
    }

    /// The previous node, if the bundle carries a previous node block.
    pub fn previous_node(&self) -> Option<&Eid> {
        self.extensions.iter().find_map(|b| match &b.data {
            ExtensionData::PreviousNode(eid) => Some(eid),
            _ => None,
        })
    }

    /// The bundle age in milliseconds, if the bundle carries a bundle age block.
    pub fn age_ms(&self) -> Option<u64> {
        self.extensions.iter().find_map(|b| match b.data {
            ExtensionData::BundleAge(ms) => Some(ms),
            _ => None,
        })
    }

    /// The hop count block's content, if any.
    pub fn hop_count(&self) -> Option<HopCount> {
        self.extensions.iter().find_map(|b| match b.data {
            ExtensionData::HopCount(h) => Some(h),
            _ => None,
        })
    }

    /// The lowest block number not yet used, for adding an extension block.
    pub fn next_block_number(&self) -> u64 {
        self.extensions
            .iter()
            .map(|b| b.number)
            .max()
            .unwrap_or(PAYLOAD_BLOCK_NUMBER)
            .max(PAYLOAD_BLOCK_NUMBER)
            + 1
    }

    /// Decodes one bundle that fills `buf` exactly.
    ///
    /// Checks every CRC over the received bytes and every rule of RFC 9171 that concerns a single
    /// bundle (see [`Bundle::validate`]). The payload and unknown blocks' data are slices of
    /// `buf`: nothing of size proportional to the payload is copied or allocated.
    pub fn decode(buf: Bytes) -> Result<Self, DecodeError> {
        let bundle = Self::decode_structure(buf)?;
        bundle.validate().map_err(|k| DecodeError::new(0, k))?;
        Ok(bundle)
    }

    /// Decodes like [`Bundle::decode`] (CBOR, blocks, CRCs) without the rules that span blocks
    /// ([`Bundle::validate`]). Not for received bundles: for published test vectors that break
    /// such a rule, such as RFC 9173's examples (creation time 0 without a bundle age block).
    pub fn decode_structure(buf: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(&buf);
        let head_at = r.position();
        if r.peek()? != cbor::ARRAY_INDEFINITE {
            // RFC 9171 §4.1: a bundle SHALL be an indefinite-length array.
            return Err(DecodeError::new(
                head_at,
                K::UnexpectedType {
                    expected: "indefinite-length array (a bundle)",
                },
            ));
        }
        let mut outer = r.array()?;
        r.expect_next(&mut outer, "bundle")?;
        let primary = PrimaryBlock::decode(&mut r, &buf)?;
        let mut extensions = Vec::new();
        let mut payload = None;
        while r.has_next(&mut outer)? {
            let at = r.position();
            if payload.is_some() {
                return Err(DecodeError::new(
                    at,
                    K::InvalidBundle("a block follows the payload block"),
                ));
            }
            let block = RawBlock::decode(&mut r, &buf)?;
            if block.block_type == BLOCK_PAYLOAD {
                if block.number != PAYLOAD_BLOCK_NUMBER {
                    return Err(DecodeError::new(
                        at,
                        K::InvalidBlock {
                            block: block.number,
                            reason: "payload block number is not 1",
                        },
                    ));
                }
                payload = Some(PayloadBlock {
                    flags: block.flags,
                    crc_type: block.crc_type,
                    data: buf.slice(block.data),
                    origin: None,
                });
            } else {
                extensions.push(block.into_extension(at, &buf)?);
            }
        }
        let end = r.position();
        if !r.is_empty() {
            return Err(DecodeError::new(end, K::TrailingBytes));
        }
        let payload =
            payload.ok_or_else(|| DecodeError::new(end, K::InvalidBundle("no payload block")))?;
        Ok(Bundle {
            primary,
            extensions,
            payload,
        })
    }

    /// Checks the rules of RFC 9171 that span blocks: unique block numbers (never 0 or 1 for an
    /// extension), at most one previous node, bundle age and hop count block, a bundle age block
    /// when the creation time is unknown, no status reports requested for administrative records
    /// or anonymous bundles, anonymous bundles not fragmentable, and fragment bounds.
    pub fn validate(&self) -> Result<(), K> {
        let p = &self.primary;
        for (i, b) in self.extensions.iter().enumerate() {
            if b.number <= PAYLOAD_BLOCK_NUMBER {
                return Err(K::InvalidBlock {
                    block: b.number,
                    reason: "extension block number 0 or 1",
                });
            }
            let t = b.data.block_type();
            if t == BLOCK_PAYLOAD {
                return Err(K::InvalidBundle("more than one payload block"));
            }
            // Previous node, bundle age and hop count may each occur once. Bundles carry a
            // handful of blocks, so a scan of the earlier ones is cheaper than building a set.
            if matches!(
                b.data,
                ExtensionData::PreviousNode(_)
                    | ExtensionData::BundleAge(_)
                    | ExtensionData::HopCount(_)
            ) && self.extensions[..i]
                .iter()
                .any(|e| e.data.block_type() == t)
            {
                return Err(K::InvalidBundle(
                    "more than one previous node, bundle age or hop count block",
                ));
            }
            if let ExtensionData::HopCount(h) = b.data
                && !(1..=255).contains(&h.limit)
            {
                return Err(K::InvalidBlock {
                    block: b.number,
                    reason: "hop limit outside 1..=255",
                });
            }
        }
        if has_duplicate_number(&self.extensions) {
            return Err(K::InvalidBundle("two blocks with the same number"));
        }
        if p.creation.time.is_unknown() && self.age_ms().is_none() {
            return Err(K::InvalidBundle(
                "creation time is unknown and there is no bundle age block",
            ));
        }
        let no_reports = p.is_admin_record() || p.source.is_null();
        if no_reports && p.flags.any_report_requested() {
            return Err(K::InvalidBundle(
                "status reports requested for an administrative record or anonymous bundle",
            ));
        }
        if no_reports
            && (self
                .payload
                .flags
                .contains(BlockFlags::REPORT_IF_UNPROCESSABLE)
                || self
                    .extensions
                    .iter()
                    .any(|b| b.flags.contains(BlockFlags::REPORT_IF_UNPROCESSABLE)))
        {
            return Err(K::InvalidBundle(
                "block asks for a status report in an administrative record or anonymous bundle",
            ));
        }
        if p.source.is_null() && !p.flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
            return Err(K::InvalidBundle(
                "anonymous bundle without the must-not-fragment flag",
            ));
        }
        if let Some(f) = p.fragment {
            let end = f.offset.checked_add(self.payload.data.len() as u64);
            if end.is_none_or(|end| end > f.total_adu_len) {
                return Err(K::InvalidBundle(
                    "fragment extends past the total ADU length",
                ));
            }
        }
        Ok(())
    }

    /// Applies RFC 9171 §5.6 step 4 to the extension blocks whose types `supported` does not
    /// accept: blocks flagged "discard if unprocessable" are removed (unless the bundle must be
    /// deleted anyway), and the result says whether to delete the bundle and whether to report.
    ///
    /// Previous node, bundle age and hop count blocks are always supported: this crate parses
    /// them.
    pub fn apply_unsupported_block_rules(
        &mut self,
        supported: impl Fn(u64) -> bool,
    ) -> UnsupportedBlocks {
        let mut outcome = UnsupportedBlocks::default();
        let unsupported = |b: &ExtensionBlock| matches!(b.data, ExtensionData::Unknown { block_type, .. } if !supported(block_type));
        for b in self.extensions.iter().filter(|b| unsupported(b)) {
            outcome.report |= b.flags.contains(BlockFlags::REPORT_IF_UNPROCESSABLE);
            outcome.delete_bundle |= b.flags.contains(BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE);
        }
        if !outcome.delete_bundle {
            self.extensions.retain(|b| {
                let discard =
                    unsupported(b) && b.flags.contains(BlockFlags::DISCARD_IF_UNPROCESSABLE);
                if discard {
                    outcome.discarded.push(b.number);
                }
                !discard
            });
        }
        outcome
    }

    /// The lengths of the three parts `encode` would produce (header blocks, payload, payload CRC
    /// and closing break), without computing the payload CRC: what a scheduler or a simulator
    /// needs to know about a large bundle it does not send yet.
    pub fn encoded_sizes(&self) -> (usize, usize, usize) {
        // Counted, not encoded: the node asks for every bundle it sends (a link's window), and
        // encoding the head would compute its CRCs.
        let p = &self.payload;
        let head = 1
            + self.primary.encoded_len()
            + self
                .extensions
                .iter()
                .map(ExtensionBlock::encoded_len)
                .sum::<usize>()
            + block_header_len(BLOCK_PAYLOAD, PAYLOAD_BLOCK_NUMBER, p.flags, p.crc_type)
            + cbor::head_len(p.data.len() as u64);
        (head, p.data.len(), crc_field_len(p.crc_type) + 1)
    }

    /// Everything before the payload bytes: the array start, the primary and extension blocks,
    /// and the payload block's header up to its byte-string head. Also returns where the payload
    /// block starts (its CRC covers the block from there).
    fn encode_head(&self) -> (Vec<u8>, usize) {
        let mut head = Vec::with_capacity(self.encoded_header_hint());
        head.push(cbor::ARRAY_INDEFINITE);
        self.primary.encode(&mut head);
        let mut scratch = Vec::new();
        for block in &self.extensions {
            block.encode(&mut head, &mut scratch);
        }
        let payload_start = head.len();
        let p = &self.payload;
        put_block_header(
            &mut head,
            BLOCK_PAYLOAD,
            PAYLOAD_BLOCK_NUMBER,
            p.flags,
            p.crc_type,
        );
        cbor::put_head(&mut head, cbor::BYTES, p.data.len() as u64);
        (head, payload_start)
    }

    /// Encodes the bundle: blocks up to the payload into one buffer, the payload by reference.
    ///
    /// The payload block's CRC is computed over the payload in place.
    pub fn encode(&self) -> EncodedBundle {
        let (mut head, payload_start) = self.encode_head();
        let p = &self.payload;

        // The tail (payload CRC and the closing break) shares the head's allocation.
        let head_len = head.len();
        if p.crc_type != CrcType::None {
            cbor::put_head(&mut head, cbor::BYTES, p.crc_type.value_len() as u64);
            let mut digest = p.crc_type.digest();
            digest.update(&head[payload_start..head_len]);
            digest.update(&p.data);
            digest.update(&head[head_len..]);
            digest.update_zeroed_value();
            let (value, len) = crc::value_to_be(p.crc_type, digest.finish());
            head.extend_from_slice(&value[..len]);
        }
        head.push(cbor::BREAK);
        let all = Bytes::from(head);
        EncodedBundle {
            head: all.slice(..head_len),
            payload: p.data.clone(),
            tail: all.slice(head_len..),
        }
    }

    fn encoded_header_hint(&self) -> usize {
        // Extension blocks are small; 32 bytes each covers the common ones.
        1 + self.primary.encoded_len_hint() + 32 * self.extensions.len() + 32 + 6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DtnTime;
    use crate::primary::CreationTimestamp;

    fn sample(crc: CrcType, payload: &'static [u8]) -> Bundle {
        let mut primary = PrimaryBlock::new(
            "dtn://dest/inbox".parse().unwrap(),
            "ipn:7.1".parse().unwrap(),
            CreationTimestamp {
                time: DtnTime::from_millis(781_000_000_000),
                sequence: 3,
            },
            3_600_000,
        );
        primary.crc_type = crc;
        let mut b = Bundle::new(primary, Bytes::from_static(payload));
        b.payload.crc_type = crc;
        b.extensions.push(ExtensionBlock {
            crc_type: crc,
            ..ExtensionBlock::new(
                2,
                ExtensionData::HopCount(HopCount {
                    limit: 30,
                    count: 2,
                }),
            )
        });
        b.extensions.push(ExtensionBlock::new(
            3,
            ExtensionData::PreviousNode("ipn:3.0".parse().unwrap()),
        ));
        b.extensions
            .push(ExtensionBlock::new(4, ExtensionData::BundleAge(1234)));
        b.extensions.push(ExtensionBlock {
            flags: BlockFlags(BlockFlags::DISCARD_IF_UNPROCESSABLE),
            ..ExtensionBlock::new(
                5,
                ExtensionData::Unknown {
                    block_type: 200,
                    data: Bytes::from_static(b"\x01\x02"),
                },
            )
        });
        b
    }

    #[test]
    fn encoded_sizes_match_encode_for_every_crc() {
        for crc in [CrcType::None, CrcType::Crc16, CrcType::Crc32c] {
            for len in [0usize, 1, 23, 24, 300, 70_000] {
                let mut b = sample(crc, b"");
                b.payload.data = Bytes::from(vec![5u8; len]);
                if len == 300 {
                    // Every field at its widest: the sizes are counted, not encoded.
                    b.primary.fragment = Some(crate::primary::FragmentInfo {
                        offset: u64::MAX,
                        total_adu_len: u64::MAX,
                    });
                    b.primary.lifetime_ms = u64::MAX;
                    b.primary.creation.sequence = u64::MAX;
                    b.extensions.push(ExtensionBlock {
                        crc_type: crc,
                        ..ExtensionBlock::new(u64::MAX, ExtensionData::BundleAge(u64::MAX))
                    });
                }
                let enc = b.encode();
                let parts = enc.parts();
                assert_eq!(
                    b.encoded_sizes(),
                    (parts[0].len(), parts[1].len(), parts[2].len()),
                    "{crc:?} {len}"
                );
            }
        }
    }

    #[test]
    fn hand_assembled_bundle_matches_rfc_9171_layout() {
        // [_ primary, payload ] with no CRCs, laid out field by field from RFC 9171 §4.3.1/§4.3.2.
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x9f,                               // bundle: indefinite-length array
            0x88,                               // primary block: 8 items (no fragment, no CRC)
            0x07, 0x00, 0x00,                   // version 7, flags 0, CRC type 0
            0x82, 0x02, 0x82, 0x02, 0x01,       // destination ipn:2.1
            0x82, 0x02, 0x82, 0x01, 0x00,       // source ipn:1.0
            0x82, 0x02, 0x82, 0x01, 0x00,       // report-to ipn:1.0
            0x82, 0x01, 0x00,                   // creation timestamp [1, 0]
            0x19, 0x03, 0xe8,                   // lifetime 1000 ms
            0x85, 0x01, 0x01, 0x00, 0x00,       // payload block: type 1, number 1, flags 0, CRC 0
            0x43, b'a', b'b', b'c',             // payload "abc"
            0xff,                               // break
        ];
        let mut primary = PrimaryBlock::new(
            Eid::ipn(2, 1),
            Eid::ipn(1, 0),
            CreationTimestamp {
                time: DtnTime::from_millis(1),
                sequence: 0,
            },
            1000,
        );
        primary.crc_type = CrcType::None;
        let mut b = Bundle::new(primary, Bytes::from_static(b"abc"));
        b.payload.crc_type = CrcType::None;
        assert_eq!(&b.encode().to_bytes()[..], expected);
        assert_eq!(Bundle::decode(Bytes::from_static(expected)).unwrap(), b);
    }

    #[test]
    fn round_trip_every_crc_type() {
        for crc in [CrcType::None, CrcType::Crc16, CrcType::Crc32c] {
            let b = sample(crc, b"hello, ferry");
            let wire = b.encode().to_bytes();
            let back = Bundle::decode(wire.clone()).unwrap();
            assert_eq!(back, b);
            // Deterministic: re-encoding what was decoded gives the same bytes.
            assert_eq!(back.encode().to_bytes(), wire);
        }
    }

    #[test]
    fn payload_is_a_slice_of_the_input() {
        let wire = sample(CrcType::Crc32c, &[7; 4096]).encode().to_bytes();
        let back = Bundle::decode(wire.clone()).unwrap();
        let range = wire.as_ptr_range();
        assert!(
            range.contains(&back.payload.data.as_ptr()),
            "payload was copied"
        );
    }

    #[test]
    fn encoded_parts_hold_the_payload_by_reference() {
        let payload = Bytes::from(vec![9u8; 10_000]);
        let mut b = sample(CrcType::Crc32c, b"");
        b.payload.data = payload.clone();
        let enc = b.encode();
        assert_eq!(enc.parts()[1].as_ptr(), payload.as_ptr());
        assert_eq!(enc.parts()[2].len(), 6, "CRC-32C byte string and break");
        // Consuming it as a Buf yields the same bytes as to_bytes.
        let mut as_buf = enc.clone();
        let mut collected = Vec::new();
        while as_buf.has_remaining() {
            let c = as_buf.chunk().len().min(777);
            collected.extend_from_slice(&as_buf.chunk()[..c]);
            as_buf.advance(c);
        }
        assert_eq!(collected, enc.to_bytes());
    }

    #[test]
    fn every_flipped_bit_is_caught_by_the_crcs() {
        let wire = sample(CrcType::Crc32c, b"payload under CRC")
            .encode()
            .to_bytes()
            .to_vec();
        let unprotected = sample(CrcType::Crc32c, b"payload under CRC");
        // Blocks 3, 4 and 5 carry no CRC, so flips there may decode; every other flip must fail.
        let mut undetected = 0;
        for i in 0..wire.len() {
            for bit in 0..8 {
                let mut m = wire.clone();
                m[i] ^= 1 << bit;
                if let Ok(b) = Bundle::decode(Bytes::from(m)) {
                    assert_ne!(
                        b, unprotected,
                        "a flip at byte {i} bit {bit} decoded to the original"
                    );
                    assert_eq!(
                        b.primary, unprotected.primary,
                        "primary block changed undetected at {i}"
                    );
                    assert_eq!(
                        b.payload, unprotected.payload,
                        "payload changed undetected at {i}"
                    );
                    undetected += 1;
                }
            }
        }
        assert!(
            undetected > 0,
            "the blocks without CRC should let some flips through"
        );
    }

    #[test]
    fn unsupported_blocks_follow_their_flags() {
        let mut b = sample(CrcType::Crc32c, b"x");
        let out = b.apply_unsupported_block_rules(|_| false);
        assert_eq!(
            out,
            UnsupportedBlocks {
                delete_bundle: false,
                report: false,
                discarded: vec![5]
            }
        );
        assert!(b.extension(200).is_none());

        let mut b = sample(CrcType::Crc32c, b"x");
        b.extensions[3].flags = BlockFlags(
            BlockFlags::DISCARD_IF_UNPROCESSABLE
                | BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE
                | BlockFlags::REPORT_IF_UNPROCESSABLE,
        );
        let out = b.apply_unsupported_block_rules(|_| false);
        assert!(out.delete_bundle && out.report && out.discarded.is_empty());

        let mut b = sample(CrcType::Crc32c, b"x");
        let out = b.apply_unsupported_block_rules(|t| t == 200);
        assert_eq!(out, UnsupportedBlocks::default());
        assert_eq!(b.extensions.len(), 4);
    }

    #[test]
    fn bundle_level_rules_are_enforced() {
        let check = |b: &Bundle| Bundle::decode(b.encode().to_bytes()).map_err(|e| e.kind);

        let mut b = sample(CrcType::Crc32c, b"x");
        b.extensions[1].number = 2;
        assert_eq!(
            check(&b),
            Err(K::InvalidBundle("two blocks with the same number"))
        );

        let mut b = sample(CrcType::Crc32c, b"x");
        b.extensions
            .push(ExtensionBlock::new(9, ExtensionData::BundleAge(1)));
        assert!(matches!(check(&b), Err(K::InvalidBundle(_))));

        let mut b = sample(CrcType::Crc32c, b"x");
        b.primary.creation.time = DtnTime::UNKNOWN;
        b.extensions
            .retain(|x| x.data.block_type() != crate::block::BLOCK_BUNDLE_AGE);
        assert!(matches!(check(&b), Err(K::InvalidBundle(_))));

        let mut b = sample(CrcType::Crc32c, b"x");
        b.primary.source = Eid::Null;
        assert!(
            matches!(check(&b), Err(K::InvalidBundle(_))),
            "anonymous without must-not-fragment"
        );
        b.primary.flags = BundleFlags(BundleFlags::MUST_NOT_FRAGMENT);
        assert!(check(&b).is_ok());
        b.primary.flags =
            BundleFlags(BundleFlags::MUST_NOT_FRAGMENT | BundleFlags::REPORT_DELIVERY);
        assert!(matches!(check(&b), Err(K::InvalidBundle(_))));

        let mut b = sample(CrcType::Crc32c, b"0123456789");
        b.primary.fragment = Some(crate::primary::FragmentInfo {
            offset: 5,
            total_adu_len: 14,
        });
        assert_eq!(
            check(&b),
            Err(K::InvalidBundle(
                "fragment extends past the total ADU length"
            ))
        );
        b.primary.fragment = Some(crate::primary::FragmentInfo {
            offset: 5,
            total_adu_len: 15,
        });
        assert_eq!(check(&b).unwrap().id().fragment, Some((5, 10)));

        let mut b = sample(CrcType::Crc32c, b"x");
        b.extensions[0].data = ExtensionData::HopCount(HopCount { limit: 0, count: 0 });
        assert!(matches!(check(&b), Err(K::InvalidBlock { block: 2, .. })));
    }

    #[test]
    fn structural_errors_are_precise() {
        let good = sample(CrcType::Crc32c, b"abc").encode().to_bytes();
        // Every strict prefix fails as truncated (never a panic, never success).
        for n in 0..good.len() {
            let err = Bundle::decode(good.slice(..n)).unwrap_err();
            assert!(
                matches!(err.kind, K::Truncated | K::LengthExceedsInput { .. }),
                "prefix of {n} bytes: {err}"
            );
        }
        let mut extra = good.to_vec();
        extra.push(0);
        assert_eq!(
            Bundle::decode(Bytes::from(extra)).unwrap_err().kind,
            K::TrailingBytes
        );

        // A definite-length outer array is refused (RFC 9171 §4.1).
        let mut definite = good.to_vec();
        definite[0] = 0x82;
        assert!(matches!(
            Bundle::decode(Bytes::from(definite)).unwrap_err().kind,
            K::UnexpectedType { .. }
        ));

        // Version 6.
        let mut v6 = good.to_vec();
        assert_eq!(v6[2], 0x07);
        v6[2] = 0x06;
        assert_eq!(
            Bundle::decode(Bytes::from(v6)).unwrap_err().kind,
            K::UnsupportedVersion(6)
        );
    }

    #[test]
    fn payload_crc_mismatch_names_block_1() {
        let mut wire = sample(CrcType::Crc32c, b"abcdef")
            .encode()
            .to_bytes()
            .to_vec();
        let at = wire.windows(6).position(|w| w == b"abcdef").unwrap();
        wire[at] = b'X';
        match Bundle::decode(Bytes::from(wire)).unwrap_err().kind {
            K::CrcMismatch { block: 1, .. } => {}
            other => panic!("expected a CRC mismatch in block 1, got {other:?}"),
        }
    }
}
