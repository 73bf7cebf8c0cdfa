//! TCPCL over TLS between real daemons on loopback (`[tcpcl.tls]`): two Ferry nodes with
//! certificates of one CA exchange a bundle over TLS; a peer presenting a certificate for
//! another node id is refused; `require = true` refuses a plain peer; a TLS node and a plain
//! node still talk plain TCPCL when neither requires TLS; bad files are named at start.
//! Certificates are made here with rcgen. Every wait is bounded.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use cla::tcp::TcpclEvent;
use cla::tcpcl::{Role, SessionConfig, TlsPolicy};
use cla::tls::TlsContext;
use daemon::config::{PeerTls, TlsConfig};
use daemon::control::{Request, SendRequest};
use daemon::{Config, Running};

use crate::common::{TempDir, free_port, loopback_config};

/// A CA whose node certificates name node ids as URI subjectAltNames.
struct Pki {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "ferry test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        Self {
            ca: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// (chain PEM, key PEM) for a certificate naming `node_id`.
    fn node(&self, node_id: &str) -> (String, String) {
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::URI(node_id.try_into().unwrap())];
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA and a certificate for `node_id` into `dir`; returns `[tcpcl.tls]`.
    fn files(&self, dir: &Path, node_id: &str, require: bool) -> TlsConfig {
        let (chain, key) = self.node(node_id);
        let write = |name: &str, text: &str| -> PathBuf {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            path
        };
        TlsConfig {
            cert: write("node.pem", &chain),
            key: write("node.key", &key),
            ca: write("ca.pem", &self.ca.pem()),
            require,
        }
    }
}

fn config(name: &str, dir: &Path, port: u16, peers: &[SocketAddr]) -> Config {
    let mut c = loopback_config(name, dir, port);
    c.keepalive = Duration::from_secs(2);
    c.peers = peers.to_vec();
    c
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

async fn metric(node: &Running, name: &str) -> u64 {
    let text = node.control.ask(Request::Metrics).await.unwrap();
    let prefix = format!("ferry_{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no metric {name}"))
        .parse()
        .unwrap()
}

