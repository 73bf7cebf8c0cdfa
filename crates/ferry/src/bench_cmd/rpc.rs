//! `ferry bench rpc`: the RPC benchmark against gRPC is the `ferry-bench` crate's bench
//! (`crates/bench/benches/rpc.rs`: Ferry's null and echo calls beside a tonic gRPC echo, in one
//! process, measured in the same run). This part runs it where the source tree is at hand
//! (`cargo bench -p ferry-bench --bench rpc`, its `FERRY_BENCH_*` settings taken from the
//! environment, `FERRY_BENCH_QUICK=1` with `--quick`) and puts its table in the report; without
//! the tree, or in `ferry bench all` (which does not start a build), the report says how to run
//! it. It never reimplements either side.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{Common, check_interrupt};

#[derive(Args)]
pub(crate) struct RpcArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) options: RpcOptions,
}

#[derive(Args, Clone)]
pub(crate) struct RpcOptions {
    /// The Ferry source tree (with crates/bench) [default: the current directory].
    #[arg(long, value_name = "DIR")]
    source: Option<PathBuf>,
    /// Only say in the report how to run it.
    #[arg(long)]
    explain_only: bool,
}

impl RpcOptions {
    pub(crate) fn explain_only() -> Self {
        RpcOptions {
            source: None,
            explain_only: true,
        }
    }
}

/// The command, as the report shows it.
pub(crate) const COMMAND: &str = "cargo bench -p ferry-bench --bench rpc";

/// What the part did: the bench's output, or why it did not run.
pub(crate) struct Results {
    pub(crate) output: Result<String, String>,
    pub(crate) env: Vec<(String, String)>,
}

pub(crate) fn run(options: &RpcOptions, common: &Common) -> Result<Results> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("FERRY_BENCH_"))
        .collect();
    if common.quick && !env.iter().any(|(k, _)| k == "FERRY_BENCH_QUICK") {
        env.push(("FERRY_BENCH_QUICK".into(), "1".into()));
    }
    env.sort();
    if options.explain_only {
        return Ok(Results {
            output: Err("not run here (it builds the bench from the source tree)".into()),
            env,
        });
    }
    let source = match &options.source {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    if !source.join("crates/bench/benches/rpc.rs").is_file() {
        return Ok(Results {
            output: Err(format!(
                "not run: {} is not the Ferry source tree (no crates/bench/benches/rpc.rs; \
                 give it with --source)",
                source.display()
            )),
            env,
        });
    }
    eprintln!("rpc: {COMMAND} in {} (builds first)", source.display());
    let mut child = Command::new("cargo")
        .args(["bench", "-p", "ferry-bench", "--bench", "rpc"])
        .current_dir(&source)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("running cargo (is it installed?)")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stdout), &mut text);
        text
    });
    // A build and the bench: bounded by an hour.
    let deadline = Instant::now() + Duration::from_secs(3600);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline || check_interrupt().is_err() {
            let _ = child.kill();
            let _ = child.wait();
            check_interrupt()?;
            bail!("{COMMAND} took more than an hour");
        }
        // Not `pause`: an interrupt must reach the check above, which stops cargo first.
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = reader.join().unwrap_or_default();
    let output = if status.success() {
        print!("{text}");
        Ok(text)
    } else {
        Err(format!("{COMMAND} failed ({status})"))
    };
    Ok(Results { output, env })
}
