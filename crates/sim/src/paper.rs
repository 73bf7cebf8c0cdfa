//! The DTN-RPC paper's evaluation (A. Sterz, L. Baumgärtner, R. Mogk, M. Mezini and
//! B. Freisleben, "DTN-RPC: Remote Procedure Calls for Disruption-Tolerant Networking", 2017,
//! Sec. V) rerun in the simulator, against Ferry's targets (docs/performance.md, "Targets").
//!
//! - [`Fig5`]: the Islands topology (64 nodes, 4 islands, a random join or split every 60 s), one
//!   client calling an echo procedure 30 times, one call after the other (the next when the
//!   previous has its result or its time is up), each call carrying a 100 MB file that the echo
//!   sends back. Cells: explicit, any (the paper's "implicit") and all × 5 % and 50 % of the nodes
//!   as servers, transport auto (the paper's "transparent"), as in the paper's Fig. 5. A call has
//!   the paper's 210 s (ack 30 s, result 90 s, dtn 90 s; [`Fig5::budget_ms`] scales all three);
//!   a call with no complete result (value and file) by then counts as "no result".
//! - [`ChainRtt`]: the round-trip time of a 0 MB echo call across the paper's Chained topology
//!   (32 nodes, 31 hops), by dtn and by auto, the paper's Fig. 4a (≈ 40 s by dtn).
//!
//! How the file travels: as a `file` parameter on the data channel (a dtn bundle of its own, sent
//! with the call; broadcast for any and all), and back as the echo's result file, of the same
//! length and other bytes ([`Behaviour::EchoFiles`]): the data channel names files by content
//! hash, and a client that already holds the exact bytes it sent would not need the returned copy. So
//! 100 MB crosses the network both ways, as the paper's "both server and client have to wait for
//! two files" says. Each call's file is new (its first bytes name the call), so no server holds it
//! from an earlier call.
//!
//! Everything here is a function of the seeds: the placement of client and servers, the explicit
//! calls' servers and the islands' schedule are drawn from them, and a table is the same on every
//! machine.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use host::Output;
use node::{Event, StrategyKind};
use rpc::{CallRequest, CallState, CallView, Param, ParamType, Target, Timers};
use wire::DtnTime;
use wire::rpc::{CallId, Message, Mode, Transport, Value};

use crate::rpc::{Behaviour, RpcApp, procedure};
use crate::{
    App, LinkEvent, LinkParams, Rng, SIM_EPOCH, Scenario, Sim, SimHost, SimToken, Topology,
    Violation, node_id,
};

/// The paper's time for one call: ack 30 s + result 90 s + dtn 90 s.
pub const PAPER_BUDGET_MS: u64 = 210_000;

/// The action tag that starts a sequence.
pub(crate) const START: u64 = u64::MAX;

/// One client calling one procedure again and again: the next call when the previous one has
/// ended (the paper: "after the client has received the result or all timeouts are reached, the
/// next procedure will be called"). Call `k` has the tag `k` in the [`RpcApp`].
pub(crate) struct Sequence<F: FnMut(usize, DtnTime) -> CallRequest> {
    pub(crate) rpc: RpcApp,
    pub(crate) client: usize,
    pub(crate) total: usize,
    pub(crate) made: usize,
    pub(crate) gap_ms: u64,
    pub(crate) next_at: Option<DtnTime>,
    pub(crate) make: F,
    /// When each call first had a complete result (tag → time).
    pub(crate) first_result: BTreeMap<u64, DtnTime>,
    /// With [`Fig5::debug`]: large data-channel deliveries and drops of data-channel bundles,
    /// (time, node, what).
    pub(crate) log: Option<Vec<(DtnTime, usize, String)>>,
}

impl<F: FnMut(usize, DtnTime) -> CallRequest> Sequence<F> {
    fn current(&self) -> Option<(u64, Result<CallId, ()>)> {
        let tag = self.made.checked_sub(1)? as u64;
        let made = self.rpc.made_by(tag)?;
        Some((tag, made.id.as_ref().map(|id| *id).map_err(|_| ())))
    }

    fn current_over(&self) -> bool {
        match self.current() {
            Some((tag, Ok(_))) => self.rpc.outcome(tag).is_some(),
            Some((_, Err(()))) => true,
            None => false,
        }
    }

    pub(crate) fn done(&self) -> bool {
        self.made == self.total && self.current_over()
    }

    fn make_call(&mut self, now: DtnTime, host: &mut SimHost) {
        let request = (self.make)(self.made, now);
        let tag = self.made as u64;
        self.made += 1;
        self.rpc.call(now, self.client, host, tag, request);
    }

    /// After anything happened at node `i`: note a first complete result, and once the current
    /// call is over, plan the next.
    fn after(&mut self, now: DtnTime, i: usize, host: &SimHost) {
        if i != self.client {
            return;
        }
        if let Some((tag, Ok(id))) = self.current()
            && !self.first_result.contains_key(&tag)
            && host
                .rpc()
                .and_then(|e| e.call_view(&id))
                .is_some_and(|v| complete_result(&v).is_some())
        {
            self.first_result.insert(tag, now);
        }
        if self.next_at.is_none() && self.made > 0 && self.made < self.total && self.current_over()
        {
            self.next_at = Some(now + Duration::from_millis(self.gap_ms));
        }
    }
}

impl<F: FnMut(usize, DtnTime) -> CallRequest> App for Sequence<F> {
    fn started(&mut self, now: DtnTime, i: usize, host: &mut SimHost) {
        self.rpc.started(now, i, host);
    }

    fn output(&mut self, now: DtnTime, i: usize, host: &mut SimHost, output: Output<SimToken>) {
        if let Some(log) = &mut self.log
            && let Output::Node(Event::Dropped { id, reason }) = &output
            && id.source.to_string().contains("~rpc-data")
        {
            log.push((now, i, format!("dropped {id}: {reason:?}")));
        }
        self.rpc.output(now, i, host, output);
        self.after(now, i, host);
    }

    fn timeout(&mut self, now: DtnTime, i: usize, host: &mut SimHost) {
        if i == self.client && self.next_at.is_some_and(|t| t <= now) {
            self.next_at = None;
            self.make_call(now, host);
        }
        self.rpc.timeout(now, i, host);
        self.after(now, i, host);
    }

    fn next_timeout(&self, i: usize) -> Option<DtnTime> {
        let own = if i == self.client { self.next_at } else { None };
        match (self.rpc.next_timeout(i), own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn action(&mut self, now: DtnTime, i: usize, host: &mut SimHost, action: u64) {
        if action == START && i == self.client && self.made == 0 && self.total > 0 {
            self.make_call(now, host);
            self.after(now, i, host);
        } else {
            self.rpc.action(now, i, host, action);
        }
    }
}

/// The first reply that is a complete result (its files all here).
pub(crate) fn complete_result(view: &CallView) -> Option<&rpc::Reply> {
    view.replies
        .iter()
        .find(|r| matches!(r.message, Message::Result(_)) && r.missing_files == 0)
}

/// How one call went, read from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CallSummary {
    pub(crate) first_realtime: bool,
    pub(crate) went_dtn: bool,
    pub(crate) result_realtime: Option<bool>,
}

pub(crate) fn summarise(view: &CallView) -> CallSummary {
    let first = view.timeline.first().map(|(_, t)| t.as_str()).unwrap_or("");
    let first_realtime = first.starts_with("called")
        && (first.contains(" by stream") || first.contains(" by datagram"));
    let went_dtn = crate::eval_record::went_dtn(view.timeline.iter().map(|(_, t)| t.as_str()));
    let result_realtime = (view.state == CallState::Succeeded)
        .then(|| complete_result(view).map(|r| r.via != "dtn"))
        .flatten();
    CallSummary {
        first_realtime,
        went_dtn,
        result_realtime,
    }
}

// ----- Fig. 5 -----

/// One cell of the paper's Fig. 5: an addressing mode and the share of nodes that serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fig5Cell {
    /// Explicit, any (the paper's "implicit") or all.
    pub mode: Mode,
    /// Servers, per cent of the nodes (the paper: 5 and 50).
    pub servers_percent: u32,
}

