//! A daemon whose store's disk fills up: sends are refused with an error that says so (never a
//! hang or a panic), every send answered as accepted is still delivered, and once an application
//! takes what waits in its inbox the daemon accepts sends again.
//!
//! Needs root to mount a small tmpfs (CI and the development machines run as root). Without it
//! the test says why on stderr and passes without checking anything.

// An I/O test: it mounts a file system and runs `mount`/`umount`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use base64::Engine as _;
use daemon::control::{Request, SendRequest};

mod common;
use common::{TempDir, loopback_config};

#[path = "../../store/tests/support/tmpfs.rs"]
mod tmpfs;
use tmpfs::mount_tmpfs;

const ENDPOINT: &str = "dtn://solo/inbox";
/// Kept in the database (below the store's file threshold), so the database's own writes are
/// what runs out of room.
const PAYLOAD: usize = 8 * 1024;
/// Far more than fits: 16 MiB against a 4 MiB file system.
const MOST_SENDS: usize = 2_000;

/// Unique per `seq`: it starts with `seq`.
fn payload(seq: usize) -> Vec<u8> {
    let mut p = (seq as u64).to_le_bytes().to_vec();
    p.extend((p.len()..PAYLOAD).map(|i| (i ^ seq) as u8));
    p
}

async fn send(node: &daemon::Running, seq: usize) -> Result<(), String> {
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(payload(seq))),
        lifetime: Some("1h".into()),
        ..SendRequest::to(ENDPOINT)
    };
    let asked = tokio::time::timeout(
        Duration::from_secs(20),
        node.control.ask(|reply| Request::Send(req, reply)),
    )
    .await
    .map_err(|_| format!("send {seq} was not answered within 20 s"))?;
    match asked {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => panic!("the daemon is gone: {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_sends_clearly_and_loses_no_accepted_bundle() {
    let temp = TempDir::new("daemon-disk-full");
    let data = temp.path().join("data");
    std::fs::create_dir_all(&data).expect("create the data directory");
    let _mount = match mount_tmpfs(&data, "4m") {
        Ok(mount) => mount,
        Err(why) => {
            eprintln!("skipped: cannot mount a tmpfs ({why})");
            return;
        }
    };
    let node = daemon::start(loopback_config("solo", &data, 0))
        .await
        .expect("start the daemon");

    let mut accepted = Vec::new();
    let mut refusal = None;
    for seq in 0..MOST_SENDS {
        match send(&node, seq).await {
            Ok(()) => accepted.push(seq),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    let refusal = refusal.expect("16 MiB of sends cannot fit on a 4 MiB file system");
    assert!(
        refusal.contains("full") || refusal.contains("space"),
        "the refusal must say the disk is full: {refusal}"
    );
    assert!(
        !accepted.is_empty(),
        "nothing was accepted before the disk filled"
    );

    // Every accepted send was delivered, intact; taking them frees their room.
    let mut seen = Vec::new();
    while seen.len() < accepted.len() {
        let got = node
            .control
            .wait_for(
                ENDPOINT,
                accepted.len() - seen.len(),
                None,
                true,
                Duration::from_secs(20),
            )
            .await
            .expect("read the inbox");
        assert!(
            !got.is_empty(),
            "only {} of {} accepted bundles were delivered",
            seen.len(),
            accepted.len()
        );
        for r in got {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(r.payload_base64.as_deref().expect("asked with payloads"))
                .expect("base64");
            let seq = accepted
                .iter()
                .copied()
                .find(|&s| payload(s) == bytes)
                .expect("a delivered payload is one that was accepted");
            seen.push(seq);
            node.control.ack(ENDPOINT, r.seq).await.expect("ack");
        }
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, accepted, "every accepted bundle once");

    // With the inbox emptied the daemon accepts sends again.
    let mut again = Err(String::new());
    for attempt in 0..50 {
        again = send(&node, MOST_SENDS + attempt).await;
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        again.is_ok(),
        "still refused after the inbox was emptied: {again:?}"
    );
    node.shut_down().await;
}
