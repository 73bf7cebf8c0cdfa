//! The nodes under test and the helpers that talk to them, as processes in a namespace: a
//! `ferry node` (this executable) or a dtn7-rs `dtnd`, each killed when dropped, and `ferry
//! bench agent` runs (the helper that reaches a node's API from inside its namespace, where its
//! loopback is). It never starts anything outside a namespace made by `netns.rs`.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::netns::Pair;
use super::{check_interrupt, pause};

/// Which implementation a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Impl {
    /// `ferry node` with its disk store (the default).
    Ferry,
    /// `ferry node --store memory`.
    FerryMemory,
    Dtnd,
}

impl Impl {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Impl::Ferry => "Ferry",
            Impl::FerryMemory => "Ferry, memory store",
            Impl::Dtnd => "dtn7-rs dtnd 0.21",
        }
    }

    /// The `--kind` the agent takes.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Impl::Ferry | Impl::FerryMemory => "ferry",
            Impl::Dtnd => "dtnd",
        }
    }

    /// Its name in the reports' CSV files.
    pub(crate) fn csv_name(self) -> &'static str {
        match self {
            Impl::Ferry => "ferry",
            Impl::FerryMemory => "ferry-memory",
            Impl::Dtnd => "dtnd",
        }
    }

    /// Whether it is a `ferry node`.
    pub(crate) fn is_ferry(self) -> bool {
        self != Impl::Dtnd
    }

    /// The node's local API inside its namespace.
    pub(crate) fn api(self) -> &'static str {
        match self {
            Impl::Ferry | Impl::FerryMemory => "127.0.0.1:4550",
            Impl::Dtnd => "127.0.0.1:3000",
        }
    }
}

/// This executable (the nodes and the agent are it).
pub(crate) fn ferry_exe() -> Result<PathBuf> {
    std::env::current_exe().context("finding this executable")
}

/// dtn7-rs's `dtnd`: `--dtnd PATH`, else as the interop tests find it (`$FERRY_DTN7_BIN`,
/// `~/.cache/ferry-tools/dtn7/bin`, `PATH`). The error says what was looked for.
pub(crate) fn find_dtnd(given: Option<&str>) -> Result<PathBuf, String> {
    if let Some(given) = given {
        if given == "none" {
            return Err("not run (--dtnd none)".into());
        }
        let p = PathBuf::from(given);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("not found at {given}"))
        };
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("FERRY_DTN7_BIN") {
        dirs.push(dir.into());
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cache/ferry-tools/dtn7/bin"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join("dtnd"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "not found ($FERRY_DTN7_BIN, ~/.cache/ferry-tools/dtn7/bin, PATH; install with \
             `cargo install dtn7 --version 0.21.0 --locked --root ~/.cache/ferry-tools/dtn7`)"
                .to_string()
        })
}

/// A node in a namespace, killed when dropped.
pub(crate) struct Node {
    child: Child,
    pub(crate) kind: Impl,
    pub(crate) ns: String,
    /// The API token (Ferry), handed to the agent in its environment.
    pub(crate) token: Option<String>,
    log: PathBuf,
}

/// How a run's two nodes find each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peering {
    /// a dials b as its static peer, discovery off (a field node dialling a known station).
    Static,
    /// Ferry's nodes find each other by beacons alone (discovery at its defaults, no static
    /// peer); dtnd keeps its static peer, as its discovery is not what is measured.
    Beacons,
}

impl Node {
    /// Starts b, then a, stores fresh under `work` as `<tag>-b` and `<tag>-a`: the two nodes of
    /// a contact or queue run, finding each other as `peering` says. `ferry_args` go to both
    /// Ferry nodes' command lines (none to dtnd's).
    pub(crate) fn start_pair(
        kind: Impl,
        pair: &Pair,
        work: &super::WorkDir,
        tag: &str,
        dtnd: Option<&Path>,
        ferry_args: &[String],
        peering: Peering,
    ) -> Result<(Node, Node)> {
        let beacons = peering == Peering::Beacons && kind != Impl::Dtnd;
        let b = Node::start(
            kind,
            &pair.b,
            "b",
            &work.fresh(&format!("{tag}-b"))?,
            None,
            dtnd,
            ferry_args,
            beacons,
        )?;
        let peer = format!("{}:4556", super::netns::ADDR_B);
        let a = Node::start(
            kind,
            &pair.a,
            "a",
            &work.fresh(&format!("{tag}-a"))?,
            (!beacons).then_some(peer.as_str()),
            dtnd,
            ferry_args,
            beacons,
        )?;
        Ok((a, b))
    }

