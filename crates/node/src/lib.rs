//! Ferry's DTN node as a sans-IO state machine: everything a node decides, nothing it does.
//!
//! ```text
//!            handle_link / handle_beacon / handle_bundle / handle_transfer / handle_timeout
//!   shell ──────────────────────────────────────────────────────────────────────────────►  Node
//!   (daemon,      send / register / stream_open / stream_send  (commands)                 │
//!    simulator) ◄─────────── poll_transmit ─ poll_event ─ poll_timeout ───────────────────┘
//! ```
//!
//! The node keeps the neighbour table (links, beacons, expiry), real-time mesh routing (link-state
//! advertisements, shortest-path next hops, reachability events; [`mesh`]), the three forwarding
//! classes (datagram, stream, dtn; see [`Class`]), store-carry-forward routing behind one trait
//! ([`Strategy`]: epidemic with summary vectors and a purge set, binary spray-and-wait, direct
//! delivery), expiry, hop counts, previous-node blocks, status reports, and fragmentation
//! (reactive when a transfer is cut, proactive when a link cannot carry a bundle whole,
//! reassembly at the destination).
//!
//! **What it never does.** It never reads a clock (time arrives as `now`, DTN milliseconds), never
//! touches a socket or a file of its own, and never draws randomness except from the seed in its
//! [`NodeConfig`]. All state lives in ordered collections, so two runs with the same inputs produce
//! the same outputs: that is what lets the simulator replay a failure from its seed.
//!
//! **Storage** is reached through a [`store::Store`] passed in at construction (a memory store in
//! the simulator, the persistent store in the daemon). The node writes every accepted dtn-class
//! bundle to it before announcing or forwarding it, and keeps a small in-memory index (id, key,
//! destination, expiry, spray copies) so routing decisions never scan the store. Durability is the
//! shell's part: it calls `Store::flush` before releasing the node's transmits, so nothing is
//! acknowledged that a crash could lose.
//!
//! **How to drive it.** After any `handle_*` input or command, drain [`Node::poll_transmit`] and
//! [`Node::poll_event`], then ask [`Node::poll_timeout`] when to call [`Node::handle_timeout`].
//! Report the fate of every transmitted bundle with [`Node::handle_transfer`] (complete, cut after
//! so many payload bytes, refused, or failed); the node uses it for reactive fragmentation, to know
//! what its neighbours hold, and to release its window: store-carry-forward bundles for one link
//! are handed over only while their encoded bytes in flight stay within
//! [`NodeConfig::link_window_bytes`], and the rest follow as transfers finish (real-time traffic is
//! never held back).

#![forbid(unsafe_code)]

pub mod cgr;
mod classes;
mod expiring;
mod held;
mod links;
pub mod mesh;
mod node;
mod pieces;
pub mod plan;
mod strategy;
pub mod stream;

use std::time::Duration;

use bytes::Bytes;
use wire::{Bundle, BundleId, DtnTime, Eid, StatusReason};

pub use classes::{BROADCAST_NODE_NAME, Class, class_of, is_broadcast};
pub use node::{
    Arriving, CONTROL_DEMUX, DEFAULT_LINK_WINDOW_BYTES, FOREIGN_MEMORY, FOREIGN_PROBE,
    FULL_SUMMARY_EVERY, LinkLoad, MAX_FOREIGN_REMEMBERED, MAX_SUMMARY_PURGE_KEYS, Node, NodeConfig,
    NodeStats, Outgoing, SendError,
};
pub use strategy::{Direct, Epidemic, ParseStrategyError, SprayAndWait, Strategy, StrategyKind};

/// Identifies a link: one adjacency the shell maintains (a TCPCL session, a simulated edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u64);

/// A link appearing or disappearing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkChange {
    /// The link is up.
    Up {
        /// Which link.
        link: LinkId,
        /// The node at the other end, if the convergence layer learnt it (TCPCL's SESS_INIT):
        /// the link is then a session, which carries no beacons (the node sends none on it, and
        /// the shell reports its end). Otherwise the node beacons on the link, and the first
        /// beacon it hears tells.
        peer: Option<Eid>,
        /// Largest bundle the link carries in one piece, if bounded (a datagram link).
        mtu: Option<u64>,
        /// Expected throughput, bits per second (0 if unknown).
        bandwidth_bps: u64,
        /// How long the contact is expected to last (from a contact plan), if known.
        contact: Option<Duration>,
    },
    /// The link is down; transfers still queued on it failed.
    Down {
        /// Which link.
        link: LinkId,
    },
}

/// What the node asks the shell to send on a link.
#[derive(Debug, Clone)]
pub enum Frame {
    /// A discovery beacon.
    Beacon(wire::Beacon),
    /// A bundle. The shell encodes it (`Bundle::encode`, one vectored write); its payload is
    /// shared, never copied.
    Bundle(Bundle),
}

