//! The durability pipeline with explicit time: nothing is released before a sync that started
//! after its commit ended, waiting promises never wait for a timer, bookkeeping waits at most
//! the sync delay, and a model run of random steps keeps all of it.

use std::collections::BTreeMap;
use std::time::Duration;
use wire::DtnTime;

use host::{Pipeline, PipelineConfig, Promises};
use proptest::prelude::*;

/// Promises as a test sees them: ids, and whether anyone waits for them.
#[derive(Debug, Default, Clone, PartialEq)]
struct Ids {
    waiting: Vec<u32>,
    bookkeeping: Vec<u32>,
}

impl Promises for Ids {
    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.bookkeeping.is_empty()
    }
    fn waits(&self) -> bool {
        !self.waiting.is_empty()
    }
}

fn ids(released: Vec<Ids>) -> Vec<u32> {
    released
        .into_iter()
        .flat_map(|p| p.waiting.into_iter().chain(p.bookkeeping))
        .collect()
}

fn disk() -> Pipeline<Ids> {
    Pipeline::new(PipelineConfig {
        commit_delay: Duration::from_millis(10),
        sync_delay: Duration::from_millis(100),
        has_syncer: true,
    })
}

#[test]
fn an_answer_waits_for_the_sync_that_covers_its_commit() {
    let mut p = disk();
    p.pending_mut().waiting.push(1);
    assert!(
        !p.may_defer_commit(DtnTime::from_millis(0), true, false),
        "a waiting promise is committed at once"
    );
    assert!(p.committed(true).is_empty(), "committed is not durable");
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(0)),
        Some(1),
        "a waiting promise starts a sync at once"
    );
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(0)),
        None,
        "one sync at a time"
    );
    assert_eq!(ids(p.synced(1)), vec![1]);
    assert_eq!(p.durable(), 1);
}

#[test]
fn a_sync_started_before_a_commit_does_not_release_it() {
    let mut p = disk();
    p.pending_mut().waiting.push(1);
    p.committed(true);
    assert_eq!(p.poll_sync(DtnTime::from_millis(0)), Some(1));
    // While the sync runs, another commit promises something.
    p.pending_mut().waiting.push(2);
    assert!(p.committed(true).is_empty());
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(1)),
        None,
        "the running sync's end looks again"
    );
    assert_eq!(ids(p.synced(1)), vec![1], "only commit 1 is durable");
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(2)),
        Some(2),
        "commit 2 gets a sync of its own at once"
    );
    assert_eq!(ids(p.synced(2)), vec![2]);
}

#[test]
fn a_failed_sync_releases_its_promises_to_be_failed_and_later_commits_sync_again() {
    let mut p = disk();
    p.pending_mut().waiting.push(1);
    p.committed(true);
    assert_eq!(p.poll_sync(DtnTime::from_millis(0)), Some(1));
    // The shell's sync failed: it fails what is released.
    assert_eq!(ids(p.synced(1)), vec![1]);
    p.pending_mut().waiting.push(2);
    p.committed(true);
    assert_eq!(p.poll_sync(DtnTime::from_millis(5)), Some(2));
}

#[test]
fn a_commit_that_failed_gives_its_promises_back_and_numbers_nothing() {
    let mut p = disk();
    p.pending_mut().waiting.push(7);
    let failed = p.commit_failed();
    assert_eq!(failed.waiting, vec![7]);
    assert!(p.pending().is_empty());
    assert_eq!(p.commits(), 0);
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(0)),
        None,
        "nothing to sync"
    );
}

