//! The RPC commands against a real `ferry node` on loopback serving the example procedures
//! (`examples/`), driven only through the CLI as a user would: the node calls itself (a local
//! call runs the same admission, execution and result path as a remote one). Discovery and UDP
//! are off, every address is 127.0.0.1, and every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{FERRY, Node, TestDir, free_port};

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

/// `dtn://{name}/` serving the examples, with 1 s keepalives.
fn serving(dir: &TestDir, name: &str) -> Node {
    Node::build(dir.path(), name)
        .keepalive("1s")
        .config(&example_rpc_section())
        .start()
}

/// `dtn://{name}/` serving nothing, with a session to the TCPCL port `peer`.
fn client_of(dir: &TestDir, name: &str, peer: u16) -> Node {
    Node::build(dir.path(), name)
        .keepalive("1s")
        .peer(peer)
        .start()
}

fn is_call_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[test]
fn a_call_prints_its_value_exactly_and_writes_its_files() {
    let dir = TestDir::new("call-cli-values");
    let solo = serving(&dir, "solo");

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
    let out_dir = dir.path().join("pictures");
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
    let dir = TestDir::new("call-cli-detach");
    let solo = serving(&dir, "solo");

    let id = solo.ok(&["call", "solo", "slow", "1", "--detach"]);
    let id = id.trim_end_matches('\n');
    assert!(is_call_id(id), "{id:?}");
    // Still running: `result` says so and fails.
    let err = solo.fails_with(6, &["result", id]);
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
    let err = solo.fails_with(6, &["wait", id, "--timeout", "1s"]);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        err.contains("still waiting after 1s") && err.contains("the call goes on"),
        "{err}"
    );
    // Cancelling it: the new state, then waiting for it fails as cancelled.
    let out = solo.ok(&["cancel", id]);
    assert_eq!(out, format!("call {id}: cancelled\n"));
    let err = solo.fails_with(7, &["wait", id, "--timeout", "10s"]);
    assert!(err.contains("the call was cancelled"), "{err}");
    let out = solo.ok(&["cancel", id]);
    assert!(out.contains("already ended"), "{out}");
    let err = solo.fails_with(4, &["result", "ffffffffffffffffffffffffffffffff"]);
    assert!(err.contains("this node has no call"), "{err}");
    solo.stop();
}

#[test]
fn failures_name_the_code_the_detail_and_stderr() {
    let dir = TestDir::new("call-cli-failures");
    let solo = serving(&dir, "solo");

    let err = solo.fails_with(5, &["call", "solo", "photo", "0"]);
    assert!(err.contains("execution_failed"), "{err}");
    assert!(err.contains("exited with status 2"), "{err}");
    assert!(
        err.contains("photo: SIZE must be 1 to 1000, not 0"),
        "{err}"
    );

    let err = solo.fails_with(5, &["call", "solo", "teleport"]);
    assert!(
        err.contains("dtn://solo/ refused the call: not_offered"),
        "{err}"
    );

    let err = solo.fails_with(
        5,
        &["call", "solo", "echo", "x", "--require", "has(nonesuch)"],
    );
    assert!(
        err.contains("refused the call: predicate_failed: call requirement: has(nonesuch)"),
        "{err}"
    );

    // A requirement the node cannot parse is refused when the call is made.
    let err = solo.fails_with(
        4,
        &["call", "solo", "echo", "x", "--require", "battery >>= 5"],
    );
    assert!(err.contains("making the call"), "{err}");

    // No server: an any-mode call expires at its deadline.
    let started = Instant::now();
    let err = solo.fails_with(6, &["call", "any", "echo", "x", "--deadline", "2s"]);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(err.contains("no result before the deadline"), "{err}");

    // With --json, a failed call is one document: the error, and the call as it ended.
    let out = solo.ferry(&["call", "solo", "teleport", "--json", "-q"]);
    assert_eq!(out.status.code(), Some(5));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["status"], "call_failed");
    assert_eq!(doc["error"]["code"], "not_offered");
    assert_eq!(doc["call"]["state"], "failed");
    assert_eq!(doc["call"]["replies"][0]["code"], "not_offered");
    solo.stop();
}

