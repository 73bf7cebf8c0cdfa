//! Inboxes: bundles delivered to a local endpoint wait here, in the store, until an application
//! takes them (`ferry recv`, the API). They survive a restart of the daemon: a delivery is never
//! lost because no application was listening.
//!
//! A bundle whose lifetime ends while it waits is removed, as the network would have dropped it:
//! an inbox nobody reads (the echoes that reach a `ferry ping` that gave up) does not grow
//! without bound.
//!
//! Each waiting bundle has a description row (id, source, creation time, expiry, size) in
//! [`RpcTable::Inbox`], keyed by endpoint, a zero byte and an 8-byte big-endian arrival number
//! (so a table scan returns each endpoint's bundles in arrival order). A payload of up to
//! [`INLINE_MAX`] bytes rides in that row (one write per delivery); a larger one is a row of its
//! own in [`RpcTable::InboxPayload`] under the same key, which the store keeps as a file, so
//! starting the daemon never reads a large payload. Descriptions are held in memory too, so
//! listing an inbox reads nothing.

use std::collections::{BTreeMap, BTreeSet};
use wire::DtnTime;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use store::{RpcTable, Store, StoreError};

/// Payloads up to this size are kept in their description's row.
pub const INLINE_MAX: usize = 16 * 1024;

/// A bundle delivered to a local endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// Its description.
    pub meta: LetterMeta,
    /// The payload.
    pub payload: Bytes,
}

/// What describes a waiting bundle, without its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterMeta {
    /// Bundle id (display form).
    pub id: String,
    /// Source endpoint.
    pub source: String,
    /// Destination endpoint.
    pub destination: String,
    /// Creation time.
    pub created: DtnTime,
    /// When the bundle's lifetime ends.
    pub expiry: DtnTime,
    /// Payload bytes.
    pub size: u64,
}

/// A waiting bundle as [`Inboxes::peek`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Its arrival number in the endpoint's inbox.
    pub seq: u64,
    /// Its description.
    pub meta: LetterMeta,
    /// The payload, when asked for.
    pub payload: Option<Bytes>,
}

/// The in-memory index of the store's inbox tables.
#[derive(Debug, Default)]
pub struct Inboxes {
    /// Endpoint → arrival number → description.
    waiting: BTreeMap<String, BTreeMap<u64, LetterMeta>>,
    /// (expiry, endpoint, arrival number) of every waiting bundle, soonest first.
    expiries: BTreeSet<(u64, String, u64)>,
    next: u64,
}

