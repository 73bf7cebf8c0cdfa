//! Test helpers shared by the integration tests: real bundles, two sessions wired back to back
//! in memory, and a scripted peer that speaks raw TCPCL messages.

// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use cla::tcpcl::{ReadSize, Role, Session, SessionConfig, SessionEvent};
use wire::DtnTime;
use wire::tcpcl::{ContactHeader, FrameLimits, Message, SessInit};
use wire::{Bundle, CreationTimestamp, Eid, EncodedBundle, PrimaryBlock};

/// A real BPv7 bundle (CRC-32C) with a `payload_len`-byte pseudo-random payload; `seq` makes it
/// unique.
pub(crate) fn bundle(payload_len: usize, seq: u64) -> Bundle {
    let primary = PrimaryBlock::new(
        Eid::ipn(2, 1),
        Eid::ipn(1, 0),
        CreationTimestamp {
            time: DtnTime::from_millis(800_000_000_000),
            sequence: seq,
        },
        3_600_000,
    );
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let payload: Vec<u8> = (0..payload_len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    Bundle::new(primary, Bytes::from(payload))
}

/// The encoding of [`bundle`].
pub(crate) fn encoded(payload_len: usize, seq: u64) -> EncodedBundle {
    bundle(payload_len, seq).encode()
}

pub(crate) fn config(node: &str) -> SessionConfig {
    SessionConfig {
        node_id: format!("dtn://{node}/"),
        ..SessionConfig::default()
    }
}

/// A tiny deterministic generator for chunk sizes.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// One side of a wired pair.
pub(crate) struct Side {
    pub(crate) session: Session,
    /// Bytes written by this side that the other has not received yet.
    pub(crate) wire: BytesMut,
    /// The receive buffer of this side.
    pub(crate) rx: BytesMut,
    pub(crate) events: Vec<SessionEvent>,
    /// Every message this side wrote, decoded (contact headers left out).
    pub(crate) sent: Vec<Message>,
    contact_sent: bool,
    /// Decoding copy of `wire` for `sent`.
    trace: BytesMut,
    /// Whether this side reads as the connection task does: straight into the transfer being
    /// received when the session offers room ([`Session::direct_room`]), and no more than a
    /// segment header when [`Session::read_size`] asks for one.
    pub(crate) direct: bool,
    /// Bytes that went straight into a transfer.
    pub(crate) direct_bytes: usize,
}

impl Side {
    pub(crate) fn new(role: Role, config: SessionConfig, now: u64) -> Self {
        Self {
            session: Session::new(role, config, now),
            wire: BytesMut::new(),
            rx: BytesMut::new(),
            events: Vec::new(),
            sent: Vec::new(),
            contact_sent: false,
            trace: BytesMut::new(),
            direct: false,
            direct_bytes: 0,
        }
    }

    /// Writes at most `budget` messages; returns how many.
    pub(crate) fn transmit(&mut self, now: u64, budget: usize) -> usize {
        let mut n = 0;
        while n < budget {
            let Some(parts) = self.session.poll_transmit(now) else {
                break;
            };
            for p in &parts {
                self.wire.extend_from_slice(p);
                self.trace.extend_from_slice(p);
            }
            n += 1;
        }
        self.decode_trace();
        n
    }

    fn decode_trace(&mut self) {
        if !self.contact_sent {
            if self.trace.len() < ContactHeader::ENCODED_LEN {
                return;
            }
            let _ = ContactHeader::decode_from(&mut self.trace);
            self.contact_sent = true;
        }
        while let Ok(Some(m)) = Message::decode_from(&mut self.trace, FrameLimits::new(1 << 40)) {
            self.sent.push(m);
        }
    }

    pub(crate) fn drain_events(&mut self) {
        while let Some(e) = self.session.poll_event() {
            self.events.push(e);
        }
    }

    pub(crate) fn received(&self) -> Vec<Bytes> {
        self.events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Received { bundle, .. } => Some(bundle.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn sent_ids(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Sent { transfer_id } => Some(*transfer_id),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn terminated(&self) -> Option<&SessionEvent> {
        self.events
            .iter()
            .find(|e| matches!(e, SessionEvent::Terminated { .. }))
    }

    /// Checks the Terminated event, if any, is the only one and the last.
    pub(crate) fn check_terminated_once(&self) {
        let n = self
            .events
            .iter()
            .filter(|e| matches!(e, SessionEvent::Terminated { .. }))
            .count();
        assert!(n <= 1, "Terminated {n} times");
        if n == 1 {
            assert!(matches!(
                self.events.last(),
                Some(SessionEvent::Terminated { .. })
            ));
            assert!(self.session.is_terminated());
        }
    }
}

/// Two sessions connected by an in-memory "TCP connection" that delivers bytes in chunks.
pub(crate) struct Pair {
    pub(crate) a: Side,
    pub(crate) b: Side,
    pub(crate) now: u64,
    pub(crate) rng: Rng,
    /// Largest chunk delivered at once.
    pub(crate) max_chunk: usize,
    /// Messages each side writes per step.
    pub(crate) budget: usize,
}

impl Pair {
    /// `a` is active, `b` passive.
    pub(crate) fn new(a: SessionConfig, b: SessionConfig) -> Self {
        Self {
            a: Side::new(Role::Active, a, 0),
            b: Side::new(Role::Passive, b, 0),
            now: 0,
            rng: Rng(1),
            max_chunk: 1 << 20,
            budget: usize::MAX,
        }
    }

    /// A pair run until both sides are established.
    pub(crate) fn established(a: SessionConfig, b: SessionConfig) -> Self {
        let mut p = Self::new(a, b);
        p.run();
        assert!(p.a.session.is_established() && p.b.session.is_established());
        p
    }

    fn deliver(from: &mut Side, to: &mut Side, now: u64, rng: &mut Rng, max: usize) -> bool {
        if from.wire.is_empty() {
            return false;
        }
        let mut n = (1 + rng.below(max)).min(from.wire.len());
        if to.direct {
            if to.rx.is_empty()
                && let Some((buf, rest)) = to.session.direct_room()
            {
                let n = n.min(rest);
                buf.extend_from_slice(&from.wire.split_to(n));
                to.direct_bytes += n;
                to.session.direct_read(now, n);
                return true;
            }
            if let ReadSize::Header(len) = to.session.read_size(&to.rx) {
                n = n.min(len);
            }
        }
        let chunk = from.wire.split_to(n);
        to.rx.extend_from_slice(&chunk);
        to.session.receive(now, &mut to.rx);
        true
    }

    /// One round: each side writes (up to the budget), then one chunk travels each way.
    /// Returns whether anything happened.
    pub(crate) fn step(&mut self) -> bool {
        let mut busy = self.a.transmit(self.now, self.budget) > 0;
        busy |= self.b.transmit(self.now, self.budget) > 0;
        busy |= Self::deliver(
            &mut self.a,
            &mut self.b,
            self.now,
            &mut self.rng,
            self.max_chunk,
        );
        busy |= Self::deliver(
            &mut self.b,
            &mut self.a,
            self.now,
            &mut self.rng,
            self.max_chunk,
        );
        self.a.drain_events();
        self.b.drain_events();
        busy
    }

    /// Steps until nothing moves.
    pub(crate) fn run(&mut self) {
        let mut rounds = 0u64;
        while self.step() {
            rounds += 1;
            assert!(rounds < 10_000_000, "no quiescence");
        }
    }

    /// Steps until `f` holds (or nothing moves); returns whether it held.
    pub(crate) fn run_until(&mut self, mut f: impl FnMut(&Pair) -> bool) -> bool {
        loop {
            if f(self) {
                return true;
            }
            if !self.step() {
                return f(self);
            }
        }
    }

    /// Advances the clock to `t`, firing timers on the way and exchanging what they produce.
    pub(crate) fn advance_to(&mut self, t: u64) {
        loop {
            let next = [self.a.session.poll_timeout(), self.b.session.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(n) if n <= t => {
                    self.now = self.now.max(n);
                    let now = self.now;
                    self.a.session.handle_timeout(now);
                    self.b.session.handle_timeout(now);
                    self.run();
                }
                _ => break,
            }
        }
        self.now = t;
        self.run();
    }
}

/// A scripted peer talking to one session under test: raw messages in, decoded messages out.
pub(crate) struct Scripted {
    pub(crate) session: Session,
    pub(crate) rx: BytesMut,
    pub(crate) now: u64,
    out: BytesMut,
    contact_seen: bool,
}

impl Scripted {
    /// A passive session under test, its handshake done with a peer named `dtn://peer/` that
    /// offers `keepalive` seconds and large MRUs.
    pub(crate) fn passive(config: SessionConfig, keepalive: u16) -> Self {
        let mut s = Self {
            session: Session::new(Role::Passive, config, 0),
            rx: BytesMut::new(),
            now: 0,
            out: BytesMut::new(),
            contact_seen: false,
        };
        let mut hello = BytesMut::new();
        ContactHeader::new(false).encode(&mut hello);
        s.feed(&hello);
        s.send(&Message::SessInit(SessInit {
            keepalive_interval: keepalive,
            segment_mru: 1 << 20,
            transfer_mru: 1 << 32,
            node_id: "dtn://peer/".into(),
            extensions: Vec::new(),
        }));
        let answer = s.output();
        assert!(
            matches!(answer.as_slice(), [Message::SessInit(_)]),
            "{answer:?}"
        );
        assert!(s.session.is_established());
        let events = s.events();
        assert!(
            matches!(events.as_slice(), [SessionEvent::Established(_)]),
            "{events:?}"
        );
        s
    }

    pub(crate) fn fresh(role: Role, config: SessionConfig) -> Self {
        Self {
            session: Session::new(role, config, 0),
            rx: BytesMut::new(),
            now: 0,
            out: BytesMut::new(),
            contact_seen: false,
        }
    }

    /// Feeds bytes as the connection task reads them: while the session offers room for a
    /// streamed segment's data and nothing is buffered, straight into it (as far as that room
    /// goes), the rest through the receive buffer. Returns how many went straight in.
    pub(crate) fn feed_direct(&mut self, mut bytes: &[u8]) -> usize {
        let mut direct = 0;
        while !bytes.is_empty() {
            if self.rx.is_empty()
                && let Some((buf, rest)) = self.session.direct_room()
            {
                let n = rest.min(bytes.len());
                buf.extend_from_slice(&bytes[..n]);
                self.session.direct_read(self.now, n);
                direct += n;
                bytes = &bytes[n..];
                continue;
            }
            let n = match self.session.read_size(&self.rx) {
                ReadSize::Header(len) => len.min(bytes.len()),
                _ => bytes.len(),
            };
            self.rx.extend_from_slice(&bytes[..n]);
            self.session.receive(self.now, &mut self.rx);
            bytes = &bytes[n..];
        }
        direct
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.rx.extend_from_slice(bytes);
        self.session.receive(self.now, &mut self.rx);
    }

    pub(crate) fn send(&mut self, m: &Message) {
        let bytes = m.to_bytes().expect("encodable");
        self.feed(&bytes);
    }

    /// Raw bytes the session wrote since the last call.
    pub(crate) fn raw_output(&mut self) -> Bytes {
        while let Some(parts) = self.session.poll_transmit(self.now) {
            for p in parts {
                self.out.extend_from_slice(&p);
            }
        }
        self.out.split().freeze()
    }

    /// Messages the session wrote since the last call (a contact header is skipped).
    pub(crate) fn output(&mut self) -> Vec<Message> {
        let raw = self.raw_output();
        let mut buf = BytesMut::from(&raw[..]);
        if !self.contact_seen && buf.starts_with(b"dtn!") {
            let _ = ContactHeader::decode_from(&mut buf);
            self.contact_seen = true;
        }
        let mut out = Vec::new();
        while let Ok(Some(m)) = Message::decode_from(&mut buf, FrameLimits::new(1 << 40)) {
            out.push(m);
        }
        assert!(buf.is_empty(), "undecodable output {buf:?}");
        out
    }

    pub(crate) fn events(&mut self) -> Vec<SessionEvent> {
        std::iter::from_fn(|| self.session.poll_event()).collect()
    }
}
