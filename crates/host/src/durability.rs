//! The durability pipeline: batch, commit, sync, then release only what is durable.
//!
//! A node changes its store many times a second (a bundle received, a call's record, an inbox
//! entry). Syncing each change would cost a disk flush each; instead changes join the store's
//! open batch, a *commit* closes the batch (after it, a crash of the process loses nothing, a
//! power loss may), and a *sync* makes every commit before it durable. One sync covers every
//! commit made while the previous one ran (group commit).
//!
//! Whatever a change lets the node promise to someone outside (an answer to an application, the
//! last XFER_ACK of a received bundle, a procedure started, a store-carry-forward bundle handed
//! to a peer that may then drop its copy) is a *promise* of the commit that holds the change, and
//! is released only when a sync that started after that commit ended well. This module is that
//! bookkeeping and nothing else:
//!
//! ```text
//!   shell                              Pipeline
//!   ─────                              ────────
//!   pending_mut().push(promise)   ──▶  gathers the next commit's promises
//!   may_defer_commit(now, …)?     ──▶  false: commit now; true: the batch may wait (COMMIT_DELAY)
//!   store.commit()
//!   committed(now, changed)       ──▶  numbers the commit, queues its promises, [released]
//!   poll_sync(now)                ──▶  Some(n): sync now, covering commits 1..=n
//!   …sync runs somewhere…
//!   synced(n)                     ──▶  [released]: kept if the sync succeeded, else failed
//!   poll_timeout()                ──▶  when to call may_defer_commit / poll_sync again
//! ```
//!
//! Two kinds of promise: one someone *waits* for (a sync starts at once and a commit is never
//! deferred) and bookkeeping that only must not happen before its commit is durable (removing
//! an execution's record file): it rides along with the next sync, which may wait up to
//! `sync_delay`. A store without syncs of its own (the memory store: `has_syncer` false) is
//! durable as soon as it is committed, so every promise is released by [`Pipeline::committed`].

use std::collections::VecDeque;
use std::time::Duration;

use wire::DtnTime;

/// What one commit promised, in the shell's own terms. The pipeline only asks whether anything
/// is there and whether anyone waits for it.
pub trait Promises: Default {
    /// Whether nothing at all depends on this commit.
    fn is_empty(&self) -> bool;
    /// Whether someone outside waits for it (an answer, a confirmation, an execution, a
    /// transmit): the commit is made at once and a sync started for it at once. Bookkeeping
    /// that nobody waits for returns false and waits for the next sync that happens anyway.
    fn waits(&self) -> bool;
}

/// The pipeline's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineConfig {
    /// How long a batch that promises nothing may stay open for company: its changes then share
    /// the next commit (and sync) instead of paying for one each. A crash meanwhile loses only
    /// what nobody was told.
    pub commit_delay: Duration,
    /// How long a commit that nobody waits for may wait for its sync: a power cut loses at most
    /// this much of what nobody was told was durable (a process crash loses none of it).
    pub sync_delay: Duration,
    /// Whether the store needs syncs at all; without (a memory store), a commit is as durable
    /// as it will ever be.
    pub has_syncer: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            commit_delay: Duration::from_millis(10),
            sync_delay: Duration::from_millis(100),
            has_syncer: true,
        }
    }
}

/// Promises released by one step, in commit order. Whether they are kept or failed is the step's
/// (see [`Pipeline::synced`]).
pub type Released<P> = Vec<P>;

/// The durability pipeline of one node (see the module doc).
#[derive(Debug)]
pub struct Pipeline<P> {
    config: PipelineConfig,
    /// Promises gathered for the next commit.
    pending: P,
    /// Commits that changed the store, so far. A commit's number is this count after it.
    commits: u64,
    /// Commits made durable by a sync (or covered by a failed one: see [`Pipeline::synced`]).
    synced: u64,
    /// Whether a sync is running (asked by [`Pipeline::poll_sync`], not yet reported).
    syncing: bool,
    /// Promises of commits not yet durable, oldest first, with their commit's number.
    awaiting: VecDeque<(u64, P)>,
    /// When the open batch must be committed even though it promises nothing.
    commit_due: Option<DtnTime>,
    /// When the oldest commit that nobody waits for must be synced.
    sync_due: Option<DtnTime>,
    /// Syncs reported, for the shell's metrics.
    syncs: u64,
}

impl<P: Promises> Pipeline<P> {
    /// A pipeline with nothing committed.
    pub fn new(config: PipelineConfig) -> Self {
        Self {
            config,
            pending: P::default(),
            commits: 0,
            synced: 0,
            syncing: false,
            awaiting: VecDeque::new(),
            commit_due: None,
            sync_due: None,
            syncs: 0,
        }
    }