impl Fig5Cell {
    /// The paper's six cells: explicit, any, all × 5 %, 50 %.
    pub fn paper() -> Vec<Fig5Cell> {
        [Mode::Explicit, Mode::Any, Mode::All]
            .into_iter()
            .flat_map(|mode| {
                [5, 50].map(|servers_percent| Fig5Cell {
                    mode,
                    servers_percent,
                })
            })
            .collect()
    }

    /// How many of `nodes` serve (rounded; at least one).
    pub fn servers(&self, nodes: usize) -> usize {
        ((nodes * self.servers_percent as usize + 50) / 100).clamp(1, nodes.saturating_sub(1))
    }

    /// The share of calls without a result the paper reports for this cell (Sec. V-F, 100 MB):
    /// explicit with 50 % servers 41.9 %, implicit with 5 % servers 27.8 %. The other cells' pie
    /// charts carry no figure in the text.
    pub fn paper_no_result_percent(&self) -> Option<f64> {
        match (self.mode, self.servers_percent) {
            (Mode::Explicit, 50) => Some(41.9),
            (Mode::Any, 5) => Some(27.8),
            _ => None,
        }
    }

    /// Ferry's target for a 210 s call (docs/performance.md), "no cell worse than half the paper's loss": half the
    /// paper's figure for this cell where it has one, otherwise half the figure of the same
    /// family. Explicit: 41.9 % / 2; the paper says more servers answered more explicit calls, so
    /// its explicit 5 % lost more and this is stricter than half of it. Any and all (the paper's
    /// implicit modes): 27.8 % / 2; for any and all with 50 % servers the paper gives no figure
    /// and may have lost fewer, so there the target may be lenient.
    pub fn half_paper_target_percent(&self) -> f64 {
        match self.mode {
            Mode::Explicit => 41.9 / 2.0,
            Mode::Any | Mode::All => 27.8 / 2.0,
        }
    }

    /// `explicit 5 %`.
    pub fn name(&self) -> String {
        let mode = match self.mode {
            Mode::Explicit => "explicit",
            Mode::Any => "any",
            Mode::All => "all",
        };
        format!("{mode} {} %", self.servers_percent)
    }
}

/// The paper's Islands experiment (Fig. 5): what to run.
#[derive(Debug, Clone)]
pub struct Fig5 {
    /// One run per seed and cell.
    pub seeds: Vec<u64>,
    /// The cells.
    pub cells: Vec<Fig5Cell>,
    /// Calls per run (the paper: 30).
    pub calls: usize,
    /// The file each call carries and gets back (the paper's 100MB test set: 100 MB).
    pub file_bytes: usize,
    /// Every link's bandwidth, latency and loss.
    pub link: LinkParams,
    /// The time each call has: its deadline, with the paper's ack, result and dtn timers scaled
    /// to it (the paper: 210 s = 30 + 90 + 90 s).
    pub budget_ms: u64,
    /// The network (the paper's Islands).
    pub topology: Topology,
    /// Store-carry-forward routing.
    pub strategy: StrategyKind,
    /// Store quota of each node.
    pub quota: u64,
    /// When the first call is made (the mesh has formed by then).
    pub start_ms: u64,
    /// Data-channel bytes each node's RPC engine keeps at once (`RpcConfig::max_file_bytes`;
    /// the engine's default is 1 GiB).
    pub file_budget: u64,
    /// How long an any-mode server waits for another's STARTED before it starts
    /// (`RpcConfig::any_start_jitter_ms`; the default is the engine's, 250 ms).
    pub any_start_jitter_ms: u64,
    /// Print, for each call without a result, what happened to it (its timeline, its runs per
    /// server, the journeys, the bridges between islands, every transfer and drop of
    /// its large bundles) to stderr. `ferry sim --rpc fig5` sets it when `FERRY_FIG5_DEBUG` is
    /// set; this crate reads no environment.
    pub debug: bool,
}

impl Default for Fig5 {
    /// The paper's setup: Islands, 30 calls, 100 MB, 210 s, explicit/any/all × 5/50 % servers;
    /// links of 100 Mbit/s and 5 ms (below the ≈250 Mbit/s a hop the paper's CORE links carried:
    /// its Fig. 3a stacks up to 500 Mbit/s over both ends of the one hop a file crosses at a time
    /// in Chained); epidemic routing; 10 GB stores (`ferry node`'s default); the engine's
    /// defaults but for the any-mode start jitter (see [`Fig5::any_start_jitter_ms`]); seeds 1–3.
    fn default() -> Self {
        Self {
            seeds: vec![1, 2, 3],
            cells: Fig5Cell::paper(),
            calls: 30,
            file_bytes: 100_000_000,
            link: LinkParams {
                bandwidth_bps: 100_000_000,
                latency_ms: 5,
                loss: 0.0,
            },
            budget_ms: PAPER_BUDGET_MS,
            topology: Topology::islands(),
            strategy: StrategyKind::Epidemic,
            quota: 10_000_000_000,
            start_ms: 10_000,
            file_budget: rpc::RpcConfig::default().max_file_bytes,
            any_start_jitter_ms: wire::time::millis(rpc::RpcConfig::default().any_start_jitter),
            debug: false,
        }
    }
}

/// What one run of one cell measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellRun {
    /// The seed.
    pub seed: u64,
    /// Calls made.
    pub calls: usize,
    /// Calls first sent in real time (stream for explicit, datagram broadcast for any and all).
    pub called_realtime: usize,
    /// Calls sent by dtn, at first (explicit: server not reachable) or as a fallback.
    pub called_dtn: usize,
    /// Calls whose first complete result came in real time (its value; files always ride dtn).
    pub results_realtime: usize,
    /// Calls whose first complete result came by dtn.
    pub results_dtn: usize,
    /// Calls with no complete result within their time.
    pub no_result: usize,
    /// Of those, the calls no protocol could have answered: the links as they came and went
    /// offered no journey from the client to a server it called and back within the call's time,
    /// even with store-carry-forward at every node and each hop taking only the time the call's
    /// file needs on an idle link ([`Fig5::file_hop_ms`]).
    pub no_path: usize,
    /// Time from each call to its first complete result, ms, ascending.
    pub result_ms: Vec<u64>,
    /// The node that called.
    pub client: usize,
    /// The nodes that served.
    pub servers: Vec<usize>,
    /// The most times any call ran on one server (at most once: ≤ 1).
    pub max_executions: u32,
    /// Data-channel files the client's engine refused (over its file budget).
    pub client_files_refused: u64,
    /// Data-channel files the other nodes' engines refused.
    pub others_files_refused: u64,
    /// Events the simulator processed.
    pub events: u64,
    /// Virtual time simulated, ms.
    pub simulated_ms: u64,
}

