//! Interoperability with dtn7-rs (`dtnd` 0.21) over TCPCLv4 on loopback: a text message and a
//! 1 MiB file each way, byte-identical; and an `ipn:`-named Ferry node answering dtnd's echo
//! requests on service 7, repairing the primary blocks dtnd sends without a CRC; and a bundle
//! stored while dtnd was down, for a node behind it, handed to dtnd when it comes back (dtnd
//! sends no summary vector: after `summary_grace` Ferry takes it for a router of another kind);
//! and a relay chain dtnd → Ferry → dtnd.
//!
//! `dtnd` comes from `cargo install dtn7 --locked` (CI's `.ci/run` installs it into
//! `~/.cache/ferry-tools/dtn7`). The test looks in `$FERRY_DTN7_BIN`, then that directory, then
//! `PATH`. Where none has it, the test says so and passes, unless `FERRY_REQUIRE_INTEROP=1` (set
//! by CI), in which case a missing `dtnd` fails it. dtnd's web API listens on ::1 only and its
//! discovery is off.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use daemon::Config;
use daemon::control::{Request, SendRequest};

mod common;
use common::{free_port, loopback_config};

fn dtn7_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("FERRY_DTN7_BIN") {
        candidates.push(dir.into());
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cache/ferry-tools/dtn7/bin"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.into_iter().find(|d| d.join("dtnd").is_file())
}

/// `dtnd`, killed when dropped.
struct Dtnd {
    child: Child,
    bin: PathBuf,
    web_port: u16,
    log: PathBuf,
}

impl Drop for Dtnd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dtnd {
    fn start(bin: &Path, dir: &Path, tcp_port: u16, ferry_port: u16) -> Self {
        Self::start_with_peer(bin, dir, tcp_port, Some((ferry_port, "ferry")))
    }

    /// dtnd with Ferry as a static peer `(port, name)`, or none: then Ferry dials it, and dtnd
    /// (epidemic) hands that session every bundle, whatever its destination.
    fn start_with_peer(bin: &Path, dir: &Path, tcp_port: u16, ferry: Option<(u16, &str)>) -> Self {
        Self::start_named(bin, dir, "d7", tcp_port, ferry)
    }

