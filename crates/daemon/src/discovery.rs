//! Discovery beacons over UDP broadcast or multicast: a node announces its id and its
//! convergence layers every period on each interface, and hears its neighbours' beacons on the
//! same port. Two formats, each on its own port: Ferry's own ([`wire::Beacon`]) and dtn7-rs's
//! ([`wire::ipnd`], multicast to 224.0.0.26:3003 as `dtnd` sends and listens), so that Ferry and
//! `dtnd` find each other. What to do with a neighbour heard (open a TCPCL session) is the event
//! loop's decision, not this module's.
//!
//! Sending is per interface (`SO_BINDTODEVICE`), so a router with several links announces itself
//! on each and a beacon never leaks onto an interface the configuration leaves out. With no
//! interfaces configured, every interface that is up except loopback is used, looked up afresh
//! each round (interfaces come and go on phones and laptops).

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wire::Beacon;
use wire::ipnd::{IPND_GROUP_V4, IpndBeacon};

use crate::config::Discovery;

/// A beacon heard, with the address it came from.
#[derive(Debug, Clone)]
pub struct Heard {
    /// The beacon.
    pub beacon: HeardBeacon,
    /// Where it came from (the announcing node's address on this network).
    pub from: SocketAddr,
}

/// A beacon in one of the formats a node hears.
#[derive(Debug, Clone)]
pub enum HeardBeacon {
    /// Ferry's own: the sender is a Ferry node.
    Ferry(Beacon),
    /// dtn7-rs's: the sender is `dtnd`, or a Ferry node that also announces itself so.
    Dtn7(IpndBeacon),
}

/// Most multicast groups one socket joins on Linux (`net.ipv4.igmp_max_memberships`, 20 by
/// default): the dtn7-rs listener joins 224.0.0.26 on at most this many interfaces.
const MAX_MEMBERSHIPS: usize = 20;

/// Binds the beacon listener (shared with other Ferry nodes on this host: `SO_REUSEPORT`, since
/// broadcast datagrams reach every socket bound to the port).
pub fn bind_listener(config: &Discovery) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, config.port)).into())?;
    if config.address.is_multicast() {
        socket.join_multicast_v4(&config.address, &Ipv4Addr::UNSPECIFIED)?;
        socket.set_multicast_loop_v4(true)?;
    }
    UdpSocket::from_std(socket.into())
}

/// Receives beacons until the channel closes. Malformed datagrams are ignored (logged at debug).
pub async fn listen(socket: UdpSocket, heard: mpsc::Sender<Heard>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("discovery receive: {e}");
                continue;
            }
        };
        match Beacon::decode(&Bytes::copy_from_slice(&buf[..n])) {
            Ok(beacon) => {
                let beacon = HeardBeacon::Ferry(beacon);
                if heard.send(Heard { beacon, from }).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::debug!("ignoring a malformed beacon from {from}: {e}"),
        }
    }
}

/// Binds the listener for dtn7-rs's beacons on `dtn7_port`, shared (`SO_REUSEADDR`, which is
/// what `dtnd` sets, and `SO_REUSEPORT`) with a `dtnd` or another Ferry node on this host:
/// multicast and broadcast datagrams reach every socket bound to the port. It joins the group on
/// each interface in [`listen_dtn7`].
pub fn bind_dtn7_listener(config: &Discovery) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, config.dtn7_port)).into())?;
    UdpSocket::from_std(socket.into())
}

