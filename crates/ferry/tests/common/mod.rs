//! Scaffolding shared by the tests that run `ferry node` processes.

#![allow(dead_code)] // each test binary uses a different part

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

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

/// A TCP port on 127.0.0.1 that was free a moment ago, taken below the kernel's ephemeral range
/// (32768–60999 on Linux). A port the kernel hands out for `:0` is an ephemeral one, which
/// another test's outgoing connection may take before the caller binds it ("Address already in
/// use", seen with tests in parallel); below that range only explicit binds take ports. Each test
/// process starts at its own place in the range and hands out a port once at most.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7_919) % COUNT;
    for _ in 0..COUNT {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST + (start + n) % COUNT) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {FIRST}..{}", FIRST + COUNT)
}
