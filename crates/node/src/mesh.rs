//! Real-time mesh routing by link state, in the manner of OLSR and Serval's mesh: every node
//! floods an advertisement of its neighbours (with a sequence number and a lifetime), every node
//! keeps the newest advertisement of every origin, and shortest paths over links that both ends
//! advertise give the next hop to every reachable node.
//!
//! **What it never does.** It sends nothing itself and reads no clock: advertisements to flood come
//! out of [`Mesh::poll_flood`] (the node wraps them in bundles for its neighbours), time comes in as
//! `now`. It stores nothing across restarts: sequence numbers start from `now`, so a restarted
//! node's advertisements are newer than the ones it made before.
//!
//! **How to drive it.** Report neighbours with [`Mesh::set_neighbour`] and
//! [`Mesh::remove_neighbour`], advertisements from neighbours with [`Mesh::handle_link_state`];
//! then drain [`Mesh::poll_flood`] and [`Mesh::poll_event`], and call [`Mesh::handle_timeout`] at
//! [`Mesh::poll_timeout`]. Neighbour changes take effect at once; route recomputation after
//! advertisements is coalesced over `spf_delay_ms`, so a burst of floods costs one computation.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;

use wire::{DtnTime, Eid, LinkState};

use crate::expiring::ExpiringMap;

/// Most origins kept; advertisements from further origins are ignored.
const MAX_ORIGINS: usize = 65_536;
/// Most links kept per advertisement.
const MAX_LINKS: usize = 4_096;

/// Timing of the mesh protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshConfig {
    /// How often a node re-advertises its neighbours without a change.
    pub refresh: Duration,
    /// How long others keep an advertisement without a newer one.
    pub advert_lifetime: Duration,
    /// Least time between two advertisements of one node (damps flapping links).
    pub min_origination: Duration,
    /// Delay between an advertisement's arrival and the route computation it triggers.
    pub spf_delay: Duration,
}

impl Default for MeshConfig {
    fn default() -> Self {
        Self {
            refresh: Duration::from_secs(30),
            advert_lifetime: Duration::from_secs(90),
            min_origination: Duration::from_secs(1),
            spf_delay: Duration::from_millis(100),
        }
    }
}

/// A change in reachability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteEvent {
    /// `node` became reachable, or its distance changed.
    Reachable {
        /// The node.
        node: Eid,
        /// Hops to it.
        hops: u32,
    },
    /// `node` is no longer reachable.
    Unreachable {
        /// The node.
        node: Eid,
    },
}

/// One entry of the routing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Where to.
    pub destination: Eid,
    /// The neighbour to send through.
    pub next_hop: Eid,
    /// Links on the path.
    pub hops: u32,
    /// Summed link costs.
    pub cost: u64,
}

/// An advertisement to send to some neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flood {
    /// The advertisement.
    pub lsa: LinkState,
    /// The neighbours to send it to: every current neighbour except the one it came from and
    /// those that neighbour reaches itself (it floods to them directly), ascending.
    pub to: Vec<Eid>,
}

#[derive(Debug)]
struct Stored {
    lsa: LinkState,
    /// `lsa.links` as interned ids with their costs, ascending by id.
    links: Vec<(u32, u32)>,
}

/// Whether interned `links` (ascending by id, as [`Stored::links`]) name `id`.
fn links_to(links: &[(u32, u32)], id: u32) -> bool {
    links.binary_search_by_key(&id, |&(v, _)| v).is_ok()
}

/// A direct neighbour: the cost of the link to it and its interned id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Neighbour {
    cost: u32,
    id: u32,
}

/// The link-state database and routing table of one node.
#[derive(Debug)]
pub struct Mesh {
    me: Eid,
    config: MeshConfig,
    /// Interned node ids: index 0 is this node.
    ids: BTreeMap<Eid, u32>,
    names: Vec<Eid>,
    neighbours: BTreeMap<Eid, Neighbour>,
    /// Advertisements by origin, each until its lifetime ends.
    lsdb: ExpiringMap<u32, Stored>,
    sequence: u64,
    last_origination: Option<DtnTime>,
    pending_origination: Option<DtnTime>,
    next_refresh: DtnTime,
    recompute_at: Option<DtnTime>,
    routes: BTreeMap<Eid, Route>,
    /// The last computation's (cost, hops, first hop) by interned id, to find what changed.
    best: Vec<Option<(u64, u32, u32)>>,
    floods: VecDeque<Flood>,
    events: VecDeque<RouteEvent>,
}

