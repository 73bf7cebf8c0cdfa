//! Routing by a contact plan with real daemons: alpha has sessions with bravo and delta; the plan
//! says bravo meets charlie in ten minutes and nobody else ever does. A bundle alpha sends to
//! charlie goes to bravo alone (epidemic routing would copy it to delta too), and alpha lets go of
//! its copy once bravo holds it. Every wait is bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use daemon::control::{Request, SendRequest};
use daemon::{Config, Running};

use crate::common::{TempDir, free_port, loopback_config};

const PLAN: &str = "\
nodes 4
node 0 dtn://alpha/
node 1 dtn://bravo/
node 2 dtn://charlie/
node 3 dtn://delta/
0 up 0 1
0 up 0 3
600 up 1 2
700 down 1 2
";

fn config(
    name: &str,
    dir: &TempDir,
    port: u16,
    peers: &[SocketAddr],
    plan: Option<&str>,
) -> Config {
    let mut c = loopback_config(name, dir.path(), port);
    c.keepalive = Duration::from_secs(2);
    c.peers = peers.to_vec();
    if let Some(plan) = plan {
        let file = dir.path().join("contacts.plan");
        std::fs::write(&file, plan).unwrap();
        c.contact_plan = Some(file);
    }
    c
}

async fn holds(node: &Running, destination: &str) -> bool {
    let bundles = node.control.ask(Request::Bundles).await.unwrap();
    bundles.iter().any(|b| b.destination == destination)
}

async fn peers(node: &Running) -> usize {
    node.control.ask(Request::Status).await.unwrap().peers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_follows_the_plan_to_one_neighbour_and_is_released_there() {
    let dirs = [
        TempDir::new("plan-test"),
        TempDir::new("plan-test"),
        TempDir::new("plan-test"),
    ];
    let ports = [free_port(), free_port(), free_port()];
    let at = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
    let bravo = daemon::start(config("bravo", &dirs[1], ports[1], &[], Some(PLAN)))
        .await
        .unwrap();
    let delta = daemon::start(config("delta", &dirs[2], ports[2], &[], Some(PLAN)))
        .await
        .unwrap();
    let alpha = daemon::start(config(
        "alpha",
        &dirs[0],
        ports[0],
        &[at(ports[1]), at(ports[2])],
        Some(PLAN),
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while peers(&alpha).await < 2 {
        assert!(Instant::now() < deadline, "alpha has no sessions with both");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // `ferry routes`: delta and bravo over the mesh, charlie by the plan, through bravo, whose
    // contact with charlie starts in ten minutes.
    let routes = alpha.control.ask(Request::Routes).await.unwrap();
    let charlie = routes
        .iter()
        .find(|r| r.destination == "dtn://charlie/")
        .unwrap_or_else(|| panic!("no route to charlie: {routes:?}"));
    assert_eq!(
        (charlie.via.as_str(), charlie.next_hop.as_str()),
        ("plan", "dtn://bravo/")
    );
    assert_eq!(charlie.hops, 2);
    let (departs, arrives) = (charlie.departs_ms.unwrap(), charlie.arrives_ms.unwrap());
    assert!(
        arrives >= departs + 590_000 && arrives <= departs + 600_000,
        "{charlie:?}"
    );
    assert!(
        routes
            .iter()
            .any(|r| r.destination == "dtn://delta/" && r.via == "mesh"),
        "{routes:?}"
    );
    let req = SendRequest {
        payload: Some("the plan says bravo".into()),
        lifetime: Some("1h".into()),
        ..SendRequest::to("dtn://charlie/inbox")
    };
    alpha
        .control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    // Bravo gets it (once it and alpha exchanged summaries), and alpha lets go of it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !holds(&bravo, "dtn://charlie/inbox").await || holds(&alpha, "dtn://charlie/inbox").await
    {
        assert!(
            Instant::now() < deadline,
            "bravo holds it: {}, alpha still holds it: {}",
            holds(&bravo, "dtn://charlie/inbox").await,
            holds(&alpha, "dtn://charlie/inbox").await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = alpha.control.ask(Request::Metrics).await.unwrap();
    assert!(
        metrics.contains("ferry_planned_handoffs_total 1"),
        "{metrics}"
    );
    // Delta, a neighbour off the route, never got a copy: a new bundle is offered to every
    // neighbour at once, and the plan said no to delta.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!holds(&delta, "dtn://charlie/inbox").await);

    // A plan that does not name charlie leaves charlie's bundles to the strategy (epidemic):
    // the same send is copied to both neighbours, and alpha keeps its own.
    let plain = "nodes 2\nnode 0 dtn://alpha/\nnode 1 dtn://bravo/\n0 up 0 1\n";
    let dirs2 = [
        TempDir::new("plan-test"),
        TempDir::new("plan-test"),
        TempDir::new("plan-test"),
    ];
    let ports2 = [free_port(), free_port(), free_port()];
    let b2 = daemon::start(config("bravo", &dirs2[1], ports2[1], &[], None))
        .await
        .unwrap();
    let d2 = daemon::start(config("delta", &dirs2[2], ports2[2], &[], None))
        .await
        .unwrap();
    let a2 = daemon::start(config(
        "alpha",
        &dirs2[0],
        ports2[0],
        &[at(ports2[1]), at(ports2[2])],
        Some(plain),
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while peers(&a2).await < 2 {
        assert!(Instant::now() < deadline, "alpha has no sessions with both");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let req = SendRequest {
        payload: Some("no plan for charlie".into()),
        lifetime: Some("1h".into()),
        ..SendRequest::to("dtn://charlie/inbox")
    };
    a2.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(holds(&b2, "dtn://charlie/inbox").await && holds(&d2, "dtn://charlie/inbox").await) {
        assert!(
            Instant::now() < deadline,
            "epidemic did not copy it to both"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        holds(&a2, "dtn://charlie/inbox").await,
        "epidemic keeps a copy"
    );

    for node in [alpha, bravo, delta, a2, b2, d2] {
        node.shut_down().await;
    }
}
