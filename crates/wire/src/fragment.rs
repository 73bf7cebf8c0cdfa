//! Bundle fragmentation and ADU reassembly (RFC 9171 §5.8 and §5.9), as pure functions on values:
//! the node decides when to fragment (a contact too short for the whole bundle) and where the
//! pieces of an ADU wait until they are complete.
//!
//! Fragment payloads are slices of the original payload (no copy); only the final reassembly of an
//! ADU that arrived in several pieces concatenates them.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use crate::block::{
    BLOCK_PAYLOAD, BlockFlags, BlockHeader, ExtensionBlock, ExtensionData, PAYLOAD_BLOCK_NUMBER,
    RawBlock,
};
use crate::bundle::{Bundle, EncodedBundle, PayloadBlock};
use crate::cbor::{self, Arg, Reader};
use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::primary::{BundleFlags, BundleId, FragmentInfo, PrimaryBlock};

/// Why a bundle cannot be split as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FragmentError {
    /// The bundle's "must not be fragmented" flag is set.
    #[error("the bundle must not be fragmented")]
    MustNotFragment,
    /// The split point is not strictly inside the payload (RFC 9171 §5.8: 0 < N < M).
    #[error("cannot split a {len}-byte payload at {at}")]
    BadSplitPoint {
        /// The requested split point.
        at: usize,
        /// The payload length.
        len: usize,
    },
    /// A fragment size of zero.
    #[error("fragments must carry at least one payload byte")]
    ZeroFragmentSize,
}

/// Why a fragment does not belong to a reassembly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReassemblyError {
    /// The bundle is not a fragment.
    #[error("the bundle is not a fragment")]
    NotAFragment,
    /// The fragment has another source or creation timestamp.
    #[error("the fragment belongs to another bundle")]
    OtherBundle,
    /// The fragment declares another total ADU length than the fragments before it.
    #[error("total ADU length {found} differs from {expected}")]
    TotalLengthMismatch {
        /// The length the first fragment declared.
        expected: u64,
        /// The length this fragment declares.
        found: u64,
    },
}

impl Bundle {
    /// Splits the bundle into two fragments whose payloads are the first `at` and the remaining
    /// bytes of this bundle's payload (RFC 9171 §5.8).
    ///
    /// The first fragment keeps every extension block. The second keeps the blocks flagged
    /// "replicate in every fragment" and the previous node, bundle age and hop count blocks, which
    /// describe the bundle's journey and are needed by every piece (a fragment of a bundle without
    /// a creation time must carry its age, and each piece counts its own hops). A fragment of a
    /// fragment keeps its offsets relative to the original ADU.
    pub fn split_at(&self, at: usize) -> Result<(Bundle, Bundle), FragmentError> {
        let len = self.payload.data.len();
        if self.primary.flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
            return Err(FragmentError::MustNotFragment);
        }
        if at == 0 || at >= len {
            return Err(FragmentError::BadSplitPoint { at, len });
        }
        let (offset, total) = match self.primary.fragment {
            Some(f) => (f.offset, f.total_adu_len),
            None => (0, len as u64),
        };
        // The whole ADU the pieces point into, when it is known here.
        let origin = match self.primary.fragment {
            Some(_) => self.payload.origin.clone(),
            None => Some(Box::new(self.payload.data.clone())),
        };
        let piece = |start: usize, end: usize, extensions: Vec<ExtensionBlock>| {
            let mut b = self.clone();
            b.primary.fragment = Some(FragmentInfo {
                offset: offset + start as u64,
                total_adu_len: total,
            });
            b.primary.flags = b.primary.flags.with(BundleFlags::IS_FRAGMENT, true);
            b.extensions = extensions;
            b.payload.data = self.payload.data.slice(start..end);
            b.payload.origin = origin.clone();
            b
        };
        let replicated = self
            .extensions
            .iter()
            .filter(|b| {
                b.flags.contains(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT)
                    || matches!(
                        b.data,
                        ExtensionData::PreviousNode(_)
                            | ExtensionData::BundleAge(_)
                            | ExtensionData::HopCount(_)
                    )
            })
            .cloned()
            .collect();
        Ok((
            piece(0, at, self.extensions.clone()),
            piece(at, len, replicated),
        ))
    }

    /// Splits the bundle into fragments carrying at most `max_payload` payload bytes each, in
    /// payload order. A bundle whose payload already fits is returned whole.
    pub fn fragment(&self, max_payload: usize) -> Result<Vec<Bundle>, FragmentError> {
        if max_payload == 0 {
            return Err(FragmentError::ZeroFragmentSize);
        }
        let mut pieces = Vec::new();
        let mut rest = self.clone();
        while rest.payload.data.len() > max_payload {
            let (head, tail) = rest.split_at(max_payload)?;
            pieces.push(head);
            rest = tail;
        }
        pieces.push(rest);
        Ok(pieces)
    }
}

