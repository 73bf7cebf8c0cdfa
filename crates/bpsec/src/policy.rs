//! What a node does with BPSec: which bundles it signs and encrypts as it sends them, which
//! security blocks it verifies and decrypts as it receives them, and from whom it requires
//! integrity. Keys are chosen by endpoint patterns: on send by the bundle's destination, on
//! receipt by the security block's source (RFC 9173 leaves key selection to local policy).

use std::collections::BTreeSet;
use std::fmt;

use wire::{BlockFlags, Bundle, Eid, ExtensionData, PAYLOAD_BLOCK_NUMBER};

use crate::bcb::{self, EncryptSpec, IV_LEN};
use crate::bib::{self, ShaVariant, SignSpec};
use crate::error::SecurityError;
use crate::key::Key;
use crate::{BLOCK_BCB, BLOCK_BIB};

/// Which endpoints a rule applies to: `*` (all), an endpoint id (`dtn://b/inbox`, `ipn:2.1`),
/// or a prefix of one ending in `*` (`dtn://b/*`, `ipn:2.*`), compared with the endpoint's text.
#[derive(Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Parses a pattern; refuses the empty one and a `*` anywhere but at the end.
    pub fn parse(text: &str) -> Result<Self, String> {
        let body = text.strip_suffix('*').unwrap_or(text);
        if text.is_empty() || body.contains('*') {
            return Err(format!(
                "endpoint pattern {text:?}: an endpoint id, a prefix ending in *, or *"
            ));
        }
        Ok(Self {
            text: text.to_owned(),
        })
    }

    /// Whether `eid` matches.
    pub fn matches(&self, eid: &Eid) -> bool {
        let eid = eid.to_string();
        match self.text.strip_suffix('*') {
            Some(prefix) => eid.starts_with(prefix),
            None => eid == self.text,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// Sign the payload of bundles this node sends to matching destinations (a BIB-HMAC-SHA2).
#[derive(Debug, Clone)]
pub struct SignRule {
    /// Destinations this rule covers.
    pub destinations: Pattern,
    /// The HMAC key.
    pub key: Key,
    /// The SHA variant.
    pub sha: ShaVariant,
    /// Integrity scope flags: what besides the payload the MAC covers.
    pub scope: u64,
}

/// Encrypt the payload (and its BIB) of bundles this node sends to matching destinations (a
/// BCB-AES-GCM).
#[derive(Debug, Clone)]
pub struct EncryptRule {
    /// Destinations this rule covers.
    pub destinations: Pattern,
    /// The AES key (16 or 32 bytes).
    pub key: Key,
    /// AAD scope flags.
    pub scope: u64,
}

/// Verify BIBs whose security source matches, with this key; with `required`, a bundle whose
/// source matches must arrive with a payload BIB that verifies.
#[derive(Debug, Clone)]
pub struct VerifyRule {
    /// Security sources (for `required`: bundle sources) this rule covers.
    pub sources: Pattern,
    /// The HMAC key (or the key-encryption key, for blocks that carry a wrapped key).
    pub key: Key,
    /// Whether bundles from these sources must be signed.
    pub required: bool,
}

/// Decrypt BCBs whose security source matches, at the bundle's destination, with this key;
/// with `required`, a bundle whose source matches must arrive with its payload encrypted (a
/// BCB can be stripped on the way, and what is left is the ciphertext).
#[derive(Debug, Clone)]
pub struct DecryptRule {
    /// Security sources (for `required`: bundle sources) this rule covers.
    pub sources: Pattern,
    /// The AES key (or the key-encryption key, for blocks that carry a wrapped key).
    pub key: Key,
    /// Whether bundles from these sources must be encrypted.
    pub required: bool,
}

/// A node's BPSec policy. The default is empty: nothing signed or encrypted, nothing verified,
/// and a BCB for this node refused (it cannot be decrypted here).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// On send, the first matching rule applies.
    pub sign: Vec<SignRule>,
    /// On send, the first matching rule applies.
    pub encrypt: Vec<EncryptRule>,
    /// On receipt, the first rule matching a BIB's security source gives its key.
    pub verify: Vec<VerifyRule>,
    /// On receipt, the first rule matching a BCB's security source gives its key.
    pub decrypt: Vec<DecryptRule>,
    /// The fixed field of this run's AES-GCM IVs (see [`IvSource`]): random bytes the shell
    /// draws at start.
    pub iv_fixed: [u8; 8],
}

/// AES-GCM IVs that never repeat under one key: NIST SP 800-38D §8.2.1's deterministic
/// construction, a fixed field and an invocation counter. GCM with a repeated IV leaks the XOR
/// of two plaintexts and lets an attacker forge tags, and random 96-bit IVs are only safe up to
/// 2^32 uses per key; a counter cannot collide within a run. The fixed field (64 bits) is drawn
/// at random by the shell at every start, because the counter (32 bits) starts again at zero:
/// two runs share an IV only if their fixed fields are equal (about 2^-64 for a pair of runs).
/// When the counter is used up the node encrypts nothing more until it restarts.
#[derive(Debug, Clone)]
pub struct IvSource {
    fixed: [u8; 8],
    next: Option<u32>,
}

impl IvSource {
    /// IVs with this fixed field, counting from zero.
    pub fn new(fixed: [u8; 8]) -> Self {
        Self {
            fixed,
            next: Some(0),
        }
    }

    /// The next IV; an error once 2^32 were handed out.
    pub fn next_iv(&mut self) -> Result<[u8; IV_LEN], SecurityError> {
        let n = self.next.ok_or(SecurityError::IvExhausted)?;
        self.next = n.checked_add(1);
        let mut iv = [0u8; IV_LEN];
        iv[..8].copy_from_slice(&self.fixed);
        iv[8..].copy_from_slice(&n.to_be_bytes());
        Ok(iv)
    }
}

/// What [`Policy::protect`] added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protected {
    /// A BIB over the payload.
    pub signed: bool,
    /// A BCB over the payload (and the BIB).
    pub encrypted: bool,
}

