//! The UDP convergence layer: one encoded bundle per datagram, for the real-time classes
//! (datagram and stream bundles, control messages) whose value is in arriving soon, not surely.
//! A lost datagram is the stream class's to retransmit and the control messages' next refresh's
//! to repair. Bundles larger than the configured bound go over TCPCL instead.
//!
//! Sending writes the bundle's parts with one `sendmsg` (the payload is not copied).
//!
//! **Receiving** is open to anyone in radio range, and a datagram's source address is the
//! sender's word (UDP is easily spoofed). The listener therefore drops, before a datagram is
//! copied or reaches the event loop, and counts each kind (the first of each also logged):
//!
//! - a datagram larger than `udp.max_bundle` (`ferry_udp_refused_oversize_total`): the bound is
//!   the same in both directions, so no Ferry node sends one;
//! - a datagram beyond `udp.max_rate` per second (`ferry_udp_refused_rate_total`), counted per
//!   source: each address the node has a TCPCL session with has a budget of its own (a session
//!   took a TCP handshake, so its address is not spoofed), and every other address shares one.
//!   A flood from strangers, however many addresses it claims, then takes at most `max_rate`
//!   datagrams a second of the loop's time and never crowds out a peer's datagrams; a budget
//!   refills continuously and holds at most one second's worth.
//!
//! What passes waits for the loop in a channel of [`QUEUE`] datagrams (at most
//! `QUEUE × udp.max_bundle` bytes; the listener stops reading while it is full, and the kernel
//! drops what does not fit its socket buffer). A datagram that is not a bundle is counted there
//! (`ferry_udp_malformed_total`, in `core`).

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use socket2::SockRef;
use std::time::Instant;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wire::EncodedBundle;

/// Datagrams that may wait for the event loop.
pub const QUEUE: usize = 1024;

/// A datagram received.
#[derive(Debug)]
pub struct Datagram {
    /// Its bytes (an encoded bundle, if the sender is well-behaved).
    pub bytes: Bytes,
    /// Where it came from.
    pub from: SocketAddr,
}

/// What the listener lets through, shared with the event loop (which tells it the addresses of
/// the sessions, and shows its counters in the metrics).
#[derive(Debug, Clone)]
pub struct Gate(Arc<GateInner>);

#[derive(Debug)]
struct GateInner {
    max_bundle: usize,
    max_rate: u32,
    buckets: Mutex<Buckets>,
    refused_oversize: AtomicU64,
    refused_rate: AtomicU64,
    oversize_logged: AtomicBool,
    rate_logged: AtomicBool,
}

#[derive(Debug)]
struct Buckets {
    /// One per address with a session (the loop keeps this set to its sessions'; bounded by
    /// `tcpcl.max_sessions`).
    peers: BTreeMap<IpAddr, Bucket>,
    /// Every other source together.
    strangers: Bucket,
}

