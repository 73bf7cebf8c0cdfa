//! Crash and restart soak: two real `ferry node` processes on loopback under a workload of calls
//! and bundles, SIGKILLed at moments drawn from a seed and restarted. Afterwards every call the
//! client accepted must have ended with exactly one execution and its result, or a definite
//! error (never two executions), and every bundle whose send was answered must have arrived,
//! once. The figures (kills, calls, executions, losses, duplicates) are printed.
//!
//! `FERRY_SOAK_SECONDS` (default 12) sets how long the kills go on, `FERRY_SOAK_SEED` the seed.
//! Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::free_port;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// A node's configuration and, while it runs, its process.
struct Node {
    name: &'static str,
    config: PathBuf,
    api: String,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Node {
    fn new(dir: &Path, name: &'static str, tcpcl: u16, extra: &str) -> Self {
        let api = format!("127.0.0.1:{}", free_port());
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "node_id = \"dtn://{name}/\"\ndata_dir = {:?}\n\
                 [tcpcl]\nlisten = [\"127.0.0.1:{tcpcl}\"]\nkeepalive = \"1s\"\n\
                 [udp]\nlisten = \"\"\n[discovery]\nenabled = false\n\
                 [api]\nlisten = \"{api}\"\n{extra}",
                dir.join(name)
            ),
        )
        .unwrap();
        Node {
            name,
            config,
            api,
            log: dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
        }
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(FERRY)
            .arg("node")
            .arg("--config")
            .arg(&self.config)
            .env("XDG_CONFIG_HOME", self.config.parent().unwrap())
            .env("XDG_RUNTIME_DIR", self.config.parent().unwrap())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting ferry node");
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.ferry(&["status"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "{} did not answer within 20 s:\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn ferry(&self, args: &[&str]) -> Output {
        Command::new(FERRY)
            .args(args)
            .args(["--api", &self.api])
            .env("XDG_RUNTIME_DIR", self.config.parent().unwrap())
            .output()
            .expect("running ferry")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SplitMix64: the kill schedule is a function of the seed.
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

#[test]
fn calls_and_bundles_survive_random_kills() {
    let seconds: u64 = std::env::var("FERRY_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("FERRY_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let dir = std::env::temp_dir().join(format!("ferry-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // The procedure leaves a line per execution outside its working directory: the count of
    // executions survives the server's crashes.
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
    let bravo_port = free_port();
    let mut bravo = Node::new(
        &dir,
        "bravo",
        bravo_port,
        &format!(
            "[[rpc.procedure]]\nname = \"count\"\nparams = [\"text\"]\nexec = {:?}\n\
             timeout = \"10s\"\nmax_concurrent = 16\n",
            script
        ),
    );
    let mut alpha = Node::new(
        &dir,
        "alpha",
        free_port(),
        &format!("[[peers]]\naddress = \"127.0.0.1:{bravo_port}\"\n"),
    );
    bravo.start();
    alpha.start();

    let mut rng = Rng(seed);
    let mut calls: BTreeMap<u32, String> = BTreeMap::new();
    let mut bundles: Vec<String> = Vec::new();
    let mut refused = 0u32;
    let mut kills = 0u32;
    let mut next_kill = Instant::now() + Duration::from_millis(500 + rng.below(1000));
    let until = Instant::now() + Duration::from_secs(seconds);
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
            "40s",
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
            // Mostly the server, sometimes the client: each loses what was not durable.
            let victim = if rng.below(3) == 0 {
                &mut alpha
            } else {
                &mut bravo
            };
            victim.kill();
            kills += 1;
            std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
            victim.start();
            next_kill = Instant::now() + Duration::from_millis(300 + rng.below(1500));
        }
        std::thread::sleep(Duration::from_millis(rng.below(150)));
    }

    // Every accepted call ends: with its result, or a definite error.
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
            "{} of {} calls had not ended 90 s after the kills",
            calls.len() - ends.len(),
            calls.len()
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
    let mut failed: BTreeMap<String, u32> = BTreeMap::new();
    for (n, end) in &ends {
        if end["state"] == "succeeded" {
            succeeded += 1;
            assert_eq!(ran.get(n), Some(&1), "call {n} succeeded: {end}");
            let value = end["replies"][0]["value_text"].as_str().unwrap_or("");
            assert_eq!(value.trim(), format!("done {n}"), "{end}");
        } else {
            let reason = end["replies"]
                .as_array()
                .and_then(|r| r.iter().find_map(|r| r["code"].as_str()))
                .unwrap_or_else(|| end["state"].as_str().unwrap_or("?"))
                .to_owned();
            *failed.entry(reason).or_default() += 1;
        }
    }

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
    let lost = wanted.iter().filter(|b| !texts.contains(b)).count();
    let doubled = texts.windows(2).filter(|w| w[0] == w[1]).count();

    eprintln!(
        "soak (seed {seed}, {seconds} s): {kills} kills (alpha started {} times, bravo {}); \
         {} calls accepted ({refused} refused while alpha was down): {succeeded} succeeded, \
         failed {failed:?}; {} executions, {} duplicated; {} bundles accepted, {} received, \
         {lost} lost, {doubled} twice",
        alpha.starts,
        bravo.starts,
        calls.len(),
        ran.values().sum::<u32>(),
        duplicates.len(),
        bundles.len(),
        texts.len(),
    );
    assert!(kills >= 3, "the soak killed only {kills} times");
    assert!(duplicates.is_empty(), "calls ran twice: {duplicates:?}");
    assert_eq!(lost, 0, "acknowledged bundles were lost");
    assert_eq!(doubled, 0, "bundles were delivered twice");
    assert!(succeeded > 0, "no call succeeded");
    // Executions of calls nobody accepted would be a phantom: every executed number is a call.
    for n in ran.keys() {
        assert!(calls.contains_key(n), "call {n} ran but was never accepted");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
