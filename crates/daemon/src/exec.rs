//! Running a procedure: argv (never a shell), a clean environment, a fresh working directory.
//!
//! [`run`] executes one [`Job`] and reports an [`Outcome`]. What the procedure sees:
//!
//! - **argv**: the program, then [`Job::args`] with every [`ArgTemplate::Param`] replaced by that
//!   parameter as one whole argument. `text` is passed as it came (a NUL byte cannot be, and is
//!   refused as [`OutcomeKind::BadArgument`]), `int`, `float` and `bool` as Rust prints them
//!   (`-3`, `0.5`, `1e300` in full, `NaN`, `inf`; `true`/`false`), `bytes` and `file` as the
//!   absolute path of a file holding them. No shell ever sees a parameter, so quotes, `$(…)`, `;`
//!   or globs in a text argument arrive verbatim.
//! - **a fresh working directory** `<work_root>/<call id>-<pid>-<counter>` (mode 0700), its cwd,
//!   holding `in/` (the inputs: a `file` parameter under its own name, sanitised: the part after
//!   the last `/` or `\`, control characters dropped, `.`, `..` and empty names replaced by
//!   `file-<hash of the content>`, a clash suffixed `-2`, `-3` … before the extension; a `bytes`
//!   parameter N as `argN.bin`), `out/` (see below) and `tmp/`. The directory is removed
//!   afterwards, whatever happened.
//! - **a clean environment**: only `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME=<dir>`,
//!   `TMPDIR=<dir>/tmp`, `LANG=C.UTF-8`, `FERRY_OUTPUT_DIR=<dir>/out`, `FERRY_CALL_ID` and
//!   `FERRY_CALLER`. stdin is `/dev/null`.
//! - **its own process group**. On timeout, cancellation or too much output the whole group is
//!   sent SIGKILL, and the procedure reaped. When the procedure exits by itself, whatever it left
//!   running in its group (a backgrounded `sleep`) is killed too: an execution ends with its
//!   procedure. A process that leaves the group on purpose (`setsid`) escapes this.
//!
//! What comes back: stdout, binary-safe, at most [`Job::max_output`] bytes (more kills the group:
//! [`OutcomeKind::OutputTooLarge`], with the first `max_output` bytes kept); the last
//! [`STDERR_TAIL`] bytes of stderr; and, after an exit with status 0, the regular files under
//! `out/`, recursively, named by their path relative to `out/` (`a.png`, `sub/b.txt`), sorted by
//! that name. Symbolic links and other special files there are skipped. Output files count
//! toward the same `max_output` as stdout: more is `OutputTooLarge` (and no files). So is more
//! than [`wire::rpc::MAX_RESULT_FILES`] files ([`OutcomeKind::TooManyFiles`]: a result naming
//! them could not be sent), or more than [`MAX_OUTPUT_ENTRIES`] entries of any kind under `out/`;
//! the walk stops there, before reading any file.
//!
//! **Across crashes**: with [`Job::record`] set, a small durable record of the execution is
//! written (and synced) before the process is spawned, its process group id added once it
//! runs, and how it ended once it is reaped. A daemon that was killed leaves these behind, and
//! the next start reads them with [`recover_records`] before anything else runs: processes that
//! still run for one of them (found by their `FERRY_CALL_ID` and `FERRY_CALLER`, so a reused
//! process id is never mistaken for one) are killed with their groups, and what is known of each
//! run is returned, so the caller can be told the truth: no record means the procedure never
//! started. The record goes once the execution's answer is durable in the store.
//!
//! The daemon is an I/O shell: this module reads the monotonic clock for `run_ms`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Command;
use tokio::sync::oneshot;

/// How much of stderr's end an [`Outcome`] keeps (what a REJECT message carries).
pub const STDERR_TAIL: usize = wire::rpc::MAX_STDERR_TAIL;

/// The `PATH` a procedure gets.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long, after the process group was killed, reading stdout and stderr may take to reach
/// their ends (only a process that left the group can hold them open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Most entries (files, directories, links, anything) looked at under `out/` before the output
/// is judged too large: a procedure that leaves a million empty directories costs the walk no
/// more than this.
pub const MAX_OUTPUT_ENTRIES: usize = 4096;

