//! The event loop: one task owns the [`host::Host`] (the node, its RPC engine, its inboxes and
//! the store) and turns everything that happens — TCPCL session events, UDP datagrams, beacons
//! heard, API requests, finished executions, timers, signals — into the host's inputs, then
//! carries out what the host asks: transmits onto sessions and UDP, executions as processes,
//! answers to the API.
//!
//! After every input the loop *pumps*: the host handles the node's events and the loop takes its
//! outputs, then the host commits the store's batch. What the batch promised (the node's
//! store-carry-forward transmits, RPC executions, XFER_ACKs of received bundles, inbox
//! subscribers, API answers) the host holds until a sync on a blocking thread has made the
//! commit durable, so nothing is announced to a peer or an application, and no program runs,
//! that a power loss could lose; meanwhile the loop goes on, and one sync covers every commit
//! made while the last one ran (group commit). Real-time transmits (which promise nothing
//! durable) leave at once. A commit that promised nothing waits up to [`SYNC_DELAY`] for the
//! next one that does, or for that time to pass.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use bytes::Bytes;
use cla::tcp::{SessionHandle, TcpclEvent};
use cla::tcpcl::{ReceiveBudget, Role, SessionConfig, TlsFailure, TlsPolicy};
use cla::tls::TlsContext;
use node::{
    Class, Event, Frame, LinkChange, LinkId, Node, Outgoing, SendError, TransferResult, Transmit,
};
use store::Retention;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};
use wire::{Beacon, BundleFlags, BundleId, ClaKind, DtnTime, Eid, StatusReport};

use crate::calls::{CallInfo, CallOutcome, CallSpec, FileHere, ProcedureInfo, WaitFor};
use crate::config::Config;
use crate::control::{
    ApiError, BundleInfo, Counters, PeerInfo, ReportInfo, Request, RouteInfo, RpcCounters,
    SendReply, SendRequest, Status,
};
use crate::discovery::{Announcer, Heard, HeardBeacon};
use crate::facts::Readings;
use crate::metrics::Metrics;
use crate::rpc_shell::{Finished, RpcShell};
use crate::udp::Datagram;
use host::inbox::Waiting;
use host::{Host, HostConfig, Output, PipelineConfig};

/// Most status reports kept for `ferry trace`.
const MAX_REPORTS: usize = 10_000;
/// Most served calls `GET /v1/served` lists (the latest deadlines): a page, not the whole memory.
const MAX_SERVED_LISTED: usize = 200;
/// How long a TCP connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Wait before the first reconnection attempt to a static peer whose session ended or whose
/// dial failed; each failed attempt doubles it, up to [`MAX_BACKOFF`], and a session that comes
/// up sets it back.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between reconnection attempts to a static peer: a contact that comes back is
/// used within this time (a failed attempt costs one connect; contacts in the paper's
/// experiments last about a minute, so 30 s wasted half of one).
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// For [`FAST_REDIAL_WINDOW`] after a link came up, a static peer's dial that has not connected
/// within this long is given up for a new one: a SYN sent as the link came up may be lost (the
/// peer's side of the link may come up a moment later), and TCP would send it again only after
/// a second.
pub const FAST_REDIAL: Duration = Duration::from_millis(250);

/// How long after a link came up dials are renewed every [`FAST_REDIAL`].
pub const FAST_REDIAL_WINDOW: Duration = Duration::from_secs(2);

/// For [`FAST_REDIAL_WINDOW`] after a link came up, beacons go out this often instead of once a
/// period: the first ones, sent as the link comes up, are often lost. Linux takes packets on a
/// link only once it has activated the link's queue, a moment after the carrier is up (until
/// then a send fails with `EAGAIN` or goes nowhere), and a neighbour's side of the link may come
/// up later too. With one beacon a period, a contact waited up to a period for its session
/// (docs/performance.md, "A contact's first moments").
const LINK_UP_BEACON_INTERVAL: Duration = Duration::from_millis(100);

/// In that window, a beacon an interface refused (`EAGAIN`: its queue is not active yet) goes
/// again this soon: the queue is usually active within milliseconds.
const LINK_NOT_READY_RETRY: Duration = Duration::from_millis(10);

/// When a link comes up, a session with a transfer in progress that has received nothing for
/// this long is taken as stalled by the outage, and replaced (see
/// `cla::tcp::TcpclCommand::ReplaceIfStalled`).
pub const STALL_QUIET: Duration = Duration::from_secs(2);
/// A discovered node with a larger id than ours connects to us; if it has not after this many of
/// its beacons, we connect (it may not hear ours).
const BEACONS_BEFORE_CONNECTING: u32 = 3;
/// Most nodes known from beacons at once. When full, the one heard from least recently (and
/// without a session) is forgotten for a new one.
const MAX_DISCOVERED: usize = 1024;
/// Most node ids believed from one IP address: a host flooding beacons with made-up ids churns
/// only its own entries, never those of its neighbours.
const MAX_DISCOVERED_PER_ADDRESS: usize = 16;
/// A discovered node is forgotten after this many of its announced periods without a beacon
/// (the period is the sender's word: it counts between 1 s and 60 s here).
const DISCOVERED_PERIODS: u32 = 3;
/// Most connection attempts to discovered nodes under way at once: a burst of beacons with new
/// ids makes the node dial a few at a time, not one per id.
const MAX_DISCOVERY_DIALS: usize = 8;
/// How often a dtn7-rs node that announces no period is taken to send beacons: dtnd announces
/// one only with `-b`, and sends every 2 s by default; its own peer timeout is 20 s. Forgotten
/// after [`DISCOVERED_PERIODS`] of these, 30 s.
const DTN7_UNANNOUNCED_PERIOD: Duration = Duration::from_secs(10);
/// What Ferry's dtn7-rs beacons carry as their custom text service (tag 63) when the node sends
/// Ferry's beacons too, so that another Ferry node that hears Ferry's beacons leaves them aside
/// (both announce the same node), and an operator sees in dtnd's peer list which peers are Ferry
/// nodes. Unmarked, from a node with `formats = ["dtn7"]`, they would be skipped by nodes that
/// go by Ferry's beacons, which that node never sends.
const DTN7_FERRY_MARK: &[u8] = b"ferry";
/// Most inputs handled before one pump (and so one store commit).
const BATCH_INPUTS: usize = 256;
/// Most inputs handled before the traffic they made leaves (see [`Daemon::run`]). Measured in
/// the rpc bench (64 calls in flight, paired runs): 32 made ~19 % more calls/s than 256; 64
/// then ~4 % more than 32, but since real-time bundles go untracked 32 makes ~25 % more than
/// 64 (the other core is busy 1.7 of 2 instead of 1.45: the traffic leaves while this loop
/// goes on). Since a round's stream segments share bundles, an input (a bundle) may be many
/// calls, and 16 makes ~10 % more calls/s than 32 (cores busy 1.65 instead of 1.46, the same
/// CPU per call); 4 and 8 keep the cores busier still but cost more CPU per call (a pump, a
/// yield and smaller bundles each time), 12 and 24 were no better.
const TRAFFIC_INPUTS: usize = 16;
/// Most node events (a call, a reply, a bundle delivered) handled before the traffic they made
/// leaves and the loop yields (see [`Daemon::run`]). An input may be a bundle of hundreds of
/// calls' segments; handled in one go, the call round trip moved as one wave, each loop in turn
/// working through it while the other core idled. Measured in the rpc bench (64 calls in
/// flight, paired runs with gRPC at its fast speed): 32 made 0.91-0.93x gRPC's calls/s against
/// 0.84-0.92x without a bound (cores busy 1.76 instead of 1.61, CPU per call about the same);
/// 16 and 48 were worse than 32 (16: more bundles and wake-ups, CPU per call +10 %). Once a
/// call cost ~8 % less work (session 14), 64 did better: 31.2 k calls/s on average over seven
/// alternated pairs against 29.2 at 32 (CPU per call ~52 against ~57 µs: fewer, fuller bundles),
/// better in five of the seven; 48 was no better than 32, 128 uneven (23.8-35.1 k/s).
const TRAFFIC_EVENTS: usize = 64;
/// How long changes that promise nothing to anyone may wait for a commit
/// ([`PipelineConfig::commit_delay`]).
const COMMIT_DELAY: Duration = Duration::from_millis(10);
/// How long a commit that promised nothing may wait for its sync
/// ([`PipelineConfig::sync_delay`]): a power cut then loses at most this much of what nobody was
/// told was durable. Under a steady load of `null` calls, a sync per commit cost about 7 % of
/// the calls/s (docs/performance.md).
const SYNC_DELAY: Duration = Duration::from_millis(100);

/// How long a graceful stop that answered running executions keeps the sessions open after the
/// answers left the loop: a session's task must have started sending them before it is told to
/// close, or it drops them unsent.
const STOP_GRACE: Duration = Duration::from_millis(200);
/// The demux of the echo service (`ferry ping`).
pub const ECHO_SERVICE: &str = "echo";
/// The demux of the discard service (`ferry trace`): its bundles are delivered, reported and
/// dropped.
pub const DISCARD_SERVICE: &str = "discard";

/// The wall clock expressed as DTN time, advanced by a monotonic clock so that a wall-clock step
/// never moves the node's time backwards.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    start_dtn: DtnTime,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        let unix_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self {
            start: Instant::now(),
            start_dtn: DtnTime::from_millis(
                unix_ms.saturating_sub(wire::DTN_EPOCH_UNIX_SECS * 1000),
            ),
        }
    }

    /// Now, in DTN ms.
    pub fn now(&self) -> DtnTime {
        self.start_dtn + self.start.elapsed()
    }

    /// The instant at which the clock reads `t`.
    pub fn instant(&self, t: DtnTime) -> Instant {
        self.start + (t - self.start_dtn)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a link came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A static peer from the configuration (index into `statics`).
    Static(usize),
    /// A node heard by beacon.
    Discovered,
    /// A session a peer opened.
    Accepted,
}

/// A TCPCL session the node uses as a link.
struct Link {
    handle: SessionHandle,
    remote: SocketAddr,
    origin: Origin,
    peer: Option<Eid>,
    up_since: Option<Instant>,
    /// The peer's UDP convergence layer, if its beacon announced one.
    udp: Option<SocketAddr>,
    /// Whether the node was told the link is up.
    announced: bool,
}

/// A bundle handed to a session and not yet acknowledged.
struct Flight {
    link: LinkId,
    id: BundleId,
    /// Encoded bytes before the payload, and the payload's length: the acknowledged byte count of
    /// a cut transfer becomes payload bytes the peer holds.
    head: u64,
    payload: u64,
}

struct StaticPeer {
    addr: SocketAddr,
    link: Option<LinkId>,
    retry_at: Instant,
    backoff: Duration,
}

struct Discovered {
    /// Whether it is known as a Ferry node (it sent Ferry's beacons, or dtn7-rs's marked as a
    /// Ferry node's), which dials us by itself when its id is the larger.
    ferry: bool,
    tcpcl: Option<SocketAddr>,
    udp: Option<SocketAddr>,
    beacons: u32,
    /// The address its beacons come from.
    from: IpAddr,
    last_heard: Instant,
    /// Forgotten when not heard from for this long.
    ttl: Duration,
}

/// Channels into the loop from the tasks that do I/O.
pub(crate) struct Inputs {
    pub(crate) tcpcl: mpsc::Receiver<(u64, TcpclEvent)>,
    pub(crate) accepted: mpsc::Receiver<(TcpStream, SocketAddr)>,
    pub(crate) connected: mpsc::Receiver<Dialled>,
    pub(crate) datagrams: mpsc::Receiver<Datagram>,
    pub(crate) beacons: mpsc::Receiver<Heard>,
    pub(crate) requests: mpsc::Receiver<Request>,
    /// Executions that ended.
    pub(crate) finished: mpsc::Receiver<Finished>,
    /// Deadlines of the jobs handed to applications (`crate::providers`).
    pub(crate) provider_timers: mpsc::Receiver<crate::providers::ProviderTimer>,
    /// A link, address or route came up (`crate::netlink`).
    pub(crate) link_changes: mpsc::Receiver<()>,
    /// Fresh readings of battery, disk, load and the rest, for the RPC predicates.
    pub(crate) readings: mpsc::Receiver<Readings>,
}

/// A sync's end: the commits it covered, how it went and how long it took.
type SyncDone = (u64, store::Result<()>, Duration);

