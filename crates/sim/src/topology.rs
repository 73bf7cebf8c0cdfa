//! Topologies as schedules of link changes: the paper's Hub, Chained and Islands networks, and
//! contact plans read from a file (their format is `node::plan`'s, which nodes route by).

use std::fmt;

pub use node::plan::{ContactPlan, LinkEvent, PlanError};

use crate::rng::Rng;

/// A network shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// Every node one hop from every other (the paper's Hub: 28 nodes).
    Hub {
        /// Node count.
        nodes: usize,
    },
    /// Nodes in a line (the paper's Chained: 32 nodes).
    Chained {
        /// Node count.
        nodes: usize,
    },
    /// Islands of randomly meshed nodes; every `period_ms` one of: connect two islands,
    /// disconnect two connected islands, connect all, disconnect all (the paper's Islands: 64
    /// nodes in 4 islands, every 60 s).
    Islands {
        /// Node count.
        nodes: usize,
        /// Island count.
        islands: usize,
        /// Time between changes.
        period_ms: u64,
    },
    /// An explicit contact plan.
    Plan(ContactPlan),
}

impl Topology {
    /// The paper's Hub network.
    pub fn hub() -> Self {
        Topology::Hub { nodes: 28 }
    }

    /// The paper's Chained network.
    pub fn chained() -> Self {
        Topology::Chained { nodes: 32 }
    }

