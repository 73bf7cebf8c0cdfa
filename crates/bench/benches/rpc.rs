//! Ferry's RPC between two daemons on loopback, beside a gRPC (tonic) echo measured in the same
//! run.
//!
//! `cargo bench -p ferry-bench --bench rpc` prints one table: rows gRPC echo, Ferry `null` (by
//! `call_and_wait`, then by `call` + `wait_call`), Ferry `echo` (a process per call); columns
//! p50/p90/p99 of sequential calls, calls/s with 64 in flight, and Ferry's ratios to gRPC. The
//! targets (docs/performance.md, "Targets") are p50 ≤ 2× gRPC and calls/s ≥ gRPC. Sizes come
//! from the environment:
//!
//! | variable | default | what |
//! |---|---|---|
//! | `FERRY_BENCH_CALLS` | 2000 | sequential calls per latency row |
//! | `FERRY_BENCH_INFLIGHT_CALLS` | 100000 | calls of the 64-in-flight measurement (0: skip it) |
//! | `FERRY_BENCH_ECHO_CALLS` | 200 | sequential calls of Ferry `echo` (a process each) |
//! | `FERRY_BENCH_WARMUP` | 200 | unmeasured calls before each measurement |
//! | `FERRY_BENCH_QUICK` | unset | 1: a smoke run (200 / 2000 / 20 / 20) |
//! | `FERRY_BENCH_ONLY` | all | any of `grpc,null,null-report,null-durable,echo` |
//! | `FERRY_BENCH_NULL_PROCEDURE` | `null` | the procedure of the "null" row |
//! | `FERRY_BENCH_DIR` | temp dir | where the daemons' stores live |
//! | `FERRY_BENCH_RUNTIMES` | `shared` | `split`: the servers on a runtime of their own; `single`: one worker for all (below) |
//! | `FERRY_BENCH_ROUNDS` | 1 | times the whole table is measured, one after another (below) |
//! | `FERRY_BENCH_TRACE` | unset | a path: each sequential row's calls go to `PATH.grpc`, `PATH.ferry-outcome`, … as CSV (start and round trip in µs), to see when the slow ones came |
//!
//! Everything runs in this process on one tokio runtime with two workers, as `ferry node` has,
//! so both systems share the same two cores:
//!
//! - gRPC: a tonic server and client on 127.0.0.1, one HTTP/2 connection (what a tonic
//!   `Channel` does), a unary `Echo` of an empty message. The service is written by hand with
//!   prost's derive and tonic's `server::Grpc`/`client::Grpc`, as tonic-build would generate it,
//!   so no protoc is needed.
//! - Ferry: a client daemon `dtn://a/` dialing a server daemon `dtn://b/` as its static peer
//!   (TCPCLv4), each with its own durable store (SQLite WAL + payload files), `b` serving
//!   `examples/node.toml`'s procedures. A call is `ControlHandle::call_for_outcome` (one
//!   request, answered with the call's state and replies when it finished: a unary call, as
//!   gRPC's); in the row "call_and_wait" (`FERRY_BENCH_ONLY=null-report`),
//!   `ControlHandle::call_and_wait`, answered the same way with the call's report as the HTTP API
//!   shows it (`POST /v1/calls?wait=`: ids, keys and values as text, the timeline); in the row
//!   "call + wait" (`FERRY_BENCH_ONLY=null-durable`), `ControlHandle::call` (answered once the
//!   call is durable) then `ControlHandle::wait_call`, through the Rust library API (what the
//!   HTTP API does for a client, minus HTTP): explicit target `dtn://b/`, transport
//!   `auto` (which takes the live path by stream). `null` takes no parameters and is answered
//!   in-process by every node; `echo` runs `examples/echo.sh` once per call, with an empty text
//!   (latency only: the example allows 4 at once). Each Ferry measurement gets a fresh pair of
//!   daemons, so no calls carry over. The "`call` answered" note is the part of the round trip
//!   until `call` returned (the call made durable on the client).
//!
//! With `FERRY_BENCH_RUNTIMES=split` the two sides run as two processes would, each on a
//! runtime of one worker: the gRPC server and the server daemon `b` on one, the callers, the
//! gRPC client and the client daemon `a` on the other (the default, `shared`, puts all of it on
//! one runtime of two workers, where tokio's scheduler may run both daemons' loops on one
//! worker while the other has little to do).
//!
//! With `FERRY_BENCH_RUNTIMES=single` everything runs on one worker: a rate is then the inverse
//! of the CPU time a call costs, free of how the scheduler spreads tasks over two cores (the
//! steadiest figure for comparing two builds' work per call).
//!
//! 64 in flight: 64 tasks, each making calls one after another until a shared count is reached;
//! calls/s is that count over the time until the last one finished, and the rates over the first
//! and second half of the calls are noted (a falling rate means work that grows with the calls
//! made). The load average is printed: on a 2-core machine shared with builds, every figure moves
//! by several times, so compare rows of one run, not runs. With `FERRY_BENCH_ROUNDS=n` the
//! table is measured n times over (each round its own servers and daemons) and a last line
//! gives each round's calls/s of gRPC and of Ferry's first row with 64 in flight, their ratios
//! and the median ratio: on this kind of machine gRPC's rate alone moves between two speeds from
//! run to run (≈20 and ≈30 k/s on the 2-core VM of these notes), so one round's ratio says
//! little. Every call must succeed
//! (failures are counted and shown, never timed); every wait is bounded ([`CALL_TIMEOUT`] per
//! call; a measurement stops after [`SEQUENTIAL_LIMIT`] or [`IN_FLIGHT_LIMIT`], and then says
//! so and reports the calls that finished), so a slow system still gives its figures within
//! about a minute after the build.

