//! Finished calls leave memory: a node keeps every call it made and every call it served for
//! `retention_ms` after it ended (an hour by default: `ferry result ID` still answers, and a late
//! copy of a call still gets its stored reply), but only the latest
//! [`RpcConfig::finished_in_memory`] of each kind stay in memory. The rest live only as their
//! rows in the store, read back when asked for, and the sweep removes those rows when their time
//! is up. A node answering thousands of calls a second for hours therefore holds a bounded
//! number of them, and its per-call work (B-tree depths, the sweep, a lost path's scan) does not
//! grow with the calls of the last hour.
//!
//! What makes a record findable without an index in memory is its row key, which the engine
//! can derive from what it has in hand when it needs the record:
//!
//! - a call this node made sorts by its creation time, and since the engine puts that time in
//!   the first 8 bytes of the ids it makes ([`id_time`]), the key follows from the id alone;
//! - a call this node served sorts by its deadline, which every copy of the call carries, so a
//!   copy that arrives late finds its row; and the sweep of served rows is a range of keys
//!   (deadline + retention passed) with nothing to read.
//!
//! Only records whose key is so derived leave memory (rows written by earlier versions, keyed
//! otherwise, stay until the sweep), and only records with nothing left to do: a finished call
//! with no result files (those stay, so a file's progress and lifetime follow its call), a
//! served call answered or skipped whose reply is handed over and confirmed.
//!
//! For served calls, the dedup check must not ask the store about every new call: the engine
//! notes the latest deadline of a served call that left memory (`served_out_through`), and
//! only a call whose deadline is not later than that may be one that left; for the others,
//! memory is the whole truth. Served records leave in order of deadline, so for calls of the
//! usual span this is the rare late copy.

use super::*;
use crate::port::NodePort;

/// What may leave memory, and how far served calls have.
#[derive(Debug, Default)]
pub(super) struct Archive {
    /// Finished calls that may leave memory, in the order they were offered, with when they
    /// finished.
    pub(super) calls: VecDeque<(DtnTime, CallId)>,
    /// Served calls that may leave memory, by deadline: sorted, so that one call with a far
    /// deadline does not raise `served_out_through` (and send every new call to the store)
    /// before the calls of the usual span have left.
    /// Keyed by (deadline, call id), the caller's key beside it: ordering by a 32-byte key
    /// as well cost a comparison of it at every step of every insert.
    pub(super) serving: BTreeMap<(DtnTime, CallId), PublicKey>,
    /// The latest deadline of a served call that left memory: a call with a later deadline that
    /// memory does not know was never served here.
    pub(super) served_out_through: Option<DtnTime>,
    /// Where the sweep of stored rows goes on in the dedup and pending tables (empty: from the
    /// start), when the last one stopped at its limit.
    pub(super) sweep_resume: [Vec<u8>; 2],
}

/// The creation time an id made by this engine carries: its last 8 bytes, big-endian, in an id
/// whose first bit is set (this layout); its first 8 in an id whose first bit is clear (the
/// layout before, time first, whose first byte is 0 for the next two million years): the calls
/// an earlier version stored are found by their ids too. Ids from other callers give any
/// number: it only decides where their row sorts, never whether a call is found.
pub(super) fn id_time(id: &CallId) -> DtnTime {
    let half = if id.0[0] & 0x80 != 0 {
        &id.0[8..]
    } else {
        &id.0[..8]
    };
    let mut time = [0u8; 8];
    time.copy_from_slice(half);
    DtnTime::from_be_bytes(time)
}

/// A call id for a call made at `now`: 8 random bytes, the first bit set, then the time (two
/// calls of one millisecond differ in the random part). Random first, so that a few leading
/// hex digits name one call (`ferry result 3fa2`); the set bit tells this layout from the one
/// before ([`id_time`]).
pub(super) fn new_call_id(now: DtnTime, random: [u8; 8]) -> CallId {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&random);
    id[0] |= 0x80;
    id[8..].copy_from_slice(&now.to_be_bytes());
    CallId(id)
}

/// Rows read at once when the store is walked (at start, and by the sweep).
pub(super) const PAGE_ROWS: usize = 1024;
/// Rows the sweep looks at per table before it yields (and comes back a second later).
const SWEEP_ROWS: usize = 64 * PAGE_ROWS;

impl Rpc {
    /// When a call this node made may leave memory: the time it finished, if it did and has
    /// nothing left that memory serves.
    fn call_may_leave(&self, id: &CallId) -> Option<DtnTime> {
        let c = self.calls.get(id)?;
        let finished = c.finished_at?;
        (c.state != CallState::Waiting
            && c.stream.is_none()
            && c.row == RowOrder::Since(id_time(id))
            && result_files(c).next().is_none()
            && !self.writes.calls.contains(id))
        .then_some(finished)
    }

