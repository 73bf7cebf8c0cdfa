//! Discovery across implementations: `ferry node` and dtn7-rs's `dtnd` (0.21) in two network
//! namespaces joined by a veth pair, neither told of the other. Ferry hears dtnd's beacons
//! (224.0.0.26:3003), dials it and hands it a bundle; dtnd hears the beacons Ferry sends in its
//! format, lists Ferry as a peer with Ferry's TCPCL port, and dials Ferry to deliver a bundle.
//! And two Ferry nodes, one sending only dtn7-rs's beacons (`--beacon-format dtn7`), find each
//! other and exchange bundles.
//!
//! Needs root, `ip` (iproute2) and `dtnd` (found as `crates/daemon/tests/interop_dtn7.rs`
//! finds it: `$FERRY_DTN7_BIN`, `~/.cache/ferry-tools/dtn7/bin`, `PATH`). Without them the test
//! says so and passes, unless `FERRY_REQUIRE_NETNS=1` or `FERRY_REQUIRE_INTEROP=1` (set by CI),
//! where it fails (the second test needs no `dtnd`). Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::FERRY;
use common::netns::{Namespaces, ip};

fn dtn7_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("FERRY_DTN7_BIN") {
        candidates.push(dir.into());
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cache/ferry-tools/dtn7/bin"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.into_iter().find(|d| d.join("dtnd").is_file())
}

/// A process in a namespace, killed when dropped, with its log.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(mut cmd: Command, log: PathBuf) -> Process {
    let child = cmd
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .expect("starting a process in a namespace");
    Process { child, log }
}

