//! Scaffolding shared by the tests that run `ferry node` processes: [`Node`] (one process,
//! its configuration, log and API) and [`TestDir`] in `node.rs`, network namespaces joined by
//! veth pairs in `netns.rs`, `terminate` and `free_port`.

#![allow(dead_code)] // each test binary uses a different part

use std::process::{Child, Command, ExitStatus};
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

// The daemon's test scaffolding, for its `free_port` (ports below the ephemeral range).
#[path = "../../../daemon/tests/common/mod.rs"]
mod daemon_common;
#[allow(unused_imports)] // the netns test binds no port of its own
pub(crate) use daemon_common::free_port;