    /// Starts a node named `name` (`dtn://NAME/`) with its store in `dir`; `peer` is b's TCPCL
    /// address for a (a static peer). A Ferry node has discovery off unless `beacons`.
    /// Returns once its API answers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        kind: Impl,
        ns: &str,
        name: &str,
        dir: &Path,
        peer: Option<&str>,
        dtnd: Option<&Path>,
        ferry_args: &[String],
        beacons: bool,
    ) -> Result<Node> {
        let log = dir.with_extension("log");
        let mut cmd = match kind {
            Impl::Ferry | Impl::FerryMemory => {
                let mut cmd = Pair::command(ns, &ferry_exe()?);
                cmd.arg("node");
                if !beacons {
                    cmd.arg("--no-discovery");
                }
                cmd.arg("--node-id")
                    .arg(format!("dtn://{name}/"))
                    .arg("--data-dir")
                    .arg(dir);
                if kind == Impl::FerryMemory {
                    // Room for the largest run (1,000 bundles of 1 MiB, or 200 MB in a contact)
                    // with the headers: the default 512 MB quota would refuse some.
                    cmd.args(["--store", "memory", "--store-quota", "4GB"]);
                }
                if let Some(peer) = peer {
                    cmd.args(["--peer", peer]);
                }
                cmd.args(ferry_args);
                cmd
            }
            Impl::Dtnd => {
                let bin = dtnd.context("dtnd was not found")?;
                let mut cmd = Pair::command(ns, bin);
                // Janitor every second: dtnd retries waiting bundles on that tick, and its
                // default of 10 s would be its own delay, not the contact's.
                cmd.args(["-n", name, "-W"]).arg(dir).args([
                    "-C",
                    "tcp:port=4556",
                    "-e",
                    "bench",
                    "--disable_nd",
                    "-j",
                    "1s",
                ]);
                if let Some(peer) = peer {
                    cmd.args(["-s", &format!("tcp://{peer}/b")]);
                }
                cmd
            }
        };
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {} in {ns}", kind.name()))?;
        let mut node = Node {
            child,
            kind,
            ns: ns.to_owned(),
            token: None,
            log,
        };
        node.wait_up(dir)?;
        Ok(node)
    }

    /// The process id (the program's: `ip netns exec` execs it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_up(&mut self, dir: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            check_interrupt()?;
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} in {} exited ({status}); its log:\n{}",
                    self.kind.name(),
                    self.ns,
                    self.log_tail()
                );
            }
            if self.kind.is_ferry() && self.token.is_none() {
                self.token = std::fs::read_to_string(dir.join("api-token"))
                    .ok()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty());
            }
            if (self.kind == Impl::Dtnd || self.token.is_some())
                && self
                    .agent(&["delivered"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} in {} did not answer on its API within 30 s; its log:\n{}",
                    self.kind.name(),
                    self.ns,
                    self.log_tail()
                );
            }
            pause(Duration::from_millis(100))?;
        }
    }

    /// `ferry bench agent --kind K --api A OP ARGS` in this node's namespace.
    pub(crate) fn agent(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = Pair::command(&self.ns, &ferry_exe().unwrap_or_else(|_| "ferry".into()));
        cmd.args(["bench", "agent", "--kind", self.kind.kind(), "--api"])
            .arg(self.kind.api())
            .args(args);
        if let Some(token) = &self.token {
            cmd.env(crate::api_token::TOKEN_ENV, token);
        }
        cmd
    }

    /// Queues `count` bundles of `size` bytes for b's bench endpoint through this node's API
    /// (the agent's `feed`); the agent's output, the seconds it took.
    pub(crate) fn feed(&self, size: u64, count: u64) -> Result<String> {
        self.agent_output(&[
            "feed",
            "--dest",
            &format!("dtn://b/{}", super::agent::ENDPOINT),
            "--size",
            &size.to_string(),
            "--count",
            &count.to_string(),
        ])
    }

    /// Runs the agent to its end; its stdout, or an error with its stderr.
    pub(crate) fn agent_output(&self, args: &[&str]) -> Result<String> {
        let out = self
            .agent(args)
            .stdin(Stdio::null())
            .output()
            .context("running ferry bench agent")?;
        if !out.status.success() {
            bail!(
                "agent {} in {}: {}",
                args.join(" "),
                self.ns,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Bundles delivered to the bench endpoint so far.
    pub(crate) fn delivered(&self) -> Result<u64> {
        let out = self.agent_output(&["delivered"])?;
        out.trim()
            .parse()
            .with_context(|| format!("agent said {out:?}"))
    }

    /// The last lines of the node's log, for an error.
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A watch on b's deliveries: the agent polls b's API every `interval` and prints each new
/// count with the wall-clock time it saw it; a thread keeps the latest. Killed when dropped.
pub(crate) struct Watch {
    child: Child,
    latest: Arc<Mutex<(u64, Option<std::time::SystemTime>)>>,
}

impl Watch {
    pub(crate) fn start(
        node: &Node,
        interval: Duration,
        until: u64,
        timeout: Duration,
    ) -> Result<Self> {
        let mut child = node
            .agent(&[
                "watch",
                "--interval-ms",
                &interval.as_millis().to_string(),
                "--until",
                &until.to_string(),
                "--timeout-s",
                &timeout.as_secs().to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the delivery watch")?;
        let stdout = child.stdout.take().context("the watch's stdout")?;
        let latest = Arc::new(Mutex::new((0u64, None)));
        let shared = Arc::clone(&latest);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut parts = line.split_whitespace();
                let (Some(us), Some(n)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let (Ok(us), Ok(n)) = (us.parse::<u64>(), n.parse::<u64>()) else {
                    continue;
                };
                let at = std::time::UNIX_EPOCH + Duration::from_micros(us);
                if let Ok(mut l) = shared.lock() {
                    *l = (n, Some(at));
                }
            }
        });
        Ok(Watch { child, latest })
    }

    /// The latest count and when the agent saw it change to it.
    pub(crate) fn latest(&self) -> (u64, Option<std::time::SystemTime>) {
        self.latest.lock().map(|l| *l).unwrap_or((0, None))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `Instant` for a wall-clock time seen by another process (both clocks are this
/// machine's; the offset is taken now, so a clock step during a run would show).
pub(crate) fn instant_of(at: std::time::SystemTime) -> Instant {
    let now_sys = std::time::SystemTime::now();
    let now = Instant::now();
    match now_sys.duration_since(at) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(e) => now + e.duration(),
    }
}