/// A dial's result: the address, the dial's number, the connection or why not.
pub(crate) type Dialled = (SocketAddr, u64, std::io::Result<TcpStream>);

/// The loop's state.
pub(crate) struct Daemon {
    /// The node, its RPC engine and its inboxes, with the durability pipeline: what the loop
    /// promises waits there until the store made it durable (see [`host::Host`]).
    pub(crate) host: Host<Token>,
    /// The API's request bodies: their limits and counters, for the metrics.
    pub(crate) api_bodies: crate::api_body::Bodies,
    /// What the UDP listener lets through: told the sessions' addresses, counting refusals.
    pub(crate) udp_gate: crate::udp::Gate,
    pub(crate) clock: Clock,
    pub(crate) started: Instant,
    pub(crate) config: Config,
    pub(crate) session_config: SessionConfig,
    /// The node's certificate and trusted roots (`[tcpcl.tls]`), for sessions that run TLS.
    tls: Option<Arc<TlsContext>>,
    pub(crate) listening: Vec<String>,
    pub(crate) tcpcl_port: Option<u16>,
    pub(crate) udp: Option<Arc<UdpSocket>>,
    pub(crate) announcer: Option<Announcer>,
    pub(crate) tcpcl_events: mpsc::Sender<(u64, TcpclEvent)>,
    pub(crate) connect_results: mpsc::Sender<Dialled>,
    links: BTreeMap<LinkId, Link>,
    flights: BTreeMap<u64, Flight>,
    statics: Vec<StaticPeer>,
    /// When a link last came up (`crate::netlink`): a static peer's session that ends soon
    /// after is redialled at once.
    pub(crate) link_came_up: Option<Instant>,
    /// The next start of one of this node's planned contacts (`contact_plan`): static peers
    /// without a session are dialled then, not when their backoff (up to 10 s) runs out, so a
    /// short contact is not spent waiting.
    next_planned_start: Option<DtnTime>,
    discovered: BTreeMap<Eid, Discovered>,
    /// Addresses a connection attempt is under way to.
    /// Dials in progress: for whom, the dial's number (a result of an earlier dial to the same
    /// address, given up, is told apart and dropped), and when it began.
    connecting: BTreeMap<SocketAddr, (Origin, u64, Instant)>,
    /// The number of the next dial.
    next_dial: u64,
    /// Bumped after deliveries are durable (see [`crate::control::ControlEnds::deliveries`]).
    deliveries: tokio::sync::watch::Sender<u64>,
    /// Bumped after a change to a call this node made is durable.
    call_changes: tokio::sync::watch::Sender<u64>,
    /// Requests waiting for a call to finish or to get more replies (`Request::WaitCall`).
    call_waiters: BTreeMap<wire::rpc::CallId, Vec<CallWaiter>>,
    /// The executions the RPC engine started.
    rpc: RpcShell,
    /// Makes the store's commits durable on a blocking thread; `None` if commits are as durable
    /// as they get (a memory store).
    syncer: Option<store::Syncer>,
    /// Where a finished sync reports (commits it covers, its error); set by `run`.
    sync_done: Option<mpsc::UnboundedSender<SyncDone>>,
    /// Broadcast bundles sent as UDP broadcasts during this pump (id, UDP port).
    broadcast_round: std::collections::BTreeSet<(BundleId, u16)>,
    reports: std::collections::VecDeque<ReportInfo>,
    next_link: u64,
    next_tag: u64,
    beacon_sequence: u64,
    /// dtn7-rs's beacon sequence is 32 bits and wraps, as dtnd's does.
    dtn7_beacon_sequence: u32,
    next_beacon: Instant,
    metrics: Metrics,
}

/// Who waits for a call to change, and in which form the call goes to it.
enum CallWaiter {
    /// A `Request::WaitCall` or `Request::CallNow`: the call as the API shows it, once it has
    /// what `WaitFor` names.
    Info(WaitFor, oneshot::Sender<Result<CallInfo, ApiError>>),
    /// A `Request::CallForOutcome`: the call's outcome, once it ended.
    Outcome(oneshot::Sender<Result<CallOutcome, ApiError>>),
}

impl CallWaiter {
    /// Whether its caller stopped waiting.
    fn gave_up(&self) -> bool {
        match self {
            CallWaiter::Info(_, reply) => reply.is_closed(),
            CallWaiter::Outcome(reply) => reply.is_closed(),
        }
    }
}

/// Sends `answer` to every one of `replies`: the last gets it, the others a copy (usually there
/// is one).
fn answer_all<T: Clone>(mut replies: Vec<oneshot::Sender<T>>, answer: Option<T>) {
    let (Some(last), Some(answer)) = (replies.pop(), answer) else {
        return;
    };
    for reply in replies {
        let _ = reply.send(answer.clone());
    }
    let _ = last.send(answer);
}

/// What the loop hands the host to release once durable (see [`Host::promise`]).
pub(crate) enum Token {
    /// An answer to a send, a call, an acknowledgement (given the store's error if it failed:
    /// then what it answers was not made durable).
    Reply(WhenDurable),
    /// A received bundle whose last XFER_ACK waits for durability (link, the peer's transfer
    /// id). If the commit or its sync fails it stays unconfirmed: the sender keeps it.
    Confirm(LinkId, u64),
    /// Records of executions whose answers the commit holds, removed once it is durable. They
    /// promise nobody anything ([`Host::after_durable`]); a failed sync leaves them for the
    /// next start to clean up.
    Records(Vec<std::path::PathBuf>),
}

/// An answer waiting until the next commit is durable; called with the store's error, if any.
type WhenDurable = Box<dyn FnOnce(Option<&str>) + Send>;

/// An answer sent once what it reports is durable: if the store fails, the request fails.
fn when_durable<T: Send + 'static>(
    reply: oneshot::Sender<Result<T, ApiError>>,
    result: Result<T, ApiError>,
) -> WhenDurable {
    Box::new(move |store_error| {
        let result = match store_error {
            None => result,
            Some(e) => result.and(Err(ApiError::new(
                "internal",
                format!("the store could not make it durable: {e}"),
            ))),
        };
        let _ = reply.send(result);
    })
}

