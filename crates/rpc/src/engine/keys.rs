//! Who is who: the key known for each node, and what a message that claims a node but is signed
//! by another key gets.
//!
//! A node id is only a name; the node's Ed25519 key is what proves it. A key is known because the
//! configuration pins it, because the first signed message naming the node taught it (trust on
//! first use: a hello, a call's caller, a reply's server), or because the operator accepted it
//! ([`Rpc::accept_key`]). From then on every message that names that node as its sender (a
//! hello, a call's or a cancel's caller, a reply's or a notice's server) must be signed by that
//! key. One that is not is dropped, counted ([`RpcStats::key_mismatches`]), announced once to the
//! shell ([`RpcEvent::KeyMismatch`]) and its key kept as the node's *presented* key: the latest
//! one per node, for at most [`MAX_PRESENTED`] nodes (those seen longest ago go first, counted in
//! [`RpcStats::presented_keys_dropped`]), in memory only (the next message presents it again).
//! The operator sees them in [`Rpc::keys`] and accepts a reinstalled node's new key with
//! [`Rpc::accept_key`], or forgets the old one with [`Rpc::forget_key`] so that the next signed
//! message teaches the node's key again.
//!
//! A mismatching call gets no `Reject`, on purpose: a reply goes to the node the call names,
//! which did not make it (answering would let anyone aim messages at a node, and it could not
//! open them), and to whoever sent it, it would confirm which node ids this server knows. The
//! operator of the server sees it; the caller's side sees nothing it could use.
//!
//! At most [`MAX_LEARNT_KEYS`] keys are learnt on first use; beyond, new nodes' keys are not
//! learnt (their messages are taken as those of any unknown node are), and none is dropped.
//!
//! Rows of `RpcTable::Keys`: the node id's text → the key (32 bytes), how it was learnt (1 byte,
//! [`KeySource`]) and when (8 bytes, big-endian). Rows of only the 32 bytes of the key, which
//! earlier versions wrote, read as [`KeySource::Learnt`] at an unknown time.

use super::*;
use crate::port::NodePort;

/// This node's identity and what it knows of other nodes' keys: the engine's trust state.
pub(super) struct Trust {
    pub(super) identity: Identity,
    /// Keys known for nodes: learnt on first use, pinned in the store, or accepted.
    pub(super) learnt: BTreeMap<Eid, Learnt>,
    /// Keys other than the known one that nodes' messages were signed with lately: the latest
    /// per node, at most [`MAX_PRESENTED`] nodes.
    pub(super) presented: BTreeMap<Eid, PresentedKey>,
    /// Keys shared with peers ([`seal::PairKey`]): one X25519 multiplication per peer instead
    /// of a signature and two multiplications per message. Bounded; emptied when full.
    pub(super) pair_keys: BTreeMap<PublicKey, seal::PairKey>,
    /// Keys the configuration pins: never learnt, never changed.
    pub(super) pinned: BTreeMap<Eid, PublicKey>,
    /// When this node last introduced itself to a node (a hello), so it does not repeat itself.
    pub(super) hellos: BTreeMap<Eid, DtnTime>,
    /// This node's hello, sealed once: its body never changes and a signed envelope of the same
    /// body is the same bytes every time (Ed25519 signatures are deterministic).
    pub(super) hello: Option<Bytes>,
    /// Signed, unencrypted envelopes (hellos, calls to every node) whose signature was checked,
    /// with what they opened to: the same bytes again (a node repeats its hello to every node
    /// that meets it anew) open without checking again. At most
    /// [`MAX_REMEMBERED_ENVELOPES`] of at most [`MAX_REMEMBERED_ENVELOPE`] bytes; emptied when
    /// full.
    pub(super) verified: BTreeMap<Bytes, seal::Opened>,
}

impl Trust {
    pub(super) fn new(identity: Identity, pinned: BTreeMap<Eid, PublicKey>) -> Self {
        Self {
            identity,
            learnt: BTreeMap::new(),
            presented: BTreeMap::new(),
            pair_keys: BTreeMap::new(),
            pinned,
            hellos: BTreeMap::new(),
            hello: None,
            verified: BTreeMap::new(),
        }
    }
}

/// Most verified envelopes remembered ([`Trust::verified`]).
pub(super) const MAX_REMEMBERED_ENVELOPES: usize = 1024;
/// Largest verified envelope remembered: a hello is about 170 bytes.
pub(super) const MAX_REMEMBERED_ENVELOPE: usize = 1024;

