//! The nodes of a run: a `ferry node` in each namespace, configured for the run (its static
//! peers over the run's links, the echo it serves if it is a server), started, waited for, and
//! stopped (SIGTERM, then SIGKILL) when dropped. The client commands of a node (`ferry call`,
//! `ferry peers`) run in its namespace with its API token.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::net::Net;

/// The port of every node's API (each in its own namespace).
const API: &str = "127.0.0.1:4550";

/// What one node serves and whom it dials.
pub struct NodeSpec {
    /// Its index (`dtn://n<i>/`).
    pub index: usize,
    /// Addresses of the neighbours it dials (the lower node of each link dials).
    pub peers: Vec<String>,
    /// Serves `echo`, and with a file (1MB, 100MB) or a text (0MB).
    pub echo: Option<bool>,
}

/// How every node of the run is set up.
pub struct NodeSettings {
    /// The `ferry` executable (the node, the client commands, and the echo).
    pub ferry: PathBuf,
    /// TCPCL keepalive: a session over a link taken down ends after two silent intervals.
    pub keepalive_s: u64,
    /// What one execution of the echo may return.
    pub max_output: u64,
    /// How long one execution may take.
    pub exec_timeout_ms: u64,
    /// `bundle_piece`: bundles to one node larger than this go in pieces (`None`: whole).
    pub bundle_piece: Option<u64>,
}

/// The running nodes of a run; stopped on drop.
pub struct Nodes {
    settings_ferry: PathBuf,
    dirs: Vec<PathBuf>,
    namespaces: Vec<String>,
    children: Vec<Child>,
}

/// The TOML configuration of a node.
fn config(spec: &NodeSpec, dir: &Path, settings: &NodeSettings) -> Result<String> {
    let mut c = String::new();
    let dir_text = dir.to_str().context("the work directory is not UTF-8")?;
    writeln!(c, "node_id = \"dtn://n{}/\"", spec.index)?;
    writeln!(c, "data_dir = {:?}", format!("{dir_text}/data"))?;
    if let Some(piece) = settings.bundle_piece {
        writeln!(c, "bundle_piece = \"{piece}\"")?;
    }
    writeln!(c, "[tcpcl]\nlisten = [\"0.0.0.0:4556\"]")?;
    writeln!(c, "keepalive = \"{}s\"", settings.keepalive_s)?;
    // Every node may hold a session with every other (Hub).
    writeln!(c, "max_sessions_per_address = 8")?;
    writeln!(c, "[udp]\nlisten = \"0.0.0.0:4556\"")?;
    // Peers are the run's links, dialled statically: what beacons would find is known.
    writeln!(c, "[discovery]\nenabled = false")?;
    writeln!(c, "[api]\nlisten = \"{API}\"")?;
    for peer in &spec.peers {
        writeln!(c, "[[peers]]\naddress = \"{peer}:4556\"")?;
    }
    if let Some(file) = spec.echo {
        let ferry = settings
            .ferry
            .to_str()
            .context("the ferry path is not UTF-8")?;
        writeln!(c, "[[rpc.procedure]]\nname = \"echo\"")?;
        writeln!(c, "params = [\"{}\"]", if file { "file" } else { "text" })?;
        writeln!(c, "exec = {ferry:?}")?;
        let log = format!("{dir_text}/executions.log");
        let kind = if file { "--file" } else { "--text" };
        writeln!(
            c,
            "args = [\"testbed-echo\", \"--log\", {log:?}, \"{kind}\", \"{{1}}\"]"
        )?;
        writeln!(c, "timeout = \"{}ms\"", settings.exec_timeout_ms.max(1))?;
        writeln!(c, "max_output = \"{}\"", settings.max_output)?;
        // The paper's servers take every call that comes.
        writeln!(c, "max_concurrent = 1000")?;
    }
    Ok(c)
}