/// One parameter's value, as the procedure is given it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Text, passed as one argument (must not hold NUL).
    Text(String),
    /// An integer, passed in decimal.
    Int(i64),
    /// A number, passed as Rust's `Display` prints it.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// Bytes, written to `in/argN.bin` (N: the parameter's 1-based position), passed as its path.
    Bytes(Bytes),
    /// A file, written to `in/<name>` (sanitised), passed as its path.
    File {
        /// The name it came with (only a hint: see the module doc).
        name: String,
        /// Its content.
        content: Bytes,
    },
}

/// One argument of a procedure's argv template (`args` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgTemplate {
    /// Passed as written.
    Literal(String),
    /// The parameter at this 0-based index, as one whole argument (written `{1}` for index 0).
    Param(usize),
}

impl ArgTemplate {
    /// Reads one template argument: exactly `{N}` with N a decimal number from 1 is parameter N;
    /// anything else (`x{1}`, `{ 1}`, `{}`) is literal. `{0}` is an error: parameters count
    /// from 1.
    pub fn parse(text: &str) -> Result<Self, ArgTemplateError> {
        let Some(digits) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
            return Ok(Self::Literal(text.to_owned()));
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(Self::Literal(text.to_owned()));
        }
        match digits.parse::<usize>() {
            Ok(0) => Err(ArgTemplateError::ZeroIndex(text.to_owned())),
            Ok(n) => Ok(Self::Param(n - 1)),
            Err(_) => Err(ArgTemplateError::TooLarge(text.to_owned())),
        }
    }
}

/// Why an argv template argument is refused ([`ArgTemplate::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgTemplateError {
    /// `{0}`: parameters are numbered from 1.
    #[error("{0:?}: parameters are numbered from {{1}}")]
    ZeroIndex(String),
    /// An index no procedure could have.
    #[error("{0:?}: no procedure has that many parameters")]
    TooLarge(String),
}

/// Why a call's parameters cannot be passed to its procedure: nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// The argv template names a parameter the call does not have.
    #[error("the argv template uses parameter {index} but the call has {count}")]
    MissingParameter {
        /// The parameter named (from 1).
        index: usize,
        /// The call's parameters.
        count: usize,
    },
    /// A literal argument of the template holds a NUL byte.
    #[error("a literal argument holds a NUL byte")]
    NulInLiteral,
    /// A text parameter holds a NUL byte, which an argument cannot carry.
    #[error("parameter {0} is text holding a NUL byte, which an argument cannot carry")]
    NulInParameter(usize),
    /// The call id or the caller (passed in the environment) holds a NUL byte.
    #[error("the call id or the caller holds a NUL byte")]
    NulInIdentity,
}

/// A file operation of an execution that failed: what it was doing, on which path, and why.
#[derive(Debug, thiserror::Error)]
#[error("{doing} {}: {source}", path.display())]
pub struct FileError {
    doing: &'static str,
    path: PathBuf,
    #[source]
    source: io::Error,
}

impl FileError {
    fn at(doing: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self {
            doing,
            path,
            source,
        }
    }
}

/// One execution of a procedure.
#[derive(Debug, Clone)]
pub struct Job {
    /// The executable (an absolute path; it is not looked up in `PATH`).
    pub program: PathBuf,
    /// The argv after the program. Every [`ArgTemplate::Param`] must index `params`.
    pub args: Vec<ArgTemplate>,
    /// The call's parameters, in order.
    pub params: Vec<Arg>,
    /// Longest it may run, from the spawn; then its process group is killed.
    pub timeout: Duration,
    /// Most bytes of stdout plus output files.
    pub max_output: u64,
    /// Where its working directory is made (created if missing).
    pub work_root: PathBuf,
    /// The call's id (`FERRY_CALL_ID`; also names the working directory).
    pub call_id: String,
    /// Who called (`FERRY_CALLER`).
    pub caller: String,
    /// Where the execution's durable record is kept (see the module doc); `None` keeps none.
    pub record: Option<PathBuf>,
}

