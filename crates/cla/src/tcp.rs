//! The tokio adapter: one task per TCP connection drives a [`Session`] with the socket, the
//! clock and the owner's commands, and reports [`TcpclEvent`]s tagged with the owner's link id.
//!
//! ```text
//!   SessionHandle ──TcpclCommand (unbounded)──► session task ──(link, TcpclEvent) (bounded)──► owner
//!                                                 │  ▲
//!                                write_vectored   ▼  │ read_buf (64 KiB at a time)
//!                                                TcpStream
//! ```
//!
//! Events go through the bounded channel with `send().await`: an owner that falls behind slows
//! the session down (it stops reading, so TCP flow control reaches the peer) instead of letting
//! events pile up. Commands use an unbounded channel so the owner never blocks on a session.
//!
//! With a [`TlsContext`] ([`spawn_session_with_tls`]) and a session that negotiates TLS, the
//! task writes our contact header, then runs the TLS handshake on the connection (the bytes the
//! session left unread after the peer's contact header go first, see [`crate::tls`]), tells the
//! session, and runs the rest of the session over the TLS stream in the same way.
//!
//! A bundle sent before the session is up waits in the task and is queued when it comes up. A
//! send the session turns down for good (larger than the peer's transfer MRU, or a peer that
//! accepts no data) is answered at once with [`TcpclEvent::Refused`]; a send that arrives while
//! the session is closing is reported in [`TcpclEvent::Down`] as [`Unfinished`] with
//! `acknowledged: 0`, as are bundles that were queued but never started.

// The adapter is an I/O shell: it reads the clock (tokio's, for timers) and owns the socket. The
// sans-IO bans of clippy.toml are for `tcpcl`, which this module drives.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, IoSlice};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use wire::EncodedBundle;

use crate::tcpcl::{
    PeerInfo, ReadSize, Role, SessTermReason, Session, SessionConfig, SessionError, SessionEvent,
    TlsFailure, XferRefuseReason,
};
use crate::tls::TlsContext;

/// Bytes read from the socket at a time, at most.
const READ_CHUNK: usize = 64 * 1024;
/// A read goes into the receive buffer's spare room while at least this much is left; below it
/// the buffer grows by [`READ_CHUNK`]. Received messages are split off the buffer and keep its
/// allocation alive, so growing it before every read allocated a new 64 KiB block for each
/// small message (an RPC call or reply, an ack) and freed it again once it was handled.
const MIN_READ_ROOM: usize = 8 * 1024;
/// The most one read takes, and the most the receive buffer grows by at once for a frame whose
/// length is known: the rest of a large segment is read into room made for all of it, not into
/// 64 KiB steps that copy what came so far each time the buffer grows.
const MAX_READ: usize = 4 << 20;
/// Reading pauses while this many bytes of control messages (mostly acks) wait to be written.
const MAX_CONTROL_BACKLOG: usize = 256 * 1024;
/// At most this many buffers go into one vectored write.
const MAX_IO_SLICES: usize = 64;
/// Messages the session has ready are gathered into one vectored write up to this many bytes
/// (a larger segment goes alone).
const WRITE_BATCH: usize = 64 * 1024;
/// At most this many of the owner's commands are taken at once.
const COMMANDS_AT_ONCE: usize = 64;
/// After the session ended: how long to keep writing what is left (a SESS_TERM) and then to wait
/// for the peer's FIN, so closing with unread data does not reset the connection under our last
/// message.
const LINGER: Duration = Duration::from_secs(2);

