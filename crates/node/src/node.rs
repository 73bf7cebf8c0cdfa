//! The node: inputs, commands, outputs, and the bookkeeping that ties links, mesh routing, the
//! forwarding classes and the store together.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::expiring::ExpiringMap;
use crate::held::{Held, HeldIndex, adu_key};

use bytes::Bytes;
use store::{BundleMeta, Retention, RpcTable, Store, StoreError, StoredBundle};
use wire::CrcType;
use wire::{
    AdminRecord, Beacon, Bundle, BundleFlags, BundleId, Capabilities, ClaEndpoint, Control,
    CreationTimestamp, DtnTime, Eid, PrimaryBlock, Reassembly, StatusAssertion, StatusReason,
    StatusReport, Summary, bundle_key,
};

use bpsec::BLOCK_BIB as BLOCK_INTEGRITY_BLOCK;

use crate::cgr::{ContactGraph, Route};
use crate::classes::{
    self, Class, copies_of, count_hop, ensure_hop_limit, is_broadcast, set_class, set_copies,
    set_previous_node,
};
use crate::links::{InFlight, Link, LinkTable};
use crate::mesh::{Mesh, MeshConfig, RouteEvent};
use crate::pieces::{Acknowledged, cut, spread_start, start_salt};
use crate::strategy::{Decision, Strategy, StrategyKind};
use crate::stream::{StreamConfig, StreamError, StreamId, Streams};
use crate::{Delivery, DropReason, Event, Frame, LinkChange, LinkId, TransferResult, Transmit};

/// The demux of the endpoint that receives Ferry's control messages on every node.
pub const CONTROL_DEMUX: &str = "~ferry";

/// How long a control or stream bundle lives: they are only useful while the path is.
const REAL_TIME_LIFETIME_MS: u64 = 60_000;
/// Most stream segments one bundle carries (a pure acknowledgement is ≈15 bytes).
const MAX_SEGMENTS_PER_BUNDLE: usize = 256;
/// Most bytes of stream segments one bundle carries, unless its link's MTU is smaller: a
/// segment is at most `StreamConfig::max_segment` (1200 by default), so this is about fifty
/// full ones or a few hundred RPC calls.
const MAX_SEGMENT_BYTES_PER_BUNDLE: usize = 64 << 10;
/// What a segment adds to its data in a bundle of several: five CBOR items, the stream id a
/// full 64 bits.
const SEGMENT_OVERHEAD: usize = 32;

/// Most purge keys of one neighbour's summary the node reads; the rest are ignored (counted in
/// [`NodeStats::summary_purge_keys_ignored`]). A summary lists its sender's whole purge set, so
/// an honest node with the default [`NodeConfig::max_purge_entries`] lists at most about this
/// many; a stranger's summary is as long as a bundle can be, and each key read costs lookups
/// (and, while the set has room, a store write).
pub const MAX_SUMMARY_PURGE_KEYS: usize = 65_536;

/// Every this many summary vectors to a neighbour (the first of a contact included) lists the
/// whole purge set; the others list only the keys added since the one before
/// (see `Node::send_summary`).
pub const FULL_SUMMARY_EVERY: u32 = 6;

/// Default of [`NodeConfig::link_window_bytes`]: 16 MiB. The window bounds what the shell holds
/// to send on one link: pieces handed over and not yet written out. A piece written out leaves
/// it, so the wait for the receiver's last TCPCL XFER_ACK (a Ferry daemon sends it once the
/// bundle is durable: a flush, an fsync) no longer holds the next bundle back. When pieces
/// stayed in the window until that acknowledgement, 1 MiB bundles on loopback between two
/// daemons with disk stores moved as fast with 16 MiB as without a window and 30-50 % slower
/// with 2-4 MiB. It is small enough that a phone with a few neighbours keeps tens of MiB in
/// flight, not its whole store.
pub const DEFAULT_LINK_WINDOW_BYTES: u64 = 16 << 20;

/// How long a neighbour that sent no summary vector ([`NodeConfig::summary_grace`]) is
/// remembered as another implementation, to which no control traffic goes: after that, a new
/// session with it tries once more.
pub const FOREIGN_MEMORY: Duration = Duration::from_secs(3_600);
/// How often a neighbour taken for another implementation is still sent a summary vector: one
/// small bundle every few minutes, so that a Ferry node whose summaries were all lost (a very
/// lossy link, both ways) is found again, without the steady control traffic of a Ferry peer.
pub const FOREIGN_PROBE: Duration = Duration::from_secs(300);
/// Most neighbours remembered as other implementations; beyond, the next such neighbour is
/// sent the contact-start control traffic again at each session (a few bundles), nothing worse.
pub const MAX_FOREIGN_REMEMBERED: usize = 1_024;

/// A node's configuration. `NodeConfig::new` gives the defaults.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id, a dtn node id such as `dtn://drone-7/`.
    pub node_id: Eid,
    /// Seed for the node's only source of randomness (beacon jitter, stream ids).
    pub seed: u64,
    /// Store-carry-forward strategy.
    pub strategy: StrategyKind,
    /// Beacon period on every link without a session (see [`crate::LinkChange::Up`]).
    pub beacon_period: Duration,
    /// A neighbour is gone after this many beacon periods without a beacon.
    pub missed_beacons: u64,
    /// How often summary vectors are exchanged with each neighbour (also sent at contact start).
    pub summary_period: Duration,
    /// How long a new neighbour has to send its summary vector. One that sends none in that
    /// time (and was not heard by a Ferry beacon) is taken for another BPv7 implementation (a
    /// router such as dtn7-rs, which never answers): it is offered every held bundle the
    /// strategy gives a neighbour, as if its summary were empty, and sent none of this node's
    /// control traffic but a summary every [`FOREIGN_PROBE`], for [`FOREIGN_MEMORY`], in this
    /// and later sessions. Any control bundle from it makes it a Ferry node again at once. The
    /// default, 25 s, outlasts a contact-start summary and two periodic ones lost in a row.
    pub summary_grace: Duration,
    /// Hop limit of dtn-class bundles this node creates.
    pub hop_limit: u64,
    /// Hop limit of datagram and stream bundles (bounds broadcast flooding).
    pub datagram_hop_limit: u64,
    /// How long a delivered bundle's key stays in the purge set.
    pub purge_retention: Duration,
    /// Most entries of the purge set that neighbours' summaries may fill (65,536 by default:
    /// about 3 MiB of memory, a store row each, and ≈9 bytes each in every summary this node
    /// sends). A key a summary names while the set is this full is not kept (counted in
    /// [`NodeStats::purge_set_full`]); entries this node makes itself (a bundle delivered
    /// here or handed to its destination) are always kept, even beyond it.
    pub max_purge_entries: usize,
    /// At most this many keys of real-time bundles are remembered for duplicate suppression.
    pub max_seen: usize,
    /// Most bundles held before a bundle carried for others is refused (100,000 by default: a
    /// few hundred bytes of index each in memory). The store's byte quota alone would let a
    /// stranger's tiny bundles grow the index to millions; this node's own bundles and those
    /// for it are still stored beyond it. Counted in [`NodeStats::carry_refused`].
    pub max_carried_bundles: usize,
    /// Bundles to one node larger than this are split before sending, at every hop (proactive
    /// fragmentation by policy), in addition to splits for a link's MTU and a contact's known
    /// capacity: the pieces travel on their own, so a large bundle crosses several hops in
    /// about the time of one instead of one whole hop after another. Broadcast bundles are not
    /// split by it (each node they reach would rebuild them). `None` disables it.
    pub max_bundle_piece: Option<u64>,
    /// Smallest payload piece worth sending into a contact that cannot take the whole bundle,
    /// and the smallest piece a link's MTU may have a bundle cut into (a smaller MTU gets only
    /// bundles that fit it whole: [`NodeStats::mtu_too_small`]).
    pub min_piece: u64,
    /// Encoded bytes of store-carry-forward bundles in flight on one link (handed to the shell
    /// and not yet reported by `handle_transfer`); more wait in the node, which hands them over
    /// as transfers finish. A shell holds every byte in flight in memory (read from the store,
    /// queued on the convergence layer), so this bounds the memory a backlog for one neighbour
    /// costs. An offer always goes when nothing is in flight on its link, so a bundle larger than
    /// the window still moves, alone; the pieces a bundle is cut into for the link go together
    /// (they share one payload buffer, so holding some back would save no memory). A piece the
    /// shell wrote out ([`Node::handle_transfer_written`]) leaves the window while its result is
    /// awaited: the shell no longer holds it, and the link carries the next bundle while the
    /// peer makes the last one durable (with a 100 MB bundle, most of a second). Real-time
    /// traffic (beacons, control, datagram and stream bundles) is never held back. `u64::MAX`
    /// turns the window off.
    pub link_window_bytes: u64,
    /// What the node's beacons announce.
    pub capabilities: Capabilities,
    /// Convergence layers the node's beacons announce.
    pub cla_endpoints: Vec<ClaEndpoint>,
    /// Mesh routing parameters.
    pub mesh: MeshConfig,
    /// Stream parameters.
    pub stream: StreamConfig,
    /// Bundle Protocol Security (RFC 9172): what the node signs and encrypts as it sends, what
    /// it verifies and decrypts as it receives, with which keys (`bpsec::Policy`; empty by
    /// default: nothing added or checked, and a BCB for this node refused, since it cannot be
    /// decrypted here). Its `iv_fixed` must be drawn at random at every start.
    pub bpsec: bpsec::Policy,
    /// Known future contacts (a contact plan): a bundle for a node the plan names goes only to
    /// the next hop of its earliest-arrival route ([`crate::cgr`]), and this node releases its
    /// copy once that neighbour holds all of it (forwarding, not replication). Bundles for nodes
    /// the plan does not name, or that no planned journey brings there before they expire, are
    /// left to the strategy; a live mesh path is preferred to the plan.
    pub contact_graph: Option<Arc<ContactGraph>>,
}

impl NodeConfig {
    /// Defaults for a node with this id.
    pub fn new(node_id: Eid) -> Self {
        Self {
            node_id,
            seed: 0,
            strategy: StrategyKind::Epidemic,
            beacon_period: Duration::from_secs(1),
            missed_beacons: 3,
            summary_period: Duration::from_secs(10),
            summary_grace: Duration::from_secs(25),
            hop_limit: 64,
            // Above the longest mesh path expected (the paper's chain is 31 hops, its islands
            // 64 nodes); floods stop at nodes that saw the bundle already.
            datagram_hop_limit: 64,
            purge_retention: Duration::from_secs(24 * 3_600),
            max_purge_entries: 65_536,
            max_seen: 65_536,
            max_carried_bundles: 100_000,
            max_bundle_piece: None,
            min_piece: 4_096,
            link_window_bytes: DEFAULT_LINK_WINDOW_BYTES,
            capabilities: Capabilities(Capabilities::DTN_RELAY | Capabilities::MESH_ROUTING),
            cla_endpoints: Vec::new(),
            mesh: MeshConfig::default(),
            stream: StreamConfig::default(),
            bpsec: bpsec::Policy::default(),
            contact_graph: None,
        }
    }
}

/// A bundle arriving in pieces (see [`Node::arriving`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arriving<'a> {
    /// Its source.
    pub source: &'a Eid,
    /// Its destination.
    pub destination: &'a Eid,
    /// Distinct payload bytes here.
    pub received: u64,
    /// Its whole payload's length.
    pub total: u64,
}

/// Counters, for reports and the simulator's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Bundles received on links (all classes).
    pub bundles_received: u64,
    /// Encoded bytes of the bundles received on links (payload and headers).
    pub bytes_received: u64,
    /// Bundle transmissions handed to the shell (all classes, pieces counted).
    pub bundles_sent: u64,
    /// Encoded bytes of those transmissions (payload and headers).
    pub bytes_sent: u64,
    /// Control bundles among them.
    pub control_sent: u64,
    /// Bundles delivered to local applications.
    pub delivered: u64,
    /// Duplicates received and ignored.
    pub duplicates: u64,
    /// Bundles dropped.
    pub dropped: u64,
    /// Fragments this node cut (reactively or proactively).
    pub fragments_sent: u64,
    /// Offers of a bundle not sent to a neighbour whose link MTU (a TCPCL peer's transfer MRU)
    /// leaves room for pieces smaller than [`NodeConfig::min_piece`] only, the bundle not
    /// fitting whole.
    pub mtu_too_small: u64,
    /// Purge keys named by neighbours' summaries that were not kept because the purge set held
    /// [`NodeConfig::max_purge_entries`] entries.
    pub purge_set_full: u64,
    /// Purge keys of neighbours' summaries beyond [`MAX_SUMMARY_PURGE_KEYS`] a summary, not read.
    pub summary_purge_keys_ignored: u64,
    /// Bundles carried for others refused because [`NodeConfig::max_carried_bundles`] were held.
    pub carry_refused: u64,
    /// Bundles received whose primary block had neither a CRC nor a BIB (RFC 9171 §4.3.1
    /// forbids that), given a CRC-32C as they were accepted.
    pub primary_crc_added: u64,
    /// BIBs verified on receipt (their security source had a key in the policy).
    pub bib_verified: u64,
    /// BCBs decrypted (and removed) at this node, the destination.
    pub bcb_decrypted: u64,
    /// Bundles dropped because a BIB did not verify or a security block was malformed.
    pub bib_failed: u64,
    /// Bundles for this node dropped because a BCB could not be decrypted.
    pub bcb_failed: u64,
    /// Bundles dropped because their source must sign (or encrypt) and did not.
    pub security_missing: u64,
    /// BIBs this node added to bundles it sent.
    pub bib_added: u64,
    /// BCBs this node added to bundles it sent.
    pub bcb_added: u64,
    /// Bundles handed to the next hop of their planned route ([`NodeConfig::contact_graph`])
    /// and released here once it held them whole.
    pub planned_handoffs: u64,
}