// A benchmark is an I/O shell: it reads the clock, spawns processes and opens sockets.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use daemon::calls::{CallInfo, CallOutcome, CallSpec};
use daemon::control::{ControlHandle, Request};
use daemon::{Config, Running};
use tokio::task::JoinSet;

#[path = "../../daemon/tests/common/mod.rs"]
mod common;
use common::{TempDir, loopback_config};

/// Calls outstanding at once in the throughput measurement.
const IN_FLIGHT: usize = 64;
/// How long one call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a latency measurement may take: it stops there and reports the calls that finished.
const SEQUENTIAL_LIMIT: Duration = Duration::from_secs(20);
/// How long a throughput measurement may take: calls/s is then of the calls that finished.
const IN_FLIGHT_LIMIT: Duration = Duration::from_secs(15);

/// Counts of one run.
struct Plan {
    quick: bool,
    sequential: usize,
    in_flight: usize,
    echo: usize,
    warmup: usize,
    null_procedure: String,
    /// Times the whole table is measured.
    rounds: usize,
}

impl Plan {
    fn from_env() -> Self {
        let quick = std::env::var("FERRY_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let (sequential, in_flight, echo, warmup) = if quick {
            (200, 2_000, 20, 20)
        } else {
            // 100,000 keeps gRPC busy for a few seconds (20,000 took 0.4 s, too short to be
            // steady); Ferry's measurement stops at IN_FLIGHT_LIMIT long before.
            (2_000, 100_000, 200, 200)
        };
        let count = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .map(|v| {
                    v.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("{name}={v:?} is not a count"))
                })
                .unwrap_or(default)
        };
        Self {
            quick,
            sequential: count("FERRY_BENCH_CALLS", sequential),
            in_flight: count("FERRY_BENCH_INFLIGHT_CALLS", in_flight),
            echo: count("FERRY_BENCH_ECHO_CALLS", echo),
            warmup: count("FERRY_BENCH_WARMUP", warmup),
            null_procedure: std::env::var("FERRY_BENCH_NULL_PROCEDURE")
                .ok()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| daemon::rpc_shell::NULL_PROCEDURE.into()),
            rounds: count("FERRY_BENCH_ROUNDS", 1).max(1),
        }
    }
}