/// Receives dtn7-rs's beacons until the channel closes, keeping the socket a member of
/// 224.0.0.26 on every interface beacons are sent on (looked up again each period, as the
/// announcer does). Joining per interface rather than once on "any" makes the node hear `dtnd`
/// on each link, and needs no route for the group (a namespace or a phone without a default
/// route has none). Malformed datagrams are ignored (logged at debug).
pub async fn listen_dtn7(socket: UdpSocket, heard: mpsc::Sender<Heard>, config: Discovery) {
    let mut buf = vec![0u8; 65_536];
    let mut memberships = Memberships::default();
    let mut rejoin = tokio::time::interval(config.period.max(Duration::from_secs(1)));
    loop {
        let received = tokio::select! {
            r = socket.recv_from(&mut buf) => r,
            _ = rejoin.tick() => {
                let names = if config.interfaces.is_empty() {
                    up_interfaces()
                } else {
                    config.interfaces.clone()
                };
                memberships.refresh(&socket, &names);
                continue;
            }
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("dtn7 discovery receive: {e}");
                continue;
            }
        };
        match IpndBeacon::decode(&Bytes::copy_from_slice(&buf[..n])) {
            Ok(beacon) => {
                let beacon = HeardBeacon::Dtn7(beacon);
                if heard.send(Heard { beacon, from }).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::debug!("ignoring a malformed dtn7 beacon from {from}: {e}"),
        }
    }
}

/// The interfaces on which the dtn7-rs listener is a member of the group, by name and index
/// (an interface removed and made again has a new index, and is joined again).
#[derive(Default)]
struct Memberships {
    joined: BTreeMap<String, u32>,
    /// Whether the membership limit was reported (once).
    full_reported: bool,
}

impl Memberships {
    fn refresh(&mut self, socket: &UdpSocket, names: &[String]) {
        let sock = socket2::SockRef::from(socket);
        let indexes: BTreeMap<&String, u32> = names
            .iter()
            .filter_map(|n| interface_index(n).map(|i| (n, i)))
            .collect();
        self.joined.retain(|name, index| {
            let keep = indexes.get(name) == Some(index);
            if !keep {
                // Gone, or made again: the kernel dropped a removed interface's membership.
                let _ = sock
                    .leave_multicast_v4_n(&IPND_GROUP_V4, &InterfaceIndexOrAddress::Index(*index));
            }
            keep
        });
        for (name, index) in indexes {
            if self.joined.contains_key(name) {
                continue;
            }
            if self.joined.len() >= MAX_MEMBERSHIPS {
                if !std::mem::replace(&mut self.full_reported, true) {
                    tracing::warn!(
                        "not listening for dtn7 beacons on {name} and later interfaces: the \
                         listener is a member of 224.0.0.26 on {MAX_MEMBERSHIPS} already \
                         (list the ones that matter in discovery.interfaces)"
                    );
                }
                continue;
            }
            match sock.join_multicast_v4_n(&IPND_GROUP_V4, &InterfaceIndexOrAddress::Index(index)) {
                // EADDRINUSE: a member there already (joined before a restart of this task).
                Ok(()) => {
                    self.joined.insert(name.clone(), index);
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    self.joined.insert(name.clone(), index);
                }
                Err(e) => tracing::debug!("cannot join 224.0.0.26 on {name}: {e}"),
            }
        }
    }
}