impl CellRun {
    /// No result, per cent of the calls.
    pub fn no_result_percent(&self) -> f64 {
        percent(self.no_result, self.calls)
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// One row of the table: a cell over every seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Fig5Row {
    /// The cell.
    pub cell: Fig5Cell,
    /// One run per seed.
    pub runs: Vec<CellRun>,
    /// The paper's figure, if it gives one.
    pub paper_percent: Option<f64>,
    /// The most calls without a result the target allows, per cent.
    pub target_percent: f64,
}

impl Fig5Row {
    fn sum(&self, f: impl Fn(&CellRun) -> usize) -> usize {
        self.runs.iter().map(f).sum()
    }

    /// Calls whose first complete result came in real time, over every seed.
    pub fn sum_results_realtime(&self) -> usize {
        self.sum(|r| r.results_realtime)
    }

    /// Calls sent by dtn (at first or as a fallback), over every seed.
    pub fn sum_called_dtn(&self) -> usize {
        self.sum(|r| r.called_dtn)
    }

    /// Calls over every seed.
    pub fn calls(&self) -> usize {
        self.sum(|r| r.calls)
    }

    /// Mean share of calls without a result over the seeds, per cent.
    pub fn mean_no_result_percent(&self) -> f64 {
        percent(self.sum(|r| r.no_result), self.calls())
    }

    /// The worst seed's share of calls without a result, per cent.
    pub fn worst_no_result_percent(&self) -> f64 {
        self.runs
            .iter()
            .map(CellRun::no_result_percent)
            .fold(0.0, f64::max)
    }

    /// Whether the worst seed meets the target.
    pub fn passes(&self) -> bool {
        self.worst_no_result_percent() <= self.target_percent + 1e-9
    }
}

/// The Fig. 5 table: one row per cell.
#[derive(Debug, Clone)]
pub struct Fig5Table {
    /// What was run.
    pub setup: Fig5,
    /// The rows, in the order of the setup's cells.
    pub rows: Vec<Fig5Row>,
}

impl Fig5Table {
    /// Whether every row meets its target.
    pub fn passes(&self) -> bool {
        self.rows.iter().all(Fig5Row::passes)
    }
}

impl Fig5 {
    /// How long a call's file takes to cross one idle link (bandwidth and latency): the time a
    /// hop of a journey takes when "no path" asks whether any protocol could have answered.
    pub fn file_hop_ms(&self) -> u64 {
        let bits = self.file_bytes as u64 * 8;
        let bps = self.link.bandwidth_bps.max(1);
        (bits * 1_000).div_ceil(bps) + self.link.latency_ms
    }

    /// The timers of a call: the paper's, scaled to [`Fig5::budget_ms`].
    pub fn timers(&self) -> Timers {
        let scale = |ms: u64| ms * self.budget_ms / PAPER_BUDGET_MS;
        let paper = Timers::default();
        Timers {
            ack_timeout: Duration::from_millis(scale(wire::time::millis(paper.ack_timeout))),
            result_timeout: Duration::from_millis(scale(wire::time::millis(paper.result_timeout))),
            dtn_timeout: Duration::from_millis(
                self.budget_ms
                    - scale(wire::time::millis(paper.ack_timeout))
                    - scale(wire::time::millis(paper.result_timeout)),
            ),
            resend_interval: paper.resend_interval,
        }
    }

    /// The target for a cell: half the paper's loss at the paper's 210 s, none at all with twice
    /// the time or more.
    pub fn target_percent(&self, cell: Fig5Cell) -> f64 {
        if self.budget_ms >= 2 * PAPER_BUDGET_MS {
            0.0
        } else {
            cell.half_paper_target_percent()
        }
    }

    /// Runs every cell with every seed.
    pub fn run(&self) -> Result<Fig5Table, Violation> {
        let mut runs = Vec::new();
        for &cell in &self.cells {
            for &seed in &self.seeds {
                runs.push((cell, self.run_cell(cell, seed)?));
            }
        }
        Ok(self.table(runs))
    }

    /// The table of these runs (from [`Fig5::run_cell`], in any order): one row per cell of the
    /// setup, its runs by seed.
    pub fn table(&self, runs: Vec<(Fig5Cell, CellRun)>) -> Fig5Table {
        let rows = self
            .cells
            .iter()
            .map(|&cell| {
                let mut mine: Vec<CellRun> = runs
                    .iter()
                    .filter(|(c, _)| *c == cell)
                    .map(|(_, r)| r.clone())
                    .collect();
                mine.sort_by_key(|r| r.seed);
                Fig5Row {
                    cell,
                    runs: mine,
                    paper_percent: cell.paper_no_result_percent(),
                    target_percent: self.target_percent(cell),
                }
            })
            .collect();
        Fig5Table {
            setup: self.clone(),
            rows,
        }
    }

