//! The forwarding classes and the per-bundle blocks the node reads and maintains on the way
//! through: class, spray-and-wait copies, previous node, hop count.

use wire::{
    BLOCK_FERRY_CLASS, BLOCK_FERRY_COPIES, BLOCK_HOP_COUNT, BlockFlags, Bundle, Eid,
    ExtensionBlock, ExtensionData, HopCount, parse_uint_block_data, uint_block_data,
};

/// The node name of the broadcast endpoint: a bundle for `dtn://~all/~<service>` is delivered to
/// `~<service>` on every node it reaches and flooded on (datagram class) or carried everywhere (dtn
/// class). Use a demux starting with `~`: that makes the endpoint non-singleton (RFC 9171
/// §4.2.5.1.1).
pub const BROADCAST_NODE_NAME: &str = "~all";

/// How a bundle is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Class {
    /// Store-carry-forward: persisted, routed by the [`crate::Strategy`], delivered when a
    /// contact allows.
    #[default]
    Dtn,
    /// Best effort: forwarded at once along the current mesh route (or flooded for broadcast),
    /// never persisted, dropped when no route exists.
    Datagram,
    /// A segment of a reliable stream: forwarded like a datagram; reliability is end to end.
    Stream,
}

impl Class {
    /// The code carried in the class block.
    pub fn code(self) -> u64 {
        match self {
            Class::Dtn => 0,
            Class::Datagram => 1,
            Class::Stream => 2,
        }
    }

    /// The class for a code; unknown codes are carried as dtn (the safe default: nothing lost).
    pub fn from_code(code: u64) -> Self {
        match code {
            1 => Class::Datagram,
            2 => Class::Stream,
            _ => Class::Dtn,
        }
    }

    /// Whether the class is routed in real time over the mesh.
    pub fn is_real_time(self) -> bool {
        !matches!(self, Class::Dtn)
    }
}

/// Flags for Ferry's private blocks: kept in every fragment, dropped silently by nodes that do not
/// know them (so other implementations forward the bundle as an ordinary one).
const PRIVATE_BLOCK_FLAGS: BlockFlags =
    BlockFlags(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT | BlockFlags::DISCARD_IF_UNPROCESSABLE);

fn uint_block(bundle: &Bundle, block_type: u64) -> Option<u64> {
    match &bundle.extension(block_type)?.data {
        ExtensionData::Unknown { data, .. } => parse_uint_block_data(data).ok(),
        _ => None,
    }
}

fn set_uint_block(bundle: &mut Bundle, block_type: u64, value: u64) {
    let data = ExtensionData::Unknown {
        block_type,
        data: uint_block_data(value),
    };
    set_block(bundle, data, PRIVATE_BLOCK_FLAGS);
}

/// Replaces the block of `data`'s type, or adds one with a fresh number.
fn set_block(bundle: &mut Bundle, data: ExtensionData, flags: BlockFlags) {
    let block_type = data.block_type();
    if let Some(block) = bundle
        .extensions
        .iter_mut()
        .find(|b| b.data.block_type() == block_type)
    {
        block.data = data;
        return;
    }
    let mut block = ExtensionBlock::new(bundle.next_block_number(), data);
    block.flags = flags;
    bundle.extensions.push(block);
}

/// The bundle's forwarding class (dtn when it carries no class block or an unreadable one).
pub fn class_of(bundle: &Bundle) -> Class {
    uint_block(bundle, BLOCK_FERRY_CLASS).map_or(Class::Dtn, Class::from_code)
}

/// Marks a bundle with its class (dtn needs no block).
pub(crate) fn set_class(bundle: &mut Bundle, class: Class) {
    if class != Class::Dtn {
        set_uint_block(bundle, BLOCK_FERRY_CLASS, class.code());
    }
}

/// Spray-and-wait copies the bundle carries, if any.
pub(crate) fn copies_of(bundle: &Bundle) -> Option<u64> {
    uint_block(bundle, BLOCK_FERRY_COPIES)
}

/// Sets the spray-and-wait copies block.
pub(crate) fn set_copies(bundle: &mut Bundle, copies: u64) {
    set_uint_block(bundle, BLOCK_FERRY_COPIES, copies);
}

/// Sets the previous-node block to `me` (RFC 9171 §4.4.1: replaced at every hop).
pub(crate) fn set_previous_node(bundle: &mut Bundle, me: &Eid) {
    set_block(
        bundle,
        ExtensionData::PreviousNode(me.clone()),
        BlockFlags::default(),
    );
}

