//! The client half: making calls, choosing transports (the paper's Fig. 2), falling back to dtn,
//! collecting replies.

use super::*;
use crate::port::NodePort;
use std::time::Duration;

impl Rpc {
    /// Makes a call. Returns at once with its id; replies arrive as [`RpcEvent::CallChanged`] and
    /// [`RpcEvent::CallFinished`] and are read with [`Rpc::call_view`]. Any number of calls may
    /// be in flight.
    pub fn call(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        request: CallRequest,
    ) -> Result<CallId, CallError> {
        let requirement =
            Requirement::parse(&request.requirements).map_err(CallError::Requirements)?;
        let timers = request.timers.unwrap_or(self.config.timers);
        let deadline = request
            .deadline
            .unwrap_or_else(|| now.saturating_add(timers.default_span()));
        if deadline <= now {
            return Err(CallError::DeadlinePassed);
        }
        let mode = request.target.mode();
        let server = match &request.target {
            Target::Node(n) => {
                let n = n.node_id();
                // Only a dtn node has an RPC endpoint (see `endpoint`).
                if !matches!(n, Eid::Dtn(_)) {
                    return Err(CallError::BadTarget(n));
                }
                Some(n)
            }
            _ => None,
        };
        let local = server.as_ref() == Some(&self.me);
        // The transport, as the paper's Fig. 2 decides it.
        let reachable = server
            .as_ref()
            .is_some_and(|s| !local && node.reachable(s).is_some());
        let realtime = match (request.transport, &server) {
            (_, Some(_)) if local => None,
            (Transport::Stream, None) => return Err(CallError::StreamNeedsServer),
            (Transport::Stream | Transport::Datagram, Some(s)) if !reachable => {
                return Err(CallError::NotReachable(s.clone()));
            }
            // Fig. 2: explicit and not reachable → dtn, at once.
            (Transport::Auto, Some(_)) if !reachable => None,
            (Transport::Auto | Transport::Stream, Some(_)) => Some(Transport::Stream),
            (Transport::Auto | Transport::Datagram, None) | (Transport::Datagram, Some(_)) => {
                Some(Transport::Datagram)
            }
            (Transport::Dtn, _) => None,
        };
        // The id carries the creation time: the record of the call is found by its id alone
        // once it has left memory (see `archive.rs`).
        let mut random = [0u8; 8];
        self.rng.fill_bytes(&mut random);
        let id = archive::new_call_id(now, random);

        // Parameters: large byte strings and files go on the data channel.
        let mut params = Vec::with_capacity(request.params.len());
        let mut hashed = Vec::new();
        for (i, p) in request.params.into_iter().enumerate() {
            let (name, content) = match p {
                Param::Value(Value::Bytes(b)) if b.len() > self.config.inline_limit => {
                    (format!("arg{}.bin", i + 1), b)
                }
                Param::Value(v) => {
                    params.push(v);
                    continue;
                }
                Param::File { name, content } => (name, content),
            };
            let hash = self.hash_file(&content);
            params.push(Value::File(FileRef {
                hash,
                size: content.len() as u64,
                name,
            }));
            hashed.push((hash, content));
        }
        let sizes: Vec<([u8; 32], u64)> =
            hashed.iter().map(|(h, c)| (*h, c.len() as u64)).collect();
        self.fit_new_files(now, node, &sizes)
            .map_err(|(needed, budget)| CallError::FileBudget { needed, budget })?;
        let mut files = Vec::with_capacity(hashed.len());
        for (hash, content) in hashed {
            self.keep_file(node, hash, &content, deadline);
            files.push(content);
        }
        let call = Call {
            id,
            caller: self.me.clone(),
            mode,
            server: server.clone(),
            procedure: request.procedure,
            params,
            requirements: requirement.source().to_string(),
            deadline,
            transport: request.transport,
        };
        let to = server.as_ref().and_then(|s| self.key_of(s));
        let call_bytes = Bytes::from(Message::encode_call(&call)?);
        let sealed = self.seal_body(&call_bytes, to);
        // Files first, by dtn (the data channel is always store-carry-forward).
        if !local {
            for content in files {
                let payload = self.seal_file(content, to);
                self.send_bundle(now, node, server.as_ref(), Channel::Data, payload, deadline)?;
            }
        }
        let mut c = ClientCall {
            call,
            call_bytes,
            sealed,
            timers,
            created: now,
            phase: Phase::Dtn,
            sent_dtn: false,
            realtime,
            state: CallState::Waiting,
            finished_at: None,
            acks: Vec::new(),
            // A call to one server usually gets one reply; its timeline three entries (called,
            // the reply, the end): room for them now, not grown twice.
            replies: Vec::with_capacity(usize::from(mode == Mode::Explicit)),
            timeline: Vec::with_capacity(4),
            derived: Vec::new(),
            row: RowOrder::Since(now),
            stream: None,
            next_resend: None,
            armed: None,
        };
        let mode_text = mode_name(mode);
        let target: &dyn std::fmt::Display = match &server {
            Some(s) => s,
            None => &mode_text,
        };
        let encrypted = if to.is_some() { "encrypted" } else { "signed" };
        if local {
            c.timeline
                .push((now, format!("called {target} (this node), {encrypted}")));
            self.local.push_back(c.sealed.clone());
        } else {
            match realtime {
                Some(Transport::Stream) => {
                    let s = server.clone().unwrap_or(Eid::Null);
                    let remote = self.rpc_endpoint_of(&s);
                    // The call is all we send: open, call and close go as one segment, one
                    // bundle (the reply, also closed at once, another; an acknowledgement the
                    // third).
                    let stream = node.stream_open_with(
                        now,
                        self.rpc_endpoint.clone(),
                        remote,
                        frame(&c.sealed),
                        true,
                    )?;
                    self.streams.insert(
                        stream,
                        StreamState {
                            role: StreamRole::Client(id),
                            buf: Vec::new(),
                        },
                    );
                    c.stream = Some(stream);
                    c.phase = Phase::RealTime {
                        until: now.saturating_add(timers.ack_timeout).min(deadline),
                    };
                    let line = Derived::CalledByStream {
                        hops: hops(node, &s),
                        encrypted: to.is_some(),
                    };
                    // Written out when read (see `TimelineRef`).
                    c.timeline.push((now, String::new()));
                    c.derived.push((c.timeline.len() - 1, line));
                }
                Some(_) => {
                    self.send_bundle(
                        now,
                        node,
                        server.as_ref(),
                        Channel::Control(Class::Datagram),
                        c.sealed.clone(),
                        deadline,
                    )?;
                    c.phase = Phase::RealTime {
                        until: now.saturating_add(timers.ack_timeout).min(deadline),
                    };
                    c.next_resend =
                        Some(now + timers.resend_interval.max(Duration::from_millis(1)));
                    let how = if server.is_some() {
                        "by datagram"
                    } else {
                        "by datagram broadcast"
                    };
                    c.timeline
                        .push((now, format!("called {target} {how}, {encrypted}")));
                }
                None => {
                    self.send_bundle(
                        now,
                        node,
                        server.as_ref(),
                        Channel::Control(Class::Dtn),
                        c.sealed.clone(),
                        deadline,
                    )?;
                    c.sent_dtn = true;
                    let why = if request.transport == Transport::Dtn {
                        ""
                    } else {
                        " (not reachable now)"
                    };
                    c.timeline
                        .push((now, format!("called {target} by dtn{why}, {encrypted}")));
                }
            }
        }
        self.stats.calls_made += 1;
        self.calls.insert(id, Box::new(c));
        self.save_call(node, id);
        self.arm_call(id);
        // A call to this node itself is served now, not at the next event.
        self.finish_input(now, node);
        Ok(id)
    }