/// A frame to send on a link.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// The link.
    pub link: LinkId,
    /// What to send.
    pub frame: Frame,
    /// Real-time traffic (beacons, control, datagram and stream bundles) that the shell should
    /// send before queued store-carry-forward bundles.
    pub urgent: bool,
    /// Whether the node wants to hear how the transfer fared ([`crate::Node::handle_transfer`]).
    /// Only store-carry-forward bundles are followed (they hold room in the link's window and
    /// are retried or cut into fragments); real-time traffic is sent and forgotten, so a shell
    /// need not keep any state for it nor report its end.
    pub report: bool,
}

/// How a transmitted bundle fared, reported by the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferResult {
    /// The whole bundle reached the peer.
    Complete,
    /// The transfer stopped after the peer received this many payload bytes (it keeps them as a
    /// fragment); the rest should go at the next contact.
    Cut {
        /// Payload bytes the peer holds.
        payload_bytes: u64,
    },
    /// Nothing usable reached the peer.
    Failed,
    /// The peer refused the transfer at its start (TCPCL XFER_REFUSE): it holds the bundle or is
    /// receiving it from elsewhere. Its next summary vector tells whether it still needs it.
    Refused,
}

/// A bundle handed to a local application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The bundle's id (never a fragment's: fragments are reassembled first).
    pub id: BundleId,
    /// The endpoint it was addressed to.
    pub destination: Eid,
    /// Its forwarding class.
    pub class: Class,
    /// When it was created (DTN ms).
    pub created: DtnTime,
    /// When its lifetime ends (DTN ms): an application that has not taken it by then may
    /// consider it gone, as the network does.
    pub expiry: DtnTime,
    /// The application data.
    pub payload: Bytes,
}

/// Why the node dropped a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Its lifetime ended.
    Expired,
    /// It took more hops than its limit.
    HopLimitExceeded,
    /// It was malformed or broke a rule (and was refused).
    Malformed,
    /// No route for a real-time (datagram or stream) bundle.
    NoRoute,
    /// The store was full and nothing could be evicted for it.
    StoreFull,
    /// The store evicted it for a bundle of higher rank.
    Evicted,
    /// The store failed; see the event log of the shell.
    StoreError,
    /// Delivered elsewhere: the purge set said so.
    Purged,
    /// An extension block the node cannot process asked for the bundle's deletion
    /// (RFC 9171 §5.6 step 4).
    BlockUnsupported,
    /// A BPSec operation failed (RFC 9172): a BIB this node holds the key for did not verify,
    /// a BCB for this node could not be decrypted, or a security block is malformed.
    SecurityFailed,
    /// A BPSec operation the policy requires is missing: a source that must sign or encrypt
    /// sent a bundle without it.
    SecurityMissing,
}

impl DropReason {
    /// The RFC 9171 status report reason for this drop.
    pub fn status_reason(self) -> StatusReason {
        match self {
            DropReason::Expired => StatusReason::LifetimeExpired,
            DropReason::HopLimitExceeded => StatusReason::HopLimitExceeded,
            DropReason::Malformed => StatusReason::BlockUnintelligible,
            DropReason::NoRoute => StatusReason::NoKnownRoute,
            DropReason::StoreFull | DropReason::Evicted | DropReason::StoreError => {
                StatusReason::DepletedStorage
            }
            DropReason::Purged => StatusReason::NoInformation,
            DropReason::BlockUnsupported => StatusReason::BlockUnsupported,
            // The reason codes RFC 9172 §11.2 adds: 15 "Failed security operation", 12
            // "Missing security operation".
            DropReason::SecurityFailed => StatusReason::Other(15),
            DropReason::SecurityMissing => StatusReason::Other(12),
        }
    }
}

/// Something that happened, for the shell and the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A neighbour is known on a link (first beacon, or the link came up with a known peer).
    NeighbourUp {
        /// The neighbour's node id.
        node: Eid,
        /// The link.
        link: LinkId,
    },
    /// A neighbour showed that it speaks Ferry (its control traffic, or Ferry's beacons): what
    /// only a Ferry node answers (the RPC engine's hello) may go to it now.
    SpeaksFerry {
        /// The neighbour's node id.
        node: Eid,
    },
    /// A neighbour is gone (link down or beacons stopped).
    NeighbourDown {
        /// The neighbour's node id.
        node: Eid,
    },
    /// A node became reachable over the mesh, or its distance changed.
    Reachable {
        /// The node.
        node: Eid,
        /// Hops to it.
        hops: u32,
    },
    /// A node is no longer reachable over the mesh.
    Unreachable {
        /// The node.
        node: Eid,
    },
    /// A bundle for a local endpoint.
    Delivered(Delivery),
    /// A status report arrived for a bundle this node sent.
    StatusReport {
        /// The node that reported.
        from: Eid,
        /// The report.
        report: wire::StatusReport,
    },
    /// The node dropped a bundle.
    Dropped {
        /// The bundle.
        id: BundleId,
        /// Why.
        reason: DropReason,
    },
    /// A stream event.
    Stream(stream::StreamEvent),
}
