//! The RPC commands against a real `ferry node` on loopback serving the example procedures
//! (`examples/`), driven only through the CLI as a user would: the node calls itself (a local
//! call runs the same admission, execution and result path as a remote one). Discovery and UDP
//! are off, every address is 127.0.0.1, and every wait is bounded.

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
            std::env::temp_dir().join(format!("ferry-call-cli-{name}-{}", std::process::id()));
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

/// The `[rpc]` section of examples/node.toml, its `exec` paths made absolute.
fn example_rpc_section() -> String {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let examples = examples.canonicalize().expect("the examples directory");
    let text = std::fs::read_to_string(examples.join("node.toml")).unwrap();
    let start = text
        .find("\n[rpc]")
        .expect("examples/node.toml has an [rpc] section");
    text[start..].replace("exec = \"", &format!("exec = \"{}/", examples.display()))
}

/// A `ferry node` process, killed if the test ends without stopping it.
struct Node {
    child: Child,
    api: String,
    tcpcl: u16,
    log: PathBuf,
    config: PathBuf,
}

impl Node {
    /// Starts `dtn://{name}/` serving the examples and waits (at most 20 s) until its API
    /// answers.
    fn start(name: &str, dir: &Path) -> Self {
        Self::start_with(name, dir, true, None)
    }