    /// The paper's Islands network.
    pub fn islands() -> Self {
        Topology::Islands {
            nodes: 64,
            islands: 4,
            period_ms: 60_000,
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        match self {
            Topology::Hub { nodes }
            | Topology::Chained { nodes }
            | Topology::Islands { nodes, .. } => *nodes,
            Topology::Plan(plan) => plan.nodes,
        }
    }

    /// Which island a node belongs to (0 for topologies without islands).
    pub fn island_of(&self, node: usize) -> usize {
        match self {
            Topology::Islands { nodes, islands, .. } => {
                let per = nodes.div_ceil((*islands).max(1)).max(1);
                node / per
            }
            _ => 0,
        }
    }

    /// The link changes of a run of `duration_ms`, sorted by time, drawn from `rng`.
    pub fn schedule(&self, duration_ms: u64, rng: &mut Rng) -> Vec<LinkEvent> {
        let up = |a, b| LinkEvent {
            at: 0,
            up: true,
            a,
            b,
        };
        let mut events = Vec::new();
        match self {
            Topology::Hub { nodes } => {
                for a in 0..*nodes {
                    for b in a + 1..*nodes {
                        events.push(up(a, b));
                    }
                }
            }
            Topology::Chained { nodes } => {
                for a in 1..*nodes {
                    events.push(up(a - 1, a));
                }
            }
            Topology::Islands {
                nodes,
                islands,
                period_ms,
            } => islands_schedule(
                *nodes,
                (*islands).max(1),
                (*period_ms).max(1),
                duration_ms,
                rng,
                &mut events,
            ),
            Topology::Plan(plan) => events.extend(plan.events.iter().copied()),
        }
        events.sort();
        events
    }
}

fn islands_schedule(
    nodes: usize,
    islands: usize,
    period_ms: u64,
    duration_ms: u64,
    rng: &mut Rng,
    events: &mut Vec<LinkEvent>,
) {
    let per = nodes.div_ceil(islands).max(1);
    let members: Vec<Vec<usize>> = (0..islands)
        .map(|i| (i * per..((i + 1) * per).min(nodes)).collect())
        .collect();
    // Each island: a random spanning tree (so it is connected) plus a few random extra links.
    for island in &members {
        for (k, &node) in island.iter().enumerate().skip(1) {
            let other = island[rng.below(k as u64) as usize];
            events.push(LinkEvent {
                at: 0,
                up: true,
                a: other.min(node),
                b: other.max(node),
            });
        }
        let extra = island.len() / 2;
        for _ in 0..extra {
            let a = island[rng.below(island.len() as u64) as usize];
            let b = island[rng.below(island.len() as u64) as usize];
            if a != b {
                let (a, b) = (a.min(b), a.max(b));
                if !events.iter().any(|e| e.a == a && e.b == b) {
                    events.push(LinkEvent {
                        at: 0,
                        up: true,
                        a,
                        b,
                    });
                }
            }
        }
    }
    if islands < 2 {
        return;
    }
    // Bridges between islands: the current one per connected pair of islands.
    let mut bridges: std::collections::BTreeMap<(usize, usize), (usize, usize)> =
        std::collections::BTreeMap::new();
    let pairs: Vec<(usize, usize)> = (0..islands)
        .flat_map(|i| (i + 1..islands).map(move |j| (i, j)))
        .collect();
    let mut at = period_ms;
    while at < duration_ms {
        let connected: Vec<(usize, usize)> = bridges.keys().copied().collect();
        let unconnected: Vec<(usize, usize)> = pairs
            .iter()
            .copied()
            .filter(|p| !bridges.contains_key(p))
            .collect();
        let mut connect = |pair: (usize, usize), rng: &mut Rng, events: &mut Vec<LinkEvent>| {
            let a = members[pair.0][rng.below(members[pair.0].len() as u64) as usize];
            let b = members[pair.1][rng.below(members[pair.1].len() as u64) as usize];
            events.push(LinkEvent { at, up: true, a, b });
            bridges.insert(pair, (a, b));
        };
        let disconnect =
            |pair: (usize, usize),
             bridges: &mut std::collections::BTreeMap<(usize, usize), (usize, usize)>,
             events: &mut Vec<LinkEvent>| {
                if let Some((a, b)) = bridges.remove(&pair) {
                    events.push(LinkEvent {
                        at,
                        up: false,
                        a,
                        b,
                    });
                }
            };
        match rng.below(4) {
            0 if !unconnected.is_empty() => {
                let pair = unconnected[rng.below(unconnected.len() as u64) as usize];
                connect(pair, rng, events);
            }
            1 if !connected.is_empty() => {
                let pair = connected[rng.below(connected.len() as u64) as usize];
                disconnect(pair, &mut bridges, events);
            }
            2 => {
                for pair in unconnected {
                    connect(pair, rng, events);
                }
            }
            3 => {
                for pair in connected {
                    disconnect(pair, &mut bridges, events);
                }
            }
            // The drawn action was impossible (nothing to connect or disconnect): no change.
            _ => {}
        }
        at += period_ms;
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Topology::Hub { nodes } => write!(f, "hub-{nodes}"),
            Topology::Chained { nodes } => write!(f, "chained-{nodes}"),
            Topology::Islands { nodes, islands, .. } => write!(f, "islands-{nodes}/{islands}"),
            Topology::Plan(plan) => write!(f, "plan-{}", plan.nodes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_topologies_have_the_paper_shapes() {
        let mut rng = Rng::new(1);
        assert_eq!(Topology::hub().schedule(0, &mut rng).len(), 28 * 27 / 2);
        assert_eq!(Topology::chained().schedule(0, &mut rng).len(), 31);
        let events = Topology::islands().schedule(3_600_000, &mut rng);
        let t = Topology::islands();
        // At time 0 only links inside islands; later only bridges between islands.
        for e in &events {
            let same = t.island_of(e.a) == t.island_of(e.b);
            assert_eq!(e.at == 0, same, "{e:?}");
            assert_eq!(e.at % 60_000, 0);
        }
        assert!(events.iter().any(|e| e.at > 0 && e.up));
        assert!(events.iter().any(|e| e.at > 0 && !e.up));
    }

    #[test]
    fn islands_are_connected_inside() {
        let mut rng = Rng::new(7);
        let t = Topology::islands();
        let events = t.schedule(0, &mut rng);
        // Union-find over the initial links: 4 components of 16.
        let mut parent: Vec<usize> = (0..64).collect();
        fn find(p: &mut Vec<usize>, x: usize) -> usize {
            if p[x] != x {
                let r = find(p, p[x]);
                p[x] = r;
            }
            p[x]
        }
        for e in &events {
            let (ra, rb) = (find(&mut parent, e.a), find(&mut parent, e.b));
            parent[ra] = rb;
        }
        let roots: std::collections::BTreeSet<usize> =
            (0..64).map(|x| find(&mut parent, x)).collect();
        assert_eq!(roots.len(), 4);
    }
}