    /// One run of one cell.
    pub fn run_cell(&self, cell: Fig5Cell, seed: u64) -> Result<CellRun, Violation> {
        let nodes = self.topology.nodes();
        // Placement has a stream of its own, so it does not move with the network's draws.
        let mut place = Rng::new(seed ^ 0x0f19_5e11_ca11_5eed);
        let client = place.below(nodes as u64) as usize;
        let mut others: Vec<usize> = (0..nodes).filter(|&n| n != client).collect();
        let mut servers = Vec::new();
        for _ in 0..cell.servers(nodes) {
            let k = place.below(others.len() as u64) as usize;
            servers.push(others.swap_remove(k));
        }
        servers.sort_unstable();

        let mut rpc = RpcApp::new(nodes);
        for n in 0..nodes {
            rpc.configure(n, |c| {
                c.max_file_bytes = self.file_budget;
                c.any_start_jitter = Duration::from_millis(self.any_start_jitter_ms);
            });
        }
        for &s in &servers {
            let mut echo = procedure(
                "echo",
                &[ParamType::File],
                Behaviour::EchoFiles { run_ms: 10 },
            );
            // The paper ran without predicates: a server takes every call that comes.
            echo.spec.max_concurrent = 1_000;
            rpc.offer(s, echo);
        }
        let timers = self.timers();
        let budget = self.budget_ms;
        let size = self.file_bytes;
        let mode = cell.mode;
        let pick = servers.clone();
        let mut choose = place.fork();
        let memo = rpc.memo();
        let make = move |k: usize, now: DtnTime| {
            let target = match mode {
                Mode::Explicit => {
                    Target::Node(node_id(pick[choose.below(pick.len() as u64) as usize]))
                }
                Mode::Any => Target::Any,
                Mode::All => Target::All,
            };
            let mut request = CallRequest::new(
                target,
                "echo",
                vec![Param::File {
                    name: format!("call-{k}.bin"),
                    content: call_file(k, seed, size, &memo),
                }],
            );
            request.transport = Transport::Auto;
            request.timers = Some(timers);
            request.deadline = Some(now + Duration::from_millis(budget));
            request
        };
        let gap_ms = 1_000;
        let debug = self.debug;
        let app = Sequence {
            rpc,
            client,
            total: self.calls,
            made: 0,
            gap_ms,
            next_at: None,
            make,
            first_result: BTreeMap::new(),
            log: debug.then(Vec::new),
        };
        let duration = self.start_ms + self.calls as u64 * (budget + gap_ms) + 60_000;
        let mut scenario = Scenario::new(seed, self.topology.clone(), self.strategy, duration);
        scenario.link = self.link;
        // The calls are all the traffic (Scenario::new comes with a bundle workload).
        scenario.workload.bundles = 0;
        scenario.quota = self.quota;
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(self.start_ms, client, START);
        if debug {
            sim.log_transfers(1_000_000);
        }
        let report = sim.run_until(Sequence::done)?;
        let app = sim.app();
        let refused = |n: usize| sim.engine(n).map_or(0, |e| e.stats().files_refused);
        let mut run = CellRun {
            seed,
            calls: self.calls,
            called_realtime: 0,
            called_dtn: 0,
            results_realtime: 0,
            results_dtn: 0,
            no_result: 0,
            no_path: 0,
            result_ms: Vec::new(),
            client,
            servers,
            max_executions: app.rpc.max_executions(),
            client_files_refused: refused(client),
            others_files_refused: (0..nodes).filter(|&n| n != client).map(refused).sum(),
            events: report.events,
            simulated_ms: report.simulated_ms,
        };
        for tag in 0..self.calls as u64 {
            let Some(view) = app.rpc.outcome(tag) else {
                run.no_result += 1;
                continue;
            };
            let s = summarise(view);
            if s.result_realtime.is_none() {
                // Could anything have answered it? The servers it could reach, then a journey
                // there and back through the links as they came and went.
                let eligible: Vec<usize> = match &view.call.server {
                    Some(server) => run
                        .servers
                        .iter()
                        .copied()
                        .filter(|&n| node_id(n) == *server)
                        .collect(),
                    None => run.servers.clone(),
                };
                let start = wire::time::millis(view.created - SIM_EPOCH);
                let end = wire::time::millis(view.call.deadline - SIM_EPOCH);
                let hop_ms = self.file_hop_ms();
                let span = (start, end);
                if !round_trip_possible(sim.link_events(), nodes, client, &eligible, span, hop_ms) {
                    run.no_path += 1;
                }
                if debug {
                    eprintln!(
                        "{}",
                        self.debug_call(&sim, cell, seed, tag, view, client, &run.servers)
                    );
                }
            }
            run.called_realtime += usize::from(s.first_realtime);
            run.called_dtn += usize::from(s.went_dtn);
            match s.result_realtime {
                Some(true) => run.results_realtime += 1,
                Some(false) => run.results_dtn += 1,
                None => run.no_result += 1,
            }
            if s.result_realtime.is_some()
                && let Some(at) = app.first_result.get(&tag)
            {
                run.result_ms.push(wire::time::millis(*at - view.created));
            }
        }
        run.result_ms.sort_unstable();
        Ok(run)
    }
}

impl Fig5 {
    /// What happened to a call without a result ([`Fig5::debug`]): its timeline, its runs on
    /// the servers, the journeys the links offered, the bridges between islands as they came and
    /// went, and every transfer and drop of the large bundles made during the call.
    #[allow(clippy::too_many_arguments)]
    fn debug_call<F: FnMut(usize, DtnTime) -> CallRequest>(
        &self,
        sim: &Sim<Sequence<F>>,
        cell: Fig5Cell,
        seed: u64,
        tag: u64,
        view: &CallView,
        client: usize,
        servers: &[usize],
    ) -> String {
        use std::fmt::Write as _;
        let nodes = self.topology.nodes();
        let start = wire::time::millis(view.created - SIM_EPOCH);
        let end = wire::time::millis(view.call.deadline - SIM_EPOCH);
        let t = |ms: u64| format!("+{:.3} s", (ms as f64 - start as f64) / 1e3);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "== {} seed {seed}: call {tag} without a result, {} s .. {} s (client n{client}, island {}; servers {}), {}",
            cell.name(),
            start as f64 / 1e3,
            end as f64 / 1e3,
            self.topology.island_of(client),
            servers
                .iter()
                .map(|s| format!("n{s} (island {})", self.topology.island_of(*s)))
                .collect::<Vec<_>>()
                .join(", "),
            view.state.name()
        );
        for (at, line) in &view.timeline {
            let _ = writeln!(
                out,
                "  {:>10}  {line}",
                t(wire::time::millis(*at - SIM_EPOCH))
            );
        }
        let app = sim.app();
        for &s in servers {
            let runs = app
                .rpc
                .executions
                .get(&(s, view.call.id))
                .copied()
                .unwrap_or(0);
            let hop = self.file_hop_ms();
            let there = earliest_arrivals(sim.link_events(), nodes, client, start, end, hop)[s];
            let back = there.and_then(|at| {
                earliest_arrivals(sim.link_events(), nodes, s, at, end, hop)[client]
            });
            let _ = writeln!(
                out,
                "  server n{s}: ran {runs} time(s); journey there at {}, back at {}",
                there.map_or("never".into(), t),
                back.map_or("never".into(), t)
            );
        }
        let _ = writeln!(out, "  bridges (links between islands) during the call:");
        let mut up: BTreeSet<(usize, usize)> = BTreeSet::new();
        for e in sim.link_events() {
            if e.at > end {
                break;
            }
            if self.topology.island_of(e.a) == self.topology.island_of(e.b) {
                continue;
            }
            apply(&mut up, e, nodes);
            if e.at >= start.saturating_sub(60_000) {
                let _ = writeln!(
                    out,
                    "  {:>10}  n{}(i{}) - n{}(i{}) {}",
                    t(e.at),
                    e.a,
                    self.topology.island_of(e.a),
                    e.b,
                    self.topology.island_of(e.b),
                    if e.up { "up" } else { "down" }
                );
            }
        }
        let _ = writeln!(out, "  large transfers of bundles made during the call:");
        let mine = |id: &wire::BundleId| {
            let c = wire::time::millis(id.creation.time - SIM_EPOCH);
            c >= start && c <= end
        };
        for x in sim.transfers() {
            if !mine(&x.id) {
                continue;
            }
            let _ = writeln!(
                out,
                "  {:>10}  n{} -> n{} (i{} -> i{})  {} -> {}  {}",
                t(x.at_ms),
                x.from,
                x.to,
                self.topology.island_of(x.from),
                self.topology.island_of(x.to),
                x.id,
                x.destination,
                x.what
            );
        }
        let _ = writeln!(out, "  deliveries and drops of those bundles:");
        for (at, n, what) in app.log.iter().flatten() {
            let at = wire::time::millis(*at - SIM_EPOCH);
            if at >= start && at <= end + 1_000 {
                let _ = writeln!(out, "  {:>10}  n{n}: {what}", t(at));
            }
        }
        out
    }
}

/// When something leaving `from` at `start` (ms from the run's start) can first be at each node,
/// carried over the links as they come and go (`events`, in time order) and kept by every node it
/// reaches, each hop taking `hop_ms` during which its link must stay up (0: instant transfers):
/// the earliest any protocol could deliver it at these link rates, contention aside.
fn earliest_arrivals(
    events: &[LinkEvent],
    nodes: usize,
    from: usize,
    start: u64,
    until: u64,
    hop_ms: u64,
) -> Vec<Option<u64>> {
    if from >= nodes {
        return vec![None; nodes];
    }
    let spans = link_spans(events, nodes, until);
    let hop = Hop {
        tx: hop_ms,
        latency: 0,
    };
    arrivals_over(&spans, from, start, until, hop, &BTreeMap::new()).0
}

/// One hop of something carried: how long it holds its link, and the latency on top.
#[derive(Clone, Copy)]
struct Hop {
    tx: u64,
    latency: u64,
}

/// For each node, the neighbour a hop reached it from and when it left there.
type CameBy = Vec<Option<(usize, u64)>>;

