//! Pairwise envelopes: authenticated encryption under a key two nodes share, with no signature.
//!
//! A signed and encrypted envelope costs its sender an Ed25519 signature and two X25519
//! multiplications, and its recipient a signature check and one multiplication: ≈270 µs a
//! message on the machines Ferry is measured on, more than the rest of a call over a live path.
//! Two nodes that know each other's keys can do without all of it: `X25519(our secret, their
//! public key)` is a secret only the two of them can compute (the static-static exchange of
//! Noise's KK pattern and of WireGuard), so a message sealed with a key derived from it can only
//! come from the other one. Computed once per peer ([`Identity::pair_key`]) and kept, sealing and
//! opening are a keyed hash and XChaCha20-Poly1305: a few microseconds.
//!
//! What it gives up against a signed envelope: nobody but the recipient can check it (a relay
//! cannot verify it, and the recipient cannot prove to a third party who sent it), and it has no
//! forward secrecy against the later loss of either node's long-term key.
//!
//! The layout (version 1, flags `0x03`), the key and nonce derivations and the associated data
//! are in `docs/protocol.md`, sections 2 and 3.

use chacha20poly1305::aead::{AeadInPlace as _, KeyInit as _};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

use crate::envelope::{OpenError, Opened, SealError, VERSION};
use crate::identity::Identity;
use crate::key::PublicKey;

/// Flags byte of a pairwise envelope: encrypted (bit 0) and pairwise (bit 1).
pub(crate) const FLAGS_PAIRWISE: u8 = 0x03;
const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Bytes of a pairwise envelope's header: version, flags, sender, recipient, nonce.
pub const PAIRWISE_HEADER_LEN: usize = 2 + 2 * KEY_LEN + NONCE_LEN;
const HEADER_LEN: usize = PAIRWISE_HEADER_LEN;

/// The tag of a [`PairKey::hollow_stand_in`]: ones, where a [`PairKey::seal_stand_in`]'s is
/// zeros (a real envelope's tag is either with a chance of 2⁻¹²⁸).
pub const HOLLOW_TAG: [u8; TAG_LEN] = [0xff; TAG_LEN];

/// Bytes a pairwise envelope adds to its body: 106 (version, flags, two keys, nonce, tag).
pub const PAIRWISE_OVERHEAD: usize = HEADER_LEN + TAG_LEN;

const PAIR_KEY_CONTEXT: &str = "ferry-seal v1 pairwise key";
pub(crate) const NONCE_KEY_CONTEXT: &str = "ferry-seal v1 pairwise nonce key";

/// The key this node shares with one peer: what seals envelopes to it and opens envelopes from
/// it. Zeroed when dropped.
#[derive(Clone)]
pub struct PairKey {
    me: PublicKey,
    peer: PublicKey,
    /// The AEAD under the pair's key, set up once (the crate zeroes its key when dropped).
    cipher: XChaCha20Poly1305,
    nonce_key: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for PairKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("PairKey")
            .field("me", &self.me)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// The sender of a pairwise envelope, **unverified**, if `sealed` is one (else `None`): what
/// tells a receiver which [`PairKey`] to open it with.
pub fn pairwise_sender(sealed: &[u8]) -> Option<PublicKey> {
    if sealed.len() < PAIRWISE_OVERHEAD || sealed[0] != VERSION || sealed[1] != FLAGS_PAIRWISE {
        return None;
    }
    Some(PublicKey(sealed[2..34].try_into().ok()?))
}

impl Identity {
    /// The key this identity shares with `peer` (which may be itself). Costs one X25519
    /// multiplication: compute it once per peer and keep it. Fails only if `peer` is not a
    /// valid public key.
    pub fn pair_key(&self, peer: &PublicKey) -> Result<PairKey, SealError> {
        let montgomery = peer
            .verifying_key()
            .ok_or(SealError::InvalidRecipient(*peer))?
            .to_montgomery();
        let shared = Zeroizing::new(montgomery.mul_clamped(*self.x25519).to_bytes());
        if *shared == [0; 32] {
            return Err(SealError::InvalidRecipient(*peer));
        }
        let (lo, hi) = if self.public.0 <= peer.0 {
            (self.public, *peer)
        } else {
            (*peer, self.public)
        };
        let mut hasher = blake3::Hasher::new_derive_key(PAIR_KEY_CONTEXT);
        hasher.update(&shared[..]);
        hasher.update(&lo.0);
        hasher.update(&hi.0);
        let key = Zeroizing::new(*hasher.finalize().as_bytes());
        Ok(PairKey {
            me: self.public,
            peer: *peer,
            cipher: XChaCha20Poly1305::new(key.as_ref().into()),
            nonce_key: self.pairwise_nonce_key.clone(),
        })
    }
}

impl PairKey {
    /// The peer this key is shared with.
    pub fn peer(&self) -> PublicKey {
        self.peer
    }

