//! The node driven by hand, with explicit time: each test reads like a trace of what nodes say to
//! each other and what they decide.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;
use wire::DtnTime;

use bytes::Bytes;
use node::{
    Class, DropReason, Event, Frame, LinkChange, LinkId, Node, NodeConfig, Outgoing, StrategyKind,
    TransferResult,
};
use store::{MemoryStore, RpcTable};
use wire::{Bundle, BundleFlags, BundleId, Eid, StatusReason};

const T0: u64 = 800_000_000_000;

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn node_id(i: usize) -> Eid {
    eid(&format!("dtn://n{i}/"))
}

fn app(i: usize) -> Eid {
    eid(&format!("dtn://n{i}/app"))
}

/// Nodes joined by instantaneous links; link `LinkId(j)` at node `i` leads to node `j`.
struct Net {
    nodes: Vec<Node>,
    up: BTreeSet<(usize, usize)>,
    events: Vec<Vec<Event>>,
    /// Drop beacons (to let neighbours expire).
    mute_beacons: bool,
    /// When set, bundle transfers from this node are cut after so many payload bytes.
    cut_after: Option<(usize, u64)>,
    /// When set, store-carry-forward transfers wait in `pending`, as in a shell's queue, until the
    /// test completes them (`complete_next`); real-time frames still cross at once.
    hold_transfers: bool,
    /// Held transfers in the order the nodes handed them over: (from, to, bundle).
    pending: VecDeque<(usize, usize, Bundle)>,
    /// Every bundle transmit as (urgent, report), in order. Like the daemon, the harness reports
    /// a transfer's end only when the node asked for it.
    transmitted: Vec<(bool, bool)>,
    now: u64,
}

impl Net {
    fn new(n: usize, configure: impl Fn(&mut NodeConfig)) -> Self {
        Self::with_quota(n, 1 << 30, configure)
    }

    fn with_quota(n: usize, quota: u64, configure: impl Fn(&mut NodeConfig)) -> Self {
        let nodes = (0..n)
            .map(|i| {
                let mut config = NodeConfig::new(node_id(i));
                config.seed = i as u64 + 1;
                configure(&mut config);
                Node::new(
                    config,
                    Box::new(MemoryStore::new(quota)),
                    DtnTime::from_millis(T0),
                )
            })
            .collect();
        Self {
            nodes,
            up: BTreeSet::new(),
            events: vec![Vec::new(); n],
            mute_beacons: false,
            cut_after: None,
            hold_transfers: false,
            pending: VecDeque::new(),
            transmitted: Vec::new(),
            now: T0,
        }
    }

    fn link(&mut self, a: usize, b: usize, mtu: Option<u64>) {
        self.up.insert((a, b));
        self.up.insert((b, a));
        for (x, y) in [(a, b), (b, a)] {
            self.nodes[x].handle_link(
                DtnTime::from_millis(self.now),
                LinkChange::Up {
                    link: LinkId(y as u64),
                    peer: None,
                    mtu,
                    bandwidth_bps: 0,
                    contact: None,
                },
            );
        }
        self.settle();
    }

    fn unlink(&mut self, a: usize, b: usize) {
        self.up.remove(&(a, b));
        self.up.remove(&(b, a));
        for (x, y) in [(a, b), (b, a)] {
            self.nodes[x].handle_link(
                DtnTime::from_millis(self.now),
                LinkChange::Down {
                    link: LinkId(y as u64),
                },
            );
        }
        // Transfers queued on the link die with it; the shell's late reports change nothing.
        let (lost, kept) = self
            .pending
            .drain(..)
            .partition(|&(i, j, _)| (i, j) == (a, b) || (i, j) == (b, a));
        self.pending = kept;
        for (i, j, bundle) in lost {
            self.nodes[i].handle_transfer(
                DtnTime::from_millis(self.now),
                LinkId(j as u64),
                &bundle.id(),
                TransferResult::Failed,
            );
        }
        self.settle();
    }

    /// Completes the oldest held transfer: the bundle arrives and its sender hears so.
    fn complete_next(&mut self) -> BundleId {
        self.complete_at(0)
    }

    /// Completes the held transfer at `index` of `pending`.
    fn complete_at(&mut self, index: usize) -> BundleId {
        let (i, j, bundle) = self.pending.remove(index).expect("a transfer in flight");
        let id = bundle.id();
        self.nodes[j].handle_bundle(DtnTime::from_millis(self.now), LinkId(i as u64), bundle);
        self.nodes[i].handle_transfer(
            DtnTime::from_millis(self.now),
            LinkId(j as u64),
            &id,
            TransferResult::Complete,
        );
        self.settle();
        id
    }

    /// Delivers every transmit at once until the network is quiet.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                while let Some(t) = self.nodes[i].poll_transmit() {
                    moved = true;
                    let j = t.link.0 as usize;
                    if !self.up.contains(&(i, j)) {
                        continue;
                    }
                    match t.frame {
                        Frame::Beacon(b) => {
                            if !self.mute_beacons {
                                self.nodes[j].handle_beacon(
                                    DtnTime::from_millis(self.now),
                                    LinkId(i as u64),
                                    b,
                                );
                            }
                        }
                        Frame::Bundle(b) if self.hold_transfers && !t.urgent => {
                            self.transmitted.push((t.urgent, t.report));
                            self.pending.push_back((i, j, b));
                        }
                        Frame::Bundle(b) => {
                            self.transmitted.push((t.urgent, t.report));
                            let id = b.id();
                            let len = b.payload.data.len() as u64;
                            let result = match self.cut_after {
                                Some((from, n)) if from == i && !t.urgent && n < len => {
                                    // The link dies mid-transfer: the receiver keeps the prefix,
                                    // nothing more crosses until the test brings it back.
                                    self.cut_after = None;
                                    self.up.remove(&(i, j));
                                    self.up.remove(&(j, i));
                                    let (prefix, _) = b.split_at(n as usize).unwrap();
                                    self.nodes[j].handle_bundle(
                                        DtnTime::from_millis(self.now),
                                        LinkId(i as u64),
                                        prefix,
                                    );
                                    TransferResult::Cut { payload_bytes: n }
                                }
                                _ => {
                                    self.nodes[j].handle_bundle(
                                        DtnTime::from_millis(self.now),
                                        LinkId(i as u64),
                                        b,
                                    );
                                    TransferResult::Complete
                                }
                            };
                            if t.report {
                                self.nodes[i].handle_transfer(
                                    DtnTime::from_millis(self.now),
                                    LinkId(j as u64),
                                    &id,
                                    result,
                                );
                            }
                        }
                    }
                }
                while let Some(e) = self.nodes[i].poll_event() {
                    moved = true;
                    self.events[i].push(e);
                }
            }
            if !moved {
                return;
            }
        }
        panic!("network did not settle");
    }

    /// Advances time to `t`, firing every timer on the way.
    fn advance_to(&mut self, t: u64) {
        loop {
            let next = self
                .nodes
                .iter()
                .filter_map(|n| n.poll_timeout())
                .min()
                .filter(|&d| d <= DtnTime::from_millis(t));
            let Some(at) = next else { break };
            self.now = self.now.max(at.as_millis());
            for i in 0..self.nodes.len() {
                if self.nodes[i]
                    .poll_timeout()
                    .is_some_and(|d| d <= DtnTime::from_millis(self.now))
                {
                    self.nodes[i].handle_timeout(DtnTime::from_millis(self.now));
                }
            }
            self.settle();
        }
        self.now = t;
    }

    /// Restarts node `i` as a shell does: its links go down, and a new node is made from its
    /// configuration and its store (as the daemon at start and the simulator's restarts do).
    fn restart(&mut self, i: usize) {
        let peers: Vec<usize> = self
            .up
            .iter()
            .filter(|&&(a, _)| a == i)
            .map(|&(_, b)| b)
            .collect();
        for &j in &peers {
            self.unlink(i, j);
        }
        let config = self.nodes[i].config().clone();
        let placeholder = Node::new(
            config.clone(),
            Box::new(MemoryStore::new(0)),
            DtnTime::from_millis(self.now),
        );
        let old = std::mem::replace(&mut self.nodes[i], placeholder);
        self.nodes[i] = Node::new(config, old.into_store(), DtnTime::from_millis(self.now));
    }

    fn send(&mut self, from: usize, out: Outgoing) -> wire::BundleId {
        let id = self.nodes[from]
            .send(DtnTime::from_millis(self.now), out)
            .expect("send");
        self.settle();
        id
    }

    fn deliveries(&self, i: usize) -> Vec<&node::Delivery> {
        self.events[i]
            .iter()
            .filter_map(|e| match e {
                Event::Delivered(d) => Some(d),
                _ => None,
            })
            .collect()
    }
}

fn payload(n: usize) -> Bytes {
    Bytes::from((0..n).map(|i| (i * 7) as u8).collect::<Vec<u8>>())
}

#[test]
fn beacons_make_neighbours_and_silence_expires_them() {
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    assert!(net.events[1].contains(&Event::NeighbourUp {
        node: node_id(0),
        link: LinkId(0)
    }));
    assert_eq!(net.nodes[0].reachable(&node_id(1)), Some(1));
    net.mute_beacons = true;
    net.advance_to(T0 + 2_000);
    assert!(!net.events[0].contains(&Event::NeighbourDown { node: node_id(1) }));
    net.advance_to(T0 + 5_000);
    assert!(net.events[0].contains(&Event::NeighbourDown { node: node_id(1) }));
    assert_eq!(net.nodes[0].reachable(&node_id(1)), None);
}

#[test]
fn a_bundle_to_a_neighbour_is_delivered_once_with_its_hop_and_reports() {
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    let mut out = Outgoing::new(app(0), app(1), payload(3_000));
    out.flags = BundleFlags(
        BundleFlags::REPORT_DELIVERY
            | BundleFlags::REPORT_FORWARDING
            | BundleFlags::STATUS_TIME_REQUESTED,
    );
    let id = net.send(0, out);
    let got = net.deliveries(1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, id);
    assert_eq!(got[0].payload, payload(3_000));
    // The source learns both facts from status reports.
    let reports: Vec<_> = net.events[0]
        .iter()
        .filter_map(|e| match e {
            Event::StatusReport { from, report } => Some((from.clone(), report.clone())),
            _ => None,
        })
        .collect();
    assert!(
        reports
            .iter()
            .any(|(from, r)| *from == node_id(1) && r.delivered.is_some_and(|a| a.time.is_some())),
        "{reports:?}"
    );
    assert!(
        reports
            .iter()
            .any(|(from, r)| *from == node_id(0) && r.forwarded.is_some())
    );
    // The destination node holds nothing afterwards, and neither does the source.
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
}

#[test]
fn bundles_wait_for_a_contact_and_expire_with_a_deletion_report() {
    let mut net = Net::new(2, |_| {});
    let mut out = Outgoing::new(app(0), app(1), payload(100));
    out.lifetime_ms = 10_000;
    out.flags = BundleFlags(BundleFlags::REPORT_DELETION);
    let id = net.send(0, out);
    assert_eq!(net.nodes[0].held_bundles().count(), 1);
    net.advance_to(T0 + 9_999);
    assert_eq!(net.nodes[0].held_bundles().count(), 1);
    net.advance_to(T0 + 10_000);
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
    assert!(net.events[0].contains(&Event::Dropped {
        id: id.clone(),
        reason: DropReason::Expired
    }));
    // The deletion report goes to the source itself.
    assert!(net.events[0].iter().any(|e| matches!(e,
        Event::StatusReport { report, .. }
            if report.deleted.is_some() && report.reason == StatusReason::LifetimeExpired)));
    // A contact after expiry carries nothing.
    net.link(0, 1, None);
    assert!(net.deliveries(1).is_empty());
}

