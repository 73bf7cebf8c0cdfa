//! Ferry's own control messages between neighbouring nodes, carried as bundle payloads: link-state
//! advertisements for real-time mesh routing, summary vectors for epidemic routing, and the
//! segments of the reliable stream class.
//!
//! Every message is one CBOR array that starts with a version and a kind (link state, summary,
//! stream, stream acks, segments); the layout of each, bundle keys and Ferry's extension blocks
//! are in `docs/protocol.md`, section 5, whose vectors `crates/rpc/tests/protocol.rs` checks
//! against this module.

use bytes::{BufMut, Bytes};

use crate::cbor::{self, Reader};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::primary::BundleId;

/// The control-message format version this crate writes and reads.
pub const CONTROL_VERSION: u64 = 1;

/// Extension block type (private range) that carries a bundle's forwarding class as one unsigned
/// integer: 0 dtn, 1 datagram, 2 stream. Absent means dtn.
pub const BLOCK_FERRY_CLASS: u64 = 193;

/// Extension block type (private range) that carries the number of copies a binary
/// spray-and-wait holder may still hand out, as one unsigned integer.
pub const BLOCK_FERRY_COPIES: u64 = 194;

/// The data of a block that holds one unsigned integer (the Ferry class and copies blocks).
pub fn uint_block_data(value: u64) -> Bytes {
    // Values below 24 (a bundle's class, most counts) are one byte: shared, not allocated for
    // every bundle.
    static SMALL: [u8; 24] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
    ];
    if let Some(byte) = usize::try_from(value).ok().and_then(|i| SMALL.get(i..=i)) {
        return Bytes::from_static(byte);
    }
    let mut out = Vec::with_capacity(9);
    cbor::put_uint(&mut out, value);
    Bytes::from(out)
}

/// Reads the data of a block that holds one unsigned integer.
pub fn parse_uint_block_data(data: &[u8]) -> Result<u64, DecodeError> {
    let mut r = Reader::new(data);
    let value = r.uint()?;
    if !r.is_empty() {
        return Err(r.err(K::TrailingBytes));
    }
    Ok(value)
}

const KIND_LINK_STATE: u64 = 1;
const KIND_SUMMARY: u64 = 2;
const KIND_STREAM: u64 = 3;
const KIND_STREAM_ACKS: u64 = 4;
const KIND_SEGMENTS: u64 = 5;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// A link-state advertisement.
    LinkState(LinkState),
    /// A summary vector.
    Summary(Summary),
    /// A stream segment.
    Stream(StreamSegment),
    /// Pure acknowledgements of several streams between the same two endpoints, in one bundle
    /// instead of one each (a client that got many replies at once).
    StreamAcks(Vec<StreamAck>),
    /// Segments of several streams (or several of one, in order) between the same two
    /// endpoints, in one bundle instead of one each (many calls or replies at once).
    Segments(Vec<StreamSegment>),
}

/// A stream segment without data: the fields of a pure acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamAck {
    /// The stream, as in [`StreamSegment::stream`].
    pub stream: u64,
    /// As in [`StreamSegment::flags`].
    pub flags: u64,
    /// As in [`StreamSegment::sequence`].
    pub sequence: u64,
    /// As in [`StreamSegment::acknowledged`].
    pub acknowledged: u64,
}

impl StreamAck {
    /// The segment this acknowledgement stands for.
    pub fn segment(self) -> StreamSegment {
        StreamSegment {
            stream: self.stream,
            flags: self.flags,
            sequence: self.sequence,
            acknowledged: self.acknowledged,
            data: Bytes::new(),
        }
    }

    /// The acknowledgement a segment carries, if it is a pure one: no data, and neither opens,
    /// closes nor resets its stream.
    pub fn of(segment: &StreamSegment) -> Option<Self> {
        let marks = StreamSegment::OPEN | StreamSegment::CLOSE | StreamSegment::RESET;
        (segment.data.is_empty()
            && segment.flags & StreamSegment::ACK != 0
            && segment.flags & marks == 0)
            .then_some(Self {
                stream: segment.stream,
                flags: segment.flags,
                sequence: segment.sequence,
                acknowledged: segment.acknowledged,
            })
    }
}

