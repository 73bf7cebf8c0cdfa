//! Discovery beacons over UDP broadcast or multicast (the [`wire::Beacon`] format): a node
//! announces its id and its convergence layers every period on each interface, and hears its
//! neighbours' beacons on the same port. What to do with a neighbour heard (open a TCPCL session)
//! is the event loop's decision, not this module's.
//!
//! Sending is per interface (`SO_BINDTODEVICE`), so a router with several links announces itself
//! on each and a beacon never leaks onto an interface the configuration leaves out. With no
//! interfaces configured, every interface that is up except loopback is used, looked up afresh
//! each round (interfaces come and go on phones and laptops).

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use bytes::Bytes;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wire::Beacon;

use crate::config::Discovery;

/// A beacon heard, with the address it came from.
#[derive(Debug, Clone)]
pub struct Heard {
    /// The beacon.
    pub beacon: Beacon,
    /// Where it came from (the announcing node's address on this network).
    pub from: SocketAddr,
}

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
                if heard.send(Heard { beacon, from }).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::debug!("ignoring a malformed beacon from {from}: {e}"),
        }
    }
}

/// Sends beacons on the configured interfaces.
pub struct Announcer {
    config: Discovery,
    /// One socket per interface, kept between rounds.
    sockets: BTreeMap<String, Arc<UdpSocket>>,
    /// For when no interface can be bound to (no privilege for `SO_BINDTODEVICE`).
    fallback: Option<Arc<UdpSocket>>,
}

impl Announcer {
    /// An announcer for this configuration.
    pub fn new(config: Discovery) -> Self {
        Self {
            config,
            sockets: BTreeMap::new(),
            fallback: None,
        }
    }

    /// Sends one beacon on every interface; returns how many interfaces it went out on.
    pub fn announce(&mut self, beacon: &Beacon) -> usize {
        let datagram = beacon.encode();
        self.send_on_each(self.config.port, |socket, target| {
            socket.try_send_to(&datagram, target).map(|_| ())
        })
    }

    /// Sends one encoded bundle as a UDP broadcast (or to the multicast group) on every
    /// interface, to the UDP convergence layer's `port`: the UDP convergence layer's flooding,
    /// one datagram per interface however many neighbours hear it. Returns how many interfaces
    /// it went out on.
    pub fn broadcast_bundle(&mut self, bundle: &wire::EncodedBundle, port: u16) -> usize {
        let slices = bundle.io_slices();
        self.send_on_each(port, |socket, target| {
            let sent = socket2::SockRef::from(socket).send_to_vectored(&slices, &target.into())?;
            if sent == bundle.len() {
                Ok(())
            } else {
                Err(io::Error::other("datagram truncated"))
            }
        })
    }

    /// Runs `send` once per configured (or, with none configured, every up) interface with
    /// that interface's socket and the broadcast or multicast address at `port`.
    fn send_on_each(
        &mut self,
        port: u16,
        send: impl Fn(&UdpSocket, SocketAddr) -> io::Result<()>,
    ) -> usize {
        let target = SocketAddr::V4(SocketAddrV4::new(self.config.address, port));
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
                None => match interface_socket(&name, &self.config) {
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
                Err(e) => tracing::debug!("broadcast on {name}: {e}"),
            }
        }
        if sent == 0 && self.config.interfaces.is_empty() {
            // No interface could be bound to: send once through the routing table.
            if self.fallback.is_none() {
                self.fallback = plain_socket(&self.config).ok().map(Arc::new);
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

fn plain_socket(config: &Discovery) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    if config.address.is_multicast() {
        socket.set_multicast_loop_v4(true)?;
    }
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)).into())?;
    UdpSocket::from_std(socket.into())
}

fn interface_socket(name: &str, config: &Discovery) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_broadcast(true)?;
    socket.set_nonblocking(true)?;
    socket.bind_device(Some(name.as_bytes()))?;
    if config.address.is_multicast() {
        socket.set_multicast_loop_v4(true)?;
    }
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
