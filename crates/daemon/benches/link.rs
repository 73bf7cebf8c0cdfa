//! Daemon-to-daemon transfer over TCPCLv4 on loopback, beside raw TCP measured in the same run.
//!
//! `cargo bench -p ferry-daemon --bench link` prints one table (`FERRY_BENCH_QUICK=1` for a smoke
//! run with small counts; `FERRY_BENCH_ONLY=tcp,1mib,1kib,rtt`, any subset, to profile one part).
//!
//! Two daemons, `dtn://a/` and `dtn://b/`, run in this process (`daemon::start`) on one tokio
//! runtime with two workers, as `ferry node` has. Each has its own durable `DiskStore` (SQLite WAL,
//! group commit, payload files synced before the commit), so every figure includes durable storage
//! on both ends. `b` dials `a` as its static peer; UDP, discovery and the HTTP API are off, so
//! everything crosses the one TCPCLv4 session. The bench talks to the daemons only through their
//! control channels (`Request::Send` and `Request::Status`, what the HTTP API does for a client),
//! with a fresh pair of daemons for each measurement so that no backlog or store content carries
//! over:
//!
//! - 1 MiB bundles a→b (1,000): from the first send until `b`'s `delivered` counter grew by N;
//!   payload MB/s and Gbit/s, against raw TCP. Long enough to reach the steady state, where the
//!   page cache no longer hides the disk.
//! - 1 KiB bundles a→b (100,000): the same, in bundles per second.
//! - One-hop RTT (200 sequential pings): a 64-byte bundle from `dtn://a/ping` to `b`'s echo
//!   service, which sends it back; from the send request until `a`'s `delivered` grows (polled
//!   as fast as the control channel answers). Once in the default `dtn` class (stored at every step), once in the
//!   `datagram` class (real-time, not stored; only `a`'s durable inbox is in the path). Beside
//!   them: the store syncs both daemons made per dtn ping and how long they took (their
//!   `ferry_store_sync_seconds`), which together set the dtn class's floor, and what a bare
//!   sync costs here (a 4 KiB append and `fdatasync` in the stores' directory, as many times
//!   as there were pings).
//!
//! Sends are pipelined, [`SEND_WINDOW`] requests outstanding, as behind a busy HTTP API. The
//! process's resident set (both daemons and the bench) at the start and peak of each bulk transfer
//! is noted.
//!
//! Why the reference is measured here and not quoted: loopback TCP throughput on a shared 2-core
//! VM moves by tens of percent with the host's load, so a ratio is only meaningful against a
//! figure taken minutes apart on the same machine. The raw-TCP reference is `iperf3` (one stream,
//! `-t 3`) when it is on `PATH`, and always an in-process tokio blast (one connection, 64 KiB
//! writes) in the runtime the daemons use. The other references are quoted, marked "(quoted)":
//! dtn7-rs 0.21 moving 1 KB bundles node to node, measured earlier on this project's 2-core VMs,
//! and Hardy's published one-hop ping RTT (docs/performance.md, "Targets").
//!
//! Stores live under `$FERRY_BENCH_DIR`, else `std::env::temp_dir()`; the file system type is
//! printed, with a warning on tmpfs, where syncs are free. Every wait is bounded; a full run takes
//! well under two minutes.

// A benchmark is an I/O shell: it reads the clock, spawns processes and opens sockets.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daemon::control::{Request, SendRequest, Status};
use daemon::{Config, Running};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinSet;

#[path = "../tests/common/mod.rs"]
mod common;
use common::{TempDir, free_port, loopback_config};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// Send requests outstanding at once.
const SEND_WINDOW: usize = 64;
/// How long a ping may take before it counts as lost.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// Unmeasured pings before the measured ones.
const PING_WARMUP: usize = 5;

/// Counts and time limits of one run.
struct Plan {
    iperf_seconds: u32,
    blast_bytes: u64,
    blast_time: Duration,
    large: usize,
    small: usize,
    bulk_limit: Duration,
    pings: usize,
    ping_limit: Duration,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                iperf_seconds: 1,
                blast_bytes: 256 << 20,
                blast_time: Duration::from_secs(1),
                large: 20,
                small: 1_000,
                bulk_limit: Duration::from_secs(10),
                pings: 20,
                ping_limit: Duration::from_secs(10),
            }
        } else {
            Self {
                iperf_seconds: 3,
                blast_bytes: 1 << 30,
                blast_time: Duration::from_secs(3),
                large: 1_000,
                small: 100_000,
                bulk_limit: Duration::from_secs(30),
                pings: 200,
                ping_limit: Duration::from_secs(20),
            }
        }
    }
}

