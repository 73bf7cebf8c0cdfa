//! Whole-network scenarios in virtual time: the paper's topologies, the routing strategies,
//! fragmentation across short contacts, and determinism by seed.

use node::StrategyKind;
use sim::{ContactPlan, Report, Scenario, Sim, Topology, Workload};

const MINUTE: u64 = 60_000;

fn run(scenario: Scenario) -> Report {
    let seed = scenario.seed;
    match Sim::new(scenario).run() {
        Ok(report) => report,
        Err(v) => panic!("seed {seed}: {v}"),
    }
}

fn small_load(bundles: usize, size: usize) -> Workload {
    Workload {
        bundles,
        size,
        start_ms: 5_000,
        spread_ms: 5 * MINUTE,
        ..Workload::default()
    }
}

#[test]
fn the_same_seed_replays_the_same_run_and_another_seed_does_not() {
    for topology in [
        Topology::Hub { nodes: 8 },
        Topology::Chained { nodes: 8 },
        Topology::Islands {
            nodes: 24,
            islands: 4,
            period_ms: MINUTE,
        },
    ] {
        let scenario = |seed| {
            let mut s = Scenario::new(seed, topology.clone(), StrategyKind::Epidemic, 15 * MINUTE);
            s.workload = small_load(10, 20_000);
            s.link.loss = 0.05;
            s
        };
        for seed in [1, 2] {
            let a = run(scenario(seed));
            let b = run(scenario(seed));
            assert_eq!(a, b, "{topology} seed {seed} is not deterministic");
        }
        assert_ne!(
            run(scenario(1)).trace_hash,
            run(scenario(2)).trace_hash,
            "{topology}: different seeds gave the same trace"
        );
    }
}

#[test]
fn epidemic_delivers_everything_on_the_paper_topologies() {
    for topology in [Topology::hub(), Topology::chained(), Topology::islands()] {
        for seed in [1, 2] {
            let mut s = Scenario::new(seed, topology.clone(), StrategyKind::Epidemic, 40 * MINUTE);
            s.workload = small_load(10, 50_000);
            s.beacon_period_ms = 5_000;
            let r = run(s);
            assert_eq!(r.sent, 10, "{topology} seed {seed}");
            assert_eq!(r.delivered, 10, "{topology} seed {seed}:\n{r}");
            // Delivered bundles are purged network-wide, not carried until they expire.
            assert_eq!(r.held_at_end, 0, "{topology} seed {seed}:\n{r}");
            // Every hop shared the source's payload buffer: no copy anywhere on the way.
            assert_eq!(r.shared_payloads, 10, "{topology} seed {seed}");
        }
    }
}

#[test]
fn spray_and_wait_and_direct_spend_fewer_bytes_than_epidemic() {
    let scenario = |strategy| {
        let mut s = Scenario::new(3, Topology::islands(), strategy, 30 * MINUTE);
        s.workload = small_load(20, 100_000);
        s.beacon_period_ms = 5_000;
        s
    };
    let epidemic = run(scenario(StrategyKind::Epidemic));
    let spray = run(scenario(StrategyKind::SprayAndWait { copies: 8 }));
    let direct = run(scenario(StrategyKind::Direct));
    let bytes = |r: &Report| r.bytes_sent.iter().sum::<u64>();
    assert!(
        bytes(&spray) < bytes(&epidemic),
        "spray {} vs epidemic {}",
        bytes(&spray),
        bytes(&epidemic)
    );
    assert!(bytes(&direct) < bytes(&spray));
    assert!(epidemic.delivered >= spray.delivered && spray.delivered > 0);
    // Direct delivery still delivers over live mesh paths inside an island.
    assert!(direct.delivered > 0, "{direct}");
}

#[test]
fn datagrams_cross_a_connected_chain_at_once_and_are_never_stored() {
    let mut s = Scenario::new(
        5,
        Topology::Chained { nodes: 10 },
        StrategyKind::Epidemic,
        5 * MINUTE,
    );
    s.workload = Workload {
        class: node::Class::Datagram,
        pair: Some((0, 9)),
        start_ms: 60_000, // after the mesh has converged
        spread_ms: 10_000,
        ..small_load(20, 1_000)
    };
    let r = run(s);
    assert_eq!(r.delivered, 20, "{r}");
    // Nine hops of 5 ms latency plus transmission: well under a second.
    assert!(r.latency_percentile(100.0).unwrap() < 1_000, "{r}");
    assert_eq!(r.held_at_end, 0);
}

