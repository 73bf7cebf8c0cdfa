//! `ferry testbed`: the DTN-RPC paper's runs with real processes (crate `testbed`: a network
//! namespace and a `ferry node` per node, veth links shaped with `tc tbf`, the Islands schedule
//! played on the links), one run at a time, with the report `ferry eval` writes. With
//! `--compare-sim` every run is also simulated, both go into the report, and `agreement.md`
//! says per setup whether they agree within the tolerance; the command fails if one does not,
//! or if any call ran twice on a server. `ferry testbed-echo` (hidden) is the servers' echo.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use sim::eval_record::CallRecord;
use testbed::{Testbed, Tolerance, agreement};

use crate::eval_cmd::{MatrixArgs, command_line, shape_text};
use crate::eval_report::{ReportMeta, write_report};

#[derive(Args)]
pub(crate) struct TestbedArgs {
    /// Directory the report is written to (created if needed).
    #[arg(long, default_value = "testbed-report")]
    out: PathBuf,
    #[command(flatten)]
    matrix: MatrixArgs,
    /// Also simulate every run; the report holds both, `agreement.md` compares them, and the
    /// command fails if a setup disagrees beyond the tolerance.
    #[arg(long)]
    compare_sim: bool,
    /// Agreement: shares of calls answered at most this many percentage points apart.
    #[arg(long, default_value_t = 20.0)]
    answered_tolerance: f64,
    /// Agreement: median RTTs at most this far apart …
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    rtt_tolerance: Duration,
    /// … or this fraction of the simulated median, whichever is larger.
    #[arg(long, default_value_t = 0.5)]
    rtt_tolerance_rel: f64,
    /// TCPCL keepalive of the nodes: a session over a link taken down ends after two silent
    /// intervals.
    #[arg(long, default_value = "2s", value_parser = crate::positive_duration)]
    keepalive: Duration,
    /// Where the nodes keep their data [default: a directory under the system's temp dir,
    /// removed at the end].
    #[arg(long)]
    work: Option<PathBuf>,
}

/// `ferry testbed-echo`: the echo the testbed's servers run (one process per execution).
#[derive(Args)]
pub(crate) struct EchoArgs {
    /// The file every execution's call id is appended to.
    #[arg(long)]
    log: PathBuf,
    /// Print this text back.
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    text: Option<String>,
    /// Write this file back, every byte inverted.
    #[arg(long)]
    file: Option<PathBuf>,
}

pub(crate) fn run_echo(args: EchoArgs) -> Result<()> {
    testbed::echo(&args.log, args.text.as_deref(), args.file.as_deref())
}