impl Mesh {
    /// A node with no neighbours yet.
    pub fn new(me: Eid, config: MeshConfig, now: DtnTime) -> Self {
        let mut ids = BTreeMap::new();
        ids.insert(me.clone(), 0);
        Self {
            names: vec![me.clone()],
            me,
            ids,
            neighbours: BTreeMap::new(),
            lsdb: ExpiringMap::new(),
            // Newer than anything this node advertised before a restart (times only grow).
            sequence: now.as_millis(),
            last_origination: None,
            pending_origination: None,
            next_refresh: now.saturating_add(config.refresh),
            recompute_at: None,
            routes: BTreeMap::new(),
            best: Vec::new(),
            floods: VecDeque::new(),
            events: VecDeque::new(),
            config,
        }
    }

    /// Adds a direct neighbour, or changes the cost of the link to it.
    pub fn set_neighbour(&mut self, now: DtnTime, node: Eid, cost: u32) {
        if node == self.me {
            return;
        }
        let neighbour = Neighbour {
            cost: cost.max(1),
            id: self.intern(&node),
        };
        if self.neighbours.insert(node, neighbour) != Some(neighbour) {
            self.originate(now);
            self.recompute();
        }
    }

    /// Removes a direct neighbour.
    pub fn remove_neighbour(&mut self, now: DtnTime, node: &Eid) {
        if self.neighbours.remove(node).is_some() {
            self.originate(now);
            self.recompute();
        }
    }

    /// An advertisement arrived from neighbour `from`.
    pub fn handle_link_state(&mut self, now: DtnTime, from: &Eid, lsa: LinkState) {
        if lsa.origin == self.me {
            // Our own, from before a restart with a clock that went backwards: jump past it.
            if lsa.sequence >= self.sequence {
                self.sequence = lsa.sequence;
                self.originate(now);
            }
            return;
        }
        let known = self.ids.get(&lsa.origin).copied();
        let previous = known.and_then(|origin| self.lsdb.get(&origin));
        if previous.is_some_and(|s| s.lsa.sequence >= lsa.sequence) {
            return;
        }
        if known.is_none() && self.names.len() >= MAX_ORIGINS {
            return;
        }
        let mut lsa = lsa;
        lsa.links.truncate(MAX_LINKS);
        // A hostile peer must not pin state: lifetimes are capped.
        lsa.lifetime_ms = lsa.lifetime_ms.min(wire::time::millis(
            self.config.advert_lifetime.saturating_mul(10),
        ));
        // Most advertisements are refreshes naming the links of the one they replace, in the
        // same order (a node lists its neighbours sorted): those links are interned already,
        // and the routes computed from them stay as they are. Any other list is interned anew.
        let unchanged = previous
            .filter(|s| s.lsa.links == lsa.links)
            .map(|s| s.links.clone());
        let origin = self.intern(&lsa.origin);
        let topology_changed = unchanged.is_none();
        let links = unchanged.unwrap_or_else(|| {
            let mut links = Vec::with_capacity(lsa.links.len());
            for (eid, cost) in &lsa.links {
                if self.ids.contains_key(eid) || self.names.len() < MAX_ORIGINS {
                    links.push((self.intern(eid), (*cost).max(1)));
                }
            }
            links.sort_unstable();
            links
        });
        // Neighbour-coverage pruning: the sender floods to its own neighbours, so only ours that
        // are not also its neighbours need our copy. On a full mesh nothing is re-flooded.
        let sender = self.ids.get(from).copied();
        let sender_links: &[(u32, u32)] = match sender {
            Some(f) if f == origin => &links,
            Some(f) => self.lsdb.get(&f).map_or(&[], |s| &s.links),
            None => &[],
        };
        let to: Vec<Eid> = self
            .neighbours
            .iter()
            .filter(|(_, n)| Some(n.id) != sender && !links_to(sender_links, n.id))
            .map(|(eid, _)| eid.clone())
            .collect();
        let expiry = now.saturating_add(Duration::from_millis(lsa.lifetime_ms));
        let flood = (!to.is_empty()).then(|| Flood {
            lsa: lsa.clone(),
            to,
        });
        self.lsdb.insert(origin, expiry, Stored { lsa, links });
        if let Some(flood) = flood {
            self.floods.push_back(flood);
        }
        if topology_changed {
            self.schedule_recompute(now);
        }
    }