/// The primary block at the start of an encoded bundle, from as much of it as has arrived: what a
/// convergence layer reads from a transfer's first segment to decide whether to refuse the rest
/// (TCPCL's XFER_REFUSE for a bundle the node already holds). `Ok(None)` when the primary block
/// has not arrived whole yet; an error when the bytes cannot be the start of a bundle.
pub fn peek_primary(prefix: Bytes) -> Result<Option<PrimaryBlock>, DecodeError> {
    let mut r = Reader::new(&prefix);
    match r.peek() {
        Err(_) => return Ok(None),
        Ok(cbor::ARRAY_INDEFINITE) => {}
        Ok(_) => {
            return Err(r.err(K::UnexpectedType {
                expected: "indefinite-length array (a bundle)",
            }));
        }
    }
    let mut outer = r.array()?;
    match r.has_next(&mut outer) {
        Ok(true) => {}
        Ok(false) => return Err(r.err(K::InvalidBundle("a bundle without a primary block"))),
        Err(e) if is_cut(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    match PrimaryBlock::decode(&mut r, &prefix) {
        Ok(p) => Ok(Some(p)),
        Err(e) if is_cut(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a receiver keeps of a transfer that was cut before the whole bundle arrived (reactive
/// fragmentation): a fragment carrying the payload bytes that did arrive.
///
/// `received` is the prefix of an encoded bundle that a convergence layer delivered. If it holds
/// the whole bundle, this is [`Bundle::decode`]. Otherwise, if every block before the payload and
/// the payload block's header arrived (their CRCs are checked) and at least one payload byte did
/// too, the result is a fragment with those bytes, all extension blocks, and a payload block whose
/// CRC is recomputed when it is encoded again: the cut payload's own CRC cannot be checked, so the
/// bytes are as trustworthy as the convergence layer that carried them (TCP's checksums). `None`
/// when nothing usable arrived, or the bundle must not be fragmented.
pub fn decode_cut_transfer(received: Bytes) -> Result<Option<Bundle>, DecodeError> {
    let mut r = Reader::new(&received);
    match r.peek() {
        Err(_) => return Ok(None),
        Ok(cbor::ARRAY_INDEFINITE) => {}
        Ok(_) => {
            return Err(r.err(K::UnexpectedType {
                expected: "indefinite-length array (a bundle)",
            }));
        }
    }
    let mut outer = r.array()?;
    match r.has_next(&mut outer) {
        Ok(true) => {}
        Ok(false) => return Bundle::decode(received).map(Some),
        Err(e) if is_cut(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    let primary = match PrimaryBlock::decode(&mut r, &received) {
        Ok(p) => p,
        Err(e) if is_cut(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut extensions = Vec::new();
    loop {
        let at = r.position();
        match r.has_next(&mut outer) {
            Ok(true) => {}
            // The array ended before a payload block: not a bundle; decode says precisely why.
            Ok(false) => return Bundle::decode(received).map(Some),
            Err(e) if is_cut(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
        let mut probe = r.clone();
        match RawBlock::decode(&mut probe, &received) {
            Ok(block) if block.block_type == BLOCK_PAYLOAD => {
                if !probe.is_empty() || block.number != PAYLOAD_BLOCK_NUMBER {
                    return Bundle::decode(received).map(Some);
                }
                // Only the closing break is missing: every block arrived whole and was checked.
                let bundle = Bundle {
                    primary,
                    extensions,
                    payload: PayloadBlock {
                        flags: block.flags,
                        crc_type: block.crc_type,
                        data: received.slice(block.data),
                        origin: None,
                    },
                };
                bundle.validate().map_err(|k| DecodeError::new(0, k))?;
                return Ok(Some(bundle));
            }
            Ok(block) => {
                extensions.push(block.into_extension(at, &received)?);
                r = probe;
            }
            Err(e) if is_cut(&e) => {
                return cut_payload_block(&mut r, &received, primary, extensions);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a decode error only says that the input stopped early.
fn is_cut(e: &DecodeError) -> bool {
    matches!(e.kind, K::Truncated | K::LengthExceedsInput { .. })
}

/// Reads the header of a payload block whose data was cut, and makes the fragment.
fn cut_payload_block(
    r: &mut Reader<'_>,
    received: &Bytes,
    mut primary: PrimaryBlock,
    extensions: Vec<ExtensionBlock>,
) -> Result<Option<Bundle>, DecodeError> {
    let header = (|| {
        let mut a = r.array()?;
        let header = BlockHeader::read(r, &mut a)?;
        r.expect_next(&mut a, "canonical block")?;
        let len_at = r.position();
        match r.head()? {
            (cbor::BYTES, Arg::Value(len)) => Ok((header, len)),
            _ => Err(DecodeError::new(
                len_at,
                K::UnexpectedType {
                    expected: "byte string",
                },
            )),
        }
    })();
    let (
        BlockHeader {
            block_type,
            number,
            flags,
            crc_type,
        },
        declared,
    ) = match header {
        Ok(h) => h,
        // The cut fell inside the header: nothing of the payload arrived.
        Err(e) if is_cut(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    if block_type != BLOCK_PAYLOAD || number != PAYLOAD_BLOCK_NUMBER {
        // An extension block was cut: no payload byte arrived.
        return Ok(None);
    }
    let available = received.len() - r.position();
    let usable = usize::try_from(declared).map_or(available, |d| d.min(available));
    if usable == 0 || primary.flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
        return Ok(None);
    }
    let (offset, total) = match primary.fragment {
        Some(f) => (f.offset, f.total_adu_len),
        None => (0, declared),
    };
    primary.fragment = Some(FragmentInfo {
        offset,
        total_adu_len: total,
    });
    primary.flags = primary.flags.with(BundleFlags::IS_FRAGMENT, true);
    let start = r.position();
    let bundle = Bundle {
        primary,
        extensions,
        payload: PayloadBlock {
            flags,
            crc_type,
            data: received.slice(start..start + usable),
            origin: None,
        },
    };
    bundle.validate().map_err(|k| DecodeError::new(0, k))?;
    Ok(Some(bundle))
}

impl EncodedBundle {
    /// How many payload bytes lie within the first `sent` bytes of this encoding (as returned by
    /// [`Bundle::encode`], before any of it was consumed as a `Buf`): after a
    /// transfer of `sent` bytes was acknowledged and then cut, the sender forwards only the
    /// rest of the payload, as the fragment `bundle.split_at(n)` returns.
    pub fn payload_bytes_within(&self, sent: usize) -> usize {
        let [head, payload, _] = self.parts();
        sent.saturating_sub(head.len()).min(payload.len())
    }
}

/// The fragments of one ADU received so far (RFC 9171 §5.9). Overlapping fragments, as different
/// fragmentation episodes produce, contribute only their new bytes ("material extents").
#[derive(Debug, Clone)]
pub struct Reassembly {
    id: BundleId,
    total: u64,
    /// Disjoint extents of the ADU by offset.
    extents: BTreeMap<u64, Bytes>,
    received: u64,
    /// The fragment at offset 0, which carries every extension block of the original. (Boxed,
    /// like `any`, to keep the reassembly small where it is returned by value.)
    first: Option<Box<Bundle>>,
    /// Any fragment, for the primary block when the first has not arrived yet.
    any: Box<Bundle>,
    /// The whole ADU the fragments were cut from in this process, if one of them knew it
    /// ([`PayloadBlock::origin`](crate::PayloadBlock::origin)).
    origin: Option<Bytes>,
}

impl Reassembly {
    /// Starts a reassembly with one fragment.
    pub fn new(fragment: Bundle) -> Result<Self, ReassemblyError> {
        let info = fragment
            .primary
            .fragment
            .ok_or(ReassemblyError::NotAFragment)?;
        let mut id = fragment.id();
        id.fragment = None;
        let mut r = Self {
            id,
            total: info.total_adu_len,
            extents: BTreeMap::new(),
            received: 0,
            first: None,
            any: Box::new(fragment.clone()),
            origin: None,
        };
        r.insert(fragment)?;
        Ok(r)
    }

    /// The identity of the bundle being reassembled (source and creation timestamp).
    pub fn bundle_id(&self) -> &BundleId {
        &self.id
    }

    /// Where the bundle goes.
    pub fn destination(&self) -> &crate::Eid {
        &self.any.primary.destination
    }

    /// The ADU's total length.
    pub fn total_len(&self) -> u64 {
        self.total
    }

    /// Distinct ADU bytes received so far.
    pub fn received_len(&self) -> u64 {
        self.received
    }

    /// Whether every byte of the ADU has arrived.
    pub fn is_complete(&self) -> bool {
        self.received == self.total
    }

    /// Adds a fragment; bytes already held are ignored.
    pub fn insert(&mut self, fragment: Bundle) -> Result<(), ReassemblyError> {
        let info = fragment
            .primary
            .fragment
            .ok_or(ReassemblyError::NotAFragment)?;
        if fragment.primary.source != self.id.source
            || fragment.primary.creation != self.id.creation
        {
            return Err(ReassemblyError::OtherBundle);
        }
        if info.total_adu_len != self.total {
            return Err(ReassemblyError::TotalLengthMismatch {
                expected: self.total,
                found: info.total_adu_len,
            });
        }
        // Trim the new payload to the parts not yet held, walking the extents it may overlap.
        let data = &fragment.payload.data;
        let start = info.offset;
        let end = start + data.len() as u64;
        let mut cursor = start;
        let mut new_parts = Vec::new();
        let overlapping = self
            .extents
            .range(..end)
            .rev()
            .take_while(|(o, d)| *o + d.len() as u64 > start)
            .map(|(o, d)| (*o, *o + d.len() as u64))
            .collect::<Vec<_>>();
        for (held_start, held_end) in overlapping.into_iter().rev() {
            if held_start > cursor {
                new_parts.push((cursor, held_start.min(end)));
            }
            cursor = cursor.max(held_end);
        }
        if cursor < end {
            new_parts.push((cursor, end));
        }
        for (s, e) in new_parts {
            let slice = data.slice((s - start) as usize..(e - start) as usize);
            self.received += slice.len() as u64;
            self.extents.insert(s, slice);
        }
        if self.origin.is_none() {
            self.origin = (fragment.payload.origin.as_deref().cloned())
                .filter(|origin| origin.len() as u64 == self.total);
        }
        if info.offset == 0 && self.first.is_none() {
            self.first = Some(Box::new(fragment));
        }
        Ok(())
    }

    /// The reassembled bundle once every byte has arrived; otherwise the reassembly back.
    ///
    /// The primary block is the original's (fragment flag and fields removed); extension blocks
    /// and payload block flags come from the fragment at offset 0.
    // Handing the reassembly back on `Err` is the point, and it happens once per ADU at most.
    #[allow(clippy::result_large_err)]
    pub fn finish(self) -> Result<Bundle, Self> {
        if !self.is_complete() {
            return Err(self);
        }
        let mut bundle = *self.first.unwrap_or(self.any);
        bundle.primary.fragment = None;
        bundle.primary.flags = bundle.primary.flags.with(BundleFlags::IS_FRAGMENT, false);
        bundle.payload.origin = None;
        bundle.payload.data = if self.extents.len() == 1 {
            // One extent covers the ADU: it is already contiguous.
            self.extents.into_values().next().unwrap_or_default()
        } else if let Some(origin) = self
            .origin
            .filter(|origin| points_into(origin, &self.extents))
        {
            // Every piece is the ADU's own memory at its offset, so these are its bytes.
            origin
        } else {
            // `received == total` bounds this allocation by bytes that actually arrived.
            let mut adu = BytesMut::with_capacity(self.received as usize);
            for part in self.extents.into_values() {
                adu.extend_from_slice(&part);
            }
            adu.freeze()
        };
        Ok(bundle)
    }
}

/// Whether each extent is `origin`'s memory at the extent's offset.
fn points_into(origin: &Bytes, extents: &BTreeMap<u64, Bytes>) -> bool {
    extents.iter().all(|(&offset, part)| {
        usize::try_from(offset).is_ok_and(|offset| {
            offset
                .checked_add(part.len())
                .is_some_and(|end| end <= origin.len())
                && std::ptr::eq(origin[offset..].as_ptr(), part.as_ptr())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DtnTime;
    use crate::block::HopCount;
    use crate::crc::CrcType;
    use crate::eid::Eid;
    use crate::primary::{CreationTimestamp, PrimaryBlock};

    fn original(len: usize) -> Bundle {
        let primary = PrimaryBlock::new(
            Eid::ipn(2, 1),
            Eid::ipn(1, 0),
            CreationTimestamp {
                time: DtnTime::UNKNOWN,
                sequence: 9,
            },
            60_000,
        );
        let payload: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut b = Bundle::new(primary, Bytes::from(payload));
        b.extensions
            .push(ExtensionBlock::new(2, ExtensionData::BundleAge(5)));
        b.extensions.push(ExtensionBlock::new(
            3,
            ExtensionData::HopCount(HopCount { limit: 9, count: 1 }),
        ));
        b.extensions.push(ExtensionBlock::new(
            4,
            ExtensionData::Unknown {
                block_type: 200,
                data: Bytes::from_static(b"first only"),
            },
        ));
        b.extensions.push(ExtensionBlock {
            flags: BlockFlags(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT),
            ..ExtensionBlock::new(
                5,
                ExtensionData::Unknown {
                    block_type: 201,
                    data: Bytes::from_static(b"everywhere"),
                },
            )
        });
        b
    }

    #[test]
    fn fragments_are_valid_bundles_that_follow_section_5_8() {
        let b = original(1000);
        let pieces = b.fragment(300).unwrap();
        assert_eq!(pieces.len(), 4);
        let mut concatenated = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            // Each fragment survives the wire.
            let back = Bundle::decode(p.encode().to_bytes()).unwrap();
            assert_eq!(&back, p);
            let f = p.primary.fragment.unwrap();
            assert_eq!(f.offset, 300 * i as u64);
            assert_eq!(f.total_adu_len, 1000);
            assert!(p.primary.encoded_flags().contains(BundleFlags::IS_FRAGMENT));
            let types: Vec<u64> = p.extensions.iter().map(|e| e.data.block_type()).collect();
            if i == 0 {
                assert_eq!(types, [7, 10, 200, 201], "offset 0 keeps every block");
            } else {
                assert_eq!(
                    types,
                    [7, 10, 201],
                    "later fragments keep the replicated ones"
                );
            }
            concatenated.extend_from_slice(&p.payload.data);
        }
        assert_eq!(concatenated, b.payload.data);
        // Payloads are slices of the original payload.
        assert_eq!(
            pieces[1].payload.data.as_ptr(),
            b.payload.data[300..].as_ptr()
        );
    }

    #[test]
    fn a_cut_transfer_leaves_a_fragment_and_the_sender_sends_the_rest() {
        let mut b = original(300);
        b.primary.creation.time = DtnTime::from_millis(800_000_000_000);
        for e in &mut b.extensions {
            e.crc_type = CrcType::Crc32c;
        }
        let enc = b.encode();
        let wire = enc.to_bytes();
        let mut fragments = 0;
        for n in 0..=wire.len() {
            let kept =
                decode_cut_transfer(wire.slice(..n)).unwrap_or_else(|e| panic!("cut at {n}: {e}"));
            let delivered = enc.payload_bytes_within(n);
            if n >= wire.len() - 1 {
                // Whole, or short of the closing break only.
                assert_eq!(kept.as_ref(), Some(&b), "cut at {n}");
                continue;
            }
            let Some(fragment) = kept else {
                assert_eq!(
                    delivered, 0,
                    "cut at {n}: payload bytes arrived but were dropped"
                );
                continue;
            };
            fragments += 1;
            assert_eq!(
                fragment.payload.data,
                b.payload.data[..delivered],
                "cut at {n}"
            );
            assert_eq!(
                fragment.primary.fragment,
                Some(FragmentInfo {
                    offset: 0,
                    total_adu_len: 300
                })
            );
            // The fragment survives the wire, and with the sender's remainder makes the bundle.
            let fragment = Bundle::decode(fragment.encode().to_bytes()).unwrap();
            let mut r = Reassembly::new(fragment).unwrap();
            if delivered < 300 {
                let (_, rest) = b.split_at(delivered).unwrap();
                r.insert(rest).unwrap();
            }
            assert_eq!(r.finish().unwrap(), b, "cut at {n}");
        }
        // Every cut from the first payload byte up to the closing break leaves a fragment.
        assert_eq!(fragments, wire.len() - 2 - enc.parts()[0].len());

        // A cut inside a block before the payload keeps nothing; damage before the cut is still
        // caught by the CRCs.
        let mut damaged = wire[..wire.len() - 100].to_vec();
        // Bytes 31-33 are the lifetime (60000 = 0x19 ea60).
        assert_eq!(damaged[31..34], [0x19, 0xea, 0x60]);
        damaged[33] ^= 1;
        assert!(matches!(
            decode_cut_transfer(Bytes::from(damaged)).unwrap_err().kind,
            K::CrcMismatch { block: 0, .. }
        ));
        let mut fixed = b.clone();
        fixed.primary.flags = BundleFlags(BundleFlags::MUST_NOT_FRAGMENT);
        let wire = fixed.encode().to_bytes();
        assert_eq!(
            decode_cut_transfer(wire.slice(..wire.len() - 50)).unwrap(),
            None
        );
    }

    #[test]
    fn splitting_rules() {
        let b = original(10);
        assert_eq!(
            b.split_at(0).unwrap_err(),
            FragmentError::BadSplitPoint { at: 0, len: 10 }
        );
        assert_eq!(
            b.split_at(10).unwrap_err(),
            FragmentError::BadSplitPoint { at: 10, len: 10 }
        );
        assert_eq!(b.fragment(0).unwrap_err(), FragmentError::ZeroFragmentSize);
        assert_eq!(b.fragment(10).unwrap(), vec![b.clone()]);
        let mut fixed = b.clone();
        fixed.primary.flags = BundleFlags(BundleFlags::MUST_NOT_FRAGMENT);
        assert_eq!(
            fixed.split_at(5).unwrap_err(),
            FragmentError::MustNotFragment
        );

        // A fragment of a fragment keeps offsets relative to the original ADU.
        let (_, tail) = b.split_at(4).unwrap();
        let (mid, last) = tail.split_at(3).unwrap();
        assert_eq!(mid.primary.fragment.unwrap().offset, 4);
        assert_eq!(last.primary.fragment.unwrap().offset, 7);
        assert_eq!(last.primary.fragment.unwrap().total_adu_len, 10);
    }

    #[test]
    fn reassembly_in_any_order_with_overlaps() {
        let b = original(1000);
        // Two fragmentation episodes: 300-byte and 450-byte pieces, overlapping.
        let mut pieces = b.fragment(300).unwrap();
        pieces.extend(b.fragment(450).unwrap());
        pieces.reverse();
        let mut r = Reassembly::new(pieces[0].clone()).unwrap();
        for p in &pieces[1..] {
            r.insert(p.clone()).unwrap();
            assert!(r.received_len() <= 1000);
        }
        assert!(r.is_complete());
        assert_eq!(r.finish().unwrap(), b);
    }

    #[test]
    fn pieces_cut_here_are_rebuilt_into_their_own_buffer_and_decoded_ones_into_a_copy() {
        let b = original(1000);
        let pieces = b.fragment(300).unwrap();
        assert!(pieces.iter().all(
            |p| p.payload.origin.as_ref().map(|o| o.as_ptr()) == Some(b.payload.data.as_ptr())
        ));
        // A piece of a piece still knows the ADU.
        let (_, rest) = pieces[3].split_at(50).unwrap();
        assert_eq!(
            rest.payload.origin.as_ref().map(|o| o.as_ptr()),
            Some(b.payload.data.as_ptr())
        );
        let mut r = Reassembly::new(pieces[2].clone()).unwrap();
        for p in [&pieces[0], &pieces[3], &pieces[1]] {
            r.insert(p.clone()).unwrap();
        }
        let whole = r.finish().unwrap();
        assert_eq!(whole, b);
        assert_eq!(
            whole.payload.data.as_ptr(),
            b.payload.data.as_ptr(),
            "no copy"
        );
        assert!(whole.payload.origin.is_none());

        // The same pieces through the wire: nothing to point into, so a new buffer.
        let decoded: Vec<Bundle> = pieces
            .iter()
            .map(|p| Bundle::decode(p.encode().to_bytes()).unwrap())
            .collect();
        assert!(decoded.iter().all(|p| p.payload.origin.is_none()));
        let mut r = Reassembly::new(decoded[0].clone()).unwrap();
        for p in &decoded[1..] {
            r.insert(p.clone()).unwrap();
        }
        let whole = r.finish().unwrap();
        assert_eq!(whole, b);
        assert_ne!(whole.payload.data.as_ptr(), b.payload.data.as_ptr());

        // Mixed: one piece decoded, the rest cut here: its bytes are not the origin's memory,
        // so they are copied, and the result is still the bundle.
        let mut r = Reassembly::new(pieces[0].clone()).unwrap();
        r.insert(decoded[1].clone()).unwrap();
        r.insert(pieces[2].clone()).unwrap();
        r.insert(pieces[3].clone()).unwrap();
        let whole = r.finish().unwrap();
        assert_eq!(whole, b);
        assert_ne!(whole.payload.data.as_ptr(), b.payload.data.as_ptr());
    }

    #[test]
    fn incomplete_and_foreign_fragments() {
        let b = original(100);
        let pieces = b.fragment(40).unwrap();
        let mut r = Reassembly::new(pieces[2].clone()).unwrap();
        r.insert(pieces[2].clone()).unwrap();
        assert_eq!(r.received_len(), 20, "a duplicate adds nothing");
        r.insert(pieces[0].clone()).unwrap();
        assert_eq!(r.received_len(), 60);
        let r = r.finish().unwrap_err();
        assert!(!r.is_complete());

        let mut other = pieces[1].clone();
        other.primary.creation.sequence += 1;
        let mut r2 = r.clone();
        assert_eq!(r2.insert(other).unwrap_err(), ReassemblyError::OtherBundle);
        let mut longer = pieces[1].clone();
        longer.primary.fragment = Some(FragmentInfo {
            offset: 40,
            total_adu_len: 101,
        });
        assert_eq!(
            r2.insert(longer).unwrap_err(),
            ReassemblyError::TotalLengthMismatch {
                expected: 100,
                found: 101
            }
        );
        assert_eq!(
            Reassembly::new(b.clone()).unwrap_err(),
            ReassemblyError::NotAFragment
        );
        let mut r3 = r;
        r3.insert(pieces[1].clone()).unwrap();
        assert_eq!(r3.finish().unwrap(), b);
    }
}

#[cfg(test)]
mod peek_tests {
    use super::*;
    use crate::DtnTime;
    use crate::{CreationTimestamp, Eid};

    #[test]
    fn peek_primary_reads_the_first_bytes_of_a_bundle() {
        let primary = PrimaryBlock::new(
            "dtn://b/x".parse::<Eid>().unwrap(),
            "dtn://a/".parse::<Eid>().unwrap(),
            CreationTimestamp {
                time: DtnTime::from_millis(5),
                sequence: 1,
            },
            60_000,
        );
        let bundle = Bundle::new(primary.clone(), Bytes::from(vec![7u8; 5_000]));
        let bytes = bundle.encode().to_bytes();
        // Whole bundle, a prefix that ends in the payload, and one that ends in the primary block.
        let got = peek_primary(bytes.clone()).unwrap().unwrap();
        assert_eq!(got.destination, primary.destination);
        assert_eq!(got.creation, primary.creation);
        assert!(peek_primary(bytes.slice(..200)).unwrap().is_some());
        assert_eq!(peek_primary(bytes.slice(..10)).unwrap(), None);
        assert_eq!(peek_primary(Bytes::new()).unwrap(), None);
        assert!(peek_primary(Bytes::from_static(b"\x01garbage")).is_err());
    }
}
