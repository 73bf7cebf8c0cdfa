//! What engines in one process compute alike, computed once: BLAKE3 hashes of large
//! data-channel files, what large sealed files open to, and which small signed envelopes were
//! verified, for the engines that share one ([`Rpc::share_memo`](crate::Rpc::share_memo)).
//! Everything it returns is what the engine would have computed itself.
//!
//! Every engine a file reaches names it by its hash, so a file broadcast to many nodes is hashed
//! by each. Where those nodes live in one process and share the file's buffer (the simulator's
//! nodes share every bundle payload), the hash is computed once: an entry is found by the
//! buffer's address and length, and holds a clone of the buffer, so that while it stands the
//! memory can be neither freed nor reused for other bytes (a `Bytes` is immutable). An entry is
//! let go as soon as nothing but the memo holds its buffer.
//!
//! The same goes for a file sealed pairwise to one node: the engine that sealed it notes the
//! sealed buffer with the content it sealed, and the recipient's engine, handed that very buffer,
//! takes the content instead of decrypting a copy. Opening it would give the same bytes: the
//! buffer is the sealer's own envelope for this recipient, unchanged.
//!
//! And for small signed envelopes that are not encrypted (hellos, calls to every node): one
//! engine's check of a signature holds for every engine, as it depends on the envelope's bytes
//! alone, so an envelope one engine verified opens at the others without checking again. In a
//! simulated network of 64 nodes, every node's hello reaches the 63 others.
//!
//! Large stand-in envelopes (`Rpc::stand_in_file_seals`) are made in buffers it lends: one comes
//! back when the last `Bytes` of its envelope is dropped, for the next stand-in. Its pages are
//! mapped already, where a new 100 MB buffer costs 25,600 page faults and as many pages zeroed
//! by the kernel before the copy. At most [`POOL_BYTES`] wait for reuse.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use seal::PublicKey;

/// Files shorter than this are hashed every time: cheaper than a look-up.
const MIN_BYTES: usize = 64 * 1024;

/// Buffers remembered at most (those still held elsewhere; a broadcast carries few at once).
const MAX_ENTRIES: usize = 32;

/// A remembered buffer (a clone, which keeps its bytes) and its hash.
type Entry = (Bytes, [u8; 32]);

/// A file sealed pairwise: the envelope's buffer, its recipient, and the content sealed in it.
struct Sealed {
    envelope: Envelope,
    recipient: PublicKey,
    content: Bytes,
}

/// How an entry knows its envelope.
enum Envelope {
    /// By a clone: its buffer is in use elsewhere while the clone is not its only handle.
    Held(Bytes),
    /// A stand-in in a lent buffer, by address and length and a token that lives as long as the
    /// buffer is lent (a lent buffer's `Bytes` cannot tell whether it is the only handle, and
    /// a clone would keep the buffer from its pool).
    Lent {
        at: usize,
        len: usize,
        alive: Weak<()>,
    },
}

impl Envelope {
    fn is(&self, b: &Bytes) -> bool {
        match self {
            Envelope::Held(e) => same(e, b),
            Envelope::Lent { at, len, alive } => {
                *at == b.as_ptr() as usize && *len == b.len() && alive.strong_count() > 0
            }
        }
    }

    fn in_use(&self) -> bool {
        match self {
            Envelope::Held(e) => !e.is_unique(),
            Envelope::Lent { alive, .. } => alive.strong_count() > 0,
        }
    }
}

/// Most verified envelopes remembered; emptied when full.
const MAX_VERIFIED: usize = 4096;

/// Bytes of buffers kept for reuse at most; beyond, a buffer let go is freed.
const POOL_BYTES: usize = 1 << 30;

/// Buffers let go, for reuse, and their total capacity.
#[derive(Default)]
struct Pool {
    free: Vec<Vec<u8>>,
    bytes: usize,
}

/// A buffer lent to a `Bytes`: back to its pool when the last of them is dropped.
struct Lent {
    buf: Vec<u8>,
    pool: Weak<Mutex<Pool>>,
    /// Lives while the buffer is lent ([`Envelope::Lent`]).
    _alive: Arc<()>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        let mut pool = pool.lock().unwrap_or_else(PoisonError::into_inner);
        let capacity = self.buf.capacity();
        if pool.bytes + capacity <= POOL_BYTES {
            pool.bytes += capacity;
            pool.free.push(std::mem::take(&mut self.buf));
        }
    }
}

