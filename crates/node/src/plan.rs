//! Contact plans as text: which links are up when. The simulator reads them as a topology, and a
//! node reads the same file to route over the contacts it lists (see [`crate::cgr`]).
//!
//! One directive per line, `#` starts a comment:
//!
//! ```text
//! nodes 3
//! node 0 dtn://base/            # names (optional: node I is dtn://nI/ otherwise)
//! node 1 dtn://mule/
//! epoch 2026-11-27T10:00:00Z    # the instant of time 0 (optional; see ContactPlan::epoch)
//! # time(s) up|down a b
//! 0   up   0 1
//! 20  down 0 1
//! 60  up   0 1
//! repeat 0 1 up 20 down 40 until 600          # periodic: up 20 s, down 40 s, from 0 s
//! repeat 1 2 up 20 down 40 until 600 from 30  # the same, starting at 30 s
//! ```
//!
//! Contacts are symmetric (a link up carries both ways). A plan is bounded: at most
//! [`MAX_PLAN_NODES`] nodes and [`MAX_PLAN_EVENTS`] link changes, so a `repeat` with a tiny period
//! and a far end is refused rather than grown without limit.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use wire::{DtnTime, Eid};

/// Most nodes a plan may declare.
pub const MAX_PLAN_NODES: usize = 100_000;

/// Most link changes a plan may hold (after `repeat`s are unrolled).
pub const MAX_PLAN_EVENTS: usize = 1_000_000;

/// Seconds from the Unix epoch to the DTN epoch (2000-01-01T00:00:00Z).
const DTN_EPOCH_UNIX_S: u64 = 946_684_800;

/// A link coming up or going down at a time (milliseconds from the plan's time 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LinkEvent {
    /// When: milliseconds from time 0 (not a DTN time).
    pub at: u64,
    /// Up or down.
    pub up: bool,
    /// One end (node index).
    pub a: usize,
    /// The other end.
    pub b: usize,
}

/// A contact plan: node names, link changes, and optionally the instant of time 0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContactPlan {
    /// Node count.
    pub nodes: usize,
    /// Link changes, sorted by time.
    pub events: Vec<LinkEvent>,
    /// Names given with `node I EID`; unnamed nodes are `dtn://nI/` (the simulator's names).
    pub names: BTreeMap<usize, Eid>,
    /// The instant of time 0, if the plan says (`epoch RFC3339`). A node without it counts the
    /// plan from its own start; the simulator always counts from the start of the run.
    pub epoch: Option<DtnTime>,
}

/// A contact plan that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("contact plan line {line}: {message}")]
pub struct PlanError {
    /// 1-based line number (0: the plan as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// One contact: a link between two nodes up from `start` until `end` (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    /// One end.
    pub a: Eid,
    /// The other end.
    pub b: Eid,
    /// When the link comes up.
    pub start: DtnTime,
    /// When it goes down ([`DtnTime::MAX`] if the plan never takes it down).
    pub end: DtnTime,
}

impl ContactPlan {
    /// The node id of node `i`: its `node` name, else `dtn://nI/`.
    pub fn node_id(&self, i: usize) -> Eid {
        self.names
            .get(&i)
            .cloned()
            .unwrap_or_else(|| default_node_id(i))
    }

    /// The index of the node named `id`, if the plan has it.
    pub fn index_of(&self, id: &Eid) -> Option<usize> {
        (0..self.nodes).find(|&i| self.node_id(i) == *id)
    }

    /// The plan's contacts, time 0 at `origin`, node `i` named `name(i)`.
    pub fn contacts(&self, origin: DtnTime, name: impl Fn(usize) -> Eid) -> Vec<Contact> {
        contacts_of(&self.events, origin, name)
    }
}

/// The default name of node `i`, `dtn://nI/` (as the simulator names its nodes).
pub fn default_node_id(i: usize) -> Eid {
    // Plain ASCII: this cannot fail.
    Eid::dtn(&format!("n{i}"), "").unwrap_or(Eid::Null)
}

/// Pairs each link's ups with its downs: the contacts of a list of link changes sorted by time.
/// An up while the link is up, or a down while it is down, changes nothing; a link still up at
/// the end stays up for ever.
pub fn contacts_of(
    events: &[LinkEvent],
    origin: DtnTime,
    name: impl Fn(usize) -> Eid,
) -> Vec<Contact> {
    let at = |ms: u64| origin.saturating_add(Duration::from_millis(ms));
    let mut open: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut contacts = Vec::new();
    for e in events {
        let link = (e.a.min(e.b), e.a.max(e.b));
        if e.up {
            open.entry(link).or_insert(e.at);
        } else if let Some(start) = open.remove(&link)
            && e.at > start
        {
            contacts.push(Contact {
                a: name(link.0),
                b: name(link.1),
                start: at(start),
                end: at(e.at),
            });
        }
    }
    for ((a, b), start) in open {
        contacts.push(Contact {
            a: name(a),
            b: name(b),
            start: at(start),
            end: DtnTime::MAX,
        });
    }
    contacts
}