#[test]
fn store_carry_forward_across_a_relay_and_the_purge_set_cleans_up() {
    let mut net = Net::new(3, |_| {});
    let id = net.send(0, Outgoing::new(app(0), app(2), payload(500)));
    net.link(0, 1, None);
    assert_eq!(net.nodes[1].held_bundles().count(), 1, "relay carries it");
    net.unlink(0, 1);
    net.link(1, 2, None);
    assert_eq!(net.deliveries(2).len(), 1);
    assert_eq!(net.deliveries(2)[0].id, id);
    // The relay handed it to its destination and dropped its copy; the source still holds one
    // until it hears of the delivery.
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
    assert_eq!(net.nodes[0].held_bundles().count(), 1);
    net.unlink(1, 2);
    net.link(0, 1, None);
    // The relay's summary vector carries the purge set: the source deletes its copy.
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
    assert!(net.events[0].contains(&Event::Dropped {
        id,
        reason: DropReason::Purged
    }));
    // And nothing is delivered twice when everyone meets again.
    net.link(1, 2, None);
    net.link(0, 2, None);
    assert_eq!(net.deliveries(2).len(), 1);
}

#[test]
fn a_bundle_delivered_before_a_restart_is_refused_as_a_duplicate_after_it() {
    let mut net = Net::new(2, |c| c.purge_retention = Duration::from_millis(60_000));
    net.hold_transfers = true;
    net.link(0, 1, None);
    let mut out = Outgoing::new(app(0), app(1), payload(800));
    out.lifetime_ms = 30_000;
    let id = net.send(0, out);
    // Node 1 receives and delivers the bundle (its shell made both durable), but dies before
    // its acknowledgement reaches node 0, which keeps its copy.
    let (from, to, bundle) = net.pending.pop_front().expect("the transfer");
    assert_eq!((from, to), (0, 1));
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle.clone());
    net.settle();
    assert_eq!(net.deliveries(1).len(), 1);
    net.restart(1);
    assert_eq!(
        net.nodes[0].held_bundles().count(),
        1,
        "the sender kept its copy"
    );

    // The restarted node still knows the bundle was delivered: a copy offered again is a
    // duplicate, not a second delivery.
    assert!(!net.nodes[1].wants(&id));
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle);
    net.settle();
    assert_eq!(
        net.deliveries(1).len(),
        1,
        "delivered again after a restart"
    );
    assert_eq!(net.nodes[1].stats().duplicates, 1);
    // Met again, it tells the sender so (the purge set in its summary vector), and the sender
    // drops its copy instead of sending it once more.
    net.hold_transfers = false;
    net.link(0, 1, None);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
    assert!(net.events[0].contains(&Event::Dropped {
        id,
        reason: DropReason::Purged
    }));

    // The entry leaves the store when it expires (at the end of the retention here, which
    // outlasts the bundle's lifetime), and a restart after that brings nothing back. Alone:
    // node 0 learnt the entry from node 1's summary, and its own summaries would teach it back.
    net.unlink(0, 1);
    let purged = |net: &Net| {
        net.nodes[1]
            .store()
            .rpc_scan(RpcTable::Purged)
            .unwrap()
            .len()
    };
    assert_eq!(purged(&net), 1);
    net.advance_to(T0 + 59_999);
    assert_eq!(purged(&net), 1, "forgotten before the retention ended");
    net.advance_to(T0 + 60_000);
    assert_eq!(purged(&net), 0);
    net.restart(1);
    assert_eq!(purged(&net), 0);
}

#[test]
fn spray_and_wait_hands_over_half_its_copies_then_waits() {
    let mut net = Net::new(4, |c| c.strategy = StrategyKind::SprayAndWait { copies: 4 });
    net.send(0, Outgoing::new(app(0), app(3), payload(100)));
    net.link(0, 1, None); // gets 2 copies, source keeps 2
    net.unlink(0, 1);
    net.link(1, 2, None); // relay 1 hands 1 of its 2
    net.unlink(1, 2);
    assert_eq!(net.nodes[2].held_bundles().count(), 1);
    // Node 2 holds a single copy: it waits for the destination instead of spreading further.
    net.link(2, 0, None);
    net.unlink(2, 0);
    net.link(2, 1, None);
    net.unlink(2, 1);
    let sent_before = net.nodes[2].stats().bundles_sent;
    net.link(2, 1, None);
    net.unlink(2, 1);
    net.link(2, 3, None);
    assert_eq!(net.deliveries(3).len(), 1);
    assert!(net.nodes[2].stats().bundles_sent > sent_before);
}

#[test]
fn direct_delivery_only_hands_bundles_to_their_destination() {
    let mut net = Net::new(3, |c| c.strategy = StrategyKind::Direct);
    net.send(0, Outgoing::new(app(0), app(2), payload(100)));
    net.link(0, 1, None);
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
    net.unlink(0, 1);
    net.link(0, 2, None);
    assert_eq!(net.deliveries(2).len(), 1);
}

#[test]
fn a_small_mtu_splits_bundles_and_the_destination_reassembles() {
    // Pieces of ~1.4 kB, below the default smallest piece, to see many of them.
    let mut net = Net::new(2, |c| c.min_piece = 512);
    let data = payload(10_000);
    net.send(0, Outgoing::new(app(0), app(1), data.clone()));
    net.link(0, 1, Some(1_500));
    let got = net.deliveries(1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, data);
    assert!(net.nodes[0].stats().fragments_sent >= 7);
    // The pieces waiting for reassembly are gone once the bundle is whole.
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
}

#[test]
fn pieces_by_policy_cross_hops_at_once_and_the_destination_rebuilds_the_bundle() {
    let mut net = Net::new(3, |c| c.max_bundle_piece = Some(2_000));
    net.hold_transfers = true;
    net.link(0, 1, None);
    net.link(1, 2, None);
    let data = payload(10_000);
    net.send(0, Outgoing::new(app(0), app(2), data.clone()));
    // Five pieces of 2,000 bytes go to the shell at once.
    let first: Vec<(usize, usize, u64)> = net
        .pending
        .iter()
        .map(|(i, j, b)| (*i, *j, b.payload.data.len() as u64))
        .collect();
    assert_eq!(first, vec![(0, 1, 2_000); 5]);
    // The first piece to reach the middle node goes on while the others are still on their way
    // there: the bundle crosses both hops in about the time of one.
    net.complete_next();
    assert!(
        net.pending.iter().any(|(i, j, _)| (*i, *j) == (1, 2)),
        "the middle node forwards the first piece at once"
    );
    while !net.pending.is_empty() {
        net.complete_next();
    }
    let got = net.deliveries(2);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, data);
    assert_eq!(net.nodes[0].stats().fragments_sent, 5);
    // The middle node carried the pieces as they came, and the destination kept none of them.
    assert_eq!(net.nodes[1].stats().fragments_sent, 0);
    assert_eq!(net.nodes[2].held_bundles().count(), 0);
}

/// The payload offsets of the held transfers from `from` to `to`, in the order they were handed
/// to the shell.
fn pending_offsets(net: &Net, from: usize, to: usize) -> Vec<u64> {
    net.pending
        .iter()
        .filter(|(i, j, _)| (*i, *j) == (from, to))
        .map(|(_, _, b)| b.primary.fragment.map_or(0, |f| f.offset))
        .collect()
}

#[test]
fn a_bundle_in_pieces_to_two_neighbours_at_once_starts_each_at_another_piece() {
    let mut net = Net::new(3, |c| c.max_bundle_piece = Some(2_000));
    net.hold_transfers = true;
    let data = payload(10_000);
    // For a node that is neither neighbour: both carry it.
    net.send(0, Outgoing::new(app(0), app(9), data));
    net.link(0, 1, None);
    // Every piece once, in order from where this node starts this bundle.
    let first = pending_offsets(&net, 0, 1);
    let start = |offsets: &[u64]| offsets[0] / 2_000;
    let in_order = |offsets: &[u64]| {
        (0..5)
            .map(|k| (start(offsets) + k) % 5 * 2_000)
            .collect::<Vec<u64>>()
            == offsets
    };
    assert!(in_order(&first), "{first:?}");
    // The second link starts about halfway on, while the first still carries the bundle, so
    // each neighbour holds other pieces first and can pass them to the other.
    net.link(0, 2, None);
    let second = pending_offsets(&net, 0, 2);
    assert!(in_order(&second), "{second:?}");
    let apart = (start(&second) + 5 - start(&first)) % 5;
    assert!(apart == 2 || apart == 3, "{first:?} and {second:?}");
    while !net.pending.is_empty() {
        net.complete_next();
    }
    assert_eq!(net.nodes[1].held_bundles().count(), 5);
    assert_eq!(net.nodes[2].held_bundles().count(), 5);
}

#[test]
fn a_node_holding_pieces_starts_two_new_contacts_at_different_pieces() {
    let mut net = Net::new(4, |c| c.max_bundle_piece = Some(2_000));
    net.hold_transfers = true;
    net.send(0, Outgoing::new(app(0), app(9), payload(10_000)));
    net.link(0, 1, None);
    while !net.pending.is_empty() {
        net.complete_next();
    }
    net.unlink(0, 1);
    assert_eq!(net.nodes[1].held_bundles().count(), 5);
    // Node 1 holds the five pieces, and meets node 2, then node 3 while node 2 still gets them.
    net.link(1, 2, None);
    net.link(1, 3, None);
    let (to_2, to_3) = (pending_offsets(&net, 1, 2), pending_offsets(&net, 1, 3));
    let mut sorted = to_3.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 2_000, 4_000, 6_000, 8_000]);
    let apart = (to_3[0] / 2_000 + 5 - to_2[0] / 2_000) % 5;
    assert!(apart == 2 || apart == 3, "{to_2:?} and {to_3:?}");
}

#[test]
fn pieces_acknowledged_out_of_order_are_kept_and_only_the_gaps_are_sent_again() {
    let mut net = Net::new(2, |c| c.max_bundle_piece = Some(2_000));
    net.hold_transfers = true;
    let data = payload(10_000);
    net.send(0, Outgoing::new(app(0), app(9), data.clone()));
    net.link(0, 1, None);
    assert_eq!(pending_offsets(&net, 0, 1).len(), 5);
    // The pieces at 6,000 and then 2,000 arrive; the link goes down with the other three.
    for offset in [6_000, 2_000] {
        let at = pending_offsets(&net, 0, 1)
            .iter()
            .position(|&o| o == offset)
            .unwrap();
        net.complete_at(at);
    }
    let bytes_first = net.nodes[0].stats().bytes_sent;
    net.unlink(0, 1);
    net.link(0, 1, None);
    let mut again = pending_offsets(&net, 0, 1);
    again.sort();
    assert_eq!(again, vec![0, 4_000, 8_000]);
    while !net.pending.is_empty() {
        net.complete_next();
    }
    assert_eq!(net.nodes[1].held_bundles().count(), 5);
    // Nothing went twice: the second contact carried the three missing pieces only.
    let second = net.nodes[0].stats().bytes_sent - bytes_first;
    assert!(
        (6_000..7_000).contains(&second),
        "second contact sent {second} bytes"
    );
    assert!(net.pending.is_empty());
}

#[test]
fn pieces_by_policy_leave_broadcast_bundles_whole() {
    let mut net = Net::new(3, |c| c.max_bundle_piece = Some(2_000));
    net.link(0, 1, None);
    net.link(1, 2, None);
    let data = payload(10_000);
    net.send(
        0,
        Outgoing::new(app(0), eid("dtn://~all/~news"), data.clone()),
    );
    for i in 1..3 {
        let got = net.deliveries(i);
        assert_eq!(got.len(), 1, "node {i}");
        assert_eq!(got[0].payload, data);
    }
    assert_eq!(net.nodes[0].stats().fragments_sent, 0);
}

