//! Contact graph routing over a known plan: for a bundle at this node, the neighbour to hand it
//! to so that it reaches its destination earliest, given the contacts a [`crate::plan`] lists.
//!
//! This is CGR as CCSDS SABR describes it, simplified: the route is an earliest-arrival path
//! over the contacts (Dijkstra on the time-varying graph: a bundle may wait at a node for a
//! later contact), with no one-way light time (terrestrial links), no contact volume (a contact
//! is assumed to carry whatever is routed over it), and no per-bundle route exclusion: every
//! node holds the same plan, so the next hop's own earliest route continues the one chosen here.
//! The graph is read-only once built; [`ContactGraph::route`] never reads a clock (the time is
//! an argument).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use wire::{DtnTime, Eid};

use crate::plan::Contact;

/// The planned contacts, indexed by node.
#[derive(Debug, Clone, Default)]
pub struct ContactGraph {
    /// Node ids by index.
    nodes: Vec<Eid>,
    index: BTreeMap<Eid, usize>,
    /// Contacts as (other end, start, end), per node.
    adjacent: Vec<Vec<(usize, DtnTime, DtnTime)>>,
    /// Every start and end, sorted and deduplicated: between two of them, routes do not change.
    changes: Vec<DtnTime>,
    contacts: usize,
}

/// Where to hand a bundle next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The neighbour to hand it to.
    pub next_hop: Eid,
    /// When the contact with it starts (now, if it is up now).
    pub departs: DtnTime,
    /// When the bundle can reach its destination at the earliest.
    pub arrives: DtnTime,
    /// Contacts on the way.
    pub hops: u32,
}

impl ContactGraph {
    /// A graph of these contacts (empty contacts, where `end <= start`, are left out).
    pub fn new(contacts: impl IntoIterator<Item = Contact>) -> Self {
        let mut graph = ContactGraph::default();
        for c in contacts {
            if c.end <= c.start || c.a == c.b {
                continue;
            }
            let a = graph.intern(c.a);
            let b = graph.intern(c.b);
            graph.adjacent[a].push((b, c.start, c.end));
            graph.adjacent[b].push((a, c.start, c.end));
            graph.changes.push(c.start);
            graph.changes.push(c.end);
            graph.contacts += 1;
        }
        graph.changes.sort_unstable();
        graph.changes.dedup();
        graph
    }

    fn intern(&mut self, id: Eid) -> usize {
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        let i = self.nodes.len();
        self.nodes.push(id.clone());
        self.index.insert(id, i);
        self.adjacent.push(Vec::new());
        i
    }

    /// Whether the plan has contacts with `node`.
    pub fn knows(&self, node: &Eid) -> bool {
        self.index.contains_key(node)
    }

    /// How many contacts the graph holds.
    pub fn len(&self) -> usize {
        self.contacts
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.contacts == 0
    }

    /// The first instant after `now` at which a contact starts or ends (routes computed at `now`
    /// hold until then), if any.
    pub fn next_change(&self, now: DtnTime) -> Option<DtnTime> {
        let i = self.changes.partition_point(|&t| t <= now);
        self.changes.get(i).copied()
    }

    /// The earliest-arrival route from `from` to `to` for a bundle at `from` at `now`; `None` if
    /// the plan offers no journey (or either node is not in it). Ties go to fewer hops, then to
    /// the neighbour listed first, so every node computes the same route.
    pub fn route(&self, from: &Eid, to: &Eid, now: DtnTime) -> Option<Route> {
        let (&src, &dst) = (self.index.get(from)?, self.index.get(to)?);
        if src == dst {
            return None;
        }
        self.search(src, now, Some(dst)).swap_remove(dst)
    }