/// Dijkstra over time from `from` at `start` through the links' spans of being up: when
/// something can first be at each node, and for each the neighbour it came from and when it left
/// there. Waiting is allowed, so a later start never arrives earlier. A hop holds its link (in
/// that direction) for `hop.tx`, within one span and outside the times `held` lists for it.
fn arrivals_over(
    spans: &[Vec<(usize, u64, u64)>],
    from: usize,
    start: u64,
    until: u64,
    hop: Hop,
    held: &BTreeMap<(usize, usize), Vec<(u64, u64)>>,
) -> (Vec<Option<u64>>, CameBy) {
    let nodes = spans.len();
    let mut arrival: Vec<Option<u64>> = vec![None; nodes];
    let mut came_by: CameBy = vec![None; nodes];
    let mut queue = std::collections::BinaryHeap::new();
    arrival[from] = Some(start);
    queue.push(std::cmp::Reverse((start, from)));
    while let Some(std::cmp::Reverse((t, u))) = queue.pop() {
        if arrival[u] != Some(t) {
            continue;
        }
        for &(v, s, e) in &spans[u] {
            let busy = held.get(&(u, v)).map_or(&[][..], Vec::as_slice);
            let Some(depart) = first_free(busy, t.max(s), hop.tx) else {
                continue;
            };
            let arrive = depart.saturating_add(hop.tx + hop.latency);
            if depart >= e || depart.saturating_add(hop.tx) > e || arrive > until {
                continue;
            }
            if arrival[v].is_none_or(|old| arrive < old) {
                arrival[v] = Some(arrive);
                came_by[v] = Some((u, depart));
                queue.push(std::cmp::Reverse((arrive, v)));
            }
        }
    }
    (arrival, came_by)
}

/// A file as it crosses a link: the time each of its pieces holds the link, in the order they
/// are sent (one piece for a file sent whole), and the link's latency on top of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCrossing {
    /// Transmission time of each piece, ms.
    pub pieces_ms: Vec<u64>,
    /// One-way latency of a link, ms.
    pub latency_ms: u64,
}

impl FileCrossing {
    /// A file sent whole, taking `hop_ms` a hop (latency included).
    #[cfg(test)]
    fn whole(hop_ms: u64) -> Self {
        Self {
            pieces_ms: vec![hop_ms],
            latency_ms: 0,
        }
    }
}

/// When all of a file leaving `from` at `start` could first be at `to`, its pieces placed one
/// after another on the earliest way through the links' spans of being up (`spans`, from
/// [`link_spans`] up to `until`), a piece holding its
/// link (in that direction) for its transmission time, during which the link must stay up, and
/// no two pieces holding one link at once; `None` if not all are there by `until`. Pieces go on
/// from a node as soon as they are there, so a file in pieces crosses several hops in about the
/// time of one. Placing each piece on its earliest way is not always the best placement of them
/// all, but for pieces in a row along one way it is.
fn file_arrival(
    spans: &[Vec<(usize, u64, u64)>],
    (from, to): (usize, usize),
    start: u64,
    until: u64,
    file: &FileCrossing,
) -> Option<u64> {
    let nodes = spans.len();
    if from >= nodes || to >= nodes {
        return None;
    }
    if from == to {
        return Some(start);
    }
    // Each directed link's times held by pieces placed before, sorted.
    let mut held: BTreeMap<(usize, usize), Vec<(u64, u64)>> = BTreeMap::new();
    let mut done = start;
    for &tx in &file.pieces_ms {
        let hop = Hop {
            tx,
            latency: file.latency_ms,
        };
        let (arrival, came_by) = arrivals_over(spans, from, start, until, hop, &held);
        let at = arrival[to]?;
        done = done.max(at);
        let mut v = to;
        while let Some((u, depart)) = came_by[v] {
            let times = held.entry((u, v)).or_default();
            let k = times.partition_point(|&(a, _)| a < depart);
            times.insert(k, (depart, depart + tx));
            v = u;
        }
    }
    Some(done)
}

/// The first time from `t` at which a link held at `busy` (sorted, not overlapping) is free for
/// `tx` ms.
fn first_free(busy: &[(u64, u64)], mut t: u64, tx: u64) -> Option<u64> {
    for &(a, b) in busy {
        if b <= t {
            continue;
        }
        if t.checked_add(tx)? <= a {
            break;
        }
        t = b;
    }
    Some(t)
}

/// Each node's links' spans of being up, [since, until), as (neighbour, since, until).
fn link_spans(events: &[LinkEvent], nodes: usize, until: u64) -> Vec<Vec<(usize, u64, u64)>> {
    let mut since: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut spans: Vec<Vec<(usize, u64, u64)>> = vec![Vec::new(); nodes];
    let add = |spans: &mut Vec<Vec<(usize, u64, u64)>>, (a, b): (usize, usize), s, e| {
        spans[a].push((b, s, e));
        spans[b].push((a, s, e));
    };
    for e in events {
        if e.a >= nodes || e.b >= nodes || e.a == e.b || e.at > until {
            continue;
        }
        let key = (e.a.min(e.b), e.a.max(e.b));
        if e.up {
            since.entry(key).or_insert(e.at);
        } else if let Some(s) = since.remove(&key) {
            add(&mut spans, key, s, e.at);
        }
    }
    for (key, s) in since {
        add(&mut spans, key, s, u64::MAX);
    }
    spans
}

/// Whether a call from `client` between `start` and `end` could have sent its file to one of
/// `servers` (crossing links as `out` does) and had the result's file of the same size back in
/// time (as `back` does): [`file_arrival`] both ways. Files sent whole both ways are
/// [`round_trip_possible`].
pub(crate) fn file_round_trip_possible(
    events: &[LinkEvent],
    nodes: usize,
    client: usize,
    servers: &[usize],
    (start, end): (u64, u64),
    (out, back): (&FileCrossing, &FileCrossing),
) -> bool {
    if let ([o], [b]) = (&out.pieces_ms[..], &back.pieces_ms[..])
        && o + out.latency_ms == b + back.latency_ms
    {
        return round_trip_possible(
            events,
            nodes,
            client,
            servers,
            (start, end),
            o + out.latency_ms,
        );
    }
    // A piece alone is the least the file needs: servers that not even one piece could reach
    // in time are not tried piece by piece. For a file sent whole, this is its arrival.
    let first = out.pieces_ms.first().copied().unwrap_or(0) + out.latency_ms;
    let reached = earliest_arrivals(events, nodes, client, start, end, first);
    let spans = link_spans(events, nodes, end);
    servers.iter().any(|&s| {
        let Some(lower) = reached.get(s).copied().flatten() else {
            return false;
        };
        let there = if out.pieces_ms.len() == 1 {
            Some(lower)
        } else {
            file_arrival(&spans, (client, s), start, end, out)
        };
        there.is_some_and(|at| file_arrival(&spans, (s, client), at, end, back).is_some())
    })
}

fn apply(up: &mut BTreeSet<(usize, usize)>, e: &LinkEvent, nodes: usize) {
    if e.a >= nodes || e.b >= nodes || e.a == e.b {
        return;
    }
    let key = (e.a.min(e.b), e.a.max(e.b));
    if e.up {
        up.insert(key);
    } else {
        up.remove(&key);
    }
}

/// Whether a call from `client` between `start` and `end` could have reached one of `servers`
/// and come back in time, on the links of `events`, each hop taking `hop_ms` (the call's file
/// crosses a link out, the result's file back).
pub(crate) fn round_trip_possible(
    events: &[LinkEvent],
    nodes: usize,
    client: usize,
    servers: &[usize],
    (start, end): (u64, u64),
    hop_ms: u64,
) -> bool {
    let out = earliest_arrivals(events, nodes, client, start, end, hop_ms);
    servers.iter().any(|&s| {
        out.get(s).copied().flatten().is_some_and(|at| {
            earliest_arrivals(events, nodes, s, at, end, hop_ms)
                .get(client)
                .copied()
                .flatten()
                .is_some()
        })
    })
}

