//! The RPC engine's I/O shell inside the event loop: it builds the sans-IO [`rpc::Rpc`] from the
//! configuration and the node's identity file, runs the executions the engine asks for
//! ([`crate::exec`]) as tasks, cancels them when the engine aborts them, and hands their outcomes
//! back. The event loop owns it next to the node and calls it from its pump.
//!
//! **What it never does**: decide anything about a call. Admission, dedup, transports, retries
//! and replies are the engine's; this module only does what the engine cannot (spawn processes,
//! read the identity file, draw the seed from the OS).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use host::Host;
use node::Node;
use rpc::require::{Facts, Requirement};
use rpc::{JobId, ParamType, Rpc, RpcEvent};
use seal::PublicKey;
use tokio::sync::{mpsc, oneshot};
use wire::DtnTime;
use wire::rpc::{RejectCode, Value};

use crate::calls::{ParamInfo, ProcedureInfo};
use crate::config::{Config, ProcedureConfig};
use crate::core::Token;
use crate::error::{IoContext as _, StartError};
use crate::exec;
use crate::facts::Readings;
use crate::providers::{ProviderRequest, ProviderTimer, Providers};

/// The procedure every node serves in-process, without parameters, answering an empty result:
/// like ONC RPC's procedure 0, it lets a caller check that a server is there and measure the
/// cost of the call machinery alone.
pub const NULL_PROCEDURE: &str = "null";

/// The procedure every node serves in-process, without parameters, answering what it serves
/// as JSON (the declarations of `GET /v1/procedures`): how a caller learns a remote node's
/// procedures, with their parameters' names and types, to write typed stubs for them.
pub const DESCRIBE_PROCEDURE: &str = "ferry.procedures";

/// The name of the identity file in the data directory.
pub const IDENTITY_FILE: &str = "identity";

/// The directory of the durable records of executions in the data directory (see
/// [`crate::exec`]): one file per execution that may have started and whose answer is not
/// durable yet.
pub const EXECUTIONS_DIR: &str = "executions";

/// An execution's outcome on its way back to the event loop.
pub type Finished = (JobId, rpc::Outcome);

/// The executions the engine started, and what the daemon knows of them.
pub struct RpcShell {
    procedures: BTreeMap<String, ProcedureConfig>,
    work_root: PathBuf,
    /// Where executions' records are kept.
    records: PathBuf,
    /// What the previous run of this node left of its executions (record file name → what is
    /// known of the run), until the engine's resumed jobs have claimed theirs; the rest are
    /// stale (their answers were durable) and removed at the first event after the engine's
    /// start.
    prior: Option<BTreeMap<String, String>>,
    /// Records of executions whose outcomes the engine has: removed once that is durable.
    records_done: Vec<PathBuf>,
    /// Cancel switches and records of running executions.
    running: BTreeMap<JobId, (oneshot::Sender<()>, PathBuf)>,
    /// Records of executions the engine aborted, until their processes are gone.
    stopping: BTreeMap<JobId, PathBuf>,
    /// Executions started since the node started, by procedure (configured and provided names,
    /// at most 4096).
    started: BTreeMap<String, u64>,
    finished: mpsc::Sender<Finished>,
    /// Whether a call this node made changed since the last commit (API waiters look again).
    pub calls_changed: bool,
    /// Which calls changed since the core last looked (it answers their waiters).
    pub changed_calls: std::collections::BTreeSet<wire::rpc::CallId>,
    /// Whether the bound of presented keys was logged (once).
    presented_bound_logged: bool,
    /// Whether the bound of learnt keys was logged (once).
    learnt_bound_logged: bool,
    /// Whether the served-call records' bound was logged.
    served_bound_logged: bool,
    /// Procedures applications serve, and the jobs handed to them.
    pub providers: Providers,
}

