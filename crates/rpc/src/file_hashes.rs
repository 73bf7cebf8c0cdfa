//! BLAKE3 hashes of large data-channel files, remembered by buffer for the engines that share
//! one ([`Rpc::share_file_hashes`](crate::Rpc::share_file_hashes)).
//!
//! Every engine a file reaches names it by its hash, so a file broadcast to many nodes is hashed
//! by each. Where those nodes live in one process and share the file's buffer (the simulator's
//! nodes share every bundle payload), the hash is computed once: an entry is found by the
//! buffer's address and length, and holds a clone of the buffer, so that while it stands the
//! memory can be neither freed nor reused for other bytes (a `Bytes` is immutable). An entry is
//! let go as soon as nothing but the memo holds its buffer.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

/// Files shorter than this are hashed every time: cheaper than a look-up.
const MIN_BYTES: usize = 64 * 1024;

/// Buffers remembered at most (those still held elsewhere; a broadcast carries few at once).
const MAX_ENTRIES: usize = 32;

/// A remembered buffer (a clone, which keeps its bytes) and its hash.
type Entry = (Bytes, [u8; 32]);

/// The hashes of large buffers that several engines see, shared by cloning.
#[derive(Clone, Default)]
pub struct FileHashes(Arc<Mutex<Vec<Entry>>>);

impl std::fmt::Debug for FileHashes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("FileHashes")
            .field("entries", &entries)
            .finish()
    }
}

impl FileHashes {
    /// The BLAKE3 hash of `content`, computed unless this very buffer was hashed before.
    pub fn hash(&self, content: &Bytes) -> [u8; 32] {
        if content.len() < MIN_BYTES {
            return hash_of(content);
        }
        let same = |b: &Bytes| b.as_ptr() == content.as_ptr() && b.len() == content.len();
        {
            let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, hash)) = memo.iter().find(|(b, _)| same(b)) {
                return *hash;
            }
        }
        // Hashed without the lock: another engine of the process may hash meanwhile.
        let hash = hash_of(content);
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        memo.retain(|(b, _)| !b.is_unique());
        if memo.len() >= MAX_ENTRIES {
            memo.remove(0);
        }
        memo.push((content.clone(), hash));
        hash
    }
}

/// The BLAKE3 hash a data-channel file is named by.
pub(crate) fn hash_of(content: &[u8]) -> [u8; 32] {
    *blake3::hash(content).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_buffer_is_hashed_once_and_let_go_when_nobody_holds_it() {
        let memo = FileHashes::default();
        let a = Bytes::from(vec![7u8; MIN_BYTES]);
        let h = memo.hash(&a);
        assert_eq!(h, hash_of(&a));
        assert_eq!(memo.hash(&a.clone()), h);
        // Equal bytes in another buffer: another entry, the same hash.
        let b = Bytes::from(vec![7u8; MIN_BYTES]);
        assert_eq!(memo.hash(&b), h);
        // A slice of the buffer is other bytes.
        let part = a.slice(1..);
        assert_eq!(memo.hash(&part), hash_of(&part));
        drop((a, b, part));
        memo.hash(&Bytes::from(vec![1u8; MIN_BYTES]));
        assert_eq!(memo.0.lock().unwrap().len(), 1);
    }
}
