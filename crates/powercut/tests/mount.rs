//! The file system mounted for real: system calls, not the model, see writes vanish at a cut.
//! (SQLite in WAL mode on it is `store.rs`'s part and the power-cut soak's,
//! crates/ferry/tests/soak.rs: its shared mapping of `-shm` must belong to another process,
//! because a process that serves a FUSE file system and maps a file of it deadlocks at exit,
//! writing back to itself.)
//!
//! Needs root and `/dev/fuse`. Without them the test says so and passes, unless
//! `FERRY_REQUIRE_FUSE=1` (set by CI where /dev/fuse exists), where it fails.

// A test of file system calls: the sans-IO bans do not apply.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ferry_powercut::PowerCut;

fn can_run() -> bool {
    let root = fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next())
            == Some("0")
    });
    root && Path::new("/dev/fuse").exists()
}

/// A fresh mount point under the temporary directory, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("powercut-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

fn read(path: &Path) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path).ok()?.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn skip() -> bool {
    if can_run() {
        return false;
    }
    assert!(
        std::env::var_os("FERRY_REQUIRE_FUSE").is_none(),
        "FERRY_REQUIRE_FUSE is set but this is not root with /dev/fuse"
    );
    eprintln!("SKIPPED: needs root and /dev/fuse");
    true
}

#[test]
fn unsynced_writes_and_names_vanish_at_a_cut_synced_ones_stay() {
    if skip() {
        return;
    }
    let dir = Dir::new("files");
    let fs_ = PowerCut::mount(&dir.0).expect("mounting");
    let root = dir.0.clone();

    // A synced name with synced bytes, then more bytes not synced.
    let kept = root.join("kept");
    let mut f = File::create(&kept).unwrap();
    f.write_all(b"durable").unwrap();
    f.sync_data().unwrap();
    File::open(&root).unwrap().sync_all().unwrap();
    f.write_all(b" and not").unwrap();
    drop(f);
    // A subdirectory with a synced file, both names synced; then an unsynced unlink.
    fs::create_dir(root.join("sub")).unwrap();
    let inner = root.join("sub/inner");
    fs::write(&inner, b"inner").unwrap();
    File::open(&inner).unwrap().sync_all().unwrap();
    File::open(root.join("sub")).unwrap().sync_all().unwrap();
    File::open(&root).unwrap().sync_all().unwrap();
    fs::remove_file(&inner).unwrap();
    // A name created after the last sync of its directory, though its bytes were.
    let lost = root.join("lost");
    let mut f = File::create(&lost).unwrap();
    f.write_all(b"gone").unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(read(&kept).as_deref(), Some(&b"durable and not"[..]));
    assert!(read(&inner).is_none());

    fs_.cut();
    assert_eq!(read(&kept).as_deref(), Some(&b"durable"[..]));
    assert_eq!(
        fs::metadata(&kept).unwrap().len(),
        7,
        "the size reverts too"
    );
    assert!(read(&lost).is_none(), "an unsynced create vanishes");
    assert_eq!(
        read(&inner).as_deref(),
        Some(&b"inner"[..]),
        "the unlink is undone"
    );
    let mut names: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["kept", "sub"]);
    let counters = fs_.counters();
    assert_eq!(counters.cuts, 1);
    assert!(
        counters.file_syncs >= 3 && counters.dir_syncs >= 3,
        "{counters:?}"
    );

    // A rename, truncation and flock behave as on a disk.
    fs::rename(&kept, root.join("renamed")).unwrap();
    let f = OpenOptions::new()
        .write(true)
        .open(root.join("renamed"))
        .unwrap();
    f.set_len(3).unwrap();
    f.lock().unwrap();
    let other = File::open(root.join("renamed")).unwrap();
    assert!(other.try_lock().is_err(), "flock is exclusive");
    drop((f, other));
    assert_eq!(read(&root.join("renamed")).as_deref(), Some(&b"dur"[..]));
    fs_.cut();
    assert_eq!(read(&kept).as_deref(), Some(&b"durable"[..]));
    assert!(read(&root.join("renamed")).is_none());
    drop(fs_);
}
