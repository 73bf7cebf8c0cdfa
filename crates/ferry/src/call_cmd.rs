//! The RPC commands: `ferry call`, `ferry calls`, `ferry result`, `ferry wait`, `ferry cancel`
//! and `ferry procedures`, over the node's `/v1/calls`, `/v1/files` and `/v1/procedures`.
//!
//! `ferry call` checks and types its arguments and reads every file it sends before it contacts
//! the node, makes the call (`POST /v1/calls`), then follows it with long polls of
//! `/v1/calls/{id}/wait` until it ends: the call's timeline goes to stderr as it grows, the
//! result value to stdout byte for byte, result files to `--out` once they have arrived. A
//! failure is the error message (who refused, the stable code, the detail, the stderr tail) and
//! a nonzero exit status. Ctrl-C while waiting only stops the waiting (exit status 130; a file
//! being written is finished first): the call goes on in the node, and `ferry wait ID` picks it
//! up again.
//!
//! How command-line arguments become parameters:
//!
//! | argument | parameter |
//! |---|---|
//! | `hello`, `3` | text (the server turns text into a declared int, float or bool) |
//! | `int:3`, `float:0.5`, `bool:true` | that type |
//! | `text:int:3` | the text `int:3` |
//! | `bytes:@PATH` | the file's content as a bytes value |
//! | `@PATH` | the file as a file parameter (named after it) |
//! | `@@x` | the text `@x` |

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use clap::{Args, ValueEnum};
use daemon::calls::{CallInfo, CallSpec, FileInfo, FileSpec, ParamSpec, ProcedureInfo, ReplyInfo};

use crate::api::dtn_now_ms;
use crate::calls_view::{
    self, calls_table, fallback_name, file_label, missing_file_label, procedures_table,
    safe_relative_path, server_dir, timeline_line,
};
use crate::client::{ApiArgs, Client, ClientError, api_duration, encode_component, query};
use crate::exit::{Failure, Status, usage};
use crate::names;
use crate::output::{
    print_json_pretty, progress_bar, with_progress, write_stdout, write_stdout_bytes,
};

/// One long poll asks the node to hold its answer at most this long. Short, because the node
/// answers early only when a reply arrives or the call ends: acks, fallbacks and arriving files
/// show up at the next poll.
const POLL: Duration = Duration::from_secs(1);
/// How long after a call's deadline `ferry call` keeps waiting for the node to end it.
const DEADLINE_GRACE: Duration = Duration::from_secs(60);

/// Arguments of `ferry call`.
#[derive(Args, Debug)]
pub(crate) struct CallArgs {
    /// Who runs it: `any` (one server that offers it), `all` (every server that answers before
    /// the deadline; each result prints as lines `NODE: value`), or a node: `bravo`,
    /// `dtn://bravo/`, `ipn:2`.
    target: String,
    /// The procedure's name.
    procedure: String,
    /// Its parameters, in order: text (converted by the server to a declared int, float or
    /// bool), or typed: int:3, float:0.5, bool:true, text:…, bytes:@PATH; @PATH sends a file,
    /// @@x the text @x. Put `--` before one that starts with `-` (other than a number).
    #[arg(value_name = "ARG", allow_negative_numbers = true)]
    args: Vec<String>,
    /// Send this file as a parameter after the others (repeatable).
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    files: Vec<PathBuf>,
    /// What the server must satisfy, e.g. "battery >= 50 && has(gps)".
    #[arg(long, value_name = "EXPR")]
    require: Option<String>,
    /// How the call travels: auto (stream to a reachable node, else dtn; datagram broadcast for
    /// any/all), or always datagram, stream or dtn.
    #[arg(long, value_enum, default_value = "auto")]
    transport: TransportArg,
    /// How long the call matters (e.g. 10m); default: the node's timers' full span.
    #[arg(long, value_name = "DUR", value_parser = crate::positive_duration)]
    deadline: Option<Duration>,
    /// How long to wait for an acknowledgement before going by dtn.
    #[arg(long, value_name = "DUR", value_parser = crate::positive_duration)]
    ack_timeout: Option<Duration>,
    /// How long to wait for the result after the acknowledgement before asking again by dtn.
    #[arg(long, value_name = "DUR", value_parser = crate::positive_duration)]
    result_timeout: Option<Duration>,
    /// Call a node this node has never heard of (no session, route, key or call of it); without
    /// this, such a name is refused at once as a likely typo. The call then waits for a path
    /// like any DTN call.
    #[arg(long)]
    to_unknown: bool,
    /// Make the call, print its id and exit; `ferry wait ID` or `ferry result ID` later.
    #[arg(long, conflicts_with_all = ["timeline", "quiet", "force"])]
    detach: bool,
    #[command(flatten)]
    follow: FollowArgs,
    #[command(flatten)]
    api: ApiArgs,
}

/// How a call is followed and its results written (`ferry call`, `ferry wait`).
#[derive(Args, Debug, Clone)]
struct FollowArgs {
    #[command(flatten)]
    out: OutArgs,
    /// Print the call's whole timeline to stderr at the end, instead of line by line as it
    /// happens.
    #[arg(long)]
    timeline: bool,
    /// No progress on stderr (errors still go there).
    #[arg(long, short)]
    quiet: bool,
}

/// Where result files go.
#[derive(Args, Debug, Clone)]
struct OutArgs {
    /// Write result files into DIR (an all-mode call: DIR/<server>/); created if missing.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Overwrite result files that exist (otherwise refused).
    #[arg(long)]
    force: bool,
}