/// Most nodes whose presented key (one that is not the key known for them) is kept.
pub(super) const MAX_PRESENTED: usize = 256;
/// Most keys learnt on first use. Anyone can name new node ids, so the table is bounded; when it
/// is full, new nodes' keys are not learnt (counted in [`RpcStats::keys_not_learnt`]) rather than
/// known ones dropped: a flood of new ids must not make room for an impostor of a known node.
/// Keys the operator accepts are kept whatever the bound.
pub const MAX_LEARNT_KEYS: usize = 16_384;

/// How the key known for a node came to be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum KeySource {
    /// Pinned in the configuration ([`RpcConfig::pinned_keys`]): neither learnt nor changed.
    Configured,
    /// From the node's signed hello, the first message that named it.
    Hello,
    /// From the first call it made to this node.
    Call,
    /// From the first reply it sent to a call of this node.
    Reply,
    /// Accepted by the operator ([`Rpc::accept_key`]).
    Accepted,
    /// Learnt from a signed message by a version that did not record how.
    Learnt,
}

impl KeySource {
    /// Its name in the API: `configured`, `hello`, `call`, `reply`, `accepted`, `learnt`.
    pub fn name(self) -> &'static str {
        match self {
            KeySource::Configured => "configured",
            KeySource::Hello => "hello",
            KeySource::Call => "call",
            KeySource::Reply => "reply",
            KeySource::Accepted => "accepted",
            KeySource::Learnt => "learnt",
        }
    }

    fn code(self) -> u8 {
        match self {
            KeySource::Configured => 0,
            KeySource::Hello => 1,
            KeySource::Call => 2,
            KeySource::Reply => 3,
            KeySource::Accepted => 4,
            KeySource::Learnt => 5,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => KeySource::Configured,
            1 => KeySource::Hello,
            2 => KeySource::Call,
            3 => KeySource::Reply,
            4 => KeySource::Accepted,
            5 => KeySource::Learnt,
            _ => return None,
        })
    }
}

/// A key a node's messages were signed with that is not the key known for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresentedKey {
    /// The key (the latest one, if messages came with several).
    pub key: PublicKey,
    /// When a message first came with a key other than the known one.
    pub first_seen: DtnTime,
    /// When the latest did.
    pub last_seen: DtnTime,
    /// How many such messages were dropped.
    pub messages: u64,
}

/// A node whose key this node knows ([`Rpc::keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownKey {
    /// The node.
    pub node: Eid,
    /// Its key: messages naming the node must be signed by it.
    pub key: PublicKey,
    /// How it came to be known.
    pub source: KeySource,
    /// When it was learnt or accepted (`None`: pinned, or learnt by an earlier version).
    pub since: Option<DtnTime>,
    /// Another key messages naming the node were signed with, and dropped for it.
    pub presented: Option<PresentedKey>,
}

/// Why the operator's change of a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// This node's own key is its identity, not something to accept.
    #[error("{0} is this node: its key is its identity file's")]
    OwnNode(Eid),
    /// A key pinned in the configuration changes only there.
    #[error("the key of {0} is pinned in the configuration; change it there")]
    Configured(Eid),
    /// Nothing to forget.
    #[error("no key is known for {0}")]
    Unknown(Eid),
    /// Accepting "the presented key" of a node that presented none.
    #[error("{0} presented no key other than the known one; name the key to accept")]
    NothingPresented(Eid),
    /// Bytes that no message could be signed with.
    #[error("{0} is not a valid Ed25519 public key")]
    InvalidKey(PublicKey),
}

/// A key learnt or accepted, as `Rpc::keys` holds it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Learnt {
    pub(super) key: PublicKey,
    pub(super) source: KeySource,
    pub(super) since: Option<DtnTime>,
}

impl Learnt {
    /// Its row's value (see the module doc).
    fn encode(&self) -> [u8; 41] {
        let mut out = [0u8; 41];
        out[..32].copy_from_slice(&self.key.0);
        out[32] = self.source.code();
        out[33..].copy_from_slice(&self.since.unwrap_or(DtnTime::from_millis(0)).to_be_bytes());
        out
    }

    /// A row's value; `None` if it is neither form.
    pub(super) fn decode(value: &[u8]) -> Option<Self> {
        if let Ok(key) = <[u8; 32]>::try_from(value) {
            return Some(Self {
                key: PublicKey(key),
                source: KeySource::Learnt,
                since: None,
            });
        }
        let (key, rest) = value.split_first_chunk::<32>()?;
        let (&code, since) = rest.split_first()?;
        let since = DtnTime::from_be_bytes(<[u8; 8]>::try_from(since).ok()?);
        Some(Self {
            key: PublicKey(*key),
            source: KeySource::from_code(code)?,
            since: (since != DtnTime::from_millis(0)).then_some(since),
        })
    }
}