    /// When a served call may leave memory: its deadline, if it is answered (or skipped), its
    /// reply handed over for good, and its row findable by that deadline.
    fn serving_may_leave(&self, key: &ServeKey) -> Option<DtnTime> {
        let s = self.serving.get(key)?;
        (matches!(s.state, ServeState::Answered | ServeState::Skipped)
            && !s.unsent
            && !s.outbox_row
            && s.reply_stream.is_none()
            && s.row == RowOrder::Since(s.call.deadline)
            && !self.writes.serving.contains(key)
            && !self.writes.outbox.contains(key))
        .then_some(s.call.deadline)
    }

    /// Notes a call whose record was just written as one that may leave memory, if it may.
    pub(super) fn offer_call_to_leave(&mut self, id: CallId) {
        if let Some(finished) = self.call_may_leave(&id) {
            self.archive.calls.push_back((finished, id));
        }
    }

    /// Notes a served call whose record was just written as one that may leave memory.
    pub(super) fn offer_serving_to_leave(&mut self, key: ServeKey) {
        if let Some(deadline) = self.serving_may_leave(&key) {
            // Two callers' calls of one id and deadline share an entry: the one it does not
            // name stays in memory until its hour is up, which costs memory, never a call.
            self.archive.serving.insert((deadline, key.id), key.caller);
        }
    }

    /// Moves finished calls out of memory until at most `finished_in_memory` of each kind that
    /// could leave are left: calls in the order they finished (a queue: an entry costs a push,
    /// and one that went stale, its call removed, changed or offered twice, is skipped when its
    /// turn comes), served calls earliest deadline first. Their rows are current (this runs
    /// after the records were written).
    pub(super) fn leave_memory(&mut self) {
        let keep = self.config.finished_in_memory;
        while self.archive.calls.len() > keep {
            let Some((finished, id)) = self.archive.calls.pop_front() else {
                break;
            };
            // Checked again: a call may have changed since it was offered (and is offered
            // again when its record is next written).
            if self.call_may_leave(&id) == Some(finished) {
                self.calls.remove(&id);
            }
        }
        while self.archive.serving.len() > keep {
            let Some(((deadline, id), caller)) = self.archive.serving.pop_first() else {
                break;
            };
            let key = ServeKey::new(caller, id);
            if self.serving_may_leave(&key) == Some(deadline) {
                self.drop_serving_from_memory(&key);
                self.archive.served_out_through = Some(
                    self.archive
                        .served_out_through
                        .map_or(deadline, |t| t.max(deadline)),
                );
            }
        }
    }

    fn drop_serving_from_memory(&mut self, key: &ServeKey) {
        self.serving.remove(key);
        if let Some(set) = self.by_call.get_mut(&key.id) {
            set.remove(&key.caller);
            if set.is_empty() {
                self.by_call.remove(&key.id);
            }
        }
    }

    /// A call this node made that left memory, read back from the store (`None` if it is not
    /// there: never made here, forgotten, or swept).
    pub(super) fn call_from_store(&self, node: &dyn NodePort, id: &CallId) -> Option<ClientCall> {
        let row = RowOrder::Since(id_time(id));
        let value = node
            .tables()
            .rpc_get(RpcTable::Pending, &row.key(&id.0))
            .ok()??;
        let c = Self::parse_call(value, row).ok()?;
        (c.call.id == *id).then_some(c)
    }

    /// Brings a served call back into memory from the store if it left, so a late copy of the
    /// call finds it (and gets its stored reply). `deadline` is the copy's: the row's key.
    pub(super) fn bring_back_serving(
        &mut self,
        node: &dyn NodePort,
        key: &ServeKey,
        deadline: DtnTime,
    ) {
        // The common case first: a call with a later deadline than any that left memory.
        if self.archive.served_out_through.is_none_or(|t| deadline > t)
            || self.serving.contains_key(key)
        {
            return;
        }
        let row = RowOrder::Since(deadline);
        let k = row.key(&serve_key_bytes(key));
        let value = match node.tables().rpc_get(RpcTable::Dedup, &k) {
            Ok(Some(v)) => v,
            Ok(None) => return,
            Err(source) => {
                self.errors.push(StateError::Read {
                    table: RpcTable::Dedup,
                    source,
                });
                return;
            }
        };
        match Self::parse_serving(value, false, row) {
            Ok(s) if ServeKey::new(s.caller_key, s.call.id) == *key => {
                self.by_call.entry(key.id).or_default().insert(key.caller);
                self.serving.insert(*key, Box::new(s));
                self.offer_serving_to_leave(*key);
            }
            _ => self.stats.damaged_records += 1,
        }
    }