    /// Wraps `body` in a pairwise envelope from us to the peer. `entropy` makes the nonce (pass
    /// 32 fresh random bytes; repeated entropy costs nothing but the envelope's uniqueness). The
    /// result is `body.len() +` [`PAIRWISE_OVERHEAD`] bytes long.
    pub fn seal(&self, body: &[u8], entropy: [u8; 32]) -> Vec<u8> {
        let mut hasher = blake3::Hasher::new_keyed(&self.nonce_key);
        hasher.update(&entropy);
        hasher.update(&self.peer.0);
        hasher.update(body);
        let mut out = Vec::with_capacity(body.len() + PAIRWISE_OVERHEAD);
        self.write_header(&hasher.finalize(), &mut out);
        out.extend_from_slice(body);
        let (header, plaintext) = out.split_at_mut(HEADER_LEN);
        let tag = self
            .cipher
            .encrypt_in_place_detached(XNonce::from_slice(&header[66..]), header, plaintext)
            .expect("XChaCha20-Poly1305 encrypts up to 256 GiB");
        out.extend_from_slice(&tag);
        out
    }

    /// Opens a pairwise envelope the peer sealed to us. Anything else — another sender, another
    /// recipient, a modified, truncated or extended envelope — is an error.
    pub fn open(&self, sealed: &[u8]) -> Result<Opened, OpenError> {
        self.check_header(sealed)?;
        let (header, rest) = sealed.split_at(HEADER_LEN);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut body = ciphertext.to_vec();
        self.cipher
            .decrypt_in_place_detached(
                XNonce::from_slice(&header[66..]),
                header,
                &mut body,
                Tag::from_slice(tag),
            )
            .map_err(|_| OpenError::Decrypt)?;
        Ok(Opened {
            sender: self.peer,
            encrypted: true,
            body,
        })
    }

    /// A **stand-in** for [`seal`](Self::seal), for simulators only: an envelope of the same
    /// length with the same header (this key's sender and recipient, a nonce from `entropy`),
    /// but the body in the clear and a tag of zeros. It hides and authenticates nothing; what it
    /// saves is the cipher and the keyed hash over the body, which a simulator whose nodes
    /// compute in no simulated time has no use for when only an envelope's length and route
    /// matter. [`open`](Self::open) refuses it ([`OpenError::Decrypt`]);
    /// [`open_stand_in`](Self::open_stand_in) takes it.
    pub fn seal_stand_in(&self, body: &[u8], entropy: [u8; 32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + PAIRWISE_OVERHEAD);
        self.write_header(&self.stand_in_nonce(entropy), &mut out);
        out.extend_from_slice(body);
        out.extend_from_slice(&[0; TAG_LEN]);
        out
    }