/// Store-carry-forward traffic on one link (see [`NodeConfig::link_window_bytes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkLoad {
    /// Transmissions handed to the shell whose result `handle_transfer` has not reported yet.
    pub pieces: usize,
    /// Held bundles those pieces were cut from.
    pub bundles: usize,
    /// The encoded bytes of those not written out yet ([`Node::handle_transfer_written`]): at
    /// most the window, unless they are the pieces of one bundle.
    pub bytes: u64,
    /// Held bundles offered to the neighbour that wait for room in the window.
    pub waiting: usize,
}

/// A bundle for the node to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Source endpoint; must be on this node.
    pub source: Eid,
    /// Destination endpoint (`dtn://~all/<service>` for broadcast).
    pub destination: Eid,
    /// Application data.
    pub payload: Bytes,
    /// Forwarding class.
    pub class: Class,
    /// Lifetime from now.
    pub lifetime_ms: u64,
    /// Status report requests and other primary-block flags.
    pub flags: BundleFlags,
    /// Eviction priority (0 bulk, 1 normal, 2 expedited).
    pub priority: u8,
}

impl Outgoing {
    /// A dtn-class bundle with a one-hour lifetime and no report requests.
    pub fn new(source: Eid, destination: Eid, payload: Bytes) -> Self {
        Self {
            source,
            destination,
            payload,
            class: Class::Dtn,
            lifetime_ms: 3_600_000,
            flags: BundleFlags::default(),
            priority: 1,
        }
    }
}

/// Why a command was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The source endpoint is not on this node.
    #[error("source {0} is not an endpoint of this node")]
    ForeignSource(Eid),
    /// A lifetime of zero.
    #[error("lifetime must be positive")]
    ZeroLifetime,
    /// A real-time bundle to a node the mesh cannot reach now.
    #[error("no route to {0} now")]
    NoRoute(Eid),
    /// The store refused the bundle.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stream command failed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The BPSec policy could not be applied (a key of the wrong length for its context, or
    /// the AES-GCM IVs of this run used up); nothing was sent.
    #[error("BPSec: {0}")]
    Security(#[from] bpsec::SecurityError),
}

/// Buffers for the stream traffic of a round, kept with their room between rounds: grown from
/// empty for every bundle, the segment list was reallocated four or five times a bundle of a few
/// dozen segments, blocks of kilobytes that made glibc's allocator sort its free lists.
#[derive(Default)]
struct StreamRoom {
    /// A round's stream segments.
    out: Vec<crate::stream::OutSegment>,
    /// The segments of one bundle.
    segments: Vec<wire::StreamSegment>,
    /// The acknowledgements of a bundle of acknowledgements alone.
    acks: Vec<wire::StreamAck>,
    /// The lists of the stream bundles received.
    received: wire::ListRoom,
}

/// One DTN node. Performs no I/O and reads no clock. See the crate documentation for how to drive
/// it: after any `handle_*` input or command, drain `poll_transmit` and `poll_event`, then call
/// `handle_timeout` at `poll_timeout`.
pub struct Node {
    config: NodeConfig,
    me: Eid,
    store: Box<dyn Store + Send>,
    strategy: Box<dyn Strategy>,
    mesh: Mesh,
    streams: Streams,
    /// Streams have segments to send or acknowledgements to make since this time; taken when the
    /// shell next takes the transmits (see `poll_transmit`).
    stream_output_at: Option<DtnTime>,
    /// Buffers the stream traffic of a round is gathered in, kept with their room.
    room: StreamRoom,
    links: LinkTable,
    /// Identified neighbours and the link each is reached on.
    neighbours: BTreeMap<Eid, LinkId>,
    /// The bundles in the store, indexed.
    held: HeldIndex,
    /// Bundle keys each neighbour holds (its last summary, plus what we completed to it).
    known: BTreeMap<Eid, BTreeSet<u64>>,
    /// Neighbours that sent no summary vector in time: other implementations, sent no control
    /// traffic until the entry expires ([`NodeConfig::summary_grace`]).
    foreign: ExpiringMap<Eid, ()>,
    /// Payload ranges of a held bundle that a neighbour already holds as fragments (a cut
    /// contact, or pieces acknowledged out of order), until it holds all of it.
    partial: BTreeMap<(BundleId, Eid), Acknowledged>,
    /// Keys of delivered bundles (whole-bundle keys), to delete them network-wide, and until
    /// when each holds. Kept in the store too (`RpcTable::Purged`), written with what added the
    /// entry, so that a bundle delivered here is still refused after a restart. Each entry's
    /// value is its place in `purge_order`.
    purged: ExpiringMap<u64, u64>,
    /// The purge set's keys in the order they were added (by a counter that only grows), so a
    /// summary can list just the keys added since the last one to the same neighbour.
    purge_order: BTreeMap<u64, u64>,
    /// The last number given to a purge entry in `purge_order`.
    purge_counter: u64,
    /// Real-time bundles seen, for duplicate suppression, and broadcast dtn bundles delivered here.
    seen: ExpiringMap<u64, ()>,
    reassembly: BTreeMap<(Eid, CreationTimestamp), Reassembly>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    next_sequence: u64,
    beacon_sequence: u64,
    rng: u64,
    stats: NodeStats,
    /// The IVs of the BCBs this node makes (`bpsec::IvSource`: never one twice in a run).
    ivs: bpsec::IvSource,
    /// Planned routes by destination, each valid from when it was computed until the plan's
    /// next change (at most one per node the plan names).
    routes: BTreeMap<Eid, PlannedRoute>,
    /// The plan's next contact start or end: held bundles are offered again then, because the
    /// route of each may now go through a neighbour that is already here.
    plan_change: Option<DtnTime>,
}

/// A route from the contact plan, cached (see `Node::planned_next_hop`).
#[derive(Debug, Clone)]
struct PlannedRoute {
    from: DtnTime,
    until: DtnTime,
    route: Option<Route>,
}

impl Node {
    /// A node with this configuration and store. Bundles already in the store (a restart) are
    /// indexed and will be forwarded, and the purge set is read back (entries past their time
    /// are removed from the store); `now` is the current DTN time.
    pub fn new(config: NodeConfig, store: Box<dyn Store + Send>, now: DtnTime) -> Self {
        let me = config.node_id.node_id();
        let mut node = Self {
            mesh: Mesh::new(me.clone(), config.mesh.clone(), now),
            streams: Streams::new(config.stream.clone(), config.seed ^ 0x5752_4541_4d00),
            stream_output_at: None,
            room: StreamRoom::default(),
            strategy: config.strategy.build(),
            me,
            store,
            links: LinkTable::new(config.missed_beacons),
            neighbours: BTreeMap::new(),
            held: HeldIndex::default(),
            known: BTreeMap::new(),
            foreign: ExpiringMap::new(),
            partial: BTreeMap::new(),
            purged: ExpiringMap::new(),
            purge_order: BTreeMap::new(),
            purge_counter: 0,
            seen: ExpiringMap::new(),
            reassembly: BTreeMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            next_sequence: 0,
            beacon_sequence: 0,
            rng: config.seed | 1,
            stats: NodeStats::default(),
            ivs: bpsec::IvSource::new(config.bpsec.iv_fixed),
            routes: BTreeMap::new(),
            plan_change: config
                .contact_graph
                .as_ref()
                .and_then(|g| g.next_change(now)),
            config,
        };
        node.reindex();
        node.reload_purged(now);
        node
    }

    /// Reads the purge set back from the store (after a restart).
    fn reload_purged(&mut self, now: DtnTime) {
        let Ok(rows) = self.store.rpc_scan(RpcTable::Purged) else {
            return;
        };
        for (k, v) in rows {
            let entry = <[u8; 8]>::try_from(k.as_ref())
                .ok()
                .zip(<[u8; 8]>::try_from(v.as_ref()).ok())
                .map(|(k, v)| (u64::from_be_bytes(k), DtnTime::from_be_bytes(v)));
            match entry {
                Some((key, until)) if until > now => {
                    self.purge_counter += 1;
                    self.purged.insert(key, until, self.purge_counter);
                    self.purge_order.insert(self.purge_counter, key);
                }
                // Expired while the node was down, or not a row this node writes.
                _ => {
                    let _ = self.store.rpc_remove(RpcTable::Purged, &k);
                }
            }
        }
    }

    /// Rebuilds the in-memory index from the store (after a restart).
    fn reindex(&mut self) {
        let metas = match self.store.list() {
            Ok(metas) => metas,
            Err(_) => return,
        };
        for meta in metas {
            if let Ok(Some(stored)) = self.store.get(&meta.id) {
                let held = Held::of(&stored.bundle, meta.expiry);
                let for_me = held.dest_node == self.me;
                self.index(meta.id.clone(), held);
                // Pieces waiting for reassembly pick up where they were.
                if for_me && stored.bundle.primary.fragment.is_some() {
                    let slot = (meta.id.source.clone(), meta.id.creation);
                    let rebuilt = match self.reassembly.remove(&slot) {
                        None => Reassembly::new(stored.bundle).ok(),
                        Some(mut r) => r.insert(stored.bundle).ok().map(|()| r),
                    };
                    if let Some(r) = rebuilt {
                        self.reassembly.insert(slot, r);
                    }
                }
            }
        }
    }

    // ----- getters -----

    /// This node's id.
    pub fn id(&self) -> &Eid {
        &self.me
    }

    /// Counters.
    pub fn stats(&self) -> NodeStats {
        self.stats
    }

    /// Keys of bundles held here that neighbours are known to hold, summed over neighbours.
    pub fn known_keys(&self) -> usize {
        self.known.values().map(BTreeSet::len).sum()
    }

    /// Entries of the purge set (keys of bundles known to be delivered).
    pub fn purge_set_len(&self) -> usize {
        self.purged.len()
    }

    /// Hops to `node` over the live mesh, if reachable now.
    pub fn reachable(&self, node: &Eid) -> Option<u32> {
        if node.node_id() == self.me {
            return Some(0);
        }
        self.mesh.hops(&node.node_id())
    }

    /// The mesh routing table.
    pub fn routes(&self) -> Vec<crate::mesh::Route> {
        self.mesh.routes()
    }

    /// Identified neighbours and their links.
    pub fn neighbours(&self) -> impl Iterator<Item = (&Eid, LinkId)> {
        self.neighbours.iter().map(|(e, l)| (e, *l))
    }

    /// Ids and expiry times of the bundles this node holds, ascending by id.
    pub fn held_bundles(&self) -> impl Iterator<Item = (&BundleId, DtnTime)> {
        self.held.iter().map(|(id, h)| (id, h.expiry))
    }