/// A node's advertisement of its current neighbours, flooded through the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// The advertising node.
    pub origin: Eid,
    /// Increases with every advertisement the origin makes; older ones are ignored.
    pub sequence: u64,
    /// How long receivers keep it without a newer one.
    pub lifetime_ms: u64,
    /// The origin's neighbours and the cost of the link to each.
    pub links: Vec<(Eid, u32)>,
}

/// What bundles a node holds and which it knows to be delivered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Keys of the bundles the sender holds, ascending.
    pub have: Vec<u64>,
    /// Keys of bundles known to be delivered (to be deleted everywhere), ascending. A receiver
    /// only adds them to what it knows, so a sender may list just those it did not tell the
    /// receiver before (Ferry lists them all in every sixth summary of a contact).
    pub purged: Vec<u64>,
}

/// One segment of a reliable stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSegment {
    /// Identifies the stream between the two end nodes (chosen by the opener).
    pub stream: u64,
    /// [`StreamSegment::OPEN`], [`StreamSegment::CLOSE`], [`StreamSegment::ACK`],
    /// [`StreamSegment::RESET`], [`StreamSegment::FROM_OPENER`]; unknown bits are ignored.
    pub flags: u64,
    /// Sequence number of this segment's data (or of the open/close marker).
    pub sequence: u64,
    /// Cumulative acknowledgement: every sequence number below this was received.
    pub acknowledged: u64,
    /// The data.
    pub data: Bytes,
}

impl StreamSegment {
    /// The first segment of a stream.
    pub const OPEN: u64 = 0x01;
    /// The sender will send no more data.
    pub const CLOSE: u64 = 0x02;
    /// `acknowledged` is meaningful.
    pub const ACK: u64 = 0x04;
    /// The stream is aborted.
    pub const RESET: u64 = 0x08;
    /// Sent by the side that opened the stream (both sides may pick the same stream id, so a
    /// stream is known by its id and by which side opened it).
    pub const FROM_OPENER: u64 = 0x10;
}

/// The 64-bit key of a bundle id used in summary vectors (FNV-1a over a canonical encoding).
pub fn bundle_key(id: &BundleId) -> u64 {
    // Computed several times per bundle received: on the stack unless the source id is long.
    const ON_STACK: usize = 128;
    // Four unsigned integers of at most 9 bytes each follow the source id.
    if id.source.encoded_len() + 4 * 9 > ON_STACK {
        let mut buf = Vec::with_capacity(id.source.encoded_len() + 4 * 9);
        put_bundle_id(&mut buf, id);
        return fnv1a(&buf);
    }
    let mut stack = [0u8; ON_STACK];
    let mut rest = &mut stack[..];
    put_bundle_id(&mut rest, id);
    let written = ON_STACK - rest.len();
    fnv1a(&stack[..written])
}

