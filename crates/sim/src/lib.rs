//! Ferry's deterministic network simulator: many sans-IO nodes in one process, in virtual time.
//!
//! ```text
//!   queue of (time, seq, event) ──pop──► feed one node (handle_*) ──drain──► poll_transmit → links
//!        ▲                                                           poll_event    → invariants, metrics
//!        └──────────── link events, arrivals, transfer results, timers ◄── poll_timeout
//! ```
//!
//! Links have a bandwidth, a latency, a loss rate (for real-time frames; store-carry-forward
//! bundles ride a reliable convergence layer, as TCPCL is) and an up/down schedule from a
//! [`Topology`]. A link that comes up holds a session one latency later, as the daemon's nodes
//! learn of a link only from a TCPCL session: both ends are told who is at the other, and a
//! session carries no beacons. A link going down cuts the transfer in progress: the receiver keeps
//! the bytes that arrived as a fragment and the sender learns how far it got (reactive
//! fragmentation). Payloads
//! are `Bytes` shared by every node that holds a copy, so a 100 MB bundle on 64 nodes costs 100 MB;
//! so are the large data-channel files the RPC engines keep in their stores (`sim_store.rs`), and
//! the engines share what they compute alike (`rpc::SharedMemo`), so a file is hashed once
//! however many nodes it reaches and a hello's signature checked once however many nodes hear
//! it. Files sealed for one node are stand-ins of the same length (`RpcApp::stand_in_file_seals`,
//! on in `ferry eval`), as a simulated node computes in no simulated time.
//!
//! Invariants are checked as the run goes: no bundle delivered twice to an application, nothing
//! delivered that was never sent (or delivered altered), nothing held past its lifetime, every store
//! within its quota. A violation stops the run with the seed that reproduces it. Every processed
//! event is folded into a trace hash, so two runs of one seed can be compared.
//!
//! The simulator never reads a clock and draws randomness only from the scenario's seed; the wall
//! time of a run is measured by whoever calls it (the `ferry sim` command).
//!
//! [`rpc`] puts the RPC engine on every node; [`paper`] reruns the DTN-RPC paper's experiments
//! (`ferry sim --rpc fig5|chain-rtt`); [`eval`] runs its whole evaluation matrix (`ferry eval`),
//! one [`eval_record::CallRecord`] per call.

#![forbid(unsafe_code)]

pub mod eval;
pub mod eval_record;
mod made_files;
pub mod paper;
mod queue;
mod rng;
pub mod rpc;
mod sim_store;
mod topology;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use host::{Commit, Host, HostConfig, Output, PipelineConfig};
use node::{
    Class, Event, Frame, LinkChange, LinkId, Node, NodeConfig, Outgoing, StrategyKind,
    TransferResult,
};
use store::MemoryStore;
use wire::{BundleId, DtnTime, Eid, bundle_key};

use crate::queue::EventQueue;
use crate::sim_store::{DiskHandle, SimStore};

pub use rng::Rng;
pub use topology::{ContactPlan, LinkEvent, PlanError, Topology};

/// DTN time at which every simulation starts (2026-01-01T00:00:00Z), so creation timestamps look
/// like real ones.
pub const SIM_EPOCH: DtnTime = DtnTime::from_millis(820_454_400_000);

/// Properties of every link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkParams {
    /// Bits per second in each direction.
    pub bandwidth_bps: u64,
    /// One-way latency.
    pub latency_ms: u64,
    /// Probability that a real-time frame (beacon, control, datagram, stream) is lost.
    pub loss: f64,
}

impl Default for LinkParams {
    fn default() -> Self {
        Self {
            bandwidth_bps: 10_000_000,
            latency_ms: 5,
            loss: 0.0,
        }
    }
}

/// The application traffic of a run: `bundles` bundles of `size` bytes between random pairs of
/// distinct nodes, sent at random times in `[start_ms, start_ms + spread_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// How many bundles.
    pub bundles: usize,
    /// Payload size of each.
    pub size: usize,
    /// First send time.
    pub start_ms: u64,
    /// Sends are spread over this long.
    pub spread_ms: u64,
    /// Lifetime of each bundle.
    pub lifetime_ms: u64,
    /// Their forwarding class.
    pub class: Class,
    /// Fixed (source, destination) instead of random pairs.
    pub pair: Option<(usize, usize)>,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            bundles: 30,
            size: 1_000_000,
            start_ms: 10_000,
            spread_ms: 600_000,
            lifetime_ms: 3 * 3_600_000,
            class: Class::Dtn,
            pair: None,
        }
    }
}

/// What the simulator's shell holds back until the host says it is durable, as the daemon
/// holds its answers and acknowledgements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimToken {
    /// A store-carry-forward bundle received from node `from`: its sender learns that the
    /// transfer completed (and may drop its copy) only now, as the daemon's last XFER_ACK waits.
    Confirm {
        /// The sender.
        from: usize,
        /// The bundle.
        id: BundleId,
    },
    /// A bundle for the ledger's application endpoint: the application takes it only now, as
    /// the daemon's inbox readers are woken.
    Deliver {
        /// The bundle.
        id: BundleId,
        /// Its payload.
        payload: Bytes,
    },
    /// A workload bundle its source took: the ledger counts it as sent only now.
    Accepted(BundleId),
    /// The app's own (a call made, say): handed back to it in [`Output::Release`].
    App(u64),
}

/// A node's host in the simulator: the daemon's own host core.
pub type SimHost = Host<SimToken>;

/// The simulated disk under every node's store (see [`Scenario::disk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskModel {
    /// How long a sync takes: a power cut meanwhile loses the commits it was to make durable.
    pub sync_ms: u64,
}

/// Everything that defines a run. Two runs of the same scenario are identical.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed of every random choice.
    pub seed: u64,
    /// The network.
    pub topology: Topology,
    /// Link properties.
    pub link: LinkParams,
    /// Store-carry-forward strategy of every node.
    pub strategy: StrategyKind,
    /// Virtual duration.
    pub duration_ms: u64,
    /// Application traffic.
    pub workload: Workload,
    /// Store quota of each node, bytes.
    pub quota: u64,
    /// Beacon period of each node: what it announces, and how often it beacons on a link
    /// without a session (the simulator's links are sessions once up, and carry none).
    pub beacon_period_ms: u64,
    /// Proactive fragmentation piece size (see `NodeConfig::max_bundle_piece`).
    pub max_bundle_piece: Option<u64>,
    /// How often the invariants that need a scan (expiry, quota) are checked.
    pub check_every_ms: u64,
    /// End the run as soon as every workload bundle was delivered.
    pub stop_when_delivered: bool,
    /// Tell nodes how long each contact of a contact plan lasts (so they can split bundles to fit
    /// it); without hints only reactive fragmentation helps.
    pub contact_hints: bool,
    /// A disk under every store, with the daemon's commit and sync timing: a commit waits up to
    /// 10 ms for company, a sync of commits nobody waits for up to 100 ms, and each sync takes
    /// `sync_ms`; a power cut ([`Sim::schedule_power_cut`]) loses every commit the last finished
    /// sync did not cover. Without it every change is durable at once (and a crash loses
    /// nothing written).
    pub disk: Option<DiskModel>,
    /// Every node knows the whole schedule of link changes in advance and routes by it
    /// (contact graph routing, `node::cgr`): what a contact plan gives a node in the field.
    pub route_by_plan: bool,
}

/// The random streams of a run, all drawn from its seed: one seed per node, the simulator's own
/// (links, workload), and the topology's (its schedule of link changes). One derivation, so that
/// a real-process testbed given the same scenario takes its links up and down as the simulator
/// does ([`Scenario::link_schedule`]).
struct Streams {
    node_seeds: Vec<u64>,
    sim: Rng,
    topology: Rng,
}