    /// Withdraws a call: the servers are told (they stop it if it runs) and the call ends as
    /// cancelled. A call that already ended is left as it is.
    pub fn cancel(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        id: CallId,
    ) -> Result<(), CallError> {
        let Some(c) = self.calls.get(&id) else {
            // A call that left memory has ended: nothing to withdraw.
            return match self.call_from_store(node, &id) {
                Some(_) => Ok(()),
                None => Err(CallError::UnknownCall),
            };
        };
        if c.state != CallState::Waiting {
            return Ok(());
        }
        let server = c.call.server.clone();
        let deadline = c.call.deadline;
        let to = server.as_ref().and_then(|s| self.key_of(s));
        let sealed = self.seal(
            &Message::Cancel(Cancel {
                id,
                caller: self.me.clone(),
            }),
            to,
        )?;
        if server.as_ref() == Some(&self.me) {
            self.local.push_back(sealed);
        } else {
            let reachable = match &server {
                Some(s) => node.reachable(s).is_some(),
                None => true,
            };
            if reachable {
                let _ = self.send_bundle(
                    now,
                    node,
                    server.as_ref(),
                    Channel::Control(Class::Datagram),
                    sealed.clone(),
                    deadline,
                );
            }
            // By dtn too: a server that has the call only by dtn hears of the cancel that way.
            let _ = self.send_bundle(
                now,
                node,
                server.as_ref(),
                Channel::Control(Class::Dtn),
                sealed,
                deadline,
            );
        }
        self.finish(
            now,
            node,
            id,
            CallState::Cancelled,
            "cancelled by the caller",
        );
        self.finish_input(now, node);
        Ok(())
    }