#[test]
fn a_cut_transfer_resumes_where_it_stopped() {
    let mut net = Net::new(2, |_| {});
    let data = payload(100_000);
    net.send(0, Outgoing::new(app(0), app(1), data.clone()));
    net.cut_after = Some((0, 40_000));
    net.link(0, 1, None);
    net.unlink(0, 1);
    assert!(net.deliveries(1).is_empty());
    assert_eq!(
        net.nodes[1].held_bundles().count(),
        1,
        "the prefix waits as a fragment"
    );
    // And shows as arriving: what of it is here, of how much.
    let arriving: Vec<_> = net.nodes[1].arriving().collect();
    assert_eq!(arriving.len(), 1);
    let a = arriving[0];
    assert_eq!(
        (a.source, a.destination, a.total),
        (&app(0), &app(1), 100_000)
    );
    assert!(
        (30_000..=40_000).contains(&a.received),
        "{} bytes here",
        a.received
    );
    let bytes_first = net.nodes[0].stats().bytes_sent;
    net.cut_after = None;
    net.link(0, 1, None);
    let got = net.deliveries(1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, data);
    assert_eq!(
        net.nodes[1].arriving().count(),
        0,
        "whole: no longer arriving"
    );
    // The second contact carried the remaining 60 kB, not the whole bundle again.
    let second = net.nodes[0].stats().bytes_sent - bytes_first;
    assert!(second < 70_000, "second contact sent {second} bytes");
}

#[test]
fn datagrams_need_a_route_and_are_never_stored() {
    let mut net = Net::new(2, |_| {});
    let mut out = Outgoing::new(app(0), app(1), payload(100));
    out.class = Class::Datagram;
    assert!(matches!(
        net.nodes[0].send(DtnTime::from_millis(net.now), out.clone()),
        Err(node::SendError::NoRoute(_))
    ));
    net.link(0, 1, None);
    net.send(0, out);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(net.deliveries(1)[0].class, Class::Datagram);
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
}

#[test]
fn a_flood_skips_the_neighbours_its_sender_reaches_itself() {
    // A full mesh of four, each node's advertisement known to all.
    let mut net = Net::new(4, |_| {});
    for (a, b) in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)] {
        net.link(a, b, None);
    }
    net.advance_to(T0 + 5_000);
    net.hold_transfers = true;
    let id = net.send(0, Outgoing::new(app(0), app(3), payload(500)));
    let offers_from = |net: &Net, i: usize| {
        net.pending
            .iter()
            .filter(|(from, _, b)| *from == i && b.id() == id)
            .map(|&(_, to, _)| to)
            .collect::<Vec<_>>()
    };
    assert_eq!(offers_from(&net, 0), vec![1, 2, 3]);
    // Nodes 1 and 2 get it from node 0, which sends it to every node itself: neither offers it
    // on (each would be refused, the others holding it or receiving it already).
    assert_eq!(net.complete_next(), id);
    assert_eq!(net.complete_next(), id);
    assert!(offers_from(&net, 1).is_empty() && offers_from(&net, 2).is_empty());
    // Node 0's transfer to node 3 fails with the link: node 3's next summary vector shows it
    // lacks the bundle, and it gets it from node 1 or 2, once.
    net.unlink(0, 3);
    net.hold_transfers = false;
    assert!(net.deliveries(3).is_empty());
    net.advance_to(net.now + 11_000);
    assert_eq!(net.deliveries(3).len(), 1);
    assert_eq!(net.deliveries(3)[0].id, id);
}

#[test]
fn broadcast_datagrams_flood_once_per_node() {
    let mut net = Net::new(4, |_| {});
    // A ring: every node hears the flood twice, delivers it once.
    net.link(0, 1, None);
    net.link(1, 2, None);
    net.link(2, 3, None);
    net.link(3, 0, None);
    let mut out = Outgoing::new(app(0), eid("dtn://~all/~app"), payload(10));
    out.class = Class::Datagram;
    net.send(0, out);
    for i in 1..4 {
        assert_eq!(net.deliveries(i).len(), 1, "node {i}");
    }
}

#[test]
fn a_full_store_refuses_with_a_clear_error_and_keeps_what_it_has() {
    let mut net = Net::with_quota(1, 5_000, |_| {});
    net.send(0, Outgoing::new(app(0), app(1), payload(3_000)));
    let err = net.nodes[0]
        .send(
            DtnTime::from_millis(net.now),
            Outgoing::new(app(0), app(1), payload(3_000)),
        )
        .unwrap_err();
    assert!(err.to_string().contains("store full"), "{err}");
    assert_eq!(net.nodes[0].held_bundles().count(), 1);
}

#[test]
fn malformed_bytes_are_dropped_not_fatal() {
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    net.nodes[1].handle_bundle_bytes(
        DtnTime::from_millis(net.now),
        LinkId(0),
        Bytes::from_static(b"\x9f\x00garbage"),
    );
    net.settle();
    assert!(net.events[1].iter().any(|e| matches!(
        e,
        Event::Dropped {
            reason: DropReason::Malformed,
            ..
        }
    )));
    // The node keeps working.
    net.send(0, Outgoing::new(app(0), app(1), payload(10)));
    assert_eq!(net.deliveries(1).len(), 1);
}

#[test]
fn sending_from_another_node_or_without_lifetime_is_refused() {
    let mut net = Net::new(1, |_| {});
    let foreign = Outgoing::new(app(5), app(1), payload(1));
    assert!(matches!(
        net.nodes[0].send(DtnTime::from_millis(net.now), foreign),
        Err(node::SendError::ForeignSource(_))
    ));
    let mut zero = Outgoing::new(app(0), app(1), payload(1));
    zero.lifetime_ms = 0;
    assert!(
        net.nodes[0]
            .send(DtnTime::from_millis(net.now), zero)
            .is_err()
    );
}

#[test]
fn the_same_inputs_give_the_same_outputs() {
    let run = || {
        let mut net = Net::new(3, |_| {});
        net.link(0, 1, None);
        net.link(1, 2, None);
        net.send(0, Outgoing::new(app(0), app(2), payload(5_000)));
        net.advance_to(T0 + 30_000);
        format!("{:?}", net.events)
    };
    assert_eq!(run(), run());
}

#[test]
fn a_stream_crosses_the_mesh_and_reports_the_lost_path() {
    let mut net = Net::new(3, |_| {});
    net.link(0, 1, None);
    net.link(1, 2, None);
    net.advance_to(T0 + 3_000); // advertisements spread, node 2 becomes reachable from node 0
    assert_eq!(net.nodes[0].reachable(&node_id(2)), Some(2));
    let id = net.nodes[0]
        .stream_open(DtnTime::from_millis(net.now), app(0), app(2))
        .expect("open");
    let data = payload(20_000);
    net.nodes[0]
        .stream_send(DtnTime::from_millis(net.now), id, data.clone())
        .unwrap();
    net.settle();
    net.advance_to(T0 + 4_000);
    let received: Vec<u8> = net.events[2]
        .iter()
        .filter_map(|e| match e {
            Event::Stream(node::stream::StreamEvent::Data { data, .. }) => Some(data.to_vec()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(received, data.to_vec());
    // The middle link goes: node 2 becomes unreachable and the stream says so at once.
    net.nodes[0]
        .stream_send(DtnTime::from_millis(net.now), id, payload(100))
        .unwrap();
    net.unlink(1, 2);
    net.advance_to(T0 + 6_000);
    assert!(
        net.events[0].iter().any(|e| matches!(e,
            Event::Stream(node::stream::StreamEvent::PathLost { id: lost, .. }) if *lost == id)),
        "{:?}",
        net.events[0]
    );
    // Stream segments are never stored on the way.
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
}

/// The streams node `i` saw opened, in order.
fn opened_streams(net: &Net, i: usize) -> Vec<node::stream::StreamId> {
    use node::stream::StreamEvent;
    net.events[i]
        .iter()
        .filter_map(|e| match e {
            Event::Stream(StreamEvent::Opened { id, .. }) => Some(*id),
            _ => None,
        })
        .collect()
}

/// Node 0 makes a request from each endpoint of `clients` to node 1's `app`: a stream opened,
/// sent and closed at once. Node 1 answers all of them before node 0 hears back (as RPC replies
/// arriving together). Checks that every reply arrived and every stream on both sides ended
/// cleanly (the server heard every last acknowledgement), and returns how many bundles node 0
/// sent for those acknowledgements.
fn requests_answered_at_once(net: &mut Net, clients: &[Eid]) -> u64 {
    use node::stream::StreamEvent;
    let n = clients.len();
    for (k, from) in clients.iter().enumerate() {
        net.nodes[0]
            .stream_open_with(
                DtnTime::from_millis(net.now),
                from.clone(),
                app(1),
                Bytes::from((k as u32).to_be_bytes().to_vec()),
                true,
            )
            .expect("open");
    }
    net.settle();
    let opened = opened_streams(net, 1);
    assert_eq!(opened.len(), n);
    let sent_before = net.nodes[0].stats().bundles_sent;
    for id in &opened {
        net.nodes[1]
            .stream_send_last(
                DtnTime::from_millis(net.now),
                *id,
                Bytes::from_static(b"reply"),
            )
            .unwrap();
    }
    net.settle();
    let replies = net.events[0]
        .iter()
        .filter(|e| matches!(e, Event::Stream(StreamEvent::Data { data, .. }) if data.as_ref() == b"reply"))
        .count();
    assert_eq!(replies, n);
    let closed = |net: &Net, i: usize| {
        net.events[i]
            .iter()
            .filter(|e| matches!(e, Event::Stream(StreamEvent::Closed { .. })))
            .count()
    };
    assert_eq!(closed(net, 0), n);
    assert_eq!(closed(net, 1), n, "the server heard every acknowledgement");
    net.nodes[0].stats().bundles_sent - sent_before
}

#[test]
fn the_last_acknowledgements_of_many_streams_share_one_bundle() {
    // Ten requests answered together: the client owes each stream a last acknowledgement of the
    // reply's CLOSE, and one bundle carries them all.
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    net.advance_to(T0 + 3_000);
    let sent = requests_answered_at_once(&mut net, &vec![app(0); 10]);
    assert_eq!(sent, 1, "ten last acknowledgements, one bundle");
    // Nothing was left unacknowledged: time passing loses no stream.
    net.advance_to(T0 + 60_000);
    for i in 0..2 {
        assert!(
            !net.events[i]
                .iter()
                .any(|e| matches!(e, Event::Stream(node::stream::StreamEvent::PathLost { .. }))),
            "{:?}",
            net.events[i]
        );
    }
}

#[test]
fn last_acknowledgements_share_bundles_per_pair_of_endpoints_and_at_most_256_each() {
    // 258 requests from one client endpoint and 3 from another: the last acknowledgements go
    // as one bundle of 256 and one of 2 for the first pair, and one of 3 for the second.
    let mut net = Net::new(2, |c| c.stream.max_streams = 4_096);
    net.link(0, 1, None);
    net.advance_to(T0 + 3_000);
    let mut clients = vec![app(0); 258];
    clients.extend(vec![eid("dtn://n0/other"); 3]);
    let sent = requests_answered_at_once(&mut net, &clients);
    assert_eq!(
        sent, 3,
        "256 + 2 acknowledgements for one pair, 3 for the other"
    );
}

/// Opens a stream from `app(0)` to `app(1)` per request, all in one round, and counts the
/// bundles the client sends until the network is quiet; then the server replies to all in one
/// round: returns (bundles of the requests, bundles of the replies).
fn bundles_of_one_round(net: &mut Net, requests: usize, size: usize) -> (u64, u64) {
    use node::stream::StreamEvent;
    let (client_before, server_before) = (
        net.nodes[0].stats().bundles_sent,
        net.nodes[1].stats().bundles_sent,
    );
    for _ in 0..requests {
        net.nodes[0]
            .stream_open_with(
                DtnTime::from_millis(net.now),
                app(0),
                app(1),
                Bytes::from(vec![7; size]),
                true,
            )
            .expect("open");
    }
    net.settle();
    let opened = opened_streams(net, 1);
    assert_eq!(opened.len(), requests, "every request arrived");
    let client_sent = net.nodes[0].stats().bundles_sent - client_before;
    // The server acknowledged the requests (one bundle of pure acknowledgements) before it
    // replied.
    let server_mid = net.nodes[1].stats().bundles_sent;
    for id in &opened {
        net.nodes[1]
            .stream_send_last(
                DtnTime::from_millis(net.now),
                *id,
                Bytes::from(vec![8; size]),
            )
            .unwrap();
    }
    net.settle();
    let replies = net.events[0]
        .iter()
        .filter(
            |e| matches!(e, Event::Stream(StreamEvent::Data { data, .. }) if data.len() == size),
        )
        .count();
    assert_eq!(replies, requests, "every reply arrived");
    assert!(server_mid > server_before, "the requests were acknowledged");
    (client_sent, net.nodes[1].stats().bundles_sent - server_mid)
}

#[test]
fn the_segments_of_one_round_between_two_endpoints_share_bundles() {
    // Forty-five requests made in one round leave as one bundle, and so do their replies.
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    net.advance_to(T0 + 3_000);
    assert_eq!(bundles_of_one_round(&mut net, 45, 100), (1, 1));
}

#[test]
fn segments_share_a_bundle_only_as_far_as_the_links_mtu_and_the_byte_bound_allow() {
    // A 2000-byte MTU leaves 1744 bytes for segments, 132 bytes each (100 of data): 13 to a
    // bundle, so 45 requests take 4 bundles, and so do their replies.
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, Some(2_000));
    net.advance_to(T0 + 3_000);
    assert_eq!(bundles_of_one_round(&mut net, 45, 100), (4, 4));
    // Without an MTU, 64 KiB a bundle: 100 segments of 1000 bytes take two (63 + 37).
    let mut net = Net::new(2, |c| c.stream.max_segment = 1_000);
    net.link(0, 1, None);
    net.advance_to(T0 + 3_000);
    assert_eq!(bundles_of_one_round(&mut net, 100, 1_000), (2, 2));
}

fn delivered_ids(net: &Net, i: usize) -> Vec<BundleId> {
    net.deliveries(i).iter().map(|d| d.id.clone()).collect()
}

#[test]
fn a_full_window_holds_bundles_back_and_each_completion_releases_the_next() {
    // 10 kB bundles in a 25 kB window: two at a time.
    let mut net = Net::new(2, |c| c.link_window_bytes = 25_000);
    net.hold_transfers = true;
    let ids: Vec<BundleId> = (0..6)
        .map(|_| net.send(0, Outgoing::new(app(0), app(1), payload(10_000))))
        .collect();
    net.link(0, 1, None);
    // The neighbour's summary vector asks for all six: two go to the shell, four wait in the node.
    assert_eq!(net.pending.len(), 2);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.bundles, load.waiting), (2, 2, 4));
    assert!(load.bytes > 20_000 && load.bytes <= 25_000, "{load:?}");
    for (k, id) in ids.iter().enumerate() {
        // First come, first served, and every completion hands over the next one.
        assert_eq!(&net.complete_next(), id);
        let load = net.nodes[0].link_load(LinkId(1)).unwrap();
        assert!(load.bytes <= 25_000, "{load:?}");
        assert_eq!(net.pending.len(), (ids.len() - k - 1).min(2));
        assert_eq!(load.waiting, (ids.len() - k - 1).saturating_sub(2));
    }
    assert_eq!(delivered_ids(&net, 1), ids);
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
    assert_eq!(
        net.nodes[0].link_load(LinkId(1)),
        Some(node::LinkLoad::default())
    );
}

