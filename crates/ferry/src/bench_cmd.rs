//! `ferry bench`: benchmarks of real `ferry node` processes, each beside a reference measured in
//! the same run (dtn7-rs's `dtnd`, iperf3, `dd conv=fdatasync`), repeated, printed as medians
//! with min/max, and written as a report directory (`--out`: README.md with the tables, the
//! command and the machine, plots as SVG and PNG).
//!
//! Parts (issue 31; the methodology is IBR-DTN's evaluation, Sec. 5, and the opportunistic-contact
//! study):
//!
//! - `contact` (`bench_cmd/contact.rs`): two nodes in network namespaces joined by a veth limited
//!   by `tc tbf`, a queue at a for b, the link up for `--up` of every `--period`;
//! - `store` (`bench_cmd/store.rs`): the local API storing and handing out 100 bundles;
//! - `queue` (`bench_cmd/queue.rs`): 1,000 bundles queued while the link is down, timed from
//!   the link coming up until all are at b;
//! - `rpc` (`bench_cmd/rpc.rs`): runs the existing RPC-vs-gRPC bench (`cargo bench -p
//!   ferry-bench --bench rpc`) where the source tree is at hand, and says how otherwise.
//!
//! The network parts need root and iproute2: they make namespaces `fb<pid>…` of their own and
//! remove them on every way out (a drop guard; SIGINT and SIGTERM end the run through it). They
//! never touch another namespace, the host's interfaces, or anything but loopback and their own
//! veth. Every wait is bounded. The daemons' core is driven as a user would drive it (the CLI's
//! HTTP API, through `ferry bench agent`, a hidden helper that runs inside a namespace); nothing
//! here reaches into a daemon.

mod agent;
mod contact;
mod netns;
mod procs;
mod queue;
mod report;
mod rpc;
mod stats;
mod store;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

#[derive(Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    part: Part,
}

#[derive(Subcommand)]
enum Part {
    /// The opportunistic contact: the share of a contact's capacity delivered, the time from
    /// link up to the first payload byte, what survives a cut; Ferry and dtnd.
    Contact(contact::ContactArgs),
    /// IBR-DTN Sec. 5.1: the local API storing and handing out 100 bundles, 5 B to 1 MiB.
    Store(store::StoreArgs),
    /// IBR-DTN Sec. 5.2: 1,000 bundles queued while the link is down, timed from opening it;
    /// Ferry and dtnd, beside iperf3 and `dd conv=fdatasync`.
    Queue(queue::QueueArgs),
    /// Null and echo RPC latency and calls/s against a gRPC echo (the `ferry-bench` crate's
    /// bench, run from the source tree).
    Rpc(rpc::RpcArgs),
    /// Every part above, one report.
    All(AllArgs),
    /// A helper run inside a namespace by the other parts (feeds a node, watches deliveries).
    #[command(hide = true)]
    Agent(agent::AgentArgs),
}

/// What every part takes.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// Times each measurement is repeated (medians with min and max are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Directory the report is written to (created if needed).
    #[arg(long, default_value = "bench-report")]
    out: PathBuf,
    /// A smoke run: small totals, short contacts, one rate, fewer sizes.
    #[arg(long)]
    quick: bool,
    /// dtn7-rs's `dtnd` [default: $FERRY_DTN7_BIN/dtnd, ~/.cache/ferry-tools/dtn7/bin/dtnd,
    /// then PATH]; `none` runs Ferry's rows alone.
    #[arg(long, value_name = "PATH")]
    dtnd: Option<String>,
    /// Where the nodes keep their stores (and `dd` writes) [default: a directory under the
    /// system's temporary directory, removed afterwards].
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct AllArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    contact: contact::ContactOptions,
}

