//! The DTN-RPC paper's whole evaluation matrix (Sec. V-A) in the simulator: Hub (28 nodes),
//! Chained (32) and Islands (64, joined and split every 60 s) × the test sets 0 MB, 1 MB and
//! 100 MB × the ten modes (explicit, any and all by dtn, by datagram and transparent; explicit by
//! stream) × 5 % and 50 % servers (Hub, Islands; Chained: one client and one server at opposite
//! ends), 30 echo calls a setup, one after the other, each with the paper's 210 s (ack 30 s,
//! result 90 s, dtn 90 s) or a multiple of it. Each (setup, seed) is one [`Run`]; its outcome is
//! a [`CallRecord`] per call (`eval_record.rs`), which `ferry eval` writes as CSV and draws.
//!
//! The machinery is [`crate::paper`]'s: the same call sequence, the same echo (a 0 MB call sends
//! a text and gets it back; a 1 MB or 100 MB call sends a file and gets one of the same length
//! back, so the size crosses the network both ways), the same placement of client and servers for a seed (so the
//! Islands 100 MB transparent cells are exactly `ferry sim --rpc fig5`'s runs), and the same
//! journey check for calls without a result. A run is a function of its setup and seed.

use std::collections::BTreeMap;
use std::time::Duration;

use node::StrategyKind;
use rpc::{CallRequest, CallState, Param, ParamType, Target, Timers};
use wire::DtnTime;
use wire::rpc::{Mode, Transport, Value};

use crate::eval_record::{CallRecord, Outcome, first_transport};
use crate::paper::{
    FileCrossing, PAPER_BUDGET_MS, START, Sequence, call_file, complete_result,
    file_round_trip_possible, path_at_some_instant, summarise, test_file,
};
use crate::rpc::{Behaviour, RpcApp, procedure};
use crate::{LinkParams, Rng, SIM_EPOCH, Scenario, Sim, Topology, Violation, node_id};

/// One of the paper's three networks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Network {
    /// 28 nodes, every one a hop from every other.
    Hub,
    /// 32 nodes in a line.
    Chained,
    /// 64 nodes in 4 islands, joined and split at random every 60 s.
    Islands,
}

impl Network {
    /// The three, in the paper's order.
    pub const ALL: [Network; 3] = [Network::Hub, Network::Chained, Network::Islands];

    /// `hub`, `chained`, `islands`.
    pub fn name(self) -> &'static str {
        match self {
            Network::Hub => "hub",
            Network::Chained => "chained",
            Network::Islands => "islands",
        }
    }

    /// The paper's topology.
    pub fn topology(self) -> Topology {
        match self {
            Network::Hub => Topology::hub(),
            Network::Chained => Topology::chained(),
            Network::Islands => Topology::islands(),
        }
    }

    /// Whether the paper varies the share of servers here (Hub and Islands; Chained has one
    /// server at the far end).
    pub fn has_server_shares(self) -> bool {
        self != Network::Chained
    }
}

impl std::str::FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Network::ALL
            .into_iter()
            .find(|n| n.name() == s.trim())
            .ok_or_else(|| format!("{s:?} is not hub, chained or islands"))
    }
}

/// The size and pace of the networks: the paper's (Hub 28, Chained 32, Islands 64 in 4 islands
/// changing every 60 s), or smaller and faster ones a real-process testbed also runs (`ferry
/// testbed`), so that the two can be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Nodes of every network run, when not the paper's.
    pub nodes: Option<usize>,
    /// Islands of the Islands network.
    pub islands: usize,
    /// Time between the Islands network's changes.
    pub period_ms: u64,
}

impl Default for Shape {
    /// The paper's.
    fn default() -> Self {
        Shape {
            nodes: None,
            islands: 4,
            period_ms: 60_000,
        }
    }
}

impl Shape {
    /// `network` in this shape.
    pub fn topology(&self, network: Network) -> Topology {
        match (network, self.nodes) {
            (Network::Islands, nodes) => Topology::Islands {
                nodes: nodes.unwrap_or(64),
                islands: self.islands.max(1),
                period_ms: self.period_ms.max(1),
            },
            (_, None) => network.topology(),
            (Network::Hub, Some(nodes)) => Topology::Hub { nodes },
            (Network::Chained, Some(nodes)) => Topology::Chained { nodes },
        }
    }
}

