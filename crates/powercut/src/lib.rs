//! A test tool that never ships in the node: a FUSE file system in memory that forgets, on
//! demand, everything that was not synced, as a power cut would.
//!
//! [`PowerCut::mount`] mounts an empty file system on a directory (as root: fuser calls
//! `mount(2)` itself, so neither libfuse nor `fusermount` is needed) and serves it from a
//! thread of the calling process; processes use it as any directory. Each file has current and
//! durable bytes, each directory current and durable names (see `model.rs`): `fsync` and
//! `fdatasync` make a file's bytes durable, `fsync` of a directory its names (creates,
//! unlinks, renames). [`PowerCut::cut`] makes every file and directory what it durably was,
//! while the mount stays up, so the next process sees what a machine would after losing power.
//!
//! **Cut only when no process has a file open on the mount** (kill the daemon and wait for it
//! first). Then the kernel holds nothing newer than the model: writes through `write(2)` reach
//! the file system at once (no writeback cache is asked for), the dirty pages of shared
//! mappings (SQLite's `-shm` index) are written back when the mapping goes away at the
//! process's exit, and neither entries nor attributes are cached (a time-to-live of zero), and
//! a file's cached pages are dropped when it is next opened (no `FOPEN_KEEP_CACHE`).
//!
//! What SQLite in WAL mode needs works as on a disk file system: shared writable `mmap` of the
//! `-shm` file goes through the page cache (no `direct_io`), and POSIX and `flock` locks are
//! kept by the kernel (the file system does not ask for `FUSE_POSIX_LOCKS` or
//! `FUSE_FLOCK_LOCKS`, so the kernel applies them locally, which is right for processes of one
//! machine).

// An I/O shell by design (it serves the kernel, with real time stamps): the sans-IO bans of
// clippy.toml do not apply.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
};

mod model;

pub use model::Counters;
use model::{Inode, Model};

/// Entries and attributes are not cached by the kernel: after a cut, the next lookup must see
/// the names and sizes that survived.
const TTL: Duration = Duration::ZERO;

/// The size `statfs` reports: a disk of 64 GiB, so the store's free-space checks never bite.
const DISK_BYTES: u64 = 64 << 30;
const BLOCK: u64 = 4096;

/// A mounted power-loss file system; unmounted when dropped.
pub struct PowerCut {
    model: Arc<Mutex<Model>>,
    session: Option<BackgroundSession>,
    path: PathBuf,
}

