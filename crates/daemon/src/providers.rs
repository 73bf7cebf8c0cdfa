//! Procedures that applications serve: an application connected to the local API's WebSocket
//! `/v1/providers` (a *provider*) registers procedures, receives their calls and returns values
//! and files. Every guarantee an executable procedure has holds for them, because the engine
//! cannot tell the two apart: admission (allow-list, predicates, concurrency), dedup and replies
//! stay the engine's, and this module does for a provider what [`crate::exec`] does for a
//! process.
//!
//! - **At most once.** A call is handed to a provider once. Before it is, a durable record of
//!   the hand-over is written (as before a process is spawned), so a node that restarts knows the
//!   procedure may have run: it is never handed over again unless declared `idempotent`.
//! - **Timeouts and output limits** are the node's, not the provider's word: a provider that does
//!   not answer in its declared `timeout_ms` is told to cancel, and the caller is answered
//!   `timed_out`; a result above `max_output` (value and files together), with more than
//!   [`wire::rpc::MAX_RESULT_FILES`] files or with a file name that is not a relative path is
//!   refused as an executable's would be.
//! - **The result outbox.** A provider keeps each result until the node says `kept`: that is sent
//!   once the answer is durable in the store (when an executable's record would be removed). A
//!   provider that lost its connection before then sends the result again after reconnecting.
//! - **A provider that disappears.** Its procedures stay offered for `rpc.provider_grace`
//!   (default [`PROVIDER_GRACE`]); calls
//!   meanwhile wait for it. A provider that comes back (registering the same procedures) gets the
//!   calls it had not been handed, says which it still runs or holds results of, and the rest
//!   end: a call it had been handed is answered `result_lost` (it may have run; it is not run
//!   again), one it had not `not_offered`. After the grace, its procedures are withdrawn.
//! - **Restarts of the node.** Calls whose execution the restart cut off wait (up to
//!   the grace after the start) for their procedure's provider to register again, then
//!   as above; an unclaimed one goes to the engine's [`rpc::Rpc::resume`], which answers
//!   `result_lost` or, for an idempotent procedure or a call never handed over, runs it.
//!
//! **Bounds** (a local program may be buggy or hostile too): [`MAX_PROVIDERS`] connections with
//! procedures, [`MAX_PROVIDED`] procedures, [`MAX_PROVIDER_MESSAGE`] bytes per message,
//! [`MAX_PROVIDED_OUTPUT`] of declared `max_output`, a registration within [`REGISTER_WAIT`].
//!
//! **What it never does**: decide about a call, or run anything itself.
//!
//! The protocol (JSON text messages) is in docs/api.md, "Serving procedures from an application".

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use host::Host;
use rpc::{JobId, ParamType, PriorRun, ProcedureSpec};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use wire::rpc::{RejectCode, Value};

use crate::config::{Returns, is_name, parse_public_key};
use crate::control::ApiError;
use crate::core::Token;
use crate::rpc_shell::failure;

/// How long a disconnected provider's procedures stay offered, and how long after a start calls
/// the restart cut off wait for their provider.
pub const PROVIDER_GRACE: Duration = Duration::from_secs(15);
/// Most connections with registered procedures at once.
pub const MAX_PROVIDERS: usize = 16;
/// Most provided procedures at once, over all providers.
pub const MAX_PROVIDED: usize = 64;
/// The largest WebSocket message a provider may send (a result's files travel in it, in
/// base64).
pub const MAX_PROVIDER_MESSAGE: usize = 48 << 20;
/// The largest `max_output` a provided procedure may declare (its base64 fits one message).
pub const MAX_PROVIDED_OUTPUT: u64 = 32 << 20;
/// Most parameters a provided procedure may declare.
pub const MAX_PARAMS: usize = 32;
/// Most executions at once a provided procedure may declare.
pub const MAX_PROVIDED_CONCURRENT: u32 = 64;
/// The longest `timeout_ms` a provided procedure may declare.
pub const MAX_PROVIDED_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// A connection must register within this long.
pub const REGISTER_WAIT: Duration = Duration::from_secs(10);
/// Messages from the event loop waiting for one provider's socket.
pub const PROVIDER_QUEUE: usize = 4096;

// ----- the JSON a provider sends -----

/// A procedure as an application declares it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// Its name (`[A-Za-z0-9_.-]+`, not `null`, not starting `ferry.`).
    pub name: String,
    /// Its parameters, in order.
    #[serde(default)]
    pub params: Vec<ParamDeclaration>,
    /// What its value is: `text`, `bytes` or `json` (for typed stubs).
    #[serde(default)]
    pub returns: Option<String>,
    /// What it does, for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Longest an execution may take (default 60 000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Most bytes of value and files (default 1 MiB).
    #[serde(default)]
    pub max_output: Option<u64>,
    /// Most executions at once (default 1).
    #[serde(default)]
    pub max_concurrent: Option<u32>,
    /// Whether a call a restart cut off may run again.
    #[serde(default)]
    pub idempotent: bool,
    /// Callers' public keys (64 hex digits) allowed to call it; absent: anyone.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Its own predicate.
    #[serde(default)]
    pub require: Option<String>,
}