    /// Removes a call (finished or not) from this node's records; later replies are ignored.
    pub fn forget(&mut self, node: &mut dyn NodePort, id: CallId) -> bool {
        let row = match self.calls.remove(&id) {
            Some(c) => c.row,
            // A call that left memory is forgotten in the store.
            None if self.call_from_store(node, &id).is_some() => {
                RowOrder::Since(archive::id_time(&id))
            }
            None => return false,
        };
        self.writes.calls.remove(&id);
        self.persist(node, RpcTable::Pending, &row.key(&id.0), None);
        true
    }

    pub(super) fn arm_call(&mut self, id: CallId) {
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            return;
        }
        let mut at = c.call.deadline;
        match c.phase {
            Phase::RealTime { until } | Phase::Acked { until } => at = at.min(until),
            Phase::Dtn | Phase::Finished => {}
        }
        if let Some(r) = c.next_resend {
            at = at.min(r);
        }
        if c.armed == Some(at) {
            return;
        }
        self.disarm_call(id);
        if let Some(c) = self.calls.get_mut(&id) {
            c.armed = Some(at);
        }
        self.arm(at, Timer::Call(id));
    }

    /// Takes a call's timer out, if it has one.
    pub(super) fn disarm_call(&mut self, id: CallId) {
        if let Some(at) = self.calls.get_mut(&id).and_then(|c| c.armed.take()) {
            self.timers.remove(&(at, Timer::Call(id)));
        }
    }

    pub(super) fn client_timer(&mut self, now: DtnTime, node: &mut dyn NodePort, id: CallId) {
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            return;
        }
        if now >= c.call.deadline {
            let (state, why) = match c.call.mode {
                Mode::All if c.replies.iter().any(is_complete_result) => {
                    (CallState::Succeeded, "deadline: collection over")
                }
                _ if c
                    .replies
                    .iter()
                    .any(|r| matches!(r.message, Message::Result(_))) =>
                {
                    // A result came, but not all of its files did.
                    (
                        CallState::Failed,
                        "deadline: a result came but its files did not",
                    )
                }
                _ if !c.replies.is_empty() => {
                    (CallState::Failed, "deadline: no result, only refusals")
                }
                _ => (CallState::Expired, "deadline passed without a result"),
            };
            self.finish(now, node, id, state, why);
            return;
        }
        let auto = c.call.transport == Transport::Auto;
        let phase = c.phase;
        let resend_due = c.next_resend.is_some_and(|r| r <= now);
        let realtime = c.realtime;
        match phase {
            Phase::RealTime { until } if now >= until => {
                let secs = c.timers.ack_timeout.as_secs();
                self.note(now, id, format!("no acknowledgement within {secs} s"));
                if let Some(c) = self.calls.get_mut(&id) {
                    c.next_resend = None;
                }
                if auto {
                    self.go_dtn(now, node, id, "falling back to dtn");
                } else if let Some(c) = self.calls.get_mut(&id) {
                    c.phase = Phase::Dtn;
                }
            }
            Phase::Acked { until } if now >= until && has_result(c) => {
                // The paper goes to dtn only when no result came: with one here, the timer
                // ends nothing but the re-asking, and the servers that acknowledged without
                // answering yet are still heard until the deadline (all mode waits for every
                // result it can get; explicit and any wait here only for a result's files).
                let secs = c.timers.result_timeout.as_secs();
                let silent = unanswered(c);
                if !silent.is_empty() {
                    let (names, whose) = named(&silent);
                    self.note(
                        now,
                        id,
                        format!(
                            "{names} acknowledged but sent no result within {secs} s; {whose} \
                             still taken until the deadline"
                        ),
                    );
                }
                if let Some(c) = self.calls.get_mut(&id) {
                    c.phase = Phase::Dtn;
                    c.next_resend = None;
                }
            }
            Phase::Acked { until } if now >= until => {
                let secs = c.timers.result_timeout.as_secs();
                self.note(
                    now,
                    id,
                    format!("no result within {secs} s of the acknowledgement"),
                );
                if let Some(c) = self.calls.get_mut(&id) {
                    c.next_resend = None;
                }
                if auto {
                    self.go_dtn(now, node, id, "asking again by dtn");
                } else if let Some(c) = self.calls.get_mut(&id) {
                    c.phase = Phase::Dtn;
                }
            }
            // Re-asking after an ack recovers a result datagram that was lost: once every
            // server that acknowledged has answered, there is none to recover.
            Phase::Acked { .. } if resend_due && unanswered(c).is_empty() => {
                if let Some(c) = self.calls.get_mut(&id) {
                    c.next_resend = None;
                }
            }
            _ if resend_due && realtime == Some(Transport::Datagram) => {
                let (server, sealed, deadline, acked) = {
                    let c = &self.calls[&id];
                    (
                        c.call.server.clone(),
                        c.sealed.clone(),
                        c.call.deadline,
                        matches!(c.phase, Phase::Acked { .. }),
                    )
                };
                let _ = self.send_bundle(
                    now,
                    node,
                    server.as_ref(),
                    Channel::Control(Class::Datagram),
                    sealed,
                    deadline,
                );
                // Until an ack, every second (the paper); after it, now and then, so that a
                // result datagram that was lost is sent again from the server's cache.
                let step = if acked {
                    self.config.retry_interval
                } else {
                    self.calls[&id].timers.resend_interval
                };
                if let Some(c) = self.calls.get_mut(&id) {
                    c.next_resend = Some(now + step.max(Duration::from_millis(1)));
                }
            }
            _ => {}
        }
        self.save_call(node, id);
        self.arm_call(id);
    }

    /// Sends the call by dtn (once) and waits there until the deadline.
    pub(super) fn go_dtn(&mut self, now: DtnTime, node: &mut dyn NodePort, id: CallId, why: &str) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.phase = Phase::Dtn;
        c.next_resend = None;
        if c.sent_dtn {
            return;
        }
        c.sent_dtn = true;
        let (server, sealed, deadline) = (c.call.server.clone(), c.sealed.clone(), c.call.deadline);
        match self.send_bundle(
            now,
            node,
            server.as_ref(),
            Channel::Control(Class::Dtn),
            sealed,
            deadline,
        ) {
            Ok(()) => self.note(now, id, format!("{why}: call sent by dtn")),
            Err(e) => {
                if let Some(c) = self.calls.get_mut(&id) {
                    c.sent_dtn = false;
                }
                self.note(
                    now,
                    id,
                    format!("{why}: dtn send failed ({e}); listening on dtn"),
                );
            }
        }
    }

    pub(super) fn client_path_lost(&mut self, now: DtnTime, node: &mut dyn NodePort, id: CallId) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.stream = None;
        if c.state != CallState::Waiting {
            return;
        }
        let acked = matches!(c.phase, Phase::Acked { .. });
        if acked {
            // The server has the call; it will send the result by dtn when it finds the path
            // gone. Keep waiting, now on dtn too.
            c.phase = Phase::Dtn;
            self.note(
                now,
                id,
                "stream path lost after the ack; waiting for the result by dtn".to_string(),
            );
        } else {
            // The call may not have arrived: send it by dtn (a server that has it answers once).
            self.note(now, id, "stream path lost before an ack".to_string());
            self.go_dtn(now, node, id, "falling back to dtn");
        }
        self.save_call(node, id);
        self.arm_call(id);
    }

    pub(super) fn client_reply(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        message: Message,
        sender: PublicKey,
        via: Via,
    ) {
        let Some(id) = message.call_id() else {
            return;
        };
        let Some(c) = self.calls.get(&id) else {
            self.stats.unmatched += 1;
            return;
        };
        let server = match &message {
            Message::Ack(a) => a.server.clone(),
            Message::Result(r) => r.server.clone(),
            Message::Reject(r) => r.server.clone(),
            _ => return,
        };
        // An explicit call's replies must come from the server it named, signed with its key.
        if let Some(named) = &c.call.server
            && *named != server
        {
            self.stats.key_mismatches += 1;
            return;
        }
        if !keys::is_node_id(&server) {
            self.stats.forged += 1;
            return;
        }
        if !self.learn_key(now, node, &server, sender, KeySource::Reply) {
            self.note_key_mismatch(now, node, id, &server, sender);
            return;
        }
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            self.stats.unmatched += 1;
            return;
        }
        match message {
            Message::Ack(_) => {
                if !c.acks.contains(&server) {
                    c.acks.push(server.clone());
                }
                let until = now
                    .saturating_add(c.timers.result_timeout)
                    .min(c.call.deadline);
                match c.phase {
                    Phase::RealTime { .. } => {
                        c.phase = Phase::Acked { until };
                        if c.realtime == Some(Transport::Datagram) {
                            c.next_resend = Some(
                                now + self.config.retry_interval.max(Duration::from_millis(1)),
                            );
                        }
                    }
                    // "An ack extends the timeout."
                    Phase::Acked { until: old } => {
                        c.phase = Phase::Acked {
                            until: old.max(until),
                        };
                        // Re-asking stopped when everyone who had acknowledged answered; this
                        // server has not yet.
                        if c.realtime == Some(Transport::Datagram) && c.next_resend.is_none() {
                            c.next_resend = Some(
                                now + self.config.retry_interval.max(Duration::from_millis(1)),
                            );
                        }
                    }
                    Phase::Dtn | Phase::Finished => {}
                }
                self.note(now, id, format!("ack from {server} by {}", via.name()));
                self.events.push_back(RpcEvent::CallChanged(id));
            }
            message => {
                if c.replies.iter().any(|r| r.server_key == sender) {
                    // A second copy from the same server (datagram resent, or dtn as well).
                    return;
                }
                let missing = match &message {
                    Message::Result(r) => r
                        .files
                        .iter()
                        .filter(|f| !self.files.held.contains_key(&f.hash))
                        .count(),
                    _ => 0,
                };
                let result = matches!(message, Message::Result(_));
                let Some(c) = self.calls.get_mut(&id) else {
                    return;
                };
                c.replies.push(Reply {
                    at: now,
                    via: via.name(),
                    server_key: sender,
                    message,
                    missing_files: missing,
                });
                let line = Derived::Reply(c.replies.len() - 1);
                self.note_derived(now, id, line);
                if missing > 0 {
                    self.note(
                        now,
                        id,
                        format!(
                            "waiting for {} by dtn",
                            plural(missing as u64, "result file")
                        ),
                    );
                }
                self.events.push_back(RpcEvent::CallChanged(id));
                self.settle(now, node, id);
                if result {
                    self.result_came(now, id);
                }
            }
        }
        if let Via::Stream(_) = via {
            // Keep the stream: the result may still come on it.
        }
        self.save_call(node, id);
        self.arm_call(id);
    }

    /// A result came for a call still waiting (all mode, or one whose files are on their way):
    /// it acknowledges the call (a quick result is all a server sends), and the wait for a
    /// result that would send the call again by dtn is over for good. What is left of the
    /// result timer is the time the servers that acknowledged get to answer while they are
    /// re-asked by datagram; each result extends it, as an ack does.
    fn result_came(&mut self, now: DtnTime, id: CallId) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            return;
        }
        let until = now
            .saturating_add(c.timers.result_timeout)
            .min(c.call.deadline);
        c.phase = match c.phase {
            Phase::RealTime { .. } => Phase::Acked { until },
            Phase::Acked { until: old } => Phase::Acked {
                until: old.max(until),
            },
            Phase::Dtn | Phase::Finished => return,
        };
        if unanswered(c).is_empty() {
            c.next_resend = None;
        }
    }

    /// A reply to call `id` from `server` was signed by `presented`, not the key known for
    /// `server`, and ignored: the call's timeline says so once per server (however many copies
    /// come), with what the user can do about it.
    fn note_key_mismatch(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        id: CallId,
        server: &Eid,
        presented: PublicKey,
    ) {
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            return;
        }
        let head = format!("a reply from {server} was signed by key {presented}");
        if c.timeline.iter().any(|(_, text)| text.starts_with(&head)) {
            return;
        }
        let known = self
            .key_of(server)
            .map_or_else(String::new, |k| format!(" ({k})"));
        self.note(
            now,
            id,
            format!(
                "{head}, not the key known for it{known}, and was ignored; if {server} was \
                 reinstalled, accept its new key with `ferry keys accept {server}`"
            ),
        );
        self.events.push_back(RpcEvent::CallChanged(id));
        self.save_call(node, id);
    }

    pub(super) fn client_files_arrived(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        id: CallId,
    ) {
        let files = &self.files.held;
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        let mut changed = false;
        for r in &mut c.replies {
            if let Message::Result(res) = &r.message
                && r.missing_files > 0
            {
                let missing = res
                    .files
                    .iter()
                    .filter(|f| !files.contains_key(&f.hash))
                    .count();
                if missing != r.missing_files {
                    r.missing_files = missing;
                    changed = true;
                }
            }
        }
        if changed {
            self.note(now, id, "result files arrived".to_string());
            self.events.push_back(RpcEvent::CallChanged(id));
            self.settle(now, node, id);
            self.save_call(node, id);
        }
    }

    /// Ends the call if its replies are enough for its mode.
    pub(super) fn settle(&mut self, now: DtnTime, node: &mut dyn NodePort, id: CallId) {
        let Some(c) = self.calls.get(&id) else {
            return;
        };
        if c.state != CallState::Waiting {
            return;
        }
        let result = c.replies.iter().any(is_complete_result);
        let rejected = c
            .replies
            .iter()
            .any(|r| matches!(r.message, Message::Reject(_)));
        match c.call.mode {
            Mode::Explicit if result => self.finish(now, node, id, CallState::Succeeded, "done"),
            Mode::Explicit if rejected => self.finish(now, node, id, CallState::Failed, "refused"),
            Mode::Any if result => {
                self.finish(now, node, id, CallState::Succeeded, "first result taken")
            }
            _ => {}
        }
    }

    pub(super) fn finish(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        id: CallId,
        state: CallState,
        why: &'static str,
    ) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.state = state;
        c.phase = Phase::Finished;
        self.disarm_call(id);
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.finished_at = Some(now);
        c.next_resend = None;
        // The sealed call is kept only to send it again: a finished call's record and memory
        // are a third smaller without it.
        c.sealed = Default::default();
        let stream = c.stream.take();
        if let Some(s) = stream {
            // Our side is done; the server closes its own. The stream's state stays until both
            // sides are closed, so a late frame is still read (and ignored).
            let _ = node.stream_close(now, s);
        }
        self.note_derived(now, id, Derived::Finished(Cow::Borrowed(why)));
        self.events.push_back(RpcEvent::CallFinished(id));
        self.save_call(node, id);
    }

    pub(super) fn note(&mut self, now: DtnTime, id: CallId, text: String) {
        if let Some(c) = self.calls.get_mut(&id) {
            write_out_if_full(c);
            add_line(&mut c.timeline, now, text);
        }
    }

    /// [`Rpc::note`] of a line kept as its code (see [`TimelineRef`]).
    fn note_derived(&mut self, now: DtnTime, id: CallId, line: Derived) {
        if let Some(c) = self.calls.get_mut(&id) {
            if write_out_if_full(c) {
                let text = line.text(&c.call, &c.replies, c.state);
                add_line(&mut c.timeline, now, text);
            } else {
                add_line(&mut c.timeline, now, String::new());
                c.derived.push((c.timeline.len() - 1, line));
            }
        }
    }
}

