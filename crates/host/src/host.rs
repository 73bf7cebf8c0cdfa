//! The host: one [`Node`], its RPC engine and its inboxes joined, driven by a shell.
//!
//! The shell (the tokio daemon, the simulator) feeds inputs to the node through
//! [`Host::node_mut`] (a bundle received, a link up, a transfer done), then calls
//! [`Host::handle_events`]: the host offers each node event to the RPC engine, keeps deliveries
//! in the inboxes, answers the echo service, and turns what the engine asks into outputs.
//! [`Host::commit`] closes the store's batch (writing the engine's records first) when the
//! [`Pipeline`] says so; [`Host::poll_sync`] and [`Host::synced`] carry the sync. The shell
//! then takes [`Output`]s:
//!
//! ```text
//!   node.handle_*(now, …) ─┐
//!   host.handle_events(now)├─▶ events → rpc / inboxes / echo     ┌─▶ Transmit (real-time: now)
//!   host.handle_timeout(now)│  transmits → now, or held          │   Execute, Resume, Abort
//!   host.promise(token)    ─┘                                    ├─▶ Release{token, error}
//!   host.commit(now, store_commit) ─▶ Pipeline ─▶ poll_sync(now) │   Delivered
//!   host.synced(now, n, result)  ─▶ released promises ───────────┘   Node(event), Rpc(event)
//! ```
//!
//! **Nothing is promised before it is durable.** A procedure's execution, a store-carry-forward
//! transmit (the peer may drop its copy once it has ours), an inbox delivery's wake-up and every
//! token the shell handed to [`Host::promise`] (an API answer, a bundle's last XFER_ACK) leave as
//! outputs only once the commit that made them true is durable. Real-time transmits (control,
//! datagram and stream bundles) promise nothing and leave at once, so an RPC reply is on the wire
//! while its record is being written.
//!
//! The host reads no clock (`now` comes in) and touches no file or socket: the store is behind
//! the [`store::Store`] trait the node holds, and the shell decides how a commit and a sync run
//! (on a blocking thread in the daemon; at once, or after a simulated latency, in the simulator).

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use node::{Class, Event, Node, Outgoing, Transmit};
use rpc::{Job, JobId, Outcome, PriorRun, Rpc, RpcEvent};
use store::{Store, StoreError};
use wire::rpc::RejectCode;
use wire::{DtnTime, Eid};

use crate::durability::{Pipeline, PipelineConfig, Promises};
use crate::inbox::{Inboxes, Letter, LetterMeta};

/// The echo service's number on an `ipn:` node: 7, as other BPv7 tools number it (and as TCP
/// numbers its echo port).
pub const IPN_ECHO_SERVICE: u64 = 7;
/// The discard service's number on an `ipn:` node: 9, by the same analogy with TCP's ports.
pub const IPN_DISCARD_SERVICE: u64 = 9;

/// A service the host answers itself instead of delivering into an inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnService {
    Echo,
    Discard,
}

/// How the host is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// The pipeline's timers.
    pub pipeline: PipelineConfig,
    /// The demux of the echo service the host answers (every bundle sent back to its source
    /// with its payload), if any; on an `ipn:` node it is service [`IPN_ECHO_SERVICE`].
    pub echo_service: Option<String>,
    /// The demux of the discard service, if any: a bundle for it is delivered (so a delivery
    /// report is sent if one was asked for) and dropped, kept in no inbox (`ferry trace`). On an
    /// `ipn:` node it is service [`IPN_DISCARD_SERVICE`].
    pub discard_service: Option<String>,
    /// Whether deliveries to local endpoints wait in the durable inboxes. Without, each is an
    /// [`Output::Node`] for the shell (the simulator's ledger takes them).
    pub inboxes: bool,
    /// A procedure answered in process with an empty result, without an execution (ONC RPC's
    /// procedure 0), if any.
    pub null_procedure: Option<String>,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            pipeline: PipelineConfig::default(),
            echo_service: None,
            discard_service: None,
            inboxes: true,
            null_procedure: None,
        }
    }
}