/// How an execution ended, and what it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// How it ended.
    pub kind: OutcomeKind,
    /// Its stdout (at most `max_output` bytes), byte for byte.
    pub stdout: Vec<u8>,
    /// The last [`STDERR_TAIL`] bytes of its stderr.
    pub stderr_tail: Vec<u8>,
    /// The files it left under `out/` (only after exit status 0), by relative path, sorted.
    pub files: Vec<(String, Bytes)>,
    /// Milliseconds from the spawn to reaping it (monotonic clock); 0 if it never started.
    pub run_ms: u64,
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutcomeKind {
    /// It exited with this status; 0 is success.
    Exited(i64),
    /// It was killed by this signal, not by us.
    Signalled(i32),
    /// It ran past the job's timeout and was killed.
    TimedOut,
    /// Its stdout (or stdout and output files together) exceeded `max_output`; it was killed if
    /// it was still running.
    OutputTooLarge,
    /// It exited 0 but left more under `out/` than a result can name (the reason says what);
    /// no file was read.
    TooManyFiles(String),
    /// It was cancelled and killed.
    Cancelled,
    /// A parameter cannot be passed (text with a NUL byte, a template index out of range); nothing
    /// ran.
    BadArgument(ArgumentError),
    /// It could not be started: the working directory, an input file, or the spawn itself
    /// (missing or non-executable program) failed. The reason says which.
    SpawnFailed(String),
    /// It ran and exited 0, but its output files could not be read.
    OutputUnreadable(String),
}

impl OutcomeKind {
    /// Whether the procedure succeeded (exit status 0, output within its caps).
    pub fn is_success(&self) -> bool {
        *self == OutcomeKind::Exited(0)
    }
}

impl Outcome {
    fn failed(kind: OutcomeKind) -> Self {
        Self {
            kind,
            stdout: Vec::new(),
            stderr_tail: Vec::new(),
            files: Vec::new(),
            run_ms: 0,
        }
    }
}

/// Runs `job` to its end. Sending `()` on the other end of `cancel` kills it (dropping that
/// sender does not: it only means no one will cancel). Dropping the returned future kills the
/// process group and removes the working directory too.
pub async fn run(job: Job, cancel: oneshot::Receiver<()>) -> Outcome {
    let Job {
        program,
        args,
        params,
        timeout,
        max_output,
        work_root,
        call_id,
        caller,
        record,
    } = job;
    if let Err(reason) = check_arguments(&args, &params, &call_id, &caller) {
        return Outcome::failed(OutcomeKind::BadArgument(reason));
    }
    let prepared = {
        let (call_id, caller, record) = (call_id.clone(), caller.clone(), record.clone());
        tokio::task::spawn_blocking(move || {
            let prepared = prepare(&work_root, &call_id, &params, &args)?;
            // Last, right before the spawn: a record is what says the procedure may have run.
            if let Some(record) = &record {
                write_record(record, &call_id, &caller)
                    .map_err(FileError::at("recording the execution in", record))?;
            }
            Ok::<_, FileError>(prepared)
        })
        .await
    };
    let (dir, argv) = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Outcome::failed(OutcomeKind::SpawnFailed(e.to_string())),
        Err(e) => return Outcome::failed(OutcomeKind::SpawnFailed(format!("preparing: {e}"))),
    };
    let outcome = execute(
        &program,
        &argv,
        &dir.0,
        timeout,
        max_output,
        &call_id,
        &caller,
        cancel,
        record.as_deref(),
    )
    .await;
    // Removing a large tree is blocking work.
    let _ = tokio::task::spawn_blocking(move || drop(dir)).await;
    tracing::debug!(
        "procedure {} for call {call_id}: {:?} after {} ms, {} bytes of stdout, {} files",
        program.display(),
        outcome.kind,
        outcome.run_ms,
        outcome.stdout.len(),
        outcome.files.len()
    );
    outcome
}

/// Removes everything under `work_root` (working directories left by a daemon that crashed).
/// Call it at start, before any execution.
pub async fn clear_work_root(work_root: &Path) -> io::Result<()> {
    let root = work_root.to_owned();
    tokio::task::spawn_blocking(move || {
        let entries = match std::fs::read_dir(&root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            r => r?,
        };
        for entry in entries {
            let path = entry?.path();
            if path.symlink_metadata()?.is_dir() {
                remove_tree(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    })
    .await
    .map_err(io::Error::other)?
}

fn check_arguments(
    args: &[ArgTemplate],
    params: &[Arg],
    call_id: &str,
    caller: &str,
) -> Result<(), ArgumentError> {
    for a in args {
        match a {
            ArgTemplate::Param(i) if *i >= params.len() => {
                return Err(ArgumentError::MissingParameter {
                    index: i + 1,
                    count: params.len(),
                });
            }
            ArgTemplate::Literal(text) if text.contains('\0') => {
                return Err(ArgumentError::NulInLiteral);
            }
            _ => {}
        }
    }
    for (i, p) in params.iter().enumerate() {
        if let Arg::Text(t) = p
            && t.contains('\0')
        {
            return Err(ArgumentError::NulInParameter(i + 1));
        }
    }
    if call_id.contains('\0') || caller.contains('\0') {
        return Err(ArgumentError::NulInIdentity);
    }
    Ok(())
}

/// A working directory, removed (whatever is in it) when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = remove_tree(&self.0) {
            tracing::warn!("removing the working directory {}: {e}", self.0.display());
        }
    }
}