/// If the call's timeline is full (the next line makes lines move, and codes would name other
/// lines), writes out the lines kept as codes: from then on the timeline is text. Whether it
/// was full.
fn write_out_if_full(c: &mut ClientCall) -> bool {
    if c.timeline.len() < TIMELINE_LINES {
        return false;
    }
    for (i, line) in std::mem::take(&mut c.derived) {
        c.timeline[i].1 = line.text(&c.call, &c.replies, c.state);
    }
    true
}

/// A timeline line that can be written again from the rest of its call's record, which then
/// keeps a code and a number or two instead of the line's text: the lines every call over a
/// live path has (how it was called, its result, its end) were ~40 % of a finished call's
/// record, and a record's bytes are SQLite's work (page splits, WAL bytes, checkpoints).
/// In memory, too, the line is kept as this code and [`Derived::text`] writes it when the
/// timeline is read (see [`TimelineRef`]): from the call's fields, which do not change once the
/// line is noted (a call's replies are only ever added to, and the end comes last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Derived {
    /// `called {target} by stream ({hops}), {encrypted or signed}`.
    CalledByStream { hops: u32, encrypted: bool },
    /// The reply of this index arrived.
    Reply(usize),
    /// `{state}: {why}`, the call's final state (`why` is one of a few fixed texts in memory,
    /// so a call's end allocates nothing; read back from a record, it is text).
    Finished(Cow<'static, str>),
}

