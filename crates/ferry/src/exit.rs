//! How `ferry` ends: an exit status that tells a script what happened, and the error, as a line
//! on stderr or, with `--json`, as one JSON document on stdout.
//!
//! A command fails with an `anyhow::Error`. Most need not say what kind of failure it was: an
//! error the node's API answered ([`ClientError`]) anywhere in the chain already says "the node
//! refused, with this code" or "no node there". The failures only the command can judge (a
//! call's result never came, it was cancelled, a server refused it, the command line was wrong)
//! carry a [`Failure`] with their [`Status`]. A command that must end its own way when
//! interrupted says what to do on a signal with [`on_interrupt`].

use std::fmt;
use std::process::ExitCode;

use serde::Serialize;

use crate::client::ClientError;

/// What happened, as the exit status says it. The numbers are part of the command-line
/// interface: scripts test them. Listed in `ferry --help` ([`HELP`]) and docs/cli.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Anything else: a file that could not be read or written, an unexpected answer.
    Failure,
    /// The command line was wrong (clap's own status for its errors, kept for ours).
    Usage,
    /// No node API answered at the address, or the exchange with it broke.
    Unreachable,
    /// The node's API refused the request (the error carries its stable code).
    Refused,
    /// A call's server refused it or its procedure failed (the error carries the reject code).
    CallFailed,
    /// Nothing came in time: a call without a result by its deadline (or by `--timeout`), no
    /// delivery report, no bundle, no echo.
    NoResult,
    /// The call was cancelled.
    Cancelled,
}

impl Status {
    /// The process exit status.
    pub(crate) fn code(self) -> u8 {
        match self {
            Status::Failure => 1,
            Status::Usage => 2,
            Status::Unreachable => 3,
            Status::Refused => 4,
            Status::CallFailed => 5,
            Status::NoResult => 6,
            Status::Cancelled => 7,
        }
    }

    /// Its name in a JSON error.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Failure => "failure",
            Status::Usage => "usage",
            Status::Unreachable => "unreachable",
            Status::Refused => "refused",
            Status::CallFailed => "call_failed",
            Status::NoResult => "no_result",
            Status::Cancelled => "cancelled",
        }
    }
}

/// The exit statuses, for the end of `ferry --help`.
pub(crate) const HELP: &str = "\
Exit status:
  0    success
  1    any other failure (a file could not be read or written, an unexpected answer)
  2    usage: the command line was wrong
  3    no node API answered at --api (is `ferry node` running?), or the exchange broke
  4    the node refused the request; the error names its code (no_route, not_found, ...)
  5    a call's server refused it or its procedure failed; the error names the reject code
  6    nothing came in time: no result by the deadline or --timeout, no delivery report,
       no bundle, no echo
  7    the call was cancelled
  130  interrupted (Ctrl-C while waiting for a call: the call goes on, `ferry wait ID`)
With --json, an error is printed on stdout as one JSON document:
  {\"error\": {\"status\": \"refused\", \"exit\": 4, \"code\": \"no_route\", \"message\": \"...\"}}";

/// A failure whose kind only the command knows.
#[derive(Debug)]
pub(crate) struct Failure {
    status: Status,
    /// The stable code of who refused (the API's or the call's reject code), if any.
    code: Option<String>,
    message: String,
    /// With `--json`: what the command would have printed had it succeeded (a call as it
    /// ended), as a member of the error document beside `error`.
    document: Option<(&'static str, serde_json::Value)>,
}

impl Failure {
    /// A failure of this kind.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Self {
        Self {
            status,
            code: None,
            message: message.into(),
            document: None,
        }
    }

    /// With a document the error's JSON carries as `key` (`--json`).
    pub(crate) fn with_document(mut self, key: &'static str, value: serde_json::Value) -> Self {
        self.document = Some((key, value));
        self
    }

    /// With the stable code of who refused.
    pub(crate) fn with_code(mut self, code: Option<String>) -> Self {
        self.code = code;
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// From now on, Ctrl-C (and SIGTERM too, with `terminate`) runs `then` on a thread of its own
/// instead of ending the process; `then` ends it or tells the command to. The handlers are in
/// place when this returns, so no signal falls between it and what the command does next. If
/// they cannot be set up (the error says why), a signal ends the process as usual.
pub(crate) fn on_interrupt(
    terminate: bool,
    then: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut interrupt, mut term) = runtime.block_on(async {
        let term = if terminate {
            Some(signal(SignalKind::terminate())?)
        } else {
            None
        };
        Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, term))
    })?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async {
                match &mut term {
                    Some(term) => tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = term.recv() => {}
                    },
                    None => {
                        interrupt.recv().await;
                    }
                }
            });
            then();
        })?;
    Ok(())
}

/// A wrong command line that clap could not see (an argument's type, a target's form).
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    Failure::new(Status::Usage, message).into()
}