impl FromStr for ContactPlan {
    type Err = PlanError;

    fn from_str(text: &str) -> Result<Self, PlanError> {
        let mut plan = ContactPlan::default();
        let mut named: BTreeSet<Eid> = BTreeSet::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let err = |message: String| PlanError { line, message };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let words: Vec<&str> = content.split_whitespace().collect();
            let num = |w: &str, what: &str| -> Result<u64, PlanError> {
                w.parse::<u64>()
                    .map_err(|_| err(format!("{what} must be a non-negative integer, got {w:?}")))
            };
            let secs = |w: &str, what: &str| -> Result<u64, PlanError> {
                num(w, what)?
                    .checked_mul(1_000)
                    .ok_or_else(|| err(format!("{what} {w} is too large")))
            };
            let node = |w: &str, plan: &ContactPlan| -> Result<usize, PlanError> {
                let n = num(w, "node")? as usize;
                if n >= plan.nodes {
                    return Err(err(format!(
                        "node {n} out of range (the plan declares {} nodes)",
                        plan.nodes
                    )));
                }
                Ok(n)
            };
            let push = |plan: &mut ContactPlan, event: LinkEvent| -> Result<(), PlanError> {
                if plan.events.len() >= MAX_PLAN_EVENTS {
                    return Err(err(format!(
                        "more than {MAX_PLAN_EVENTS} link changes: use a longer period or an earlier end"
                    )));
                }
                plan.events.push(event);
                Ok(())
            };
            match words.as_slice() {
                ["nodes", n] => {
                    let n = num(n, "node count")? as usize;
                    if n > MAX_PLAN_NODES {
                        return Err(err(format!("more than {MAX_PLAN_NODES} nodes")));
                    }
                    plan.nodes = n;
                }
                ["node", i, eid] => {
                    let i = node(i, &plan)?;
                    let id: Eid = eid.parse().map_err(|e| {
                        err(format!("node {i}: {eid:?} is not an endpoint id: {e}"))
                    })?;
                    if id.node_id() != id || id == Eid::Null {
                        return Err(err(format!(
                            "node {i}: {eid:?} is not a node id (dtn://NAME/ or ipn:N.0)"
                        )));
                    }
                    if plan.names.contains_key(&i) {
                        return Err(err(format!("node {i} is named twice")));
                    }
                    if !named.insert(id.clone()) {
                        return Err(err(format!("{id} names two nodes")));
                    }
                    plan.names.insert(i, id);
                }
                ["epoch", when] => {
                    let t = humantime::parse_rfc3339(when).map_err(|e| {
                        err(format!(
                            "epoch {when:?}: {e} (expected RFC 3339 UTC, e.g. 2026-11-27T10:00:00Z)"
                        ))
                    })?;
                    plan.epoch = Some(dtn_time_of(t).ok_or_else(|| {
                        err(format!(
                            "epoch {when:?} is before 2000-01-01, the DTN epoch"
                        ))
                    })?);
                }
                [t, dir @ ("up" | "down"), a, b] => {
                    let (a, b) = (node(a, &plan)?, node(b, &plan)?);
                    if a == b {
                        return Err(err("a link needs two different nodes".into()));
                    }
                    let at = secs(t, "time")?;
                    push(
                        &mut plan,
                        LinkEvent {
                            at,
                            up: *dir == "up",
                            a: a.min(b),
                            b: a.max(b),
                        },
                    )?;
                }
                [
                    "repeat",
                    a,
                    b,
                    "up",
                    up_s,
                    "down",
                    down_s,
                    "until",
                    until_s,
                    rest @ ..,
                ] => {
                    let from = match rest {
                        [] => 0,
                        ["from", f] => secs(f, "start time")?,
                        _ => return Err(err(format!("unexpected {rest:?} after the end time"))),
                    };
                    let (a, b) = (node(a, &plan)?, node(b, &plan)?);
                    if a == b {
                        return Err(err("a link needs two different nodes".into()));
                    }
                    let (up_ms, down_ms) = (secs(up_s, "up time")?, secs(down_s, "down time")?);
                    let until = secs(until_s, "end time")?;
                    if up_ms == 0 || down_ms == 0 {
                        return Err(err("up and down times must be positive".into()));
                    }
                    let mut t = from;
                    while t < until {
                        let (lo, hi) = (a.min(b), a.max(b));
                        push(
                            &mut plan,
                            LinkEvent {
                                at: t,
                                up: true,
                                a: lo,
                                b: hi,
                            },
                        )?;
                        let down = t.saturating_add(up_ms);
                        push(
                            &mut plan,
                            LinkEvent {
                                at: down,
                                up: false,
                                a: lo,
                                b: hi,
                            },
                        )?;
                        t = down.saturating_add(down_ms);
                    }
                }
                _ => {
                    return Err(err(format!(
                        "expected `nodes N`, `node I EID`, `epoch TIME`, `T up|down A B` or `repeat A B up S down S until S [from S]`, got {content:?}"
                    )));
                }
            }
        }
        if plan.nodes == 0 {
            return Err(PlanError {
                line: 0,
                message: "the plan declares no nodes (`nodes N`)".into(),
            });
        }
        // `node 0 dtn://n1/` would give node 1's default name to two nodes.
        let mut seen = BTreeSet::new();
        for i in 0..plan.nodes {
            let id = plan.node_id(i);
            if !seen.insert(id.clone()) {
                return Err(PlanError {
                    line: 0,
                    message: format!("{id} names two nodes (a `node` line gave it a default name)"),
                });
            }
        }
        plan.events.sort();
        Ok(plan)
    }
}

