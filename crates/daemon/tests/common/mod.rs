//! Scaffolding shared by the daemon's tests and its benchmark: free ports, temporary
//! directories, and a node configuration that stays on loopback.

#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A node `dtn://<name>/` with its store in `dir` and TCPCL on 127.0.0.1:`tcpcl_port` (0: any),
/// and nothing else: no UDP, no discovery (nothing leaves loopback), no API, a 1 GB quota. Tests
/// set the fields they need beside.
pub(crate) fn loopback_config(name: &str, dir: &Path, tcpcl_port: u16) -> daemon::Config {
    let mut c = daemon::Config::defaults("test");
    c.node_id = daemon::config::parse_node_id(&format!("dtn://{name}/")).expect("a node id");
    c.data_dir = Some(dir.to_owned());
    c.store_quota = 1_000_000_000;
    c.tcpcl_listen = vec![std::net::SocketAddr::from(([127, 0, 0, 1], tcpcl_port))];
    c.udp_listen = None;
    c.discovery.enabled = false;
    c.api_listen = None;
    c
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

/// A fresh directory under `base`, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A new directory named after `tag`, this process and a counter, under the system's
    /// temporary directory.
    pub(crate) fn new(tag: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), tag)
    }

    /// The same under `base`.
    pub(crate) fn new_in(base: &Path, tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = base.join(format!(
            "ferry-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        Self(dir)
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Today's UTC date, `YYYY-MM-DD` (days to civil date, after Howard Hinnant).
pub(crate) fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Where a benchmark keeps its stores (`FERRY_BENCH_DIR`, else the temporary directory), created,
/// and its file system's type (what `stat -f` says), for the report.
pub(crate) fn bench_dir() -> (PathBuf, String) {
    let base = std::env::var_os("FERRY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).expect("create the bench directory");
    let fs_type = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&base)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    (base, fs_type)
}