/// What kind of failure `e` is, the code of who refused, and the document its JSON carries: the
/// outermost [`Failure`] or [`ClientError`] in its chain decides.
fn classify_with_document(
    e: &anyhow::Error,
) -> (
    Status,
    Option<String>,
    Option<&(&'static str, serde_json::Value)>,
) {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return (f.status, f.code.clone(), f.document.as_ref());
        }
        if let Some(c) = cause.downcast_ref::<ClientError>() {
            return match c {
                ClientError::Unreachable { .. } | ClientError::Transport { .. } => {
                    (Status::Unreachable, None, None)
                }
                ClientError::Api { code, .. } => (Status::Refused, Some(code.clone()), None),
                ClientError::Http { .. } => (Status::Refused, None, None),
            };
        }
    }
    (Status::Failure, None, None)
}

/// The JSON document of an error (`--json`).
#[derive(Debug, Serialize)]
struct JsonError<'a> {
    error: JsonErrorBody<'a>,
    #[serde(flatten)]
    document: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Serialize)]
struct JsonErrorBody<'a> {
    status: &'static str,
    exit: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    message: &'a str,
}

/// The error as `--json` prints it: one line, one document, with what the command would have
/// printed beside it if there is such a `document`.
pub(crate) fn json_error(
    status: Status,
    code: Option<&str>,
    message: &str,
    document: Option<&(&'static str, serde_json::Value)>,
) -> String {
    let doc = JsonError {
        error: JsonErrorBody {
            status: status.name(),
            exit: status.code(),
            code,
            message,
        },
        document: document
            .map(|(key, value)| std::iter::once(((*key).to_owned(), value.clone())).collect()),
    };
    // A struct of strings and numbers always serialises.
    serde_json::to_string(&doc).unwrap_or_default()
}

/// Reports `e` (on stderr, or as JSON on stdout) and gives the exit status it means.
pub(crate) fn report(e: &anyhow::Error, json: bool) -> ExitCode {
    let (status, code, document) = classify_with_document(e);
    let message = format!("{e:#}");
    if json {
        // Best effort: if stdout is gone, stderr still gets the message.
        let line = json_error(status, code.as_deref(), &message, document) + "\n";
        if crate::output::write_stdout(&line).is_err() {
            eprintln!("ferry: {message}");
        }
    } else {
        eprintln!("ferry: {message}");
    }
    ExitCode::from(status.code())
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    fn classify(e: &anyhow::Error) -> (Status, Option<String>) {
        let (status, code, _) = classify_with_document(e);
        (status, code)
    }

    #[test]
    fn the_api_answer_decides_unless_the_command_knows_better() {
        let refused: anyhow::Error = ClientError::Api {
            status: 404,
            code: "no_route".into(),
            message: "no route".into(),
        }
        .into();
        let refused = refused.context("making the call");
        assert_eq!(
            classify(&refused),
            (Status::Refused, Some("no_route".into()))
        );
        let gone: anyhow::Error = ClientError::Unreachable {
            api: "127.0.0.1:1".into(),
            error: "refused".into(),
        }
        .into();
        assert_eq!(classify(&gone).0, Status::Unreachable);
        let failed = anyhow::Error::from(
            Failure::new(Status::CallFailed, "it failed").with_code(Some("timed_out".into())),
        )
        .context("call 12");
        assert_eq!(
            classify(&failed),
            (Status::CallFailed, Some("timed_out".into()))
        );
        assert_eq!(classify(&anyhow::anyhow!("disk full")).0, Status::Failure);
        let io: Result<(), std::io::Error> = Err(std::io::Error::other("x"));
        assert_eq!(
            classify(&io.context("reading").unwrap_err()).0,
            Status::Failure
        );
    }

    #[test]
    fn statuses_are_distinct_and_listed_in_the_help() {
        let all = [
            Status::Failure,
            Status::Usage,
            Status::Unreachable,
            Status::Refused,
            Status::CallFailed,
            Status::NoResult,
            Status::Cancelled,
        ];
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|s| s.code()).collect();
        assert_eq!(codes.len(), all.len());
        for s in all {
            assert!(
                HELP.contains(&format!("\n  {}  ", s.code())),
                "{s:?} missing from the help"
            );
        }
    }

    #[test]
    fn a_json_error_is_one_document() {
        let line = json_error(
            Status::Refused,
            Some("no_route"),
            "no \"route\"\nhere",
            None,
        );
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["error"]["status"], "refused");
        assert_eq!(v["error"]["exit"], 4);
        assert_eq!(v["error"]["code"], "no_route");
        assert_eq!(v["error"]["message"], "no \"route\"\nhere");
        let v: serde_json::Value =
            serde_json::from_str(&json_error(Status::Failure, None, "x", None)).unwrap();
        assert!(v["error"].get("code").is_none());
        assert_eq!(v.as_object().unwrap().len(), 1);
        let call = ("call", serde_json::json!({"id": "ab", "state": "expired"}));
        let line = json_error(Status::NoResult, None, "late", Some(&call));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["error"]["exit"], 6);
        assert_eq!(v["call"]["state"], "expired");
    }
}
