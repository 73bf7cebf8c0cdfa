//! Byte encodings of ids and times whose byte order is the order of the Rust values, so that a
//! database comparing keys with `memcmp` (SQLite's BLOB order) returns rows in exactly the order
//! [`MemoryStore`](crate::MemoryStore) iterates its `BTreeMap`s.
//!
//! - An [`Eid`] is a tag byte in declaration order (`Null` < `Dtn` < `Ipn`, as `#[derive(Ord)]`
//!   compares enum variants) followed by, for `dtn`, the SSP bytes and a 0x00 terminator (a
//!   valid SSP is visible US-ASCII, so 0x00 never occurs inside it and a shorter SSP that is a
//!   prefix of a longer one sorts first, as `Bytes` does), for `ipn` the two numbers big-endian.
//! - A [`BundleId`] is its source's encoding, the creation time and sequence big-endian, then
//!   0x00 for a whole bundle or 0x01 and the fragment offset and length big-endian (`None` <
//!   `Some`). Every part is self-delimiting, so concatenation preserves the tuple order.
//! - A [`DtnTime`] (an unsigned 64-bit count) is stored as an SQLite INTEGER (signed) with its top
//!   bit flipped, which maps unsigned order onto signed order.
//!
//! No I/O here: these functions are pure and unit-tested against the derived `Ord`.

use wire::{BundleId, CreationTimestamp, DtnTime, Eid};

const EID_NULL: u8 = 0;
const EID_DTN: u8 = 1;
const EID_IPN: u8 = 2;
const WHOLE: u8 = 0;
const FRAGMENT: u8 = 1;

/// Appends the order-preserving encoding of an endpoint id.
pub(crate) fn put_eid(out: &mut Vec<u8>, eid: &Eid) {
    match eid {
        Eid::Null => out.push(EID_NULL),
        Eid::Dtn(d) => {
            out.push(EID_DTN);
            // The SSP as it is on the wire and as `DtnEid` compares it: `//node/demux`.
            out.extend_from_slice(b"//");
            out.extend_from_slice(d.node_name().as_bytes());
            out.push(b'/');
            out.extend_from_slice(d.demux().as_bytes());
            out.push(0);
        }
        Eid::Ipn { node, service } => {
            out.push(EID_IPN);
            out.extend_from_slice(&node.to_be_bytes());
            out.extend_from_slice(&service.to_be_bytes());
        }
    }
}

/// The encoding of an endpoint id alone.
pub(crate) fn eid_key(eid: &Eid) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    put_eid(&mut out, eid);
    out
}

/// The common prefix of the keys of every fragment of one bundle (and of the whole bundle).
pub(crate) fn origin_prefix(source: &Eid, creation: CreationTimestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_eid(&mut out, source);
    out.extend_from_slice(&creation.time.to_be_bytes());
    out.extend_from_slice(&creation.sequence.to_be_bytes());
    out
}