impl RpcShell {
    /// The engine for `node`: identity from `<data_dir>/identity` (created on first start),
    /// predicates parsed (an error renders the faulty spot), durable state loaded; and its
    /// shell. Returns the receiver the event loop reads finished executions from.
    pub fn new(
        config: &Config,
        data_dir: &Path,
        node: &mut Node,
        now: DtnTime,
    ) -> Result<
        (
            Self,
            Rpc,
            mpsc::Receiver<Finished>,
            mpsc::Receiver<ProviderTimer>,
        ),
        StartError,
    > {
        let identity_path = data_dir.join(IDENTITY_FILE);
        let (identity, created) = crate::identity::load_or_create(&identity_path)?;
        if created {
            tracing::info!(
                "created this node's identity {} in {}",
                identity.public(),
                identity_path.display()
            );
        }
        // Before the engine resumes anything: what the previous run left running is killed,
        // and what is known of each of its executions is at hand when the engine asks.
        let records = data_dir.join(EXECUTIONS_DIR);
        {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&records)
                .doing(|| format!("creating {}", records.display()))?;
            // The directory's name must be durable too: each record is synced with its
            // directory before its spawn, but a power cut that took `executions` itself (a
            // name never synced in `data_dir`) would take every record with it, and the next
            // start would run again calls whose programs had run (found by the power-cut soak,
            // crates/ferry/tests/soak.rs; tested by exec_crash.rs).
            std::fs::File::open(data_dir)
                .and_then(|d| d.sync_all())
                .doing(|| format!("syncing {}", data_dir.display()))?;
        }
        let prior = exec::recover_records(&records)
            .doing(|| format!("reading the execution records in {}", records.display()))?;
        let engine_config = engine_config(config)?;
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|error| StartError::Random {
            what: "the RPC engine's seed",
            error,
        })?;
        let engine = Rpc::new(engine_config, identity, seed, node, now);
        let (tx, rx) = mpsc::channel(256);
        let (timers, timers_rx) = mpsc::channel(256);
        let providers = Providers::new(timers, records.clone(), config.rpc.provider_grace);
        let shell = Self {
            procedures: config
                .rpc
                .procedures
                .iter()
                .map(|p| (p.name.clone(), p.clone()))
                .collect(),
            work_root: config.rpc.work_dir(data_dir),
            records,
            prior: Some(prior),
            records_done: Vec::new(),
            running: BTreeMap::new(),
            stopping: BTreeMap::new(),
            started: BTreeMap::new(),
            finished: tx,
            calls_changed: false,
            changed_calls: Default::default(),
            presented_bound_logged: false,
            learnt_bound_logged: false,
            served_bound_logged: false,
            providers,
        };
        Ok((shell, engine, rx, timers_rx))
    }

    /// The procedures this node serves, in name order.
    pub fn procedures(&self) -> impl Iterator<Item = &ProcedureConfig> {
        self.procedures.values()
    }

    /// What this node serves, in name order: the configured procedures, those applications
    /// provide, and the built-in `null` and `ferry.procedures`.
    pub fn procedure_infos(&self) -> Vec<ProcedureInfo> {
        let param = |name: Option<&String>, ty: ParamType| ParamInfo {
            name: name.cloned(),
            ty: ty.name().to_owned(),
        };
        let mut list: Vec<ProcedureInfo> = self
            .procedures
            .values()
            .map(|p| ProcedureInfo {
                name: p.name.clone(),
                params: p.params.iter().map(|t| t.name().to_owned()).collect(),
                parameters: p
                    .params
                    .iter()
                    .zip(&p.param_names)
                    .map(|(t, n)| param(n.as_ref(), *t))
                    .collect(),
                returns: p.returns.map(|r| r.name().to_owned()),
                served_by: "program".into(),
                connected: None,
                description: p.description.clone(),
                max_concurrent: p.max_concurrent,
                require: p.require.clone(),
                restricted: p.allow.is_some(),
                executions: self.started(&p.name),
            })
            .collect();
        list.extend(
            self.providers
                .procedures()
                .map(|(p, connected)| ProcedureInfo {
                    name: p.name.clone(),
                    params: p.params.iter().map(|(_, t)| t.name().to_owned()).collect(),
                    parameters: p.params.iter().map(|(n, t)| param(Some(n), *t)).collect(),
                    returns: p.returns.map(|r| r.name().to_owned()),
                    served_by: "application".into(),
                    connected: Some(connected),
                    description: p.description.clone(),
                    max_concurrent: p.max_concurrent,
                    require: p.require.clone(),
                    restricted: p.allow.is_some(),
                    executions: self.started(&p.name),
                }),
        );
        let builtin = |name: &str, description: &str, returns: Option<&str>| ProcedureInfo {
            name: name.into(),
            params: Vec::new(),
            parameters: Vec::new(),
            returns: returns.map(str::to_owned),
            served_by: "node".into(),
            connected: None,
            description: Some(description.into()),
            max_concurrent: u32::MAX,
            require: None,
            restricted: false,
            executions: 0,
        };
        list.push(builtin(
            NULL_PROCEDURE,
            "built in: answers at once with an empty value, runs no program (to measure calls)",
            None,
        ));
        list.push(builtin(
            DESCRIBE_PROCEDURE,
            "built in: the procedures this node serves, with their parameters (JSON, as GET /v1/procedures; for `ferry procedures NODE --stubs`)",
            Some("json"),
        ));
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list
    }

    /// How many executions of `procedure` were started since the node started.
    pub fn started(&self, procedure: &str) -> u64 {
        self.started.get(procedure).copied().unwrap_or(0)
    }

    /// Where executions get their working directories.
    pub fn work_root(&self) -> &Path {
        &self.work_root
    }

    /// An RPC event the host passed on: changed calls are noted for their waiters, key
    /// mismatches told to the operator.
    pub fn on_event(&mut self, event: RpcEvent) {
        match event {
            RpcEvent::CallChanged(id) | RpcEvent::CallFinished(id) => {
                self.calls_changed = true;
                self.changed_calls.insert(id);
            }
            RpcEvent::KeyMismatch {
                node: claimed,
                known,
                presented,
                message,
            } => {
                tracing::warn!(
                    "rpc: dropped a {message} from {claimed} signed by key {presented}, not \
                     the key known for it ({known}); if {claimed} was reinstalled, accept \
                     its new key with `ferry keys accept {claimed}`"
                );
            }
            // The host turns these into its own outputs.
            RpcEvent::Execute(_) | RpcEvent::Abort { .. } => {}
        }
    }

    /// Tells the operator, once each, that the engine's key tables are full.
    pub fn log_bounds(&mut self, engine: &Rpc) {
        if !self.learnt_bound_logged && engine.stats().keys_not_learnt > 0 {
            self.learnt_bound_logged = true;
            tracing::warn!(
                "rpc: {} keys are known, the most kept; new nodes' keys are not learnt (counted \
                 in ferry_rpc_keys_not_learnt_total; `ferry keys forget` makes room)",
                rpc::MAX_LEARNT_KEYS
            );
        }
        if !self.served_bound_logged
            && engine.stats().served_table_full + engine.stats().served_caller_full > 0
        {
            self.served_bound_logged = true;
            tracing::warn!(
                "rpc: new calls are dropped unheard: this node keeps its most served-call \
                 records ({} kept; [rpc] max_served_calls, and max_served_calls_per_caller for \
                 one caller), each until its call's deadline plus an hour (counted in \
                 ferry_rpc_calls_dropped_unheard_total)",
                engine.served_records()
            );
        }
        if !self.presented_bound_logged && engine.stats().presented_keys_dropped > 0 {
            self.presented_bound_logged = true;
            tracing::warn!(
                "rpc: more nodes presented keys other than their known ones than are kept; the \
                 longest unseen are forgotten (counted in \
                 ferry_rpc_presented_keys_dropped_total)"
            );
        }
    }

    /// The engine asked about every execution the restart cut off when it loaded (the host
    /// passed each on as a resume before anything else): records it did not ask about belong
    /// to calls whose answers were durable before the crash, and are removed.
    pub fn forget_stale_records(&mut self) {
        if let Some(stale) = self.prior.take() {
            let stale: Vec<PathBuf> = stale.into_keys().map(|n| self.records.join(n)).collect();
            exec::remove_records(&stale);
        }
    }

    /// The engine stops an execution.
    pub(crate) fn abort(&mut self, now: DtnTime, host: &mut Host<Token>, job: JobId, reason: &str) {
        if self.providers.abort(now, host, job, reason) {
            return;
        }
        if let Some((cancel, record)) = self.running.remove(&job) {
            tracing::info!("stopping execution {}: {reason}", job.0);
            let _ = cancel.send(());
            // It keeps its record until its processes are gone (`finished`), so that a crash
            // meanwhile still finds and kills them at the next start.
            self.stopping.insert(job, record);
        }
    }

    /// An execution ended: the engine gets its outcome.
    pub(crate) fn finished(
        &mut self,
        now: DtnTime,
        host: &mut Host<Token>,
        job: JobId,
        outcome: rpc::Outcome,
    ) {
        if let Some((_, record)) = self.running.remove(&job) {
            self.records_done.push(record);
        }
        if let Some(record) = self.stopping.remove(&job) {
            self.records_done.push(record);
        }
        host.finished(now, job, outcome);
    }

    /// Records of executions whose outcome the engine has now: the event loop removes them
    /// once the commit that holds the answers is durable (before that, a crash would find the
    /// call running and no record, and run it again).
    pub fn take_records_done(&mut self) -> Vec<PathBuf> {
        let mut done = std::mem::take(&mut self.records_done);
        done.extend(self.providers.take_records_done());
        done
    }

    /// A request of a provider's socket.
    pub(crate) fn provider_request(
        &mut self,
        now: DtnTime,
        host: &mut Host<Token>,
        request: ProviderRequest,
    ) {
        match request {
            ProviderRequest::Register { .. } => {
                let configured = &self.procedures;
                self.providers
                    .register(now, host, &|name| configured.contains_key(name), request);
            }
            ProviderRequest::Answer { conn, job, answer } => {
                self.providers.answer(now, host, conn, job, answer);
            }
            ProviderRequest::Gone { conn } => self.providers.gone(conn),
        }
    }

    /// The record file of a job's execution: one per call and caller.
    fn record_path(&self, job: &rpc::Job) -> PathBuf {
        self.records
            .join(format!("{}-{}", job.call, job.caller_key))
    }

    /// A job whose execution the restart cut off: what the previous run's record says decides,
    /// with the engine's [`rpc::Rpc::resume`], whether it runs (never started, or idempotent)
    /// or its caller learns that it ran and its result was lost.
    pub(crate) fn resume(&mut self, now: DtnTime, host: &mut Host<Token>, job: rpc::Job) {
        let record = self.record_path(&job);
        let name = record
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        let prior = match self.prior.as_mut().and_then(|p| p.remove(&name)) {
            Some(detail) => rpc::PriorRun::Started { detail },
            None => rpc::PriorRun::NeverStarted,
        };
        if !self.procedures.contains_key(&job.procedure) && job.procedure != DESCRIBE_PROCEDURE {
            // A provided procedure: its provider, once it registers again, may still run it or
            // hold its result.
            self.providers.orphan(job, name, prior);
            return;
        }
        tracing::info!(
            "call {} of {} ({}) was cut off by the restart: {prior:?}",
            job.call,
            job.caller,
            job.procedure
        );
        if !host.resume(now, job, prior) {
            self.records_done.push(record);
        }
    }

    /// Runs an execution whose call is durable now (the host said so).
    pub fn execute(&mut self, job: rpc::Job) {
        let id = job.id;
        if job.procedure == DESCRIBE_PROCEDURE {
            // What a stranger may learn: the declarations, not how often they ran.
            let mut list = self.procedure_infos();
            for p in &mut list {
                p.executions = 0;
                p.connected = None;
            }
            let value = serde_json::to_vec(&list).unwrap_or_default();
            let _ = self.finished.try_send((
                id,
                rpc::Outcome::Success {
                    value: Bytes::from(value),
                    files: Vec::new(),
                    run_ms: 0,
                },
            ));
            return;
        }
        let Some(procedure) = self.procedures.get(&job.procedure) else {
            let record = self.record_path(&job);
            let name = job.procedure.clone();
            match self.providers.dispatch(job, record) {
                // Provided names come and go: the counts are bounded.
                Ok(()) if self.started.len() < 4096 || self.started.contains_key(&name) => {
                    *self.started.entry(name).or_default() += 1
                }
                Ok(()) => {}
                Err(outcome) => {
                    let _ = self.finished.try_send((id, outcome));
                }
            }
            return;
        };
        let params = match exec_params(&job) {
            Ok(p) => p,
            Err(reason) => {
                let _ = self
                    .finished
                    .try_send((id, failure(RejectCode::BadArguments, reason)));
                return;
            }
        };
        let record = self.record_path(&job);
        let exec_job = exec::Job {
            program: procedure.exec.clone(),
            args: procedure.args.clone(),
            params,
            timeout: procedure.timeout,
            max_output: procedure.max_output,
            work_root: self.work_root.clone(),
            call_id: job.call.to_string(),
            caller: job.caller.to_string(),
            record: Some(record.clone()),
        };
        tracing::info!(
            "running {} for {} (call {})",
            job.procedure,
            job.caller,
            job.call
        );
        *self.started.entry(job.procedure.clone()).or_default() += 1;
        let (cancel, cancelled) = oneshot::channel();
        self.running.insert(id, (cancel, record));
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let outcome = exec::run(exec_job, cancelled).await;
            let _ = finished.send((id, engine_outcome(outcome))).await;
        });
    }
}

