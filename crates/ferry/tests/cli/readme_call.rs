//! README.md's "Your first call" runs as written on one machine. Its commands are read from
//! README.md, so the test fails when the README and the behaviour drift apart, and run in order:
//! a line that ends in `&` as a process left running, every other line to its end, which must
//! succeed and show what the README says it shows.
//!
//! Three things are changed, each the same way everywhere, so that the test runs beside anything
//! else on the machine and touches no file of the user's:
//! - each port of `127.0.0.1:PORT`, and 4550 (a client's default API), becomes a free port of
//!   its own: a port the README gives two nodes is one port in the test too, and collides;
//! - `/tmp/NAME` becomes `NAME` in the test's directory, where the commands run (with
//!   `examples/` linked to the repository's): a data directory the README gives two nodes is
//!   shared in the test too;
//! - `ferry` is the binary under test, with `HOME` and the XDG directories in the test's
//!   directory; `ID` is the id the last `ferry call` printed.
//!
//! A user types the next line once the nodes are up: before a command that follows `&` lines,
//! the test waits (bounded) until each node's API answers and it has its `--peer`s as
//! neighbours. Each node line must give every address, its data directory and
//! `--no-discovery`, or it would take a default (those of "Your first node") or send beacons
//! beyond loopback; and the section's nodes must not use a port or data directory of
//! "Your first node" or of alpha and bravo ("Send your first bundle"), which may still run.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{FERRY, TestDir, free_port, output_within as run, terminate};

/// How long one foreground command may take (the roll call waits for its 10 s deadline).
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// How long the background nodes may take to answer and find their peers.
const START_LIMIT: Duration = Duration::from_secs(20);
/// The API a client command talks to without `--api`.
const DEFAULT_API_PORT: u16 = 4550;

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).unwrap()
}

/// The commands of the first `sh` block in the section headed `## {heading}`: continuation
/// lines joined, comments removed, blank lines skipped.
fn section_commands(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no section {heading:?}"));
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("section {heading:?} has no sh block"))
        .0;
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                let command = strip_comment(&current).trim().to_owned();
                if !command.is_empty() {
                    commands.push(command);
                }
                current.clear();
            }
        }
    }
    commands
}

/// The line up to a `#` that starts a comment (after a blank, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// A command line's words, as sh splits them (blanks; single and double quotes, no escapes).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = None::<String>;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (_, c) => word.get_or_insert_default().push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {line:?}");
    words.extend(word);
    words
}

/// The value of `--flag VALUE` in a command's words.
fn flag<'a>(words: &'a [String], name: &str) -> Option<&'a str> {
    let i = words.iter().position(|w| w == name)?;
    words.get(i + 1).map(String::as_str)
}

fn flags<'a>(words: &'a [String], name: &'a str) -> impl Iterator<Item = &'a str> {
    words
        .windows(2)
        .filter(move |w| w[0] == name)
        .map(|w| w[1].as_str())
}

fn port(address: &str) -> u16 {
    address
        .strip_prefix("127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} is not 127.0.0.1:PORT"))
}

/// What a `ferry node` line takes on the machine: TCP and UDP ports, its data directory.
#[derive(Debug)]
struct Footprint {
    line: String,
    tcp: Vec<u16>,
    udp: Vec<u16>,
    data_dir: String,
}

/// The footprint of a node line that names its addresses and data directory, as the README's
/// nodes that share a machine must.
fn footprint(line: &str) -> Footprint {
    let w = words(line);
    for needed in ["--data-dir", "--tcpcl", "--udp", "--api"] {
        assert!(
            flag(&w, needed).is_some(),
            "README.md: `{line}` takes the default {needed} (that of \"Your first node\"); give \
             it one of its own"
        );
    }
    assert!(
        w.iter().any(|w| w == "--no-discovery"),
        "README.md: `{line}` would send discovery beacons beyond loopback (--no-discovery)"
    );
    Footprint {
        line: line.to_owned(),
        tcp: flags(&w, "--tcpcl")
            .chain(flags(&w, "--api"))
            .map(port)
            .collect(),
        udp: flags(&w, "--udp").map(port).collect(),
        data_dir: flag(&w, "--data-dir").unwrap().to_owned(),
    }
}

/// The part a node line's address or directory shares with `other`'s, if any.
fn collision(a: &Footprint, b: &Footprint) -> Option<String> {
    if let Some(p) = a.tcp.iter().find(|p| b.tcp.contains(p)) {
        return Some(format!("TCP port {p}"));
    }
    if let Some(p) = a.udp.iter().find(|p| b.udp.contains(p)) {
        return Some(format!("UDP port {p}"));
    }
    (a.data_dir == b.data_dir).then(|| format!("data directory {}", a.data_dir))
}