fn main() {
    let plan = Plan::from_env();
    let only = std::env::var("FERRY_BENCH_ONLY").unwrap_or_default();
    let run = |what: &str| only.is_empty() || only.split(',').any(|o| o.trim() == what);
    let (base, fs_type) = common::bench_dir();
    let (split, workers) = match std::env::var("FERRY_BENCH_RUNTIMES").as_deref() {
        Ok("split") => (true, 1),
        Ok("single") => (false, 1),
        Ok("shared") | Ok("") | Err(_) => (false, 2),
        Ok(other) => panic!("FERRY_BENCH_RUNTIMES={other:?}: shared, split or single"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    let server_runtime = split.then(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("bench-server")
            .enable_all()
            .build()
            .expect("build the servers' tokio runtime")
    });
    let servers = ServerSide(match &server_runtime {
        Some(rt) => rt.handle().clone(),
        None => runtime.handle().clone(),
    });

    let mut rates: Vec<RoundRates> = Vec::new();
    for round in 1..=plan.rounds {
        let (rows, load) = measure_round(&plan, &runtime, &servers, &base, &run);
        let rate_of = |row: Option<&Row>| row.and_then(|r| r.rate.as_ref()).map(Rate::per_second);
        let grpc = rate_of(rows.iter().find(|r| r.name.starts_with("gRPC")));
        let ferry = rate_of(rows.iter().find(|r| r.name.starts_with("Ferry")));
        rates.push((grpc, ferry));
        if plan.rounds > 1 {
            println!("round {round} of {}", plan.rounds);
        }
        print_table(
            &plan,
            &base,
            &fs_type,
            load,
            &rows,
            &mut std::io::stdout().lock(),
        )
        .expect("write the table to stdout");
    }
    runtime.shutdown_timeout(Duration::from_secs(2));
    if let Some(rt) = server_runtime {
        rt.shutdown_timeout(Duration::from_secs(2));
    }
    if plan.rounds > 1 {
        println!("{}", rounds_summary(&rates));
    }
}

/// A round's calls/s with 64 in flight: gRPC's and Ferry's first row's, if measured.
type RoundRates = (Option<f64>, Option<f64>);

/// The last line of a run of several rounds: each round's calls/s with 64 in flight, gRPC's and
/// Ferry's, their ratio, and the median ratio.
fn rounds_summary(rates: &[RoundRates]) -> String {
    let k = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.1}", r / 1000.0));
    let list =
        |f: &dyn Fn(&RoundRates) -> String| rates.iter().map(f).collect::<Vec<_>>().join(" / ");
    let mut ratios: Vec<f64> = rates
        .iter()
        .filter_map(|&(g, f)| Some(f? / g.filter(|g| *g > 0.0)?))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let median = match ratios.len() {
        0 => "-".to_string(),
        n if n % 2 == 1 => format!("{:.2}×", ratios[n / 2]),
        n => format!("{:.2}×", (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0),
    };
    format!(
        "calls/s with {IN_FLIGHT} in flight, {} rounds: gRPC {} k/s; Ferry {} k/s; ratio {} (median {median})",
        rates.len(),
        list(&|&(g, _)| k(g)),
        list(&|&(_, f)| k(f)),
        list(&|&(g, f)| match (g, f) {
            (Some(g), Some(f)) if g > 0.0 => format!("{:.2}×", f / g),
            _ => "-".to_string(),
        }),
    )
}

/// Where the Ferry rows keep their stores.
type BaseDir = std::path::PathBuf;

/// One round: every row asked for, and the load average before and after.
fn measure_round(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
    servers: &ServerSide,
    base: &BaseDir,
    run: &dyn Fn(&str) -> bool,
) -> (Vec<Row>, (Option<f64>, Option<f64>)) {
    let load_before = load_average();
    let mut rows = Vec::new();
    if run("grpc") {
        rows.push(runtime.block_on(grpc_row(plan, servers)));
    }
    // `null` by `call_for_outcome` and by `call_and_wait` (one request each), then by `call`
    // (answered once durable) + wait.
    for (key, how) in [
        ("null", Way::Outcome),
        ("null-report", Way::Report),
        ("null-durable", Way::Durable),
    ] {
        if run(key) {
            let name = format!("Ferry {}, {}", plan.null_procedure, how.name());
            rows.push(runtime.block_on(ferry_row(
                Sites { servers, base },
                name,
                &plan.null_procedure,
                plan.sequential,
                plan.in_flight,
                plan.warmup,
                how,
            )));
        }
    }
    if run("echo") {
        // echo declares one text parameter; an empty text keeps it a null call plus a process.
        rows.push(runtime.block_on(ferry_row(
            Sites { servers, base },
            "Ferry echo (exec)".into(),
            "echo",
            plan.echo,
            0,
            plan.warmup.min(plan.echo),
            Way::Outcome,
        )));
    }
    (rows, (load_before, load_average()))
}

/// The one-minute load average (Linux): above the 2 cores, other work skews every figure.
/// CPU time this process has used (user and system, every thread, also those that ended), from
/// `/proc/self/stat` in clock ticks of 10 ms (Linux's `USER_HZ` of 100): within 1 % over a
/// measurement of a second or more.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 10))
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn progress(what: &str) {
    eprintln!("rpc bench: {what}…");
}

// ----- what is measured -----

/// One side's way to make one call.
#[derive(Clone)]
enum Caller {
    Grpc(grpc::Client),
    Ferry {
        control: ControlHandle,
        spec: Arc<CallSpec>,
        how: Way,
    },
}

/// How a Ferry caller makes a call and learns its end.
#[derive(Clone, Copy)]
enum Way {
    /// `call_for_outcome`: one request, the call not first made durable, answered with the
    /// call's state and replies.
    Outcome,
    /// `call_and_wait`: the same, answered with the call's report (what the HTTP API shows).
    Report,
    /// `call` (answered once the call is durable), then `wait_call`.
    Durable,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Outcome => "call_for_outcome",
            Way::Report => "call_and_wait",
            Way::Durable => "call + wait",
        }
    }
}

/// What one successful call told.
struct Outcome {
    /// Ferry: how the result came (`stream`, `datagram`, `dtn`).
    via: Option<Cow<'static, str>>,
    /// Ferry: how long `call` took to be answered (the call made durable and sent).
    accepted: Option<Duration>,
}