/// Set when SIGINT or SIGTERM arrived: every wait checks it and the run ends through its drop
/// guards (daemons killed, namespaces removed).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Sleeps `span`, in short slices so that an interrupt ends the run within 50 ms.
pub(crate) fn pause(span: Duration) -> Result<()> {
    let until = Instant::now() + span;
    loop {
        check_interrupt()?;
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// An error once SIGINT or SIGTERM arrived.
pub(crate) fn check_interrupt() -> Result<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// Catches SIGINT and SIGTERM (so that drop guards run instead of the process dying with its
/// namespaces left behind): the loops see [`check_interrupt`] fail and unwind.
fn catch_signals() -> Result<()> {
    crate::exit::on_interrupt(true, || {
        eprintln!("ferry bench: interrupted; removing namespaces and daemons");
        INTERRUPTED.store(true, Ordering::Relaxed);
    })
    .context("starting the signal watcher")
}

/// Where the stores live for one run of `ferry bench`: made fresh, removed on drop unless the
/// user named it.
pub(crate) struct WorkDir {
    pub(crate) path: PathBuf,
    remove: bool,
}

impl WorkDir {
    fn new(given: Option<&PathBuf>) -> Result<Self> {
        let (path, remove) = match given {
            Some(p) => (p.join(format!("ferry-bench-{}", std::process::id())), false),
            None => (
                std::env::temp_dir().join(format!("ferry-bench-{}", std::process::id())),
                true,
            ),
        };
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(WorkDir { path, remove })
    }

    /// A fresh, empty subdirectory.
    pub(crate) fn fresh(&self, name: &str) -> Result<PathBuf> {
        let dir = self.path.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(dir)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub(crate) fn run(args: BenchArgs) -> Result<()> {
    let (common, parts): (Common, Vec<Selected>) = match args.part {
        Part::Agent(a) => return agent::run(a),
        Part::Contact(a) => (a.common.clone(), vec![Selected::Contact(a.options)]),
        Part::Store(a) => (
            a.common.clone(),
            vec![Selected::Store(a.sizes.clone(), a.count)],
        ),
        Part::Queue(a) => (
            a.common.clone(),
            vec![Selected::Queue(a.sizes.clone(), a.count)],
        ),
        Part::Rpc(a) => (a.common.clone(), vec![Selected::Rpc(a.options)]),
        Part::All(a) => (
            a.common,
            vec![
                Selected::Contact(a.contact),
                Selected::Store(Vec::new(), 100),
                Selected::Queue(Vec::new(), None),
                // The RPC bench builds from the source tree: `all` says how to run it.
                Selected::Rpc(rpc::RpcOptions::explain_only()),
            ],
        ),
    };
    let needs_root = parts.iter().any(|p| !matches!(p, Selected::Rpc(_)));
    if needs_root {
        netns::check_root()?;
    }
    catch_signals()?;
    let started = Instant::now();
    let work = WorkDir::new(common.work_dir.as_ref())?;
    let dtnd = procs::find_dtnd(common.dtnd.as_deref());
    match &dtnd {
        Ok(p) => eprintln!("dtnd: {}", p.display()),
        Err(why) => eprintln!("dtnd: {why}; its rows say so and Ferry's still run"),
    }
    let mut report = report::Report::new(&common, dtnd.as_ref().err().cloned());
    for part in parts {
        check_interrupt()?;
        match part {
            Selected::Contact(options) => {
                let results = contact::run(&common, &options, &work, dtnd_arg(&dtnd))?;
                report.contact = Some(results);
            }
            Selected::Store(sizes, count) => {
                report.store = Some(store::run(&common, &sizes, count, &work)?);
            }
            Selected::Queue(sizes, count) => {
                report.queue = Some(queue::run(&common, &sizes, count, &work, dtnd_arg(&dtnd))?);
            }
            Selected::Rpc(options) => report.rpc = Some(rpc::run(&options, &common)?),
        }
    }
    report.wall = started.elapsed();
    let written = report.write(&common.out)?;
    eprintln!(
        "report: {} ({} files)",
        common.out.join("README.md").display(),
        written
    );
    Ok(())
}

/// dtnd's path, or why there is none (its rows say so).
fn dtnd_arg(dtnd: &Result<PathBuf, String>) -> Result<&PathBuf, &str> {
    dtnd.as_ref().map_err(String::as_str)
}

enum Selected {
    Contact(contact::ContactOptions),
    Store(Vec<u64>, u64),
    Queue(Vec<u64>, Option<u64>),
    Rpc(rpc::RpcOptions),
}

/// A size on the command line: a number and an optional unit, B, KB/MB/GB (powers of 1000) or
/// KiB/MiB/GiB (powers of 1024), case-insensitive (`10KB`, `1MiB`, `5`).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 10KB, 1MiB or 5"))?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit (B, KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    let bytes = (num * factor).round();
    if !(1.0..=1e12).contains(&bytes) {
        return Err(format!("{text:?}: must be between 1 byte and 1 TB"));
    }
    Ok(bytes as u64)
}

/// A rate on the command line, as tc writes it: `24mbit`, `100Mbit`, `1gbit`, `500kbit`
/// (bits per second, powers of 1000).
pub(crate) fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let (num, factor) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else {
        return Err(format!(
            "{text:?} is not a rate like 24mbit, 100mbit or 1gbit"
        ));
    };
    let num: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a rate like 24mbit, 100mbit or 1gbit"))?;
    let bits = (num * factor).round();
    if !(8_000.0..=100e9).contains(&bits) {
        return Err(format!("{text:?}: must be between 8kbit and 100gbit"));
    }
    Ok(bits as u64)
}

/// A size as the report writes it: `10 KB`, `1 MiB`, `100 MB`, `5 B`.
pub(crate) fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) && bytes < 1_000_000 {
        format!("{} KiB", bytes / 1024)
    } else if bytes >= 1_000_000 && bytes.is_multiple_of(1_000_000) {
        format!("{} MB", bytes / 1_000_000)
    } else if bytes >= 1_000 && bytes.is_multiple_of(1_000) {
        format!("{} KB", bytes / 1_000)
    } else {
        format!("{bytes} B")
    }
}

/// A rate as the report writes it: `24 Mbit/s`.
pub(crate) fn rate_text(bits: u64) -> String {
    if bits.is_multiple_of(1_000_000) {
        format!("{} Mbit/s", bits / 1_000_000)
    } else {
        format!("{:.3} Mbit/s", bits as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_rate, parse_size, size_text};

    #[test]
    fn sizes_and_rates_parse_as_the_help_says() {
        assert_eq!(parse_size("10KB"), Ok(10_000));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("5"), Ok(5));
        assert_eq!(parse_size("200mb"), Ok(200_000_000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(parse_rate("24mbit"), Ok(24_000_000));
        assert_eq!(parse_rate("100Mbit/s"), Ok(100_000_000));
        assert!(parse_rate("24").is_err());
        assert_eq!(size_text(10_000), "10 KB");
        assert_eq!(size_text(1 << 20), "1 MiB");
        assert_eq!(size_text(5), "5 B");
    }
}
