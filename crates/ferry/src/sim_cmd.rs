//! `ferry sim`: runs a simulated network scenario and prints a summary table; `ferry sim --rpc
//! fig5|chain-rtt` runs one of the DTN-RPC paper's experiments instead (`sim::paper`) and prints
//! its table beside the paper's figures and Ferry's targets (docs/performance.md).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use daemon::config::parse_size;
use node::{Class, StrategyKind};
use sim::paper::{CellRun, ChainRtt, Fig5, Fig5Cell, PAPER_BUDGET_MS};
use sim::{ContactPlan, LinkParams, Report, Scenario, Sim, Topology, Workload};
use wire::rpc::Mode;

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum TopologyArg {
    /// Every node one hop from every other (paper: 28 nodes).
    Hub,
    /// Nodes in a line (paper: 32 nodes).
    Chained,
    /// Randomly meshed islands joined and split every period (paper: 64 nodes, 4 islands, 60 s).
    Islands,
    /// A contact plan file (see --plan).
    Plan,
}

#[derive(Args)]
pub(crate) struct SimArgs {
    /// Network shape.
    #[arg(long, value_enum, default_value = "islands")]
    topology: TopologyArg,
    /// Node count (default: the paper's size for the topology).
    #[arg(long)]
    nodes: Option<usize>,
    /// Islands (islands topology).
    #[arg(long, default_value_t = 4)]
    islands: usize,
    /// Time between island changes.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    island_period: std::time::Duration,
    /// Contact plan file for `--topology plan`.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Routing: epidemic, spray-and-wait[:COPIES] (default 8 copies) or direct.
    #[arg(long, default_value = "epidemic")]
    strategy: String,
    /// Every node knows the topology's whole schedule of link changes in advance (for
    /// `--topology plan`, the plan file) and routes by it (contact graph routing, as `ferry node
    /// --contact-plan` does); the strategy handles what the schedule cannot.
    #[arg(long)]
    route_by_plan: bool,
    /// Bundles to send between random pairs of nodes.
    #[arg(long, default_value_t = 30)]
    bundles: usize,
    /// Payload size of each bundle (e.g. 1MB, 100KiB, 100MB) [default: 1MB; --rpc fig5: the
    /// file each call carries, 100MB].
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// Forwarding class of the bundles.
    #[arg(long, value_enum, default_value = "dtn")]
    class: ClassArg,
    /// First send, after the start.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    start: std::time::Duration,
    /// Sends are spread over this long.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    spread: std::time::Duration,
    /// Bundle lifetime.
    #[arg(long, default_value = "3h", value_parser = humantime::parse_duration)]
    lifetime: std::time::Duration,
    /// Simulated duration.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    duration: std::time::Duration,
    /// Link bandwidth in bits per second (e.g. 10M, 1G) [default: 10M; --rpc: 100M].
    #[arg(long, value_parser = parse_rate)]
    bandwidth: Option<u64>,
    /// One-way link latency.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    latency: std::time::Duration,
    /// Loss probability of real-time frames (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Store quota per node [default: 1GiB; --rpc fig5: 10GB, `ferry node`'s default].
    #[arg(long, value_parser = parse_size)]
    quota: Option<u64>,
    /// Beacon period the nodes announce (links are sessions once up, and carry no beacons).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    beacon: std::time::Duration,
    /// Split bundles larger than this before sending (proactive fragmentation).
    #[arg(long, value_parser = parse_size)]
    piece: Option<u64>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs, with seeds seed, seed+1, … [default: 1; --rpc: 3]
    #[arg(long)]
    runs: Option<u64>,
    /// Stop a run once every bundle was delivered.
    #[arg(long)]
    stop_when_delivered: bool,
    /// Run one of the DTN-RPC paper's experiments instead of a bundle workload.
    #[arg(long, value_enum)]
    rpc: Option<RpcExperiment>,
    /// --rpc: calls per run.
    #[arg(long, default_value_t = 30)]
    calls: usize,
    /// --rpc fig5: the time each call has, repeatable; the paper's ack, result and dtn timers
    /// (30 + 90 + 90 s) are scaled to it [default: 210s and 420s].
    #[arg(long = "budget", value_parser = humantime::parse_duration)]
    budgets: Vec<Duration>,
    /// --rpc fig5: the cells to run, e.g. explicit-5,any-50 [default: all six].
    #[arg(long, value_delimiter = ',', value_parser = parse_cell)]
    cells: Vec<Fig5Cell>,
    /// --rpc fig5: data-channel bytes each node's RPC engine keeps at once [default: the
    /// engine's 1GiB].
    #[arg(long, value_parser = parse_size)]
    rpc_file_budget: Option<u64>,
    /// --rpc fig5: how long an any-mode server listens for another's start before it starts
    /// (the engine's default).
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    any_start_jitter: Duration,
    /// --rpc: runs at once [default: the machine's cores].
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RpcExperiment {
    /// The paper's Fig. 5: Islands (64 nodes), 30 echo calls each carrying a 100 MB file that
    /// comes back, explicit/any/all × 5 %/50 % servers, transport auto; calls without a result
    /// within 210 s and within 420 s.
    Fig5,
    /// The paper's Fig. 4a at 0 MB: the RTT of echo calls across the 32-node chain, by dtn and
    /// by auto.
    ChainRtt,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ClassArg {
    Dtn,
    Datagram,
}

pub(crate) fn run(args: SimArgs) -> Result<()> {
    let strategy: StrategyKind = args.strategy.parse().map_err(anyhow::Error::msg)?;
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss must be between 0 and 1, got {}", args.loss);
    }
    if args.bandwidth == Some(0) {
        bail!("--bandwidth must be positive");
    }
    if let Some(experiment) = args.rpc {
        if args.route_by_plan {
            bail!("--route-by-plan applies to bundle workloads, not to the --rpc experiments");
        }
        return run_rpc(experiment, &args, strategy);
    }
    let bandwidth = args.bandwidth.unwrap_or(10_000_000);
    let size = args.size.unwrap_or(1_000_000);
    let runs = args.runs.unwrap_or(1);
    let topology = match args.topology {
        TopologyArg::Hub => Topology::Hub {
            nodes: args.nodes.unwrap_or(28),
        },
        TopologyArg::Chained => Topology::Chained {
            nodes: args.nodes.unwrap_or(32),
        },
        TopologyArg::Islands => Topology::Islands {
            nodes: args.nodes.unwrap_or(64),
            islands: args.islands.max(1),
            period_ms: args.island_period.as_millis() as u64,
        },
        TopologyArg::Plan => {
            let path = args
                .plan
                .as_ref()
                .context("--topology plan needs --plan FILE")?;
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading contact plan {}", path.display()))?;
            let plan: ContactPlan = text
                .parse()
                .with_context(|| format!("in contact plan {}", path.display()))?;
            Topology::Plan(plan)
        }
    };
    if topology.nodes() < 2 {
        bail!("a simulation needs at least 2 nodes");
    }
    println!(
        "scenario: {topology}, {strategy}{}, {} × {} bundles ({}), {} simulated, links {} bit/s, {} ms, loss {}",
        if args.route_by_plan {
            " routing by the plan"
        } else {
            ""
        },
        args.bundles,
        human_bytes(size),
        match args.class {
            ClassArg::Dtn => "dtn",
            ClassArg::Datagram => "datagram",
        },
        humantime::format_duration(args.duration),
        bandwidth,
        args.latency.as_millis(),
        args.loss
    );
    println!(
        "{:>6} {:>11} {:>7} {:>9} {:>9} {:>9} {:>17} {:>10} {:>12} {:>11}",
        "seed",
        "delivered",
        "ratio",
        "p50",
        "p90",
        "max",
        "MB/node mean/max",
        "events",
        "sim s/wall s",
        "events/s"
    );
    for seed in args.seed..args.seed.saturating_add(runs.max(1)) {
        let mut scenario = Scenario::new(
            seed,
            topology.clone(),
            strategy,
            args.duration.as_millis() as u64,
        );
        scenario.link = LinkParams {
            bandwidth_bps: bandwidth,
            latency_ms: args.latency.as_millis() as u64,
            loss: args.loss,
        };
        scenario.workload = Workload {
            bundles: args.bundles,
            size: usize::try_from(size).context("--size too large for this machine")?,
            start_ms: args.start.as_millis() as u64,
            spread_ms: args.spread.as_millis() as u64,
            lifetime_ms: args.lifetime.as_millis() as u64,
            class: match args.class {
                ClassArg::Dtn => Class::Dtn,
                ClassArg::Datagram => Class::Datagram,
            },
            pair: None,
        };
        scenario.quota = args.quota.unwrap_or(1 << 30);
        scenario.beacon_period_ms = (args.beacon.as_millis() as u64).max(1);
        scenario.max_bundle_piece = args.piece;
        scenario.stop_when_delivered = args.stop_when_delivered;
        scenario.route_by_plan = args.route_by_plan;
        let started = Instant::now();
        let report = Sim::new(scenario).run()?;
        let wall = started.elapsed().as_secs_f64().max(1e-9);
        print_row(&report, wall);
    }
    Ok(())
}

/// Runs a paper experiment and prints its tables; fails if a row misses its target.
fn run_rpc(experiment: RpcExperiment, args: &SimArgs, strategy: StrategyKind) -> Result<()> {
    let link = LinkParams {
        bandwidth_bps: args.bandwidth.unwrap_or(100_000_000),
        latency_ms: args.latency.as_millis() as u64,
        loss: args.loss,
    };
    let seeds: Vec<u64> =
        (args.seed..args.seed.saturating_add(args.runs.unwrap_or(3).max(1))).collect();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    if args.calls == 0 {
        bail!("--calls must be at least 1");
    }
    let started = Instant::now();
    let passed = match experiment {
        RpcExperiment::ChainRtt => {
            let rtt = ChainRtt {
                seeds,
                calls: args.calls,
                link,
                nodes: args.nodes.unwrap_or(32).max(2),
                ..ChainRtt::default()
            };
            let table = rtt.run()?;
            println!("{table}");
            table.passes()
        }
        RpcExperiment::Fig5 => {
            let size = args.size.unwrap_or(100_000_000);
            let mut budgets: Vec<u64> = args.budgets.iter().map(|d| d.as_millis() as u64).collect();
            if budgets.is_empty() {
                budgets = vec![PAPER_BUDGET_MS, 2 * PAPER_BUDGET_MS];
            }
            if budgets.iter().any(|&b| b < 1_000) {
                bail!("--budget must be at least 1s");
            }
            let base = Fig5 {
                seeds,
                cells: if args.cells.is_empty() {
                    Fig5Cell::paper()
                } else {
                    args.cells.clone()
                },
                calls: args.calls,
                file_bytes: usize::try_from(size).context("--size too large for this machine")?,
                link,
                topology: Topology::Islands {
                    nodes: args.nodes.unwrap_or(64),
                    islands: args.islands.max(1),
                    period_ms: args.island_period.as_millis() as u64,
                },
                strategy,
                quota: args.quota.unwrap_or(Fig5::default().quota),
                any_start_jitter_ms: args.any_start_jitter.as_millis() as u64,
                debug: std::env::var_os("FERRY_FIG5_DEBUG").is_some(),
                ..Fig5::default()
            };
            let base = Fig5 {
                file_budget: args.rpc_file_budget.unwrap_or(base.file_budget),
                ..base
            };
            if base.topology.nodes() < 4 {
                bail!("--rpc fig5 needs at least 4 nodes");
            }
            let setups: Vec<Fig5> = budgets
                .iter()
                .map(|&budget_ms| Fig5 {
                    budget_ms,
                    ..base.clone()
                })
                .collect();
            let total = setups.len() * base.cells.len() * base.seeds.len();
            eprintln!(
                "{total} runs ({} budgets × {} cells × {} seeds), {jobs} at once",
                setups.len(),
                base.cells.len(),
                base.seeds.len()
            );
            let results = run_fig5(&setups, jobs)?;
            let mut passed = true;
            for (k, setup) in setups.iter().enumerate() {
                let runs: Vec<(Fig5Cell, CellRun)> = results
                    .iter()
                    .filter(|(s, _, _)| *s == k)
                    .map(|(_, cell, run)| (*cell, run.clone()))
                    .collect();
                let table = setup.table(runs);
                println!("{table}");
                passed &= table.passes();
            }
            println!(
                "called rt/dtn: calls first sent in real time (stream for explicit, datagram broadcast for any \
                 and all) / calls sent by dtn, at first or as a fallback. res rt/dtn: how the first complete \
                 result's value came (its file always rides dtn). no path: calls without a result that no \
                 protocol could have answered (no journey client → server → client through the changing \
                 links within the call's time, even with every hop as fast as the file crosses an idle link). refused: data-channel files the \
                 engines refused over their file budget. target: half the paper's loss in 210 s (explicit from \
                 41.9 %, any and all from 27.8 %), none with twice the time; pass or FAIL is the worst seed's."
            );
            passed
        }
    };
    eprintln!("wall time {:.0} s", started.elapsed().as_secs_f64());
    if !passed {
        bail!("some rows missed their target (FAIL above)");
    }
    Ok(())
}

/// Runs every (setup, cell, seed) with `jobs` threads; each run is a function of its seed alone,
/// so the order they finish in changes nothing.
fn run_fig5(setups: &[Fig5], jobs: usize) -> Result<Vec<(usize, Fig5Cell, CellRun)>> {
    let mut work: Vec<(usize, Fig5Cell, u64)> = Vec::new();
    for (k, setup) in setups.iter().enumerate() {
        for &cell in &setup.cells {
            for &seed in &setup.seeds {
                work.push((k, cell, seed));
            }
        }
    }
    // Slowest first (all and any broadcast the file to every node), so the threads end together.
    work.sort_by_key(|(k, cell, seed)| {
        let weight = match cell.mode {
            Mode::All => 0,
            Mode::Any => 1,
            Mode::Explicit => 2,
        };
        (weight, std::cmp::Reverse(setups[*k].budget_ms), *k, *seed)
    });
    work.reverse();
    let queue = Mutex::new(work);
    let results = Mutex::new(Vec::new());
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                    let Some((k, cell, seed)) = next else {
                        break;
                    };
                    let started = Instant::now();
                    match setups[k].run_cell(cell, seed) {
                        Ok(run) => {
                            eprintln!(
                                "  {} per call, {}, seed {seed}: {}/{} without a result ({:.0} s)",
                                humantime::format_duration(Duration::from_millis(
                                    setups[k].budget_ms
                                )),
                                cell.name(),
                                run.no_result,
                                run.calls,
                                started.elapsed().as_secs_f64()
                            );
                            if let Ok(mut r) = results.lock() {
                                r.push((k, cell, run));
                            }
                        }
                        Err(v) => {
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(v.into());
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
    Ok(results.into_inner().unwrap_or_default())
}

/// `explicit-5`, `any-50`, `all-5`.
fn parse_cell(s: &str) -> Result<Fig5Cell, String> {
    let err = || format!("{s:?} is not a cell like explicit-5, any-50 or all-5");
    let (mode, percent) = s.trim().split_once('-').ok_or_else(err)?;
    let mode = match mode {
        "explicit" => Mode::Explicit,
        "any" | "implicit" => Mode::Any,
        "all" => Mode::All,
        _ => return Err(err()),
    };
    let servers_percent: u32 = percent.trim_end_matches('%').parse().map_err(|_| err())?;
    if servers_percent == 0 || servers_percent >= 100 {
        return Err(format!(
            "{s:?}: servers must be 1 to 99 per cent of the nodes"
        ));
    }
    Ok(Fig5Cell {
        mode,
        servers_percent,
    })
}

fn print_row(r: &Report, wall_s: f64) {
    let pct = |p| {
        r.latency_percentile(p)
            .map_or("-".to_string(), |ms| format!("{:.1} s", ms as f64 / 1e3))
    };
    let total: u64 = r.bytes_sent.iter().sum();
    let max = r.bytes_sent.iter().copied().max().unwrap_or(0);
    println!(
        "{:>6} {:>11} {:>6.1}% {:>9} {:>9} {:>9} {:>17} {:>10} {:>12.0} {:>11.0}",
        r.seed,
        format!("{}/{}", r.delivered, r.sent),
        100.0 * r.delivery_ratio(),
        pct(50.0),
        pct(90.0),
        pct(100.0),
        format!(
            "{:.1}/{:.1}",
            total as f64 / r.nodes.max(1) as f64 / 1e6,
            max as f64 / 1e6
        ),
        r.events,
        r.simulated_ms as f64 / 1e3 / wall_s,
        r.events as f64 / wall_s
    );
}

/// Parses a bit rate: `10M`, `1G`, `500k`, `54000000`.
fn parse_rate(s: &str) -> Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let trimmed = lower
        .trim_end_matches("bit/s")
        .trim_end_matches("bps")
        .trim_end_matches("bit");
    parse_size(trimmed).map_err(|_| format!("{s:?} is not a bit rate like 10M or 1G"))
}

fn human_bytes(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1} kB", n as f64 / 1e3)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_parse() {
        let c = parse_cell("any-50").unwrap();
        assert_eq!((c.mode, c.servers_percent), (Mode::Any, 50));
        assert_eq!(parse_cell("explicit-5%").unwrap().mode, Mode::Explicit);
        assert!(parse_cell("some-5").is_err());
        assert!(parse_cell("all-100").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("10M").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1Gbit/s").unwrap(), 1_000_000_000);
    }
}