/// `remove_dir_all`, which also copes with directories the procedure made read-only.
fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            make_writable(path);
            std::fs::remove_dir_all(path)
        }
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&entry.path());
            }
        }
    }
}

/// Makes the working directory and its inputs; returns it and the argv after the program.
fn prepare(
    work_root: &Path,
    call_id: &str,
    params: &[Arg],
    args: &[ArgTemplate],
) -> Result<(WorkDir, Vec<OsString>), FileError> {
    use std::os::unix::fs::DirBuilderExt as _;
    static COUNTER: AtomicU64 = AtomicU64::new(0);

    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(work_root)
        .map_err(FileError::at("creating the work directory", work_root))?;
    let root = std::path::absolute(work_root)
        .map_err(FileError::at("resolving the work directory", work_root))?;
    let tag: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(40)
        .collect();
    let tag = if tag.is_empty() { "call".into() } else { tag };
    let dir = loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = root.join(format!("{tag}-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => break WorkDir(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(FileError::at("creating", &dir)(e)),
        }
    };
    for sub in ["in", "out", "tmp"] {
        let path = dir.0.join(sub);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(FileError::at("creating", &path))?;
    }

    let mut used = BTreeSet::new();
    let mut values: Vec<OsString> = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let value = match p {
            Arg::Text(t) => OsString::from(t),
            Arg::Int(n) => OsString::from(n.to_string()),
            Arg::Float(x) => OsString::from(x.to_string()),
            Arg::Bool(b) => OsString::from(b.to_string()),
            Arg::Bytes(content) => {
                let name = unique_name(&mut used, format!("arg{}.bin", i + 1));
                write_input(&dir.0, &name, content)?
            }
            Arg::File { name, content } => {
                let name = unique_name(&mut used, sanitize_file_name(name, content));
                write_input(&dir.0, &name, content)?
            }
        };
        values.push(value);
    }
    let argv = args
        .iter()
        .map(|a| match a {
            ArgTemplate::Literal(text) => OsString::from(text),
            ArgTemplate::Param(i) => values[*i].clone(),
        })
        .collect();
    Ok((dir, argv))
}

fn write_input(dir: &Path, name: &str, content: &[u8]) -> Result<OsString, FileError> {
    let path = dir.join("in").join(name);
    std::fs::write(&path, content).map_err(FileError::at("writing", &path))?;
    Ok(path.into_os_string())
}

/// A file name that stays inside `in/`: the part after the last `/` or `\`, without control
/// characters, at most 200 bytes; `.`, `..` and empty become `file-<hash of the content>`.
pub fn sanitize_file_name(name: &str, content: &[u8]) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut clean = String::new();
    for c in last.chars().filter(|c| !c.is_control()) {
        if clean.len() + c.len_utf8() > 200 {
            break;
        }
        clean.push(c);
    }
    if clean.is_empty() || clean == "." || clean == ".." {
        format!("file-{:016x}", fnv1a(content))
    } else {
        clean
    }
}