/// A 100 MB bundle over a link that is up 20 s of every minute: 25 MB per contact at 10 Mbit/s,
/// so it needs four contacts and must never start again from zero.
fn short_contacts(hints: bool, relay: bool) -> Report {
    let text = if relay {
        "nodes 3\nrepeat 0 1 up 20 down 40 until 1200\nrepeat 1 2 up 20 down 40 until 1200 from 30\n"
    } else {
        "nodes 2\nrepeat 0 1 up 20 down 40 until 1200\n"
    };
    let plan: ContactPlan = text.parse().expect("plan parses");
    let dest = plan.nodes - 1;
    let mut s = Scenario::new(7, Topology::Plan(plan), StrategyKind::Epidemic, 20 * MINUTE);
    s.contact_hints = hints;
    s.workload = Workload {
        bundles: 1,
        size: 100_000_000,
        start_ms: 1_000,
        spread_ms: 1,
        pair: Some((0, dest)),
        ..Workload::default()
    };
    run(s)
}

#[test]
fn a_100_mb_bundle_crosses_20_second_contacts_without_restarting() {
    for (hints, relay) in [(true, false), (false, false), (false, true), (true, true)] {
        let r = short_contacts(hints, relay);
        assert_eq!(r.delivered, 1, "hints {hints} relay {relay}:\n{r}");
        assert!(
            r.fragments > 0 || !hints,
            "hints {hints}: no proactive fragments\n{r}"
        );
        // The source sends the payload about once: never from zero again after a cut.
        let source_bytes = r.bytes_sent[0];
        assert!(
            source_bytes < 103_000_000,
            "hints {hints} relay {relay}: source sent {source_bytes} bytes\n{r}"
        );
        // Four contacts at least (25 MB each), and not many more.
        let latency = r.latencies_ms[0];
        assert!(latency > 3 * MINUTE && latency < 10 * MINUTE, "{r}");
    }
}

/// Power cuts on a slow disk while epidemic routing carries bundles across the Islands: a node
/// loses every commit its last sync did not cover, yet no bundle reaches its application twice
/// or altered (the run's invariants), and the bundles still arrive: a receiver tells its
/// sender that it holds a bundle only once that is durable, so the sender keeps its copy until
/// then.
#[test]
fn power_cuts_lose_no_bundle_and_deliver_none_twice() {
    let mut s = Scenario::new(
        11,
        Topology::Islands {
            nodes: 16,
            islands: 4,
            period_ms: 20_000,
        },
        StrategyKind::Epidemic,
        20 * MINUTE,
    );
    s.workload = small_load(60, 10_000);
    s.disk = Some(sim::DiskModel { sync_ms: 250 });
    let mut sim = Sim::new(s);
    let mut rng = sim::Rng::new(11);
    let mut at = 6_000;
    let mut cuts = 0;
    while at < 6 * MINUTE {
        sim.schedule_power_cut(at, rng.below(16) as usize);
        cuts += 1;
        at += 200 + rng.below(1_000);
    }
    let report = match sim.run_in_place() {
        Ok(r) => r,
        Err(v) => panic!("{v}"),
    };
    let lost: u64 = (0..16).map(|i| sim.commits(i).1).sum();
    assert!(lost > 0, "{cuts} power cuts lost nothing");
    // A bundle whose source lost power before it was durable there was never accepted (the
    // daemon answers a send once it is durable): every accepted one arrives, none twice.
    assert!(report.sent >= 55, "{} of 60 accepted", report.sent);
    assert_eq!(
        report.delivered, report.sent,
        "accepted bundles lost after {cuts} power cuts ({lost} commits lost)"
    );
    eprintln!(
        "{cuts} power cuts, {lost} commits lost; {} of {} delivered",
        report.delivered, report.sent
    );
}

fn planned(plan: &str, route_by_plan: bool, workload: Workload, minutes: u64) -> Report {
    let plan: ContactPlan = plan.parse().expect("plan parses");
    let mut s = Scenario::new(
        5,
        Topology::Plan(plan),
        StrategyKind::Epidemic,
        minutes * MINUTE,
    );
    s.route_by_plan = route_by_plan;
    s.workload = workload;
    run(s)
}

