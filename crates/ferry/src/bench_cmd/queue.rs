//! `ferry bench queue`: IBR-DTN Sec. 5.2. Per bundle size, implementation and repeat, in fresh
//! namespaces with fresh nodes and no rate limit: `--count` bundles (default 1,000) are queued at
//! a for b while the link is down, then the link comes up and the time until all are at b is
//! taken (b's deliveries watched every 10 ms). Beside them, in the same run: iperf3 a → b over
//! the same veth (TCP, 3 s) and `dd if=/dev/zero bs=1M conv=fdatasync` into the directory the
//! stores are in. It never limits the link, and reads nothing but the counts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use super::netns::{ADDR_B, Pair};
use super::procs::{Impl, Node, Peering, Watch, instant_of};
use super::stats::Spread;
use super::{Common, WorkDir, check_interrupt, parse_size, pause, size_text};

#[derive(Args)]
pub(crate) struct QueueArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Bundle sizes [default: 5,1KiB,10KiB,100KiB,1MiB; --quick: 1KiB,1MiB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub(crate) sizes: Vec<u64>,
    /// Bundles queued [default: 1000; --quick: 100].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) count: Option<u64>,
}

/// One implementation's row at one size.
pub(crate) struct Row {
    pub(crate) size: u64,
    pub(crate) kind: Impl,
    /// Seconds from link up to the last bundle at b, per repeat.
    pub(crate) seconds: Vec<f64>,
    pub(crate) missing: Option<String>,
}

impl Row {
    pub(crate) fn mbytes_per_s(&self, count: u64) -> Option<Spread> {
        let bytes = (count * self.size) as f64;
        Spread::of(
            &self
                .seconds
                .iter()
                .map(|s| bytes / s / 1e6)
                .collect::<Vec<_>>(),
        )
    }
    pub(crate) fn bundles_per_s(&self, count: u64) -> Option<Spread> {
        Spread::of(
            &self
                .seconds
                .iter()
                .map(|s| count as f64 / s)
                .collect::<Vec<_>>(),
        )
    }
}

pub(crate) struct Results {
    pub(crate) count: u64,
    pub(crate) rows: Vec<Row>,
    /// iperf3 a → b, MB/s per repeat (or why not).
    pub(crate) iperf3: Result<Vec<f64>, String>,
    /// `dd conv=fdatasync`, MB/s per repeat (or why not), and the MiB written.
    pub(crate) dd: Result<Vec<f64>, String>,
    pub(crate) dd_mib: u64,
    pub(crate) disk: PathBuf,
}

