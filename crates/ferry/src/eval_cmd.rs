//! `ferry eval`: the DTN-RPC paper's evaluation matrix (Sec. V-A) in the simulator
//! (`sim::eval`), or any named part of it, run on `--jobs` threads with progress on stderr, and
//! its report written to `--out` (`eval_report.rs`). `--from CSV` writes the report of call
//! records made elsewhere (a real-process testbed writes the same CSV) without simulating.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use sim::eval::{Eval, EvalMode, Network, Run, Shape, TestSet};
use sim::eval_record::{CallRecord, read_csv};
use sim::{DiskModel, LinkParams};

use crate::eval_report::{ReportMeta, write_report};

/// The simulated links' one-way latency unless `--latency` says otherwise.
const SIM_LATENCY: Duration = Duration::from_millis(5);

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// Directory the report is written to (created if needed).
    #[arg(long, default_value = "eval-report")]
    out: PathBuf,
    #[command(flatten)]
    matrix: MatrixArgs,
    /// Runs at once [default: the machine's cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Write the report of the call records in this CSV (as `calls.csv` of an earlier report,
    /// or a testbed's) instead of simulating.
    #[arg(long)]
    from: Option<PathBuf>,
}

/// What to run, for `ferry eval` (simulated) and `ferry testbed` (real processes) alike.
#[derive(Args)]
pub(crate) struct MatrixArgs {
    /// Networks: hub (28 nodes), chained (32), islands (64).
    #[arg(long, value_delimiter = ',', default_value = "hub,chained,islands")]
    topology: Vec<Network>,
    /// Nodes of every network run, instead of the paper's 28, 32 and 64 (Islands: split into
    /// --islands islands).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=1024))]
    nodes: Option<u16>,
    /// Islands of the Islands network.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    islands: u16,
    /// Time between the Islands network's changes (the paper: 60 s).
    #[arg(long, default_value = "60s", value_parser = crate::positive_duration)]
    period: Duration,
    /// Test sets: 0MB, 1MB, 100MB (the file each call sends and gets back).
    #[arg(long, value_delimiter = ',', default_value = "0MB,1MB,100MB")]
    set: Vec<TestSet>,
    /// Modes, MODE-TRANSPORT: explicit|any|all - dtn|datagram|auto (the paper's transparent),
    /// and explicit-stream [default: the paper's ten].
    #[arg(long, value_delimiter = ',')]
    modes: Vec<EvalMode>,
    /// Servers, per cent of the nodes (Hub and Islands; Chained has one at the far end).
    #[arg(long, value_delimiter = ',', default_value = "5,50")]
    servers: Vec<u32>,
    /// Runs per setup, with seeds --first-seed, --first-seed + 1, …
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Calls per run, one after the other.
    #[arg(long, default_value_t = 30)]
    calls: usize,
    /// The time each call has; the paper's ack, result and dtn timers (30 + 90 + 90 s) are
    /// scaled to it.
    #[arg(long, default_value = "210s", value_parser = crate::positive_duration)]
    budget: Duration,
    /// Also run every setup with this many times the budget (the paper: results "will always
    /// reach their destinations" given the time); 1: only the budget.
    #[arg(long, default_value_t = 2)]
    budget_factor: u64,
    /// Multiplies the budget (with its timers) and the Islands period: 0.1 runs the paper's
    /// 210 s calls in 21 s and changes the islands every 6 s.
    #[arg(long, default_value_t = 1.0, value_parser = parse_time_scale)]
    time_scale: f64,
    /// Link bandwidth, bits per second (e.g. 100M).
    #[arg(long, default_value = "100M", value_parser = parse_rate)]
    bandwidth: u64,
    /// How long a simulated node's disk takes to sync a commit (e.g. 4ms) [default: no time in
    /// `ferry eval`; in `ferry testbed`, the median of fsyncs measured in its work directory].
    #[arg(long, value_parser = humantime::parse_duration)]
    disk_sync: Option<Duration>,
    /// One-way link latency of the simulated links [default: 5ms in `ferry eval`; 0 in `ferry
    /// testbed`, whose veth links add none, so that its simulated runs model its links].
    #[arg(long, value_parser = humantime::parse_duration)]
    latency: Option<Duration>,
    /// Seal the files sent to one node for real, as the daemon does, instead of with stand-ins
    /// of the same length (the same outcome: simulated nodes compute in no simulated time; the
    /// cipher is most of the wall time of 100MB runs). Off in `ferry eval`; `ferry testbed
    /// --compare-sim` simulates with stand-ins too.
    #[arg(long)]
    real_seals: bool,
    /// Bundles to one node larger than this go in pieces of it at every hop, as a daemon with
    /// `bundle_piece` set sends them; `ferry testbed` sets it on its nodes. 0: whole, as a daemon
    /// sends them by default. Pieces are the default here because they are how Ferry should
    /// carry large files over several hops (a piece goes on as soon as it is there).
    #[arg(long, default_value = "10MB", value_parser = parse_piece)]
    piece: u64,
}