impl Caller {
    /// A short name for file names.
    fn name(&self) -> &'static str {
        match self {
            Self::Grpc(_) => "grpc",
            Self::Ferry {
                how: Way::Outcome, ..
            } => "ferry-outcome",
            Self::Ferry {
                how: Way::Report, ..
            } => "ferry-report",
            Self::Ferry {
                how: Way::Durable, ..
            } => "ferry-durable",
        }
    }

    async fn once(&mut self) -> Result<Outcome, String> {
        match self {
            Self::Grpc(client) => {
                client.echo(Vec::new()).await?;
                Ok(Outcome {
                    via: None,
                    accepted: None,
                })
            }
            Self::Ferry {
                control,
                spec,
                how: Way::Outcome,
            } => {
                let done = control
                    .call_for_outcome(CallSpec::clone(spec), CALL_TIMEOUT)
                    .await
                    .map_err(|e| format!("call_for_outcome: {e}"))?;
                outcome_of(&done)
            }
            Self::Ferry {
                control,
                spec,
                how: Way::Report,
            } => {
                let done = control
                    .call_and_wait(CallSpec::clone(spec), CALL_TIMEOUT)
                    .await
                    .map_err(|e| format!("call_and_wait: {e}"))?;
                outcome(done, None)
            }
            Self::Ferry {
                control,
                spec,
                how: Way::Durable,
            } => {
                let start = Instant::now();
                let made = control
                    .call(CallSpec::clone(spec))
                    .await
                    .map_err(|e| format!("call: {e}"))?;
                let accepted = start.elapsed();
                let done = control
                    .wait_call(&made.id, daemon::calls::WaitFor::default(), CALL_TIMEOUT)
                    .await
                    .map_err(|e| format!("wait_call: {e}"))?;
                outcome(done, Some(accepted))
            }
        }
    }

    /// One call, bounded by [`CALL_TIMEOUT`].
    async fn bounded(&mut self) -> Result<Outcome, String> {
        tokio::time::timeout(CALL_TIMEOUT, self.once())
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {CALL_TIMEOUT:?}")))
    }
}

/// A finished Ferry call as an [`Outcome`], or why it did not succeed.
fn outcome(done: CallInfo, accepted: Option<Duration>) -> Result<Outcome, String> {
    if done.state != "succeeded" {
        let reply = done.replies.first();
        return Err(format!(
            "call {} {}: {} {}",
            done.id,
            done.state,
            reply.and_then(|r| r.code.as_deref()).unwrap_or(""),
            reply.and_then(|r| r.detail.as_deref()).unwrap_or("")
        ));
    }
    Ok(Outcome {
        via: done.replies.into_iter().next().map(|r| Cow::Owned(r.via)),
        accepted,
    })
}

/// [`outcome`] of a call's [`CallOutcome`].
fn outcome_of(done: &CallOutcome) -> Result<Outcome, String> {
    if done.state != rpc::CallState::Succeeded {
        let why = match done.replies.first().map(|r| &r.message) {
            Some(wire::rpc::Message::Reject(r)) => format!("{}: {}", r.code.name(), r.detail),
            _ => String::new(),
        };
        return Err(format!("call {} {}: {why}", done.id, done.state.name()));
    }
    Ok(Outcome {
        via: done.replies.first().map(|r| Cow::Borrowed(r.via)),
        accepted: None,
    })
}

/// Calls that failed, and how the first one did.
#[derive(Default)]
struct Failures {
    count: usize,
    first: Option<String>,
}

impl Failures {
    fn add(&mut self, error: String) {
        self.count += 1;
        self.first.get_or_insert(error);
    }

    fn merge(&mut self, other: Self) {
        self.count += other.count;
        if let Some(e) = other.first {
            self.first.get_or_insert(e);
        }
    }
}

/// Sequential calls: their round-trip times.
struct Latency {
    wanted: usize,
    /// Sorted.
    rtts: Vec<Duration>,
    /// Ferry: how long each `call` took to be answered, sorted.
    accepted: Vec<Duration>,
    vias: BTreeMap<Cow<'static, str>, usize>,
    failures: Failures,
    bounded: bool,
}

/// The `q` quantile (nearest rank) of sorted durations.
fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