pub(crate) fn run(args: TestbedArgs) -> Result<()> {
    testbed::net::can_run()?;
    let ferry = std::env::current_exe().context("finding the ferry executable")?;
    let (work, temporary) = match &args.work {
        Some(w) => (w.clone(), false),
        None => (
            std::env::temp_dir().join(format!("ferry-testbed-{}", std::process::id())),
            true,
        ),
    };
    // The simulated runs model this testbed: veth links add no latency, and a commit costs
    // what a sync costs on the disk the nodes keep their stores on.
    let sync = testbed::measure_sync(&work)?;
    eprintln!(
        "a 4 KiB write and fdatasync in {}: {sync:.1?} (median of 21)",
        work.display()
    );
    let eval = args.matrix.eval(Duration::ZERO, Some(sync))?;
    let bed = Testbed {
        ferry,
        work: work.clone(),
        prefix: format!("tb{}n", std::process::id() % 100_000),
        keepalive_s: args.keepalive.as_secs().max(1),
        settle: Duration::from_secs(60),
    };
    clean_up_on_signal(bed.prefix.clone(), temporary.then(|| work.clone()))?;
    let runs = eval.runs();
    eprintln!(
        "{} setups × {} seeds = {} runs of {} calls, one at a time",
        eval.setups().len(),
        eval.seeds.len(),
        runs.len(),
        eval.calls
    );
    let started = Instant::now();
    let made = (|| -> Result<(Vec<CallRecord>, String)> {
        let mut records: Vec<CallRecord> = Vec::new();
        let mut facts_text = String::new();
        for (i, run) in runs.iter().enumerate() {
            let s = run.setup;
            let name = format!(
                "{}{}, {}, {}, {} ms, seed {}",
                s.network.name(),
                s.servers_percent
                    .map_or(String::new(), |p| format!(" {p} %")),
                s.set.name(),
                s.mode.name(),
                s.budget_ms,
                run.seed
            );
            eprintln!("[{}/{}] {name}", i + 1, runs.len());
            let (got, facts) = bed
                .run(&eval, *run, &|line| eprintln!("  {line}"))
                .with_context(|| format!("testbed run {name}"))?;
            let answered = got.iter().filter(|r| r.rtt_ms.is_some()).count();
            let node_work = facts
                .node_work_ms
                .map_or("–".to_string(), |ms| format!("{ms} ms"));
            eprintln!(
                "  {answered}/{} answered; {} links, {} link changes ({} failed), {:.1} s; node work allowed {node_work}",
                got.len(),
                facts.links,
                facts.link_changes,
                facts.link_change_errors,
                facts.wall.as_secs_f64()
            );
            writeln!(
                facts_text,
                "| {name} | {} | {} | {} | {:.1} s | {node_work} |",
                facts.links,
                facts.link_changes,
                facts.link_change_errors,
                facts.wall.as_secs_f64()
            )?;
            records.extend(got);
            if args.compare_sim {
                let simulated = eval
                    .run(*run)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("simulating {name}"))?;
                records.extend(simulated);
            }
        }
        Ok((records, facts_text))
    })();
    let wall_s = started.elapsed().as_secs_f64();
    if temporary {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (records, facts_text) = made?;
    let meta = ReportMeta {
        command: command_line(),
        link_model: format!(
            "testbed (source `testbed`): a Linux network namespace per node running `ferry node`, \
             one veth pair per link, each end shaped with `tc tbf` to {} Mbit/s, no added latency \
             (netem is not available: the veth's own, tens of microseconds); each link's lower \
             node dials the higher as a static TCPCL peer (no beacons), keepalive {} s; the \
             Islands links are set down and up as the simulator's schedule for the seed says. {} \
             Simulated runs (source `sim`, with --compare-sim): the simulator's link model at the \
             same rate with {} ms latency, each commit waiting for a disk sync of {} ms (the \
             median fdatasync measured in the nodes' directory at the start: {sync:.1?}).",
            eval.link.bandwidth_bps as f64 / 1e6,
            bed.keepalive_s,
            shape_text(&eval.shape),
            eval.link.latency_ms,
            eval.disk.map_or(0, |d| d.sync_ms)
        ),
        wall_s: Some(wall_s),
        runs: runs.len(),
        jobs: 1,
    };
    let written = write_report(&args.out, &records, &meta)?;
    for path in &written {
        println!("{}", path.display());
    }
    let twice: Vec<&CallRecord> = records.iter().filter(|r| r.max_runs > 1).collect();
    let mut failures = Vec::new();
    if !twice.is_empty() {
        failures.push(format!(
            "{} calls ran more than once on a server (first: {} call {} seed {})",
            twice.len(),
            twice[0].setup(),
            twice[0].call,
            twice[0].seed
        ));
    }
    if args.compare_sim {
        let tolerance = Tolerance {
            answered_points: args.answered_tolerance,
            rtt_abs_ms: args.rtt_tolerance.as_millis() as u64,
            rtt_rel: args.rtt_tolerance_rel,
        };
        let rows = agreement(&records, tolerance);
        let path = args.out.join("agreement.md");
        std::fs::write(&path, agreement_markdown(&rows, tolerance, &facts_text))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
        for row in &rows {
            eprintln!(
                "{}: answered {:.0} % (sim {:.0} %), median RTT {} (sim {}): {}",
                row.key,
                row.answered.1,
                row.answered.0,
                ms(row.rtt_p50_ms.1),
                ms(row.rtt_p50_ms.0),
                if row.agrees { "agree" } else { &row.why_not }
            );
        }
        let disagree = rows.iter().filter(|r| !r.agrees).count();
        if disagree > 0 {
            failures.push(format!(
                "{disagree} of {} setups disagree with the simulator beyond the tolerance",
                rows.len()
            ));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// On Ctrl-C or SIGTERM: stops the nodes, removes the namespaces (and a temporary work
/// directory) and exits (130), since the
/// process would otherwise end without dropping them and leave nodes running in namespaces.
fn clean_up_on_signal(prefix: String, temporary_work: Option<PathBuf>) -> Result<()> {
    crate::exit::on_interrupt(true, move || {
        eprintln!("\nferry testbed: interrupted; stopping the nodes and removing the namespaces");
        testbed::net::remove_namespaces(&prefix);
        if let Some(work) = &temporary_work {
            let _ = std::fs::remove_dir_all(work);
        }
        std::process::exit(130);
    })
    .context("setting up the signal handlers")
}

fn ms(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| format!("{v} ms"))
}

fn agreement_markdown(rows: &[testbed::Agreement], t: Tolerance, facts: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# The simulator against the testbed\n\nEach setup run with real processes (`ferry \
         testbed`) and simulated with the same network, schedule, placement and calls. They \
         agree when the shares of calls answered are at most {} percentage points apart, the \
         median RTTs at most {} ms or {:.0} % of the simulated one apart (whichever is larger), \
         and no call ran twice on a server.\n\n\
         | setup | answered: testbed | simulated | median RTT: testbed | simulated | most runs of a call | agree |\n\
         |---|---|---|---|---|---|---|",
        t.answered_points,
        t.rtt_abs_ms,
        t.rtt_rel * 100.0
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {:.0} % | {:.0} % | {} | {} | {} | {} |",
            r.key,
            r.answered.1,
            r.answered.0,
            ms(r.rtt_p50_ms.1),
            ms(r.rtt_p50_ms.0),
            r.max_runs,
            if r.agrees {
                "yes".to_string()
            } else {
                format!("no: {}", r.why_not)
            }
        );
    }
    let _ = writeln!(
        s,
        "\n## The testbed's runs\n\nNode work allowed: what the run's answered calls took beyond the journey check's quickest round trip (median; at most a tenth of a call's time). A lost call counts as Ferry's fault only if a journey existed that left this much of its time.\n\n| run | links | link changes | failed | wall time | node work allowed |\n|---|---|---|---|---|---|\n{facts}"
    );
    s
}