/// Arguments of `ferry wait`.
#[derive(Args, Debug)]
pub(crate) struct WaitArgs {
    /// The call's id (32 hex digits, or a prefix that names one call).
    id: String,
    /// Give up waiting after this long (the call goes on); default: until the call ends.
    #[arg(long, value_name = "DUR", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    #[command(flatten)]
    follow: FollowArgs,
    #[command(flatten)]
    api: ApiArgs,
}

/// Arguments of `ferry result`.
#[derive(Args, Debug)]
pub(crate) struct ResultArgs {
    /// The call's id (32 hex digits, or a prefix that names one call).
    id: String,
    /// Print the call's timeline to stderr.
    #[arg(long)]
    timeline: bool,
    #[command(flatten)]
    out: OutArgs,
    #[command(flatten)]
    api: ApiArgs,
}

/// Arguments of `ferry cancel`.
#[derive(Args, Debug)]
pub(crate) struct CancelArgs {
    /// The call's id (32 hex digits, or a prefix that names one call).
    id: String,
    #[command(flatten)]
    api: ApiArgs,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    /// As the DTN-RPC paper's Fig. 2 says.
    Auto,
    /// Real time, best effort, resent until acknowledged.
    Datagram,
    /// Real time, reliable (explicit calls to a reachable node).
    Stream,
    /// Store-carry-forward.
    Dtn,
}

impl TransportArg {
    fn as_str(self) -> &'static str {
        match self {
            TransportArg::Auto => "auto",
            TransportArg::Datagram => "datagram",
            TransportArg::Stream => "stream",
            TransportArg::Dtn => "dtn",
        }
    }
}

/// A command-line argument, typed, before any file is read.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// `bytes:@PATH`: the file's content as a bytes value.
    BytesOf(PathBuf),
    /// `@PATH` or `--file PATH`: the file as a file parameter.
    File(PathBuf),
}

/// Types one argument (see the module doc).
fn parse_arg(s: &str) -> Result<Arg, String> {
    if let Some(rest) = s.strip_prefix("@@") {
        return Ok(Arg::Text(format!("@{rest}")));
    }
    if let Some(path) = s.strip_prefix('@') {
        if path.is_empty() {
            return Err("@ needs a path: @photo.jpg sends that file (@@ for a literal @)".into());
        }
        return Ok(Arg::File(path.into()));
    }
    let Some((prefix, rest)) = s.split_once(':') else {
        return Ok(Arg::Text(s.to_owned()));
    };
    match prefix {
        "text" => Ok(Arg::Text(rest.to_owned())),
        "int" => rest
            .parse()
            .map(Arg::Int)
            .map_err(|_| format!("{s:?}: {rest:?} is not a 64-bit integer")),
        "float" => match rest.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Arg::Float(x)),
            _ => Err(format!("{s:?}: {rest:?} is not a finite number")),
        },
        "bool" => match rest {
            "true" => Ok(Arg::Bool(true)),
            "false" => Ok(Arg::Bool(false)),
            _ => Err(format!("{s:?}: a bool is true or false")),
        },
        "bytes" => match rest.strip_prefix('@') {
            Some(path) if !path.is_empty() => Ok(Arg::BytesOf(path.into())),
            _ => Err(format!(
                "{s:?}: bytes are given as bytes:@PATH (the file's content)"
            )),
        },
        _ => Ok(Arg::Text(s.to_owned())),
    }
}

/// The typed arguments, positional first, then `--file`s. Reads no file.
fn parse_args(args: &[String], files: &[PathBuf]) -> Result<Vec<Arg>> {
    let mut out = Vec::with_capacity(args.len() + files.len());
    for (i, a) in args.iter().enumerate() {
        out.push(parse_arg(a).map_err(|e| anyhow!("parameter {}: {e}", i + 1))?);
    }
    out.extend(files.iter().cloned().map(Arg::File));
    Ok(out)
}

/// The API's parameter for an argument: files are read here (so a missing one fails before the
/// node is contacted). `n` counts from 1, for messages.
fn param_spec(n: usize, arg: Arg) -> Result<ParamSpec> {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let read = |path: &Path| {
        fs::read(path).with_context(|| format!("parameter {n}: reading {}", path.display()))
    };
    Ok(match arg {
        Arg::Text(t) => ParamSpec::Text(t),
        Arg::Int(i) => ParamSpec::Int(i),
        Arg::Float(x) => ParamSpec::Float(x),
        Arg::Bool(b) => ParamSpec::Bool(b),
        Arg::BytesOf(path) => ParamSpec::Bytes(b64(&read(&path)?)),
        Arg::File(path) => {
            let Some(name) = path.file_name() else {
                bail!("parameter {n}: {} names no file", path.display());
            };
            let name = name.to_string_lossy().into_owned();
            ParamSpec::File(FileSpec {
                name,
                base64: b64(&read(&path)?),
            })
        }
    })
}

impl CallArgs {
    /// The request, with every argument checked and every file read.
    fn spec(&self) -> Result<CallSpec> {
        let target = target(&self.target)?;
        if self.procedure.is_empty() {
            return Err(usage("give the procedure's name"));
        }
        let params = parse_args(&self.args, &self.files)
            .map_err(|e| usage(format!("{e:#}")))?
            .into_iter()
            .enumerate()
            .map(|(i, a)| param_spec(i + 1, a))
            .collect::<Result<_>>()?;
        Ok(CallSpec {
            target,
            procedure: self.procedure.clone(),
            params,
            requirements: self.require.clone(),
            transport: (self.transport != TransportArg::Auto)
                .then(|| self.transport.as_str().to_owned()),
            deadline: self.deadline.map(api_duration),
            ack_timeout: self.ack_timeout.map(api_duration),
            result_timeout: self.result_timeout.map(api_duration),
        })
    }
}