/// Adds a hop-count block with `limit` if the bundle has none.
pub(crate) fn ensure_hop_limit(bundle: &mut Bundle, limit: u64) {
    if bundle.extension(BLOCK_HOP_COUNT).is_none() {
        set_block(
            bundle,
            ExtensionData::HopCount(HopCount { limit, count: 0 }),
            BlockFlags::default(),
        );
    }
}

/// Counts one more hop; returns false if the bundle may not take it (RFC 9171 §4.4.3).
pub(crate) fn count_hop(bundle: &mut Bundle) -> bool {
    for block in &mut bundle.extensions {
        if let ExtensionData::HopCount(hops) = &mut block.data {
            hops.count = hops.count.saturating_add(1);
            return !hops.exceeded();
        }
    }
    true
}

/// Whether the node processes extension blocks of `block_type` (RFC 9171 §5.6 step 4 applies to
/// every other type). Previous node, bundle age and hop count are parsed by `wire` and never reach
/// this question; Ferry's class (193) and spray copies (194) blocks are read and maintained here.
///
/// Bundle Protocol Security blocks (RFC 9172: BIB, type 11; BCB, type 12) are processed: the
/// node reads them and acts as its `bpsec::Policy` says (`Node::check_security`): a BIB whose
/// security source it holds a key for is verified, a BCB at the bundle's destination is
/// decrypted or the bundle refused, and what it holds no key for is carried on byte for byte, as
/// a relay does (RFC 9172 §5.1), to a node that can check it. So their "delete / discard if
/// unprocessable" flags never apply here: they are for nodes that do not implement BPSec.
pub(crate) fn processes_block(block_type: u64) -> bool {
    matches!(
        block_type,
        BLOCK_FERRY_CLASS | BLOCK_FERRY_COPIES | bpsec::BLOCK_BIB | bpsec::BLOCK_BCB
    )
}

/// Whether the endpoint is the broadcast endpoint.
/// Whether `eid` is a broadcast endpoint (`dtn://~all/…`), which every node may deliver.
pub fn is_broadcast(eid: &Eid) -> bool {
    matches!(eid, Eid::Dtn(dtn) if dtn.node_name() == BROADCAST_NODE_NAME)
}

/// Whether the previous-node block names `node`.
#[cfg(test)]
pub(crate) fn previous_node_is(bundle: &Bundle, node: &Eid) -> bool {
    matches!(
        bundle.extension(wire::BLOCK_PREVIOUS_NODE).map(|b| &b.data),
        Some(ExtensionData::PreviousNode(p)) if p == node
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use wire::DtnTime;
    use wire::{CreationTimestamp, PrimaryBlock};

    fn bundle() -> Bundle {
        let primary = PrimaryBlock::new(
            "dtn://b/x".parse().unwrap(),
            "dtn://a/x".parse().unwrap(),
            CreationTimestamp {
                time: DtnTime::from_millis(1),
                sequence: 0,
            },
            1000,
        );
        Bundle::new(primary, Bytes::from_static(b"data"))
    }

    #[test]
    fn blocks_round_trip_through_the_wire_and_fragments() {
        let mut b = bundle();
        assert_eq!(class_of(&b), Class::Dtn);
        set_class(&mut b, Class::Datagram);
        set_copies(&mut b, 8);
        set_copies(&mut b, 4);
        ensure_hop_limit(&mut b, 2);
        let me: Eid = "dtn://me/".parse().unwrap();
        set_previous_node(&mut b, &me);
        assert!(count_hop(&mut b));
        assert!(count_hop(&mut b));
        assert!(!count_hop(&mut b), "third hop exceeds a limit of 2");
        let decoded = Bundle::decode(b.encode().to_bytes()).unwrap();
        assert_eq!(class_of(&decoded), Class::Datagram);
        assert_eq!(copies_of(&decoded), Some(4));
        assert!(previous_node_is(&decoded, &me));
        let (_, tail) = decoded.split_at(2).unwrap();
        assert_eq!(class_of(&tail), Class::Datagram, "class replicated");
        assert_eq!(copies_of(&tail), Some(4), "copies replicated");
    }

    #[test]
    fn broadcast_endpoint_is_recognised() {
        let all: Eid = format!("dtn://{BROADCAST_NODE_NAME}/~rpc").parse().unwrap();
        assert!(is_broadcast(&all));
        assert!(!all.is_singleton());
        assert!(!is_broadcast(&"dtn://a/rpc".parse().unwrap()));
    }
}
