//! How the RPC commands show calls: timeline lines, the list of calls and of procedures, why a
//! call failed, and where a result file may be written. Pure functions of the API's JSON, so
//! every wording is tested here without a node.

use std::path::PathBuf;

use daemon::calls::{CallInfo, FileInfo, ProcedureInfo, ReplyInfo, TimelineEntry};

use crate::exit::Status;
use crate::output::{Align, Table, fmt_bytes, fmt_secs};

/// Reject codes that mean the procedure ran (or was started) and failed, rather than that the
/// server turned the call away.
const RAN_AND_FAILED: &[&str] = &[
    "execution_failed",
    "timed_out",
    "output_too_large",
    "internal",
    "result_lost",
    "server_stopped",
];

/// Milliseconds since the call was made as `+12.345s`.
pub(crate) fn fmt_offset(ms: u64) -> String {
    format!("+{}.{:03}s", ms / 1000, ms % 1000)
}

/// One timeline line: `+0.012s  ack from dtn://bravo/ by stream`.
pub(crate) fn timeline_line(e: &TimelineEntry) -> String {
    format!("{}  {}", fmt_offset(e.offset_ms), e.text)
}

/// The whole timeline, one line each, each ending in a newline.
pub(crate) fn timeline(call: &CallInfo) -> String {
    call.timeline
        .iter()
        .map(|e| timeline_line(e) + "\n")
        .collect()
}

/// `photo.pgm (1.2 MiB)`.
pub(crate) fn file_label(f: &FileInfo) -> String {
    format!("{} ({})", f.name, fmt_bytes(f.size))
}

/// A result file not here yet, with how much of it is, if some is.
pub(crate) fn missing_file_label(f: &FileInfo) -> String {
    match f.received {
        Some(n) => format!(
            "{} ({}; {} of it here)",
            f.name,
            fmt_bytes(f.size),
            fmt_bytes(n)
        ),
        None => file_label(f),
    }
}

/// `ferry calls`: id, procedure, target, state, replies, age (`now_ms` and the calls' times are
/// milliseconds since the DTN epoch).
pub(crate) fn calls_table(calls: &[CallInfo], now_ms: u64) -> String {
    let mut t = Table::new(&[
        ("ID", Align::Left),
        ("PROCEDURE", Align::Left),
        ("TARGET", Align::Left),
        ("STATE", Align::Left),
        ("REPLIES", Align::Right),
        ("AGE", Align::Right),
    ]);
    for c in calls {
        t.row(vec![
            c.id.clone(),
            c.procedure.clone(),
            c.target.clone(),
            c.state.clone(),
            c.replies.len().to_string(),
            fmt_secs(now_ms.saturating_sub(c.created_ms) / 1000),
        ]);
    }
    t.render()
}

/// `ferry procedures`: name, parameter types, limits, predicate, description.
pub(crate) fn procedures_table(procedures: &[ProcedureInfo]) -> String {
    let mut t = Table::new(&[
        ("NAME", Align::Left),
        ("PARAMS", Align::Left),
        ("AT ONCE", Align::Right),
        ("REQUIRE", Align::Left),
        ("CALLERS", Align::Left),
        ("DESCRIPTION", Align::Left),
    ]);
    for p in procedures {
        // `name:type` where the procedure names its parameters (an older node gives types only).
        let params = if p.parameters.len() == p.params.len() {
            p.parameters
                .iter()
                .map(|q| match &q.name {
                    Some(n) => format!("{n}:{}", q.ty),
                    None => q.ty.clone(),
                })
                .collect::<Vec<_>>()
        } else {
            p.params.clone()
        };
        t.row(vec![
            p.name.clone(),
            params.join(" "),
            match p.max_concurrent {
                u32::MAX => "no limit".to_owned(),
                n => n.to_string(),
            },
            p.require.clone().unwrap_or_default(),
            if p.restricted { "listed" } else { "anyone" }.to_owned(),
            p.description.clone().unwrap_or_default(),
        ]);
    }
    t.render()
}

