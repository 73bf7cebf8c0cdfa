//! A `ferry node` child process as the CLI tests drive it, and the directory it lives in.
//!
//! Everything of one node is under the test's directory: its configuration `<name>.toml`, its
//! data directory `<name>/`, its log `<name>.log` (stderr, appended to across restarts), and,
//! through `XDG_CONFIG_HOME` and `XDG_RUNTIME_DIR` pointing there, the copy of its API token
//! the client commands find: no file of the user's is read and none is left behind. Every
//! address is on 127.0.0.1, discovery is off unless asked for, and every wait is bounded.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{free_port, terminate};

/// The `ferry` binary under test.
pub(crate) const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// How long a node may take to answer its API after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A test's own directory, made empty at the start and removed when the test passes (kept when
/// it fails, for the logs).
pub(crate) struct TestDir(PathBuf);

impl TestDir {
    /// `ferry-<tag>-<pid>-<n>` under the system's temporary directory.
    pub(crate) fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ferry-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// How to start a node: [`Node::build`], the options, then [`Builder::start`].
#[must_use]
pub(crate) struct Builder {
    dir: PathBuf,
    name: String,
    peers: Vec<u16>,
    udp: bool,
    discovery: bool,
    keepalive: Option<String>,
    log_level: Option<String>,
    config: String,
    data_dir: Option<PathBuf>,
}

impl Builder {
    /// A static TCPCL peer on 127.0.0.1:`port` (repeat for several).
    pub(crate) fn peer(mut self, port: u16) -> Self {
        self.peers.push(port);
        self
    }

    /// The UDP convergence layer on a port of 127.0.0.1 of its own (default: none).
    pub(crate) fn udp(mut self) -> Self {
        self.udp = true;
        self
    }

    /// Leaves discovery as the configuration says (default: off, `--no-discovery`); the
    /// configuration must then keep it on loopback.
    pub(crate) fn discovery(mut self) -> Self {
        self.discovery = true;
        self
    }

    /// The TCPCL keepalive interval offered, such as `"1s"` (default: the node's).
    pub(crate) fn keepalive(mut self, interval: &str) -> Self {
        self.keepalive = Some(interval.to_owned());
        self
    }

    /// `RUST_LOG` for the node (default: the node's own, warnings only).
    pub(crate) fn log_level(mut self, level: &str) -> Self {
        self.log_level = Some(level.to_owned());
        self
    }

    /// Its data directory (default: `<name>/` in the test's directory), such as one on a
    /// power-loss mount (`ferry-powercut`).
    pub(crate) fn data_dir(mut self, path: &Path) -> Self {
        self.data_dir = Some(path.to_owned());
        self
    }

    /// TOML appended to the configuration file, after `node_id` and `data_dir` (tables such
    /// as `[rpc]` or `[tcpcl]`: the addresses, peers, keepalive and discovery are flags, so
    /// any table may be given here).
    pub(crate) fn config(mut self, toml: &str) -> Self {
        self.config.push_str(toml);
        self.config.push('\n');
        self
    }

    /// Writes the configuration, starts the node and waits until its API answers.
    pub(crate) fn start(self) -> Node {
        let config = self.dir.join(format!("{}.toml", self.name));
        let data_dir = self.data_dir.unwrap_or_else(|| self.dir.join(&self.name));
        std::fs::write(
            &config,
            format!(
                "node_id = \"dtn://{}/\"\ndata_dir = {:?}\n{}",
                self.name, data_dir, self.config
            ),
        )
        .unwrap();
        let mut args = vec!["node".to_owned(), "--config".to_owned()];
        args.push(config.to_str().unwrap().to_owned());
        let tcpcl = free_port();
        let api = format!("127.0.0.1:{}", free_port());
        let udp = self.udp.then(free_port);
        args.extend(["--tcpcl".into(), format!("127.0.0.1:{tcpcl}")]);
        args.extend(["--api".into(), api.clone()]);
        args.extend([
            "--udp".into(),
            udp.map_or_else(String::new, |p| format!("127.0.0.1:{p}")),
        ]);
        if !self.discovery {
            args.push("--no-discovery".into());
        }
        if let Some(k) = &self.keepalive {
            args.extend(["--keepalive".into(), k.clone()]);
        }
        for p in &self.peers {
            args.extend(["--peer".into(), format!("127.0.0.1:{p}")]);
        }
        let log = self.dir.join(format!("{}.log", self.name));
        let mut node = Node {
            child: None,
            name: self.name,
            dir: self.dir,
            data_dir,
            args,
            log_level: self.log_level,
            api,
            tcpcl,
            udp,
            log,
        };
        node.spawn();
        node
    }
}

/// A `ferry node` process, killed if the test ends without stopping it.
pub(crate) struct Node {
    /// The running process (`None` only between a stop and the next start).
    child: Option<Child>,
    /// Its name: the node id is `dtn://<name>/`.
    pub(crate) name: String,
    dir: PathBuf,
    data_dir: PathBuf,
    /// `ferry` and its arguments, to start it again the same way.
    args: Vec<String>,
    log_level: Option<String>,
    /// Its API's address, `127.0.0.1:<port>`.
    pub(crate) api: String,
    /// Its TCPCL port on 127.0.0.1.
    pub(crate) tcpcl: u16,
    /// Its UDP port on 127.0.0.1, if it has the UDP convergence layer.
    pub(crate) udp: Option<u16>,
    log: PathBuf,
}

impl Node {
    /// A node `dtn://<name>/` living in `dir`.
    pub(crate) fn build(dir: &Path, name: &str) -> Builder {
        Builder {
            dir: dir.to_owned(),
            name: name.to_owned(),
            peers: Vec::new(),
            udp: false,
            discovery: false,
            keepalive: None,
            log_level: None,
            config: String::new(),
            data_dir: None,
        }
    }

