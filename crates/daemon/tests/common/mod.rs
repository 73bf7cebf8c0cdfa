//! Scaffolding shared by the daemon's tests and its benchmark: free ports and temporary
//! directories.

#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free port on 127.0.0.1")
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