impl Nodes {
    /// Writes each node's configuration under `work/n<i>/` and starts it in its namespace.
    pub fn start(
        net: &Net,
        specs: &[NodeSpec],
        work: &Path,
        settings: &NodeSettings,
    ) -> Result<Nodes> {
        let mut nodes = Nodes {
            settings_ferry: settings.ferry.clone(),
            dirs: Vec::new(),
            namespaces: Vec::new(),
            children: Vec::new(),
        };
        for spec in specs {
            let dir = work.join(format!("n{}", spec.index));
            if dir.exists() {
                fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
            }
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join("node.toml");
            fs::write(&path, config(spec, &dir, settings)?)
                .with_context(|| format!("writing {}", path.display()))?;
            let log = fs::File::create(dir.join("node.log"))?;
            let ns = net.ns(spec.index);
            let child = Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(&settings.ferry)
                .arg("node")
                .arg("-c")
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("starting node {} in {ns}", spec.index))?;
            nodes.children.push(child);
            nodes.dirs.push(dir);
            nodes.namespaces.push(ns);
        }
        Ok(nodes)
    }

    /// Node `i`'s directory (configuration, data, log, executions).
    pub fn dir(&self, i: usize) -> &Path {
        &self.dirs[i]
    }

    /// Waits until every node's API answers, for at most `within`.
    pub fn wait_ready(&mut self, within: Duration) -> Result<()> {
        let until = Instant::now() + within;
        for i in 0..self.dirs.len() {
            loop {
                if let Some(status) = self.children[i].try_wait()? {
                    bail!(
                        "node {i} exited ({status}) while starting; its log:\n{}",
                        self.log_tail(i)
                    );
                }
                if self.token(i).is_ok()
                    && self
                        .client(i, &["status"])
                        .is_ok_and(|o| o.status.success())
                {
                    break;
                }
                if Instant::now() > until {
                    bail!(
                        "node {i}'s API did not answer in {within:?}; its log:\n{}",
                        self.log_tail(i)
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// How many sessions node `i` has.
    pub fn sessions(&self, i: usize) -> Result<usize> {
        let out = self.client(i, &["peers", "--json"])?;
        if !out.status.success() {
            bail!(
                "ferry peers in node {i}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let peers: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(peers.as_array().map_or(0, |p| p.len()))
    }

    /// The last lines of node `i`'s log.
    pub fn log_tail(&self, i: usize) -> String {
        let log = fs::read_to_string(self.dirs[i].join("node.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn token(&self, i: usize) -> Result<String> {
        let path = self.dirs[i].join("data").join("api-token");
        Ok(fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .trim()
            .to_string())
    }

    /// A client command of node `i` (`ferry ARGS --api …`), ready to run in its namespace.
    pub fn command(&self, i: usize, args: &[&str]) -> Result<Command> {
        let mut cmd = Command::new("ip");
        let (command, rest) = args.split_first().context("no client command")?;
        // `--api` right after the command: a `--` among the arguments ends the options.
        cmd.args(["netns", "exec", &self.namespaces[i]])
            .arg(&self.settings_ferry)
            .arg(command)
            .args(["--api", API])
            .args(rest)
            .env("FERRY_API_TOKEN", self.token(i)?)
            .stdin(Stdio::null());
        Ok(cmd)
    }

    /// Runs a client command of node `i` to its end.
    pub fn client(&self, i: usize, args: &[&str]) -> Result<Output> {
        Ok(self.command(i, args)?.output()?)
    }

    /// The call ids node `i`'s echo ran, one per execution (empty if it serves none).
    pub fn executions(&self, i: usize) -> Vec<String> {
        fs::read_to_string(self.dirs[i].join("executions.log"))
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Stops every node: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        for child in &self.children {
            // `ip netns exec` execs the node, so the child is the node itself.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .output();
        }
        let until = Instant::now() + Duration::from_secs(5);
        for child in &mut self.children {
            while Instant::now() < until && child.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.stop();
    }
}
