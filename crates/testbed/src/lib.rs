//! The DTN-RPC paper's networks with real processes, as its authors ran them in CORE: a network
//! namespace per node joined by veth pairs (one per link, each end shaped with `tc tbf`), a
//! real `ferry node` in each, the Islands network's links taken down and up on the schedule the
//! simulator draws for the same seed, the calls made one after another with the client's
//! `ferry call`, and every execution counted on every server. Each run gives the same
//! [`CallRecord`]s the simulator gives (`source` = `testbed`), so one report format and one
//! comparison ([`agreement`]) cover both.
//!
//! What it never does: touch a network outside the namespaces it makes (removed when a run
//! ends, also on error), or emulate latency (`netem` is not available here: links have the
//! kernel's veth latency, tens of microseconds). It needs root and iproute2.

// An I/O shell by nature: it runs processes, reads files and keeps wall-clock time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod calls;
pub mod net;
pub mod nodes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use sim::eval::{Eval, Placement, Run, TestSet, call_window};
use sim::eval_record::{CallRecord, Outcome, SetupKey, SetupSummary, summarise};
use wire::rpc::{Mode, Transport};

use crate::calls::{CallArg, CallSpec};
use crate::net::Net;
use crate::nodes::{NodeSettings, NodeSpec, Nodes};

/// How the testbed runs its nodes.
pub struct Testbed {
    /// The `ferry` executable: the nodes, their client commands and the echo.
    pub ferry: PathBuf,
    /// Where the nodes' directories go (cleared per run).
    pub work: PathBuf,
    /// Namespace names start with this (the node's index follows).
    pub prefix: String,
    /// TCPCL keepalive of every node.
    pub keepalive_s: u64,
    /// How long the nodes have to start and open their first sessions.
    pub settle: Duration,
}

/// What a run did besides its calls.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// Links of the network.
    pub links: usize,
    /// Link changes made during the calls.
    pub link_changes: usize,
    /// Link changes that failed (each logged).
    pub link_change_errors: usize,
    /// From the network's start to the last call's end.
    pub wall: Duration,
    /// The run's own allowance for what real nodes and processes add to a call's round trip
    /// ([`node_work_allowance`]); `None` when no answered call measured it.
    pub node_work_ms: Option<u64>,
}

/// What the run's answered calls took beyond the journey check's quickest round trip for each
/// (links that carry a file in its transmission time, nodes that compute in no time): the
/// median of `(rtt, quickest)` differences, at least 0 and at most a tenth of `budget_ms`.
/// A lost call is Ferry's fault only if a journey existed that leaves this much of its time:
/// a real call also spends it in `ferry call`, the echo's process, and each node's storing,
/// sealing and syncing, and a journey shorter than that could not have been used. Measured per
/// run, so what the judged call's own run cost is what it is allowed, and bounded, so a slow
/// build cannot excuse its losses with its own slowness.
pub fn node_work_allowance(answered: &[(u64, u64)], budget_ms: u64) -> Option<u64> {
    let mut extra: Vec<u64> = answered
        .iter()
        .map(|&(rtt, quickest)| rtt.saturating_sub(quickest))
        .collect();
    if extra.is_empty() {
        return None;
    }
    extra.sort_unstable();
    Some(extra[extra.len() / 2].min(budget_ms / 10))
}

/// The shortest time from `window.0` within which `exists` (a journey check over the window
/// `(window.0, window.0 + t)`) finds a round trip, to the millisecond, if it does by `window.1`.
fn quickest_journey_ms(window: (u64, u64), exists: impl Fn((u64, u64)) -> bool) -> Option<u64> {
    let (start, end) = window;
    if !exists((start, end)) {
        return None;
    }
    // The check is monotone in the window's end: a later end only adds ways.
    let (mut lo, mut hi) = (0, end - start);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists((start, start + mid)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(if exists((start, start + lo)) { lo } else { hi })
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Sleeps until `at`, waking every 50 ms to look at `stop`; false if stopped.
fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(50)));
    }
}

