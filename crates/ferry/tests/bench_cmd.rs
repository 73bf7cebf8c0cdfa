//! `ferry bench contact --quick` and `ferry bench queue --quick`, cut down to a few seconds of
//! link time: the commands run real nodes in namespaces of their own, write their report (the
//! README, the plots as SVG and PNG, the per-run CSV), remove their namespaces, and the share of
//! a contact's capacity Ferry delivered is more than 0 and at most 100 %. A test of behaviour,
//! not a benchmark: no figure is compared with a target here.
//!
//! Needs root and iproute2 (and tc); without them it says so and passes, unless
//! `FERRY_REQUIRE_NETNS=1`. dtnd rows run when dtnd is found and say "not found" otherwise.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;

use common::FERRY;

fn bench(args: &[&str], out: &Path) -> String {
    let mut cmd = Command::new(FERRY);
    cmd.arg("bench").args(args).arg("--out").arg(out);
    let output = common::output_within(cmd, Duration::from_secs(120))
        .expect("ferry bench did not end within 120 s");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "ferry bench {args:?}:\n{text}");
    text
}

/// No namespace of this process's runs is left (they are named `fb<pid>…`, but the pid is the
/// bench's: any `fb` namespace made by a bench this test started is gone once it returned).
fn namespaces() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_quick_contact_and_queue_bench_writes_its_report_and_cleans_up() {
    if common::netns::skipped() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("ferry-bench-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let before = namespaces();

    let contact = dir.join("contact");
    let text = bench(
        &[
            "contact", "--quick", "--repeat", "1", "--sizes", "1MB", "--total", "5MB", "--up",
            "2s", "--period", "4s",
        ],
        &contact,
    );
    for file in [
        "README.md",
        "contact.csv",
        "contact-share.svg",
        "contact-share.png",
        "contact-first-payload.svg",
        "contact-first-payload.png",
    ] {
        assert!(contact.join(file).is_file(), "no {file}; output:\n{text}");
    }
    let csv = std::fs::read_to_string(contact.join("contact.csv")).unwrap();
    let ferry: Vec<&str> = csv.lines().filter(|l| l.contains(",ferry,")).collect();
    assert_eq!(ferry.len(), 1, "{csv}");
    let share: f64 = ferry[0].split(',').nth(4).unwrap().parse().unwrap();
    assert!(
        share > 0.0 && share <= 100.0,
        "Ferry delivered {share} % of the capacity:\n{csv}\n{text}"
    );
    let readme = std::fs::read_to_string(contact.join("README.md")).unwrap();
    assert!(
        readme.contains("## Machine") && readme.contains("ferry"),
        "{readme}"
    );

    // Ferry's nodes finding each other by beacons alone: the contact still carries bundles.
    let by_beacons = dir.join("contact-beacons");
    let text = bench(
        &[
            "contact",
            "--quick",
            "--repeat",
            "1",
            "--sizes",
            "1MB",
            "--total",
            "5MB",
            "--up",
            "2s",
            "--period",
            "4s",
            "--discovery",
            "--dtnd",
            "none",
        ],
        &by_beacons,
    );
    let csv = std::fs::read_to_string(by_beacons.join("contact.csv")).unwrap();
    let ferry: Vec<&str> = csv.lines().filter(|l| l.contains(",ferry,")).collect();
    assert_eq!(ferry.len(), 1, "{csv}");
    let share: f64 = ferry[0].split(',').nth(4).unwrap().parse().unwrap();
    assert!(
        share > 0.0 && share <= 100.0,
        "by beacons, Ferry delivered {share} % of the capacity:\n{csv}\n{text}"
    );
    let readme = std::fs::read_to_string(by_beacons.join("README.md")).unwrap();
    assert!(readme.contains("by their beacons alone"), "{readme}");

    let queue = dir.join("queue");
    let text = bench(
        &[
            "queue", "--quick", "--repeat", "1", "--sizes", "1KiB", "--count", "50",
        ],
        &queue,
    );
    for file in [
        "README.md",
        "queue.csv",
        "references.csv",
        "queue.svg",
        "queue.png",
    ] {
        assert!(queue.join(file).is_file(), "no {file}; output:\n{text}");
    }
    let csv = std::fs::read_to_string(queue.join("queue.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l.starts_with("1024,ferry,1,50,")),
        "{csv}\n{text}"
    );
    // The same with the memory store (`ferry node --store memory`).
    assert!(
        csv.lines()
            .any(|l| l.starts_with("1024,ferry-memory,1,50,")),
        "{csv}\n{text}"
    );

    // Every namespace the benches made is gone (another user's may have come or gone).
    let after = namespaces();
    assert!(
        !after
            .lines()
            .any(|l| l.starts_with("fb") && !before.contains(l)),
        "namespaces left behind:\n{after}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
