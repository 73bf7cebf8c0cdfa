//! `ferry recv`: takes bundles waiting at a local endpoint and writes their payloads out.
//!
//! Per bundle: list it (long poll, metadata only), fetch its payload, write it out, and only then
//! acknowledge it (`DELETE`), which is what removes it from the node's durable inbox. A crash or
//! a failed write at any point before the acknowledgement leaves the bundle waiting, to be
//! received again: a payload may be written twice, never lost.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use clap::Args;

use crate::api::Waiting;
use crate::client::{ApiArgs, Client, waiting_item_path, waiting_path};
use crate::exit::{Failure, Status, usage};
use crate::output::{print_json_line, progress_bar, with_progress, write_stdout_bytes};

/// One long poll asks the node to hold the answer at most this long (the total `--timeout` is
/// covered by several), so an HTTP request never waits for minutes.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// With `--count 0`, bundles listed per request.
const BATCH: usize = 64;
/// Payloads up to this size are read whole to stdout, to see if they are text; larger ones are
/// streamed as they are.
const TEXT_CHECK_MAX: u64 = 16 << 20;

/// Arguments of `ferry recv`.
#[derive(Args, Debug)]
pub(crate) struct RecvArgs {
    /// The endpoint: a service name on this node (files) or a full endpoint id
    /// (dtn://me/files, dtn://~all/~news); without it, the node's inbox, where `ferry send NODE`
    /// sends.
    #[arg(default_value = crate::names::DEFAULT_SERVICE)]
    endpoint: String,
    /// Bundles to receive; 0 receives until the timeout.
    #[arg(long, short = 'n', default_value_t = 1)]
    count: usize,
    /// How long to wait, in total.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Write the payload to FILE (with --count 1).
    #[arg(
        long = "output",
        short = 'o',
        value_name = "FILE",
        conflicts_with = "out_dir"
    )]
    output: Option<PathBuf>,
    /// Let -o replace a file that exists (without it, an existing file is never overwritten).
    #[arg(long, requires = "output")]
    force: bool,
    /// Write each payload to a file in DIR named after its bundle id.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    #[command(flatten)]
    api: ApiArgs,
}

/// Where payloads go.
#[derive(Debug, PartialEq, Eq)]
enum Sink {
    /// Standard output: the payloads, or with `--json` their metadata and base64 payloads.
    Stdout,
    /// One file (`-o`), and whether it may replace one that exists (`--force`).
    File(PathBuf, bool),
    /// A directory, one file per bundle (`--out-dir`).
    Dir(PathBuf),
}

impl RecvArgs {
    fn sink(&self) -> Result<Sink> {
        match (&self.output, &self.out_dir) {
            (Some(_), _) if self.count != 1 => Err(usage(
                "-o/--output writes one payload and needs --count 1; use --out-dir for several",
            )),
            // Refused before any bundle is taken: nothing is received to be thrown away.
            (Some(file), _) if !self.force && is_regular_file(file) => Err(taken(file)),
            (Some(file), _) => Ok(Sink::File(file.clone(), self.force)),
            (None, Some(dir)) => Ok(Sink::Dir(dir.clone())),
            (None, None) => Ok(Sink::Stdout),
        }
    }
}