/// `warmup` unmeasured calls, then `count` timed ones, one after another.
async fn sequential(caller: &mut Caller, count: usize, warmup: usize) -> Latency {
    let deadline = Instant::now() + SEQUENTIAL_LIMIT;
    let mut failures = Failures::default();
    for _ in 0..warmup {
        if Instant::now() >= deadline {
            break;
        }
        if let Err(e) = caller.bounded().await {
            failures.add(format!("warm-up: {e}"));
        }
    }
    let mut rtts = Vec::with_capacity(count);
    let mut accepted = Vec::with_capacity(count);
    let mut vias = BTreeMap::new();
    let mut bounded = false;
    let trace_path = std::env::var_os("FERRY_BENCH_TRACE");
    let mut trace = trace_path.as_ref().map(|_| Vec::with_capacity(count));
    let began = Instant::now();
    for _ in 0..count {
        if Instant::now() >= deadline {
            bounded = true;
            break;
        }
        let start = Instant::now();
        match caller.bounded().await {
            Ok(outcome) => {
                let rtt = start.elapsed();
                rtts.push(rtt);
                if let Some(t) = trace.as_mut() {
                    t.push((start - began, rtt));
                }
                accepted.extend(outcome.accepted);
                if let Some(via) = outcome.via {
                    *vias.entry(via).or_insert(0) += 1;
                }
            }
            Err(e) => failures.add(e),
        }
    }
    if let (Some(t), Some(path)) = (trace, trace_path) {
        let mut out = String::from("start_us,rtt_us\n");
        for (s, r) in t {
            out.push_str(&format!("{},{}\n", s.as_micros(), r.as_micros()));
        }
        let path = format!("{}.{}", path.to_string_lossy(), caller.name());
        std::fs::write(&path, out).expect("write FERRY_BENCH_TRACE");
    }
    rtts.sort();
    accepted.sort();
    Latency {
        wanted: count,
        rtts,
        accepted,
        vias,
        failures,
        bounded,
    }
}

/// Calls with [`IN_FLIGHT`] outstanding.
struct Rate {
    wanted: usize,
    succeeded: usize,
    elapsed: Duration,
    /// CPU time of the whole process meanwhile (both sides, every thread), if readable.
    cpu: Option<Duration>,
    /// When each successful call finished, from the start, sorted.
    finished: Vec<Duration>,
    failures: Failures,
    bounded: bool,
}

impl Rate {
    fn per_second(&self) -> f64 {
        self.succeeded as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Calls/s over the first and the second half of the calls: a rate that falls as calls
    /// accumulate shows work that grows with the number of calls made.
    fn halves(&self) -> Option<(f64, f64)> {
        let n = self.finished.len();
        let half = n / 2;
        if half < 2 {
            return None;
        }
        let mid = self.finished[half - 1].as_secs_f64();
        let end = self.finished[n - 1].as_secs_f64();
        Some((
            half as f64 / mid.max(1e-9),
            (n - half) as f64 / (end - mid).max(1e-9),
        ))
    }
}

/// `warmup` unmeasured calls, then `count` timed ones, [`IN_FLIGHT`] at a time.
async fn in_flight(caller: &Caller, count: usize, warmup: usize) -> Rate {
    let _ = in_flight_once(caller, warmup).await;
    in_flight_once(caller, count).await
}

async fn in_flight_once(caller: &Caller, count: usize) -> Rate {
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = process_cpu();
    let start = Instant::now();
    let deadline = start + IN_FLIGHT_LIMIT;
    let mut tasks = JoinSet::new();
    for _ in 0..IN_FLIGHT.min(count) {
        let (mut caller, next) = (caller.clone(), next.clone());
        tasks.spawn(async move {
            let (mut finished, mut failures) = (Vec::new(), Failures::default());
            while Instant::now() < deadline && next.fetch_add(1, Ordering::Relaxed) < count {
                match caller.bounded().await {
                    Ok(_) => finished.push(start.elapsed()),
                    Err(e) => failures.add(e),
                }
            }
            (finished, failures)
        });
    }
    let (mut finished, mut failures) = (Vec::with_capacity(count), Failures::default());
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((f, e)) => {
                finished.extend(f);
                failures.merge(e);
            }
            Err(e) => failures.add(format!("task: {e}")),
        }
    }
    let elapsed = start.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    finished.sort();
    let succeeded = finished.len();
    Rate {
        wanted: count,
        succeeded,
        elapsed,
        cpu,
        finished,
        bounded: succeeded + failures.count < count,
        failures,
    }
}

/// One row of the table.
struct Row {
    name: String,
    latency: Result<Latency, String>,
    rate: Option<Rate>,
}

async fn grpc_row(plan: &Plan, servers: &ServerSide) -> Row {
    let name = "gRPC echo (tonic)".to_owned();
    let server = match servers.run(grpc::Server::start()).await {
        Ok(s) => s,
        Err(e) => {
            return Row {
                name,
                latency: Err(e),
                rate: None,
            };
        }
    };
    let row = match grpc::Client::connect(server.addr).await {
        Ok(client) => {
            let mut caller = Caller::Grpc(client);
            progress(&format!("gRPC: {} sequential echoes", plan.sequential));
            let latency = sequential(&mut caller, plan.sequential, plan.warmup).await;
            let rate = if plan.in_flight > 0 {
                progress(&format!(
                    "gRPC: {} echoes, {IN_FLIGHT} in flight",
                    plan.in_flight
                ));
                Some(in_flight(&caller, plan.in_flight, plan.warmup).await)
            } else {
                None
            };
            Row {
                name,
                latency: Ok(latency),
                rate,
            }
        }
        Err(e) => Row {
            name,
            latency: Err(e),
            rate: None,
        },
    };
    servers.run(server.shut_down()).await;
    row
}