/// A token bucket: `tokens` datagrams may pass now; it refills at the rate, up to one second's.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(rate),
            at: now,
        }
    }

    fn take(&mut self, rate: u32, now: Instant) -> bool {
        let rate = f64::from(rate);
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Gate {
    /// Datagrams of at most `max_bundle` bytes, `max_rate` a second (at least 1) from each
    /// session's address and from all other addresses together.
    pub fn new(max_bundle: usize, max_rate: u32) -> Self {
        let max_rate = max_rate.max(1);
        Self(Arc::new(GateInner {
            max_bundle,
            max_rate,
            buckets: Mutex::new(Buckets {
                peers: BTreeMap::new(),
                strangers: Bucket::full(max_rate, Instant::now()),
            }),
            refused_oversize: AtomicU64::new(0),
            refused_rate: AtomicU64::new(0),
            oversize_logged: AtomicBool::new(false),
            rate_logged: AtomicBool::new(false),
        }))
    }

    /// The addresses the node has sessions with now: each gets a budget of its own (kept while
    /// its session lasts), the others share the strangers'.
    pub fn set_peers(&self, addresses: impl IntoIterator<Item = IpAddr>) {
        let now = Instant::now();
        let Ok(mut b) = self.0.buckets.lock() else {
            return;
        };
        let mut peers = BTreeMap::new();
        for ip in addresses {
            let bucket = b
                .peers
                .get(&ip)
                .copied()
                .unwrap_or_else(|| Bucket::full(self.0.max_rate, now));
            peers.insert(ip, bucket);
        }
        b.peers = peers;
    }

    /// Whether a datagram of `len` bytes from `from` may pass; a refusal is counted, and the
    /// first of each kind logged.
    pub fn admit(&self, len: usize, from: IpAddr) -> bool {
        self.admit_at(len, from, Instant::now())
    }

    fn admit_at(&self, len: usize, from: IpAddr, now: Instant) -> bool {
        if len > self.0.max_bundle {
            self.0.refused_oversize.fetch_add(1, Ordering::Relaxed);
            if !self.0.oversize_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "dropping a UDP datagram of {len} bytes from {from}: above udp.max_bundle \
                     ({} bytes) (logged once; the metric ferry_udp_refused_oversize_total \
                     counts them)",
                    self.0.max_bundle
                );
            }
            return false;
        }
        let passed = match self.0.buckets.lock() {
            Ok(mut b) => {
                let rate = self.0.max_rate;
                match b.peers.get_mut(&from) {
                    Some(bucket) => bucket.take(rate, now),
                    None => b.strangers.take(rate, now),
                }
            }
            // A listener that panicked while holding the lock is gone anyway.
            Err(_) => false,
        };
        if !passed {
            self.0.refused_rate.fetch_add(1, Ordering::Relaxed);
            if !self.0.rate_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "dropping UDP datagrams from {from}: more than udp.max_rate ({} a second) \
                     from it (or from addresses without a session, together) (logged once; the \
                     metric ferry_udp_refused_rate_total counts them)",
                    self.0.max_rate
                );
            }
        }
        passed
    }

    /// Datagrams dropped for their size.
    pub fn refused_oversize(&self) -> u64 {
        self.0.refused_oversize.load(Ordering::Relaxed)
    }

    /// Datagrams dropped for their source's rate.
    pub fn refused_rate(&self) -> u64 {
        self.0.refused_rate.load(Ordering::Relaxed)
    }
}

/// Binds the UDP convergence layer.
pub async fn bind(addr: SocketAddr) -> io::Result<Arc<UdpSocket>> {
    Ok(Arc::new(UdpSocket::bind(addr).await?))
}

/// Receives datagrams until the channel closes, passing on those `gate` admits.
pub async fn listen(socket: Arc<UdpSocket>, out: mpsc::Sender<Datagram>, gate: Gate) {
    // Larger than any UDP payload over IPv4 or IPv6 (without jumbograms): nothing is truncated,
    // so a datagram's length is its own.
    let mut buf = vec![0u8; 65_536];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((n, from)) => {
                if !gate.admit(n, from.ip()) {
                    continue;
                }
                let bytes = Bytes::copy_from_slice(&buf[..n]);
                if out.send(Datagram { bytes, from }).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::debug!("udp receive: {e}"),
        }
    }
}

/// Sends one bundle as one datagram, without waiting: a full socket buffer drops it, as a
/// congested link would.
pub fn send(socket: &UdpSocket, to: SocketAddr, bundle: &EncodedBundle) -> io::Result<()> {
    let slices: [IoSlice<'_>; 3] = bundle.io_slices();
    let sent = SockRef::from(socket).send_to_vectored(&slices, &to.into())?;
    if sent != bundle.len() {
        return Err(io::Error::other("datagram truncated"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn oversize_and_over_rate_datagrams_are_refused_and_counted_per_source() {
        let gate = Gate::new(1000, 10);
        let t0 = Instant::now();
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        gate.set_peers([peer]);
        assert!(!gate.admit_at(1001, peer, t0), "above max_bundle");
        assert_eq!(gate.refused_oversize(), 1);
        // Strangers share one budget, whatever address they claim.
        let admitted = (0..100u8)
            .filter(|&i| gate.admit_at(100, IpAddr::from([192, 168, 1, i]), t0))
            .count();
        assert_eq!(admitted, 10);
        assert_eq!(gate.refused_rate(), 90);
        // The peer's own budget is untouched by them.
        assert_eq!(
            (0..20).filter(|_| gate.admit_at(1000, peer, t0)).count(),
            10
        );
        // Half a second refills half a second's worth.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!((0..20).filter(|_| gate.admit_at(1, peer, t1)).count(), 5);
        // A session that ends takes its budget with it: the address is a stranger again, and
        // a budget never holds more than one second's worth.
        gate.set_peers([]);
        let t2 = t0 + Duration::from_secs(10);
        assert_eq!((0..20).filter(|_| gate.admit_at(1, peer, t2)).count(), 10);
        assert_eq!(gate.refused_rate(), 90 + 10 + 15 + 10);
    }
}
