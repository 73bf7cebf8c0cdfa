//! TLS for TCPCL sessions (RFC 9174 §4.4): the sans-IO pause for the handshake, node-id
//! authentication, refusal of peers without TLS where it is required; then real handshakes on
//! 127.0.0.1 with certificates made here.

// The real handshakes need sockets, as the tokio adapter they drive does.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use cla::tcp::{TcpclEvent, spawn_session_with_tls};
use cla::tcpcl::{
    PeerInfo, Role, SessTermReason, SessionConfig, SessionEvent, TlsFailure, TlsPeer, TlsPolicy,
};
use cla::tls::TlsContext;
use common::{Pair, Scripted, config, encoded};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use wire::tcpcl::{ContactHeader, Message, SessInit, SessTerm, SessTermFlags};

fn with_tls(node: &str, tls: TlsPolicy) -> SessionConfig {
    SessionConfig {
        tls,
        ..config(node)
    }
}

fn names(ids: &[&str]) -> TlsPeer {
    TlsPeer {
        node_ids: ids.iter().map(|s| s.to_string()).collect(),
    }
}

fn contact_failure() -> Message {
    Message::SessTerm(SessTerm {
        flags: SessTermFlags(0),
        reason: SessTermReason::ContactFailure,
    })
}

fn tls_failure(events: &[SessionEvent]) -> Option<Option<TlsFailure>> {
    events.iter().find_map(|e| match e {
        SessionEvent::Terminated { tls_failure, .. } => Some(*tls_failure),
        _ => None,
    })
}

// ----- the sans-IO session -----

#[test]
fn both_offering_tls_pause_after_the_contact_headers() {
    let mut p = Pair::new(
        with_tls("a", TlsPolicy::Offer),
        with_tls("b", TlsPolicy::Require),
    );
    p.run();
    assert_eq!(p.a.events, [SessionEvent::StartTls]);
    assert_eq!(p.b.events, [SessionEvent::StartTls]);
    // Nothing but the contact headers crossed: no SESS_INIT before TLS.
    assert!(p.a.sent.is_empty() && p.b.sent.is_empty());
    assert!(p.a.session.is_starting_tls() && !p.a.session.is_established());
    assert_eq!(
        p.a.session.poll_timeout(),
        Some(10_000),
        "the contact timeout runs on"
    );

    p.a.session.tls_established(p.now, names(&["dtn://b/"]));
    p.b.session.tls_established(p.now, names(&["dtn://a/"]));
    p.run();
    assert!(p.a.session.is_established() && p.b.session.is_established());
    assert!(
        p.a.session
            .peer()
            .is_some_and(|i| i.tls && i.node_id == "dtn://b/")
    );
    assert!(
        p.b.session
            .peer()
            .is_some_and(|i| i.tls && i.node_id == "dtn://a/")
    );
    let bundle = encoded(3000, 1);
    p.a.session.send(bundle.clone(), false).unwrap();
    p.run();
    assert_eq!(p.b.received(), [bundle.to_bytes()]);
}

