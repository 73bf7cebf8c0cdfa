//! The file system's state in memory, without FUSE: what a disk would hold (durable) and what
//! the page cache and the directory caches show (current).
//!
//! A regular file has current bytes and durable bytes; `fsync` (or `fdatasync`, the same here:
//! the size is part of the data) copies the current bytes to the durable ones. A directory has
//! current names and durable names; `fsync` of the directory copies the current names to the
//! durable ones, so a create, unlink or rename survives a cut only once its directory was synced
//! (as POSIX promises, and stricter than ext4's journal, which often keeps them anyway: the test
//! must not pass by luck of the file system). [`Model::cut`] makes current what is durable.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

use fuser::Errno;

/// The root directory's inode number (FUSE's).
pub(crate) const ROOT: u64 = 1;

/// A file's or directory's contents, current and durable.
#[derive(Debug)]
pub(crate) enum Content {
    File {
        data: Vec<u8>,
        durable: Vec<u8>,
    },
    Dir {
        names: BTreeMap<OsString, u64>,
        durable: BTreeMap<OsString, u64>,
    },
}

/// An inode: content and the attributes `stat` shows (these are not reverted by a cut: no
/// test looks at them, and the kernel caches none of them, see lib.rs).
#[derive(Debug)]
pub(crate) struct Inode {
    pub(crate) content: Content,
    pub(crate) mode: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) atime: SystemTime,
    pub(crate) mtime: SystemTime,
    pub(crate) ctime: SystemTime,
    /// Open handles: an unlinked file lives on while it is open, as on any Unix file system.
    pub(crate) open: u32,
}

impl Inode {
    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.content, Content::Dir { .. })
    }

    pub(crate) fn size(&self) -> u64 {
        match &self.content {
            Content::File { data, .. } => data.len() as u64,
            Content::Dir { names, .. } => names.len() as u64,
        }
    }

    fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

/// Counters of what the file system was asked to do, for tests that want to see the syncs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// `fsync`/`fdatasync` of files.
    pub file_syncs: u64,
    /// `fsync` of directories.
    pub dir_syncs: u64,
    /// Power cuts.
    pub cuts: u64,
    /// Bytes of current file content a cut threw away or changed (an estimate: the length
    /// difference plus the differing bytes of the common length).
    pub bytes_lost: u64,
    /// Names a cut removed, brought back or pointed elsewhere.
    pub names_reverted: u64,
}

/// The whole file system.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    pub(crate) counters: Counters,
}

impl Model {
    /// An empty root directory, owned by `uid`:`gid`, durable as it is.
    pub(crate) fn new(uid: u32, gid: u32) -> Self {
        let mut inodes = BTreeMap::new();
        inodes.insert(ROOT, Self::inode(Self::dir(), 0o755, uid, gid));
        Model {
            inodes,
            next_ino: ROOT + 1,
            counters: Counters::default(),
        }
    }

    fn dir() -> Content {
        Content::Dir {
            names: BTreeMap::new(),
            durable: BTreeMap::new(),
        }
    }

    fn inode(content: Content, mode: u16, uid: u32, gid: u32) -> Inode {
        let now = SystemTime::now();
        Inode {
            content,
            mode,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            open: 0,
        }
    }

