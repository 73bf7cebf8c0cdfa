//! Two `ferry node` processes on loopback, driven only through the CLI as a user would: a text
//! message and a 1 MiB file each way over TCPCLv4, byte-identical, then a SIGTERM stop of each.
//! Discovery is off (nothing leaves loopback); every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Node, TestDir};

#[test]
fn two_ferry_nodes_exchange_text_and_a_mebibyte_file_both_ways() {
    let dir = TestDir::new("two-nodes");
    let alpha = Node::build(dir.path(), "alpha").start();
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
    alpha.stop();
    bravo.stop();
}
