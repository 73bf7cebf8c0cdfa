//! Crash, restart and power-cut soaks: two real `ferry node` daemons, a client (alpha) and a
//! server (bravo, serving a procedure that leaves a line per execution in a file outside its
//! working directory and outside any power-loss mount), under a workload of calls (alpha calls
//! the procedure on bravo) and bundles (alpha to bravo); at moments drawn from a seed one of
//! them (bravo twice as often) is SIGKILLed and started again 0.1–0.6 s later. Afterwards every
//! call the client accepted must have ended with exactly one execution and its result, or with
//! a definite error (never two executions, never an execution of a call that was not accepted),
//! and every bundle whose send was answered must have arrived, once. The figures are printed.
//! One workload, one check, two modes:
//!
//! - `calls_and_bundles_survive_random_kills` ([`LOOPBACK`]): both daemons on 127.0.0.1, kills
//!   only (a process crash: the operating system keeps every write). Calls due in 40 s; the
//!   kills go on for 12 s by default. Runs anywhere.
//! - `calls_and_bundles_survive_kills_and_power_cuts_across_namespaces` ([`POWER_CUTS`]): each
//!   daemon in a network namespace of its own, the two joined by a veth pair
//!   (`common/netns.rs`), each data directory on its own power-loss file system
//!   (`ferry-powercut`: a FUSE mount that forgets, at a cut, every write and every directory
//!   change not yet synced). Half the kills are power cuts: the daemon is SIGKILLed and its
//!   file system then loses power before it starts again. Calls due in 60 s; 20 s of kills by
//!   default. Needs root, `ip` (iproute2) and `/dev/fuse`; without them the test says so and
//!   passes, unless `FERRY_REQUIRE_FUSE=1` (set by CI where /dev/fuse exists), where it fails.
//!
//! `FERRY_SOAK_SECONDS` sets how long the kills go on, `FERRY_SOAK_SEED` the seed (default 25).
//! The two tests take turns (a lock): on two cores one would skew the other's timing. Every
//! wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferry_powercut::PowerCut;

mod common;

use common::netns::Namespaces;
use common::{FERRY, free_port};

/// How a soak runs.
struct Mode {
    /// For the figures.
    name: &'static str,
    /// How long the kills go on without `FERRY_SOAK_SECONDS`.
    default_seconds: u64,
    /// The calls' `--deadline`.
    call_deadline: &'static str,
    /// Each daemon in a namespace of its own, its data directory on a power-loss mount, half
    /// the kills with a power cut.
    power_cuts: bool,
}

const LOOPBACK: Mode = Mode {
    name: "loopback",
    default_seconds: 12,
    call_deadline: "40s",
    power_cuts: false,
};

const POWER_CUTS: Mode = Mode {
    name: "two namespaces, power cuts",
    default_seconds: 20,
    call_deadline: "60s",
    power_cuts: true,
};

/// Only one soak at a time (see the module's documentation).
static TURN: Mutex<()> = Mutex::new(());

/// In namespace mode the API listens on each namespace's own loopback: the same port in both.
const NS_API: &str = "127.0.0.1:4300";
const ALPHA_ADDR: &str = "10.78.0.1";
const BRAVO_ADDR: &str = "10.78.0.2";

/// A daemon's configuration and, while it runs, its process; in namespace mode also its
/// namespace and its power-loss mount.
struct Daemon {
    name: &'static str,
    config: PathBuf,
    dir: PathBuf,
    api: String,
    log: PathBuf,
    /// What runs a program where the daemon lives: nothing on loopback, `ip netns exec <ns>` in
    /// a namespace.
    exec: Vec<String>,
    child: Option<Child>,
    starts: u32,
    /// Unmounted after `Drop::drop` killed the process: unmounting needs the files closed.
    disk: Option<PowerCut>,
}

