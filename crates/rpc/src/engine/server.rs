//! The server half: checking calls (offered, allowed, typed, two-stage predicates), running each
//! at most once, answering duplicates from the cache, and returning results along the path the
//! call came by while it lives, else by dtn.

use super::*;
use crate::port::NodePort;
use std::time::Duration;

/// Why a call's parameters do not fit the procedure (its `Display` is the detail the caller is
/// sent with `bad_arguments`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// Not as many parameters as declared.
    #[error("expected {} parameters ({}), got {got}", .declared.len(), names(.declared))]
    Count {
        /// The declared types.
        declared: Vec<ParamType>,
        /// How many came.
        got: usize,
    },
    /// Text that does not read as the declared type (`position` counts from 1).
    #[error("parameter {position} must be {}, and {text} is not one", .expected.name())]
    Unreadable {
        /// Which parameter.
        position: usize,
        /// Its declared type.
        expected: ParamType,
        /// The text, quoted and shortened.
        text: String,
    },
    /// A value of another type.
    #[error("parameter {position} must be {}, not {got}", .expected.name())]
    Type {
        /// Which parameter.
        position: usize,
        /// Its declared type.
        expected: ParamType,
        /// The type it has.
        got: &'static str,
    },
    /// Text with a NUL character (a program's argument cannot hold one).
    #[error("parameter {position} contains a NUL character")]
    Nul {
        /// Which parameter.
        position: usize,
    },
}