/// What [`Policy::receive`] checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// BIBs verified.
    pub verified: u32,
    /// BCBs decrypted (and removed).
    pub decrypted: u32,
}

/// Why [`Policy::receive`] refuses a bundle. The node drops it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A BIB this node holds the key for did not verify, or a security block is malformed.
    #[error("integrity: {0}")]
    Integrity(SecurityError),
    /// A BCB for this node could not be decrypted (no key for its source, another context,
    /// a tag that does not verify, a malformed block).
    #[error("confidentiality: {0}")]
    Confidentiality(SecurityError),
    /// The source must sign its bundles and this one's payload has no BIB that verified.
    #[error("no verified integrity block on the payload from a source that must sign")]
    MissingIntegrity,
    /// The source must encrypt its bundles and this one's payload was not encrypted.
    #[error("payload not encrypted by a source that must encrypt")]
    MissingConfidentiality,
}

impl Policy {
    /// Applies the send rules to a bundle this node made, before it is stored or sent: a BIB
    /// over the payload if a sign rule matches the destination, then, if `encrypt`, a BCB over
    /// the payload and that BIB if an encrypt rule does. `iv` gives the BCB's IV.
    pub fn protect(
        &self,
        bundle: &mut Bundle,
        me: &Eid,
        iv: &mut IvSource,
        encrypt: bool,
    ) -> Result<Protected, SecurityError> {
        let dest = bundle.primary.destination.clone();
        let mut done = Protected::default();
        let mut bib_number = None;
        if let Some(rule) = self.sign.iter().find(|r| r.destinations.matches(&dest)) {
            let number = bundle.next_block_number();
            let block = bib::sign(
                &mut *bundle,
                &[PAYLOAD_BLOCK_NUMBER],
                &SignSpec {
                    block_number: number,
                    flags: BlockFlags::default(),
                    source: me,
                    sha: rule.sha,
                    scope: rule.scope,
                    key: &rule.key,
                    wrap_under: None,
                },
            )?;
            bundle.extensions.insert(0, block);
            bib_number = Some(number);
            done.signed = true;
        }
        let rule = encrypt
            .then(|| self.encrypt.iter().find(|r| r.destinations.matches(&dest)))
            .flatten();
        if let Some(rule) = rule {
            let number = bundle.next_block_number();
            let mut targets = Vec::with_capacity(2);
            targets.extend(bib_number);
            targets.push(PAYLOAD_BLOCK_NUMBER);
            let block = bcb::encrypt(
                bundle,
                &targets,
                &EncryptSpec {
                    block_number: number,
                    flags: BlockFlags::default(),
                    source: me,
                    iv: iv.next_iv()?,
                    scope: rule.scope,
                    key: &rule.key,
                    wrap_under: None,
                },
            )?;
            let at = usize::from(bib_number.is_some());
            bundle.extensions.insert(at, block);
            done.encrypted = true;
        }
        Ok(done)
    }