/// An interface's index, from `/sys/class/net/<name>/ifindex` (no `unsafe` for
/// `if_nametoindex`).
fn interface_index(name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Sends beacons on the configured interfaces.
pub struct Announcer {
    config: Discovery,
    /// One socket per interface, kept between rounds.
    sockets: BTreeMap<String, Arc<UdpSocket>>,
    /// For when no interface can be bound to (no privilege for `SO_BINDTODEVICE`).
    fallback: Option<Arc<UdpSocket>>,
    /// A send since [`Announcer::take_would_block`] was last asked failed with `EAGAIN`: an
    /// interface that has just come up takes no packets until Linux has activated its queue.
    would_block: bool,
}

impl Announcer {
    /// An announcer for this configuration.
    pub fn new(config: Discovery) -> Self {
        Self {
            config,
            sockets: BTreeMap::new(),
            fallback: None,
            would_block: false,
        }
    }

    /// Whether a send failed with `EAGAIN` since the last time this was asked.
    pub fn take_would_block(&mut self) -> bool {
        std::mem::take(&mut self.would_block)
    }

    /// Sends one beacon on every interface; returns how many interfaces it went out on.
    pub fn announce(&mut self, beacon: &Beacon) -> usize {
        let datagram = beacon.encode();
        let target = SocketAddrV4::new(self.config.address, self.config.port);
        self.send_on_each(target, |socket, target| {
            socket.try_send_to(&datagram, target).map(|_| ())
        })
    }

    /// Sends one dtn7-rs beacon on every interface, to 224.0.0.26 at `dtn7_port` (where `dtnd`
    /// listens); returns how many interfaces it went out on.
    pub fn announce_dtn7(&mut self, beacon: &IpndBeacon) -> usize {
        let datagram = beacon.encode();
        let target = SocketAddrV4::new(IPND_GROUP_V4, self.config.dtn7_port);
        self.send_on_each(target, |socket, target| {
            socket.try_send_to(&datagram, target).map(|_| ())
        })
    }

    /// Sends one encoded bundle as a UDP broadcast (or to the multicast group) on every
    /// interface, to the UDP convergence layer's `port`: the UDP convergence layer's flooding,
    /// one datagram per interface however many neighbours hear it. Returns how many interfaces
    /// it went out on.
    pub fn broadcast_bundle(&mut self, bundle: &wire::EncodedBundle, port: u16) -> usize {
        let slices = bundle.io_slices();
        let target = SocketAddrV4::new(self.config.address, port);
        self.send_on_each(target, |socket, target| {
            let sent = socket2::SockRef::from(socket).send_to_vectored(&slices, &target.into())?;
            if sent == bundle.len() {
                Ok(())
            } else {
                Err(io::Error::other("datagram truncated"))
            }
        })
    }

    /// Runs `send` once per configured (or, with none configured, every up) interface with
    /// that interface's socket and `target` (a broadcast address or multicast group and port).
    fn send_on_each(
        &mut self,
        target: SocketAddrV4,
        send: impl Fn(&UdpSocket, SocketAddr) -> io::Result<()>,
    ) -> usize {
        let target = SocketAddr::V4(target);
        let names = if self.config.interfaces.is_empty() {
            up_interfaces()
        } else {
            self.config.interfaces.clone()
        };
        let mut sent = 0;
        self.sockets.retain(|name, _| names.contains(name));
        for name in names {
            let socket = match self.sockets.get(&name) {
                Some(s) => s.clone(),
                None => match interface_socket(&name) {
                    Ok(s) => {
                        let s = Arc::new(s);
                        self.sockets.insert(name.clone(), s.clone());
                        s
                    }
                    Err(e) => {
                        tracing::debug!("cannot send on {name}: {e}");
                        continue;
                    }
                },
            };
            match send(&socket, target) {
                Ok(()) => sent += 1,
                Err(e) => {
                    self.would_block |= e.kind() == io::ErrorKind::WouldBlock;
                    tracing::debug!("broadcast on {name}: {e}");
                }
            }
        }
        if sent == 0 && self.config.interfaces.is_empty() {
            // No interface could be bound to: send once through the routing table.
            if self.fallback.is_none() {
                self.fallback = plain_socket().ok().map(Arc::new);
            }
            if let Some(s) = &self.fallback
                && send(s, target).is_ok()
            {
                sent = 1;
            }
        }
        sent
    }
}

fn plain_socket() -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    // Multicast (a Ferry group, dtn7-rs's 224.0.0.26) also reaches listeners on this host: a
    // `dtnd` beside the node hears it. The node drops its own beacons by their node id.
    socket.set_multicast_loop_v4(true)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)).into())?;
    UdpSocket::from_std(socket.into())
}

fn interface_socket(name: &str) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    socket.bind_device(Some(name.as_bytes()))?;
    // As in `plain_socket`.
    socket.set_multicast_loop_v4(true)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)).into())?;
    UdpSocket::from_std(socket.into())
}

/// Interfaces that are up, except loopback, from `/sys/class/net`.
fn up_interfaces() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name != "lo")
        .filter(|name| {
            let state = std::fs::read_to_string(format!("/sys/class/net/{name}/operstate"))
                .unwrap_or_default();
            matches!(state.trim(), "up" | "unknown")
        })
        .collect();
    names.sort();
    names
}
