//! One call of a run, made with the client's `ferry call --json` in its namespace, and read
//! back from the call's record as the node reports it: how it first left, whether it went by
//! dtn, its first complete result (value, and every file arrived and equal to the echo's
//! inversion of what was sent) and when that came.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use sim::eval_record::{first_transport, went_dtn};

/// The DTN epoch (2000-01-01) in Unix milliseconds: the API's `*_ms` times count from it.
const DTN_EPOCH_UNIX_MS: u64 = 946_684_800_000;

/// What a call asks for.
pub struct CallSpec<'a> {
    /// `dtn://n<i>/`, `any` or `all`.
    pub target: String,
    /// `dtn`, `datagram`, `stream` or `auto`.
    pub transport: &'a str,
    /// The call's whole time.
    pub budget: Duration,
    /// Its acknowledgement timer.
    pub ack: Duration,
    /// Its result timer.
    pub result: Duration,
    /// The text it sends (0MB), or the file.
    pub arg: CallArg<'a>,
}

/// The echo's parameter.
pub enum CallArg<'a> {
    /// A text, echoed.
    Text(&'a str),
    /// A file, sent back inverted into `out`.
    File {
        /// The file sent.
        path: &'a Path,
        /// Where the result's file is written.
        out: &'a Path,
        /// What it must hold: the sent bytes, inverted.
        expected: &'a [u8],
    },
}

/// How a call went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOutcome {
    /// The call's id (empty if the client refused it).
    pub id: String,
    /// When it was made, Unix ms.
    pub made_unix_ms: u64,
    /// How it first left: `stream`, `datagram`, `dtn` (empty: never left).
    pub called_by: String,
    /// Sent by dtn at some point.
    pub went_dtn: bool,
    /// Its first complete result: the transport it came by and when, Unix ms.
    pub result: Option<(String, u64)>,
    /// Its state at the end (`succeeded`, `failed`, `expired`, …).
    pub state: String,
    /// Why it failed, as the client said (empty if it did not).
    pub error: String,
}

/// Makes the call from node `client` and waits for its end.
pub fn make(
    nodes: &crate::nodes::Nodes,
    client: usize,
    spec: &CallSpec<'_>,
) -> Result<CallOutcome> {
    let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
    let (budget, ack, result) = (ms(spec.budget), ms(spec.ack), ms(spec.result));
    let mut args: Vec<&str> = vec![
        "call",
        "--json",
        "--quiet",
        "--transport",
        spec.transport,
        "--deadline",
        &budget,
        "--ack-timeout",
        &ack,
        "--result-timeout",
        &result,
    ];
    if spec.target.starts_with("dtn://") {
        // The server may be in another island, never heard of yet: a DTN call waits for a path.
        args.push("--to-unknown");
    }
    let out_dir;
    match &spec.arg {
        CallArg::Text(_) => {}
        CallArg::File { out, .. } => {
            out_dir = out
                .to_str()
                .context("result directory not UTF-8")?
                .to_string();
            args.extend(["--out", &out_dir, "--force"]);
        }
    }
    args.push(&spec.target);
    args.push("echo");
    let file_arg;
    match &spec.arg {
        CallArg::Text(text) => {
            args.push("--");
            args.push(text);
        }
        CallArg::File { path, .. } => {
            file_arg = path.to_str().context("call file not UTF-8")?.to_string();
            args.extend(["--file", &file_arg]);
        }
    }
    let out = nodes.client(client, &args)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "ferry call in node {client} printed no JSON ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    // A failed call prints {"error": …, "call": {…}}; a finished one the call itself.
    let call = json.get("call").unwrap_or(&json);
    let Some(id) = call.get("id").and_then(Value::as_str) else {
        let error = json
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        // The client's node refused to make it (its engine found no way, say): not made. Any
        // other error (no API, a broken exchange) is the testbed's, not the call's.
        if json.pointer("/error/status").and_then(Value::as_str) == Some("refused") {
            return Ok(CallOutcome {
                error: error.to_string(),
                ..CallOutcome::default()
            });
        }
        bail!("ferry call in node {client} failed: {error}");
    };
    let mut outcome = read(call);
    outcome.id = id.to_string();
    outcome.error = json
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let (Some(_), CallArg::File { out, expected, .. }) = (&outcome.result, &spec.arg) {
        // The result counts only if the file came back as the echo makes it.
        let got = std::fs::read(out.join("echo.bin")).unwrap_or_default();
        let inverted =
            got.len() == expected.len() && got.iter().zip(expected.iter()).all(|(g, e)| *g == !*e);
        if !inverted {
            outcome.result = None;
        }
    }
    Ok(outcome)
}

