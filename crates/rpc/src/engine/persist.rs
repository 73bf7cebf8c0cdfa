//! The engine's durable state in the node's store, and picking up where a previous run left off:
//! calls still waiting (`Pending`), the dedup and result cache (`Dedup`), replies not yet handed
//! to the network (`Outbox`), learnt keys (`Keys`) and data-channel files (`Files`).
//!
//! A change marks its record dirty ([`Writes`]); the records an input changed are staged as rows
//! at the input's end and written together, or, when the shell defers them
//! ([`Rpc::defer_record_writes`]), at its next [`Rpc::write_records`], which the host calls
//! right before its commit. The commit makes them durable together with the bundles the same
//! inputs produced, and nothing they promise leaves before that.

use super::client::Derived;
use super::*;
use crate::port::NodePort;
use std::time::Duration;

/// Records changed while handling the current input, and the rows they become.
#[derive(Debug, Default)]
pub(super) struct Writes {
    /// Records changed while handling the current input, written at its end (`write_dirty`).
    pub(super) calls: BTreeSet<CallId>,
    pub(super) serving: BTreeSet<ServeKey>,
    /// Served calls whose record is unchanged but whose outbox row may not be.
    pub(super) outbox: BTreeSet<ServeKey>,
    /// Rows `write_dirty` gathered, written together at its end ([`Writes::write`]): table,
    /// key and value (none: remove the row) as ranges of `bytes`, where every key and record
    /// of a commit is written one after another instead of into two allocations a row.
    pub(super) rows: Vec<(RpcTable, Range<usize>, Option<Range<usize>>)>,
    pub(super) bytes: Vec<u8>,
    /// Whether the records an input changed wait for [`Rpc::write_records`] (see
    /// [`Rpc::defer_record_writes`]) instead of being written at the input's end.
    pub(super) deferred: bool,
}

impl Writes {
    /// Stages a put (`value`: where in `bytes` its record was written) or, with `None`, a
    /// removal of the row of `id` under `row`, for when `write_dirty` is done
    /// ([`Writes::write`]). The key is written into `bytes` after the record.
    pub(super) fn stage(
        &mut self,
        table: RpcTable,
        row: RowOrder,
        id: &[u8],
        value: Option<Range<usize>>,
    ) {
        let start = self.bytes.len();
        row.write_key(id, &mut self.bytes);
        let end = self.bytes.len();
        self.rows.push((table, start..end, value));
    }

    /// Writes the rows staged by `write_dirty`, in order: each run of puts to one table as one
    /// [`store::Tables::rpc_put_many`], removals one by one; a failed write is pushed to
    /// `errors`.
    pub(super) fn write(&mut self, node: &mut dyn NodePort, errors: &mut Vec<StateError>) {
        let mut rest = &self.rows[..];
        while let Some((table, key, value)) = rest.first() {
            if value.is_none() {
                if let Err(source) = node
                    .tables_mut()
                    .rpc_remove(*table, &self.bytes[key.clone()])
                {
                    errors.push(StateError::Write {
                        table: *table,
                        source,
                    });
                }
                rest = &rest[1..];
                continue;
            }
            let run = rest
                .iter()
                .take_while(|(t, _, v)| t == table && v.is_some())
                .count();
            let rows: Vec<(&[u8], &[u8])> = rest[..run]
                .iter()
                .filter_map(|(_, k, v)| Some((&self.bytes[k.clone()], &self.bytes[v.clone()?])))
                .collect();
            if let Err(source) = node.tables_mut().rpc_put_many(*table, &rows) {
                errors.push(StateError::Write {
                    table: *table,
                    source,
                });
            }
            rest = &rest[run..];
        }
        // The allocations are kept for the next commit; the buffer's only up to a size that
        // small commits fill (one with a large record would hold its room for good).
        self.rows.clear();
        self.bytes.clear();
        self.bytes.shrink_to(STAGED_BYTES_KEPT);
    }
}

const VIA_NAMES: [&str; 4] = ["datagram", "stream", "dtn", "local"];

fn serve_state_code(state: ServeState) -> u8 {
    match state {
        ServeState::WaitingFiles => 0,
        ServeState::Running(_) => 1,
        ServeState::Answered => 2,
        ServeState::Skipped => 3,
    }
}

