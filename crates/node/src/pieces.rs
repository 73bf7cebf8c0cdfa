//! How a held bundle is cut for one neighbour: the parts of its payload the neighbour still
//! lacks ([`Acknowledged`]), and where on its pieces a link starts ([`spread_start`]).
//!
//! A node that sends the same bundle in pieces to several neighbours at once starts each link at
//! another piece. Sent in the same order everywhere, the first pieces would reach every
//! neighbour first and the last ones last, and a contact that ends (an island that splits off)
//! would leave the same pieces missing on every side of it; started apart, the neighbours hold
//! different pieces early and pass them on to each other, as a swarm does.

use std::ops::Range;

use std::hash::{DefaultHasher, Hash, Hasher};

use rangemap::RangeSet;
use wire::{Bundle, Eid};

/// The payload ranges of one held bundle that a neighbour acknowledged, in offsets within the
/// held bundle's payload: what a cut contact, or pieces acknowledged out of order, leave. The
/// ranges merge as they join, so there are never more of them than pieces sent.
#[derive(Debug, Default, Clone)]
pub(crate) struct Acknowledged(RangeSet<u64>);

impl Acknowledged {
    /// Notes that the neighbour holds `range` (an empty range changes nothing).
    pub(crate) fn insert(&mut self, range: Range<u64>) {
        if range.start < range.end {
            self.0.insert(range);
        }
    }

    /// Whether the neighbour holds every byte of a payload of `len` bytes.
    pub(crate) fn holds_all(&self, len: u64) -> bool {
        len == 0 || self.0.gaps(&(0..len)).next().is_none()
    }

    /// The parts of a payload of `len` bytes the neighbour lacks, by offset.
    pub(crate) fn missing(&self, len: u64) -> Vec<Range<u64>> {
        if len == 0 {
            return Vec::new();
        }
        self.0.gaps(&(0..len)).collect()
    }
}

/// The part of `bundle`'s payload in `range` (offsets within it), as a bundle of its own: the
/// bundle itself when the range is all of it, else a fragment (`None` if it may not be cut).
pub(crate) fn cut(bundle: &Bundle, range: Range<u64>) -> Option<Bundle> {
    let mut part = bundle.clone();
    if range.start > 0 {
        part = part.split_at(usize::try_from(range.start).ok()?).ok()?.1;
    }
    let want = range.end.saturating_sub(range.start);
    if want < part.payload.data.len() as u64 {
        part = part.split_at(usize::try_from(want).ok()?).ok()?.0;
    }
    Some(part)
}

/// A number of this node's own for one bundle (by its whole bundle's key): where on the
/// bundle's pieces its first link starts. Two nodes that hold the same pieces (two bridges out
/// of one island) then start their links at different pieces, without knowing of each other,
/// while the links of one node still start evenly apart ([`spread_start`]).
pub(crate) fn start_salt(me: &Eid, adu_key: u64) -> u64 {
    // `DefaultHasher::new` hashes alike in every process of one build, which is all a simulated
    // run's replay needs; the value is no secret and nothing is stored.
    let mut h = DefaultHasher::new();
    me.hash(&mut h);
    adu_key.hash(&mut h);
    h.finish()
}

/// The piece, of `n`, at which a link starts, when `others` links already send the same bundle
/// and `salt` is the node's number for the bundle ([`start_salt`]): the second link starts halfway from the
/// first, the third and fourth at the quarters, … (the van der Corput sequence: each new link
/// starts in the middle of the longest run of pieces no link started in). The pieces after it
/// follow, then the ones before it.
pub(crate) fn spread_start(n: usize, others: usize, salt: u64) -> usize {
    // `others` with its bits reversed, read as a fraction of 2^64, turned by the salt.
    let fraction = (others as u64).reverse_bits().wrapping_add(salt);
    ((u128::from(fraction) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use wire::PrimaryBlock;

    fn bundle(len: usize) -> Bundle {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let primary = PrimaryBlock::new(
            "dtn://b/x".parse::<Eid>().unwrap(),
            "dtn://a/x".parse::<Eid>().unwrap(),
            wire::CreationTimestamp {
                time: wire::DtnTime::from_millis(1),
                sequence: 0,
            },
            60_000,
        );
        Bundle::new(primary, Bytes::from(data))
    }

    #[test]
    fn links_start_apart_and_every_start_is_a_piece() {
        assert_eq!(spread_start(10, 0, 0), 0);
        assert_eq!(spread_start(10, 1, 0), 5);
        assert_eq!(spread_start(10, 2, 0), 2);
        assert_eq!(spread_start(10, 3, 0), 7);
        assert_eq!(spread_start(1, 7, 12345), 0);
        assert_eq!(spread_start(0, 3, 99), 0);
        // A salt turns every link's start alike: the second is still half the pieces on.
        let salt = u64::MAX / 10 * 3;
        assert_eq!(spread_start(10, 0, salt), 2);
        assert_eq!(spread_start(10, 1, salt), 7);
        for n in 1..40 {
            for k in 0..100 {
                for salt in [0, 1 << 63, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
                    assert!(spread_start(n, k, salt) < n, "n {n}, k {k}");
                }
            }
        }
        // The first n links of n pieces start at n different pieces when n is a power of two.
        let starts: std::collections::BTreeSet<usize> =
            (0..8).map(|k| spread_start(8, k, 0)).collect();
        assert_eq!(starts.len(), 8);
    }

    #[test]
    fn each_node_starts_each_bundle_somewhere_of_its_own() {
        let (a, b): (Eid, Eid) = ("dtn://a/".parse().unwrap(), "dtn://b/".parse().unwrap());
        assert_eq!(start_salt(&a, 7), start_salt(&a, 7));
        assert_ne!(start_salt(&a, 7), start_salt(&b, 7));
        assert_ne!(start_salt(&a, 7), start_salt(&a, 8));
    }

    #[test]
    fn what_is_missing_is_the_gaps_between_acknowledged_ranges() {
        let mut a = Acknowledged::default();
        assert_eq!(a.missing(100), vec![0..100]);
        a.insert(40..60);
        a.insert(60..70);
        a.insert(5..5);
        assert_eq!(a.missing(100), vec![0..40, 70..100]);
        a.insert(0..40);
        a.insert(70..100);
        assert!(a.missing(100).is_empty());
        assert!(a.holds_all(100));
        assert!(!a.holds_all(101));
        assert!(Acknowledged::default().missing(0).is_empty());
        assert!(Acknowledged::default().holds_all(0));
    }

    #[test]
    fn a_cut_part_holds_exactly_its_range_and_says_where_it_lies() {
        let b = bundle(1_000);
        let whole = cut(&b, 0..1_000).unwrap();
        assert!(whole.primary.fragment.is_none());
        assert_eq!(whole.payload.data, b.payload.data);
        let mid = cut(&b, 300..700).unwrap();
        let info = mid.primary.fragment.unwrap();
        assert_eq!((info.offset, info.total_adu_len), (300, 1_000));
        assert_eq!(mid.payload.data, b.payload.data.slice(300..700));
        // Cut again from a fragment: offsets stay those of the whole bundle.
        let inner = cut(&mid, 100..200).unwrap();
        assert_eq!(inner.primary.fragment.unwrap().offset, 400);
        assert_eq!(inner.payload.data, b.payload.data.slice(400..500));
        let tail = cut(&b, 900..1_000).unwrap();
        assert_eq!(tail.primary.fragment.unwrap().offset, 900);
    }
}
