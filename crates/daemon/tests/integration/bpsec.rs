//! BPSec between real daemons on loopback: alpha signs and encrypts what it sends to bravo,
//! which verifies, decrypts and delivers it; carol holds another key than alpha's, and the
//! bundle alpha signs for her is dropped and counted. Keys and rules come from `[bpsec]` TOML,
//! as an operator writes them.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use daemon::Running;
use daemon::control::{Request, SendRequest};

use crate::common::{TempDir, free_port, loopback_config};

const MAC: &str = "1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b";
const AES: &str = "71776572747975696f7061736466676871776572747975696f70617364666768";
const OTHER_MAC: &str = "99999999999999999999999999999999";

fn config(name: &str, dir: &Path, port: u16, peers: &[SocketAddr], bpsec: &str) -> daemon::Config {
    let mut c = loopback_config(name, dir, port);
    c.keepalive = Duration::from_secs(2);
    c.peers = peers.to_vec();
    c.bpsec = daemon::Config::from_toml(bpsec, name)
        .expect("the [bpsec] section parses")
        .bpsec;
    c
}

async fn metric(node: &Running, name: &str) -> u64 {
    let text = node.control.ask(Request::Metrics).await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

async fn wait_for_metric(node: &Running, name: &str, value: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while metric(node, name).await < value {
        assert!(
            Instant::now() < deadline,
            "{name} did not reach {value} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn send(node: &Running, destination: &str, payload: &[u8]) {
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(payload)),
        lifetime: Some("10m".into()),
        ..SendRequest::to(destination)
    };
    node.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_and_encrypted_bundles_open_at_their_destination_and_a_wrong_key_drops_them() {
    let dirs = (
        TempDir::new("bpsec"),
        TempDir::new("bpsec"),
        TempDir::new("bpsec"),
    );
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let addr = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
    let alpha_rules = format!(
        "[[bpsec.key]]\nname = \"mac\"\nhex = \"{MAC}\"\n\
         [[bpsec.key]]\nname = \"aes\"\nhex = \"{AES}\"\n\
         [[bpsec.sign]]\ndestinations = \"*\"\nkey = \"mac\"\n\
         [[bpsec.encrypt]]\ndestinations = \"dtn://bravo/*\"\nkey = \"aes\"\n"
    );
    let bravo_rules = format!(
        "[[bpsec.key]]\nname = \"mac\"\nhex = \"{MAC}\"\n\
         [[bpsec.key]]\nname = \"aes\"\nhex = \"{AES}\"\n\
         [[bpsec.verify]]\nsources = \"dtn://alpha/*\"\nkey = \"mac\"\nrequired = true\n\
         [[bpsec.decrypt]]\nsources = \"dtn://alpha/*\"\nkey = \"aes\"\nrequired = true\n"
    );
    let carol_rules = format!(
        "[[bpsec.key]]\nname = \"mac\"\nhex = \"{OTHER_MAC}\"\n\
         [[bpsec.verify]]\nsources = \"dtn://alpha/*\"\nkey = \"mac\"\n"
    );
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[], &bravo_rules))
        .await
        .unwrap();
    let c = daemon::start(config("carol", dirs.2.path(), pc, &[], &carol_rules))
        .await
        .unwrap();
    let a = daemon::start(config(
        "alpha",
        dirs.0.path(),
        pa,
        &[addr(pb), addr(pc)],
        &alpha_rules,
    ))
    .await
    .unwrap();

    send(&a, "dtn://bravo/inbox", b"for bravo's eyes").await;
    let got = b
        .control
        .wait_for("inbox", 1, None, true, Duration::from_secs(15))
        .await
        .unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(got[0].payload_base64.as_deref().unwrap())
        .unwrap();
    assert_eq!(payload, b"for bravo's eyes");
    // The RPC engines' hellos are bundles alpha sends too: they are signed (and, to bravo,
    // encrypted) as well, so these count at least the one bundle.
    assert!(metric(&a, "ferry_bpsec_bib_added_total").await >= 2);
    assert!(metric(&a, "ferry_bpsec_bcb_added_total").await >= 1);
    assert!(metric(&b, "ferry_bpsec_bcb_decrypted_total").await >= 1);
    assert!(metric(&b, "ferry_bpsec_bib_verified_total").await >= 1);
    assert_eq!(metric(&b, "ferry_bpsec_bib_failed_total").await, 0);
    assert_eq!(metric(&b, "ferry_bpsec_missing_total").await, 0);

    // Carol verifies alpha's BIBs with another key: the signed bundle never reaches her inbox.
    let before = metric(&c, "ferry_bpsec_bib_failed_total").await;
    send(&a, "dtn://carol/inbox", b"for carol").await;
    wait_for_metric(
        &c,
        "ferry_bpsec_bib_failed_total",
        before + 1,
        Duration::from_secs(15),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        c.control.ask(Request::Status).await.unwrap().inbox_bundles,
        0
    );
    let dropped = c.control.ask(Request::Metrics).await.unwrap();
    assert!(
        dropped.contains("reason=\"security_failed\""),
        "the drop is counted by reason"
    );

    a.shut_down().await;
    b.shut_down().await;
    c.shut_down().await;
}