/// What a session task reports, with the link id given to [`spawn_session`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpclEvent {
    /// The session is up.
    Up {
        /// What the peer announced.
        peer: PeerInfo,
        /// The peer's address.
        remote: SocketAddr,
        /// Whether we opened the connection.
        outbound: bool,
    },
    /// The first data of an incoming transfer; answer with [`SessionHandle::refuse`] to stop it.
    Incoming {
        /// The peer's transfer id (for [`SessionHandle::refuse`]).
        transfer_id: u64,
        /// The data so far; it starts with the bundle's primary block.
        first_data: Bytes,
        /// The announced size of the transfer, if the peer sent one.
        total_length: Option<u64>,
    },
    /// A whole bundle arrived.
    Received {
        /// The peer's transfer id (for [`SessionHandle::confirm`]).
        transfer_id: u64,
        /// Its bytes.
        bundle: Bytes,
    },
    /// The peer acknowledged part of a bundle we send.
    Progress {
        /// The caller's tag of the bundle.
        tag: u64,
        /// Bytes acknowledged so far.
        acknowledged: u64,
        /// The bundle's size.
        total: u64,
    },
    /// The last segment of a bundle we send was written out; its acknowledgement is to come.
    /// The session task holds none of its bytes any more.
    Written {
        /// The caller's tag of the bundle.
        tag: u64,
    },
    /// The peer acknowledged a whole bundle.
    Sent {
        /// The caller's tag of the bundle.
        tag: u64,
    },
    /// The peer refused a bundle, or the session cannot ever carry it (larger than the peer's
    /// transfer MRU).
    Refused {
        /// The caller's tag of the bundle.
        tag: u64,
    },
    /// The session is over. Always the last event of a session task, exactly once, also when the
    /// session never came up.
    Down {
        /// Why, for logs.
        reason: String,
        /// Bundles sent on this session that were not fully acknowledged (and not refused).
        unfinished: Vec<Unfinished>,
        /// The prefix received of an incoming bundle that was cut, for reactive fragmentation.
        partial: Option<Bytes>,
        /// Set when the session ended for a reason of TLS (a failed handshake, a node id its
        /// certificate does not name, a peer without TLS where it is required).
        tls_failure: Option<TlsFailure>,
    },
}

/// A bundle that did not get fully across.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Unfinished {
    /// The caller's tag of the bundle.
    pub tag: u64,
    /// Bytes of its encoding the peer acknowledged (0 if it never started).
    pub acknowledged: u64,
}

/// What the owner asks of a session task.
#[derive(Debug, Clone)]
pub enum TcpclCommand {
    /// Send a bundle; `tag` comes back in its events. Without a tag nothing is reported about
    /// the bundle at all (not its end, not its loss in [`TcpclEvent::Down`]): for traffic whose
    /// owner keeps no state about it, which then costs the owner no event per bundle.
    Send {
        /// The caller's id for this bundle, if it wants to hear of it.
        tag: Option<u64>,
        /// The bundle.
        bundle: EncodedBundle,
        /// Whether it goes before queued non-urgent bundles.
        urgent: bool,
    },
    /// Refuse an incoming transfer (XFER_REFUSE "Completed": the node already has the bundle).
    Refuse {
        /// The transfer id from [`TcpclEvent::Incoming`].
        transfer_id: u64,
    },
    /// The owner has a received bundle safely: send its final XFER_ACK (with
    /// [`crate::tcpcl::SessionConfig::confirm_received`]).
    Confirm {
        /// The transfer id from [`TcpclEvent::Received`].
        transfer_id: u64,
    },
    /// End the session in an orderly way (SESS_TERM, transfers in progress finish).
    Close,
    /// A link came up: if the session is stalled (a transfer in progress and nothing received
    /// for `quiet_ms`, see [`crate::tcpcl::Session::stalled`]), end it at once, without
    /// SESS_TERM (it would wait behind the stalled data), so that the owner dials a new
    /// connection instead of waiting for TCP's next retransmission. Its unfinished transfers
    /// come back in [`TcpclEvent::Down`] as any failed session's do.
    ReplaceIfStalled {
        /// How long without a byte received counts as stalled.
        quiet_ms: u64,
    },
}

/// The owner's side of a session task. Cloning gives another handle to the same session; when
/// every handle is dropped the session closes.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    commands: mpsc::UnboundedSender<TcpclCommand>,
}

impl SessionHandle {
    /// Queues a bundle. False if the session task is gone (no event will come for `tag`).
    pub fn send(&self, tag: u64, bundle: EncodedBundle, urgent: bool) -> bool {
        self.command(TcpclCommand::Send {
            tag: Some(tag),
            bundle,
            urgent,
        })
    }