/// What the shell must do.
#[derive(Debug)]
pub enum Output<T> {
    /// Send this frame now. Store-carry-forward transmits come out only once durable.
    Transmit(Transmit),
    /// Run this procedure and report with [`Host::finished`]. Its call's record is durable: a
    /// crash from now on finds it, and never runs it again unknowingly.
    Execute(Job),
    /// An execution the last run of this node may have started and did not finish: the shell
    /// says what it knows with [`Host::resume`].
    Resume(Job),
    /// Stop this execution; its outcome no longer matters.
    Abort {
        /// The execution.
        job: JobId,
        /// Why (for logs).
        reason: &'static str,
    },
    /// A token given to [`Host::promise`] or [`Host::after_durable`]: what it stands for is
    /// durable (`error` is `None`), or the store failed to make it so.
    Release {
        /// The shell's token.
        token: T,
        /// The store's error, if the commit or its sync failed.
        error: Option<String>,
    },
    /// A bundle kept in an inbox is durable: the inboxes' readers may look.
    Delivered,
    /// A node event neither the engine nor the host consumed (status reports, neighbours,
    /// drops; deliveries too when the host keeps no inboxes).
    Node(Event),
    /// An RPC event for the shell: a call changed or finished, a key mismatch to tell.
    Rpc(RpcEvent),
    /// Something the host could not keep (logged and counted by the shell).
    Error(HostError),
}

/// What went wrong inside the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A delivered bundle could not be kept in its inbox.
    #[error("cannot keep bundle {id} for {destination}: {source}")]
    Inbox {
        /// The bundle.
        id: String,
        /// Its endpoint.
        destination: String,
        /// The store's error.
        source: StoreError,
    },
    /// Expired inbox bundles could not be removed.
    #[error("removing expired inbox bundles: {0}")]
    InboxExpiry(StoreError),
    /// The RPC engine could not keep its state.
    #[error("rpc: {0}")]
    Rpc(#[from] rpc::StateError),
}

/// What happened to a [`Host::commit`].
#[derive(Debug)]
pub enum Commit {
    /// The batch may wait for company: nothing was committed.
    Deferred,
    /// Committed (whether anything changed); its promises wait for a sync.
    Done,
    /// The store refused: the batch was rolled back and its promises failed.
    Failed(StoreError),
}

/// What one commit promised.
struct Promised<T> {
    /// Tokens someone waits for.
    tokens: Vec<T>,
    /// Tokens nobody waits for (bookkeeping): they ride along with the next sync.
    after: Vec<T>,
    /// Executions whose calls' records must be durable before they run.
    executions: Vec<Job>,
    /// Store-carry-forward bundles: the peer may drop its copy once it has ours.
    transmits: Vec<Transmit>,
    /// Whether an inbox got a bundle.
    delivered: bool,
}

impl<T> Default for Promised<T> {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            after: Vec::new(),
            executions: Vec::new(),
            transmits: Vec::new(),
            delivered: false,
        }
    }
}

impl<T> Promises for Promised<T> {
    fn is_empty(&self) -> bool {
        !self.waits() && self.after.is_empty()
    }

    fn waits(&self) -> bool {
        !self.tokens.is_empty()
            || !self.executions.is_empty()
            || !self.transmits.is_empty()
            || self.delivered
    }
}

/// What one [`Host::handle_events`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Handled {
    /// Node events handled.
    pub events: usize,
    /// Whether anything happened (events, the engine's work, transmits): more may follow.
    pub busy: bool,
}

/// One node, its RPC engine and its inboxes, with the durability pipeline (module docs).
pub struct Host<T> {
    node: Node,
    rpc: Option<Rpc>,
    inboxes: Inboxes,
    config: HostConfig,
    pipeline: Pipeline<Promised<T>>,
    outputs: VecDeque<Output<T>>,
    /// Executions asked for whose calls are not durable yet: an abort meanwhile takes them out.
    waiting_executions: BTreeSet<JobId>,
    /// How old bundles delivered here were (from their creation), until the shell takes them
    /// with [`Host::take_delivery_ages`]; at most `MAX_DELIVERY_AGES` are kept.
    delivery_ages: Vec<Duration>,
}

