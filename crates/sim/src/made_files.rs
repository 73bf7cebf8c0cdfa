//! The files simulated calls carry: a few bytes that name them, then zeros. Only a file's length
//! matters to a simulated network, so nothing else is computed: a large zeroed buffer is fresh
//! pages of the allocator that nobody writes. Such a file is a function of its head and length,
//! and so is its BLAKE3 hash (by which the data channel names it): each is hashed once per
//! process, and the engines are told the hash ([`rpc::SharedMemo::note_hash`]) instead of each
//! run hashing the same 100 MB again.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

/// Hashes remembered at most (a file's head and length each, and 32 bytes); emptied when full.
/// A whole `ferry eval` makes a few hundred distinct files.
const MAX_HASHES: usize = 65_536;

/// A made file: its head and its length.
type Recipe = (Vec<u8>, usize);

static HASHES: Mutex<BTreeMap<Recipe, [u8; 32]>> = Mutex::new(BTreeMap::new());

/// A file of `len` bytes: `head` (cut to `len`), then zeros; and its BLAKE3 hash.
pub(crate) fn zero_tailed(head: &[u8], len: usize) -> (Bytes, [u8; 32]) {
    let head = &head[..head.len().min(len)];
    let mut content = vec![0; len];
    content[..head.len()].copy_from_slice(head);
    let key = (head.to_vec(), len);
    let known = HASHES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .copied();
    let hash = known.unwrap_or_else(|| {
        // Hashed without the lock: other runs of the process go on meanwhile.
        let hash = *blake3::hash(&content).as_bytes();
        let mut hashes = HASHES.lock().unwrap_or_else(PoisonError::into_inner);
        if hashes.len() >= MAX_HASHES {
            hashes.clear();
        }
        hashes.insert(key, hash);
        hash
    });
    (Bytes::from(content), hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_file_is_its_head_then_zeros_and_its_hash_is_its_own() {
        for (head, len) in [(&b"abc"[..], 10), (b"abc", 2), (b"", 5), (b"abcd", 200_000)] {
            for _ in 0..2 {
                let (content, hash) = zero_tailed(head, len);
                assert_eq!(content.len(), len);
                let n = head.len().min(len);
                assert_eq!(&content[..n], &head[..n]);
                assert!(content[n..].iter().all(|&b| b == 0));
                assert_eq!(hash, *blake3::hash(&content).as_bytes());
            }
        }
        // Another head or length, another file.
        assert_ne!(zero_tailed(b"abc", 10).1, zero_tailed(b"abd", 10).1);
        assert_ne!(zero_tailed(b"abc", 10).1, zero_tailed(b"abc", 11).1);
    }
}
