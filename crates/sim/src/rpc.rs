//! DTN-RPC in the simulator: an [`App`] that puts one [`rpc::Rpc`] engine on every node's host,
//! runs simulated procedures (each a [`Behaviour`] with a running time) when the host says a
//! call is durable, makes scripted calls and keeps the record the RPC invariants are checked
//! against: how many times each call ran on each server (at most once, across crashes and power
//! cuts), and how every call ended.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use host::Output;
use rpc::{
    CallRequest, CallState, CallView, Job, JobId, Outcome, ParamType, ProcedureSpec, Rpc,
    RpcConfig, RpcEvent, SharedMemo, Target,
};
use wire::DtnTime;
use wire::rpc::{CallId, Message, RejectCode, Value};

use crate::{App, SimHost, SimToken};

/// What a simulated procedure does.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// After `run_ms`, returns its text and bytes parameters concatenated, then the server's
    /// index as text (so results from different servers differ).
    Echo {
        /// Running time.
        run_ms: u64,
    },
    /// After `run_ms`, answers every file parameter with a result file of the same size, with
    /// its text parameters and the server's index as the value: the DTN-RPC paper's echo, which
    /// sent its file both ways. The result's first bytes name the file it answers (a marker and
    /// the file's hash) and the rest is zeros, so its content hash differs and the caller has to
    /// receive it over the network; a simulated procedure computes nothing else, and a large
    /// zeroed buffer is fresh pages nobody writes. Servers of the same file share one result
    /// buffer.
    EchoFiles {
        /// Running time.
        run_ms: u64,
    },
    /// After `run_ms`, returns a file of `size` bytes (and a short value).
    File {
        /// Size of the file.
        size: usize,
        /// Running time.
        run_ms: u64,
    },
    /// After `run_ms`, fails with exit status 3.
    Fail {
        /// Running time.
        run_ms: u64,
    },
    /// Calls `procedure` at `target` (with its own parameters) and returns that call's first
    /// result prefixed by the server's index: a server that is also a client, as in NoWait-RPC.
    Nested {
        /// Whom to call.
        target: Target,
        /// Which procedure.
        procedure: String,
    },
}

/// A procedure a simulated node offers.
#[derive(Debug, Clone)]
pub struct SimProcedure {
    /// The engine's view (name, types, predicates, allow-list, concurrency).
    pub spec: ProcedureSpec,
    /// What running it does.
    pub behaviour: Behaviour,
}

enum Running {
    /// Finishes at this time with this outcome.
    Timed(DtnTime, Outcome),
    /// Waits for the nested call.
    Nested,
}

/// Why a scripted call could not be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotMade {
    /// The node runs no RPC engine.
    #[error("the node has no RPC engine")]
    NoEngine,
    /// The engine refused it (shared: a [`Made`] is cloned into reports).
    #[error(transparent)]
    Refused(Arc<rpc::CallError>),
}

/// One call the script made.
#[derive(Debug, Clone)]
pub struct Made {
    /// The calling node.
    pub node: usize,
    /// The action tag that made it.
    pub tag: u64,
    /// The call's id, or why it could not be made.
    pub id: Result<CallId, NotMade>,
    /// When it was made, or refused.
    pub at: DtnTime,
    /// When the call became durable at its node (the daemon answers its caller only then): a
    /// power cut before it may take the call with it, unnoticed by anyone.
    pub durable_at: Option<DtnTime>,
}

/// The RPC layer of a simulated network.
pub struct RpcApp {
    configs: Vec<RpcConfig>,
    procedures: Vec<BTreeMap<String, Behaviour>>,
    secrets: Vec<[u8; 32]>,
    /// How often each node started (its engine's seed differs at each start).
    starts: Vec<u64>,
    jobs: BTreeMap<(usize, JobId), Running>,
    nested: BTreeMap<(usize, CallId), JobId>,
    script: BTreeMap<u64, CallRequest>,
    /// Results of [`Behaviour::EchoFiles`] for the last few files echoed (file hash → echo), so
    /// that many servers echoing one file share one buffer.
    echoed: VecDeque<([u8; 32], Bytes)>,
    /// What every node's engine computes alike (`Rpc::share_memo`): the hash of a file whose
    /// buffer the nodes share, computed once, not at every node it reaches; a hello's signature
    /// check; the buffers large stand-ins are made in.
    memo: SharedMemo,
    /// Whether the engines seal files with stand-ins ([`RpcApp::stand_in_file_seals`]).
    stand_in_file_seals: bool,
    /// Calls the script made, in order.
    pub made: Vec<Made>,
    /// How many times each server ran each call: (server, call) → runs.
    pub executions: BTreeMap<(usize, CallId), u32>,
    /// Executions stopped by the engine (cancel, any-mode done elsewhere, deadline).
    pub aborted: u64,
    /// How every finished call of every node ended.
    pub finished: BTreeMap<(usize, CallId), CallView>,
}