    /// The promises gathered for the next commit: the shell adds to them as it makes them.
    pub fn pending_mut(&mut self) -> &mut P {
        &mut self.pending
    }

    /// The promises gathered for the next commit.
    pub fn pending(&self) -> &P {
        &self.pending
    }

    /// Whether the open batch may stay open (up to `commit_delay` from the first time this was
    /// asked since the last commit) instead of being committed now. `has_changes`: whether the
    /// batch holds anything to commit; `needs_disk`: whether committing it must write files
    /// first (then it is committed at once, so the files' syncs are not delayed).
    ///
    /// Never true when a promise waits, when the store has no syncs (a commit is then the only
    /// durability there is), or when there is nothing to commit (the commit is then free).
    pub fn may_defer_commit(&mut self, now: DtnTime, has_changes: bool, needs_disk: bool) -> bool {
        if !self.config.has_syncer || !has_changes || needs_disk || self.pending.waits() {
            return false;
        }
        let due = *self
            .commit_due
            .get_or_insert(now + self.config.commit_delay);
        now < due
    }

    /// The shell committed the open batch (`changed`: whether the commit changed the store).
    /// The gathered promises become this commit's; returns those released already (every one
    /// whose commit is durable: all of them for a store without syncs, or promises that needed
    /// nothing new on the disk).
    pub fn committed(&mut self, changed: bool) -> Released<P> {
        self.commit_due = None;
        if changed {
            self.commits += 1;
        }
        if !self.config.has_syncer {
            self.synced = self.commits;
        }
        let promised = std::mem::take(&mut self.pending);
        if !promised.is_empty() {
            self.awaiting.push_back((self.commits, promised));
        }
        if self.synced == self.commits {
            self.sync_due = None;
        }
        self.release(self.synced)
    }

    /// The shell's commit failed and the store rolled the batch back: the gathered promises
    /// cannot be kept, and are returned to be failed.
    pub fn commit_failed(&mut self) -> P {
        self.commit_due = None;
        std::mem::take(&mut self.pending)
    }

    /// Whether a sync should start now, and up to which commit it makes durable: at once when a
    /// commit not yet durable holds a promise someone waits for, else once the oldest commit not
    /// yet durable waited `sync_delay`. Never while a sync runs (its end asks again: one sync
    /// covers every commit made while the last one ran).
    pub fn poll_sync(&mut self, now: DtnTime) -> Option<u64> {
        if self.synced == self.commits {
            self.sync_due = None;
            return None;
        }
        if self.syncing {
            return None;
        }
        let due = *self.sync_due.get_or_insert(now + self.config.sync_delay);
        let waited_for = self
            .awaiting
            .iter()
            .any(|(commit, p)| *commit > self.synced && p.waits());
        if !waited_for && now < due {
            return None;
        }
        self.syncing = true;
        self.sync_due = None;
        Some(self.commits)
    }

    /// The sync asked for by [`Pipeline::poll_sync`] ended: the promises of every commit up to
    /// `upto` are released, for the shell to keep if the sync succeeded and to fail if not. A
    /// failed sync still counts as covering its commits: they stay in the store, but nothing
    /// they promised can be kept, as the disk may not hold them; later commits get a sync of
    /// their own.
    pub fn synced(&mut self, upto: u64) -> Released<P> {
        self.syncing = false;
        self.syncs += 1;
        self.synced = self.synced.max(upto.min(self.commits));
        self.release(upto.min(self.commits))
    }

    /// The shell flushed the store (commit and sync in one, as at a stop): every commit so far is
    /// covered, and every promise queued is released (kept if the flush succeeded).
    pub fn flushed(&mut self) -> Released<P> {
        self.synced = self.commits;
        self.sync_due = None;
        self.commit_due = None;
        self.release(self.commits)
    }

    /// When the shell must call [`Pipeline::may_defer_commit`] (or commit) and
    /// [`Pipeline::poll_sync`] again if nothing else happens before.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        let sync = self.sync_due.filter(|_| !self.syncing);
        match (self.commit_due, sync) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether any promise someone waits for is queued for a sync (or gathered for a commit).
    pub fn has_waiting(&self) -> bool {
        self.pending.waits() || self.awaiting.iter().any(|(_, p)| p.waits())
    }

    /// Whether a sync is running.
    pub fn is_syncing(&self) -> bool {
        self.syncing
    }

    /// Commits that changed the store so far.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Commits made durable (or covered by a failed sync).
    pub fn durable(&self) -> u64 {
        self.synced
    }

    /// Syncs reported so far.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    fn release(&mut self, upto: u64) -> Released<P> {
        let mut released = Vec::new();
        while self.awaiting.front().is_some_and(|(c, _)| *c <= upto) {
            if let Some((_, p)) = self.awaiting.pop_front() {
                released.push(p);
            }
        }
        released
    }
}