/// Runs the sweep: `sizes` and `count` as given (empty, None: the defaults).
pub(crate) fn run(
    common: &Common,
    sizes: &[u64],
    count: Option<u64>,
    work: &WorkDir,
    dtnd: Result<&PathBuf, &str>,
) -> Result<Results> {
    let (dtnd, no_dtnd) = (dtnd.ok(), dtnd.err().unwrap_or_default());
    let sizes = if !sizes.is_empty() {
        sizes.to_vec()
    } else if common.quick {
        vec![1024, 1 << 20]
    } else {
        vec![5, 1024, 10 * 1024, 100 * 1024, 1 << 20]
    };
    let count = count.unwrap_or(if common.quick { 100 } else { 1000 });
    // As many bytes as the largest bundles' run moves (at least 32 MiB): a disk takes a short
    // burst faster than a long one (its own cache), and the reference must be the rate at the
    // volume the nodes write.
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let dd_mib = (count * largest).div_ceil(1 << 20).max(32);
    let mut rows: Vec<Row> = Vec::new();
    for &size in &sizes {
        for kind in [Impl::Ferry, Impl::FerryMemory, Impl::Dtnd] {
            rows.push(Row {
                size,
                kind,
                seconds: Vec::new(),
                missing: (kind == Impl::Dtnd && dtnd.is_none()).then(|| format!("dtnd {no_dtnd}")),
            });
        }
    }
    let mut iperf3: Result<Vec<f64>, String> = Ok(Vec::new());
    let mut dd: Result<Vec<f64>, String> = Ok(Vec::new());
    for repeat in 0..common.repeat {
        for row in rows.iter_mut().filter(|r| r.missing.is_none()) {
            check_interrupt()?;
            match one_run(row.size, count, row.kind, work, dtnd.map(|p| p.as_path())) {
                Ok(s) => {
                    eprintln!(
                        "queue {} × {} {} #{}: {:.3} s, {:.1} MB/s, {:.0} bundles/s",
                        count,
                        size_text(row.size),
                        row.kind.name(),
                        repeat + 1,
                        s,
                        (count * row.size) as f64 / s / 1e6,
                        count as f64 / s
                    );
                    row.seconds.push(s);
                }
                Err(e) => {
                    check_interrupt()?;
                    eprintln!(
                        "queue {} {}: failed: {e:#}",
                        size_text(row.size),
                        row.kind.name()
                    );
                    row.missing = Some(format!("failed: {e:#}"));
                }
            }
        }
        if let Ok(v) = &mut iperf3 {
            match iperf3_run() {
                Ok(mbs) => {
                    eprintln!("queue: iperf3 a → b #{}: {mbs:.1} MB/s", repeat + 1);
                    v.push(mbs);
                }
                Err(e) => {
                    check_interrupt()?;
                    eprintln!("queue: iperf3: {e:#}");
                    iperf3 = Err(format!("{e:#}"));
                }
            }
        }
        if let Ok(v) = &mut dd {
            match dd_run(&work.path, dd_mib) {
                Ok(mbs) => {
                    eprintln!("queue: dd conv=fdatasync #{}: {mbs:.1} MB/s", repeat + 1);
                    v.push(mbs);
                }
                Err(e) => {
                    eprintln!("queue: dd: {e:#}");
                    dd = Err(format!("{e:#}"));
                }
            }
        }
    }
    Ok(Results {
        count,
        rows,
        iperf3,
        dd,
        dd_mib,
        disk: work.path.clone(),
    })
}

/// Queues `count` bundles with the link down, opens it, and returns the seconds until all
/// were at b.
fn one_run(size: u64, count: u64, kind: Impl, work: &WorkDir, dtnd: Option<&Path>) -> Result<f64> {
    let pair = Pair::create("q")?;
    pair.set_link(false)?;
    let tag = kind.kind();
    let (a, b) = Node::start_pair(
        kind,
        &pair,
        work,
        &format!("q{tag}"),
        dtnd,
        &[],
        Peering::Static,
    )?;
    a.feed(size, count)?;
    let limit = Duration::from_secs(300);
    let watch = Watch::start(&b, Duration::from_millis(10), count, limit)?;
    // The watch's first answer (0) before the clock starts, so its start-up is not timed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch.latest().1.is_none() && Instant::now() < deadline {
        pause(Duration::from_millis(5))?;
    }
    let up_at = Instant::now();
    pair.set_link(true)?;
    let deadline = up_at + limit;
    loop {
        let (n, seen) = watch.latest();
        if n >= count {
            let at = seen.map_or_else(Instant::now, instant_of);
            return Ok(at.saturating_duration_since(up_at).as_secs_f64());
        }
        if Instant::now() > deadline {
            bail!(
                "only {n} of {count} bundles at b {} s after the link came up; b's log:\n{}",
                limit.as_secs(),
                b.log_tail()
            );
        }
        pause(Duration::from_millis(5))?;
    }
}

