//! Executions supervised across crashes, with real `ferry node` processes: a node SIGKILLed
//! while its procedures run leaves them running (nothing can stop that), but the next start
//! kills what is left, tells each caller the truth (it ran and its result was lost, in the
//! words of what is known of the run) instead of `internal`, and runs an idempotent procedure
//! again; a graceful stop (SIGTERM) answers the callers of running executions at once. Every
//! wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::free_port;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// A directory of its own for each test, removed when the test passes.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ferry-exec-crash-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The procedure the tests run: `work.sh WATCH SECONDS` appends its pid to `WATCH/pids`,
/// sleeps, then leaves `WATCH/ended-<pid>` behind (so the test knows it ran to its end).
fn write_procedure(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("work.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\necho $$ >> \"$1/pids\"\nsleep \"$2\"\n: > \"$1/ended-$$\"\necho \"slept $2 s\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The `[rpc]` section serving `work` (not idempotent) and `again` (idempotent).
fn rpc_section(script: &Path) -> String {
    let mut toml = String::from("[rpc]\n");
    for (name, idempotent) in [("work", false), ("again", true)] {
        toml.push_str(&format!(
            "[[rpc.procedure]]\nname = \"{name}\"\nparams = [\"text\", \"int\"]\n\
             exec = \"{}\"\nmax_concurrent = 4\nidempotent = {idempotent}\n",
            script.display()
        ));
    }
    toml
}

/// A `ferry node` process, killed if the test ends without stopping it.
struct Node {
    child: Child,
    config: PathBuf,
    api: String,
    log: PathBuf,
}

impl Node {
    /// Writes the configuration of `dtn://{name}/` (serving the test procedures if `serve`,
    /// dialing the TCPCL port `peer`), starts it and waits until its API answers. Returns it and
    /// its TCPCL port.
    fn start(name: &str, dir: &Path, serve: bool, peer: Option<u16>) -> (Self, u16) {
        let api = format!("127.0.0.1:{}", free_port());
        let tcpcl = free_port();
        let mut toml = format!(
            "node_id = \"dtn://{name}/\"\n\
             data_dir = \"{}\"\n\
             [tcpcl]\nlisten = [\"127.0.0.1:{tcpcl}\"]\nkeepalive = \"1s\"\n\
             [udp]\nlisten = \"\"\n\
             [discovery]\nenabled = false\n\
             [api]\nlisten = \"{api}\"\n",
            dir.join(name).display(),
        );
        if let Some(p) = peer {
            toml.push_str(&format!("[[peers]]\naddress = \"127.0.0.1:{p}\"\n"));
        }
        if serve {
            toml.push_str(&rpc_section(&write_procedure(dir)));
        }
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, toml).unwrap();
        let log = dir.join(format!("{name}.log"));
        let node = Self::run(config, api, log);
        (node, tcpcl)
    }

    /// Starts the node of `config` (again), appending to its log.
    fn run(config: PathBuf, api: String, log: PathBuf) -> Self {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(FERRY)
            .arg("node")
            .arg("--config")
            .arg(&config)
            .env("XDG_CONFIG_HOME", config.parent().unwrap())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("starting ferry node");
        let node = Node {
            child,
            config,
            api,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !node.ferry(&["status"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "ferry node did not answer within 20 s:\n{}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    /// SIGKILL, as a crash or the OOM killer would; then the same node starts again.
    fn crash_and_restart(mut self) -> Self {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        let (config, api, log) = (self.config.clone(), self.api.clone(), self.log.clone());
        drop(self);
        Self::run(config, api, log)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn ferry(&self, args: &[&str]) -> Output {
        Command::new(FERRY)
            .args(args)
            .args(["--api", &self.api])
            .output()
            .expect("running ferry")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(
            out.status.success(),
            "ferry {} failed: {}\nnode log:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Makes a detached call and returns its id.
    fn call(&self, target: &str, procedure: &str, watch: &Path, seconds: u32) -> String {
        let id = self.ok(&[
            "call",
            target,
            procedure,
            watch.to_str().unwrap(),
            &seconds.to_string(),
            "--deadline",
            "5m",
            "--detach",
        ]);
        id.trim().to_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory the procedure reports into.
fn watch_dir(dir: &Path, name: &str) -> PathBuf {
    let watch = dir.join(name);
    std::fs::create_dir_all(&watch).unwrap();
    watch
}

/// The pids the procedure appended to `watch/pids`, waiting (at most 20 s) until there are
/// `at_least`.
fn pids(watch: &Path, at_least: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(watch.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= at_least {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "the procedure in {} did not start",
            watch.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process runs (a zombie does not: it ended and waits to be reaped).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ferry wait ID` on `node`: its exit success, stdout and stderr.
fn wait_for(node: &Node, id: &str) -> (bool, String, String) {
    let out = node.ferry(&["wait", id, "--timeout", "30s"]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn executions_cut_off_by_a_crash_are_killed_at_restart_and_their_callers_told_what_happened() {
    let dir = TempDir::new("crash");
    let (solo, _) = Node::start("solo", &dir.0, true, None);
    // Three calls of the node to itself (the same admission, execution and result path as a
    // remote call): one that is still running at the restart, one that ends while the node is
    // down, and one of an idempotent procedure.
    let (long, short, rerun) = (
        watch_dir(&dir.0, "long"),
        watch_dir(&dir.0, "short"),
        watch_dir(&dir.0, "rerun"),
    );
    let long_id = solo.call("solo", "work", &long, 30);
    let short_id = solo.call("solo", "work", &short, 2);
    let rerun_id = solo.call("solo", "again", &rerun, 2);
    let (long_pid, short_pid, first_rerun) =
        (pids(&long, 1)[0], pids(&short, 1)[0], pids(&rerun, 1)[0]);

    let solo = {
        // The crash: what ran under the daemon runs on, reparented and unsupervised.
        let mut solo = solo;
        solo.child.kill().unwrap();
        solo.child.wait().unwrap();
        assert!(
            alive(long_pid) && alive(short_pid),
            "the procedures outlive the daemon"
        );
        // The short one ends while the node is down; it did its work.
        wait_until("the short procedure ends", Duration::from_secs(10), || {
            short.join(format!("ended-{short_pid}")).exists()
        });
        let (config, api, log) = (solo.config.clone(), solo.api.clone(), solo.log.clone());
        drop(solo);
        Node::run(config, api, log)
    };
    // The start killed what the previous run left running, before it answered anything.
    assert!(!alive(long_pid), "the long procedure outlived the restart");
    assert!(
        !alive(first_rerun),
        "the first run of the idempotent one outlived the restart"
    );
    assert!(!long.join(format!("ended-{long_pid}")).exists());

    let (ok, _, err) = wait_for(&solo, &long_id);
    assert!(!ok, "{err}");
    assert!(err.contains("result_lost"), "{err}");
    assert!(
        err.contains("the procedure ran")
            && err.contains("still running when the server restarted, and was killed"),
        "{err}"
    );
    let (ok, _, err) = wait_for(&solo, &short_id);
    assert!(!ok, "{err}");
    assert!(err.contains("result_lost"), "{err}");
    assert!(err.contains("ended while the server was down"), "{err}");
    // Neither was run again.
    assert_eq!(pids(&long, 1).len(), 1);
    assert_eq!(pids(&short, 1).len(), 1);

    // The idempotent procedure ran again, once, and its caller has the result.
    let (ok, out, err) = wait_for(&solo, &rerun_id);
    assert!(ok, "{err}\n{}", solo.log());
    assert_eq!(out, "slept 2 s\n");
    let runs = pids(&rerun, 2);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(rerun.join(format!("ended-{}", runs[1])).exists());

    // Nothing is left to recover: a second crash and restart answers nothing anew and leaves
    // no record behind. (A caller on this node hears of a result before its commit, which
    // follows within 10 ms: a crash before it would lose that result, and the procedure being
    // idempotent, run it again.)
    std::thread::sleep(Duration::from_millis(300));
    let solo = solo.crash_and_restart();
    let records = dir.0.join("solo").join("executions");
    wait_until(
        "the execution records are removed",
        Duration::from_secs(10),
        || std::fs::read_dir(&records).unwrap().next().is_none(),
    );
    let (ok, out, _) = wait_for(&solo, &rerun_id);
    assert!(ok);
    assert_eq!(out, "slept 2 s\n");
    assert_eq!(pids(&rerun, 2), runs, "run a third time");
}

#[test]
fn a_graceful_stop_answers_the_callers_of_running_executions_at_once() {
    let dir = TempDir::new("stop");
    let (bravo, port) = Node::start("bravo", &dir.0, true, None);
    let (alpha, _) = Node::start("alpha", &dir.0, false, Some(port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&alpha.ferry(&["peers", "--json"]).stdout).contains("bravo") {
        assert!(Instant::now() < deadline, "bravo never became a neighbour");
        std::thread::sleep(Duration::from_millis(100));
    }
    let watch = watch_dir(&dir.0, "watch");
    let id = alpha.call("dtn://bravo/", "work", &watch, 60);
    let pid = pids(&watch, 1)[0];

    let mut bravo = bravo;
    let stopped = Instant::now();
    let status = common::terminate(&mut bravo.child).expect("ferry node did not stop on SIGTERM");
    assert!(status.success(), "ferry node exited with {status}");
    assert!(!alive(pid), "the procedure outlived a graceful stop");
    let (ok, _, err) = wait_for(&alpha, &id);
    let answered = stopped.elapsed();
    assert!(!ok, "{err}");
    assert!(
        err.contains("server_stopped"),
        "{err}\nbravo:\n{}",
        bravo.log()
    );
    // At once, not at the call's deadline (5 minutes) or the dtn timers (90 s).
    assert!(
        answered < Duration::from_secs(10),
        "answered after {answered:?}"
    );
    eprintln!("graceful stop answered the caller {answered:?} after SIGTERM");
}