impl RpcApp {
    /// An RPC layer for `nodes` nodes, none offering anything yet.
    pub fn new(nodes: usize) -> Self {
        Self {
            configs: vec![RpcConfig::default(); nodes],
            procedures: vec![BTreeMap::new(); nodes],
            // Node identities are fixed by index, so a run is reproducible.
            secrets: (0..nodes)
                .map(|i| {
                    let mut s = [0x5e; 32];
                    s[..8].copy_from_slice(&(i as u64).to_le_bytes());
                    s
                })
                .collect(),
            starts: vec![0; nodes],
            jobs: BTreeMap::new(),
            nested: BTreeMap::new(),
            script: BTreeMap::new(),
            echoed: VecDeque::new(),
            memo: SharedMemo::default(),
            stand_in_file_seals: false,
            made: Vec::new(),
            executions: BTreeMap::new(),
            aborted: 0,
            finished: BTreeMap::new(),
        }
    }

    /// Whether every node's engine seals the files it sends to one node with a stand-in of the
    /// same length (`Rpc::stand_in_file_seals`; a large one hollow, its content carried beside
    /// it in the shared memo), rather than for real as the daemon does. Off by default. What a run finds is the same either way: simulated
    /// nodes compute in no simulated time, and a file's envelope counts by its length. The
    /// cipher is most of the wall time of runs with 100 MB files (every server of an `all` call
    /// seals its result for the caller). Takes effect for engines started after it is set.
    pub fn stand_in_file_seals(&mut self, on: bool) {
        self.stand_in_file_seals = on;
    }

    /// The memo every node's engine shares: a caller that makes files tells it their hashes.
    pub fn memo(&self) -> SharedMemo {
        self.memo.clone()
    }

    /// Stand-in files that arrived whose content the shared memo no longer held
    /// (`rpc::SharedMemo::hollow_misses`): each opened to nothing where a real seal opens.
    pub fn hollow_misses(&self) -> u64 {
        self.memo.hollow_misses()
    }

    /// The public key node `i` will have.
    pub fn key(&self, i: usize) -> seal::PublicKey {
        seal::Identity::from_secret(self.secrets[i]).public()
    }

    /// Changes node `i`'s engine configuration (before the run).
    pub fn configure(&mut self, i: usize, f: impl FnOnce(&mut RpcConfig)) {
        f(&mut self.configs[i]);
    }

    /// Node `i` offers a procedure.
    pub fn offer(&mut self, i: usize, procedure: SimProcedure) {
        self.procedures[i].insert(procedure.spec.name.clone(), procedure.behaviour);
        self.configs[i].procedures.push(procedure.spec);
    }

    /// Registers a call for [`crate::Sim::schedule_action`] with this tag.
    pub fn script(&mut self, tag: u64, request: CallRequest) {
        self.script.insert(tag, request);
    }

    /// Makes a call from node `i` now, recorded under `tag` like a scripted one (for apps that
    /// decide their calls as the run goes, such as the paper experiments' call sequences). The
    /// request is not kept, so its file parameters are freed once the network is done with them.
    pub fn call(
        &mut self,
        now: DtnTime,
        i: usize,
        host: &mut SimHost,
        tag: u64,
        request: CallRequest,
    ) {
        let id = match host.rpc_mut() {
            Some((rpc, node)) => rpc
                .call(now, node, request)
                .map_err(|e| NotMade::Refused(Arc::new(e))),
            None => Err(NotMade::NoEngine),
        };
        if id.is_ok() {
            host.promise(SimToken::App(tag));
        }
        self.made.push(Made {
            node: i,
            tag,
            id,
            at: now,
            durable_at: None,
        });
    }

    /// The call made by the action with this tag.
    pub fn made_by(&self, tag: u64) -> Option<&Made> {
        self.made.iter().find(|m| m.tag == tag)
    }

    /// How the call made by the action `tag` ended (if it did).
    pub fn outcome(&self, tag: u64) -> Option<&CallView> {
        let m = self.made_by(tag)?;
        let id = m.id.as_ref().ok()?;
        self.finished.get(&(m.node, *id))
    }

    /// The most executions any call had on any one server (the at-most-once invariant: ≤ 1).
    pub fn max_executions(&self) -> u32 {
        self.executions.values().copied().max().unwrap_or(0)
    }