#[test]
fn bad_arguments_fail_before_the_node_is_contacted() {
    let dir = TestDir::new("call-cli-args");
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
    let missing = dir.path().join("no-such-photo.jpg");
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
    assert!(err.contains("is no node or endpoint"), "{err}");
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
    let dir = TestDir::new("call-cli-procedures");
    let solo = serving(&dir, "solo");
    let table = solo.ok(&["procedures"]);
    for name in ["echo ", "null ", "photo ", "slow ", "sum "] {
        assert!(
            table.lines().any(|l| l.starts_with(name)),
            "{name}: {table}"
        );
    }
    let sum = table.lines().find(|l| l.starts_with("sum ")).unwrap();
    assert!(
        sum.contains("a:int b:int") && sum.contains("Adds two integers."),
        "{sum}"
    );
    let null = table.lines().find(|l| l.starts_with("null ")).unwrap();
    assert!(
        null.contains("no limit") && null.contains("built in"),
        "{null}"
    );
    let photo = table.lines().find(|l| l.starts_with("photo ")).unwrap();
    assert!(photo.contains("has(camera)"), "{photo}");
    let executions = || -> Vec<(String, u64)> {
        let json: serde_json::Value =
            serde_json::from_str(&solo.ok(&["procedures", "--json"])).unwrap();
        json.as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let name = p["name"].as_str().unwrap().to_owned();
                (name, p["executions"].as_u64().unwrap())
            })
            .collect()
    };
    let none: Vec<(String, u64)> = ["echo", "ferry.procedures", "null", "photo", "slow", "sum"]
        .map(|n| (n.to_owned(), 0))
        .into();
    assert_eq!(executions(), none);
    // Each procedure's own runs: two of sum; null runs no program.
    solo.ok(&["call", "solo", "sum", "1", "2"]);
    solo.ok(&["call", "solo", "sum", "3", "4"]);
    solo.ok(&["call", "solo", "null"]);
    let counted = executions();
    assert!(
        counted.contains(&("sum".to_owned(), 2))
            && counted.iter().all(|(n, c)| n == "sum" || *c == 0),
        "{counted:?}"
    );
    solo.stop();
}

#[test]
fn ctrl_c_stops_the_waiting_not_the_call() {
    let dir = TestDir::new("call-cli-interrupt");
    let solo = serving(&dir, "solo");
    let stderr_path = dir.path().join("call.err");
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
    let dir = TestDir::new("call-cli-two");
    let bravo = serving(&dir, "bravo");
    let alpha = client_of(&dir, "alpha", bravo.tcpcl);
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
    let (here, there) = (dir.path().join("alpha-out"), dir.path().join("bravo-out"));
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
    let all_out = dir.path().join("all");
    let id = alpha.ok(&["call", "all", "photo", "5", "--deadline", "4s", "--detach"]);
    let id = id.trim();
    let out = alpha.ferry(&["wait", id, "--out", all_out.to_str().unwrap()]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{progress}");
    // Each server's value on lines of its own, each line after the server's name.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "dtn://bravo/: photo.pgm: 5x5 greyscale, 84 bytes\n"
    );
    // `ferry result` prints it the same way, by a short prefix of the call's id.
    assert_eq!(
        alpha.ok(&[
            "result",
            &id[..6],
            "--out",
            dir.path().join("again").to_str().unwrap()
        ]),
        "dtn://bravo/: photo.pgm: 5x5 greyscale, 84 bytes\n"
    );
    let picture = std::fs::read(all_out.join("bravo").join("photo.pgm")).unwrap();
    assert!(picture.starts_with(b"P2\n5 5\n"), "{picture:?}");
    alpha.stop();
    bravo.stop();
}

#[test]
fn a_reinstalled_servers_new_key_is_shown_refused_until_accepted_then_used() {
    let dir = TestDir::new("call-cli-keys");
    let bravo = serving(&dir, "bravo");
    let alpha = client_of(&dir, "alpha", bravo.tcpcl);
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
    let bravo = bravo.restart(|| std::fs::remove_dir_all(dir.path().join("bravo")).unwrap());
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