    /// Timers: expiry of advertisements, our own (re-)advertisement, route computation.
    pub fn handle_timeout(&mut self, now: DtnTime) {
        let mut changed = false;
        while self.lsdb.pop_expired(now).is_some() {
            changed = true;
        }
        if self.pending_origination.is_some_and(|t| t <= now) || self.next_refresh <= now {
            self.pending_origination = None;
            self.advertise(now);
        }
        if changed || self.recompute_at.is_some_and(|t| t <= now) {
            self.recompute();
        }
    }

    /// When `handle_timeout` is due.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        [
            self.lsdb.next_expiry(),
            self.pending_origination,
            Some(self.next_refresh),
            self.recompute_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The next advertisement to flood.
    pub fn poll_flood(&mut self) -> Option<Flood> {
        self.floods.pop_front()
    }

    /// The next reachability change.
    pub fn poll_event(&mut self) -> Option<RouteEvent> {
        self.events.pop_front()
    }

    /// The neighbour to send through to reach `destination`, if reachable.
    pub fn next_hop(&self, destination: &Eid) -> Option<&Eid> {
        self.routes.get(destination).map(|r| &r.next_hop)
    }

    /// Whether the newest advertisement of `origin` names `node` as its neighbour.
    pub fn advertises(&self, origin: &Eid, node: &Eid) -> bool {
        let (Some(o), Some(n)) = (self.ids.get(origin), self.ids.get(node)) else {
            return false;
        };
        self.lsdb.get(o).is_some_and(|s| links_to(&s.links, *n))
    }

    /// Hops to `destination`, if reachable.
    pub fn hops(&self, destination: &Eid) -> Option<u32> {
        self.routes.get(destination).map(|r| r.hops)
    }

    /// The routing table, ascending by destination.
    pub fn routes(&self) -> Vec<Route> {
        self.routes.values().cloned().collect()
    }

    /// Every live advertisement, ours first: what a new neighbour needs to route at once.
    pub fn database(&self) -> Vec<LinkState> {
        let mut all = vec![self.own_lsa()];
        all.extend(self.lsdb.values().map(|s| s.lsa.clone()));
        all
    }

    /// Current direct neighbours.
    pub fn neighbours(&self) -> impl Iterator<Item = &Eid> {
        self.neighbours.keys()
    }

    fn intern(&mut self, eid: &Eid) -> u32 {
        if let Some(&id) = self.ids.get(eid) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(eid.clone());
        self.ids.insert(eid.clone(), id);
        id
    }

    fn own_lsa(&self) -> LinkState {
        LinkState {
            origin: self.me.clone(),
            sequence: self.sequence,
            lifetime_ms: wire::time::millis(self.config.advert_lifetime),
            links: self
                .neighbours
                .iter()
                .map(|(eid, n)| (eid.clone(), n.cost))
                .collect(),
        }
    }

    /// Advertises now, or as soon as the rate limit allows.
    fn originate(&mut self, now: DtnTime) {
        let earliest = self
            .last_origination
            .map_or(now, |t| t.saturating_add(self.config.min_origination));
        if earliest <= now {
            self.pending_origination = None;
            self.advertise(now);
        } else if self.pending_origination.is_none() {
            self.pending_origination = Some(earliest);
        }
    }

    fn advertise(&mut self, now: DtnTime) {
        self.sequence = self.sequence.saturating_add(1).max(now.as_millis());
        self.last_origination = Some(now);
        self.next_refresh = now.saturating_add(self.config.refresh);
        let to: Vec<Eid> = self.neighbours.keys().cloned().collect();
        if !to.is_empty() {
            self.floods.push_back(Flood {
                lsa: self.own_lsa(),
                to,
            });
        }
    }

    fn schedule_recompute(&mut self, now: DtnTime) {
        if self.recompute_at.is_none() {
            self.recompute_at = Some(now.saturating_add(self.config.spf_delay));
        }
    }