/// One declared parameter.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ParamDeclaration {
    /// Its name (an identifier: letters, digits and `_`, not starting with a digit).
    pub name: String,
    /// `bool`, `int`, `float`, `text`, `bytes` or `file`.
    #[serde(rename = "type")]
    pub ty: String,
}

/// What a provider sends: one of these per text message.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FromProvider {
    /// The first message: the procedures it serves, and (after a reconnection) the jobs it
    /// still runs and those whose results it holds.
    Register {
        /// The procedures.
        procedures: Vec<Declaration>,
        /// Jobs handed to it that it still runs.
        #[serde(default)]
        running: Vec<String>,
        /// Jobs whose results it holds, not yet `kept` (it sends them again next).
        #[serde(default)]
        held: Vec<String>,
    },
    /// A job's result.
    Result {
        /// The job.
        job: String,
        /// The value as text.
        #[serde(default)]
        value: Option<String>,
        /// The value as base64 (instead of `value`).
        #[serde(default)]
        value_b64: Option<String>,
        /// Result files.
        #[serde(default)]
        files: Vec<FileOut>,
    },
    /// A job failed: the caller is answered `execution_failed` with this message.
    Fail {
        /// The job.
        job: String,
        /// Why (the caller sees its end, as an executable's stderr).
        message: String,
    },
}

/// A result file a provider sends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileOut {
    /// Its name: a relative path.
    pub name: String,
    /// Its content, base64.
    pub content_b64: String,
}

// ----- checked declarations -----

/// A checked declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Provided {
    /// Its name.
    pub name: String,
    /// Parameter names and types.
    pub params: Vec<(String, ParamType)>,
    /// What its value is.
    pub returns: Option<Returns>,
    /// What it does.
    pub description: Option<String>,
    /// Longest an execution may take.
    pub timeout: Duration,
    /// Most bytes of value and files.
    pub max_output: u64,
    /// Most executions at once.
    pub max_concurrent: u32,
    /// Whether a call a restart cut off may run again.
    pub idempotent: bool,
    /// Callers allowed; `None`: anyone.
    pub allow: Option<Vec<[u8; 32]>>,
    /// Its own predicate, as written.
    pub require: Option<String>,
}

/// The longest description kept.
const MAX_DESCRIPTION: usize = 4096;