impl Derived {
    /// The line, for the call `call` with these replies, now in `state`.
    ///
    /// Written piece by piece: three lines a call, on the client's loop, and `format!` took
    /// ~1,500 instructions a line in its formatting machinery (a fifth of a `null` call's work
    /// on that loop besides the store).
    pub(super) fn text(&self, call: &Call, replies: &[Reply], state: CallState) -> String {
        let mut line = Line(String::with_capacity(72));
        match self {
            Derived::CalledByStream { hops, encrypted } => {
                line.push("called ");
                match &call.server {
                    Some(s) => s.push_to(&mut line.0),
                    None => line.push(mode_name(call.mode)),
                }
                line.push(" by stream (");
                line.plural(u64::from(*hops), "hop");
                line.push(if *encrypted {
                    "), encrypted"
                } else {
                    "), signed"
                });
            }
            Derived::Reply(i) => match replies.get(*i) {
                Some(Reply {
                    via,
                    message: Message::Result(r),
                    ..
                }) => {
                    line.push("result from ");
                    r.server.push_to(&mut line.0);
                    line.push(" by ");
                    line.push(via);
                    line.push(" (");
                    line.plural(r.value.len() as u64, "byte");
                    line.push(", ");
                    line.plural(r.files.len() as u64, "file");
                    line.push(", ran ");
                    line.number(r.run_ms);
                    line.push(" ms)");
                }
                Some(Reply {
                    via,
                    message: Message::Reject(r),
                    ..
                }) => {
                    line.push(r.code.name());
                    line.push(" from ");
                    r.server.push_to(&mut line.0);
                    line.push(" by ");
                    line.push(via);
                    line.push(": ");
                    line.push(&r.detail);
                }
                _ => {}
            },
            Derived::Finished(why) => {
                line.push(state.name());
                line.push(": ");
                line.push(why);
            }
        }
        line.0
    }
}