/// Whether at some instant of `window` the links then up joined `client` to one of `servers`:
/// what a call by datagram or by stream alone needs, as neither stores and carries (a path that
/// exists only piecewise over time is no use to it).
pub(crate) fn path_at_some_instant(
    events: &[LinkEvent],
    nodes: usize,
    client: usize,
    servers: &[usize],
    (start, end): (u64, u64),
) -> bool {
    let mut up: BTreeSet<(usize, usize)> = BTreeSet::new();
    let connected = |up: &BTreeSet<(usize, usize)>| {
        let mut seen = vec![false; nodes];
        let mut stack = vec![client];
        while let Some(u) = stack.pop() {
            if u >= nodes || std::mem::replace(&mut seen[u], true) {
                continue;
            }
            if servers.contains(&u) {
                return true;
            }
            for &(a, b) in up {
                if a == u {
                    stack.push(b);
                } else if b == u {
                    stack.push(a);
                }
            }
        }
        false
    };
    let mut sorted: Vec<&LinkEvent> = events.iter().filter(|e| e.at <= end).collect();
    sorted.sort_by_key(|e| e.at);
    // The state in force at each instant: after all the changes of one time, from the last one
    // at or before the window's start.
    let mut k = 0;
    while k < sorted.len() {
        let at = sorted[k].at;
        while k < sorted.len() && sorted[k].at == at {
            let e = sorted[k];
            let key = (e.a.min(e.b), e.a.max(e.b));
            if e.up {
                up.insert(key);
            } else {
                up.remove(&key);
            }
            k += 1;
        }
        let next = sorted.get(k).map_or(u64::MAX, |e| e.at);
        // In force over [at, next): does that span meet the window?
        if next > start && connected(&up) {
            return true;
        }
    }
    false
}

/// The file call `k` carries: `size` bytes whose first bytes name the call and the seed, so every
/// call's file has a hash of its own, and the rest zeros (`made_files`); and its hash.
pub(crate) fn test_file(k: usize, seed: u64, size: usize) -> (Bytes, [u8; 32]) {
    let mut head = b"ferry fig5 call ".to_vec();
    head.extend_from_slice(&(k as u64).to_le_bytes());
    head.extend_from_slice(&seed.to_le_bytes());
    crate::made_files::zero_tailed(&head, size)
}

/// [`test_file`], its hash told to the engines sharing `memo`.
pub(crate) fn call_file(k: usize, seed: u64, size: usize, memo: &rpc::SharedMemo) -> Bytes {
    let (content, hash) = test_file(k, seed, size);
    memo.note_hash(&content, hash);
    content
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1_000) {
        format!("{} s", ms / 1_000)
    } else {
        format!("{:.1} s", ms as f64 / 1e3)
    }
}

fn rate(bps: u64) -> String {
    if bps.is_multiple_of(1_000_000) {
        format!("{} Mbit/s", bps / 1_000_000)
    } else {
        format!("{:.3} Mbit/s", bps as f64 / 1e6)
    }
}

fn bytes_text(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{} GiB", n >> 30)
    } else if n >= 1_000_000_000 {
        format!("{:.0} GB", n as f64 / 1e9)
    } else {
        format!("{:.0} MB", n as f64 / 1e6)
    }
}

fn seed_list(seeds: &[u64]) -> String {
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Fig5Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let setup = &self.setup;
        let timers = setup.timers();
        writeln!(
            f,
            "{} ({} nodes), {} calls × {} MB echo (file both ways), {} per call (ack {} + result {} + dtn {}), links {} / {} ms, seeds {}",
            setup.topology,
            setup.topology.nodes(),
            setup.calls,
            setup.file_bytes / 1_000_000,
            seconds(setup.budget_ms),
            seconds(wire::time::millis(timers.ack_timeout)),
            seconds(wire::time::millis(timers.result_timeout)),
            seconds(wire::time::millis(timers.dtn_timeout)),
            rate(setup.link.bandwidth_bps),
            setup.link.latency_ms,
            seed_list(&setup.seeds)
        )?;
        writeln!(
            f,
            "engine: file budget {} per node{}, any-mode start jitter {} ms{}",
            bytes_text(setup.file_budget),
            if setup.file_budget == rpc::RpcConfig::default().max_file_bytes {
                " (default)"
            } else {
                ""
            },
            setup.any_start_jitter_ms,
            if setup.any_start_jitter_ms
                == wire::time::millis(rpc::RpcConfig::default().any_start_jitter)
            {
                " (default)"
            } else {
                " (the engine's default is 250 ms)"
            }
        )?;
        writeln!(
            f,
            "{:<12} {:>5} {:>13} {:>6} {:>6} {:>9} {:>7} {:>8} {:>8} {:>13} {:>7} {:>7} {:>4}",
            "cell",
            "calls",
            "called rt/dtn",
            "res rt",
            "res dtn",
            "no result",
            "no path",
            "refused",
            "mean",
            "worst (seed)",
            "paper",
            "target",
            ""
        )?;
        for row in &self.rows {
            let worst = row
                .runs
                .iter()
                .max_by(|a, b| a.no_result_percent().total_cmp(&b.no_result_percent()))
                .map_or("-".to_string(), |r| {
                    format!("{:.1} % ({})", r.no_result_percent(), r.seed)
                });
            writeln!(
                f,
                "{:<12} {:>5} {:>13} {:>6} {:>6} {:>9} {:>7} {:>8} {:>6.1} % {:>13} {:>7} {:>7} {:>4}",
                row.cell.name(),
                row.calls(),
                format!(
                    "{}/{}",
                    row.sum(|r| r.called_realtime),
                    row.sum(|r| r.called_dtn)
                ),
                row.sum(|r| r.results_realtime),
                row.sum(|r| r.results_dtn),
                row.sum(|r| r.no_result),
                row.sum(|r| r.no_path),
                row.runs
                    .iter()
                    .map(|r| r.client_files_refused + r.others_files_refused)
                    .sum::<u64>(),
                row.mean_no_result_percent(),
                worst,
                row.paper_percent
                    .map_or("-".to_string(), |p| format!("{p:.1} %")),
                format!("≤{:.1} %", row.target_percent),
                if row.passes() { "pass" } else { "FAIL" }
            )?;
        }
        Ok(())
    }
}

// ----- round-trip time over the Chained topology -----

/// The paper's round-trip-time measurement over the Chained topology (Fig. 4a, 0 MB): a client at
/// one end calls an echo server at the other, one call after the other.
#[derive(Debug, Clone)]
pub struct ChainRtt {
    /// One run per seed and transport.
    pub seeds: Vec<u64>,
    /// The transports to measure.
    pub transports: Vec<Transport>,
    /// Calls per run.
    pub calls: usize,
    /// Every link.
    pub link: LinkParams,
    /// Nodes in the chain (the paper: 32).
    pub nodes: usize,
    /// When the first call is made.
    pub start_ms: u64,
    /// Pause between one call's end and the next call.
    pub gap_ms: u64,
}

impl Default for ChainRtt {
    /// The paper's chain of 32 nodes, 30 calls by dtn and by auto, 100 Mbit/s and 5 ms links,
    /// seeds 1–3.
    fn default() -> Self {
        Self {
            seeds: vec![1, 2, 3],
            transports: vec![Transport::Dtn, Transport::Auto],
            calls: 30,
            link: LinkParams {
                bandwidth_bps: 100_000_000,
                latency_ms: 5,
                loss: 0.0,
            },
            nodes: 32,
            start_ms: 10_000,
            gap_ms: 1_000,
        }
    }
}