/// Whether a served call's reply needs a durable outbox row: it is not handed over yet, unless
/// it is on the live stream of a call this node never acknowledged. That caller still holds the
/// call as unanswered in real time: if the stream breaks before the reply is through (this node
/// restarted, say), it sends the call again by dtn and gets the stored reply from the dedup
/// record. So a quick call's reply costs no outbox row put and removed again, two store writes
/// of the few a call costs. An acknowledged caller only listens, so its reply keeps the row.
fn needs_outbox_row(s: &Serving) -> bool {
    s.unsent && (s.reply_stream.is_none() || s.acked)
}

impl Rpc {
    /// Marks a call's record to be written when the current input is done
    /// ([`Rpc::write_dirty`]): a call that changes several times while one input is handled
    /// (sent, answered, finished) costs one write, not one per change.
    pub(super) fn save_call(&mut self, _node: &mut dyn NodePort, id: CallId) {
        self.writes.calls.insert(id);
    }

    /// Writes the records changed while handling the current input. Every public entry point
    /// that changes state ends here, before the shell flushes the store.
    pub(super) fn write_dirty(&mut self, node: &mut dyn NodePort) {
        let calls = std::mem::take(&mut self.writes.calls);
        for &id in &calls {
            self.write_call(id);
        }
        let outbox = std::mem::take(&mut self.writes.outbox);
        let serving = std::mem::take(&mut self.writes.serving);
        for key in &serving {
            self.write_serving(key);
        }
        for key in &outbox {
            self.write_outbox(key);
        }
        self.writes.write(node, &mut self.errors);
        // What is written and done with may leave memory now (see `archive.rs`).
        for id in calls {
            self.offer_call_to_leave(id);
        }
        for key in &serving {
            self.offer_serving_to_leave(*key);
        }
        for key in outbox.into_iter().filter(|k| !serving.contains(k)) {
            self.offer_serving_to_leave(key);
        }
        self.leave_memory();
    }

    fn write_call(&mut self, id: CallId) {
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        // The record goes into the commit's staging buffer, taken while `c` borrows the engine
        // and put back at once: nothing in between may return early.
        let mut w = Writer::after(std::mem::take(&mut self.writes.bytes));
        write_call_record(&mut w, c, true);
        let row = c.row;
        let (bytes, value) = w.finish_after();
        self.writes.bytes = bytes;
        self.writes
            .stage(RpcTable::Pending, row, &id.0, Some(value));
    }

    /// Marks a served call's record to be written when the current input is done (see
    /// [`Rpc::save_call`]).
    pub(super) fn save_serving(&mut self, _node: &mut dyn NodePort, key: &ServeKey) {
        let Some(s) = self.serving.get(key) else {
            return;
        };
        // Every change of state is saved, so this is where the index of unfinished calls follows.
        if matches!(s.state, ServeState::WaitingFiles | ServeState::Running(_)) {
            self.unfinished.insert(*key);
        } else {
            self.unfinished.remove(key);
        }
        self.writes.serving.insert(*key);
    }

    /// Marks a served call's outbox row to be written when the current input is done, when
    /// nothing else of its record changed.
    pub(super) fn save_outbox(&mut self, _node: &mut dyn NodePort, key: &ServeKey) {
        self.writes.outbox.insert(*key);
    }

    /// Puts or removes a served call's outbox row, if it is not as [`needs_outbox_row`] says.
    fn write_outbox(&mut self, key: &ServeKey) {
        let Some(s) = self.serving.get_mut(key) else {
            return;
        };
        let unsent = needs_outbox_row(s);
        if unsent == s.outbox_row {
            return;
        }
        s.outbox_row = unsent;
        let row = s.row;
        // An outbox row is a key and an empty value.
        let at = self.writes.bytes.len();
        self.writes.stage(
            RpcTable::Outbox,
            row,
            &serve_key_bytes(key),
            unsent.then_some(at..at),
        );
    }

    fn write_serving(&mut self, key: &ServeKey) {
        let Some(s) = self.serving.get(key) else {
            return;
        };
        let Ok(call) = Message::encode_call(&s.call) else {
            return;
        };
        let mut w = Writer::after(std::mem::take(&mut self.writes.bytes));
        w.u8(serve_state_code(s.state))
            .u8(s.via.code())
            .bytes(&s.caller_key.0)
            .bytes(&call)
            .bytes(s.reply.as_deref().unwrap_or_default());
        let row = s.row;
        let (bytes, value) = w.finish_after();
        self.writes.bytes = bytes;
        self.writes
            .stage(RpcTable::Dedup, row, &serve_key_bytes(key), Some(value));
        self.write_outbox(key);
    }