/// A line of text built by pushes (see [`Derived::text`]).
struct Line(String);

impl Line {
    fn push(&mut self, s: &str) {
        self.0.push_str(s);
    }

    /// `n` in decimal.
    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        // Only ASCII digits were written.
        self.0
            .push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    }

    /// What [`plural`] writes: `1 hop`, `2 hops`.
    fn plural(&mut self, n: u64, word: &str) {
        self.number(n);
        self.push(" ");
        self.push(word);
        if n != 1 {
            self.push("s");
        }
    }
}

/// Lines a call's timeline keeps from its start; after them, one line counting the lines left
/// out, then the latest lines, up to [`TIMELINE_LINES`] in all.
const TIMELINE_HEAD: usize = 100;
/// The most lines a timeline has (a call that hears thousands of servers, or waits for days).
const TIMELINE_LINES: usize = 200;
const LEFT_OUT: (&str, &str) = ("(", " lines left out here)");

/// Adds a line to a timeline, bounded: once full, the oldest line after the head goes, counted
/// in the line that stands for the lines left out, so the start and the latest lines (how the
/// call ended) both stay.
fn add_line(timeline: &mut Vec<(DtnTime, String)>, now: DtnTime, text: String) {
    let full = timeline.len() >= TIMELINE_LINES;
    if full {
        let left_out = timeline[TIMELINE_HEAD]
            .1
            .strip_prefix(LEFT_OUT.0)
            .and_then(|rest| rest.strip_suffix(LEFT_OUT.1))
            .and_then(|n| n.parse::<u64>().ok());
        // The first time, the line at the head's end becomes the count (and is one of them).
        let n = left_out
            .unwrap_or(0)
            .saturating_add(if left_out.is_some() { 1 } else { 2 });
        timeline.remove(TIMELINE_HEAD + 1);
        timeline[TIMELINE_HEAD].1 = format!("{}{n}{}", LEFT_OUT.0, LEFT_OUT.1);
    }
    timeline.push((now, text));
}