impl Streams {
    fn of(scenario: &Scenario) -> Self {
        let mut rng = Rng::new(scenario.seed);
        let node_seeds = (0..scenario.topology.nodes())
            .map(|_| rng.next_u64())
            .collect();
        let mut sim = rng.fork();
        let topology = sim.fork();
        Streams {
            node_seeds,
            sim,
            topology,
        }
    }
}

impl Scenario {
    /// The link changes this scenario's run makes, as the simulator draws them from the seed
    /// (sorted by time): what a testbed replays with real links.
    pub fn link_schedule(&self) -> Vec<LinkEvent> {
        let mut rng = Streams::of(self).topology;
        self.topology.schedule(self.duration_ms, &mut rng)
    }

    /// A scenario with default links, workload and quotas.
    pub fn new(seed: u64, topology: Topology, strategy: StrategyKind, duration_ms: u64) -> Self {
        Self {
            seed,
            topology,
            link: LinkParams::default(),
            strategy,
            duration_ms,
            workload: Workload::default(),
            quota: 1 << 30,
            beacon_period_ms: 1_000,
            max_bundle_piece: None,
            check_every_ms: 10_000,
            stop_when_delivered: false,
            contact_hints: true,
            disk: None,
            route_by_plan: false,
        }
    }
}

/// A broken invariant, with what is needed to replay it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated (replay with seed {seed}) at t={at_ms} ms on node {node}: {what}")]
pub struct Violation {
    /// The scenario's seed.
    pub seed: u64,
    /// Virtual time since the start.
    pub at_ms: u64,
    /// The node where it was seen.
    pub node: usize,
    /// What went wrong.
    pub what: String,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The scenario's seed.
    pub seed: u64,
    /// Node count.
    pub nodes: usize,
    /// Workload bundles sent (accepted by their source).
    pub sent: usize,
    /// Workload bundles that reached their destination application.
    pub delivered: usize,
    /// Delivery latency of each delivered bundle, ms, ascending.
    pub latencies_ms: Vec<u64>,
    /// Bytes each node transmitted.
    pub bytes_sent: Vec<u64>,
    /// Events processed.
    pub events: u64,
    /// Virtual time simulated.
    pub simulated_ms: u64,
    /// Hash of the whole event trace.
    pub trace_hash: u64,
    /// Bundles still held across all nodes at the end.
    pub held_at_end: usize,
    /// Fragments cut by all nodes.
    pub fragments: u64,
    /// Deliveries whose payload was the source's own buffer: nothing copied it on the way.
    pub shared_payloads: usize,
}

impl Report {
    /// Delivered / sent.
    pub fn delivery_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.delivered as f64 / self.sent as f64
        }
    }

    /// The latency at percentile `p` (0–100), if anything was delivered.
    pub fn latency_percentile(&self, p: f64) -> Option<u64> {
        if self.latencies_ms.is_empty() {
            return None;
        }
        let rank = ((p / 100.0) * (self.latencies_ms.len() - 1) as f64).round() as usize;
        self.latencies_ms
            .get(rank.min(self.latencies_ms.len() - 1))
            .copied()
    }
}

#[derive(Debug)]
enum Ev {
    Timer {
        node: usize,
        generation: u64,
    },
    Arrive {
        from: usize,
        to: usize,
        frame: Frame,
        /// A store-carry-forward transfer: its sender learns it completed once durable here.
        confirm: bool,
    },
    Transfer {
        node: usize,
        link: LinkId,
        id: BundleId,
        result: TransferResult,
    },
    Link(LinkEvent),
    /// The session on a link that came up is established: both ends learn the link and who is
    /// at its other end (`epoch`: the link's coming up it belongs to).
    Session {
        a: usize,
        b: usize,
        epoch: u64,
        /// When the contact ends, if known in advance (contact plans).
        contact_end: Option<DtnTime>,
    },
    Inject(usize),
    Check,
    AppTimer {
        node: usize,
        generation: u64,
    },
    Action {
        node: usize,
        action: u64,
    },
    Restart(usize),
    PowerCut(usize),
    Synced {
        node: usize,
        /// The node's start the sync belongs to (a sync of a crashed node never ends).
        start: u64,
        upto: u64,
    },
}

/// The trace tag of the end of a transmission from `from` to `to` (see [`Ev::tag`]).
fn tx_done_tag(from: usize, to: usize) -> u64 {
    2 + ((from as u64) << 8) + ((to as u64) << 32)
}

impl Ev {
    fn tag(&self) -> u64 {
        match self {
            Ev::Timer { node, .. } => 1 + ((*node as u64) << 8),
            Ev::Arrive {
                from, to, frame, ..
            } => {
                let k = match frame {
                    Frame::Beacon(_) => 0,
                    Frame::Bundle(b) => bundle_key(&b.id()),
                };
                (3 + ((*from as u64) << 8) + ((*to as u64) << 32)) ^ k
            }
            Ev::Transfer { node, id, .. } => (4 + ((*node as u64) << 8)) ^ bundle_key(id),
            Ev::Link(e) => 5 + ((e.a as u64) << 8) + ((e.b as u64) << 32) + u64::from(e.up),
            Ev::Inject(i) => 6 + ((*i as u64) << 8),
            Ev::Check => 7,
            Ev::AppTimer { node, .. } => 8 + ((*node as u64) << 8),
            Ev::Action { node, action } => 9 + ((*node as u64) << 8) + (action << 32),
            Ev::Restart(node) => 10 + ((*node as u64) << 8),
            Ev::PowerCut(node) => 11 + ((*node as u64) << 8),
            Ev::Synced { node, upto, .. } => 12 + ((*node as u64) << 8) + (upto << 32),
            Ev::Session { a, b, .. } => 13 + ((*a as u64) << 8) + ((*b as u64) << 32),
        }
    }
}

/// A store-carry-forward bundle being sent in segments.
struct Sending {
    frame: Frame,
    size: u64,
    /// Bytes before the payload, to tell how much payload a cut transfer carried.
    head: u64,
    /// Bytes already on the other side.
    sent: u64,
    /// The receiver refused it at the first segment (it holds or is receiving the bundle).
    refused: bool,
}

/// What occupies a direction of a link right now (one per direction, so its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Busy {
    /// A real-time frame, sent whole.
    Urgent { frame: Frame, size: u64 },
    /// One segment of the bulk transfer in progress.
    Segment { start_us: u64, len: u64 },
}

/// Bulk transfers go in segments of this size, and real-time frames (beacons, control, datagrams)
/// are sent between segments, as TCPCL interleaves messages between a transfer's segments.
const SEGMENT: u64 = 64 * 1024;

#[derive(Default)]
struct Direction {
    urgent: VecDeque<(Frame, u64)>,
    bulk: VecDeque<(Frame, u64, u64)>,
    bulk_current: Option<Sending>,
    busy: Option<Busy>,
    /// When the last transmission ended (µs), so back-to-back frames do not lose the rounding of
    /// event times to milliseconds.
    free_at_us: u64,
}

struct SimLink {
    /// Its ends, lower first.
    ends: (usize, usize),
    up: bool,
    epoch: u64,
    /// Index 0: a → b; 1: b → a (a < b).
    dirs: [Direction; 2],
}

struct SimNode {
    host: SimHost,
    /// The disk under its store, with the disk model.
    disk: Option<DiskHandle>,
    /// How often it (re)started: a sync started before a crash never reports.
    start: u64,
    /// Bundles received whose senders wait to hear that they are durable here.
    unconfirmed: BTreeSet<(usize, BundleId)>,
    timer_generation: u64,
    timer_at: Option<DtnTime>,
    bytes_sent: u64,
}

struct Sent {
    destination: usize,
    created: DtnTime,
    payload: Bytes,
    delivered_at: Option<DtnTime>,
    /// Whether the source said it took the bundle: once durable there, as the daemon answers a
    /// send. A power cut before may take it, and nobody was told otherwise.
    accepted: bool,
}