    /// Processes the security blocks of a received bundle, before it is stored, forwarded or
    /// delivered. At the destination (`me` is its node), BCBs are decrypted and removed (this
    /// node is their security acceptor); everywhere, BIBs whose security source a verify rule
    /// names are verified (a relay is a security verifier) unless encrypted; at the destination,
    /// a bundle from a source that must sign needs a verified BIB on its payload, and one from a
    /// source that must encrypt a payload it decrypted. Blocks no
    /// rule names are left as they are, for the node that can check them.
    ///
    /// A fragment is left alone: its payload is a part of what the blocks cover. The node
    /// checks the bundle once it is whole. `enforce` says whether the requirements apply: the
    /// node's own control traffic and status reports are never signed, so it passes false for
    /// them (their blocks are still checked).
    pub fn receive(
        &self,
        bundle: &mut Bundle,
        me: &Eid,
        enforce: bool,
    ) -> Result<Received, Refused> {
        let mut done = Received::default();
        if bundle.primary.fragment.is_some() {
            return Ok(done);
        }
        let at_destination = bundle.primary.destination.node_id() == *me;
        let mut payload_decrypted = false;
        if at_destination {
            let bcbs: Vec<u64> = numbers_of(bundle, BLOCK_BCB);
            // RFC 9172 §3.2: a block is the target of one BCB at most.
            let mut covered = BTreeSet::new();
            for number in bcbs {
                let asb = read_asb(bundle, number).map_err(Refused::Confidentiality)?;
                for &t in &asb.targets {
                    if !covered.insert(t) {
                        return Err(Refused::Confidentiality(SecurityError::Conflict {
                            block: number,
                            target: t,
                        }));
                    }
                }
                let rule = self
                    .decrypt
                    .iter()
                    .find(|r| r.sources.matches(&asb.source))
                    .ok_or(Refused::Confidentiality(SecurityError::NoKey {
                        block: number,
                    }))?;
                let d =
                    bcb::decrypt(bundle, number, &rule.key).map_err(Refused::Confidentiality)?;
                payload_decrypted |= d.targets.contains(&PAYLOAD_BLOCK_NUMBER);
                done.decrypted += 1;
            }
        }
        let mut payload_verified = false;
        // With no key to verify with, BIBs are not even read: a relay carries them as they came.
        let bibs = if self.verify.is_empty() {
            Vec::new()
        } else {
            numbers_of(bundle, BLOCK_BIB)
        };
        // What remaining BCBs encrypt, read once (not per BIB: a stranger's bundle may carry
        // hundreds of security blocks).
        let encrypted: BTreeSet<u64> = if bibs.is_empty() {
            BTreeSet::new()
        } else {
            numbers_of(bundle, BLOCK_BCB)
                .into_iter()
                .filter_map(|n| read_asb(bundle, n).ok())
                .flat_map(|asb| asb.targets)
                .collect()
        };
        // RFC 9172 §3.2: a block is the target of one BIB at most. Refusing a second one also
        // keeps a stranger from making this node hash a large payload once per BIB.
        let mut covered = BTreeSet::new();
        for number in bibs {
            if encrypted.contains(&number) {
                continue;
            }
            let asb = read_asb(bundle, number).map_err(Refused::Integrity)?;
            for &t in &asb.targets {
                if !covered.insert(t) {
                    return Err(Refused::Integrity(SecurityError::Conflict {
                        block: number,
                        target: t,
                    }));
                }
            }
            let Some(rule) = self.verify.iter().find(|r| r.sources.matches(&asb.source)) else {
                continue;
            };
            if asb.context_id != bib::CONTEXT_ID {
                // Another context than this node implements: a node that does may check it.
                continue;
            }
            let v = bib::verify(bundle, number, &rule.key).map_err(Refused::Integrity)?;
            payload_verified |= v.targets.contains(&PAYLOAD_BLOCK_NUMBER);
            done.verified += 1;
        }
        if enforce
            && at_destination
            && !payload_verified
            && self
                .verify
                .iter()
                .any(|r| r.required && r.sources.matches(&bundle.primary.source))
        {
            return Err(Refused::MissingIntegrity);
        }
        if enforce
            && at_destination
            && !payload_decrypted
            && self
                .decrypt
                .iter()
                .any(|r| r.required && r.sources.matches(&bundle.primary.source))
        {
            return Err(Refused::MissingConfidentiality);
        }
        Ok(done)
    }
}

fn numbers_of(bundle: &Bundle, block_type: u64) -> Vec<u64> {
    bundle
        .extensions
        .iter()
        .filter(|b| b.data.block_type() == block_type)
        .map(|b| b.number)
        .collect()
}

fn read_asb(bundle: &Bundle, number: u64) -> Result<crate::AbstractSecurityBlock, SecurityError> {
    let data = bundle
        .extensions
        .iter()
        .find(|b| b.number == number)
        .and_then(|b| match &b.data {
            ExtensionData::Unknown { data, .. } => Some(data.clone()),
            _ => None,
        })
        .ok_or(SecurityError::NoSuchBlock(number))?;
    crate::AbstractSecurityBlock::decode(&data).map_err(|error| SecurityError::Malformed {
        block: number,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exactly_or_by_prefix() {
        let a: Eid = "dtn://b/inbox".parse().unwrap();
        let ipn: Eid = "ipn:2.1".parse().unwrap();
        assert!(Pattern::parse("*").unwrap().matches(&a));
        assert!(Pattern::parse("dtn://b/*").unwrap().matches(&a));
        assert!(!Pattern::parse("dtn://bb/*").unwrap().matches(&a));
        assert!(Pattern::parse("dtn://b/inbox").unwrap().matches(&a));
        assert!(!Pattern::parse("dtn://b/inbo").unwrap().matches(&a));
        assert!(Pattern::parse("ipn:2.*").unwrap().matches(&ipn));
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("dtn://*/x").is_err());
    }

    #[test]
    fn ivs_count_under_the_fixed_field_and_end_before_repeating() {
        let mut s = IvSource::new([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(s.next_iv().unwrap(), [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]);
        assert_eq!(s.next_iv().unwrap(), [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1]);
        s.next = Some(u32::MAX);
        assert_eq!(s.next_iv().unwrap()[8..], [0xff; 4]);
        assert_eq!(s.next_iv(), Err(SecurityError::IvExhausted));
        assert_eq!(s.next_iv(), Err(SecurityError::IvExhausted));
    }
}