/// `any`, `all`, or a node, by any of its names ([`names::node`]), as the node id the API takes.
fn target(target: &str) -> Result<String> {
    match target.trim() {
        mode @ ("any" | "all") => Ok(mode.to_owned()),
        "" => Err(usage(
            "target: give a node (bravo, dtn://bravo/), any or all",
        )),
        node => names::node(node, false)
            .map(|n| n.to_string())
            .map_err(|e| usage(format!("target: {e:#}"))),
    }
}

pub(crate) fn run_call(args: CallArgs) -> Result<()> {
    let spec = args.spec()?;
    let client = Client::new(&args.api.api);
    if !args.to_unknown && spec.target != "any" && spec.target != "all" {
        check_heard_of(&client, &spec.target)?;
    }
    let made: CallInfo = serde_json::from_value(
        client
            .post_json("/v1/calls", &spec)
            .context("making the call")?,
    )
    .context("unexpected answer from the ferry node API to a call")?;
    if args.detach {
        return if args.api.json {
            print_json_pretty(&made)
        } else {
            Ok(write_stdout(&format!("{}\n", made.id))?)
        };
    }
    if !args.follow.quiet {
        eprintln!("call {}: {} on {}", made.id, made.procedure, made.target);
    }
    follow_to_end(&client, made, &args.follow, args.api.json, None)
}

pub(crate) fn run_wait(args: WaitArgs) -> Result<()> {
    let client = Client::new(&args.api.api);
    let id = resolve_id(&client, &args.id)?;
    let call = get_call(&client, &id)?;
    let until = args.timeout.map(|t| (Instant::now() + t, t));
    follow_to_end(&client, call, &args.follow, args.api.json, until)
}

pub(crate) fn run_result(args: ResultArgs) -> Result<()> {
    let client = Client::new(&args.api.api);
    let id = resolve_id(&client, &args.id)?;
    let call = get_call(&client, &id)?;
    if args.timeline {
        eprint!("{}", calls_view::timeline(&call));
    }
    let mut show = Show::new(
        &client,
        &call,
        ShowOpts {
            live_timeline: false,
            progress: false,
            values: !args.api.json,
            out: args.out,
        },
    );
    show.update(&call)?;
    conclude_as(&mut show, &call, args.api.json)
}

pub(crate) fn run_cancel(args: CancelArgs) -> Result<()> {
    let client = Client::new(&args.api.api);
    let id = resolve_id(&client, &args.id)?;
    // Looked at first: the API answers a cancel of an ended call with the call as it is, which
    // would read as if this cancel had ended it.
    let before = get_call(&client, &id)?;
    let ended_before = before.finished();
    let call = if ended_before {
        before
    } else {
        let answer = client
            .post_empty(&format!("{}/cancel", call_path(&id)))
            .map_err(|e| not_found_as_unknown(e, &id))?;
        serde_json::from_value::<CallInfo>(answer)
            .context("unexpected answer from the ferry node API to a cancel")?
    };
    if args.api.json {
        return print_json_pretty(&call);
    }
    let line = if ended_before {
        format!(
            "call {}: {} (it had already ended; nothing to cancel)\n",
            call.id, call.state
        )
    } else {
        // `cancelled`, unless the call ended by itself in the meantime.
        format!("call {}: {}\n", call.id, call.state)
    };
    Ok(write_stdout(&line)?)
}

pub(crate) fn run_calls(api: ApiArgs) -> Result<()> {
    let client = Client::new(&api.api);
    if api.json {
        return print_json_pretty(&client.get_value("/v1/calls")?);
    }
    let calls: Vec<CallInfo> = client.get_json("/v1/calls")?;
    Ok(write_stdout(&calls_table(&calls, dtn_now_ms()))?)
}

/// Arguments of `ferry procedures`.
#[derive(Args, Debug)]
pub(crate) struct ProceduresArgs {
    /// Another node whose procedures to list (asked with a call of its built-in
    /// `ferry.procedures`); default: this node's.
    node: Option<String>,
    /// Write typed stubs in this language instead of a table (`python`: a module with one
    /// method per procedure, each call a future).
    #[arg(long, value_name = "LANGUAGE", value_parser = ["python"])]
    stubs: Option<String>,
    /// Write the stubs to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE", requires = "stubs")]
    out: Option<PathBuf>,
    /// How long to wait for another node's answer.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    wait: Duration,
    #[command(flatten)]
    api: ApiArgs,
}

pub(crate) fn run_procedures(args: ProceduresArgs) -> Result<()> {
    let client = Client::new(&args.api.api);
    let (node, value) = match &args.node {
        None => {
            let status = client.get_value("/v1/status")?;
            let node = status["node_id"].as_str().unwrap_or_default().to_owned();
            (node, client.get_value("/v1/procedures")?)
        }
        Some(target) => remote_procedures(&client, target, args.wait)?,
    };
    let procedures: Vec<ProcedureInfo> = serde_json::from_value(value.clone())
        .context("the procedures the node declared are not a list of procedures")?;
    if let Some(language) = &args.stubs {
        debug_assert_eq!(language, "python");
        let mut command = "ferry procedures".to_owned();
        if let Some(n) = &args.node {
            command.push(' ');
            command.push_str(n);
        }
        command.push_str(" --stubs python");
        let module = crate::stubs::python(&node, &procedures, &command);
        return match &args.out {
            Some(path) => {
                std::fs::write(path, format!("{module}\n"))
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!(
                    "wrote stubs for {} procedures of {} to {}",
                    procedures
                        .iter()
                        .filter(|p| p.name != "ferry.procedures")
                        .count(),
                    node,
                    path.display()
                );
                Ok(())
            }
            None => Ok(write_stdout(&format!("{module}\n"))?),
        };
    }
    if args.api.json {
        return print_json_pretty(&value);
    }
    Ok(write_stdout(&procedures_table(&procedures))?)
}

