//! `ferry eval`: a tiny part of the paper's matrix (Chained-32, 0 MB, explicit by dtn, a few
//! calls) run from the command line, its report checked: every file there, one CSV row per call,
//! each call answered by dtn within the 1 s target and run once, the plots valid SVG and PNG; and
//! `--from` writes the same report from the CSV alone (as a testbed's records would be).

// Tests of the I/O shell run the binary and read its files.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-eval-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn check_plots(dir: &Path) {
    for name in ["fig4-rtt", "fig5-outcomes", "outcomes-all"] {
        let png = std::fs::read(dir.join(format!("{name}.png"))).expect("png written");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name}.png is not a PNG"
        );
        assert!(png.len() > 1_000, "{name}.png is {} bytes", png.len());
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).expect("svg written");
        let doc = roxmltree::Document::parse(&svg)
            .unwrap_or_else(|e| panic!("{name}.svg is not XML: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(svg.contains("<text"), "{name}.svg has no text");
    }
}

#[test]
fn chained_zero_mb_by_dtn_writes_a_report_within_the_target() {
    let dir = out_dir("chained");
    let calls = 4;
    let out = ferry(&[
        "eval",
        "--topology",
        "chained",
        "--set",
        "0MB",
        "--modes",
        "explicit-dtn",
        "--seeds",
        "1",
        "--calls",
        &calls.to_string(),
        "--budget-factor",
        "1",
        "--jobs",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("[1/1 "), "progress on stderr: {err}");

    let csv = std::fs::read_to_string(dir.join("calls.csv")).expect("calls.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), calls, "one row per call:\n{csv}");
    let mut indices: Vec<&str> = rows.iter().map(|r| r[col("call")]).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), calls, "each call once:\n{csv}");
    for r in &rows {
        assert_eq!(r[col("topology")], "chained");
        assert_eq!(r[col("nodes")], "32");
        assert_eq!(r[col("transport")], "dtn");
        assert_eq!(r[col("called_by")], "dtn", "{r:?}");
        assert_eq!(r[col("outcome")], "dtn", "{r:?}");
        let rtt: u64 = r[col("rtt_ms")].parse().expect("an RTT");
        assert!(
            rtt <= 1_000,
            "Chained-32 0MB by dtn took {rtt} ms (target ≤ 1 s)"
        );
        assert_eq!(r[col("max_runs")], "1", "ran once: {r:?}");
        assert_eq!(r[col("servers_ran")], "1", "{r:?}");
    }

    let md = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    assert!(md.contains("RTT ≤ 1 s while the chain is up"), "{md}");
    assert!(md.contains("**pass**"), "{md}");
    assert!(!md.contains("FAIL"), "{md}");
    assert!(
        md.contains("Link model: every link carries 100 Mbit/s"),
        "{md}"
    );
    assert!(
        md.contains("Bundles to one node are sent in pieces of 10000000 bytes at every hop"),
        "pieces of 10 MB by default: {md}"
    );
    check_plots(&dir);

    // The same report from the CSV alone (here told the run's bundles went whole).
    let again = out_dir("from");
    let out = ferry(&[
        "eval",
        "--from",
        dir.join("calls.csv").to_str().unwrap(),
        "--piece",
        "0",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(again.join("calls.csv")).unwrap(),
        csv
    );
    let md2 = std::fs::read_to_string(again.join("README.md")).unwrap();
    assert!(md2.contains("Bundles to one node are sent whole."), "{md2}");
    let table = |m: &str| m[m.find("## Every setup").unwrap()..].to_string();
    assert_eq!(table(&md2), table(&md));
    check_plots(&again);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&again);
}

#[test]
fn a_fig5_target_names_the_calls_no_system_could_answer() {
    // Ten explicit transparent Islands 100MB calls at 210 s: six answered, three lost with no
    // journey between client and server in their time, one lost although a journey existed.
    let header = "source,topology,nodes,servers_percent,servers,set,file_bytes,mode,transport,budget_ms,seed,call,client,target,called_by,went_dtn,outcome,result_via,rtt_ms,journey,max_runs,servers_ran,made_at_ms";
    let mut csv = format!("{header}\n");
    for call in 0..10 {
        let made = 10_000 + call * 220_000;
        let tail = match call {
            0..6 => "stream,false,non-dtn,stream,48046,,1,1".to_string(),
            6..9 => "stream,false,none,,,no,1,1".to_string(),
            _ => "dtn,true,none,,,yes,1,1".to_string(),
        };
        csv += &format!(
            "sim,islands,64,50,32,100MB,100000000,explicit,auto,210000,1,{call},6,26,{tail},{made}\n"
        );
    }
    let dir = out_dir("fig5-floor");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, csv).unwrap();
    let report = dir.join("report");
    let out = ferry(&[
        "eval",
        "--from",
        input.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(report.join("README.md")).unwrap();
    let line = md
        .lines()
        .find(|l| l.contains("no result for"))
        .unwrap_or_else(|| panic!("no Fig. 5 target line: {md}"));
    assert!(line.contains("no result for 40.0 % (≤ 20.9 %"), "{line}");
    assert!(line.contains("**FAIL**"), "{line}");
    assert!(
        line.contains("of the 4 lost, 3 with no journey, 1 Ferry's fault"),
        "{line}"
    );
    assert!(
        line.contains(
            "no system can pass on these seeds: the calls no journey could answer are 30.0 %"
        ),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_modes_are_refused() {
    let out = ferry(&["eval", "--modes", "all-stream", "--out", "/nonexistent"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("explicit only"));
}
