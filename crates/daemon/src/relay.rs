//! A TCP relay that stands in for a radio link between two nodes on one machine: a node dials
//! the relay instead of its peer, and [`Relay::cut`] breaks the link (every connection through
//! it is torn down and new ones are closed at once) until [`Relay::restore`]. `ferry demo` and
//! the RPC tests break paths mid-call with it.
//!
//! **What it never does**: look at the bytes, or connect anywhere but the one target it was
//! given.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A link that can be cut and restored.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    forwarded: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Relay {
    /// A relay on 127.0.0.1 (any free port) to `target`, up.
    pub async fn start(target: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (up, up_rx) = watch::channel(true);
        let forwarded = Arc::new(AtomicU64::new(0));
        let count = forwarded.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !*up_rx.borrow() {
                    // The link is down: the connection ends at once, as a dial over a dead
                    // radio would fail.
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                tokio::spawn(pipe(client, server, up_rx.clone(), count.clone()));
            }
        });
        Ok(Relay {
            addr,
            up,
            forwarded,
            task,
        })
    }

    /// Where nodes dial to reach the target through this link.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Breaks the link: open connections are closed, new ones refused.
    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Mends the link: new connections pass again.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }

    /// Whether the link is up.
    pub fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// Bytes carried so far, both directions.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.up.send_replace(false);
        self.task.abort();
    }
}

/// Copies both ways until either side closes or the link is cut.
async fn pipe(
    client: TcpStream,
    server: TcpStream,
    mut up: watch::Receiver<bool>,
    count: Arc<AtomicU64>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let c2 = count.clone();
    let forward = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
            c2.fetch_add(n as u64, Ordering::Relaxed);
        }
    };
    let backward = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if cw.write_all(&buf[..n]).await.is_err() {
                return;
            }
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
    };
    let cut = async move {
        while *up.borrow_and_update() {
            if up.changed().await.is_err() {
                return;
            }
        }
    };
    // Whichever ends first ends all: dropping the halves closes both connections.
    tokio::select! {
        _ = forward => {}
        _ = backward => {}
        _ = cut => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn carries_bytes_until_cut_and_again_after_restore() {
        let echo = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let relay = Relay::start(target).await.unwrap();
        let mut c = TcpStream::connect(relay.addr()).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!(relay.forwarded(), 8);

        relay.cut();
        assert!(!relay.is_up());
        // The open connection ends.
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("the cut closes the connection")
            .unwrap_or(0);
        assert_eq!(n, 0);
        // A new one is closed at once.
        let mut d = TcpStream::connect(relay.addr()).await.unwrap();
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), d.read(&mut buf))
            .await
            .expect("a dial over a cut link ends")
            .unwrap_or(0);
        assert_eq!(n, 0);

        relay.restore();
        let mut e = TcpStream::connect(relay.addr()).await.unwrap();
        e.write_all(b"pong").await.unwrap();
        e.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
