//! A small tmpfs mounted for a test and unmounted when it ends: the full-disk tests of the store
//! and of the daemon (which includes this file by path) share it. Mounting needs root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Unmounts the tmpfs when the test ends, also when it fails.
pub(crate) struct Mount(pub(crate) PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still has a file open there: detach it so the temp dir can go.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `3m`) on `dir`; the error is `mount`'s.
pub(crate) fn mount_tmpfs(dir: &Path, size: &str) -> Result<Mount, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "ferry-test"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        Ok(Mount(dir.to_path_buf()))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}
