//! `ferry sim` end to end: a scenario runs and prints its table; a contact plan file drives the
//! links; wrong arguments get a clear error and a failing exit status.

// Tests of the I/O shell run the binary and read and write files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_small_scenario_prints_one_row_per_seed() {
    let out = ferry(&[
        "sim",
        "--topology",
        "chained",
        "--nodes",
        "6",
        "--bundles",
        "4",
        "--size",
        "10kB",
        "--duration",
        "5m",
        "--start",
        "5s",
        "--spread",
        "30s",
        "--runs",
        "2",
    ]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("chained-6"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('1') || l.trim_start().starts_with('2'))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in rows {
        assert!(
            row.contains("4/4"),
            "every bundle delivered on a connected chain: {row}"
        );
        assert!(row.contains("100.0%"), "{row}");
    }
}

#[test]
fn a_contact_plan_file_drives_the_links() {
    let dir = std::env::temp_dir().join(format!("ferry-sim-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.txt");
    std::fs::write(
        &plan,
        "nodes 3\n# a relay meets each end in turn\nrepeat 0 1 up 20 down 40 until 600\nrepeat 1 2 up 20 down 40 until 600 from 30\n",
    )
    .unwrap();
    let out = ferry(&[
        "sim",
        "--topology",
        "plan",
        "--plan",
        plan.to_str().unwrap(),
        "--bundles",
        "3",
        "--size",
        "1MB",
        "--duration",
        "10m",
        "--start",
        "1s",
        "--spread",
        "5s",
    ]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("plan-3"), "{text}");
    // Bundles between random pairs of three nodes all get through the relay.
    assert!(text.contains("3/3"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_arguments_are_refused_clearly() {
    for (args, expect) in [
        (vec!["sim", "--strategy", "flood"], "unknown strategy"),
        (
            vec!["sim", "--size", "12XB"],
            "\"12XB\" is not a size like 1MB",
        ),
        (vec!["sim", "--loss", "2"], "between 0 and 1"),
        (vec!["sim", "--topology", "plan"], "needs --plan"),
        (
            vec![
                "sim",
                "--topology",
                "plan",
                "--plan",
                "/nonexistent/plan.txt",
            ],
            "reading contact plan",
        ),
    ] {
        let out = ferry(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}