fn names(types: &[ParamType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a call's parameters against a procedure's declared types and returns them as the
/// procedure receives them. Text stands for a declared `int`, `float` or `bool` when it is
/// exactly one (`42`, `-0.5`, `true`): a command line has only text, and the server, which
/// knows the types, reads it. Anything else must already have the declared type (an `int` may
/// stand for a `float`, a `file` for `bytes`).
pub fn check_params(declared: &[ParamType], params: &[Value]) -> Result<Vec<Value>, ParamError> {
    if declared.len() != params.len() {
        return Err(ParamError::Count {
            declared: declared.to_vec(),
            got: params.len(),
        });
    }
    let mut out = Vec::with_capacity(params.len());
    for (i, (ty, value)) in declared.iter().zip(params).enumerate() {
        let position = i + 1;
        let read = match (ty, value) {
            (ParamType::Int, Value::Text(t)) => t.parse().ok().map(Value::Int),
            (ParamType::Float, Value::Text(t)) => t.parse().ok().map(Value::Float),
            (ParamType::Bool, Value::Text(t)) => t.parse().ok().map(Value::Bool),
            _ => None,
        };
        let value = match read {
            Some(v) => v,
            None if type_matches(*ty, value) => value.clone(),
            None if matches!(value, Value::Text(_)) => {
                return Err(ParamError::Unreadable {
                    position,
                    expected: *ty,
                    text: value_type_name_quoted(value),
                });
            }
            None => {
                return Err(ParamError::Type {
                    position,
                    expected: *ty,
                    got: value_type_name(value),
                });
            }
        };
        if let Value::Text(t) = &value
            && t.contains('\0')
        {
            return Err(ParamError::Nul { position });
        }
        out.push(value);
    }
    Ok(out)
}

/// A text value, quoted and shortened, for an error message.
fn value_type_name_quoted(value: &Value) -> String {
    match value {
        Value::Text(t) if t.chars().count() > 40 => {
            format!("{:?}…", t.chars().take(40).collect::<String>())
        }
        Value::Text(t) => format!("{t:?}"),
        other => value_type_name(other).to_owned(),
    }
}

/// What a server makes of a new call.
enum Admission {
    /// Run it, with the parameters as the procedure declares them.
    Accept(Vec<Value>),
    /// Say nothing (a broadcast call for a procedure this node does not offer).
    Ignore,
    /// Another any-mode server has it.
    Skip,
    /// Refuse it, with this reason.
    Refuse(RejectCode, String),
}

impl Rpc {
    /// The server's checks, in order: offered, deadline, allow-list, parameter types, the
    /// server-wide then the procedure's predicate, concurrency, the call's own requirements.
    fn admit(&self, now: DtnTime, call: &Call, caller_key: PublicKey) -> Admission {
        let Some(spec) = self
            .config
            .procedures
            .iter()
            .find(|p| p.name == call.procedure)
        else {
            // Broadcast calls reach every node; only a named server says it does not offer it.
            if call.mode != Mode::Explicit {
                return Admission::Ignore;
            }
            let detail = format!("{} does not offer \"{}\"", self.me, call.procedure);
            return Admission::Refuse(RejectCode::NotOffered, detail);
        };
        if call.mode == Mode::Any && self.notices.contains_key(&call.id) {
            return Admission::Skip;
        }
        if call.deadline <= now {
            let detail = "the deadline passed before the call arrived".to_string();
            return Admission::Refuse(RejectCode::Expired, detail);
        }
        if let Some(allow) = &spec.allow
            && !allow.contains(&caller_key)
        {
            let detail = format!("key {caller_key} may not call \"{}\"", call.procedure);
            return Admission::Refuse(RejectCode::NotAllowed, detail);
        }
        let params = match check_params(&spec.params, &call.params) {
            Ok(params) => params,
            Err(e) => return Admission::Refuse(RejectCode::BadArguments, e.to_string()),
        };
        let facts = &self.facts;
        let verdicts = [
            ("server", self.config.accept.check(facts)),
            ("procedure", spec.require.check(facts)),
        ];
        for (stage, verdict) in verdicts {
            if let Verdict::Fail(clause) = verdict {
                let detail = format!("{stage} predicate: {clause}");
                return Admission::Refuse(RejectCode::PredicateFailed, detail);
            }
        }
        let running_here = self
            .unfinished
            .iter()
            .filter(|k| self.serving[k].call.procedure == call.procedure)
            .count();
        if running_here >= spec.max_concurrent as usize {
            let detail = format!(
                "server predicate: running {running_here} of at most {} \"{}\"",
                spec.max_concurrent, call.procedure
            );
            return Admission::Refuse(RejectCode::PredicateFailed, detail);
        }
        match Requirement::parse(&call.requirements) {
            Err(e) => Admission::Refuse(RejectCode::BadArguments, format!("requirements: {e}")),
            Ok(req) => match req.check(facts) {
                Verdict::Fail(clause) => Admission::Refuse(
                    RejectCode::PredicateFailed,
                    format!("call requirement: {clause}"),
                ),
                Verdict::Pass => Admission::Accept(params),
            },
        }
    }

    pub(super) fn serve_call(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        call: Call,
        caller_key: PublicKey,
        via: Via,
    ) {
        // A call that names another server is not ours (a misdirected or replayed bundle).
        if call.mode == Mode::Explicit && call.server.as_ref() != Some(&self.me) {
            return;
        }
        if call.caller.node_id() == self.me && via != Via::Local && call.mode != Mode::Explicit {
            // Our own broadcast came back around.
            return;
        }
        // The caller is a node: what a procedure sees in `FERRY_CALLER` and what keys are
        // known for. (`dtn://x/y` would otherwise be a caller of its own, with a key of its own.)
        if !keys::is_node_id(&call.caller) {
            self.stats.forged += 1;
            return;
        }
        // A call signed by another key than the one known for the node it names as its caller
        // is not served, not even from the cache: the procedure would see that node's id as its
        // caller. Dropped without a reply (see `keys.rs` for why), counted and kept for the
        // operator.
        if !self.learn_key(now, node, &call.caller, caller_key, KeySource::Call) {
            return;
        }
        let key = ServeKey::new(caller_key, call.id);
        // A copy of a call answered long ago: its record may have left memory.
        self.bring_back_serving(node, &key, call.deadline);
        if let Some(s) = self.serving.get_mut(&key) {
            self.stats.duplicates += 1;
            // Answer along the newest path the caller used.
            s.via = via;
            match s.state {
                ServeState::Answered => self.send_reply(now, node, key),
                ServeState::Running(_) | ServeState::WaitingFiles => {
                    if matches!(via, Via::Datagram | Via::Stream(_)) {
                        self.send_ack(now, node, key);
                    }
                }
                ServeState::Skipped => {}
            }
            return;
        }
        let mut call = call;
        // `running` is the engine's own fact, set in place (a copy of the facts per call cost
        // a dozen allocations).
        let running = self.jobs.len() as f64;
        self.facts.set("running", running);
        let admission = self.admit(now, &call, caller_key);
        if !matches!(admission, Admission::Ignore) && !self.room_to_serve(&caller_key) {
            return;
        }
        match admission {
            Admission::Accept(params) => call.params = params,
            Admission::Ignore => return,
            Admission::Skip => {
                // Another server started or finished this any-mode call already.
                self.stats.skipped += 1;
                self.record_skipped(node, call, caller_key, via);
                return;
            }
            Admission::Refuse(code, detail) => {
                self.reject(now, node, call, caller_key, via, (code, detail));
                return;
            }
        }
        // Accepted.
        self.stats.calls_accepted += 1;
        let any = call.mode == Mode::Any;
        let ack_at =
            matches!(via, Via::Datagram | Via::Stream(_)).then(|| now + self.config.ack_delay);
        let jitter_ms = wire::time::millis(self.config.any_start_jitter);
        let start_at = (any && jitter_ms > 0)
            .then(|| now + Duration::from_millis(self.rng.next_u64() % (jitter_ms + 1)));
        self.insert_serving(call, caller_key, ServeState::WaitingFiles, via);
        if let Some(s) = self.serving.get_mut(&key) {
            s.ack_at = ack_at;
            s.start_at = start_at;
        }
        self.save_serving(node, &key);
        self.try_start(now, node, key);
        self.arm_serving(key);
    }

    /// Whether a new call from `caller` may be recorded (see `served.rs`); if not, it is
    /// counted, and dropped unheard by the caller of this. The node's own calls always may.
    fn room_to_serve(&mut self, caller: &PublicKey) -> bool {
        if *caller == self.public_key() {
            return true;
        }
        match self.served.room_for(
            caller,
            self.config.max_served_calls,
            self.config.max_served_calls_per_caller,
        ) {
            Ok(()) => true,
            Err(served::NoRoom::Total) => {
                self.stats.served_table_full += 1;
                false
            }
            Err(served::NoRoom::Caller) => {
                self.stats.served_caller_full += 1;
                false
            }
        }
    }

    /// Starts a call whose files are all here.
    pub(super) fn try_start(&mut self, now: DtnTime, node: &mut dyn NodePort, key: ServeKey) {
        self.try_start_as(now, node, key, false);
    }

    /// [`Rpc::try_start`], the job marked `resumed` when a restart cut off its execution.
    pub(super) fn try_start_as(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        key: ServeKey,
        resumed: bool,
    ) {
        let Some(s) = self.serving.get(&key) else {
            return;
        };
        if s.state != ServeState::WaitingFiles || s.start_at.is_some_and(|t| t > now) {
            return;
        }
        let refs: Vec<FileRef> = s
            .call
            .params
            .iter()
            .filter_map(|v| match v {
                Value::File(f) => Some(f.clone()),
                _ => None,
            })
            .collect();
        if !refs.iter().all(|f| self.holds_file(&f.hash)) {
            return;
        }
        let mut files = Vec::with_capacity(refs.len());
        for f in refs {
            match self.file(node, &f.hash) {
                Some(content) if content.len() as u64 == f.size => files.push((f, content)),
                _ => {
                    let detail = format!("file \"{}\" does not match its size", f.name);
                    self.answer_reject(now, node, key, RejectCode::BadArguments, detail);
                    return;
                }
            }
        }
        let job = JobId(self.next_job);
        self.next_job += 1;
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        s.state = ServeState::Running(job);
        s.start_at = None;
        self.jobs.insert(job, key);
        if s.call.mode == Mode::Any {
            // Tell the other servers, so that those that have not started skip it.
            let (id, deadline) = (s.call.id, s.call.deadline);
            if let Ok(sealed) = self.seal(
                &Message::Started(Notice {
                    id,
                    server: self.me.clone(),
                }),
                None,
            ) {
                let _ = self.send_bundle(
                    now,
                    node,
                    None,
                    Channel::Control(Class::Datagram),
                    sealed,
                    deadline,
                );
            }
        }
        let s = &self.serving[&key];
        self.events.push_back(RpcEvent::Execute(Job {
            id: job,
            call: s.call.id,
            caller: s.call.caller.clone(),
            caller_key: s.caller_key,
            procedure: s.call.procedure.clone(),
            params: s.call.params.clone(),
            files,
            deadline: s.call.deadline,
            resumed,
        }));
        self.save_serving(node, &key);
    }

    /// What to do with a job whose execution a restart cut off ([`Job::resumed`]), given what
    /// the shell found of it: `None` runs it (it never started, or its procedure is declared
    /// idempotent); otherwise the shell reports this outcome with [`Rpc::finished`] without
    /// running anything: the procedure ran, and its caller learns that its result was lost
    /// (`ResultLost`), not that it never ran.
    pub fn resume(&mut self, job: &Job, prior: PriorRun) -> Option<Outcome> {
        let PriorRun::Started { detail } = prior else {
            return None;
        };
        self.stats.interrupted += 1;
        let idempotent = self
            .config
            .procedures
            .iter()
            .any(|p| p.name == job.procedure && p.idempotent);
        if idempotent {
            self.stats.reruns += 1;
            return None;
        }
        Some(Outcome::Failure {
            code: RejectCode::ResultLost,
            detail: format!(
                "the procedure ran, but the server crashed before its result was kept: {detail}; \
                 it was not run again"
            ),
            exit_status: None,
            stderr_tail: Bytes::new(),
        })
    }

    /// A graceful stop: every execution running now is aborted and its caller answered
    /// `ServerStopped` at once, rather than left waiting for its deadline. Calls still waiting
    /// for their parameter files stay as they are (durable, they go on after the next start).
    /// Returns how many were stopped.
    pub fn stop_executions(&mut self, now: DtnTime, node: &mut dyn NodePort) -> usize {
        let running: Vec<(ServeKey, JobId)> = self
            .unfinished
            .iter()
            .filter_map(|key| match self.serving.get(key)?.state {
                ServeState::Running(job) => Some((*key, job)),
                _ => None,
            })
            .collect();
        for &(key, job) in &running {
            self.jobs.remove(&job);
            self.events.push_back(RpcEvent::Abort {
                job,
                reason: "the server is stopping",
            });
            self.stats.stopped += 1;
            self.answer_reject(
                now,
                node,
                key,
                RejectCode::ServerStopped,
                "the server was stopped while the procedure ran; it was killed and will not be \
                 run again"
                    .into(),
            );
        }
        self.finish_input(now, node);
        running.len()
    }

    /// Reports how an execution ended. An execution that was aborted (or is unknown) is ignored.
    pub fn finished(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        job: JobId,
        outcome: Outcome,
    ) {
        let Some(key) = self.jobs.remove(&job) else {
            return;
        };
        let Some(s) = self.serving.get(&key) else {
            return;
        };
        if s.state != ServeState::Running(job) {
            return;
        }
        self.stats.executions += 1;
        let deadline = s.call.deadline;
        let caller = s.call.caller.clone();
        let any = s.call.mode == Mode::Any;
        let local = caller == self.me;
        // Result files go after the result: a small reply is not held behind a large file on
        // the same link, and the caller, knowing what is coming, can show the files' progress.
        let mut file_bundles = Vec::new();
        let message = match outcome {
            Outcome::Success {
                value,
                files,
                run_ms,
            } => {
                let mut contents = Vec::new();
                let mut value = value;
                if value.len() > self.config.inline_limit {
                    // Large output rides the data channel as a file named "stdout".
                    contents.push(("stdout".to_string(), value));
                    value = Bytes::new();
                }
                contents.extend(files);
                let hashed: Vec<([u8; 32], String, Bytes)> = contents
                    .into_iter()
                    .map(|(name, content)| (self.hash_file(&content), name, content))
                    .collect();
                let sizes: Vec<([u8; 32], u64)> = hashed
                    .iter()
                    .map(|(h, _, c)| (*h, c.len() as u64))
                    .collect();
                let result = CallResult {
                    id: key.id,
                    server: self.me.clone(),
                    value,
                    files: hashed
                        .iter()
                        .map(|(hash, name, content)| FileRef {
                            hash: *hash,
                            size: content.len() as u64,
                            name: name.clone(),
                        })
                        .collect(),
                    run_ms,
                };
                let files = result.files.len();
                let result = Message::Result(result);
                // The result names every file; a message over the control limit cannot be
                // sent, and that is the procedure's output being too large, not a fault of
                // ours. Checked before any file is kept, so a refused result costs no budget.
                let len = result.encoded_len();
                if len > wire::rpc::MAX_CONTROL_LEN {
                    Message::Reject(Reject {
                        id: key.id,
                        server: self.me.clone(),
                        code: RejectCode::OutputTooLarge,
                        detail: format!(
                            "the result names {files} files, a {len}-byte message over the \
                             {}-byte control limit: return fewer files (an archive of them)",
                            wire::rpc::MAX_CONTROL_LEN
                        ),
                        exit_status: None,
                        stderr_tail: Bytes::new(),
                    })
                } else {
                    match self.fit_new_files(now, node, &sizes) {
                        Ok(()) => {
                            for (hash, _, content) in hashed {
                                self.keep_file(node, hash, &content, deadline);
                                if !local {
                                    file_bundles.push(self.seal_file(content, Some(key.caller)));
                                }
                            }
                            result
                        }
                        Err((needed, budget)) => Message::Reject(Reject {
                            id: key.id,
                            server: self.me.clone(),
                            code: RejectCode::OutputTooLarge,
                            detail: format!(
                                "the procedure's result files ({needed} bytes) do not fit this \
                             server's RPC file budget of {budget} bytes"
                            ),
                            exit_status: None,
                            stderr_tail: Bytes::new(),
                        }),
                    }
                }
            }
            Outcome::Failure {
                code,
                detail,
                exit_status,
                stderr_tail,
            } => {
                let tail = if stderr_tail.len() > wire::rpc::MAX_STDERR_TAIL {
                    stderr_tail.slice(stderr_tail.len() - wire::rpc::MAX_STDERR_TAIL..)
                } else {
                    stderr_tail
                };
                Message::Reject(Reject {
                    id: key.id,
                    server: self.me.clone(),
                    code,
                    detail,
                    exit_status,
                    stderr_tail: tail,
                })
            }
        };
        self.answer(now, node, key, message);
        for payload in file_bundles {
            let _ = self.send_bundle(now, node, Some(&caller), Channel::Data, payload, deadline);
        }
        if any
            && let Ok(sealed) = self.seal(
                &Message::Done(Notice {
                    id: key.id,
                    server: self.me.clone(),
                }),
                None,
            )
        {
            let _ = self.send_bundle(
                now,
                node,
                None,
                Channel::Control(Class::Datagram),
                sealed.clone(),
                deadline,
            );
            // By dtn too: servers in other parts of the network get the call that way.
            let _ = self.send_bundle(
                now,
                node,
                None,
                Channel::Control(Class::Dtn),
                sealed,
                deadline,
            );
        }
        // A reply to this node's own call is handled now, not at the next event.
        self.finish_input(now, node);
    }

    /// Records a call this node serves (in memory; the caller saves it).
    fn insert_serving(&mut self, call: Call, caller_key: PublicKey, state: ServeState, via: Via) {
        let key = ServeKey::new(caller_key, call.id);
        let deadline = call.deadline;
        self.by_call.entry(call.id).or_default().insert(caller_key);
        let before = self.serving.insert(
            key,
            Box::new(Serving {
                call,
                caller_key,
                state,
                via,
                ack_at: None,
                start_at: None,
                armed: None,
                reply: None,
                unsent: false,
                outbox_row: false,
                acked: false,
                reply_stream: None,
                // By deadline: a late copy of the call (which carries it) finds the row once
                // the record has left memory, and the sweep takes rows by key range.
                row: RowOrder::Since(deadline),
            }),
        );
        if before.is_none() {
            self.served.add(caller_key);
        }
    }

    fn reject(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        call: Call,
        caller_key: PublicKey,
        via: Via,
        (code, detail): (RejectCode, String),
    ) {
        let key = ServeKey::new(caller_key, call.id);
        self.insert_serving(call, caller_key, ServeState::WaitingFiles, via);
        self.answer_reject(now, node, key, code, detail);
        self.arm_serving(key);
    }

    pub(super) fn answer_reject(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        key: ServeKey,
        code: RejectCode,
        detail: String,
    ) {
        self.stats.calls_rejected += 1;
        let message = Message::Reject(Reject {
            id: key.id,
            server: self.me.clone(),
            code,
            detail,
            exit_status: None,
            stderr_tail: Bytes::new(),
        });
        self.answer(now, node, key, message);
    }

    /// Seals and stores the reply (the result cache), puts it in the outbox, and sends it.
    fn answer(&mut self, now: DtnTime, node: &mut dyn NodePort, key: ServeKey, message: Message) {
        let sealed = match self.seal(&message, Some(key.caller)) {
            Ok(s) => s,
            Err(e) => {
                // A result over the control limit cannot happen (large values become files);
                // a reject's detail is ours. Answer with the error itself rather than nothing.
                let fallback = Message::Reject(Reject {
                    id: key.id,
                    server: self.me.clone(),
                    code: RejectCode::Internal,
                    detail: format!("the reply could not be encoded: {e}"),
                    exit_status: None,
                    stderr_tail: Bytes::new(),
                });
                match self.seal(&fallback, Some(key.caller)) {
                    Ok(s) => s,
                    Err(_) => return,
                }
            }
        };
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        s.state = ServeState::Answered;
        s.reply = Some(sealed);
        s.unsent = true;
        s.ack_at = None;
        self.save_serving(node, &key);
        self.send_reply(now, node, key);
    }

    /// Sends the stored reply: on the live stream it came by, by datagram if it came so and the
    /// caller is reachable, else by dtn (the paper: the path is checked when the result is
    /// ready). What could not be handed to the node stays in the outbox and is retried.
    pub(super) fn send_reply(&mut self, now: DtnTime, node: &mut dyn NodePort, key: ServeKey) {
        let Some(s) = self.serving.get(&key) else {
            return;
        };
        let Some(sealed) = s.reply.clone() else {
            return;
        };
        let caller = s.call.caller.clone();
        let deadline = s.call.deadline;
        let via = s.via;
        if deadline <= now {
            self.mark_sent(node, key, None);
            return;
        }
        match via {
            Via::Local => {
                self.local.push_back(sealed);
                self.mark_sent(node, key, None);
                return;
            }
            Via::Stream(stream)
                if self.streams.contains_key(&stream)
                    && node.stream_send_last(now, stream, frame(&sealed)).is_ok() =>
            {
                // Kept in the outbox until the stream confirms delivery.
                self.set_reply_stream(key, Some(stream));
                return;
            }
            Via::Datagram
                if node.reachable(&caller).is_some()
                    && self
                        .send_bundle(
                            now,
                            node,
                            Some(&caller),
                            Channel::Control(Class::Datagram),
                            sealed.clone(),
                            deadline,
                        )
                        .is_ok() =>
            {
                self.mark_sent(node, key, None);
                return;
            }
            _ => {}
        }
        match self.send_bundle(
            now,
            node,
            Some(&caller),
            Channel::Control(Class::Dtn),
            sealed,
            deadline,
        ) {
            Ok(()) => self.mark_sent(node, key, None),
            Err(source) => {
                self.errors.push(StateError::ReplyQueued { caller, source });
                self.arm(
                    now + self.config.retry_interval.max(Duration::from_millis(1)),
                    Timer::Serve(key),
                );
            }
        }
    }

    fn mark_sent(&mut self, node: &mut dyn NodePort, key: ServeKey, stream: Option<StreamId>) {
        if let Some(s) = self.serving.get_mut(&key) {
            s.unsent = false;
        }
        // Answered and handed over: its timer (the acknowledgement's) has nothing left to do.
        self.arm_serving(key);
        self.set_reply_stream(key, stream);
        // The record itself is unchanged (which stream a reply is on is not kept): only the
        // outbox row goes.
        self.save_outbox(node, &key);
    }

    /// Records the stream a reply went on (or none), keeping the by-stream index in step.
    fn set_reply_stream(&mut self, key: ServeKey, stream: Option<StreamId>) {
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        if let Some(old) = std::mem::replace(&mut s.reply_stream, stream) {
            self.reply_streams.remove(&(old, key));
        }
        if let Some(new) = stream {
            self.reply_streams.insert((new, key));
        }
    }

    pub(super) fn stream_delivered(&mut self, node: &mut dyn NodePort, stream: StreamId) {
        let keys: Vec<ServeKey> = self
            .reply_streams
            .range((stream, ServeKey::new(PublicKey([0; 32]), CallId([0; 16])))..)
            .take_while(|(s, _)| *s == stream)
            .map(|(_, k)| *k)
            .collect();
        for key in keys {
            self.mark_sent(node, key, None);
        }
    }

    pub(super) fn server_path_lost(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        stream: StreamId,
    ) {
        let keys: Vec<ServeKey> = self
            .serving
            .iter()
            .filter(|(_, s)| s.reply_stream == Some(stream) || s.via == Via::Stream(stream))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            self.set_reply_stream(key, None);
            // No stream covers an unsent reply any more: it needs its outbox row.
            self.save_outbox(node, &key);
            let Some(s) = self.serving.get_mut(&key) else {
                continue;
            };
            s.via = Via::Dtn;
            if s.state == ServeState::Answered && s.unsent {
                // The reply may not have arrived: by dtn (the caller takes one copy).
                self.send_reply(now, node, key);
            }
        }
    }

    fn send_ack(&mut self, now: DtnTime, node: &mut dyn NodePort, key: ServeKey) {
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        // Counted as sent even if it is lost: the reply then keeps an outbox row for nothing,
        // never the other way round.
        s.acked = true;
        let (via, caller, deadline) = (s.via, s.call.caller.clone(), s.call.deadline);
        let ack = Message::Ack(Ack {
            id: key.id,
            server: self.me.clone(),
        });
        let Ok(sealed) = self.seal(&ack, Some(key.caller)) else {
            return;
        };
        match via {
            Via::Stream(stream) if self.streams.contains_key(&stream) => {
                let _ = node.stream_send(now, stream, frame(&sealed));
            }
            Via::Datagram => {
                let _ = self.send_bundle(
                    now,
                    node,
                    Some(&caller),
                    Channel::Control(Class::Datagram),
                    sealed,
                    deadline,
                );
            }
            Via::Local => self.local.push_back(sealed),
            _ => {}
        }
    }

    /// Sets a served call's timer to the first thing it waits for (acknowledging, starting,
    /// its deadline), or takes it out if it waits for nothing. The outbox's retry timer is
    /// another, set apart.
    pub(super) fn arm_serving(&mut self, key: ServeKey) {
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        let mut at = s.call.deadline;
        if let Some(a) = s.ack_at {
            at = at.min(a);
        }
        if let Some(a) = s.start_at {
            at = at.min(a);
        }
        let waits = !matches!(s.state, ServeState::Answered | ServeState::Skipped) || s.unsent;
        let new = waits.then_some(at);
        if s.armed == new {
            return;
        }
        let old = std::mem::replace(&mut s.armed, new);
        if let Some(old) = old {
            self.timers.remove(&(old, Timer::Serve(key)));
        }
        if let Some(at) = new {
            self.arm(at, Timer::Serve(key));
        }
    }

    pub(super) fn serve_timer(&mut self, now: DtnTime, node: &mut dyn NodePort, key: ServeKey) {
        let Some(s) = self.serving.get_mut(&key) else {
            return;
        };
        if s.ack_at.is_some_and(|a| a <= now) {
            s.ack_at = None;
            if matches!(s.state, ServeState::Running(_) | ServeState::WaitingFiles) {
                self.send_ack(now, node, key);
            }
        }
        if let Some(s) = self.serving.get_mut(&key)
            && s.start_at.is_some_and(|t| t <= now)
        {
            // The start jitter is over: from now on the call starts as soon as it can (when its
            // last file arrives, if one is missing). Kept, the past time would re-arm the timer
            // at once, for ever.
            s.start_at = None;
            self.try_start(now, node, key);
        }
        let Some(s) = self.serving.get(&key) else {
            return;
        };
        if now >= s.call.deadline {
            match s.state {
                ServeState::Running(job) => {
                    self.jobs.remove(&job);
                    self.events.push_back(RpcEvent::Abort {
                        job,
                        reason: "the call's deadline passed",
                    });
                    self.answer_reject(
                        now,
                        node,
                        key,
                        RejectCode::Expired,
                        "the deadline passed while it ran".into(),
                    );
                }
                ServeState::WaitingFiles => {
                    self.answer_reject(
                        now,
                        node,
                        key,
                        RejectCode::Expired,
                        "the deadline passed before its files arrived".into(),
                    );
                }
                _ => {}
            }
            if let Some(s) = self.serving.get_mut(&key)
                && s.unsent
            {
                // Nobody can use it any more.
                s.unsent = false;
                self.save_serving(node, &key);
            }
            return;
        }
        if s.state == ServeState::Answered && s.unsent && s.reply_stream.is_none() {
            self.send_reply(now, node, key);
        }
        self.arm_serving(key);
    }

    pub(super) fn serve_cancel(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        cancel: Cancel,
        sender: PublicKey,
    ) {
        // Calls are keyed by their caller's key, so another key cancels nothing; one that
        // claims a known caller is still a mismatch to show.
        if !self.check_key(now, &cancel.caller.node_id(), sender, "cancel") {
            return;
        }
        let key = ServeKey::new(sender, cancel.id);
        let Some(s) = self.serving.get(&key) else {
            return;
        };
        match s.state {
            ServeState::Running(job) => {
                self.jobs.remove(&job);
                self.events.push_back(RpcEvent::Abort {
                    job,
                    reason: "cancelled by the caller",
                });
            }
            ServeState::WaitingFiles => {}
            ServeState::Answered | ServeState::Skipped => return,
        }
        if let Some(s) = self.serving.get_mut(&key) {
            s.state = ServeState::Skipped;
            s.unsent = false;
        }
        self.save_serving(node, &key);
    }

    pub(super) fn serve_notice(
        &mut self,
        now: DtnTime,
        node: &mut dyn NodePort,
        notice: Notice,
        sender: PublicKey,
        done: bool,
    ) {
        if sender == self.trust.identity.public() {
            return;
        }
        if let Some(trusted) = &self.config.trusted_servers
            && !trusted.contains(&sender)
        {
            self.stats.untrusted_notices += 1;
            return;
        }
        // A notice in the name of a server whose key is known must be signed by it.
        if !self.check_key(now, &notice.server.node_id(), sender, "notice") {
            return;
        }
        let entry = self
            .notices
            .entry(notice.id)
            .or_insert((done, now + NOTICE_MEMORY));
        entry.0 |= done;
        let callers: Vec<PublicKey> = self
            .by_call
            .get(&notice.id)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for caller in callers {
            let key = ServeKey::new(caller, notice.id);
            let Some(s) = self.serving.get(&key) else {
                continue;
            };
            if s.call.mode != Mode::Any {
                continue;
            }
            match s.state {
                ServeState::WaitingFiles => {}
                ServeState::Running(job) if done => {
                    self.jobs.remove(&job);
                    self.events.push_back(RpcEvent::Abort {
                        job,
                        reason: "another server finished this any-mode call",
                    });
                }
                // Two servers started within the time a notice takes to cross: each hears the
                // other's STARTED, and both agree, without another message, that the one with
                // the smaller key goes on.
                ServeState::Running(job) if sender.0 < self.trust.identity.public().0 => {
                    self.jobs.remove(&job);
                    self.events.push_back(RpcEvent::Abort {
                        job,
                        reason: "another server started this any-mode call too, and goes on",
                    });
                }
                _ => continue,
            }
            self.stats.skipped += 1;
            if let Some(s) = self.serving.get_mut(&key) {
                s.state = ServeState::Skipped;
                s.unsent = false;
                s.ack_at = None;
            }
            self.save_serving(node, &key);
        }
    }

    fn record_skipped(
        &mut self,
        node: &mut dyn NodePort,
        call: Call,
        caller_key: PublicKey,
        via: Via,
    ) {
        let key = ServeKey::new(caller_key, call.id);
        self.insert_serving(call, caller_key, ServeState::Skipped, via);
        self.save_serving(node, &key);
    }
}