/// `name`, or `stem-2.ext`, `stem-3.ext` … whichever is not in `used` yet (then it is).
fn unique_name(used: &mut BTreeSet<String>, name: String) -> String {
    if used.insert(name.clone()) {
        return name;
    }
    let (stem, ext) = match name.rfind('.') {
        Some(dot) if dot > 0 => name.split_at(dot),
        _ => (name.as_str(), ""),
    };
    (2u64..)
        .map(|n| format!("{stem}-{n}{ext}"))
        .find(|candidate| used.insert(candidate.clone()))
        .expect("some suffix is free")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A process group, sent SIGKILL when dropped unless it was already dealt with.
struct Group(Option<Pid>);

impl Group {
    fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH: every member is gone already.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How the wait for a running procedure ended.
enum End {
    Exited,
    TimedOut,
    Cancelled,
    TooLarge,
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    program: &Path,
    argv: &[OsString],
    dir: &Path,
    timeout: Duration,
    max_output: u64,
    call_id: &str,
    caller: &str,
    cancel: oneshot::Receiver<()>,
    record: Option<&Path>,
) -> Outcome {
    let mut command = Command::new(program);
    command
        .args(argv)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", dir)
        .env("TMPDIR", dir.join("tmp"))
        .env("LANG", "C.UTF-8")
        .env("FERRY_OUTPUT_DIR", dir.join("out"))
        .env("FERRY_CALL_ID", call_id)
        .env("FERRY_CALLER", caller)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = match spawn(&mut command).await {
        Ok(child) => child,
        Err(e) => {
            return Outcome::failed(OutcomeKind::SpawnFailed(format!(
                "starting {}: {e}",
                program.display()
            )));
        }
    };
    let mut group = Group(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
    );
    if let (Some(record), Some(pgid)) = (record, group.0) {
        // Not synced: it only helps a restart say more; the processes are found without it.
        append_record(record, &format!("pgid {pgid}"));
    }
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");

    let mut out = Vec::new();
    let mut tail = Vec::new();
    let (end, status, overflow) = {
        let out_reader = read_capped(stdout, &mut out, max_output);
        let err_reader = read_tail(stderr, &mut tail, STDERR_TAIL);
        let cancelled = cancelled(cancel);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(out_reader, err_reader, cancelled, deadline);
        let (mut out_done, mut err_done, mut overflow) = (false, false, false);
        let (end, status) = loop {
            tokio::select! {
                biased;
                status = child.wait() => break (End::Exited, Some(status)),
                more = &mut out_reader, if !out_done => {
                    out_done = true;
                    if more {
                        overflow = true;
                        break (End::TooLarge, None);
                    }
                }
                () = &mut err_reader, if !err_done => err_done = true,
                () = &mut cancelled => break (End::Cancelled, None),
                () = &mut deadline => break (End::TimedOut, None),
            }
        };
        // The procedure's group goes: all of it on timeout, cancellation or overflow; what it
        // left behind when it exited by itself.
        group.kill();
        let status = match status {
            Some(status) => status,
            None => child.wait().await,
        };
        // Reaped: its process group id may be reused from now on.
        group.0 = None;
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            loop {
                tokio::select! {
                    more = &mut out_reader, if !out_done => {
                        out_done = true;
                        overflow |= more;
                    }
                    () = &mut err_reader, if !err_done => err_done = true,
                    else => break,
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "{}: a process that left its process group still holds its stdout or stderr",
                program.display()
            );
        }
        (end, status, overflow)
    };
    let run_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if let Some(record) = record {
        let how = match (&end, &status) {
            (End::Exited, Ok(status)) => format!("{status}"),
            (End::Exited, Err(e)) => format!("an unknown status ({e})"),
            (End::TimedOut, _) => "killed at its timeout".into(),
            (End::Cancelled, _) => "killed when it was cancelled".into(),
            (End::TooLarge, _) => "killed for too much output".into(),
        };
        append_record(record, &format!("ended {how} after {run_ms} ms"));
    }
    let kind = match (end, status) {
        (End::TooLarge, _) => OutcomeKind::OutputTooLarge,
        (End::TimedOut, _) => OutcomeKind::TimedOut,
        (End::Cancelled, _) => OutcomeKind::Cancelled,
        (End::Exited, _) if overflow => OutcomeKind::OutputTooLarge,
        (End::Exited, Ok(status)) => exit_kind(status),
        (End::Exited, Err(e)) => OutcomeKind::SpawnFailed(format!("waiting for it: {e}")),
    };
    let mut outcome = Outcome {
        kind,
        stdout: out,
        stderr_tail: tail,
        files: Vec::new(),
        run_ms,
    };
    if outcome.kind.is_success() {
        let budget = max_output.saturating_sub(outcome.stdout.len() as u64);
        let out_dir = dir.join("out");
        match tokio::task::spawn_blocking(move || collect_files(&out_dir, budget)).await {
            Ok(Ok(Collected::Files(files))) => outcome.files = files,
            Ok(Ok(Collected::OverBudget)) => outcome.kind = OutcomeKind::OutputTooLarge,
            Ok(Ok(Collected::TooMany(reason))) => {
                outcome.kind = OutcomeKind::TooManyFiles(reason);
            }
            Ok(Err(e)) => outcome.kind = OutcomeKind::OutputUnreadable(e.to_string()),
            Err(e) => outcome.kind = OutcomeKind::OutputUnreadable(e.to_string()),
        }
    }
    outcome
}

/// Spawns, retrying briefly on ETXTBSY (a program just written, whose write descriptor another
/// thread's fork still holds for an instant).
async fn spawn(command: &mut Command) -> io::Result<tokio::process::Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) && tries < 10 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(5 * tries)).await;
            }
            other => return other,
        }
    }
}