    pub(super) fn parse_call(value: Bytes, row: RowOrder) -> Result<ClientCall, RecordError> {
        let mut r = Reader::new(value)?;
        let state = CallState::from_code(r.u8()?)?;
        let phase_code = r.u8()?;
        let until = r.u64()?;
        let phase = Phase::from_code(phase_code, until)?;
        let sent_dtn = r.u8()? != 0;
        let realtime = match r.u8()? {
            0 => None,
            1 => Some(Transport::Datagram),
            _ => Some(Transport::Stream),
        };
        let created = r.u64()?;
        let finished_at = r.u64()?.checked_sub(1);
        let timers = Timers {
            ack_timeout: Duration::from_millis(r.u64()?),
            result_timeout: Duration::from_millis(r.u64()?),
            dtn_timeout: Duration::from_millis(r.u64()?),
            resend_interval: Duration::from_millis(r.u64()?),
        };
        let call_bytes = r.bytes()?;
        let call = match Message::decode(&call_bytes) {
            Ok(Message::Call(c)) => c,
            _ => return Err(RecordError("call")),
        };
        let sealed = r.bytes()?;
        let mut acks = Vec::new();
        for _ in 0..r.u64()?.min(10_000) {
            acks.push(r.string()?.parse().map_err(|_| RecordError("node id"))?);
        }
        let mut replies = Vec::new();
        for _ in 0..r.u64()?.min(100_000) {
            let at = r.u64()?;
            let via = VIA_NAMES
                .get(r.u8()? as usize)
                .copied()
                .ok_or(RecordError("via"))?;
            let key: [u8; 32] = r
                .bytes()?
                .as_ref()
                .try_into()
                .map_err(|_| RecordError("key"))?;
            let message = Message::decode(&r.bytes()?).map_err(|_| RecordError("reply"))?;
            let missing_files = r.u64()? as usize;
            replies.push(Reply {
                at: DtnTime::from_millis(at),
                via,
                server_key: PublicKey(key),
                message,
                missing_files,
            });
        }
        let (timeline, derived) = parse_timeline(&mut r, replies.len())?;
        r.end()?;
        Ok(ClientCall {
            call,
            call_bytes,
            sealed,
            timers,
            created: DtnTime::from_millis(created),
            phase,
            sent_dtn,
            realtime,
            state,
            finished_at: finished_at.map(DtnTime::from_millis),
            acks,
            replies,
            timeline,
            derived,
            row,
            stream: None,
            next_resend: None,
            armed: None,
        })
    }

    pub(super) fn parse_serving(
        value: Bytes,
        unsent: bool,
        row: RowOrder,
    ) -> Result<Serving, RecordError> {
        let mut r = Reader::new(value)?;
        let state = r.u8()?;
        let via = Via::from_code(r.u8()?);
        let key: [u8; 32] = r
            .bytes()?
            .as_ref()
            .try_into()
            .map_err(|_| RecordError("key"))?;
        let call = match Message::decode(&r.bytes()?) {
            Ok(Message::Call(c)) => c,
            _ => return Err(RecordError("call")),
        };
        let reply = r.bytes()?;
        r.end()?;
        let state = match state {
            0 => ServeState::WaitingFiles,
            // The job died with the previous run: see `load`.
            1 => ServeState::Running(JobId(0)),
            2 => ServeState::Answered,
            3 => ServeState::Skipped,
            _ => return Err(RecordError("serve state")),
        };
        Ok(Serving {
            call,
            caller_key: PublicKey(key),
            state,
            via,
            ack_at: None,
            start_at: None,
            armed: None,
            reply: (!reply.is_empty()).then_some(reply),
            unsent,
            outbox_row: unsent,
            acked: false,
            reply_stream: None,
            row,
        })
    }

    fn scan(&mut self, node: &dyn NodePort, table: RpcTable) -> Vec<(Bytes, Bytes)> {
        match node.tables().rpc_scan(table) {
            Ok(rows) => rows,
            Err(source) => {
                self.errors.push(StateError::Read { table, source });
                Vec::new()
            }
        }
    }