/// The engine's configuration from the daemon's.
fn engine_config(config: &Config) -> Result<rpc::RpcConfig, StartError> {
    let parse = |key: &str, text: &Option<String>| -> Result<Requirement, StartError> {
        let text = text.as_deref().unwrap_or("");
        Requirement::parse(text).map_err(|e| {
            StartError::Config(format!(
                "reading the [rpc] configuration: {key}: {}",
                e.render(text)
            ))
        })
    };
    let mut engine = rpc::RpcConfig::default();
    let mut null = rpc::ProcedureSpec::new(NULL_PROCEDURE, Vec::new());
    null.max_concurrent = u32::MAX;
    engine.procedures.push(null);
    let mut describe = rpc::ProcedureSpec::new(DESCRIBE_PROCEDURE, Vec::new());
    describe.max_concurrent = u32::MAX;
    describe.idempotent = true;
    engine.procedures.push(describe);
    engine.timers.ack_timeout = config.rpc.ack_timeout;
    engine.timers.result_timeout = config.rpc.result_timeout;
    engine.timers.dtn_timeout = config.rpc.dtn_timeout;
    engine.max_file_bytes = config.rpc.file_budget;
    engine.finished_in_memory = config.rpc.finished_in_memory;
    engine.max_served_calls = config.rpc.max_served_calls;
    engine.max_served_calls_per_caller = config.rpc.max_served_calls_per_caller;
    engine.trusted_servers = config
        .rpc
        .trusted_servers
        .as_ref()
        .map(|keys| keys.iter().map(|k| PublicKey(*k)).collect());
    engine.accept = parse("rpc.accept", &config.rpc.accept)?;
    for p in &config.rpc.procedures {
        let mut spec = rpc::ProcedureSpec::new(&p.name, p.params.clone());
        spec.require = parse(&format!("procedure {:?}: require", p.name), &p.require)?;
        spec.max_concurrent = p.max_concurrent;
        spec.idempotent = p.idempotent;
        spec.allow = p
            .allow
            .as_ref()
            .map(|keys| keys.iter().map(|k| PublicKey(*k)).collect());
        engine.procedures.push(spec);
    }
    Ok(engine)
}