/// The key of a bundle id.
pub(crate) fn id_key(id: &BundleId) -> Vec<u8> {
    let mut out = origin_prefix(&id.source, id.creation);
    match id.fragment {
        None => out.push(WHOLE),
        Some((offset, len)) => {
            out.push(FRAGMENT);
            out.extend_from_slice(&offset.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    out
}

/// An exclusive upper bound for the keys that start with `prefix` followed by a fragment marker.
pub(crate) fn origin_upper(prefix: &[u8]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    out.push(FRAGMENT + 1);
    out
}

/// Reads what `put_eid` wrote; `None` if the bytes are not such an encoding.
fn take_eid(input: &[u8]) -> Option<(Eid, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    match tag {
        EID_NULL => Some((Eid::Null, rest)),
        EID_DTN => {
            let end = rest.iter().position(|&b| b == 0)?;
            let ssp = std::str::from_utf8(&rest[..end]).ok()?;
            let eid = format!("dtn:{ssp}").parse().ok()?;
            Some((eid, &rest[end + 1..]))
        }
        EID_IPN => {
            let (node, rest) = take_u64(rest)?;
            let (service, rest) = take_u64(rest)?;
            Some((Eid::Ipn { node, service }, rest))
        }
        _ => None,
    }
}

fn take_u64(input: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = input.split_first_chunk::<8>()?;
    Some((u64::from_be_bytes(*head), rest))
}

/// Decodes an endpoint id key.
pub(crate) fn decode_eid(input: &[u8]) -> Option<Eid> {
    match take_eid(input)? {
        (eid, []) => Some(eid),
        _ => None,
    }
}

/// Decodes a bundle id key.
pub(crate) fn decode_id(input: &[u8]) -> Option<BundleId> {
    let (source, rest) = take_eid(input)?;
    let (time, rest) = take_u64(rest)?;
    let (sequence, rest) = take_u64(rest)?;
    let fragment = match rest.split_first()? {
        (&WHOLE, []) => None,
        (&FRAGMENT, rest) => {
            let (offset, rest) = take_u64(rest)?;
            let (len, rest) = take_u64(rest)?;
            if !rest.is_empty() {
                return None;
            }
            Some((offset, len))
        }
        _ => return None,
    };
    Some(BundleId {
        source,
        creation: CreationTimestamp {
            time: DtnTime::from_millis(time),
            sequence,
        },
        fragment,
    })
}

/// A DTN time as an SQLite integer that sorts like the unsigned value.
pub(crate) fn time_to_sql(time: DtnTime) -> i64 {
    (time.as_millis() ^ (1 << 63)) as i64
}

/// The inverse of [`time_to_sql`].
pub(crate) fn time_from_sql(value: i64) -> DtnTime {
    DtnTime::from_millis((value as u64) ^ (1 << 63))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn eid_strategy() -> impl Strategy<Value = Eid> {
        prop_oneof![
            Just(Eid::Null),
            ("[a-c]{1,3}", "[~a-c/]{0,3}").prop_map(|(n, d)| Eid::dtn(&n, &d).unwrap()),
            (0u64..3, prop_oneof![Just(0u64), Just(u64::MAX), 0u64..300])
                .prop_map(|(node, service)| Eid::ipn(node, service)),
        ]
    }

    fn id_strategy() -> impl Strategy<Value = BundleId> {
        let small = prop_oneof![Just(0u64), Just(u64::MAX), 0u64..300];
        (
            eid_strategy(),
            small.clone(),
            small.clone(),
            proptest::option::of((small.clone(), small)),
        )
            .prop_map(|(source, time, sequence, fragment)| BundleId {
                source,
                creation: CreationTimestamp {
                    time: DtnTime::from_millis(time),
                    sequence,
                },
                fragment,
            })
    }

    proptest! {
        #[test]
        fn eid_keys_sort_like_eids(a in eid_strategy(), b in eid_strategy()) {
            prop_assert_eq!(eid_key(&a).cmp(&eid_key(&b)), a.cmp(&b));
            prop_assert_eq!(decode_eid(&eid_key(&a)), Some(a));
        }

        #[test]
        fn id_keys_sort_like_ids(a in id_strategy(), b in id_strategy()) {
            prop_assert_eq!(id_key(&a).cmp(&id_key(&b)), a.cmp(&b));
            prop_assert_eq!(decode_id(&id_key(&a)), Some(a.clone()));
            let prefix = origin_prefix(&b.source, b.creation);
            let same_origin = a.source == b.source && a.creation == b.creation;
            let key = id_key(&a);
            let in_range = key.as_slice() >= prefix.as_slice() && key < origin_upper(&prefix);
            prop_assert_eq!(in_range, same_origin);
        }

        #[test]
        fn times_sort_like_u64(a: u64, b: u64) {
            prop_assert_eq!(time_to_sql(DtnTime::from_millis(a)).cmp(&time_to_sql(DtnTime::from_millis(b))), a.cmp(&b));
            prop_assert_eq!(time_from_sql(time_to_sql(DtnTime::from_millis(a))), DtnTime::from_millis(a));
        }
    }

    #[test]
    fn malformed_keys_are_refused() {
        assert_eq!(decode_id(&[]), None);
        assert_eq!(decode_id(&[9]), None);
        assert_eq!(decode_eid(&[EID_DTN, b'/', b'/']), None);
        let mut key = id_key(&BundleId {
            source: Eid::ipn(1, 2),
            creation: CreationTimestamp::default(),
            fragment: None,
        });
        key.push(0);
        assert_eq!(decode_id(&key), None);
    }
}