#[test]
fn changes_that_promise_nothing_wait_for_company_up_to_the_commit_delay() {
    let mut p = disk();
    assert!(p.may_defer_commit(DtnTime::from_millis(1000), true, false));
    assert_eq!(p.poll_timeout(), Some(DtnTime::from_millis(1010)));
    assert!(
        p.may_defer_commit(DtnTime::from_millis(1009), true, false),
        "still within the delay"
    );
    assert!(
        !p.may_defer_commit(DtnTime::from_millis(1010), true, false),
        "due"
    );
    // A promise someone waits for cuts the wait short.
    let mut q = disk();
    assert!(q.may_defer_commit(DtnTime::from_millis(0), true, false));
    q.pending_mut().waiting.push(1);
    assert!(!q.may_defer_commit(DtnTime::from_millis(1), true, false));
    // So do files to sync, and an empty batch is never held.
    assert!(!disk().may_defer_commit(DtnTime::from_millis(0), true, true));
    assert!(!disk().may_defer_commit(DtnTime::from_millis(0), false, false));
}

#[test]
fn bookkeeping_rides_with_the_next_sync_or_waits_the_sync_delay() {
    let mut p = disk();
    p.pending_mut().bookkeeping.push(1);
    p.committed(true);
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(0)),
        None,
        "nobody waits: the sync may wait"
    );
    assert_eq!(p.poll_timeout(), Some(DtnTime::from_millis(100)));
    assert_eq!(p.poll_sync(DtnTime::from_millis(99)), None);
    assert_eq!(
        p.poll_sync(DtnTime::from_millis(100)),
        Some(1),
        "due after the sync delay"
    );
    assert_eq!(ids(p.synced(1)), vec![1]);

    // A later waiting promise takes the bookkeeping along at once.
    let mut p = disk();
    p.pending_mut().bookkeeping.push(1);
    p.committed(true);
    p.pending_mut().waiting.push(2);
    p.committed(true);
    assert_eq!(p.poll_sync(DtnTime::from_millis(1)), Some(2));
    assert_eq!(ids(p.synced(2)), vec![1, 2]);
}

#[test]
fn a_promise_on_an_unchanged_batch_waits_for_the_last_commit_not_yet_durable() {
    let mut p = disk();
    p.pending_mut().bookkeeping.push(1);
    p.committed(true);
    // A request answered from what commit 1 holds: nothing new to write, but commit 1 is not
    // durable yet, so the answer waits for it.
    p.pending_mut().waiting.push(2);
    assert!(p.committed(false).is_empty());
    assert_eq!(p.poll_sync(DtnTime::from_millis(0)), Some(1));
    assert_eq!(ids(p.synced(1)), vec![1, 2]);
    // Once everything is durable, such an answer is released by its commit at once.
    p.pending_mut().waiting.push(3);
    assert_eq!(ids(p.committed(false)), vec![3]);
}

#[test]
fn a_store_without_syncs_releases_at_commit() {
    let mut p: Pipeline<Ids> = Pipeline::new(PipelineConfig {
        has_syncer: false,
        ..PipelineConfig::default()
    });
    p.pending_mut().waiting.push(1);
    assert!(!p.may_defer_commit(DtnTime::from_millis(0), true, false));
    assert_eq!(ids(p.committed(true)), vec![1]);
    assert_eq!(p.poll_sync(DtnTime::from_millis(0)), None);
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn a_flush_releases_everything_queued() {
    let mut p = disk();
    for i in 0..3 {
        p.pending_mut().bookkeeping.push(i);
        p.committed(true);
    }
    assert_eq!(ids(p.flushed()), vec![0, 1, 2]);
    assert_eq!(p.durable(), 3);
    assert_eq!(p.poll_timeout(), None);
}

#[derive(Debug, Clone)]
enum Step {
    Promise { waits: bool },
    Change,
    Commit { fails: bool },
    PollSync,
    EndSync,
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<bool>().prop_map(|waits| Step::Promise { waits }),
        3 => Just(Step::Change),
        3 => prop::bool::weighted(0.1).prop_map(|fails| Step::Commit { fails }),
        2 => Just(Step::PollSync),
        2 => Just(Step::EndSync),
        2 => (0u64..150).prop_map(Step::Advance),
    ]
}