/// The most delivery ages kept for the shell between two [`Host::take_delivery_ages`]: a shell
/// that never takes them holds this many at most.
const MAX_DELIVERY_AGES: usize = 4096;

impl<T> Host<T> {
    /// A host for `node`, with its RPC engine if it serves or makes calls. The inboxes are
    /// loaded from the node's store; the engine is told to leave its record writes to
    /// [`Host::commit`], so that an input's messages leave before the store's work.
    pub fn new(node: Node, mut rpc: Option<Rpc>, config: HostConfig) -> Result<Self, StoreError> {
        let inboxes = if config.inboxes {
            Inboxes::load(node.store())?
        } else {
            Inboxes::default()
        };
        if let Some(rpc) = &mut rpc {
            rpc.defer_record_writes(true);
        }
        Ok(Self {
            node,
            rpc,
            inboxes,
            pipeline: Pipeline::new(config.pipeline),
            config,
            outputs: VecDeque::new(),
            waiting_executions: BTreeSet::new(),
            delivery_ages: Vec::new(),
        })
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The node, to feed it inputs (follow with [`Host::handle_events`]).
    pub fn node_mut(&mut self) -> &mut Node {
        &mut self.node
    }

    /// Gives up the node (a simulated restart builds a new host from its store).
    pub fn into_node(self) -> Node {
        self.node
    }

    /// The RPC engine, if there is one.
    pub fn rpc(&self) -> Option<&Rpc> {
        self.rpc.as_ref()
    }

    /// The RPC engine and the node it works on, to make calls and answer questions about them
    /// (follow with [`Host::handle_events`]).
    pub fn rpc_mut(&mut self) -> Option<(&mut Rpc, &mut Node)> {
        self.rpc.as_mut().map(|rpc| (rpc, &mut self.node))
    }

    /// Puts an RPC engine on the node (the simulator adds one to a node that serves or calls).
    pub fn set_rpc(&mut self, mut rpc: Rpc) {
        rpc.defer_record_writes(true);
        self.rpc = Some(rpc);
    }

    /// The inboxes.
    pub fn inboxes(&self) -> &Inboxes {
        &self.inboxes
    }

    /// The inboxes and the store they keep their bundles in.
    pub fn inboxes_mut(&mut self) -> (&mut Inboxes, &mut dyn Store) {
        (&mut self.inboxes, self.node.store_mut())
    }

    /// The durability pipeline (for its counters).
    pub fn pipeline(&self) -> &Pipeline<impl Promises> {
        &self.pipeline
    }

    /// Whether a commit's promises wait for a sync.
    pub fn has_waiting(&self) -> bool {
        self.pipeline.has_waiting()
    }

    /// Releases `token` once everything changed so far is durable. Someone waits for it: the
    /// next commit is not deferred and its sync starts at once.
    pub fn promise(&mut self, token: T) {
        self.pipeline.pending_mut().tokens.push(token);
    }

    /// Releases `token` once everything changed so far is durable, without asking for a sync
    /// of its own (bookkeeping nobody waits for).
    pub fn after_durable(&mut self, token: T) {
        self.pipeline.pending_mut().after.push(token);
    }

    /// How long after their creation the bundles delivered here since the last call arrived
    /// (the creation time is the source's clock; bundles created without one, at time 0, are
    /// left out). A shell that measures delivery latency takes them after its outputs.
    pub fn take_delivery_ages(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.delivery_ages)
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output<T>> {
        self.outputs.pop_front()
    }

    /// When [`Host::handle_timeout`] (and the commit and sync checks) should run next.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        [
            self.node.poll_timeout(),
            self.rpc.as_ref().and_then(Rpc::poll_timeout),
            self.inboxes.next_expiry(),
            self.pipeline.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Fires what is due: the node's timers, the engine's, expired inbox bundles. (The
    /// pipeline's are the shell's next [`Host::commit`] and [`Host::poll_sync`].)
    pub fn handle_timeout(&mut self, now: DtnTime) {
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            self.node.handle_timeout(now);
        }
        if let Some(rpc) = &mut self.rpc
            && rpc.poll_timeout().is_some_and(|t| t <= now)
        {
            rpc.handle_timeout(now, &mut self.node);
        }
        if self.inboxes.next_expiry().is_some_and(|t| t <= now)
            && let Err(e) = self.inboxes.purge_expired(self.node.store_mut(), now)
        {
            self.outputs
                .push_back(Output::Error(HostError::InboxExpiry(e)));
        }
    }

    /// Handles the node's events, at most `budget` of them: each goes to the engine, the echo
    /// service or an inbox, or out as [`Output::Node`]; what the engine asks becomes outputs
    /// (an in-process null call ends before the next event, so it never counts as running for
    /// the next call's admission). Then the node's transmits: real-time ones leave now,
    /// store-carry-forward ones wait for the next commit to be durable.
    pub fn handle_events(&mut self, now: DtnTime, budget: usize) -> Handled {
        let mut handled = Handled::default();
        while handled.events < budget
            && let Some(event) = self.node.poll_event()
        {
            handled.events += 1;
            handled.busy = true;
            let mine = match &mut self.rpc {
                Some(rpc) => rpc.handle_node_event(now, &mut self.node, &event),
                None => false,
            };
            if !mine {
                self.on_node_event(now, event);
            }
            self.drain_rpc(now);
        }
        handled.busy |= self.drain_rpc(now);
        while let Some(t) = self.node.poll_transmit() {
            handled.busy = true;
            if t.urgent {
                self.outputs.push_back(Output::Transmit(t));
            } else {
                self.pipeline.pending_mut().transmits.push(t);
            }
        }
        handled
    }

    /// An execution ended (or the shell could not start it): the engine gets its outcome.
    pub fn finished(&mut self, now: DtnTime, job: JobId, outcome: Outcome) {
        if let Some(rpc) = &mut self.rpc {
            rpc.finished(now, &mut self.node, job, outcome);
        }
    }

    /// A job from [`Output::Resume`], with what the shell knows of its previous run. Returns
    /// whether it runs (an [`Output::Execute`] follows once durable); if not, its caller learns
    /// that it ran and its result was lost.
    pub fn resume(&mut self, now: DtnTime, job: Job, prior: PriorRun) -> bool {
        let Some(rpc) = &mut self.rpc else {
            return false;
        };
        match rpc.resume(&job, prior) {
            None => {
                self.waiting_executions.insert(job.id);
                self.pipeline.pending_mut().executions.push(job);
                true
            }
            Some(outcome) => {
                rpc.finished(now, &mut self.node, job.id, outcome);
                false
            }
        }
    }

    /// Commits the store's batch unless it may wait for company, with `commit` (the shell's
    /// way of running the store's commit: on a blocking thread, say). The engine's records are
    /// written first, once for everything that changed since the last commit (a call made and
    /// answered meanwhile is written once; a reply delivered meanwhile never gets an outbox
    /// row). What the batch promised waits for a sync; a failed commit fails it at once.
    pub fn commit(
        &mut self,
        now: DtnTime,
        commit: impl FnOnce(&mut dyn Store) -> store::Result<bool>,
    ) -> Commit {
        let store = self.node.store();
        let has_changes =
            store.has_uncommitted() || self.rpc.as_ref().is_some_and(Rpc::has_records_to_write);
        if self
            .pipeline
            .may_defer_commit(now, has_changes, store.commit_waits_for_disk())
        {
            return Commit::Deferred;
        }
        if let Some(rpc) = &mut self.rpc {
            rpc.write_records(&mut self.node);
        }
        self.take_rpc_errors();
        match commit(self.node.store_mut()) {
            Ok(changed) => {
                let released = self.pipeline.committed(changed);
                self.release(now, released, None);
                Commit::Done
            }
            Err(e) => {
                let promised = self.pipeline.commit_failed();
                self.fail(now, promised, &e.to_string());
                Commit::Failed(e)
            }
        }
    }

    /// Whether a sync is due now, and of how many commits ([`Pipeline::poll_sync`]).
    pub fn poll_sync(&mut self, now: DtnTime) -> Option<u64> {
        self.pipeline.poll_sync(now)
    }

    /// A sync of the first `upto` commits ended: their promises are kept, or fail with the
    /// store's error.
    pub fn synced(&mut self, now: DtnTime, upto: u64, result: store::Result<()>) {
        let error = result.err().map(|e| e.to_string());
        let released = self.pipeline.synced(upto);
        self.release(now, released, error.as_deref());
    }

    /// The node stops: the engine's records are written and the store flushed (committed and
    /// synced) with `flush`; every promise is kept, or fails with its error.
    pub fn flush(
        &mut self,
        now: DtnTime,
        flush: impl FnOnce(&mut dyn Store) -> store::Result<()>,
    ) -> store::Result<()> {
        if let Some(rpc) = &mut self.rpc {
            rpc.write_records(&mut self.node);
        }
        let flushed = flush(self.node.store_mut());
        let error = flushed.as_ref().err().map(ToString::to_string);
        let released = self.pipeline.flushed();
        self.release(now, released, error.as_deref());
        flushed
    }

    fn release(&mut self, now: DtnTime, released: Vec<Promised<T>>, error: Option<&str>) {
        for promised in released {
            match error {
                None => self.keep(promised),
                Some(e) => self.fail(now, promised, e),
            }
        }
    }

    /// A durable commit's promises: executions start (unless aborted meanwhile), inbox readers
    /// look, tokens are released, store-carry-forward bundles leave.
    fn keep(&mut self, promised: Promised<T>) {
        for job in promised.executions {
            if self.waiting_executions.remove(&job.id) {
                self.outputs.push_back(Output::Execute(job));
            }
        }
        if promised.delivered {
            self.outputs.push_back(Output::Delivered);
        }
        for token in promised.tokens.into_iter().chain(promised.after) {
            self.outputs
                .push_back(Output::Release { token, error: None });
        }
        for t in promised.transmits {
            self.outputs.push_back(Output::Transmit(t));
        }
    }

    /// A commit that failed (or whose sync did): executions are refused (a restart could not
    /// know they ran) and their callers hear why; tokens fail. Inbox readers look anyway (they
    /// read what the store holds, whatever that is now), and transmits go ahead, as they carry
    /// their bundles with them.
    fn fail(&mut self, now: DtnTime, promised: Promised<T>, error: &str) {
        for job in promised.executions {
            if self.waiting_executions.remove(&job.id) {
                let detail = format!("the call could not be recorded, so it was not run: {error}");
                let outcome = Outcome::Failure {
                    code: RejectCode::Internal,
                    detail,
                    exit_status: None,
                    stderr_tail: bytes::Bytes::new(),
                };
                self.finished(now, job.id, outcome);
            }
        }
        if promised.delivered {
            self.outputs.push_back(Output::Delivered);
        }
        for token in promised.tokens.into_iter().chain(promised.after) {
            self.outputs.push_back(Output::Release {
                token,
                error: Some(error.to_string()),
            });
        }
        for t in promised.transmits {
            self.outputs.push_back(Output::Transmit(t));
        }
    }

    /// Carries out what the engine asked; whether it asked anything.
    fn drain_rpc(&mut self, now: DtnTime) -> bool {
        let Some(rpc) = &mut self.rpc else {
            return false;
        };
        let mut any = false;
        while let Some(event) = rpc.poll_event() {
            any = true;
            match event {
                RpcEvent::Execute(job)
                    if self.config.null_procedure.as_deref() == Some(job.procedure.as_str()) =>
                {
                    let done = Outcome::Success {
                        value: bytes::Bytes::new(),
                        files: Vec::new(),
                        run_ms: 0,
                    };
                    rpc.finished(now, &mut self.node, job.id, done);
                }
                RpcEvent::Execute(job) if job.resumed => {
                    self.outputs.push_back(Output::Resume(job))
                }
                RpcEvent::Execute(job) => {
                    self.waiting_executions.insert(job.id);
                    self.pipeline.pending_mut().executions.push(job);
                }
                // One that waits for the disk never started: it just never will.
                RpcEvent::Abort { job, .. } if self.waiting_executions.remove(&job) => {}
                RpcEvent::Abort { job, reason } => {
                    self.outputs.push_back(Output::Abort { job, reason });
                }
                other => self.outputs.push_back(Output::Rpc(other)),
            }
        }
        self.take_rpc_errors();
        any
    }

    fn take_rpc_errors(&mut self) {
        if let Some(rpc) = &mut self.rpc {
            for e in rpc.take_errors() {
                self.outputs.push_back(Output::Error(HostError::Rpc(e)));
            }
        }
    }

    fn on_node_event(&mut self, now: DtnTime, event: Event) {
        let Event::Delivered(d) = event else {
            self.outputs.push_back(Output::Node(event));
            return;
        };
        if !d.created.is_unknown() && self.delivery_ages.len() < MAX_DELIVERY_AGES {
            self.delivery_ages.push(now.saturating_since(d.created));
        }
        match self.own_service(&d.destination) {
            Some(OwnService::Echo) => return self.echo(now, &d),
            // Delivered (and reported, if asked) by the node already: nothing more to do.
            Some(OwnService::Discard) => return,
            None => {}
        }
        if !self.config.inboxes {
            self.outputs.push_back(Output::Node(Event::Delivered(d)));
            return;
        }
        let letter = Letter {
            meta: LetterMeta {
                id: d.id.to_string(),
                source: d.id.source.to_string(),
                destination: d.destination.to_string(),
                created: d.created,
                expiry: d.expiry,
                size: d.payload.len() as u64,
            },
            payload: d.payload,
        };
        let (id, destination) = (letter.meta.id.clone(), letter.meta.destination.clone());
        match self.inboxes.put(self.node.store_mut(), letter) {
            Ok(()) => self.pipeline.pending_mut().delivered = true,
            Err(source) => self.outputs.push_back(Output::Error(HostError::Inbox {
                id,
                destination,
                source,
            })),
        }
    }

    /// Which of the host's own services `destination` (a local endpoint) names, if any.
    fn own_service(&self, destination: &Eid) -> Option<OwnService> {
        match destination {
            Eid::Dtn(dtn) => {
                let demux = Some(dtn.demux());
                if self.config.echo_service.as_deref() == demux {
                    Some(OwnService::Echo)
                } else if self.config.discard_service.as_deref() == demux {
                    Some(OwnService::Discard)
                } else {
                    None
                }
            }
            Eid::Ipn { service, .. } => match *service {
                IPN_ECHO_SERVICE if self.config.echo_service.is_some() => Some(OwnService::Echo),
                IPN_DISCARD_SERVICE if self.config.discard_service.is_some() => {
                    Some(OwnService::Discard)
                }
                _ => None,
            },
            Eid::Null => None,
        }
    }

    /// The echo service answers every bundle with its payload, back to its source, in the
    /// class it came in (a stream's answer goes by DTN: the echo is one bundle).
    fn echo(&mut self, now: DtnTime, d: &node::Delivery) {
        if d.id.source.is_null() {
            return;
        }
        let mut out = Outgoing::new(
            d.destination.clone(),
            d.id.source.clone(),
            d.payload.clone(),
        );
        out.class = if d.class == Class::Stream {
            Class::Dtn
        } else {
            d.class
        };
        // The answer is worth as long as the question.
        out.lifetime_ms = wire::time::millis((d.expiry - now).max(Duration::from_millis(1)));
        // A refused echo (no route, store full) is the asker's loss: it times out.
        let _ = self.node.send(now, out);
    }
}