    /// Removes the rows of records that left memory and whose time is up: served calls whose
    /// deadline is `retention_ms` past, calls this node made that finished `retention_ms` ago.
    /// Returns whether it stopped before the end (the rest at the next sweep, soon).
    pub(super) fn sweep_stored(&mut self, now: DtnTime, node: &mut dyn NodePort) -> bool {
        let Some(due) = now.checked_sub(self.config.retention) else {
            return false;
        };
        // Served calls: every row keyed by a deadline at or before `due` is done with, unless
        // its call is still in memory (the in-memory sweep decides for those).
        let below = due.saturating_add(Duration::from_millis(1)).to_be_bytes();
        let mut more = self.sweep_rows(node, RpcTable::Dedup, &below, |rpc, key, _| {
            let serve_key = parse_serve_key(key.get(8..)?)?;
            (!rpc.serving.contains_key(&serve_key)).then_some(())
        });
        // Calls made here: a row sorts by creation, so only rows made before `due` can have
        // finished before it; each says when it finished.
        more |= self.sweep_rows(node, RpcTable::Pending, &below, |rpc, key, value| {
            let id = CallId(key.get(8..)?.try_into().ok()?);
            if rpc.calls.contains_key(&id) {
                return None;
            }
            let row = RowOrder::of_key(key, 16)?;
            let c = Self::parse_call(value, row).ok()?;
            c.finished_at.filter(|&t| t <= due).map(|_| ())
        });
        more
    }

    /// Walks the rows of `table` keyed by a time before `below` (keys of the `Since` form, 8
    /// bytes of time first) and removes those `done` says are done with. At most
    /// [`SWEEP_ROWS`] rows are looked at; the next sweep goes on from there (so rows that are not
    /// due yet, calls that lasted long, cannot hold up those behind them). Returns whether it
    /// stopped before the end.
    fn sweep_rows(
        &mut self,
        node: &mut dyn NodePort,
        table: RpcTable,
        below: &[u8; 8],
        done: impl Fn(&Self, &[u8], Bytes) -> Option<()>,
    ) -> bool {
        let id_len = match table {
            RpcTable::Dedup => 48,
            _ => 16,
        };
        let slot = usize::from(table == RpcTable::Pending);
        let mut from: Vec<u8> = std::mem::take(&mut self.archive.sweep_resume[slot]);
        let mut seen = 0;
        loop {
            let rows = match node
                .tables()
                .rpc_range(table, &from, Some(&below[..]), PAGE_ROWS)
            {
                Ok(rows) => rows,
                Err(source) => {
                    self.errors.push(StateError::Read { table, source });
                    return false;
                }
            };
            let Some((last, _)) = rows.last() else {
                return false;
            };
            from = last.to_vec();
            from.push(0);
            let full = rows.len() == PAGE_ROWS;
            for (key, value) in rows {
                seen += 1;
                // Only rows of the `Since` form: the time leads them (a bare row's first bytes
                // are an id; its record is in memory and swept from there).
                if !matches!(RowOrder::of_key(&key, id_len), Some(RowOrder::Since(_))) {
                    continue;
                }
                if done(self, &key, value).is_some() {
                    self.persist(node, table, &key, None);
                    // A served call's record gone for good: its caller's count goes with it.
                    if table == RpcTable::Dedup
                        && let Some(served) = key.get(8..).and_then(parse_serve_key)
                    {
                        self.served.remove(&served.caller);
                    }
                }
            }
            if !full {
                return false;
            }
            if seen >= SWEEP_ROWS {
                self.archive.sweep_resume[slot] = from;
                return true;
            }
        }
    }
}

/// (caller key, call id) from the 48 bytes of [`serve_key_bytes`].
pub(super) fn parse_serve_key(bytes: &[u8]) -> Option<ServeKey> {
    let (caller, id) = bytes.split_first_chunk::<32>()?;
    Some(ServeKey::new(
        PublicKey(*caller),
        CallId(id.try_into().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_leads_with_its_random_part_and_carries_its_time() {
        let now = DtnTime::from_millis(849_074_400_123);
        let id = new_call_id(now, [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0]);
        // The random part leads (first bit set), so ids made together differ from the start.
        assert!(id.to_string().starts_with("92345678"), "{id}");
        assert_eq!(id_time(&id), now);
        let other = new_call_id(now, [0; 8]);
        assert_eq!(id_time(&other), now);
        assert!(other.0[0] & 0x80 != 0);
        // An id of the layout before (time first) still gives its time: a call stored by an
        // earlier version is found by its id.
        let mut old = [0u8; 16];
        old[..8].copy_from_slice(&now.to_be_bytes());
        old[8..].copy_from_slice(&[0xff; 8]);
        assert_eq!(id_time(&CallId(old)), now);
    }
}
