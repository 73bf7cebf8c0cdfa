//! `ferry sim`: runs a simulated network scenario and prints a summary table.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use daemon::config::parse_size;
use node::{Class, StrategyKind};
use sim::{ContactPlan, LinkParams, Report, Scenario, Sim, Topology, Workload};

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
    /// Bundles to send between random pairs of nodes.
    #[arg(long, default_value_t = 30)]
    bundles: usize,
    /// Payload size of each bundle (e.g. 1MB, 100KiB, 100MB).
    #[arg(long, default_value = "1MB", value_parser = parse_size)]
    size: u64,
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
    /// Link bandwidth in bits per second (e.g. 10M, 1G).
    #[arg(long, default_value = "10M", value_parser = parse_rate)]
    bandwidth: u64,
    /// One-way link latency.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    latency: std::time::Duration,
    /// Loss probability of real-time frames (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Store quota per node.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    quota: u64,
    /// Beacon period.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    beacon: std::time::Duration,
    /// Split bundles larger than this before sending (proactive fragmentation).
    #[arg(long, value_parser = parse_size)]
    piece: Option<u64>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs, with seeds seed, seed+1, …
    #[arg(long, default_value_t = 1)]
    runs: u64,
    /// Stop a run once every bundle was delivered.
    #[arg(long)]
    stop_when_delivered: bool,
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
    if args.bandwidth == 0 {
        bail!("--bandwidth must be positive");
    }
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
        "scenario: {topology}, {strategy}, {} × {} bundles ({}), {} simulated, links {} bit/s, {} ms, loss {}",
        args.bundles,
        human_bytes(args.size),
        match args.class {
            ClassArg::Dtn => "dtn",
            ClassArg::Datagram => "datagram",
        },
        humantime::format_duration(args.duration),
        args.bandwidth,
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
    for seed in args.seed..args.seed.saturating_add(args.runs.max(1)) {
        let mut scenario = Scenario::new(
            seed,
            topology.clone(),
            strategy,
            args.duration.as_millis() as u64,
        );
        scenario.link = LinkParams {
            bandwidth_bps: args.bandwidth,
            latency_ms: args.latency.as_millis() as u64,
            loss: args.loss,
        };
        scenario.workload = Workload {
            bundles: args.bundles,
            size: usize::try_from(args.size).context("--size too large for this machine")?,
            start_ms: args.start.as_millis() as u64,
            spread_ms: args.spread.as_millis() as u64,
            lifetime_ms: args.lifetime.as_millis() as u64,
            class: match args.class {
                ClassArg::Dtn => Class::Dtn,
                ClassArg::Datagram => Class::Datagram,
            },
            pair: None,
        };
        scenario.quota = args.quota;
        scenario.beacon_period_ms = (args.beacon.as_millis() as u64).max(1);
        scenario.max_bundle_piece = args.piece;
        scenario.stop_when_delivered = args.stop_when_delivered;
        let started = Instant::now();
        let report = Sim::new(scenario).run()?;
        let wall = started.elapsed().as_secs_f64().max(1e-9);
        print_row(&report, wall);
    }
    Ok(())
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
    fn rates_parse() {
        assert_eq!(parse_rate("10M").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1Gbit/s").unwrap(), 1_000_000_000);
    }
}