/// A wall-clock instant as a DTN time, if it is not before the DTN epoch.
fn dtn_time_of(t: SystemTime) -> Option<DtnTime> {
    let since_unix = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    let ms = since_unix
        .as_millis()
        .checked_sub(u128::from(DTN_EPOCH_UNIX_S) * 1_000)?;
    u64::try_from(ms).ok().map(DtnTime::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_plans_parse_and_report_errors_by_line() {
        let plan: ContactPlan =
            "nodes 3\n0 up 0 1 # first\n\n20 down 1 0\nrepeat 1 2 up 20 down 40 until 120\nrepeat 0 2 up 10 down 10 until 30 from 5\n"
                .parse()
                .unwrap();
        assert_eq!(plan.nodes, 3);
        assert_eq!(plan.events.len(), 2 + 4 + 4);
        assert!(plan.events.contains(&LinkEvent {
            at: 25_000,
            up: true,
            a: 0,
            b: 2
        }));
        assert_eq!(
            plan.events[1],
            LinkEvent {
                at: 0,
                up: true,
                a: 1,
                b: 2
            }
        );
        let err = "nodes 2\n0 up 0 5\n".parse::<ContactPlan>().unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("out of range"), "{err}");
        assert!("0 up 0 1\n".parse::<ContactPlan>().is_err());
        assert_eq!(
            "nodes 2\n0 sideways 0 1"
                .parse::<ContactPlan>()
                .unwrap_err()
                .line,
            2
        );
    }

    #[test]
    fn names_and_epoch() {
        let plan: ContactPlan =
            "nodes 3\nnode 0 dtn://base/\nnode 2 ipn:7.0\nepoch 2000-01-01T00:01:00Z\n0 up 0 2\n"
                .parse()
                .unwrap();
        assert_eq!(plan.node_id(0).to_string(), "dtn://base/");
        assert_eq!(plan.node_id(1).to_string(), "dtn://n1/");
        assert_eq!(plan.node_id(2).to_string(), "ipn:7.0");
        assert_eq!(plan.index_of(&"ipn:7.0".parse().unwrap()), Some(2));
        assert_eq!(plan.epoch, Some(DtnTime::from_millis(60_000)));

        let err = |text: &str| text.parse::<ContactPlan>().unwrap_err().to_string();
        assert!(err("nodes 2\nnode 0 dtn://a/x\n").contains("not a node id"));
        assert!(err("nodes 2\nnode 0 dtn://a/\nnode 1 dtn://a/\n").contains("names two nodes"));
        assert!(err("nodes 2\nnode 0 dtn://a/\nnode 0 dtn://b/\n").contains("named twice"));
        assert!(err("nodes 2\nnode 0 dtn://n1/\n").contains("names two nodes"));
        assert!(err("nodes 2\nepoch yesterday\n").contains("RFC 3339"));
        assert!(err("nodes 2\nepoch 1999-12-31T23:59:59Z\n").contains("before 2000"));
    }

    #[test]
    fn plans_are_bounded() {
        let err = "nodes 2\nrepeat 0 1 up 1 down 1 until 4000000\n"
            .parse::<ContactPlan>()
            .unwrap_err();
        assert!(err.message.contains("link changes"), "{err}");
        assert!("nodes 100001\n".parse::<ContactPlan>().is_err());
        assert!(
            "nodes 2\n99999999999999999999 up 0 1\n"
                .parse::<ContactPlan>()
                .is_err()
        );
        assert!(
            "nodes 2\n18446744073709552 up 0 1\n"
                .parse::<ContactPlan>()
                .unwrap_err()
                .message
                .contains("too large")
        );
    }

    #[test]
    fn contacts_pair_ups_with_downs() {
        let plan: ContactPlan =
            "nodes 3\n0 up 0 1\n0 up 1 0\n10 down 0 1\n15 down 0 1\n20 up 1 2\n"
                .parse()
                .unwrap();
        let origin = DtnTime::from_millis(1_000);
        let contacts = plan.contacts(origin, |i| plan.node_id(i));
        assert_eq!(contacts.len(), 2);
        assert_eq!(contacts[0].a.to_string(), "dtn://n0/");
        assert_eq!(contacts[0].start, origin);
        assert_eq!(contacts[0].end, DtnTime::from_millis(11_000));
        assert_eq!(contacts[1].start, DtnTime::from_millis(21_000));
        assert_eq!(contacts[1].end, DtnTime::MAX);
    }
}