    /// Hands every row of a table to `each`, a page at a time (a table may hold the calls of an
    /// hour at thousands a second: never all of it in memory at once), then lets finished
    /// records leave memory after each page.
    fn scan_pages(
        &mut self,
        node: &dyn NodePort,
        table: RpcTable,
        mut each: impl FnMut(&mut Self, Bytes, Bytes),
    ) {
        let mut from: Vec<u8> = Vec::new();
        loop {
            let rows = match node
                .tables()
                .rpc_range(table, &from, None, archive::PAGE_ROWS)
            {
                Ok(rows) => rows,
                Err(source) => {
                    self.errors.push(StateError::Read { table, source });
                    return;
                }
            };
            let Some((last, _)) = rows.last() else {
                return;
            };
            from = last.to_vec();
            from.push(0);
            let full = rows.len() == archive::PAGE_ROWS;
            for (k, v) in rows {
                each(self, k, v);
            }
            self.leave_memory();
            if !full {
                return;
            }
        }
    }

    /// Loads the durable state and resumes it at `now`.
    pub(super) fn load(&mut self, node: &mut dyn NodePort, now: DtnTime) {
        for (k, v) in self.scan(node, RpcTable::Keys) {
            let id = std::str::from_utf8(&k)
                .ok()
                .and_then(|s| s.parse::<Eid>().ok());
            match (id, keys::Learnt::decode(&v)) {
                (Some(id), Some(learnt)) => {
                    self.trust.learnt.insert(id, learnt);
                }
                _ => self.stats.damaged_records += 1,
            }
        }
        // Only each file's header (its expiry) and length: the contents stay on disk until a
        // call needs them (a full budget is a gigabyte).
        let files = match node.tables().rpc_scan_heads(RpcTable::Files, 8) {
            Ok(rows) => rows,
            Err(source) => {
                self.errors.push(StateError::Read {
                    table: RpcTable::Files,
                    source,
                });
                Vec::new()
            }
        };
        for (k, head, len) in files {
            let (Ok(hash), Ok(expiry)) = (
                <[u8; 32]>::try_from(k.as_ref()),
                <[u8; 8]>::try_from(head.as_ref()),
            ) else {
                self.stats.damaged_records += 1;
                continue;
            };
            let size = len - 8;
            self.files.held.insert(
                hash,
                (size, DtnTime::from_millis(u64::from_le_bytes(expiry))),
            );
            self.files.bytes += size;
        }
        let outbox: BTreeSet<Bytes> = self
            .scan(node, RpcTable::Outbox)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let mut interrupted = Vec::new();
        let mut to_resend = Vec::new();
        let mut waiting = Vec::new();
        self.scan_pages(node, RpcTable::Dedup, |rpc, k, v| {
            let Some(row) = RowOrder::of_key(&k, 48) else {
                rpc.stats.damaged_records += 1;
                return;
            };
            // Every row the sweep may remove counts against the bound, also one whose value
            // is damaged (its key names the caller): the sweep takes those too.
            let caller = match row {
                RowOrder::Since(_) => k.get(8..).and_then(archive::parse_serve_key),
                _ => None,
            };
            match Self::parse_serving(v, outbox.contains(&k), row) {
                Ok(s) => {
                    let key = ServeKey::new(s.caller_key, s.call.id);
                    rpc.served.add(key.caller);
                    match s.state {
                        ServeState::Running(_) => interrupted.push(key),
                        ServeState::WaitingFiles => waiting.push(key),
                        ServeState::Answered if s.unsent => to_resend.push(key),
                        _ => {}
                    }
                    rpc.by_call.entry(key.id).or_default().insert(key.caller);
                    if matches!(s.state, ServeState::WaitingFiles | ServeState::Running(_)) {
                        rpc.unfinished.insert(key);
                    }
                    rpc.serving.insert(key, Box::new(s));
                    rpc.offer_serving_to_leave(key);
                }
                Err(_) => {
                    rpc.stats.damaged_records += 1;
                    if let Some(key) = caller {
                        rpc.served.add(key.caller);
                    }
                }
            }
        });
        for key in interrupted {
            // At most once: a call whose execution a restart cut off goes to the shell as a
            // resumed job, which finds out whether the procedure had started (and asks
            // `resume` what to do). Without its parameter files it cannot be resumed at all.
            if let Some(s) = self.serving.get_mut(&key) {
                s.state = ServeState::WaitingFiles;
                s.start_at = None;
            }
            self.try_start_as(now, node, key, true);
            if self
                .serving
                .get(&key)
                .is_some_and(|s| s.state == ServeState::WaitingFiles)
            {
                self.answer_reject(
                    now,
                    node,
                    key,
                    RejectCode::Internal,
                    "the server restarted while the procedure may have run, and its parameter \
                     files are gone; it was not run again"
                        .into(),
                );
            }
            self.arm_serving(key);
        }
        for key in to_resend {
            self.send_reply(now, node, key);
            self.arm_serving(key);
        }
        for key in waiting {
            self.try_start(now, node, key);
            self.arm_serving(key);
        }
        let mut resumed = Vec::new();
        self.scan_pages(node, RpcTable::Pending, |rpc, k, v| {
            let (Some(row), Some((_, id))) = (RowOrder::of_key(&k, 16), k.split_last_chunk::<16>())
            else {
                rpc.stats.damaged_records += 1;
                return;
            };
            let id = CallId(*id);
            match Self::parse_call(v, row) {
                Ok(c) => {
                    let waiting = c.state == CallState::Waiting;
                    rpc.calls.insert(id, Box::new(c));
                    if waiting {
                        resumed.push(id);
                    } else {
                        rpc.offer_call_to_leave(id);
                    }
                }
                Err(_) => rpc.stats.damaged_records += 1,
            }
        });
        for id in resumed {
            let Some(c) = self.calls.get(&id) else {
                continue;
            };
            let (phase, realtime) = (c.phase, c.realtime);
            self.note(now, id, "resumed after a restart".to_string());
            match (phase, realtime) {
                // The stream died with the previous run, and with it whatever was on its way or
                // had come on it unkept: a result the server handed to the stream (and counts as
                // delivered once the stream acknowledged it) but this node crashed before
                // keeping. Listening on dtn alone would wait for a reply the server never sends
                // again, so the call is asked again by dtn, acknowledged or not: the server
                // answers the copy from its dedup record without running it again, or runs it
                // once if it never had it.
                (Phase::Acked { .. }, Some(Transport::Stream)) => {
                    self.go_dtn(
                        now,
                        node,
                        id,
                        "the stream did not survive the restart, nor a result that may have \
                         come on it",
                    );
                }
                (Phase::RealTime { .. }, Some(Transport::Stream)) => {
                    self.go_dtn(now, node, id, "the stream did not survive the restart");
                }
                (Phase::RealTime { .. } | Phase::Acked { .. }, Some(_)) => {
                    if let Some(c) = self.calls.get_mut(&id) {
                        c.next_resend = Some(now);
                    }
                }
                _ => {}
            }
            self.save_call(node, id);
            self.arm_call(id);
        }
    }
}