/// The round-trip times of one transport over every seed.
#[derive(Debug, Clone, PartialEq)]
pub struct RttRow {
    /// The transport.
    pub transport: Transport,
    /// Calls made.
    pub calls: usize,
    /// Round-trip time of every call that got its result, ms, ascending.
    pub rtts_ms: Vec<u64>,
    /// Calls without a result.
    pub no_result: usize,
    /// How the results came (`stream`, `datagram`, `dtn`) and how many.
    pub result_via: BTreeMap<&'static str, usize>,
    /// The paper's figure.
    pub paper: &'static str,
    /// The target: at most this RTT, ms.
    pub target_ms: u64,
}

impl RttRow {
    /// The RTT at percentile `p` (0–100), nearest rank.
    pub fn percentile_ms(&self, p: f64) -> Option<u64> {
        let n = self.rtts_ms.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * (n - 1) as f64).round() as usize;
        self.rtts_ms.get(rank.min(n - 1)).copied()
    }

    /// Whether every call got its result within the target.
    pub fn passes(&self) -> bool {
        self.no_result == 0 && self.rtts_ms.last().is_some_and(|&m| m <= self.target_ms)
    }
}

/// The chain RTT table.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainRttTable {
    /// Nodes in the chain.
    pub nodes: usize,
    /// Links.
    pub link: LinkParams,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// One row per transport.
    pub rows: Vec<RttRow>,
}

impl ChainRtt {
    /// Runs every transport with every seed.
    pub fn run(&self) -> Result<ChainRttTable, Violation> {
        let mut rows = Vec::new();
        for &transport in &self.transports {
            let mut row = RttRow {
                transport,
                calls: 0,
                rtts_ms: Vec::new(),
                no_result: 0,
                result_via: BTreeMap::new(),
                paper: match transport {
                    Transport::Dtn => "≈40 s",
                    _ => "<1 s (MDP/MSP)",
                },
                target_ms: 1_000,
            };
            for &seed in &self.seeds {
                self.run_one(transport, seed, &mut row)?;
            }
            row.rtts_ms.sort_unstable();
            rows.push(row);
        }
        Ok(ChainRttTable {
            nodes: self.nodes,
            link: self.link,
            seeds: self.seeds.clone(),
            rows,
        })
    }

    fn run_one(&self, transport: Transport, seed: u64, row: &mut RttRow) -> Result<(), Violation> {
        let nodes = self.nodes.max(2);
        let server = nodes - 1;
        let mut rpc = RpcApp::new(nodes);
        rpc.offer(
            server,
            procedure("echo", &[ParamType::Text], Behaviour::Echo { run_ms: 0 }),
        );
        let make = move |k: usize, _now: DtnTime| {
            let mut request = CallRequest::new(
                Target::Node(node_id(server)),
                "echo",
                vec![Param::Value(Value::Text(format!("ping {k}")))],
            );
            request.transport = transport;
            request
        };
        let app = Sequence {
            rpc,
            client: 0,
            total: self.calls,
            made: 0,
            gap_ms: self.gap_ms,
            next_at: None,
            make,
            first_result: BTreeMap::new(),
            log: None,
        };
        let span = Timers::default().default_span();
        let duration =
            self.start_ms + self.calls as u64 * (wire::time::millis(span) + self.gap_ms) + 60_000;
        let mut scenario = Scenario::new(
            seed,
            Topology::Chained { nodes },
            StrategyKind::Epidemic,
            duration,
        );
        scenario.link = self.link;
        // The calls are all the traffic (Scenario::new comes with a bundle workload).
        scenario.workload.bundles = 0;
        let mut sim = Sim::with_app(scenario, app);
        sim.schedule_action(self.start_ms, 0, START);
        sim.run_until(Sequence::done)?;
        let app = sim.app();
        for tag in 0..self.calls as u64 {
            row.calls += 1;
            let result = app
                .rpc
                .outcome(tag)
                .filter(|v| v.state == CallState::Succeeded)
                .and_then(|v| complete_result(v).map(|r| (v.created, r)));
            match result {
                Some((created, reply)) => {
                    let done = app.first_result.get(&tag).copied().unwrap_or(reply.at);
                    row.rtts_ms.push(wire::time::millis(done - created));
                    *row.result_via.entry(reply.via).or_default() += 1;
                }
                None => row.no_result += 1,
            }
        }
        Ok(())
    }
}

impl ChainRttTable {
    /// Whether every row meets its target.
    pub fn passes(&self) -> bool {
        self.rows.iter().all(RttRow::passes)
    }
}