    /// Bundles arriving in pieces (fragments, or the prefix of a cut transfer) that are not
    /// whole yet: for a shell showing a large transfer's progress.
    pub fn arriving(&self) -> impl Iterator<Item = Arriving<'_>> {
        self.reassembly.values().map(|r| Arriving {
            source: &r.bundle_id().source,
            destination: r.destination(),
            received: r.received_len(),
            total: r.total_len(),
        })
    }

    /// What a link carries for store-carry-forward routing now, if the link is up: for a shell's
    /// metrics, and for tests of the window.
    pub fn link_load(&self, link: LinkId) -> Option<LinkLoad> {
        self.links.get(&link).map(|l| LinkLoad {
            pieces: l.flights.pieces(),
            bundles: l.flights.bundles(),
            bytes: l.flights.bytes,
            waiting: l.backlog.len(),
        })
    }

    /// Payload bytes of a held bundle (of the piece, for a fragment).
    pub fn held_payload_len(&self, id: &BundleId) -> Option<u64> {
        self.held.get(id).map(|h| h.payload_len)
    }

    /// Whether the node would take this bundle from a neighbour: false for one it holds, has
    /// delivered, or (real-time) has seen. A convergence layer asks this when a transfer starts
    /// and refuses the rest of a duplicate.
    pub fn wants(&self, id: &BundleId) -> bool {
        let whole = BundleId {
            fragment: None,
            ..id.clone()
        };
        !(self.held.contains(id)
            || self.held.contains(&whole)
            || self.purged.contains_key(&adu_key(id))
            || self.seen.contains_key(&bundle_key(id)))
    }

    /// The store.
    pub fn store(&self) -> &(dyn Store + Send) {
        self.store.as_ref()
    }

    /// The store, mutably (the shell flushes it; the RPC layer keeps its tables in it).
    pub fn store_mut(&mut self) -> &mut (dyn Store + Send) {
        self.store.as_mut()
    }

    /// Gives the store back (a shell restarting the node in-process, as the simulator does).
    pub fn into_store(self) -> Box<dyn Store + Send> {
        self.store
    }

    /// The configuration the node was made with.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        self.strategy.name()
    }

    // ----- outputs -----

    /// The next frame to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        // Streams' segments wait until the shell takes the transmits: by then the application
        // has answered what arrived (a reply carries the acknowledgement instead of a pure one),
        // and every segment of the round between the same two endpoints shares one bundle.
        // Looped back (a stream between two endpoints of this node), they are input that may
        // owe acknowledgements in turn: a few rounds settle that.
        let mut rounds = 0;
        while self.transmits.is_empty() && rounds < 4 {
            let Some(now) = self.stream_output_at.take() else {
                break;
            };
            self.carry_stream_output(now);
            self.pump(now);
            rounds += 1;
        }
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether `peer`, a neighbour, has sent this node control traffic (a summary vector or
    /// link state) on a link now up: it speaks Ferry's control protocol.
    pub fn speaks_ferry(&self, peer: &Eid) -> bool {
        self.links
            .values()
            .any(|l| l.speaks_ferry && l.peer.as_ref() == Some(peer))
    }

    /// Whether `node` is remembered as another BPv7 implementation: a neighbour that sent no
    /// summary vector in time ([`NodeConfig::summary_grace`]), within [`FOREIGN_MEMORY`].
    pub fn is_foreign(&self, node: &Eid) -> bool {
        self.foreign.contains_key(node)
    }

    /// When `handle_timeout` must be called next.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        let mut next: Option<DtnTime> = None;
        let mut consider = |t: Option<DtnTime>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(self.links.next_due());
        consider(self.held.first_expiry().map(|(t, _)| t));
        consider(self.purged.next_expiry());
        consider(self.foreign.next_expiry());
        // An outdated expiry may wake the node early, for nothing but dropping it.
        consider(self.seen.next_expiry());
        consider(self.mesh.poll_timeout());
        consider(self.streams.poll_timeout());
        consider(self.plan_change);
        next
    }

    // ----- inputs -----

    /// A link came up or went down.
    pub fn handle_link(&mut self, now: DtnTime, change: LinkChange) {
        match change {
            LinkChange::Up {
                link,
                peer,
                mtu,
                bandwidth_bps,
                contact,
            } => {
                if self.links.contains_key(&link) {
                    self.link_down(now, link);
                }
                self.links.insert(
                    link,
                    Link::new(
                        mtu,
                        bandwidth_bps,
                        contact.map(|span| now + span),
                        now,
                        self.config.beacon_period,
                        peer.is_none(),
                    ),
                );
                match peer {
                    // A session: the peer knows who we are from its handshake, and the shell
                    // says when it ends, so it carries no beacons.
                    Some(peer) => self.identify(now, link, peer.node_id()),
                    // Announce ourselves at once so the peer learns who we are.
                    None => self.send_beacon(now, link),
                }
            }
            LinkChange::Down { link } => self.link_down(now, link),
        }
        self.pump(now);
    }

    /// A discovery beacon arrived on a link.
    pub fn handle_beacon(&mut self, now: DtnTime, link: LinkId, beacon: Beacon) {
        let peer = beacon.node.node_id();
        if peer == self.me {
            return;
        }
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        l.last_heard = now;
        l.peer_period = Duration::from_millis(beacon.period_ms.clamp(100, 3_600_000));
        l.beacon_liveness = true;
        if l.peer.as_ref() != Some(&peer) {
            self.identify(now, link, peer);
        }
        self.pump(now);
    }

    /// A bundle arrived on a link: a whole one, or the fragment a cut transfer left.
    pub fn handle_bundle(&mut self, now: DtnTime, link: LinkId, bundle: Bundle) {
        self.stats.bundles_received += 1;
        self.stats.bytes_received += encoded_len(&bundle);
        let from = self.links.get(&link).and_then(|l| l.peer.clone());
        self.accept(now, from.as_ref(), Some(link), bundle);
        self.pump(now);
    }

    /// Encoded bytes arrived on a link; malformed input is dropped with an event.
    pub fn handle_bundle_bytes(&mut self, now: DtnTime, link: LinkId, bytes: Bytes) {
        match Bundle::decode(bytes) {
            Ok(bundle) => self.handle_bundle(now, link, bundle),
            Err(_) => {
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id: BundleId {
                        source: Eid::Null,
                        creation: CreationTimestamp::default(),
                        fragment: None,
                    },
                    reason: DropReason::Malformed,
                });
            }
        }
    }

    /// The shell reports how a transmitted bundle fared. `id` is the id of the bundle as
    /// transmitted (a fragment's id if the node sent a piece). Wanted only for transmits with
    /// [`Transmit::report`] set; a report about any other is ignored.
    pub fn handle_transfer(
        &mut self,
        now: DtnTime,
        link: LinkId,
        id: &BundleId,
        result: TransferResult,
    ) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let Some(flight) = l.flights.remove(id) else {
            return;
        };
        let Some(peer) = l.peer.clone() else {
            return;
        };
        match result {
            TransferResult::Complete => self.progress(now, &peer, &flight, flight.end),
            TransferResult::Cut { payload_bytes } => {
                let end = flight.start.saturating_add(payload_bytes).min(flight.end);
                if end > flight.start {
                    self.progress(now, &peer, &flight, end);
                }
            }
            TransferResult::Failed | TransferResult::Refused => {}
        }
        // Whatever the result, the piece left the window: bundles waiting for room go now.
        self.fill_window(now, link);
        self.pump(now);
    }

    /// The shell wrote the last byte of a transmitted bundle out and holds none of it; its
    /// result ([`Node::handle_transfer`]) is to come, from a Ferry peer once the bundle is
    /// durable there. The piece leaves the link's window (see
    /// [`NodeConfig::link_window_bytes`]), so bundles waiting for room go now and the link does
    /// not idle through the peer's sync. Optional: a shell that never says so keeps each piece
    /// in the window until its result.
    pub fn handle_transfer_written(&mut self, now: DtnTime, link: LinkId, id: &BundleId) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if l.flights.written(id) {
            self.fill_window(now, link);
            self.pump(now);
        }
    }

    /// Timers: beacons, neighbour expiry, summaries, bundle expiry, mesh and stream timers.
    pub fn handle_timeout(&mut self, now: DtnTime) {
        // The links whose timers are due, in id order, each found when the previous one is done
        // (as its handling may change the others); a link with nothing due is not looked at.
        let mut after: Option<LinkId> = None;
        while let Some(link) = self.links.next_due_link(now, after) {
            after = Some(link);
            let Some(l) = self.links.get(&link) else {
                continue;
            };
            if l.expiry(self.config.missed_beacons)
                .is_some_and(|t| t <= now)
            {
                self.neighbour_lost(now, link);
            }
            let Some(l) = self.links.get(&link) else {
                continue;
            };
            if l.next_beacon.is_some_and(|t| t <= now) {
                self.send_beacon(now, link);
            }
            let Some(l) = self.links.get_mut(&link) else {
                continue;
            };
            if l.next_summary.is_some_and(|t| t <= now) {
                let foreign = l.foreign;
                l.next_summary = Some(
                    now + if foreign {
                        FOREIGN_PROBE
                    } else {
                        self.config.summary_period
                    },
                );
                if let Some(peer) = l.peer.clone() {
                    // A probe goes to a neighbour taken for another implementation too.
                    l.foreign = false;
                    self.send_summary(now, &peer);
                    if let Some(l) = self.links.get_mut(&link) {
                        l.foreign = foreign;
                    }
                }
            }
            let Some(l) = self.links.get(&link) else {
                continue;
            };
            if l.summary_due.is_some_and(|t| t <= now) {
                match l.peer.clone() {
                    // A neighbour heard by Ferry's beacons is a Ferry node, answer or not.
                    Some(peer) if !l.beacon_liveness => self.treat_as_foreign(now, link, &peer),
                    // Nothing to decide (or no one to decide it for): the time is over, and
                    // must not stay due, or the node would be woken at it forever.
                    _ => {
                        if let Some(l) = self.links.get_mut(&link) {
                            l.summary_due = None;
                        }
                    }
                }
            }
        }
        // Another implementation met long ago gets one more try at the next session.
        while self.foreign.pop_expired(now).is_some() {}
        while let Some((t, id)) = self.held.first_expiry().map(|(t, id)| (t, id.clone())) {
            if t > now {
                break;
            }
            self.drop_held(now, &id, DropReason::Expired);
        }
        while let Some((key, place)) = self.purged.pop_expired(now) {
            self.purge_order.remove(&place);
            let _ = self.store.rpc_remove(RpcTable::Purged, &key.to_be_bytes());
        }
        while self.seen.pop_expired(now).is_some() {}
        self.mesh.handle_timeout(now);
        self.streams.handle_timeout(now);
        if self.plan_change.is_some_and(|t| t <= now) {
            self.plan_changed(now);
        }
        self.pump(now);
    }

    /// The routes the contact plan gives this node now, by destination (empty without a plan).
    pub fn planned_routes(&self, now: DtnTime) -> Vec<(Eid, Route)> {
        self.config
            .contact_graph
            .as_ref()
            .map(|g| g.routes_from(&self.me, now))
            .unwrap_or_default()
    }

    /// Replaces the contact plan the node routes by ([`NodeConfig::contact_graph`]); `None`
    /// routes by the strategy alone again. Routes computed from the old plan are forgotten.
    pub fn set_contact_graph(&mut self, now: DtnTime, graph: Option<Arc<ContactGraph>>) {
        self.plan_change = graph.as_ref().and_then(|g| g.next_change(now));
        self.config.contact_graph = graph;
        self.routes.clear();
    }

    /// A planned contact started or ended: routes may now go through a neighbour that is here
    /// already, so held bundles are offered again to every neighbour whose holdings are known.
    fn plan_changed(&mut self, now: DtnTime) {
        self.plan_change = self
            .config
            .contact_graph
            .as_ref()
            .and_then(|g| g.next_change(now));
        let neighbours: Vec<(Eid, LinkId)> = self
            .neighbours
            .iter()
            .filter(|(peer, _)| self.known.contains_key(*peer))
            .map(|(peer, link)| (peer.clone(), *link))
            .collect();
        if neighbours.is_empty() {
            return;
        }
        let ids: Vec<BundleId> = self.held.ids().cloned().collect();
        for (peer, link) in neighbours {
            for id in &ids {
                self.offer(now, id, &peer, link, None);
            }
        }
    }

    /// Whether this node routes bundles for `dest` by its contact plan: the plan has contacts
    /// of both.
    fn plan_knows(&self, dest: &Eid) -> bool {
        self.config
            .contact_graph
            .as_ref()
            .is_some_and(|g| g.knows(dest) && g.knows(&self.me))
    }

    /// The next hop of the planned route to `dest`, if the plan has one that arrives by
    /// `expiry`.
    fn planned_next_hop(&mut self, now: DtnTime, dest: &Eid, expiry: DtnTime) -> Option<Eid> {
        let graph = self.config.contact_graph.as_ref()?;
        let route = match self.routes.get(dest) {
            Some(cached) if cached.from <= now && now < cached.until => cached.route.clone(),
            _ => {
                let route = graph.route(&self.me, dest, now);
                let until = graph.next_change(now).unwrap_or(DtnTime::MAX);
                self.routes.insert(
                    dest.clone(),
                    PlannedRoute {
                        from: now,
                        until,
                        route: route.clone(),
                    },
                );
                route
            }
        };
        route.filter(|r| r.arrives <= expiry).map(|r| r.next_hop)
    }

    // ----- commands -----

    /// Creates and sends a bundle. Dtn-class bundles are stored first (an error if the store is
    /// full); real-time ones need a live route (or are broadcast).
    pub fn send(&mut self, now: DtnTime, out: Outgoing) -> Result<BundleId, SendError> {
        if out.source.node_id() != self.me {
            return Err(SendError::ForeignSource(out.source));
        }
        if out.lifetime_ms == 0 {
            return Err(SendError::ZeroLifetime);
        }
        let broadcast = is_broadcast(&out.destination);
        let dest_node = out.destination.node_id();
        if out.class.is_real_time()
            && !broadcast
            && dest_node != self.me
            && self.mesh.next_hop(&dest_node).is_none()
        {
            return Err(SendError::NoRoute(dest_node));
        }
        let mut primary = PrimaryBlock::new(
            out.destination,
            out.source,
            self.next_timestamp(now),
            out.lifetime_ms,
        );
        primary.flags = out.flags.with(BundleFlags::IS_FRAGMENT, false);
        let mut bundle = Bundle::new(primary, out.payload);
        set_class(&mut bundle, out.class);
        let id = bundle.id();
        if out.class.is_real_time() {
            ensure_hop_limit(&mut bundle, self.config.datagram_hop_limit);
            if dest_node != self.me {
                self.protect(&mut bundle)?;
            }
            self.mark_seen(
                now,
                bundle_key(&id),
                now + Duration::from_millis(out.lifetime_ms),
            );
            self.route_real_time(now, None, bundle);
        } else {
            ensure_hop_limit(&mut bundle, self.config.hop_limit);
            if let Some(copies) = self.strategy.initial_copies() {
                set_copies(&mut bundle, copies);
            }
            if dest_node == self.me && !broadcast {
                self.deliver(now, &bundle);
            } else {
                self.protect(&mut bundle)?;
                self.store_bundle(now, bundle, Retention::Originated, out.priority, None)?;
            }
        }
        self.pump(now);
        Ok(id)
    }

    /// Opens a reliable stream from a local endpoint to a remote one.
    pub fn stream_open(
        &mut self,
        now: DtnTime,
        local: Eid,
        remote: Eid,
    ) -> Result<StreamId, SendError> {
        if local.node_id() != self.me {
            return Err(SendError::ForeignSource(local));
        }
        let id = self.streams.open(now, local, remote)?;
        self.pump(now);
        Ok(id)
    }

    /// Queues data on a stream.
    pub fn stream_send(
        &mut self,
        now: DtnTime,
        id: StreamId,
        data: Bytes,
    ) -> Result<(), SendError> {
        self.streams.send(now, id, data)?;
        self.pump(now);
        Ok(())
    }

    /// Opens a stream, queues `data` on it and, if `close`, closes our side, as one command: the
    /// node takes the stream's segments only afterwards, so a short request is one segment
    /// (OPEN, data and CLOSE together) and one bundle.
    pub fn stream_open_with(
        &mut self,
        now: DtnTime,
        local: Eid,
        remote: Eid,
        data: Bytes,
        close: bool,
    ) -> Result<StreamId, SendError> {
        if local.node_id() != self.me {
            return Err(SendError::ForeignSource(local));
        }
        let id = self.streams.open(now, local, remote)?;
        let sent = self.streams.send(now, id, data).and_then(|()| {
            if close {
                self.streams.close(now, id)
            } else {
                Ok(())
            }
        });
        if let Err(e) = sent {
            self.streams.reset(now, id);
            self.pump(now);
            return Err(e.into());
        }
        self.pump(now);
        Ok(id)
    }

    /// Queues `data` and closes our side, as one command: the CLOSE rides on the data's last
    /// segment (a reply is one bundle).
    pub fn stream_send_last(
        &mut self,
        now: DtnTime,
        id: StreamId,
        data: Bytes,
    ) -> Result<(), SendError> {
        let sent = self
            .streams
            .send(now, id, data)
            .and_then(|()| self.streams.close(now, id));
        self.pump(now);
        sent.map_err(Into::into)
    }

    /// Closes our side of a stream.
    pub fn stream_close(&mut self, now: DtnTime, id: StreamId) -> Result<(), SendError> {
        self.streams.close(now, id)?;
        self.pump(now);
        Ok(())
    }

    // ----- links and neighbours -----

    fn send_beacon(&mut self, now: DtnTime, link: LinkId) {
        let period = wire::time::millis(self.config.beacon_period);
        // ±10 % jitter so that neighbours' beacons do not stay in lockstep.
        let jitter = if period >= 10 {
            self.random() % (period / 5 + 1)
        } else {
            0
        };
        let next = now + Duration::from_millis(period - period / 10 + jitter);
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        l.next_beacon = Some(next);
        self.beacon_sequence += 1;
        let beacon = Beacon {
            node: self.me.clone(),
            sequence: self.beacon_sequence,
            period_ms: period,
            capabilities: self.config.capabilities,
            convergence_layers: self.config.cla_endpoints.clone(),
        };
        self.transmits.push_back(Transmit {
            link,
            frame: Frame::Beacon(beacon),
            urgent: true,
            report: false,
        });
    }

    /// The peer on `link` is `peer`: a new neighbour.
    fn identify(&mut self, now: DtnTime, link: LinkId, peer: Eid) {
        if let Some(old) = self.links.get(&link).and_then(|l| l.peer.clone()) {
            self.forget_neighbour(now, link, &old);
        }
        // Offers waiting on this link were for the previous peer; the new one's summary vector
        // brings its own.
        if let Some(l) = self.links.get_mut(&link) {
            l.backlog.clear();
        }
        if let Some(&other) = self.neighbours.get(&peer) {
            // The same neighbour on a second link: keep using the first.
            if other != link && self.links.contains_key(&other) {
                if let Some(l) = self.links.get_mut(&link) {
                    l.peer = Some(peer);
                }
                return;
            }
        }
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        l.peer = Some(peer.clone());
        l.next_summary = Some(now + self.config.summary_period);
        // A new peer on this link was told nothing yet.
        l.summaries_sent = 0;
        l.purges_told = 0;
        self.neighbours.insert(peer.clone(), link);
        self.mesh.set_neighbour(now, peer.clone(), 1);
        self.events.push_back(Event::NeighbourUp {
            node: peer.clone(),
            link,
        });
        if self.links.get(&link).is_some_and(|l| l.beacon_liveness) {
            self.events
                .push_back(Event::SpeaksFerry { node: peer.clone() });
        }
        if self.foreign.contains_key(&peer) {
            // Another implementation, met before: no control traffic, and what the strategy
            // gives a neighbour goes at once.
            self.treat_as_foreign(now, link, &peer);
            return;
        }
        // Contact start: the mesh database, then our summary vector; the peer answers with its
        // own, which tells us what to send. One that does not is another implementation.
        if let Some(l) = self.links.get_mut(&link) {
            l.summary_due = Some(now + self.config.summary_grace);
        }
        for lsa in self.mesh.database() {
            self.send_control(now, &peer, link, Control::LinkState(lsa));
        }
        self.send_summary(now, &peer);
    }

    /// The neighbour on `link` sends no summary vectors: it gets no control traffic, and every
    /// held bundle is offered to it as if its summary were empty (what it holds, nobody knows).
    fn treat_as_foreign(&mut self, now: DtnTime, link: LinkId, peer: &Eid) {
        if let Some(l) = self.links.get_mut(&link) {
            l.foreign = true;
            l.summary_due = None;
            l.next_summary = Some(now + FOREIGN_PROBE);
        }
        if !self.foreign.contains_key(peer) && self.foreign.len() >= MAX_FOREIGN_REMEMBERED {
            // Full: the peer is treated so for this session only.
        } else {
            self.foreign.insert(peer.clone(), now + FOREIGN_MEMORY, ());
        }
        self.known.entry(peer.clone()).or_default();
        let ids: Vec<BundleId> = self.held.ids().cloned().collect();
        for id in ids {
            self.offer(now, &id, peer, link, None);
        }
    }

    fn link_down(&mut self, now: DtnTime, link: LinkId) {
        let Some(l) = self.links.remove(&link) else {
            return;
        };
        if let Some(peer) = l.peer {
            self.forget_neighbour(now, link, &peer);
        }
    }

    /// Beacons stopped: the neighbour is gone, the link stays (it may come back).
    fn neighbour_lost(&mut self, now: DtnTime, link: LinkId) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let Some(peer) = l.peer.take() else {
            return;
        };
        // The shell will not report what was in flight to a neighbour it no longer has: the window
        // is free again, and what waited for it is offered afresh when the neighbour returns.
        l.flights.clear();
        l.backlog.clear();
        l.next_summary = None;
        l.beacon_liveness = false;
        self.forget_neighbour(now, link, &peer);
    }

    fn forget_neighbour(&mut self, now: DtnTime, link: LinkId, peer: &Eid) {
        if self.neighbours.get(peer) != Some(&link) {
            return;
        }
        self.neighbours.remove(peer);
        // The peer may be reachable on another link.
        let other = self
            .links
            .iter()
            .find(|(id, l)| **id != link && l.peer.as_ref() == Some(peer))
            .map(|(id, _)| *id);
        if let Some(other) = other {
            self.neighbours.insert(peer.clone(), other);
            return;
        }
        self.mesh.remove_neighbour(now, peer);
        // What it held is asked again by the summaries of its next contact: keeping it for
        // every node id ever met would let a stranger grow the table with new ids.
        self.known.remove(peer);
        self.events
            .push_back(Event::NeighbourDown { node: peer.clone() });
    }

    // ----- receiving -----

    fn accept(
        &mut self,
        now: DtnTime,
        from: Option<&Eid>,
        link: Option<LinkId>,
        mut bundle: Bundle,
    ) {
        // RFC 9171 §5.6 step 4, before anything else reads the bundle: blocks this node cannot
        // process (see `classes::processes_block`) are dealt with as their flags ask. A discarded
        // block is gone from what is stored, delivered and forwarded; an unflagged one is carried
        // on as it came.
        let unsupported = bundle.apply_unsupported_block_rules(classes::processes_block);
        // RFC 9171 §4.3.1: a primary block without a CRC must be the target of a BIB. Some
        // senders (dtn7-rs 0.21) send neither, and a node that enforces the rule acknowledges
        // such a bundle and drops it, reporting nothing. So the bundle is repaired as it is
        // accepted: a CRC-32C on its primary block, which changes no field it is known by, and
        // what is stored, delivered and forwarded is valid everywhere. With a BIB (which may
        // cover the primary block, and whose target this node does not read) it is left alone.
        if bundle.primary.crc_type == CrcType::None
            && !bundle
                .extensions
                .iter()
                .any(|b| b.data.block_type() == BLOCK_INTEGRITY_BLOCK)
        {
            bundle.primary.crc_type = CrcType::Crc32c;
            self.stats.primary_crc_added += 1;
        }
        if unsupported.delete_bundle {
            if unsupported.report {
                self.report_block_unsupported(now, &bundle);
            }
            self.drop_received(now, &bundle, DropReason::BlockUnsupported);
            return;
        }
        if !self.check_security(now, &mut bundle) {
            return;
        }
        let id = bundle.id();
        let key = bundle_key(&id);
        let expiry = expiry_of(&bundle, now);
        if expiry <= now {
            self.drop_received(now, &bundle, DropReason::Expired);
            return;
        }
        if bundle.hop_count().is_some_and(|h| h.exceeded()) {
            self.drop_received(now, &bundle, DropReason::HopLimitExceeded);
            return;
        }
        let class = classes::class_of(&bundle);
        let dest_node = bundle.primary.destination.node_id();
        let broadcast = is_broadcast(&bundle.primary.destination);
        if class.is_real_time() {
            // Control messages go one hop to this node's control endpoint and are never
            // forwarded: they need no duplicate suppression (most of the traffic of a large mesh).
            let one_hop_control = dest_node == self.me
                && matches!(&bundle.primary.destination, Eid::Dtn(d) if d.demux() == CONTROL_DEMUX);
            if !one_hop_control {
                if self.seen.contains_key(&key) {
                    self.stats.duplicates += 1;
                    return;
                }
                self.mark_seen(
                    now,
                    key,
                    expiry.min(now + Duration::from_millis(REAL_TIME_LIFETIME_MS)),
                );
            }
            // After duplicate suppression: a flooded copy asks for no second report.
            if unsupported.report {
                self.report_block_unsupported(now, &bundle);
            }
            if dest_node == self.me {
                self.receive_local_real_time(now, from, class, bundle);
            } else {
                if broadcast {
                    self.deliver(now, &bundle);
                }
                self.route_real_time(now, link, bundle);
            }
            return;
        }
        // The sender holds it: never offer it back.
        if let Some(from) = from {
            self.known.entry(from.clone()).or_default().insert(key);
        }
        let adu_key = adu_key(&id);
        if self.held.contains(&id) || self.purged.contains_key(&adu_key) {
            self.stats.duplicates += 1;
            return;
        }
        if unsupported.report {
            self.report_block_unsupported(now, &bundle);
        }
        if bundle.primary.is_admin_record() && dest_node == self.me {
            self.receive_admin(now, &bundle);
            return;
        }
        if dest_node == self.me && !broadcast {
            self.receive_for_me(now, id, expiry, bundle);
            return;
        }
        if broadcast && !self.seen.contains_key(&adu_key) {
            // Delivered here once, whole, and carried on to everyone else.
            let slot = (id.source.clone(), id.creation);
            if bundle.primary.fragment.is_none() {
                self.reassembly.remove(&slot);
                self.mark_seen(now, adu_key, expiry);
                self.deliver(now, &bundle);
            } else {
                // A piece (the prefix a cut transfer left, or a rest sent after one) waits for
                // the others. Delivered as it is, it would pass for the whole bundle, and, the
                // bundle counting as seen, the whole would then be refused everywhere.
                self.reassemble_broadcast(now, slot, adu_key, expiry, &bundle);
            }
        }
        self.report(now, &bundle, Report::Received, StatusReason::NoInformation);
        let stored = self.store_bundle(now, bundle, Retention::Carried, 1, from);
        if stored.is_err() && !self.held.holds_piece_of(adu_key) {
            // No piece of it is held here: nothing would ever end its reassembly.
            self.reassembly.remove(&(id.source, id.creation));
        }
    }

    /// Adds a piece of a broadcast bundle to its reassembly, and delivers the bundle once whole.
    /// The pieces themselves are carried on as they are.
    fn reassemble_broadcast(
        &mut self,
        now: DtnTime,
        slot: (Eid, CreationTimestamp),
        adu_key: u64,
        expiry: DtnTime,
        piece: &Bundle,
    ) {
        let r = match self.reassembly.remove(&slot) {
            None => Reassembly::new(piece.clone()),
            Some(mut r) => r.insert(piece.clone()).map(|()| r),
        };
        match r.map(Reassembly::finish) {
            Ok(Ok(whole)) => {
                self.mark_seen(now, adu_key, expiry);
                self.deliver(now, &whole);
            }
            Ok(Err(r)) => {
                self.reassembly.insert(slot, r);
            }
            // A piece that does not fit the others (another total length): carried, not
            // delivered.
            Err(_) => {}
        }
    }

    fn receive_local_real_time(
        &mut self,
        now: DtnTime,
        from: Option<&Eid>,
        class: Class,
        bundle: Bundle,
    ) {
        let demux_is_control = matches!(
            &bundle.primary.destination,
            Eid::Dtn(d) if d.demux() == CONTROL_DEMUX
        );
        let control = if demux_is_control || class == Class::Stream {
            Control::decode_in(&bundle.payload.data, &mut self.room.received).ok()
        } else {
            None
        };
        match (control, class) {
            (Some(Control::Stream(segment)), Class::Stream) => {
                let src = bundle.primary.source.clone();
                let dst = bundle.primary.destination.clone();
                self.streams.handle_segment(now, &src, &dst, segment);
            }
            (Some(Control::StreamAcks(mut acks)), Class::Stream) => {
                let src = bundle.primary.source.clone();
                let dst = bundle.primary.destination.clone();
                let segments = acks.drain(..).map(|ack| ack.segment());
                self.streams.handle_segments(now, &src, &dst, segments);
                self.room.received.acks = acks;
            }
            (Some(Control::Segments(mut segments)), Class::Stream) => {
                let src = bundle.primary.source.clone();
                let dst = bundle.primary.destination.clone();
                self.streams
                    .handle_segments(now, &src, &dst, segments.drain(..));
                self.room.received.segments = segments;
            }
            (Some(Control::LinkState(lsa)), _) if demux_is_control => {
                let sender = from
                    .cloned()
                    .unwrap_or_else(|| bundle.primary.source.node_id());
                self.heard_control_from(now, &sender);
                self.mesh.handle_link_state(now, &sender, lsa);
            }
            (Some(Control::Summary(summary)), _) if demux_is_control => {
                let sender = bundle.primary.source.node_id();
                self.handle_summary(now, &sender, summary);
            }
            (None, Class::Datagram) if !demux_is_control => self.deliver(now, &bundle),
            _ => {
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id: bundle.id(),
                    reason: DropReason::Malformed,
                });
            }
        }
    }

    fn receive_admin(&mut self, now: DtnTime, bundle: &Bundle) {
        let _ = now;
        match AdminRecord::decode(&bundle.payload.data) {
            Ok(AdminRecord::StatusReport(report)) => {
                self.events.push_back(Event::StatusReport {
                    from: bundle.primary.source.node_id(),
                    report,
                });
            }
            Ok(AdminRecord::Unknown { .. }) => {}
            Err(_) => {
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id: bundle.id(),
                    reason: DropReason::Malformed,
                });
            }
        }
    }

    /// A dtn-class bundle for an endpoint of this node: deliver it, reassembling fragments first.
    fn receive_for_me(&mut self, now: DtnTime, id: BundleId, expiry: DtnTime, bundle: Bundle) {
        let adu = adu_key(&id);
        if bundle.primary.fragment.is_none() {
            // In the store's batch with the delivery: the shell makes both durable before it
            // acknowledges the bundle, so no restart forgets that it was delivered.
            self.add_purge(adu, expiry.max(now + self.config.purge_retention));
            self.deliver(now, &bundle);
            self.report(now, &bundle, Report::Delivered, StatusReason::NoInformation);
            return;
        }
        // The purge set names whole bundles; fragments of one that is still incomplete must keep
        // flowing, so the purge entry is only added on completion.
        // Pieces wait in the store (they survive a restart, count against the quota and appear in
        // our summary vector, so neighbours stop sending them) until the bundle is whole.
        if self
            .store_bundle(now, bundle.clone(), Retention::MustDeliver, 1, None)
            .is_err()
        {
            return;
        }
        let slot = (id.source.clone(), id.creation);
        let finished = match self.reassembly.remove(&slot) {
            None => Reassembly::new(bundle),
            Some(mut r) => r.insert(bundle).map(|()| r),
        };
        match finished {
            Err(_) => {
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id,
                    reason: DropReason::Malformed,
                });
            }
            Ok(r) if r.is_complete() => match r.finish() {
                Ok(mut whole) => {
                    self.add_purge(adu, expiry.max(now + self.config.purge_retention));
                    let pieces: Vec<BundleId> = self.held.pieces_of(adu).cloned().collect();
                    for piece in pieces {
                        self.unindex(&piece);
                        let _ = self.store.remove(&piece);
                    }
                    // The pieces were carried unchecked: the security blocks cover the whole.
                    if !self.check_security(now, &mut whole) {
                        return;
                    }
                    self.deliver(now, &whole);
                    self.report(now, &whole, Report::Delivered, StatusReason::NoInformation);
                }
                Err(r) => {
                    self.reassembly.insert(slot, r);
                }
            },
            Ok(r) => {
                self.reassembly.insert(slot, r);
            }
        }
    }

    fn deliver(&mut self, now: DtnTime, bundle: &Bundle) {
        // A payload still under a BCB is ciphertext, never an application's data. At its
        // destination a BCB was decrypted or the bundle refused before this; a broadcast bundle
        // is carried on to everyone still encrypted, and not delivered here.
        if bundle.extension(bpsec::BLOCK_BCB).is_some() {
            return;
        }
        self.stats.delivered += 1;
        self.events.push_back(Event::Delivered(Delivery {
            id: BundleId {
                fragment: None,
                ..bundle.id()
            },
            destination: bundle.primary.destination.clone(),
            class: classes::class_of(bundle),
            created: bundle.primary.creation.time,
            expiry: expiry_of(bundle, now),
            payload: bundle.payload.data.clone(),
        }));
    }

    /// A control bundle from `peer`: it speaks Ferry's control protocol, so it is no other
    /// implementation (any more).
    fn heard_control_from(&mut self, now: DtnTime, peer: &Eid) {
        self.foreign.remove(peer);
        if let Some(&link) = self.neighbours.get(peer)
            && let Some(l) = self.links.get_mut(&link)
        {
            l.summary_due = None;
            let first = !l.speaks_ferry;
            l.speaks_ferry = true;
            if l.foreign {
                l.foreign = false;
                l.next_summary = Some(now);
            }
            // The mesh database was held back until now (see `send_control`).
            if first {
                for lsa in self.mesh.database() {
                    self.send_control(now, peer, link, Control::LinkState(lsa));
                }
                self.events
                    .push_back(Event::SpeaksFerry { node: peer.clone() });
            }
        }
    }

    fn handle_summary(&mut self, now: DtnTime, peer: &Eid, summary: Summary) {
        self.heard_control_from(now, peer);
        let listed = summary.purged.len();
        if listed > MAX_SUMMARY_PURGE_KEYS {
            self.stats.summary_purge_keys_ignored += (listed - MAX_SUMMARY_PURGE_KEYS) as u64;
        }
        for key in summary.purged.into_iter().take(MAX_SUMMARY_PURGE_KEYS) {
            // Anyone may send a summary, naming any keys. When the set is full, a key a summary
            // names is refused, and nothing is evicted for it: a stranger can then at worst keep
            // other neighbours' keys out until entries expire (a bundle delivered elsewhere may
            // be carried here again; its destination's own entry still refuses it), but it can
            // never push out an entry, least of all one this node made for a bundle delivered
            // here or handed to its destination, which would let that bundle come back and be
            // delivered twice. Refusing also costs no store write, where evicting cost two.
            if !self.purged.contains_key(&key) {
                if self.purged.len() < self.config.max_purge_entries {
                    self.add_purge(key, now + self.config.purge_retention);
                } else {
                    self.stats.purge_set_full += 1;
                }
            }
            let victims: Vec<BundleId> = self.held.pieces_of(key).cloned().collect();
            for id in victims {
                self.drop_held(now, &id, DropReason::Purged);
            }
        }
        // Only keys of bundles (or whole bundles of fragments) held here matter to what we offer
        // the peer, so only those are kept: a summary listing any number of made-up keys costs
        // no more memory than our own store's count.
        let mut have: BTreeSet<u64> = summary
            .have
            .into_iter()
            .filter(|&k| self.held.holds_key(k) || self.held.holds_piece_of(k))
            .collect();
        // What we completed to the peer since its summary was made is still true; knowledge of
        // bundles we no longer hold is dropped so the set stays as small as our store.
        if let Some(old) = self.known.get(peer) {
            have.extend(old.iter().copied().filter(|&k| self.held.holds_key(k)));
        }
        self.known.insert(peer.clone(), have);
        if let Some(&link) = self.neighbours.get(peer) {
            for id in self.offer_order(link) {
                self.offer(now, &id, peer, link, None);
            }
        }
    }

    /// The held bundles in the order they are offered to the neighbour on `link` all at once:
    /// by id, except that the held pieces of one bundle start where this node starts that bundle
    /// on this link, as a bundle cut into pieces here does (see `pieces`).
    fn offer_order(&self, link: LinkId) -> Vec<BundleId> {
        let mut ids: Vec<BundleId> = self.held.ids().cloned().collect();
        let mut at = 0;
        while at < ids.len() {
            // Pieces of one bundle sort together: same source and creation, by offset.
            let first = &ids[at];
            let run = ids[at..]
                .iter()
                .take_while(|id| {
                    id.fragment.is_some()
                        && id.source == first.source
                        && id.creation == first.creation
                })
                .count();
            let end = at + run.max(1);
            if run > 1 {
                let group = &mut ids[at..end];
                let others = self
                    .links
                    .iter()
                    .filter(|(other, l)| {
                        **other != link && group.iter().any(|id| l.flights.carries(id))
                    })
                    .count();
                let salt = start_salt(&self.me, adu_key(&group[0]));
                group.rotate_left(spread_start(group.len(), others, salt));
            }
            at = end;
        }
        ids
    }

    // ----- storing and forwarding dtn bundles -----

    fn store_bundle(
        &mut self,
        now: DtnTime,
        mut bundle: Bundle,
        retention: Retention,
        priority: u8,
        from: Option<&Eid>,
    ) -> Result<(), StoreError> {
        let id = bundle.id();
        let expiry = expiry_of(&bundle, now);
        if copies_of(&bundle).is_none()
            && let Some(copies) = self.strategy.initial_copies()
            && retention == Retention::Originated
        {
            set_copies(&mut bundle, copies);
        }
        if retention == Retention::Carried && self.held.len() >= self.config.max_carried_bundles {
            self.stats.carry_refused += 1;
            self.stats.dropped += 1;
            self.events.push_back(Event::Dropped {
                id,
                reason: DropReason::StoreFull,
            });
            return Err(StoreError::Full {
                needed: 0,
                available: 0,
                quota: self.store.usage().map(|u| u.quota).unwrap_or(0),
            });
        }
        let held = Held::of(&bundle, expiry);
        let meta = BundleMeta {
            id: id.clone(),
            destination: bundle.primary.destination.clone(),
            expiry,
            priority,
            retention,
            received_at: now,
        };
        // Offered straight from here rather than read back from the store and decoded again (a
        // clone shares the payload). Later offers read the store.
        let fresh = (!self.neighbours.is_empty()).then(|| bundle.clone());
        match self.store.insert(now, StoredBundle { meta, bundle }) {
            Ok(inserted) => {
                for victim in inserted.evicted {
                    self.unindex(&victim);
                    self.stats.dropped += 1;
                    self.events.push_back(Event::Dropped {
                        id: victim,
                        reason: DropReason::Evicted,
                    });
                }
                if !inserted.new {
                    return Ok(());
                }
            }
            Err(err) => {
                let reason = match err {
                    StoreError::Full { .. } => DropReason::StoreFull,
                    _ => DropReason::StoreError,
                };
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id: id.clone(),
                    reason,
                });
                return Err(err);
            }
        }
        // Neighbour coverage, as the mesh floods its advertisements: a Ferry neighbour that
        // floods, and sent us this bundle, sends it to its own neighbours itself, so only ours
        // it does not advertise get our copy now. Without this, on a full mesh every node that
        // receives a bundle offers it to every other, which all hold it or are receiving it
        // already. One the sender misses (its link failed, the transfer was cut) gets our copy
        // after its next summary vector, which offers everything it lacks; so a neighbour that
        // lies in its advertisement, or does not pass the bundle on, delays our copy by at most
        // one summary period and never keeps it from anyone.
        let covering = from.filter(|f| {
            self.strategy.floods() && self.speaks_ferry(f) && !self.plan_knows(&held.dest_node)
        });
        self.index(id.clone(), held);
        let peers: Vec<(Eid, LinkId)> = self
            .neighbours
            .iter()
            .filter(|(peer, _)| {
                Some(*peer) != from && !covering.is_some_and(|f| self.mesh.advertises(f, peer))
            })
            .map(|(p, l)| (p.clone(), *l))
            .collect();
        for (peer, link) in peers {
            self.offer(now, &id, &peer, link, fresh.as_ref());
        }
        Ok(())
    }

    fn index(&mut self, id: BundleId, held: Held) {
        self.held.insert(id, held);
    }

    fn unindex(&mut self, id: &BundleId) -> Option<Held> {
        let removed = self.held.remove(id)?;
        if removed.last_piece {
            // The last piece held here is gone (expired, evicted, purged): so is any hope of
            // reassembling it, and the memory its reassembly holds.
            self.reassembly.remove(&(id.source.clone(), id.creation));
        }
        self.partial.retain(|(b, _), _| b != id);
        self.links.remove_from_backlogs(id);
        Some(removed.held)
    }

    fn drop_held(&mut self, now: DtnTime, id: &BundleId, reason: DropReason) {
        let Some(held) = self.unindex(id) else {
            return;
        };
        let _ = self.store.remove(id);
        self.stats.dropped += 1;
        self.events.push_back(Event::Dropped {
            id: id.clone(),
            reason,
        });
        if reason != DropReason::Purged && held.flags.contains(BundleFlags::REPORT_DELETION) {
            self.send_report(
                now,
                id,
                &held.report_to,
                held.flags,
                Report::Deleted,
                reason.status_reason(),
                held.expiry,
            );
        }
    }

    /// Applies the BPSec policy to a bundle this node originates (see [`NodeConfig::bpsec`]).
    fn protect(&mut self, bundle: &mut Bundle) -> Result<(), SendError> {
        // A broadcast bundle is delivered by every node it reaches, which cannot all be the BCB's
        // acceptor: it is signed, never encrypted.
        let encrypt = !is_broadcast(&bundle.primary.destination);
        let done = self
            .config
            .bpsec
            .protect(bundle, &self.me, &mut self.ivs, encrypt)?;
        self.stats.bib_added += u64::from(done.signed);
        self.stats.bcb_added += u64::from(done.encrypted);
        Ok(())
    }

    /// RFC 9172 on receipt, before the bundle is stored, forwarded or delivered: BCBs for this
    /// node decrypted, BIBs with a known key verified, required operations present (see
    /// `bpsec::Policy::receive`). A refused bundle is dropped, reported if it asks for deletion
    /// reports, and counted; false then.
    fn check_security(&mut self, now: DtnTime, bundle: &mut Bundle) -> bool {
        // Ferry's control traffic and status reports are made by nodes, not applications, and
        // carry no BPSec blocks: the policy's requirements are for application bundles.
        let control = matches!(
            &bundle.primary.destination,
            Eid::Dtn(d) if d.demux() == CONTROL_DEMUX
        );
        let enforce = !control && !bundle.primary.is_admin_record();
        match self.config.bpsec.receive(bundle, &self.me, enforce) {
            Ok(done) => {
                self.stats.bib_verified += u64::from(done.verified);
                self.stats.bcb_decrypted += u64::from(done.decrypted);
                true
            }
            Err(refused) => {
                let reason = match refused {
                    bpsec::Refused::Integrity(_) => {
                        self.stats.bib_failed += 1;
                        DropReason::SecurityFailed
                    }
                    bpsec::Refused::Confidentiality(_) => {
                        self.stats.bcb_failed += 1;
                        DropReason::SecurityFailed
                    }
                    bpsec::Refused::MissingIntegrity | bpsec::Refused::MissingConfidentiality => {
                        self.stats.security_missing += 1;
                        DropReason::SecurityMissing
                    }
                };
                // At its destination a refused bundle is done with, as a delivered one is: the
                // purge set tells the neighbours so (their summaries), or they would offer it again
                // at every contact until it expires.
                let whole = bundle.primary.fragment.is_none();
                if whole && bundle.primary.destination.node_id() == self.me {
                    let until = expiry_of(bundle, now).max(now + self.config.purge_retention);
                    self.add_purge(adu_key(&bundle.id()), until);
                }
                self.drop_received(now, bundle, reason);
                false
            }
        }
    }

    fn drop_received(&mut self, now: DtnTime, bundle: &Bundle, reason: DropReason) {
        self.stats.dropped += 1;
        self.events.push_back(Event::Dropped {
            id: bundle.id(),
            reason,
        });
        self.report(now, bundle, Report::Deleted, reason.status_reason());
    }

    /// Whether `peer` is the bundle's destination node or the next hop of a live path to it.
    fn toward_destination(&self, dest_node: &Eid, peer: &Eid) -> bool {
        dest_node == peer || self.mesh.next_hop(dest_node) == Some(peer)
    }

    /// Offers one held bundle to one neighbour. It goes now if the neighbour wants it (see
    /// `wanted`) and the link's window has room; if the window is full, or earlier offers are
    /// already waiting for room, it joins the link's backlog, which `fill_window` works through
    /// as transfers finish. `fresh` is the bundle itself when the caller has it in hand (it was
    /// just stored), so that the first offer does not read it back from the store.
    fn offer(
        &mut self,
        now: DtnTime,
        id: &BundleId,
        peer: &Eid,
        link: LinkId,
        fresh: Option<&Bundle>,
    ) {
        if !self.wanted(id, peer, link) {
            return;
        }
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        // First come, first served: a later offer never overtakes one waiting for room, so a
        // bundle larger than what is free is not starved by a stream of small ones.
        if !l.backlog.is_empty() {
            l.backlog.push(id);
            return;
        }
        if self.send_held(now, id, peer, link, fresh) == Offered::Blocked
            && let Some(l) = self.links.get_mut(&link)
        {
            l.backlog.push(id);
        }
    }

    /// Sends what waits in a link's backlog, oldest first, until the window is full again.
    fn fill_window(&mut self, now: DtnTime, link: LinkId) {
        loop {
            let Some(l) = self.links.get_mut(&link) else {
                return;
            };
            let Some(peer) = l.peer.clone() else {
                l.backlog.clear();
                return;
            };
            let Some(id) = l.backlog.first().cloned() else {
                return;
            };
            if self.neighbours.get(&peer) != Some(&link) {
                // The peer is reached on another link now; offers follow its summary vector there.
                l.backlog.clear();
                return;
            }
            // What changed while it waited (the peer's summary, a delivery elsewhere, the
            // strategy's copies) is judged again now.
            let offered = if self.wanted(&id, &peer, link) {
                self.send_held(now, &id, &peer, link, None)
            } else {
                Offered::Done
            };
            if offered == Offered::Blocked {
                // Only something in flight blocks, and its report calls this again: nothing
                // waits for a completion that will never come.
                debug_assert!(
                    self.links
                        .get(&link)
                        .is_some_and(|l| l.flights.pieces() > 0)
                );
                return;
            }
            if let Some(l) = self.links.get_mut(&link) {
                l.backlog.remove(&id);
            }
        }
    }

    /// Whether `peer`, on `link`, still lacks a held bundle that is not already on its way there:
    /// the checks that need neither the strategy nor the store.
    fn wanted(&self, id: &BundleId, peer: &Eid, link: LinkId) -> bool {
        let Some(held) = self.held.get(id) else {
            return false;
        };
        // The neighbour holds this bundle, or the whole bundle this fragment is part of.
        if self
            .known
            .get(peer)
            .is_some_and(|k| k.contains(&held.key) || k.contains(&held.adu_key))
        {
            return false;
        }
        // Pieces of a bundle for this node wait here for reassembly; broadcast bundles do not
        // go back to where they are addressed.
        if held.dest_node == self.me || (held.broadcast && held.dest_node == *peer) {
            return false;
        }
        self.links
            .get(&link)
            .is_some_and(|l| !l.flights.carries(id))
    }

    /// Sends a held bundle (or the part the neighbour lacks, in as many pieces as the link and
    /// the contact need) if the strategy agrees and the window has room for all of it.
    /// `Blocked` means it should wait for room; `Done` that it went or should not go at all.
    fn send_held(
        &mut self,
        now: DtnTime,
        id: &BundleId,
        peer: &Eid,
        link: LinkId,
        fresh: Option<&Bundle>,
    ) -> Offered {
        let Some(held) = self.held.get(id) else {
            return Offered::Done;
        };
        let (broadcast, copies, expiry) = (held.broadcast, held.copies, held.expiry);
        let toward = !broadcast && self.toward_destination(&held.dest_node, peer);
        // For a node the plan names, a bundle goes to one neighbour: the next hop of a live mesh
        // path if there is one, else of the planned route (unless the peer is the destination).
        // Without a plan nothing here is computed or copied: this runs for every offer.
        let hop = if broadcast || held.dest_node == *peer || !self.plan_knows(&held.dest_node) {
            None
        } else {
            let dest_node = held.dest_node.clone();
            match self.mesh.next_hop(&dest_node) {
                Some(hop) => Some(hop.clone()),
                None => self.planned_next_hop(now, &dest_node, expiry),
            }
        };
        let release = hop.as_ref() == Some(peer);
        let decision = match hop {
            Some(_) if release => Decision::Replicate,
            Some(_) => Decision::Skip,
            None => self.strategy.decide(copies, toward),
        };
        let (Some(held), Some(l)) = (self.held.get(id), self.links.get(&link)) else {
            return Offered::Done;
        };
        let give = match decision {
            Decision::Skip => return Offered::Done,
            Decision::Replicate => held.copies.map(|_| 1).filter(|_| toward),
            Decision::Hand { give } => Some(give),
        };
        // The parts of the payload the peer lacks: all of it, or what a cut or pieces
        // acknowledged out of order left.
        let missing = match self.partial.get(&(id.clone(), peer.clone())) {
            Some(have) => have.missing(held.payload_len),
            // All of it: one range (not a range's numbers).
            #[allow(clippy::single_range_in_vec_init)]
            None => vec![0..held.payload_len],
        };
        // About what the transfer will occupy: the payload still to send (headers come on top),
        // or what the contact can still take when the rest is to be cut to fit it. If not even
        // that fits, wait without reading the store; what was read is checked exactly below.
        let window = self.config.link_window_bytes;
        let rest_len: u64 = missing.iter().map(|r| r.end - r.start).sum();
        let held_len = held.payload_len;
        let mut estimate = rest_len;
        // Pieces by policy for bundles to one node only: every node a broadcast reaches is one
        // of its destinations and would have to rebuild it from its pieces (a copy of the whole
        // on each), where a bundle to one node is rebuilt once, at that node.
        let policy_piece = self.config.max_bundle_piece.filter(|_| !broadcast);
        if l.mtu.is_none()
            && policy_piece.is_none()
            && let Some(capacity) = l.remaining_capacity(now)
        {
            estimate = estimate.min(capacity);
        }
        if !l.flights.has_room(estimate, window) {
            return Offered::Blocked;
        }
        // An MTU below `min_piece` (a TCPCL peer names it) cannot take this in worthwhile
        // pieces whatever its headers: refused without reading the store, as it is offered again
        // at every summary. (An MTU just above it is judged exactly below, headers known.)
        if let Some(mtu) = l.mtu
            && mtu < self.config.min_piece
            && rest_len >= mtu
        {
            self.stats.mtu_too_small += 1;
            return Offered::Done;
        }
        let mut bundle = match fresh {
            Some(bundle) => bundle.clone(),
            None => match self.store.get(id) {
                Ok(Some(stored)) => stored.bundle,
                _ => return Offered::Done,
            },
        };
        if let Some(give) = give {
            set_copies(&mut bundle, give);
        }
        set_previous_node(&mut bundle, &self.me);
        if !count_hop(&mut bundle) {
            return Offered::Done;
        }
        let overhead = header_overhead(&bundle);
        // Each missing part as a bundle of its own, with its offset in the held payload; the
        // bundle itself, not a copy, when all of it is missing (the usual case).
        let mut parts = Vec::with_capacity(missing.len());
        if rest_len == held_len {
            parts.push((0, bundle));
        } else {
            for range in missing {
                match cut(&bundle, range.clone()) {
                    Some(part) => parts.push((range.start, part)),
                    None => return Offered::Done,
                }
            }
        }
        // How much of the rest to send as one piece: the link's MTU, the contact's remaining
        // capacity, and the configured piece size all bound it (proactive fragmentation).
        let mut limit = u64::MAX;
        if let Some(capacity) = l.remaining_capacity(now) {
            let fits = capacity.saturating_sub(overhead);
            if fits < rest_len && fits < self.config.min_piece {
                return Offered::Done; // not worth starting in what is left of this contact
            }
            limit = fits;
        }
        if let Some(mtu) = l.mtu {
            // A TCPCL peer names its own transfer MRU: one of a few bytes would have the bundle
            // cut into as many pieces as it has bytes, all built at once. Pieces smaller than
            // `min_piece` are not made; such a peer gets only bundles that fit whole.
            let room = mtu.saturating_sub(overhead);
            if rest_len > room && room < self.config.min_piece {
                self.stats.mtu_too_small += 1;
                return Offered::Done;
            }
            limit = limit.min(room.max(1));
        }
        if let Some(piece) = policy_piece {
            limit = limit.min(piece.max(1));
        }
        let mut pieces: Vec<(u64, Bundle)> = Vec::new();
        if rest_len <= limit {
            pieces = parts;
        } else if l.mtu.is_some() || policy_piece.is_some() {
            for (at, part) in parts {
                let mut offset = at;
                for piece in part.fragment(limit as usize).unwrap_or_default() {
                    let piece_len = piece.payload.data.len() as u64;
                    pieces.push((offset, piece));
                    offset += piece_len;
                }
            }
        } else {
            // A contact that ends soon: send what fits now, the rest at the next contact.
            let mut room = limit;
            for (at, part) in parts {
                let part_len = part.payload.data.len() as u64;
                if room == 0 {
                    break;
                }
                if part_len <= room {
                    room -= part_len;
                    pieces.push((at, part));
                    continue;
                }
                match part.split_at(room as usize) {
                    Ok((first, _)) => pieces.push((at, first)),
                    Err(_) => pieces.push((at, part)),
                }
                break;
            }
        }
        // A link that joins others already sending this bundle starts at another piece, so that
        // the neighbours hold different pieces first (see `pieces`).
        if pieces.len() > 1 {
            let others = self
                .links
                .iter()
                .filter(|(other, l)| **other != link && l.flights.carries(id))
                .count();
            let salt = start_salt(&self.me, adu_key(id));
            let start = spread_start(pieces.len(), others, salt);
            pieces.rotate_left(start);
        }
        let Some(l) = self.links.get(&link) else {
            return Offered::Done;
        };
        let sizes: Vec<u64> = pieces.iter().map(|(_, p)| encoded_len(p)).collect();
        if !l.flights.has_room(sizes.iter().sum(), window) {
            return Offered::Blocked;
        }
        for ((offset, piece), bytes) in pieces.into_iter().zip(sizes) {
            let piece_len = piece.payload.data.len() as u64;
            let piece_id = piece.id();
            if piece.primary.fragment.is_some() && rest_len > piece_len {
                self.stats.fragments_sent += 1;
            }
            let flight = InFlight {
                held: id.clone(),
                start: offset,
                end: offset + piece_len,
                bytes,
                give,
                release,
                written: false,
            };
            self.transmit_bundle(link, piece, false, Some((piece_id, flight)));
        }
        Offered::Done
    }

    /// A neighbour now holds payload up to `end` of a held bundle.
    fn progress(&mut self, now: DtnTime, peer: &Eid, flight: &InFlight, end: u64) {
        let Some(held) = self.held.get(&flight.held) else {
            return;
        };
        let len = held.payload_len;
        let slot = (flight.held.clone(), peer.clone());
        let mut have = self.partial.remove(&slot).unwrap_or_default();
        have.insert(flight.start..end);
        if !have.holds_all(len) {
            self.partial.insert(slot, have);
            // The next piece goes at once if the contact is still up.
            if let Some(&link) = self.neighbours.get(peer) {
                let id = flight.held.clone();
                self.offer(now, &id, peer, link, None);
            }
            return;
        }
        let key = held.key;
        let dest_node = held.dest_node.clone();
        let flags = held.flags;
        let report_to = held.report_to.clone();
        let expiry = held.expiry;
        self.known.entry(peer.clone()).or_default().insert(key);
        let _ = self.store.mark_sent(&flight.held, peer);
        if let (Some(give), Some(copies)) = (flight.give, self.held.copies_mut(&flight.held))
            && let Some(left) = *copies
        {
            *copies = Some(left.saturating_sub(give).max(1));
        }
        if flags.contains(BundleFlags::REPORT_FORWARDING) {
            self.send_report(
                now,
                &flight.held,
                &report_to,
                flags,
                Report::Forwarded,
                StatusReason::NoInformation,
                expiry,
            );
        }
        // The next hop of the bundle's planned route has it: it goes on from there, not from here.
        if flight.release && dest_node != *peer && self.unindex(&flight.held).is_some() {
            let _ = self.store.remove(&flight.held);
            self.stats.planned_handoffs += 1;
            return;
        }
        // The destination node has it: our copy has done its job, and every other copy can go
        // too (the purge set spreads with our summary vectors).
        if dest_node == *peer
            && let Some(h) = self.unindex(&flight.held)
        {
            let _ = self.store.remove(&flight.held);
            // A whole bundle only: one fragment at the destination says nothing about the rest.
            if !h.broadcast && h.key == h.adu_key {
                self.add_purge(h.adu_key, expiry.max(now + self.config.purge_retention));
            }
        }
    }

    // ----- real-time classes -----

    /// Forwards a datagram or stream bundle along the live mesh path, or floods a broadcast one.
    fn route_real_time(&mut self, now: DtnTime, came_on: Option<LinkId>, mut bundle: Bundle) {
        let _ = now;
        set_previous_node(&mut bundle, &self.me);
        if !count_hop(&mut bundle) {
            self.stats.dropped += 1;
            self.events.push_back(Event::Dropped {
                id: bundle.id(),
                reason: DropReason::HopLimitExceeded,
            });
            return;
        }
        if is_broadcast(&bundle.primary.destination) {
            let links: Vec<LinkId> = self
                .neighbours
                .values()
                .copied()
                .filter(|l| Some(*l) != came_on)
                .collect();
            for link in links {
                self.transmit_bundle(link, bundle.clone(), true, None);
            }
            return;
        }
        let dest_node = bundle.primary.destination.node_id();
        let next = self
            .mesh
            .next_hop(&dest_node)
            .and_then(|hop| self.neighbours.get(hop))
            .copied();
        match next {
            Some(link) => self.transmit_bundle(link, bundle, true, None),
            None => {
                self.stats.dropped += 1;
                self.events.push_back(Event::Dropped {
                    id: bundle.id(),
                    reason: DropReason::NoRoute,
                });
            }
        }
    }

    fn send_control(&mut self, now: DtnTime, peer: &Eid, link: LinkId, control: Control) {
        let question = matches!(control, Control::Summary(_));
        if let Some(destination) = self.control_destination(peer, link, question) {
            self.send_encoded_control(now, destination, link, control.encode());
        }
    }

    /// Where control traffic for `peer` on `link` goes, if it may go at all. `question`: the
    /// message is a summary, which goes before the peer has shown it speaks Ferry.
    fn control_destination(&mut self, peer: &Eid, link: LinkId, question: bool) -> Option<Eid> {
        let l = self.links.get(&link)?;
        if l.foreign {
            return None; // another implementation: it would only store the bundle until it expires
        }
        // Until the neighbour shows it speaks Ferry (its own control traffic, or Ferry's
        // beacons), only the summary goes, as the question: the mesh database follows its
        // answer (`heard_control_from`), and another implementation gets one bundle, not the
        // database too.
        if !(l.speaks_ferry || l.beacon_liveness || question) {
            return None;
        }
        if let Some((to, endpoint)) = &l.control_endpoint
            && to == peer
        {
            return Some(endpoint.clone());
        }
        // Not a dtn node id: it does not speak Ferry's control protocol.
        let endpoint = control_endpoint(peer).ok()?;
        let l = self.links.get_mut(&link)?;
        l.control_endpoint = Some((peer.clone(), endpoint.clone()));
        Some(endpoint)
    }

    /// Sends an encoded control message to `destination` on `link`, from
    /// [`Self::control_destination`].
    fn send_encoded_control(
        &mut self,
        now: DtnTime,
        destination: Eid,
        link: LinkId,
        payload: Bytes,
    ) {
        let primary = PrimaryBlock::new(
            destination,
            self.me.clone(),
            self.next_timestamp(now),
            REAL_TIME_LIFETIME_MS,
        );
        let mut bundle = Bundle::new(primary, payload);
        set_class(&mut bundle, Class::Datagram);
        ensure_hop_limit(&mut bundle, 1);
        set_previous_node(&mut bundle, &self.me);
        count_hop(&mut bundle);
        self.stats.control_sent += 1;
        self.transmit_bundle(link, bundle, true, None);
    }

    /// Sends `peer` our summary vector: every key held, and the purge keys it was not sent on
    /// this contact yet. A receiver only ever adds purge keys, so keys it was told once need not
    /// be told again; every [`FULL_SUMMARY_EVERY`]th summary lists them all anyway, so a summary
    /// lost on the way (or refused by a full purge set) costs the peer a minute's knowledge at
    /// most. Without that, a summary grew with every bundle delivered in the network and went to
    /// every neighbour every [`NodeConfig::summary_period`].
    fn send_summary(&mut self, now: DtnTime, peer: &Eid) {
        let Some(&link) = self.neighbours.get(peer) else {
            return;
        };
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let full = l.summaries_sent % FULL_SUMMARY_EVERY == 0;
        let told = l.purges_told;
        l.summaries_sent += 1;
        l.purges_told = self.purge_counter;
        let purged: Vec<u64> = if full {
            self.purged.keys().copied().collect()
        } else {
            let mut new: Vec<u64> = self
                .purge_order
                .range(told + 1..)
                .map(|(_, &key)| key)
                .collect();
            new.sort_unstable();
            new
        };
        let mut have: Vec<u64> = self.held.iter().map(|(_, h)| h.key).collect();
        have.sort_unstable();
        self.send_control(now, peer, link, Control::Summary(Summary { have, purged }));
    }

    fn transmit_bundle(
        &mut self,
        link: LinkId,
        bundle: Bundle,
        urgent: bool,
        flight: Option<(BundleId, InFlight)>,
    ) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        self.stats.bundles_sent += 1;
        self.stats.bytes_sent += encoded_len(&bundle);
        let report = flight.is_some();
        if let Some((id, flight)) = flight {
            l.flights.insert(id, flight);
        }
        self.transmits.push_back(Transmit {
            link,
            frame: Frame::Bundle(bundle),
            urgent,
            report,
        });
    }

    /// Drains the mesh and stream machines into node outputs.
    fn pump(&mut self, now: DtnTime) {
        loop {
            let mut progressed = false;
            while let Some(flood) = self.mesh.poll_flood() {
                progressed = true;
                let peers: Vec<(Eid, LinkId)> = flood
                    .to
                    .iter()
                    .filter_map(|p| self.neighbours.get(p).map(|l| (p.clone(), *l)))
                    .collect();
                // Encoded once, shared by the copies for every neighbour.
                let payload = Control::LinkState(flood.lsa).encode();
                for (peer, link) in peers {
                    if let Some(destination) = self.control_destination(&peer, link, false) {
                        self.send_encoded_control(now, destination, link, payload.clone());
                    }
                }
            }
            while let Some(event) = self.mesh.poll_event() {
                progressed = true;
                match event {
                    RouteEvent::Reachable { node, hops } => {
                        self.events.push_back(Event::Reachable {
                            node: node.clone(),
                            hops,
                        });
                        self.path_appeared(now, &node);
                    }
                    RouteEvent::Unreachable { node } => {
                        self.streams.path_lost(now, &node);
                        self.events.push_back(Event::Unreachable { node });
                    }
                }
            }
            if self.streams.has_output() {
                // Taken when the shell takes the transmits (`poll_transmit`).
                self.stream_output_at = Some(now);
            }
            while let Some(event) = self.streams.poll_event() {
                progressed = true;
                self.events.push_back(Event::Stream(event));
            }
            if !progressed {
                break;
            }
        }
    }

    /// Carries every segment the streams have to send: those between the same two endpoints
    /// share bundles ([`Node::carry_segment_group`]).
    fn carry_stream_output(&mut self, now: DtnTime) {
        let mut out = std::mem::take(&mut self.room.out);
        // Data first: a stream whose data carries its acknowledgement owes no pure one.
        while let Some(segment) = self.streams.poll_data_segment() {
            out.push(segment);
        }
        while let Some(segment) = self.streams.poll_pure_ack() {
            out.push(segment);
        }
        if out
            .windows(2)
            .all(|w| w[0].from == w[1].from && w[0].to == w[1].to)
        {
            // The usual round: one peer, one group, no grouping to do.
            self.carry_segment_group(now, &mut out.drain(..));
        } else {
            // Grouped in order: a stream's segments keep theirs.
            let mut by_pair: BTreeMap<(Eid, Eid), Vec<crate::stream::OutSegment>> = BTreeMap::new();
            for segment in out.drain(..) {
                by_pair
                    .entry((segment.from.clone(), segment.to.clone()))
                    .or_default()
                    .push(segment);
            }
            for group in by_pair.into_values() {
                self.carry_segment_group(now, &mut group.into_iter());
            }
        }
        // The emptied buffer goes back with its room: it fills again every round.
        self.room.out = out;
    }

    /// Carries the segments of one pair of endpoints, in order, in as few bundles as
    /// [`MAX_SEGMENTS_PER_BUNDLE`], [`MAX_SEGMENT_BYTES_PER_BUNDLE`] and the next hop's MTU
    /// allow: a lone segment as the segment it is, only pure acknowledgements as
    /// `StreamAcks`, anything else as `Segments`.
    fn carry_segment_group(
        &mut self,
        now: DtnTime,
        segments: &mut dyn Iterator<Item = crate::stream::OutSegment>,
    ) {
        let mut segments = segments.peekable();
        let Some(first) = segments.peek() else {
            return;
        };
        let (from, to) = (first.from.clone(), first.to.clone());
        let budget = self.segment_bytes_toward(&to);
        let mut batch = std::mem::take(&mut self.room.segments);
        batch.clear();
        let mut bytes = 0;
        while let Some(out) = segments.next() {
            bytes += out.segment.data.len() + SEGMENT_OVERHEAD;
            batch.push(out.segment);
            let full = batch.len() == MAX_SEGMENTS_PER_BUNDLE
                || segments
                    .peek()
                    .is_none_or(|next| bytes + next.segment.data.len() + SEGMENT_OVERHEAD > budget);
            if full {
                let message = match batch.len() {
                    1 => Control::Stream(batch.pop().expect("one segment")),
                    _ if batch.iter().all(|s| wire::StreamAck::of(s).is_some()) => {
                        let mut acks = std::mem::take(&mut self.room.acks);
                        acks.clear();
                        acks.extend(batch.iter().filter_map(wire::StreamAck::of));
                        Control::StreamAcks(acks)
                    }
                    _ => Control::Segments(std::mem::take(&mut batch)),
                };
                bytes = 0;
                self.carry_control(now, from.clone(), to.clone(), &message);
                // The list's room comes back from the message it went into.
                match message {
                    Control::Segments(sent) => batch = sent,
                    Control::StreamAcks(sent) => self.room.acks = sent,
                    _ => {}
                }
                batch.clear();
            }
        }
        self.room.segments = batch;
    }

    /// How many bytes of segments one bundle toward `to` may carry: the next hop's MTU, less room
    /// for the bundle's blocks, if it is smaller than [`MAX_SEGMENT_BYTES_PER_BUNDLE`].
    fn segment_bytes_toward(&self, to: &Eid) -> usize {
        let mtu = self
            .mesh
            .next_hop(&to.node_id())
            .and_then(|hop| self.neighbours.get(hop))
            .and_then(|link| self.links.get(link))
            .and_then(|l| l.mtu);
        match mtu {
            Some(mtu) => usize::try_from(mtu.saturating_sub(256))
                .unwrap_or(usize::MAX)
                .min(MAX_SEGMENT_BYTES_PER_BUNDLE),
            None => MAX_SEGMENT_BYTES_PER_BUNDLE,
        }
    }

    /// Wraps a stream control message in a bundle of class stream and sends it along the mesh.
    fn carry_control(&mut self, now: DtnTime, from: Eid, to: Eid, message: &Control) {
        let primary = PrimaryBlock::new(to, from, self.next_timestamp(now), REAL_TIME_LIFETIME_MS);
        let mut bundle = Bundle::new(primary, message.encode());
        set_class(&mut bundle, Class::Stream);
        ensure_hop_limit(&mut bundle, self.config.datagram_hop_limit);
        let dest_node = bundle.primary.destination.node_id();
        if dest_node == self.me {
            // A stream between two endpoints of this node: loop back.
            self.accept(now, None, None, bundle);
        } else {
            self.route_real_time(now, None, bundle);
        }
    }

    /// A live path to `node` appeared: bundles for it go to the next hop now.
    fn path_appeared(&mut self, now: DtnTime, node: &Eid) {
        let Some(hop) = self.mesh.next_hop(node).cloned() else {
            return;
        };
        let Some(&link) = self.neighbours.get(&hop) else {
            return;
        };
        let ids: Vec<BundleId> = self
            .held
            .iter()
            .filter(|(_, h)| &h.dest_node == node)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.offer(now, &id, &hop, link, None);
        }
    }

    // ----- status reports -----

    fn report(&mut self, now: DtnTime, bundle: &Bundle, kind: Report, reason: StatusReason) {
        let flags = bundle.primary.flags;
        let id = bundle.id();
        let expiry = expiry_of(bundle, now);
        self.send_report(
            now,
            &id,
            &bundle.primary.report_to.clone(),
            flags,
            kind,
            reason,
            expiry,
        );
    }

    /// A reception report with reason "Block unsupported", asked for by a block's "transmit
    /// status report if block can't be processed" flag rather than by the bundle's own flags
    /// (RFC 9171 §5.6 step 4). `Bundle::validate` refused that flag in administrative records and
    /// anonymous bundles (§4.2.4).
    fn report_block_unsupported(&mut self, now: DtnTime, bundle: &Bundle) {
        let expiry = expiry_of(bundle, now);
        self.send_report(
            now,
            &bundle.id(),
            &bundle.primary.report_to.clone(),
            bundle.primary.flags,
            ReportKind::AskedByBlock,
            StatusReason::BlockUnsupported,
            expiry,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn send_report(
        &mut self,
        now: DtnTime,
        id: &BundleId,
        report_to: &Eid,
        flags: BundleFlags,
        kind: impl Into<ReportKind>,
        reason: StatusReason,
        expiry: DtnTime,
    ) {
        let (kind, wanted) = match kind.into() {
            ReportKind::AskedByBundle(kind) => {
                let wanted = match kind {
                    Report::Received => BundleFlags::REPORT_RECEPTION,
                    Report::Forwarded => BundleFlags::REPORT_FORWARDING,
                    Report::Delivered => BundleFlags::REPORT_DELIVERY,
                    Report::Deleted => BundleFlags::REPORT_DELETION,
                };
                (kind, flags.contains(wanted))
            }
            ReportKind::AskedByBlock => (Report::Received, true),
        };
        // RFC 9171 §6.1: no reports about administrative records, and none to nobody.
        if !wanted || flags.contains(BundleFlags::ADMIN_RECORD) || report_to.is_null() {
            return;
        }
        let time = flags
            .contains(BundleFlags::STATUS_TIME_REQUESTED)
            .then_some(now);
        let assertion = Some(StatusAssertion { time });
        let mut report = StatusReport {
            received: None,
            forwarded: None,
            delivered: None,
            deleted: None,
            reason,
            source: id.source.clone(),
            creation: id.creation,
            fragment: id.fragment,
        };
        match kind {
            Report::Received => report.received = assertion,
            Report::Forwarded => report.forwarded = assertion,
            Report::Delivered => report.delivered = assertion,
            Report::Deleted => report.deleted = assertion,
        }
        let lifetime = (expiry - now).max(Duration::from_secs(60));
        let mut primary = PrimaryBlock::new(
            report_to.clone(),
            self.me.clone(),
            self.next_timestamp(now),
            wire::time::millis(lifetime),
        );
        primary.flags = BundleFlags(BundleFlags::ADMIN_RECORD);
        let payload = AdminRecord::StatusReport(report).encode();
        let mut bundle = Bundle::new(primary, payload);
        ensure_hop_limit(&mut bundle, self.config.hop_limit);
        if report_to.node_id() == self.me {
            self.receive_admin(now, &bundle);
        } else {
            let _ = self.store_bundle(now, bundle, Retention::Originated, 1, None);
        }
    }

    // ----- small helpers -----

    fn next_timestamp(&mut self, now: DtnTime) -> CreationTimestamp {
        self.next_sequence += 1;
        CreationTimestamp {
            time: now,
            sequence: self.next_sequence,
        }
    }

    fn mark_seen(&mut self, now: DtnTime, key: u64, until: DtnTime) {
        let until = until.max(now + Duration::from_millis(1));
        self.seen.insert(key, until, ());
        // Full: the entry that expires first goes.
        while self.seen.len() > self.config.max_seen {
            self.seen.pop_earliest();
        }
    }

    /// Adds or renews a purge entry, in memory and in the store (a failed write fails the
    /// shell's next commit, so nothing that depends on it is acknowledged). Not bounded here:
    /// the entries this node makes are always kept; `handle_summary` bounds what neighbours add.
    fn add_purge(&mut self, key: u64, until: DtnTime) {
        // A renewed entry keeps its place: it is no news to neighbours told of it.
        let place = match self.purged.get(&key) {
            Some(&place) => place,
            None => {
                self.purge_counter += 1;
                self.purge_order.insert(self.purge_counter, key);
                self.purge_counter
            }
        };
        if let Some((old, _)) = self.purged.insert(key, until, place)
            && old == until
        {
            return;
        }
        let _ = self
            .store
            .rpc_put(RpcTable::Purged, &key.to_be_bytes(), &until.to_be_bytes());
    }

    /// xorshift64: deterministic from the configured seed.
    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// What became of an offer that passed the cheap checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offered {
    /// Sent, or not to be sent (the strategy declined, the contact is too short, the store failed).
    Done,
    /// The link's window has no room for it now.
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    Received,
    Forwarded,
    Delivered,
    Deleted,
}

/// Who asked for a status report: the bundle's status report request flags (for one kind), or an
/// extension block the node could not process (always a reception report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReportKind {
    AskedByBundle(Report),
    AskedByBlock,
}