/// Whether `eid` names a node itself (`dtn://x/`, `ipn:7.0`), as a message's sender must.
pub(super) fn is_node_id(eid: &Eid) -> bool {
    !matches!(eid, Eid::Null) && eid.node_id() == *eid
}

impl Rpc {
    /// The nodes whose keys this node knows, in node id order, each with a key it presented
    /// lately that is not the known one, if any.
    pub fn keys(&self) -> Vec<KnownKey> {
        let mut out: BTreeMap<&Eid, KnownKey> = BTreeMap::new();
        for (node, l) in &self.trust.learnt {
            out.insert(
                node,
                KnownKey {
                    node: node.clone(),
                    key: l.key,
                    source: l.source,
                    since: l.since,
                    presented: None,
                },
            );
        }
        // A pinned key wins over a learnt one (as in `key_of`).
        for (node, key) in &self.trust.pinned {
            out.insert(
                node,
                KnownKey {
                    node: node.clone(),
                    key: *key,
                    source: KeySource::Configured,
                    since: None,
                    presented: None,
                },
            );
        }
        for (node, presented) in &self.trust.presented {
            if let Some(k) = out.get_mut(node) {
                k.presented = Some(*presented);
            }
        }
        out.into_values().collect()
    }

    /// The key a node presented lately that is not the one known for it (see [`Rpc::keys`]).
    pub fn presented_key(&self, node_id: &Eid) -> Option<PresentedKey> {
        self.trust.presented.get(&node_id.node_id()).copied()
    }

    /// The operator accepts `key` (`None`: the key the node presented, [`Rpc::presented_key`])
    /// as the key of `node_id`, a reinstalled node's new one, say. It is kept in the store;
    /// calls of this node to it that still wait are sealed for it from now on, and one already
    /// sent by dtn is sent again by dtn. Returns the key as now known.
    pub fn accept_key(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        node_id: &Eid,
        key: Option<PublicKey>,
    ) -> Result<KnownKey, KeyError> {
        let node_id = node_id.node_id();
        self.changeable(&node_id)?;
        let key = match key {
            Some(k) => k,
            None => {
                self.trust
                    .presented
                    .get(&node_id)
                    .ok_or_else(|| KeyError::NothingPresented(node_id.clone()))?
                    .key
            }
        };
        if !key.is_valid() {
            return Err(KeyError::InvalidKey(key));
        }
        let learnt = Learnt {
            key,
            source: KeySource::Accepted,
            since: Some(now),
        };
        self.keep_key(node, &node_id, learnt);
        self.trust.presented.remove(&node_id);
        self.reseal_calls_to(now, node, &node_id, "accepted by the operator");
        self.finish_input(now, node);
        Ok(KnownKey {
            node: node_id,
            key,
            source: KeySource::Accepted,
            since: Some(now),
            presented: None,
        })
    }

    /// The operator forgets the key of `node_id`: the next signed message naming the node
    /// teaches it again (trust on first use), and calls to it that still wait are sent signed
    /// instead of encrypted to the old key (one already sent by dtn is sent again). Returns the
    /// key that was known.
    pub fn forget_key(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        node_id: &Eid,
    ) -> Result<PublicKey, KeyError> {
        let node_id = node_id.node_id();
        self.changeable(&node_id)?;
        let Some(old) = self.trust.learnt.remove(&node_id) else {
            return Err(KeyError::Unknown(node_id));
        };
        let id = node_id.to_string();
        self.persist(node, RpcTable::Keys, id.as_bytes(), None);
        self.trust.presented.remove(&node_id);
        self.reseal_calls_to(now, node, &node_id, "forgotten by the operator");
        self.finish_input(now, node);
        Ok(old.key)
    }

    /// Whether the operator may change the key of `node_id`.
    fn changeable(&self, node_id: &Eid) -> Result<(), KeyError> {
        if *node_id == self.me {
            return Err(KeyError::OwnNode(node_id.clone()));
        }
        if self.trust.pinned.contains_key(node_id) {
            return Err(KeyError::Configured(node_id.clone()));
        }
        Ok(())
    }

    fn keep_key(&mut self, node: &mut dyn NodePort, node_id: &Eid, learnt: Learnt) {
        self.trust.learnt.insert(node_id.clone(), learnt);
        let id = node_id.to_string();
        self.persist(node, RpcTable::Keys, id.as_bytes(), Some(&learnt.encode()));
    }