    /// Queues a bundle nobody is told about again: no event reports its end or its loss.
    /// False if the session task is gone.
    pub fn send_untracked(&self, bundle: EncodedBundle, urgent: bool) -> bool {
        self.command(TcpclCommand::Send {
            tag: None,
            bundle,
            urgent,
        })
    }

    /// Refuses an incoming transfer. False if the session task is gone.
    pub fn refuse(&self, transfer_id: u64) -> bool {
        self.command(TcpclCommand::Refuse { transfer_id })
    }

    /// Confirms a received bundle (see [`TcpclCommand::Confirm`]). False if the session task is
    /// gone.
    pub fn confirm(&self, transfer_id: u64) -> bool {
        self.command(TcpclCommand::Confirm { transfer_id })
    }

    /// Closes the session. False if the session task is gone.
    pub fn close(&self) -> bool {
        self.command(TcpclCommand::Close)
    }

    /// Sends any command. False if the session task is gone.
    pub fn command(&self, command: TcpclCommand) -> bool {
        self.commands.send(command).is_ok()
    }

    /// Whether the session task has ended.
    pub fn is_closed(&self) -> bool {
        self.commands.is_closed()
    }
}

/// Runs a session over an established TCP stream in a spawned task (call from within a tokio
/// runtime). `link` is the caller's id for this session; every event is sent as `(link, event)`,
/// the last one being [`TcpclEvent::Down`].
pub fn spawn_session(
    stream: TcpStream,
    role: Role,
    config: SessionConfig,
    link: u64,
    events: mpsc::Sender<(u64, TcpclEvent)>,
) -> SessionHandle {
    spawn_session_with_tls(stream, role, config, None, link, events)
}

/// [`spawn_session`] for a session that may run TLS: when `config.tls` offers it and the peer
/// does too, the handshake uses `tls` (a session that negotiates TLS without a context ends
/// with a handshake failure).
pub fn spawn_session_with_tls(
    stream: TcpStream,
    role: Role,
    config: SessionConfig,
    tls: Option<Arc<TlsContext>>,
    link: u64,
    events: mpsc::Sender<(u64, TcpclEvent)>,
) -> SessionHandle {
    let (commands, rx) = mpsc::unbounded_channel();
    tokio::spawn(run(stream, role, config, tls, link, events, rx));
    SessionHandle { commands }
}

/// Connects to `addr` (within the contact timeout, at least one second), sets TCP_NODELAY and
/// spawns an active session.
pub async fn connect(
    addr: SocketAddr,
    config: SessionConfig,
    link: u64,
    events: mpsc::Sender<(u64, TcpclEvent)>,
) -> io::Result<SessionHandle> {
    let limit = Duration::from_millis(config.contact_timeout_ms.max(1000));
    let stream = tokio::time::timeout(limit, TcpStream::connect(addr))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {addr} timed out"),
            )
        })??;
    stream.set_nodelay(true)?;
    Ok(spawn_session(stream, Role::Active, config, link, events))
}

/// The task's state besides the socket.
struct Driver {
    session: Session,
    role: Role,
    link: u64,
    remote: SocketAddr,
    started: Instant,
    events: mpsc::Sender<(u64, TcpclEvent)>,
    /// Set when the owner dropped its receiver: nobody listens, the task just ends.
    events_gone: bool,
    /// Our transfer id → the caller's tag.
    tags: BTreeMap<u64, u64>,
    /// Sends that arrived before the session was up.
    waiting: Vec<(Option<u64>, EncodedBundle, bool)>,
    /// Tags of sends that arrived while the session was closing.
    failed: Vec<u64>,
    /// Translated events not yet delivered.
    outbox: VecDeque<TcpclEvent>,
    down: Option<TcpclEvent>,
}