/// Where the servers run: the callers' runtime, or one of their own (`FERRY_BENCH_RUNTIMES`).
struct ServerSide(tokio::runtime::Handle);

impl ServerSide {
    /// Runs `work` on the servers' runtime (what it spawns runs there too).
    async fn run<F>(&self, work: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.spawn(work).await.expect("a server task panicked")
    }
}

/// Sequential latency and (unless `in_flight` is 0) calls/s of `procedure`, each on a fresh
/// pair of daemons.
/// Where a row's daemons run and keep their stores.
struct Sites<'a> {
    servers: &'a ServerSide,
    base: &'a Path,
}

async fn ferry_row(
    sites: Sites<'_>,
    name: String,
    procedure: &str,
    sequential_calls: usize,
    in_flight_calls: usize,
    warmup: usize,
    how: Way,
) -> Row {
    let spec = Arc::new(CallSpec {
        target: "dtn://b/".into(),
        procedure: procedure.into(),
        params: if procedure == "echo" {
            vec![daemon::calls::ParamSpec::Text(String::new())]
        } else {
            Vec::new()
        },
        ..CallSpec::default()
    });
    progress(&format!("{name}: {sequential_calls} sequential calls"));
    let pair = Pair::start(sites.servers, sites.base).await;
    let mut caller = Caller::Ferry {
        control: pair.a.control.clone(),
        spec: spec.clone(),
        how,
    };
    let latency = sequential(&mut caller, sequential_calls, warmup).await;
    pair.shut_down(sites.servers).await;
    let rate = if in_flight_calls > 0 {
        progress(&format!(
            "{name}: {in_flight_calls} calls, {IN_FLIGHT} in flight"
        ));
        let pair = Pair::start(sites.servers, sites.base).await;
        let caller = Caller::Ferry {
            control: pair.a.control.clone(),
            spec,
            how,
        };
        let before = pair.bundles_sent().await;
        let rate = in_flight(&caller, in_flight_calls, warmup).await;
        let after = pair.bundles_sent().await;
        let calls = (in_flight_calls + warmup).max(1) as f64;
        progress(&format!(
            "{name}: bundles sent per call: client {:.2}, server {:.2}",
            (after.0 - before.0) as f64 / calls,
            (after.1 - before.1) as f64 / calls,
        ));
        pair.shut_down(sites.servers).await;
        Some(rate)
    } else {
        None
    };
    Row {
        name,
        latency: Ok(latency),
        rate,
    }
}

// ----- the daemons -----

/// A client daemon `dtn://a/` with a TCPCLv4 session to a server daemon `dtn://b/`.
struct Pair {
    a: Running,
    b: Running,
    _dirs: (TempDir, TempDir),
}

impl Pair {
    async fn start(servers: &ServerSide, base: &Path) -> Self {
        let dirs = (
            TempDir::new_in(base, "rpc-bench-a"),
            TempDir::new_in(base, "rpc-bench-b"),
        );
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/node.toml");
        let served = Config::load(&examples, "bench").expect("examples/node.toml loads");
        let mut server = loopback_config("b", dirs.1.path(), 0);
        server.rpc = served.rpc;
        // One caller makes a few hundred thousand calls a round, all kept for their hour: more
        // than a stranger's share of a served node's records.
        server.rpc.max_served_calls = usize::MAX;
        server.rpc.max_served_calls_per_caller = usize::MAX;
        let b = servers
            .run(daemon::start(server))
            .await
            .expect("start daemon b");
        let b_addr: SocketAddr = *b.tcpcl_addrs.first().expect("b listens for TCPCL");
        let mut client = loopback_config("a", dirs.0.path(), 0);
        client.peers = vec![b_addr];
        let a = daemon::start(client).await.expect("start daemon a");
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let status = a.control.ask(Request::Status).await.expect("a answers");
            if status.peers == 1 {
                break;
            }
            assert!(Instant::now() < until, "no session between a and b in 10 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Self { a, b, _dirs: dirs }
    }

    /// Bundles each daemon has sent so far (client, server).
    async fn bundles_sent(&self) -> (u64, u64) {
        let a = self
            .a
            .control
            .ask(Request::Status)
            .await
            .expect("a answers");
        let b = self
            .b
            .control
            .ask(Request::Status)
            .await
            .expect("b answers");
        (a.counters.bundles_sent, b.counters.bundles_sent)
    }

    async fn shut_down(self, servers: &ServerSide) {
        tokio::join!(self.a.shut_down(), servers.run(self.b.shut_down()));
    }
}

// ----- the gRPC reference -----

/// A unary echo service over tonic, written as tonic-build would generate it from
///
/// ```proto
/// package ferry.bench;
/// message Echo { bytes payload = 1; }
/// service Bench { rpc Echo(Echo) returns (Echo); }
/// ```
mod grpc {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tonic::codegen::{BoxFuture, Service, http};
    use tonic::server::{NamedService, UnaryService};
    use tonic::transport::{Channel, Endpoint};
    use tonic_prost::ProstCodec;