    /// A job the node's restart cut off: a simulated execution dies with its server's process,
    /// so it ran if it was ever started.
    fn resume(&mut self, now: DtnTime, i: usize, host: &mut SimHost, job: Job) {
        let prior = if self.executions.contains_key(&(i, job.call)) {
            rpc::PriorRun::Started {
                detail: "it was running when the server restarted".into(),
            }
        } else {
            rpc::PriorRun::NeverStarted
        };
        // If it runs, the host hands it back as an execution once that is durable.
        host.resume(now, job, prior);
    }

    /// A call node `i` made is over: recorded, and a nested call's outcome ends its job.
    fn call_finished(&mut self, now: DtnTime, i: usize, host: &mut SimHost, id: CallId) {
        // From the store if the call has left the engine's memory already.
        let Some(view) = host.rpc().and_then(|rpc| rpc.call_record(host.node(), &id)) else {
            return;
        };
        if let Some(job) = self.nested.remove(&(i, id)) {
            let outcome = nested_outcome(i, &view);
            self.jobs.remove(&(i, job));
            host.finished(now, job, outcome);
        }
        self.finished.insert((i, id), view);
    }

    /// The echo of a file ([`Behaviour::EchoFiles`]), made once per file and shared.
    fn echo_of(&mut self, hash: [u8; 32], content: &Bytes) -> Bytes {
        if let Some((_, echo)) = self.echoed.iter().find(|(h, _)| *h == hash) {
            return echo.clone();
        }
        let (echo, echo_hash) = echo_file(&hash, content.len());
        self.memo.note_hash(&echo, echo_hash);
        if self.echoed.len() >= 4 {
            self.echoed.pop_front();
        }
        self.echoed.push_back((hash, echo.clone()));
        echo
    }

    fn execute(&mut self, now: DtnTime, i: usize, host: &mut SimHost, job: Job) {
        *self.executions.entry((i, job.call)).or_default() += 1;
        let behaviour = self.procedures[i].get(&job.procedure).cloned();
        let running = match behaviour {
            Some(Behaviour::Echo { run_ms }) => {
                let mut value = Vec::new();
                for p in &job.params {
                    match p {
                        Value::Text(t) => value.extend_from_slice(t.as_bytes()),
                        Value::Bytes(b) => value.extend_from_slice(b),
                        _ => {}
                    }
                }
                for (_, content) in &job.files {
                    value.extend_from_slice(content);
                }
                value.extend_from_slice(format!("@{i}").as_bytes());
                let outcome = Outcome::Success {
                    value: Bytes::from(value),
                    files: Vec::new(),
                    run_ms,
                };
                Running::Timed(now + Duration::from_millis(run_ms), outcome)
            }
            Some(Behaviour::EchoFiles { run_ms }) => {
                let mut value = Vec::new();
                for p in &job.params {
                    if let Value::Text(t) = p {
                        value.extend_from_slice(t.as_bytes());
                    }
                }
                value.extend_from_slice(format!("@{i}").as_bytes());
                let files = job
                    .files
                    .iter()
                    .map(|(file, content)| {
                        (
                            format!("echo-{}", file.name),
                            self.echo_of(file.hash, content),
                        )
                    })
                    .collect();
                let outcome = Outcome::Success {
                    value: Bytes::from(value),
                    files,
                    run_ms,
                };
                Running::Timed(now + Duration::from_millis(run_ms), outcome)
            }
            Some(Behaviour::File { size, run_ms }) => {
                let content: Vec<u8> = (0..size).map(|k| (k * 7 + i) as u8).collect();
                let outcome = Outcome::Success {
                    value: Bytes::from(format!("file from {i}")),
                    files: vec![("picture.pgm".to_string(), Bytes::from(content))],
                    run_ms,
                };
                Running::Timed(now + Duration::from_millis(run_ms), outcome)
            }
            Some(Behaviour::Fail { run_ms }) => Running::Timed(
                now + Duration::from_millis(run_ms),
                Outcome::Failure {
                    code: RejectCode::ExecutionFailed,
                    detail: "exit status 3".into(),
                    exit_status: Some(3),
                    stderr_tail: Bytes::from_static(b"simulated failure\n"),
                },
            ),
            Some(Behaviour::Nested { target, procedure }) => {
                let params = job.params.iter().cloned().map(rpc::Param::Value).collect();
                let mut request = CallRequest::new(target, &procedure, params);
                request.deadline = Some(job.deadline);
                let made = match host.rpc_mut() {
                    Some((rpc, node)) => rpc.call(now, node, request).map_err(|e| e.to_string()),
                    None => Err("no RPC engine".to_string()),
                };
                match made {
                    Ok(id) => {
                        self.nested.insert((i, id), job.id);
                        Running::Nested
                    }
                    Err(e) => Running::Timed(
                        now,
                        Outcome::Failure {
                            code: RejectCode::ExecutionFailed,
                            detail: format!("nested call failed: {e}"),
                            exit_status: None,
                            stderr_tail: Bytes::new(),
                        },
                    ),
                }
            }
            None => Running::Timed(
                now,
                Outcome::Failure {
                    code: RejectCode::Internal,
                    detail: "no behaviour".into(),
                    exit_status: None,
                    stderr_tail: Bytes::new(),
                },
            ),
        };
        self.jobs.insert((i, job.id), running);
    }
}