impl Inboxes {
    /// Loads the index from the store (descriptions only).
    pub fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let mut inboxes = Self::default();
        for (key, value) in store.rpc_scan(RpcTable::Inbox)? {
            if let Some((endpoint, n)) = split_key(&key)
                && let Some(meta) = decode(value, &endpoint)
            {
                inboxes.next = inboxes.next.max(n + 1);
                inboxes.index(n, meta);
            }
        }
        Ok(inboxes)
    }

    fn index(&mut self, n: u64, meta: LetterMeta) {
        self.expiries
            .insert((meta.expiry.as_millis(), meta.destination.clone(), n));
        self.waiting
            .entry(meta.destination.clone())
            .or_default()
            .insert(n, meta);
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
    pub fn put(&mut self, store: &mut dyn Store, letter: Letter) -> Result<(), StoreError> {
        let n = self.next;
        let k = key(&letter.meta.destination, n);
        if letter.payload.len() <= INLINE_MAX {
            store.rpc_put(
                RpcTable::Inbox,
                &k,
                &encode(&letter.meta, Some(&letter.payload)),
            )?;
        } else {
            store.rpc_put_bytes(RpcTable::InboxPayload, &k, &letter.payload)?;
            store.rpc_put(RpcTable::Inbox, &k, &encode(&letter.meta, None))?;
        }
        self.next += 1;
        self.index(n, letter.meta);
        Ok(())
    }

    /// When the next waiting bundle expires.
    pub fn next_expiry(&self) -> Option<DtnTime> {
        (self.expiries.first().map(|(t, _, _)| *t)).map(DtnTime::from_millis)
    }

    /// Removes every bundle whose lifetime ended at or before `now`; returns how many.
    pub fn purge_expired(
        &mut self,
        store: &mut dyn Store,
        now: DtnTime,
    ) -> Result<usize, StoreError> {
        let mut purged = 0;
        while let Some((expiry, endpoint, n)) = self.expiries.first().cloned()
            && expiry <= now.as_millis()
        {
            if self.remove(store, &endpoint, n)? {
                purged += 1;
            } else {
                self.expiries.pop_first();
            }
        }
        Ok(purged)
    }

    /// Up to `max` bundles waiting for `endpoint` with an arrival number above `after` (all
    /// when `None`), oldest first, with their payloads if `with_payload`. Nothing leaves the
    /// inbox: an application [`Inboxes::remove`]s a bundle once it has it safely, so a client
    /// that dies mid-download loses nothing.
    pub fn peek(
        &self,
        store: &dyn Store,
        endpoint: &str,
        max: usize,
        after: Option<u64>,
        with_payload: bool,
    ) -> Result<Vec<Waiting>, StoreError> {
        let Some(set) = self.waiting.get(endpoint) else {
            return Ok(Vec::new());
        };
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut out = Vec::new();
        for (&seq, meta) in set.range(from..).take(max) {
            let payload = if with_payload {
                match self.payload(store, endpoint, seq)? {
                    Some(p) => Some(p),
                    None => continue,
                }
            } else {
                None
            };
            out.push(Waiting {
                seq,
                meta: meta.clone(),
                payload,
            });
        }
        Ok(out)
    }

    /// The payload of bundle `seq` waiting for `endpoint`, if it still waits.
    pub fn payload(
        &self,
        store: &dyn Store,
        endpoint: &str,
        seq: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        let Some(meta) = self.waiting.get(endpoint).and_then(|s| s.get(&seq)) else {
            return Ok(None);
        };
        let k = key(endpoint, seq);
        if meta.size as usize <= INLINE_MAX {
            let row = store.rpc_get(RpcTable::Inbox, &k)?;
            return Ok(row.and_then(|row| inline_payload(row, meta)));
        }
        store.rpc_get(RpcTable::InboxPayload, &k)
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
        let Some(meta) = set.remove(&seq) else {
            return Ok(false);
        };
        if set.is_empty() {
            self.waiting.remove(endpoint);
        }
        self.expiries
            .remove(&(meta.expiry.as_millis(), endpoint.to_owned(), seq));
        let k = key(endpoint, seq);
        store.rpc_remove(RpcTable::Inbox, &k)?;
        if meta.size as usize > INLINE_MAX {
            store.rpc_remove(RpcTable::InboxPayload, &k)?;
        }
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

/// A description row: id and source (length-prefixed), creation time, expiry, size, then the
/// payload itself when it is kept inline.
fn encode(meta: &LetterMeta, inline: Option<&Bytes>) -> Vec<u8> {
    let payload = inline.map_or(&[][..], |p| &p[..]);
    let mut out = BytesMut::with_capacity(meta.id.len() + meta.source.len() + 32 + payload.len());
    for text in [&meta.id, &meta.source] {
        out.put_u32(text.len() as u32);
        out.put_slice(text.as_bytes());
    }
    out.put_u64(meta.created.as_millis());
    out.put_u64(meta.expiry.as_millis());
    out.put_u64(meta.size);
    out.put_slice(payload);
    out.to_vec()
}

/// The payload kept inline in a description row.
fn inline_payload(row: Bytes, meta: &LetterMeta) -> Option<Bytes> {
    let header = 4 + meta.id.len() + 4 + meta.source.len() + 24;
    (row.len() == header + meta.size as usize).then(|| row.slice(header..))
}

fn decode(mut value: Bytes, destination: &str) -> Option<LetterMeta> {
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
    if value.remaining() < 24 {
        return None;
    }
    let meta = LetterMeta {
        id,
        source,
        destination: destination.to_owned(),
        created: DtnTime::from_millis(value.get_u64()),
        expiry: DtnTime::from_millis(value.get_u64()),
        size: value.get_u64(),
    };
    // What follows is the inline payload, or nothing when the payload has a row of its own.
    let inline = meta.size as usize <= INLINE_MAX;
    let rest = value.remaining() as u64;
    (if inline { rest == meta.size } else { rest == 0 }).then_some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::MemoryStore;
    use store::Tables as _;

    fn letter(dest: &str, n: u8) -> Letter {
        let payload = Bytes::from(vec![n; usize::from(n) * 10]);
        Letter {
            meta: LetterMeta {
                id: format!("dtn://a/-{n}-0"),
                source: "dtn://a/".into(),
                destination: dest.into(),
                created: DtnTime::from_millis(u64::from(n)),
                expiry: DtnTime::from_millis(1000 + u64::from(n)),
                size: payload.len() as u64,
            },
            payload,
        }
    }

    fn waiting(seq: u64, l: Letter, with_payload: bool) -> Waiting {
        Waiting {
            seq,
            meta: l.meta,
            payload: with_payload.then_some(l.payload),
        }
    }

    #[test]
    fn letters_wait_per_endpoint_in_arrival_order_until_removed_and_survive_a_reload() {
        let mut store = MemoryStore::new(1 << 20);
        let mut inboxes = Inboxes::default();
        for (dest, n) in [("dtn://me/x", 1), ("dtn://me/y", 2), ("dtn://me/x", 3)] {
            inboxes.put(&mut store, letter(dest, n)).unwrap();
        }
        assert_eq!(inboxes.len(), 3);
        let mut reloaded = Inboxes::load(&store).unwrap();
        assert_eq!(reloaded.len(), 3);
        let x = reloaded.peek(&store, "dtn://me/x", 10, None, true).unwrap();
        assert_eq!(
            x,
            vec![
                waiting(0, letter("dtn://me/x", 1), true),
                waiting(2, letter("dtn://me/x", 3), true)
            ]
        );
        // Descriptions alone, without reading payloads.
        let described = reloaded
            .peek(&store, "dtn://me/x", 10, None, false)
            .unwrap();
        assert_eq!(described[1], waiting(2, letter("dtn://me/x", 3), false));
        assert_eq!(described[1].meta.size, 30);
        // Peeking takes nothing; `after` skips what a subscriber was already given.
        assert_eq!(
            reloaded
                .peek(&store, "dtn://me/x", 10, Some(0), false)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            reloaded.payload(&store, "dtn://me/x", 2).unwrap(),
            Some(letter("dtn://me/x", 3).payload)
        );
        assert_eq!(
            reloaded.payload(&store, "dtn://me/y", 2).unwrap(),
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
        reloaded.put(&mut store, letter("dtn://me/y", 4)).unwrap();
        let y = reloaded.peek(&store, "dtn://me/y", 1, None, true).unwrap();
        assert_eq!(y, vec![waiting(1, letter("dtn://me/y", 2), true)]);
        assert_eq!(reloaded.len(), 2);
        assert_eq!(store.rpc_scan(RpcTable::Inbox).unwrap().len(), 2);
        // Small payloads ride in their description's row.
        assert!(store.rpc_scan(RpcTable::InboxPayload).unwrap().is_empty());
        // A reload continues numbering after the highest waiting seq.
        let again = Inboxes::load(&store).unwrap();
        assert_eq!(again.next, 4);
    }

    #[test]
    fn a_large_payload_has_a_row_of_its_own_and_leaves_with_its_description() {
        let mut store = MemoryStore::new(1 << 22);
        let mut inboxes = Inboxes::default();
        let mut big = letter("dtn://me/x", 1);
        big.payload = Bytes::from(vec![9u8; INLINE_MAX + 1]);
        big.meta.size = big.payload.len() as u64;
        let mut edge = letter("dtn://me/x", 2);
        edge.payload = Bytes::from(vec![8u8; INLINE_MAX]);
        edge.meta.size = edge.payload.len() as u64;
        inboxes.put(&mut store, big.clone()).unwrap();
        inboxes.put(&mut store, edge.clone()).unwrap();
        assert_eq!(store.rpc_scan(RpcTable::InboxPayload).unwrap().len(), 1);
        let reloaded = Inboxes::load(&store).unwrap();
        let got = reloaded.peek(&store, "dtn://me/x", 10, None, true).unwrap();
        assert_eq!(got, vec![waiting(0, big, true), waiting(1, edge, true)]);
        let mut reloaded = reloaded;
        assert!(reloaded.remove(&mut store, "dtn://me/x", 0).unwrap());
        assert!(store.rpc_scan(RpcTable::InboxPayload).unwrap().is_empty());
        assert_eq!(store.rpc_scan(RpcTable::Inbox).unwrap().len(), 1);
    }

    #[test]
    fn a_description_row_of_the_wrong_length_is_not_taken_for_a_bundle() {
        let meta = letter("dtn://me/x", 3).meta;
        let row = encode(&meta, Some(&Bytes::from_static(b"short")));
        assert_eq!(decode(Bytes::from(row), "dtn://me/x"), None);
    }

    #[test]
    fn expired_letters_leave_and_the_next_expiry_is_known_also_after_a_reload() {
        let mut store = MemoryStore::new(1 << 20);
        let mut inboxes = Inboxes::default();
        for (dest, n) in [("dtn://me/x", 5), ("dtn://me/y", 2), ("dtn://me/x", 9)] {
            inboxes.put(&mut store, letter(dest, n)).unwrap();
        }
        assert_eq!(inboxes.next_expiry(), Some(DtnTime::from_millis(1002)));
        // Taken letters no longer count.
        assert!(inboxes.remove(&mut store, "dtn://me/y", 1).unwrap());
        assert_eq!(inboxes.next_expiry(), Some(DtnTime::from_millis(1005)));
        let mut reloaded = Inboxes::load(&store).unwrap();
        assert_eq!(reloaded.next_expiry(), Some(DtnTime::from_millis(1005)));
        assert_eq!(
            reloaded
                .purge_expired(&mut store, DtnTime::from_millis(1004))
                .unwrap(),
            0
        );
        assert_eq!(
            reloaded
                .purge_expired(&mut store, DtnTime::from_millis(1005))
                .unwrap(),
            1
        );
        assert_eq!(reloaded.len(), 1);
        assert_eq!(
            reloaded.peek(&store, "dtn://me/x", 10, None, true).unwrap(),
            vec![waiting(2, letter("dtn://me/x", 9), true)]
        );
        assert_eq!(
            reloaded
                .purge_expired(&mut store, DtnTime::from_millis(u64::MAX))
                .unwrap(),
            1
        );
        assert!(reloaded.is_empty() && reloaded.next_expiry().is_none());
        assert!(store.rpc_scan(RpcTable::Inbox).unwrap().is_empty());
        assert!(store.rpc_scan(RpcTable::InboxPayload).unwrap().is_empty());
    }
}
