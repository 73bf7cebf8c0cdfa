//! Ferry's convergence layers: how bundles cross a link between two nodes.
//!
//! ```text
//!   socket bytes ──► tcp (tokio adapter) ──► tcpcl::Session (sans-IO) ──► SessionEvent
//!   EncodedBundle ─► SessionHandle::send ──► Session::send ──► poll_transmit ──► write_vectored
//! ```
//!
//! - [`tcpcl`]: a sans-IO TCPCLv4 session (RFC 9174): contact header and SESS_INIT negotiation,
//!   segmentation with START/END flags, XFER_ACK for every segment, reassembly, XFER_REFUSE,
//!   keepalives, idle and contact timeouts, orderly and abrupt termination. Time arrives as a
//!   `now_ms` argument, bytes as a `BytesMut`; output is drained with `poll_transmit`,
//!   `poll_event` and `poll_timeout`. It never touches a socket, a clock or a random source, so
//!   the same state machine runs under tokio, in tests wired back to back, and in a simulator.
//! - [`tls`]: TLS for TCPCL sessions (RFC 9174 §4.4) with rustls: this node's certificate and
//!   key, the roots that peers' certificates must chain to, host authentication of the passive
//!   side; [`cert`] reads a certificate's subjectAltNames (the URI ones are node ids).
//! - [`tcp`]: the tokio adapter that drives one [`tcpcl::Session`] per TCP connection in a task
//!   of its own, maps transfer ids to the caller's tags and reports [`tcp::TcpclEvent`]s on a
//!   bounded channel.
//!
//! What this crate never does: decide what to send or whether to keep what arrives (that is the
//! node's), look inside bundles beyond handing the first segment to the caller, copy a bundle it
//! sends (segments are slices of the [`wire::EncodedBundle`]'s own buffers, written with
//! vectored writes), copy a bundle that arrived in one segment, offer TLS unless configured to (a session offers
//! it with [`tcpcl::TlsPolicy`], the adapter runs it with a [`tls::TlsContext`]), or buffer more
//! of an incoming transfer than the transfer MRU it announced, or more of all sessions'
//! unfinished transfers together than the node's [`tcpcl::ReceiveBudget`]. Message codecs live in
//! [`wire::tcpcl`]; this crate only sequences them.

#![forbid(unsafe_code)]

pub mod cert;
pub mod tcp;
pub mod tcpcl;
pub mod tls;