#[test]
fn the_bytes_after_the_contact_header_are_left_for_the_handshake() {
    let mut s = Scripted::fresh(Role::Passive, with_tls("b", TlsPolicy::Offer));
    let mut input = BytesMut::new();
    ContactHeader::new(true).encode(&mut input);
    // The start of a ClientHello, in the same read as the contact header.
    let hello = [0x16, 0x03, 0x01, 0x00, 0xf4, 0x01, 0x00];
    input.extend_from_slice(&hello);
    s.feed(&input);
    assert_eq!(s.events(), [SessionEvent::StartTls]);
    assert_eq!(&s.rx[..], &hello, "not a byte consumed or lost");
    // Our answer is the contact header alone, with CAN_TLS.
    let mut raw = BytesMut::from(&s.raw_output()[..]);
    let header = ContactHeader::decode_from(&mut raw).unwrap().unwrap();
    assert!(header.can_tls() && raw.is_empty());
    // More input waits too.
    s.feed(&[0x03, 0x03]);
    assert_eq!(s.rx.len(), hello.len() + 2);
    assert!(s.events().is_empty() && s.raw_output().is_empty());

    // The owner took the bytes for TLS; what TLS decrypts is TCPCL again.
    s.rx.clear();
    s.session.tls_established(0, names(&["dtn://peer/"]));
    s.send(&Message::SessInit(SessInit {
        keepalive_interval: 30,
        segment_mru: 1000,
        transfer_mru: 5000,
        node_id: "dtn://peer/".into(),
        extensions: Vec::new(),
    }));
    assert!(matches!(s.output().as_slice(), [Message::SessInit(_)]));
    assert_eq!(
        s.events(),
        [SessionEvent::Established(PeerInfo {
            node_id: "dtn://peer/".into(),
            keepalive_interval_s: 30,
            segment_mru: 1000,
            transfer_mru: 5000,
            tls: true,
        })]
    );
}

#[test]
fn a_node_id_the_certificate_does_not_name_ends_the_session() {
    let mut p = Pair::new(
        with_tls("a", TlsPolicy::Offer),
        with_tls("b", TlsPolicy::Offer),
    );
    p.run();
    // a's certificate names someone else.
    p.a.session.tls_established(p.now, names(&["dtn://b/"]));
    p.b.session
        .tls_established(p.now, names(&["dtn://mallory/", "ipn:9.0"]));
    p.run();
    assert!(!p.b.session.is_established());
    assert!(p.b.sent.contains(&contact_failure()), "{:?}", p.b.sent);
    assert!(
        !p.b.sent.iter().any(|m| matches!(m, Message::SessInit(_))),
        "b never answers with its SESS_INIT"
    );
    assert_eq!(
        tls_failure(&p.b.events),
        Some(Some(TlsFailure::NodeIdNotInCertificate))
    );
    let Some(SessionEvent::Terminated { reason, .. }) = p.b.terminated() else {
        panic!("{:?}", p.b.events)
    };
    assert!(
        reason.contains("dtn://a/ not in the peer's certificate") && reason.contains("mallory"),
        "{reason}"
    );
    // The active side hears the refusal.
    assert!(p.a.terminated().is_some() && !p.a.session.is_established());
}

#[test]
fn requiring_tls_refuses_a_peer_without_it() {
    // Passive: answers the contact header, then SESS_TERM "Contact Failure".
    let mut s = Scripted::fresh(Role::Passive, with_tls("b", TlsPolicy::Require));
    let mut hello = BytesMut::new();
    ContactHeader::new(false).encode(&mut hello);
    s.feed(&hello);
    assert_eq!(s.output(), [contact_failure()]);
    let events = s.events();
    assert_eq!(tls_failure(&events), Some(Some(TlsFailure::Required)));
    assert!(s.session.is_terminated());

    // Active, against a plain node.
    let mut p = Pair::new(with_tls("a", TlsPolicy::Require), config("b"));
    p.run();
    assert!(p.a.sent.contains(&contact_failure()));
    assert!(!p.a.sent.iter().any(|m| matches!(m, Message::SessInit(_))));
    assert_eq!(tls_failure(&p.a.events), Some(Some(TlsFailure::Required)));
    assert!(p.b.terminated().is_some() && !p.b.session.is_established());
}

#[test]
fn offering_tls_to_a_plain_peer_stays_plain() {
    for (a, b) in [
        (TlsPolicy::Offer, TlsPolicy::Off),
        (TlsPolicy::Off, TlsPolicy::Offer),
    ] {
        let p = Pair::established(with_tls("a", a), with_tls("b", b));
        assert!(!p.a.events.contains(&SessionEvent::StartTls));
        assert!(p.a.session.peer().is_some_and(|i| !i.tls));
    }
}