/// Another node's declarations: a call of its built-in `ferry.procedures`, waited for.
fn remote_procedures(
    client: &Client,
    target: &str,
    wait: Duration,
) -> Result<(String, serde_json::Value)> {
    let spec = serde_json::json!({
        "target": target,
        "procedure": "ferry.procedures",
        "deadline": crate::client::api_duration(wait),
    });
    let path = format!("/v1/calls?wait={}", crate::client::api_duration(wait));
    let call: CallInfo = serde_json::from_value(
        client
            .post_json(&path, &spec)
            .context("asking the node for its procedures")?,
    )
    .context("unexpected answer from the ferry node API to a call")?;
    let Some(reply) = call.replies.iter().find(|r| r.ok) else {
        if let Some(refused) = call.replies.first() {
            bail!(
                "{target} did not list its procedures: {}{}",
                refused.code.as_deref().unwrap_or("refused"),
                refused
                    .detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
        }
        bail!(
            "{target} did not answer within {} (the call {} goes on; `ferry result {}` reads its answer later)",
            humantime::format_duration(wait),
            call.id,
            call.id
        );
    };
    let text = reply.value_text.as_deref().unwrap_or("[]");
    let value: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("{target} answered ferry.procedures with something not JSON"))?;
    Ok((reply.server.clone(), value))
}

fn call_path(id: &str) -> String {
    format!("/v1/calls/{}", encode_component(id))
}

fn not_found_as_unknown(e: ClientError, id: &str) -> anyhow::Error {
    if e.is_not_found() {
        no_such_call(format!(
            "this node has no call {id} (`ferry calls` lists the ones it has)"
        ))
    } else {
        e.into()
    }
}

fn get_call(client: &Client, id: &str) -> Result<CallInfo> {
    client
        .get_json(&call_path(id))
        .map_err(|e| not_found_as_unknown(e, id))
}

/// Refuses a target this node has never heard of: no session with it, no route to it, no key
/// for it, no call it keeps made to it, and not itself. A DTN call to such a node waits out its
/// whole deadline in silence, which for a typo (`dron`) is minutes lost; `--to-unknown` makes it
/// anyway. If the node cannot say what it knows, the call goes ahead.
fn check_heard_of(client: &Client, target: &str) -> Result<()> {
    let Some(known) = known_nodes(client) else {
        return Ok(());
    };
    if known.contains(target) {
        return Ok(());
    }
    let mut message =
        format!("this node has never heard of {target} (no session, route, key or call of it)");
    let near = near_names(target, &known);
    if !near.is_empty() {
        message.push_str(&format!("; did you mean {}?", near.join(" or ")));
    } else if known.is_empty() {
        message.push_str("; it knows no other node yet");
    } else {
        let listed: Vec<&str> = known.iter().map(String::as_str).take(8).collect();
        let more = if known.len() > listed.len() {
            ", …"
        } else {
            ""
        };
        message.push_str(&format!("; it knows {}{more}", listed.join(", ")));
    }
    message.push_str(". To call it anyway (it may come within reach later), add --to-unknown");
    Err(usage(message))
}

/// Every node id this node knows of: itself, its peers, its routes' destinations, the nodes it
/// has keys for, and the targets of the calls it keeps. `None` if it could not be asked.
fn known_nodes(client: &Client) -> Option<BTreeSet<String>> {
    let get = |path: &str, field: &str| -> Option<Vec<String>> {
        let value = client.get_value(path).ok()?;
        Some(
            value
                .as_array()?
                .iter()
                .filter_map(|item| item.get(field)?.as_str().map(str::to_owned))
                .collect(),
        )
    };
    let mut known = BTreeSet::new();
    known.insert(
        client
            .get_value("/v1/status")
            .ok()?
            .get("node_id")?
            .as_str()?
            .to_owned(),
    );
    known.extend(get("/v1/peers", "node_id")?);
    known.extend(get("/v1/routes", "destination")?);
    known.extend(get("/v1/keys", "node")?);
    known.extend(get("/v1/calls", "target")?);
    known.remove("any");
    known.remove("all");
    Some(known)
}

/// The known node ids whose names are within a typo of `target`'s (as clap suggests
/// subcommands: Jaro similarity above 0.8), best first.
fn near_names(target: &str, known: &BTreeSet<String>) -> Vec<String> {
    // The names alone: `dtn://` and the slash, common to all, would make any two look alike.
    let bare = |id: &str| {
        id.strip_prefix("dtn://")
            .map(|rest| rest.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| id.to_owned())
    };
    let name = bare(target);
    let mut near: Vec<(f64, &String)> = known
        .iter()
        .map(|k| (strsim::jaro(&name, &bare(k)), k))
        .filter(|(score, _)| *score > 0.8)
        .collect();
    near.sort_by(|a, b| b.0.total_cmp(&a.0));
    near.into_iter().take(3).map(|(_, k)| k.clone()).collect()
}

/// The node has no such call: refused, with the API's code for it.
fn no_such_call(message: String) -> anyhow::Error {
    Failure::new(Status::Refused, message)
        .with_code(Some("not_found".into()))
        .into()
}