#[test]
fn a_bundle_larger_than_the_window_goes_alone_and_is_not_overtaken() {
    let mut net = Net::new(2, |c| c.link_window_bytes = 4_000);
    net.hold_transfers = true;
    net.link(0, 1, None);
    let small = net.send(0, Outgoing::new(app(0), app(1), payload(1_000)));
    let big = net.send(0, Outgoing::new(app(0), app(1), payload(50_000)));
    let later = net.send(0, Outgoing::new(app(0), app(1), payload(1_000)));
    // `later` would fit beside `small`, but it waits behind `big`, which waits for room.
    assert_eq!(net.pending.len(), 1);
    assert_eq!(net.nodes[0].link_load(LinkId(1)).unwrap().waiting, 2);
    assert_eq!(net.complete_next(), small);
    // Nothing else in flight: the big one goes although it is twelve times the window.
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.waiting), (1, 1));
    assert!(load.bytes > 50_000, "{load:?}");
    assert_eq!(net.complete_next(), big);
    assert_eq!(net.complete_next(), later);
    assert_eq!(delivered_ids(&net, 1), vec![small, big, later]);
    assert!(net.pending.is_empty());
}

#[test]
fn a_bundle_written_out_leaves_the_window_while_its_result_is_awaited() {
    // Two bundles each larger than the window: without the shell's word that the first was
    // written out, the second waits for the first's result (the peer's sync); with it, the
    // second is on the wire meanwhile, and the first still completes as before.
    let mut net = Net::new(2, |c| c.link_window_bytes = 4_000);
    net.hold_transfers = true;
    net.link(0, 1, None);
    let first = net.send(0, Outgoing::new(app(0), app(1), payload(50_000)));
    let second = net.send(0, Outgoing::new(app(0), app(1), payload(50_000)));
    let third = net.send(0, Outgoing::new(app(0), app(1), payload(50_000)));
    assert_eq!(net.pending.len(), 1);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.waiting), (1, 2), "{load:?}");
    let now = DtnTime::from_millis(net.now);
    net.nodes[0].handle_transfer_written(now, LinkId(1), &first);
    net.settle();
    // The second went; the first is still in flight, out of the window.
    assert_eq!(net.pending.len(), 2);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!(
        (load.pieces, load.bundles, load.waiting),
        (2, 2, 1),
        "{load:?}"
    );
    assert!(load.bytes > 50_000 && load.bytes < 100_000, "{load:?}");
    // Said twice, or of a bundle not in flight, it changes nothing.
    net.nodes[0].handle_transfer_written(now, LinkId(1), &first);
    net.nodes[0].handle_transfer_written(now, LinkId(1), &third);
    net.settle();
    assert_eq!(net.pending.len(), 2);
    // The third waits: the second is not written out yet. Once it is, the third still waits,
    // as two pieces past the window await their results: a peer that never confirms gets no
    // more. The first's result lets the third go.
    net.nodes[0].handle_transfer_written(now, LinkId(1), &second);
    net.settle();
    assert_eq!(net.pending.len(), 2);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!(
        (load.pieces, load.waiting, load.bytes),
        (2, 1, 0),
        "{load:?}"
    );
    assert_eq!(net.complete_next(), first);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.waiting), (2, 0), "{load:?}");
    assert!(load.bytes > 50_000, "{load:?}");
    assert_eq!(net.complete_next(), second);
    assert_eq!(net.complete_next(), third);
    assert_eq!(delivered_ids(&net, 1), vec![first, second, third]);
    assert_eq!(
        net.nodes[0].link_load(LinkId(1)),
        Some(node::LinkLoad::default())
    );
}

#[test]
fn the_pieces_of_one_bundle_go_together_and_the_next_bundle_waits() {
    // A 1 500-byte MTU cuts a 10 kB bundle into seven pieces: one offer, sharing one payload
    // buffer, so they go together even past the window.
    let mut net = Net::new(2, |c| {
        c.link_window_bytes = 4_000;
        c.min_piece = 512;
    });
    net.hold_transfers = true;
    let data = payload(10_000);
    let first = net.send(0, Outgoing::new(app(0), app(1), data.clone()));
    let second = net.send(0, Outgoing::new(app(0), app(1), payload(500)));
    net.link(0, 1, Some(1_500));
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.bundles, load.waiting), (1, 1), "{load:?}");
    assert!(load.pieces >= 7 && load.bytes > 10_000, "{load:?}");
    // The second goes as soon as the pieces still out leave room for it, not before.
    let mut completed = Vec::new();
    let mut waited_at = Vec::new();
    let mut second_size = None;
    while !net.pending.is_empty() {
        completed.push(net.complete_next());
        let load = net.nodes[0].link_load(LinkId(1)).unwrap();
        assert!(load.bundles <= 1 || load.bytes <= 4_000, "{load:?}");
        if load.waiting == 1 {
            waited_at.push(load.bytes);
        }
        if let Some((_, _, b)) = net.pending.iter().find(|(_, _, b)| b.id() == second) {
            let (head, payload, tail) = b.encoded_sizes();
            second_size = Some((head + payload + tail) as u64);
        }
    }
    let second_size = second_size.unwrap();
    assert!(!waited_at.is_empty());
    assert!(
        waited_at.iter().all(|bytes| bytes + second_size > 4_000),
        "{waited_at:?} + {second_size}"
    );
    assert!(completed.iter().position(|id| *id == second).unwrap() > 1);
    assert_eq!(delivered_ids(&net, 1), vec![first, second]);
    assert_eq!(net.deliveries(1)[0].payload, data);
}

#[test]
fn real_time_traffic_is_not_held_back_by_a_full_window() {
    let mut net = Net::new(2, |c| c.link_window_bytes = 4_000);
    net.hold_transfers = true;
    net.link(0, 1, None);
    net.send(0, Outgoing::new(app(0), app(1), payload(50_000)));
    net.send(0, Outgoing::new(app(0), app(1), payload(1_000)));
    assert_eq!(net.nodes[0].link_load(LinkId(1)).unwrap().waiting, 1);
    // A datagram crosses at once.
    let mut out = Outgoing::new(app(0), app(1), payload(100));
    out.class = Class::Datagram;
    net.send(0, out);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(net.deliveries(1)[0].class, Class::Datagram);
    // So do beacons, link-state advertisements and summary vectors, period after period.
    let control = net.nodes[0].stats().control_sent;
    net.advance_to(T0 + 35_000);
    assert!(net.nodes[0].stats().control_sent > control);
    assert!(
        !net.events[0]
            .iter()
            .any(|e| matches!(e, Event::NeighbourDown { .. }))
    );
    assert_eq!(net.nodes[0].reachable(&node_id(1)), Some(1));
    // And a stream too.
    let id = net.nodes[0]
        .stream_open(DtnTime::from_millis(net.now), app(0), app(1))
        .expect("open");
    net.nodes[0]
        .stream_send(DtnTime::from_millis(net.now), id, payload(3_000))
        .unwrap();
    net.settle();
    let streamed: usize = net.events[1]
        .iter()
        .map(|e| match e {
            Event::Stream(node::stream::StreamEvent::Data { data, .. }) => data.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(streamed, 3_000);
    // Meanwhile the store-carry-forward bundles are where they were.
    assert_eq!(net.pending.len(), 1);
    assert_eq!(net.nodes[0].link_load(LinkId(1)).unwrap().waiting, 1);
    // Only store-carry-forward transmits ask to hear how they fared: the real-time ones (the
    // datagram, the stream's segments and acks, control traffic) went unreported above and
    // still left nothing behind in the window.
    assert!(net.transmitted.iter().any(|&(urgent, _)| urgent));
    assert!(net.transmitted.iter().any(|&(urgent, _)| !urgent));
    for &(urgent, report) in &net.transmitted {
        assert_eq!(report, !urgent);
    }
    net.complete_next();
    assert_eq!(net.pending.len(), 1);
    assert_eq!(net.nodes[0].link_load(LinkId(1)).unwrap().waiting, 0);
}

#[test]
fn a_link_going_down_returns_the_window() {
    let mut net = Net::new(2, |c| c.link_window_bytes = 15_000);
    net.hold_transfers = true;
    let ids: Vec<BundleId> = (0..3)
        .map(|_| net.send(0, Outgoing::new(app(0), app(1), payload(10_000))))
        .collect();
    net.link(0, 1, None);
    assert_eq!(net.pending.len(), 1);
    assert_eq!(net.nodes[0].link_load(LinkId(1)).unwrap().waiting, 2);
    // The link dies with a transfer in flight (reported failed after the fact) and two waiting.
    net.unlink(0, 1);
    assert_eq!(net.nodes[0].link_load(LinkId(1)), None);
    assert!(net.deliveries(1).is_empty());
    // A new contact starts with an empty window: one goes at once, nothing is stuck.
    net.link(0, 1, None);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.waiting), (1, 2), "{load:?}");
    // The neighbour falls silent with one in flight: its window is returned too, and the
    // bundles are offered afresh when it is heard again.
    net.mute_beacons = true;
    net.advance_to(net.now + 5_000);
    assert!(net.events[0].contains(&Event::NeighbourDown { node: node_id(1) }));
    assert_eq!(
        net.nodes[0].link_load(LinkId(1)),
        Some(node::LinkLoad::default())
    );
    net.pending.clear(); // the shell gave up on it
    net.mute_beacons = false;
    net.advance_to(net.now + 2_000);
    let load = net.nodes[0].link_load(LinkId(1)).unwrap();
    assert_eq!((load.pieces, load.waiting), (1, 2), "{load:?}");
    while !net.pending.is_empty() {
        net.complete_next();
    }
    assert_eq!(delivered_ids(&net, 1), ids);
}