    pub(crate) fn get(&self, ino: u64) -> Result<&Inode, Errno> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub(crate) fn get_mut(&mut self, ino: u64) -> Result<&mut Inode, Errno> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn names(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.get(dir)?.content {
            Content::Dir { names, .. } => Ok(names),
            Content::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn names_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        let inode = self.get_mut(dir)?;
        inode.touch();
        match &mut inode.content {
            Content::Dir { names, .. } => Ok(names),
            Content::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    /// The inode `name` in `dir` names now.
    pub(crate) fn lookup(&self, dir: u64, name: &OsStr) -> Result<u64, Errno> {
        self.names(dir)?.get(name).copied().ok_or(Errno::ENOENT)
    }

    /// The current names of `dir`, in order.
    pub(crate) fn list(&self, dir: u64) -> Result<Vec<(OsString, u64)>, Errno> {
        Ok(self
            .names(dir)?
            .iter()
            .map(|(n, i)| (n.clone(), *i))
            .collect())
    }

    /// A new empty file or directory `name` in `dir` (not yet durable).
    pub(crate) fn create(
        &mut self,
        dir: u64,
        name: &OsStr,
        is_dir: bool,
        mode: u16,
        uid: u32,
        gid: u32,
    ) -> Result<u64, Errno> {
        if self.names(dir)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let content = if is_dir {
            Self::dir()
        } else {
            Content::File {
                data: Vec::new(),
                durable: Vec::new(),
            }
        };
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes
            .insert(ino, Self::inode(content, mode, uid, gid));
        self.names_mut(dir)?.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Removes `name` from `dir` (`rmdir` if `is_dir`).
    pub(crate) fn unlink(&mut self, dir: u64, name: &OsStr, is_dir: bool) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        let target = self.get(ino)?;
        match (is_dir, &target.content) {
            (false, Content::Dir { .. }) => return Err(Errno::EISDIR),
            (true, Content::File { .. }) => return Err(Errno::ENOTDIR),
            (true, Content::Dir { names, .. }) if !names.is_empty() => {
                return Err(Errno::ENOTEMPTY);
            }
            _ => {}
        }
        self.names_mut(dir)?.remove(name);
        self.collect(ino);
        Ok(())
    }

    /// `rename(2)` without flags: replaces a file at the new name.
    pub(crate) fn rename(
        &mut self,
        dir: u64,
        name: &OsStr,
        new_dir: u64,
        new_name: &OsStr,
    ) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        self.names(new_dir)?;
        let replaced = self.names(new_dir)?.get(new_name).copied();
        if let Some(old) = replaced {
            if old == ino {
                return Ok(());
            }
            let (src_dir, dst_dir) = (self.get(ino)?.is_dir(), self.get(old)?.is_dir());
            match (src_dir, dst_dir) {
                (false, true) => return Err(Errno::EISDIR),
                (true, false) => return Err(Errno::ENOTDIR),
                (true, true) if !self.names(old)?.is_empty() => return Err(Errno::ENOTEMPTY),
                _ => {}
            }
        }
        self.names_mut(dir)?.remove(name);
        self.names_mut(new_dir)?.insert(new_name.to_owned(), ino);
        if let Some(old) = replaced {
            self.collect(old);
        }
        Ok(())
    }

    /// The current bytes of a file from `offset`, at most `size`.
    pub(crate) fn read(&self, ino: u64, offset: u64, size: u32) -> Result<&[u8], Errno> {
        match &self.get(ino)?.content {
            Content::File { data, .. } => {
                let start = (offset as usize).min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                Ok(&data[start..end])
            }
            Content::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    fn data_mut(&mut self, ino: u64) -> Result<&mut Vec<u8>, Errno> {
        let inode = self.get_mut(ino)?;
        inode.touch();
        match &mut inode.content {
            Content::File { data, .. } => Ok(data),
            Content::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    /// Writes `bytes` at `offset` (zeros fill a gap), not durable yet.
    pub(crate) fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<(), Errno> {
        let data = self.data_mut(ino)?;
        let offset = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = offset.checked_add(bytes.len()).ok_or(Errno::EFBIG)?;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset..end].copy_from_slice(bytes);
        Ok(())
    }

    /// Sets a file's length (truncate or extend with zeros), not durable yet.
    pub(crate) fn set_len(&mut self, ino: u64, len: u64) -> Result<(), Errno> {
        let len = usize::try_from(len).map_err(|_| Errno::EFBIG)?;
        self.data_mut(ino)?.resize(len, 0);
        Ok(())
    }

    /// `fsync` of a file (its bytes and length) or of a directory (its names).
    pub(crate) fn sync(&mut self, ino: u64) -> Result<(), Errno> {
        match &mut self.get_mut(ino)?.content {
            Content::File { data, durable } => {
                durable.clone_from(data);
                self.counters.file_syncs += 1;
            }
            Content::Dir { names, durable } => {
                durable.clone_from(names);
                self.counters.dir_syncs += 1;
            }
        }
        Ok(())
    }

    /// Power loss: every file's bytes and every directory's names become what was last synced.
    /// Inodes no durable name reaches any more are dropped (open handles do not keep them: the
    /// processes that held them are gone in a power cut, and a cut is made only after they
    /// ended).
    pub(crate) fn cut(&mut self) {
        for inode in self.inodes.values_mut() {
            inode.open = 0;
            match &mut inode.content {
                Content::File { data, durable } => {
                    let common = data.len().min(durable.len());
                    let differing = data[..common]
                        .iter()
                        .zip(&durable[..common])
                        .filter(|(a, b)| a != b)
                        .count();
                    self.counters.bytes_lost +=
                        (data.len().abs_diff(durable.len()) + differing) as u64;
                    data.clone_from(durable);
                }
                Content::Dir { names, durable } => {
                    let changed = names
                        .iter()
                        .filter(|(n, i)| durable.get(*n) != Some(i))
                        .count()
                        + durable.keys().filter(|n| !names.contains_key(*n)).count();
                    self.counters.names_reverted += changed as u64;
                    names.clone_from(durable);
                }
            }
        }
        self.counters.cuts += 1;
        // Keep what the root reaches through the (now current) durable names.
        let mut reachable = vec![ROOT];
        let mut seen = std::collections::BTreeSet::from([ROOT]);
        while let Some(ino) = reachable.pop() {
            if let Some(Inode {
                content: Content::Dir { names, .. },
                ..
            }) = self.inodes.get(&ino)
            {
                for child in names.values() {
                    if seen.insert(*child) {
                        reachable.push(*child);
                    }
                }
            }
        }
        self.inodes.retain(|ino, _| seen.contains(ino));
    }

    /// Records an open handle of `ino`.
    pub(crate) fn opened(&mut self, ino: u64) -> Result<(), Errno> {
        self.get_mut(ino)?.open += 1;
        Ok(())
    }

    /// Records the release of a handle of `ino`, dropping the inode if nothing names it.
    pub(crate) fn released(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.open = inode.open.saturating_sub(1);
            self.collect(ino);
        }
    }

    /// Drops `ino` if it is not open and no name, current or durable, refers to it (a durable
    /// name keeps it because a cut may bring the name back).
    fn collect(&mut self, ino: u64) {
        if ino == ROOT || self.inodes.get(&ino).is_none_or(|i| i.open > 0) {
            return;
        }
        let named = self.inodes.values().any(|i| match &i.content {
            Content::Dir { names, durable } => {
                names.values().any(|&c| c == ino) || durable.values().any(|&c| c == ino)
            }
            Content::File { .. } => false,
        });
        if !named {
            self.inodes.remove(&ino);
        }
    }

    /// Bytes of current file content (for `statfs`).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.inodes.values().map(Inode::size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(m: &mut Model, name: &str) -> u64 {
        m.create(ROOT, OsStr::new(name), false, 0o644, 0, 0)
            .unwrap()
    }

    fn content(m: &Model, ino: u64) -> Vec<u8> {
        m.read(ino, 0, u32::MAX).unwrap().to_vec()
    }

    #[test]
    fn a_write_without_fsync_is_gone_after_a_cut() {
        let mut m = Model::new(0, 0);
        let f = file(&mut m, "a");
        m.sync(ROOT).unwrap();
        m.write(f, 0, b"hello").unwrap();
        assert_eq!(content(&m, f), b"hello");
        m.cut();
        assert_eq!(
            m.lookup(ROOT, OsStr::new("a")),
            Ok(f),
            "the name was synced"
        );
        assert_eq!(content(&m, f), b"", "the data was not");
        assert_eq!(m.counters.bytes_lost, 5);
    }

    #[test]
    fn an_fsynced_write_survives_a_cut_and_later_writes_do_not() {
        let mut m = Model::new(0, 0);
        let f = file(&mut m, "a");
        m.sync(ROOT).unwrap();
        m.write(f, 0, b"hello").unwrap();
        m.sync(f).unwrap();
        m.write(f, 5, b" world").unwrap();
        m.write(f, 0, b"J").unwrap();
        m.cut();
        assert_eq!(content(&m, f), b"hello");
        // A truncation is data too.
        m.set_len(f, 2).unwrap();
        m.cut();
        assert_eq!(content(&m, f), b"hello");
    }

    #[test]
    fn a_create_without_a_directory_fsync_is_gone_after_a_cut_even_if_the_file_was_synced() {
        let mut m = Model::new(0, 0);
        let f = file(&mut m, "a");
        m.write(f, 0, b"data").unwrap();
        m.sync(f).unwrap();
        m.cut();
        assert_eq!(m.lookup(ROOT, OsStr::new("a")), Err(Errno::ENOENT));
        assert!(m.get(f).is_err(), "the orphaned inode is dropped");
        assert_eq!(m.counters.names_reverted, 1);
    }

    #[test]
    fn unlinks_and_renames_are_undone_unless_the_directory_was_synced() {
        let mut m = Model::new(0, 0);
        let a = file(&mut m, "a");
        let b = file(&mut m, "b");
        m.write(a, 0, b"A").unwrap();
        m.sync(a).unwrap();
        m.sync(ROOT).unwrap();
        m.unlink(ROOT, OsStr::new("a"), false).unwrap();
        m.rename(ROOT, OsStr::new("b"), ROOT, OsStr::new("c"))
            .unwrap();
        assert_eq!(m.lookup(ROOT, OsStr::new("a")), Err(Errno::ENOENT));
        m.cut();
        // The unlinked file comes back with its synced bytes; the rename is undone.
        assert_eq!(m.lookup(ROOT, OsStr::new("a")), Ok(a));
        assert_eq!(content(&m, a), b"A");
        assert_eq!(m.lookup(ROOT, OsStr::new("b")), Ok(b));
        assert_eq!(m.lookup(ROOT, OsStr::new("c")), Err(Errno::ENOENT));
        // Synced, they stay.
        m.unlink(ROOT, OsStr::new("a"), false).unwrap();
        m.rename(ROOT, OsStr::new("b"), ROOT, OsStr::new("c"))
            .unwrap();
        m.sync(ROOT).unwrap();
        m.cut();
        assert_eq!(m.lookup(ROOT, OsStr::new("a")), Err(Errno::ENOENT));
        assert_eq!(m.lookup(ROOT, OsStr::new("c")), Ok(b));
        assert!(m.get(a).is_err());
    }

    #[test]
    fn a_directory_s_names_need_their_own_sync_and_the_parent_s() {
        let mut m = Model::new(0, 0);
        let d = m.create(ROOT, OsStr::new("d"), true, 0o755, 0, 0).unwrap();
        let f = m.create(d, OsStr::new("f"), false, 0o644, 0, 0).unwrap();
        m.sync(d).unwrap();
        m.cut();
        // The file's name was durable in d, but d's own name was not in the root.
        assert_eq!(m.lookup(ROOT, OsStr::new("d")), Err(Errno::ENOENT));
        assert!(m.get(f).is_err());
    }

    #[test]
    fn an_unlinked_file_lives_while_open_and_replaced_files_are_dropped() {
        let mut m = Model::new(0, 0);
        let a = file(&mut m, "a");
        m.opened(a).unwrap();
        m.unlink(ROOT, OsStr::new("a"), false).unwrap();
        m.write(a, 0, b"x").unwrap();
        m.released(a);
        assert!(m.get(a).is_err());
        let b = file(&mut m, "b");
        let c = file(&mut m, "c");
        m.rename(ROOT, OsStr::new("b"), ROOT, OsStr::new("c"))
            .unwrap();
        assert_eq!(m.lookup(ROOT, OsStr::new("c")), Ok(b));
        assert!(m.get(c).is_err());
        assert_eq!(m.unlink(ROOT, OsStr::new("c"), true), Err(Errno::ENOTDIR));
    }

    #[test]
    fn writes_past_the_end_fill_with_zeros() {
        let mut m = Model::new(0, 0);
        let f = file(&mut m, "a");
        m.write(f, 3, b"x").unwrap();
        assert_eq!(content(&m, f), b"\0\0\0x");
        assert_eq!(m.read(f, 2, 1).unwrap(), b"\0");
        assert_eq!(m.read(f, 10, 1).unwrap(), b"");
    }
}
