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

    /// Takes up to `max` bundles waiting for `endpoint`, oldest first.
    pub fn take(
        &mut self,
        store: &mut dyn Store,
        endpoint: &str,
        max: usize,
    ) -> Result<Vec<Letter>, StoreError> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(set) = self.waiting.get_mut(endpoint) else {
                break;
            };
            let Some(n) = set.pop_first() else {
                self.waiting.remove(endpoint);
                break;
            };
            if set.is_empty() {
                self.waiting.remove(endpoint);
            }
            let k = key(endpoint, n);
            if let Some(value) = store.rpc_get(RpcTable::Inbox, &k)? {
                store.rpc_remove(RpcTable::Inbox, &k)?;
                if let Some(letter) = decode(value, endpoint) {
                    out.push(letter);
                }
            }
        }
        Ok(out)
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
    fn letters_come_out_per_endpoint_in_arrival_order_and_survive_a_reload() {
        let mut store = MemoryStore::new(1 << 20);
        let mut inboxes = Inboxes::default();
        for (dest, n) in [("dtn://me/x", 1), ("dtn://me/y", 2), ("dtn://me/x", 3)] {
            inboxes.put(&mut store, &letter(dest, n)).unwrap();
        }
        assert_eq!(inboxes.len(), 3);
        let mut reloaded = Inboxes::load(&store).unwrap();
        assert_eq!(reloaded.len(), 3);
        let x = reloaded.take(&mut store, "dtn://me/x", 10).unwrap();
        assert_eq!(x, vec![letter("dtn://me/x", 1), letter("dtn://me/x", 3)]);
        assert!(!reloaded.has("dtn://me/x"));
        reloaded.put(&mut store, &letter("dtn://me/y", 4)).unwrap();
        let y = reloaded.take(&mut store, "dtn://me/y", 1).unwrap();
        assert_eq!(y, vec![letter("dtn://me/y", 2)]);
        assert_eq!(reloaded.len(), 1);
        assert_eq!(store.rpc_scan(RpcTable::Inbox).unwrap().len(), 1);
    }
}