/// What a shell may do next with the store-carry-forward transfers it holds.
#[derive(Debug, Clone, Copy)]
enum ShellStep {
    /// Report the `n`th held transfer (modulo how many there are) as done.
    Complete(usize),
    /// Report it failed, or refused: nothing reached the peer.
    Fail(usize),
    Refuse(usize),
    /// The link goes down and comes back.
    Bounce,
}

fn shell_step() -> impl proptest::strategy::Strategy<Value = ShellStep> {
    use proptest::prelude::*;
    prop_oneof![
        4 => any::<usize>().prop_map(ShellStep::Complete),
        1 => any::<usize>().prop_map(ShellStep::Fail),
        1 => any::<usize>().prop_map(ShellStep::Refuse),
        1 => Just(ShellStep::Bounce),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever the shell reports, in whatever order: more than one bundle is in flight only
    /// within the window, and every bundle arrives exactly once in the end.
    #[test]
    fn the_window_holds_whatever_the_shell_reports(
        window in 500u64..40_000,
        sizes in proptest::collection::vec(100usize..20_000, 1..12),
        steps in proptest::collection::vec(shell_step(), 0..40),
    ) {
        let mut net = Net::new(2, |c| c.link_window_bytes = window);
        net.hold_transfers = true;
        net.link(0, 1, None);
        let ids: BTreeSet<BundleId> = sizes
            .iter()
            .map(|&n| net.send(0, Outgoing::new(app(0), app(1), payload(n))))
            .collect();
        let check = |net: &Net| {
            if let Some(load) = net.nodes[0].link_load(LinkId(1)) {
                assert!(load.bundles <= 1 || load.bytes <= window, "{load:?}, window {window}");
            }
        };
        check(&net);
        for step in steps {
            match step {
                ShellStep::Bounce => {
                    net.unlink(0, 1);
                    net.link(0, 1, None);
                }
                ShellStep::Complete(n) | ShellStep::Fail(n) | ShellStep::Refuse(n) => {
                    if net.pending.is_empty() {
                        continue;
                    }
                    let (i, j, bundle) = net.pending.remove(n % net.pending.len()).unwrap();
                    let id = bundle.id();
                    let result = match step {
                        ShellStep::Complete(_) => {
                            net.nodes[j].handle_bundle(DtnTime::from_millis(net.now), LinkId(i as u64), bundle);
                            TransferResult::Complete
                        }
                        ShellStep::Fail(_) => TransferResult::Failed,
                        _ => TransferResult::Refused,
                    };
                    net.nodes[i].handle_transfer(DtnTime::from_millis(net.now), LinkId(j as u64), &id, result);
                    net.settle();
                }
            }
            check(&net);
        }
        // From here the shell completes everything; what failed is offered again with the next
        // summary vector.
        for _ in 0..(2 * sizes.len() + 2) {
            while !net.pending.is_empty() {
                net.complete_next();
                check(&net);
            }
            net.advance_to(net.now + 10_001);
        }
        let delivered = delivered_ids(&net, 1);
        proptest::prop_assert_eq!(delivered.len(), ids.len());
        proptest::prop_assert_eq!(delivered.into_iter().collect::<BTreeSet<_>>(), ids);
    }
}

/// What a shell may do next with the pieces of a bundle it holds.
#[derive(Debug, Clone, Copy)]
enum PieceStep {
    /// Report the `n`th held transfer (modulo how many there are) as done.
    Complete(usize),
    /// Cut it after `keep` payload bytes (modulo its length): the peer keeps that prefix.
    Cut(usize, u64),
    /// Report it failed: nothing reached the peer.
    Fail(usize),
    /// The link goes down and comes back.
    Bounce,
}

fn piece_step() -> impl proptest::strategy::Strategy<Value = PieceStep> {
    use proptest::prelude::*;
    prop_oneof![
        4 => any::<usize>().prop_map(PieceStep::Complete),
        2 => (any::<usize>(), any::<u64>()).prop_map(|(n, k)| PieceStep::Cut(n, k)),
        1 => any::<usize>().prop_map(PieceStep::Fail),
        1 => Just(PieceStep::Bounce),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A bundle in pieces, by policy or by the link's MTU, whatever order its pieces end in,
    /// cut or failed or done, across links that go down and up: it arrives once, whole, and the
    /// sender never sends a byte the peer confirmed again, save for the rest of a piece that
    /// was cut.
    #[test]
    fn a_bundle_in_pieces_arrives_once_whole_whatever_its_pieces_meet(
        len in 1usize..40_000,
        piece in 4_096u64..12_000,
        by_mtu in proptest::prelude::any::<bool>(),
        steps in proptest::collection::vec(piece_step(), 0..60),
    ) {
        // An MTU leaves room for pieces of at least `min_piece` (4 KiB) beside the headers;
        // a smaller one gets only bundles that fit whole (tested on its own above).
        let mtu = by_mtu.then_some(piece + 1_024);
        let mut net = Net::new(2, |c| {
            if !by_mtu {
                c.max_bundle_piece = Some(piece);
            }
        });
        net.hold_transfers = true;
        net.link(0, 1, mtu);
        let data = payload(len);
        net.send(0, Outgoing::new(app(0), app(1), data.clone()));
        // Payload bytes handed to the shell, and those the peer confirmed or kept.
        let mut cut_off = 0u64;
        for step in steps {
            match step {
                PieceStep::Bounce => {
                    // What is on the link when it goes down fails.
                    cut_off += net
                        .pending
                        .iter()
                        .map(|(_, _, b)| b.payload.data.len() as u64)
                        .sum::<u64>();
                    net.unlink(0, 1);
                    net.link(0, 1, mtu);
                }
                PieceStep::Complete(n) | PieceStep::Cut(n, _) | PieceStep::Fail(n) => {
                    if net.pending.is_empty() {
                        continue;
                    }
                    let (i, j, bundle) = net.pending.remove(n % net.pending.len()).unwrap();
                    let id = bundle.id();
                    let now = DtnTime::from_millis(net.now);
                    let piece_len = bundle.payload.data.len() as u64;
                    let result = match step {
                        PieceStep::Complete(_) => {
                            net.nodes[j].handle_bundle(now, LinkId(i as u64), bundle);
                            TransferResult::Complete
                        }
                        PieceStep::Cut(_, keep) => {
                            let keep = keep % piece_len;
                            if keep > 0 {
                                let (prefix, _) = bundle.split_at(keep as usize).unwrap();
                                net.nodes[j].handle_bundle(now, LinkId(i as u64), prefix);
                            }
                            cut_off += piece_len - keep;
                            TransferResult::Cut { payload_bytes: keep }
                        }
                        _ => {
                            cut_off += piece_len;
                            TransferResult::Failed
                        }
                    };
                    net.nodes[i].handle_transfer(now, LinkId(j as u64), &id, result);
                    net.settle();
                }
            }
        }
        // From here the shell completes everything; what is left goes with the next summary.
        for _ in 0..4 {
            while !net.pending.is_empty() {
                net.complete_next();
            }
            net.advance_to(net.now + 10_001);
        }
        let got = net.deliveries(1);
        proptest::prop_assert_eq!(got.len(), 1);
        proptest::prop_assert_eq!(&got[0].payload, &data);
        // Every piece handed over was confirmed, cut or failed; what was confirmed went once.
        let sent_payload: u64 = net.nodes[0].stats().bytes_sent;
        let headers = 400 * net.nodes[0].stats().bundles_sent;
        proptest::prop_assert!(
            sent_payload <= len as u64 + cut_off + headers,
            "sent {} encoded bytes for {} payload bytes, {} cut off or failed",
            sent_payload, len, cut_off
        );
    }
}

/// Sends a datagram from node 0 to node 1 and returns its bundle as it left node 0 (it still
/// crosses and is delivered).
fn datagram_bundle(net: &mut Net, len: usize) -> Bundle {
    let mut out = Outgoing::new(app(0), app(1), payload(len));
    out.class = Class::Datagram;
    net.nodes[0]
        .send(DtnTime::from_millis(net.now), out)
        .expect("send");
    let mut found = None;
    while let Some(t) = net.nodes[0].poll_transmit() {
        if let Frame::Bundle(b) = t.frame {
            net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), b.clone());
            found = Some(b);
        }
    }
    net.settle();
    found.expect("the datagram's bundle")
}

/// Hands `bundle` to node 1 again; returns how many bundles node 1 has delivered since it began.
fn again(net: &mut Net, bundle: &Bundle) -> usize {
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle.clone());
    net.settle();
    net.deliveries(1).len()
}

#[test]
fn a_real_time_duplicate_is_dropped_until_its_entry_expires_or_is_pushed_out() {
    // Expiry: the entry lasts a minute, then the same bundle (still alive) is new again.
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    let first = datagram_bundle(&mut net, 10);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(again(&mut net, &first), 1, "a duplicate was delivered");
    net.advance_to(net.now + 59_000);
    assert_eq!(again(&mut net, &first), 1, "forgotten before its minute");
    net.advance_to(net.now + 2_000);
    assert_eq!(again(&mut net, &first), 2, "remembered past its minute");

    // Capacity: with room for four, the entry that expires first makes room for a fifth.
    let mut net = Net::new(2, |c| c.max_seen = 4);
    net.link(0, 1, None);
    let first = datagram_bundle(&mut net, 10);
    for i in 0..3 {
        net.advance_to(net.now + 10);
        datagram_bundle(&mut net, 11 + i);
    }
    assert_eq!(
        again(&mut net, &first),
        4,
        "a duplicate delivered with room left"
    );
    net.advance_to(net.now + 10);
    datagram_bundle(&mut net, 20);
    assert_eq!(
        again(&mut net, &first),
        6,
        "the earliest entry was not pushed out"
    );
}

// ----- RFC 9171 §5.6 step 4: extension blocks the node cannot process -----

/// A bundle from node 0's `app` to `to`, as another implementation might make it, with
/// extension blocks of the given types and flags (each block's content: its type as text).
fn bundle_with_blocks(now: u64, to: Eid, flags: u64, blocks: &[(u64, u64)]) -> Bundle {
    let mut primary = wire::PrimaryBlock::new(
        to,
        app(0),
        wire::CreationTimestamp {
            time: DtnTime::from_millis(now),
            sequence: 7,
        },
        60_000,
    );
    primary.report_to = app(0);
    primary.flags = BundleFlags(flags);
    let mut bundle = Bundle::new(primary, payload(500));
    for &(block_type, block_flags) in blocks {
        let data = wire::ExtensionData::Unknown {
            block_type,
            data: Bytes::from(format!("block {block_type}")),
        };
        let mut block = wire::ExtensionBlock::new(bundle.next_block_number(), data);
        block.flags = wire::BlockFlags(block_flags);
        bundle.extensions.push(block);
    }
    bundle
}

