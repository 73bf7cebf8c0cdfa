//! Inboxes: bundles delivered to a local endpoint wait here, in the store's inbox table, until an
//! application takes them (`ferry recv`, the API) or a subscriber is attached. They survive a
//! restart of the daemon: a delivery is never lost because no application was listening.
//!
//! Key: endpoint, a zero byte, then an 8-byte big-endian arrival number (so a table scan returns
//! each endpoint's bundles in arrival order). Value: id, source, creation time and payload.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use store::{RpcTable, Store, StoreError};

/// One waiting bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// Bundle id (display form).
    pub id: String,
    /// Source endpoint.
    pub source: String,
    /// Destination endpoint.
    pub destination: String,
    /// Creation time, DTN ms.
    pub created_ms: u64,
    /// The payload.
    pub payload: Bytes,
}

/// The in-memory index of the store's inbox table.
#[derive(Debug, Default)]
pub struct Inboxes {
    /// Endpoint → arrival numbers waiting.
    waiting: BTreeMap<String, BTreeSet<u64>>,
    next: u64,
}

impl Inboxes {
    /// Loads the index from the store.
    pub fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let mut inboxes = Self::default();
        for (key, _) in store.rpc_scan(RpcTable::Inbox)? {
            if let Some((endpoint, n)) = split_key(&key) {
                inboxes.waiting.entry(endpoint).or_default().insert(n);
                inboxes.next = inboxes.next.max(n + 1);
            }
        }
        Ok(inboxes)
    }

    /// Bundles waiting, over all endpoints.
    pub fn len(&self) -> u64 {
        self.waiting.values().map(|s| s.len() as u64).sum()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Whether something waits for this endpoint.
    pub fn has(&self, endpoint: &str) -> bool {
        self.waiting.contains_key(endpoint)
    }

    /// Puts a delivered bundle in its endpoint's inbox (durable at the store's next flush).
    pub fn put(&mut self, store: &mut dyn Store, letter: &Letter) -> Result<(), StoreError> {
        let n = self.next;
        store.rpc_put(
            RpcTable::Inbox,
            &key(&letter.destination, n),
            &encode(letter),
        )?;
        self.next += 1;
        self.waiting
            .entry(letter.destination.clone())
            .or_default()
            .insert(n);
        Ok(())
    }

    /// Up to `max` bundles waiting for `endpoint` with a sequence number above `after` (all
    /// when `None`), oldest first, with their sequence numbers. Nothing leaves the inbox: an
    /// application [`Inboxes::remove`]s a bundle once it has it safely, so a client that dies
    /// mid-download loses nothing.
    pub fn peek(
        &self,
        store: &dyn Store,
        endpoint: &str,
        max: usize,
        after: Option<u64>,
    ) -> Result<Vec<(u64, Letter)>, StoreError> {
        let Some(set) = self.waiting.get(endpoint) else {
            return Ok(Vec::new());
        };
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut out = Vec::new();
        for &n in set.range(from..).take(max) {
            if let Some(letter) = self.get(store, endpoint, n)? {
                out.push((n, letter));
            }
        }
        Ok(out)
    }

    /// The bundle with sequence number `seq` waiting for `endpoint`, if it still waits.
    pub fn get(
        &self,
        store: &dyn Store,
        endpoint: &str,
        seq: u64,
    ) -> Result<Option<Letter>, StoreError> {
        if !self.waiting.get(endpoint).is_some_and(|s| s.contains(&seq)) {
            return Ok(None);
        }
        Ok(store
            .rpc_get(RpcTable::Inbox, &key(endpoint, seq))?
            .and_then(|value| decode(value, endpoint)))
    }

    /// Removes a bundle an application has taken (durable at the store's next flush). False if
    /// it was not waiting.
    pub fn remove(
        &mut self,
        store: &mut dyn Store,
        endpoint: &str,
        seq: u64,
    ) -> Result<bool, StoreError> {
        let Some(set) = self.waiting.get_mut(endpoint) else {
            return Ok(false);
        };
        if !set.remove(&seq) {
            return Ok(false);
        }
        if set.is_empty() {
            self.waiting.remove(endpoint);
        }
        store.rpc_remove(RpcTable::Inbox, &key(endpoint, seq))?;
        Ok(true)
    }
}