    /// The request and the reply.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Echo {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) payload: Vec<u8>,
    }

    const SERVICE: &str = "ferry.bench.Bench";
    const METHOD: &str = "/ferry.bench.Bench/Echo";

    /// The HTTP/2 service: routes `Echo` to [`EchoMethod`], anything else is unimplemented.
    #[derive(Clone)]
    struct BenchService;

    impl NamedService for BenchService {
        const NAME: &'static str = SERVICE;
    }

    impl Service<http::Request<tonic::body::Body>> for BenchService {
        type Response = http::Response<tonic::body::Body>;
        type Error = Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
            if request.uri().path() != METHOD {
                return Box::pin(async { Ok(tonic::Status::unimplemented("").into_http()) });
            }
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(ProstCodec::<Echo, Echo>::default());
                Ok(grpc.unary(EchoMethod, request).await)
            })
        }
    }

    struct EchoMethod;

    impl UnaryService<Echo> for EchoMethod {
        type Response = Echo;
        type Future = std::future::Ready<Result<tonic::Response<Echo>, tonic::Status>>;

        fn call(&mut self, request: tonic::Request<Echo>) -> Self::Future {
            std::future::ready(Ok(tonic::Response::new(request.into_inner())))
        }
    }

    /// A tonic server on 127.0.0.1 in this runtime.
    pub(crate) struct Server {
        pub(crate) addr: SocketAddr,
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    }

    impl Server {
        pub(crate) async fn start() -> Result<Self, String> {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("gRPC server: bind: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            let (stop, stopped) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(BenchService)
                    .serve_with_incoming_shutdown(incoming, async {
                        let _ = stopped.await;
                    }),
            );
            Ok(Self { addr, stop, task })
        }

        pub(crate) async fn shut_down(self) {
            let _ = self.stop.send(());
            let mut task = self.task;
            if tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }

    /// A client on one HTTP/2 connection; clones share it, as clones of a tonic `Channel` do.
    #[derive(Clone)]
    pub(crate) struct Client(tonic::client::Grpc<Channel>);

    impl Client {
        pub(crate) async fn connect(addr: SocketAddr) -> Result<Self, String> {
            let channel = Endpoint::from_shared(format!("http://{addr}"))
                .map_err(|e| e.to_string())?
                .tcp_nodelay(true)
                .connect_timeout(Duration::from_secs(5))
                .connect()
                .await
                .map_err(|e| format!("gRPC client: connect to {addr}: {e}"))?;
            Ok(Self(tonic::client::Grpc::new(channel)))
        }

        /// One unary echo.
        pub(crate) async fn echo(&mut self, payload: Vec<u8>) -> Result<Vec<u8>, String> {
            self.0
                .ready()
                .await
                .map_err(|e| format!("gRPC client not ready: {e}"))?;
            let reply = self
                .0
                .unary(
                    tonic::Request::new(Echo { payload }),
                    http::uri::PathAndQuery::from_static(METHOD),
                    ProstCodec::<Echo, Echo>::default(),
                )
                .await
                .map_err(|e| format!("gRPC echo: {e}"))?;
            Ok(reply.into_inner().payload)
        }
    }
}

// ----- the table -----