/// What the applications sent and received: the record the delivery invariants are checked
/// against.
#[derive(Default)]
struct Ledger {
    sent: BTreeMap<BundleId, Sent>,
    deliveries: BTreeSet<(usize, BundleId)>,
    /// Deliveries whose payload is the very buffer the source sent (no copy on the way).
    shared: usize,
}

impl Ledger {
    fn sent(&mut self, id: BundleId, destination: usize, created: DtnTime, payload: Bytes) {
        self.sent.insert(
            id,
            Sent {
                destination,
                created,
                payload,
                delivered_at: None,
                accepted: true,
            },
        );
    }

    /// Records a delivery at node `at`; an error names the broken invariant.
    fn delivered(
        &mut self,
        at: usize,
        id: &BundleId,
        payload: &Bytes,
        now: DtnTime,
    ) -> Result<(), String> {
        if !self.deliveries.insert((at, id.clone())) {
            return Err(format!("bundle {id} delivered twice"));
        }
        let Some(sent) = self.sent.get_mut(id) else {
            return Err(format!("bundle {id} delivered but never sent"));
        };
        let same_buffer =
            payload.as_ptr() == sent.payload.as_ptr() && payload.len() == sent.payload.len();
        if sent.destination != at || !(same_buffer || *payload == sent.payload) {
            return Err(format!(
                "bundle {id} delivered altered: {} bytes at node {at}, sent {} bytes to node {}",
                payload.len(),
                sent.payload.len(),
                sent.destination
            ));
        }
        if same_buffer {
            self.shared += 1;
        }
        sent.delivered_at = Some(now);
        Ok(())
    }
}

/// An application layer above every node's host (the RPC procedures and scripted calls, in
/// Ferry's RPC scenarios): it gets what each host hands its shell beyond transmits (executions to
/// run, resume or stop, RPC events, node events other than deliveries to the ledger's
/// application endpoint), has timers of its own, and gets scripted actions and (re)starts.
/// Whatever it asks of a host (sends, calls) the simulator carries like any other traffic.
pub trait App {
    /// Node `i` started, or restarted from its store ([`Sim::schedule_restart`],
    /// [`Sim::schedule_power_cut`]): whatever the app kept in memory for it is gone; it puts
    /// an RPC engine on the host if the node has one ([`Host::set_rpc`]).
    fn started(&mut self, now: DtnTime, i: usize, host: &mut SimHost);
    /// Node `i`'s host asked something of its shell.
    fn output(&mut self, now: DtnTime, i: usize, host: &mut SimHost, output: Output<SimToken>);
    /// The app's timer for node `i` fired.
    fn timeout(&mut self, now: DtnTime, i: usize, host: &mut SimHost);
    /// When the app next wants [`App::timeout`] for node `i`.
    fn next_timeout(&self, i: usize) -> Option<DtnTime>;
    /// A scripted action ([`Sim::schedule_action`]) is due at node `i`.
    fn action(&mut self, now: DtnTime, i: usize, host: &mut SimHost, action: u64);
}

/// No application layer: the workload's bundles are all there is.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoApp;

impl App for NoApp {
    fn started(&mut self, _: DtnTime, _: usize, _: &mut SimHost) {}
    fn output(&mut self, _: DtnTime, _: usize, _: &mut SimHost, _: Output<SimToken>) {}
    fn timeout(&mut self, _: DtnTime, _: usize, _: &mut SimHost) {}
    fn next_timeout(&self, _: usize) -> Option<DtnTime> {
        None
    }
    fn action(&mut self, _: DtnTime, _: usize, _: &mut SimHost, _: u64) {}
}

/// An event as the queue keeps it (events run in time order, and events of one time in the
/// order they were scheduled, so a run replays exactly). The end of a transmission, by far the most frequent event
/// (a 100 MB bundle crosses a link in 1,526 segments), is kept as it is: small, with the link's
/// place in [`Sim::links`]; the others are boxed, because the heap moves its entries and a frame
/// is large.
enum QueuedEv {
    TxDone {
        slot: u32,
        /// The direction: 0 from the link's lower node to its higher one, 1 back.
        d: u8,
        epoch: u64,
    },
    Other(Box<Ev>),
}

/// A simulation in progress.
pub struct Sim<A: App = NoApp> {
    app: A,
    app_timers: Vec<(u64, Option<DtnTime>)>,
    scenario: Scenario,
    now: DtnTime,
    /// Events, earliest first.
    queue: EventQueue<QueuedEv>,
    nodes: Vec<SimNode>,
    /// Every link that ever came up, by its place, found by its ends (lower first) in
    /// `link_slots`.
    links: Vec<SimLink>,
    link_slots: BTreeMap<(usize, usize), usize>,
    rng: Rng,
    trace: u64,
    events: u64,
    ledger: Ledger,
    injections: Vec<(usize, usize)>,
    payloads: Vec<Bytes>,
    contact_ends: BTreeMap<(usize, usize, u64), u64>,
    delivered_count: usize,
    /// Store-carry-forward bundles on their way to a node, so a second sender is refused.
    receiving: BTreeSet<(usize, BundleId)>,
    /// The topology's link changes for this run, in time order.
    link_events: Vec<LinkEvent>,
    /// Store-carry-forward transfers of bundles of at least this many bytes, as they go (off
    /// unless [`Sim::log_transfers`] asked for them).
    transfer_log: Option<(u64, Vec<TransferLog>)>,
}

/// A step of a store-carry-forward transfer of a large bundle (see [`Sim::log_transfers`]): for
/// reading why a file did or did not get somewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferLog {
    /// Ms from the start.
    pub at_ms: u64,
    /// Sender.
    pub from: usize,
    /// Receiver.
    pub to: usize,
    /// The bundle.
    pub id: BundleId,
    /// Its destination.
    pub destination: Eid,
    /// Its size on the wire.
    pub bytes: u64,
    /// `started`, `refused`, `complete`, `cut <payload bytes>`, `failed` (queued when the link
    /// went down, or sent on a link that was down).
    pub what: String,
}

/// The node id of node `i` in a simulation.
pub fn node_id(i: usize) -> Eid {
    // Node names are plain ASCII, so this cannot fail.
    Eid::dtn(&format!("n{i}"), "").unwrap_or(Eid::Null)
}

/// The application endpoint of node `i`.
pub fn app_endpoint(i: usize) -> Eid {
    Eid::dtn(&format!("n{i}"), "app").unwrap_or(Eid::Null)
}

impl Sim<NoApp> {
    /// Builds the network of a scenario (no event processed yet).
    pub fn new(scenario: Scenario) -> Self {
        Sim::with_app(scenario, NoApp)
    }
}