/// A call's timeline: (time, text) lines.
type Timeline = Vec<(DtnTime, String)>;

/// A call record's timeline (the rest of the record read already): text, or in version 3 also
/// lines given as a [`Derived`] code, kept as that (their text empty) as in memory. `replies`
/// is how many replies the record has.
fn parse_timeline(
    r: &mut Reader,
    replies: usize,
) -> Result<(Timeline, Vec<(usize, Derived)>), RecordError> {
    let coded = r.version() >= 3;
    let (mut timeline, mut derived) = (Vec::new(), Vec::new());
    for i in 0..r.u64()?.min(10_000) as usize {
        let at = DtnTime::from_millis(r.u64()?);
        let line = match if coded { r.u8()? } else { 0 } {
            0 => {
                timeline.push((at, r.string()?));
                continue;
            }
            1 => Derived::CalledByStream {
                hops: u32::try_from(r.u64()?).map_err(|_| RecordError("hops"))?,
                encrypted: r.u8()? != 0,
            },
            2 => {
                let index = r.u64()? as usize;
                if index >= replies {
                    return Err(RecordError("timeline reply"));
                }
                Derived::Reply(index)
            }
            3 => Derived::Finished(r.string()?.into()),
            _ => return Err(RecordError("timeline line")),
        };
        timeline.push((at, String::new()));
        derived.push((i, line));
    }
    Ok((timeline, derived))
}