    /// Whether `key` is the key of `node_id`, learning it (from a message of kind `source`) if
    /// none is known. A key that is not the known one is a mismatch ([`Rpc::mismatch`]).
    pub(super) fn learn_key(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        node_id: &Eid,
        key: PublicKey,
        source: KeySource,
    ) -> bool {
        if self.key_of(node_id).is_none() && *node_id != self.me {
            if self.trust.learnt.len() >= MAX_LEARNT_KEYS {
                self.stats.keys_not_learnt += 1;
                return true;
            }
            let learnt = Learnt {
                key,
                source,
                since: Some(now),
            };
            self.keep_key(node, node_id, learnt);
            return true;
        }
        self.check_key(now, node_id, key, source.name())
    }

    /// Whether `key` may sign for `node_id` a message of kind `what`: it is the key known for
    /// the node, or none is known (nothing is learnt then: only hellos, calls and replies teach
    /// keys). A mismatch is counted and the key kept as the node's presented one.
    pub(super) fn check_key(
        &mut self,
        now: DtnTime,
        node_id: &Eid,
        key: PublicKey,
        what: &'static str,
    ) -> bool {
        let known = if *node_id == self.me {
            self.trust.identity.public()
        } else {
            match self.key_of(node_id) {
                Some(k) => k,
                None => return true,
            }
        };
        if known == key {
            return true;
        }
        self.mismatch(now, node_id, known, key, what);
        false
    }

    /// A message naming `node_id` was signed by `presented`, not by `known`.
    fn mismatch(
        &mut self,
        now: DtnTime,
        node_id: &Eid,
        known: PublicKey,
        presented: PublicKey,
        what: &'static str,
    ) {
        self.stats.key_mismatches += 1;
        // Someone signing as this node: counted, but there is nothing to accept.
        if *node_id == self.me {
            return;
        }
        if let Some(p) = self.trust.presented.get_mut(node_id) {
            p.key = presented;
            p.last_seen = now;
            p.messages += 1;
            return;
        }
        if self.trust.presented.len() >= MAX_PRESENTED {
            let oldest = self
                .trust
                .presented
                .iter()
                .min_by_key(|(_, p)| p.last_seen)
                .map(|(n, _)| n.clone());
            if let Some(n) = oldest {
                self.trust.presented.remove(&n);
                self.stats.presented_keys_dropped += 1;
            }
        }
        self.trust.presented.insert(
            node_id.clone(),
            PresentedKey {
                key: presented,
                first_seen: now,
                last_seen: now,
                messages: 1,
            },
        );
        self.events.push_back(RpcEvent::KeyMismatch {
            node: node_id.clone(),
            known,
            presented,
            message: what,
        });
    }

    /// After the key of `server` changed: its waiting calls are sealed again for the key now
    /// known (or signed only, if none), and those already handed to dtn go again.
    fn reseal_calls_to(&mut self, now: DtnTime, node: &mut dyn NodePort, server: &Eid, how: &str) {
        let to = self.key_of(server);
        let ids: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                c.state == CallState::Waiting && c.call.server.as_ref() == Some(server)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(c) = self.calls.get(&id) else {
                continue;
            };
            let call_bytes = c.call_bytes.clone();
            let sealed = self.seal_body(&call_bytes, to);
            let Some(c) = self.calls.get_mut(&id) else {
                continue;
            };
            c.sealed = sealed.clone();
            let (again, deadline) = (c.sent_dtn, c.call.deadline);
            let sealing = if to.is_some() { "encrypted" } else { "signed" };
            let mut line = format!("the key of {server} was {how}: the call is {sealing} for it");
            if again {
                match self.send_bundle(
                    now,
                    node,
                    Some(server),
                    Channel::Control(Class::Dtn),
                    sealed,
                    deadline,
                ) {
                    Ok(()) => line.push_str(" and sent again by dtn"),
                    Err(e) => line.push_str(&format!(" (the dtn send failed: {e})")),
                }
            }
            self.note(now, id, line);
            self.events.push_back(RpcEvent::CallChanged(id));
            self.save_call(node, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_both_forms_read_back() {
        let learnt = Learnt {
            key: PublicKey([7; 32]),
            source: KeySource::Accepted,
            since: Some(DtnTime::from_millis(1234)),
        };
        let back = Learnt::decode(&learnt.encode()).unwrap();
        assert_eq!(
            (back.key, back.source, back.since),
            (learnt.key, learnt.source, learnt.since)
        );
        let old = Learnt::decode(&[9; 32]).unwrap();
        assert_eq!(
            (old.key, old.source, old.since),
            (PublicKey([9; 32]), KeySource::Learnt, None)
        );
        assert!(Learnt::decode(&[9; 33]).is_none());
        let mut bad = learnt.encode();
        bad[32] = 99;
        assert!(Learnt::decode(&bad).is_none());
    }
}