fn main() {
    let quick = std::env::var("FERRY_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let only = std::env::var("FERRY_BENCH_ONLY").unwrap_or_default();
    let run = |what: &str| only.is_empty() || only.split(',').any(|o| o.trim() == what);
    let plan = Plan::new(quick);
    let (base, fs_type) = common::bench_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the tokio runtime");

    let skipped = || Err("not measured (FERRY_BENCH_ONLY)".to_owned());
    let iperf = if run("tcp") {
        progress("raw TCP: iperf3");
        iperf3(plan.iperf_seconds)
    } else {
        skipped()
    };
    let blast = if run("tcp") {
        progress("raw TCP: tokio blast");
        runtime.block_on(tcp_blast(plan.blast_bytes, plan.blast_time))
    } else {
        skipped()
    };
    let small = run("1kib").then(|| {
        progress(&format!("ferry: {} bundles of 1 KiB", plan.small));
        runtime.block_on(async {
            let pair = Pair::start(&base).await;
            let r = bulk(&pair, KIB, plan.small, plan.bulk_limit).await;
            pair.shut_down().await;
            r
        })
    });
    let large = run("1mib").then(|| {
        progress(&format!("ferry: {} bundles of 1 MiB", plan.large));
        runtime.block_on(async {
            let pair = Pair::start(&base).await;
            let r = bulk(&pair, MIB, plan.large, plan.bulk_limit).await;
            pair.shut_down().await;
            r
        })
    });
    let pings = run("rtt").then(|| {
        progress(&format!("ferry: {} echo pings", plan.pings));
        runtime.block_on(async {
            let pair = Pair::start(&base).await;
            let stored = ping(&pair, "dtn", plan.pings, plan.ping_limit).await;
            let datagram = ping(&pair, "datagram", plan.pings, plan.ping_limit).await;
            pair.shut_down().await;
            let fsync = sync_latencies(&base, plan.pings);
            (stored, datagram, fsync)
        })
    });
    runtime.shutdown_timeout(Duration::from_secs(2));

    print_table(
        &Tables {
            quick,
            base: &base,
            fs_type: &fs_type,
            iperf: &iperf,
            blast: &blast,
            large: large.as_ref(),
            small: small.as_ref(),
            pings: pings.as_ref().map(|p| &p.0),
            datagram_pings: pings.as_ref().map(|p| &p.1),
            fsync: pings.as_ref().map(|p| &p.2),
        },
        &mut std::io::stdout().lock(),
    )
    .expect("write the table to stdout");
}

fn progress(what: &str) {
    eprintln!("link bench: {what}…");
}

// ----- raw TCP -----

/// iperf3's one-stream loopback throughput in bits/s, or why there is none.
fn iperf3(seconds: u32) -> Result<f64, String> {
    let port = free_port().to_string();
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-p", &port, "-B", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 not run ({e})"))?;
    let result = iperf3_client(&port, seconds);
    // `-1` makes the server exit after one client; make sure it does.
    if wait_bounded(&mut server, Duration::from_secs(2)).is_none() {
        let _ = server.kill();
        let _ = server.wait();
    }
    result
}

fn iperf3_client(port: &str, seconds: u32) -> Result<f64, String> {
    let seconds = seconds.to_string();
    let mut last_error = String::new();
    // The server needs a moment to listen; retry a few times rather than sleeping blindly.
    for _ in 0..10 {
        let mut client = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", port, "-t", &seconds, "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 client: {e}"))?;
        let mut stdout = client.stdout.take().expect("piped stdout");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            text
        });
        let limit = Duration::from_secs(seconds.parse::<u64>().unwrap_or(3) + 10);
        if wait_bounded(&mut client, limit).is_none() {
            let _ = client.kill();
            let _ = client.wait();
            return Err("iperf3 client did not finish".into());
        }
        let text = reader.join().unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("iperf3 -J output is not JSON: {e}"))?;
        if let Some(bps) = json["end"]["sum_received"]["bits_per_second"].as_f64() {
            return Ok(bps);
        }
        last_error = json["error"].as_str().unwrap_or("no result").to_owned();
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("iperf3: {last_error}"))
}