/// Whether a result (complete or not) came for the call.
fn has_result(c: &ClientCall) -> bool {
    c.replies
        .iter()
        .any(|r| matches!(r.message, Message::Result(_)))
}

/// The servers that acknowledged the call and have not answered it (a result or a refusal).
fn unanswered(c: &ClientCall) -> Vec<&Eid> {
    if c.acks.is_empty() {
        return Vec::new();
    }
    let answered: BTreeSet<&Eid> = c
        .replies
        .iter()
        .filter_map(|r| match &r.message {
            Message::Result(res) => Some(&res.server),
            Message::Reject(rej) => Some(&rej.server),
            _ => None,
        })
        .collect();
    c.acks.iter().filter(|a| !answered.contains(a)).collect()
}

/// Servers named in a timeline line (the first three, then how many more), and the words that
/// agree with how many they are: `("dtn://a/", "a result from it is")`.
fn named(servers: &[&Eid]) -> (String, &'static str) {
    const SHOWN: usize = 3;
    let mut names = servers
        .iter()
        .take(SHOWN)
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if servers.len() > SHOWN {
        names.push_str(&format!(" and {} more", servers.len() - SHOWN));
    }
    if servers.len() == 1 {
        (names, "a result from it is")
    } else {
        (names, "results from them are")
    }
}

