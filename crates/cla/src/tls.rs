//! TLS for TCPCLv4 sessions (RFC 9174 §4.4) with rustls (ring provider, TLS 1.3 only).
//!
//! A [`TlsContext`] holds this node's certificate chain and key and the roots it trusts; the
//! adapter ([`crate::tcp`]) runs the handshake with it when a session reports
//! [`crate::tcpcl::SessionEvent::StartTls`]: as the client when it opened the connection, as the
//! server when it accepted it. Both sides present a certificate and both validate the other's
//! chain against the configured roots (a server without a client certificate would leave the
//! active node's id unauthenticated). On top of that:
//!
//! - node-id authentication (§4.4.3), for both sides: the session checks that the peer's
//!   SESS_INIT node id is one of the URI subjectAltNames read here ([`crate::tcpcl::TlsPeer`]);
//! - host authentication of the passive side, by the active one: when the server's certificate
//!   names hosts (DNS or IP subjectAltNames) the address dialled must be one of them; a
//!   certificate that names no host is authenticated by its node id alone.
//!
//! Reading files is the owner's: contexts are built from PEM bytes.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::cert;
use crate::tcpcl::TlsPeer;

/// What is wrong with the material a [`TlsContext`] is made of. Each names its part, so the
/// owner can name the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate chain: not PEM, empty, or an end-entity certificate that cannot be read.
    #[error("certificate: {0}")]
    Certificate(String),
    /// The private key: not PEM, none, or not the certificate's.
    #[error("private key: {0}")]
    Key(String),
    /// The trusted roots: not PEM, none, or not a CA certificate.
    #[error("CA roots: {0}")]
    Roots(String),
}

/// This node's TLS identity and trust, ready for handshakes in either role. Cheap to share
/// (`Arc`).
#[derive(Debug)]
pub struct TlsContext {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    node_ids: Vec<String>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsContext {
    /// A context from PEM text: `chain` (end-entity certificate first, then intermediates),
    /// `key` (PKCS#8, PKCS#1 or SEC1) and `roots` (the CA certificates peers' chains must end
    /// in).
    pub fn from_pem(chain: &[u8], key: &[u8], roots: &[u8]) -> Result<Self, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Certificate(format!("not PEM: {e}")))?;
        let Some(end_entity) = chain.first() else {
            return Err(TlsError::Certificate("no CERTIFICATE in the file".into()));
        };
        let names =
            cert::alt_names(end_entity).map_err(|e| TlsError::Certificate(e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Key(e.to_string()))?;
        let mut store = RootCertStore::empty();
        let mut n = 0;
        for root in CertificateDer::pem_slice_iter(roots) {
            let root = root.map_err(|e| TlsError::Roots(format!("not PEM: {e}")))?;
            store
                .add(root)
                .map_err(|e| TlsError::Roots(e.to_string()))?;
            n += 1;
        }
        if n == 0 {
            return Err(TlsError::Roots("no CERTIFICATE in the file".into()));
        }
        let store = Arc::new(store);
        let provider = provider();

        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(store.clone(), provider.clone())
                .build()
                .map_err(|e| TlsError::Roots(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Roots(e.to_string()))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError::Key(e.to_string()))?;
        let server_verifier = Arc::new(PeerServerVerifier {
            roots: store,
            algorithms: provider.signature_verification_algorithms,
        });
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Roots(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(server_verifier)
            .with_client_auth_cert(chain, key)
            .map_err(|e| TlsError::Key(e.to_string()))?;
        Ok(Self {
            client: Arc::new(client),
            server: Arc::new(server),
            node_ids: names.uris,
        })
    }

    /// The URI subjectAltNames of our own end-entity certificate: the node ids it
    /// authenticates.
    pub fn node_ids(&self) -> &[String] {
        &self.node_ids
    }

    /// Runs the handshake on `stream`, which starts with `prefix` (bytes already read from the
    /// connection after the peer's contact header). Client when `active`, with `remote` the
    /// address dialled (for host authentication).
    pub(crate) async fn handshake<S>(
        &self,
        active: bool,
        prefix: Bytes,
        stream: S,
        remote: SocketAddr,
    ) -> io::Result<(tokio_rustls::TlsStream<Rewind<S>>, TlsPeer)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let stream = Rewind {
            prefix,
            inner: stream,
        };
        let tls: tokio_rustls::TlsStream<Rewind<S>> = if active {
            let connector = tokio_rustls::TlsConnector::from(self.client.clone());
            let name = ServerName::IpAddress(remote.ip().into());
            connector.connect(name, stream).await?.into()
        } else {
            let acceptor = tokio_rustls::TlsAcceptor::from(self.server.clone());
            acceptor.accept(stream).await?.into()
        };
        let (_, connection) = tls.get_ref();
        // Both verifiers require a certificate, so a finished handshake has one.
        let end_entity = connection
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| io::Error::other("the peer presented no certificate"))?;
        let names = cert::alt_names(end_entity).map_err(io::Error::other)?;
        Ok((
            tls,
            TlsPeer {
                node_ids: names.uris,
            },
        ))
    }
}

/// The active side's check of the passive side's certificate: the chain must end in a trusted
/// root; the address dialled must be one of the certificate's host names if it names any.
#[derive(Debug)]
struct PeerServerVerifier {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PeerServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        let names = cert::alt_names(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        // RFC 9174 §4.4.3: a DNS-ID or IP-ID present must match the host; without either only
        // the node id (checked after SESS_INIT) authenticates the peer.
        if !names.dns.is_empty() || !names.ips.is_empty() {
            rustls::client::verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A stream that first yields `prefix`: the bytes the session left in its receive buffer after
/// the peer's contact header (the start of the TLS handshake), so that none is lost.
#[derive(Debug)]
pub(crate) struct Rewind<S> {
    prefix: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