/// Where a run's client and servers are, and which server each explicit call names: drawn from
/// the seed ([`Eval::placement`]), the same for the simulator and the testbed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The node that makes the calls.
    pub client: usize,
    /// The nodes that serve `echo`, ascending.
    pub servers: Vec<usize>,
    /// For an explicit mode, call k's server; empty otherwise.
    pub explicit_targets: Vec<usize>,
}

/// One of the paper's test sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TestSet {
    /// No file.
    Zero,
    /// A 1 MB file out and back.
    OneMb,
    /// A 100 MB file out and back.
    HundredMb,
}

impl TestSet {
    /// The three, in the paper's order.
    pub const ALL: [TestSet; 3] = [TestSet::Zero, TestSet::OneMb, TestSet::HundredMb];

    /// `0MB`, `1MB`, `100MB`.
    pub fn name(self) -> &'static str {
        match self {
            TestSet::Zero => "0MB",
            TestSet::OneMb => "1MB",
            TestSet::HundredMb => "100MB",
        }
    }

    /// The file's size.
    pub fn bytes(self) -> usize {
        match self {
            TestSet::Zero => 0,
            TestSet::OneMb => 1_000_000,
            TestSet::HundredMb => 100_000_000,
        }
    }
}

impl std::str::FromStr for TestSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_uppercase();
        TestSet::ALL
            .into_iter()
            .find(|n| n.name().to_ascii_uppercase() == t)
            .ok_or_else(|| format!("{s:?} is not 0MB, 1MB or 100MB"))
    }
}

/// One of the paper's ten modes: an addressing mode and a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EvalMode {
    /// Explicit, any or all.
    pub mode: Mode,
    /// Dtn (the paper's Rhizome), datagram (MDP), stream (MSP, explicit only) or auto (the
    /// paper's transparent).
    pub transport: Transport,
}

impl EvalMode {
    /// The paper's ten: explicit, any, all by dtn; by datagram; transparent; explicit by stream.
    pub fn paper() -> Vec<EvalMode> {
        let mut out = Vec::new();
        for transport in [Transport::Dtn, Transport::Datagram, Transport::Auto] {
            for mode in [Mode::Explicit, Mode::Any, Mode::All] {
                out.push(EvalMode { mode, transport });
            }
        }
        out.push(EvalMode {
            mode: Mode::Explicit,
            transport: Transport::Stream,
        });
        out
    }

    /// `explicit-dtn`, `any-auto`, `explicit-stream`.
    pub fn name(self) -> String {
        format!("{}-{}", self.mode.name(), self.transport.name())
    }
}

impl std::str::FromStr for EvalMode {
    type Err = String;

    /// `explicit-dtn`, `any-datagram`, `all-auto` (or `all-transparent`), `explicit-stream`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || format!("{s:?} is not a mode like explicit-dtn, any-datagram or all-auto");
        let (mode, transport) = s.trim().split_once('-').ok_or_else(err)?;
        let mode: Mode = match mode {
            "implicit" => Mode::Any,
            m => m.parse().map_err(|_| err())?,
        };
        let transport: Transport = match transport {
            "transparent" => Transport::Auto,
            t => t.parse().map_err(|_| err())?,
        };
        if transport == Transport::Stream && mode != Mode::Explicit {
            return Err(format!(
                "{s:?}: a stream reaches one server, so explicit only"
            ));
        }
        Ok(EvalMode { mode, transport })
    }
}

/// One setup: a network, a share of servers, a test set, a mode and the time each call has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Setup {
    /// The network.
    pub network: Network,
    /// Servers, per cent of the nodes; `None` for Chained (one server at the far end).
    pub servers_percent: Option<u32>,
    /// The test set.
    pub set: TestSet,
    /// The mode.
    pub mode: EvalMode,
    /// The time each call has, ms; the paper's timers are scaled to it.
    pub budget_ms: u64,
}

/// One setup with one seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    /// The setup.
    pub setup: Setup,
    /// The seed.
    pub seed: u64,
}