impl Declaration {
    /// Checks a declaration; the error names the field at fault.
    pub fn check(self) -> Result<Provided, String> {
        let name = self.name;
        if !is_name(&name) || name.len() > 128 {
            return Err(format!(
                "procedure {name:?}: not a procedure name (letters, digits, _ . - only, at most 128)"
            ));
        }
        if name == crate::rpc_shell::NULL_PROCEDURE || name.starts_with("ferry.") {
            return Err(format!(
                "procedure {name:?}: the name is the node's own (null and ferry.*)"
            ));
        }
        let at = |field: &str| format!("procedure {name:?}: {field}");
        if self.params.len() > MAX_PARAMS {
            return Err(format!("{}: more than {MAX_PARAMS}", at("params")));
        }
        let mut params = Vec::with_capacity(self.params.len());
        for p in self.params {
            if !is_identifier(&p.name) {
                return Err(format!(
                    "{}: {:?} is not a parameter name (letters, digits and _, not starting with a digit, at most 64)",
                    at("params"),
                    p.name
                ));
            }
            if params.iter().any(|(n, _)| *n == p.name) {
                return Err(format!("{}: {:?} is declared twice", at("params"), p.name));
            }
            let ty =
                p.ty.parse::<ParamType>()
                    .map_err(|e| format!("{}: {e}", at("params")))?;
            params.push((p.name, ty));
        }
        let returns = self
            .returns
            .map(|r| r.parse::<Returns>())
            .transpose()
            .map_err(|e| format!("{}: {e}", at("returns")))?;
        if self
            .description
            .as_ref()
            .is_some_and(|d| d.len() > MAX_DESCRIPTION)
        {
            return Err(format!(
                "{}: longer than {MAX_DESCRIPTION} bytes",
                at("description")
            ));
        }
        let timeout = Duration::from_millis(self.timeout_ms.unwrap_or(60_000));
        if timeout.is_zero() || timeout > MAX_PROVIDED_TIMEOUT {
            return Err(format!(
                "{}: must be more than 0 and at most {} (24 h)",
                at("timeout_ms"),
                MAX_PROVIDED_TIMEOUT.as_millis()
            ));
        }
        let max_output = self.max_output.unwrap_or(1 << 20);
        if max_output > MAX_PROVIDED_OUTPUT {
            return Err(format!(
                "{}: at most {MAX_PROVIDED_OUTPUT} bytes for a provided procedure",
                at("max_output")
            ));
        }
        let max_concurrent = self.max_concurrent.unwrap_or(1);
        if max_concurrent == 0 || max_concurrent > MAX_PROVIDED_CONCURRENT {
            return Err(format!(
                "{}: from 1 to {MAX_PROVIDED_CONCURRENT}",
                at("max_concurrent")
            ));
        }
        let allow = self
            .allow
            .map(|keys| {
                keys.iter()
                    .map(|k| {
                        parse_public_key(k).ok_or_else(|| {
                            format!("{}: {k:?} is not a public key (64 hex digits)", at("allow"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        if let Some(text) = &self.require {
            rpc::require::Requirement::parse(text)
                .map_err(|e| format!("{}: {}", at("require"), e.render(text)))?;
        }
        Ok(Provided {
            name,
            params,
            returns,
            description: self.description,
            timeout,
            max_output,
            max_concurrent,
            idempotent: self.idempotent,
            allow,
            require: self.require,
        })
    }
}

/// Letters, digits and `_`, not starting with a digit, 1 to 64 bytes: a name every language's
/// stub can use for the parameter.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Provided {
    /// What the engine needs to know of it.
    fn spec(&self) -> ProcedureSpec {
        let mut spec =
            ProcedureSpec::new(&self.name, self.params.iter().map(|(_, t)| *t).collect());
        spec.max_concurrent = self.max_concurrent;
        spec.idempotent = self.idempotent;
        spec.allow = self
            .allow
            .as_ref()
            .map(|keys| keys.iter().map(|k| seal::PublicKey(*k)).collect());
        if let Some(text) = &self.require {
            // Checked in `Declaration::check`.
            if let Ok(r) = rpc::require::Requirement::parse(text) {
                spec.require = r;
            }
        }
        spec
    }
}

// ----- between the event loop and a provider's socket -----

/// A call handed to a provider.
#[derive(Debug)]
pub struct CallJob {
    /// The job's name for the provider (stable across restarts: the call and its caller's key).
    pub job: String,
    /// The call's id.
    pub call: String,
    /// The procedure.
    pub procedure: String,
    /// The caller's node.
    pub caller: String,
    /// The caller's key.
    pub caller_key: String,
    /// The call's deadline.
    pub deadline: wire::DtnTime,
    /// How long the provider has.
    pub timeout: Duration,
    /// Parameters: declared name, value, and a file parameter's content.
    pub params: Vec<(String, Value, Option<Bytes>)>,
    /// The durable record of the hand-over, written before the provider sees the call.
    pub record: PathBuf,
}

/// What the event loop sends a provider's socket.
#[derive(Debug)]
pub enum ToProvider {
    /// A call to run.
    Call(Box<CallJob>),
    /// Stop a job (its timeout passed, its caller cancelled, the node stops).
    Cancel {
        /// The job.
        job: String,
        /// Why.
        reason: String,
    },
    /// A job's answer is durable: the provider may forget its result.
    Kept {
        /// The job.
        job: String,
    },
    /// A result the node will not use (the job ended otherwise, or the result broke a limit).
    Refused {
        /// The job.
        job: String,
        /// Why.
        reason: String,
    },
}

/// A provider's answer to a job, decoded by its socket's task.
#[derive(Debug)]
pub enum Answer {
    /// A result.
    Value {
        /// The value.
        value: Bytes,
        /// The files: name and content.
        files: Vec<(String, Bytes)>,
    },
    /// A failure, with the provider's message.
    Fail(String),
    /// The socket's task could not hand the call over (its record could not be written).
    NotHandedOver(String),
}

/// What a provider's socket asks of the event loop.
#[derive(Debug)]
pub enum ProviderRequest {
    /// Register procedures (checked), claiming jobs from before a reconnection.
    Register {
        /// The procedures.
        procedures: Vec<Provided>,
        /// Jobs the provider still runs.
        running: Vec<String>,
        /// Jobs whose results it holds.
        held: Vec<String>,
        /// Where the connection's messages go.
        to: mpsc::Sender<ToProvider>,
        /// The answer.
        reply: oneshot::Sender<Result<Registered, ApiError>>,
    },
    /// A job's answer.
    Answer {
        /// The connection.
        conn: u64,
        /// The job.
        job: String,
        /// The answer.
        answer: Answer,
    },
    /// The connection closed.
    Gone {
        /// The connection.
        conn: u64,
    },
}

/// A registration's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Registered {
    /// The connection's number (in logs).
    #[serde(skip)]
    pub conn: u64,
    /// The procedures now served by this provider.
    pub procedures: Vec<String>,
    /// Of the jobs it named, those the node still waits for (the others end: it should drop
    /// them, and is sent `refused` for results it holds of them).
    pub claimed: Vec<String>,
}

/// A deadline the registry set, on its way back to the event loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderTimer {
    /// A job's timeout.
    Job(JobId),
    /// A disconnected provider's grace is over.
    Grace(u64),
    /// The grace after the node's start is over: calls a restart cut off stop waiting.
    Startup,
}

// ----- the registry, owned by the event loop -----

struct Conn {
    /// `None` once the socket closed.
    to: Option<mpsc::Sender<ToProvider>>,
}

struct Owned {
    decl: Provided,
    conn: u64,
}

struct ProvidedJob {
    key: String,
    procedure: String,
    message: Option<Box<CallJob>>,
    /// Handed to the provider (or on its way to its socket).
    sent: bool,
    started: Instant,
    timer: Option<tokio::task::AbortHandle>,
}

/// Counters, for the metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProviderCounters {
    /// Registrations refused (a name taken, too many).
    pub registrations_refused: u64,
    /// Jobs handed to providers.
    pub handed_over: u64,
    /// Jobs that ended because their provider did not answer in time.
    pub timed_out: u64,
    /// Jobs that ended because their provider went away.
    pub lost: u64,
    /// Results refused for breaking a limit.
    pub results_refused: u64,
}

/// The providers, their procedures and the jobs handed to them.
pub struct Providers {
    next_conn: u64,
    conns: BTreeMap<u64, Conn>,
    procedures: BTreeMap<String, Owned>,
    jobs: BTreeMap<JobId, ProvidedJob>,
    keys: BTreeMap<String, JobId>,
    /// Jobs a restart cut off, waiting for their procedure's provider (key → job, prior run).
    orphans: BTreeMap<String, (rpc::Job, PriorRun)>,
    /// Answered jobs whose answers are not durable yet (key → procedure).
    unkept: BTreeMap<String, String>,
    timers: mpsc::Sender<ProviderTimer>,
    /// How long a disconnected provider's procedures stay offered (`rpc.provider_grace`).
    grace: Duration,
    /// Where the records of hand-overs are (the executions' directory).
    records: PathBuf,
    /// Records of jobs whose outcomes the engine has now (see `RpcShell::take_records_done`).
    records_done: Vec<PathBuf>,
    /// How jobs ended since the metrics last looked (values and files left out).
    ended: Vec<rpc::Outcome>,
    /// Whether the bounds were logged (once each).
    full_logged: bool,
    /// Counters.
    pub counters: ProviderCounters,
}

impl Providers {
    /// An empty registry whose deadlines go to `timers`, keeping records of hand-overs in
    /// `records`; calls a restart cut off wait at most `grace` from now, a disconnected
    /// provider's procedures as long after it went.
    pub fn new(timers: mpsc::Sender<ProviderTimer>, records: PathBuf, grace: Duration) -> Self {
        let startup = timers.clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                let _ = startup.send(ProviderTimer::Startup).await;
            });
        }
        Self {
            next_conn: 1,
            conns: BTreeMap::new(),
            procedures: BTreeMap::new(),
            jobs: BTreeMap::new(),
            keys: BTreeMap::new(),
            orphans: BTreeMap::new(),
            unkept: BTreeMap::new(),
            timers,
            grace,
            records,
            records_done: Vec::new(),
            ended: Vec::new(),
            full_logged: false,
            counters: ProviderCounters::default(),
        }
    }

    /// The provided procedures, in name order, with whether their provider is connected now.
    pub fn procedures(&self) -> impl Iterator<Item = (&Provided, bool)> {
        self.procedures.values().map(|o| {
            let connected = self.conns.get(&o.conn).is_some_and(|c| c.to.is_some());
            (&o.decl, connected)
        })
    }

    /// Providers connected now.
    pub fn connected(&self) -> usize {
        self.conns.values().filter(|c| c.to.is_some()).count()
    }

    /// A registration: every procedure is new or was its disconnected provider's (taken over with
    /// its jobs), or the whole registration is refused.
    pub(crate) fn register(
        &mut self,
        now: wire::DtnTime,
        host: &mut Host<Token>,
        configured: &dyn Fn(&str) -> bool,
        request: ProviderRequest,
    ) {
        let ProviderRequest::Register {
            procedures,
            running,
            held,
            to,
            reply,
        } = request
        else {
            return;
        };
        if let Err(message) = self.admissible(&procedures, configured) {
            self.counters.registrations_refused += 1;
            tracing::warn!("refused a provider's registration: {message}");
            let _ = reply.send(Err(ApiError::new("conflict", message)));
            return;
        }
        let names: BTreeSet<String> = procedures.iter().map(|p| p.name.clone()).collect();
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                to: Some(to.clone()),
            },
        );
        let Some((engine, _)) = host.rpc_mut() else {
            return;
        };
        for p in procedures {
            engine.withdraw(&p.name);
            let _ = engine.offer(p.spec());
            if let Some(old) = self.procedures.insert(
                p.name.clone(),
                Owned {
                    decl: p.clone(),
                    conn,
                },
            ) && old.conn != conn
            {
                tracing::info!("a provider took over procedure {} again", p.name);
            }
        }
        self.forget_empty_conns();
        // Jobs of these procedures: claimed ones wait for the provider's answer; those never
        // handed over go to it now; the rest were handed to a provider that lost them.
        let claims: BTreeSet<&String> = running.iter().chain(held.iter()).collect();
        let mut claimed = Vec::new();
        let mine: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| names.contains(&j.procedure))
            .map(|(id, _)| *id)
            .collect();
        for id in mine {
            let job = self.jobs.get_mut(&id).expect("listed");
            if claims.contains(&job.key) {
                claimed.push(job.key.clone());
                job.sent = true;
            } else if !job.sent {
                if let Some(message) = job.message.take() {
                    job.sent = to.try_send(ToProvider::Call(message)).is_ok();
                }
            } else {
                let detail = "its provider disconnected while it ran and came back without it; it was not run again".to_string();
                self.end(now, host, id, failure(RejectCode::ResultLost, detail), None);
            }
        }
        // Jobs a restart cut off.
        let orphans: Vec<String> = self
            .orphans
            .iter()
            .filter(|(_, (job, _))| names.contains(&job.procedure))
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphans {
            let (job, prior) = self.orphans.remove(&key).expect("listed");
            if claims.contains(&key) {
                claimed.push(key.clone());
                self.adopt(job, key, None, true);
            } else {
                tracing::info!(
                    "call {} of {} ({}) was cut off by the restart and its provider no longer has it: {prior:?}",
                    job.call,
                    job.caller,
                    job.procedure
                );
                if !host.resume(now, job, prior) {
                    self.records_done.push(self.records.join(&key));
                }
            }
        }
        let registered = Registered {
            conn,
            procedures: names.into_iter().collect(),
            claimed,
        };
        tracing::info!(
            "provider {conn} serves {}",
            registered.procedures.join(", ")
        );
        let _ = reply.send(Ok(registered));
    }

    /// Whether a registration of these procedures can be taken: every procedure new or its
    /// disconnected provider's, within the bounds.
    fn admissible(
        &mut self,
        procedures: &[Provided],
        configured: &dyn Fn(&str) -> bool,
    ) -> Result<(), String> {
        if self.connected() >= MAX_PROVIDERS {
            if !self.full_logged {
                self.full_logged = true;
                tracing::warn!(
                    "{MAX_PROVIDERS} providers are connected, the most served; further ones are \
                     refused (counted in ferry_provider_registrations_refused_total)"
                );
            }
            return Err(format!("{MAX_PROVIDERS} providers are connected, the most"));
        }
        let mut names = BTreeSet::new();
        let mut new = 0;
        for p in procedures {
            if !names.insert(&p.name) {
                return Err(format!("procedure {:?} is declared twice", p.name));
            }
            if configured(&p.name) {
                return Err(format!(
                    "procedure {:?} is served by an executable of this node's configuration",
                    p.name
                ));
            }
            match self.procedures.get(&p.name) {
                Some(o) if self.conns.get(&o.conn).is_some_and(|c| c.to.is_some()) => {
                    return Err(format!(
                        "procedure {:?} is served by another connected provider",
                        p.name
                    ));
                }
                Some(_) => {}
                None => new += 1,
            }
        }
        if self.procedures.len() + new > MAX_PROVIDED {
            return Err(format!("{MAX_PROVIDED} procedures are provided, the most"));
        }
        Ok(())
    }

    /// Connections without procedures or socket are forgotten.
    fn forget_empty_conns(&mut self) {
        let owning: BTreeSet<u64> = self.procedures.values().map(|o| o.conn).collect();
        self.conns
            .retain(|id, c| c.to.is_some() || owning.contains(id));
    }

    /// A job of a provided procedure, durable now: it goes to the provider (or waits for one).
    pub fn dispatch(&mut self, job: rpc::Job, record: PathBuf) -> Result<(), rpc::Outcome> {
        let Some(owned) = self.procedures.get(&job.procedure) else {
            return Err(failure(
                RejectCode::NotOffered,
                format!("no provider of \"{}\" is registered", job.procedure),
            ));
        };
        let key = record
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let names = &owned.decl.params;
        let params = job
            .params
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let name = names.get(i).map(|(n, _)| n.clone()).unwrap_or_default();
                let content = match v {
                    Value::File(f) => job
                        .files
                        .iter()
                        .find(|(r, _)| r.hash == f.hash)
                        .map(|(_, c)| c.clone()),
                    _ => None,
                };
                (name, v.clone(), content)
            })
            .collect();
        let message = Box::new(CallJob {
            job: key.clone(),
            call: job.call.to_string(),
            procedure: job.procedure.clone(),
            caller: job.caller.to_string(),
            caller_key: job.caller_key.to_string(),
            deadline: job.deadline,
            timeout: owned.decl.timeout,
            params,
            record,
        });
        self.adopt(job, key, Some(message), false);
        Ok(())
    }

    /// Takes a job on: handed over now if its provider is connected, its timeout armed.
    fn adopt(&mut self, job: rpc::Job, key: String, message: Option<Box<CallJob>>, sent: bool) {
        let owned = self.procedures.get(&job.procedure);
        let timeout = owned.map_or(Duration::from_secs(60), |o| o.decl.timeout);
        let to = owned
            .and_then(|o| self.conns.get(&o.conn))
            .and_then(|c| c.to.clone());
        let mut entry = ProvidedJob {
            key: key.clone(),
            procedure: job.procedure.clone(),
            message,
            sent,
            started: Instant::now(),
            timer: None,
        };
        if !entry.sent
            && let (Some(to), Some(message)) = (to, entry.message.take())
        {
            match to.try_send(ToProvider::Call(message)) {
                Ok(()) => entry.sent = true,
                Err(mpsc::error::TrySendError::Full(ToProvider::Call(m)))
                | Err(mpsc::error::TrySendError::Closed(ToProvider::Call(m))) => {
                    entry.message = Some(m)
                }
                Err(_) => {}
            }
        }
        if entry.sent {
            self.counters.handed_over += 1;
        }
        let timers = self.timers.clone();
        let id = job.id;
        entry.timer = Some(
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                let _ = timers.send(ProviderTimer::Job(id)).await;
            })
            .abort_handle(),
        );
        self.keys.insert(key, id);
        self.jobs.insert(id, entry);
    }

    /// A job whose execution a restart cut off: it waits for its provider (or the startup
    /// grace).
    pub fn orphan(&mut self, job: rpc::Job, key: String, prior: PriorRun) {
        self.orphans.insert(key, (job, prior));
    }

    /// Ends a job: removed, its timer stopped, its outcome given to the engine, and the
    /// provider told `reason` (cancel) if given.
    fn end(
        &mut self,
        now: wire::DtnTime,
        host: &mut Host<Token>,
        id: JobId,
        outcome: rpc::Outcome,
        cancel: Option<String>,
    ) {
        let Some(job) = self.jobs.remove(&id) else {
            return;
        };
        self.keys.remove(&job.key);
        if let Some(timer) = job.timer {
            timer.abort();
        }
        if let Some(reason) = cancel
            && job.sent
            && let Some(to) = self.sender_of(&job.procedure)
        {
            let _ = to.try_send(ToProvider::Cancel {
                job: job.key.clone(),
                reason,
            });
        }
        self.records_done.push(self.records.join(&job.key));
        self.unkept.insert(job.key, job.procedure);
        // The metrics need only how it ended.
        self.ended.push(match &outcome {
            rpc::Outcome::Success { run_ms, .. } => rpc::Outcome::Success {
                value: Bytes::new(),
                files: Vec::new(),
                run_ms: *run_ms,
            },
            rpc::Outcome::Failure { code, .. } => failure(*code, String::new()),
        });
        host.finished(now, id, outcome);
    }

    fn sender_of(&self, procedure: &str) -> Option<mpsc::Sender<ToProvider>> {
        let owned = self.procedures.get(procedure)?;
        self.conns.get(&owned.conn)?.to.clone()
    }

    /// A provider answered a job.
    pub(crate) fn answer(
        &mut self,
        now: wire::DtnTime,
        host: &mut Host<Token>,
        conn: u64,
        key: String,
        answer: Answer,
    ) {
        let refuse = |this: &Self, reason: String| {
            if let Some(c) = this.conns.get(&conn)
                && let Some(to) = &c.to
            {
                let _ = to.try_send(ToProvider::Refused {
                    job: key.clone(),
                    reason,
                });
            }
        };
        let Some(&id) = self.keys.get(&key) else {
            return refuse(
                self,
                "no call waits for this result (it ended otherwise)".into(),
            );
        };
        let job = &self.jobs[&id];
        let owner = self.procedures.get(&job.procedure).map(|o| o.conn);
        if owner != Some(conn) {
            return refuse(self, "this job is not this provider's".into());
        }
        let max_output = self.procedures[&job.procedure].decl.max_output;
        let run_ms = job.started.elapsed().as_millis() as u64;
        let outcome = match answer {
            Answer::Fail(message) => {
                let tail = message.as_bytes();
                let tail = &tail[tail.len().saturating_sub(wire::rpc::MAX_STDERR_TAIL)..];
                rpc::Outcome::Failure {
                    code: RejectCode::ExecutionFailed,
                    detail: format!("its provider reported a failure after {run_ms} ms"),
                    exit_status: None,
                    stderr_tail: Bytes::copy_from_slice(tail),
                }
            }
            Answer::NotHandedOver(reason) => failure(
                RejectCode::Internal,
                format!("it could not be handed to its provider: {reason}"),
            ),
            Answer::Value { value, files } => {
                let total =
                    value.len() as u64 + files.iter().map(|(_, c)| c.len() as u64).sum::<u64>();
                if total > max_output {
                    self.counters.results_refused += 1;
                    refuse(
                        self,
                        format!("the result's {total} bytes pass max_output ({max_output})"),
                    );
                    failure(
                        RejectCode::OutputTooLarge,
                        format!("its result ({total} bytes) passed the procedure's max_output"),
                    )
                } else if files.len() > wire::rpc::MAX_RESULT_FILES {
                    self.counters.results_refused += 1;
                    refuse(
                        self,
                        format!("more than {} files", wire::rpc::MAX_RESULT_FILES),
                    );
                    failure(
                        RejectCode::OutputTooLarge,
                        format!(
                            "its result had more than {} files",
                            wire::rpc::MAX_RESULT_FILES
                        ),
                    )
                } else if let Some((name, _)) = files.iter().find(|(n, _)| !is_result_file_name(n))
                {
                    self.counters.results_refused += 1;
                    refuse(
                        self,
                        format!("result file name {name:?} is not a relative path"),
                    );
                    failure(
                        RejectCode::ExecutionFailed,
                        format!("its provider named a result file {name:?}, not a relative path"),
                    )
                } else {
                    rpc::Outcome::Success {
                        value,
                        files,
                        run_ms,
                    }
                }
            }
        };
        self.end(now, host, id, outcome, None);
    }

    /// A provider's socket closed: its jobs and procedures wait the grace for it.
    pub fn gone(&mut self, conn: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.to = None;
        tracing::info!(
            "provider {conn} disconnected; its procedures stay offered for {}",
            humantime::format_duration(self.grace)
        );
        let (timers, grace) = (self.timers.clone(), self.grace);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let _ = timers.send(ProviderTimer::Grace(conn)).await;
        });
        self.forget_empty_conns();
    }

    /// A deadline came.
    pub(crate) fn timer(
        &mut self,
        now: wire::DtnTime,
        host: &mut Host<Token>,
        timer: ProviderTimer,
    ) {
        match timer {
            ProviderTimer::Job(id) => {
                let Some(job) = self.jobs.get(&id) else {
                    return;
                };
                self.counters.timed_out += 1;
                let ms = job.started.elapsed().as_millis();
                let (code, detail) = if job.sent {
                    (
                        RejectCode::TimedOut,
                        format!(
                            "its provider did not answer within its timeout ({ms} ms) and was told to cancel"
                        ),
                    )
                } else {
                    (
                        RejectCode::NotOffered,
                        format!("no provider was connected to take it for {ms} ms (its timeout)"),
                    )
                };
                self.end(
                    now,
                    host,
                    id,
                    failure(code, detail),
                    Some("timed out".into()),
                );
            }
            ProviderTimer::Grace(conn) => {
                if self.conns.get(&conn).is_none_or(|c| c.to.is_some()) {
                    return;
                }
                let names: Vec<String> = self
                    .procedures
                    .iter()
                    .filter(|(_, o)| o.conn == conn)
                    .map(|(n, _)| n.clone())
                    .collect();
                if let Some((engine, _)) = host.rpc_mut() {
                    for name in &names {
                        engine.withdraw(name);
                    }
                }
                for name in &names {
                    self.procedures.remove(name);
                }
                tracing::info!(
                    "provider {conn} did not come back within {}: {} withdrawn",
                    humantime::format_duration(self.grace),
                    if names.is_empty() {
                        "nothing".into()
                    } else {
                        names.join(", ")
                    }
                );
                self.conns.remove(&conn);
                let ended: Vec<(JobId, bool)> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| names.contains(&j.procedure))
                    .map(|(id, j)| (*id, j.sent))
                    .collect();
                for (id, sent) in ended {
                    self.counters.lost += 1;
                    let outcome = if sent {
                        failure(
                            RejectCode::ResultLost,
                            format!(
                                "its provider disconnected while it ran and did not come back within {}; it was not run again",
                                humantime::format_duration(self.grace)
                            ),
                        )
                    } else {
                        failure(
                            RejectCode::NotOffered,
                            "its provider disconnected before it was handed over".into(),
                        )
                    };
                    self.end(now, host, id, outcome, None);
                }
            }
            ProviderTimer::Startup => {
                let orphans = std::mem::take(&mut self.orphans);
                for (key, (job, prior)) in orphans {
                    tracing::info!(
                        "call {} of {} ({}) was cut off by the restart and no provider claimed it within {}: {prior:?}",
                        job.call,
                        job.caller,
                        job.procedure,
                        humantime::format_duration(self.grace)
                    );
                    if !host.resume(now, job, prior) {
                        self.records_done.push(self.records.join(&key));
                    }
                }
            }
        }
    }

    /// The engine stops a job (cancelled, another server has it, the node stops): the provider
    /// is told, and the engine given the end it expects.
    pub(crate) fn abort(
        &mut self,
        now: wire::DtnTime,
        host: &mut Host<Token>,
        id: JobId,
        reason: &str,
    ) -> bool {
        if !self.jobs.contains_key(&id) {
            return false;
        }
        self.end(
            now,
            host,
            id,
            failure(RejectCode::Cancelled, "cancelled".into()),
            Some(reason.to_owned()),
        );
        true
    }

    /// How jobs ended since the last call (for the metrics of executions).
    pub fn take_ended(&mut self) -> Vec<rpc::Outcome> {
        std::mem::take(&mut self.ended)
    }

    /// Records of jobs whose outcomes the engine has now: removed once that is durable.
    pub fn take_records_done(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.records_done)
    }

    /// Execution records whose answers are durable now: their providers may forget the results.
    pub fn records_kept(&mut self, records: &[PathBuf]) {
        for path in records {
            let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(procedure) = self.unkept.remove(key) else {
                continue;
            };
            if let Some(to) = self.sender_of(&procedure) {
                let _ = to.try_send(ToProvider::Kept {
                    job: key.to_owned(),
                });
            }
        }
    }
}