impl Driver {
    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn submit(&mut self, tag: Option<u64>, bundle: EncodedBundle, urgent: bool) {
        match self.session.send(bundle.clone(), urgent) {
            Ok(id) => {
                if let Some(tag) = tag {
                    self.tags.insert(id, tag);
                }
            }
            Err(SessionError::NotEstablished) => self.waiting.push((tag, bundle, urgent)),
            Err(e @ (SessionError::TooLarge { .. } | SessionError::PeerAcceptsNoData)) => {
                tracing::debug!(link = self.link, ?tag, "cannot send: {e}");
                if let Some(tag) = tag {
                    self.outbox.push_back(TcpclEvent::Refused { tag });
                }
            }
            Err(SessionError::Closing | SessionError::TransferIdsExhausted) => {
                self.failed.extend(tag)
            }
        }
    }

    fn command(&mut self, command: TcpclCommand) {
        let now = self.now();
        match command {
            TcpclCommand::Send {
                tag,
                bundle,
                urgent,
            } => self.submit(tag, bundle, urgent),
            TcpclCommand::Refuse { transfer_id } => self
                .session
                .refuse(transfer_id, XferRefuseReason::Completed),
            TcpclCommand::Confirm { transfer_id } => self.session.confirm(transfer_id),
            TcpclCommand::Close => self.session.close(now, SessTermReason::Unknown),
            // Handled by the task loop, which also drops what waits to be written.
            TcpclCommand::ReplaceIfStalled { .. } => {}
        }
    }

    /// Translates the session's events into the outbox.
    fn translate(&mut self) {
        while let Some(event) = self.session.poll_event() {
            let out = match event {
                // The task loop sees `is_starting_tls` and runs the handshake.
                SessionEvent::StartTls => continue,
                SessionEvent::Established(peer) => {
                    self.outbox.push_back(TcpclEvent::Up {
                        peer,
                        remote: self.remote,
                        outbound: self.role == Role::Active,
                    });
                    for (tag, bundle, urgent) in std::mem::take(&mut self.waiting) {
                        self.submit(tag, bundle, urgent);
                    }
                    continue;
                }
                SessionEvent::IncomingStarted {
                    transfer_id,
                    first_data,
                    total_length,
                } => TcpclEvent::Incoming {
                    transfer_id,
                    first_data,
                    total_length,
                },
                SessionEvent::Received {
                    transfer_id,
                    bundle,
                } => TcpclEvent::Received {
                    transfer_id,
                    bundle,
                },
                SessionEvent::Progress {
                    transfer_id,
                    acknowledged,
                    total,
                } => match self.tags.get(&transfer_id) {
                    Some(&tag) => TcpclEvent::Progress {
                        tag,
                        acknowledged,
                        total,
                    },
                    None => continue,
                },
                SessionEvent::Written { transfer_id } => match self.tags.get(&transfer_id) {
                    Some(&tag) => TcpclEvent::Written { tag },
                    None => continue,
                },
                SessionEvent::Sent { transfer_id } => match self.tags.remove(&transfer_id) {
                    Some(tag) => TcpclEvent::Sent { tag },
                    None => continue,
                },
                SessionEvent::Refused { transfer_id, .. } => match self.tags.remove(&transfer_id) {
                    Some(tag) => TcpclEvent::Refused { tag },
                    None => continue,
                },
                SessionEvent::Terminated {
                    reason,
                    unfinished,
                    partial,
                    tls_failure,
                    ..
                } => {
                    let mut list: Vec<Unfinished> = unfinished
                        .into_iter()
                        .filter_map(|(id, acknowledged)| {
                            self.tags
                                .remove(&id)
                                .map(|tag| Unfinished { tag, acknowledged })
                        })
                        .collect();
                    list.extend(self.waiting.drain(..).filter_map(|(tag, ..)| {
                        tag.map(|tag| Unfinished {
                            tag,
                            acknowledged: 0,
                        })
                    }));
                    self.down = Some(TcpclEvent::Down {
                        reason,
                        unfinished: list,
                        partial: partial.map(|(_, bytes)| bytes),
                        tls_failure,
                    });
                    continue;
                }
            };
            self.outbox.push_back(out);
        }
    }