impl Daemon {
    /// A daemon listening for TCPCL on `listen` (`host:port`), its API on `api`, in the
    /// namespace `exec` runs programs in (if any), on a power-loss mount if `power_cuts`.
    fn new(
        dir: &Path,
        name: &'static str,
        (listen, api): (String, String),
        exec: Vec<String>,
        power_cuts: bool,
        extra: &str,
    ) -> Self {
        let data = dir.join(name);
        let disk = power_cuts.then(|| {
            std::fs::create_dir_all(&data).unwrap();
            PowerCut::mount(&data).expect("mounting the power-loss file system")
        });
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "node_id = \"dtn://{name}/\"\ndata_dir = {data:?}\n\
                 [tcpcl]\nlisten = [\"{listen}\"]\nkeepalive = \"1s\"\n\
                 [udp]\nlisten = \"\"\n[discovery]\nenabled = false\n\
                 [api]\nlisten = \"{api}\"\n{extra}"
            ),
        )
        .unwrap();
        Daemon {
            name,
            config,
            dir: dir.to_owned(),
            api,
            log: dir.join(format!("{name}.log")),
            exec,
            child: None,
            starts: 0,
            disk,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `ferry` where the daemon lives, not yet given its arguments.
    fn command(&self) -> Command {
        let mut cmd = match self.exec.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(FERRY);
                cmd
            }
            None => Command::new(FERRY),
        };
        cmd.env("XDG_CONFIG_HOME", &self.dir)
            .env("XDG_RUNTIME_DIR", &self.dir);
        cmd
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        // `ip netns exec` execs the daemon: the child's pid is the daemon's.
        let child = self
            .command()
            .args(["node", "--config"])
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting ferry node");
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.ferry(&["status"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "{} did not answer within 30 s:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL and wait for the exit. The exit also writes back the process's shared mappings
    /// (SQLite's -shm), so once it returns a power-loss mount has everything the process wrote.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A client command against the daemon, killed after 90 s whatever it does (a daemon stuck
    /// on its disk must fail the test, not hang it; `recv` waits up to 60 s).
    fn ferry(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "90"])
            .args(&self.exec)
            .arg(FERRY)
            .args(args)
            .args(["--api", &self.api])
            .env("XDG_RUNTIME_DIR", &self.dir);
        cmd.output().expect("running ferry")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SplitMix64: the schedule of kills and cuts is a function of the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The procedure: it appends its argument to `executions`, sleeps up to 0.3 s, answers
/// `done <argument>`.
fn write_procedure(dir: &Path, executions: &Path) -> PathBuf {
    let script = dir.join("count.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" >> {}\nsleep 0.$(( $1 % 4 ))\necho \"done $1\"\n",
            executions.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The soak in `mode`, its two daemons placed by `place` (name → TCPCL listen address and API
/// address, and what runs a program where it lives).
fn soak(mode: &Mode, dir: &Path, place: impl Fn(&str) -> ((String, String), Vec<String>)) {
    let _turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let seconds = env_or("FERRY_SOAK_SECONDS", mode.default_seconds);
    let seed = env_or("FERRY_SOAK_SEED", 25);

    // The procedure leaves a line per execution in the test's directory, outside its working
    // directory and both power-loss mounts: neither a crash nor a cut can hide a run.
    let executions = dir.join("executions");
    let script = write_procedure(dir, &executions);
    let (bravo_at, bravo_exec) = place("bravo");
    let bravo_listen = bravo_at.0.clone();
    let mut bravo = Daemon::new(
        dir,
        "bravo",
        bravo_at,
        bravo_exec,
        mode.power_cuts,
        &format!(
            "[[rpc.procedure]]\nname = \"count\"\nparams = [\"text\"]\nexec = {script:?}\n\
             timeout = \"10s\"\nmax_concurrent = 16\n"
        ),
    );
    let (alpha_at, alpha_exec) = place("alpha");
    let mut alpha = Daemon::new(
        dir,
        "alpha",
        alpha_at,
        alpha_exec,
        mode.power_cuts,
        &format!("[[peers]]\naddress = \"{bravo_listen}\"\n"),
    );
    bravo.start();
    alpha.start();

    let mut rng = Rng(seed);
    let mut calls: BTreeMap<u32, String> = BTreeMap::new();
    let mut bundles: Vec<String> = Vec::new();
    let mut refused = 0u32;
    let (mut kills, mut cuts) = (0u32, 0u32);
    let mut next_kill = Instant::now() + Duration::from_millis(500 + rng.below(1000));
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut i = 0u32;
    while Instant::now() < until {
        // A call and a bundle from alpha, accepted only if alpha answered.
        let arg = i.to_string();
        let out = alpha.ferry(&[
            "call",
            "bravo",
            "count",
            &arg,
            "--detach",
            "--deadline",
            mode.call_deadline,
        ]);
        if out.status.success() {
            calls.insert(i, String::from_utf8_lossy(&out.stdout).trim().to_owned());
        } else {
            refused += 1;
        }
        let text = format!("bundle {i}");
        if alpha
            .ferry(&["send", "dtn://bravo/inbox", &text])
            .status
            .success()
        {
            bundles.push(text);
        }
        i += 1;
        if Instant::now() >= next_kill {
            // Mostly the server, sometimes the client: each loses what was not durable. With
            // power cuts, half the time the machine loses power too, and with it everything its
            // daemon had not synced.
            let victim = if rng.below(3) == 0 {
                &mut alpha
            } else {
                &mut bravo
            };
            victim.kill();
            kills += 1;
            eprintln!("[{:?}] killed {}", started.elapsed(), victim.name);
            if let Some(disk) = &victim.disk
                && rng.below(2) == 0
            {
                disk.cut();
                cuts += 1;
                eprintln!("[{:?}] cut power of {}", started.elapsed(), victim.name);
            }
            std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
            victim.start();
            next_kill = Instant::now() + Duration::from_millis(300 + rng.below(1500));
        }
        std::thread::sleep(Duration::from_millis(rng.below(150)));
    }

    eprintln!(
        "[{:?}] workload over: {} calls, {} bundles accepted; waiting for the ends",
        started.elapsed(),
        calls.len(),
        bundles.len()
    );
    // Every accepted call ends, within its deadline plus a margin: with its result, or a
    // definite error.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut ends: BTreeMap<u32, serde_json::Value> = BTreeMap::new();
    while ends.len() < calls.len() {
        for (n, id) in &calls {
            if ends.contains_key(n) {
                continue;
            }
            let out = alpha.ferry(&["result", id, "--json"]);
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                && v["state"] != "waiting"
            {
                ends.insert(*n, v);
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} calls had not ended 90 s after the kills; alpha log:\n{}",
            calls.len() - ends.len(),
            calls.len(),
            alpha.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(&executions).unwrap_or_default();
    let mut ran: BTreeMap<u32, u32> = BTreeMap::new();
    for line in log.lines() {
        *ran.entry(line.trim().parse().unwrap()).or_default() += 1;
    }
    let duplicates: Vec<_> = ran.iter().filter(|&(_, &n)| n > 1).collect();
    let mut succeeded = 0;
    let mut wrong: Vec<String> = Vec::new();
    let mut failed: BTreeMap<String, u32> = BTreeMap::new();
    for (n, end) in &ends {
        if end["state"] == "succeeded" {
            succeeded += 1;
            let value = end["replies"][0]["value_text"].as_str().unwrap_or("");
            if ran.get(n) != Some(&1) || value.trim() != format!("done {n}") {
                wrong.push(format!("call {n} (ran {:?} times): {end}", ran.get(n)));
            }
        } else {
            let reason = end["replies"]
                .as_array()
                .and_then(|r| r.iter().find_map(|r| r["code"].as_str()))
                .unwrap_or_else(|| end["state"].as_str().unwrap_or("?"))
                .to_owned();
            *failed.entry(reason).or_default() += 1;
        }
    }
    eprintln!("[{:?}] every call ended", started.elapsed());

    // Every bundle whose send was answered arrives at bravo, once.
    let out = bravo.ferry(&[
        "recv",
        "inbox",
        "--count",
        &bundles.len().to_string(),
        "--timeout",
        "60s",
        "--json",
    ]);
    // One JSON object a line.
    let received: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut texts: Vec<String> = received
        .iter()
        .filter_map(|r| r["payload_base64"].as_str())
        .map(|b| {
            use base64::Engine as _;
            String::from_utf8_lossy(
                &base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .unwrap_or_default(),
            )
            .into_owned()
        })
        .collect();
    texts.sort();
    let mut wanted = bundles.clone();
    wanted.sort();
    let lost: Vec<&String> = wanted.iter().filter(|b| !texts.contains(b)).collect();
    let doubled = texts.windows(2).filter(|w| w[0] == w[1]).count();
    // An execution of a call nobody accepted would be a phantom.
    let phantoms: Vec<&u32> = ran.keys().filter(|n| !calls.contains_key(n)).collect();

    let power = match (&alpha.disk, &bravo.disk) {
        (Some(a), Some(b)) => {
            let (a, b) = (a.counters(), b.counters());
            format!(
                ", {cuts} of them with a power cut (the cuts threw away {} unsynced bytes and \
                 reverted {} names; {} file and {} directory syncs)",
                a.bytes_lost + b.bytes_lost,
                a.names_reverted + b.names_reverted,
                a.file_syncs + b.file_syncs,
                a.dir_syncs + b.dir_syncs,
            )
        }
        _ => String::new(),
    };
    eprintln!(
        "soak ({}, seed {seed}, {seconds} s): {kills} kills{power} (alpha started {} times, \
         bravo {}); {} calls accepted ({refused} refused while alpha was down): {succeeded} \
         succeeded, failed {failed:?}; {} executions, {} duplicated, {} of calls never \
         accepted; {} bundles accepted, {} received, {} lost, {doubled} twice",
        mode.name,
        alpha.starts,
        bravo.starts,
        calls.len(),
        ran.values().sum::<u32>(),
        duplicates.len(),
        phantoms.len(),
        bundles.len(),
        texts.len(),
        lost.len(),
    );
    assert!(kills >= 3, "the soak killed only {kills} times");
    if mode.power_cuts {
        assert!(cuts >= 1, "the soak never cut power");
    }
    assert!(duplicates.is_empty(), "calls ran twice: {duplicates:?}");
    assert!(
        wrong.is_empty(),
        "succeeded calls without exactly one run and its result: {wrong:?}"
    );
    assert!(lost.is_empty(), "acknowledged bundles were lost: {lost:?}");
    assert_eq!(doubled, 0, "bundles were delivered twice");
    assert!(succeeded > 0, "no call succeeded");
    assert!(
        phantoms.is_empty(),
        "calls ran but were never accepted: {phantoms:?}"
    );
    // The daemons stop before their mounts go (a mount with open files cannot be unmounted).
    drop((alpha, bravo));
}

/// A fresh directory for a soak's files, under the system's temporary directory.
fn soak_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn calls_and_bundles_survive_random_kills() {
    let dir = soak_dir("soak");
    soak(&LOOPBACK, &dir, |_| {
        let at = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        (at, Vec::new())
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calls_and_bundles_survive_kills_and_power_cuts_across_namespaces() {
    if !(common::netns::can_run() && Path::new("/dev/fuse").exists()) {
        assert!(
            std::env::var_os("FERRY_REQUIRE_FUSE").is_none(),
            "FERRY_REQUIRE_FUSE is set but this is not root with iproute2 and /dev/fuse"
        );
        eprintln!("SKIPPED: needs root, iproute2 and /dev/fuse");
        return;
    }
    let dir = soak_dir("soak-cut");
    let pair = Namespaces::create("fp", &["a", "b"]);
    pair.veth(
        ("a", "fpva", &format!("{ALPHA_ADDR}/24")),
        ("b", "fpvb", &format!("{BRAVO_ADDR}/24")),
    );
    soak(&POWER_CUTS, &dir, |name| {
        let (ns, addr) = match name {
            "alpha" => ("a", ALPHA_ADDR),
            _ => ("b", BRAVO_ADDR),
        };
        ((format!("{addr}:4556"), NS_API.to_owned()), pair.exec(ns))
    });
    drop(pair);
    let _ = std::fs::remove_dir_all(&dir);
}