/// Waits for a child at most `limit`; `None` if it is still running.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// One loopback connection in the daemons' runtime: 64 KiB writes until `bytes` or `time`,
/// received bytes per second (bits/s) at the reader.
async fn tcp_blast(bytes: u64, time: Duration) -> Result<f64, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let reader = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await?;
        let mut buf = vec![0u8; 64 * KIB];
        let mut total = 0u64;
        loop {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>((total, Instant::now()));
            }
            total += n as u64;
        }
    });
    let writer = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let chunk = vec![0x5au8; 64 * KIB];
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < bytes && start.elapsed() < time {
            conn.write_all(&chunk).await?;
            sent += chunk.len() as u64;
        }
        conn.shutdown().await?;
        Ok::<_, std::io::Error>(start)
    };
    let outcome = tokio::time::timeout(time + Duration::from_secs(10), async {
        let start = writer.await?;
        let (total, end) = reader.await.map_err(std::io::Error::other)??;
        Ok::<_, std::io::Error>(total as f64 * 8.0 / (end - start).as_secs_f64())
    })
    .await;
    match outcome {
        Ok(Ok(bps)) => Ok(bps),
        Ok(Err(e)) => Err(format!("tokio blast: {e}")),
        Err(_) => Err("tokio blast did not finish".into()),
    }
}

// ----- the daemons -----

/// Two daemons, `dtn://a/` and `dtn://b/`, with a TCPCLv4 session between them.
struct Pair {
    a: Running,
    b: Running,
    _dirs: (TempDir, TempDir),
}