#[derive(Default)]
struct Memo {
    hashes: Vec<Entry>,
    sealed: Vec<Sealed>,
    /// Signed, unencrypted envelopes whose signature an engine checked, and what they opened to.
    verified: BTreeMap<Bytes, seal::Opened>,
}

/// The hashes of large buffers that several engines see, and the contents of large files sealed
/// among them, shared by cloning.
#[derive(Clone, Default)]
pub struct SharedMemo(Arc<Mutex<Memo>>, Arc<Mutex<Pool>>);

impl std::fmt::Debug for SharedMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("SharedMemo")
            .field("entries", &memo.hashes.len())
            .field("sealed", &memo.sealed.len())
            .finish()
    }
}

fn same(a: &Bytes, b: &Bytes) -> bool {
    a.as_ptr() == b.as_ptr() && a.len() == b.len()
}

impl SharedMemo {
    /// The BLAKE3 hash of `content`, computed unless this very buffer was hashed before.
    pub fn hash(&self, content: &Bytes) -> [u8; 32] {
        if content.len() < MIN_BYTES {
            return hash_of(content);
        }
        {
            let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, hash)) = memo.hashes.iter().find(|(b, _)| same(b, content)) {
                return *hash;
            }
        }
        // Hashed without the lock: another engine of the process may hash meanwhile.
        let hash = hash_of(content);
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let hashes = &mut memo.hashes;
        hashes.retain(|(b, _)| !b.is_unique());
        if hashes.len() >= MAX_ENTRIES {
            hashes.remove(0);
        }
        hashes.push((content.clone(), hash));
        hash
    }

    /// Notes that `envelope` is `content` sealed pairwise to `recipient` (by the caller, just
    /// now: the envelope is its own, unchanged).
    pub(crate) fn sealed(&self, envelope: &Bytes, recipient: PublicKey, content: &Bytes) {
        if envelope.len() >= MIN_BYTES {
            self.note_sealed(Envelope::Held(envelope.clone()), recipient, content);
        }
    }

    fn note_sealed(&self, envelope: Envelope, recipient: PublicKey, content: &Bytes) {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let sealed = &mut memo.sealed;
        sealed.retain(|s| s.envelope.in_use());
        if sealed.len() >= MAX_ENTRIES {
            sealed.remove(0);
        }
        sealed.push(Sealed {
            envelope,
            recipient,
            content: content.clone(),
        });
    }

    /// `content` in a stand-in envelope from `pair`'s node to its peer
    /// ([`seal::PairKey::seal_stand_in`]), noted as [`SharedMemo::sealed`] does; a large one in a
    /// buffer lent by the memo, which comes back for the next stand-in once the envelope is
    /// dropped.
    pub(crate) fn seal_stand_in(
        &self,
        pair: &seal::PairKey,
        content: &Bytes,
        entropy: [u8; 32],
    ) -> Bytes {
        let len = content.len() + seal::PAIRWISE_OVERHEAD;
        if len < MIN_BYTES {
            return Bytes::from(pair.seal_stand_in(content, entropy));
        }
        let buf = pair.seal_stand_in_into(content, entropy, self.buffer(len));
        let alive = Arc::new(());
        let token = Arc::downgrade(&alive);
        let envelope = Bytes::from_owner(Lent {
            buf,
            pool: Arc::downgrade(&self.1),
            _alive: alive,
        });
        let noted = Envelope::Lent {
            at: envelope.as_ptr() as usize,
            len: envelope.len(),
            alive: token,
        };
        self.note_sealed(noted, pair.peer(), content);
        envelope
    }

    /// An empty buffer for `len` bytes: the smallest free one large enough, or a new one.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let mut pool = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = (0..pool.free.len())
            .filter(|&i| pool.free[i].capacity() >= len)
            .min_by_key(|&i| pool.free[i].capacity());
        match fits {
            Some(i) => {
                let buf = pool.free.swap_remove(i);
                pool.bytes -= buf.capacity();
                buf
            }
            None => Vec::with_capacity(len),
        }
    }

    /// The content sealed in `envelope`, if this very buffer was sealed to `recipient` by an
    /// engine sharing the memo: what opening it would give.
    pub(crate) fn opened(&self, envelope: &Bytes, recipient: &PublicKey) -> Option<Bytes> {
        if envelope.len() < MIN_BYTES {
            return None;
        }
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        memo.sealed
            .iter()
            .find(|s| s.envelope.is(envelope) && s.recipient == *recipient)
            .map(|s| s.content.clone())
    }
}