#[test]
fn the_call_sections_nodes_collide_with_no_node_before_them() {
    let readme = readme();
    let node_lines = |heading| {
        section_commands(&readme, heading)
            .into_iter()
            .filter(|c| c.starts_with("ferry node"))
            .map(|c| c.trim_end_matches('&').trim().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        node_lines("Your first node"),
        ["ferry node"],
        "\"Your first node\" runs a node with the defaults this test assumes"
    );
    // The defaults (docs/configuration.md): TCPCL and UDP on 4556, discovery on UDP 4551, the
    // API on 4550, the data directory under $XDG_DATA_HOME.
    let first = Footprint {
        line: "ferry node".into(),
        tcp: vec![4556, DEFAULT_API_PORT],
        udp: vec![4556, 4551],
        data_dir: "$XDG_DATA_HOME/ferry".into(),
    };
    let bundle: Vec<Footprint> = node_lines("Send your first bundle")
        .iter()
        .map(|l| footprint(l))
        .collect();
    let call: Vec<Footprint> = node_lines("Your first call")
        .iter()
        .map(|l| footprint(l))
        .collect();
    assert_eq!(call.len(), 2, "a drone and a phone: {call:?}");
    let mut problems = Vec::new();
    for (i, a) in call.iter().enumerate() {
        let earlier = std::iter::once(&first).chain(&bundle).chain(&call[..i]);
        for b in earlier {
            if let Some(what) = collision(a, b) {
                problems.push(format!("`{}` and `{}` share the {what}", a.line, b.line));
            }
        }
    }
    // Alpha and bravo run together too (alpha only once the first node is stopped).
    for (i, a) in bundle.iter().enumerate() {
        for b in &bundle[..i] {
            if let Some(what) = collision(a, b) {
                problems.push(format!("`{}` and `{}` share the {what}", a.line, b.line));
            }
        }
    }
    assert!(problems.is_empty(), "README.md:\n{}", problems.join("\n"));
}

/// A `ferry node` the section left running, stopped with SIGTERM at the end.
struct Background {
    child: Child,
    line: String,
    log: PathBuf,
    api: String,
    peers: usize,
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's rewriting of addresses and paths (see the top of this file).
struct Rewrite {
    dir: PathBuf,
    ports: BTreeMap<u16, u16>,
}

impl Rewrite {
    fn port(&mut self, readme_port: u16) -> u16 {
        *self.ports.entry(readme_port).or_insert_with(free_port)
    }

    fn word(&mut self, word: &str, last_call: Option<&str>) -> String {
        assert!(
            !word.contains("localhost") && !word.contains("0.0.0.0"),
            "{word:?}: the test maps only 127.0.0.1:PORT"
        );
        if let Some(p) = word.strip_prefix("127.0.0.1:") {
            let p: u16 = p.parse().unwrap_or_else(|_| panic!("{word:?}: no port"));
            return format!("127.0.0.1:{}", self.port(p));
        }
        assert!(
            !word.contains("127.0.0.1"),
            "{word:?}: the test maps only 127.0.0.1:PORT"
        );
        if let Some(rest) = word.strip_prefix("/tmp/") {
            return self.dir.join(rest).to_str().unwrap().to_owned();
        }
        assert!(
            !word.starts_with('/'),
            "{word:?}: an absolute path the test cannot keep inside its directory"
        );
        if word == "ID" {
            return last_call
                .expect("`ID` before any `ferry call` printed one")
                .to_owned();
        }
        word.to_owned()
    }

    /// `ferry` with the test's environment, run in its directory.
    fn command(&mut self, args: &[String]) -> Command {
        let default_api = format!("127.0.0.1:{}", self.port(DEFAULT_API_PORT));
        let mut cmd = Command::new(FERRY);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("HOME", self.dir.join("home"))
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_DATA_HOME", self.dir.join("data"))
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            .env("FERRY_API", default_api)
            .env_remove("FERRY_API_TOKEN")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        cmd
    }
}

/// Waits until every node answers on its API and has its `--peer`s as neighbours, as a user
/// would before typing the next line.
fn wait_until_up(nodes: &mut [Background], rewrite: &mut Rewrite) {
    let deadline = Instant::now() + START_LIMIT;
    for node in nodes.iter_mut() {
        loop {
            if let Some(status) = node.child.try_wait().unwrap() {
                panic!(
                    "README.md: `{}` ended ({status}):\n{}",
                    node.line,
                    std::fs::read_to_string(&node.log).unwrap_or_default()
                );
            }
            let args = ["status", "--json", "--api", node.api.as_str()].map(String::from);
            let peers = run(rewrite.command(&args), Duration::from_secs(10))
                .filter(|o| o.status.success())
                .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                .and_then(|v| v["peers"].as_u64());
            if peers.is_some_and(|p| p as usize >= node.peers) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "README.md: `{}` not up with {} peers within {START_LIMIT:?} (peers: {peers:?}):\n{}",
                node.line,
                node.peers,
                std::fs::read_to_string(&node.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What the README says a command shows, checked where it says it.
fn check_output(readme_words: &[String], stdout: &str, dir: &Path) {
    let w: Vec<&str> = readme_words.iter().map(String::as_str).collect();
    match &w[1..] {
        ["peers", ..] => assert!(stdout.contains("dtn://drone/"), "peers: {stdout}"),
        // The value byte for byte (echo.sh adds no newline).
        ["call", "drone", "echo", text, ..] => assert_eq!(stdout, *text),
        ["call", "drone", "photo", size, "--out", out, ..] => {
            let picture = std::fs::read(dir.join(out).join("photo.pgm")).unwrap();
            let header = format!("P2\n{size} {size}\n255\n");
            assert!(picture.starts_with(header.as_bytes()), "not a {size}² PGM");
        }
        ["call", "any", "sum", a, b, ..] => {
            let sum = a.parse::<i64>().unwrap() + b.parse::<i64>().unwrap();
            assert_eq!(stdout.trim(), sum.to_string());
        }
        ["call", "all", "echo", text, ..] => assert!(stdout.contains(text), "{stdout}"),
        _ => {}
    }
}

#[test]
fn your_first_call_runs_as_written_on_one_machine() {
    let commands = section_commands(&readme(), "Your first call");
    // Before anything runs: every node stays on loopback, off the user's files, and in the
    // background.
    for line in commands.iter().filter(|c| c.starts_with("ferry node")) {
        footprint(line.trim_end_matches('&'));
        assert!(
            line.ends_with('&'),
            "README.md: `{line}` would keep the terminal (end it with &)"
        );
    }
    let test_dir = TestDir::new("readme-call");
    let dir = test_dir.path().to_owned();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    std::os::unix::fs::symlink(examples.canonicalize().unwrap(), dir.join("examples")).unwrap();
    let mut rewrite = Rewrite {
        dir: dir.clone(),
        ports: BTreeMap::new(),
    };
    let mut nodes: Vec<Background> = Vec::new();
    let mut waited_for = 0;
    let mut last_call: Option<String> = None;
    let mut ran = Vec::new();
    for line in &commands {
        let mut readme_words = words(line);
        assert_eq!(
            readme_words.first().map(String::as_str),
            Some("ferry"),
            "README.md: the test runs only ferry commands, not `{line}`"
        );
        let background = readme_words.last().is_some_and(|w| w == "&");
        if background {
            readme_words.pop();
        }
        let args: Vec<String> = readme_words[1..]
            .iter()
            .map(|w| rewrite.word(w, last_call.as_deref()))
            .collect();
        if background {
            assert_eq!(
                args[0], "node",
                "README.md: only nodes run in the background"
            );
            let log = dir.join(format!("node-{}.log", nodes.len()));
            let api = flag(&args, "--api").expect("node lines name their API (checked above)");
            let child = rewrite
                .command(&args)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("starting ferry node");
            nodes.push(Background {
                child,
                line: line.clone(),
                log,
                api: api.to_owned(),
                peers: flags(&args, "--peer").count(),
            });
            continue;
        }
        if waited_for < nodes.len() {
            wait_until_up(&mut nodes[waited_for..], &mut rewrite);
            waited_for = nodes.len();
        }
        let output = run(rewrite.command(&args), COMMAND_LIMIT)
            .unwrap_or_else(|| panic!("README.md: `{line}` ran over {COMMAND_LIMIT:?}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let logs: String = nodes
            .iter()
            .map(|n| {
                format!(
                    "log of `{}`:\n{}\n",
                    n.line,
                    std::fs::read_to_string(&n.log).unwrap_or_default()
                )
            })
            .collect();
        assert!(
            output.status.success(),
            "README.md: `{line}` failed ({}):\n{stdout}\n{stderr}\n{logs}",
            output.status
        );
        if readme_words.get(1).is_some_and(|w| w == "call") {
            last_call = stderr
                .lines()
                .find_map(|l| l.strip_prefix("call ")?.split_once(':'))
                .map(|(id, _)| id.to_owned());
            assert!(
                last_call.is_some(),
                "`{line}` printed no call id:\n{stderr}"
            );
        }
        check_output(&readme_words, &stdout, &dir);
        ran.push(readme_words[1].clone());
    }
    assert!(
        nodes.len() == 2 && ran.iter().filter(|c| *c == "call").count() >= 4,
        "README.md's call section lost its nodes or calls: {commands:#?}"
    );
    for mut node in nodes.drain(..) {
        let status = terminate(&mut node.child).expect("ferry node stops on SIGTERM");
        assert!(status.success(), "`{}` exited with {status}", node.line);
    }
}