    /// A **hollow stand-in**, for simulators only: a [`seal_stand_in`](Self::seal_stand_in)
    /// envelope for a body of `body_len` bytes whose body is left zero and whose tag is
    /// [`HOLLOW_TAG`]. The simulator carries the content beside it, found by the envelope's
    /// header ([`open_hollow_stand_in`](Self::open_hollow_stand_in)), which is unique to this
    /// seal (the nonce comes from `entropy`). The zeroed buffer is asked of the allocator as
    /// such, so a large one is fresh pages the kernel maps only where they are written or read:
    /// the header and the tag. What it saves over a stand-in is copying the body, and for a
    /// 100 MB body the 25,600 page faults of a new buffer.
    pub fn hollow_stand_in(&self, body_len: usize, entropy: [u8; 32]) -> Vec<u8> {
        let len = body_len + PAIRWISE_OVERHEAD;
        let mut header = Vec::with_capacity(HEADER_LEN);
        self.write_header(&self.stand_in_nonce(entropy), &mut header);
        // Zeroed by the allocator, not written: a large one is pages nobody touched.
        let mut sealed = vec![0; len];
        sealed[..HEADER_LEN].copy_from_slice(&header);
        sealed[len - TAG_LEN..].copy_from_slice(&HOLLOW_TAG);
        sealed
    }