impl PowerCut {
    /// Mounts an empty file system on the existing directory `path` (needs root and
    /// `/dev/fuse`). Its root belongs to the calling user.
    pub fn mount(path: &Path) -> io::Result<Self> {
        let (uid, gid) = (
            owner::uid(path.parent().unwrap_or(path))?,
            owner::gid(path.parent().unwrap_or(path))?,
        );
        let model = Arc::new(Mutex::new(Model::new(uid, gid)));
        let fs = Fs {
            model: model.clone(),
            next_fh: AtomicU64::new(1),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("powercut".into()),
            MountOption::Subtype("powercut".into()),
            // The kernel checks the mode bits, as on a disk file system.
            MountOption::DefaultPermissions,
        ];
        let session = fuser::spawn_mount(fs, path, &config)?;
        Ok(PowerCut {
            model,
            session: Some(session),
            path: path.to_owned(),
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Power loss: every file reverts to its last synced bytes, every directory to its last
    /// synced names; files no synced name reaches are gone. Only while no process has a file
    /// open on the mount (see the crate's documentation).
    pub fn cut(&self) {
        self.lock().cut();
    }

    /// What the file system was asked to do so far.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }

    fn lock(&self) -> MutexGuard<'_, Model> {
        lock(&self.model)
    }
}

impl Drop for PowerCut {
    fn drop(&mut self) {
        // Unmounts (lazily if busy; fuser falls back to MNT_DETACH) and leaves the serving
        // thread to end by itself: joining it would wait for the kernel to let go of the
        // file system, which a copy of the mount in another mount namespace (every
        // `ip netns exec` started meanwhile copies the mounts) can delay indefinitely.
        drop(self.session.take());
    }
}

/// A poisoned lock only means a test thread panicked while holding it; the model is still
/// whole (every operation completes its change or returns an error before changing anything).
fn lock(model: &Mutex<Model>) -> MutexGuard<'_, Model> {
    model
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The owner of the mount point's parent, for the root directory.
mod owner {
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    pub(super) fn uid(path: &Path) -> std::io::Result<u32> {
        Ok(std::fs::metadata(path)?.uid())
    }

    pub(super) fn gid(path: &Path) -> std::io::Result<u32> {
        Ok(std::fs::metadata(path)?.gid())
    }
}

/// The FUSE side: every request is one locked operation on the model.
struct Fs {
    model: Arc<Mutex<Model>>,
    next_fh: AtomicU64,
}

fn attr(ino: u64, inode: &Inode) -> FileAttr {
    let size = inode.size();
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: inode.atime,
        mtime: inode.mtime,
        ctime: inode.ctime,
        crtime: inode.ctime,
        kind: if inode.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: inode.mode,
        nlink: if inode.is_dir() { 2 } else { 1 },
        uid: inode.uid,
        gid: inode.gid,
        rdev: 0,
        blksize: BLOCK as u32,
        flags: 0,
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Fs {
    fn model(&self) -> MutexGuard<'_, Model> {
        lock(&self.model)
    }

    fn fh(&self) -> FileHandle {
        FileHandle(self.next_fh.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates `name` in `parent` and answers with its entry.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        is_dir: bool,
        mode: u32,
        umask: u32,
    ) -> Result<(u64, FileAttr), Errno> {
        let mut m = self.model();
        let perm = (mode & !umask & 0o7777) as u16;
        let ino = m.create(parent.0, name, is_dir, perm, req.uid(), req.gid())?;
        Ok((ino, attr(ino, m.get(ino)?)))
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let m = self.model();
        match m.lookup(parent.0, name).and_then(|i| Ok((i, m.get(i)?))) {
            Ok((ino, inode)) => reply.entry(&TTL, &attr(ino, inode), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.model().get(ino.0) {
            Ok(inode) => reply.attr(&TTL, &attr(ino.0, inode)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut m = self.model();
        let result = (|| {
            if let Some(size) = size {
                m.set_len(ino.0, size)?;
            }
            let inode = m.get_mut(ino.0)?;
            if let Some(mode) = mode {
                inode.mode = (mode & 0o7777) as u16;
            }
            if let Some(uid) = uid {
                inode.uid = uid;
            }
            if let Some(gid) = gid {
                inode.gid = gid;
            }
            if let Some(t) = atime {
                inode.atime = time(t);
            }
            if let Some(t) = mtime {
                inode.mtime = time(t);
            }
            inode.ctime = SystemTime::now();
            Ok(attr(ino.0, inode))
        })();
        match result {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: nothing on this file system needs devices, pipes or sockets.
        if mode & 0o170000 != 0o100000 {
            reply.error(Errno::EPERM);
            return;
        }
        match self.make(req, parent, name, false, mode, umask) {
            Ok((_, a)) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent, name, true, mode, umask) {
            Ok((_, a)) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.model().unlink(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.model().unlink(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // Plain rename(2) only: RENAME_EXCHANGE and RENAME_NOREPLACE are refused, and callers
        // fall back or fail loudly.
        if flags.bits() != 0 {
            reply.error(Errno::EINVAL);
            return;
        }
        match self.model().rename(parent.0, name, newparent.0, newname) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // No FOPEN_KEEP_CACHE: the kernel drops the file's cached pages at each open, so a
        // file opened after a cut is read from the model.
        match self.model().opened(ino.0) {
            Ok(()) => reply.opened(self.fh(), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.model().read(ino.0, offset, size) {
            Ok(data) => reply.data(data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.model().write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.model().released(ino.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.model().sync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut m = self.model();
        match m.get(ino.0).map(Inode::is_dir) {
            Ok(true) => {
                let _ = m.opened(ino.0);
                reply.opened(self.fh(), FopenFlags::empty());
            }
            Ok(false) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let m = self.model();
        let names = match m.list(ino.0) {
            Ok(names) => names,
            Err(e) => return reply.error(e),
        };
        // "." and ".." first; the offset of an entry is its index plus one. ".." names the
        // directory itself: the kernel replaces it with the real parent.
        let mut all = vec![
            (OsStr::new(".").to_owned(), ino.0, true),
            (OsStr::new("..").to_owned(), ino.0, true),
        ];
        for (name, child) in names {
            let is_dir = m.get(child).map(Inode::is_dir).unwrap_or(false);
            all.push((name, child, is_dir));
        }
        for (i, (name, child, is_dir)) in all.into_iter().enumerate().skip(offset as usize) {
            let kind = if is_dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.model().released(ino.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.model().sync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let m = self.model();
        let blocks = DISK_BYTES / BLOCK;
        let free = blocks.saturating_sub(m.used_bytes().div_ceil(BLOCK));
        let files = m.inodes.len() as u64;
        reply.statfs(
            blocks,
            free,
            free,
            files + 1_000_000,
            1_000_000,
            BLOCK as u32,
            255,
            BLOCK as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The mount's default_permissions makes the kernel check the mode bits.
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(req, parent, name, false, mode, umask) {
            Ok((ino, a)) => {
                let _ = self.model().opened(ino);
                reply.created(&TTL, &a, Generation(0), self.fh(), FopenFlags::empty());
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Mode 0 only (allocate, extending the size): the bytes are in memory anyway.
        if mode != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let mut m = self.model();
        let result = m.get(ino.0).map(Inode::size).and_then(|size| {
            let end = offset.saturating_add(length);
            if end > size {
                m.set_len(ino.0, end)
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