/// Why one server did not give a result: `dtn://bravo/ refused the call: predicate_failed:
/// battery >= 50 failed: battery is 20`, or for a procedure that ran and failed, `the call
/// failed on dtn://bravo/: execution_failed: exited with status 2 after 5 ms`, then its stderr
/// tail, indented, on the lines after.
pub(crate) fn refusal(r: &ReplyInfo) -> String {
    let code = r.code.as_deref().unwrap_or("refused");
    let mut out = if RAN_AND_FAILED.contains(&code) {
        format!("the call failed on {}: {code}", r.server)
    } else {
        format!("{} refused the call: {code}", r.server)
    };
    if let Some(detail) = r.detail.as_deref().filter(|d| !d.is_empty()) {
        out.push_str(": ");
        out.push_str(detail);
    }
    if let Some(status) = r.exit_status
        && !r
            .detail
            .as_deref()
            .is_some_and(|d| d.contains(&format!("status {status}")))
    {
        out.push_str(&format!(" (exit status {status})"));
    }
    if let Some(tail) = r.stderr_tail.as_deref().map(str::trim_end)
        && !tail.is_empty()
    {
        out.push_str("\nits stderr ended with:");
        for line in tail.lines() {
            out.push_str("\n  ");
            out.push_str(line);
        }
    }
    out
}

/// Why a finished call has no result, for the error message. `None` if it succeeded or waits.
pub(crate) fn failure(call: &CallInfo) -> Option<String> {
    let refusals: Vec<&ReplyInfo> = call.replies.iter().filter(|r| !r.ok).collect();
    let incomplete: Vec<&ReplyInfo> = call
        .replies
        .iter()
        .filter(|r| r.ok && r.files.iter().any(|f| !f.arrived))
        .collect();
    let text = match call.state.as_str() {
        "succeeded" | "waiting" => return None,
        "cancelled" => "the call was cancelled".to_owned(),
        "expired" if call.acks.is_empty() => {
            "no result before the deadline (no server acknowledged the call)".to_owned()
        }
        "expired" => format!(
            "no result before the deadline (acknowledged by {})",
            call.acks.join(", ")
        ),
        state => {
            let mut lines: Vec<String> = refusals.iter().map(|r| refusal(r)).collect();
            for r in &incomplete {
                let missing: Vec<String> = r
                    .files
                    .iter()
                    .filter(|f| !f.arrived)
                    .map(missing_file_label)
                    .collect();
                lines.push(format!(
                    "the result from {} came, but not its files before the deadline: {}",
                    r.server,
                    missing.join(", ")
                ));
            }
            match lines.len() {
                0 if state == "failed" => "the call failed".to_owned(),
                0 => format!("the call ended {state}"),
                1 => lines.remove(0),
                _ => format!("no result:\n{}", lines.join("\n")),
            }
        }
    };
    Some(text)
}

/// What kind of failure a finished call without a result is, for the exit status, and the reject
/// code of its first refusal (the one a script would test).
pub(crate) fn failure_status(call: &CallInfo) -> (Status, Option<String>) {
    let refusal = call.replies.iter().find(|r| !r.ok);
    match call.state.as_str() {
        "cancelled" => (Status::Cancelled, None),
        "expired" => (Status::NoResult, None),
        // Results came, but their files did not before the deadline.
        _ if refusal.is_none() && call.replies.iter().any(|r| r.ok) => (Status::NoResult, None),
        _ => (Status::CallFailed, refusal.and_then(|r| r.code.clone())),
    }
}

/// The reply whose value and files an explicit or any-mode call returns: the first result whose
/// files all arrived (the engine finishes such a call on it), else the first result.
pub(crate) fn winner(call: &CallInfo) -> Option<&ReplyInfo> {
    let results = || call.replies.iter().filter(|r| r.ok);
    results()
        .find(|r| r.files.iter().all(|f| f.arrived))
        .or_else(|| results().next())
}

/// Where, relative to `--out`, a result file named `name` by the server may be written: its
/// name as a relative path (procedures may write into subdirectories), or `None` if the name
/// could reach outside (absolute, `..`, empty components) or is not portable.
pub(crate) fn safe_relative_path(name: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for part in name.split('/') {
        if part.is_empty()
            || part == "."
            || part == ".."
            || part.contains(['\\', '\0'])
            || part.chars().any(char::is_control)
        {
            return None;
        }
        path.push(part);
    }
    (!path.as_os_str().is_empty()).then_some(path)
}

