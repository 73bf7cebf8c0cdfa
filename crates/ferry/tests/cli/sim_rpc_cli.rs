//! `ferry sim --rpc …`: the DTN-RPC paper's experiments from the command line, small enough for a
//! test: their tables, a verdict that turns into a failing exit status, and clear errors.

// Tests of the I/O shell run the binary.
#![allow(clippy::disallowed_types)]

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn chain_rtt_prints_a_row_per_transport() {
    let out = ferry(&[
        "sim",
        "--rpc",
        "chain-rtt",
        "--nodes",
        "8",
        "--runs",
        "1",
        "--calls",
        "3",
    ]);
    let (text, err) = texts(&out);
    assert!(out.status.success(), "{text}{err}");
    assert!(text.contains("Chained (8 nodes, 7 hops)"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("dtn") || l.starts_with("auto"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in rows {
        assert!(row.contains("pass"), "{row}");
    }
}

#[test]
fn fig5_prints_its_table_and_fails_when_calls_have_too_little_time() {
    let small = [
        "sim",
        "--rpc",
        "fig5",
        "--nodes",
        "16",
        "--cells",
        "explicit-50",
        "--calls",
        "2",
        "--size",
        "1MB",
        "--runs",
        "1",
    ];
    let out = ferry(&[&small[..], &["--budget", "210s"]].concat());
    let (text, err) = texts(&out);
    assert!(out.status.success(), "{text}{err}");
    assert!(
        text.contains("210 s per call (ack 30 s + result 90 s + dtn 90 s)"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("explicit 50 %"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("41.9 %") && row.ends_with("pass"), "{row}");

    // Two seconds cannot carry a call across islands that join once a minute.
    let out = ferry(&[&small[..], &["--budget", "2s"]].concat());
    let (text, err) = texts(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("FAIL"), "{text}");
    assert!(err.contains("missed their target"), "{err}");
}

#[test]
fn bad_rpc_arguments_are_refused_clearly() {
    for (args, expect) in [
        (
            vec!["sim", "--rpc", "fig5", "--cells", "some-5"],
            "is not a cell",
        ),
        (
            vec!["sim", "--rpc", "fig5", "--cells", "any-100"],
            "1 to 99",
        ),
        (vec!["sim", "--rpc", "fig5", "--calls", "0"], "at least 1"),
        (vec!["sim", "--rpc", "ping"], "invalid value"),
    ] {
        let out = ferry(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}