impl SharedMemo {
    /// What `sealed` opened to when an engine sharing the memo verified these very bytes (a
    /// signed envelope that is not encrypted).
    pub(crate) fn verified(&self, sealed: &[u8]) -> Option<seal::Opened> {
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        memo.verified.get(sealed).cloned()
    }

    /// Notes that `sealed`, a signed envelope that is not encrypted, was verified and opened to
    /// `opened`.
    pub(crate) fn note_verified(&self, sealed: &[u8], opened: &seal::Opened) {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.verified.len() >= MAX_VERIFIED {
            memo.verified.clear();
        }
        memo.verified
            .insert(Bytes::copy_from_slice(sealed), opened.clone());
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
        let memo = SharedMemo::default();
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
        assert_eq!(memo.0.lock().unwrap().hashes.len(), 1);
    }

    #[test]
    fn a_sealed_buffer_opens_to_its_content_for_its_recipient_only() {
        let memo = SharedMemo::default();
        let (alice, bob) = (PublicKey([1; 32]), PublicKey([2; 32]));
        let content = Bytes::from(vec![7u8; MIN_BYTES]);
        let envelope = Bytes::from(vec![9u8; MIN_BYTES + 10]);
        memo.sealed(&envelope, bob, &content);
        let opened = memo.opened(&envelope.clone(), &bob).unwrap();
        assert!(same(&opened, &content));
        assert!(memo.opened(&envelope, &alice).is_none());
        // Equal bytes in another buffer, or a slice of it, are not the envelope.
        let copy = Bytes::copy_from_slice(&envelope);
        assert!(memo.opened(&copy, &bob).is_none());
        assert!(memo.opened(&envelope.slice(1..), &bob).is_none());
        // Let go once nobody else holds the envelope.
        drop(envelope);
        memo.sealed(&Bytes::from(vec![1u8; MIN_BYTES]), bob, &content);
        assert_eq!(memo.0.lock().unwrap().sealed.len(), 1);
    }

    #[test]
    fn a_verified_envelope_is_found_by_its_bytes_and_the_table_is_bounded() {
        let memo = SharedMemo::default();
        let opened = seal::Opened {
            sender: PublicKey([1; 32]),
            encrypted: false,
            body: b"hello".to_vec(),
        };
        memo.note_verified(b"an envelope", &opened);
        assert_eq!(memo.verified(b"an envelope"), Some(opened.clone()));
        assert_eq!(memo.verified(b"an envelopE"), None);
        assert_eq!(memo.verified(b"an envelop"), None);
        for i in 0..MAX_VERIFIED as u32 {
            memo.note_verified(&i.to_be_bytes(), &opened);
        }
        assert!(memo.0.lock().unwrap().verified.len() <= MAX_VERIFIED);
    }

    #[test]
    fn a_stand_in_is_made_in_a_lent_buffer_that_comes_back_when_the_envelope_is_dropped() {
        let memo = SharedMemo::default();
        let id = |n| seal::Identity::from_secret([n; 32]);
        let (a, b, c) = (id(1), id(2), id(3));
        let (ab, ac) = (
            a.pair_key(&b.public()).unwrap(),
            a.pair_key(&c.public()).unwrap(),
        );
        let content = Bytes::from(vec![7u8; 2 * MIN_BYTES]);
        let first = memo.seal_stand_in(&ab, &content, [1; 32]);
        assert_eq!(first[..], ab.seal_stand_in(&content, [1; 32])[..]);
        assert!(same(&memo.opened(&first, &b.public()).unwrap(), &content));
        assert!(memo.opened(&first, &c.public()).is_none());
        let at = first.as_ptr();
        let copy = first.clone();
        drop(first);
        // Still in use by the copy: a new stand-in gets another buffer.
        let other = Bytes::from(vec![9u8; 2 * MIN_BYTES]);
        let second = memo.seal_stand_in(&ac, &other, [2; 32]);
        assert_ne!(second.as_ptr(), at);
        assert!(same(&memo.opened(&copy, &b.public()).unwrap(), &content));
        drop((copy, second));
        // Both back: the next one reuses a buffer, and the old entries do not stand for it.
        let third = memo.seal_stand_in(&ac, &other, [3; 32]);
        assert_eq!(third[..], ac.seal_stand_in(&other, [3; 32])[..]);
        assert!(memo.opened(&third, &b.public()).is_none());
        assert!(same(&memo.opened(&third, &c.public()).unwrap(), &other));
        assert_eq!(memo.1.lock().unwrap().free.len(), 1);
    }
}