/// The file name a result file gets when its own name is unsafe: from its hash.
pub(crate) fn fallback_name(f: &FileInfo) -> String {
    format!("file-{}", f.hash.get(..16).unwrap_or(&f.hash))
}

/// A directory name for a server in an all-mode call (its results go in one directory each):
/// `dtn://bravo/` → `bravo`, `ipn:5.0` → `ipn_5.0`.
pub(crate) fn server_dir(server: &str) -> String {
    let host = server
        .strip_prefix("dtn://")
        .map(|s| s.trim_end_matches('/'))
        .unwrap_or(server);
    let name: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.as_str() {
        "" => "server".into(),
        _ if name.starts_with('.') => format!("_{name}"),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(state: &str, replies: Vec<ReplyInfo>) -> CallInfo {
        CallInfo {
            id: "0123456789abcdef0123456789abcdef".into(),
            procedure: "photo".into(),
            target: "dtn://bravo/".into(),
            transport: "auto".into(),
            state: state.into(),
            created_ms: 1_000,
            deadline_ms: 211_000,
            acks: vec![],
            replies,
            timeline: vec![],
        }
    }

    fn reply(ok: bool) -> ReplyInfo {
        ReplyInfo {
            server: "dtn://bravo/".into(),
            server_key: "ab".repeat(32),
            at_ms: 2_000,
            via: "stream".into(),
            ok,
            value_text: None,
            value_base64: None,
            files: vec![],
            run_ms: None,
            code: None,
            detail: None,
            exit_status: None,
            stderr_tail: None,
        }
    }

    fn file(name: &str, arrived: bool) -> FileInfo {
        FileInfo {
            name: name.into(),
            hash: "cd".repeat(32),
            size: 1_258_291,
            arrived,
            received: None,
        }
    }

    #[test]
    fn offsets_are_seconds_with_milliseconds() {
        assert_eq!(fmt_offset(0), "+0.000s");
        assert_eq!(fmt_offset(12), "+0.012s");
        assert_eq!(fmt_offset(12_345), "+12.345s");
        let e = TimelineEntry {
            at_ms: 5,
            offset_ms: 1_500,
            text: "ack from dtn://bravo/ by stream".into(),
        };
        assert_eq!(
            timeline_line(&e),
            "+1.500s  ack from dtn://bravo/ by stream"
        );
    }

    #[test]
    fn refusals_name_server_code_detail_and_stderr() {
        let mut r = reply(false);
        r.code = Some("predicate_failed".into());
        r.detail = Some("battery >= 50 failed: battery is 20".into());
        assert_eq!(
            refusal(&r),
            "dtn://bravo/ refused the call: predicate_failed: battery >= 50 failed: battery is 20"
        );
        r.code = Some("execution_failed".into());
        r.detail = Some("exited with status 2 after 4 ms".into());
        r.exit_status = Some(2);
        r.stderr_tail = Some("photo: SIZE must be 1 to 1000, not 0\n".into());
        assert_eq!(
            refusal(&r),
            "the call failed on dtn://bravo/: execution_failed: exited with status 2 after 4 ms\n\
             its stderr ended with:\n  photo: SIZE must be 1 to 1000, not 0"
        );
        r.detail = None;
        assert!(refusal(&r).contains("execution_failed (exit status 2)"));
    }

    #[test]
    fn failures_by_state() {
        assert_eq!(failure(&call("succeeded", vec![])), None);
        assert_eq!(failure(&call("waiting", vec![])), None);
        assert_eq!(
            failure(&call("cancelled", vec![])).unwrap(),
            "the call was cancelled"
        );
        assert_eq!(
            failure_status(&call("cancelled", vec![])),
            (Status::Cancelled, None)
        );
        let mut c = call("expired", vec![]);
        assert_eq!(failure_status(&c), (Status::NoResult, None));
        assert!(
            failure(&c)
                .unwrap()
                .starts_with("no result before the deadline")
        );
        c.acks = vec!["dtn://bravo/".into()];
        assert!(
            failure(&c)
                .unwrap()
                .ends_with("(acknowledged by dtn://bravo/)")
        );
        let mut r = reply(false);
        r.code = Some("not_offered".into());
        let c = call("failed", vec![r.clone()]);
        assert_eq!(
            failure(&c).unwrap(),
            "dtn://bravo/ refused the call: not_offered"
        );
        assert_eq!(
            failure_status(&c),
            (Status::CallFailed, Some("not_offered".into()))
        );
        let mut other = r.clone();
        other.server = "dtn://charlie/".into();
        let text = failure(&call("failed", vec![r, other])).unwrap();
        assert!(text.starts_with("no result:\n"), "{text}");
        assert!(text.contains("dtn://charlie/ refused"), "{text}");
        let mut late = reply(true);
        late.files = vec![file("photo.pgm", false)];
        let text = failure(&call("failed", vec![late.clone()])).unwrap();
        assert!(text.contains("not its files before the deadline: photo.pgm (1.2 MiB)"));
        assert_eq!(
            failure_status(&call("failed", vec![late])),
            (Status::NoResult, None)
        );
        // Part of it came: the message says how much.
        let mut part = reply(true);
        part.files = vec![file("photo.pgm", false)];
        part.files[0].received = Some(629_146);
        let text = failure(&call("failed", vec![part])).unwrap();
        assert!(
            text.ends_with("photo.pgm (1.2 MiB; 614.4 KiB of it here)"),
            "{text}"
        );
        assert_eq!(failure(&call("failed", vec![])).unwrap(), "the call failed");
        assert_eq!(
            failure_status(&call("failed", vec![])),
            (Status::CallFailed, None)
        );
    }

    #[test]
    fn the_winner_is_the_first_complete_result() {
        let mut a = reply(true);
        a.server = "dtn://a/".into();
        a.files = vec![file("x", false)];
        let mut b = reply(true);
        b.server = "dtn://b/".into();
        let c = call("succeeded", vec![reply(false), a.clone(), b]);
        assert_eq!(winner(&c).unwrap().server, "dtn://b/");
        let c = call("failed", vec![a]);
        assert_eq!(winner(&c).unwrap().server, "dtn://a/");
        assert!(winner(&call("failed", vec![reply(false)])).is_none());
    }

    #[test]
    fn result_file_names_stay_inside_the_output_directory() {
        assert_eq!(safe_relative_path("photo.pgm"), Some("photo.pgm".into()));
        assert_eq!(
            safe_relative_path("thumbs/a.pgm"),
            Some(PathBuf::from("thumbs").join("a.pgm"))
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            ".",
            "a/.",
            "x\\y",
            "a\0b",
            "a\nb",
        ] {
            assert_eq!(safe_relative_path(bad), None, "{bad:?}");
        }
        assert_eq!(fallback_name(&file("..", true)), "file-cdcdcdcdcdcdcdcd");
    }

    #[test]
    fn servers_become_directory_names() {
        assert_eq!(server_dir("dtn://bravo/"), "bravo");
        assert_eq!(server_dir("ipn:5.0"), "ipn_5.0");
        assert_eq!(server_dir("dtn://../"), "_..");
        assert_eq!(server_dir("dtn:///"), "server");
    }

    #[test]
    fn tables() {
        let mut c = call("waiting", vec![reply(true)]);
        c.created_ms = 1_000;
        let text = calls_table(&[c], 193_000);
        assert_eq!(
            text,
            "ID                                PROCEDURE  TARGET        STATE    REPLIES     AGE\n\
             0123456789abcdef0123456789abcdef  photo      dtn://bravo/  waiting        1  3m 12s\n"
        );
        let p = ProcedureInfo {
            name: "sum".into(),
            params: vec!["int".into(), "int".into()],
            parameters: Vec::new(),
            returns: None,
            served_by: "program".into(),
            connected: None,
            description: Some("Adds two integers.".into()),
            max_concurrent: 4,
            require: None,
            restricted: false,
            executions: 0,
        };
        // From a node that names no parameters (an older one): the types.
        assert_eq!(
            procedures_table(std::slice::from_ref(&p)),
            "NAME  PARAMS   AT ONCE  REQUIRE  CALLERS  DESCRIPTION\n\
             sum   int int        4           anyone   Adds two integers.\n"
        );
        let named = ProcedureInfo {
            parameters: ["a", "b"]
                .map(|n| daemon::calls::ParamInfo {
                    name: Some(n.into()),
                    ty: "int".into(),
                })
                .into(),
            ..p
        };
        assert!(procedures_table(&[named]).contains(" a:int b:int "));
    }
}