impl Pair {
    async fn start(base: &Path) -> Self {
        let dirs = (
            TempDir::new_in(base, "link-bench-a"),
            TempDir::new_in(base, "link-bench-b"),
        );
        let a = daemon::start(config("a", dirs.0.path(), None))
            .await
            .expect("start daemon a");
        let a_addr = *a.tcpcl_addrs.first().expect("a listens for TCPCL");
        let b = daemon::start(config("b", dirs.1.path(), Some(a_addr)))
            .await
            .expect("start daemon b");
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let peers = a
                .control
                .ask(Request::Peers)
                .await
                .expect("daemon a answers");
            if peers.iter().any(|p| p.node_id == "dtn://b/") {
                break;
            }
            assert!(Instant::now() < until, "no session between a and b in 10 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Self { a, b, _dirs: dirs }
    }

    async fn shut_down(self) {
        tokio::join!(self.a.shut_down(), self.b.shut_down());
    }
}

fn config(name: &str, dir: &Path, peer: Option<SocketAddr>) -> Config {
    let mut c = loopback_config(name, dir, 0);
    c.store_quota = 20_000_000_000;
    c.peers = peer.into_iter().collect();
    c
}

async fn status(node: &Running) -> Status {
    node.control
        .ask(Request::Status)
        .await
        .expect("the daemon answers Status")
}

fn send_request(destination: &str, source: Option<&str>, size: usize) -> SendRequest {
    // ASCII text: the API's `payload` is taken as is, where `payload_base64` would be decoded.
    let payload: String = (0..size)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    SendRequest {
        source: source.map(Into::into),
        payload: Some(payload),
        lifetime: Some("1h".into()),
        ..SendRequest::to(destination)
    }
}

/// What one bulk transfer achieved.
struct Bulk {
    size: usize,
    wanted: usize,
    delivered: u64,
    /// From the first send until the last counted delivery.
    elapsed: Duration,
    /// From the first send until `a` had accepted the last one (all sends answered).
    accepted_in: Option<Duration>,
    /// The process's resident set when the transfer started and its peak during it (both daemons
    /// and the bench; the start includes what the allocator kept from earlier measurements).
    rss: Option<(u64, u64)>,
    error: Option<String>,
}

impl Bulk {
    fn per_second(&self) -> f64 {
        self.delivered as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn bits_per_second(&self) -> f64 {
        self.per_second() * self.size as f64 * 8.0
    }
}

/// Sends `count` bundles of `size` bytes a→b (pipelined) and waits, at most `limit`, until b
/// delivered them.
async fn bulk(pair: &Pair, size: usize, count: usize, limit: Duration) -> Bulk {
    reset_peak_rss();
    let rss_before = memory("VmRSS:");
    let before = status(&pair.b).await.counters.delivered;
    let request = send_request("dtn://b/inbox", None, size);
    let control = pair.a.control.clone();
    let start = Instant::now();
    let deadline = start + limit;
    let sender = tokio::spawn(async move {
        let mut inflight = JoinSet::new();
        let mut started = 0;
        let mut error = None;
        while (started < count || !inflight.is_empty()) && Instant::now() < deadline {
            if started < count && inflight.len() < SEND_WINDOW && error.is_none() {
                let (control, request) = (control.clone(), request.clone());
                inflight.spawn(async move {
                    control
                        .ask(|reply| Request::Send(request, reply))
                        .await
                        .and_then(|r| r)
                });
                started += 1;
                continue;
            }
            match inflight.join_next().await {
                Some(Ok(Ok(_))) => {}
                Some(Ok(Err(e))) => {
                    error.get_or_insert(e.to_string());
                }
                Some(Err(e)) => {
                    error.get_or_insert(e.to_string());
                }
                None => break,
            }
            if error.is_some() && inflight.is_empty() {
                break;
            }
        }
        inflight.abort_all();
        let done = started == count && error.is_none() && Instant::now() < deadline;
        (done.then(|| start.elapsed()), error)
    });
    let mut delivered = 0;
    let mut last = start;
    while (delivered as usize) < count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let now = status(&pair.b).await.counters.delivered - before;
        if now > delivered {
            delivered = now;
            last = Instant::now();
        }
        if sender.is_finished() && delivered == 0 && start.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    let (accepted_in, error) = match tokio::time::timeout(Duration::from_secs(1), sender).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (None, Some(format!("sender task: {e}"))),
        Err(_) => (None, None),
    };
    Bulk {
        size,
        wanted: count,
        delivered,
        elapsed: last - start,
        accepted_in,
        rss: rss_before.zip(memory("VmHWM:")),
        error,
    }
}

/// Resets the kernel's peak-RSS mark of this process (Linux; a no-op elsewhere).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A memory figure of this process from `/proc/self/status` (`VmRSS:` now, `VmHWM:` the peak
/// since start or the last reset), in bytes (Linux).
fn memory(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Round-trip times of sequential pings a→b's echo→a.
struct Pings {
    rtts: Vec<Duration>,
    wanted: usize,
    lost: usize,
    /// The first send the daemon turned down, if any.
    error: Option<String>,
    /// Pings sent, warm-up included.
    sent: usize,
    /// Store syncs both daemons made while the pings ran (warm-up included), and the seconds
    /// they took.
    syncs: u64,
    sync_seconds: f64,
}

impl Pings {
    /// The `q` quantile (nearest rank) of the sorted RTTs.
    fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.rtts.len();
        (n > 0).then(|| self.rtts[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
    }
}

/// Sequential echo pings of the given class (`dtn`: stored at every step; `datagram`: real-time,
/// never stored).
async fn ping(pair: &Pair, class: &str, count: usize, limit: Duration) -> Pings {
    let mut request = send_request("dtn://b/echo", Some("ping"), 64);
    request.class = Some(class.into());
    let deadline = Instant::now() + limit;
    let mut delivered = status(&pair.a).await.counters.delivered;
    let syncs_before = (syncs(&pair.a).await, syncs(&pair.b).await);
    let mut rtts = Vec::with_capacity(count);
    let mut lost = 0;
    let mut error = None;
    let mut sent_count = 0;
    // Unmeasured pings first: the session's buffers and the stores' statements warm up.
    for i in 0..count + PING_WARMUP {
        if Instant::now() >= deadline {
            break;
        }
        let start = Instant::now();
        sent_count += 1;
        let sent = pair
            .a
            .control
            .ask(|reply| Request::Send(request.clone(), reply))
            .await
            .and_then(|r| r);
        if let Err(e) = sent {
            error.get_or_insert(e.to_string());
            lost += 1;
            continue;
        }
        let rtt = loop {
            let now = status(&pair.a).await.counters.delivered;
            if now > delivered {
                delivered = now;
                break Some(start.elapsed());
            }
            if start.elapsed() > PING_TIMEOUT {
                break None;
            }
            tokio::task::yield_now().await;
        };
        match rtt {
            Some(rtt) if i >= PING_WARMUP => rtts.push(rtt),
            Some(_) => {}
            None => lost += 1,
        }
    }
    let (a, b) = (syncs(&pair.a).await, syncs(&pair.b).await);
    let syncs = (a.0 + b.0).saturating_sub(syncs_before.0.0 + syncs_before.1.0);
    let sync_seconds = (a.1 + b.1 - syncs_before.0.1 - syncs_before.1.1).max(0.0);
    rtts.sort();
    Pings {
        rtts,
        wanted: count,
        lost,
        error,
        sent: sent_count,
        syncs,
        sync_seconds,
    }
}

/// The store syncs a daemon made so far and the seconds they took, from its
/// `ferry_store_sync_seconds` histogram.
async fn syncs(node: &Running) -> (u64, f64) {
    let text = node
        .control
        .ask(Request::Metrics)
        .await
        .expect("the daemon answers Metrics");
    let figure = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} in the metrics"))
    };
    (
        figure("ferry_store_sync_seconds_count") as u64,
        figure("ferry_store_sync_seconds_sum"),
    )
}

/// Latencies of `count` appends of 4 KiB to a file in `dir`, each followed by `fdatasync`: what
/// one store sync costs on this disk, measured beside the pings.
fn sync_latencies(dir: &Path, count: usize) -> std::io::Result<Vec<Duration>> {
    use std::io::Write as _;
    let path = dir.join("sync-probe");
    let mut file = std::fs::File::create(&path)?;
    let block = vec![7u8; 4096];
    let mut took = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        took.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    took.sort();
    Ok(took)
}

// ----- the table -----

struct Tables<'a> {
    quick: bool,
    base: &'a Path,
    fs_type: &'a str,
    iperf: &'a Result<f64, String>,
    blast: &'a Result<f64, String>,
    large: Option<&'a Bulk>,
    small: Option<&'a Bulk>,
    pings: Option<&'a Pings>,
    datagram_pings: Option<&'a Pings>,
    /// 4 KiB append + fdatasync latencies in the stores' directory, sorted.
    fsync: Option<&'a std::io::Result<Vec<Duration>>>,
}

