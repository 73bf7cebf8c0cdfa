//! `ferry demo` as a user runs it: the built binary, four real nodes on loopback, every scene's
//! result in its output, the broken call's result by dtn and `slow` run once, the wait for the
//! redial said and shown, the roll call's real duration, the temporary directory gone afterwards
//! and nothing in it pointed at; with `--dir`, the directory kept with the picture it names. Bad
//! flags fail before anything starts, with a message naming the flag. The two runs take turns
//! (their scenes' timings are part of what is checked).

// A test of the I/O shell: it reads the clock and writes files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// Held by a test while it runs a whole demo.
static ONE_DEMO_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `ferry demo ARGS`, killing it after `limit`; `None` if it had to be killed.
fn demo(args: &[&str], limit: Duration) -> Option<Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.arg("demo").args(args).stdin(Stdio::null());
    common::output_within(cmd, limit)
}

/// Fails with the whole output when `text` is missing from it.
fn assert_shows(output: &str, text: &str) {
    assert!(
        output.contains(text),
        "the demo's output does not show {text:?}:\n{output}"
    );
}

/// The seconds at the start of the line of `stdout` (`+7.341s  …`) that ends with `what`.
fn offset_of(stdout: &str, what: &str) -> f64 {
    stdout
        .lines()
        .find(|l| l.ends_with(what))
        .and_then(|l| {
            l.trim_start()
                .strip_prefix('+')?
                .split_once("s ")?
                .0
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no timed line {what:?}:\n{stdout}"))
}

/// The last column of the summary's row for `scene`, in seconds (`3.01 s`).
fn summary_after(stdout: &str, scene: &str) -> f64 {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(scene))
        .and_then(|l| {
            l.trim_end()
                .strip_suffix(" s")?
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no summary row {scene:?}:\n{stdout}"))
}

#[test]
fn every_scene_gets_its_result_and_the_broken_call_arrives_by_dtn_once() {
    let _turn = ONE_DEMO_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let limit = Duration::from_secs(120);
    let output = demo(&[], limit).unwrap_or_else(|| panic!("ferry demo ran over {limit:?}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "ferry demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // Scene 1: the picture, saved and checked.
    assert_shows(
        &stdout,
        "result: \"photo.pgm: 120x120 greyscale, 51409 bytes\" from the drone via stream",
    );
    // Not saved where it would be removed: --keep or --dir would keep it.
    assert_shows(
        &stdout,
        "picture: 50.2 KiB, not saved (--keep or --dir DIR saves it in the demo's directory)",
    );
    assert_shows(&stdout, "byte for byte the drone's copy");
    // Scene 2: one server's 42.
    assert_shows(&stdout, "result: \"42\" from the ");
    // Scene 3: each server echoes the question by datagram, the truck two hops away too (its
    // mesh knows the way back before the scenes start).
    for server in ["drone", "tower", "truck"] {
        assert_shows(
            &stdout,
            &format!("result: \"who is there?\" from the {server} via datagram"),
        );
    }
    assert_shows(&stdout, "3 of 3 servers answered");
    // The roll call lasts until its deadline (3 s), however early the replies came.
    let roll_call = summary_after(&stdout, "3 roll call");
    assert!(
        (3.0..10.0).contains(&roll_call),
        "the roll call took {roll_call} s by the summary:\n{stdout}"
    );
    // Scene 4: cut, waiting, restored, the result by dtn, run once.
    assert_shows(&stdout, "the phone–drone link is cut");
    assert_shows(&stdout, "stream path lost after the ack");
    assert_shows(&stdout, "link restored");
    // The wait between the link's return and the result is the phone's redial, and says so:
    // the result follows the redial at once.
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_shows(
        &words,
        "link restored (the phone redials a lost neighbour 1 s after losing it, then 2, 4 and 8 s \
         after each failed try, then every 10 s: it finds the link at its next try)",
    );
    let restored = offset_of(&stdout, "link restored");
    let redialled = offset_of(
        &stdout,
        "the phone redialled the drone: the link is up again",
    );
    let arrived = offset_of(&stdout, "the result arrived");
    assert!(
        restored <= redialled && redialled <= arrived && arrived - redialled < 1.0,
        "restored at {restored} s, redialled at {redialled} s, the result at {arrived} s:\n{stdout}"
    );
    assert_shows(&stdout, "result: \"slept 4 s on ");
    assert_shows(&stdout, "from the drone via dtn");
    // `slow`'s own runs, not the drone's executions of every procedure.
    assert_shows(
        &stdout,
        "the drone executed `slow` once (its runs of `slow`: 0 → 1); the phone got 1 result\n",
    );
    assert_shows(&stdout, "4 broken link   explicit  dtn (link cut)");
    // The temporary directory is gone.
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("The nodes' stores and identities are in "))
        .and_then(|l| l.strip_suffix(" (removed at the end)."))
        .unwrap_or_else(|| panic!("the demo names its directory:\n{stdout}"));
    assert!(!std::path::Path::new(dir).exists(), "{dir} is left behind");
    assert_shows(
        &words,
        "Its directory, with the nodes' stores and identities, was removed (--keep or --dir DIR \
         keeps it, and the picture in it).",
    );
    // Nothing else points into it.
    assert_eq!(
        stdout.matches(dir).count(),
        1,
        "only the line saying it will be removed names {dir}:\n{stdout}"
    );
}

#[test]
fn a_kept_directory_holds_the_picture_it_names() {
    let _turn = ONE_DEMO_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("ferry-demo-kept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let limit = Duration::from_secs(120);
    let output = demo(&["--dir", dir.to_str().unwrap(), "--slow", "1"], limit)
        .unwrap_or_else(|| panic!("ferry demo ran over {limit:?}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "ferry demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let picture = dir.join("aerial-photo.pgm");
    assert_shows(
        &stdout,
        &format!("picture: saved as {} (50.2 KiB)", picture.display()),
    );
    assert!(
        std::fs::read(&picture)
            .unwrap()
            .starts_with(b"P2\n120 120\n255\n"),
        "{} is not the picture",
        picture.display()
    );
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_shows(
        &words,
        &format!(
            "{} holds the nodes' stores and identities (phone/, drone/, tower/, truck/), the \
             procedures they served (procedures/) and the aerial picture (aerial-photo.pgm).",
            dir.display()
        ),
    );
    for node in ["phone", "drone", "tower", "truck"] {
        assert!(
            dir.join(node).join("identity").is_file(),
            "{node}'s identity"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_flags_fail_before_anything_starts_and_say_which() {
    let limit = Duration::from_secs(20);
    for (args, expected) in [
        (
            &["--slow", "0"][..],
            "invalid value '0' for '--slow <SECONDS>'",
        ),
        (
            &["--slow", "abc"][..],
            "invalid value 'abc' for '--slow <SECONDS>'",
        ),
        (&["--slow", "61"][..], "61 is not in 1..=60"),
        (&["--fly"][..], "unexpected argument '--fly'"),
    ] {
        let output = demo(args, limit).expect("a refused flag ends at once");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(
            stderr.contains(expected),
            "{args:?}: stderr does not say {expected:?}:\n{stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?} started the demo");
    }
    // A --dir with something in it is refused rather than mixed with old nodes.
    let dir = std::env::temp_dir().join(format!("ferry-demo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("precious.txt"), "keep me").unwrap();
    let output = demo(&["--dir", dir.to_str().unwrap()], limit).expect("refused at once");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("precious.txt")).unwrap(),
        "keep me"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