impl<A: App> Sim<A> {
    /// Builds the network of a scenario with an application layer above every node.
    pub fn with_app(scenario: Scenario, app: A) -> Self {
        let Streams {
            node_seeds,
            sim: sim_rng,
            topology: mut topo_rng,
        } = Streams::of(&scenario);
        let count = scenario.topology.nodes();
        let nodes = (0..count)
            .map(|i| {
                let mut config = NodeConfig::new(node_id(i));
                config.seed = node_seeds[i];
                config.strategy = scenario.strategy;
                config.beacon_period = Duration::from_millis(scenario.beacon_period_ms);
                config.max_bundle_piece = scenario.max_bundle_piece;
                let disk = scenario.disk.map(|_| DiskHandle::default());
                let store = SimStore::new(scenario.quota, disk.clone());
                let node = Node::new(config, Box::new(store), SIM_EPOCH);
                SimNode {
                    host: new_host(node, &scenario),
                    disk,
                    start: 0,
                    unconfirmed: BTreeSet::new(),
                    timer_generation: 0,
                    timer_at: None,
                    bytes_sent: 0,
                }
            })
            .collect();
        let mut sim = Self {
            app,
            app_timers: vec![(0, None); count],
            now: SIM_EPOCH,
            queue: EventQueue::default(),
            nodes,
            links: Vec::new(),
            link_slots: BTreeMap::new(),
            trace: 0xcbf2_9ce4_8422_2325,
            events: 0,
            ledger: Ledger::default(),
            injections: Vec::new(),
            payloads: Vec::new(),
            contact_ends: BTreeMap::new(),
            delivered_count: 0,
            receiving: BTreeSet::new(),
            link_events: Vec::new(),
            transfer_log: None,
            rng: sim_rng,
            scenario,
        };
        let schedule = sim
            .scenario
            .topology
            .schedule(sim.scenario.duration_ms, &mut topo_rng);
        // Contact ends known in advance (contact plans): nodes may fragment proactively for them.
        if sim.scenario.contact_hints && matches!(sim.scenario.topology, Topology::Plan(_)) {
            for (i, e) in schedule.iter().enumerate() {
                if e.up
                    && let Some(down) = schedule[i + 1..]
                        .iter()
                        .find(|d| !d.up && d.a == e.a && d.b == e.b)
                {
                    sim.contact_ends.insert((e.a, e.b, e.at), down.at);
                }
            }
        }
        for &e in &schedule {
            if e.a < count && e.b < count && e.a != e.b {
                sim.schedule(SIM_EPOCH + Duration::from_millis(e.at), Ev::Link(e));
            }
        }
        if sim.scenario.route_by_plan {
            let contacts = node::plan::contacts_of(&schedule, SIM_EPOCH, node_id);
            let graph = std::sync::Arc::new(node::cgr::ContactGraph::new(contacts));
            for n in &mut sim.nodes {
                n.host
                    .node_mut()
                    .set_contact_graph(SIM_EPOCH, Some(graph.clone()));
            }
        }
        sim.link_events = schedule;
        let w = sim.scenario.workload;
        let mut load_rng = sim.rng.fork();
        for i in 0..w.bundles {
            let (src, dst) = match w.pair {
                Some(pair) => pair,
                None if count >= 2 => {
                    let src = load_rng.below(count as u64) as usize;
                    let mut dst = load_rng.below(count as u64 - 1) as usize;
                    if dst >= src {
                        dst += 1;
                    }
                    (src, dst)
                }
                None => (0, 0),
            };
            let at = w.start_ms + load_rng.below(w.spread_ms.max(1));
            // Each bundle's payload is one buffer, shared by every copy in the network.
            let payload: Vec<u8> = (0..w.size).map(|k| (k as u64 ^ i as u64) as u8).collect();
            sim.payloads.push(Bytes::from(payload));
            sim.injections.push((src, dst));
            sim.schedule(SIM_EPOCH + Duration::from_millis(at), Ev::Inject(i));
        }
        let check = sim.scenario.check_every_ms.max(1);
        sim.schedule(SIM_EPOCH + Duration::from_millis(check), Ev::Check);
        for i in 0..count {
            sim.app.started(SIM_EPOCH, i, &mut sim.nodes[i].host);
            sim.schedule(
                SIM_EPOCH,
                Ev::Timer {
                    node: i,
                    generation: 0,
                },
            );
        }
        sim
    }

    /// Virtual time since the start, ms.
    pub fn elapsed_ms(&self) -> u64 {
        wire::time::millis(self.now - SIM_EPOCH)
    }

    /// A node.
    pub fn node(&self, i: usize) -> &Node {
        self.nodes[i].host.node()
    }

    /// A node's host.
    pub fn host(&self, i: usize) -> &SimHost {
        &self.nodes[i].host
    }

    /// A node's RPC engine, if the app gave it one.
    pub fn engine(&self, i: usize) -> Option<&::rpc::Rpc> {
        self.nodes[i].host.rpc()
    }

    /// Commits of node `i`'s store that changed it, and how many of them power cuts took
    /// (with the disk model; zeros without).
    pub fn commits(&self, i: usize) -> (u64, u64) {
        self.nodes[i].disk.as_ref().map_or((0, 0), |d| {
            let d = d.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (d.commits + d.lost_commits, d.lost_commits)
        })
    }

    /// Runs to the end of the scenario (or until everything was delivered, if asked).
    pub fn run(mut self) -> Result<Report, Violation> {
        self.run_in_place()
    }

    /// The topology's link changes for this run (milliseconds from the start, in time order; not
    /// those added with [`Sim::schedule_link`]).
    pub fn link_events(&self) -> &[LinkEvent] {
        &self.link_events
    }

    /// From now on, records every store-carry-forward transfer of a bundle of at least
    /// `min_bytes` on the wire (a debugging aid: it changes nothing in the run).
    pub fn log_transfers(&mut self, min_bytes: u64) {
        self.transfer_log = Some((min_bytes, Vec::new()));
    }

    /// The transfers recorded since [`Sim::log_transfers`], in time order.
    pub fn transfers(&self) -> &[TransferLog] {
        self.transfer_log
            .as_ref()
            .map_or(&[], |(_, l)| l.as_slice())
    }

    fn log_transfer(&mut self, from: usize, to: usize, frame: &Frame, bytes: u64, what: String) {
        let Some((min, log)) = &mut self.transfer_log else {
            return;
        };
        let Frame::Bundle(b) = frame else {
            return;
        };
        if bytes < *min {
            return;
        }
        log.push(TransferLog {
            at_ms: wire::time::millis(self.now - SIM_EPOCH),
            from,
            to,
            id: b.id(),
            destination: b.primary.destination.clone(),
            bytes,
            what,
        });
    }

    /// The application layer.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application layer and a node's host, mutably (to inspect or poke between runs).
    pub fn app_and_host(&mut self, i: usize) -> (&mut A, &mut SimHost) {
        (&mut self.app, &mut self.nodes[i].host)
    }

    /// Schedules a scripted action for the app at node `i`, `at_ms` after the start.
    pub fn schedule_action(&mut self, at_ms: u64, i: usize, action: u64) {
        self.schedule(
            SIM_EPOCH + Duration::from_millis(at_ms),
            Ev::Action { node: i, action },
        );
    }

    /// Restarts node `i` at `at_ms`: its sessions drop, the node and the app's state for it are
    /// rebuilt from its store, and its links come back up.
    pub fn schedule_restart(&mut self, at_ms: u64, i: usize) {
        self.schedule(SIM_EPOCH + Duration::from_millis(at_ms), Ev::Restart(i));
    }

    /// Cuts node `i`'s power at `at_ms`: as [`Sim::schedule_restart`], but its store comes back
    /// as the last finished sync left it (with [`Scenario::disk`]; without, everything written
    /// was durable and this is a restart).
    pub fn schedule_power_cut(&mut self, at_ms: u64, i: usize) {
        self.schedule(SIM_EPOCH + Duration::from_millis(at_ms), Ev::PowerCut(i));
    }

    /// Takes the link between `a` and `b` up or down at `at_ms` (beside the topology's schedule).
    pub fn schedule_link(&mut self, at_ms: u64, a: usize, b: usize, up: bool) {
        let e = LinkEvent {
            at: at_ms,
            a,
            b,
            up,
        };
        self.schedule(SIM_EPOCH + Duration::from_millis(at_ms), Ev::Link(e));
    }

    /// Runs to the end of the scenario, keeping the simulation (and its app) for inspection.
    pub fn run_in_place(&mut self) -> Result<Report, Violation> {
        self.run_until(|_| false)
    }