/// A call id as given, or the one id a shorter hex prefix names among the node's calls.
fn resolve_id(client: &Client, given: &str) -> Result<String> {
    let given = given.trim().to_ascii_lowercase();
    if given.is_empty() || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(usage(format!(
            "{given:?} is not a call id (32 hex digits, or the start of one)"
        )));
    }
    if given.len() >= 32 {
        return Ok(given);
    }
    let calls: Vec<CallInfo> = client.get_json("/v1/calls")?;
    let matching: Vec<&CallInfo> = calls.iter().filter(|c| c.id.starts_with(&given)).collect();
    match matching.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(no_such_call(format!(
            "this node has no call starting with {given} (`ferry calls` lists them)"
        ))),
        many => Err(usage(format!(
            "{given} is the start of {} calls' ids; give more digits",
            many.len()
        ))),
    }
}

/// Long-polls the call until it ends (or `until`, or past its deadline), showing it as it goes,
/// then writes its results and judges it.
fn follow_to_end(
    client: &Client,
    mut call: CallInfo,
    args: &FollowArgs,
    json: bool,
    until: Option<(Instant, Duration)>,
) -> Result<()> {
    stop_waiting_on_ctrl_c(&call.id);
    let mut show = Show::new(
        client,
        &call,
        ShowOpts {
            live_timeline: !args.quiet && !args.timeline,
            progress: !args.quiet,
            values: !json,
            out: args.out.clone(),
        },
    );
    let resume = |what: String, id: &str| {
        anyhow::Error::from(Failure::new(
            Status::NoResult,
            format!("{what}; the call goes on: ferry wait {id}"),
        ))
    };
    loop {
        show.update(&call)?;
        if call.finished() {
            break;
        }
        let mut wait = POLL;
        if let Some((at, total)) = until {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(resume(
                    format!("still waiting after {}", humantime::format_duration(total)),
                    &call.id,
                ));
            }
            wait = wait.min(left);
        }
        let grace_ms = DEADLINE_GRACE.as_millis() as u64;
        if dtn_now_ms() > call.deadline_ms.saturating_add(grace_ms) {
            return Err(resume(
                "the node still has the call waiting long past its deadline".into(),
                &call.id,
            ));
        }
        let path = format!(
            "{}/wait{}",
            call_path(&call.id),
            query(&[
                ("timeout", api_duration(wait)),
                ("replies", call.replies.len().to_string()),
                // Back as soon as another result file arrives, to say so.
                ("files", call.arrived_files().to_string()),
            ])
        );
        call = client.long_poll(&path, wait).map_err(|e| {
            if e.is_not_found() {
                not_found_as_unknown(e, &call.id)
            } else {
                anyhow!(e).context(format!(
                    "waiting for call {} (`ferry wait {0}` to try again)",
                    call.id
                ))
            }
        })?;
    }
    if args.timeline {
        eprint!("{}", calls_view::timeline(&call));
    }
    conclude_as(&mut show, &call, json)
}

/// Writes the call's result and judges it; with `--json` the call is the one document printed:
/// alone if it succeeded, inside the error document if not.
fn conclude_as(show: &mut Show<'_>, call: &CallInfo, json: bool) -> Result<()> {
    let judged = show.conclude(call);
    if !json {
        return judged;
    }
    match judged {
        Ok(()) => print_json_pretty(call),
        Err(e) => match e.downcast::<Failure>() {
            Ok(failure) => Err(failure
                .with_document("call", serde_json::to_value(call)?)
                .into()),
            Err(e) => Err(e),
        },
    }
}

/// What [`Show`] prints and writes.
struct ShowOpts {
    /// Timeline entries to stderr as they appear.
    live_timeline: bool,
    /// Lines about files and servers to stderr.
    progress: bool,
    /// Result values to stdout (not with `--json`).
    values: bool,
    out: OutArgs,
}

/// Shows a call as it changes: new timeline entries, results of an all-mode call as they come,
/// result files waited for and arrived; and at the end writes the result and judges the call.
struct Show<'a> {
    client: &'a Client,
    opts: ShowOpts,
    all: bool,
    timeline_shown: usize,
    /// Replies already looked at (all mode prints each result once).
    replies_shown: usize,
    /// Result files (server, hash) announced as awaited, and those whose arrival was told.
    awaited: BTreeSet<(String, String)>,
    arrived: BTreeSet<(String, String)>,
    /// Bytes of arriving result files last told, so that only progress is printed.
    told_received: BTreeMap<(String, String), u64>,
    /// Result files (server, hash) written to `--out`.
    written: BTreeSet<(String, String)>,
}

impl<'a> Show<'a> {
    fn new(client: &'a Client, call: &CallInfo, opts: ShowOpts) -> Self {
        Self {
            client,
            opts,
            all: call.target == "all",
            timeline_shown: 0,
            replies_shown: 0,
            awaited: BTreeSet::new(),
            arrived: BTreeSet::new(),
            told_received: BTreeMap::new(),
            written: BTreeSet::new(),
        }
    }