    /// Delivers translated events, waiting for room in the channel.
    async fn deliver(&mut self) {
        self.translate();
        while let Some(event) = self.outbox.pop_front() {
            if self.events_gone {
                self.outbox.clear();
                return;
            }
            if self.events.send((self.link, event)).await.is_err() {
                self.events_gone = true;
                let now = self.now();
                self.session.abort(now, "the event receiver is gone");
            }
            // Commands handled while waiting are not possible here, but submitting waiting
            // bundles on `Up` may have produced more events.
            self.translate();
        }
    }

    /// The final event, with sends that never reached the session.
    fn take_down(&mut self) -> TcpclEvent {
        let mut down = self.down.take().unwrap_or_else(|| TcpclEvent::Down {
            reason: "session task ended".into(),
            unfinished: Vec::new(),
            partial: None,
            tls_failure: None,
        });
        if let TcpclEvent::Down { unfinished, .. } = &mut down {
            unfinished.extend(self.waiting.drain(..).filter_map(|(tag, ..)| {
                tag.map(|tag| Unfinished {
                    tag,
                    acknowledged: 0,
                })
            }));
            unfinished.extend(self.failed.drain(..).map(|tag| Unfinished {
                tag,
                acknowledged: 0,
            }));
        }
        down
    }
}

/// One write of as much of `out` as the socket takes (cancel-safe: a single `write_vectored`).
async fn write_some<W: AsyncWrite + Unpin>(wr: &mut W, out: &VecDeque<Bytes>) -> io::Result<usize> {
    let slices: Vec<IoSlice<'_>> = out
        .iter()
        .take(MAX_IO_SLICES)
        .map(|b| IoSlice::new(b))
        .collect();
    wr.write_vectored(&slices).await
}

/// Drops `n` written bytes from the front of `out`.
fn advance(out: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = out.front_mut() else {
            return;
        };
        if n >= front.len() {
            n -= front.len();
            out.pop_front();
        } else {
            front.advance(n);
            n = 0;
        }
    }
}

/// What one read did.
enum Read {
    /// Bytes went into the receive buffer, for [`Session::receive`].
    Buffered(usize),
    /// Bytes went straight into the transfer being received ([`Session::direct_room`]).
    Direct(usize),
}

/// One read (cancel-safe): straight into the transfer being received while a large segment's
/// data is on its way and nothing is buffered, else into `rx` as [`Session::read_size`] says:
/// with room for the rest of the frame at its front when that is known (at most [`MAX_READ`]),
/// just a segment header between a transfer's segments, else [`READ_CHUNK`].
async fn read_some<R: AsyncRead + Unpin>(
    rd: &mut R,
    rx: &mut BytesMut,
    session: &mut Session,
) -> io::Result<Read> {
    if rx.is_empty()
        && let Some((buf, rest)) = session.direct_room()
    {
        let want = rest.min(MAX_READ);
        buf.reserve(want);
        return rd.read_buf(&mut buf.limit(want)).await.map(Read::Direct);
    }
    let (room, want) = match session.read_size(rx) {
        ReadSize::Any => (MIN_READ_ROOM, READ_CHUNK),
        ReadSize::Frame(rest) => (rest.min(MAX_READ), rest.clamp(READ_CHUNK, MAX_READ)),
        ReadSize::Header(len) => (len, len),
    };
    if rx.capacity() - rx.len() < room {
        rx.reserve(want.max(room));
    }
    rd.read_buf(&mut rx.limit(want)).await.map(Read::Buffered)
}

/// The connection's state besides the session: buffers and which directions are open. It
/// carries over from the TCP stream to the TLS stream.
struct Io {
    rx: BytesMut,
    out: VecDeque<Bytes>,
    read_open: bool,
    write_open: bool,
    commands_open: bool,
    linger_until: Option<Instant>,
}

/// Why [`drive`] returned.
enum Stop {
    /// The session is over (or nobody listens any more).
    Ended,
    /// Both contact headers offered TLS and ours is written: the handshake is next.
    StartTls,
}

