//! Ferry's store on the power-loss file system: a child process writes RPC values (small ones
//! inline in SQLite's WAL, large ones in payload files) and flushes them, and is SIGKILLed; then
//! the power is cut and another child opens the store again, as the next start of a node would,
//! and lists what it finds. Everything whose flush returned must be there, byte for byte; what
//! was only committed (in the WAL, never synced) must survive a process crash and be gone after
//! a power cut (which shows the cut bites).
//!
//! Both are children because this process serves the mount: a process that serves a FUSE file
//! system and maps a file of it (SQLite's `-shm`) deadlocks at exit, writing back to itself.
//! The children are this test binary run again (`harness = false`, so `main` decides), as in the
//! store's own `crash.rs`. `--child DIR FIRST MODE` writes, one line on stdout after each event:
//! `+ <seq>` once the flush that made value `seq` durable returned; `committed <seq>` once value
//! `seq` was committed but not synced. `--check DIR` opens the store and prints `<seq> ok` or
//! `<seq> altered` for every value it holds, then `end`.
//!
//! `FERRY_POWERCUT_SEED` sets the seed of the kill moments (default 7). Needs root and
//! `/dev/fuse`; without them it says so and passes, unless `FERRY_REQUIRE_FUSE=1` (set by CI
//! where /dev/fuse exists), where it fails.

// An I/O test: processes, files, a mount, the environment for the seed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use store::Tables as _;

use ferry_powercut::PowerCut;
use store::{DiskStore, PAYLOAD_FILE_MIN, RpcTable, Store};

const TEST_NAME: &str = "the_store_keeps_what_it_flushed_across_power_cuts";
const TABLE: RpcTable = RpcTable::InboxPayload;
/// Kill-and-cut rounds at random moments, after the two fixed ones.
const ROUNDS: u64 = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--child") => {
            if let Err(e) = child(&args[1..]) {
                eprintln!("store child: {e}");
                std::process::exit(2);
            }
            return;
        }
        Some("--check") => {
            if let Err(e) = list(&args[1..]) {
                eprintln!("store check: {e}");
                std::process::exit(2);
            }
            return;
        }
        _ => {}
    }
    if args.iter().any(|a| a == "--list") {
        println!("{TEST_NAME}: test");
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| TEST_NAME.contains(f.as_str())) {
        println!("store: 0 passed, 0 failed (filtered out)");
        return;
    }
    if !can_run() {
        assert!(
            std::env::var_os("FERRY_REQUIRE_FUSE").is_none(),
            "FERRY_REQUIRE_FUSE is set but this is not root with /dev/fuse"
        );
        println!("test {TEST_NAME} ... SKIPPED: needs root and /dev/fuse");
        println!("store: 1 passed, 0 failed");
        return;
    }
    let seed = std::env::var("FERRY_POWERCUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let start = Instant::now();
    match parent(seed) {
        Ok(summary) => {
            println!(
                "test {TEST_NAME} ... ok ({summary}, {:.1?})",
                start.elapsed()
            );
            println!("store: 1 passed, 0 failed");
        }
        Err(e) => {
            println!("test {TEST_NAME} ... FAILED (seed {seed}): {e}");
            println!("store: 0 passed, 1 failed");
            std::process::exit(101);
        }
    }
}

fn can_run() -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next())
            == Some("0")
    });
    root && Path::new("/dev/fuse").exists()
}

/// splitmix64, for kill delays and value contents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Value `seq`: one in four large enough for a payload file of its own.
fn value(seq: u64) -> Vec<u8> {
    let mut rng = Rng(seq ^ 0xfe77);
    let len = if seq.is_multiple_of(4) {
        PAYLOAD_FILE_MIN as usize + 100
    } else {
        700
    };
    (0..len).map(|_| rng.next() as u8).collect()
}

/// The writing child: `--child DIR FIRST MODE`. MODE `flush`: puts and flushes values from
/// FIRST on until killed. MODE `commit`: puts and flushes value FIRST, then puts FIRST+1 and
/// commits it without a sync, then waits to be killed.
fn child(args: &[String]) -> Result<(), String> {
    let [dir, first, mode] = args else {
        return Err(format!("usage: --child DIR FIRST MODE, got {args:?}"));
    };
    let first: u64 = first.parse().map_err(|e| format!("first: {e}"))?;
    let (mut store, _) = DiskStore::open(Path::new(dir), u64::MAX).map_err(|e| e.to_string())?;
    let put = |store: &mut DiskStore, seq: u64| {
        store
            .rpc_put(TABLE, &seq.to_be_bytes(), &value(seq))
            .map_err(|e| e.to_string())
    };
    put(&mut store, first)?;
    store.flush().map_err(|e| e.to_string())?;
    println!("+ {first}");
    if mode == "commit" {
        put(&mut store, first + 1)?;
        store.commit().map_err(|e| e.to_string())?;
        println!("committed {}", first + 1);
        // Bounded: the parent kills the child long before.
        std::thread::sleep(Duration::from_secs(60));
        return Ok(());
    }
    // Bounded: the parent kills the child long before; this only stops a runaway child.
    for seq in first + 1..first + 100_000 {
        put(&mut store, seq)?;
        store.flush().map_err(|e| e.to_string())?;
        println!("+ {seq}");
    }
    Ok(())
}

