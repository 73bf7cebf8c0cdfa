//! `daemon::exec` with real processes: arguments arrive verbatim (no shell), inputs and outputs as
//! files, binary-safe stdout, timeouts and cancellation that kill the whole process group, output
//! caps, exit status and stderr tail, a clean environment, and working directories that go away.
//! The example procedures of `/examples` are run where they fit. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use daemon::exec::{self, Arg, ArgTemplate, Job, Outcome, OutcomeKind, STDERR_TAIL};
use tokio::sync::oneshot;

use crate::common::TempDir;

const CALL_ID: &str = "00112233445566778899aabbccddeeff";
const CALLER: &str = "dtn://tester/";

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn params(n: usize) -> Vec<ArgTemplate> {
    (0..n).map(ArgTemplate::Param).collect()
}

/// `/bin/sh -c SCRIPT sh PARAMS…`: the test's own script, with the parameters as `"$@"`.
fn sh(script: &str, n: usize) -> (PathBuf, Vec<ArgTemplate>) {
    let mut args = vec![
        ArgTemplate::Literal("-c".into()),
        ArgTemplate::Literal(script.into()),
        ArgTemplate::Literal("sh".into()),
    ];
    args.extend(params(n));
    (PathBuf::from("/bin/sh"), args)
}

fn job(root: &TempDir, (program, args): (PathBuf, Vec<ArgTemplate>), params: Vec<Arg>) -> Job {
    Job {
        program,
        args,
        params,
        timeout: Duration::from_secs(20),
        max_output: 1024 * 1024,
        work_root: root.path().to_owned(),
        call_id: CALL_ID.into(),
        caller: CALLER.into(),
        record: None,
    }
}

fn program(path: PathBuf, n: usize) -> (PathBuf, Vec<ArgTemplate>) {
    (path, params(n))
}

/// Runs `job` with no one to cancel it, and checks its working directory is gone afterwards.
async fn run(job: Job) -> Outcome {
    let root = job.work_root.clone();
    let (_, never) = oneshot::channel();
    let outcome = tokio::time::timeout(Duration::from_secs(60), exec::run(job, never))
        .await
        .expect("the execution ends");
    assert_work_root_empty(&root);
    outcome
}

fn assert_work_root_empty(root: &Path) {
    if let Ok(entries) = std::fs::read_dir(root) {
        let left: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "working directories left behind: {left:?}");
    }
}

fn text(outcome: &Outcome) -> String {
    String::from_utf8_lossy(&outcome.stdout).into_owned()
}

/// Processes of process group `pgid` that are still running (zombies excluded).
fn group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && !matches!(fields[0], "Z" | "X") && fields[2].parse() == Ok(pgid) {
            members.push(pid);
        }
    }
    members
}