fn is_complete_result(r: &Reply) -> bool {
    matches!(r.message, Message::Result(_)) && r.missing_files == 0
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Explicit => "explicit",
        Mode::Any => "any",
        Mode::All => "all",
    }
}

fn hops(node: &dyn NodePort, to: &Eid) -> u32 {
    node.reachable(to).unwrap_or(0)
}

/// `1 hop`, `2 hops`.
/// `n word` or `n words`, written straight into the text it is part of (a timeline line per
/// call uses two or three; a `String` each was an allocation and a copy).
pub(super) fn plural(n: u64, word: &str) -> Plural<'_> {
    Plural(n, word)
}

pub(super) struct Plural<'a>(u64, &'a str);

impl std::fmt::Display for Plural<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Plural(n, word) = *self;
        if n == 1 {
            write!(f, "1 {word}")
        } else {
            write!(f, "{n} {word}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_timeline_writes_out_its_coded_lines_and_keeps_them_as_text() {
        let (_node, mut rpc, id) = super::super::test_call();
        rpc.note_derived(DtnTime::from_millis(1_001), id, called_line());
        let coded_at = rpc.calls[&id].timeline.len() - 1;
        assert_eq!(rpc.calls[&id].derived, [(coded_at, called_line())]);
        assert!(rpc.calls[&id].timeline[coded_at].1.is_empty());
        for i in 0..TIMELINE_LINES as u64 {
            rpc.note(DtnTime::from_millis(2_000 + i), id, format!("line {i}"));
        }
        rpc.note_derived(
            DtnTime::from_millis(3_000),
            id,
            Derived::Finished("done".into()),
        );
        let c = &rpc.calls[&id];
        assert!(c.derived.is_empty(), "{:?}", c.derived);
        assert_eq!(c.timeline.len(), TIMELINE_LINES);
        assert_eq!(
            c.timeline[coded_at],
            (
                DtnTime::from_millis(1_001),
                "called dtn://server/ by stream (1 hop), signed".into()
            )
        );
        assert_eq!(
            c.timeline.last().unwrap(),
            &(DtnTime::from_millis(3_000), "waiting: done".into())
        );
        assert_eq!(c.timeline().to_vec(), c.timeline);
    }

    fn called_line() -> Derived {
        Derived::CalledByStream {
            hops: 1,
            encrypted: false,
        }
    }

    #[test]
    fn a_long_timeline_keeps_its_start_its_latest_lines_and_how_many_went() {
        let mut timeline = Vec::new();
        for i in 0..500u64 {
            add_line(&mut timeline, DtnTime::from_millis(i), format!("line {i}"));
        }
        assert_eq!(timeline.len(), TIMELINE_LINES);
        assert_eq!(timeline[0], (DtnTime::from_millis(0), "line 0".to_string()));
        assert_eq!(
            timeline[99],
            (DtnTime::from_millis(99), "line 99".to_string())
        );
        assert_eq!(
            timeline[100],
            (
                DtnTime::from_millis(100),
                "(301 lines left out here)".to_string()
            )
        );
        assert_eq!(
            timeline[101],
            (DtnTime::from_millis(401), "line 401".to_string())
        );
        assert_eq!(
            timeline[199],
            (DtnTime::from_millis(499), "line 499".to_string())
        );
        // Lines 100..=400 are the 301 left out: every line is either kept or counted.
        let kept = timeline
            .iter()
            .filter(|(_, t)| t.starts_with("line "))
            .count();
        assert_eq!(kept + 301, 500);
    }

    #[test]
    fn a_short_timeline_keeps_every_line() {
        let mut timeline = Vec::new();
        for i in 0..TIMELINE_LINES as u64 {
            add_line(&mut timeline, DtnTime::from_millis(i), format!("line {i}"));
        }
        assert!(
            timeline
                .iter()
                .enumerate()
                .all(|(i, (at, t))| *at == DtnTime::from_millis(i as u64)
                    && *t == format!("line {i}"))
        );
    }
}
