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
//! Large stand-in envelopes (`Rpc::stand_in_file_seals`) are hollow
//! ([`seal::PairKey::hollow_stand_in`]): a zeroed buffer of the envelope's length with the
//! stand-in's header and a tag saying it is hollow, its content kept here under the header.
//! Every copy of the envelope, a fragment's reassembly included, carries the header, so the
//! recipient finds the content by it; no byte of a 100 MB body is copied or even mapped. An
//! entry stands while the envelope's buffer lives, or while anyone else holds its content (so
//! a copy reassembled after the buffer was freed still finds it). A hollow envelope whose
//! content is not found is counted ([`SharedMemo::hollow_misses`]): the simulator takes a run
//! with any as failed, as its records could differ from real seals'.

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

/// A file sealed pairwise: the envelope's buffer (a clone: in use elsewhere while it is not
/// the only handle), its recipient, and the content sealed in it.
struct Sealed {
    envelope: Bytes,
    recipient: PublicKey,
    content: Bytes,
}

/// The content of a hollow stand-in.
struct Hollow {
    content: Bytes,
    /// Lives as long as the envelope's buffer.
    alive: Weak<()>,
    /// When it was noted, for evicting the oldest when the table is full.
    seq: u64,
}

impl Hollow {
    fn needed(&self) -> bool {
        self.alive.strong_count() > 0 || !self.content.is_unique()
    }
}

/// Hollow stand-ins' contents remembered at most: more than a simulated network has files in
/// flight. Beyond, the oldest goes (and a later look-up for it is a miss).
const MAX_HOLLOW: usize = 4096;

/// Most verified envelopes remembered; emptied when full.
const MAX_VERIFIED: usize = 4096;

/// A hollow stand-in's buffer, with the token its entry watches.
struct HollowBuffer {
    buf: Vec<u8>,
    _alive: Arc<()>,
}

impl AsRef<[u8]> for HollowBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

#[derive(Default)]
struct Memo {
    hashes: Vec<Entry>,
    sealed: Vec<Sealed>,
    /// Signed, unencrypted envelopes whose signature an engine checked, and what they opened to.
    verified: BTreeMap<Bytes, seal::Opened>,
    /// Hollow stand-ins' contents by the envelope's header.
    hollow: BTreeMap<Box<[u8]>, Hollow>,
    hollow_seq: u64,
    hollow_misses: u64,
}

/// The hashes of large buffers that several engines see, and the contents of large files sealed
/// among them, shared by cloning.
#[derive(Clone, Default)]
pub struct SharedMemo(Arc<Mutex<Memo>>);