/// Waits (bounded) until process group `pgid` has no running member.
async fn assert_group_gone(pgid: i32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let members = group_members(pgid);
        if members.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process group {pgid} still has {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `$$ $!` printed by a script: its process group (it leads it) and a background child.
fn group_and_child(outcome: &Outcome) -> (i32, i32) {
    let t = text(outcome);
    let mut ids = t.split_whitespace().map(|w| w.parse::<i32>().unwrap());
    let ids = (ids.next().unwrap(), ids.next().unwrap());
    assert!(ids.0 > 1 && ids.1 > 1, "{t:?}");
    ids
}

#[tokio::test]
async fn text_arrives_verbatim_with_no_shell_in_between() {
    let root = TempDir::new("exec");
    let canary = root.path().join("canary");
    let texts = [
        "hello world".to_string(),
        "  spaces  at both ends  ".into(),
        r#"quotes: 'single' "double" \backslash\"#.into(),
        format!(
            "$(touch {0}) `touch {0}` ; touch {0} && touch {0} | touch {0}",
            canary.display()
        ),
        "unicode: héllo, 日本語, emoji 🚢".into(),
        "-n".into(),
        "*".into(),
        "$HOME ${PATH} $1 %s %n".into(),
        "line one\nline two\r\n\ttab".into(),
        String::new(),
        (1u8..=255).map(char::from).collect(),
    ];
    for t in texts {
        let outcome = run(job(
            &root,
            program(example("echo.sh"), 1),
            vec![Arg::Text(t.clone())],
        ))
        .await;
        assert_eq!(outcome.kind, OutcomeKind::Exited(0), "{t:?}");
        assert_eq!(outcome.stdout, t.as_bytes(), "{t:?}");
        assert!(outcome.files.is_empty());
    }
    assert!(!canary.exists(), "something ran a shell over a parameter");
}

#[tokio::test]
async fn every_parameter_type_is_passed_in_template_order() {
    let root = TempDir::new("exec");
    let script =
        r#"for a; do printf '[%s]\n' "$a"; done; printf '%s|' "$(cat "$5")" "$(cat "$6")""#;
    let outcome = run(job(
        &root,
        sh(script, 6),
        vec![
            Arg::Int(-3),
            Arg::Float(0.5),
            Arg::Bool(true),
            Arg::Text("a b".into()),
            Arg::Bytes(Bytes::from_static(b"raw bytes")),
            Arg::File {
                name: "notes.txt".into(),
                content: Bytes::from_static(b"file content"),
            },
        ],
    ))
    .await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    let t = text(&outcome);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(&lines[..4], ["[-3]", "[0.5]", "[true]", "[a b]"]);
    let bytes_path = lines[4].trim_matches(['[', ']']);
    let file_path = lines[5].trim_matches(['[', ']']);
    assert!(Path::new(bytes_path).is_absolute(), "{bytes_path}");
    assert!(
        bytes_path.starts_with(&*root.path().to_string_lossy()),
        "{bytes_path}"
    );
    assert!(bytes_path.ends_with("/in/arg5.bin"), "{bytes_path}");
    assert!(file_path.ends_with("/in/notes.txt"), "{file_path}");
    assert_eq!(lines[6], "raw bytes|file content|");

    // A template repeats, reorders and mixes in literals; literals are never substituted into.
    let outcome = run(job(
        &root,
        (
            PathBuf::from("/bin/echo"),
            vec![
                ArgTemplate::Param(1),
                ArgTemplate::Literal("--x={1}".into()),
                ArgTemplate::Param(0),
                ArgTemplate::Param(1),
            ],
        ),
        vec![Arg::Text("one".into()), Arg::Int(2)],
    ))
    .await;
    assert_eq!(text(&outcome), "2 --x={1} one 2\n");
}

#[tokio::test]
async fn file_parameters_arrive_at_their_paths_under_safe_names() {
    let root = TempDir::new("exec");
    let content = Bytes::from((0..=255u8).cycle().take(100_000).collect::<Vec<u8>>());
    let file = |name: &str| Arg::File {
        name: name.into(),
        content: content.clone(),
    };
    let outcome = run(job(
        &root,
        sh(
            r#"for a; do printf '%s\n' "$a"; cmp -s "$a" "$1" || echo differs; done; ls -A in"#,
            4,
        ),
        vec![
            file("../../escape attempt.bin"),
            file("escape attempt.bin"),
            file(".."),
            file("/"),
        ],
    ))
    .await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    let t = text(&outcome);
    assert!(!t.contains("differs"), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].ends_with("/in/escape attempt.bin"), "{t}");
    assert!(lines[1].ends_with("/in/escape attempt-2.bin"), "{t}");
    let hashed = lines[2].rsplit('/').next().unwrap();
    assert!(hashed.starts_with("file-"), "{t}");
    assert!(lines[3].ends_with(&format!("/in/{hashed}-2")), "{t}");
    // Nothing but the four inputs, all inside in/.
    assert_eq!(lines.len(), 8, "{t}");
    for path in &lines[..4] {
        let dir = Path::new(path).parent().unwrap();
        assert!(dir.ends_with("in"), "{path}");
    }
}

#[tokio::test]
async fn the_photo_example_returns_a_file() {
    let root = TempDir::new("exec");
    let photo = || job(&root, program(example("photo.sh"), 1), vec![Arg::Int(4)]);
    let outcome = run(photo()).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0), "{outcome:?}");
    assert!(
        text(&outcome).starts_with("photo.pgm: 4x4 greyscale"),
        "{}",
        text(&outcome)
    );
    assert_eq!(outcome.files.len(), 1);
    let (name, image) = &outcome.files[0];
    assert_eq!(name, "photo.pgm");
    assert!(image.starts_with(b"P2\n4 4\n255\n"));
    let values = std::str::from_utf8(image)
        .unwrap()
        .split_whitespace()
        .skip(4);
    assert_eq!(values.count(), 16);
    assert_eq!(run(photo()).await.files, outcome.files, "deterministic");

    // Bad input is the script's to refuse: exit status 2 and why, on stderr.
    let outcome = run(job(
        &root,
        program(example("photo.sh"), 1),
        vec![Arg::Int(0)],
    ))
    .await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(2));
    assert!(String::from_utf8_lossy(&outcome.stderr_tail).contains("1 to 1000"));
    assert!(outcome.files.is_empty());
}