/// A job's parameters as the executor passes them. A file parameter's content comes with the
/// job (the engine verified it by hash).
fn exec_params(job: &rpc::Job) -> Result<Vec<exec::Arg>, String> {
    job.params
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Ok(match v {
                Value::Bool(b) => exec::Arg::Bool(*b),
                Value::Int(n) => exec::Arg::Int(*n),
                Value::Float(x) => exec::Arg::Float(*x),
                Value::Text(t) => exec::Arg::Text(t.clone()),
                Value::Bytes(b) => exec::Arg::Bytes(b.clone()),
                Value::File(f) => {
                    let content = job
                        .files
                        .iter()
                        .find(|(r, _)| r.hash == f.hash)
                        .map(|(_, c)| c.clone())
                        .ok_or_else(|| format!("parameter {}: file {} missing", i + 1, f.name))?;
                    exec::Arg::File {
                        name: f.name.clone(),
                        content,
                    }
                }
            })
        })
        .collect()
}

/// An outcome that is this failure, without exit status or stderr.
pub(crate) fn failure(code: RejectCode, detail: String) -> rpc::Outcome {
    rpc::Outcome::Failure {
        code,
        detail,
        exit_status: None,
        stderr_tail: Bytes::new(),
    }
}

/// How an execution's end is reported to the caller: exit status 0 is the result (stdout and
/// output files); anything else a refusal with a stable code, the exit status and stderr's tail.
pub fn engine_outcome(outcome: exec::Outcome) -> rpc::Outcome {
    let exec::Outcome {
        kind,
        stdout,
        stderr_tail,
        files,
        run_ms,
    } = outcome;
    let stderr_tail = Bytes::from(stderr_tail);
    let (code, detail, exit_status) = match kind {
        exec::OutcomeKind::Exited(0) => {
            return rpc::Outcome::Success {
                value: Bytes::from(stdout),
                files,
                run_ms,
            };
        }
        exec::OutcomeKind::Exited(status) => (
            RejectCode::ExecutionFailed,
            format!("exited with status {status} after {run_ms} ms"),
            Some(status),
        ),
        exec::OutcomeKind::Signalled(signal) => (
            RejectCode::ExecutionFailed,
            format!("killed by signal {signal} after {run_ms} ms"),
            None,
        ),
        exec::OutcomeKind::TimedOut => (
            RejectCode::TimedOut,
            format!("ran past its timeout ({run_ms} ms) and was killed"),
            None,
        ),
        exec::OutcomeKind::OutputTooLarge => (
            RejectCode::OutputTooLarge,
            "its output passed the procedure's max_output".into(),
            None,
        ),
        exec::OutcomeKind::TooManyFiles(reason) => (
            RejectCode::OutputTooLarge,
            format!("it left {reason}"),
            None,
        ),
        exec::OutcomeKind::Cancelled => (RejectCode::Cancelled, "cancelled".into(), None),
        exec::OutcomeKind::BadArgument(e) => (RejectCode::BadArguments, e.to_string(), None),
        exec::OutcomeKind::SpawnFailed(reason) => (
            RejectCode::Internal,
            format!("could not start: {reason}"),
            None,
        ),
        exec::OutcomeKind::OutputUnreadable(reason) => (
            RejectCode::Internal,
            format!("its output files could not be read: {reason}"),
            None,
        ),
    };
    rpc::Outcome::Failure {
        code,
        detail,
        exit_status,
        stderr_tail,
    }
}