#[test]
fn a_failed_or_late_handshake_ends_the_session_without_sess_term() {
    let mut p = Pair::new(
        with_tls("a", TlsPolicy::Offer),
        with_tls("b", TlsPolicy::Offer),
    );
    p.run();
    p.a.session.tls_failed(p.now, "unknown issuer");
    assert!(p.a.session.poll_transmit(p.now).is_none());
    p.a.drain_events();
    assert_eq!(tls_failure(&p.a.events), Some(Some(TlsFailure::Handshake)));
    let Some(SessionEvent::Terminated { reason, .. }) = p.a.terminated() else {
        panic!()
    };
    assert!(
        reason.contains("TLS handshake failed: unknown issuer"),
        "{reason}"
    );

    p.b.session.handle_timeout(10_000);
    assert!(p.b.session.poll_transmit(10_000).is_none());
    p.b.drain_events();
    assert_eq!(tls_failure(&p.b.events), Some(Some(TlsFailure::Handshake)));
}

// ----- real handshakes over TCP -----

/// A CA and node certificates with URI subjectAltNames (and both key purposes: a node is the
/// client of the sessions it opens and the server of those it accepts).
struct Pki {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        Self {
            ca: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// (chain PEM, key PEM) for a node whose certificate names `uris` and `ips`.
    fn node(&self, uris: &[&str], ips: &[&str]) -> (String, String) {
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = uris
            .iter()
            .map(|u| rcgen::SanType::URI((*u).try_into().unwrap()))
            .chain(
                ips.iter()
                    .map(|ip| rcgen::SanType::IpAddress(ip.parse().unwrap())),
            )
            .collect();
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn context(&self, uris: &[&str], ips: &[&str], roots: &Pki) -> Arc<TlsContext> {
        let (chain, key) = self.node(uris, ips);
        Arc::new(
            TlsContext::from_pem(chain.as_bytes(), key.as_bytes(), roots.ca.pem().as_bytes())
                .unwrap(),
        )
    }
}

type Events = mpsc::Receiver<(u64, TcpclEvent)>;

/// Opens a session pair over 127.0.0.1: `a` dials `b`.
async fn pair(
    a: (SessionConfig, Option<Arc<TlsContext>>),
    b: (SessionConfig, Option<Arc<TlsContext>>),
) -> (
    cla::tcp::SessionHandle,
    Events,
    cla::tcp::SessionHandle,
    Events,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx_a, ea) = mpsc::channel(64);
    let (tx_b, eb) = mpsc::channel(64);
    let accept = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        spawn_session_with_tls(stream, Role::Passive, b.0, b.1, 2, tx_b)
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let ha = spawn_session_with_tls(stream, Role::Active, a.0, a.1, 1, tx_a);
    let hb = accept.await.unwrap();
    (ha, ea, hb, eb)
}

async fn next(events: &mut Events) -> TcpclEvent {
    timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("an event in time")
        .expect("an event")
        .1
}

async fn down(events: &mut Events) -> (String, Option<TlsFailure>) {
    loop {
        if let TcpclEvent::Down {
            reason,
            tls_failure,
            ..
        } = next(events).await
        {
            return (reason, tls_failure);
        }
    }
}

#[tokio::test]
async fn two_nodes_with_certificates_of_one_ca_talk_over_tls() {
    let pki = Pki::new("ferry test CA");
    let a = pki.context(&["dtn://a/"], &[], &pki);
    // The passive node names its host too: the active side checks it against the address.
    let b = pki.context(&["dtn://b/"], &["127.0.0.1"], &pki);
    assert_eq!(a.node_ids(), ["dtn://a/"]);
    let (ha, mut ea, _hb, mut eb) = pair(
        (with_tls("a", TlsPolicy::Require), Some(a)),
        (with_tls("b", TlsPolicy::Offer), Some(b)),
    )
    .await;
    let TcpclEvent::Up { peer, .. } = next(&mut ea).await else {
        panic!()
    };
    assert!(peer.tls && peer.node_id == "dtn://b/");
    let TcpclEvent::Up { peer, .. } = next(&mut eb).await else {
        panic!()
    };
    assert!(peer.tls && peer.node_id == "dtn://a/");
    let bundle = encoded(300_000, 7);
    assert!(ha.send(1, bundle.clone(), false));
    let got = loop {
        match next(&mut eb).await {
            TcpclEvent::Received { bundle, .. } => break bundle,
            TcpclEvent::Incoming { .. } => {}
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(got, bundle.to_bytes());
    loop {
        match next(&mut ea).await {
            TcpclEvent::Sent { tag: 1 } => break,
            TcpclEvent::Progress { tag: 1, .. } | TcpclEvent::Written { tag: 1 } => {}
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_certificate_for_another_node_id_is_refused() {
    let pki = Pki::new("ferry test CA");
    // a's certificate is valid, but for dtn://c/.
    let a = pki.context(&["dtn://c/"], &[], &pki);
    let b = pki.context(&["dtn://b/"], &[], &pki);
    let (_ha, mut ea, _hb, mut eb) = pair(
        (with_tls("a", TlsPolicy::Offer), Some(a)),
        (with_tls("b", TlsPolicy::Offer), Some(b)),
    )
    .await;
    let (reason, failure) = down(&mut eb).await;
    assert_eq!(
        failure,
        Some(TlsFailure::NodeIdNotInCertificate),
        "{reason}"
    );
    let (reason, _) = down(&mut ea).await;
    assert!(reason.contains("contact failure"), "{reason}");
}

#[tokio::test]
async fn a_certificate_of_an_untrusted_ca_or_host_fails_the_handshake() {
    let pki = Pki::new("ferry test CA");
    let other = Pki::new("someone else's CA");
    let a = pki.context(&["dtn://a/"], &[], &pki);
    let b = other.context(&["dtn://b/"], &[], &pki);
    let (_ha, mut ea, _hb, mut eb) = pair(
        (with_tls("a", TlsPolicy::Offer), Some(a.clone())),
        (with_tls("b", TlsPolicy::Offer), Some(b)),
    )
    .await;
    let (reason, failure) = down(&mut ea).await;
    assert_eq!(failure, Some(TlsFailure::Handshake), "{reason}");
    assert_eq!(down(&mut eb).await.1, Some(TlsFailure::Handshake));

    // A passive node whose certificate names another host than the one dialled.
    let b = pki.context(&["dtn://b/"], &["10.9.9.9"], &pki);
    let (_ha, mut ea, _hb, mut eb) = pair(
        (with_tls("a", TlsPolicy::Offer), Some(a)),
        (with_tls("b", TlsPolicy::Offer), Some(b)),
    )
    .await;
    let (reason, failure) = down(&mut ea).await;
    assert_eq!(failure, Some(TlsFailure::Handshake), "{reason}");
    assert!(reason.contains("TLS handshake failed"), "{reason}");
    assert_eq!(down(&mut eb).await.1, Some(TlsFailure::Handshake));
}

#[test]
fn bad_material_is_named() {
    let pki = Pki::new("ferry test CA");
    let (chain, key) = pki.node(&["dtn://a/"], &[]);
    let roots = pki.ca.pem();
    let err = |c: &str, k: &str, r: &str| {
        TlsContext::from_pem(c.as_bytes(), k.as_bytes(), r.as_bytes())
            .unwrap_err()
            .to_string()
    };
    assert!(err("", &key, &roots).starts_with("certificate:"));
    assert!(err(&chain, "", &roots).starts_with("private key:"));
    assert!(err(&chain, &key, "").starts_with("CA roots:"));
    let (_, other_key) = pki.node(&["dtn://a/"], &[]);
    assert!(err(&chain, &other_key, &roots).starts_with("private key:"));
}
