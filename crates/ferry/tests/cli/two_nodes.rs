//! Two `ferry node` processes on loopback, driven only through the CLI as a user would: a text
//! message and a 1 MiB file each way over TCPCLv4, byte-identical, then a SIGTERM stop of each;
//! and the rough edges a new user met: short names, where a peer listens, a trace that leaves
//! nothing behind, a send followed to its delivery, a typo in a node's name, colour codes in a
//! log file. Discovery is off (nothing leaves loopback); every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Node, TestDir};

#[test]
fn two_ferry_nodes_exchange_text_and_a_mebibyte_file_both_ways() {
    let dir = TestDir::new("two-nodes");
    let alpha = Node::build(dir.path(), "alpha").log_level("info").start();
    let bravo = Node::build(dir.path(), "bravo").peer(alpha.tcpcl).start();
    alpha.wait_for_peer("dtn://bravo/");

    let file: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
        .collect();
    let input = dir.path().join("file.bin");
    std::fs::write(&input, &file).unwrap();

    for (from, to, to_name) in [(&alpha, &bravo, "bravo"), (&bravo, &alpha, "alpha")] {
        from.ok(&[
            "send",
            &format!("dtn://{to_name}/inbox"),
            "hello over tcpcl",
        ]);
        let text = to.ok(&["recv", "inbox", "--timeout", "20s"]);
        assert_eq!(text.trim_end(), "hello over tcpcl", "text to {to_name}");

        from.ok(&[
            "send",
            &format!("dtn://{to_name}/files"),
            "--file",
            input.to_str().unwrap(),
        ]);
        let output = dir.path().join(format!("received-by-{to_name}.bin"));
        to.ok(&[
            "recv",
            "files",
            "--timeout",
            "30s",
            "-o",
            output.to_str().unwrap(),
        ]);
        let got = std::fs::read(&output).unwrap();
        assert_eq!(got.len(), file.len(), "file to {to_name}");
        assert!(got == file, "the file reached {to_name} altered");
        // Taken means acknowledged: nothing is left waiting.
        let left = to.ok(&["recv", "files", "--timeout", "1s", "--count", "0", "--json"]);
        assert!(left.trim().is_empty(), "still waiting at {to_name}: {left}");
    }

    // Short names: `send bravo` goes to bravo's inbox, which `recv` reads by default.
    alpha.ok(&["send", "bravo", "by its short name"]);
    assert_eq!(
        bravo.ok(&["recv", "--timeout", "20s"]).trim_end(),
        "by its short name"
    );
    let pong = alpha.ok(&["ping", "bravo", "-c", "1"]);
    assert!(pong.contains("bytes from dtn://bravo/: seq=1"), "{pong}");

    // Where a peer listens: bravo dialled alpha, so it knows alpha's port; alpha, dialled
    // without discovery, knows bravo's host only, never the session's ephemeral port.
    let peers = bravo.ok(&["peers"]);
    assert!(
        peers.contains(&format!("127.0.0.1:{}", alpha.tcpcl)),
        "{peers}"
    );
    let back: serde_json::Value = serde_json::from_str(&alpha.ok(&["peers", "--json"])).unwrap();
    assert!(
        back[0]["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert!(back[0].get("listen_address").is_none(), "{back}");
    let row = alpha.ok(&["peers"]);
    let row = row.lines().find(|l| l.starts_with("dtn://bravo/")).unwrap();
    assert!(
        row.contains(" 127.0.0.1 ") && !row.contains("127.0.0.1:"),
        "{row}"
    );

    // A trace is delivered and reported, and leaves nothing in any of bravo's inboxes.
    let before = inbox_bundles(&bravo);
    let trace = alpha.ok(&["trace", "bravo", "--timeout", "20s"]);
    assert!(trace.contains("delivered"), "{trace}");
    assert_eq!(
        inbox_bundles(&bravo),
        before,
        "the trace left a bundle: {trace}"
    );

    // A send followed to its destination by its reports.
    let out = alpha.ferry(&[
        "send",
        "bravo/files",
        "--file",
        input.to_str().unwrap(),
        "--report",
        "--report-wait",
        "30s",
    ]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{progress}");
    assert!(progress.contains("dtn://bravo/ delivered"), "{progress}");
    assert!(progress.contains("delivered: "), "{progress}");
    bravo.ok(&[
        "recv",
        "files",
        "--timeout",
        "20s",
        "--out-dir",
        dir.path().to_str().unwrap(),
    ]);

    // A typo in a node's name is said at once, with the name it probably meant.
    let out = alpha.ferry(&["call", "brav", "echo", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("never heard of dtn://brav/"), "{err}");
    assert!(err.contains("did you mean dtn://bravo/?"), "{err}");

    // Logging to a file: plain text, no colour codes.
    let log = alpha.log();
    assert!(log.contains("session up with dtn://bravo/"), "{log}");
    assert!(!log.contains('\x1b'), "colour codes in the log file");
    alpha.stop();
    bravo.stop();
}

/// Bundles waiting in the node's inboxes (`ferry status --json`).
fn inbox_bundles(node: &Node) -> u64 {
    let status: serde_json::Value = serde_json::from_str(&node.ok(&["status", "--json"])).unwrap();
    status["inbox_bundles"].as_u64().unwrap()
}