    /// Starts the process and waits (bounded) until its API answers.
    fn spawn(&mut self) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(FERRY);
        cmd.args(&self.args)
            // No configuration file or token of the user's may leak in, nor out.
            .env("XDG_CONFIG_HOME", &self.dir)
            .env("XDG_RUNTIME_DIR", &self.dir)
            .stdout(Stdio::null())
            .stderr(stderr);
        if let Some(level) = &self.log_level {
            cmd.env("RUST_LOG", level);
        }
        self.child = Some(cmd.spawn().expect("starting ferry node"));
        self.wait_until("its API answers", START_TIMEOUT, || {
            self.ferry(&["status"]).status.success()
        });
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the node runs")
    }

    /// The process id of the running node.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("the node runs").id()
    }

    /// Its data directory.
    pub(crate) fn data_dir(&self) -> PathBuf {
        self.data_dir.clone()
    }

    /// Its log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `ferry ARGS --api <this node>`, as the node's user would run it, not yet run.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(FERRY);
        cmd.args(args)
            .args(["--api", &self.api])
            .env("XDG_RUNTIME_DIR", &self.dir);
        cmd
    }

    /// Runs `ferry ARGS --api …` to its end (each command ends within its own bounds:
    /// `--timeout`, `--deadline`, or at once).
    pub(crate) fn ferry(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("running ferry")
    }

    /// Like [`Node::ferry`], asserting success (the node's log in the message if not); its
    /// stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(
            out.status.success(),
            "ferry {} failed: {}\nlog of {}:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.name,
            self.log()
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Like [`Node::ferry`], asserting failure; its stderr.
    pub(crate) fn fails(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(
            !out.status.success(),
            "ferry {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `fails`, and checks the exit status (the kinds are in `ferry --help`).
    pub(crate) fn fails_with(&self, status: i32, args: &[&str]) -> String {
        let out = self.ferry(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(status),
            "ferry {}: {err}",
            args.join(" ")
        );
        err
    }

    /// The value of `ferry_<name>` in its `/metrics`.
    pub(crate) fn metric(&self, name: &str) -> u64 {
        let text = self.ok(&["metrics"]);
        let wanted = format!("ferry_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&wanted)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// The process's resident and peak resident memory in KiB (VmRSS, VmHWM).
    pub(crate) fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap()
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Polls `done` until it holds, failing (with the node's log) after `limit`.
    pub(crate) fn wait_until(&self, what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "not within {limit:?}: {what}\nlog of {}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (at most 20 s) until `peer` (a node id) is a neighbour.
    pub(crate) fn wait_for_peer(&self, peer: &str) {
        self.wait_until(
            &format!("{peer} is a neighbour"),
            Duration::from_secs(20),
            || String::from_utf8_lossy(&self.ferry(&["peers", "--json"]).stdout).contains(peer),
        );
    }

    /// SIGTERM, as an init system would stop it, and its exit status (within 10 s).
    pub(crate) fn terminate(&mut self) -> ExitStatus {
        let status = terminate(self.child()).expect("ferry node did not stop on SIGTERM");
        self.child = None;
        status
    }

    /// Stops it gracefully; it must exit successfully.
    pub(crate) fn stop(mut self) {
        let status = self.terminate();
        assert!(status.success(), "ferry node exited with {status}");
    }

    /// Stops it gracefully, runs `between`, and starts it again the same way.
    pub(crate) fn restart(mut self, between: impl FnOnce()) -> Self {
        let status = self.terminate();
        assert!(status.success(), "ferry node exited with {status}");
        between();
        self.spawn();
        self
    }

    /// SIGKILL, as a crash or the OOM killer would; runs `between`; then starts it again the
    /// same way.
    pub(crate) fn crash_and_restart(mut self, between: impl FnOnce()) -> Self {
        let child = self.child();
        child.kill().unwrap();
        child.wait().unwrap();
        self.child = None;
        between();
        self.spawn();
        self
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