impl Daemon {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: Node,
        clock: Clock,
        config: Config,
        listening: Vec<String>,
        tcpcl_port: Option<u16>,
        udp: Option<Arc<UdpSocket>>,
        tcpcl_events: mpsc::Sender<(u64, TcpclEvent)>,
        connect_results: mpsc::Sender<Dialled>,
        recovered_dropped: u64,
        deliveries: tokio::sync::watch::Sender<u64>,
        call_changes: tokio::sync::watch::Sender<u64>,
        (rpc, engine): (RpcShell, rpc::Rpc),
        tls: Option<Arc<TlsContext>>,
    ) -> Result<Self, store::StoreError> {
        let next_planned_start = node
            .config()
            .contact_graph
            .as_ref()
            .and_then(|g| g.next_start_of(node.id(), clock.now()));
        let now = Instant::now();
        let statics = config
            .peers
            .iter()
            .map(|&addr| StaticPeer {
                addr,
                link: None,
                retry_at: now,
                backoff: FIRST_BACKOFF,
            })
            .collect();
        let session_config = SessionConfig {
            node_id: config.node_id.to_string(),
            keepalive_interval_s: config.keepalive.as_secs().min(u64::from(u16::MAX)) as u16,
            ignore_peer_transfer_mru: config.ignore_peer_transfer_mru,
            transfer_mru: config.session_limits.transfer_mru,
            receive_budget: Some(ReceiveBudget::new(config.session_limits.receive_memory)),
            idle_timeout_ms: config.session_limits.idle_timeout.as_millis() as u64,
            // A bundle's last XFER_ACK goes out after the sync that made it durable here.
            confirm_received: true,
            tls: match &config.tls {
                None => TlsPolicy::Off,
                Some(t) if t.require => TlsPolicy::Require,
                Some(_) => TlsPolicy::Offer,
            },
            ..SessionConfig::default()
        };
        let announcer = config
            .discovery
            .enabled
            .then(|| Announcer::new(config.discovery.clone()));
        let syncer = node.store().syncer();
        let host = Host::new(
            node,
            Some(engine),
            HostConfig {
                pipeline: PipelineConfig {
                    commit_delay: COMMIT_DELAY,
                    sync_delay: SYNC_DELAY,
                    has_syncer: syncer.is_some(),
                },
                echo_service: Some(ECHO_SERVICE.to_string()),
                discard_service: Some(DISCARD_SERVICE.to_string()),
                inboxes: true,
                null_procedure: Some(crate::rpc_shell::NULL_PROCEDURE.to_string()),
            },
        )?;
        Ok(Self {
            host,
            // Both replaced by the listeners' own (`start`).
            api_bodies: crate::api_body::Bodies::new(
                config.api_max_payload,
                config.api_max_uploads,
            ),
            udp_gate: crate::udp::Gate::new(config.udp_max_bundle, config.udp_max_rate),
            clock,
            started: now,
            session_config,
            tls,
            listening,
            tcpcl_port,
            udp,
            announcer,
            tcpcl_events,
            connect_results,
            links: BTreeMap::new(),
            flights: BTreeMap::new(),
            statics,
            next_planned_start,
            link_came_up: None,
            discovered: BTreeMap::new(),
            connecting: BTreeMap::new(),
            next_dial: 0,
            deliveries,
            call_changes,
            call_waiters: BTreeMap::new(),
            rpc,
            syncer,
            sync_done: None,
            broadcast_round: Default::default(),
            reports: Default::default(),
            next_link: 1,
            next_tag: 1,
            beacon_sequence: 0,
            dtn7_beacon_sequence: 0,
            next_beacon: now,
            metrics: {
                let mut m = Metrics::new();
                m.counters.recovered_dropped = recovered_dropped;
                m
            },
            config,
        })
    }

    /// Runs until `shutdown` fires, then closes sessions and flushes the store.
    pub(crate) async fn run(mut self, mut inputs: Inputs, mut shutdown: oneshot::Receiver<()>) {
        let (sync_done, mut synced) = mpsc::unbounded_channel();
        self.sync_done = Some(sync_done);
        self.pump();
        // The first pump handed every execution the last run cut off to the shell.
        self.rpc.forget_stale_records();
        loop {
            let deadline = self.next_deadline();
            tokio::select! {
                _ = &mut shutdown => {
                    self.stop_executions(&mut inputs, &mut synced).await;
                    break;
                }
                Some((commits, result, took)) = synced.recv() => self.on_synced(commits, result, took),
                Some((link, event)) = inputs.tcpcl.recv() => self.on_tcpcl(LinkId(link), event),
                Some((stream, remote)) = inputs.accepted.recv() => {
                    self.open_session(stream, remote, Role::Passive, Origin::Accepted);
                }
                Some((addr, dial, result)) = inputs.connected.recv() => {
                    self.on_connected(addr, dial, result);
                }
                Some(datagram) = inputs.datagrams.recv() => self.on_datagram(datagram),
                Some(heard) = inputs.beacons.recv() => self.on_beacon(heard),
                Some(request) = inputs.requests.recv() => self.on_request(request),
                Some((job, outcome)) = inputs.finished.recv() => self.on_finished(job, outcome),
                Some(timer) = inputs.provider_timers.recv() => self.on_provider_timer(timer),
                Some(()) = inputs.link_changes.recv() => self.on_link_came_up(),
                Some(readings) = inputs.readings.recv() => self.on_readings(&readings),
                _ = tokio::time::sleep_until(deadline.into()) => self.on_timer(),
            }
            // Take what else is ready, so that one commit covers a burst of inputs (up to
            // BATCH_INPUTS). Bounded, so timers and the pump are never starved.
            //
            // Every TRAFFIC_INPUTS inputs or TRAFFIC_EVENTS node events, and before the commit,
            // the traffic they made leaves and the loop yields. Whatever it woke (a session's
            // writer, given the bundles; a waiting caller) is queued on this worker behind this
            // task, the last one in tokio's LIFO slot, where the other worker cannot take it:
            // without the yield the bundles waited for the rest of the batch and for the records
            // to be written and committed while the other core idled. Nothing else touches the
            // daemon's state while it yields.
            let mut taken = 0;
            loop {
                let mut more = true;
                for _ in 0..TRAFFIC_INPUTS {
                    more = self.take_ready(&mut inputs);
                    if !more {
                        break;
                    }
                    taken += 1;
                }
                while self.pump_traffic() {
                    tokio::task::yield_now().await;
                }
                tokio::task::yield_now().await;
                if !more || taken >= BATCH_INPUTS {
                    break;
                }
            }
            self.pump();
        }
        self.shut_down(&mut inputs).await;
    }

    /// Handles one input that is ready now, if any.
    fn take_ready(&mut self, inputs: &mut Inputs) -> bool {
        if let Ok((link, event)) = inputs.tcpcl.try_recv() {
            self.on_tcpcl(LinkId(link), event);
        } else if let Ok(request) = inputs.requests.try_recv() {
            self.on_request(request);
        } else if let Ok(datagram) = inputs.datagrams.try_recv() {
            self.on_datagram(datagram);
        } else if let Ok((stream, remote)) = inputs.accepted.try_recv() {
            self.open_session(stream, remote, Role::Passive, Origin::Accepted);
        } else if let Ok((addr, dial, result)) = inputs.connected.try_recv() {
            self.on_connected(addr, dial, result);
        } else if let Ok(heard) = inputs.beacons.try_recv() {
            self.on_beacon(heard);
        } else if let Ok((job, outcome)) = inputs.finished.try_recv() {
            self.on_finished(job, outcome);
        } else if let Ok(timer) = inputs.provider_timers.try_recv() {
            self.on_provider_timer(timer);
        } else {
            return false;
        }
        true
    }

    /// A graceful stop, before the sessions close: running executions are killed and their
    /// callers answered `server_stopped` at once (not left waiting for their deadlines). The
    /// answers' real-time messages leave now; the loop waits (at most 2 s) for the sync that
    /// releases the store-carry-forward ones, and then [`STOP_GRACE`] more, handling session
    /// events, because a session that is closed drops the bundles it has not started sending.
    async fn stop_executions(
        &mut self,
        inputs: &mut Inputs,
        synced: &mut mpsc::UnboundedReceiver<SyncDone>,
    ) {
        let now = self.now();
        let (rpc, node) = self.engine_mut();
        let stopped = rpc.stop_executions(now, node);
        if stopped == 0 {
            return;
        }
        tracing::info!("stopping: {stopped} running executions stopped and answered");
        self.pump();
        let until = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut grace = None;
        loop {
            let end = match grace {
                Some(end) => end,
                None if !self.host.has_waiting() => {
                    let end = (tokio::time::Instant::now() + STOP_GRACE).min(until);
                    grace = Some(end);
                    end
                }
                None => until,
            };
            tokio::select! {
                Some((commits, result, took)) = synced.recv() => self.on_synced(commits, result, took),
                Some((link, event)) = inputs.tcpcl.recv() => self.on_tcpcl(LinkId(link), event),
                _ = tokio::time::sleep_until(end) => {
                    if grace.is_some() || end == until {
                        break;
                    }
                }
            }
            self.pump();
        }
    }

    async fn shut_down(&mut self, inputs: &mut Inputs) {
        tracing::info!("shutting down: closing {} sessions", self.links.len());
        for link in self.links.values() {
            link.handle.close();
        }
        // Give sessions a moment to end in order, so peers learn what they hold.
        let until = tokio::time::Instant::now() + Duration::from_secs(2);
        while !self.links.is_empty() {
            tokio::select! {
                Some((link, event)) = inputs.tcpcl.recv() => self.on_tcpcl(LinkId(link), event),
                _ = tokio::time::sleep_until(until) => break,
            }
            self.pump();
        }
        // The flush syncs every commit: what they promised is kept (a sync still running on
        // its thread syncs the same log again, harmlessly).
        let now = self.now();
        if let Err(e) = self.host.flush(now, |store| store.flush()) {
            tracing::error!("final store flush failed: {e}");
        }
        self.handle_outputs();
    }

    fn now(&self) -> DtnTime {
        self.clock.now()
    }

    /// The RPC engine (the daemon's host always has one).
    fn engine(&self) -> &rpc::Rpc {
        self.host
            .rpc()
            .expect("the daemon's host has an RPC engine")
    }

    /// The RPC engine and the node it works on.
    fn engine_mut(&mut self) -> (&mut rpc::Rpc, &mut Node) {
        self.host
            .rpc_mut()
            .expect("the daemon's host has an RPC engine")
    }

    fn next_deadline(&self) -> Instant {
        let mut next = Instant::now() + Duration::from_secs(60);
        if let Some(t) = self.host.poll_timeout() {
            next = next.min(self.clock.instant(t));
        }
        let now = Instant::now();
        let fast = self.in_fast_redial(now);
        for s in &self.statics {
            if s.link.is_some() {
                continue;
            }
            match self.connecting.get(&s.addr) {
                None => next = next.min(s.retry_at),
                Some(&(.., began)) if fast => next = next.min(began + FAST_REDIAL),
                Some(_) => {}
            }
        }
        if self.announcer.is_some() {
            next = next.min(self.next_beacon);
        }
        next
    }

    fn on_timer(&mut self) {
        let now = self.now();
        self.host.handle_timeout(now);
        if let Some(b) = &self.session_config.receive_budget
            && b.refused() > 0
        {
            let limit = b.limit();
            self.metrics.counters.refusals.log_once(
                "tcpcl_transfers_refused_memory",
                format_args!(
                    "refused an incoming transfer: unfinished transfers hold the whole \
                     tcpcl.receive_memory ({limit} bytes)"
                ),
            );
        }
        let stats = self.host.node().stats();
        if stats.purge_set_full > 0 {
            let max = self.host.node().config().max_purge_entries;
            self.metrics.counters.refusals.log_once(
                "purge_set_full",
                format_args!(
                    "the purge set holds {max} entries: keys of delivered bundles that \
                     neighbours' summaries name are not kept until entries expire (this node's \
                     own deliveries still are)"
                ),
            );
        }
        if stats.mtu_too_small > 0 {
            let min = self.host.node().config().min_piece;
            self.metrics.counters.refusals.log_once(
                "mtu_too_small",
                format_args!(
                    "a TCPCL peer's transfer MRU leaves room for pieces of less than {min} bytes: \
                     it is sent only bundles that fit it whole (ferry_mtu_too_small_total)"
                ),
            );
        }
        if stats.carry_refused > 0 {
            let max = self.host.node().config().max_carried_bundles;
            self.metrics.counters.refusals.log_once(
                "carry_refused",
                format_args!(
                    "{max} bundles are held: bundles carried for other nodes are refused until \
                     some leave (this node's own, and those for it, are still kept)"
                ),
            );
        }
        if stats.bib_failed > 0 {
            self.metrics.counters.refusals.log_once(
                "bpsec_bib_failed",
                format_args!(
                    "a bundle was dropped because a BPSec integrity block did not verify with the \
                     [[bpsec.verify]] key for its source (altered on the way, or another key), or a \
                     security block was malformed (ferry_bpsec_bib_failed_total)"
                ),
            );
        }
        if stats.bcb_failed > 0 {
            self.metrics.counters.refusals.log_once(
                "bpsec_bcb_failed",
                format_args!(
                    "a bundle for this node was dropped because its BPSec confidentiality block \
                     could not be decrypted: no [[bpsec.decrypt]] rule for its source, another \
                     key, or altered (ferry_bpsec_bcb_failed_total)"
                ),
            );
        }
        if stats.security_missing > 0 {
            self.metrics.counters.refusals.log_once(
                "bpsec_missing",
                format_args!(
                    "a bundle was dropped because its source must sign or encrypt \
                     ([[bpsec.verify]] or [[bpsec.decrypt]] required = true) and did not \
                     (ferry_bpsec_missing_total)"
                ),
            );
        }
        if stats.primary_crc_added > 0 {
            self.metrics.counters.refusals.log_once(
                "primary_crc_added",
                format_args!(
                    "a peer sent a bundle whose primary block has neither a CRC nor a BIB (RFC \
                     9171 §4.3.1 forbids it; dtn7-rs does it): such bundles get a CRC-32C as \
                     they are accepted"
                ),
            );
        }
        if stats.summary_purge_keys_ignored > 0 {
            self.metrics.counters.refusals.log_once(
                "summary_purge_keys_ignored",
                format_args!(
                    "a neighbour's summary named more than {} delivered bundles; the rest were \
                     ignored",
                    node::MAX_SUMMARY_PURGE_KEYS
                ),
            );
        }
        let instant = Instant::now();
        if self.next_planned_start.is_some_and(|t| t <= now) {
            for s in &mut self.statics {
                s.retry_at = instant;
                s.backoff = FIRST_BACKOFF;
            }
            self.next_planned_start = self.planned_start_after(now);
        }
        if self.in_fast_redial(instant) {
            self.renew_slow_dials(instant);
        }
        for i in 0..self.statics.len() {
            let s = &self.statics[i];
            if s.link.is_none() && s.retry_at <= instant && !self.connecting.contains_key(&s.addr) {
                let addr = s.addr;
                self.connect(addr, Origin::Static(i));
            }
        }
        if self.announcer.is_some() && self.next_beacon <= instant {
            self.announce();
            let refused = self
                .announcer
                .as_mut()
                .is_some_and(|a| a.take_would_block());
            let period = if !self.in_fast_redial(instant) {
                self.config.discovery.period
            } else if refused {
                LINK_NOT_READY_RETRY
            } else {
                self.config.discovery.period.min(LINK_UP_BEACON_INTERVAL)
            };
            self.next_beacon = instant + period;
            self.forget_silent_nodes(instant);
        }
    }

    /// The next start of one of this node's planned contacts after `now`.
    fn planned_start_after(&self, now: DtnTime) -> Option<DtnTime> {
        let node = self.host.node();
        node.config()
            .contact_graph
            .as_ref()
            .and_then(|g| g.next_start_of(node.id(), now))
    }

    fn announce(&mut self) {
        self.beacon_sequence += 1;
        let mut convergence_layers = Vec::new();
        if let Some(port) = self.tcpcl_port {
            convergence_layers.push(wire::ClaEndpoint {
                kind: ClaKind::TcpclV4,
                port,
                address: None,
            });
        }
        if let Some(port) = self
            .udp
            .as_ref()
            .and_then(|u| u.local_addr().ok())
            .map(|a| a.port())
        {
            convergence_layers.push(wire::ClaEndpoint {
                kind: ClaKind::Udp,
                port,
                address: None,
            });
        }
        let beacon = Beacon {
            node: self.config.node_id.clone(),
            sequence: self.beacon_sequence,
            period_ms: self.config.discovery.period.as_millis() as u64,
            capabilities: wire::Capabilities(
                wire::Capabilities::DTN_RELAY | wire::Capabilities::MESH_ROUTING,
            ),
            convergence_layers,
        };
        let formats = self.config.discovery.formats;
        let dtn7 = formats.dtn7.then(|| self.dtn7_beacon());
        if let Some(a) = &mut self.announcer {
            if formats.ferry {
                self.metrics.counters.beacons_sent += a.announce(&beacon) as u64;
            }
            if let Some(dtn7) = dtn7 {
                self.metrics.counters.dtn7_beacons_sent += a.announce_dtn7(&dtn7) as u64;
            }
        }
    }

    /// This node as dtn7-rs announces a node: TCPCLv4 as `"tcp"` at its port (what dtnd dials
    /// a discovered peer on), the period in whole seconds, at least 1 (dtnd forgets a peer
    /// after twice the period, counted in whole seconds: 0 would make it forget us at once).
    fn dtn7_beacon(&mut self) -> wire::ipnd::IpndBeacon {
        let sequence = self.dtn7_beacon_sequence;
        self.dtn7_beacon_sequence = sequence.wrapping_add(1);
        let period = self.config.discovery.period;
        let mut services = BTreeMap::new();
        if self.config.discovery.formats.ferry {
            services.insert(wire::ipnd::SERVICE_CUSTOM_STRING, DTN7_FERRY_MARK.to_vec());
        }
        wire::ipnd::IpndBeacon {
            node: self.config.node_id.clone(),
            sequence,
            clas: self
                .tcpcl_port
                .map(|port| wire::ipnd::IpndCla {
                    name: wire::ipnd::CLA_TCP.into(),
                    port: Some(port),
                })
                .into_iter()
                .collect(),
            services,
            period_secs: Some(period.as_secs() + u64::from(period.subsec_nanos() > 0)),
        }
    }

    // ----- sessions -----

    fn connect(&mut self, addr: SocketAddr, origin: Origin) {
        let dial = self.next_dial;
        self.next_dial += 1;
        self.connecting.insert(addr, (origin, dial, Instant::now()));
        let results = self.connect_results.clone();
        tokio::spawn(async move {
            let result = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
            {
                Ok(r) => r,
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connection timed out",
                )),
            };
            let _ = results.send((addr, dial, result)).await;
        });
    }

    fn on_connected(&mut self, addr: SocketAddr, dial: u64, result: std::io::Result<TcpStream>) {
        // A dial given up (a link came up while its SYN waited for a retry; a newer one was
        // made): its connection, if any, is dropped.
        let Some(&(origin, current, _)) = self.connecting.get(&addr) else {
            return;
        };
        if current != dial {
            return;
        }
        self.connecting.remove(&addr);
        match result {
            Ok(stream) => self.open_session(stream, addr, Role::Active, origin),
            Err(e) => {
                tracing::debug!("connecting to {addr}: {e}");
                self.retry_later(origin, false);
            }
        }
    }

    /// A static peer's dial failed or its session ended (`session_ended`): it is dialled again
    /// after its backoff, which doubles; or at once if its session ended just after a link
    /// came up (replaced as stalled, or failing on the outage only now: the link is there). A
    /// failed dial is never retried at once, so a link that is up without a route cannot make
    /// the loop spin.
    fn retry_later(&mut self, origin: Origin, session_ended: bool) {
        let now = Instant::now();
        let link_just_came_up = session_ended
            && self
                .link_came_up
                .is_some_and(|t| now.saturating_duration_since(t) < STALL_QUIET);
        if let Origin::Static(i) = origin
            && let Some(s) = self.statics.get_mut(i)
        {
            s.link = None;
            if link_just_came_up {
                s.retry_at = now;
                s.backoff = FIRST_BACKOFF;
            } else {
                s.retry_at = now + s.backoff;
                s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// Whether a session with `ip` may open (the caller counts and logs a refusal). Static
    /// peers are the operator's choice and always may; the limits keep strangers, who connect
    /// to us or are discovered, from taking every session and file descriptor.
    fn session_allowed(&mut self, ip: IpAddr, origin: Origin) -> bool {
        if matches!(origin, Origin::Static(_)) {
            return true;
        }
        let limits = &self.config.session_limits;
        let r = &mut self.metrics.counters.refusals;
        if self.links.len() >= limits.max_sessions {
            r.sessions_total += 1;
            r.log_once(
                "tcpcl_sessions_refused_limit",
                format_args!(
                    "refusing a session with {ip}: {} sessions are open (tcpcl.max_sessions)",
                    self.links.len()
                ),
            );
            return false;
        }
        let with_ip = self.links.values().filter(|l| l.remote.ip() == ip).count();
        if with_ip >= limits.max_sessions_per_address {
            r.sessions_per_address += 1;
            r.log_once(
                "tcpcl_sessions_refused_address_limit",
                format_args!(
                    "refusing a session with {ip}: {with_ip} sessions with that address are open \
                     (tcpcl.max_sessions_per_address)"
                ),
            );
            return false;
        }
        true
    }

    fn open_session(&mut self, stream: TcpStream, remote: SocketAddr, role: Role, origin: Origin) {
        if !self.session_allowed(remote.ip(), origin) {
            // Dropped unread: the peer sees the connection close before any contact header.
            drop(stream);
            return;
        }
        let _ = stream.set_nodelay(true);
        let link = LinkId(self.next_link);
        self.next_link += 1;
        let mut config = self.session_config.clone();
        // `[[peers]] tls` overrides the node's policy for the sessions we open to that peer.
        if let Origin::Static(_) = origin
            && let Some(policy) = self.config.peer_tls.get(&remote)
        {
            config.tls = match policy {
                crate::config::PeerTls::Required => TlsPolicy::Require,
                crate::config::PeerTls::Optional => TlsPolicy::Offer,
            };
        }
        let handle = cla::tcp::spawn_session_with_tls(
            stream,
            role,
            config,
            self.tls.clone(),
            link.0,
            self.tcpcl_events.clone(),
        );
        if let Origin::Static(i) = origin
            && let Some(s) = self.statics.get_mut(i)
        {
            s.link = Some(link);
        }
        self.metrics.counters.sessions_opened += 1;
        self.links.insert(
            link,
            Link {
                handle,
                remote,
                origin,
                peer: None,
                up_since: None,
                udp: None,
                announced: false,
            },
        );
    }

    fn on_tcpcl(&mut self, link: LinkId, event: TcpclEvent) {
        let now = self.now();
        match event {
            TcpclEvent::Up { peer, remote, .. } => {
                if peer.tls {
                    self.metrics.counters.tls_sessions += 1;
                }
                self.on_session_up(link, &peer, remote)
            }
            TcpclEvent::Incoming {
                transfer_id,
                first_data,
                ..
            } => {
                // A bundle the node holds or has delivered is refused at its first segment
                // instead of crossing the link again.
                if let Ok(Some(primary)) = wire::peek_primary(first_data) {
                    let id = BundleId {
                        source: primary.source,
                        creation: primary.creation,
                        fragment: None,
                    };
                    if !self.host.node().wants(&id)
                        && let Some(l) = self.links.get(&link)
                    {
                        self.metrics.counters.refused_duplicates += 1;
                        l.handle.refuse(transfer_id);
                    }
                }
            }
            TcpclEvent::Received {
                transfer_id,
                bundle,
            } => {
                let mut real_time = false;
                if self.links.get(&link).is_some_and(|l| l.announced) {
                    match wire::Bundle::decode(bundle.clone()) {
                        Ok(b) => {
                            real_time = node::class_of(&b).is_real_time();
                            self.host.node_mut().handle_bundle(now, link, b);
                        }
                        // The node counts and reports it.
                        Err(_) => self.host.node_mut().handle_bundle_bytes(now, link, bundle),
                    }
                }
                if real_time {
                    // Real-time bundles are never stored, and their senders keep no copy on
                    // our word (a stream resends by its own acknowledgements, a datagram not
                    // at all): nothing waits for the disk.
                    if let Some(l) = self.links.get(&link) {
                        l.handle.confirm(transfer_id);
                    }
                } else {
                    // Whatever the node made of it (kept, delivered, dropped), the sender may
                    // let it go once that decision is durable.
                    self.host.promise(Token::Confirm(link, transfer_id));
                }
            }
            TcpclEvent::Progress { .. } => {}
            TcpclEvent::Written { tag } => {
                if let Some(f) = self.flights.get(&tag) {
                    let (link, id) = (f.link, f.id.clone());
                    self.host.node_mut().handle_transfer_written(now, link, &id);
                }
            }
            TcpclEvent::Sent { tag } => self.finish(tag, TransferResult::Complete),
            TcpclEvent::Refused { tag } => self.finish(tag, TransferResult::Refused),
            TcpclEvent::Down {
                reason,
                unfinished,
                partial,
                tls_failure,
            } => {
                match tls_failure {
                    Some(TlsFailure::Handshake) => {
                        self.metrics.counters.tls_handshake_failures += 1
                    }
                    Some(TlsFailure::NodeIdNotInCertificate) => {
                        self.metrics.counters.tls_node_id_mismatches += 1
                    }
                    Some(TlsFailure::Required) => self.metrics.counters.tls_required_refusals += 1,
                    None => {}
                }
                for u in unfinished {
                    let Some(f) = self.flights.get(&u.tag) else {
                        continue;
                    };
                    let held = u.acknowledged.saturating_sub(f.head).min(f.payload);
                    let result = if held > 0 && held < f.payload {
                        TransferResult::Cut {
                            payload_bytes: held,
                        }
                    } else if held == f.payload && f.payload > 0 {
                        TransferResult::Complete
                    } else {
                        TransferResult::Failed
                    };
                    self.finish(u.tag, result);
                }
                let stale: Vec<u64> = self
                    .flights
                    .iter()
                    .filter(|(_, f)| f.link == link)
                    .map(|(&t, _)| t)
                    .collect();
                for tag in stale {
                    self.finish(tag, TransferResult::Failed);
                }
                let announced = self.links.get(&link).is_some_and(|l| l.announced);
                if let Some(prefix) = partial
                    && announced
                {
                    // Reactive fragmentation: keep what arrived of a cut transfer.
                    match wire::decode_cut_transfer(prefix) {
                        Ok(Some(fragment)) => {
                            self.metrics.counters.reactive_fragments_received += 1;
                            self.host.node_mut().handle_bundle(now, link, fragment);
                        }
                        Ok(None) => {}
                        Err(e) => tracing::debug!("cut transfer on link {}: {e}", link.0),
                    }
                }
                self.on_session_down(link, &reason);
            }
        }
    }

    fn on_session_up(&mut self, link: LinkId, info: &cla::tcpcl::PeerInfo, remote: SocketAddr) {
        let Some(peer) = parse_peer(&info.node_id) else {
            tracing::warn!(
                "{remote} sent an invalid node id {:?}; closing",
                info.node_id
            );
            if let Some(l) = self.links.get(&link) {
                l.handle.close();
            }
            return;
        };
        if peer == self.config.node_id {
            tracing::debug!("{remote} is this node; closing");
            if let Some(l) = self.links.get(&link) {
                l.handle.close();
            }
            return;
        }
        // Two sessions with one peer (both sides connected at once): keep the one the node with
        // the smaller id opened, which both ends agree on without talking.
        let me_first = self.config.node_id < peer;
        let other = self
            .links
            .iter()
            .find(|(id, l)| **id != link && l.announced && l.peer.as_ref() == Some(&peer))
            .map(|(id, l)| (*id, l.origin));
        let outbound = |origin: Origin| !matches!(origin, Origin::Accepted);
        if let Some((other, other_origin)) = other {
            let this_origin = self.links[&link].origin;
            let same_kind = outbound(this_origin) == outbound(other_origin);
            if same_kind || self.host.node().speaks_ferry(&peer) {
                // A peer that reconnected while its old session lingers opens the same kind of
                // session again: the newer one wins. Two Ferry nodes that dialled each other
                // at once both keep the one the smaller id opened.
                let keep_this = same_kind || outbound(this_origin) == me_first;
                let drop = if keep_this { other } else { link };
                tracing::debug!("two sessions with {peer}: closing link {}", drop.0);
                self.links[&drop].handle.close();
                if !keep_this {
                    return;
                }
            } else {
                // A peer not known to speak Ferry's control protocol (dtn7-rs dials when it has
                // a bundle to send, and takes none back on that session) may not apply the same
                // rule: closing either session could leave no way in one direction. Both stay;
                // the node sends on the first and takes what arrives on either.
                tracing::debug!(
                    "two sessions with {peer}: both kept (links {} and {})",
                    other.0,
                    link.0
                );
            }
        }
        // The UDP endpoint its beacons announced, if they come from the session's address.
        let udp = self
            .discovered
            .get(&peer)
            .filter(|d| d.from == remote.ip())
            .and_then(|d| d.udp);
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        tracing::info!("session up with {peer} at {remote}");
        l.peer = Some(peer.clone());
        l.up_since = Some(Instant::now());
        l.udp = udp;
        l.announced = true;
        if let Origin::Static(i) = l.origin
            && let Some(s) = self.statics.get_mut(i)
        {
            s.backoff = FIRST_BACKOFF;
        }
        self.share_session_addresses();
        let now = self.now();
        self.host.node_mut().handle_link(
            now,
            LinkChange::Up {
                link,
                peer: Some(peer),
                // RFC 9174 §4.7: the peer's transfer MRU is this link's MTU; the node fragments
                // larger bundles to it.
                mtu: (!self.config.ignore_peer_transfer_mru).then_some(info.transfer_mru),
                bandwidth_bps: 0,
                contact: None,
            },
        );
    }

    fn on_session_down(&mut self, link: LinkId, reason: &str) {
        let Some(l) = self.links.remove(&link) else {
            return;
        };
        self.metrics.counters.sessions_closed += 1;
        match &l.peer {
            Some(peer) => tracing::info!("session with {peer} at {} ended: {reason}", l.remote),
            None => tracing::debug!("session with {} ended: {reason}", l.remote),
        }
        if l.announced {
            let now = self.now();
            self.host
                .node_mut()
                .handle_link(now, LinkChange::Down { link });
            self.share_session_addresses();
        }
        if let Some(peer) = &l.peer
            && let Some(d) = self.discovered.get_mut(peer)
        {
            d.beacons = 0;
        }
        self.retry_later(l.origin, true);
    }

    fn finish(&mut self, tag: u64, result: TransferResult) {
        if let Some(f) = self.flights.remove(&tag) {
            let now = self.now();
            self.host
                .node_mut()
                .handle_transfer(now, f.link, &f.id, result);
        }
    }

    // ----- UDP and discovery -----

    fn on_datagram(&mut self, datagram: Datagram) {
        self.metrics.counters.udp_received += 1;
        // Decoded here rather than by the node, so that datagrams that are not bundles (what
        // a stranger's flood mostly is) are counted as the UDP layer's own refusals.
        let bundle = match wire::Bundle::decode(datagram.bytes) {
            Ok(bundle) => bundle,
            Err(e) => {
                self.metrics.counters.udp_malformed += 1;
                self.metrics.counters.refusals.log_once(
                    "udp_malformed",
                    format_args!("a UDP datagram from {} is not a bundle: {e}", datagram.from),
                );
                return;
            }
        };
        let now = self.now();
        // Attribute it to the session with the same host, so the node knows its neighbour.
        let ip: IpAddr = datagram.from.ip();
        let link = self
            .links
            .iter()
            .find(|(_, l)| {
                l.announced && (l.udp.map(|a| a.ip()) == Some(ip) || l.remote.ip() == ip)
            })
            .map(|(id, _)| *id)
            .unwrap_or(LinkId(0));
        self.host.node_mut().handle_bundle(now, link, bundle);
    }

    /// Tells the UDP listener the addresses of the sessions now: each has a datagram budget of
    /// its own (see [`crate::udp`]).
    fn share_session_addresses(&self) {
        self.udp_gate.set_peers(
            self.links
                .values()
                .filter(|l| l.announced)
                .map(|l| l.remote.ip()),
        );
    }

    fn on_beacon(&mut self, heard: Heard) {
        // Only the address the beacon came from is believed. An address written in a beacon
        // would let anyone make this node dial any host; Ferry's own beacons never carry one,
        // and dtn7-rs's name only ports.
        let ip = heard.from.ip();
        let (peer, ferry, tcpcl, udp, period) = match &heard.beacon {
            HeardBeacon::Ferry(beacon) => {
                let endpoint = |kind: ClaKind| {
                    beacon
                        .convergence_layers
                        .iter()
                        .find(|c| c.kind == kind)
                        .map(|c| SocketAddr::new(ip, c.port))
                };
                (
                    beacon.node.node_id(),
                    true,
                    endpoint(ClaKind::TcpclV4),
                    endpoint(ClaKind::Udp),
                    Duration::from_millis(beacon.period_ms),
                )
            }
            HeardBeacon::Dtn7(beacon) => {
                let marked = beacon
                    .services
                    .get(&wire::ipnd::SERVICE_CUSTOM_STRING)
                    .map(Vec::as_slice)
                    == Some(DTN7_FERRY_MARK);
                if marked && self.config.discovery.formats.ferry {
                    // A Ferry node that sends Ferry's beacons too: those are the ones to go by.
                    return;
                }
                (
                    beacon.node.node_id(),
                    // Marked, to a node that listens only to dtn7-rs's beacons: still a Ferry
                    // node, which takes part in the tie-break of who dials.
                    marked,
                    beacon.tcp_port().map(|port| SocketAddr::new(ip, port)),
                    // dtn7-rs's "udp" layer is not known to be Ferry's: not used.
                    None,
                    beacon
                        .period_secs
                        .map_or(DTN7_UNANNOUNCED_PERIOD, Duration::from_secs),
                )
            }
        };
        if peer == self.config.node_id {
            return;
        }
        match heard.beacon {
            HeardBeacon::Ferry(_) => self.metrics.counters.beacons_heard += 1,
            HeardBeacon::Dtn7(_) => self.metrics.counters.dtn7_beacons_heard += 1,
        }
        let now = Instant::now();
        let period = period.clamp(Duration::from_secs(1), Duration::from_secs(60));
        if !self.discovered.contains_key(&peer) {
            self.make_room_for_discovered(ip);
        }
        let d = self.discovered.entry(peer.clone()).or_insert(Discovered {
            ferry,
            tcpcl: None,
            udp: None,
            beacons: 0,
            from: ip,
            last_heard: now,
            ttl: period * DISCOVERED_PERIODS,
        });
        if d.ferry && !ferry {
            // A node heard in Ferry's format is gone by those beacons alone; unmarked dtn7-rs
            // beacons from it (reconfigured to send only those) add nothing until it is forgotten.
            return;
        }
        d.ferry = ferry;
        d.tcpcl = tcpcl;
        d.udp = udp;
        d.from = ip;
        d.last_heard = now;
        d.ttl = period * DISCOVERED_PERIODS;
        d.beacons = d.beacons.saturating_add(1);
        let beacons = d.beacons;
        let has_link = self.links.values().any(|l| l.peer.as_ref() == Some(&peer));
        for l in self.links.values_mut() {
            if l.peer.as_ref() != Some(&peer) {
                continue;
            }
            if l.remote.ip() == ip {
                l.udp = udp;
            } else {
                // A beacon naming a node we have a session with, from another address: a
                // forger's (or the node moved, and its session will end). Its datagrams stay
                // with the session's address.
                let r = &mut self.metrics.counters.refusals;
                r.beacon_redirects_ignored += 1;
                r.log_once(
                    "beacon_redirects_ignored",
                    format_args!(
                        "ignoring a beacon for {peer} from {ip}: the session with it is at {}",
                        l.remote
                    ),
                );
            }
        }
        let Some(addr) = tcpcl else {
            return;
        };
        let pending = self.connecting.contains_key(&addr)
            || self
                .links
                .values()
                .any(|l| l.remote == addr && !l.announced);
        // Two Ferry nodes agree without talking which one dials: the one with the smaller id
        // waits a few beacons for the other. dtnd dials only when it has a bundle to forward,
        // so a node known only by dtn7-rs's beacons is dialled at once.
        let our_turn = !ferry || self.config.node_id < peer || beacons >= BEACONS_BEFORE_CONNECTING;
        if has_link || pending || !our_turn {
            return;
        }
        let dials = self
            .connecting
            .values()
            .filter(|(o, ..)| *o == Origin::Discovered)
            .count();
        if dials >= MAX_DISCOVERY_DIALS {
            // Tried again at the node's next beacon.
            let r = &mut self.metrics.counters.refusals;
            r.discovery_dials_deferred += 1;
            r.log_once(
                "discovery_dials_deferred",
                format_args!(
                    "not dialling {peer} at {addr} yet: {dials} discovered nodes are being dialled"
                ),
            );
            return;
        }
        if !self.session_allowed(ip, Origin::Discovered) {
            return;
        }
        tracing::info!("discovered {peer} at {addr}; connecting");
        self.connect(addr, Origin::Discovered);
    }

    /// Before a new node joins the discovered table: forgets those not heard from in time, then,
    /// if `ip` has its share of ids or the table is full, the least recently heard (of `ip`'s
    /// own, or of all) that has no session.
    fn make_room_for_discovered(&mut self, ip: IpAddr) {
        self.forget_silent_nodes(Instant::now());
        let from_ip = self.discovered.values().filter(|d| d.from == ip).count();
        if from_ip < MAX_DISCOVERED_PER_ADDRESS && self.discovered.len() < MAX_DISCOVERED {
            return;
        }
        let only_ip = from_ip >= MAX_DISCOVERED_PER_ADDRESS;
        let links = &self.links;
        let victim = self
            .discovered
            .iter()
            .filter(|(id, d)| {
                (!only_ip || d.from == ip) && !links.values().any(|l| l.peer.as_ref() == Some(*id))
            })
            .min_by_key(|(_, d)| d.last_heard)
            .map(|(id, _)| id.clone());
        if let Some(id) = victim {
            self.discovered.remove(&id);
            let r = &mut self.metrics.counters.refusals;
            r.discovered_forgotten += 1;
            r.log_once(
                "discovered_forgotten",
                format_args!(
                    "forgetting discovered node {id} to make room for another heard from {ip}"
                ),
            );
        }
    }

    /// Forgets discovered nodes whose beacons stopped (they are found again when heard).
    fn forget_silent_nodes(&mut self, now: Instant) {
        self.discovered
            .retain(|_, d| now.saturating_duration_since(d.last_heard) < d.ttl);
    }

    // ----- the pump -----

    /// Node events, then a store commit, until the node is quiet. Real-time transmits leave at
    /// once; what the commit promised waits for the sync that makes it durable
    /// ([`Daemon::on_synced`]).
    fn pump(&mut self) {
        self.pump_with(true, usize::MAX);
    }

    /// [`Daemon::pump`] without the commit, for at most [`TRAFFIC_EVENTS`] node events: real-time
    /// transmits leave, store-carry-forward ones wait in the host for the next
    /// [`Daemon::pump`]. Whether node events are left for another call.
    fn pump_traffic(&mut self) -> bool {
        self.pump_with(false, TRAFFIC_EVENTS)
    }

    /// Pumps until the node is quiet or `budget` node events were handled; whether the budget
    /// ran out (events may be left). Real-time traffic (control, datagram and stream bundles)
    /// promises nothing durable, so it leaves at once: an RPC reply is on the wire while its
    /// record is being written.
    fn pump_with(&mut self, commit: bool, budget: usize) -> bool {
        let mut events = 0;
        loop {
            let now = self.now();
            let handled = self.host.handle_events(now, budget - events);
            events += handled.events;
            let mut busy = handled.busy;
            busy |= self.handle_outputs();
            if let Some(engine) = self.host.rpc() {
                self.rpc.log_bounds(engine);
            }
            self.answer_call_waiters();
            if commit {
                self.commit();
                busy |= self.handle_outputs();
            }
            if !busy || events >= budget {
                break;
            }
        }
        self.broadcast_round.clear();
        events >= budget
    }

    /// Commits the store's batch unless it may wait for company, and starts a sync when one is
    /// due. What the commit promised (what the loop gave the host since the last commit) is
    /// kept until a sync makes it durable; a failed commit was rolled back, and its promises
    /// fail at once.
    fn commit(&mut self) {
        let now = self.now();
        let records = self.rpc.take_records_done();
        if !records.is_empty() {
            self.host.after_durable(Token::Records(records));
        }
        // Call watchers read the calls as the daemon holds them, as every other reader of calls
        // does (long polls and `call_for_outcome` are answered before the commit): waking them
        // promises nothing, so it needs no sync.
        let committed = self.host.commit(now, commit_off_the_workers);
        if let host::Commit::Failed(e) = &committed {
            self.metrics.counters.store_errors += 1;
            tracing::error!("store commit failed: {e}");
        }
        if !matches!(committed, host::Commit::Deferred) && self.rpc.calls_changed {
            self.rpc.calls_changed = false;
            self.call_changes.send_modify(|n| *n += 1);
        }
        self.sync_when_due();
    }

    /// Starts a sync of every commit so far on a blocking thread when the host says one is
    /// due (at once if a commit not yet durable promised something; else after [`SYNC_DELAY`]:
    /// under a steady load most commits promise nothing, and a sync each would cost more than
    /// the commits themselves).
    fn sync_when_due(&mut self) {
        let now = self.now();
        let (Some(syncer), Some(done)) = (self.syncer.clone(), self.sync_done.clone()) else {
            return;
        };
        let Some(commits) = self.host.poll_sync(now) else {
            return;
        };
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let result = syncer.sync();
            let _ = done.send((commits, result, started.elapsed()));
        });
    }

    /// A sync of the first `commits` commits ended: their promises are kept, or fail.
    fn on_synced(&mut self, commits: u64, result: store::Result<()>, took: Duration) {
        self.metrics.counters.store_syncs += 1;
        self.metrics.store_synced(took);
        if let Err(e) = &result {
            self.metrics.counters.store_errors += 1;
            tracing::error!("store sync failed: {e}");
        }
        let now = self.now();
        self.host.synced(now, commits, result);
        self.handle_outputs();
        self.sync_when_due();
    }

    /// Carries out what the host asks; whether it asked anything.
    fn handle_outputs(&mut self) -> bool {
        let mut any = false;
        while let Some(output) = self.host.poll_output() {
            any = true;
            match output {
                Output::Transmit(t) => self.transmit(t),
                Output::Execute(job) => self.rpc.execute(job),
                Output::Resume(job) => {
                    let now = self.now();
                    self.rpc.resume(now, &mut self.host, job);
                }
                Output::Abort { job, reason } => {
                    let now = self.now();
                    self.rpc.abort(now, &mut self.host, job, reason);
                    self.count_provided_executions();
                }
                Output::Release { token, error } => self.release(token, error.as_deref()),
                Output::Delivered => self.deliveries.send_modify(|n| *n += 1),
                Output::Node(event) => self.on_node_event(event),
                Output::Rpc(event) => {
                    if let rpc::RpcEvent::CallFinished(id) = &event
                        && let Some(call) = self.engine().call_ref(id)
                    {
                        self.metrics.call_finished(self.now(), call);
                    }
                    self.rpc.on_event(event)
                }
                Output::Error(e) => {
                    if !matches!(e, host::HostError::Rpc(_)) {
                        self.metrics.counters.store_errors += 1;
                    }
                    tracing::error!("{e}");
                }
            }
        }
        for age in self.host.take_delivery_ages() {
            self.metrics.delivered(age);
        }
        any
    }

    /// A token the host released: what it stands for is durable, or (given the error) not.
    fn release(&mut self, token: Token, error: Option<&str>) {
        match (token, error) {
            (Token::Reply(answer), error) => answer(error),
            (Token::Confirm(link, transfer_id), None) => {
                if let Some(l) = self.links.get(&link) {
                    l.handle.confirm(transfer_id);
                }
            }
            // Unconfirmed, the sender keeps the bundle and sends it again later.
            (Token::Confirm(..), Some(_)) => {}
            (Token::Records(records), None) => {
                self.rpc.providers.records_kept(&records);
                tokio::task::spawn_blocking(move || crate::exec::remove_records(&records));
            }
            (Token::Records(_), Some(_)) => {}
        }
    }

    fn transmit(&mut self, t: Transmit) {
        let Frame::Bundle(bundle) = t.frame else {
            // TCPCL sessions carry no beacons (their keepalives tell liveness); discovery beacons
            // go out over UDP by themselves.
            return;
        };
        let Some(link) = self.links.get(&t.link) else {
            let now = self.now();
            self.host
                .node_mut()
                .handle_transfer(now, t.link, &bundle.id(), TransferResult::Failed);
            return;
        };
        let encoded = bundle.encode();
        // A flooded broadcast bundle goes out as one UDP broadcast per interface, reaching every
        // neighbour there at once; the node's transmits of the same bundle to the others in the
        // same round are then already done. Only with discovery on, which says on which
        // interfaces this node may broadcast at all.
        if t.urgent
            && node::is_broadcast(&bundle.primary.destination)
            && let Some(to) = link.udp
            && self.udp.is_some()
            && encoded.len() <= self.config.udp_max_bundle
            && let Some(announcer) = &mut self.announcer
        {
            let key = (bundle.id(), to.port());
            let done = self.broadcast_round.contains(&key)
                || announcer.broadcast_bundle(&encoded, to.port()) > 0;
            if done {
                if self.broadcast_round.insert(key) {
                    self.metrics.counters.udp_broadcasts += 1;
                }
                let now = self.now();
                self.host.node_mut().handle_transfer(
                    now,
                    t.link,
                    &bundle.id(),
                    TransferResult::Complete,
                );
                return;
            }
        }
        if t.urgent
            && let (Some(to), Some(socket)) = (link.udp, &self.udp)
            && encoded.len() <= self.config.udp_max_bundle
        {
            let result = match crate::udp::send(socket, to, &encoded) {
                Ok(()) => {
                    self.metrics.counters.udp_sent += 1;
                    TransferResult::Complete
                }
                Err(e) => {
                    self.metrics.counters.udp_send_errors += 1;
                    tracing::debug!("udp to {to}: {e}");
                    TransferResult::Failed
                }
            };
            let now = self.now();
            self.host
                .node_mut()
                .handle_transfer(now, t.link, &bundle.id(), result);
            return;
        }
        if !t.report {
            // Real-time traffic: the node keeps nothing about it, so no tag, no flight and no
            // event from the session when the peer acknowledges it (one input fewer for the
            // loop per bundle). A session already gone just drops it, as the link would.
            link.handle.send_untracked(encoded, t.urgent);
            return;
        }
        let id = bundle.id();
        let tag = self.next_tag;
        self.next_tag += 1;
        let [head, payload, _] = encoded.parts();
        self.flights.insert(
            tag,
            Flight {
                link: t.link,
                id: id.clone(),
                head: head.len() as u64,
                payload: payload.len() as u64,
            },
        );
        if !link.handle.send(tag, encoded, t.urgent) {
            self.finish(tag, TransferResult::Failed);
        }
    }

    fn on_node_event(&mut self, event: Event) {
        match event {
            Event::StatusReport { from, report } => self.record_report(&from, &report),
            Event::NeighbourUp { node, .. } => tracing::debug!("neighbour {node} up"),
            Event::SpeaksFerry { node } => tracing::debug!("neighbour {node} speaks Ferry"),
            Event::NeighbourDown { node } => tracing::debug!("neighbour {node} down"),
            Event::Reachable { node, hops } => tracing::debug!("{node} reachable in {hops} hops"),
            Event::Unreachable { node } => tracing::debug!("{node} unreachable"),
            Event::Dropped { id, reason } => {
                self.metrics.dropped(reason);
                tracing::debug!("dropped {id}: {reason:?}")
            }
            // Deliveries go to the host's inboxes; streams are the RPC engine's.
            Event::Delivered(_) | Event::Stream(_) => {}
        }
    }

    fn record_report(&mut self, from: &Eid, report: &StatusReport) {
        let bundle = BundleId {
            source: report.source.clone(),
            creation: report.creation,
            fragment: report.fragment,
        }
        .to_string();
        let arrived = self.now();
        for (status, assertion) in [
            ("received", report.received),
            ("forwarded", report.forwarded),
            ("delivered", report.delivered),
            ("deleted", report.deleted),
        ] {
            if let Some(a) = assertion {
                if self.reports.len() >= MAX_REPORTS {
                    self.reports.pop_front();
                }
                self.reports.push_back(ReportInfo {
                    bundle: bundle.clone(),
                    from: from.to_string(),
                    status: status.into(),
                    at_ms: a.time.map_or(0, DtnTime::as_millis),
                    arrived_ms: arrived.as_millis(),
                    reason: report.reason.code(),
                });
            }
        }
    }

    // ----- API requests -----

    fn on_request(&mut self, request: Request) {
        match request {
            Request::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Request::Peers(reply) => {
                let _ = reply.send(self.peers());
            }
            Request::Routes(reply) => {
                let node = self.host.node();
                let mut routes: Vec<RouteInfo> = node
                    .routes()
                    .into_iter()
                    .map(|r| RouteInfo {
                        destination: r.destination.to_string(),
                        next_hop: r.next_hop.to_string(),
                        hops: r.hops,
                        via: "mesh".into(),
                        departs_ms: None,
                        arrives_ms: None,
                    })
                    .collect();
                // Nodes the mesh reaches now go that way; the plan says how the others will be.
                let reached: std::collections::BTreeSet<String> =
                    routes.iter().map(|r| r.destination.clone()).collect();
                for (destination, r) in node.planned_routes(self.now()) {
                    let destination = destination.to_string();
                    if !reached.contains(&destination) {
                        routes.push(RouteInfo {
                            destination,
                            next_hop: r.next_hop.to_string(),
                            hops: r.hops,
                            via: "plan".into(),
                            departs_ms: Some(r.departs.as_millis()),
                            arrives_ms: Some(r.arrives.as_millis()),
                        });
                    }
                }
                let _ = reply.send(routes);
            }
            Request::Bundles(reply) => {
                let _ = reply.send(self.bundles());
            }
            // A send is answered once the pump's commit is durable: accepted means durable.
            Request::Send(req, reply) => {
                let result = self.api_send_json(req);
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::SendBytes {
                request,
                payload,
                reply,
            } => {
                let result = self.api_send(request, payload);
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::Peek {
                endpoint,
                max,
                after,
                with_payload,
                reply,
            } => {
                let result = self.endpoint(&endpoint).and_then(|ep| {
                    let waiting = self
                        .host
                        .inboxes()
                        .peek(self.host.node().store(), &ep, max, after, with_payload)
                        .map_err(internal)?;
                    Ok(waiting.into_iter().map(received).collect())
                });
                let _ = reply.send(result);
            }
            Request::Payload {
                endpoint,
                seq,
                reply,
            } => {
                let result = self.endpoint(&endpoint).and_then(|ep| {
                    self.host
                        .inboxes()
                        .payload(self.host.node().store(), &ep, seq)
                        .map_err(internal)?
                        .ok_or_else(|| not_waiting(&ep, seq))
                });
                let _ = reply.send(result);
            }
            Request::Ack {
                endpoint,
                seq,
                reply,
            } => {
                let result = self.endpoint(&endpoint).and_then(|ep| {
                    let (inboxes, store) = self.host.inboxes_mut();
                    if !inboxes.remove(store, &ep, seq).map_err(internal)? {
                        return Err(not_waiting(&ep, seq));
                    }
                    Ok(())
                });
                // Answered once the removal is durable.
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::Reports { bundle, reply } => {
                let reports = self
                    .reports
                    .iter()
                    // A bundle's reports and its fragments' (`<id>-offset+length`).
                    .filter(|r| {
                        bundle.as_ref().is_none_or(|b| {
                            r.bundle
                                .strip_prefix(b.as_str())
                                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
                        })
                    })
                    .cloned()
                    .collect();
                let _ = reply.send(Ok(reports));
            }
            Request::Metrics(reply) => {
                let _ = reply.send(self.metrics_text());
            }
            // Like a send, a call is answered once it is durable.
            Request::Call(spec, reply) => {
                let result = self.api_call(&spec);
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::CallNow { spec, made, done } => {
                self.make_call_and_wait(&spec, made, CallWaiter::Info(WaitFor::default(), done));
            }
            Request::CallForOutcome { spec, made, done } => {
                self.make_call_and_wait(&spec, made, CallWaiter::Outcome(done));
            }
            Request::GetOutcome { id, reply } => {
                let _ = reply.send(self.call_outcome_of(&id));
            }
            Request::Calls(reply) => {
                let calls = self
                    .engine()
                    .call_ids()
                    .iter()
                    .filter_map(|id| self.engine().call_ref(id))
                    .map(|v| self.info_of(v, false))
                    .collect();
                let _ = reply.send(calls);
            }
            Request::GetCall { id, reply } => {
                let _ = reply.send(self.call_info(&id, true));
            }
            Request::WaitCall { id, more, reply } => {
                let info = self.call_info(&id, true);
                match (&info, parse_call_id(&id)) {
                    (Ok(call), Ok(call_id)) if !call.has(more) => {
                        let waiters = self.call_waiters.entry(call_id).or_default();
                        // Waits given up on (timed out) go when a new one comes.
                        waiters.retain(|w| !w.gave_up());
                        waiters.push(CallWaiter::Info(more, reply));
                    }
                    _ => {
                        let _ = reply.send(info);
                    }
                }
            }
            Request::CancelCall { id, reply } => {
                let result = parse_call_id(&id).and_then(|call_id| {
                    let now = self.now();
                    let (rpc, node) = self.engine_mut();
                    rpc.cancel(now, node, call_id)
                        .map_err(|e| call_error(e, &CallSpec::default()))?;
                    self.call_info(&id, true)
                });
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::ForgetCall { id, reply } => {
                let result = parse_call_id(&id).and_then(|call_id| {
                    if self.call_waiting(&call_id) {
                        // The servers are told, and a running execution stops.
                        let now = self.now();
                        let (rpc, node) = self.engine_mut();
                        let _ = rpc.cancel(now, node, call_id);
                    }
                    let (rpc, node) = self.engine_mut();
                    if rpc.forget(node, call_id) {
                        // Watchers of the call look again (and find it gone).
                        self.rpc.calls_changed = true;
                        self.rpc.changed_calls.insert(call_id);
                        Ok(())
                    } else {
                        Err(ApiError::new(
                            "not_found",
                            format!("no call {id} on this node"),
                        ))
                    }
                });
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::File { hash, reply } => {
                let result = crate::calls::parse_hash(&hash).and_then(|h| {
                    self.engine().file(self.host.node(), &h).ok_or_else(|| {
                        ApiError::new(
                            "not_found",
                            format!(
                                "no file {hash} on this node: not arrived yet, expired, or \
                                 dropped to make room for newer files (a call's timeline says \
                                 which)"
                            ),
                        )
                    })
                });
                let _ = reply.send(result);
            }
            Request::Provider(request) => {
                let now = self.now();
                self.rpc.provider_request(now, &mut self.host, request);
                self.count_provided_executions();
            }
            Request::Procedures(reply) => {
                let _ = reply.send(self.procedures());
            }
            Request::Served(reply) => {
                let served = self.engine().served_views(MAX_SERVED_LISTED);
                let _ = reply.send(served.into_iter().map(Into::into).collect());
            }
            Request::Keys(reply) => {
                let keys = self.engine().keys().into_iter().map(Into::into).collect();
                let _ = reply.send(keys);
            }
            Request::AcceptKey { node, key, reply } => {
                let result = self.accept_key(&node, key.as_deref());
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
            Request::ForgetKey { node, reply } => {
                let result = crate::keys::parse_key_node(&node).and_then(|id| {
                    let now = self.now();
                    let (rpc, node) = self.engine_mut();
                    let old = rpc.forget_key(now, node, &id);
                    let old = old.map_err(crate::keys::key_error)?;
                    tracing::info!("rpc: forgot the key {old} of {id} (the operator's request)");
                    Ok(())
                });
                self.host.promise(Token::Reply(when_durable(reply, result)));
            }
        }
    }

    /// `Request::AcceptKey`: `key` (or the presented one) becomes the key of `node`.
    fn accept_key(
        &mut self,
        node: &str,
        key: Option<&str>,
    ) -> Result<crate::keys::KeyInfo, ApiError> {
        let id = crate::keys::parse_key_node(node)?;
        let key = key.map(crate::keys::parse_key).transpose()?;
        let now = self.now();
        let (rpc, node) = self.engine_mut();
        let known = rpc
            .accept_key(now, node, &id, key)
            .map_err(crate::keys::key_error)?;
        tracing::info!(
            "rpc: accepted the key {} for {} (the operator's request)",
            known.key,
            known.node
        );
        Ok(known.into())
    }

    /// An endpoint named by an application: a full endpoint id, or a service name on this node.
    fn endpoint(&self, text: &str) -> Result<String, ApiError> {
        let eid = parse_endpoint(&self.config.node_id, text)?;
        if eid.node_id() != self.config.node_id && !node::is_broadcast(&eid) {
            return Err(ApiError::new(
                "bad_endpoint",
                format!(
                    "{eid} is not an endpoint of this node ({})",
                    self.config.node_id
                ),
            ));
        }
        Ok(eid.to_string())
    }

    fn status(&self) -> Status {
        let usage = self.host.node().store().usage().unwrap_or(store::Usage {
            bundles: 0,
            bytes: 0,
            quota: self.config.store_quota,
        });
        let s = self.host.node().stats();
        Status {
            node_id: self.config.node_id.to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.started.elapsed().as_secs(),
            strategy: self.host.node().strategy_name().into(),
            peers: self.links.values().filter(|l| l.announced).count(),
            stored_bundles: usage.bundles,
            stored_bytes: usage.bytes,
            store_quota: usage.quota,
            inbox_bundles: self.host.inboxes().len(),
            counters: Counters {
                bundles_received: s.bundles_received,
                bundles_sent: s.bundles_sent,
                bytes_sent: s.bytes_sent,
                delivered: s.delivered,
                duplicates: s.duplicates,
                dropped: s.dropped,
            },
            listening: self.listening.clone(),
            public_key: self.engine().public_key().to_string(),
            rpc: self.rpc_counters(),
        }
    }

    fn rpc_counters(&self) -> RpcCounters {
        let r = self.engine().stats();
        RpcCounters {
            calls_made: r.calls_made,
            calls_accepted: r.calls_accepted,
            calls_rejected: r.calls_rejected,
            executions: r.executions,
            duplicates: r.duplicates,
            forged: r.forged,
            untrusted_notices: r.untrusted_notices,
            key_mismatches: r.key_mismatches,
            running: self.engine().running() as u64,
            calls_in_memory: self.engine().calls_in_memory().0 as u64,
            served_in_memory: self.engine().calls_in_memory().1 as u64,
            file_bytes: self.engine().file_use().0,
            file_budget: self.engine().file_use().1,
        }
    }

    // ----- remote procedure calls -----

    /// A link, address or route came up: a contact may have begun. Static peers without a
    /// session are dialled now (a failed dial starts their backoff again from 1 s), and a
    /// beacon goes out now, so that neighbours that find us by beacons need not wait a period.
    fn on_link_came_up(&mut self) {
        let now = Instant::now();
        self.link_came_up = Some(now);
        let mut dialled = 0;
        for s in &mut self.statics {
            if s.link.is_none() {
                s.retry_at = now;
                s.backoff = FIRST_BACKOFF;
                dialled += 1;
            }
        }
        self.renew_slow_dials(now);
        tracing::debug!("a link came up: dialling {dialled} static peers now");
        // Sessions that lived through the outage may be waiting on TCP's retransmission timer:
        // a stalled one is replaced (its peer redialled at once if static, as above, once its
        // end is seen).
        for l in self.links.values() {
            l.handle.command(cla::tcp::TcpclCommand::ReplaceIfStalled {
                quiet_ms: STALL_QUIET.as_millis() as u64,
            });
        }
        if self.announcer.is_some() {
            self.next_beacon = now;
        }
        self.on_timer();
    }

    /// Whether a link came up less than [`FAST_REDIAL_WINDOW`] ago.
    fn in_fast_redial(&self, now: Instant) -> bool {
        self.link_came_up
            .is_some_and(|t| now.saturating_duration_since(t) < FAST_REDIAL_WINDOW)
    }

    /// Gives up static peers' dials that have not connected within [`FAST_REDIAL`] (made while
    /// the link was down, their SYN waits for a retry of 1 s or more; made as it came up, their
    /// SYN may have been lost), so that the timer dials them again at once. A late result of a
    /// dial given up is dropped (dials are numbered).
    fn renew_slow_dials(&mut self, now: Instant) {
        for s in &self.statics {
            if s.link.is_none()
                && let Some(&(.., began)) = self.connecting.get(&s.addr)
                && now.saturating_duration_since(began) >= FAST_REDIAL
            {
                self.connecting.remove(&s.addr);
            }
        }
    }

    fn on_provider_timer(&mut self, timer: crate::providers::ProviderTimer) {
        let now = self.now();
        self.rpc.providers.timer(now, &mut self.host, timer);
        self.count_provided_executions();
    }

    /// Executions of provided procedures that ended count as every other execution.
    fn count_provided_executions(&mut self) {
        for outcome in self.rpc.providers.take_ended() {
            self.metrics.execution_finished(&outcome);
        }
    }

    fn on_finished(&mut self, job: rpc::JobId, outcome: rpc::Outcome) {
        let now = self.now();
        self.metrics.execution_finished(&outcome);
        self.rpc.finished(now, &mut self.host, job, outcome);
    }

    fn on_readings(&mut self, readings: &Readings) {
        let facts = crate::rpc_shell::facts(readings, self.started.elapsed());
        self.engine_mut().0.set_facts(facts);
    }

    fn api_call(&mut self, spec: &CallSpec) -> Result<CallInfo, ApiError> {
        let id = self.make_call(spec)?;
        self.call_info(&id.to_string(), true)
    }

    /// Makes a call for a request that waits for its end (`CallNow`, `CallForOutcome`):
    /// `made` gets the call's id, or why no call was made; `waiter` is answered when the call
    /// ends, at once if it ended at once (refused here).
    fn make_call_and_wait(
        &mut self,
        spec: &CallSpec,
        made: oneshot::Sender<Result<wire::rpc::CallId, ApiError>>,
        waiter: CallWaiter,
    ) {
        let call_id = match self.make_call(spec) {
            Ok(id) => id,
            Err(e) => {
                let _ = made.send(Err(e));
                return;
            }
        };
        if self.call_waiting(&call_id) {
            let _ = made.send(Ok(call_id));
            self.call_waiters.entry(call_id).or_default().push(waiter);
            return;
        }
        match waiter {
            CallWaiter::Info(_, done) => {
                let _ = done.send(self.call_info_of(&call_id, true));
            }
            CallWaiter::Outcome(done) => {
                let _ = done.send(self.call_outcome_of(&call_id));
            }
        }
    }

    /// Whether this node made the call and it still waits for its end.
    fn call_waiting(&self, id: &wire::rpc::CallId) -> bool {
        self.engine().call_state(id) == Some(rpc::CallState::Waiting)
    }

    fn make_call(&mut self, spec: &CallSpec) -> Result<wire::rpc::CallId, ApiError> {
        let now = self.now();
        let request = spec.to_request(now, self.rpc_timers())?;
        let (rpc, node) = self.engine_mut();
        let id = rpc
            .call(now, node, request)
            .map_err(|e| call_error(e, spec))?;
        if let Some(made) = self.engine().call_ref(&id) {
            self.metrics.call_made(made.call);
        }
        Ok(id)
    }

    fn rpc_timers(&self) -> rpc::Timers {
        rpc::Timers {
            ack_timeout: self.config.rpc.ack_timeout,
            result_timeout: self.config.rpc.result_timeout,
            dtn_timeout: self.config.rpc.dtn_timeout,
            ..rpc::Timers::default()
        }
    }

    /// Answers the waits (`Request::WaitCall`) of the calls that changed and now have what
    /// their waiters wait for.
    fn answer_call_waiters(&mut self) {
        for call_id in std::mem::take(&mut self.rpc.changed_calls) {
            let Some(waiters) = self.call_waiters.remove(&call_id) else {
                continue;
            };
            // Each form is made once, and only if someone waits for it.
            let (mut info, mut outcome) = (None, None);
            let (mut to_info, mut to_outcome, mut still) = (Vec::new(), Vec::new(), Vec::new());
            for waiter in waiters {
                let answer = match &waiter {
                    CallWaiter::Info(more, _) => {
                        let info = info.get_or_insert_with(|| self.call_info_of(&call_id, true));
                        !matches!(info, Ok(call) if !call.has(*more))
                    }
                    // Only the end: nothing is copied while the call waits.
                    CallWaiter::Outcome(_) => !self.call_waiting(&call_id),
                };
                match waiter {
                    w if !answer => {
                        if !w.gave_up() {
                            still.push(w);
                        }
                    }
                    CallWaiter::Info(_, reply) => to_info.push(reply),
                    CallWaiter::Outcome(reply) => {
                        outcome.get_or_insert_with(|| self.call_outcome_of(&call_id));
                        to_outcome.push(reply);
                    }
                }
            }
            answer_all(to_info, info);
            answer_all(to_outcome, outcome);
            if !still.is_empty() {
                self.call_waiters.insert(call_id, still);
            }
        }
    }

    /// A call's outcome, from memory or, if it left memory, from the store.
    fn call_outcome_of(&self, id: &wire::rpc::CallId) -> Result<CallOutcome, ApiError> {
        if let Some(view) = self.engine().call_ref(id) {
            return Ok(CallOutcome::from_view(view));
        }
        self.engine()
            .call_record(self.host.node(), id)
            .map(|record| CallOutcome::from_view(record.as_ref()))
            .ok_or_else(|| ApiError::new("not_found", format!("no call {id} on this node")))
    }

    fn call_info(&self, id: &str, with_timeline: bool) -> Result<CallInfo, ApiError> {
        self.call_info_of(&parse_call_id(id)?, with_timeline)
    }

    fn call_info_of(
        &self,
        id: &wire::rpc::CallId,
        with_timeline: bool,
    ) -> Result<CallInfo, ApiError> {
        if let Some(view) = self.engine().call_ref(id) {
            return Ok(self.info_of(view, with_timeline));
        }
        // A finished call that left the engine's memory is read back from the store.
        let record = self
            .engine()
            .call_record(self.host.node(), id)
            .ok_or_else(|| ApiError::new("not_found", format!("no call {id} on this node")))?;
        Ok(self.info_of(record.as_ref(), with_timeline))
    }

    fn info_of(&self, view: rpc::CallRef<'_>, with_timeline: bool) -> CallInfo {
        // From the engine's index: reading the store would read each file whole.
        // A file on its way in pieces shows how much of it is here.
        let arriving = if view.replies.iter().any(|r| r.missing_files > 0) {
            self.engine()
                .files_arriving(self.host.node(), &view.call.id)
        } else {
            Vec::new()
        };
        let here = |hash: &[u8; 32]| {
            if self.engine().holds_file(hash) {
                return FileHere::All;
            }
            match arriving.iter().find(|(h, _)| h == hash) {
                Some(&(_, n)) => FileHere::Part(n),
                None => FileHere::Nothing,
            }
        };
        CallInfo::from_view(view, here, with_timeline)
    }

    /// What this node serves, in name order (see [`RpcShell::procedure_infos`]).
    fn procedures(&self) -> Vec<ProcedureInfo> {
        self.rpc.procedure_infos()
    }

    fn peers(&self) -> Vec<PeerInfo> {
        let queued = |link: LinkId| -> u64 {
            self.flights
                .values()
                .filter(|f| f.link == link)
                .map(|f| f.head + f.payload)
                .sum()
        };
        self.links
            .iter()
            .filter(|(_, l)| l.announced)
            .map(|(&id, l)| {
                let mut cla = vec!["tcpcl".to_owned()];
                if l.udp.is_some() && self.udp.is_some() {
                    cla.push("udp".into());
                }
                let outbound = !matches!(l.origin, Origin::Accepted);
                let listen_address = if outbound {
                    Some(l.remote)
                } else {
                    // A beacon from the session's own address says where the peer listens.
                    l.peer
                        .as_ref()
                        .and_then(|p| self.discovered.get(p))
                        .filter(|d| d.from == l.remote.ip())
                        .and_then(|d| d.tcpcl)
                };
                PeerInfo {
                    node_id: l.peer.as_ref().map(|p| p.to_string()).unwrap_or_default(),
                    cla,
                    address: l.remote.to_string(),
                    listen_address: listen_address.map(|a| a.to_string()),
                    outbound,
                    up_s: l.up_since.map(|t| t.elapsed().as_secs()).unwrap_or(0),
                    queued_bytes: queued(id),
                }
            })
            .collect()
    }

    fn bundles(&self) -> Vec<BundleInfo> {
        let Ok(list) = self.host.node().store().list() else {
            return Vec::new();
        };
        list.into_iter()
            .map(|m| BundleInfo {
                size: self.host.node().held_payload_len(&m.id).unwrap_or(0),
                id: m.id.to_string(),
                destination: m.destination.to_string(),
                expiry_ms: m.expiry.as_millis(),
                retention: match m.retention {
                    Retention::Carried => "carried",
                    Retention::MustDeliver => "must-deliver",
                    Retention::Originated => "originated",
                }
                .into(),
            })
            .collect()
    }

    /// A send whose payload is text or base64 in the request (in-process callers; the HTTP
    /// handlers decode base64 themselves and use [`Request::SendBytes`]).
    fn api_send_json(&mut self, mut req: SendRequest) -> Result<SendReply, ApiError> {
        let payload = req.take_payload()?;
        self.api_send(req, payload)
    }

    fn api_send(&mut self, req: SendRequest, payload: Bytes) -> Result<SendReply, ApiError> {
        let bad = |m: String| ApiError::new("bad_request", m);
        let destination: Eid = req.destination.parse().map_err(|e| {
            ApiError::new(
                "bad_endpoint",
                format!("destination {:?}: {e}", req.destination),
            )
        })?;
        if destination.is_null() {
            return Err(ApiError::new("bad_endpoint", "destination is dtn:none"));
        }
        let source = match &req.source {
            Some(s) => parse_endpoint(&self.config.node_id, s)?,
            None => self.config.node_id.clone(),
        };
        let lifetime = match &req.lifetime {
            Some(l) => {
                humantime::parse_duration(l).map_err(|e| bad(format!("lifetime {l:?}: {e}")))?
            }
            None => Duration::from_secs(3600),
        };
        let class = match req.class.as_deref().unwrap_or("dtn") {
            "dtn" => Class::Dtn,
            "datagram" => Class::Datagram,
            "stream" => Class::Stream,
            other => {
                return Err(bad(format!(
                    "class {other:?}: expected dtn, datagram or stream"
                )));
            }
        };
        let size = payload.len() as u64;
        let mut out = Outgoing::new(source, destination, payload);
        out.class = class;
        out.lifetime_ms = lifetime.as_millis().max(1) as u64;
        out.priority = match req.priority {
            None => 1,
            Some(p @ 0..=2) => p,
            Some(p) => {
                return Err(bad(format!(
                    "priority {p}: expected 0 (bulk), 1 (normal) or 2 (expedited)"
                )));
            }
        };
        if req.report {
            out.flags = BundleFlags(BundleFlags::ANY_REPORT | BundleFlags::STATUS_TIME_REQUESTED);
        }
        let now = self.now();
        match self.host.node_mut().send(now, out) {
            Ok(id) => Ok(SendReply {
                id: id.to_string(),
                size,
            }),
            Err(SendError::NoRoute(to)) => Err(ApiError::new(
                "no_route",
                format!("no route to {to} now (real-time classes need a live path; use class dtn)"),
            )),
            Err(SendError::Store(e @ store::StoreError::Full { .. })) => {
                Err(ApiError::new("store_full", e.to_string()))
            }
            Err(e @ (SendError::ForeignSource(_) | SendError::ZeroLifetime)) => {
                Err(bad(e.to_string()))
            }
            Err(e) => Err(ApiError::new("internal", e.to_string())),
        }
    }

    fn metrics_text(&self) -> String {
        let usage = self.host.node().store().usage().ok();
        let budget = self.session_config.receive_budget.as_ref();
        let b = &self.api_bodies;
        self.metrics.render(&crate::metrics::Sources {
            node: self.host.node().stats(),
            rpc: self.engine().stats(),
            rpc_served_records: self.engine().served_records() as u64,
            peers: self.links.values().filter(|l| l.announced).count() as u64,
            store: usage.map(|u| (u.bundles, u.bytes, u.quota)),
            inbox_bundles: self.host.inboxes().len(),
            store_commits: self.host.pipeline().commits(),
            udp_refused_oversize: self.udp_gate.refused_oversize(),
            udp_refused_rate: self.udp_gate.refused_rate(),
            receive_memory: budget.map(|b| (b.in_use(), b.limit(), b.refused())),
            discovered_nodes: self.discovered.len() as u64,
            api_payload_too_large: b.refused_too_large(),
            api_uploads: b.uploads_in_progress(),
            api_uploads_limit: b.max_uploads(),
            api_uploads_waited: b.uploads_waited(),
            purge_set_entries: self.host.node().purge_set_len() as u64,
            providers: (
                self.rpc.providers.connected() as u64,
                self.rpc.providers.counters,
            ),
        })
    }
}

fn received(w: Waiting) -> crate::control::Received {
    crate::control::Received {
        seq: w.seq,
        id: w.meta.id,
        source: w.meta.source,
        destination: w.meta.destination,
        created_ms: w.meta.created.as_millis(),
        expiry_ms: w.meta.expiry.as_millis(),
        size: w.meta.size,
        payload_base64: w
            .payload
            .map(|p| base64::engine::general_purpose::STANDARD.encode(&p)),
    }
}

/// Commits the store's batch. A commit usually only hands bytes to the operating system (and
/// the loop goes on at once), but one that syncs large payload files waits for the disk: on a
/// multi-threaded runtime the worker then first hands its other tasks (the sessions' readers and
/// writers, the API, another daemon in the same process) to another thread. Not always, as that
/// hand-over costs more than a small commit (a `null` call's p50 on tmpfs: 0.59 ms with it,
/// 0.43 ms without).
fn commit_off_the_workers(store: &mut dyn store::Store) -> store::Result<bool> {
    let multi_thread = matches!(
        tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()),
        Ok(tokio::runtime::RuntimeFlavor::MultiThread)
    );
    if multi_thread && store.commit_waits_for_disk() {
        tokio::task::block_in_place(|| store.commit())
    } else {
        store.commit()
    }
}

fn internal(e: store::StoreError) -> ApiError {
    ApiError::new("internal", e.to_string())
}

fn not_waiting(endpoint: &str, seq: u64) -> ApiError {
    ApiError::new(
        "not_found",
        format!("no bundle {seq} waits for {endpoint} (taken already?)"),
    )
}

fn parse_peer(text: &str) -> Option<Eid> {
    let eid: Eid = text.parse().ok()?;
    (!eid.is_null()).then(|| eid.node_id())
}

/// `text` as an endpoint id: a full one (`dtn://n/x`, `ipn:1.2`) or a service name on `node`.
pub(crate) fn parse_endpoint(node: &Eid, text: &str) -> Result<Eid, ApiError> {
    let bad = |e: String| ApiError::new("bad_endpoint", e);
    if text.contains(':') {
        return text
            .parse()
            .map_err(|e| bad(format!("endpoint {text:?}: {e}")));
    }
    match node {
        Eid::Dtn(d) => {
            Eid::dtn(d.node_name(), text).map_err(|e| bad(format!("service {text:?}: {e}")))
        }
        Eid::Ipn { node, .. } => text
            .parse::<u64>()
            .map(|service| Eid::ipn(*node, service))
            .map_err(|_| {
                bad(format!(
                    "service {text:?}: an ipn node's services are numbers"
                ))
            }),
        Eid::Null => Err(bad("this node has no id".into())),
    }
}

/// A call id from the API (32 hex digits).
fn parse_call_id(text: &str) -> Result<wire::rpc::CallId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(
            "bad_request",
            format!("{text:?} is not a call id (32 hex digits)"),
        )
    })
}

/// Why the engine could not make (or cancel) a call, as an API error.
fn call_error(e: rpc::CallError, spec: &CallSpec) -> ApiError {
    match e {
        rpc::CallError::Requirements(p) => ApiError::new(
            "bad_request",
            // On a line of its own, so the caret under it points at the right character.
            format!(
                "requirements:\n{}",
                p.render(spec.requirements.as_deref().unwrap_or(""))
            ),
        ),
        rpc::CallError::NotReachable(node) => ApiError::new(
            "no_route",
            format!("{node} is not reachable now (transport auto or dtn waits for a path)"),
        ),
        rpc::CallError::UnknownCall => ApiError::new("not_found", "no such call on this node"),
        rpc::CallError::TooLarge(e) => ApiError::new("payload_too_large", e.to_string()),
        rpc::CallError::Send(SendError::Store(e @ store::StoreError::Full { .. })) => {
            ApiError::new("store_full", e.to_string())
        }
        rpc::CallError::Store(e @ store::StoreError::Full { .. }) => {
            ApiError::new("store_full", e.to_string())
        }
        e @ rpc::CallError::FileBudget { .. } => ApiError::new("store_full", e.to_string()),
        rpc::CallError::Send(e) => ApiError::new("internal", e.to_string()),
        rpc::CallError::Store(e) => ApiError::new("internal", e.to_string()),
        e => ApiError::new("bad_request", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_full_ids_or_services_of_this_node() {
        let me: Eid = "dtn://alpha/".parse().unwrap();
        assert_eq!(
            parse_endpoint(&me, "inbox").unwrap().to_string(),
            "dtn://alpha/inbox"
        );
        assert_eq!(
            parse_endpoint(&me, "dtn://bravo/x").unwrap().to_string(),
            "dtn://bravo/x"
        );
        assert!(parse_endpoint(&me, "dtn:").is_err());
        let ipn = Eid::ipn(7, 0);
        assert_eq!(parse_endpoint(&ipn, "12").unwrap(), Eid::ipn(7, 12));
        assert!(parse_endpoint(&ipn, "inbox").is_err());
    }

    #[test]
    fn the_clock_is_dtn_time_and_maps_back_to_instants() {
        let c = Clock::new();
        let now = c.now();
        // After 2020 and before 2100, in ms since 2000.
        assert!(
            now > DtnTime::from_millis(20 * 365 * 86_400_000)
                && now < DtnTime::from_millis(100 * 365 * 86_400_000)
        );
        let later = c.instant(now + Duration::from_millis(1_000));
        let d = later.saturating_duration_since(Instant::now());
        assert!(d <= Duration::from_millis(1_000) && d >= Duration::from_millis(900));
    }
}