impl Testbed {
    /// Runs one setup with one seed as `eval` describes it (the same network, schedule,
    /// placement and calls as `eval.run(run)` simulates): one record per call.
    pub fn run(
        &self,
        eval: &Eval,
        run: Run,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<(Vec<CallRecord>, RunFacts)> {
        let setup = run.setup;
        let scenario = eval.scenario(&run);
        let schedule = scenario.link_schedule();
        let count = scenario.topology.nodes();
        let Placement {
            client,
            servers,
            explicit_targets,
        } = eval.placement(&run);
        let links: Vec<(usize, usize)> = schedule
            .iter()
            .map(|e| (e.a.min(e.b), e.a.max(e.b)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let up_at_start: BTreeSet<(usize, usize)> = schedule
            .iter()
            .filter(|e| e.at == 0 && e.up)
            .map(|e| (e.a.min(e.b), e.a.max(e.b)))
            .collect();
        let net = Net::build(
            &self.prefix,
            count,
            &links,
            &|a, b| up_at_start.contains(&(a, b)),
            eval.link.bandwidth_bps,
        )?;
        let with_file = setup.set != TestSet::Zero;
        let specs: Vec<NodeSpec> = (0..count)
            .map(|i| NodeSpec {
                index: i,
                // The lower node of each link dials: one session per link.
                peers: links
                    .iter()
                    .filter(|&&(a, _)| a == i)
                    .filter_map(|&(a, b)| net.link(a, b).map(|l| l.addr_b.to_string()))
                    .collect(),
                echo: servers.contains(&i).then_some(with_file),
            })
            .collect();
        let settings = NodeSettings {
            ferry: self.ferry.clone(),
            keepalive_s: self.keepalive_s,
            max_output: (2 * setup.set.bytes() as u64).max(1 << 20),
            exec_timeout_ms: setup.budget_ms,
            bundle_piece: eval.bundle_piece,
        };
        let mut nodes = Nodes::start(&net, &specs, &self.work, &settings)?;
        nodes.wait_ready(self.settle)?;
        // The simulator's links are up from its time 0; here the first sessions must open.
        let expected: Vec<usize> = (0..count)
            .map(|i| {
                up_at_start
                    .iter()
                    .filter(|&&(a, b)| a == i || b == i)
                    .count()
            })
            .collect();
        let until = Instant::now() + self.settle;
        for (i, &want) in expected.iter().enumerate() {
            while nodes.sessions(i)? < want {
                if Instant::now() > until {
                    bail!(
                        "node {i} has {} of its {want} sessions after {:?}; its log:\n{}",
                        nodes.sessions(i)?,
                        self.settle,
                        nodes.log_tail(i)
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let files = self.work.join("files");
        let results = self.work.join("results");
        for dir in [&files, &results] {
            let _ = std::fs::remove_dir_all(dir);
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }

        let t0 = Instant::now();
        let t0_unix = unix_ms(SystemTime::now());
        let switch = net.switch();
        let stop = AtomicBool::new(false);
        let changes = AtomicUsize::new(0);
        let change_errors = AtomicUsize::new(0);
        let mode = setup.mode.mode;
        let timers = Eval::timers(setup.budget_ms);
        let outcomes = std::thread::scope(|scope| -> Result<Vec<calls::CallOutcome>> {
            scope.spawn(|| {
                for e in schedule.iter().filter(|e| e.at > 0) {
                    if !sleep_until(t0 + Duration::from_millis(e.at), &stop) {
                        break;
                    }
                    match switch.set(e.a, e.b, e.up) {
                        Ok(()) => changes.fetch_add(1, Ordering::Relaxed),
                        Err(err) => {
                            progress(&format!("link change at {} ms failed: {err:#}", e.at));
                            change_errors.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            });
            let made = (|| {
                let mut outcomes = Vec::with_capacity(eval.calls);
                let start = t0 + Duration::from_millis(eval.start_ms);
                std::thread::sleep(start.saturating_duration_since(Instant::now()));
                for k in 0..eval.calls {
                    let target = match mode {
                        Mode::Explicit => {
                            let server = explicit_targets.get(k).context("no server drawn")?;
                            format!("dtn://n{server}/")
                        }
                        Mode::Any => "any".into(),
                        Mode::All => "all".into(),
                    };
                    let text = format!("ping {k}");
                    let content = Eval::call_file(k, run.seed, setup.set);
                    let path = files.join(format!("call-{k}.bin"));
                    let out = results.join(format!("call-{k}"));
                    let arg = if with_file {
                        std::fs::write(&path, &content)
                            .with_context(|| format!("writing {}", path.display()))?;
                        CallArg::File {
                            path: &path,
                            out: &out,
                            expected: &content,
                        }
                    } else {
                        CallArg::Text(&text)
                    };
                    let spec = CallSpec {
                        target,
                        transport: setup.mode.transport.name(),
                        budget: Duration::from_millis(setup.budget_ms),
                        ack: timers.ack_timeout,
                        result: timers.result_timeout,
                        arg,
                    };
                    let asked_unix = unix_ms(SystemTime::now());
                    let mut outcome = calls::make(&nodes, client, &spec)?;
                    if outcome.id.is_empty() {
                        // Refused when made: it was made (and refused) now.
                        outcome.made_unix_ms = asked_unix;
                    }
                    progress(&format!(
                        "call {k}: {}",
                        match &outcome.result {
                            Some((via, at)) =>
                                format!("{via}, {} ms", at.saturating_sub(outcome.made_unix_ms)),
                            None if outcome.id.is_empty() => format!("not made: {}", outcome.error),
                            None if outcome.error.is_empty() =>
                                format!("no result ({})", outcome.state),
                            None => format!("no result ({}): {}", outcome.state, outcome.error),
                        }
                    ));
                    outcomes.push(outcome);
                    let _ = std::fs::remove_file(&path);
                    std::thread::sleep(Duration::from_millis(eval.gap_ms));
                }
                Ok(outcomes)
            })();
            stop.store(true, Ordering::Relaxed);
            made
        })?;
        let wall = t0.elapsed();

        // Every execution of every server, by call id.
        let mut runs: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for &s in &servers {
            let mut per_call: BTreeMap<String, u32> = BTreeMap::new();
            for id in nodes.executions(s) {
                *per_call.entry(id).or_default() += 1;
            }
            for (id, n) in per_call {
                runs.entry(id).or_default().push(n);
            }
        }
        nodes.stop();
        drop(net);

        let journey = |k: usize, window: (u64, u64)| {
            let eligible: Vec<usize> = explicit_targets
                .get(k)
                .map_or(servers.clone(), |&t| vec![t]);
            eval.journey_existed(
                &schedule, count, client, &eligible, window, setup.set, setup.mode,
            )
        };
        let transport = setup.mode.transport;
        let window_of = |o: &calls::CallOutcome| {
            let made_at_ms = o.made_unix_ms.saturating_sub(t0_unix);
            call_window(made_at_ms, setup.budget_ms, transport, o.id.is_empty())
        };
        // Store-carry-forward calls have their whole time for a journey; by datagram or stream
        // alone the check asks for a path at some instant, which takes no time to measure.
        let timed = !matches!(transport, Transport::Datagram | Transport::Stream);
        let node_work_ms = if timed {
            let answered: Vec<(u64, u64)> = outcomes
                .iter()
                .enumerate()
                .filter_map(|(k, o)| {
                    let (_, at) = o.result.as_ref()?;
                    let rtt = at.saturating_sub(o.made_unix_ms);
                    let quickest = quickest_journey_ms(window_of(o), |w| journey(k, w))?;
                    Some((rtt, quickest))
                })
                .collect();
            node_work_allowance(&answered, setup.budget_ms)
        } else {
            None
        };
        let mut records = Vec::with_capacity(outcomes.len());
        for (k, o) in outcomes.into_iter().enumerate() {
            let ran = runs.get(&o.id).cloned().unwrap_or_default();
            let made_at_ms = o.made_unix_ms.saturating_sub(t0_unix);
            let target = explicit_targets.get(k).copied();
            let (start, end) = window_of(&o);
            let window = (
                start,
                end.saturating_sub(node_work_ms.unwrap_or(0)).max(start),
            );
            let journey = o.result.is_none().then(|| journey(k, window));
            records.push(CallRecord {
                source: "testbed".into(),
                topology: setup.network.name().into(),
                nodes: count,
                servers_percent: setup.servers_percent,
                servers: servers.len(),
                set: setup.set.name().into(),
                file_bytes: setup.set.bytes() as u64,
                mode: setup.mode.mode.name().into(),
                transport: setup.mode.transport.name().into(),
                budget_ms: setup.budget_ms,
                seed: run.seed,
                call: k,
                client,
                target,
                called_by: o.called_by.clone(),
                went_dtn: o.went_dtn,
                outcome: match &o.result {
                    Some((via, _)) if via == "dtn" => Outcome::Dtn,
                    Some(_) => Outcome::NonDtn,
                    None => Outcome::None,
                },
                result_via: o
                    .result
                    .as_ref()
                    .map(|(v, _)| v.clone())
                    .unwrap_or_default(),
                rtt_ms: o
                    .result
                    .as_ref()
                    .map(|(_, at)| at.saturating_sub(o.made_unix_ms)),
                journey,
                max_runs: ran.iter().copied().max().unwrap_or(0),
                servers_ran: ran.iter().filter(|&&n| n > 0).count(),
                made_at_ms,
            });
        }
        let facts = RunFacts {
            links: links.len(),
            link_changes: changes.into_inner(),
            link_change_errors: change_errors.into_inner(),
            wall,
            node_work_ms,
        };
        Ok((records, facts))
    }
}

/// How far a testbed setup may be from the same setup simulated and still agree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Share of calls answered: at most this many percentage points apart.
    pub answered_points: f64,
    /// Median RTT: at most this many ms apart …
    pub rtt_abs_ms: u64,
    /// … or this fraction of the simulated median, whichever is larger.
    pub rtt_rel: f64,
}

/// One setup measured both ways.
#[derive(Debug, Clone)]
pub struct Agreement {
    /// The setup (its `source` is `testbed`).
    pub key: SetupKey,
    /// Per cent answered: simulated, testbed.
    pub answered: (f64, f64),
    /// Median RTT, ms: simulated, testbed.
    pub rtt_p50_ms: (Option<u64>, Option<u64>),
    /// The most runs of one call on one server, either way.
    pub max_runs: u32,
    /// Whether the two agree within the tolerance and no call ran twice.
    pub agrees: bool,
    /// Why not, in words (empty when they agree).
    pub why_not: String,
}

/// Pairs each testbed setup with the same setup simulated and compares them.
pub fn agreement(records: &[CallRecord], tolerance: Tolerance) -> Vec<Agreement> {
    let summaries = summarise(records);
    let strip = |k: &SetupKey| SetupKey {
        source: String::new(),
        ..k.clone()
    };
    let sim: BTreeMap<SetupKey, &SetupSummary> = summaries
        .iter()
        .filter(|s| s.key.source == "sim")
        .map(|s| (strip(&s.key), s))
        .collect();
    summaries
        .iter()
        .filter(|s| s.key.source == "testbed")
        .filter_map(|tb| {
            let sim = sim.get(&strip(&tb.key))?;
            let answered = |s: &SetupSummary| s.percent(s.non_dtn + s.dtn);
            let (a_sim, a_tb) = (answered(sim), answered(tb));
            let (r_sim, r_tb) = (sim.rtt_percentile_ms(50.0), tb.rtt_percentile_ms(50.0));
            let mut why = Vec::new();
            if (a_sim - a_tb).abs() > tolerance.answered_points {
                why.push(format!(
                    "answered {a_tb:.0} % against {a_sim:.0} % simulated (more than {} points)",
                    tolerance.answered_points
                ));
            }
            if let (Some(s), Some(t)) = (r_sim, r_tb) {
                let allowed = tolerance
                    .rtt_abs_ms
                    .max((s as f64 * tolerance.rtt_rel).round() as u64);
                if s.abs_diff(t) > allowed {
                    why.push(format!(
                        "median RTT {t} ms against {s} ms simulated (more than {allowed} ms)"
                    ));
                }
            }
            let max_runs = sim.max_runs.max(tb.max_runs);
            if max_runs > 1 {
                why.push(format!("a call ran {max_runs} times on one server"));
            }
            Some(Agreement {
                key: tb.key.clone(),
                answered: (a_sim, a_tb),
                rtt_p50_ms: (r_sim, r_tb),
                max_runs,
                agrees: why.is_empty(),
                why_not: why.join("; "),
            })
        })
        .collect()
}

/// The testbed's echo, run by a server's node once per execution (`ferry testbed-echo`): it
/// appends the call's id (`FERRY_CALL_ID`) to `log`, then prints `text`, or writes `file`
/// with every byte inverted to `$FERRY_OUTPUT_DIR/echo.bin` (the simulator's echo answers the
/// same files with files of the same length, whose bytes it has no need to compute).
pub fn echo(
    log: &std::path::Path,
    text: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<()> {
    use std::io::Write as _;
    let id = std::env::var("FERRY_CALL_ID").context("FERRY_CALL_ID is not set: run by a node")?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    // One write of a whole line: concurrent executions append whole lines.
    f.write_all(format!("{id}\n").as_bytes())?;
    f.sync_data()?;
    match (text, file) {
        (Some(text), None) => {
            std::io::stdout().write_all(text.as_bytes())?;
        }
        (None, Some(file)) => {
            let out = std::env::var_os("FERRY_OUTPUT_DIR")
                .context("FERRY_OUTPUT_DIR is not set: run by a node")?;
            let mut content =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            for b in &mut content {
                *b = !*b;
            }
            std::fs::write(std::path::Path::new(&out).join("echo.bin"), content)?;
        }
        _ => bail!("the echo takes a text or a file"),
    }
    Ok(())
}

/// The median time of a small write and its `fdatasync` in `dir`, over 21 tries: what a node's
/// store pays per commit there, for the simulated runs that model this testbed's disks.
pub fn measure_sync(dir: &std::path::Path) -> Result<Duration> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("sync-probe");
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let block = [0x5a_u8; 4096];
    let mut times = Vec::with_capacity(21);
    for _ in 0..21 {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        times.push(t.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    times.sort_unstable();
    Ok(times[times.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_is_the_median_extra_time_and_never_more_than_a_tenth_of_the_call() {
        // Round trips of 1,150, 1,300 and 1,100 ms where the quickest journeys took 990, 1,000
        // and 1,000 ms: 160, 300 and 100 ms more.
        assert_eq!(
            node_work_allowance(&[(1_150, 990), (1_300, 1_000), (1_100, 1_000)], 21_000),
            Some(160)
        );
        // A call quicker than the check's journey (it cannot be, but clocks differ) adds none.
        assert_eq!(node_work_allowance(&[(900, 1_000)], 21_000), Some(0));
        assert_eq!(node_work_allowance(&[(9_000, 1_000)], 21_000), Some(2_100));
        assert_eq!(node_work_allowance(&[], 21_000), None);
    }

    #[test]
    fn the_quickest_journey_is_found_to_the_millisecond() {
        // A journey that needs 993 ms from a call made at 101,000 ms.
        let exists = |(start, end): (u64, u64)| end >= start + 993;
        assert_eq!(quickest_journey_ms((101_000, 122_000), exists), Some(993));
        assert_eq!(quickest_journey_ms((0, 500), exists), None);
        assert_eq!(quickest_journey_ms((5, 998), exists), Some(993));
        assert_eq!(quickest_journey_ms((0, 100), |_| true), Some(0));
    }
}