    /// The header of a [`hollow_stand_in`](Self::hollow_stand_in) envelope from the peer to us,
    /// which names its content, checked as far as a stand-in can be (layout, sender, recipient,
    /// the hollow tag).
    pub fn open_hollow_stand_in<'a>(&self, sealed: &'a [u8]) -> Result<&'a [u8], OpenError> {
        self.check_header(sealed)?;
        if sealed[sealed.len() - TAG_LEN..] != HOLLOW_TAG {
            return Err(OpenError::Decrypt);
        }
        Ok(&sealed[..HEADER_LEN])
    }

    /// Where the body of a [`seal_stand_in`](Self::seal_stand_in) envelope from the peer to us
    /// lies in `sealed`, checked as far as a stand-in can be: its layout, sender and recipient,
    /// and its tag of zeros (a real envelope's tag is zero with a chance of 2⁻¹²⁸).
    pub fn open_stand_in(&self, sealed: &[u8]) -> Result<std::ops::Range<usize>, OpenError> {
        self.check_header(sealed)?;
        let tag_at = sealed.len() - TAG_LEN;
        if sealed[tag_at..] != [0; TAG_LEN] {
            return Err(OpenError::Decrypt);
        }
        Ok(HEADER_LEN..tag_at)
    }

    /// A stand-in's nonce: from `entropy` and the peer alone, as a stand-in's body is not
    /// hashed.
    fn stand_in_nonce(&self, entropy: [u8; 32]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.nonce_key);
        hasher.update(&entropy);
        hasher.update(&self.peer.0);
        hasher.finalize()
    }

    /// Version, flags, sender (us), recipient (the peer) and the nonce's first bytes.
    fn write_header(&self, nonce: &blake3::Hash, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.push(FLAGS_PAIRWISE);
        out.extend_from_slice(&self.me.0);
        out.extend_from_slice(&self.peer.0);
        out.extend_from_slice(&nonce.as_bytes()[..NONCE_LEN]);
    }

    /// That `sealed` is long enough for a pairwise envelope, of this version, from the peer to
    /// us.
    fn check_header(&self, sealed: &[u8]) -> Result<(), OpenError> {
        match sealed.first() {
            Some(&v) if v != VERSION => return Err(OpenError::Version(v)),
            _ => {}
        }
        if sealed.len() < PAIRWISE_OVERHEAD {
            return Err(OpenError::Malformed("cut short"));
        }
        if sealed[1] != FLAGS_PAIRWISE {
            return Err(OpenError::Malformed("not a pairwise envelope"));
        }
        if sealed[2..34] != self.peer.0 {
            return Err(OpenError::Malformed(
                "sent by another node than this key's peer",
            ));
        }
        if sealed[34..66] != self.me.0 {
            return Err(OpenError::NotForUs);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (Identity, Identity, Identity) {
        (
            Identity::from_secret([1; 32]),
            Identity::from_secret([2; 32]),
            Identity::from_secret([3; 32]),
        )
    }

    #[test]
    fn both_ends_derive_the_same_key_and_a_message_round_trips() {
        let (a, b, _) = ids();
        let ab = a.pair_key(&b.public()).unwrap();
        let ba = b.pair_key(&a.public()).unwrap();
        let sealed = ab.seal(b"hello", [7; 32]);
        assert_eq!(sealed.len(), 5 + PAIRWISE_OVERHEAD);
        assert_eq!(pairwise_sender(&sealed), Some(a.public()));
        let opened = ba.open(&sealed).unwrap();
        assert_eq!(opened.body, b"hello");
        assert_eq!(opened.sender, a.public());
        assert!(opened.encrypted);
        // And the other way, with the same key.
        let back = ba.seal(b"world", [7; 32]);
        assert_eq!(ab.open(&back).unwrap().body, b"world");
        // Identity::open takes it too (computing the key itself).
        assert_eq!(b.open(&sealed).unwrap().body, b"hello");
    }

    #[test]
    fn a_stand_in_has_a_real_envelopes_length_and_header_and_only_opens_as_a_stand_in() {
        let (a, b, c) = ids();
        let ab = a.pair_key(&b.public()).unwrap();
        let ba = b.pair_key(&a.public()).unwrap();
        let body = b"a large file".repeat(100);
        let real = ab.seal(&body, [9; 32]);
        let stand_in = ab.seal_stand_in(&body, [9; 32]);
        assert_eq!(stand_in.len(), real.len());
        assert_eq!(
            stand_in[..66],
            real[..66],
            "version, flags, sender, recipient"
        );
        assert_eq!(pairwise_sender(&stand_in), Some(a.public()));
        let range = ba.open_stand_in(&stand_in).unwrap();
        assert_eq!(&stand_in[range], &body[..]);
        // Neither kind passes for the other.
        assert_eq!(ba.open(&stand_in), Err(OpenError::Decrypt));
        assert_eq!(ba.open_stand_in(&real), Err(OpenError::Decrypt));
        // Nor does a stand-in open for another node, or from another sender.
        assert_eq!(
            c.pair_key(&a.public()).unwrap().open_stand_in(&stand_in),
            Err(OpenError::NotForUs)
        );
        assert!(
            b.pair_key(&c.public())
                .unwrap()
                .open_stand_in(&stand_in)
                .is_err()
        );
        assert!(
            ba.open_stand_in(&stand_in[..PAIRWISE_OVERHEAD - 1])
                .is_err()
        );
    }

    #[test]
    fn a_hollow_stand_in_has_a_stand_ins_header_and_length_and_opens_to_its_header_only() {
        let (a, b, c) = ids();
        let ab = a.pair_key(&b.public()).unwrap();
        let ba = b.pair_key(&a.public()).unwrap();
        let stand_in = ab.seal_stand_in(&[7; 1200], [9; 32]);
        let hollow = ab.hollow_stand_in(1200, [9; 32]);
        assert_eq!(hollow.len(), stand_in.len());
        assert_eq!(hollow[..HEADER_LEN], stand_in[..HEADER_LEN]);
        assert!(
            hollow[HEADER_LEN..hollow.len() - TAG_LEN]
                .iter()
                .all(|&b| b == 0)
        );
        assert_eq!(ba.open_hollow_stand_in(&hollow), Ok(&hollow[..HEADER_LEN]));
        // Another seal, another header: the header names one seal's content.
        let again = ab.hollow_stand_in(1200, [10; 32]);
        assert_ne!(again[..HEADER_LEN], hollow[..HEADER_LEN]);
        // Neither kind of stand-in, nor a real envelope, passes for another.
        assert_eq!(ba.open_stand_in(&hollow), Err(OpenError::Decrypt));
        assert_eq!(ba.open_hollow_stand_in(&stand_in), Err(OpenError::Decrypt));
        assert_eq!(
            ba.open_hollow_stand_in(&ab.seal(&[7; 1200], [9; 32])),
            Err(OpenError::Decrypt)
        );
        assert_eq!(ba.open(&hollow), Err(OpenError::Decrypt));
        assert_eq!(
            c.pair_key(&a.public())
                .unwrap()
                .open_hollow_stand_in(&hollow),
            Err(OpenError::NotForUs)
        );
        assert!(
            ba.open_hollow_stand_in(&hollow[..PAIRWISE_OVERHEAD - 1])
                .is_err()
        );
    }

    #[test]
    fn layout_is_as_documented() {
        let (a, b, _) = ids();
        let sealed = a.pair_key(&b.public()).unwrap().seal(b"hi", [0; 32]);
        assert_eq!(sealed[0], VERSION);
        assert_eq!(sealed[1], 0x03);
        assert_eq!(sealed[2..34], a.public().0);
        assert_eq!(sealed[34..66], b.public().0);
        assert_ne!(&sealed[90..92], b"hi");
        assert_eq!(PAIRWISE_OVERHEAD, 106);
    }

    #[test]
    fn every_modified_byte_is_refused() {
        let (a, b, _) = ids();
        let ba = b.pair_key(&a.public()).unwrap();
        let sealed = a.pair_key(&b.public()).unwrap().seal(b"a call", [5; 32]);
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(ba.open(&bad).is_err(), "byte {i} changed and still opened");
            assert!(
                b.open(&bad).is_err(),
                "byte {i} changed and Identity::open took it"
            );
        }
        for len in 0..sealed.len() {
            assert!(ba.open(&sealed[..len]).is_err(), "cut to {len}");
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert!(ba.open(&longer).is_err());
    }

    #[test]
    fn a_third_node_can_neither_open_nor_pass_one_off_as_its_own() {
        let (a, b, c) = ids();
        let sealed = a.pair_key(&b.public()).unwrap().seal(b"secret", [1; 32]);
        // C holds its own key with A and with B: neither opens A's message to B.
        assert_eq!(
            c.pair_key(&a.public()).unwrap().open(&sealed),
            Err(OpenError::NotForUs)
        );
        assert!(c.open(&sealed).is_err());
        // C rewrites the sender to itself: B's key with C does not open it.
        let mut forged = sealed.clone();
        forged[2..34].copy_from_slice(&c.public().0);
        assert_eq!(
            b.pair_key(&c.public()).unwrap().open(&forged),
            Err(OpenError::Decrypt)
        );
        // Swapping sender and recipient does not turn A→B into B→A.
        let mut swapped = sealed.clone();
        swapped[2..34].copy_from_slice(&b.public().0);
        swapped[34..66].copy_from_slice(&a.public().0);
        assert_eq!(
            a.pair_key(&b.public()).unwrap().open(&swapped),
            Err(OpenError::Decrypt)
        );
    }

    #[test]
    fn the_nonce_depends_on_entropy_body_and_peer() {
        let (a, b, c) = ids();
        let ab = a.pair_key(&b.public()).unwrap();
        let ac = a.pair_key(&c.public()).unwrap();
        let nonce = |s: Vec<u8>| s[66..90].to_vec();
        let base = nonce(ab.seal(b"x", [0; 32]));
        assert_eq!(base, nonce(ab.seal(b"x", [0; 32])));
        assert_ne!(base, nonce(ab.seal(b"y", [0; 32])));
        assert_ne!(base, nonce(ab.seal(b"x", [1; 32])));
        assert_ne!(base, nonce(ac.seal(b"x", [0; 32])));
    }

    #[test]
    fn refuses_a_key_with_an_invalid_peer() {
        let (a, _, _) = ids();
        assert!(a.pair_key(&PublicKey([0; 32])).is_err());
        // A node may talk to itself.
        let aa = a.pair_key(&a.public()).unwrap();
        assert_eq!(aa.open(&aa.seal(b"me", [0; 32])).unwrap().body, b"me");
    }

    #[test]
    fn signed_envelopes_are_not_pairwise_and_pairwise_ones_do_not_verify() {
        let (a, b, _) = ids();
        let signed = a.seal(b"x", Some(&b.public()), [0; 32]).unwrap();
        assert_eq!(pairwise_sender(&signed), None);
        assert!(b.pair_key(&a.public()).unwrap().open(&signed).is_err());
        let pairwise = a.pair_key(&b.public()).unwrap().seal(b"x", [0; 32]);
        assert!(crate::verify(&pairwise).is_err());
    }
}