impl fmt::Display for ChainRttTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Chained ({} nodes, {} hops), 0 MB echo from node 0 to node {}, links {} / {} ms, seeds {}",
            self.nodes,
            self.nodes - 1,
            self.nodes - 1,
            rate(self.link.bandwidth_bps),
            self.link.latency_ms,
            seed_list(&self.seeds)
        )?;
        writeln!(
            f,
            "{:<10} {:>6} {:>10} {:>10} {:>10} {:>18} {:>15} {:>8} {:>6}",
            "transport", "calls", "no result", "p50", "max", "result via", "paper", "target", ""
        )?;
        for row in &self.rows {
            let ms = |v: Option<u64>| v.map_or("-".to_string(), |ms| format!("{ms} ms"));
            let via = row
                .result_via
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            writeln!(
                f,
                "{:<10} {:>6} {:>10} {:>10} {:>10} {:>18} {:>15} {:>8} {:>6}",
                row.transport.to_string(),
                row.calls,
                row.no_result,
                ms(row.percentile_ms(50.0)),
                ms(row.rtts_ms.last().copied()),
                via,
                row.paper,
                format!("≤{}", seconds(row.target_ms)),
                if row.passes() { "pass" } else { "FAIL" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_servers_and_timers_follow_the_paper() {
        let cells = Fig5Cell::paper();
        assert_eq!(cells.len(), 6);
        assert_eq!(cells[0].servers(64), 3);
        assert_eq!(cells[1].servers(64), 32);
        let f = Fig5::default();
        assert_eq!(
            f.timers().default_span(),
            Duration::from_millis(PAPER_BUDGET_MS)
        );
        assert_eq!(f.timers().ack_timeout, Duration::from_millis(30_000));
        let twice = Fig5 {
            budget_ms: 2 * PAPER_BUDGET_MS,
            ..Fig5::default()
        };
        assert_eq!(twice.timers().ack_timeout, Duration::from_millis(60_000));
        assert_eq!(
            twice.timers().default_span(),
            Duration::from_millis(420_000)
        );
        assert_eq!(twice.target_percent(cells[0]), 0.0);
        assert!((f.target_percent(cells[1]) - 20.95).abs() < 1e-9);
    }

    #[test]
    fn journeys_go_through_time_not_only_through_space() {
        let e = |at, up, a, b| LinkEvent { at, up, a, b };
        // 0-1 until 10 s; 1-2 from 20 s: 0 reaches 2 by way of 1, which carries it.
        let events = [
            e(0, true, 0, 1),
            e(10_000, false, 0, 1),
            e(20_000, true, 1, 2),
        ];
        let out = earliest_arrivals(&events, 3, 0, 5_000, 60_000, 0);
        assert_eq!(out, vec![Some(5_000), Some(5_000), Some(20_000)]);
        // Back from 2 to 0 needs 0-1 again, which never returns.
        assert!(!round_trip_possible(
            &events,
            3,
            0,
            &[2],
            (5_000, 60_000),
            0
        ));
        assert!(round_trip_possible(&events, 3, 0, &[1], (5_000, 60_000), 0));
        // Too late: the call starts after 0-1 went down.
        assert!(!round_trip_possible(
            &events,
            3,
            0,
            &[1],
            (11_000, 60_000),
            0
        ));
        let out = earliest_arrivals(&events, 3, 0, 5_000, 15_000, 0);
        assert_eq!(out[2], None);

        // A file that takes 4 s a hop: 0-1 is up for 5 s of the call, enough for one crossing;
        // 1-2 from 20 s, so 2 has it at 24 s.
        let out = earliest_arrivals(&events, 3, 0, 5_000, 60_000, 4_000);
        assert_eq!(out, vec![Some(5_000), Some(9_000), Some(24_000)]);
        // 6 s a hop does not fit in what is left of 0-1; the call there and back (8 s) fits only
        // if it starts early enough.
        let out = earliest_arrivals(&events, 3, 0, 5_000, 60_000, 6_000);
        assert_eq!(out, vec![Some(5_000), None, None]);
        assert!(round_trip_possible(
            &events,
            3,
            0,
            &[1],
            (1_000, 60_000),
            4_000
        ));
        assert!(!round_trip_possible(
            &events,
            3,
            0,
            &[1],
            (5_000, 60_000),
            4_000
        ));
        // And within the call's time: arriving at 24 s is too late for a call that ends at 22 s.
        assert_eq!(
            earliest_arrivals(&events, 3, 0, 5_000, 22_000, 4_000)[2],
            None
        );
    }

    #[test]
    fn a_file_in_pieces_crosses_hops_at_once_but_each_link_one_piece_at_a_time() {
        let e = |at, up, a, b| LinkEvent { at, up, a, b };
        // A chain 0-1-2, up throughout.
        let chain = [e(0, true, 0, 1), e(0, true, 1, 2)];
        let pieces = FileCrossing {
            pieces_ms: vec![1_000; 4],
            latency_ms: 10,
        };
        // Sent whole, 4 s a hop: 8 s (and the latency twice). In pieces, the last leaves 0 at
        // 3 s and 1 at 4 s: 5 s. Each link carries one piece at a time, so not 2 s.
        let whole = FileCrossing::whole(4_010);
        // The file from node `ends.0` to `ends.1` of a network of `nodes`.
        let arrive = |events: &[LinkEvent], nodes, ends, start, until, file: &FileCrossing| {
            file_arrival(&link_spans(events, nodes, until), ends, start, until, file)
        };
        assert_eq!(
            arrive(&chain, 3, (0, 2), 1_000, 60_000, &whole),
            Some(9_020)
        );
        assert_eq!(
            arrive(&chain, 3, (0, 2), 1_000, 60_000, &pieces),
            Some(6_020)
        );
        // Not by 6 s.
        assert_eq!(arrive(&chain, 3, (0, 2), 1_000, 6_000, &pieces), None);
        // Link 1-2 down from 3.1 s to 10 s: two pieces cross it before, the others wait at 1.
        let gap = [
            e(0, true, 0, 1),
            e(0, true, 1, 2),
            e(3_100, false, 1, 2),
            e(10_000, true, 1, 2),
        ];
        assert_eq!(arrive(&gap, 3, (0, 2), 0, 60_000, &pieces), Some(12_010));
        // Sent whole the file misses the first span of 1-2 altogether.
        assert_eq!(arrive(&gap, 3, (0, 2), 0, 60_000, &whole), Some(14_010));
        // Two ways from 0 to 3 share the pieces: 0-1-3 and 0-2-3.
        let diamond = [
            e(0, true, 0, 1),
            e(0, true, 1, 3),
            e(0, true, 0, 2),
            e(0, true, 2, 3),
        ];
        let no_latency = FileCrossing {
            pieces_ms: vec![1_000; 4],
            latency_ms: 0,
        };
        assert_eq!(
            arrive(&diamond, 4, (0, 3), 0, 60_000, &no_latency),
            Some(3_000)
        );
        // There and back: 5 s each way on the chain, from a call made at 1 s.
        let round_trip =
            |end, files| file_round_trip_possible(&chain, 3, 0, &[2], (1_000, end), files);
        assert!(round_trip(11_040, (&pieces, &pieces)));
        assert!(!round_trip(11_039, (&pieces, &pieces)));
        assert!(!round_trip(11_040, (&whole, &whole)));
        assert!(round_trip(17_040, (&whole, &whole)));
        // A broadcast call's file goes out whole (8 s) and its result comes back in pieces (5 s).
        assert!(round_trip(14_040, (&whole, &pieces)));
        assert!(!round_trip(14_039, (&whole, &pieces)));
    }

    #[test]
    fn a_link_is_free_for_a_piece_only_between_the_times_it_is_held() {
        let busy = [(1_000, 2_000), (2_500, 4_000)];
        assert_eq!(first_free(&busy, 0, 1_000), Some(0));
        assert_eq!(first_free(&busy, 0, 1_001), Some(4_000));
        assert_eq!(first_free(&busy, 1_500, 500), Some(2_000));
        assert_eq!(first_free(&busy, 1_500, 501), Some(4_000));
        assert_eq!(first_free(&busy, 5_000, 10), Some(5_000));
        assert_eq!(first_free(&[], 7, 10), Some(7));
    }

    #[test]
    fn real_time_calls_need_a_path_at_one_instant() {
        let e = |at, up, a, b| LinkEvent { at, up, a, b };
        // 0-1 until 10 s, 1-2 from 20 s: a journey 0 → 2 through time, never a path at once.
        let events = [
            e(0, true, 0, 1),
            e(10_000, false, 0, 1),
            e(20_000, true, 1, 2),
        ];
        assert!(!path_at_some_instant(&events, 3, 0, &[2], (0, 60_000)));
        assert!(path_at_some_instant(&events, 3, 0, &[1], (5_000, 5_000)));
        assert!(path_at_some_instant(&events, 3, 0, &[1], (9_999, 9_999)));
        assert!(!path_at_some_instant(&events, 3, 0, &[1], (10_000, 10_000)));
        assert!(!path_at_some_instant(&events, 3, 0, &[1], (10_000, 60_000)));
        // 0-1 back at 30 s while 1-2 is up: a path, if the window reaches it.
        let mut more = events.to_vec();
        more.push(e(30_000, true, 0, 1));
        assert!(path_at_some_instant(&more, 3, 0, &[2], (25_000, 30_000)));
        assert!(!path_at_some_instant(&more, 3, 0, &[2], (25_000, 29_999)));
        // Changes of one instant count together: a link swapped for another never joins 0 to 2.
        let swap = [
            e(0, true, 0, 1),
            e(10_000, false, 0, 1),
            e(10_000, true, 1, 2),
        ];
        assert!(!path_at_some_instant(&swap, 3, 0, &[2], (0, 60_000)));
    }

    #[test]
    fn test_files_differ_by_call_and_seed() {
        let (a, hash) = test_file(0, 1, 1_000);
        assert_eq!(a.len(), 1_000);
        assert_ne!(a, test_file(1, 1, 1_000).0);
        assert_ne!(a, test_file(0, 2, 1_000).0);
        let (echo, echo_hash) = crate::rpc::echo_file(&hash, a.len());
        assert_eq!(echo.len(), a.len());
        assert_ne!(echo_hash, hash);
        assert_ne!(echo, crate::rpc::echo_file(&[0; 32], a.len()).0);
    }
}