    /// Dijkstra from this node over links both ends advertise (our own links are known locally),
    /// then reachability events for what changed.
    fn recompute(&mut self) {
        self.recompute_at = None;
        let n = self.names.len();
        let mut best: Vec<Option<(u64, u32, u32)>> = vec![None; n]; // (cost, hops, first hop)
        let mut heap = BinaryHeap::new();
        best[0] = Some((0, 0, 0));
        for n in self.neighbours.values() {
            let v = n.id;
            let entry = (u64::from(n.cost), 1, v);
            if best[v as usize].is_none_or(|b| (entry.0, entry.1, v) < (b.0, b.1, b.2)) {
                best[v as usize] = Some(entry);
                heap.push(Reverse((entry.0, 1u32, v, v)));
            }
        }
        let mut done = vec![false; n];
        done[0] = true;
        while let Some(Reverse((cost, hops, u, first))) = heap.pop() {
            if done[u as usize] || best[u as usize] != Some((cost, hops, first)) {
                continue;
            }
            done[u as usize] = true;
            let Some(stored) = self.lsdb.get(&u) else {
                continue;
            };
            for &(v, link_cost) in &stored.links {
                if v == 0 || done[v as usize] || !self.confirms(v, u) {
                    continue;
                }
                let entry = (cost.saturating_add(u64::from(link_cost)), hops + 1, first);
                if best[v as usize].is_none_or(|b| entry < b) {
                    best[v as usize] = Some(entry);
                    heap.push(Reverse((entry.0, entry.1, v, first)));
                }
            }
        }
        // Only what changed since the last computation touches the table; events go out as a
        // whole-table comparison would order them: reachable ones first, each kind by node.
        let old = std::mem::replace(&mut self.best, best);
        let mut reachable = Vec::new();
        let mut unreachable = Vec::new();
        for (v, entry) in self.best.iter().enumerate().skip(1) {
            let before = old.get(v).copied().flatten();
            if *entry == before {
                continue;
            }
            let destination = &self.names[v];
            match entry {
                Some((cost, hops, first)) => {
                    self.routes.insert(
                        destination.clone(),
                        Route {
                            destination: destination.clone(),
                            next_hop: self.names[*first as usize].clone(),
                            hops: *hops,
                            cost: *cost,
                        },
                    );
                    if before.map(|b| b.1) != Some(*hops) {
                        reachable.push((destination, *hops));
                    }
                }
                None => {
                    self.routes.remove(destination);
                    unreachable.push(destination);
                }
            }
        }
        reachable.sort_unstable();
        unreachable.sort_unstable();
        self.events.extend(
            reachable
                .into_iter()
                .map(|(node, hops)| RouteEvent::Reachable {
                    node: node.clone(),
                    hops,
                }),
        );
        self.events.extend(
            unreachable
                .into_iter()
                .map(|node| RouteEvent::Unreachable { node: node.clone() }),
        );
    }