/// The checking child: `--check DIR` opens the store and lists its values.
fn list(args: &[String]) -> Result<(), String> {
    let [dir] = args else {
        return Err(format!("usage: --check DIR, got {args:?}"));
    };
    let (store, _) = DiskStore::open(Path::new(dir), u64::MAX).map_err(|e| e.to_string())?;
    for (key, v) in store.rpc_scan(TABLE).map_err(|e| e.to_string())? {
        let seq = u64::from_be_bytes(
            key.as_ref()
                .try_into()
                .map_err(|_| format!("a key of {} bytes", key.len()))?,
        );
        let verdict = if v.as_ref() == value(seq).as_slice() {
            "ok"
        } else {
            "altered"
        };
        println!("{seq} {verdict}");
    }
    println!("end");
    Ok(())
}

/// Starts a writing child and returns it with a reader of its lines.
fn spawn(dir: &Path, first: u64, mode: &str) -> Result<(Child, BufReader<ChildStdout>), String> {
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("--child")
        .arg(dir)
        .arg(first.to_string())
        .arg(mode)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child: {e}"))?;
    let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    Ok((child, out))
}

/// Reads the child's lines until one starts with `want` (returned), or its output ends.
fn read_until(
    out: &mut BufReader<ChildStdout>,
    want: &str,
    acked: &mut Vec<u64>,
) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(seq) = line.trim().strip_prefix("+ ") {
            acked.extend(seq.parse::<u64>().ok());
        }
        if line.starts_with(want) {
            return Some(line.trim().to_owned());
        }
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Opens the store in a child, as the next start of a node would: every value it holds, and
/// whether it is the one written.
fn open(dir: &Path) -> Result<BTreeMap<u64, bool>, String> {
    // Bounded: a child stuck on the mount fails the test instead of hanging it.
    let out = Command::new("timeout")
        .args(["-k", "5", "60"])
        .arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("--check")
        .arg(dir)
        .output()
        .map_err(|e| format!("starting the check: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.lines().last() != Some("end") {
        return Err(format!(
            "reopening the store failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut values = BTreeMap::new();
    for line in text.lines().filter(|l| *l != "end") {
        let (seq, verdict) = line.split_once(' ').ok_or(format!("line {line:?}"))?;
        let seq = seq.parse().map_err(|e| format!("line {line:?}: {e}"))?;
        values.insert(seq, verdict == "ok");
    }
    Ok(values)
}

/// Every acknowledged value is there, unaltered; and what the store holds now.
fn check(dir: &Path, acked: &[u64]) -> Result<BTreeMap<u64, bool>, String> {
    let values = open(dir)?;
    for &seq in acked {
        match values.get(&seq) {
            Some(true) => {}
            Some(false) => return Err(format!("value {seq} came back altered")),
            None => return Err(format!("value {seq} was acknowledged and is lost")),
        }
    }
    Ok(values)
}

fn parent(seed: u64) -> Result<String, String> {
    let base = std::env::temp_dir().join(format!("ferry-powercut-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    let fs = PowerCut::mount(&base).map_err(|e| format!("mounting: {e}"))?;
    let dir = base.join("store");
    let mut acked = Vec::new();

    // A process crash keeps what was committed and never synced: the OS has it.
    let (mut c, mut out) = spawn(&dir, 0, "commit")?;
    read_until(&mut out, "committed", &mut acked).ok_or("the child did not commit")?;
    kill(&mut c);
    if !check(&dir, &acked)?.contains_key(&1) {
        return Err("a value committed before a process crash was lost".into());
    }
    // A power cut loses it.
    let (mut c, mut out) = spawn(&dir, 2, "commit")?;
    read_until(&mut out, "committed", &mut acked).ok_or("the child did not commit")?;
    kill(&mut c);
    fs.cut();
    if check(&dir, &acked)?.contains_key(&3) {
        return Err(format!(
            "a value committed but never synced survived the power cut ({:?})",
            fs.counters()
        ));
    }

    // Kills at random moments while the child flushes, each followed by a cut.
    let mut rng = Rng(seed);
    let mut first = 4;
    for _ in 0..ROUNDS {
        let (mut c, mut out) = spawn(&dir, first, "flush")?;
        let before = acked.len();
        // The child's first line comes after its store opened and one flush.
        read_until(&mut out, "+ ", &mut acked).ok_or("the child did not start")?;
        std::thread::sleep(Duration::from_millis(rng.next() % 60));
        kill(&mut c);
        // What it printed before it died was acknowledged.
        while read_until(&mut out, "+ ", &mut acked).is_some() {}
        fs.cut();
        check(&dir, &acked)?;
        first = acked.last().copied().unwrap_or(first) + 100;
        if acked.len() == before {
            return Err("a round acknowledged nothing".into());
        }
    }
    let counters = fs.counters();
    drop(fs);
    let _ = std::fs::remove_dir_all(&base);
    Ok(format!(
        "{} values acknowledged over {} power cuts, all kept; the cuts threw away {} unsynced \
         bytes and reverted {} names",
        acked.len(),
        counters.cuts,
        counters.bytes_lost,
        counters.names_reverted
    ))
}