/// Reads a call's record (the API's call object).
pub fn read(call: &Value) -> CallOutcome {
    let unix = |v: Option<&Value>| v.and_then(Value::as_u64).map(|ms| ms + DTN_EPOCH_UNIX_MS);
    let timeline: Vec<(u64, &str)> = call
        .get("timeline")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|e| Some((unix(e.get("at_ms"))?, e.get("text")?.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    let called_by = first_transport(timeline.iter().map(|(_, t)| *t)).to_string();
    let went_dtn = went_dtn(timeline.iter().map(|(_, t)| *t));
    let state = call
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let files_arrived_at = timeline
        .iter()
        .find(|(_, t)| t.starts_with("result files arrived"))
        .map(|(at, _)| *at);
    // The first reply that is a result whose files all arrived, as the simulator counts.
    let result = (state == "succeeded")
        .then(|| {
            call.get("replies")
                .and_then(Value::as_array)?
                .iter()
                .filter(|r| r.get("ok").and_then(Value::as_bool) == Some(true))
                .filter(|r| {
                    r.get("files").and_then(Value::as_array).is_none_or(|f| {
                        f.iter()
                            .all(|f| f.get("arrived").and_then(Value::as_bool) == Some(true))
                    })
                })
                .find_map(|r| {
                    let at = unix(r.get("at_ms"))?;
                    let has_files = r
                        .get("files")
                        .and_then(Value::as_array)
                        .is_some_and(|f| !f.is_empty());
                    let at = match (has_files, files_arrived_at) {
                        (true, Some(files)) => at.max(files),
                        _ => at,
                    };
                    Some((r.get("via")?.as_str()?.to_string(), at))
                })
        })
        .flatten();
    CallOutcome {
        id: String::new(),
        made_unix_ms: unix(call.get("created_ms")).unwrap_or(0),
        called_by,
        went_dtn,
        result,
        state,
        error: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_result_counts_when_its_files_arrived() {
        let call = serde_json::json!({
            "id": "x", "created_ms": 1000, "state": "succeeded",
            "replies": [{"at_ms": 1300, "ok": true, "via": "stream",
                         "files": [{"arrived": true, "name": "echo.bin"}]}],
            "timeline": [
                {"at_ms": 1000, "text": "called dtn://b/ by stream (1 hop), encrypted"},
                {"at_ms": 1300, "text": "result from dtn://b/ by stream (0 bytes, 1 file)"},
                {"at_ms": 1300, "text": "waiting for 1 result file by dtn"},
                {"at_ms": 1331, "text": "result files arrived"},
                {"at_ms": 1331, "text": "succeeded: done"}]
        });
        let o = read(&call);
        assert_eq!(o.called_by, "stream");
        assert!(!o.went_dtn);
        assert_eq!(o.made_unix_ms, 1000 + DTN_EPOCH_UNIX_MS);
        assert_eq!(o.result, Some(("stream".into(), 1331 + DTN_EPOCH_UNIX_MS)));
    }

    #[test]
    fn a_failed_or_expired_call_has_no_result() {
        let call = serde_json::json!({
            "id": "x", "created_ms": 1000, "state": "expired",
            "replies": [],
            "timeline": [{"at_ms": 1000, "text": "called any by dtn, signed"},
                         {"at_ms": 9000, "text": "expired"}]
        });
        let o = read(&call);
        assert_eq!(o.called_by, "dtn");
        assert!(o.went_dtn);
        assert_eq!(o.result, None);
        let failed = serde_json::json!({
            "id": "y", "created_ms": 1, "state": "failed",
            "replies": [{"at_ms": 5, "ok": false, "via": "dtn"}], "timeline": []
        });
        assert_eq!(read(&failed).result, None);
    }
}
