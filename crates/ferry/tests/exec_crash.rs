//! Executions supervised across crashes, with real `ferry node` processes: a node SIGKILLed
//! while its procedures run leaves them running (nothing can stop that), but the next start
//! kills what is left, tells each caller the truth (it ran and its result was lost, in the
//! words of what is known of the run) instead of `internal`, and runs an idempotent procedure
//! again; a graceful stop (SIGTERM) answers the callers of running executions at once; a power
//! cut (`ferry-powercut`) while a procedure runs never runs it twice. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::{Node, TestDir};

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

/// `dtn://{name}/` (serving the test procedures if `serve`, with a session to the TCPCL port
/// `peer`), logging at info (what the supervisor did is in the log when a test fails).
fn start(dir: &TestDir, name: &str, serve: bool, peer: Option<u16>) -> Node {
    let mut node = Node::build(dir.path(), name)
        .keepalive("1s")
        .log_level("info");
    if let Some(p) = peer {
        node = node.peer(p);
    }
    if serve {
        node = node.config(&rpc_section(&write_procedure(dir.path())));
    }
    node.start()
}

/// Makes a detached call of `procedure` on `node` and returns its id.
fn call(node: &Node, target: &str, procedure: &str, watch: &Path, seconds: u32) -> String {
    let id = node.ok(&[
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
    let dir = TestDir::new("exec-crash-crash");
    let solo = start(&dir, "solo", true, None);
    // Three calls of the node to itself (the same admission, execution and result path as a
    // remote call): one that is still running at the restart, one that ends while the node is
    // down, and one of an idempotent procedure.
    let (long, short, rerun) = (
        watch_dir(dir.path(), "long"),
        watch_dir(dir.path(), "short"),
        watch_dir(dir.path(), "rerun"),
    );
    let long_id = call(&solo, "solo", "work", &long, 30);
    let short_id = call(&solo, "solo", "work", &short, 2);
    let rerun_id = call(&solo, "solo", "again", &rerun, 2);
    let (long_pid, short_pid, first_rerun) =
        (pids(&long, 1)[0], pids(&short, 1)[0], pids(&rerun, 1)[0]);

    // The crash: what ran under the daemon runs on, reparented and unsupervised.
    let solo = solo.crash_and_restart(|| {
        assert!(
            alive(long_pid) && alive(short_pid),
            "the procedures outlive the daemon"
        );
        // The short one ends while the node is down; it did its work.
        wait_until("the short procedure ends", Duration::from_secs(10), || {
            short.join(format!("ended-{short_pid}")).exists()
        });
    });
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
    let solo = solo.crash_and_restart(|| {});
    let records = solo.data_dir().join("executions");
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
    let dir = TestDir::new("exec-crash-stop");
    let mut bravo = start(&dir, "bravo", true, None);
    let alpha = start(&dir, "alpha", false, Some(bravo.tcpcl));
    alpha.wait_for_peer("dtn://bravo/");
    let watch = watch_dir(dir.path(), "watch");
    let id = call(&alpha, "dtn://bravo/", "work", &watch, 60);
    let pid = pids(&watch, 1)[0];

    let stopped = Instant::now();
    let status = bravo.terminate();
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

/// Whether this is root with `/dev/fuse`, as a power-loss mount needs. Without them a power-cut
/// test says so and passes, unless `FERRY_REQUIRE_FUSE=1` (set by CI), where it fails.
fn power_cut_possible() -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next())
            == Some("0")
    });
    if root && Path::new("/dev/fuse").exists() {
        return true;
    }
    assert!(
        std::env::var_os("FERRY_REQUIRE_FUSE").is_none(),
        "FERRY_REQUIRE_FUSE is set but this is not root with /dev/fuse"
    );
    eprintln!("SKIPPED: needs root and /dev/fuse");
    false
}

/// A power cut (`ferry-powercut`: every write no fsync made durable is lost) while a procedure
/// runs, on the node's first start: the call was durable before the procedure started, and so
/// must be the record that it started, or the restarted node finds a call that (by its records)
/// never ran and runs it a second time. The record and its directory were synced, but the
/// directory's own name in the data directory was once made after the start's last sync of that
/// directory: the power cut took the whole `executions` directory, and the call ran twice.
#[test]
fn a_power_cut_while_a_procedure_runs_never_runs_it_twice() {
    if !power_cut_possible() {
        return;
    }
    let dir = TestDir::new("exec-crash-power");
    let mount = dir.path().join("disk");
    std::fs::create_dir_all(&mount).unwrap();
    let disk =
        ferry_powercut::PowerCut::mount(&mount).expect("mounting the power-loss file system");
    let solo = Node::build(dir.path(), "solo")
        .keepalive("1s")
        .log_level("info")
        .data_dir(&mount.join("solo"))
        .config(&rpc_section(&write_procedure(dir.path())))
        .start();
    // The watch directory is on the ordinary disk: the power cut cannot hide a second run.
    let watch = watch_dir(dir.path(), "watch");
    let id = call(&solo, "solo", "work", &watch, 30);
    let pid = pids(&watch, 1)[0];

    // The power cut: the node and its procedure die at once (the procedure leads its own
    // process group), then every unsynced write is gone; then the node starts again.
    let solo = solo.crash_and_restart(|| {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .status();
        wait_until("the procedure dies", Duration::from_secs(5), || !alive(pid));
        disk.cut();
        eprintln!("power cut: {:?}", disk.counters());
    });
    let (ok, _, err) = wait_for(&solo, &id);
    assert!(!ok, "{err}");
    assert!(err.contains("result_lost"), "{err}\n{}", solo.log());
    assert_eq!(
        pids(&watch, 1),
        vec![pid],
        "the call ran again after the power cut"
    );
    // The node stops before its mount goes (a mount with open files cannot be unmounted).
    solo.stop();
    drop(disk);
}