    /// Runs to the end of the scenario or until `done` says the app has finished (checked after
    /// every event), keeping the simulation for inspection.
    pub fn run_until(&mut self, mut done: impl FnMut(&A) -> bool) -> Result<Report, Violation> {
        let end = SIM_EPOCH + Duration::from_millis(self.scenario.duration_ms);
        let mut stopped = false;
        while let Some((at, ev)) = self.queue.pop_until(end.as_millis()) {
            let at = DtnTime::from_millis(at);
            self.now = at;
            self.events += 1;
            match ev {
                QueuedEv::TxDone { slot, d, epoch } => {
                    let (slot, d) = (slot as usize, usize::from(d));
                    let (from, to) = self.direction_ends(slot, d);
                    let tag = tx_done_tag(from, to);
                    self.trace = fold(self.trace, at.as_millis() ^ tag.rotate_left(17));
                    self.tx_done(slot, d, epoch)?;
                }
                QueuedEv::Other(ev) => {
                    self.trace = fold(self.trace, at.as_millis() ^ ev.tag().rotate_left(17));
                    self.process(*ev)?;
                }
            }
            if self.scenario.stop_when_delivered
                && self.delivered_count == self.ledger.sent.len()
                && self.injections.len() == self.ledger.sent.len()
                && !self.ledger.sent.is_empty()
            {
                break;
            }
            if done(&self.app) {
                stopped = true;
                break;
            }
        }
        if self.now < end && !self.scenario.stop_when_delivered && !stopped {
            self.now = end;
        }
        self.check_scans()?;
        Ok(self.report())
    }

    fn report(&self) -> Report {
        let mut latencies_ms: Vec<u64> = self
            .ledger
            .sent
            .values()
            .filter(|s| s.accepted)
            .filter_map(|s| s.delivered_at.map(|t| wire::time::millis(t - s.created)))
            .collect();
        latencies_ms.sort_unstable();
        Report {
            seed: self.scenario.seed,
            nodes: self.nodes.len(),
            sent: self.ledger.sent.values().filter(|s| s.accepted).count(),
            delivered: latencies_ms.len(),
            latencies_ms,
            bytes_sent: self.nodes.iter().map(|n| n.bytes_sent).collect(),
            events: self.events,
            simulated_ms: wire::time::millis(self.now - SIM_EPOCH),
            trace_hash: self.trace,
            held_at_end: self
                .nodes
                .iter()
                .map(|n| n.host.node().held_bundles().count())
                .sum(),
            fragments: self
                .nodes
                .iter()
                .map(|n| n.host.node().stats().fragments_sent)
                .sum(),
            shared_payloads: self.ledger.shared,
        }
    }

    fn schedule(&mut self, at: DtnTime, ev: Ev) {
        self.enqueue(at, QueuedEv::Other(Box::new(ev)));
    }

    fn enqueue(&mut self, at: DtnTime, ev: QueuedEv) {
        self.queue.push(at.as_millis(), ev);
    }

    /// The place of the link between `a` and `b` in [`Sim::links`], if it ever came up.
    fn link_slot(&self, a: usize, b: usize) -> Option<usize> {
        self.link_slots.get(&(a.min(b), a.max(b))).copied()
    }

    fn violation(&self, node: usize, what: String) -> Violation {
        Violation {
            seed: self.scenario.seed,
            at_ms: wire::time::millis(self.now - SIM_EPOCH),
            node,
            what,
        }
    }

    fn process(&mut self, ev: Ev) -> Result<(), Violation> {
        let now = self.now;
        match ev {
            Ev::Timer { node, generation } => {
                let n = &mut self.nodes[node];
                if n.timer_generation != generation {
                    return Ok(()); // superseded
                }
                n.timer_at = None;
                n.host.handle_timeout(now);
                self.drain_checked(node)?;
            }
            Ev::Arrive {
                from,
                to,
                frame,
                confirm,
            } => {
                // A frame that left completely arrives even if the link went down meanwhile: its
                // bits were already on their way.
                let n = &mut self.nodes[to];
                match frame {
                    Frame::Beacon(beacon) => {
                        n.host
                            .node_mut()
                            .handle_beacon(now, LinkId(from as u64), beacon);
                    }
                    Frame::Bundle(bundle) => {
                        let id = bundle.id();
                        self.receiving.remove(&(to, id.clone()));
                        n.host
                            .node_mut()
                            .handle_bundle(now, LinkId(from as u64), bundle);
                        if confirm {
                            n.unconfirmed.insert((from, id.clone()));
                            n.host.promise(SimToken::Confirm { from, id });
                        }
                    }
                }
                self.drain_checked(to)?;
            }
            Ev::Transfer {
                node,
                link,
                id,
                result,
            } => {
                self.nodes[node]
                    .host
                    .node_mut()
                    .handle_transfer(now, link, &id, result);
                self.drain_checked(node)?;
            }
            Ev::Link(e) => {
                if e.up {
                    self.link_up(e);
                } else {
                    self.link_down(e.a, e.b)?;
                }
            }
            Ev::Session {
                a,
                b,
                epoch,
                contact_end,
            } => self.session_up(a, b, epoch, contact_end)?,
            Ev::Inject(i) => self.inject(i)?,
            Ev::AppTimer { node, generation } => {
                if self.app_timers[node].0 != generation {
                    return Ok(()); // superseded
                }
                self.app_timers[node].1 = None;
                self.app.timeout(now, node, &mut self.nodes[node].host);
                self.drain_checked(node)?;
            }
            Ev::Action { node, action } => {
                self.app
                    .action(now, node, &mut self.nodes[node].host, action);
                self.drain_checked(node)?;
            }
            Ev::Restart(node) => self.restart(node, false)?,
            Ev::PowerCut(node) => self.restart(node, true)?,
            Ev::Synced { node, start, upto } => {
                let n = &mut self.nodes[node];
                if n.start != start {
                    return Ok(()); // the node crashed while it synced
                }
                if let Some(disk) = &n.disk {
                    sim_store::end_sync(disk);
                }
                n.host.synced(now, upto, Ok(()));
                self.drain_checked(node)?;
            }
            Ev::Check => {
                self.check_scans()?;
                let next = now + Duration::from_millis(self.scenario.check_every_ms.max(1));
                self.schedule(next, Ev::Check);
            }
        }
        Ok(())
    }

    fn inject(&mut self, i: usize) -> Result<(), Violation> {
        let (src, dst) = self.injections[i];
        let w = self.scenario.workload;
        let mut out = Outgoing::new(
            app_endpoint(src),
            app_endpoint(dst),
            self.payloads[i].clone(),
        );
        out.class = w.class;
        out.lifetime_ms = w.lifetime_ms;
        if let Ok(id) = self.nodes[src].host.node_mut().send(self.now, out) {
            self.ledger
                .sent(id.clone(), dst, self.now, self.payloads[i].clone());
            if let Some(sent) = self.ledger.sent.get_mut(&id) {
                sent.accepted = false;
            }
            self.nodes[src].host.promise(SimToken::Accepted(id));
        }
        self.drain_checked(src)
    }

    fn link_is_up(&self, a: usize, b: usize) -> bool {
        self.link_slot(a, b).is_some_and(|s| self.links[s].up)
    }

    /// A link comes up: the nodes at its ends hold a session on it one link latency later (the
    /// daemon's nodes learn of a link only from a TCPCL session, with the peer's node id, and a
    /// session carries no beacons; the latency is what a first beacon took to tell the peer's id
    /// before sessions were modelled).
    fn link_up(&mut self, e: LinkEvent) {
        let key = (e.a.min(e.b), e.a.max(e.b));
        let slot = match self.link_slots.get(&key) {
            Some(&slot) => slot,
            None => {
                self.links.push(SimLink {
                    ends: key,
                    up: false,
                    epoch: 0,
                    dirs: [Direction::default(), Direction::default()],
                });
                self.link_slots.insert(key, self.links.len() - 1);
                self.links.len() - 1
            }
        };
        let link = &mut self.links[slot];
        if link.up {
            return;
        }
        link.up = true;
        link.epoch += 1;
        let epoch = link.epoch;
        let contact_end = self
            .contact_ends
            .get(&(key.0, key.1, e.at))
            .map(|end| SIM_EPOCH + Duration::from_millis(*end));
        let at = self.now + Duration::from_millis(self.scenario.link.latency_ms);
        let ev = Ev::Session {
            a: key.0,
            b: key.1,
            epoch,
            contact_end,
        };
        self.schedule(at, ev);
    }