/// What to run: every combination of the lists (servers shares only where the network has them).
#[derive(Debug, Clone)]
pub struct Eval {
    /// Networks.
    pub networks: Vec<Network>,
    /// Test sets.
    pub sets: Vec<TestSet>,
    /// Modes.
    pub modes: Vec<EvalMode>,
    /// Shares of servers for Hub and Islands, per cent.
    pub servers_percent: Vec<u32>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Times each call has, ms (the paper's 210 s, and twice that).
    pub budgets_ms: Vec<u64>,
    /// Calls per run (the paper: 30).
    pub calls: usize,
    /// Every link.
    pub link: LinkParams,
    /// Store-carry-forward routing.
    pub strategy: StrategyKind,
    /// Store quota of each node.
    pub quota: u64,
    /// When the first call is made (the mesh has formed by then).
    pub start_ms: u64,
    /// Pause between the end of one call and the next.
    pub gap_ms: u64,
    /// Sizes and pace of the networks.
    pub shape: Shape,
    /// Every node's disk: each commit waits for a sync this long (None: syncs take no time).
    pub disk: Option<crate::DiskModel>,
    /// Files for one node sealed for real (XChaCha20-Poly1305), as the daemon seals them, rather
    /// than with stand-ins of the same length ([`RpcApp::stand_in_file_seals`]): the same
    /// outcome, at the cost of the cipher over every byte.
    pub real_seals: bool,
    /// Bundles to one node larger than this are sent in pieces of it at every hop
    /// (`node::NodeConfig::max_bundle_piece`; the daemon's `bundle_piece`); `None`: whole.
    pub bundle_piece: Option<u64>,
}

impl Default for Eval {
    /// The paper's whole matrix at its 210 s and at twice that, seeds 1–3, with
    /// [`crate::paper::Fig5`]'s links (100 Mbit/s, 5 ms), routing (epidemic) and stores (10 GB).
    fn default() -> Self {
        let fig5 = crate::paper::Fig5::default();
        Self {
            networks: Network::ALL.to_vec(),
            sets: TestSet::ALL.to_vec(),
            modes: EvalMode::paper(),
            servers_percent: vec![5, 50],
            seeds: vec![1, 2, 3],
            budgets_ms: vec![PAPER_BUDGET_MS, 2 * PAPER_BUDGET_MS],
            calls: 30,
            link: fig5.link,
            strategy: fig5.strategy,
            quota: fig5.quota,
            start_ms: fig5.start_ms,
            gap_ms: 1_000,
            shape: Shape::default(),
            disk: None,
            real_seals: false,
            bundle_piece: None,
        }
    }
}

impl Eval {
    /// Every setup, in a stable order.
    pub fn setups(&self) -> Vec<Setup> {
        let mut out = Vec::new();
        for &budget_ms in &self.budgets_ms {
            for &network in &self.networks {
                let shares: Vec<Option<u32>> = if network.has_server_shares() {
                    self.servers_percent.iter().map(|&p| Some(p)).collect()
                } else {
                    vec![None]
                };
                for servers_percent in shares {
                    for &set in &self.sets {
                        for &mode in &self.modes {
                            out.push(Setup {
                                network,
                                servers_percent,
                                set,
                                mode,
                                budget_ms,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Every (setup, seed).
    pub fn runs(&self) -> Vec<Run> {
        self.setups()
            .into_iter()
            .flat_map(|setup| self.seeds.iter().map(move |&seed| Run { setup, seed }))
            .collect()
    }

    /// A rough relative cost of a run, for scheduling the slowest first: file bytes moved
    /// (broadcast modes carry the file to every node), times nodes.
    pub fn weight(&self, run: &Run) -> u64 {
        let s = &run.setup;
        let nodes = self.shape.topology(s.network).nodes() as u64;
        let spread = if s.mode.mode == Mode::Explicit {
            4
        } else {
            nodes
        };
        (s.set.bytes() as u64 / 1_000 + 1) * spread * nodes * s.budget_ms / PAPER_BUDGET_MS
    }

    /// The timers of a call with `budget_ms`: the paper's (30 + 90 + 90 s) scaled to it.
    pub fn timers(budget_ms: u64) -> Timers {
        let scale = |ms: u64| ms * budget_ms / PAPER_BUDGET_MS;
        let paper = Timers::default();
        let ack = scale(wire::time::millis(paper.ack_timeout));
        let result = scale(wire::time::millis(paper.result_timeout));
        Timers {
            ack_timeout: Duration::from_millis(ack),
            result_timeout: Duration::from_millis(result),
            dtn_timeout: Duration::from_millis(budget_ms.saturating_sub(ack + result)),
            resend_interval: paper.resend_interval,
        }
    }

    /// How a file of the set crosses one idle link, whole or in pieces ([`Eval::bundle_piece`]):
    /// the hops of a journey when a call without a result is checked. A `broadcast` file (an
    /// any or all call's, sent to every node) goes whole, as the node sends every broadcast
    /// bundle whole.
    pub fn file_crossing(&self, set: TestSet, broadcast: bool) -> FileCrossing {
        let bytes = set.bytes() as u64;
        let piece = self
            .bundle_piece
            .filter(|&p| p > 0 && p < bytes && !broadcast)
            .unwrap_or(bytes);
        let tx_ms = |n: u64| (n * 8 * 1_000).div_ceil(self.link.bandwidth_bps.max(1));
        let mut pieces_ms = vec![tx_ms(piece); (bytes / piece.max(1)) as usize];
        if !bytes.is_multiple_of(piece.max(1)) || pieces_ms.is_empty() {
            pieces_ms.push(tx_ms(bytes % piece.max(1)));
        }
        FileCrossing {
            pieces_ms,
            latency_ms: self.link.latency_ms,
        }
    }

    /// Where run's client and servers are and whom its explicit calls name. Its own stream of
    /// the seed, so it does not move with the network's draws: the same servers for the same
    /// seed in every mode (as `paper::Fig5::run_cell` places them).
    pub fn placement(&self, run: &Run) -> Placement {
        let nodes = self.shape.topology(run.setup.network).nodes();
        let mut place = Rng::new(run.seed ^ 0x0f19_5e11_ca11_5eed);
        let (client, servers) = match run.setup.servers_percent {
            None => (0, vec![nodes - 1]),
            Some(percent) => {
                let count = ((nodes * percent as usize + 50) / 100).clamp(1, nodes - 1);
                let client = place.below(nodes as u64) as usize;
                let mut others: Vec<usize> = (0..nodes).filter(|&n| n != client).collect();
                let mut servers = Vec::new();
                for _ in 0..count {
                    let k = place.below(others.len() as u64) as usize;
                    servers.push(others.swap_remove(k));
                }
                servers.sort_unstable();
                (client, servers)
            }
        };
        let mut choose = place.fork();
        let explicit_targets = if run.setup.mode.mode == Mode::Explicit {
            (0..self.calls)
                .map(|_| servers[choose.below(servers.len() as u64) as usize])
                .collect()
        } else {
            Vec::new()
        };
        Placement {
            client,
            servers,
            explicit_targets,
        }
    }

    /// The simulator's scenario of a run: its network, links, routing and length. Its
    /// [`Scenario::link_schedule`] is the testbed's schedule too.
    pub fn scenario(&self, run: &Run) -> Scenario {
        let duration =
            self.start_ms + self.calls as u64 * (run.setup.budget_ms + self.gap_ms) + 60_000;
        let mut scenario = Scenario::new(
            run.seed,
            self.shape.topology(run.setup.network),
            self.strategy,
            duration,
        );
        scenario.link = self.link;
        // The calls are all the traffic (Scenario::new comes with a bundle workload).
        scenario.workload.bundles = 0;
        scenario.quota = self.quota;
        scenario.disk = self.disk;
        scenario.max_bundle_piece = self.bundle_piece;
        scenario
    }

    /// Whether any protocol could have answered a call by `transport` made in `window` (ms from
    /// the run's start) as the links came and went (`schedule`): by dtn or transparent, a journey
    /// from `client` to one of `servers` and back, waiting at nodes allowed, each hop taking as
    /// long as the set's file needs on an idle link (sent whole, or in pieces that go on from a
    /// node as they come: [`Eval::file_crossing`]; an any or all call's file is broadcast, so it
    /// goes out whole, and the result's file comes back to the client alone, so in pieces); by
    /// datagram or stream alone, which neither
    /// store nor carry, a path at some instant of the window (for a call refused when made, the
    /// window is that instant), and for a file the journey its dtn-borne file needs. A call
    /// without a result is Ferry's fault only if this holds.
    #[allow(clippy::too_many_arguments)]
    pub fn journey_existed(
        &self,
        schedule: &[crate::LinkEvent],
        nodes: usize,
        client: usize,
        servers: &[usize],
        window: (u64, u64),
        set: TestSet,
        mode: EvalMode,
    ) -> bool {
        let store_carry_forward = || {
            file_round_trip_possible(
                schedule,
                nodes,
                client,
                servers,
                window,
                (
                    &self.file_crossing(set, mode.mode != Mode::Explicit),
                    &self.file_crossing(set, false),
                ),
            )
        };
        match mode.transport {
            Transport::Datagram | Transport::Stream => {
                path_at_some_instant(schedule, nodes, client, servers, window)
                    && (set == TestSet::Zero || store_carry_forward())
            }
            _ => store_carry_forward(),
        }
    }

    /// The file call `k` of a run with `seed` sends in `set` (empty for 0MB): what the echo
    /// gets, and sends back a file of the same length for (the testbed's inverts every byte).
    pub fn call_file(k: usize, seed: u64, set: TestSet) -> bytes::Bytes {
        test_file(k, seed, set.bytes()).0
    }

    /// Runs one setup with one seed: one record per call.
    pub fn run(&self, run: Run) -> Result<Vec<CallRecord>, Violation> {
        let Run { setup, seed } = run;
        let Placement {
            client,
            servers,
            explicit_targets,
        } = self.placement(&run);
        let scenario = self.scenario(&run);
        let nodes = scenario.topology.nodes();

        let mut rpc = RpcApp::new(nodes);
        rpc.stand_in_file_seals(!self.real_seals);
        let with_file = setup.set != TestSet::Zero;
        for &s in &servers {
            let mut echo = if with_file {
                procedure(
                    "echo",
                    &[ParamType::File],
                    Behaviour::EchoFiles { run_ms: 10 },
                )
            } else {
                procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms: 0 })
            };
            // The paper ran without predicates: a server takes every call that comes.
            echo.spec.max_concurrent = 1_000;
            rpc.offer(s, echo);
        }
        let timers = Self::timers(setup.budget_ms);
        let budget = setup.budget_ms;
        let size = setup.set.bytes();
        let mode = setup.mode;
        let pick = explicit_targets.clone();
        let memo = rpc.memo();
        let make = move |k: usize, now: DtnTime| {
            let target = match mode.mode {
                Mode::Explicit => Target::Node(node_id(pick[k])),
                Mode::Any => Target::Any,
                Mode::All => Target::All,
            };
            let param = if with_file {
                Param::File {
                    name: format!("call-{k}.bin"),
                    content: call_file(k, seed, size, &memo),
                }
            } else {
                Param::Value(Value::Text(format!("ping {k}")))
            };
            let mut request = CallRequest::new(target, "echo", vec![param]);
            request.transport = mode.transport;
            request.timers = Some(timers);
            request.deadline = Some(now + Duration::from_millis(budget));
            request
        };
        let app = Sequence {
            rpc,
            client,
            total: self.calls,
            made: 0,
            gap_ms: self.gap_ms,
            next_at: None,
            make,
            first_result: BTreeMap::new(),
            log: None,
        };
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(self.start_ms, client, START);
        let report = sim.run_until(Sequence::done)?;
        let app = sim.app();
        let misses = app.rpc.hollow_misses();
        if misses > 0 {
            // A file that opened to nothing where a real seal opens: records that could differ.
            return Err(Violation {
                seed,
                at_ms: report.simulated_ms,
                node: client,
                what: format!(
                    "{misses} stand-in file(s) arrived whose content the simulator no longer \
                     held; rerun with --real-seals"
                ),
            });
        }
        let mut records = Vec::with_capacity(self.calls);
        for tag in 0..self.calls as u64 {
            let k = tag as usize;
            let mut record = CallRecord {
                source: "sim".into(),
                topology: setup.network.name().into(),
                nodes,
                servers_percent: setup.servers_percent,
                servers: servers.len(),
                set: setup.set.name().into(),
                file_bytes: size as u64,
                mode: mode.mode.name().into(),
                transport: mode.transport.name().into(),
                budget_ms: budget,
                seed,
                call: k,
                client,
                target: explicit_targets.get(k).copied(),
                called_by: String::new(),
                went_dtn: false,
                outcome: Outcome::None,
                result_via: String::new(),
                rtt_ms: None,
                journey: None,
                max_runs: 0,
                servers_ran: 0,
                made_at_ms: 0,
            };
            let made = app.rpc.made_by(tag);
            let eligible: Vec<usize> = match record.target {
                Some(server) => vec![server],
                None => servers.clone(),
            };
            if let Some(id) = made.and_then(|m| m.id.as_ref().ok()) {
                let runs: Vec<u32> = app
                    .rpc
                    .executions
                    .iter()
                    .filter(|((_, call), _)| call == id)
                    .map(|(_, &n)| n)
                    .collect();
                record.max_runs = runs.iter().copied().max().unwrap_or(0);
                record.servers_ran = runs.iter().filter(|&&n| n > 0).count();
            }
            let Some(view) = app.rpc.outcome(tag) else {
                // Never made, or never ended (the run stops once the last call is over, so
                // this is a call the engine refused when it was made).
                let at = made.map_or(0, |m| wire::time::millis(m.at - SIM_EPOCH));
                record.made_at_ms = at;
                record.journey = Some(self.journey_existed(
                    sim.link_events(),
                    nodes,
                    client,
                    &eligible,
                    call_window(at, budget, mode.transport, true),
                    setup.set,
                    mode,
                ));
                records.push(record);
                continue;
            };
            let start = wire::time::millis(view.created - SIM_EPOCH);
            let end = wire::time::millis(view.call.deadline - SIM_EPOCH);
            record.made_at_ms = start;
            record.called_by =
                first_transport(view.timeline.iter().map(|(_, t)| t.as_str())).to_string();
            let s = summarise(view);
            record.went_dtn = s.went_dtn;
            let reply = (view.state == CallState::Succeeded)
                .then(|| complete_result(view))
                .flatten();
            match reply {
                Some(reply) => {
                    record.outcome = if reply.via == "dtn" {
                        Outcome::Dtn
                    } else {
                        Outcome::NonDtn
                    };
                    record.result_via = reply.via.to_string();
                    let done = app.first_result.get(&tag).copied().unwrap_or(reply.at);
                    record.rtt_ms = Some(wire::time::millis(done - view.created));
                }
                None => {
                    record.journey = Some(self.journey_existed(
                        sim.link_events(),
                        nodes,
                        client,
                        &eligible,
                        call_window(start, end - start, mode.transport, false),
                        setup.set,
                        mode,
                    ));
                }
            }
            records.push(record);
        }
        Ok(records)
    }
}

/// The window in which a call made (or `refused`) at `at_ms` with `budget_ms` could have been
/// answered: by dtn or transparent its whole time; by datagram or stream alone, which give up
/// resending at the acknowledgement timer and then only wait, until that timer, and for a call
/// refused when made (no path then), that instant.
pub fn call_window(at_ms: u64, budget_ms: u64, transport: Transport, refused: bool) -> (u64, u64) {
    match transport {
        Transport::Datagram | Transport::Stream if refused => (at_ms, at_ms),
        Transport::Datagram | Transport::Stream => {
            let ack = wire::time::millis(Eval::timers(budget_ms).ack_timeout);
            (at_ms, at_ms + ack)
        }
        _ => (at_ms, at_ms + budget_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_matrix_has_its_size() {
        let e = Eval::default();
        assert_eq!(EvalMode::paper().len(), 10);
        // (hub 2 shares + chained 1 + islands 2) × 3 sets × 10 modes × 2 budgets.
        assert_eq!(e.setups().len(), 5 * 3 * 10 * 2);
        assert_eq!(e.runs().len(), 300 * 3);
        assert_eq!(
            "any-transparent".parse::<EvalMode>().unwrap().name(),
            "any-auto"
        );
        assert!("all-stream".parse::<EvalMode>().is_err());
        assert_eq!("100mb".parse::<TestSet>().unwrap(), TestSet::HundredMb);
        let t = Eval::timers(2 * PAPER_BUDGET_MS);
        assert_eq!(t.default_span(), Duration::from_millis(420_000));
    }

    /// Stand-in seals change how long a run takes, never what it finds: the same records, call
    /// for call, as files sealed for real. Islands cuts links in the middle of transfers, so
    /// envelopes also arrive as fragments put together again.
    #[test]
    fn stand_in_seals_find_what_real_seals_find() {
        for (network, nodes, modes) in [
            (Network::Chained, 6, "all-auto,explicit-dtn"),
            (Network::Islands, 16, "any-auto,explicit-auto"),
        ] {
            let stand_in = Eval {
                networks: vec![network],
                sets: vec![TestSet::OneMb],
                modes: modes.split(',').map(|m| m.parse().unwrap()).collect(),
                servers_percent: vec![25],
                seeds: vec![2],
                budgets_ms: vec![21_000],
                calls: 6,
                shape: Shape {
                    nodes: Some(nodes),
                    islands: 4,
                    period_ms: 1_500,
                },
                ..Eval::default()
            };
            let real = Eval {
                real_seals: true,
                ..stand_in.clone()
            };
            for run in stand_in.runs() {
                let (a, b) = (stand_in.run(run).unwrap(), real.run(run).unwrap());
                assert_eq!(a, b, "{run:?}");
                let answered = a.iter().filter(|r| r.outcome != Outcome::None).count();
                assert!(answered > 0, "{run:?}: nothing answered, nothing compared");
            }
        }
    }
}
