//! [`StartError`]: why [`crate::start`] could not bring a node up, by kind, with the file,
//! address or configuration key at fault named in its message.

use std::io;
use std::net::SocketAddr;

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A file or directory the node keeps could not be read or written (`what` names it).
    #[error("{what}: {source}")]
    Io {
        /// What the daemon was doing, and with which path.
        what: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file the node keeps is not what it must be (others may read a secret, or it is not in
    /// its format); the message says what to do.
    #[error("{0}")]
    File(String),
    /// The store could not be opened, recovered or flushed.
    #[error("{what}: {source}")]
    Store {
        /// What the daemon was doing.
        what: String,
        /// The store's error (boxed: it is large, and this error is returned on every path).
        #[source]
        source: Box<store::StoreError>,
    },
    /// A listener could not bind its address.
    #[error("{what} on {addr}: {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The configuration asks for something that cannot be (an API other hosts reach without
    /// `api.allow_remote`, an `[rpc]` predicate that does not parse, a certificate for another
    /// node, no data directory to be found); the message names the key.
    #[error("{0}")]
    Config(String),
    /// The operating system had no randomness to give.
    #[error("drawing {what} from the operating system: {error}")]
    Random {
        /// What for.
        what: &'static str,
        /// Its error (getrandom's error is not a `std::error::Error` without its `std` feature).
        error: getrandom::Error,
    },
}

/// `map_err` for I/O results, naming what was being done.
pub(crate) trait IoContext<T> {
    /// The error as [`StartError::Io`], with `what` (evaluated only on error).
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StartError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StartError> {
        self.map_err(|source| StartError::Io {
            what: what(),
            source,
        })
    }
}

/// `map_err` for store results, naming what was being done.
pub(crate) trait StoreContext<T> {
    /// The error as [`StartError::Store`], with `what` (evaluated only on error).
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StartError>;
}

impl<T> StoreContext<T> for store::Result<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StartError> {
        self.map_err(|source| StartError::Store {
            what: what(),
            source: Box::new(source),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener};
    use std::os::unix::fs::PermissionsExt as _;

    use super::StartError;
    use crate::Config;

    /// A node on loopback with its data in a fresh directory of its own.
    fn config(name: &str) -> (Config, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("ferry-start-error-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Config::defaults("test");
        c.node_id = crate::config::parse_node_id("dtn://starter/").unwrap();
        c.data_dir = Some(dir.clone());
        c.tcpcl_listen = vec![SocketAddr::from(([127, 0, 0, 1], 0))];
        c.udp_listen = None;
        c.discovery.enabled = false;
        c.api_listen = None;
        (c, dir)
    }

    async fn start_error(config: Config) -> StartError {
        match crate::start(config).await {
            Ok(running) => {
                running.shut_down().await;
                panic!("the node started");
            }
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn start_says_by_kind_what_stopped_it() {
        // An address another socket holds: a bind error naming the listener and the address.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let (mut c, dir) = config("bind");
        c.tcpcl_listen = vec![addr];
        match start_error(c).await {
            StartError::Bind { what, addr: a, .. } => {
                assert!(what.contains("TCPCL"), "{what}");
                assert_eq!(a, addr);
            }
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(dir);

        // An API other hosts could reach, not allowed: the configuration, naming the key.
        let (mut c, dir) = config("remote");
        c.api_listen = Some(SocketAddr::from(([0, 0, 0, 0], 0)));
        match start_error(c).await {
            StartError::Config(said) => assert!(said.contains("api.allow_remote"), "{said}"),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(dir);

        // An identity file others may read: the file, with what to do.
        let (c, dir) = config("identity");
        let identity = dir.join(crate::rpc_shell::IDENTITY_FILE);
        std::fs::write(&identity, "ferry-identity v1\n").unwrap();
        std::fs::set_permissions(&identity, std::fs::Permissions::from_mode(0o644)).unwrap();
        match start_error(c).await {
            StartError::File(said) => assert!(said.contains("chmod 600"), "{said}"),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