fn exit_kind(status: ExitStatus) -> OutcomeKind {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => OutcomeKind::Exited(i64::from(code)),
        (None, Some(signal)) => OutcomeKind::Signalled(signal),
        (None, None) => OutcomeKind::SpawnFailed(format!("unexpected wait status {status:?}")),
    }
}

/// Resolves when `()` is sent; never, if the sender is dropped.
async fn cancelled(cancel: oneshot::Receiver<()>) {
    if cancel.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads `pipe` to its end into `buf`, keeping at most `cap` bytes. Returns true (at once) when
/// there was more than `cap`.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, buf: &mut Vec<u8>, cap: u64) -> bool {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                let room =
                    usize::try_from(cap.saturating_sub(buf.len() as u64)).unwrap_or(usize::MAX);
                if n > room {
                    buf.extend_from_slice(&chunk[..room]);
                    return true;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Reads `pipe` to its end, keeping its last `keep` bytes in `tail`.
async fn read_tail(mut pipe: impl AsyncRead + Unpin, tail: &mut Vec<u8>, keep: usize) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > 2 * keep.max(chunk.len()) {
                    tail.drain(..tail.len() - keep);
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
}

/// What `out/` held.
enum Collected {
    /// The regular files, by relative path (`/`-separated), sorted, with their contents.
    Files(Vec<(String, Bytes)>),
    /// Together they hold more than the budget.
    OverBudget,
    /// More files or entries than a result can carry; the reason says which.
    TooMany(String),
}

/// The regular files under `out`, recursively; none is read unless all fit the bounds.
fn collect_files(out: &Path, budget: u64) -> Result<Collected, FileError> {
    let mut found = Vec::new();
    let mut entries = 0;
    let complete = walk(out, "", 0, &mut found, &mut entries)?;
    if found.len() > wire::rpc::MAX_RESULT_FILES {
        return Ok(Collected::TooMany(format!(
            "more than {} files in its output directory, which one result cannot name",
            wire::rpc::MAX_RESULT_FILES
        )));
    }
    if !complete {
        return Ok(Collected::TooMany(format!(
            "more than {MAX_OUTPUT_ENTRIES} entries under its output directory"
        )));
    }
    found.sort();
    let mut files = Vec::with_capacity(found.len());
    let mut total = 0u64;
    for (name, path, len) in found {
        total = total.saturating_add(len);
        if total > budget {
            return Ok(Collected::OverBudget);
        }
        let content = std::fs::read(&path).map_err(FileError::at("reading", &path))?;
        // It may have changed size since it was listed (a process that escaped its group).
        if content.len() as u64 != len {
            total = total - len + content.len() as u64;
            if total > budget {
                return Ok(Collected::OverBudget);
            }
        }
        files.push((name, Bytes::from(content)));
    }
    Ok(Collected::Files(files))
}

/// Lists `dir` into `found`, counting every entry in `seen`; false (at once) when `seen` passes
/// [`MAX_OUTPUT_ENTRIES`] or `found` passes [`wire::rpc::MAX_RESULT_FILES`].
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    found: &mut Vec<(String, PathBuf, u64)>,
    seen: &mut usize,
) -> Result<bool, FileError> {
    const MAX_DEPTH: usize = 16;
    let entries = std::fs::read_dir(dir).map_err(FileError::at("listing", dir))?;
    for entry in entries {
        *seen += 1;
        if *seen > MAX_OUTPUT_ENTRIES || found.len() > wire::rpc::MAX_RESULT_FILES {
            return Ok(false);
        }
        let entry = entry.map_err(FileError::at("listing", dir))?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let path = entry.path();
        // Not followed: a link could point anywhere.
        let meta = std::fs::symlink_metadata(&path).map_err(FileError::at("inspecting", &path))?;
        if meta.is_file() {
            found.push((name, path, meta.len()));
        } else if meta.is_dir() && depth < MAX_DEPTH {
            if !walk(&path, &format!("{name}/"), depth + 1, found, seen)? {
                return Ok(false);
            }
        } else {
            tracing::debug!("output {} skipped: not a regular file", path.display());
        }
    }
    Ok(true)
}

// ----- durable records of executions -----

const RECORD_HEADER: &str = "ferry-execution v1";

/// Writes an execution's record (the call and caller that identify its processes) and syncs it
/// and its directory: once this returns, a crash cannot lose the fact that it may have run.
pub(crate) fn write_record(path: &Path, call_id: &str, caller: &str) -> io::Result<()> {
    write_record_with(path, call_id, caller, "")
}

/// [`write_record`] with more lines (`extra`, each ending in a newline) in the same synced
/// write: a call handed to an application says so (`provider <procedure>`).
pub(crate) fn write_record_with(
    path: &Path,
    call_id: &str,
    caller: &str,
    extra: &str,
) -> io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = std::fs::File::create(path)?;
    file.write_all(
        format!("{RECORD_HEADER}\ncall {call_id}\ncaller {caller}\n{extra}").as_bytes(),
    )?;
    file.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}