impl MatrixArgs {
    /// The runs these flags name; simulated links have `default_latency` unless `--latency`,
    /// simulated disks sync in `default_sync` unless `--disk-sync`.
    pub(crate) fn eval(
        &self,
        default_latency: Duration,
        default_sync: Option<Duration>,
    ) -> Result<Eval> {
        if self.calls == 0 || self.seeds == 0 {
            bail!("--calls and --seeds must be at least 1");
        }
        if self.servers.iter().any(|&p| p == 0 || p >= 100) {
            bail!("--servers: per cent of the nodes, 1 to 99");
        }
        if self.bandwidth == 0 {
            bail!("--bandwidth must be positive");
        }
        let scaled = |d: Duration| (d.as_secs_f64() * 1e3 * self.time_scale).round() as u64;
        let budget_ms = scaled(self.budget).max(1);
        let period_ms = scaled(self.period).max(1);
        let mut budgets_ms = vec![budget_ms];
        if self.budget_factor > 1 {
            budgets_ms.push(budget_ms * self.budget_factor);
        }
        Ok(Eval {
            networks: dedup(self.topology.clone()),
            sets: dedup(self.set.clone()),
            modes: if self.modes.is_empty() {
                EvalMode::paper()
            } else {
                dedup(self.modes.clone())
            },
            servers_percent: dedup(self.servers.clone()),
            seeds: (self.first_seed..self.first_seed.saturating_add(self.seeds)).collect(),
            budgets_ms,
            calls: self.calls,
            link: LinkParams {
                bandwidth_bps: self.bandwidth,
                latency_ms: self.latency.unwrap_or(default_latency).as_millis() as u64,
                loss: 0.0,
            },
            disk: self
                .disk_sync
                .or(default_sync)
                .filter(|d| !d.is_zero())
                .map(|d| DiskModel {
                    sync_ms: d.as_millis().max(1) as u64,
                }),
            shape: Shape {
                nodes: self.nodes.map(usize::from),
                islands: usize::from(self.islands),
                period_ms,
            },
            real_seals: self.real_seals,
            bundle_piece: (self.piece > 0).then_some(self.piece),
            ..Eval::default()
        })
    }
}

pub(crate) fn run(args: EvalArgs) -> Result<()> {
    if let Some(csv) = &args.from {
        let file =
            std::fs::File::open(csv).with_context(|| format!("opening {}", csv.display()))?;
        let records = read_csv(std::io::BufReader::new(file))
            .with_context(|| format!("reading {}", csv.display()))?;
        let link = args.matrix.eval(SIM_LATENCY, None)?;
        let meta = ReportMeta {
            command: command_line(),
            link_model: format!(
                "read from {}; for its records from the simulator (source `sim`), given the \
                 same --bandwidth, --latency and --piece as their runs: {}",
                csv.display(),
                link_model(&link)
            ),
            wall_s: None,
            runs: 0,
            jobs: 0,
        };
        let written = write_report(&args.out, &records, &meta)?;
        print_written(&written);
        return Ok(());
    }
    let eval = args.matrix.eval(SIM_LATENCY, None)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let runs = eval.runs();
    eprintln!(
        "{} setups × {} seeds = {} runs of {} calls, {jobs} at once",
        eval.setups().len(),
        eval.seeds.len(),
        runs.len(),
        eval.calls
    );
    let started = Instant::now();
    let records = run_all(&eval, runs.clone(), jobs)?;
    let wall_s = started.elapsed().as_secs_f64();
    eprintln!("all {} runs in {wall_s:.0} s", runs.len());
    let meta = ReportMeta {
        command: command_line(),
        link_model: link_model(&eval),
        wall_s: Some(wall_s),
        runs: runs.len(),
        jobs,
    };
    let written = write_report(&args.out, &records, &meta)?;
    print_written(&written);
    Ok(())
}

fn dedup<T: Ord + Clone>(mut v: Vec<T>) -> Vec<T> {
    let mut seen = Vec::new();
    v.retain(|x| {
        if seen.contains(x) {
            false
        } else {
            seen.push(x.clone());
            true
        }
    });
    v
}

fn print_written(written: &[PathBuf]) {
    for p in written {
        println!("{}", p.display());
    }
}

/// The command line as run, `ferry …`, for a report.
pub(crate) fn command_line() -> String {
    let mut words: Vec<String> = std::env::args().skip(1).collect();
    words.insert(0, "ferry".into());
    words.join(" ")
}