#[tokio::test]
async fn output_files_are_collected_recursively_in_name_order_without_links() {
    let root = TempDir::new("exec");
    let script = r#"cd "$FERRY_OUTPUT_DIR" && mkdir -p sub/deeper && printf b > b.txt && printf a > a.txt
        printf c > sub/deeper/c.txt && printf z > sub/z && ln -s /etc/passwd link && mkfifo fifo
        ln -s sub linked-dir; printf stdout"#;
    let outcome = run(job(&root, sh(script, 0), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0), "{outcome:?}");
    let files: Vec<(&str, &[u8])> = outcome
        .files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_ref()))
        .collect();
    assert_eq!(
        files,
        [
            ("a.txt", &b"a"[..]),
            ("b.txt", b"b"),
            ("sub/deeper/c.txt", b"c"),
            ("sub/z", b"z"),
        ]
    );
    assert_eq!(outcome.stdout, b"stdout");

    // Files are the result of a success only.
    let outcome = run(job(
        &root,
        sh(r#"printf x > "$FERRY_OUTPUT_DIR/f"; exit 1"#, 0),
        vec![],
    ))
    .await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(1));
    assert!(outcome.files.is_empty());
}

#[tokio::test]
async fn stdout_is_binary_safe() {
    let root = TempDir::new("exec");
    let all: Vec<u8> = (0..=255u8).cycle().take(256 * 1024 + 7).collect();
    let outcome = run(job(
        &root,
        sh(r#"cat "$1""#, 1),
        vec![Arg::Bytes(Bytes::from(all.clone()))],
    ))
    .await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    assert!(outcome.stdout == all, "stdout differs from the input bytes");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let root = TempDir::new("exec");
    let mut j = job(&root, sh("sleep 100 & echo $$ $!; sleep 100", 0), vec![]);
    j.timeout = Duration::from_millis(700);
    let started = Instant::now();
    let outcome = run(j).await;
    assert_eq!(outcome.kind, OutcomeKind::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(outcome.run_ms >= 700, "{}", outcome.run_ms);
    let (pgid, grandchild) = group_and_child(&outcome);
    assert_group_gone(pgid).await;
    assert!(!group_members(pgid).contains(&grandchild));
}

#[tokio::test]
async fn what_a_procedure_leaves_running_is_killed_when_it_exits() {
    let root = TempDir::new("exec");
    let started = Instant::now();
    // The background sleep holds stdout open: the execution must not wait for it.
    let outcome = run(job(&root, sh("sleep 100 & echo $$ $!", 0), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (pgid, _) = group_and_child(&outcome);
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn too_much_output_is_cut_off_and_killed() {
    let root = TempDir::new("exec");
    let mut j = job(&root, sh("echo $$ >&2; yes", 0), vec![]);
    j.max_output = 100_000;
    let outcome = run(j).await;
    assert_eq!(outcome.kind, OutcomeKind::OutputTooLarge);
    assert_eq!(outcome.stdout.len(), 100_000);
    assert!(outcome.stdout.starts_with(b"y\ny\n"));
    let pgid: i32 = String::from_utf8_lossy(&outcome.stderr_tail)
        .trim()
        .parse()
        .unwrap();
    assert_group_gone(pgid).await;

    // Output files count toward the same cap: 60 000 + 50 000 > 100 000.
    let script = r#"head -c 60000 /dev/zero > "$FERRY_OUTPUT_DIR/big"; head -c 50000 /dev/zero"#;
    let mut j = job(&root, sh(script, 0), vec![]);
    j.max_output = 100_000;
    let outcome = run(j).await;
    assert_eq!(outcome.kind, OutcomeKind::OutputTooLarge);
    assert!(outcome.files.is_empty());

    // Exactly at the cap is fine.
    let mut j = job(
        &root,
        sh(
            r#"head -c 40000 /dev/zero > "$FERRY_OUTPUT_DIR/f"; head -c 60000 /dev/zero"#,
            0,
        ),
        vec![],
    );
    j.max_output = 100_000;
    let outcome = run(j).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    assert_eq!(
        (outcome.stdout.len(), outcome.files[0].1.len()),
        (60_000, 40_000)
    );
}

#[tokio::test]
async fn more_files_than_a_result_can_name_are_output_too_large_and_never_read() {
    let root = TempDir::new("exec");
    // 20 000 empty files: a result naming them would be ~900 KB, over the 8 KiB control limit.
    let script = r#"cd "$FERRY_OUTPUT_DIR" && seq 1 20000 | xargs touch"#;
    let outcome = run(job(&root, sh(script, 0), vec![])).await;
    let limit = format!("more than {} files", wire::rpc::MAX_RESULT_FILES);
    assert!(
        matches!(&outcome.kind, OutcomeKind::TooManyFiles(r) if r.contains(&limit)),
        "{:?}",
        outcome.kind
    );
    assert!(outcome.files.is_empty());
    let rpc::Outcome::Failure { code, detail, .. } = daemon::rpc_shell::engine_outcome(outcome)
    else {
        panic!("too many files is a failure");
    };
    assert_eq!(code, wire::rpc::RejectCode::OutputTooLarge);
    assert!(detail.contains(&limit), "{detail}");

    // The walk is bounded by entries of any kind too: directories are not free.
    let script = r#"cd "$FERRY_OUTPUT_DIR" && seq 1 5000 | xargs mkdir"#;
    let outcome = run(job(&root, sh(script, 0), vec![])).await;
    assert!(
        matches!(&outcome.kind, OutcomeKind::TooManyFiles(r) if r.contains("4096 entries")),
        "{:?}",
        outcome.kind
    );

    // As many files as a result can name still come back.
    let script = format!(
        r#"cd "$FERRY_OUTPUT_DIR" && seq 1 {} | xargs touch"#,
        wire::rpc::MAX_RESULT_FILES
    );
    let outcome = run(job(&root, sh(&script, 0), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    assert_eq!(outcome.files.len(), wire::rpc::MAX_RESULT_FILES);
}

#[tokio::test]
async fn failure_reports_exit_status_and_the_end_of_stderr() {
    let root = TempDir::new("exec");
    let script = r#"i=0; while [ $i -lt 1000 ]; do echo "line $i" >&2; i=$((i+1)); done; echo partial; exit 3"#;
    let outcome = run(job(&root, sh(script, 0), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(3));
    assert!(!outcome.kind.is_success());
    assert_eq!(outcome.stdout, b"partial\n");
    assert_eq!(outcome.stderr_tail.len(), STDERR_TAIL);
    assert!(outcome.stderr_tail.ends_with(b"line 998\nline 999\n"));

    let outcome = run(job(&root, sh("kill -TERM $$", 0), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Signalled(15));
}

#[tokio::test]
async fn cancelling_kills_and_a_dropped_sender_does_not() {
    let root = TempDir::new("exec");
    let (cancel, cancelled) = oneshot::channel();
    let started = Instant::now();
    let task = tokio::spawn(exec::run(
        job(&root, program(example("slow.sh"), 1), vec![Arg::Int(100)]),
        cancelled,
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("cancelled in time")
        .unwrap();
    assert_eq!(outcome.kind, OutcomeKind::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_work_root_empty(root.path());

    let (cancel, cancelled) = oneshot::channel::<()>();
    drop(cancel);
    let j = job(&root, program(example("slow.sh"), 1), vec![Arg::Int(1)]);
    let outcome = exec::run(j, cancelled).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    assert!(
        text(&outcome).starts_with("slept 1 s"),
        "{}",
        text(&outcome)
    );
    assert!(outcome.run_ms >= 1000);
}

#[tokio::test]
async fn dropping_the_execution_kills_it_and_removes_its_directory() {
    let root = TempDir::new("exec");
    let pid_file = root.path().join("pid");
    let script = format!("echo $$ > {}; sleep 100", pid_file.display());
    let (_cancel, cancelled) = oneshot::channel();
    let execution = exec::run(job(&root, sh(&script, 0), vec![]), cancelled);
    let _ = tokio::time::timeout(Duration::from_millis(500), execution).await;
    let pgid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_group_gone(pgid).await;
    std::fs::remove_file(&pid_file).unwrap();
    assert_work_root_empty(root.path());
}

#[tokio::test]
async fn the_environment_is_clean() {
    let root = TempDir::new("exec");
    let allowed = [
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "FERRY_OUTPUT_DIR",
        "FERRY_CALL_ID",
        "FERRY_CALLER",
    ];
    // Something of this process's environment that must not leak (cargo and the shell give
    // every test process plenty).
    let canary = std::env::vars()
        .map(|(k, _)| k)
        .find(|k| !allowed.contains(&k.as_str()))
        .expect("the test process has some other environment variable");
    let outcome = run(job(&root, (PathBuf::from("/usr/bin/env"), vec![]), vec![])).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(0));
    let t = text(&outcome);
    let vars: std::collections::BTreeMap<&str, &str> =
        t.lines().filter_map(|l| l.split_once('=')).collect();
    let mut names: Vec<&str> = vars.keys().copied().collect();
    names.sort();
    let mut expected = allowed.to_vec();
    expected.sort();
    assert_eq!(names, expected, "{t}");
    assert!(!vars.contains_key(canary.as_str()));
    assert_eq!(vars["PATH"], exec::PATH);
    assert_eq!(vars["LANG"], "C.UTF-8");
    assert_eq!(vars["FERRY_CALL_ID"], CALL_ID);
    assert_eq!(vars["FERRY_CALLER"], CALLER);
    let home = Path::new(vars["HOME"]);
    assert!(home.starts_with(root.path()) && home != root.path(), "{t}");
    assert_eq!(Path::new(vars["TMPDIR"]), home.join("tmp"));
    assert_eq!(Path::new(vars["FERRY_OUTPUT_DIR"]), home.join("out"));
    assert!(!home.exists(), "removed afterwards");

    // Its working directory is its cwd, fresh, with in/, out/ and tmp/; stdin is empty.
    let outcome = run(job(
        &root,
        sh(r#"pwd; ls -A; cat; [ "$(pwd)" = "$HOME" ] && echo home"#, 0),
        vec![],
    ))
    .await;
    assert_eq!(
        text(&outcome).lines().skip(1).collect::<Vec<_>>(),
        ["in", "out", "tmp", "home"]
    );
}

#[tokio::test]
async fn failures_to_start_are_reported_and_leave_nothing() {
    let root = TempDir::new("exec");
    let outcome = run(job(
        &root,
        program("/nonexistent/procedure".into(), 0),
        vec![],
    ))
    .await;
    let OutcomeKind::SpawnFailed(why) = &outcome.kind else {
        panic!("{outcome:?}");
    };
    assert!(why.contains("/nonexistent/procedure"), "{why}");

    let not_executable = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    let outcome = run(job(&root, program(not_executable, 0), vec![])).await;
    assert!(
        matches!(outcome.kind, OutcomeKind::SpawnFailed(_)),
        "{outcome:?}"
    );

    let outcome = run(job(
        &root,
        program(example("echo.sh"), 1),
        vec![Arg::Text("a\0b".into())],
    ))
    .await;
    assert!(
        matches!(outcome.kind, OutcomeKind::BadArgument(_)),
        "{outcome:?}"
    );
    let outcome = run(job(
        &root,
        program(example("echo.sh"), 2),
        vec![Arg::Text("a".into())],
    ))
    .await;
    assert!(
        matches!(outcome.kind, OutcomeKind::BadArgument(_)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_sum_example_and_concurrent_executions() {
    let root = TempDir::new("exec");
    let outcome = run(job(
        &root,
        program(example("sum.sh"), 2),
        vec![Arg::Int(2), Arg::Int(-5)],
    ))
    .await;
    assert_eq!(text(&outcome), "-3\n");

    // Many at once, the same call id: each gets its own directory.
    let runs = (0..16).map(|i| {
        let j = job(
            &root,
            sh(r#"pwd; printf %s "$1" > mine; sleep 0.2; cat mine"#, 1),
            vec![Arg::Int(i)],
        );
        let (_, never) = oneshot::channel();
        exec::run(j, never)
    });
    let outcomes = futures_join_all(runs).await;
    let mut dirs = std::collections::BTreeSet::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        let t = text(outcome);
        let (dir, mine) = t.split_once('\n').unwrap();
        assert_eq!(mine, i.to_string());
        dirs.insert(dir.to_owned());
    }
    assert_eq!(dirs.len(), 16);
    assert_work_root_empty(root.path());
}

/// Runs futures concurrently on the test's runtime, results in order.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[test]
fn records_left_by_a_killed_daemon_say_what_ran_and_their_leftover_processes_are_killed() {
    use std::os::unix::process::CommandExt as _;
    let root = TempDir::new("records");
    let dir = root.path().join("executions");
    assert!(
        exec::recover_records(&dir).unwrap().is_empty(),
        "no directory, nothing ran"
    );
    std::fs::create_dir_all(&dir).unwrap();
    // A procedure's process group as a killed daemon leaves it: a shell and its child, with
    // the call's environment; and a process of another call, which must be left alone.
    let spawn = |call: &str| {
        std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30; true"])
            .env_clear()
            .env("FERRY_CALL_ID", call)
            .env("FERRY_CALLER", CALLER)
            .process_group(0)
            .spawn()
            .unwrap()
    };
    // Not CALL_ID: the other tests' procedures, running meanwhile, carry that one.
    let call = "5ec0000000000000000000000000dead";
    let mut left = spawn(call);
    let mut other = spawn("ffffffffffffffffffffffffffffffff");
    let record = |name: &str, call: &str, extra: &str| {
        std::fs::write(
            dir.join(name),
            format!("ferry-execution v1\ncall {call}\ncaller {CALLER}\n{extra}"),
        )
        .unwrap();
    };
    record("running", call, &format!("pgid {}\n", left.id()));
    record(
        "ended",
        "0000000000000000000000000000000a",
        "pgid 1\nended exit status: 0 after 5 ms\n",
    );
    record("gone", "0000000000000000000000000000000b", "pgid 1\n");
    record("starting", "0000000000000000000000000000000c", "");
    std::fs::write(dir.join("garbage"), "not a record").unwrap();
    // Its child (`sleep`) exists once the shell ran it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_members(left.id() as i32).len() < 2 {
        assert!(Instant::now() < deadline, "the shell never started sleep");
        std::thread::sleep(Duration::from_millis(10));
    }

    let found = exec::recover_records(&dir).unwrap();
    let status = left.wait().unwrap();
    assert!(status.code().is_none(), "killed, not ended: {status:?}");
    assert!(
        group_members(left.id() as i32).is_empty(),
        "the whole group is gone"
    );
    assert!(
        other.try_wait().unwrap().is_none(),
        "another call's process was killed"
    );
    other.kill().unwrap();
    other.wait().unwrap();
    let detail = |name: &str| found.get(name).map(String::as_str).unwrap_or("");
    assert!(detail("running").contains("still running") && detail("running").contains("killed"));
    assert!(detail("ended").contains("ran to its end (exit status: 0 after 5 ms)"));
    assert!(detail("gone").contains("ended while the server was down"));
    assert!(detail("starting").contains("being started"));
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        !dir.join("garbage").exists(),
        "an unreadable record is removed"
    );
}

#[tokio::test]
async fn an_execution_with_a_record_writes_it_before_it_runs_and_says_how_it_ended() {
    let root = TempDir::new("record");
    let record = root.path().join("record");
    let script = format!(r#"cat "{}"; exit 3"#, record.display());
    let mut j = job(&root, sh(&script, 0), vec![]);
    j.work_root = root.path().join("work");
    j.record = Some(record.clone());
    let outcome = run(j).await;
    assert_eq!(outcome.kind, OutcomeKind::Exited(3));
    // The procedure saw its record already written (and synced) before it ran.
    let seen = text(&outcome);
    assert!(
        seen.starts_with(&format!(
            "ferry-execution v1\ncall {CALL_ID}\ncaller {CALLER}\n"
        )),
        "{seen}"
    );
    let written = std::fs::read_to_string(&record).unwrap();
    assert!(written.contains("\npgid "), "{written}");
    assert!(
        written.contains("\nended exit status: 3 after "),
        "{written}"
    );
}