fn nested_outcome(i: usize, view: &CallView) -> Outcome {
    let result = view.replies.iter().find_map(|r| match &r.message {
        Message::Result(res) => Some(res.value.clone()),
        _ => None,
    });
    match (view.state, result) {
        (CallState::Succeeded, Some(value)) => {
            let mut v = format!("{i}<").into_bytes();
            v.extend_from_slice(&value);
            Outcome::Success {
                value: Bytes::from(v),
                files: Vec::new(),
                run_ms: 0,
            }
        }
        (state, _) => Outcome::Failure {
            code: RejectCode::ExecutionFailed,
            detail: format!("nested call {}", state.name()),
            exit_status: None,
            stderr_tail: Bytes::new(),
        },
    }
}

impl App for RpcApp {
    fn started(&mut self, now: DtnTime, i: usize, host: &mut SimHost) {
        // A restart: the process died, its executions and its engine's memory with it.
        self.jobs.retain(|(n, _), _| *n != i);
        self.nested.retain(|(n, _), _| *n != i);
        let identity = seal::Identity::from_secret(self.secrets[i]);
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
        seed[8..16].copy_from_slice(&self.starts[i].to_le_bytes());
        self.starts[i] += 1;
        let mut rpc = Rpc::new(
            self.configs[i].clone(),
            identity,
            seed,
            host.node_mut(),
            now,
        );
        rpc.share_memo(self.memo.clone());
        if self.stand_in_file_seals {
            rpc.stand_in_file_seals();
        }
        host.set_rpc(rpc);
    }

    fn output(&mut self, now: DtnTime, i: usize, host: &mut SimHost, output: Output<SimToken>) {
        match output {
            Output::Execute(job) => self.execute(now, i, host, job),
            Output::Resume(job) => self.resume(now, i, host, job),
            Output::Abort { job, .. } if self.jobs.remove(&(i, job)).is_some() => {
                self.aborted += 1;
            }
            Output::Rpc(RpcEvent::CallFinished(id)) => self.call_finished(now, i, host, id),
            Output::Release {
                token: SimToken::App(tag),
                error: None,
            } => {
                if let Some(made) = self.made.iter_mut().find(|m| m.tag == tag && m.node == i) {
                    made.durable_at = Some(now);
                }
            }
            _ => {}
        }
    }

    fn timeout(&mut self, now: DtnTime, i: usize, host: &mut SimHost) {
        let due: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|((n, _), r)| *n == i && matches!(r, Running::Timed(t, _) if *t <= now))
            .map(|((_, j), _)| *j)
            .collect();
        for job in due {
            if let Some(Running::Timed(_, outcome)) = self.jobs.remove(&(i, job)) {
                host.finished(now, job, outcome);
            }
        }
    }

    fn next_timeout(&self, i: usize) -> Option<DtnTime> {
        self.jobs
            .iter()
            .filter(|((n, _), _)| *n == i)
            .filter_map(|(_, r)| match r {
                Running::Timed(t, _) => Some(*t),
                Running::Nested => None,
            })
            .min()
    }

    fn action(&mut self, now: DtnTime, i: usize, host: &mut SimHost, action: u64) {
        let Some(request) = self.script.get(&action).cloned() else {
            return;
        };
        self.call(now, i, host, action, request);
    }
}

/// A procedure open to everyone with these parameter types.
pub fn procedure(name: &str, params: &[ParamType], behaviour: Behaviour) -> SimProcedure {
    SimProcedure {
        spec: ProcedureSpec::new(name, params.to_vec()),
        behaviour,
    }
}

/// The result file answering a file of `len` bytes with content hash `hash`: its first bytes a
/// marker and the hash, the rest zeros; and its own hash.
pub(crate) fn echo_file(hash: &[u8; 32], len: usize) -> (Bytes, [u8; 32]) {
    let head = [b"ferry echo of ".as_slice(), hash].concat();
    crate::made_files::zero_tailed(&head, len)
}