    /// Whether `v` advertises a link back to `u` (links are used only if both ends agree).
    fn confirms(&self, v: u32, u: u32) -> bool {
        self.lsdb.get(&v).is_some_and(|s| links_to(&s.links, u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::time::Duration;

    fn id(i: usize) -> Eid {
        format!("dtn://m{i}/").parse().unwrap()
    }

    /// Meshes joined by instantaneous floods over the given links.
    struct Net {
        nodes: Vec<Mesh>,
        links: BTreeSet<(usize, usize)>,
        now: DtnTime,
        floods_sent: usize,
    }

    impl Net {
        fn new(n: usize) -> Self {
            Self {
                nodes: (0..n)
                    .map(|i| Mesh::new(id(i), MeshConfig::default(), DtnTime::from_millis(1_000)))
                    .collect(),
                links: BTreeSet::new(),
                now: DtnTime::from_millis(1_000),
                floods_sent: 0,
            }
        }

        fn connect(&mut self, a: usize, b: usize) {
            self.links.insert((a, b));
            self.links.insert((b, a));
            let now = self.now;
            self.nodes[a].set_neighbour(now, id(b), 1);
            self.nodes[b].set_neighbour(now, id(a), 1);
            // A new neighbour gets the whole database.
            for (x, y) in [(a, b), (b, a)] {
                for lsa in self.nodes[x].database() {
                    self.nodes[y].handle_link_state(now, &id(x), lsa);
                }
            }
            self.settle();
        }

        fn cut(&mut self, a: usize, b: usize) {
            self.links.remove(&(a, b));
            self.links.remove(&(b, a));
            let now = self.now;
            self.nodes[a].remove_neighbour(now, &id(b));
            self.nodes[b].remove_neighbour(now, &id(a));
            self.settle();
        }

        fn settle(&mut self) {
            loop {
                let mut moved = false;
                for i in 0..self.nodes.len() {
                    while let Some(flood) = self.nodes[i].poll_flood() {
                        moved = true;
                        let targets: Vec<usize> = self
                            .links
                            .iter()
                            .filter(|(a, b)| *a == i && flood.to.contains(&id(*b)))
                            .map(|(_, b)| *b)
                            .collect();
                        for j in targets {
                            self.floods_sent += 1;
                            let now = self.now;
                            self.nodes[j].handle_link_state(now, &id(i), flood.lsa.clone());
                        }
                    }
                }
                if !moved {
                    break;
                }
            }
        }

        fn advance(&mut self, ms: u64) {
            let end = self.now + Duration::from_millis(ms);
            loop {
                let next = self
                    .nodes
                    .iter()
                    .filter_map(|n| n.poll_timeout())
                    .min()
                    .filter(|t| *t <= end);
                let Some(t) = next else { break };
                self.now = t;
                for n in &mut self.nodes {
                    if n.poll_timeout().is_some_and(|d| d <= t) {
                        n.handle_timeout(t);
                    }
                }
                self.settle();
            }
            self.now = end;
        }

        fn drain_events(&mut self, i: usize) -> Vec<RouteEvent> {
            std::iter::from_fn(|| self.nodes[i].poll_event()).collect()
        }
    }

    fn line(n: usize) -> Net {
        let mut net = Net::new(n);
        for i in 1..n {
            net.connect(i - 1, i);
        }
        // Advertisements are rate-limited to one a second per node.
        net.advance(1_500);
        net
    }

    #[test]
    fn a_line_converges_to_next_hops_and_hop_counts() {
        let net = line(5);
        let m0 = &net.nodes[0];
        for k in 1..5 {
            assert_eq!(m0.next_hop(&id(k)), Some(&id(1)), "to {k}");
            assert_eq!(m0.hops(&id(k)), Some(k as u32));
        }
        assert_eq!(net.nodes[2].next_hop(&id(0)), Some(&id(1)));
        assert_eq!(net.nodes[2].next_hop(&id(4)), Some(&id(3)));
        assert_eq!(m0.routes().len(), 4);
    }

    #[test]
    fn a_cut_link_makes_the_far_side_unreachable_at_once() {
        let mut net = line(5);
        net.drain_events(0);
        net.cut(1, 2);
        // Node 1 knows at once, without waiting for a computation delay.
        assert_eq!(net.nodes[1].next_hop(&id(2)), None);
        net.advance(1_500);
        let events = net.drain_events(0);
        for k in 2..5 {
            assert!(
                events.contains(&RouteEvent::Unreachable { node: id(k) }),
                "{events:?}"
            );
            assert_eq!(net.nodes[0].hops(&id(k)), None);
        }
        assert_eq!(net.nodes[0].hops(&id(1)), Some(1));
    }

    #[test]
    fn advertisements_expire_when_their_origin_falls_silent() {
        let mut net = line(3);
        // Node 2 vanishes without a word (its links are not cut in anyone's view but its own).
        net.links.retain(|(a, b)| *a != 2 && *b != 2);
        net.nodes[1].remove_neighbour(net.now, &id(2));
        net.settle();
        // Node 0 drops the route when node 1's new advertisement arrives...
        net.advance(1_500);
        assert_eq!(net.nodes[0].hops(&id(2)), None);
        // ...and forgets node 2's own advertisement after its lifetime.
        net.advance(wire::time::millis(
            MeshConfig::default().advert_lifetime + Duration::from_millis(1_000),
        ));
        assert_eq!(net.nodes[0].database().len(), 2, "own and node 1's");
    }

    #[test]
    fn stale_sequence_numbers_are_ignored_and_nothing_floods_twice() {
        let mut net = line(3);
        let lsa = net.nodes[2].database().remove(0);
        let mut old = lsa.clone();
        old.sequence -= 1;
        old.links.clear();
        net.nodes[0].handle_link_state(net.now, &id(1), old);
        assert!(net.nodes[0].poll_flood().is_none(), "stale: not flooded");
        net.nodes[0].handle_link_state(net.now, &id(1), lsa);
        assert!(
            net.nodes[0].poll_flood().is_none(),
            "same sequence: not flooded"
        );
        net.advance(1_500);
        assert_eq!(net.nodes[0].hops(&id(2)), Some(2));
    }

    #[test]
    fn a_full_mesh_does_not_reflood() {
        let mut net = Net::new(6);
        for a in 0..6 {
            for b in a + 1..6 {
                net.connect(a, b);
            }
        }
        net.advance(1_500);
        let before = net.floods_sent;
        // One node re-advertises: each of the five others gets it once, straight from it.
        net.cut(0, 1);
        net.advance(1_500);
        let per_change = net.floods_sent - before;
        assert!(
            per_change <= 2 * 5 + 2 * 4,
            "{per_change} floods for one change"
        );
        for a in 2..6 {
            assert_eq!(net.nodes[a].hops(&id(0)), Some(1));
        }
        assert_eq!(net.nodes[0].hops(&id(1)), Some(2));
    }

    #[test]
    fn one_way_links_are_not_used() {
        let mut net = Net::new(3);
        net.connect(0, 1);
        // Node 2 claims a link to node 1 that node 1 does not confirm.
        let claim = LinkState {
            origin: id(2),
            sequence: 5_000,
            lifetime_ms: 60_000,
            links: vec![(id(1), 1)],
        };
        net.nodes[0].handle_link_state(net.now, &id(1), claim);
        net.advance(200);
        assert_eq!(net.nodes[0].hops(&id(2)), None);
    }

    #[test]
    fn a_restarted_node_is_believed() {
        let mut net = line(3);
        net.advance(10_000);
        // Node 2 restarts: a fresh Mesh with a later clock and no memory.
        net.nodes[2] = Mesh::new(id(2), MeshConfig::default(), net.now);
        net.nodes[2].set_neighbour(net.now, id(1), 1);
        net.settle();
        net.advance(1_500);
        assert_eq!(net.nodes[0].hops(&id(2)), Some(2));
    }

    #[test]
    fn a_burst_of_advertisements_costs_one_computation() {
        let mut m = Mesh::new(id(0), MeshConfig::default(), DtnTime::from_millis(1_000));
        m.set_neighbour(DtnTime::from_millis(1_000), id(1), 1);
        while m.poll_event().is_some() {}
        for k in 2..50 {
            let lsa = LinkState {
                origin: id(k),
                sequence: 7,
                lifetime_ms: 60_000,
                links: vec![(id(k - 1), 1)],
            };
            m.handle_link_state(DtnTime::from_millis(1_010), &id(1), lsa);
        }
        assert_eq!(m.poll_timeout(), Some(DtnTime::from_millis(1_110)));
        assert!(m.poll_event().is_none(), "no computation before the delay");
    }

    #[test]
    fn hostile_advertisements_stay_bounded() {
        let mut m = Mesh::new(id(0), MeshConfig::default(), DtnTime::from_millis(1_000));
        let links: Vec<(Eid, u32)> = (0..10_000).map(|k| (id(100_000 + k), 1)).collect();
        m.handle_link_state(
            DtnTime::from_millis(1_000),
            &id(1),
            LinkState {
                origin: id(9),
                sequence: 1,
                lifetime_ms: u64::MAX,
                links,
            },
        );
        let origin = m.ids[&id(9)];
        let stored = m.lsdb.get(&origin).unwrap();
        assert!(stored.links.len() <= MAX_LINKS);
        let until = m.lsdb.until(&origin).unwrap();
        assert!(until <= DtnTime::from_millis(1_000) + 10 * MeshConfig::default().advert_lifetime);
    }

    #[test]
    fn a_refresh_naming_the_same_links_costs_no_computation() {
        let mut m = Mesh::new(id(0), MeshConfig::default(), DtnTime::from_millis(1_000));
        m.set_neighbour(DtnTime::from_millis(1_000), id(1), 1);
        let lsa = |sequence, links: Vec<(Eid, u32)>| LinkState {
            origin: id(1),
            sequence,
            lifetime_ms: 60_000,
            links,
        };
        m.handle_link_state(
            DtnTime::from_millis(1_000),
            &id(1),
            lsa(1, vec![(id(0), 1), (id(2), 1)]),
        );
        m.handle_timeout(DtnTime::from_millis(1_100));
        assert_eq!(m.hops(&id(2)), None, "2 has not confirmed the link");
        while m.poll_event().is_some() {}
        // A refresh: newer, the same links.
        m.handle_link_state(
            DtnTime::from_millis(2_000),
            &id(1),
            lsa(2, vec![(id(0), 1), (id(2), 1)]),
        );
        assert!(m.recompute_at.is_none(), "{:?}", m.poll_timeout());
        assert_eq!(m.lsdb.until(&1), Some(DtnTime::from_millis(62_000)));
        // 2 confirms its link to 1: that changes the graph.
        let from_two = LinkState {
            origin: id(2),
            sequence: 1,
            lifetime_ms: 60_000,
            links: vec![(id(1), 1)],
        };
        m.handle_link_state(DtnTime::from_millis(2_000), &id(1), from_two);
        assert_eq!(m.recompute_at, Some(DtnTime::from_millis(2_100)));
        m.handle_timeout(DtnTime::from_millis(2_100));
        assert_eq!(m.hops(&id(2)), Some(2));
        // 1 drops its link to 2: 2 goes, and the table says so.
        m.handle_link_state(
            DtnTime::from_millis(3_000),
            &id(1),
            lsa(3, vec![(id(0), 1)]),
        );
        m.handle_timeout(DtnTime::from_millis(3_100));
        assert_eq!(m.hops(&id(2)), None);
        assert_eq!(m.routes().len(), 1);
        let events: Vec<RouteEvent> = std::iter::from_fn(|| m.poll_event()).collect();
        assert_eq!(
            events,
            vec![
                RouteEvent::Reachable {
                    node: id(2),
                    hops: 2
                },
                RouteEvent::Unreachable { node: id(2) }
            ]
        );
    }

    /// Hop counts from every node to every other by breadth-first search over `adj`, checked
    /// against each mesh's table, its next hops included.
    fn assert_routes_match_breadth_first_search(net: &Net, adj: &[BTreeSet<usize>]) {
        let n = adj.len();
        let bfs = |from: usize| {
            let mut dist = vec![None; n];
            dist[from] = Some(0u32);
            let mut queue = VecDeque::from([from]);
            while let Some(u) = queue.pop_front() {
                for &v in &adj[u] {
                    if dist[v].is_none() {
                        dist[v] = Some(dist[u].unwrap_or(0) + 1);
                        queue.push_back(v);
                    }
                }
            }
            dist
        };
        for (src, (mesh, neighbours)) in net.nodes.iter().zip(adj).enumerate() {
            let dist = bfs(src);
            for dst in (0..n).filter(|d| *d != src) {
                assert_eq!(mesh.hops(&id(dst)), dist[dst], "{src} -> {dst}");
                if let Some(hop) = mesh.next_hop(&id(dst)) {
                    let h: usize = hop.to_string()[7..hop.to_string().len() - 1]
                        .parse()
                        .unwrap();
                    assert!(neighbours.contains(&h));
                    assert_eq!(dist[dst].map(|d| d - 1), bfs(h)[dst]);
                }
            }
            assert_eq!(
                mesh.routes().len(),
                dist.iter().filter(|d| d.is_some()).count() - 1
            );
        }
    }

    #[test]
    fn routes_match_breadth_first_search_on_random_graphs_as_links_come_and_go() {
        let mut seed = 0x1234_5678_u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..20 {
            let n = 3 + rand(12) as usize;
            let mut net = Net::new(n);
            let mut adj = vec![BTreeSet::new(); n];
            for _ in 0..n * 2 {
                let (a, b) = (rand(n as u64) as usize, rand(n as u64) as usize);
                if a != b && !adj[a].contains(&b) {
                    adj[a].insert(b);
                    adj[b].insert(a);
                    net.connect(a, b);
                }
            }
            net.advance(1_500);
            assert_routes_match_breadth_first_search(&net, &adj);
            // Links go and come back; refreshes pass in between.
            for _ in 0..n {
                let (a, b) = (rand(n as u64) as usize, rand(n as u64) as usize);
                if a == b {
                    continue;
                }
                if adj[a].remove(&b) {
                    adj[b].remove(&a);
                    net.cut(a, b);
                } else {
                    adj[a].insert(b);
                    adj[b].insert(a);
                    net.connect(a, b);
                }
            }
            net.advance(45_000);
            assert_routes_match_breadth_first_search(&net, &adj);
        }
    }
}