/// Adds a line to an execution's record; a failure only costs detail after a crash.
fn append_record(path: &Path, line: &str) {
    use std::io::Write as _;
    let written = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        tracing::warn!("adding to the execution record {}: {e}", path.display());
    }
}

/// Removes execution records whose answers are durable now.
pub fn remove_records(paths: &[PathBuf]) {
    for path in paths {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("removing the execution record {}: {e}", path.display()),
        }
    }
}

/// How long [`recover_records`] waits for killed processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What a previous run of the daemon left of its executions in `dir` (see the module doc): for
/// each record, by file name, what is known of the run for its caller. Processes still running
/// for a record are killed first, with their process groups, and waited for (up to 5 s): no
/// execution outlives its daemon past the next start, nor runs in a working directory the start
/// is about to delete. Records that cannot be read are removed and logged.
///
/// Blocking; call it at start, before any execution and before the working directories go.
pub fn recover_records(dir: &Path) -> io::Result<std::collections::BTreeMap<String, String>> {
    let mut found = std::collections::BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        r => r?,
    };
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut lines = text.lines();
        let (Some(RECORD_HEADER), Some(call), Some(caller)) = (
            lines.next(),
            lines.next().and_then(|l| l.strip_prefix("call ")),
            lines.next().and_then(|l| l.strip_prefix("caller ")),
        ) else {
            tracing::warn!(
                "removing the unreadable execution record {}",
                path.display()
            );
            remove_records(&[path]);
            continue;
        };
        let mut pgid = None;
        let mut ended = None;
        let mut provider = None;
        for line in lines {
            if let Some(name) = line.strip_prefix("provider ") {
                provider = Some(name.to_owned());
            } else if let Some(n) = line.strip_prefix("pgid ") {
                pgid = n.parse::<i32>().ok();
            } else if let Some(how) = line.strip_prefix("ended ") {
                ended = Some(how.to_owned());
            }
        }
        if let Some(procedure) = provider {
            // Handed to an application (crate::providers): no process of ours to look for.
            found.insert(
                name,
                format!("it was handed to the application serving {procedure} before the server restarted"),
            );
            continue;
        }
        let killed = kill_leftovers(call, caller, pgid);
        let detail = match (killed, ended, pgid) {
            (Leftovers::Survived(n), _, _) => {
                tracing::error!(
                    "{n} processes of call {call} for {caller} survived SIGKILL for {} s",
                    KILL_WAIT.as_secs()
                );
                format!(
                    "it was still running when the server restarted, and {n} of its processes could not be killed"
                )
            }
            (Leftovers::Killed(n), _, _) => {
                tracing::warn!(
                    "killed {n} processes left running by call {call} for {caller} when the \
                     previous run of this node ended"
                );
                "it was still running when the server restarted, and was killed then".into()
            }
            (Leftovers::None, Some(how), _) => {
                format!("it ran to its end ({how}) before the server crashed")
            }
            (Leftovers::None, None, Some(_)) => {
                "it was running when the server crashed, and ended while the server was down".into()
            }
            (Leftovers::None, None, None) => "it was being started when the server crashed".into(),
        };
        found.insert(name, detail);
    }
    Ok(found)
}

/// What [`kill_leftovers`] found.
enum Leftovers {
    None,
    Killed(usize),
    Survived(usize),
}