    /// The session on a link is up, unless the link went down (or down and up) meanwhile.
    fn session_up(
        &mut self,
        a: usize,
        b: usize,
        epoch: u64,
        contact_end: Option<DtnTime>,
    ) -> Result<(), Violation> {
        if !self
            .link_slot(a, b)
            .is_some_and(|s| self.links[s].up && self.links[s].epoch == epoch)
        {
            return Ok(());
        }
        let contact = contact_end.map(|end| end - self.now);
        for (me, other) in [(a, b), (b, a)] {
            self.nodes[me].host.node_mut().handle_link(
                self.now,
                LinkChange::Up {
                    link: LinkId(other as u64),
                    peer: Some(node_id(other)),
                    mtu: None,
                    bandwidth_bps: self.scenario.link.bandwidth_bps,
                    contact,
                },
            );
        }
        self.drain_checked(a)?;
        self.drain_checked(b)
    }

    fn link_down(&mut self, a: usize, b: usize) -> Result<(), Violation> {
        let key = (a.min(b), a.max(b));
        let Some(slot) = self.link_slot(a, b) else {
            return Ok(());
        };
        let link = &mut self.links[slot];
        if !link.up {
            return Ok(());
        }
        link.up = false;
        link.epoch += 1;
        let now_us = self.now.as_millis() * 1_000;
        let bw = self.scenario.link.bandwidth_bps.max(1);
        let mut cut = Vec::new();
        let mut failed = Vec::new();
        for (d, (from, to)) in [(key.0, key.1), (key.1, key.0)].into_iter().enumerate() {
            let dir = &mut link.dirs[d];
            // Bytes of the segment on the wire when the link went down.
            let mut in_segment = 0;
            if let Some(Busy::Segment { start_us, len }) = dir.busy.take() {
                in_segment = ((u128::from(now_us.saturating_sub(start_us)) * u128::from(bw)
                    / 8_000_000) as u64)
                    .min(len);
            }
            if let Some(sending) = dir.bulk_current.take() {
                let done = sending.sent + in_segment;
                cut.push((from, to, sending, done));
            }
            for (frame, _, _) in dir.bulk.drain(..) {
                failed.push((from, to, frame));
            }
            dir.urgent.clear();
        }
        for (from, to, sending, done) in cut {
            self.nodes[from].bytes_sent += done.saturating_sub(sending.sent);
            if let Frame::Bundle(bundle) = sending.frame {
                let id = bundle.id();
                self.receiving.remove(&(to, id.clone()));
                if sending.refused {
                    self.nodes[from].host.node_mut().handle_transfer(
                        self.now,
                        LinkId(to as u64),
                        &id,
                        TransferResult::Refused,
                    );
                    continue;
                }
                let payload_len = bundle.payload.data.len() as u64;
                let got = done.saturating_sub(sending.head).min(payload_len);
                if self.transfer_log.is_some() {
                    let frame = Frame::Bundle(bundle.clone());
                    let what =
                        format!("cut by link down after {got} of {payload_len} payload bytes");
                    self.log_transfer(from, to, &frame, sending.size, what);
                }
                let result = if got == 0 {
                    TransferResult::Failed
                } else if got >= payload_len {
                    // Only the closing bytes were missing: the whole bundle made it.
                    self.nodes[to].host.node_mut().handle_bundle(
                        self.now,
                        LinkId(from as u64),
                        bundle,
                    );
                    TransferResult::Complete
                } else {
                    match bundle.split_at(got as usize) {
                        Ok((prefix, _)) => {
                            // The receiver keeps what arrived as a fragment (reactive
                            // fragmentation), as a TCPCL receiver does with a cut transfer.
                            self.nodes[to].host.node_mut().handle_bundle(
                                self.now,
                                LinkId(from as u64),
                                prefix,
                            );
                            TransferResult::Cut { payload_bytes: got }
                        }
                        Err(_) => TransferResult::Failed,
                    }
                };
                self.nodes[from].host.node_mut().handle_transfer(
                    self.now,
                    LinkId(to as u64),
                    &id,
                    result,
                );
            }
        }
        for (from, to, frame) in failed {
            if self.transfer_log.is_some() {
                let size = match &frame {
                    Frame::Bundle(b) => {
                        let (h, p, t) = b.encoded_sizes();
                        (h + p + t) as u64
                    }
                    Frame::Beacon(_) => 0,
                };
                self.log_transfer(from, to, &frame, size, "queued, failed by link down".into());
            }
            if let Frame::Bundle(bundle) = frame {
                self.nodes[from].host.node_mut().handle_transfer(
                    self.now,
                    LinkId(to as u64),
                    &bundle.id(),
                    TransferResult::Failed,
                );
            }
        }
        for (me, other) in [(key.0, key.1), (key.1, key.0)] {
            self.nodes[me].host.node_mut().handle_link(
                self.now,
                LinkChange::Down {
                    link: LinkId(other as u64),
                },
            );
        }
        self.drain_checked(key.0)?;
        self.drain_checked(key.1)
    }

    /// Puts the next frame or segment on direction `d` of the link at `slot` if it is idle:
    /// real-time frames first, then the next segment of the bulk transfer in progress, then the
    /// next bulk transfer.
    fn start_next(&mut self, slot: usize, d: usize) {
        let bw = self.scenario.link.bandwidth_bps.max(1);
        let now_us = self.now.as_millis() * 1_000;
        let link = &mut self.links[slot];
        let epoch = link.epoch;
        let dir = &mut link.dirs[d];
        if dir.busy.is_some() {
            return;
        }
        let start_us = if dir.free_at_us + 1_000 > now_us && dir.free_at_us <= now_us {
            dir.free_at_us
        } else {
            now_us
        };
        let len = if let Some((frame, size)) = dir.urgent.pop_front() {
            dir.busy = Some(Busy::Urgent { frame, size });
            size
        } else {
            if dir.bulk_current.is_none() {
                let Some((frame, size, head)) = dir.bulk.pop_front() else {
                    return;
                };
                dir.bulk_current = Some(Sending {
                    frame,
                    size,
                    head,
                    sent: 0,
                    refused: false,
                });
                self.begin_bulk(slot, d);
            }
            let dir = &mut self.links[slot].dirs[d];
            let Some(sending) = &dir.bulk_current else {
                return;
            };
            let len = (sending.size - sending.sent).clamp(1, SEGMENT);
            dir.busy = Some(Busy::Segment { start_us, len });
            len
        };
        let tx_us = (u128::from(len) * 8_000_000).div_ceil(u128::from(bw)) as u64;
        let end_us = start_us + tx_us;
        self.links[slot].dirs[d].free_at_us = end_us;
        self.enqueue(
            DtnTime::from_millis(end_us.div_ceil(1_000)),
            QueuedEv::TxDone {
                slot: slot as u32,
                d: d as u8,
                epoch,
            },
        );
    }

    /// The (sender, receiver) of direction `d` of the link at `slot`.
    fn direction_ends(&self, slot: usize, d: usize) -> (usize, usize) {
        let (a, b) = self.links[slot].ends;
        if d == 0 { (a, b) } else { (b, a) }
    }

