//! Scaffolding shared by the tests that run `ferry node` processes: [`Node`] (one process,
//! its configuration, log and API) and [`TestDir`] in `node.rs`, network namespaces joined by
//! veth pairs in `netns.rs`, `terminate`, `output_within` and `free_port`.

#![allow(dead_code)] // each test binary uses a different part

use std::io::Read as _;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) mod netns;
mod node;
#[allow(unused_imports)] // netns.rs and soak.rs run their processes themselves
pub(crate) use node::{FERRY, Node, TestDir};

/// Sends SIGTERM, as an init system would (the daemon flushes its store and exits), and waits up
/// to 10 s for the process to end. `None` if it did not.
pub(crate) fn terminate(child: &mut Child) -> Option<ExitStatus> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Runs `cmd` to its end with stdout and stderr captured, killing it after `limit`; `None` if it
/// had to be killed. Both pipes are read while it runs, so a full pipe never stalls it.
pub(crate) fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let stdout = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let stderr = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the command") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    Some(Output {
        status: status?,
        stdout,
        stderr,
    })
}

// The daemon's test scaffolding, for its `free_port` (ports below the ephemeral range).
#[path = "../../../daemon/tests/common/mod.rs"]
mod daemon_common;
#[allow(unused_imports)] // the netns test binds no port of its own
pub(crate) use daemon_common::free_port;
