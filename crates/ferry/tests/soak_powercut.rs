//! Crash, restart and power-cut soak: two real `ferry node` daemons in two network namespaces
//! joined by a veth pair, each with its data directory on its own power-loss file system
//! (`ferry-powercut`: a FUSE mount that forgets, at a cut, every write and every directory
//! change not yet synced). Under a workload of calls (alpha calls a procedure on bravo) and
//! bundles (alpha to bravo), at moments drawn from a seed a daemon is either SIGKILLed, or
//! SIGKILLed and its file system loses power, and then started again. Afterwards every call
//! the client accepted must have ended, by its deadline, with exactly one execution and its
//! result or with a definite error (never two executions), and every bundle whose send was
//! answered must have arrived, once. The procedure logs each execution to a file outside the
//! power-loss mounts, so a cut cannot hide a second run. The figures are printed.
//!
//! `FERRY_SOAK_SECONDS` (default 20) sets how long the kills go on, `FERRY_SOAK_SEED` the seed.
//! Needs root, `ip` (iproute2) and `/dev/fuse`; without them the test says so and passes,
//! unless `FERRY_REQUIRE_FUSE=1` (set by CI where /dev/fuse exists), where it fails. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ferry_powercut::PowerCut;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// The API listens on each namespace's own loopback: the same port in both.
const API: &str = "127.0.0.1:4300";
const ALPHA_ADDR: &str = "10.78.0.1";
const BRAVO_ADDR: &str = "10.78.0.2";

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces joined by a veth pair, removed on drop (which removes the pair too).
struct Pair {
    alpha: String,
    bravo: String,
}