fn status_reports(net: &Net, i: usize) -> Vec<wire::StatusReport> {
    net.events[i]
        .iter()
        .filter_map(|e| match e {
            Event::StatusReport { report, .. } => Some(report.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unprocessable_block_flagged_delete_drops_the_bundle_with_block_unsupported() {
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    let bundle = bundle_with_blocks(
        net.now,
        app(1),
        BundleFlags::REPORT_DELETION,
        &[(
            200,
            wire::BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE
                | wire::BlockFlags::REPORT_IF_UNPROCESSABLE,
        )],
    );
    let id = bundle.id();
    net.nodes[1].handle_bundle_bytes(
        DtnTime::from_millis(net.now),
        LinkId(0),
        bundle.encode().to_bytes(),
    );
    net.settle();
    assert!(net.deliveries(1).is_empty(), "deleted, not delivered");
    assert!(net.events[1].contains(&Event::Dropped {
        id: id.clone(),
        reason: DropReason::BlockUnsupported
    }));
    assert_eq!(net.nodes[1].held_bundles().count(), 0);
    // The block asked for a reception report, the bundle for a deletion report: both say why.
    let reports = status_reports(&net, 0);
    assert!(
        reports.iter().any(|r| r.received.is_some()
            && r.reason == StatusReason::BlockUnsupported
            && r.source == id.source),
        "{reports:?}"
    );
    assert!(
        reports
            .iter()
            .any(|r| r.deleted.is_some() && r.reason == StatusReason::BlockUnsupported),
        "{reports:?}"
    );
}

#[test]
fn an_unprocessable_block_flagged_report_sends_a_reception_report_and_the_bundle_goes_on() {
    let mut net = Net::new(2, |_| {});
    net.link(0, 1, None);
    // The bundle itself asks for no report at all: the block does.
    let bundle = bundle_with_blocks(
        net.now,
        app(1),
        0,
        &[(200, wire::BlockFlags::REPORT_IF_UNPROCESSABLE)],
    );
    let id = bundle.id();
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle.clone());
    net.settle();
    assert_eq!(net.deliveries(1).len(), 1);
    let reports = status_reports(&net, 0);
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].received.is_some());
    assert_eq!(reports[0].reason, StatusReason::BlockUnsupported);
    assert_eq!(reports[0].creation, id.creation);
    // A second copy is a duplicate and asks for nothing more.
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle);
    net.settle();
    assert_eq!(status_reports(&net, 0).len(), 1);
}

#[test]
fn an_unprocessable_block_flagged_discard_is_removed_and_an_unflagged_one_forwarded_as_it_came() {
    let mut net = Net::new(3, |_| {});
    net.link(0, 1, None);
    net.link(1, 2, None);
    net.hold_transfers = true;
    // 200 asks to be discarded; 201 and a BPSec BCB (12, for node 2: node 1 relays it, holding
    // no key) ask for nothing and must reach the next node untouched.
    let mut bundle = bundle_with_blocks(
        net.now,
        app(2),
        0,
        &[
            (200, wire::BlockFlags::DISCARD_IF_UNPROCESSABLE),
            (201, 0),
            (12, wire::BlockFlags::REPLICATE_IN_EVERY_FRAGMENT),
        ],
    );
    bundle.extensions[1].crc_type = wire::CrcType::Crc32c;
    let original = bundle.encode().to_bytes();
    // Block 201 as encoded: [201, 3, flags 0, CRC-32C, "block 201", its CRC], 21 bytes.
    let block_201 = &original[original
        .windows(6)
        .position(|w| w == [0x86, 0x18, 201, 3, 0, 2])
        .expect("block 201 in the original")..][..21];
    assert_eq!(&block_201[6..16], b"\x49block 201");
    net.nodes[1].handle_bundle_bytes(DtnTime::from_millis(net.now), LinkId(0), original.clone());
    net.settle();
    let (from, to, forwarded) = net.pending.back().cloned().expect("forwarded to node 2");
    assert_eq!((from, to), (1, 2));
    assert_eq!(forwarded.id(), bundle.id());
    let types: Vec<u64> = forwarded
        .extensions
        .iter()
        .map(|b| b.data.block_type())
        .collect();
    assert!(!types.contains(&200), "discarded: {types:?}");
    assert!(types.contains(&12), "{types:?}");
    assert_eq!(
        forwarded.extension(201),
        bundle.extension(201),
        "kept as it was"
    );
    let encoded = forwarded.encode().to_bytes();
    assert!(
        encoded.windows(block_201.len()).any(|w| w == block_201),
        "block 201 forwarded byte for byte"
    );
    while !net.pending.is_empty() {
        net.complete_next();
    }
    // At its destination the BCB (not an abstract security block, and no key anyway) cannot be
    // decrypted: the bundle is dropped, not delivered as if its payload were plaintext.
    assert_eq!(net.deliveries(2).len(), 0);
    assert_eq!(net.nodes[2].stats().bcb_failed, 1);
}

/// A summary vector from `from` to node `to` naming `purged` as delivered, made by hand, as a
/// stranger may make one.
fn forged_summary(from: &Eid, to: usize, sequence: u64, now: u64, purged: Vec<u64>) -> Bundle {
    summary_of(from, to, sequence, now, Vec::new(), purged)
}

fn summary_of(
    from: &Eid,
    to: usize,
    sequence: u64,
    now: u64,
    have: Vec<u64>,
    purged: Vec<u64>,
) -> Bundle {
    let primary = wire::PrimaryBlock::new(
        eid(&format!("dtn://n{to}/~ferry")),
        from.clone(),
        wire::CreationTimestamp {
            time: DtnTime::from_millis(now),
            sequence,
        },
        60_000,
    );
    let control = wire::Control::Summary(wire::Summary { have, purged });
    let mut bundle = Bundle::new(primary, control.encode());
    let number = bundle.next_block_number();
    bundle.extensions.push(wire::ExtensionBlock::new(
        number,
        wire::ExtensionData::Unknown {
            block_type: wire::BLOCK_FERRY_CLASS,
            data: wire::uint_block_data(Class::Datagram.code()),
        },
    ));
    bundle
}

#[test]
fn a_strangers_summaries_fill_the_purge_set_only_to_its_bound_and_never_push_out_a_delivery() {
    let mut net = Net::new(3, |c| c.max_purge_entries = 8);
    // Node 1 delivers a bundle from node 0: its own purge entry.
    net.hold_transfers = true;
    net.link(0, 1, None);
    let first = net.send(0, Outgoing::new(app(0), app(1), payload(100)));
    let (_, _, copy) = net.pending.front().cloned().expect("the transfer");
    net.complete_next();
    net.hold_transfers = false;
    net.unlink(0, 1);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(net.nodes[1].purge_set_len(), 1);
    let rows = |net: &Net| {
        net.nodes[1]
            .store()
            .rpc_scan(RpcTable::Purged)
            .unwrap()
            .len()
    };

    // Node 2, next to node 1, sends summaries naming 20 keys of bundles nobody delivered, then
    // 20 more: the set, and the store with it, stops at its bound, and the rest is counted.
    net.link(1, 2, None);
    let stranger = node_id(2);
    let summary = forged_summary(&stranger, 1, 1, net.now, (1_000..1_020).collect());
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(2), summary);
    net.settle();
    assert_eq!(net.nodes[1].purge_set_len(), 8);
    assert_eq!(rows(&net), 8);
    assert_eq!(net.nodes[1].stats().purge_set_full, 13);
    let summary = forged_summary(&stranger, 1, 2, net.now, (2_000..2_020).collect());
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(2), summary);
    net.settle();
    assert_eq!(net.nodes[1].purge_set_len(), 8);
    assert_eq!(rows(&net), 8);
    assert_eq!(net.nodes[1].stats().purge_set_full, 33);

    // What node 1 delivered is still known: a copy offered again is a duplicate.
    assert!(!net.nodes[1].wants(&first));
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), copy);
    net.settle();
    assert_eq!(net.deliveries(1).len(), 1, "delivered twice");

    // A bundle delivered while the set is full is still remembered, beyond the bound: the
    // stranger's keys cannot keep node 1 from knowing what it delivered.
    net.link(0, 1, None);
    let second = net.send(0, Outgoing::new(app(0), app(1), payload(200)));
    assert_eq!(net.deliveries(1).len(), 2);
    assert!(!net.nodes[1].wants(&second));
    assert_eq!(net.nodes[1].purge_set_len(), 9);
    assert_eq!(rows(&net), 9);

    // One summary is read up to its bound; the keys beyond are not looked at, only counted.
    let long: Vec<u64> = (0..node::MAX_SUMMARY_PURGE_KEYS as u64 + 5)
        .map(|k| (1 << 40) + k)
        .collect();
    let summary = forged_summary(&stranger, 1, 3, net.now, long);
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(2), summary);
    net.settle();
    let stats = net.nodes[1].stats();
    assert_eq!(stats.summary_purge_keys_ignored, 5);
    assert_eq!(
        stats.purge_set_full,
        33 + node::MAX_SUMMARY_PURGE_KEYS as u64
    );
    assert_eq!(net.nodes[1].purge_set_len(), 9);
}

#[test]
fn a_summary_costs_no_more_than_the_keys_held_here_and_is_forgotten_with_its_node() {
    let mut net = Net::new(3, |_| {});
    // Node 1 holds one bundle for node 2, which is not in reach.
    net.link(0, 1, None);
    net.send(0, Outgoing::new(app(0), app(2), payload(100)));
    net.settle();
    assert_eq!(net.nodes[1].held_bundles().count(), 1);
    let held_key = {
        // The key a summary names a bundle by: node 1's own summary to node 0 lists it.
        let before = net.nodes[1].known_keys();
        assert!(before >= 1, "node 0 is known to hold the bundle it sent");
        before
    };
    net.unlink(0, 1);
    assert_eq!(
        net.nodes[1].known_keys(),
        0,
        "node 0's knowledge forgotten with it"
    );

    // A stranger next to node 1 claims to hold 10,000 made-up bundles: none is kept.
    net.link(1, 2, None);
    let stranger = node_id(2);
    let summary = summary_of(&stranger, 1, 1, net.now, (1..=10_000).collect(), Vec::new());
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(2), summary);
    net.settle();
    assert!(
        net.nodes[1].known_keys() <= held_key,
        "{} keys kept for a summary of made-up ones",
        net.nodes[1].known_keys()
    );
    net.unlink(1, 2);
    assert_eq!(net.nodes[1].known_keys(), 0);
}

#[test]
fn bundles_carried_for_others_stop_at_their_bound_and_own_ones_still_go_in() {
    let mut net = Net::new(3, |c| c.max_carried_bundles = 4);
    // Node 1 carries node 0's bundles for node 2, which is out of reach.
    net.link(0, 1, None);
    for i in 0..10 {
        net.send(0, Outgoing::new(app(0), app(2), payload(100 + i)));
    }
    net.settle();
    assert_eq!(net.nodes[1].held_bundles().count(), 4);
    assert_eq!(net.nodes[1].stats().carry_refused, 6);
    // Its own bundles are still stored beyond the bound.
    net.unlink(0, 1);
    net.send(1, Outgoing::new(app(1), app(2), payload(50)));
    assert_eq!(net.nodes[1].held_bundles().count(), 5);
}

#[test]
fn a_primary_block_without_crc_or_bib_gets_a_crc_and_goes_on_valid() {
    for (blocks, repaired) in [(vec![], true), (vec![(11, 0)], false)] {
        let mut net = Net::new(2, |_| {});
        net.link(0, 1, None);
        let mut bundle = bundle_with_blocks(net.now, app(1), 0, &blocks);
        bundle.primary.crc_type = wire::CrcType::None;
        let id = bundle.id();
        // Node 0 takes it from a sender that sent it so (dtn7-rs does), and forwards it to 1.
        net.nodes[0].handle_bundle_bytes(
            DtnTime::from_millis(net.now),
            LinkId(99),
            bundle.encode().to_bytes(),
        );
        let mut forwarded = None;
        while let Some(t) = net.nodes[0].poll_transmit() {
            if let Frame::Bundle(b) = t.frame
                && b.id() == id
            {
                forwarded = Some(b);
            }
        }
        let forwarded = forwarded.expect("node 0 forwards the bundle to node 1");
        let expected = if repaired {
            wire::CrcType::Crc32c
        } else {
            // A BIB may cover the primary block: a CRC would be wrong, so it is left alone.
            wire::CrcType::None
        };
        assert_eq!(forwarded.primary.crc_type, expected, "blocks {blocks:?}");
        assert_eq!(forwarded.id(), id, "the bundle is still known by its id");
        assert_eq!(net.nodes[0].stats().primary_crc_added, u64::from(repaired));
        // What left decodes, CRC checked, to the same bundle.
        let again = Bundle::decode(forwarded.encode().to_bytes()).unwrap();
        assert_eq!(again.primary.crc_type, expected);
        assert_eq!(again.payload.data, bundle.payload.data);
    }
}