async fn wait_for_metric(node: &Running, name: &str, at_least: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while metric(node, name).await < at_least {
        assert!(
            Instant::now() < deadline,
            "{name} < {at_least} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn peers(node: &Running) -> usize {
    node.control.ask(Request::Status).await.unwrap().peers
}

async fn wait_for_peers(node: &Running, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while peers(node).await != n {
        assert!(Instant::now() < deadline, "no session within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `payload` from `from` to `to`'s inbox and checks it arrives.
async fn bundle_crosses(from: &Running, to: &Running, to_id: &str, payload: &[u8]) {
    let req = SendRequest {
        payload_base64: Some(base64::engine::general_purpose::STANDARD.encode(payload)),
        lifetime: Some("10m".into()),
        ..SendRequest::to(format!("{to_id}inbox"))
    };
    from.control
        .ask(|reply| Request::Send(req, reply))
        .await
        .unwrap()
        .unwrap();
    let got = to
        .control
        .wait_for("inbox", 1, None, true, Duration::from_secs(10))
        .await
        .unwrap();
    let [r] = got.as_slice() else {
        panic!("{got:?}")
    };
    let data = base64::engine::general_purpose::STANDARD
        .decode(r.payload_base64.as_deref().unwrap())
        .unwrap();
    assert_eq!(data, payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_nodes_exchange_a_bundle_over_tls() {
    let dirs = (TempDir::new("tls-test"), TempDir::new("tls-test"));
    let pki = Pki::new();
    let (pa, pb) = (free_port(), free_port());
    let mut cb = config("bravo", dirs.1.path(), pb, &[]);
    cb.tls = Some(pki.files(dirs.1.path(), "dtn://bravo/", true));
    let mut ca = config("alpha", dirs.0.path(), pa, &[addr(pb)]);
    ca.tls = Some(pki.files(dirs.0.path(), "dtn://alpha/", true));
    let b = daemon::start(cb).await.unwrap();
    let a = daemon::start(ca).await.unwrap();
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;
    wait_for_peers(&b, 1, Duration::from_secs(10)).await;
    bundle_crosses(&a, &b, "dtn://bravo/", b"over TLS").await;
    bundle_crosses(&b, &a, "dtn://alpha/", &[7u8; 200_000]).await;
    for node in [&a, &b] {
        assert_eq!(metric(node, "tcpcl_tls_sessions_total").await, 1);
        assert_eq!(metric(node, "tcpcl_tls_handshake_failures_total").await, 0);
    }
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_a_certificate_for_another_node_id_is_refused() {
    let dir = TempDir::new("tls-test");
    let pki = Pki::new();
    let pb = free_port();
    let mut cb = config("bravo", dir.path(), pb, &[]);
    cb.tls = Some(pki.files(dir.path(), "dtn://bravo/", false));
    let b = daemon::start(cb).await.unwrap();

    // Mallory holds a valid certificate of the same CA, for dtn://mallory/, and says it is
    // alpha.
    let (chain, key) = pki.node("dtn://mallory/");
    let tls =
        TlsContext::from_pem(chain.as_bytes(), key.as_bytes(), pki.ca.pem().as_bytes()).unwrap();
    let (tx, mut events) = tokio::sync::mpsc::channel(16);
    let stream = tokio::net::TcpStream::connect(addr(pb)).await.unwrap();
    let config = SessionConfig {
        node_id: "dtn://alpha/".into(),
        tls: TlsPolicy::Require,
        ..SessionConfig::default()
    };
    let _handle =
        cla::tcp::spawn_session_with_tls(stream, Role::Active, config, Some(Arc::new(tls)), 1, tx);
    let down = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Some((_, TcpclEvent::Down { reason, .. })) => break reason,
                Some((_, TcpclEvent::Up { .. })) => panic!("bravo accepted the impostor"),
                Some(_) => {}
                None => panic!("no Down"),
            }
        }
    })
    .await
    .unwrap();
    assert!(down.contains("contact failure"), "{down}");
    wait_for_metric(
        &b,
        "tcpcl_tls_node_id_mismatches_total",
        1,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(peers(&b).await, 0);
    assert_eq!(metric(&b, "tcpcl_tls_sessions_total").await, 0);
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requiring_tls_refuses_a_plain_peer() {
    let dirs = (TempDir::new("tls-test"), TempDir::new("tls-test"));
    let pki = Pki::new();
    let (pa, pb) = (free_port(), free_port());
    let mut cb = config("bravo", dirs.1.path(), pb, &[]);
    cb.tls = Some(pki.files(dirs.1.path(), "dtn://bravo/", true));
    let b = daemon::start(cb).await.unwrap();
    // Alpha has no [tcpcl.tls] and dials bravo.
    let a = daemon::start(config("alpha", dirs.0.path(), pa, &[addr(pb)]))
        .await
        .unwrap();
    wait_for_metric(
        &b,
        "tcpcl_tls_required_refusals_total",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(peers(&a).await, 0);
    assert_eq!(peers(&b).await, 0);
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_node_and_a_plain_node_talk_plain_when_neither_requires_tls() {
    let dirs = (TempDir::new("tls-test"), TempDir::new("tls-test"));
    let pki = Pki::new();
    let (pa, pb) = (free_port(), free_port());
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    let mut ca = config("alpha", dirs.0.path(), pa, &[addr(pb)]);
    ca.tls = Some(pki.files(dirs.0.path(), "dtn://alpha/", false));
    let a = daemon::start(ca).await.unwrap();
    wait_for_peers(&a, 1, Duration::from_secs(10)).await;
    bundle_crosses(&a, &b, "dtn://bravo/", b"plain").await;
    assert_eq!(metric(&a, "tcpcl_tls_sessions_total").await, 0);
    assert_eq!(metric(&a, "tcpcl_tls_required_refusals_total").await, 0);
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_marked_tls_required_is_not_talked_to_in_plain() {
    let dirs = (TempDir::new("tls-test"), TempDir::new("tls-test"));
    let pki = Pki::new();
    let (pa, pb) = (free_port(), free_port());
    let b = daemon::start(config("bravo", dirs.1.path(), pb, &[]))
        .await
        .unwrap();
    // Alpha offers TLS without requiring it, but requires it of this one peer.
    let mut ca = config("alpha", dirs.0.path(), pa, &[addr(pb)]);
    ca.tls = Some(pki.files(dirs.0.path(), "dtn://alpha/", false));
    ca.peer_tls.insert(addr(pb), PeerTls::Required);
    let a = daemon::start(ca).await.unwrap();
    wait_for_metric(
        &a,
        "tcpcl_tls_required_refusals_total",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(peers(&a).await, 0);
    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test]
async fn bad_tls_files_are_named_at_start() {
    let dir = TempDir::new("tls-test");
    let pki = Pki::new();
    let start = |tls: TlsConfig| {
        let mut c = config("alpha", dir.path(), 0, &[]);
        c.tls = Some(tls);
        async move {
            match daemon::start(c).await {
                Ok(_) => panic!("started"),
                Err(e) => format!("{e:#}"),
            }
        }
    };
    let tls = pki.files(dir.path(), "dtn://alpha/", false);

    std::fs::set_permissions(&tls.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = start(tls.clone()).await;
    assert!(
        err.contains(&tls.key.display().to_string()) && err.contains("read by others"),
        "{err}"
    );
    std::fs::set_permissions(&tls.key, std::fs::Permissions::from_mode(0o600)).unwrap();

    let other = pki.files(dir.path(), "dtn://someone-else/", false);
    let err = start(other.clone()).await;
    assert!(
        err.contains(&other.cert.display().to_string()) && err.contains("dtn://someone-else/"),
        "{err}"
    );

    let missing = TlsConfig {
        ca: dir.path().join("nowhere.pem"),
        ..other
    };
    let err = start(missing).await;
    assert!(
        err.contains("nowhere.pem") && err.contains("tcpcl.tls.ca"),
        "{err}"
    );
}