impl Pair {
    fn create() -> Self {
        let tag = std::process::id() % 100_000;
        let pair = Pair {
            alpha: format!("fp{tag}a"),
            bravo: format!("fp{tag}b"),
        };
        for ns in [&pair.alpha, &pair.bravo] {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        let (va, vb) = (format!("fp{tag}va"), format!("fp{tag}vb"));
        ip(&[
            "link",
            "add",
            &va,
            "netns",
            &pair.alpha,
            "type",
            "veth",
            "peer",
            "name",
            &vb,
            "netns",
            &pair.bravo,
        ]);
        for (ns, dev, addr) in [
            (&pair.alpha, &va, ALPHA_ADDR),
            (&pair.bravo, &vb, BRAVO_ADDR),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        pair
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.alpha, &self.bravo] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A daemon in a namespace with its data directory on a power-loss mount.
struct Daemon {
    name: &'static str,
    ns: String,
    config: PathBuf,
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
    /// Unmounted after `Drop::drop` killed the process: unmounting needs the files closed.
    disk: PowerCut,
}

impl Daemon {
    fn new(dir: &Path, ns: &str, name: &'static str, addr: &str, extra: &str) -> Self {
        let data = dir.join(name);
        std::fs::create_dir_all(&data).unwrap();
        let disk = PowerCut::mount(&data).expect("mounting the power-loss file system");
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "node_id = \"dtn://{name}/\"\ndata_dir = {data:?}\n\
                 [tcpcl]\nlisten = [\"{addr}:4556\"]\nkeepalive = \"1s\"\n\
                 [udp]\nlisten = \"\"\n[discovery]\nenabled = false\n\
                 [api]\nlisten = \"{API}\"\n{extra}"
            ),
        )
        .unwrap();
        Daemon {
            name,
            ns: ns.to_owned(),
            config,
            dir: dir.to_owned(),
            log: dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
            disk,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        // `ip netns exec` execs the daemon: the child's pid is the daemon's.
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns, FERRY, "node", "--config"])
            .arg(&self.config)
            .env("XDG_CONFIG_HOME", &self.dir)
            .env("XDG_RUNTIME_DIR", &self.dir)
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
    /// (SQLite's -shm), so once it returns the file system has everything the process wrote.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A client command in the daemon's namespace, killed after 90 s whatever it does (a
    /// daemon stuck on its disk must fail the test, not hang it; `recv` waits up to 60 s).
    fn ferry(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args(["-k", "5", "90", "ip", "netns", "exec", &self.ns, FERRY])
            .args(args)
            .args(["--api", API])
            .env("XDG_RUNTIME_DIR", &self.dir)
            .output()
            .expect("running ferry")
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

fn can_run() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let has_ip = Command::new("ip").arg("-V").output().is_ok();
    root && has_ip && Path::new("/dev/fuse").exists()
}

#[test]
fn calls_and_bundles_survive_kills_and_power_cuts_across_namespaces() {
    if !can_run() {
        assert!(
            std::env::var_os("FERRY_REQUIRE_FUSE").is_none(),
            "FERRY_REQUIRE_FUSE is set but this is not root with iproute2 and /dev/fuse"
        );
        eprintln!("SKIPPED: needs root, iproute2 and /dev/fuse");
        return;
    }
    let seconds: u64 = std::env::var("FERRY_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("FERRY_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let dir = std::env::temp_dir().join(format!("ferry-soak-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pair = Pair::create();

    // The procedure leaves a line per execution in the test's directory, outside both
    // power-loss mounts: a cut of bravo's disk cannot erase the trace of a run.
    let executions = dir.join("executions");
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
    let mut bravo = Daemon::new(
        &dir,
        &pair.bravo,
        "bravo",
        BRAVO_ADDR,
        &format!(
            "[[rpc.procedure]]\nname = \"count\"\nparams = [\"text\"]\nexec = {script:?}\n\
             timeout = \"10s\"\nmax_concurrent = 16\n"
        ),
    );
    let mut alpha = Daemon::new(
        &dir,
        &pair.alpha,
        "alpha",
        ALPHA_ADDR,
        &format!("[[peers]]\naddress = \"{BRAVO_ADDR}:4556\"\n"),
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
            "60s",
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
            // Mostly the server, sometimes the client; half the time the machine loses power
            // too, and with it everything its daemon had not synced.
            let victim = if rng.below(3) == 0 {
                &mut alpha
            } else {
                &mut bravo
            };
            victim.kill();
            kills += 1;
            eprintln!("[{:?}] killed {}", Instant::now() - started, victim.name);
            if rng.below(2) == 0 {
                victim.disk.cut();
                cuts += 1;
                eprintln!(
                    "[{:?}] cut power of {}",
                    Instant::now() - started,
                    victim.name
                );
            }
            std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
            victim.start();
            next_kill = Instant::now() + Duration::from_millis(300 + rng.below(1500));
        }
        std::thread::sleep(Duration::from_millis(rng.below(150)));
    }

    eprintln!(
        "[{:?}] workload over: {} calls, {} bundles accepted; waiting for the ends",
        Instant::now() - started,
        calls.len(),
        bundles.len()
    );
    // Every accepted call ends, within its 60 s deadline plus a margin: with its result, or a
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

    eprintln!("[{:?}] every call ended", Instant::now() - started);
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
    let phantoms: Vec<&u32> = ran.keys().filter(|n| !calls.contains_key(n)).collect();

    let (da, db) = (alpha.disk.counters(), bravo.disk.counters());
    eprintln!(
        "soak with power cuts (seed {seed}, {seconds} s, two namespaces): {kills} kills, {cuts} \
         of them with a power cut (alpha started {} times, bravo {}; the cuts threw away {} \
         unsynced bytes and reverted {} names; {} file and {} directory syncs); {} calls \
         accepted ({refused} refused while alpha was down): {succeeded} succeeded, failed \
         {failed:?}; {} executions, {} duplicated, {} of calls never accepted; {} bundles \
         accepted, {} received, {} lost, {doubled} twice",
        alpha.starts,
        bravo.starts,
        da.bytes_lost + db.bytes_lost,
        da.names_reverted + db.names_reverted,
        da.file_syncs + db.file_syncs,
        da.dir_syncs + db.dir_syncs,
        calls.len(),
        ran.values().sum::<u32>(),
        duplicates.len(),
        phantoms.len(),
        bundles.len(),
        texts.len(),
        lost.len(),
    );
    assert!(kills >= 3, "the soak killed only {kills} times");
    assert!(cuts >= 1, "the soak never cut power");
    assert!(duplicates.is_empty(), "calls ran twice: {duplicates:?}");
    assert!(
        wrong.is_empty(),
        "succeeded calls without exactly one run and its result: {wrong:?}"
    );
    assert!(lost.is_empty(), "acknowledged bundles were lost: {lost:?}");
    assert_eq!(doubled, 0, "bundles were delivered twice");
    assert!(succeeded > 0, "no call succeeded");
    // An execution of a call nobody accepted would be a phantom.
    assert!(
        phantoms.is_empty(),
        "calls ran but were never accepted: {phantoms:?}"
    );
    // The daemons stop before their mounts go (a mount with open files cannot be unmounted).
    drop((alpha, bravo));
    drop(pair);
    let _ = std::fs::remove_dir_all(&dir);
}