/// Kills every process whose environment names this call and caller (and the group `pgid`,
/// if one of them leads it or belongs to it), and waits for them to be gone.
fn kill_leftovers(call: &str, caller: &str, pgid: Option<i32>) -> Leftovers {
    let call_var = format!("FERRY_CALL_ID={call}");
    let caller_var = format!("FERRY_CALLER={caller}");
    let started = Instant::now();
    let mut killed = 0;
    loop {
        let alive = processes_with_env(&call_var, &caller_var);
        if alive.is_empty() {
            return if killed == 0 {
                Leftovers::None
            } else {
                Leftovers::Killed(killed)
            };
        }
        if started.elapsed() > KILL_WAIT {
            return Leftovers::Survived(alive.len());
        }
        killed = killed.max(alive.len());
        for &(pid, group) in &alive {
            // The recorded group is ours only if one of the call's processes is in it (a group
            // id is reused once its last member is gone).
            if Some(group) == pgid {
                let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            }
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes (pid, process group) whose environment holds both `NAME=value` entries. Linux's
/// `/proc`; a process this user may not inspect, or a zombie (whose environment reads empty),
/// is not one of them.
fn processes_with_env(a: &str, b: &str) -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let holds = |env: &[u8], var: &str| env.split(|&c| c == 0).any(|e| e == var.as_bytes());
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !(holds(&env, a) && holds(&env, b)) {
            continue;
        }
        // stat: "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses.
        let group = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| {
                let rest = &stat[stat.rfind(')')? + 1..];
                rest.split_whitespace().nth(2)?.parse::<i32>().ok()
            });
        if let Some(group) = group {
            found.push((pid, group));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_whole_placeholders_or_literals() {
        assert_eq!(ArgTemplate::parse("{1}"), Ok(ArgTemplate::Param(0)));
        assert_eq!(ArgTemplate::parse("{12}"), Ok(ArgTemplate::Param(11)));
        for literal in [
            "x{1}", "{1}x", "{ 1}", "{}", "{a}", "1", "--text", "{-1}", "",
        ] {
            assert_eq!(
                ArgTemplate::parse(literal),
                Ok(ArgTemplate::Literal(literal.into())),
                "{literal}"
            );
        }
        assert!(ArgTemplate::parse("{0}").is_err());
        assert!(ArgTemplate::parse("{99999999999999999999999}").is_err());
    }

    #[test]
    fn file_names_stay_inside_the_input_directory() {
        assert_eq!(sanitize_file_name("photo.jpg", b""), "photo.jpg");
        assert_eq!(sanitize_file_name("../../etc/passwd", b""), "passwd");
        assert_eq!(sanitize_file_name("C:\\x\\y.txt", b""), "y.txt");
        assert_eq!(sanitize_file_name("a\nb\0c", b""), "abc");
        for odd in ["", ".", "..", "dir/", "/", "\u{7}"] {
            let name = sanitize_file_name(odd, b"content");
            assert!(
                name.starts_with("file-") && name.len() == 21,
                "{odd:?} -> {name}"
            );
        }
        assert_ne!(sanitize_file_name("", b"a"), sanitize_file_name("", b"b"));
        let long = "é".repeat(300);
        let name = sanitize_file_name(&long, b"");
        assert!(name.len() <= 200 && name.chars().all(|c| c == 'é'));
    }

    #[test]
    fn clashing_names_get_suffixes() {
        let mut used = BTreeSet::new();
        assert_eq!(unique_name(&mut used, "a.txt".into()), "a.txt");
        assert_eq!(unique_name(&mut used, "a.txt".into()), "a-2.txt");
        assert_eq!(unique_name(&mut used, "a.txt".into()), "a-3.txt");
        assert_eq!(unique_name(&mut used, ".env".into()), ".env");
        assert_eq!(unique_name(&mut used, ".env".into()), ".env-2");
        assert_eq!(unique_name(&mut used, "Makefile".into()), "Makefile");
        assert_eq!(unique_name(&mut used, "Makefile".into()), "Makefile-2");
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_runs() {
        let text = |t: &str| Arg::Text(t.into());
        assert!(check_arguments(&[ArgTemplate::Param(0)], &[text("ok")], "id", "me").is_ok());
        assert!(check_arguments(&[ArgTemplate::Param(1)], &[text("ok")], "id", "me").is_err());
        assert!(check_arguments(&[], &[text("a\0b")], "id", "me").is_err());
        assert!(check_arguments(&[], &[], "id", "m\0e").is_err());
    }
}