    /// Shows what is new in `call`.
    fn update(&mut self, call: &CallInfo) -> Result<()> {
        if self.opts.live_timeline {
            for e in call.timeline.iter().skip(self.timeline_shown) {
                eprintln!("{}", timeline_line(e));
            }
        }
        self.timeline_shown = self.timeline_shown.max(call.timeline.len());
        for r in call.replies.iter().skip(self.replies_shown) {
            if self.all && r.ok && self.opts.values {
                let lines = attributed(&r.server, &reply_value(r)?);
                let _busy = hold_interrupts();
                write_stdout(&lines).context("writing the result to stdout")?;
            }
        }
        self.replies_shown = call.replies.len();
        for r in call.replies.iter().filter(|r| r.ok) {
            for f in &r.files {
                let key = (r.server.clone(), f.hash.clone());
                if !f.arrived {
                    if self.opts.progress && self.awaited.insert(key.clone()) {
                        eprintln!("waiting for {}…", file_label(f));
                    }
                    // Pieces of it are here (fragments, or what a cut link brought): say how
                    // much whenever that grows (once per poll at most).
                    if let Some(n) = f.received
                        && self.opts.progress
                        && self.told_received.get(&key) != Some(&n)
                    {
                        self.told_received.insert(key, n);
                        eprintln!("{}", missing_file_label(f));
                    }
                    continue;
                }
                if self.opts.progress && self.awaited.contains(&key) && self.arrived.insert(key) {
                    eprintln!("{} arrived", file_label(f));
                }
                // An all-mode call's files are written as they come; the others' at the end,
                // from the one result the call returns.
                if self.all {
                    self.write_file(r, f)?;
                }
            }
        }
        Ok(())
    }

    /// Writes the call's result (explicit, any) and judges it: `Ok` if it succeeded.
    fn conclude(&mut self, call: &CallInfo) -> Result<()> {
        if call.state == "waiting" {
            let missing: Vec<String> = call
                .replies
                .iter()
                .filter(|r| r.ok)
                .flat_map(|r| {
                    r.files
                        .iter()
                        .filter(|f| !f.arrived)
                        .map(missing_file_label)
                })
                .collect();
            let mut why = format!("call {} is still waiting", call.id);
            if !missing.is_empty() {
                why.push_str(&format!(
                    " (its result came; not yet its files: {})",
                    missing.join(", ")
                ));
            }
            why.push_str(&format!(": ferry wait {}", call.id));
            return Err(Failure::new(Status::NoResult, why).into());
        }
        if let Some(why) = calls_view::failure(call) {
            let (status, code) = calls_view::failure_status(call);
            return Err(Failure::new(status, why).with_code(code).into());
        }
        if self.all {
            for r in call.replies.iter().filter(|r| !r.ok) {
                if self.opts.progress {
                    eprintln!("{}", calls_view::refusal(r));
                }
            }
            for r in call.replies.iter().filter(|r| r.ok) {
                for f in r.files.iter().filter(|f| !f.arrived) {
                    eprintln!(
                        "ferry: {} from {} did not arrive before the deadline",
                        file_label(f),
                        r.server
                    );
                }
            }
            return Ok(());
        }
        let winner = calls_view::winner(call)
            .ok_or_else(|| anyhow!("the call {} without a result", call.state))?;
        for f in &winner.files {
            self.write_file(winner, f)?;
        }
        if self.opts.values {
            let mut value = reply_value(winner)?;
            // Exactly the bytes, into a file or a pipe; a terminal gets its newline.
            if io::stdout().is_terminal()
                && std::str::from_utf8(&value).is_ok()
                && !value.is_empty()
                && !value.ends_with(b"\n")
            {
                value.push(b'\n');
            }
            let _busy = hold_interrupts();
            write_stdout_bytes(&value).context("writing the result to stdout")?;
        }
        Ok(())
    }

    /// Downloads an arrived result file into `--out` (an all-mode call: `--out/<server>/`).
    fn write_file(&mut self, r: &ReplyInfo, f: &FileInfo) -> Result<()> {
        let key = (r.server.clone(), f.hash.clone());
        if self.written.contains(&key) {
            return Ok(());
        }
        let mut dir = self.opts.out.out.clone();
        if self.all {
            dir.push(server_dir(&r.server));
        }
        let rel = match safe_relative_path(&f.name) {
            Some(rel) => rel,
            None => {
                let name = fallback_name(f);
                eprintln!(
                    "ferry: the result file name {:?} could reach outside {}; writing it as {name}",
                    f.name,
                    dir.display()
                );
                PathBuf::from(name)
            }
        };
        let path = dir.join(rel);
        let _busy = hold_interrupts();
        download(self.client, f, &path, self.opts.out.force)?;
        if self.opts.progress {
            eprintln!(
                "wrote {} ({})",
                path.display(),
                crate::output::fmt_bytes(f.size)
            );
        }
        self.written.insert(key);
        Ok(())
    }
}

/// An all-mode result on stdout: each line of the value after the server's name, as `pdsh` and
/// `parallel --tag` print theirs, so values from several servers neither run together nor lose
/// who sent them (`grep '^dtn://drone/: '`). A value that is not text goes as one line of
/// base64.
fn attributed(server: &str, value: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(value) else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        return format!("{server}: base64:{b64}\n");
    };
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n')
        .map(|line| format!("{server}: {line}\n"))
        .collect()
}

/// A result's value bytes.
fn reply_value(r: &ReplyInfo) -> Result<Vec<u8>> {
    match &r.value_base64 {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .context("unexpected answer from the ferry node API: a value that is not base64"),
        None => Ok(r.value_text.clone().unwrap_or_default().into_bytes()),
    }
}