pub(crate) fn run(args: RecvArgs) -> Result<()> {
    let sink = args.sink()?;
    if let Sink::Dir(dir) = &sink {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let client = Client::new(&args.api.api);
    let deadline = Instant::now() + args.timeout;
    let mut received = 0;
    loop {
        if args.count != 0 && received >= args.count {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let wait = (deadline - now).min(MAX_WAIT);
        let max = if args.count == 0 {
            BATCH
        } else {
            args.count - received
        };
        let path = waiting_path(&args.endpoint, max, wait, false);
        let listed: Vec<Waiting> = client.long_poll(&path, wait)?;
        if listed.is_empty() {
            // A node that answers "nothing" before the wait is over must not make us spin.
            let rest = wait.saturating_sub(now.elapsed());
            std::thread::sleep(rest.min(Duration::from_millis(100)));
        }
        for item in listed.into_iter().take(max) {
            if take(&client, &args.endpoint, &item, &sink, args.api.json)? {
                received += 1;
            }
        }
    }
    if args.count == 0 {
        return Ok(());
    }
    Err(Failure::new(
        Status::NoResult,
        format!(
            "received {received} of {} within {}",
            args.count,
            humantime::format_duration(args.timeout)
        ),
    )
    .into())
}

/// Fetches, writes and acknowledges one waiting bundle. `false` if it was gone meanwhile (another
/// receiver took it).
fn take(client: &Client, endpoint: &str, item: &Waiting, sink: &Sink, json: bool) -> Result<bool> {
    let item_path = waiting_item_path(endpoint, item.seq);
    let (len, body) = match client.get_stream(&format!("{item_path}/payload")) {
        Ok(answer) => answer,
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let bar = progress_bar(len.or(Some(item.size)), "receiving");
    let written = write_payload(with_progress(body, bar.as_ref()), len, item, sink, json);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    written.with_context(|| format!("writing the payload of {}", item.id))?;
    // The bytes are out: only now may the node forget the bundle.
    match client.delete(&item_path) {
        Ok(()) => Ok(true),
        // Someone else acknowledged it first; we have it all the same.
        Err(e) if e.is_not_found() => Ok(true),
        Err(e) => Err(anyhow!(e).context(format!(
            "acknowledging {} (written, but it stays waiting and will be received again)",
            item.id
        ))),
    }
}

fn write_payload(
    mut body: Box<dyn Read>,
    len: Option<u64>,
    item: &Waiting,
    sink: &Sink,
    json: bool,
) -> Result<()> {
    match sink {
        Sink::Stdout if json => {
            let bytes = read_all(&mut body, len)?;
            let mut shown = item.clone();
            shown.size = bytes.len() as u64;
            shown.payload_base64 = Some(base64::engine::general_purpose::STANDARD.encode(&bytes));
            print_json_line(&shown)
        }
        Sink::Stdout if item.size <= TEXT_CHECK_MAX => {
            let mut bytes = read_all(&mut body, len)?;
            if needs_newline(&bytes) {
                bytes.push(b'\n');
            }
            Ok(write_stdout_bytes(&bytes)?)
        }
        Sink::Stdout => {
            let mut out = io::stdout().lock();
            let n = io::copy(&mut body, &mut out)?;
            check_len(n, len)?;
            Ok(out.flush()?)
        }
        Sink::File(path, force) => {
            write_file(path, &mut body, len, !*force)?;
            print_file_line(item, path, json)
        }
        Sink::Dir(dir) => {
            let path = free_path(dir, &file_name_for(&item.id));
            // Written under a hidden name and renamed, so the directory never shows half a
            // payload under the final name.
            let part = dir.join(format!(
                ".{}.part",
                path.file_name().unwrap_or_default().to_string_lossy()
            ));
            write_file(&part, &mut body, len, false)?;
            fs::rename(&part, &path)
                .with_context(|| format!("renaming {} to {}", part.display(), path.display()))?;
            // The rename is durable once the directory is synced (best effort: not every file
            // system lets a directory be opened for that).
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            print_file_line(item, &path, json)
        }
    }
}

/// With `--json`, a metadata line naming the file the payload went to.
fn print_file_line(item: &Waiting, path: &Path, json: bool) -> Result<()> {
    if !json {
        return Ok(());
    }
    let mut value = serde_json::to_value(item)?;
    value["file"] = path.display().to_string().into();
    print_json_line(&value)
}

fn read_all(body: &mut dyn Read, len: Option<u64>) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    body.read_to_end(&mut bytes)?;
    check_len(bytes.len() as u64, len)?;
    Ok(bytes)
}

/// A body shorter than its declared length means the connection broke: never acknowledge that.
fn check_len(got: u64, declared: Option<u64>) -> Result<()> {
    match declared {
        Some(want) if want != got => bail!("the payload was cut short: {got} of {want} bytes"),
        _ => Ok(()),
    }
}

/// Whether `path` names a regular file (not a FIFO or `/dev/stdout`, which `-o` may write to).
fn is_regular_file(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The error for an output file that exists and may not be replaced.
fn taken(path: &Path) -> anyhow::Error {
    anyhow!(
        "{} exists; not overwritten (--force overwrites it, or give another -o)",
        path.display()
    )
}

/// Writes a payload to `path` and syncs it to disk (unless it is not a regular file: a FIFO or
/// `/dev/stdout` cannot be synced, and need not be). With `keep_existing`, a regular file that
/// exists (or appears meanwhile) is never replaced.
fn write_file(
    path: &Path,
    body: &mut dyn Read,
    len: Option<u64>,
    keep_existing: bool,
) -> Result<()> {
    let mut file = if keep_existing && !path.exists() {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(taken(path)),
            opened => opened.with_context(|| format!("creating {}", path.display()))?,
        }
    } else if keep_existing && is_regular_file(path) {
        return Err(taken(path));
    } else {
        File::create(path).with_context(|| format!("creating {}", path.display()))?
    };
    let n = io::copy(body, &mut file)?;
    check_len(n, len)?;
    file.flush()?;
    if file.metadata()?.is_file() {
        file.sync_all()
            .with_context(|| format!("syncing {}", path.display()))?;
    }
    Ok(())
}

/// Whether a payload printed to a terminal or pipe wants a newline after it: text that does not
/// end in one (binary payloads go out exactly as they are).
fn needs_newline(payload: &[u8]) -> bool {
    std::str::from_utf8(payload).is_ok() && !payload.ends_with(b"\n")
}

/// A file name for a bundle id: `dtn://a/-848700477656-1` → `dtn___a_-848700477656-1`. Only
/// characters safe in any file system stay; the rest become `_`.
fn file_name_for(id: &str) -> String {
    let name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.as_str() {
        "" => "bundle".into(),
        // No hidden files, no `.` or `..`.
        _ if name.starts_with('.') => format!("_{name}"),
        _ => name,
    }
}

/// `dir/name`, or `dir/name.1`, `dir/name.2`, … if taken (the same bundle can arrive twice:
/// keep both rather than overwrite).
fn free_path(dir: &Path, name: &str) -> PathBuf {
    let mut path = dir.join(name);
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("{name}.{n}"));
        n += 1;
    }
    path
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        recv: RecvArgs,
    }

    fn parse(args: &[&str]) -> Result<RecvArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("recv").chain(args.iter().copied())).map(|c| c.recv)
    }

    #[test]
    fn output_file_needs_count_one() {
        let a = parse(&["inbox", "-o", "x.bin"]).unwrap();
        assert_eq!(a.sink().unwrap(), Sink::File("x.bin".into(), false));
        let a = parse(&["inbox", "-o", "x.bin", "--count", "2"]).unwrap();
        let e = a.sink().unwrap_err().to_string();
        assert!(e.contains("--count 1"), "{e}");
        let a = parse(&["inbox", "-o", "x.bin", "--count", "0"]).unwrap();
        assert!(a.sink().is_err());
        assert!(parse(&["inbox", "-o", "x", "--out-dir", "d"]).is_err());
        let a = parse(&["inbox", "--out-dir", "d", "-n", "3"]).unwrap();
        assert_eq!(a.sink().unwrap(), Sink::Dir("d".into()));
        let a = parse(&["dtn://me/inbox"]).unwrap();
        assert_eq!(a.sink().unwrap(), Sink::Stdout);
        assert_eq!((a.count, a.timeout), (1, Duration::from_secs(30)));
        assert!(parse(&["inbox", "--timeout", "forever"]).is_err());
    }

    #[test]
    fn text_gets_a_newline_binary_does_not() {
        assert!(needs_newline(b"hello"));
        assert!(!needs_newline(b"hello\n"));
        assert!(needs_newline(b""));
        assert!(!needs_newline(&[0xff, 0xfe, 0x00]));
    }

    #[test]
    fn bundle_ids_become_safe_file_names() {
        assert_eq!(
            file_name_for("dtn://a/-848700477656-1"),
            "dtn___a_-848700477656-1"
        );
        assert_eq!(
            file_name_for("dtn://a/x/../../etc-1-2-0+10"),
            "dtn___a_x_.._.._etc-1-2-0+10"
        );
        assert_eq!(file_name_for("ipn:5.1-100-0"), "ipn_5.1-100-0");
        assert_eq!(file_name_for(".."), "_..");
        assert_eq!(file_name_for(""), "bundle");
    }

    #[test]
    fn short_bodies_are_refused() {
        assert!(check_len(5, Some(5)).is_ok());
        assert!(check_len(5, None).is_ok());
        assert!(check_len(4, Some(5)).is_err());
    }

    #[test]
    fn an_existing_output_file_is_kept_unless_forced() {
        let dir = std::env::temp_dir().join(format!("ferry-recv-force-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("payload");
        let name = file.to_str().unwrap();
        assert_eq!(
            parse(&["inbox", "-o", name]).unwrap().sink().unwrap(),
            Sink::File(file.clone(), false)
        );
        fs::write(&file, b"precious").unwrap();
        let e = parse(&["inbox", "-o", name]).unwrap().sink().unwrap_err();
        assert!(e.to_string().contains("not overwritten"), "{e}");
        // The write checks again: a file that appears after the check is kept as well.
        let e = write_file(&file, &mut &b"new"[..], Some(3), true).unwrap_err();
        assert!(e.to_string().contains("not overwritten"), "{e}");
        assert_eq!(fs::read(&file).unwrap(), b"precious");
        let forced = parse(&["inbox", "-o", name, "--force"]).unwrap();
        assert_eq!(forced.sink().unwrap(), Sink::File(file.clone(), true));
        write_file(&file, &mut &b"new"[..], Some(3), false).unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"new");
        // Not a regular file: written to as before.
        assert!(parse(&["inbox", "-o", "/dev/null"]).unwrap().sink().is_ok());
        assert!(parse(&["inbox", "--force"]).is_err(), "--force needs -o");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn taken_names_get_a_suffix() {
        let dir = std::env::temp_dir().join(format!("ferry-recv-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(free_path(&dir, "b"), dir.join("b"));
        fs::write(dir.join("b"), b"x").unwrap();
        assert_eq!(free_path(&dir, "b"), dir.join("b.1"));
        fs::write(dir.join("b.1"), b"x").unwrap();
        assert_eq!(free_path(&dir, "b"), dir.join("b.2"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