impl From<Report> for ReportKind {
    fn from(kind: Report) -> Self {
        ReportKind::AskedByBundle(kind)
    }
}

/// The control endpoint of a neighbour: `dtn://<node>/~ferry`.
fn control_endpoint(node: &Eid) -> Result<Eid, ()> {
    match node {
        Eid::Dtn(d) => Eid::dtn(d.node_name(), CONTROL_DEMUX).map_err(|_| ()),
        _ => Err(()),
    }
}

/// When a bundle expires: creation time plus lifetime, or for a source without a clock, arrival
/// time plus what remains after its age.
fn expiry_of(bundle: &Bundle, now: DtnTime) -> DtnTime {
    match bundle.primary.expiry() {
        Some(t) => t,
        None => now.saturating_add(Duration::from_millis(
            bundle
                .primary
                .lifetime_ms
                .saturating_sub(bundle.age_ms().unwrap_or(0)),
        )),
    }
}

/// Encoded size of a bundle: what it occupies of a link's window.
fn encoded_len(bundle: &Bundle) -> u64 {
    let (head, payload, tail) = bundle.encoded_sizes();
    (head + payload + tail) as u64
}

/// Encoded size of everything but the payload, plus room for fragment fields.
fn header_overhead(bundle: &Bundle) -> u64 {
    let (head, _, tail) = bundle.encoded_sizes();
    (head + tail) as u64 + 24
}