fn link_model(eval: &Eval) -> String {
    format!(
        "{}every link carries {} Mbit/s each way with {} ms one-way latency, shared by everything \
         crossing it; a link that comes up holds a session one latency later (both ends know \
         who is at the other, as after TCPCL's SESS_INIT), which carries no beacons, as the \
         daemon's sessions carry none; real-time frames (control, datagram and stream calls) \
         are not lost; bundles ride a reliable convergence layer (as TCPCL does), and a link going down \
         cuts the transfer in progress (the receiver keeps what arrived as a fragment). Bundles \
         to one node are sent {}. Routing: \
         {}; stores: {} GB per node. The paper's CORE links were not limited (its Fig. 3a stacks \
         up to 500 Mbit/s); 100 Mbit/s is below that. {} Placement of client and servers, \
         explicit calls' servers and the islands' schedule are drawn from the seed; the echo \
         answers at once (0MB) or after 10 ms (1MB, 100MB), sending back a file of the same \
         length (a call's file and its echo's are a head that names them, then zeros: only \
         their lengths matter to a simulated network). {}",
        eval.disk.map_or(String::new(), |d| format!(
            "every node's commits wait for a disk sync of {} ms; ",
            d.sync_ms
        )),
        eval.link.bandwidth_bps as f64 / 1e6,
        eval.link.latency_ms,
        match eval.bundle_piece {
            Some(piece) => format!(
                "in pieces of {piece} bytes at every hop, each going on from a node as soon as \
                 it is there (the daemon's `bundle_piece = \"{piece}\"`; broadcast bundles go \
                 whole)"
            ),
            None => "whole".to_owned(),
        },
        eval.strategy,
        eval.quota / 1_000_000_000,
        shape_text(&eval.shape),
        if eval.real_seals {
            "Files for one node are sealed as the daemon seals them."
        } else {
            "Files for one node are sealed with stand-ins of the same length (content in the \
             clear, or for a large file carried beside an envelope left zero; `--real-seals`: as \
             the daemon seals them): simulated nodes compute in no simulated time, and the \
             records are the same."
        }
    )
}

/// The networks' sizes and pace in words.
pub(crate) fn shape_text(shape: &Shape) -> String {
    let nodes = |n: Network| shape.topology(n).nodes();
    let islands = shape.islands.max(1);
    format!(
        "Hub: every pair of the {} nodes linked; Chained: {} nodes in a line; Islands: {} nodes \
         in {islands} islands of {} (a random spanning tree plus random extra links each), every \
         {} s one of: join two islands, split two, join all, split all, drawn from the seed.",
        nodes(Network::Hub),
        nodes(Network::Chained),
        nodes(Network::Islands),
        nodes(Network::Islands).div_ceil(islands),
        shape.period_ms as f64 / 1e3
    )
}

/// Runs every run on `jobs` threads, slowest first; each run is a function of its setup and
/// seed, so the order they finish in changes nothing. The records come back sorted by setup,
/// seed and call.
fn run_all(eval: &Eval, mut runs: Vec<Run>, jobs: usize) -> Result<Vec<CallRecord>> {
    let total = runs.len();
    runs.sort_by_key(|r| (eval.weight(r), std::cmp::Reverse(*r)));
    // Popped from the end: the heaviest first.
    let queue = Mutex::new(runs);
    let results: Mutex<Vec<(Run, Vec<CallRecord>)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                    let Some(run) = next else {
                        break;
                    };
                    let t = Instant::now();
                    match eval.run(run) {
                        Ok(records) => {
                            let answered = records
                                .iter()
                                .filter(|r| r.outcome != sim::eval_record::Outcome::None)
                                .count();
                            let calls = records.len();
                            let done = results
                                .lock()
                                .map(|mut r| {
                                    r.push((run, records));
                                    r.len()
                                })
                                .unwrap_or(0);
                            let s = run.setup;
                            eprintln!(
                                "[{done}/{total} {:.0} s] {}{}, {}, {}, {} s, seed {}: {answered}/{calls} answered ({:.1} s)",
                                started.elapsed().as_secs_f64(),
                                s.network.name(),
                                s.servers_percent.map_or(String::new(), |p| format!(" {p} %")),
                                s.set.name(),
                                s.mode.name(),
                                s.budget_ms / 1_000,
                                run.seed,
                                t.elapsed().as_secs_f64()
                            );
                        }
                        Err(v) => {
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(anyhow::Error::from(v).context(format!(
                                    "{:?} seed {}",
                                    run.setup, run.seed
                                )));
                            }
                            if let Ok(mut q) = queue.lock() {
                                q.clear();
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or(None) {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(run, _)| *run);
    Ok(results.into_iter().flat_map(|(_, r)| r).collect())
}

/// Parses a time scale: a factor above 0 and at most 100.
fn parse_time_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 100.0 => Ok(f),
        _ => Err(format!(
            "{s:?} is not a factor above 0 and at most 100, like 0.1"
        )),
    }
}

/// Parses a piece size (`10MB`), or `0` for whole bundles.
fn parse_piece(s: &str) -> Result<u64, String> {
    if daemon::config::parse_size(s).is_ok_and(|n| n == 0) {
        return Ok(0);
    }
    daemon::config::parse_bundle_piece(s).map_err(|e| format!("pieces{e}; or 0 for whole bundles"))
}

/// Parses a bit rate: `10M`, `1G`, `500k`, `54000000`.
fn parse_rate(s: &str) -> Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let trimmed = lower
        .trim_end_matches("bit/s")
        .trim_end_matches("bps")
        .trim_end_matches("bit");
    daemon::config::parse_size(trimmed).map_err(|_| format!("{s:?} is not a bit rate like 100M"))
}