impl std::fmt::Debug for SharedMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("SharedMemo")
            .field("entries", &memo.hashes.len())
            .field("sealed", &memo.sealed.len())
            .field("hollow", &memo.hollow.len())
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
        self.remember_hash(content, hash);
        hash
    }

    /// Notes that `content` hashes to `hash`, for a caller that knows it without hashing these
    /// bytes (a simulator that made them from a recipe it hashed before): engines sharing the
    /// memo take it as computed ([`SharedMemo::hash`]). A wrong hash is the caller's bug, and
    /// names the file wrongly everywhere.
    pub fn note_hash(&self, content: &Bytes, hash: [u8; 32]) {
        if content.len() >= MIN_BYTES {
            self.remember_hash(content, hash);
        }
    }

    /// Remembers `content`'s hash (once), letting go of buffers nobody else holds.
    fn remember_hash(&self, content: &Bytes, hash: [u8; 32]) {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let hashes = &mut memo.hashes;
        if hashes.iter().any(|(b, _)| same(b, content)) {
            return;
        }
        hashes.retain(|(b, _)| !b.is_unique());
        if hashes.len() >= MAX_ENTRIES {
            hashes.remove(0);
        }
        hashes.push((content.clone(), hash));
    }

    /// Notes that `envelope` is `content` sealed pairwise to `recipient` (by the caller, just
    /// now: the envelope is its own, unchanged).
    pub(crate) fn sealed(&self, envelope: &Bytes, recipient: PublicKey, content: &Bytes) {
        if envelope.len() >= MIN_BYTES {
            let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let sealed = &mut memo.sealed;
            sealed.retain(|s| !s.envelope.is_unique());
            if sealed.len() >= MAX_ENTRIES {
                sealed.remove(0);
            }
            sealed.push(Sealed {
                envelope: envelope.clone(),
                recipient,
                content: content.clone(),
            });
        }
    }

    /// `content` in a stand-in envelope from `pair`'s node to its peer: a large one hollow
    /// ([`seal::PairKey::hollow_stand_in`]), its content noted here under its header.
    pub(crate) fn seal_stand_in(
        &self,
        pair: &seal::PairKey,
        content: &Bytes,
        entropy: [u8; 32],
    ) -> Bytes {
        if content.len() + seal::PAIRWISE_OVERHEAD < MIN_BYTES {
            return Bytes::from(pair.seal_stand_in(content, entropy));
        }
        let buf = pair.hollow_stand_in(content.len(), entropy);
        let alive = Arc::new(());
        let token = Arc::downgrade(&alive);
        let envelope = Bytes::from_owner(HollowBuffer { buf, _alive: alive });
        let header = Box::from(&envelope[..seal::PAIRWISE_HEADER_LEN]);
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = memo.hollow_seq;
        memo.hollow_seq += 1;
        memo.hollow.retain(|_, h| h.needed());
        if memo.hollow.len() >= MAX_HOLLOW
            && let Some(oldest) = memo
                .hollow
                .iter()
                .min_by_key(|(_, h)| h.seq)
                .map(|(k, _)| k.clone())
        {
            memo.hollow.remove(&oldest);
        }
        let entry = Hollow {
            content: content.clone(),
            alive: token,
            seq,
        };
        memo.hollow.insert(header, entry);
        envelope
    }

    /// The content of the hollow stand-in whose header is `header`
    /// ([`seal::PairKey::open_hollow_stand_in`]); `None`, counted as a miss, if it is not
    /// remembered.
    pub(crate) fn hollow_content(&self, header: &[u8]) -> Option<Bytes> {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let content = memo.hollow.get(header).map(|h| h.content.clone());
        if content.is_none() {
            memo.hollow_misses += 1;
        }
        content
    }

    /// Hollow stand-ins that arrived whose content was not remembered: each opened to nothing,
    /// where a real envelope would have opened.
    pub fn hollow_misses(&self) -> u64 {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .hollow_misses
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
            .find(|s| same(&s.envelope, envelope) && s.recipient == *recipient)
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
    fn a_hollow_stand_in_opens_by_its_header_while_its_envelope_or_content_is_held() {
        let memo = SharedMemo::default();
        let id = |n| seal::Identity::from_secret([n; 32]);
        let (a, b) = (id(1), id(2));
        let (ab, ba) = (
            a.pair_key(&b.public()).unwrap(),
            b.pair_key(&a.public()).unwrap(),
        );
        let content = Bytes::from(vec![7u8; 2 * MIN_BYTES]);
        let envelope = memo.seal_stand_in(&ab, &content, [1; 32]);
        let stand_in = ab.seal_stand_in(&content, [1; 32]);
        assert_eq!(envelope.len(), stand_in.len());
        assert_eq!(
            envelope[..seal::PAIRWISE_HEADER_LEN],
            stand_in[..seal::PAIRWISE_HEADER_LEN]
        );
        let opened = |e: &Bytes| memo.hollow_content(ba.open_hollow_stand_in(e).unwrap());
        assert!(same(&opened(&envelope).unwrap(), &content));
        // A copy in another buffer (a reassembled fragment) finds it by its header.
        let copy = Bytes::copy_from_slice(&envelope);
        assert!(same(&opened(&copy).unwrap(), &content));
        // Still found once the envelope is dropped, as the content is held elsewhere.
        drop(envelope);
        let other = Bytes::from(vec![9u8; 2 * MIN_BYTES]);
        let second = memo.seal_stand_in(&ab, &other, [2; 32]);
        assert!(same(&opened(&copy).unwrap(), &content));
        assert!(same(&opened(&second).unwrap(), &other));
        // Let go once neither is held: the copy opens to nothing, counted.
        drop(content);
        let third = memo.seal_stand_in(&ab, &other, [3; 32]);
        assert_eq!(memo.hollow_misses(), 0);
        assert!(opened(&copy).is_none());
        assert_eq!(memo.hollow_misses(), 1);
        assert_eq!(memo.0.lock().unwrap().hollow.len(), 2);
        drop((second, third));
    }

    #[test]
    fn a_small_stand_in_carries_its_content() {
        let memo = SharedMemo::default();
        let id = |n| seal::Identity::from_secret([n; 32]);
        let ab = id(1).pair_key(&id(2).public()).unwrap();
        let content = Bytes::from_static(b"a small file");
        let envelope = memo.seal_stand_in(&ab, &content, [1; 32]);
        assert_eq!(envelope[..], ab.seal_stand_in(&content, [1; 32])[..]);
        assert!(memo.0.lock().unwrap().hollow.is_empty());
    }
}