async fn run(
    stream: TcpStream,
    role: Role,
    config: SessionConfig,
    tls: Option<Arc<TlsContext>>,
    link: u64,
    events: mpsc::Sender<(u64, TcpclEvent)>,
    mut commands: mpsc::UnboundedReceiver<TcpclCommand>,
) {
    // Acks and keepalives are small and must not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let remote = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    let started = Instant::now();
    let mut d = Driver {
        session: Session::new(role, config, 0),
        role,
        link,
        remote,
        started,
        events,
        events_gone: false,
        tags: BTreeMap::new(),
        waiting: Vec::new(),
        failed: Vec::new(),
        outbox: VecDeque::new(),
        down: None,
    };
    let mut io = Io {
        rx: BytesMut::new(),
        out: VecDeque::new(),
        read_open: true,
        write_open: true,
        commands_open: true,
        linger_until: None,
    };
    let (mut rd, mut wr) = stream.into_split();
    if let Stop::Ended = drive(&mut d, &mut io, &mut rd, &mut wr, &mut commands).await {
        report_end(d, &mut commands).await;
        return linger(&mut rd, &mut wr, &io).await;
    }
    // The handshake starts with what the session left unread after the peer's contact header.
    let prefix = io.rx.split().freeze();
    let stream = match (rd.reunite(wr), tls) {
        (Ok(stream), Some(tls)) => Some((stream, tls)),
        (Ok(_), None) => {
            d.session
                .tls_failed(d.now(), "this side has no TLS certificate configured");
            None
        }
        // Both halves came from one stream a moment ago.
        (Err(_), _) => {
            d.session
                .tls_failed(d.now(), "the connection's halves do not match");
            None
        }
    };
    let Some((stream, tls)) = stream else {
        return report_end(d, &mut commands).await;
    };
    // The handshake counts against the contact timeout.
    let deadline = d
        .session
        .poll_timeout()
        .map(|ms| started + Duration::from_millis(ms));
    let handshake = tls.handshake(role == Role::Active, prefix, stream, remote);
    let result = match deadline {
        Some(at) => tokio::time::timeout_at(at, handshake).await.ok(),
        None => Some(handshake.await),
    };
    match result {
        Some(Ok((stream, peer))) => {
            d.session.tls_established(d.now(), peer);
            let (mut rd, mut wr) = tokio::io::split(stream);
            drive(&mut d, &mut io, &mut rd, &mut wr, &mut commands).await;
            report_end(d, &mut commands).await;
            linger(&mut rd, &mut wr, &io).await;
        }
        Some(Err(e)) => {
            tracing::debug!(link, %remote, "TLS handshake: {e}");
            d.session.tls_failed(d.now(), &e.to_string());
            report_end(d, &mut commands).await;
        }
        None => {
            d.session.handle_timeout(d.now());
            d.session.tls_failed(d.now(), "timed out");
            report_end(d, &mut commands).await;
        }
    }
}