/// Fetches `/v1/files/{hash}` into `path`: written under a hidden name beside it, checked
/// against the announced size, then put in place, never over an existing file unless `force`.
fn download(client: &Client, f: &FileInfo, path: &Path, force: bool) -> Result<()> {
    let taken = |path: &Path| {
        anyhow!(
            "{} exists; not overwritten (--force overwrites it, or give another --out)",
            path.display()
        )
    };
    if !force && fs::symlink_metadata(path).is_ok() {
        return Err(taken(path));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let part = dir.join(format!(".{name}.part"));
    let (len, body) = client
        .get_stream(&format!("/v1/files/{}", encode_component(&f.hash)))
        .with_context(|| format!("fetching {}", f.name))?;
    let bar = progress_bar(len.or(Some(f.size)), &f.name);
    let written = write_part(with_progress(body, bar.as_ref()), &part, f.size);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Err(e) = written {
        let _ = fs::remove_file(&part);
        return Err(e.context(format!("writing {}", path.display())));
    }
    let placed = if force {
        fs::rename(&part, path)
    } else {
        // A hard link fails if the name is taken meanwhile: no overwrite even in a race.
        match fs::hard_link(&part, path) {
            Ok(()) => fs::remove_file(&part),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = fs::remove_file(&part);
                return Err(taken(path));
            }
            // A file system without hard links: check, then rename.
            Err(_) if fs::symlink_metadata(path).is_ok() => {
                let _ = fs::remove_file(&part);
                return Err(taken(path));
            }
            Err(_) => fs::rename(&part, path),
        }
    };
    placed.with_context(|| format!("putting {} in place", path.display()))
}

fn write_part(mut body: Box<dyn Read>, part: &Path, size: u64) -> Result<()> {
    let mut file = File::create(part).with_context(|| format!("creating {}", part.display()))?;
    let n = io::copy(&mut body, &mut file)?;
    if n != size {
        bail!("the file was cut short: {n} of {size} bytes");
    }
    file.flush()?;
    file.sync_all()?;
    Ok(())
}

/// Held while a result is being written (see [`hold_interrupts`]).
static WRITING: Mutex<()> = Mutex::new(());

/// From now on, Ctrl-C stops the waiting, not the call: it says how to pick the call up again
/// and exits with status 130. Without this (before it, or if the watcher thread cannot start),
/// Ctrl-C ends the process as usual, which also leaves the call alone.
fn stop_waiting_on_ctrl_c(id: &str) {
    let id = id.to_owned();
    let _ = crate::exit::on_interrupt(false, move || {
        // A write in progress ends first (a poisoned lock is as good as a free one).
        let _writing = WRITING.lock();
        eprintln!("\nferry: stopped waiting; the call goes on: ferry wait {id}");
        std::process::exit(130);
    });
}