/// What `node` hands the shell for `link` now: (control bundles, other bundles' ids).
fn drain_link(node: &mut Node, link: LinkId) -> (usize, Vec<BundleId>) {
    let (mut control, mut others) = (0, Vec::new());
    while let Some(t) = node.poll_transmit() {
        if t.link != link {
            continue;
        }
        if let Frame::Bundle(b) = t.frame {
            let is_control =
                matches!(&b.primary.destination, Eid::Dtn(d) if d.demux() == node::CONTROL_DEMUX);
            if is_control {
                control += 1;
            } else {
                others.push(b.id());
            }
        }
    }
    (control, others)
}

/// The purge keys of every summary vector `node` sent on `link` since the last call, in order.
fn purge_lists_sent(node: &mut Node, link: LinkId) -> Vec<Vec<u64>> {
    let mut lists = Vec::new();
    while let Some(t) = node.poll_transmit() {
        if t.link != link {
            continue;
        }
        if let Frame::Bundle(b) = t.frame
            && let Ok(wire::Control::Summary(summary)) = wire::Control::decode(&b.payload.data)
        {
            lists.push(summary.purged);
        }
    }
    lists
}

#[test]
fn summaries_list_only_the_purge_keys_a_neighbour_was_not_told_and_every_sixth_lists_all() {
    assert_eq!(
        node::FULL_SUMMARY_EVERY,
        6,
        "the timeline below counts to six"
    );
    let t = |ms: u64| DtnTime::from_millis(T0 + ms);
    let mut node = Node::new(
        NodeConfig::new(node_id(0)),
        Box::new(MemoryStore::new(1 << 20)),
        t(0),
    );
    let up = |node: &mut Node, at: DtnTime, link: u64| {
        node.handle_link(
            at,
            LinkChange::Up {
                link: LinkId(link),
                peer: Some(node_id(link as usize)),
                mtu: None,
                bandwidth_bps: 0,
                contact: None,
            },
        );
    };
    // Neighbour 2 tells node 0 of keys 100..110 delivered; neighbour 1 then comes.
    up(&mut node, t(0), 2);
    let told = forged_summary(&node_id(2), 0, 1, T0, (100..110).collect());
    node.handle_bundle(t(0), LinkId(2), told);
    assert_eq!(node.purge_set_len(), 10);
    up(&mut node, t(1_000), 1);
    let answer = summary_of(&node_id(1), 0, 1, T0 + 1_000, Vec::new(), Vec::new());
    node.handle_bundle(t(1_000), LinkId(1), answer);
    // Contact start: every key.
    assert_eq!(
        purge_lists_sent(&mut node, LinkId(1)),
        vec![(100..110).collect::<Vec<u64>>()]
    );

    // Two keys learnt (out of order), and a renewal of a known key: the next summary lists the
    // two new keys, ascending; the one after lists none.
    let more = forged_summary(&node_id(2), 0, 2, T0 + 5_000, vec![205, 200, 104]);
    node.handle_bundle(t(5_000), LinkId(2), more);
    assert_eq!(node.purge_set_len(), 12);
    node.handle_timeout(t(11_000));
    assert_eq!(purge_lists_sent(&mut node, LinkId(1)), vec![vec![200, 205]]);
    node.handle_timeout(t(21_000));
    assert_eq!(
        purge_lists_sent(&mut node, LinkId(1)),
        vec![Vec::<u64>::new()]
    );
    // A bundle delivered here adds its own key: told once.
    let primary = wire::PrimaryBlock::new(
        app(0),
        app(9),
        wire::CreationTimestamp {
            time: t(25_000),
            sequence: 0,
        },
        3_600_000,
    );
    node.handle_bundle(t(25_000), LinkId(2), Bundle::new(primary, payload(10)));
    assert_eq!(node.purge_set_len(), 13);
    node.handle_timeout(t(31_000));
    let lists = purge_lists_sent(&mut node, LinkId(1));
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].len(), 1, "{lists:?}");
    let own = lists[0][0];
    node.handle_timeout(t(41_000));
    node.handle_timeout(t(51_000));
    assert_eq!(
        purge_lists_sent(&mut node, LinkId(1)),
        vec![Vec::<u64>::new(), Vec::new()]
    );
    // The sixth summary of the contact lists them all, in case one was lost.
    let mut all: Vec<u64> = (100..110).chain([200, 205, own]).collect();
    all.sort_unstable();
    node.handle_timeout(t(61_000));
    assert_eq!(purge_lists_sent(&mut node, LinkId(1)), vec![all.clone()]);
    node.handle_timeout(t(71_000));
    assert_eq!(
        purge_lists_sent(&mut node, LinkId(1)),
        vec![Vec::<u64>::new()]
    );

    // A new contact with the neighbour starts from nothing told.
    node.handle_link(t(75_000), LinkChange::Down { link: LinkId(1) });
    up(&mut node, t(76_000), 1);
    assert_eq!(purge_lists_sent(&mut node, LinkId(1)), vec![all]);
}

#[test]
fn a_neighbour_that_never_sends_a_summary_is_a_router_of_another_kind() {
    // Node 0 holds a bundle for a node behind a neighbour that speaks BPv7 but not Ferry's
    // control protocol (dtn7-rs's dtnd): it never answers a summary vector.
    let mut net = Net::new(1, |_| {});
    let node = &mut net.nodes[0];
    let t = |ms: u64| DtnTime::from_millis(T0 + ms);
    let far = Outgoing::new(app(0), eid("dtn://far/inbox"), payload(100));
    let id = node.send(t(0), far).unwrap();
    let link = LinkId(7);
    let up = |node: &mut Node, at: DtnTime| {
        node.handle_link(
            at,
            LinkChange::Up {
                link,
                peer: Some(eid("dtn://dtnd/")),
                mtu: None,
                bandwidth_bps: 0,
                contact: None,
            },
        );
    };
    up(node, t(0));
    // Contact start: Ferry's control traffic (mesh database, summary), not the bundle: a
    // Ferry neighbour's summary would say what to send.
    let (control, sent) = drain_link(node, link);
    assert!(control >= 1);
    assert!(sent.is_empty(), "{sent:?}");
    // No summary within the grace: the neighbour is another implementation. The bundle goes.
    node.handle_timeout(t(24_999));
    assert!(
        drain_link(node, link).1.is_empty(),
        "not before the grace ends"
    );
    node.handle_timeout(t(25_000));
    let (control, sent) = drain_link(node, link);
    assert_eq!(sent, std::slice::from_ref(&id));
    assert_eq!(control, 0);
    // And no more control traffic: summaries and advertisements would only sit in its store.
    for s in 1..=6 {
        node.handle_timeout(t(25_000 + s * 10_000));
    }
    assert_eq!(drain_link(node, link).0, 0, "no periodic summaries");

    // The session ends and a new one begins: the node is remembered, so nothing of Ferry's
    // goes, and what it holds is offered at once.
    node.handle_link(t(90_000), LinkChange::Down { link });
    up(node, t(91_000));
    let (control, sent) = drain_link(node, link);
    assert_eq!(control, 0);
    assert_eq!(sent, std::slice::from_ref(&id));
    // But a probe every few minutes, in case it is a Ferry node whose summaries were lost.
    node.handle_timeout(t(91_000) + node::FOREIGN_PROBE);
    assert_eq!(drain_link(node, link).0, 1, "one probe");

    // A summary from it after all (a Ferry node under that name): it gets summaries again.
    let mut ferry = Node::new(
        NodeConfig::new(eid("dtn://dtnd/")),
        Box::new(MemoryStore::new(1 << 20)),
        t(400_000),
    );
    ferry.handle_link(
        t(400_000),
        LinkChange::Up {
            link: LinkId(1),
            peer: Some(node_id(0)),
            mtu: None,
            bandwidth_bps: 0,
            contact: None,
        },
    );
    let bundle = std::iter::from_fn(|| ferry.poll_transmit())
        .filter_map(|t| match t.frame {
            Frame::Bundle(b) => Some(b),
            _ => None,
        })
        .find(|b| {
            matches!(
                wire::Control::decode(&b.payload.data),
                Ok(wire::Control::Summary(_))
            )
        })
        .expect("its summary at contact start");
    node.handle_bundle(t(400_000), link, bundle);
    let _ = drain_link(node, link);
    node.handle_timeout(t(400_000 + 10_000));
    assert!(drain_link(node, link).0 >= 1, "summaries again");
}

#[test]
fn a_neighbour_heard_by_beacons_stays_a_ferry_node_and_its_grace_ends() {
    // Node 1's beacons reach node 0; nothing else does (its summaries are lost). Heard by
    // Ferry's beacons, it is never taken for another implementation, and the end of its grace
    // is not left due (the node would be woken at it forever: the fuzz replay of `sim_rpc` hung).
    let t = |ms: u64| DtnTime::from_millis(T0 + ms);
    let new = |id: Eid| {
        Node::new(
            NodeConfig::new(id),
            Box::new(MemoryStore::new(1 << 20)),
            t(0),
        )
    };
    let (mut a, mut b) = (new(node_id(0)), new(node_id(1)));
    for (node, link) in [(&mut a, LinkId(1)), (&mut b, LinkId(0))] {
        node.handle_link(
            t(0),
            LinkChange::Up {
                link,
                peer: None,
                mtu: None,
                bandwidth_bps: 0,
                contact: None,
            },
        );
    }
    let grace = NodeConfig::new(node_id(0)).summary_grace;
    let end = grace.as_millis() as u64 + 1_000;
    let mut at = 0;
    while at <= end {
        b.handle_timeout(t(at));
        while let Some(tx) = b.poll_transmit() {
            if let Frame::Beacon(beacon) = tx.frame {
                a.handle_beacon(t(at), LinkId(1), beacon);
            }
        }
        a.handle_timeout(t(at));
        while a.poll_transmit().is_some() {}
        at += 500;
    }
    assert_eq!(a.reachable(&node_id(1)), Some(1), "still a neighbour");
    assert!(!a.is_foreign(&node_id(1)));
    let next = a.poll_timeout().expect("beacons are due");
    assert!(
        next > t(end),
        "woken at {next:?}, before now ({:?})",
        t(end)
    );
}

// ----- BPSec (RFC 9172, RFC 9173) -----

fn key(byte: u8, len: usize) -> bpsec::Key {
    bpsec::Key::new(&vec![byte; len])
}

fn pattern(s: &str) -> bpsec::Pattern {
    bpsec::Pattern::parse(s).unwrap()
}

/// Node 0 signs and encrypts what it sends to node 2; node 2 verifies and decrypts.
fn secured(c: &mut NodeConfig, hmac: &bpsec::Key, aes: &bpsec::Key) {
    if c.node_id == node_id(0) {
        c.bpsec.sign.push(bpsec::SignRule {
            destinations: pattern("dtn://n2/*"),
            key: hmac.clone(),
            sha: bpsec::bib::ShaVariant::Sha256,
            scope: bpsec::SCOPE_ALL,
        });
        c.bpsec.encrypt.push(bpsec::EncryptRule {
            destinations: pattern("dtn://n2/*"),
            key: aes.clone(),
            scope: bpsec::SCOPE_ALL,
        });
        c.bpsec.iv_fixed = [0xa5; 8];
    }
    if c.node_id == node_id(2) {
        c.bpsec.verify.push(bpsec::VerifyRule {
            sources: pattern("dtn://n0/*"),
            key: hmac.clone(),
            required: true,
        });
        c.bpsec.decrypt.push(bpsec::DecryptRule {
            sources: pattern("dtn://n0/*"),
            key: aes.clone(),
            required: true,
        });
    }
}