fn put_bundle_id(out: &mut impl BufMut, id: &BundleId) {
    id.source.encode(out);
    cbor::put_uint(out, id.creation.time.as_millis());
    cbor::put_uint(out, id.creation.sequence);
    if let Some((offset, len)) = id.fragment {
        cbor::put_uint(out, offset);
        cbor::put_uint(out, len);
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Reads a segment's first four fields (stream, flags, sequence, acknowledged), the same in a
/// stream segment, a stream acknowledgement and each entry of a `segments` message.
fn segment_fields(
    r: &mut Reader<'_>,
    array: &mut cbor::Array,
    what: &'static str,
) -> Result<[u64; 4], DecodeError> {
    let mut fields = [0u64; 4];
    for field in &mut fields {
        r.expect_next(array, what)?;
        *field = r.uint()?;
    }
    Ok(fields)
}

/// Lists kept with their room between [`Control::decode_in`] calls.
#[derive(Debug, Default)]
pub struct ListRoom {
    /// For a [`Control::Segments`].
    pub segments: Vec<StreamSegment>,
    /// For a [`Control::StreamAcks`].
    pub acks: Vec<StreamAck>,
}

impl Control {
    /// Encodes the message.
    pub fn encode(&self) -> Bytes {
        // One allocation of about the right size: a stream segment (every RPC call and reply
        // is one) outgrew a fixed first guess and was copied.
        let mut out = Vec::with_capacity(match self {
            Control::Stream(seg) => seg.data.len() + 48,
            Control::StreamAcks(acks) => 4 + 40 * acks.len(),
            Control::Segments(segments) => {
                4 + segments.iter().map(|s| s.data.len() + 48).sum::<usize>()
            }
            Control::Summary(s) => 16 + 18 * (s.have.len() + s.purged.len()),
            Control::LinkState(ls) => 64 + 48 * ls.links.len(),
        });
        match self {
            Control::LinkState(ls) => {
                cbor::put_array(&mut out, 6);
                cbor::put_uint(&mut out, CONTROL_VERSION);
                cbor::put_uint(&mut out, KIND_LINK_STATE);
                ls.origin.encode(&mut out);
                cbor::put_uint(&mut out, ls.sequence);
                cbor::put_uint(&mut out, ls.lifetime_ms);
                cbor::put_array(&mut out, ls.links.len() as u64);
                for (eid, cost) in &ls.links {
                    cbor::put_array(&mut out, 2);
                    eid.encode(&mut out);
                    cbor::put_uint(&mut out, u64::from(*cost));
                }
            }
            Control::Summary(s) => {
                cbor::put_array(&mut out, 4);
                cbor::put_uint(&mut out, CONTROL_VERSION);
                cbor::put_uint(&mut out, KIND_SUMMARY);
                for keys in [&s.have, &s.purged] {
                    cbor::put_array(&mut out, keys.len() as u64);
                    for key in keys.iter() {
                        cbor::put_uint(&mut out, *key);
                    }
                }
            }
            Control::Stream(seg) => {
                cbor::put_array(&mut out, 7);
                cbor::put_uint(&mut out, CONTROL_VERSION);
                cbor::put_uint(&mut out, KIND_STREAM);
                cbor::put_uint(&mut out, seg.stream);
                cbor::put_uint(&mut out, seg.flags);
                cbor::put_uint(&mut out, seg.sequence);
                cbor::put_uint(&mut out, seg.acknowledged);
                cbor::put_bytes(&mut out, &seg.data);
            }
            Control::StreamAcks(acks) => {
                cbor::put_array(&mut out, 3);
                cbor::put_uint(&mut out, CONTROL_VERSION);
                cbor::put_uint(&mut out, KIND_STREAM_ACKS);
                cbor::put_array(&mut out, acks.len() as u64);
                for ack in acks {
                    cbor::put_array(&mut out, 4);
                    for v in [ack.stream, ack.flags, ack.sequence, ack.acknowledged] {
                        cbor::put_uint(&mut out, v);
                    }
                }
            }
            Control::Segments(segments) => {
                cbor::put_array(&mut out, 3);
                cbor::put_uint(&mut out, CONTROL_VERSION);
                cbor::put_uint(&mut out, KIND_SEGMENTS);
                cbor::put_array(&mut out, segments.len() as u64);
                for seg in segments {
                    cbor::put_array(&mut out, 5);
                    for v in [seg.stream, seg.flags, seg.sequence, seg.acknowledged] {
                        cbor::put_uint(&mut out, v);
                    }
                    cbor::put_bytes(&mut out, &seg.data);
                }
            }
        }
        Bytes::from(out)
    }

    /// Decodes a message that fills `buf` exactly. Stream data is a slice of `buf`.
    pub fn decode(buf: &Bytes) -> Result<Self, DecodeError> {
        Self::decode_in(buf, &mut ListRoom::default())
    }

    /// [`Control::decode`], the list of a [`Control::Segments`] or [`Control::StreamAcks`]
    /// taken from `room` (emptied first): a node that decodes bundle after bundle of segments
    /// gives each list back when it is done with it and allocates none (a list of a few dozen
    /// segments is kilobytes, each a trip through the allocator's slow path).
    pub fn decode_in(buf: &Bytes, room: &mut ListRoom) -> Result<Self, DecodeError> {
        const WHAT: &str = "control message";
        let mut r = Reader::new(buf);
        let mut a = r.array()?;
        r.expect_next(&mut a, WHAT)?;
        let version_at = r.position();
        if r.uint()? != CONTROL_VERSION {
            return Err(DecodeError::new(
                version_at,
                K::InvalidControl("unsupported control message version"),
            ));
        }
        r.expect_next(&mut a, WHAT)?;
        let kind_at = r.position();
        let message = match r.uint()? {
            KIND_LINK_STATE => {
                r.expect_next(&mut a, WHAT)?;
                let origin = Eid::decode(&mut r, buf)?;
                r.expect_next(&mut a, WHAT)?;
                let sequence = r.uint()?;
                r.expect_next(&mut a, WHAT)?;
                let lifetime_ms = r.uint()?;
                r.expect_next(&mut a, WHAT)?;
                let mut list = r.array()?;
                let mut links = Vec::new();
                while r.has_next(&mut list)? {
                    let mut pair = r.array()?;
                    r.expect_next(&mut pair, "link")?;
                    let eid = Eid::decode(&mut r, buf)?;
                    r.expect_next(&mut pair, "link")?;
                    let cost_at = r.position();
                    let cost = u32::try_from(r.uint()?).map_err(|_| {
                        DecodeError::new(cost_at, K::InvalidControl("link cost above 2^32-1"))
                    })?;
                    r.expect_end(&mut pair, "link")?;
                    links.push((eid, cost));
                }
                Control::LinkState(LinkState {
                    origin,
                    sequence,
                    lifetime_ms,
                    links,
                })
            }
            KIND_SUMMARY => {
                let mut lists = [Vec::new(), Vec::new()];
                for keys in &mut lists {
                    r.expect_next(&mut a, WHAT)?;
                    let mut list = r.array()?;
                    while r.has_next(&mut list)? {
                        keys.push(r.uint()?);
                    }
                }
                let [have, purged] = lists;
                Control::Summary(Summary { have, purged })
            }
            KIND_STREAM => {
                let fields = segment_fields(&mut r, &mut a, WHAT)?;
                r.expect_next(&mut a, WHAT)?;
                let range = r.bytes()?;
                let [stream, flags, sequence, acknowledged] = fields;
                Control::Stream(StreamSegment {
                    stream,
                    flags,
                    sequence,
                    acknowledged,
                    data: buf.slice(range),
                })
            }
            KIND_STREAM_ACKS => {
                r.expect_next(&mut a, WHAT)?;
                let mut list = r.array()?;
                // Sized at once: grown from empty, a bundle of a few dozen acknowledgements
                // reallocated up to a block that made the allocator consolidate its free lists.
                let mut acks = std::mem::take(&mut room.acks);
                acks.clear();
                acks.reserve(list.capacity_hint(256));
                while r.has_next(&mut list)? {
                    let mut entry = r.array()?;
                    let fields = segment_fields(&mut r, &mut entry, "stream ack")?;
                    r.expect_end(&mut entry, "stream ack")?;
                    let [stream, flags, sequence, acknowledged] = fields;
                    acks.push(StreamAck {
                        stream,
                        flags,
                        sequence,
                        acknowledged,
                    });
                }
                Control::StreamAcks(acks)
            }
            KIND_SEGMENTS => {
                r.expect_next(&mut a, WHAT)?;
                let mut list = r.array()?;
                // A segment takes at least 6 bytes: room for no more than the buffer can hold,
                // nor more than a node puts in one bundle (a longer list grows as it comes).
                let mut segments = std::mem::take(&mut room.segments);
                segments.clear();
                segments.reserve(list.capacity_hint((buf.len() / 6).min(256)));
                while r.has_next(&mut list)? {
                    let mut entry = r.array()?;
                    let fields = segment_fields(&mut r, &mut entry, "stream segment")?;
                    r.expect_next(&mut entry, "stream segment")?;
                    let range = r.bytes()?;
                    r.expect_end(&mut entry, "stream segment")?;
                    let [stream, flags, sequence, acknowledged] = fields;
                    segments.push(StreamSegment {
                        stream,
                        flags,
                        sequence,
                        acknowledged,
                        data: buf.slice(range),
                    });
                }
                Control::Segments(segments)
            }
            _ => {
                return Err(DecodeError::new(
                    kind_at,
                    K::InvalidControl("unknown control message kind"),
                ));
            }
        };
        r.expect_end(&mut a, WHAT)?;
        if !r.is_empty() {
            return Err(r.err(K::TrailingBytes));
        }
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DtnTime;
    use crate::primary::CreationTimestamp;

    fn eid(s: &str) -> Eid {
        s.parse().unwrap()
    }

    #[test]
    fn every_kind_round_trips() {
        let messages = [
            Control::LinkState(LinkState {
                origin: eid("dtn://a/"),
                sequence: 7,
                lifetime_ms: 30_000,
                links: vec![(eid("dtn://b/"), 1), (eid("ipn:3.0"), 4)],
            }),
            Control::Summary(Summary {
                have: vec![1, u64::MAX],
                purged: vec![],
            }),
            Control::Stream(StreamSegment {
                stream: 9,
                flags: StreamSegment::OPEN | StreamSegment::ACK,
                sequence: 0,
                acknowledged: 12,
                data: Bytes::from_static(b"hello"),
            }),
            Control::StreamAcks(vec![
                StreamAck {
                    stream: 9,
                    flags: StreamSegment::ACK,
                    sequence: 3,
                    acknowledged: 4,
                },
                StreamAck {
                    stream: u64::MAX,
                    flags: StreamSegment::ACK | StreamSegment::FROM_OPENER,
                    sequence: 0,
                    acknowledged: 1,
                },
            ]),
            Control::StreamAcks(Vec::new()),
            Control::Segments(vec![
                StreamSegment {
                    stream: 9,
                    flags: StreamSegment::OPEN | StreamSegment::CLOSE | StreamSegment::FROM_OPENER,
                    sequence: 0,
                    acknowledged: 0,
                    data: Bytes::from_static(b"call"),
                },
                StreamSegment {
                    stream: u64::MAX,
                    flags: StreamSegment::ACK,
                    sequence: 3,
                    acknowledged: 4,
                    data: Bytes::new(),
                },
            ]),
            Control::Segments(Vec::new()),
        ];
        // Decoded in kept lists too, whatever they held before.
        let junk = StreamAck {
            stream: 5,
            flags: StreamSegment::ACK,
            sequence: 1,
            acknowledged: 1,
        };
        let mut room = ListRoom {
            segments: vec![junk.segment(); 3],
            acks: vec![junk; 5],
        };
        for m in messages {
            let bytes = m.encode();
            assert_eq!(Control::decode(&bytes).unwrap(), m);
            assert_eq!(Control::decode_in(&bytes, &mut room).unwrap(), m);
            // Every strict prefix is an error, never a panic.
            for cut in 0..bytes.len() {
                assert!(Control::decode(&bytes.slice(..cut)).is_err());
                assert!(Control::decode_in(&bytes.slice(..cut), &mut room).is_err());
            }
        }
    }

    #[test]
    fn a_list_given_back_is_decoded_into_without_allocating() {
        let segment = |sequence| StreamSegment {
            stream: 1,
            flags: StreamSegment::ACK,
            sequence,
            acknowledged: 0,
            data: Bytes::from_static(b"x"),
        };
        let bytes = Control::Segments((0..40).map(segment).collect()).encode();
        let mut room = ListRoom::default();
        let Ok(Control::Segments(mut first)) = Control::decode_in(&bytes, &mut room) else {
            panic!("segments")
        };
        first.clear();
        let (at, capacity) = (first.as_ptr(), first.capacity());
        room.segments = first;
        let Ok(Control::Segments(second)) = Control::decode_in(&bytes, &mut room) else {
            panic!("segments")
        };
        assert_eq!((second.as_ptr(), second.capacity()), (at, capacity));
        assert_eq!(second, (0..40).map(segment).collect::<Vec<_>>());
    }

    proptest::proptest! {
        #[test]
        fn segments_round_trip_and_any_bytes_decode_without_panic(
            list in proptest::collection::vec(
                (proptest::prelude::any::<[u64; 4]>(), proptest::collection::vec(0u8.., 0..40)),
                0..20,
            ),
            noise in proptest::collection::vec(0u8.., 0..64),
        ) {
            let message = Control::Segments(
                list.into_iter()
                    .map(|([stream, flags, sequence, acknowledged], data)| StreamSegment {
                        stream,
                        flags,
                        sequence,
                        acknowledged,
                        data: Bytes::from(data),
                    })
                    .collect(),
            );
            let bytes = message.encode();
            proptest::prop_assert_eq!(Control::decode(&bytes).unwrap(), message);
            // A segments header followed by anything: an error or a message, never a panic.
            let mut hostile = vec![0x83, 0x01, 0x05];
            hostile.extend(noise);
            let _ = Control::decode(&Bytes::from(hostile));
        }
    }

    #[test]
    fn only_a_segment_without_data_or_marks_is_a_pure_ack() {
        let seg = |flags, data: &'static [u8]| StreamSegment {
            stream: 5,
            flags,
            sequence: 2,
            acknowledged: 7,
            data: Bytes::from_static(data),
        };
        let ack = StreamAck::of(&seg(StreamSegment::ACK | StreamSegment::FROM_OPENER, b""));
        assert_eq!(
            ack.map(StreamAck::segment),
            Some(seg(StreamSegment::ACK | StreamSegment::FROM_OPENER, b""))
        );
        for (flags, data) in [
            (StreamSegment::ACK, &b"x"[..]),
            (StreamSegment::ACK | StreamSegment::CLOSE, b""),
            (StreamSegment::ACK | StreamSegment::OPEN, b""),
            (StreamSegment::ACK | StreamSegment::RESET, b""),
            (0, b""),
        ] {
            assert_eq!(StreamAck::of(&seg(flags, data)), None, "{flags:#x}");
        }
    }

    #[test]
    fn unknown_version_and_kind_are_refused() {
        let bad_version = Bytes::from_static(&[0x84, 0x02, 0x02, 0x80, 0x80]);
        let err = Control::decode(&bad_version).unwrap_err();
        assert_eq!(err.offset, 1);
        let bad_kind = Bytes::from_static(&[0x84, 0x01, 0x09, 0x80, 0x80]);
        assert_eq!(Control::decode(&bad_kind).unwrap_err().offset, 2);
    }

    #[test]
    fn uint_block_data_round_trips_and_refuses_trailing_bytes() {
        for v in (0..30).chain([255, 65_536, u64::MAX]) {
            assert_eq!(parse_uint_block_data(&uint_block_data(v)).unwrap(), v);
            let mut encoded = Vec::new();
            cbor::put_uint(&mut encoded, v);
            assert_eq!(uint_block_data(v), encoded, "{v}");
        }
        assert!(parse_uint_block_data(&[0x01, 0x02]).is_err());
        assert!(parse_uint_block_data(&[0x40]).is_err());
    }

    #[test]
    fn bundle_keys_distinguish_ids() {
        let id = |seq, fragment| BundleId {
            source: eid("dtn://a/"),
            creation: CreationTimestamp {
                time: DtnTime::from_millis(5),
                sequence: seq,
            },
            fragment,
        };
        assert_eq!(bundle_key(&id(1, None)), bundle_key(&id(1, None)));
        assert_ne!(bundle_key(&id(1, None)), bundle_key(&id(2, None)));
        assert_ne!(bundle_key(&id(1, None)), bundle_key(&id(1, Some((0, 10)))));
    }

    #[test]
    fn bundle_keys_are_fnv1a_of_the_encoded_id_for_short_and_long_sources() {
        // Nodes compare keys in summary vectors: they must not depend on how they are computed.
        let reference = |id: &BundleId| {
            let mut buf = Vec::new();
            id.source.encode(&mut buf);
            for v in [id.creation.time.as_millis(), id.creation.sequence] {
                cbor::put_uint(&mut buf, v);
            }
            if let Some((offset, len)) = id.fragment {
                cbor::put_uint(&mut buf, offset);
                cbor::put_uint(&mut buf, len);
            }
            buf.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let long = format!("dtn://{}/x", "n".repeat(200));
        for source in ["dtn://a/", "ipn:977.1", &long] {
            for fragment in [None, Some((u64::MAX, u64::MAX))] {
                let id = BundleId {
                    source: eid(source),
                    creation: CreationTimestamp {
                        time: DtnTime::from_millis(u64::MAX),
                        sequence: u64::MAX,
                    },
                    fragment,
                };
                assert_eq!(bundle_key(&id), reference(&id), "{source} {fragment:?}");
            }
        }
    }
}