fn print_table(
    plan: &Plan,
    base: &Path,
    fs_type: &str,
    load: (Option<f64>, Option<f64>),
    rows: &[Row],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "ferry rpc benchmark (loopback; gRPC and two Ferry daemons in one process, one tokio runtime, 2 workers){}   {}",
        if plan.quick { ", QUICK" } else { "" },
        common::today()
    )?;
    writeln!(
        out,
        "latency: {} sequential calls after {} unmeasured (Ferry echo: {}); calls/s: {} calls, {IN_FLIGHT} in flight",
        plan.sequential, plan.warmup, plan.echo, plan.in_flight
    )?;
    writeln!(
        out,
        "Ferry stores in {} ({fs_type}), durable on both ends",
        base.display()
    )?;
    if let (Some(before), Some(after)) = load {
        writeln!(
            out,
            "load average (1 min) {before:.2} before, {after:.2} after, on {} cores",
            std::thread::available_parallelism().map_or(0, usize::from)
        )?;
    }
    if fs_type == "tmpfs" {
        writeln!(
            out,
            "WARNING: tmpfs makes every sync free; these are not durable figures"
        )?;
    }
    writeln!(out)?;
    let line = |out: &mut dyn std::io::Write, cells: [&str; 7]| {
        let [what, p50, p90, p99, rate, p50_ratio, rate_ratio] = cells;
        writeln!(
            out,
            "{what:<22} {p50:>9} {p90:>9} {p99:>9} {rate:>16} {p50_ratio:>12} {rate_ratio:>16}"
        )
    };
    line(
        out,
        [
            "",
            "p50",
            "p90",
            "p99",
            "calls/s (64 fl.)",
            "p50 / gRPC",
            "calls/s / gRPC",
        ],
    )?;
    let grpc = rows.iter().find(|r| r.name.starts_with("gRPC"));
    let grpc_p50 = grpc
        .and_then(|r| r.latency.as_ref().ok())
        .and_then(|l| quantile(&l.rtts, 0.5));
    let grpc_rate = grpc
        .and_then(|r| r.rate.as_ref())
        .filter(|r| r.succeeded > 0)
        .map(Rate::per_second);
    for row in rows {
        let is_grpc = grpc.is_some_and(|g| std::ptr::eq(g, row));
        let q = |q: f64| row.latency.as_ref().ok().and_then(|l| quantile(&l.rtts, q));
        let rate = row
            .rate
            .as_ref()
            .filter(|r| r.succeeded > 0)
            .map(Rate::per_second);
        let p50_ratio = match (is_grpc, q(0.5), grpc_p50) {
            (false, Some(p), Some(g)) => format!("{:.2}×", p.as_secs_f64() / g.as_secs_f64()),
            _ => String::new(),
        };
        let rate_ratio = match (is_grpc, rate, grpc_rate) {
            (false, Some(r), Some(g)) => format!("{:.2}×", r / g),
            _ => String::new(),
        };
        let show = |d: Option<Duration>| d.map_or_else(|| "—".into(), micros);
        line(
            out,
            [
                &row.name,
                &show(q(0.5)),
                &show(q(0.9)),
                &show(q(0.99)),
                &rate.map_or_else(|| "—".into(), |r| format!("{}/s", count(r))),
                &p50_ratio,
                &rate_ratio,
            ],
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "targets (docs/performance.md): Ferry null p50 ≤ 2.00× gRPC; calls/s with 64 in flight ≥ 1.00× gRPC"
    )?;
    writeln!(out, "notes:")?;
    for row in rows {
        match &row.latency {
            Err(e) => writeln!(out, "  {}: not measured: {e}", row.name)?,
            Ok(l) => {
                write!(
                    out,
                    "  {}: sequential {} of {} succeeded",
                    row.name,
                    l.rtts.len(),
                    l.wanted
                )?;
                if let (Some(min), Some(max)) = (l.rtts.first(), l.rtts.last()) {
                    let mean = l.rtts.iter().sum::<Duration>() / l.rtts.len() as u32;
                    write!(
                        out,
                        ", min {} mean {} max {}",
                        micros(*min),
                        micros(mean),
                        micros(*max)
                    )?;
                }
                if !l.vias.is_empty() {
                    let vias: Vec<String> =
                        l.vias.iter().map(|(v, n)| format!("{v} {n}")).collect();
                    write!(out, "; results by {}", vias.join(", "))?;
                }
                if let Some(p50) = quantile(&l.accepted, 0.5) {
                    write!(
                        out,
                        "; `call` answered (durable) after p50 {} p99 {}",
                        micros(p50),
                        quantile(&l.accepted, 0.99).map_or_else(String::new, micros)
                    )?;
                }
                if l.bounded {
                    write!(out, " (stopped at the {SEQUENTIAL_LIMIT:?} bound)")?;
                }
                note_failures(out, &l.failures)?;
                writeln!(out)?;
            }
        }
        if let Some(r) = &row.rate {
            write!(
                out,
                "  {}: {IN_FLIGHT} in flight, {} of {} succeeded in {:.2} s",
                row.name,
                r.succeeded,
                r.wanted,
                r.elapsed.as_secs_f64()
            )?;
            if let Some((first, second)) = r.halves() {
                write!(
                    out,
                    " (first half {}/s, second half {}/s)",
                    count(first),
                    count(second)
                )?;
            }
            if let Some(cpu) = r.cpu.filter(|_| r.succeeded > 0) {
                // What a call cost in CPU time, and how much of the cores was used: the rate
                // is the one over the other.
                write!(
                    out,
                    "; CPU {:.0} µs a call, {:.2} cores busy",
                    cpu.as_secs_f64() * 1e6 / r.succeeded as f64,
                    cpu.as_secs_f64() / r.elapsed.as_secs_f64().max(1e-9)
                )?;
            }
            if r.bounded {
                write!(
                    out,
                    " (stopped at the {IN_FLIGHT_LIMIT:?} bound: the rate is of the calls that finished)"
                )?;
            }
            note_failures(out, &r.failures)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

fn note_failures(out: &mut dyn std::io::Write, f: &Failures) -> std::io::Result<()> {
    if f.count > 0 {
        write!(
            out,
            "; {} FAILED, first: {}",
            f.count,
            f.first.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}

/// A duration in µs below 10 ms, else in ms.
fn micros(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

fn count(n: f64) -> String {
    if n >= 1e3 {
        format!("{:.1} k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}