#[test]
fn a_signed_and_encrypted_bundle_crosses_a_relay_untouched_and_is_opened_at_its_destination() {
    let (hmac, aes) = (key(1, 32), key(2, 32));
    let mut net = Net::new(3, |c| secured(c, &hmac, &aes));
    net.link(0, 1, None);
    net.link(1, 2, None);
    net.hold_transfers = true;
    net.send(0, Outgoing::new(app(0), app(2), payload(700)));
    net.settle();
    assert_eq!(net.nodes[0].stats().bib_added, 1);
    assert_eq!(net.nodes[0].stats().bcb_added, 1);
    let (_, _, on_the_wire) = net.pending.front().cloned().unwrap();
    assert_ne!(
        on_the_wire.payload.data,
        payload(700),
        "the payload leaves encrypted"
    );
    let blocks: Vec<u64> = on_the_wire
        .extensions
        .iter()
        .map(|b| b.data.block_type())
        .collect();
    assert!(blocks.contains(&11) && blocks.contains(&12), "{blocks:?}");
    net.complete_next();
    // The relay holds no key: the bundle goes on with its security blocks as they were.
    let (from, to, relayed) = net.pending.front().cloned().unwrap();
    assert_eq!((from, to), (1, 2));
    let relayed_12 = relayed.extension(12).cloned();
    assert_eq!(relayed_12, on_the_wire.extension(12).cloned());
    assert_eq!(relayed.payload.data, on_the_wire.payload.data);
    net.complete_next();
    assert_eq!(net.deliveries(2).len(), 1);
    assert_eq!(net.deliveries(2)[0].payload, payload(700));
    let s = net.nodes[2].stats();
    assert_eq!((s.bcb_decrypted, s.bib_verified), (1, 1));
}

#[test]
fn a_tampered_or_wrongly_keyed_bundle_is_dropped_reported_and_counted() {
    let (hmac, aes) = (key(1, 32), key(2, 32));
    // Node 1 verifies what node 0 signs (a relay with the key: a security verifier).
    let mut net = Net::new(3, |c| {
        secured(c, &hmac, &aes);
        if c.node_id == node_id(1) {
            c.bpsec.verify.push(bpsec::VerifyRule {
                sources: pattern("dtn://n0/*"),
                key: hmac.clone(),
                required: false,
            });
        }
        if c.node_id == node_id(0) {
            // Signed only, so the relay can read the BIB.
            c.bpsec.encrypt.clear();
        }
    });
    net.link(0, 1, None);
    net.link(1, 2, None);
    net.hold_transfers = true;
    let mut out = Outgoing::new(app(0), app(2), payload(300));
    out.flags = BundleFlags(BundleFlags::REPORT_DELETION);
    let id = net.send(0, out);
    net.settle();
    let (_, _, mut bundle) = net.pending.pop_front().unwrap();
    let mut altered = bundle.payload.data.to_vec();
    altered[10] ^= 1;
    bundle.payload.data = Bytes::from(altered);
    net.nodes[1].handle_bundle(DtnTime::from_millis(net.now), LinkId(0), bundle);
    net.settle();
    assert!(net.events[1].contains(&Event::Dropped {
        id: id.clone(),
        reason: DropReason::SecurityFailed
    }));
    assert_eq!(net.nodes[1].stats().bib_failed, 1);
    assert!(
        net.pending.iter().all(|(_, _, b)| b.id() != id),
        "not forwarded"
    );
    while !net.pending.is_empty() {
        net.complete_next();
    }
    let reports = status_reports(&net, 0);
    let deleted: Vec<_> = reports.iter().filter(|r| r.deleted.is_some()).collect();
    assert_eq!(deleted.len(), 1, "{reports:?}");
    assert_eq!(deleted[0].reason, StatusReason::Other(15));

    // Node 2 requires a signature and a BCB from node 0: the unencrypted bundle is refused.
    let id2 = net.send(0, Outgoing::new(app(0), app(2), payload(301)));
    net.settle();
    while !net.pending.is_empty() {
        net.complete_next();
    }
    assert!(net.events[2].contains(&Event::Dropped {
        id: id2,
        reason: DropReason::SecurityMissing
    }));
    assert_eq!(net.nodes[2].stats().security_missing, 1);
    assert_eq!(net.deliveries(2).len(), 0);
}

#[test]
fn a_bcb_the_destination_cannot_decrypt_drops_the_bundle() {
    let (hmac, aes) = (key(1, 32), key(2, 16));
    let wrong = key(3, 16);
    let mut net = Net::new(3, |c| {
        secured(c, &hmac, &aes);
        if c.node_id == node_id(2) {
            c.bpsec.decrypt[0].key = wrong.clone();
        }
    });
    net.link(0, 2, None);
    net.send(0, Outgoing::new(app(0), app(2), payload(64)));
    net.settle();
    assert_eq!(net.deliveries(2).len(), 0);
    assert_eq!(net.nodes[2].stats().bcb_failed, 1);
    // Refused once: the purge set keeps node 0 from offering it again.
    net.advance_to(net.now + 60_000);
    let drops: Vec<_> = net.events[2]
        .iter()
        .filter(|e| matches!(e, Event::Dropped { .. }))
        .collect();
    assert_eq!(net.nodes[2].stats().dropped, 1, "{drops:?}");
    assert_eq!(
        net.nodes[0].held_bundles().count(),
        0,
        "node 0 learnt it is gone"
    );
}

#[test]
fn a_key_of_the_wrong_length_refuses_the_send() {
    let mut net = Net::new(2, |c| {
        c.bpsec.encrypt.push(bpsec::EncryptRule {
            destinations: pattern("*"),
            key: key(1, 20),
            scope: bpsec::SCOPE_ALL,
        });
    });
    let err = net.nodes[0]
        .send(
            DtnTime::from_millis(net.now),
            Outgoing::new(app(0), app(1), payload(10)),
        )
        .unwrap_err();
    assert!(matches!(err, node::SendError::Security(_)), "{err}");
    assert_eq!(net.nodes[0].held_bundles().count(), 0);
}

#[test]
fn broadcast_bundles_are_signed_and_verified_but_never_encrypted() {
    let (hmac, aes) = (key(1, 32), key(2, 32));
    let mut net = Net::new(2, |c| {
        c.bpsec.sign.push(bpsec::SignRule {
            destinations: pattern("*"),
            key: hmac.clone(),
            sha: bpsec::bib::ShaVariant::Sha384,
            scope: bpsec::SCOPE_ALL,
        });
        c.bpsec.encrypt.push(bpsec::EncryptRule {
            destinations: pattern("*"),
            key: aes.clone(),
            scope: bpsec::SCOPE_ALL,
        });
        c.bpsec.verify.push(bpsec::VerifyRule {
            sources: pattern("*"),
            key: hmac.clone(),
            required: true,
        });
    });
    net.link(0, 1, None);
    // Every node it reaches delivers a broadcast bundle: none could be a BCB's one acceptor.
    net.send(
        0,
        Outgoing::new(app(0), eid("dtn://~all/~news"), payload(40)),
    );
    net.settle();
    assert_eq!(net.nodes[0].stats().bib_added, 1);
    assert_eq!(net.nodes[0].stats().bcb_added, 0);
    assert_eq!(net.deliveries(1).len(), 1);
    assert_eq!(net.deliveries(1)[0].payload, payload(40));
    assert_eq!(net.nodes[1].stats().bib_verified, 1);
}

#[test]
fn a_protected_bundle_cut_into_pieces_is_checked_once_whole_at_its_destination() {
    let (hmac, aes) = (key(1, 32), key(2, 32));
    // Node 0 signs and encrypts for node 2 (`secured`); node 2 requires both.
    let mut net = Net::new(3, |c| {
        secured(c, &hmac, &aes);
        c.min_piece = 512;
    });
    let data = payload(10_000);
    net.send(0, Outgoing::new(app(0), app(2), data.clone()));
    net.link(0, 2, Some(1_500));
    assert!(net.nodes[0].stats().fragments_sent >= 7);
    let got = net.deliveries(2);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, data);
    let s = net.nodes[2].stats();
    assert_eq!((s.bcb_decrypted, s.bib_verified, s.dropped), (1, 1, 0));
}

/// A node routing by a contact plan waits for the planned next hop instead of handing a bundle to
/// the neighbour it has; when the plan's journey through node 2 is over (its contacts end, and in
/// this test it never came: the link to 2 did not come up), the route goes through neighbour 1,
/// which has been here all along, and the bundle goes to it at once. Once 1 holds it whole,
/// node 0 no longer keeps it.
#[test]
fn a_planned_route_is_followed_and_changes_when_the_plan_does() {
    use node::cgr::ContactGraph;
    use node::plan::Contact;
    let at = |s: u64| DtnTime::from_millis(T0 + s * 1_000);
    let contact = |a: usize, b: usize, start: u64, end: u64| Contact {
        a: node_id(a),
        b: node_id(b),
        start: at(start),
        end: at(end),
    };
    let graph = std::sync::Arc::new(ContactGraph::new([
        contact(0, 1, 0, 1_000),
        contact(0, 2, 10, 15),
        contact(2, 3, 20, 30),
        contact(1, 3, 100, 200),
    ]));
    let mut net = Net::new(4, |c| c.contact_graph = Some(graph.clone()));
    net.link(0, 1, None);
    net.advance_to(T0 + 1_000); // summaries exchanged
    let id = net.send(0, Outgoing::new(app(0), app(3), payload(2_000)));
    // The earliest journey is 0 → 2 at 10 s → 3 at 20 s: neighbour 1 gets nothing.
    net.advance_to(T0 + 14_000);
    assert!(net.nodes[1].held_bundles().all(|(b, _)| *b != id));
    assert!(net.nodes[0].held_bundles().any(|(b, _)| *b == id));
    // At 15 s the contact with 2 is over: 1 (on its way to 3 at 100 s) is the next hop now.
    net.advance_to(T0 + 15_000);
    assert!(net.nodes[1].held_bundles().any(|(b, _)| *b == id));
    assert!(net.nodes[0].held_bundles().all(|(b, _)| *b != id));
    assert_eq!(net.nodes[0].stats().planned_handoffs, 1);
    // Node 1 keeps it for its contact with 3 and sends it nowhere else: node 0 is not on the way.
    net.advance_to(T0 + 60_000);
    assert!(net.nodes[1].held_bundles().any(|(b, _)| *b == id));
    assert!(net.nodes[0].held_bundles().all(|(b, _)| *b != id));
}

#[test]
fn a_peer_whose_transfer_mru_leaves_no_room_for_a_worthwhile_piece_gets_no_pieces() {
    // A TCPCL peer announces the transfer MRU the node cuts bundles to (its link's MTU). One
    // that announces 300 bytes would have a 1 MB bundle cut into pieces of a few hundred bytes
    // (100 bytes: of one byte each, a million bundles built at once), from one message of a
    // stranger.
    let mut net = Net::new(2, |_| {});
    net.hold_transfers = true;
    net.send(0, Outgoing::new(app(0), app(1), payload(1_000_000)));
    net.link(0, 1, Some(300));
    assert!(
        net.pending.is_empty(),
        "{} pieces handed over",
        net.pending.len()
    );
    assert!(net.nodes[0].stats().mtu_too_small >= 1);
    // What fits whole still goes.
    net.send(0, Outgoing::new(app(0), app(1), payload(10)));
    assert_eq!(net.pending.len(), 1);
    // A peer whose MRU leaves room for pieces of at least `min_piece` gets pieces.
    net.unlink(0, 1);
    net.link(0, 1, Some(10_000));
    assert!(
        net.pending
            .iter()
            .all(|(_, _, b)| b.payload.data.len() <= 10_000)
    );
    assert!(net.pending.len() > 100, "{} pieces", net.pending.len());
}