/// iperf3 from a to b over a fresh pair (TCP, 3 s), MB/s as the receiver counted it.
fn iperf3_run() -> Result<f64> {
    if Command::new("iperf3").arg("--version").output().is_err() {
        bail!("iperf3 not found (apt-get install -y iperf3)");
    }
    let pair = Pair::create("i")?;
    let mut server = Pair::command(&pair.b, Path::new("iperf3"))
        .args(["-s", "-1", "-B", ADDR_B])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting iperf3 -s")?;
    let result = (|| -> Result<f64> {
        // The server listens within milliseconds; the client is retried for a second.
        let mut last = String::new();
        for _ in 0..20 {
            pause(Duration::from_millis(50))?;
            let out = Pair::command(&pair.a, Path::new("iperf3"))
                .args(["-c", ADDR_B, "-t", "3", "-J"])
                .stdin(Stdio::null())
                .output()
                .context("running iperf3 -c")?;
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if let Some(bits) = json["end"]["sum_received"]["bits_per_second"].as_f64() {
                return Ok(bits / 8.0 / 1e6);
            }
            last = String::from_utf8_lossy(&out.stdout)
                .chars()
                .take(300)
                .collect();
        }
        bail!("iperf3 gave no result: {last}")
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// `dd if=/dev/zero of=DIR/dd.bin bs=1M count=MIB conv=fdatasync`, MB/s from the bytes and
/// seconds it printed.
fn dd_run(dir: &Path, mib: u64) -> Result<f64> {
    let file = dir.join("dd.bin");
    let out = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .args(["bs=1M", &format!("count={mib}"), "conv=fdatasync"])
        .stdin(Stdio::null())
        .output()
        .context("running dd")?;
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("dd: {}", text.trim());
    }
    dd_rate(&text).with_context(|| format!("reading dd's summary: {}", text.trim()))
}

/// MB/s from dd's last line, `N bytes (…) copied, S s, …`.
fn dd_rate(text: &str) -> Option<f64> {
    let line = text.lines().rev().find(|l| l.contains("copied"))?;
    let bytes: f64 = line.split_whitespace().next()?.parse().ok()?;
    // After "copied, ": the size in parentheses has a comma of its own.
    let secs: f64 = line
        .split_once("copied, ")?
        .1
        .split_whitespace()
        .next()?
        .replace(',', ".")
        .parse()
        .ok()?;
    (secs > 0.0).then(|| bytes / secs / 1e6)
}

/// The summary table, Markdown.
pub(crate) fn table(results: &Results) -> String {
    let mut t = format!(
        "| bundle size | node | {} bundles: link up → all at b, s | MB/s | bundles/s |\n\
         |---|---|---|---|---|\n",
        results.count
    );
    for row in &results.rows {
        if row.seconds.is_empty() {
            let why = row.missing.clone().unwrap_or_else(|| "–".into());
            t += &format!(
                "| {} | {} | {why} | – | – |\n",
                size_text(row.size),
                row.kind.name()
            );
            continue;
        }
        t += &format!(
            "| {} | {} | {} | {} | {} |\n",
            size_text(row.size),
            row.kind.name(),
            super::stats::text(Spread::of(&row.seconds), 3),
            super::stats::text(row.mbytes_per_s(results.count), 1),
            super::stats::text(row.bundles_per_s(results.count), 0),
        );
    }
    let reference = |r: &Result<Vec<f64>, String>| match r {
        Ok(v) => super::stats::text(Spread::of(v), 1),
        Err(e) => e.clone(),
    };
    t += &format!(
        "| – | iperf3 a → b (TCP, 3 s) | – | {} | – |\n",
        reference(&results.iperf3)
    );
    t += &format!(
        "| – | `dd bs=1M count={} conv=fdatasync` | – | {} | – |\n",
        results.dd_mib,
        reference(&results.dd)
    );
    t
}

#[cfg(test)]
mod tests {
    use super::dd_rate;

    #[test]
    fn dd_summaries_are_read() {
        let text = "32+0 records in\n32+0 records out\n33554432 bytes (34 MB, 32 MiB) copied, \
                    0.5 s, 67.1 MB/s\n";
        let r = dd_rate(text).unwrap();
        assert!((r - 67.108864).abs() < 1e-6, "{r}");
        assert_eq!(dd_rate("nothing"), None);
    }
}