/// `program args…` in namespace `ns`, to its end (each call here ends by itself within seconds;
/// the ones that wait take their own timeout).
fn run_in(ns: &str, program: &Path, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(program)
        .args(args)
        .output()
        .expect("running a command in a namespace")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Polls `check` every 200 ms until it holds, failing with `what` and `logs` after `within`.
fn wait_until(
    within: Duration,
    what: &str,
    logs: &dyn Fn() -> String,
    check: &mut dyn FnMut() -> bool,
) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} within {within:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn metric(out: &str, name: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics:\n{out}"))
}

#[test]
fn ferry_and_dtnd_find_each_other_by_beacons_and_exchange_bundles() {
    if common::netns::skipped() {
        return;
    }
    let Some(dtn7) = dtn7_bin() else {
        assert!(
            std::env::var_os("FERRY_REQUIRE_INTEROP").is_none(),
            "FERRY_REQUIRE_INTEROP is set but dtnd was not found (see .ci/run)"
        );
        eprintln!(
            "SKIPPED: dtnd not found; install it with `cargo install dtn7 --version 0.21.0 --locked --root ~/.cache/ferry-tools/dtn7`"
        );
        return;
    };
    let spaces = Namespaces::create("fd", &["f", "d"]);
    let (nf, nd) = (spaces.ns("f"), spaces.ns("d"));
    spaces.veth(("f", "fdf0", "10.78.1.1/24"), ("d", "fdd0", "10.78.1.2/24"));
    // dtnd joins 224.0.0.26 on "any" interface, which needs a route for the group (without one
    // it panics: "No such device"), as any network with a default route has. Ferry joins on each
    // interface and needs none: its namespace has no route but the link's.
    ip(&["-n", &nd, "route", "add", "default", "dev", "fdd0"]);

    let dir = std::env::temp_dir().join(format!("ferry-netns-dtn7-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("dtnd")).unwrap();
    std::fs::create_dir_all(dir.join("ferry")).unwrap();
    // Beacons every second on both sides, so discovery takes a second or two.
    let config = dir.join("ferry.toml");
    std::fs::write(&config, "[discovery]\nperiod = \"1s\"\n").unwrap();

    let mut cmd = spaces.command("d", &dtn7.join("dtnd").to_string_lossy());
    cmd.args(["-n", "d7", "-W"]).arg(dir.join("dtnd")).args([
        "-C",
        "tcp:port=4556",
        "-e",
        "incoming",
        "-i",
        "1s",
        "-j",
        "1s",
        "-d",
    ]);
    let dtnd = spawn(cmd, dir.join("dtnd.log"));
    let mut cmd = spaces.command("f", FERRY);
    cmd.args(["node", "-v", "--node-id", "dtn://ferry/", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("ferry"));
    let ferry = spawn(cmd, dir.join("ferry.log"));
    let logs = || format!("ferry log:\n{}\ndtnd log:\n{}", ferry.log(), dtnd.log());
    let ferry_cmd = |args: &[&str]| run_in(&nf, Path::new(FERRY), args);
    let dtn7_cmd = |program: &str, args: &[&str]| run_in(&nd, &dtn7.join(program), args);

    // (a) Ferry finds dtnd by its beacons, dials it, and a bundle for dtnd's endpoint arrives.
    wait_until(
        Duration::from_secs(15),
        "Ferry did not find dtnd",
        &logs,
        &mut || text(&ferry_cmd(&["peers", "--json"])).contains("dtn://d7/"),
    );
    let out = ferry_cmd(&["send", "dtn://d7/incoming", "found you by your beacon"]);
    assert!(out.status.success(), "ferry send: {}", text(&out));
    let received = dir.join("received");
    wait_until(
        Duration::from_secs(15),
        "dtnd did not receive Ferry's bundle",
        &logs,
        &mut || {
            let out = dtn7_cmd(
                "dtnrecv",
                &["-e", "incoming", "-o", &received.to_string_lossy()],
            );
            out.status.success()
                && std::fs::read(&received).is_ok_and(|b| b == b"found you by your beacon")
        },
    );
    // Its own beacons, looped back on the veth, are not a peer.
    let peers = text(&ferry_cmd(&["peers", "--json"]));
    assert!(
        !peers.contains("dtn://ferry/"),
        "Ferry lists itself: {peers}"
    );
    let metrics = text(&ferry_cmd(&["metrics"]));
    assert!(metric(&metrics, "ferry_dtn7_beacons_heard_total") >= 1);
    assert!(metric(&metrics, "ferry_dtn7_beacons_sent_total") >= 1);

    // (b) dtnd finds Ferry by the beacons Ferry sends in dtn7-rs's format: its peer list names
    // Ferry at its address with the TCPCL port, and a bundle dtnd sends to Ferry arrives in
    // Ferry's inbox (dtnd dials the port the beacon announced).
    let peers = || text(&dtn7_cmd("dtnquery", &["peers"]));
    wait_until(
        Duration::from_secs(15),
        "dtnd did not list Ferry as a peer",
        &|| format!("dtnquery peers:\n{}\n{}", peers(), logs()),
        &mut || peers().contains("//ferry/"),
    );
    let peers = peers();
    assert!(peers.contains("10.78.1.1"), "dtnd's peer entry: {peers}");
    assert!(peers.contains("4556"), "dtnd's peer entry: {peers}");
    assert!(peers.contains("Dynamic"), "dtnd's peer entry: {peers}");
    assert!(
        peers.contains(r#""63": "ferry""#),
        "dtnd's peer entry: {peers}"
    );
    let payload = dir.join("to-ferry");
    std::fs::write(&payload, "dtnd found you too").unwrap();
    let out = dtn7_cmd(
        "dtnsend",
        &[
            "-s",
            "dtn://d7/",
            "-r",
            "dtn://ferry/inbox",
            &payload.to_string_lossy(),
        ],
    );
    assert!(out.status.success(), "dtnsend: {}", text(&out));
    let out = ferry_cmd(&["recv", "inbox", "--count", "1", "--timeout", "15s"]);
    assert!(
        out.status.success(),
        "Ferry did not receive dtnd's bundle: {}\n{}",
        text(&out),
        logs()
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("dtnd found you too"),
        "{}",
        text(&out)
    );
    // dtnd dialled the port Ferry's beacon announced (it sends nothing back on the session
    // Ferry opened).
    assert!(
        dtnd.log().contains("Connecting to 10.78.1.1:4556"),
        "dtnd never dialled Ferry's announced port:\n{}",
        dtnd.log()
    );

    drop((ferry, dtnd));
    drop(spaces);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Ferry node told to announce itself only in dtn7-rs's format (`--beacon-format dtn7`: its
/// beacons then carry no Ferry mark, since it sends no Ferry beacon to go by) and one with the
/// default formats find each other, and a bundle goes each way. Needs root and iproute2 only.
#[test]
fn a_ferry_node_that_sends_only_dtn7_beacons_finds_and_is_found_by_a_default_one() {
    if common::netns::skipped() {
        return;
    }
    let spaces = Namespaces::create("fe", &["a", "b"]);
    spaces.veth(("a", "fea0", "10.78.2.1/24"), ("b", "feb0", "10.78.2.2/24"));
    let dir = std::env::temp_dir().join(format!("ferry-netns-mixed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("node.toml");
    std::fs::write(&config, "[discovery]\nperiod = \"1s\"\n").unwrap();
    let start = |name: &str, extra: &[&str]| {
        let mut cmd = spaces.command(name, FERRY);
        cmd.args([
            "node",
            "-v",
            "--node-id",
            &format!("dtn://{name}/"),
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join(name))
        .args(extra);
        spawn(cmd, dir.join(format!("{name}.log")))
    };
    let a = start("a", &["--beacon-format", "dtn7"]);
    let b = start("b", &[]);
    let logs = || format!("a log:\n{}\nb log:\n{}", a.log(), b.log());
    let (na, nb) = (spaces.ns("a"), spaces.ns("b"));
    let ferry_in = |ns: &str, args: &[&str]| run_in(ns, Path::new(FERRY), args);
    for (ns, peer) in [(&na, "dtn://b/"), (&nb, "dtn://a/")] {
        wait_until(
            Duration::from_secs(15),
            &format!("{ns} did not find {peer}"),
            &logs,
            &mut || text(&ferry_in(ns, &["peers", "--json"])).contains(peer),
        );
    }
    for (from, to, what) in [(&na, "b", "a to b"), (&nb, "a", "b to a")] {
        let out = ferry_in(from, &["send", &format!("dtn://{to}/inbox"), what]);
        assert!(out.status.success(), "ferry send: {}", text(&out));
    }
    for (ns, what) in [(&nb, "a to b"), (&na, "b to a")] {
        let out = ferry_in(ns, &["recv", "inbox", "--count", "1", "--timeout", "15s"]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(what),
            "{ns} did not receive {what:?}: {}\n{}",
            text(&out),
            logs()
        );
    }
    // A sent no Ferry beacon; B heard A's dtn7-rs beacons (unmarked), A ignored none of B's.
    // The exchange can be over before A's first beacon period ends (B's address coming up sent
    // one of B's beacons at once, and A dialled B), so A's and B's beacons are waited for.
    wait_until(
        Duration::from_secs(5),
        "A sent no dtn7-rs beacon",
        &logs,
        &mut || {
            metric(
                &text(&ferry_in(&na, &["metrics"])),
                "ferry_dtn7_beacons_sent_total",
            ) >= 1
        },
    );
    let metrics_a = text(&ferry_in(&na, &["metrics"]));
    assert_eq!(metric(&metrics_a, "ferry_beacons_sent_total"), 0);
    wait_until(
        Duration::from_secs(5),
        "B heard none of A's dtn7-rs beacons",
        &logs,
        &mut || {
            metric(
                &text(&ferry_in(&nb, &["metrics"])),
                "ferry_dtn7_beacons_heard_total",
            ) >= 1
        },
    );
    // B dialled A at A's first beacon, so all this may be over before A heard one of B's (marked,
    // but A goes by dtn7-rs's beacons alone, so they count).
    wait_until(
        Duration::from_secs(5),
        "A heard none of B's dtn7-rs beacons",
        &logs,
        &mut || {
            metric(
                &text(&ferry_in(&na, &["metrics"])),
                "ferry_dtn7_beacons_heard_total",
            ) >= 1
        },
    );
    drop((a, b));
    drop(spaces);
    let _ = std::fs::remove_dir_all(&dir);
}