/// Node 0 meets three data mules at once; mule 1 meets the destination (5) at 200 s, mule 2
/// meets node 4 at 150 s, which meets the destination at 170 s, and mule 3 goes nowhere useful.
/// Epidemic routing copies every bundle to all three mules and on to node 4; routing by the plan
/// sends each along 0 → 2 → 4 → 5, the earliest journey, and nowhere else.
#[test]
fn routing_by_the_plan_takes_the_earliest_journey_and_sends_nothing_elsewhere() {
    let plan = "nodes 6\n\
        0 up 0 1\n100 down 0 1\n0 up 0 2\n100 down 0 2\n0 up 0 3\n100 down 0 3\n\
        200 up 1 5\n300 down 1 5\n\
        150 up 2 4\n250 down 2 4\n150 up 3 4\n250 down 3 4\n\
        170 up 4 5\n270 down 4 5\n";
    let load = Workload {
        bundles: 10,
        size: 100_000,
        start_ms: 5_000,
        spread_ms: 30_000,
        pair: Some((0, 5)),
        ..Workload::default()
    };
    let epidemic = planned(plan, false, load, 6);
    let cgr = planned(plan, true, load, 6);
    assert_eq!(epidemic.delivered, 10, "{epidemic}");
    assert_eq!(cgr.delivered, 10, "{cgr}");
    // Every bundle arrived over the 0 → 2 → 4 → 5 journey: at 170 s, not at 200 s through 1.
    assert!(
        cgr.latencies_ms.iter().all(|&l| l < 170_000),
        "{:?}",
        cgr.latencies_ms
    );
    // Mules 1 and 3 carry nothing; the payload crossed three contacts once each.
    let payload = 10 * 100_000;
    let total: u64 = cgr.bytes_sent.iter().sum();
    assert!(cgr.bytes_sent[1] < payload / 10, "{:?}", cgr.bytes_sent);
    assert!(cgr.bytes_sent[3] < payload / 10, "{:?}", cgr.bytes_sent);
    assert!(total < 3 * payload + payload / 5, "{:?}", cgr.bytes_sent);
    let flooded: u64 = epidemic.bytes_sent.iter().sum();
    assert!(flooded > 5 * payload, "{:?}", epidemic.bytes_sent);
    // What the plan routed, each node released once the next hop held it.
    assert_eq!(cgr.held_at_end, 0, "{cgr}");
}

/// A timetable (`examples/plans/timetable.plan`): eight stations on a ring whose links are up
/// 30 s of every 2 minutes, each a little later than the one before, and four cross links.
/// Random pairs, so most bundles need several contacts. Routing by the plan delivers what
/// epidemic routing delivers, in far fewer bytes: each bundle crosses the contacts of one
/// journey instead of spreading until the purge set catches up with it.
#[test]
fn on_a_timetable_the_plan_matches_epidemic_delivery_in_fewer_bytes() {
    let plan = include_str!("../../../examples/plans/timetable.plan");
    let load = Workload {
        bundles: 40,
        size: 100_000,
        start_ms: 5_000,
        spread_ms: 20 * MINUTE,
        ..Workload::default()
    };
    let epidemic = planned(plan, false, load, 60);
    let cgr = planned(plan, true, load, 60);
    assert_eq!(epidemic.delivered, 40, "{epidemic}");
    assert_eq!(cgr.delivered, epidemic.delivered, "{cgr}");
    let (flooded, routed): (u64, u64) = (
        epidemic.bytes_sent.iter().sum(),
        cgr.bytes_sent.iter().sum(),
    );
    assert!(
        routed * 10 < flooded * 7,
        "plan {routed} bytes, epidemic {flooded} bytes"
    );
    // Earliest-arrival routes: no later than epidemic's flood, which tries every journey.
    let mean = |r: &Report| r.latencies_ms.iter().sum::<u64>() / r.latencies_ms.len() as u64;
    assert!(
        mean(&cgr) <= mean(&epidemic) + 1_000,
        "plan {} ms, epidemic {} ms",
        mean(&cgr),
        mean(&epidemic)
    );
}

/// A 10 MB bundle in pieces of 1 MB across a full mesh of six nodes, where the direct link
/// alone carries it in 8 s at 10 Mbit/s. Each link of a node starts at another piece, so the
/// other four neighbours get different pieces first and pass them on over their own links to
/// the destination: the bundle arrives over several links at once (5.8 s), before the direct
/// link alone could bring it. Sent in the same order on every link, as before 1fda9e6, every
/// piece reached the destination first over the direct link, and the bundle took its 8 s.
#[test]
fn a_bundle_in_pieces_crosses_a_mesh_over_several_links_at_once() {
    let mut s = Scenario::new(
        3,
        Topology::Hub { nodes: 6 },
        StrategyKind::Epidemic,
        2 * MINUTE,
    );
    s.max_bundle_piece = Some(1_000_000);
    s.stop_when_delivered = true;
    s.workload = Workload {
        bundles: 1,
        size: 10_000_000,
        start_ms: 5_000,
        spread_ms: 1,
        pair: Some((0, 5)),
        ..Workload::default()
    };
    let r = run(s);
    assert_eq!(r.delivered, 1, "{r}");
    let direct_ms = 10_000_000 * 8 * 1_000 / 10_000_000;
    let latency = r.latencies_ms[0];
    assert!(
        latency * 8 < direct_ms * 7,
        "{latency} ms, the direct link alone takes {direct_ms} ms\n{r}"
    );
}