/// A result file's name: a relative path of normal components (no `.`, `..` or empty ones, no
/// control characters), at most 255 bytes.
pub fn is_result_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.chars().any(char::is_control)
        && !name.contains('\\')
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(json: &str) -> Result<Provided, String> {
        serde_json::from_str::<Declaration>(json)
            .map_err(|e| e.to_string())?
            .check()
    }

    #[test]
    fn declarations_are_checked_and_every_mistake_named() {
        let ok = decl(
            r#"{"name":"photo","params":[{"name":"zoom","type":"int"},{"name":"area","type":"text"}],
                "returns":"bytes","timeout_ms":5000,"max_output":1000,"max_concurrent":2}"#,
        )
        .unwrap();
        assert_eq!(ok.params[0], ("zoom".into(), ParamType::Int));
        assert_eq!(ok.timeout, Duration::from_secs(5));
        assert_eq!(ok.returns, Some(Returns::Bytes));
        for (json, says) in [
            (r#"{"name":"a b"}"#, "not a procedure name"),
            (r#"{"name":"null"}"#, "node's own"),
            (r#"{"name":"ferry.x"}"#, "node's own"),
            (
                r#"{"name":"p","params":[{"name":"1x","type":"int"}]}"#,
                "not a parameter name",
            ),
            (
                r#"{"name":"p","params":[{"name":"x","type":"int"},{"name":"x","type":"int"}]}"#,
                "twice",
            ),
            (
                r#"{"name":"p","params":[{"name":"x","type":"str"}]}"#,
                "unknown parameter type",
            ),
            (r#"{"name":"p","returns":"image"}"#, "returns"),
            (r#"{"name":"p","timeout_ms":0}"#, "timeout_ms"),
            (r#"{"name":"p","max_output":100000000}"#, "max_output"),
            (r#"{"name":"p","max_concurrent":0}"#, "max_concurrent"),
            (r#"{"name":"p","allow":["ab"]}"#, "allow"),
            (r#"{"name":"p","require":"battery >"}"#, "require"),
            (r#"{"name":"p","colour":"red"}"#, "unknown field"),
        ] {
            let e = decl(json).unwrap_err();
            assert!(e.contains(says), "{json}: {e}");
        }
    }

    #[test]
    fn result_file_names_are_relative_paths() {
        for good in ["a.png", "sub/b.txt", "x..y"] {
            assert!(is_result_file_name(good), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "./a",
            "a\nb",
            "a\\b",
        ] {
            assert!(!is_result_file_name(bad), "{bad:?}");
        }
        assert!(!is_result_file_name(&"a".repeat(256)));
    }
}