    /// A bulk transfer starts: the receiver refuses a bundle it holds or is receiving on another
    /// link after the first segment (TCPCL XFER_REFUSE), so only the header crosses.
    fn begin_bulk(&mut self, slot: usize, d: usize) {
        let (from, to) = self.direction_ends(slot, d);
        let Some(sending) = self.links[slot].dirs[d].bulk_current.as_ref() else {
            return;
        };
        let Frame::Bundle(b) = &sending.frame else {
            return;
        };
        let id = b.id();
        let refuse =
            !self.nodes[to].host.node().wants(&id) || self.receiving.contains(&(to, id.clone()));
        if self.transfer_log.is_some() {
            let (frame, size) = (sending.frame.clone(), sending.size);
            let what = if refuse { "refused" } else { "started" };
            self.log_transfer(from, to, &frame, size, what.to_string());
        }
        if !refuse {
            self.receiving.insert((to, id));
        }
        if let Some(sending) = self.links[slot].dirs[d].bulk_current.as_mut()
            && refuse
        {
            sending.refused = true;
            sending.size = sending.head.max(1);
        }
    }

    /// The transmission on direction `d` of the link at `slot` ended (if the link is still in
    /// the coming up `epoch` it started in).
    fn tx_done(&mut self, slot: usize, d: usize, epoch: u64) -> Result<(), Violation> {
        let (from, to) = self.direction_ends(slot, d);
        let link = &mut self.links[slot];
        if link.epoch != epoch || !link.up {
            return Ok(());
        }
        let dir = &mut link.dirs[d];
        let arrive = self.now + Duration::from_millis(self.scenario.link.latency_ms);
        match dir.busy.take() {
            None => return Ok(()),
            Some(Busy::Urgent { frame, size }) => {
                self.nodes[from].bytes_sent += size;
                if !self.rng.chance(self.scenario.link.loss) {
                    let ev = Ev::Arrive {
                        from,
                        to,
                        frame,
                        confirm: false,
                    };
                    self.schedule(arrive, ev);
                }
            }
            Some(Busy::Segment { len, .. }) => {
                self.nodes[from].bytes_sent += len;
                let finished = match &mut dir.bulk_current {
                    Some(sending) => {
                        sending.sent += len;
                        sending.sent >= sending.size
                    }
                    None => false,
                };
                if finished && let Some(sending) = dir.bulk_current.take() {
                    let Frame::Bundle(b) = &sending.frame else {
                        return Ok(());
                    };
                    let result = if sending.refused {
                        TransferResult::Refused
                    } else {
                        TransferResult::Complete
                    };
                    let id = b.id();
                    if !sending.refused && self.transfer_log.is_some() {
                        let frame = sending.frame.clone();
                        self.log_transfer(from, to, &frame, sending.size, "complete".to_string());
                    }
                    if sending.refused {
                        let ev = Ev::Transfer {
                            node: from,
                            link: LinkId(to as u64),
                            id,
                            result,
                        };
                        self.schedule(arrive, ev);
                    } else {
                        // Its sender hears of it once the receiver made it durable.
                        let ev = Ev::Arrive {
                            from,
                            to,
                            frame: sending.frame,
                            confirm: true,
                        };
                        self.schedule(arrive, ev);
                        // Meanwhile it leaves the sender's window, as the daemon's TCPCL
                        // session reports a transfer's last segment written out.
                        self.nodes[from].host.node_mut().handle_transfer_written(
                            self.now,
                            LinkId(to as u64),
                            &id,
                        );
                        self.drain_checked(from)?;
                    }
                }
            }
        }
        self.start_next(slot, d);
        Ok(())
    }

    /// Runs node `i`'s host until it is quiet, as the daemon's loop does: its events, a commit
    /// (and a sync when due), its outputs (transmits onto links, deliveries to the ledger,
    /// the rest to the app, which may ask more of it); then re-arms its timers.
    fn drain_checked(&mut self, i: usize) -> Result<(), Violation> {
        loop {
            let now = self.now;
            let n = &mut self.nodes[i];
            let busy = n.host.handle_events(now, usize::MAX).busy;
            if let Commit::Failed(e) = n.host.commit(now, |store| store.commit()) {
                return Err(self.violation(i, format!("a store commit failed: {e}")));
            }
            let n = &mut self.nodes[i];
            if let Some(upto) = n.host.poll_sync(now) {
                match (&n.disk, self.scenario.disk) {
                    (Some(disk), Some(model)) if model.sync_ms > 0 => {
                        sim_store::begin_sync(disk);
                        let ev = Ev::Synced {
                            node: i,
                            start: n.start,
                            upto,
                        };
                        self.schedule(now + Duration::from_millis(model.sync_ms), ev);
                    }
                    (disk, _) => {
                        if let Some(disk) = disk {
                            sim_store::begin_sync(disk);
                            sim_store::end_sync(disk);
                        }
                        n.host.synced(now, upto, Ok(()));
                    }
                }
            }
            let mut outputs = false;
            while let Some(output) = self.nodes[i].host.poll_output() {
                outputs = true;
                match output {
                    Output::Transmit(t) => self.transmit(i, t),
                    Output::Node(Event::Delivered(d)) if d.destination == app_endpoint(i) => {
                        let token = SimToken::Deliver {
                            id: d.id,
                            payload: d.payload,
                        };
                        self.nodes[i].host.promise(token);
                    }
                    Output::Release {
                        token: SimToken::Deliver { id, payload },
                        ..
                    } => match self.ledger.delivered(i, &id, &payload, now) {
                        Ok(()) => self.delivered_count += 1,
                        Err(what) => return Err(self.violation(i, what)),
                    },
                    Output::Release {
                        token: SimToken::Accepted(id),
                        ..
                    } => {
                        if let Some(sent) = self.ledger.sent.get_mut(&id) {
                            sent.accepted = true;
                        }
                    }
                    Output::Release {
                        token: SimToken::Confirm { from, id },
                        ..
                    } => {
                        self.nodes[i].unconfirmed.remove(&(from, id.clone()));
                        let ev = Ev::Transfer {
                            node: from,
                            link: LinkId(i as u64),
                            id,
                            result: TransferResult::Complete,
                        };
                        self.schedule(now, ev);
                    }
                    other => self.app.output(now, i, &mut self.nodes[i].host, other),
                }
            }
            if !busy && !outputs {
                break;
            }
        }
        self.arm_timers(i);
        Ok(())
    }

    /// Restarts node `i` from its store: after a process crash (`power_cut` false) the store
    /// holds what was committed, after a power cut what the last finished sync covered (with
    /// the disk model; without it everything written).
    fn restart(&mut self, i: usize, power_cut: bool) -> Result<(), Violation> {
        // In the order of their ends, as they are brought down one by one.
        let mut up: Vec<(usize, usize)> = self
            .links
            .iter()
            .filter(|l| l.up && (l.ends.0 == i || l.ends.1 == i))
            .map(|l| l.ends)
            .collect();
        up.sort_unstable();
        for (a, b) in &up {
            self.link_down(*a, *b)?;
        }
        let n = &mut self.nodes[i];
        let config = n.host.node().config().clone();
        let placeholder = Node::new(config.clone(), Box::new(MemoryStore::new(0)), self.now);
        let old = std::mem::replace(&mut n.host, new_host(placeholder, &self.scenario));
        let store: Box<dyn store::Store + Send> = match &n.disk {
            Some(disk) => {
                let snapshot = sim_store::after_crash(disk, power_cut);
                Box::new(SimStore::restored(
                    snapshot,
                    self.scenario.quota,
                    disk.clone(),
                ))
            }
            None => old.into_node().into_store(),
        };
        n.host = new_host(Node::new(config, store, self.now), &self.scenario);
        n.start += 1;
        n.timer_generation += 1;
        n.timer_at = None;
        // Bundles it received but never said it held: their senders keep them, as a TCPCL
        // sender keeps a bundle whose session died before its last XFER_ACK.
        for (from, id) in std::mem::take(&mut n.unconfirmed) {
            let ev = Ev::Transfer {
                node: from,
                link: LinkId(i as u64),
                id,
                result: TransferResult::Failed,
            };
            self.schedule(self.now, ev);
        }
        self.app.started(self.now, i, &mut self.nodes[i].host);
        self.drain_checked(i)?;
        for (a, b) in up {
            let e = LinkEvent {
                at: wire::time::millis(self.now - SIM_EPOCH),
                a,
                b,
                up: true,
            };
            self.link_up(e);
        }
        Ok(())
    }