    /// The earliest-arrival route from `from` to every node the plan lets it reach, by node id
    /// (one search for all of them: what `ferry routes` shows).
    pub fn routes_from(&self, from: &Eid, now: DtnTime) -> Vec<(Eid, Route)> {
        let Some(&src) = self.index.get(from) else {
            return Vec::new();
        };
        let mut routes: Vec<(Eid, Route)> = self
            .search(src, now, None)
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| Some((self.nodes[i].clone(), r?)))
            .collect();
        routes.sort_by(|a, b| a.0.cmp(&b.0));
        routes
    }

    /// Dijkstra over the time-varying graph from `src` at `now`: each node's route, or `None`
    /// where there is no journey (and for `src` itself). Stops once `stop` is settled.
    fn search(&self, src: usize, now: DtnTime, stop: Option<usize>) -> Vec<Option<Route>> {
        let n = self.nodes.len();
        // Per node: earliest arrival, hops, and the first hop with its departure.
        let mut best: Vec<Option<(DtnTime, u32)>> = vec![None; n];
        let mut first: Vec<Option<(usize, DtnTime)>> = vec![None; n];
        let mut routes: Vec<Option<Route>> = vec![None; n];
        let mut queue = BinaryHeap::new();
        best[src] = Some((now, 0));
        queue.push(Reverse((now, 0u32, src)));
        while let Some(Reverse((t, hops, u))) = queue.pop() {
            if best[u] != Some((t, hops)) || routes[u].is_some() {
                continue; // a stale entry: u was reached earlier since
            }
            if let Some((next, departs)) = first[u] {
                routes[u] = Some(Route {
                    next_hop: self.nodes[next].clone(),
                    departs,
                    arrives: t,
                    hops,
                });
            }
            if Some(u) == stop {
                break;
            }
            for &(v, start, end) in &self.adjacent[u] {
                let at = t.max(start);
                if at >= end {
                    continue; // the contact is over by the time the bundle is here
                }
                let candidate = (at, hops + 1);
                if best[v].is_none_or(|b| candidate < b) {
                    best[v] = Some(candidate);
                    first[v] = if u == src { Some((v, at)) } else { first[u] };
                    queue.push(Reverse((at, hops + 1, v)));
                }
            }
        }
        routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ContactPlan;

    fn id(name: &str) -> Eid {
        Eid::dtn(name, "").unwrap()
    }

    fn graph(plan: &str) -> ContactGraph {
        let plan: ContactPlan = plan.parse().unwrap();
        ContactGraph::new(plan.contacts(DtnTime::from_millis(0), |i| plan.node_id(i)))
    }

    fn at(s: u64) -> DtnTime {
        DtnTime::from_millis(s * 1_000)
    }

    #[test]
    fn waits_for_a_later_contact_when_it_arrives_earlier() {
        // 0 meets 1 now, but 1 meets 3 only at 100 s; 0 meets 2 at 10 s and 2 meets 3 at 20 s.
        let g = graph(
            "nodes 4\n0 up 0 1\n200 down 0 1\n100 up 1 3\n200 down 1 3\n10 up 0 2\n15 down 0 2\n20 up 2 3\n30 down 2 3\n",
        );
        let r = g.route(&id("n0"), &id("n3"), at(0)).unwrap();
        assert_eq!(r.next_hop, id("n2"));
        assert_eq!((r.departs, r.arrives, r.hops), (at(10), at(20), 2));
        // Once the contact with 2 is over, the way through 1 is the only one left.
        let r = g.route(&id("n0"), &id("n3"), at(16)).unwrap();
        assert_eq!((r.next_hop, r.arrives), (id("n1"), at(100)));
        // After both ways are gone there is no route.
        assert_eq!(g.route(&id("n0"), &id("n3"), at(200)), None);
        assert_eq!(g.route(&id("n0"), &id("n9"), at(0)), None);
        assert_eq!(g.route(&id("n0"), &id("n0"), at(0)), None);
        // All at once: the same routes.
        let all = g.routes_from(&id("n0"), at(0));
        let names: Vec<String> = all.iter().map(|(d, _)| d.to_string()).collect();
        assert_eq!(names, ["dtn://n1/", "dtn://n2/", "dtn://n3/"]);
        for (dest, r) in &all {
            assert_eq!(Some(r), g.route(&id("n0"), dest, at(0)).as_ref());
        }
    }

    #[test]
    fn ties_go_to_fewer_hops() {
        // Both ways arrive at once (everything is up); the direct contact wins.
        let g = graph("nodes 3\n0 up 0 1\n0 up 1 2\n0 up 0 2\n");
        let r = g.route(&id("n0"), &id("n2"), at(5)).unwrap();
        assert_eq!((r.next_hop, r.hops), (id("n2"), 1));
    }

    #[test]
    fn a_contact_ending_as_the_bundle_arrives_is_missed() {
        let g = graph("nodes 3\n0 up 0 1\n10 down 0 1\n10 up 1 2\n20 down 1 2\n");
        assert_eq!(
            g.route(&id("n0"), &id("n2"), at(0)).unwrap().arrives,
            at(10)
        );
        assert_eq!(g.route(&id("n0"), &id("n2"), at(10)), None);
    }

    #[test]
    fn routes_match_a_brute_force_search_on_random_plans() {
        // Earliest arrival by relaxing every contact until nothing changes (Bellman-Ford on the
        // time-varying graph): slow but obviously right.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for _ in 0..200 {
            let nodes = 2 + next(6) as usize;
            let mut contacts = Vec::new();
            for _ in 0..next(12) {
                let (a, b) = (next(nodes as u64) as usize, next(nodes as u64) as usize);
                let start = next(100);
                contacts.push(Contact {
                    a: id(&format!("n{a}")),
                    b: id(&format!("n{b}")),
                    start: at(start),
                    end: at(start + 1 + next(50)),
                });
            }
            let g = ContactGraph::new(contacts.clone());
            let now = at(next(60));
            let mut arrival: BTreeMap<Eid, DtnTime> = BTreeMap::from([(id("n0"), now)]);
            loop {
                let mut changed = false;
                for c in contacts.iter().filter(|c| c.a != c.b) {
                    for (u, v) in [(&c.a, &c.b), (&c.b, &c.a)] {
                        if let Some(&t) = arrival.get(u) {
                            let t2 = t.max(c.start);
                            if t2 < c.end && arrival.get(v).is_none_or(|&old| t2 < old) {
                                arrival.insert(v.clone(), t2);
                                changed = true;
                            }
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
            for d in 1..nodes {
                let dest = id(&format!("n{d}"));
                let got = g.route(&id("n0"), &dest, now).map(|r| r.arrives);
                assert_eq!(got, arrival.get(&dest).copied(), "to n{d} from {now:?}");
            }
        }
    }
}