    /// dtnd as node `dtn://<name>/`.
    fn start_named(
        bin: &Path,
        dir: &Path,
        name: &str,
        tcp_port: u16,
        ferry: Option<(u16, &str)>,
    ) -> Self {
        let web_port = free_port();
        let log = dir.join("dtnd.log");
        let child = Command::new(bin.join("dtnd"))
            .args(["-n", name, "-W"])
            .arg(dir)
            .args(["-C", &format!("tcp:port={tcp_port}:bind=127.0.0.1")])
            .args([
                "-w",
                &web_port.to_string(),
                "-6",
                "--disable_nd",
                "-e",
                "incoming",
            ])
            .args(
                ferry
                    .map(|(port, name)| {
                        vec!["-s".to_owned(), format!("tcp://127.0.0.1:{port}/{name}")]
                    })
                    .unwrap_or_default(),
            )
            .args(["-j", "1s", "-d"])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("dtnd.err")).unwrap(),
            ))
            .spawn()
            .expect("starting dtnd");
        Self {
            child,
            bin: bin.to_owned(),
            web_port,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its debug log (stderr), where it names every bundle it receives.
    fn debug_log(&self) -> String {
        std::fs::read_to_string(self.log.with_file_name("dtnd.err")).unwrap_or_default()
    }

    /// One bundle from dtnd's `incoming` endpoint, if one is there.
    fn receive(&self, out: &Path) -> Option<Vec<u8>> {
        let _ = std::fs::remove_file(out);
        let status = Command::new(self.bin.join("dtnrecv"))
            .args([
                "-6",
                "-p",
                &self.web_port.to_string(),
                "-e",
                "incoming",
                "-o",
            ])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        std::fs::read(out).ok().filter(|b| !b.is_empty())
    }

    fn send(&self, to: &str, file: &Path) {
        self.send_from("dtn://d7/", to, file)
    }

    fn send_from(&self, from: &str, to: &str, file: &Path) {
        let out = Command::new(self.bin.join("dtnsend"))
            .args(["-6", "-p", &self.web_port.to_string(), "-s", from, "-r", to])
            .arg(file)
            .output()
            .expect("running dtnsend");
        assert!(
            out.status.success(),
            "dtnsend failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn ferry_config(dir: &Path, port: u16, dtnd_port: u16) -> Config {
    // Both sides name the other as a static peer: dtnd dials only when it has a bundle to
    // forward, Ferry keeps a session up (and redials with backoff until dtnd listens).
    let mut c = loopback_config("ferry", dir, port);
    // dtnd announces a 64000-byte transfer MRU but takes any size and cannot reassemble fragments.
    c.ignore_peer_transfer_mru = true;
    c.peers = vec![std::net::SocketAddr::from(([127, 0, 0, 1], dtnd_port))];
    c
}

/// `dtnd`'s directory, or `None` (the test passes, saying so) where it is not installed and CI
/// does not require it.
fn dtn7_or_skip() -> Option<PathBuf> {
    let bin = dtn7_bin();
    if bin.is_none() {
        assert!(
            std::env::var_os("FERRY_REQUIRE_INTEROP").is_none(),
            "FERRY_REQUIRE_INTEROP is set but dtnd was not found (see .ci/run)"
        );
        eprintln!(
            "SKIPPED: dtnd not found; install it with `cargo install dtn7 --locked --root ~/.cache/ferry-tools/dtn7`"
        );
    }
    bin
}

/// A fresh directory for one test, with `ferry/` and `dtnd/` in it, and a port for each.
fn workspace(name: &str) -> (PathBuf, u16, u16) {
    let dir = std::env::temp_dir().join(format!("ferry-interop-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ferry")).unwrap();
    std::fs::create_dir_all(dir.join("dtnd")).unwrap();
    (dir, free_port(), free_port())
}

/// Waits (bounded) until Ferry has a session with dtnd.
async fn wait_for_session(ferry: &daemon::Running, dtnd: &Dtnd) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let peers = ferry.control.ask(Request::Peers).await.unwrap();
        if peers.iter().any(|p| p.node_id == "dtn://d7/") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no TCPCL session with dtnd; its log:\n{}",
            dtnd.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipn_node_answers_dtnd_echo_requests_on_service_7() {
    let Some(bin) = dtn7_or_skip() else {
        return;
    };
    let (dir, ferry_port, dtnd_port) = workspace("ipn");
    let mut config = ferry_config(&dir.join("ferry"), ferry_port, dtnd_port);
    config.node_id = daemon::config::parse_node_id("ipn:5.0").unwrap();
    let ferry = daemon::start(config).await.unwrap();
    // Both name the other as a static peer: dtnd dials Ferry when it has the request to send,
    // while Ferry's own session with it is up. Ferry keeps both sessions (dtnd takes no bundle
    // back on the one it opened, and closing either could cut one direction): the answer goes
    // on Ferry's.
    let dtnd = Dtnd::start_with_peer(&bin, &dir.join("dtnd"), dtnd_port, Some((ferry_port, "5")));
    wait_for_session(&ferry, &dtnd).await;

    // dtnd asks ipn:5.7 from its `incoming` endpoint; the answer comes back there.
    let file = dir.join("echo-request");
    std::fs::write(&file, b"are you there, ipn:5?").unwrap();
    dtnd.send_from("dtn://d7/incoming", "ipn:5.7", &file);
    let out = dir.join("echo-answer");
    let deadline = Instant::now() + Duration::from_secs(30);
    // dtnd hands its application the status reports about the request too (they name
    // `incoming` as report-to), in any order with the echo: skip them.
    let mut others = 0;
    loop {
        if let Some(got) = dtnd.receive(&out) {
            if got == b"are you there, ipn:5?" {
                break;
            }
            others += 1;
            assert!(others <= 4, "more than status reports came: {got:?}");
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "no echo came back to dtnd; its log:\n{}",
            dtnd.debug_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing waits in Ferry's inboxes: the echo service took it.
    let status = ferry.control.ask(Request::Status).await.unwrap();
    assert_eq!(status.inbox_bundles, 0);
    // dtnd's bundles come with no CRC on their primary block and no BIB: repaired, counted.
    let metrics = ferry.control.ask(Request::Metrics).await.unwrap();
    let added = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ferry_primary_crc_added_total "))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("the counter is exposed");
    assert!(added >= 1, "{metrics}");

    ferry.shut_down().await;
    drop(dtnd);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_stored_while_dtnd_was_down_goes_to_it_when_it_comes_back() {
    let Some(bin) = dtn7_or_skip() else {
        return;
    };
    let (dir, ferry_port, dtnd_port) = workspace("reconnect");
    let mut config = ferry_config(&dir.join("ferry"), ferry_port, dtnd_port);
    config.summary_grace = Duration::from_secs(2);
    let ferry = daemon::start(config).await.unwrap();
    // dtnd is down: the bundle for a node behind it waits in Ferry's store.
    let req = SendRequest {
        payload: Some("for the far side".into()),
        lifetime: Some("10m".into()),
        ..SendRequest::to("dtn://far/inbox")
    };
    let sent = ferry
        .control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // dtnd comes up (no static peer of its own: Ferry redials it, backing off up to 10 s).
    let dtnd = Dtnd::start_with_peer(&bin, &dir.join("dtnd"), dtnd_port, None);
    wait_for_session(&ferry, &dtnd).await;
    let expected = format!("Received new bundle: {}", sent.id);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dtnd.debug_log().contains(&expected) {
        assert!(
            Instant::now() < deadline,
            "dtnd never received {}; its log:\n{}",
            sent.id,
            dtnd.debug_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing of Ferry's own control protocol reached dtnd after the grace: it would only have
    // stored those bundles until they expire.
    let control = |log: &str| log.matches("Received new bundle: dtn://ferry/-").count();
    let before = control(&dtnd.debug_log());
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        control(&dtnd.debug_log()),
        before,
        "Ferry kept sending its control bundles (summaries every 10 s) to dtnd"
    );
    // And at the first contact only the summary went, as the question: no mesh database, no
    // RPC hello (they wait for an answer another implementation never gives).
    let log = dtnd.debug_log();
    let first_contact = control(&log) - usize::from(log.contains(&expected));
    assert!(
        !log.contains("Received new bundle: dtn://ferry/~rpc-"),
        "an RPC hello reached dtnd; its log:\n{log}"
    );
    assert!(
        first_contact <= 1,
        "{first_contact} control bundles reached dtnd at the first contact; its log:\n{log}"
    );

    ferry.shut_down().await;
    drop(dtnd);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_relays_between_two_dtnds() {
    let Some(bin) = dtn7_or_skip() else {
        return;
    };
    let (dir, ferry_port, a_port) = workspace("relay");
    let b_port = free_port();
    std::fs::create_dir_all(dir.join("dtnd-b")).unwrap();
    // Ferry between two dtnds that know nothing of each other: it dials both.
    let mut config = ferry_config(&dir.join("ferry"), ferry_port, a_port);
    config
        .peers
        .push(std::net::SocketAddr::from(([127, 0, 0, 1], b_port)));
    let ferry = daemon::start(config).await.unwrap();
    let a = Dtnd::start_named(&bin, &dir.join("dtnd"), "d7", a_port, None);
    let b = Dtnd::start_named(&bin, &dir.join("dtnd-b"), "d7b", b_port, None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let peers = ferry.control.ask(Request::Peers).await.unwrap();
        let up = |n: &str| peers.iter().any(|p| p.node_id == n);
        if up("dtn://d7/") && up("dtn://d7b/") {
            break;
        }
        assert!(Instant::now() < deadline, "no sessions with both dtnds");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let file = dir.join("relayed");
    std::fs::write(&file, b"from one dtnd to another, through ferry").unwrap();
    a.send_from("dtn://d7/", "dtn://d7b/incoming", &file);
    let out = dir.join("relayed-out");
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        if let Some(got) = b.receive(&out) {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the bundle did not reach the second dtnd; first:\n{}\nsecond:\n{}",
            a.debug_log(),
            b.debug_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(got, b"from one dtnd to another, through ferry");

    ferry.shut_down().await;
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_and_dtnd_exchange_text_and_a_mebibyte_both_ways() {
    let Some(bin) = dtn7_or_skip() else {
        return;
    };
    let (dir, ferry_port, dtnd_port) = workspace("text");
    let ferry = daemon::start(ferry_config(&dir.join("ferry"), ferry_port, dtnd_port))
        .await
        .unwrap();
    let dtnd = Dtnd::start(&bin, &dir.join("dtnd"), dtnd_port, ferry_port);

    // dtnd connects to its static peer; wait for the session.
    wait_for_session(&ferry, &dtnd).await;

    let big: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();

    // Ferry → dtnd.
    for payload in [b"hello from ferry".to_vec(), big.clone()] {
        let req = SendRequest {
            payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(&payload)),
            lifetime: Some("10m".into()),
            ..SendRequest::to("dtn://d7/incoming")
        };
        ferry
            .control
            .ask(|reply| Request::Send(req, reply))
            .await
            .unwrap()
            .unwrap();
        let out = dir.join("received-at-dtnd");
        let deadline = Instant::now() + Duration::from_secs(30);
        let got = loop {
            if let Some(got) = dtnd.receive(&out) {
                break got;
            }
            assert!(
                Instant::now() < deadline,
                "dtnd did not receive the {}-byte bundle; its log:\n{}",
                payload.len(),
                dtnd.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(got.len(), payload.len());
        assert!(got == payload, "dtnd received different bytes");
    }

    // dtnd → Ferry.
    for payload in [b"hello from dtn7-rs".to_vec(), big] {
        let file = dir.join("to-ferry");
        std::fs::write(&file, &payload).unwrap();
        dtnd.send("dtn://ferry/inbox", &file);
        let deadline = Instant::now() + Duration::from_secs(30);
        let got = loop {
            let got = ferry
                .control
                .wait_for("inbox", 1, None, true, Duration::from_millis(100))
                .await
                .unwrap();
            if let Some(r) = got.into_iter().next() {
                assert_eq!(r.source, "dtn://d7/");
                ferry.control.ack("inbox", r.seq).await.unwrap();
                break base64::engine::general_purpose::STANDARD
                    .decode(r.payload_base64.expect("asked with payloads"))
                    .unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "ferry did not receive the {}-byte bundle from dtnd; its log:\n{}",
                payload.len(),
                dtnd.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(got.len(), payload.len());
        assert!(got == payload, "ferry received different bytes");
    }

    ferry.shut_down().await;
    drop(dtnd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BPSec through a router of another kind: Ferry `fa` signs and encrypts a bundle for Ferry
/// `fb` (`[bpsec]` TOML), dtnd carries it between them, and `fb` verifies, decrypts and
/// delivers it: dtnd 0.21 processes no BPSec but forwards blocks 11 and 12 as it got them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_and_encrypted_bundle_relayed_by_dtnd_still_opens_at_ferry() {
    let Some(bin) = dtn7_or_skip() else {
        return;
    };
    let (dir, fa_port, dtnd_port) = workspace("bpsec");
    let fb_port = free_port();
    std::fs::create_dir_all(dir.join("fb")).unwrap();
    let keys = "[[bpsec.key]]\nname = \"mac\"\nhex = \"5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a\"\n\
                [[bpsec.key]]\nname = \"aes\"\nhex = \"c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3\"\n";
    let sender = format!(
        "{keys}[[bpsec.sign]]\ndestinations = \"dtn://fb/*\"\nkey = \"mac\"\n\
         [[bpsec.encrypt]]\ndestinations = \"dtn://fb/*\"\nkey = \"aes\"\n"
    );
    let receiver = format!(
        "{keys}[[bpsec.verify]]\nsources = \"dtn://fa/*\"\nkey = \"mac\"\nrequired = true\n\
         [[bpsec.decrypt]]\nsources = \"dtn://fa/*\"\nkey = \"aes\"\nrequired = true\n"
    );
    // Both Ferry nodes dial dtnd and know nothing of each other; dtnd (epidemic) hands each
    // session every bundle, and Ferry, hearing no summary from dtnd, takes it for a router.
    let node = |name: &str, port: u16, bpsec: &str| {
        let mut c = loopback_config(name, &dir.join(name), port);
        c.ignore_peer_transfer_mru = true;
        c.summary_grace = Duration::from_secs(2);
        c.peers = vec![std::net::SocketAddr::from(([127, 0, 0, 1], dtnd_port))];
        c.bpsec = Config::from_toml(bpsec, name).unwrap().bpsec;
        c
    };
    std::fs::create_dir_all(dir.join("fa")).unwrap();
    let fa = daemon::start(node("fa", fa_port, &sender)).await.unwrap();
    let fb = daemon::start(node("fb", fb_port, &receiver)).await.unwrap();
    let dtnd = Dtnd::start_with_peer(&bin, &dir.join("dtnd"), dtnd_port, None);
    wait_for_session(&fa, &dtnd).await;
    wait_for_session(&fb, &dtnd).await;
    let req = SendRequest {
        payload: Some("sealed for fb".into()),
        lifetime: Some("10m".into()),
        ..SendRequest::to("dtn://fb/inbox")
    };
    let sent = fa
        .control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let got = fb
        .control
        .wait_for("inbox", 1, None, true, Duration::from_secs(40))
        .await
        .unwrap();
    assert_eq!(
        got.len(),
        1,
        "{} did not reach fb; dtnd's log:\n{}",
        sent.id,
        dtnd.debug_log()
    );
    let payload = base64::engine::general_purpose::STANDARD
        .decode(got[0].payload_base64.as_deref().unwrap())
        .unwrap();
    assert_eq!(payload, b"sealed for fb");
    assert!(
        dtnd.debug_log()
            .contains(&format!("Received new bundle: {}", sent.id)),
        "the bundle went through dtnd"
    );
    let metrics = fb.control.ask(Request::Metrics).await.unwrap();
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    };
    assert!(counter("ferry_bpsec_bcb_decrypted_total") >= 1);
    assert!(counter("ferry_bpsec_bib_verified_total") >= 1);
    assert_eq!(counter("ferry_bpsec_bib_failed_total"), 0);

    fa.shut_down().await;
    fb.shut_down().await;
    drop(dtnd);
    let _ = std::fs::remove_dir_all(&dir);
}