proptest! {
    /// A shell driving the pipeline at random. The model knows which commit each promise joined
    /// and which commits each sync covered (those made before it started), and checks that a
    /// promise is released only once, never before a sync covering its commit ended (or, with
    /// nothing new on the disk, its commit was already durable), and that every promise is
    /// released in the end.
    #[test]
    fn promises_are_released_once_and_only_when_durable(steps in prop::collection::vec(step(), 1..200)) {
        let mut p = disk();
        let mut now = 0u64;
        let mut next_id = 0u32;
        let mut changes = false;
        // Promise id → the commit it joined; released ids.
        let mut joined: BTreeMap<u32, u64> = BTreeMap::new();
        let mut waiting_ids: Vec<u32> = Vec::new();
        let mut gathered: Vec<u32> = Vec::new();
        let mut released: Vec<u32> = Vec::new();
        let mut durable = 0u64;
        let mut running: Option<u64> = None;
        let check = |out: Vec<Ids>, durable: u64, joined: &BTreeMap<u32, u64>, released: &mut Vec<u32>| {
            for id in ids(out) {
                let commit = joined[&id];
                assert!(commit <= durable, "promise {id} of commit {commit} released with {durable} durable");
                assert!(!released.contains(&id), "promise {id} released twice");
                released.push(id);
            }
        };
        for s in steps {
            match s {
                Step::Promise { waits } => {
                    if waits {
                        p.pending_mut().waiting.push(next_id);
                        waiting_ids.push(next_id);
                    } else {
                        p.pending_mut().bookkeeping.push(next_id);
                    }
                    gathered.push(next_id);
                    next_id += 1;
                }
                Step::Change => changes = true,
                Step::Commit { fails } => {
                    if p.may_defer_commit(DtnTime::from_millis(now), changes, false) {
                        continue;
                    }
                    if fails {
                        let back = p.commit_failed();
                        let mut back = ids(vec![back]);
                        back.sort();
                        gathered.sort();
                        assert_eq!(back, std::mem::take(&mut gathered));
                        changes = false;
                        continue;
                    }
                    let out = p.committed(changes);
                    changes = false;
                    for id in gathered.drain(..) {
                        joined.insert(id, p.commits());
                    }
                    check(out, durable, &joined, &mut released);
                }
                Step::PollSync => {
                    if let Some(n) = p.poll_sync(DtnTime::from_millis(now)) {
                        assert!(running.is_none(), "two syncs at once");
                        assert_eq!(n, p.commits());
                        running = Some(n);
                    }
                }
                Step::EndSync => {
                    if let Some(n) = running.take() {
                        durable = durable.max(n);
                        let out = p.synced(n);
                        check(out, durable, &joined, &mut released);
                    }
                }
                Step::Advance(ms) => now += ms,
            }
            // A promise someone waits for is never left without a sync under way or due now.
            if running.is_none()
                && joined
                    .iter()
                    .any(|(id, c)| *c > durable && waiting_ids.contains(id) && !released.contains(id))
            {
                let n = p.poll_sync(DtnTime::from_millis(now));
                assert!(n.is_some(), "a waiting promise must start a sync");
                running = n;
            }
        }
        // Drain: finish the running sync, commit what is gathered, sync until quiet.
        for _ in 0..4 {
            if let Some(n) = running.take() {
                durable = durable.max(n);
                let out = p.synced(n);
                check(out, durable, &joined, &mut released);
            }
            now += 1_000;
            if !p.may_defer_commit(DtnTime::from_millis(now), changes, false) {
                let out = p.committed(changes);
                changes = false;
                for id in gathered.drain(..) {
                    joined.insert(id, p.commits());
                }
                check(out, durable, &joined, &mut released);
            }
            running = p.poll_sync(DtnTime::from_millis(now + 1_000));
        }
        let mut all: Vec<u32> = joined.keys().copied().collect();
        all.sort();
        released.sort();
        prop_assert_eq!(released, all, "every committed promise is released in the end");
        prop_assert_eq!(p.poll_timeout(), None);
    }
}