fn key(endpoint: &str, n: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(endpoint.len() + 9);
    k.extend_from_slice(endpoint.as_bytes());
    k.push(0);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

fn split_key(key: &[u8]) -> Option<(String, u64)> {
    let (endpoint, rest) = key.split_at(key.len().checked_sub(9)?);
    let (zero, n) = rest.split_first()?;
    if *zero != 0 {
        return None;
    }
    Some((
        String::from_utf8(endpoint.to_vec()).ok()?,
        u64::from_be_bytes(n.try_into().ok()?),
    ))
}

fn encode(letter: &Letter) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(letter.payload.len() + 64);
    for text in [&letter.id, &letter.source] {
        out.put_u32(text.len() as u32);
        out.put_slice(text.as_bytes());
    }
    out.put_u64(letter.created_ms);
    out.put_slice(&letter.payload);
    out.to_vec()
}

fn decode(mut value: Bytes, destination: &str) -> Option<Letter> {
    let text = |value: &mut Bytes| -> Option<String> {
        if value.remaining() < 4 {
            return None;
        }
        let len = value.get_u32() as usize;
        if value.remaining() < len {
            return None;
        }
        String::from_utf8(value.split_to(len).to_vec()).ok()
    };
    let id = text(&mut value)?;
    let source = text(&mut value)?;
    if value.remaining() < 8 {
        return None;
    }
    let created_ms = value.get_u64();
    Some(Letter {
        id,
        source,
        destination: destination.to_owned(),
        created_ms,
        payload: value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::MemoryStore;

    fn letter(dest: &str, n: u8) -> Letter {
        Letter {
            id: format!("dtn://a/-{n}-0"),
            source: "dtn://a/".into(),
            destination: dest.into(),
            created_ms: u64::from(n),
            payload: Bytes::from(vec![n; usize::from(n) * 10]),
        }
    }

    #[test]
    fn letters_wait_per_endpoint_in_arrival_order_until_removed_and_survive_a_reload() {
        let mut store = MemoryStore::new(1 << 20);
        let mut inboxes = Inboxes::default();
        for (dest, n) in [("dtn://me/x", 1), ("dtn://me/y", 2), ("dtn://me/x", 3)] {
            inboxes.put(&mut store, &letter(dest, n)).unwrap();
        }
        assert_eq!(inboxes.len(), 3);
        let mut reloaded = Inboxes::load(&store).unwrap();
        assert_eq!(reloaded.len(), 3);
        let x = reloaded.peek(&store, "dtn://me/x", 10, None).unwrap();
        assert_eq!(
            x,
            vec![(0, letter("dtn://me/x", 1)), (2, letter("dtn://me/x", 3))]
        );
        // Peeking takes nothing; `after` skips what a subscriber was already given.
        assert_eq!(
            reloaded
                .peek(&store, "dtn://me/x", 10, Some(0))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            reloaded.get(&store, "dtn://me/x", 2).unwrap(),
            Some(letter("dtn://me/x", 3))
        );
        assert_eq!(
            reloaded.get(&store, "dtn://me/y", 2).unwrap(),
            None,
            "seq of another endpoint"
        );
        assert!(reloaded.remove(&mut store, "dtn://me/x", 0).unwrap());
        assert!(
            !reloaded.remove(&mut store, "dtn://me/x", 0).unwrap(),
            "removed twice"
        );
        assert!(reloaded.remove(&mut store, "dtn://me/x", 2).unwrap());
        assert!(!reloaded.has("dtn://me/x"));
        reloaded.put(&mut store, &letter("dtn://me/y", 4)).unwrap();
        let y = reloaded.peek(&store, "dtn://me/y", 1, None).unwrap();
        assert_eq!(y, vec![(1, letter("dtn://me/y", 2))]);
        assert_eq!(reloaded.len(), 2);
        assert_eq!(store.rpc_scan(RpcTable::Inbox).unwrap().len(), 2);
        // A reload continues numbering after the highest waiting seq.
        let again = Inboxes::load(&store).unwrap();
        assert_eq!(again.next, 4);
    }
}