    /// Starts `dtn://{name}/`, serving the examples if `serve`, dialing the TCPCL port `peer`.
    fn start_with(name: &str, dir: &Path, serve: bool, peer: Option<u16>) -> Self {
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
            toml.push_str(&example_rpc_section());
        }
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, toml).unwrap();
        let log = dir.join(format!("{name}.log"));
        Self::spawn(config, api, tcpcl, log)
    }

    /// Runs `ferry node` with the configuration file `config` and waits (at most 20 s) until
    /// its API answers.
    fn spawn(config: PathBuf, api: String, tcpcl: u16, log: PathBuf) -> Self {
        let dir = config.parent().unwrap().to_owned();
        let child = Command::new(FERRY)
            .arg("node")
            .arg("--config")
            .arg(&config)
            // No configuration file of the user's may leak in.
            .env("XDG_CONFIG_HOME", &dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting ferry node");
        let node = Node {
            child,
            api,
            tcpcl,
            log,
            config,
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

    /// Waits (at most 20 s) until `peer` is a neighbour.
    fn wait_for_peer(&self, peer: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !String::from_utf8_lossy(&self.ferry(&["peers", "--json"]).stdout).contains(peer) {
            assert!(Instant::now() < deadline, "{peer} never became a neighbour");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(FERRY);
        cmd.args(args).args(["--api", &self.api]);
        cmd
    }

    /// Runs `ferry ARGS --api …` to its end (every command here ends within its own bounds:
    /// `--deadline`, `--timeout`, or a call that finishes at once).
    fn ferry(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("running ferry")
    }

    /// Like [`Node::ferry`], asserting success; its stdout.
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

    /// Like [`Node::ferry`], asserting failure; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.ferry(args);
        assert!(
            !out.status.success(),
            "ferry {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Stops the node, runs `between`, and starts it again with the same configuration.
    fn restart(mut self, between: impl FnOnce()) -> Self {
        let status =
            common::terminate(&mut self.child).expect("ferry node did not stop on SIGTERM");
        assert!(status.success(), "ferry node exited with {status}");
        between();
        let (config, api, log) = (self.config.clone(), self.api.clone(), self.log.clone());
        Self::spawn(config, api, self.tcpcl, log)
    }

    fn stop(mut self) {
        let status =
            common::terminate(&mut self.child).expect("ferry node did not stop on SIGTERM");
        assert!(status.success(), "ferry node exited with {status}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_call_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[test]
fn a_call_prints_its_value_exactly_and_writes_its_files() {
    let dir = TempDir::new("values");
    let solo = Node::start("solo", &dir.0);

    // Text goes as it is and comes back byte for byte, no newline added in a pipe.
    let out = solo.ferry(&["call", "solo", "echo", "a b"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"a b");
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("+0.000s  called dtn://solo/"),
        "{progress}"
    );
    assert!(progress.contains("succeeded"), "{progress}");
    // Typed prefixes and @@ reach the procedure as the text they stand for.
    assert_eq!(
        solo.ok(&["call", "dtn://solo/", "echo", "text:int:3"]),
        "int:3"
    );
    assert_eq!(solo.ok(&["call", "solo", "echo", "@@x", "--quiet"]), "@x");
    let out = solo.ferry(&["call", "solo", "echo", "quiet", "-q"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --timeline: the whole timeline once, at the end, instead of line by line.
    let out = solo.ferry(&["call", "solo", "echo", "t", "--timeline"]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        progress.matches("called dtn://solo/").count(),
        1,
        "{progress}"
    );
    assert!(
        progress.trim_end().ends_with("succeeded: done"),
        "{progress}"
    );

    // Text stands for the declared int parameters of sum.
    assert_eq!(solo.ok(&["call", "solo", "sum", "2", "3"]), "5\n");
    assert_eq!(solo.ok(&["call", "solo", "sum", "int:-7", "3"]), "-4\n");

    // A file result goes to --out, not stdout; an existing one is not overwritten.
    let out_dir = dir.0.join("pictures");
    let value = solo.ok(&[
        "call",
        "solo",
        "photo",
        "8",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(value.starts_with("photo.pgm: 8x8 greyscale"), "{value}");
    let picture = std::fs::read(out_dir.join("photo.pgm")).unwrap();
    assert!(picture.starts_with(b"P2\n8 8\n255\n"), "{picture:?}");
    std::fs::write(out_dir.join("photo.pgm"), b"mine").unwrap();
    let err = solo.fails(&[
        "call",
        "solo",
        "photo",
        "9",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(err.contains("photo.pgm exists; not overwritten"), "{err}");
    assert_eq!(std::fs::read(out_dir.join("photo.pgm")).unwrap(), b"mine");
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    solo.ok(&[
        "call",
        "solo",
        "photo",
        "9",
        "--out",
        out_dir.to_str().unwrap(),
        "--force",
    ]);
    let picture = std::fs::read(out_dir.join("photo.pgm")).unwrap();
    assert!(picture.starts_with(b"P2\n9 9\n255\n"), "{picture:?}");

    // --json prints the call as the API has it, instead of the value.
    let json = solo.ok(&["call", "solo", "echo", "hi", "--json"]);
    let call: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(call["state"], "succeeded");
    assert_eq!(call["replies"][0]["value_text"], "hi");
    solo.stop();
}

#[test]
fn a_detached_call_is_waited_for_listed_and_shown_later() {
    let dir = TempDir::new("detach");
    let solo = Node::start("solo", &dir.0);

    let id = solo.ok(&["call", "solo", "slow", "1", "--detach"]);
    let id = id.trim_end_matches('\n');
    assert!(is_call_id(id), "{id:?}");
    // Still running: `result` says so and fails.
    let err = solo.fails(&["result", id]);
    assert!(
        err.contains("still waiting") && err.contains(&format!("ferry wait {id}")),
        "{err}"
    );
    let listed = solo.ok(&["calls"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("slow") && row.contains("dtn://solo/"), "{row}");
    assert!(listed.starts_with("ID "), "{listed}");

    let out = solo.ok(&["wait", id, "--timeout", "20s"]);
    assert!(out.starts_with("slept 1 s on "), "{out:?}");

    // Afterwards: listed as succeeded, its result and timeline still there (by a prefix too).
    let row = solo.ok(&["calls"]);
    assert!(
        row.lines()
            .any(|l| l.starts_with(id) && l.contains("succeeded")),
        "{row}"
    );
    let json: serde_json::Value = serde_json::from_str(&solo.ok(&["calls", "--json"])).unwrap();
    assert!(json.as_array().unwrap().iter().any(|c| c["id"] == id));
    let out = solo.ferry(&["result", &id[..8], "--timeline"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.starts_with(b"slept 1 s on "));
    let timeline = String::from_utf8_lossy(&out.stderr);
    let first = timeline.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("+0.000s  called dtn://solo/"),
        "{timeline}"
    );
    assert!(
        timeline
            .lines()
            .last()
            .unwrap_or_default()
            .contains("succeeded"),
        "{timeline}"
    );
    let ms: Vec<&str> = timeline
        .lines()
        .map(|l| l.split_once("s  ").unwrap().0)
        .collect();
    assert!(ms.iter().all(|t| t.starts_with('+')), "{timeline}");

    // A wait with a bound that passes leaves the call going and says how to wait again.
    let id = solo.ok(&["call", "solo", "slow", "30", "--detach"]);
    let id = id.trim();
    let started = Instant::now();
    let err = solo.fails(&["wait", id, "--timeout", "1s"]);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        err.contains("still waiting after 1s") && err.contains("the call goes on"),
        "{err}"
    );
    // Cancelling it: the new state, then waiting for it fails as cancelled.
    let out = solo.ok(&["cancel", id]);
    assert_eq!(out, format!("call {id}: cancelled\n"));
    let err = solo.fails(&["wait", id, "--timeout", "10s"]);
    assert!(err.contains("the call was cancelled"), "{err}");
    let out = solo.ok(&["cancel", id]);
    assert!(out.contains("already ended"), "{out}");
    let err = solo.fails(&["result", "ffffffffffffffffffffffffffffffff"]);
    assert!(err.contains("this node has no call"), "{err}");
    solo.stop();
}

#[test]
fn failures_name_the_code_the_detail_and_stderr() {
    let dir = TempDir::new("failures");
    let solo = Node::start("solo", &dir.0);

    let err = solo.fails(&["call", "solo", "photo", "0"]);
    assert!(err.contains("execution_failed"), "{err}");
    assert!(err.contains("exited with status 2"), "{err}");
    assert!(
        err.contains("photo: SIZE must be 1 to 1000, not 0"),
        "{err}"
    );

    let err = solo.fails(&["call", "solo", "teleport"]);
    assert!(
        err.contains("dtn://solo/ refused the call: not_offered"),
        "{err}"
    );

    let err = solo.fails(&["call", "solo", "echo", "x", "--require", "has(nonesuch)"]);
    assert!(
        err.contains("refused the call: predicate_failed: call requirement: has(nonesuch)"),
        "{err}"
    );

    // A requirement the node cannot parse is refused when the call is made.
    let err = solo.fails(&["call", "solo", "echo", "x", "--require", "battery >>= 5"]);
    assert!(err.contains("making the call"), "{err}");

    // No server: an any-mode call expires at its deadline.
    let started = Instant::now();
    let err = solo.fails(&["call", "any", "echo", "x", "--deadline", "2s"]);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(err.contains("no result before the deadline"), "{err}");
    solo.stop();
}

#[test]
fn bad_arguments_fail_before_the_node_is_contacted() {
    let dir = TempDir::new("args");
    // Nothing listens at this address: an attempt to contact it would say so.
    let nobody = format!("127.0.0.1:{}", free_port());
    let run = |args: &[&str]| {
        let out = Command::new(FERRY)
            .args(args)
            .args(["--api", &nobody])
            .output()
            .unwrap();
        assert!(!out.status.success(), "ferry {args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !err.contains("cannot reach"),
            "{args:?} contacted the node: {err}"
        );
        err
    };
    let err = run(&["call", "bravo", "echo", "hi", "--transport", "pigeon"]);
    assert!(err.contains("pigeon") && err.contains("datagram"), "{err}");
    let missing = dir.0.join("no-such-photo.jpg");
    let err = run(&[
        "call",
        "bravo",
        "resize",
        &format!("@{}", missing.display()),
    ]);
    assert!(
        err.contains("parameter 1: reading") && err.contains("no-such-photo.jpg"),
        "{err}"
    );
    let err = run(&[
        "call",
        "bravo",
        "resize",
        "--file",
        missing.to_str().unwrap(),
    ]);
    assert!(err.contains("no-such-photo.jpg"), "{err}");
    let err = run(&["call", "bravo", "sum", "int:two", "3"]);
    assert!(
        err.contains("parameter 1") && err.contains("not a 64-bit integer"),
        "{err}"
    );
    let err = run(&["call", "bravo", "echo", "--deadline", "soon"]);
    assert!(err.contains("--deadline"), "{err}");
    let err = run(&["call", "dtn:", "echo"]);
    assert!(err.contains("not a node id"), "{err}");
    let err = run(&["wait", "not-hex"]);
    assert!(err.contains("is not a call id"), "{err}");
    // The control: with valid arguments the command does try the address.
    let out = Command::new(FERRY)
        .args(["call", "bravo", "echo", "hi", "--api", &nobody])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
}

#[test]
fn procedures_are_listed() {
    let dir = TempDir::new("procedures");
    let solo = Node::start("solo", &dir.0);
    let table = solo.ok(&["procedures"]);
    for name in ["echo ", "null ", "photo ", "slow ", "sum "] {
        assert!(
            table.lines().any(|l| l.starts_with(name)),
            "{name}: {table}"
        );
    }
    let sum = table.lines().find(|l| l.starts_with("sum ")).unwrap();
    assert!(
        sum.contains("int int") && sum.contains("Adds two integers."),
        "{sum}"
    );
    let null = table.lines().find(|l| l.starts_with("null ")).unwrap();
    assert!(
        null.contains("no limit") && null.contains("built in"),
        "{null}"
    );
    let photo = table.lines().find(|l| l.starts_with("photo ")).unwrap();
    assert!(photo.contains("has(camera)"), "{photo}");
    let json: serde_json::Value =
        serde_json::from_str(&solo.ok(&["procedures", "--json"])).unwrap();
    assert!(json.as_array().unwrap().iter().any(|p| p["name"] == "echo"));
    solo.stop();
}

#[test]
fn ctrl_c_stops_the_waiting_not_the_call() {
    let dir = TempDir::new("interrupt");
    let solo = Node::start("solo", &dir.0);
    let stderr_path = dir.0.join("call.err");
    let mut call = solo
        .command(&["call", "solo", "slow", "30"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // Its first progress line names the call; by then it is waiting.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("+0.000s")) {
            let first = text.lines().next().unwrap();
            assert!(first.starts_with("call "), "{text} / {line}");
            break first["call ".len().."call ".len() + 32].to_owned();
        }
        assert!(Instant::now() < deadline, "no progress: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(is_call_id(&id), "{id}");
    Command::new("kill")
        .args(["-INT", &call.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = call.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "ferry call ignored Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    let text = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        text.contains(&format!("the call goes on: ferry wait {id}")),
        "{text}"
    );
    // The call was left alone.
    let listed = solo.ok(&["calls"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("waiting")),
        "{listed}"
    );
    solo.ok(&["cancel", &id]);
    solo.stop();
}

#[test]
fn calls_to_another_node_explicit_any_and_all() {
    let dir = TempDir::new("two");
    let bravo = Node::start("bravo", &dir.0);
    let alpha = Node::start_with("alpha", &dir.0, false, Some(bravo.tcpcl));
    alpha.wait_for_peer("dtn://bravo/");

    let out = alpha.ferry(&["call", "bravo", "echo", "over the link"]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{progress}");
    assert_eq!(out.stdout, b"over the link");
    assert!(
        progress.contains("result from dtn://bravo/ by stream"),
        "{progress}"
    );

    // The picture comes by the data channel, byte for byte what bravo makes for itself.
    let (here, there) = (dir.0.join("alpha-out"), dir.0.join("bravo-out"));
    alpha.ok(&[
        "call",
        "dtn://bravo/",
        "photo",
        "300",
        "--out",
        here.to_str().unwrap(),
    ]);
    bravo.ok(&[
        "call",
        "bravo",
        "photo",
        "300",
        "--out",
        there.to_str().unwrap(),
    ]);
    let got = std::fs::read(here.join("photo.pgm")).unwrap();
    assert_eq!(got.len(), 321_429);
    assert!(got == std::fs::read(there.join("photo.pgm")).unwrap());

    // alpha serves nothing, so bravo is the one server.
    assert_eq!(alpha.ok(&["call", "any", "sum", "20", "22"]), "42\n");
    let all_out = dir.0.join("all");
    let out = alpha.ferry(&[
        "call",
        "all",
        "photo",
        "5",
        "--deadline",
        "4s",
        "--out",
        all_out.to_str().unwrap(),
    ]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{progress}");
    // Each server's value on a line of its own, announced on stderr.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "photo.pgm: 5x5 greyscale, 84 bytes\n"
    );
    assert!(progress.contains("from dtn://bravo/:"), "{progress}");
    let picture = std::fs::read(all_out.join("bravo").join("photo.pgm")).unwrap();
    assert!(picture.starts_with(b"P2\n5 5\n"), "{picture:?}");
    alpha.stop();
    bravo.stop();
}

#[test]
fn a_reinstalled_servers_new_key_is_shown_refused_until_accepted_then_used() {
    let dir = TempDir::new("keys");
    let bravo = Node::start("bravo", &dir.0);
    let alpha = Node::start_with("alpha", &dir.0, false, Some(bravo.tcpcl));
    alpha.wait_for_peer("dtn://bravo/");
    let key_of = |node: &Node| {
        let status: serde_json::Value =
            serde_json::from_str(&node.ok(&["status", "--json"])).unwrap();
        status["public_key"].as_str().unwrap().to_owned()
    };
    let old = key_of(&bravo);
    assert_eq!(alpha.ok(&["call", "bravo", "echo", "before"]), "before");
    let listed = alpha.ok(&["keys"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("dtn://bravo/") && l.contains(&old)),
        "{listed}"
    );

    // bravo is reinstalled: a new data directory, so a new identity.
    let bravo = bravo.restart(|| std::fs::remove_dir_all(dir.0.join("bravo")).unwrap());
    let new = key_of(&bravo);
    assert_ne!(new, old);
    alpha.wait_for_peer("dtn://bravo/");

    // Its reply to a call any server may answer is not believed, and the call says why.
    let out = alpha.ferry(&["call", "any", "sum", "20", "22", "--deadline", "4s"]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{progress}");
    assert!(
        progress.contains(&format!(
            "a reply from dtn://bravo/ was signed by key {new}, not the key known for it ({old})"
        )),
        "{progress}"
    );
    let listed = alpha.ok(&["keys"]);
    assert!(
        listed.contains(&format!("dtn://bravo/ presented key {new}, known {old}")),
        "{listed}"
    );
    assert!(alpha.ok(&["status"]).contains("key alarms"));

    // The operator accepts it: calls to bravo work again.
    let accepted = alpha.ok(&["keys", "accept", "bravo"]);
    assert!(accepted.contains(&new), "{accepted}");
    let json: serde_json::Value = serde_json::from_str(&alpha.ok(&["keys", "--json"])).unwrap();
    assert_eq!(json[0]["key"], new.as_str(), "{json}");
    assert_eq!(json[0]["source"], "accepted", "{json}");
    assert!(json[0].get("presented").is_none(), "{json}");
    assert_eq!(alpha.ok(&["call", "bravo", "echo", "after"]), "after");

    // Forgetting is refused for a node whose key is not known, and works for one that is.
    let refused = alpha.fails(&["keys", "forget", "nobody"]);
    assert!(
        refused.contains("no key is known for dtn://nobody/"),
        "{refused}"
    );
    alpha.ok(&["keys", "forget", "dtn://bravo/"]);
    alpha.stop();
    bravo.stop();
}