/// dtn7-rs 0.21, 1 KB bundles node to node, measured earlier on this project's 2-core VMs.
const DTN7_SMALL_PER_S: (f64, f64) = (2_900.0, 3_500.0);
/// Hardy's published one-hop ping RTT, ms.
const HARDY_RTT_MS: f64 = 1.8;

fn row(out: &mut dyn std::io::Write, cells: [&str; 4]) -> std::io::Result<()> {
    let [what, ferry, reference, ratio] = cells;
    writeln!(out, "{what:<30} {ferry:<24} {reference:<30} {ratio}")
}

fn print_table(t: &Tables<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "ferry link benchmark (loopback, 2 daemons in one process, durable stores on both ends){}   {}",
        if t.quick { ", QUICK" } else { "" },
        common::today()
    )?;
    writeln!(
        out,
        "stores in {} ({}); one tokio runtime, 2 workers; rates count payload bytes",
        t.base.display(),
        t.fs_type
    )?;
    if t.fs_type == "tmpfs" {
        writeln!(
            out,
            "WARNING: tmpfs makes every sync free; these are not durable figures"
        )?;
    }
    writeln!(out)?;
    row(out, ["what", "ferry", "reference", "ratio"])?;

    // The raw-TCP reference the 1 MiB row is judged against: iperf3 if it ran, else the blast.
    let reference = match (t.iperf, t.blast) {
        (Ok(bps), _) => Some(("iperf3", *bps)),
        (Err(_), Ok(bps)) => Some(("tokio TCP", *bps)),
        _ => None,
    };
    if let Some(l) = t.large {
        let bps = l.bits_per_second();
        let ferry = format!("{} ({:.0} MB/s)", gbits(bps), bps / 8e6);
        match reference {
            Some((name, tcp)) => row(
                out,
                [
                    "1 MiB bundles a→b",
                    &ferry,
                    &format!("{name} {}", gbits(tcp)),
                    &format!("{:.1} %", 100.0 * bps / tcp),
                ],
            )?,
            None => row(out, ["1 MiB bundles a→b", &ferry, "no raw TCP figure", ""])?,
        }
    }
    if let Some(s) = t.small {
        let rate = s.per_second();
        row(
            out,
            [
                "1 KiB bundles a→b",
                &format!("{}/s", count(rate)),
                &format!(
                    "dtn7-rs {:.1}–{:.1} k/s (quoted)",
                    DTN7_SMALL_PER_S.0 / 1e3,
                    DTN7_SMALL_PER_S.1 / 1e3
                ),
                &format!(
                    "{:.2}–{:.2}×",
                    rate / DTN7_SMALL_PER_S.1,
                    rate / DTN7_SMALL_PER_S.0
                ),
            ],
        )?;
    }
    for (what, pings) in [
        ("one-hop echo RTT p50/p90/max", t.pings),
        ("  same, datagram class", t.datagram_pings),
    ] {
        let Some(p) = pings else {
            continue;
        };
        match (p.quantile(0.5), p.quantile(0.9), p.rtts.last()) {
            (Some(p50), Some(p90), Some(max)) => row(
                out,
                [
                    what,
                    &format!("{}/{}/{} ms", ms(p50), ms(p90), ms(*max)),
                    &format!("Hardy {HARDY_RTT_MS} ms (quoted)"),
                    &format!("{:.2}×", p50.as_secs_f64() * 1e3 / HARDY_RTT_MS),
                ],
            )?,
            _ => row(out, [what, "no ping came back", "", ""])?,
        }
    }
    writeln!(out)?;
    writeln!(out, "raw TCP on loopback, one stream, this run:")?;
    match t.iperf {
        Ok(bps) => writeln!(out, "  iperf3 -c (-J, one stream)    {}", gbits(*bps))?,
        Err(e) => writeln!(out, "  iperf3                        {e}")?,
    }
    match t.blast {
        Ok(bps) => writeln!(out, "  tokio, 64 KiB writes          {}", gbits(*bps))?,
        Err(e) => writeln!(out, "  tokio                         {e}")?,
    }
    writeln!(out, "notes:")?;
    for b in [t.small, t.large].into_iter().flatten() {
        let size = if b.size >= MIB { "1 MiB" } else { "1 KiB" };
        write!(
            out,
            "  {size}: {} of {} delivered in {:.2} s",
            b.delivered,
            b.wanted,
            b.elapsed.as_secs_f64()
        )?;
        match b.accepted_in {
            Some(d) => write!(
                out,
                "; a had accepted every send after {:.2} s",
                d.as_secs_f64()
            )?,
            None => write!(
                out,
                "; a had not accepted every send when the bound ran out"
            )?,
        }
        if let Some((start, peak)) = b.rss {
            write!(out, "; RSS {} → peak {} MiB", start >> 20, peak >> 20)?;
        }
        if (b.delivered as usize) < b.wanted {
            write!(out, " (BOUNDED: the rate is of what arrived)")?;
        }
        if let Some(e) = &b.error {
            write!(out, "; error: {e}")?;
        }
        writeln!(out)?;
    }
    for (class, pings) in [("dtn", t.pings), ("datagram", t.datagram_pings)] {
        if let Some(p) = pings {
            write!(
                out,
                "  {class} pings: {} measured of {}, {} lost (timeout {:?})",
                p.rtts.len(),
                p.wanted,
                p.lost,
                PING_TIMEOUT
            )?;
            match &p.error {
                Some(e) => writeln!(out, "; error: {e}")?,
                None => writeln!(out)?,
            }
        }
    }
    // What bounds the dtn class's RTT: every step stores the bundle and releases it only once
    // a sync made it durable, so the syncs on the path, one after another, set a floor.
    if let (Some(p), Some(fsync)) = (t.pings, t.fsync) {
        let pings = p.sent.max(1) as f64;
        match fsync {
            Ok(took) if !took.is_empty() => {
                let p50 = took[took.len() / 2];
                let per_ping = p.syncs as f64 / pings;
                let mean_ms = p.sync_seconds * 1e3 / (p.syncs.max(1) as f64);
                writeln!(
                    out,
                    "  dtn pings: {per_ping:.1} store syncs a ping (a and b), {mean_ms:.3} ms \
                     each on average (the daemons' ferry_store_sync_seconds), so about {:.2} ms \
                     of a ping; a 4 KiB append + fdatasync in the stores' directory, after the \
                     pings: p50 {} ms (max {} ms)",
                    per_ping * mean_ms,
                    ms(p50),
                    ms(*took.last().unwrap_or(&p50)),
                )?;
            }
            Ok(_) => {}
            Err(e) => writeln!(out, "  fdatasync probe failed: {e}")?,
        }
    }
    Ok(())
}

fn gbits(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.0} Mbit/s", bps / 1e6)
    }
}

fn count(n: f64) -> String {
    if n >= 1e3 {
        format!("{:.1} k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.1}")
    }
}
