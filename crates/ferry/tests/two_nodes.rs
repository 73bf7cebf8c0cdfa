//! Two `ferry node` processes on loopback, driven only through the CLI as a user would: a text
//! message and a 1 MiB file each way over TCPCLv4, byte-identical, then a SIGTERM stop of each.
//! Discovery is off (nothing leaves loopback); every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::free_port;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// A `ferry node` process, killed if the test ends without stopping it.
struct Node {
    child: Child,
    api: String,
    log: PathBuf,
}

impl Node {
    fn start(name: &str, dir: &Path, tcpcl: u16, peer: Option<u16>) -> Self {
        let api = format!("127.0.0.1:{}", free_port());
        let log = dir.join(format!("{name}.log"));
        let mut cmd = Command::new(FERRY);
        cmd.args(["node", "--no-discovery", "--udp", ""])
            .args(["--node-id", &format!("dtn://{name}/")])
            .arg("--data-dir")
            .arg(dir.join(name))
            .args(["--tcpcl", &format!("127.0.0.1:{tcpcl}"), "--api", &api])
            // No configuration file of the user's may leak in.
            .env("XDG_CONFIG_HOME", dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(p) = peer {
            cmd.args(["--peer", &format!("127.0.0.1:{p}")]);
        }
        let child = cmd.spawn().expect("starting ferry node");
        Node { child, api, log }
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
            "ferry {}: {}\nnode log:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn stop(mut self) {
        let status =
            common::terminate(&mut self.child).expect("ferry node did not stop on SIGTERM");
        assert!(
            status.success(),
            "ferry node exited with {status} on SIGTERM"
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_ferry_nodes_exchange_text_and_a_mebibyte_file_both_ways() {
    let dir = std::env::temp_dir().join(format!("ferry-two-nodes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (pa, pb) = (free_port(), free_port());
    let alpha = Node::start("alpha", &dir, pa, None);
    let bravo = Node::start("bravo", &dir, pb, Some(pa));

    let deadline = Instant::now() + Duration::from_secs(20);
    while !alpha
        .ferry(&["peers", "--json"])
        .stdout
        .windows(12)
        .any(|w| w == b"dtn://bravo/")
    {
        assert!(Instant::now() < deadline, "alpha never saw bravo");
        std::thread::sleep(Duration::from_millis(100));
    }

    let file: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
        .collect();
    let input = dir.join("file.bin");
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
        let output = dir.join(format!("received-by-{to_name}.bin"));
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
    let _ = std::fs::remove_dir_all(&dir);
}