/// Keeps Ctrl-C from ending the process until the guard is dropped, so an interrupt never
/// leaves half a result on stdout or a half-written file behind.
fn hold_interrupts() -> std::sync::MutexGuard<'static, ()> {
    WRITING.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        call: CallArgs,
    }

    fn parse(args: &[&str]) -> Result<CallArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("call").chain(args.iter().copied())).map(|c| c.call)
    }

    fn arg(s: &str) -> Arg {
        parse_arg(s).unwrap()
    }

    #[test]
    fn arguments_are_text_unless_typed() {
        assert_eq!(arg("hello"), Arg::Text("hello".into()));
        assert_eq!(arg("3"), Arg::Text("3".into()));
        assert_eq!(arg(""), Arg::Text("".into()));
        assert_eq!(arg("int:3"), Arg::Int(3));
        assert_eq!(arg("int:-42"), Arg::Int(-42));
        assert_eq!(arg("float:0.5"), Arg::Float(0.5));
        assert_eq!(arg("bool:true"), Arg::Bool(true));
        assert_eq!(arg("bool:false"), Arg::Bool(false));
        assert_eq!(arg("text:int:3"), Arg::Text("int:3".into()));
        assert_eq!(arg("text:"), Arg::Text("".into()));
        assert_eq!(arg("bytes:@a.bin"), Arg::BytesOf("a.bin".into()));
        assert_eq!(arg("@photo.jpg"), Arg::File("photo.jpg".into()));
        assert_eq!(arg("@dir/x y"), Arg::File("dir/x y".into()));
        assert_eq!(arg("@@x"), Arg::Text("@x".into()));
        assert_eq!(arg("@@"), Arg::Text("@".into()));
        // Only the listed prefixes are types.
        assert_eq!(arg("http://x/"), Arg::Text("http://x/".into()));
        assert_eq!(arg("uint:3"), Arg::Text("uint:3".into()));
        assert_eq!(arg("a:b:c"), Arg::Text("a:b:c".into()));
    }

    #[test]
    fn bad_typed_arguments_say_what_is_wrong() {
        for (bad, says) in [
            ("int:x", "not a 64-bit integer"),
            ("int:99999999999999999999", "not a 64-bit integer"),
            ("int:", "not a 64-bit integer"),
            ("float:nan", "not a finite number"),
            ("float:inf", "not a finite number"),
            ("float:abc", "not a finite number"),
            ("bool:yes", "true or false"),
            ("bytes:abc", "bytes:@PATH"),
            ("bytes:@", "bytes:@PATH"),
            ("@", "@ needs a path"),
        ] {
            let e = parse_arg(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let e = parse_args(&["ok".into(), "int:x".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("parameter 2: "), "{e}");
    }

    #[test]
    fn files_follow_the_positional_arguments() {
        let a = parse_args(&["x".into(), "@a".into()], &["b".into(), "c".into()]).unwrap();
        assert_eq!(
            a,
            vec![
                Arg::Text("x".into()),
                Arg::File("a".into()),
                Arg::File("b".into()),
                Arg::File("c".into())
            ]
        );
    }

    #[test]
    fn files_are_read_into_the_request() {
        let dir = std::env::temp_dir().join(format!("ferry-call-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.bin");
        fs::write(&path, [0u8, 1, 255]).unwrap();
        let p = path.to_str().unwrap();
        let a = parse(&[
            "bravo",
            "store",
            &format!("@{p}"),
            &format!("bytes:@{p}"),
            "--file",
            p,
            "int:7",
        ])
        .unwrap();
        let spec = a.spec().unwrap();
        let file = ParamSpec::File(FileSpec {
            name: "in.bin".into(),
            base64: "AAH/".into(),
        });
        assert_eq!(
            spec.params,
            vec![
                file.clone(),
                ParamSpec::Bytes("AAH/".into()),
                ParamSpec::Int(7),
                file
            ]
        );
        let missing = dir.join("missing.jpg");
        let a = parse(&["bravo", "x", "ok", &format!("@{}", missing.display())]).unwrap();
        let e = format!("{:#}", a.spec().unwrap_err());
        assert!(
            e.starts_with("parameter 2: reading ") && e.contains("missing.jpg"),
            "{e}"
        );
        let a = parse(&["bravo", "x", "@/"]).unwrap();
        assert!(a.spec().unwrap_err().to_string().contains("names no file"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_go_into_the_request() {
        let a = parse(&[
            "dtn://bravo/",
            "sum",
            "2",
            "-3",
            "--require",
            "battery >= 50",
            "--transport",
            "dtn",
            "--deadline",
            "10m",
            "--ack-timeout",
            "5s",
            "--result-timeout",
            "1500ms",
        ])
        .unwrap();
        let spec = a.spec().unwrap();
        assert_eq!(spec.target, "dtn://bravo/");
        assert_eq!(spec.procedure, "sum");
        assert_eq!(
            spec.params,
            vec![ParamSpec::Text("2".into()), ParamSpec::Text("-3".into())]
        );
        assert_eq!(spec.requirements.as_deref(), Some("battery >= 50"));
        assert_eq!(spec.transport.as_deref(), Some("dtn"));
        assert_eq!(spec.deadline.as_deref(), Some("600s"));
        assert_eq!(spec.ack_timeout.as_deref(), Some("5s"));
        assert_eq!(spec.result_timeout.as_deref(), Some("1500ms"));
        let spec = parse(&["any", "echo"]).unwrap().spec().unwrap();
        assert_eq!(spec.transport, None);
        assert_eq!(spec.deadline, None);
        assert!(spec.params.is_empty());
        let spec = parse(&["bravo", "echo", "--", "-x"])
            .unwrap()
            .spec()
            .unwrap();
        assert_eq!(spec.params, vec![ParamSpec::Text("-x".into())]);
    }

    #[test]
    fn bad_options_fail_before_any_request() {
        assert!(parse(&["bravo", "echo", "--transport", "pigeon"]).is_err());
        assert!(parse(&["bravo", "echo", "--deadline", "soon"]).is_err());
        assert!(parse(&["bravo"]).is_err(), "a procedure is required");
        assert!(parse(&["bravo", "echo", "--detach", "--timeline"]).is_err());
        assert!(parse(&["bravo", "echo", "--detach", "--force"]).is_err());
        for zero in ["--deadline", "--ack-timeout", "--result-timeout"] {
            let e = parse(&["bravo", "echo", zero, "0s"]).err().unwrap();
            assert!(e.to_string().contains(zero), "{e}");
            assert!(e.to_string().contains("more than zero"), "{e}");
        }
        let e = parse(&["dtn:bad", "echo"]).unwrap().spec().unwrap_err();
        assert!(e.to_string().contains("is no node or endpoint"), "{e}");
        let e = parse(&[" ", "echo"]).unwrap().spec().unwrap_err();
        assert!(e.to_string().contains("give a node"), "{e}");
        let a = parse(&["bravo", "echo", "--detach", "--json"]).unwrap();
        assert!(a.detach && a.api.json);
    }

    #[test]
    fn all_mode_values_name_their_server_on_every_line() {
        assert_eq!(attributed("dtn://a/", b"42\n"), "dtn://a/: 42\n");
        assert_eq!(attributed("dtn://a/", b"42"), "dtn://a/: 42\n");
        assert_eq!(
            attributed("dtn://b/", b"one\ntwo\n"),
            "dtn://b/: one\ndtn://b/: two\n"
        );
        assert_eq!(attributed("dtn://c/", b""), "dtn://c/: \n");
        assert_eq!(
            attributed("dtn://d/", &[0xff, 0]),
            "dtn://d/: base64:/wA=\n"
        );
    }

    #[test]
    fn typos_find_their_node() {
        let known: BTreeSet<String> = ["dtn://drone/", "dtn://tower/", "dtn://truck/"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(near_names("dtn://dron/", &known), ["dtn://drone/"]);
        assert_eq!(near_names("dtn://trck/", &known)[0], "dtn://truck/");
        assert!(near_names("dtn://satellite/", &known).is_empty());
    }

    #[test]
    fn targets() {
        for (given, taken) in [
            ("any", "any"),
            ("all", "all"),
            ("bravo", "dtn://bravo/"),
            ("dtn://bravo", "dtn://bravo/"),
            ("dtn://bravo/", "dtn://bravo/"),
            ("ipn:5", "ipn:5.0"),
            ("ipn:5.0", "ipn:5.0"),
        ] {
            assert_eq!(target(given).unwrap(), taken, "{given}");
        }
        // A service is not a node: said at once, as a usage error.
        let e = target("dtn://bravo/inbox").unwrap_err();
        assert!(e.to_string().contains("give a node: dtn://bravo/"), "{e}");
    }
}