/// A call's record: its fields, then its timeline (see [`parse_timeline`]); `coded` is false
/// only to write the timeline as version 2 did (the tests' records of that version).
fn write_call_record(w: &mut Writer, c: &ClientCall, coded: bool) {
    let (phase, until) = c.phase.code();
    w.u8(c.state.code())
        .u8(phase)
        .u64(until)
        .u8(c.sent_dtn as u8)
        .u8(match c.realtime {
            Some(Transport::Stream) => 2,
            Some(_) => 1,
            None => 0,
        })
        .u64(c.created.as_millis())
        .u64(c.finished_at.map_or(0, |t| {
            t.saturating_add(Duration::from_millis(1)).as_millis()
        }))
        .u64(wire::time::millis(c.timers.ack_timeout))
        .u64(wire::time::millis(c.timers.result_timeout))
        .u64(wire::time::millis(c.timers.dtn_timeout))
        .u64(wire::time::millis(c.timers.resend_interval))
        .bytes(&c.call_bytes)
        .bytes(&c.sealed);
    w.u64(c.acks.len() as u64);
    for a in &c.acks {
        w.str(&a.to_string());
    }
    w.u64(c.replies.len() as u64);
    for r in &c.replies {
        let encoded = r.message.encode().unwrap_or_default();
        let via = VIA_NAMES.iter().position(|v| *v == r.via).unwrap_or(2) as u8;
        w.u64(r.at.as_millis())
            .u8(via)
            .bytes(&r.server_key.0)
            .bytes(&encoded)
            .u64(r.missing_files as u64);
    }
    // Each line: its time, then (version 3) a code: 0 and its text, or one of
    // `client::Derived` and what rebuilds it (see `parse_timeline`). Without `coded`, version 2's
    // timeline: the text alone.
    w.u64(c.timeline.len() as u64);
    if !coded {
        for (at, text) in c.timeline().iter() {
            w.u64(at.as_millis()).str(&text);
        }
        return;
    }
    let mut derived = c.derived.iter().peekable();
    for (i, (at, text)) in c.timeline.iter().enumerate() {
        w.u64((*at).as_millis());
        let code = derived.next_if(|(line, _)| *line == i).map(|(_, d)| d);
        match code {
            None => w.u8(0).str(text),
            Some(Derived::CalledByStream { hops, encrypted }) => {
                w.u8(1).u64(u64::from(*hops)).u8(u8::from(*encrypted))
            }
            Some(Derived::Reply(index)) => w.u8(2).u64(*index as u64),
            Some(Derived::Finished(why)) => w.u8(3).str(why),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::rpc::CallResult;

    /// A call made (by dtn: no path here) and answered, its timeline then given every kind of
    /// line: what `write_call` and `parse_call` are tested on.
    fn answered_call() -> ClientCall {
        let server: Eid = "dtn://server/".parse().unwrap();
        let (_node, mut rpc, id) = super::super::test_call();
        let mut c = *rpc.calls.remove(&id).unwrap();
        c.replies.push(Reply {
            at: DtnTime::from_millis(1_010),
            via: "stream",
            server_key: seal::Identity::from_secret([2; 32]).public(),
            message: Message::Result(CallResult {
                id,
                server,
                value: Bytes::from_static(b"hello"),
                files: Vec::new(),
                run_ms: 7,
            }),
            missing_files: 0,
        });
        c.state = CallState::Succeeded;
        let lines = [
            Some(Derived::CalledByStream {
                hops: 2,
                encrypted: true,
            }),
            None,
            Some(Derived::Reply(0)),
            Some(Derived::Finished("done".into())),
        ];
        c.timeline.clear();
        c.derived.clear();
        for (i, line) in lines.into_iter().enumerate() {
            let at = 1_000 + i as u64;
            match line {
                Some(d) => {
                    c.timeline.push((DtnTime::from_millis(at), String::new()));
                    c.derived.push((i, d));
                }
                None => c.timeline.push((
                    DtnTime::from_millis(at),
                    "no acknowledgement within 30 s".into(),
                )),
            }
        }
        c
    }

    fn record(c: &ClientCall, coded: bool) -> Bytes {
        let mut w = Writer::new();
        write_call_record(&mut w, c, coded);
        let mut bytes = w.finish();
        if !coded {
            bytes[0] = crate::record::TEXT_TIMELINE_VERSION;
        }
        Bytes::from(bytes)
    }

    /// The text of every kind of rebuilt line, as earlier versions wrote it into their records
    /// (a record of version 2 keeps this text, one of version 3 the code it is rebuilt from).
    #[test]
    fn rebuilt_lines_read_as_the_text_earlier_versions_stored() {
        let mut c = answered_call();
        let text = |c: &ClientCall, line: Derived| line.text(&c.call, &c.replies, c.state);
        let stream = |hops, encrypted| Derived::CalledByStream { hops, encrypted };
        assert_eq!(
            text(&c, stream(1, false)),
            "called dtn://server/ by stream (1 hop), signed"
        );
        assert_eq!(
            text(&c, stream(0, true)),
            "called dtn://server/ by stream (0 hops), encrypted"
        );
        let mut any = c.clone();
        any.call.server = None;
        any.call.mode = wire::rpc::Mode::Any;
        assert_eq!(
            text(&any, stream(3, false)),
            "called any by stream (3 hops), signed"
        );
        let Message::Result(r) = &mut c.replies[0].message else {
            panic!("a result")
        };
        r.server = "ipn:977.1".parse().unwrap();
        r.value = Bytes::from_static(b"x");
        r.files = vec![wire::rpc::FileRef {
            hash: [9; 32],
            size: 10,
            name: "f".into(),
        }];
        r.run_ms = u64::MAX;
        assert_eq!(
            text(&c, Derived::Reply(0)),
            "result from ipn:977.1 by stream (1 byte, 1 file, ran 18446744073709551615 ms)"
        );
        c.replies.push(Reply {
            at: DtnTime::from_millis(1_020),
            via: "dtn",
            server_key: seal::Identity::from_secret([2; 32]).public(),
            message: Message::Reject(wire::rpc::Reject {
                id: c.call.id,
                server: "dtn://other/".parse().unwrap(),
                code: wire::rpc::RejectCode::PredicateFailed,
                detail: "battery >= 50".into(),
                exit_status: None,
                stderr_tail: Bytes::new(),
            }),
            missing_files: 0,
        });
        assert_eq!(
            text(&c, Derived::Reply(1)),
            "predicate_failed from dtn://other/ by dtn: battery >= 50"
        );
        assert_eq!(text(&c, Derived::Reply(2)), "", "no such reply");
        c.state = CallState::Failed;
        assert_eq!(
            text(&c, Derived::Finished("no reply".into())),
            "failed: no reply"
        );
    }

    #[test]
    fn a_call_record_keeps_codes_for_the_lines_it_rebuilds_and_reads_text_timelines_of_version_2() {
        let c = answered_call();
        let lines = c.timeline().to_vec();
        assert_eq!(
            lines[0].1,
            "called dtn://server/ by stream (2 hops), encrypted"
        );
        assert_eq!(lines[1].1, "no acknowledgement within 30 s");
        assert_eq!(
            lines[2].1,
            "result from dtn://server/ by stream (5 bytes, 0 files, ran 7 ms)"
        );
        assert_eq!(lines[3].1, "succeeded: done");
        assert_eq!(
            lines
                .iter()
                .map(|(at, _)| at.as_millis())
                .collect::<Vec<_>>(),
            [1_000, 1_001, 1_002, 1_003]
        );
        // In memory the coded lines keep no text: it is written when read.
        assert!(c.derived.iter().all(|(i, _)| c.timeline[*i].1.is_empty()));

        let coded = record(&c, true);
        let back = Rpc::parse_call(coded.clone(), c.row).unwrap();
        assert_eq!(back.timeline, c.timeline);
        assert_eq!(back.derived, c.derived, "coded again when written again");
        assert_eq!(back.timeline().to_vec(), lines);

        // Version 2's records (the text of every line) read back the same, as text.
        let text = record(&c, false);
        let back = Rpc::parse_call(text.clone(), c.row).unwrap();
        assert_eq!(back.timeline, lines);
        assert!(back.derived.is_empty());
        assert_eq!(back.timeline().to_vec(), lines);
        // The three coded lines' text (129 bytes) is gone, for codes of a few bytes each.
        let rebuilt: usize = c.derived.iter().map(|(i, _)| lines[*i].1.len()).sum();
        assert_eq!(rebuilt, 129);
        assert!(
            coded.len() + rebuilt <= text.len() + 16,
            "coded {} bytes, text {}",
            coded.len(),
            text.len()
        );

        // A code naming a reply the record does not have is damage, not a panic.
        let mut damaged = c.clone();
        damaged.derived[2].1 = Derived::Reply(5);
        assert!(Rpc::parse_call(record(&damaged, true), c.row).is_err());
        // Every prefix of a record is an error too.
        for cut in 0..coded.len() {
            assert!(Rpc::parse_call(coded.slice(..cut), c.row).is_err(), "{cut}");
        }
    }
}