/// Runs the session over one stream until it is over, or until it waits for TLS with nothing
/// left to write.
async fn drive<R, W>(
    d: &mut Driver,
    io: &mut Io,
    rd: &mut R,
    wr: &mut W,
    commands: &mut mpsc::UnboundedReceiver<TcpclCommand>,
) -> Stop
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let link = d.link;
    loop {
        d.deliver().await;
        if d.events_gone {
            return Stop::Ended;
        }
        let now = d.now();
        if io.out.is_empty() && io.write_open {
            // Everything the session has ready, up to one write's worth: small segments and
            // acknowledgements share a system call instead of taking one each. Only what is
            // already queued is gathered, so nothing waits for company.
            let (mut bytes, mut took) = (0, false);
            while bytes < WRITE_BATCH && io.out.len() < MAX_IO_SLICES {
                let Some(parts) = d.session.poll_transmit(now) else {
                    break;
                };
                took = true;
                bytes += parts.iter().map(Bytes::len).sum::<usize>();
                io.out.extend(parts.into_iter().filter(|b| !b.is_empty()));
            }
            if took {
                continue;
            }
        }
        let starting_tls = d.session.is_starting_tls();
        if starting_tls && io.out.is_empty() {
            return Stop::StartTls;
        }
        let terminated = d.session.is_terminated();
        if terminated && (io.out.is_empty() || !io.write_open) {
            return Stop::Ended;
        }
        if terminated && io.linger_until.is_none() {
            io.linger_until = Some(Instant::now() + LINGER);
        }
        let deadline = match (d.session.poll_timeout(), io.linger_until) {
            (_, Some(at)) => Some(at),
            (Some(ms), None) => Some(d.started + Duration::from_millis(ms)),
            (None, None) => None,
        };
        // While TLS starts nothing is read: the handshake takes the connection's next bytes.
        let can_read = io.read_open
            && !terminated
            && !starting_tls
            && d.session.transmit_backlog() < MAX_CONTROL_BACKLOG;
        tokio::select! {
            r = read_some(rd, &mut io.rx, &mut d.session), if can_read => {
                let now = d.now();
                match r {
                    Ok(Read::Buffered(0) | Read::Direct(0)) => {
                        io.read_open = false;
                        d.session.receive_closed(now);
                    }
                    Ok(Read::Buffered(_)) => d.session.receive(now, &mut io.rx),
                    Ok(Read::Direct(n)) => d.session.direct_read(now, n),
                    Err(e) => {
                        tracing::debug!(link, "read: {e}");
                        io.read_open = false;
                        d.session.receive_closed(now);
                    }
                }
            }
            w = write_some(wr, &io.out), if io.write_open && !io.out.is_empty() => match w {
                Ok(0) => {
                    io.write_open = false;
                    io.out.clear();
                    d.session.abort(d.now(), "the connection accepts no more data");
                }
                Ok(n) => advance(&mut io.out, n),
                Err(e) => {
                    io.write_open = false;
                    io.out.clear();
                    d.session.abort(d.now(), &format!("write: {e}"));
                }
            },
            c = commands.recv(), if io.commands_open && !terminated => match c {
                Some(TcpclCommand::ReplaceIfStalled { quiet_ms }) => {
                    let now = d.now();
                    if d.session.stalled(now, quiet_ms) {
                        tracing::info!(
                            link,
                            "a link came up and this session had received nothing for \
                             {quiet_ms} ms with a transfer in progress: replaced by a new \
                             connection"
                        );
                        io.write_open = false;
                        io.out.clear();
                        d.session.abort(now, "stalled when a link came up");
                    }
                }
                Some(command) => {
                    d.command(command);
                    // The commands already waiting too, so their segments can share a write.
                    for _ in 1..COMMANDS_AT_ONCE {
                        match commands.try_recv() {
                            Ok(command) => d.command(command),
                            Err(_) => break,
                        }
                    }
                }
                None => {
                    // Every handle is gone: nobody can send or close any more, so close now.
                    io.commands_open = false;
                    let now = d.now();
                    d.session.close(now, SessTermReason::Unknown);
                }
            },
            () = sleep_until(deadline) => {
                if io.linger_until.is_some() {
                    return Stop::Ended;
                }
                d.session.handle_timeout(d.now());
            }
        }
    }
}

/// Reports the session's end: what it said last, then `Down` with every tag that did not get
/// an outcome.
async fn report_end(mut d: Driver, commands: &mut mpsc::UnboundedReceiver<TcpclCommand>) {
    // Deliver what the session said last (Terminated becomes Down, below).
    d.deliver().await;
    // From here on a send is refused at the handle (it returns false), so every tag the owner
    // handed over gets an outcome: commands still waiting never reached the session.
    commands.close();
    while let Ok(command) = commands.try_recv() {
        if let TcpclCommand::Send { tag, .. } = command {
            d.failed.extend(tag);
        }
    }
    if !d.events_gone {
        let down = d.take_down();
        let _ = d.events.send((d.link, down)).await;
    }
    // Nothing follows Down: the owner's receiver sees the channel close when `d` is dropped
    // here, not after the linger that follows.
}

/// Closes gracefully after reporting: a FIN, then a short wait for the peer's, so that unread
/// bytes do not turn our close into a reset that could discard our last message (a SESS_TERM
/// reply) at the peer.
async fn linger<R, W>(rd: &mut R, wr: &mut W, io: &Io)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    if io.write_open {
        let _ = tokio::time::timeout(LINGER, wr.shutdown()).await;
    }
    if io.read_open {
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(LINGER, async {
            while matches!(rd.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