/// What predicates are judged against, from a reading of the system. `uptime` is the daemon's.
pub fn facts(readings: &Readings, uptime: Duration) -> Facts {
    let mut f = Facts::new();
    let mut number = |name: &str, v: Option<f64>| {
        if let Some(v) = v {
            f.set(name, v);
        }
    };
    number("battery", readings.battery);
    number("free_disk", readings.free_disk.map(|b| b as f64));
    number("free_memory", readings.free_memory.map(|b| b as f64));
    number("load", readings.load);
    number("cpus", readings.cpus.map(|n| n as f64));
    number("hour", Some(f64::from(readings.hour)));
    number("minute", Some(f64::from(readings.minute)));
    number("weekday", Some(f64::from(readings.weekday)));
    number("uptime", Some(uptime.as_secs_f64()));
    if let Some(m) = readings.moving {
        f.set_flag("moving", m);
    }
    if let Some(c) = readings.charging {
        f.set_flag("charging", c);
    }
    for t in &readings.tags {
        f.add_tag(t);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(kind: exec::OutcomeKind) -> exec::Outcome {
        exec::Outcome {
            kind,
            stdout: b"out".to_vec(),
            stderr_tail: b"oops".to_vec(),
            files: vec![("a.txt".into(), Bytes::from_static(b"A"))],
            run_ms: 12,
        }
    }

    #[test]
    fn exit_zero_is_the_result_with_its_files() {
        assert_eq!(
            engine_outcome(outcome(exec::OutcomeKind::Exited(0))),
            rpc::Outcome::Success {
                value: Bytes::from_static(b"out"),
                files: vec![("a.txt".into(), Bytes::from_static(b"A"))],
                run_ms: 12
            }
        );
    }

    #[test]
    fn failures_keep_their_code_status_and_stderr() {
        let rpc::Outcome::Failure {
            code,
            exit_status,
            stderr_tail,
            detail,
        } = engine_outcome(outcome(exec::OutcomeKind::Exited(3)))
        else {
            panic!("exit 3 is a failure");
        };
        assert_eq!(code, RejectCode::ExecutionFailed);
        assert_eq!(exit_status, Some(3));
        assert_eq!(&stderr_tail[..], b"oops");
        assert!(detail.contains("status 3"), "{detail}");
        for (kind, want) in [
            (exec::OutcomeKind::TimedOut, RejectCode::TimedOut),
            (
                exec::OutcomeKind::OutputTooLarge,
                RejectCode::OutputTooLarge,
            ),
            (exec::OutcomeKind::Cancelled, RejectCode::Cancelled),
            (exec::OutcomeKind::Signalled(9), RejectCode::ExecutionFailed),
            (
                exec::OutcomeKind::BadArgument(exec::ArgumentError::NulInLiteral),
                RejectCode::BadArguments,
            ),
            (
                exec::OutcomeKind::SpawnFailed("gone".into()),
                RejectCode::Internal,
            ),
        ] {
            let rpc::Outcome::Failure { code, .. } = engine_outcome(outcome(kind.clone())) else {
                panic!("{kind:?} is a failure");
            };
            assert_eq!(code, want, "{kind:?}");
        }
    }

    #[test]
    fn readings_become_facts() {
        let r = Readings {
            battery: Some(42.0),
            charging: Some(false),
            free_disk: Some(5_000_000_000),
            moving: Some(true),
            hour: 14,
            tags: vec!["gps".into()],
            ..Readings::default()
        };
        let f = facts(&r, Duration::from_secs(90));
        assert_eq!(f.get("battery"), Some(42.0));
        assert_eq!(f.get("free_disk"), Some(5e9));
        assert_eq!(f.get("hour"), Some(14.0));
        assert_eq!(f.get("uptime"), Some(90.0));
        assert_eq!(f.get("load"), None);
        assert_eq!(f.flag("moving"), Some(true));
        assert_eq!(f.flag("charging"), Some(false));
        assert!(f.has_tag("gps"));
        assert!(!f.has_tag("camera"));
    }
}
