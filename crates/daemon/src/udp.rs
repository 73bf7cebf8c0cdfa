//! The UDP convergence layer: one encoded bundle per datagram, for the real-time classes
//! (datagram and stream bundles, control messages) whose value is in arriving soon, not surely.
//! A lost datagram is the stream class's to retransmit and the control messages' next refresh's
//! to repair. Bundles larger than the configured bound go over TCPCL instead.
//!
//! Sending writes the bundle's parts with one `sendmsg` (the payload is not copied).

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use socket2::SockRef;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wire::EncodedBundle;

/// A datagram received.
#[derive(Debug)]
pub struct Datagram {
    /// Its bytes (an encoded bundle, if the sender is well-behaved).
    pub bytes: Bytes,
    /// Where it came from.
    pub from: SocketAddr,
}

/// Binds the UDP convergence layer.
pub async fn bind(addr: SocketAddr) -> io::Result<Arc<UdpSocket>> {
    Ok(Arc::new(UdpSocket::bind(addr).await?))
}

/// Receives datagrams until the channel closes.
pub async fn listen(socket: Arc<UdpSocket>, out: mpsc::Sender<Datagram>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((n, from)) => {
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