    /// Puts a transmit of node `i` on its link (a bundle for a link that is down fails).
    fn transmit(&mut self, i: usize, t: node::Transmit) {
        let to = t.link.0 as usize;
        if !self.link_is_up(i, to) {
            if let Frame::Bundle(b) = &t.frame {
                let ev = Ev::Transfer {
                    node: i,
                    link: t.link,
                    id: b.id(),
                    result: TransferResult::Failed,
                };
                self.schedule(self.now, ev);
            }
            return;
        }
        let (size, head) = match &t.frame {
            Frame::Beacon(b) => (b.encode().len() as u64, 0),
            Frame::Bundle(b) => {
                let (head, payload, tail) = b.encoded_sizes();
                ((head + payload + tail) as u64, head as u64)
            }
        };
        let Some(slot) = self.link_slot(i, to) else {
            return;
        };
        let d = usize::from(i > to);
        let dir = &mut self.links[slot].dirs[d];
        if !t.urgent {
            dir.bulk.push_back((t.frame, size, head));
        } else {
            dir.urgent.push_back((t.frame, size));
        }
        self.start_next(slot, d);
    }

    /// Re-arms node `i`'s host timer and its app timer.
    fn arm_timers(&mut self, i: usize) {
        let next = self.nodes[i].host.poll_timeout();
        let n = &mut self.nodes[i];
        if next != n.timer_at {
            n.timer_generation += 1;
            n.timer_at = next;
            if let Some(at) = next {
                let generation = n.timer_generation;
                // A deadline in the past fires now; the host's handle_timeout moves it on.
                let at = at.max(self.now);
                self.schedule(
                    at,
                    Ev::Timer {
                        node: i,
                        generation,
                    },
                );
            }
        }
        let next = self.app.next_timeout(i);
        let (generation, at) = &mut self.app_timers[i];
        if next != *at {
            *generation += 1;
            *at = next;
            if let Some(when) = next {
                let ev = Ev::AppTimer {
                    node: i,
                    generation: *generation,
                };
                self.schedule(when.max(self.now), ev);
            }
        }
    }

    /// The invariants that need a scan of every node.
    fn check_scans(&self) -> Result<(), Violation> {
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some((id, expiry)) = n.host.node().held_bundles().find(|(_, e)| *e < self.now) {
                return Err(self.violation(
                    i,
                    format!(
                        "bundle {id} held {} ms past its lifetime",
                        wire::time::millis(self.now - expiry)
                    ),
                ));
            }
            if let Ok(usage) = n.host.node().store().usage()
                && usage.bytes > usage.quota
            {
                return Err(self.violation(
                    i,
                    format!("store holds {} bytes, quota {}", usage.bytes, usage.quota),
                ));
            }
        }
        Ok(())
    }
}

/// A host for a simulated node: deliveries go to the ledger (no inboxes), and its pipeline runs
/// the daemon's timing with the disk model, or makes every commit durable at once without.
fn new_host(node: Node, scenario: &Scenario) -> SimHost {
    let pipeline = match scenario.disk {
        Some(_) => PipelineConfig::default(),
        None => PipelineConfig {
            commit_delay: std::time::Duration::ZERO,
            sync_delay: std::time::Duration::ZERO,
            has_syncer: false,
        },
    };
    let config = HostConfig {
        pipeline,
        echo_service: None,
        discard_service: None,
        inboxes: false,
        null_procedure: None,
    };
    match Host::new(node, None, config) {
        Ok(host) => host,
        // Without inboxes a host reads nothing from its store to start.
        Err(e) => unreachable!("a host without inboxes loads nothing: {e}"),
    }
}

fn fold(hash: u64, value: u64) -> u64 {
    (hash ^ value).wrapping_mul(0x0100_0000_01b3)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |p| {
            self.latency_percentile(p).map_or("-".to_string(), |ms| {
                format!("{:.1} s", ms as f64 / 1_000.0)
            })
        };
        let total: u64 = self.bytes_sent.iter().sum();
        let max = self.bytes_sent.iter().copied().max().unwrap_or(0);
        writeln!(f, "nodes               {}", self.nodes)?;
        writeln!(
            f,
            "delivered           {}/{} ({:.1} %)",
            self.delivered,
            self.sent,
            100.0 * self.delivery_ratio()
        )?;
        writeln!(
            f,
            "latency p50/p90/max {} / {} / {}",
            pct(50.0),
            pct(90.0),
            pct(100.0)
        )?;
        writeln!(
            f,
            "bytes per node      mean {:.1} MB, max {:.1} MB",
            total as f64 / self.nodes.max(1) as f64 / 1e6,
            max as f64 / 1e6
        )?;
        writeln!(f, "fragments cut       {}", self.fragments)?;
        writeln!(f, "held at end         {}", self.held_at_end)?;
        writeln!(
            f,
            "simulated           {:.0} s, {} events",
            self.simulated_ms as f64 / 1_000.0,
            self.events
        )?;
        write!(f, "trace hash          {:016x}", self.trace_hash)
    }
}

impl<A: App> fmt::Debug for Sim<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("seed", &self.scenario.seed)
            .field("elapsed_ms", &self.elapsed_ms())
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use wire::CreationTimestamp;

    fn id(seq: u64) -> BundleId {
        BundleId {
            source: app_endpoint(0),
            creation: CreationTimestamp {
                time: SIM_EPOCH,
                sequence: seq,
            },
            fragment: None,
        }
    }

    #[test]
    fn ledger_catches_every_delivery_violation() {
        let data = Bytes::from(vec![7u8; 100]);
        let mut ledger = Ledger::default();
        ledger.sent(id(1), 3, SIM_EPOCH, data.clone());
        assert!(
            ledger
                .delivered(3, &id(1), &data, SIM_EPOCH + Duration::from_millis(5))
                .is_ok()
        );
        assert_eq!(ledger.shared, 1);
        let twice = ledger
            .delivered(3, &id(1), &data, SIM_EPOCH + Duration::from_millis(6))
            .unwrap_err();
        assert!(twice.contains("twice"), "{twice}");
        let phantom = ledger.delivered(3, &id(2), &data, SIM_EPOCH).unwrap_err();
        assert!(phantom.contains("never sent"), "{phantom}");
        ledger.sent(id(3), 3, SIM_EPOCH, data.clone());
        let short = ledger
            .delivered(3, &id(3), &data.slice(1..), SIM_EPOCH)
            .unwrap_err();
        assert!(short.contains("altered"), "{short}");
        ledger.sent(id(4), 3, SIM_EPOCH, data.clone());
        let flipped = Bytes::from(vec![8u8; 100]);
        let changed = ledger
            .delivered(3, &id(4), &flipped, SIM_EPOCH)
            .unwrap_err();
        assert!(changed.contains("altered"), "{changed}");
        // An equal copy is accepted but not counted as shared.
        ledger.sent(id(5), 3, SIM_EPOCH, data.clone());
        assert!(
            ledger
                .delivered(3, &id(5), &Bytes::from(vec![7u8; 100]), SIM_EPOCH)
                .is_ok()
        );
        assert_eq!(ledger.shared, 1);
        ledger.sent(id(6), 3, SIM_EPOCH, data.clone());
        let wrong_node = ledger.delivered(2, &id(6), &data, SIM_EPOCH).unwrap_err();
        assert!(wrong_node.contains("altered"), "{wrong_node}");
    }

    #[test]
    fn violations_name_their_seed() {
        let v = Violation {
            seed: 42,
            at_ms: 1_000,
            node: 3,
            what: "bundle x delivered twice".into(),
        };
        assert!(v.to_string().contains("replay with seed 42"), "{v}");
    }
}
