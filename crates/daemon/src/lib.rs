//! The `ferry node` daemon: one event loop that drives the sans-IO node with real time, a
//! persistent store, TCPCLv4 sessions (the `cla` crate), the UDP convergence layer, discovery
//! beacons and the local HTTP/WebSocket API.
//!
//! ```text
//!   TCP listeners ─ accept ──┐        ┌── TCPCL session tasks (cla::tcp) ◄─► peers
//!   UDP CL socket ─ recv ────┤        │
//!   beacon socket ─ recv ────┼──► event loop (core) ── owns ──► Node + DiskStore
//!   API (axum) ── requests ──┘        │
//!                                     └── beacons, UDP sends, session commands
//! ```
//!
//! The loop is the only owner of the node and the store: the other tasks only move bytes and hand
//! over messages through channels. After every input it commits the store, and it releases what
//! the node wants carried forward only once a sync on a blocking thread made the commit durable
//! (see [`core`]).
//!
//! **What it never does**: it makes no routing or forwarding decision of its own (that is the
//! node's), and it never binds the API beyond the configured address (127.0.0.1 by default).

// The daemon is the I/O shell: it reads clocks, sockets and files. The clippy.toml bans are for
// the sans-IO core crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod api;
pub mod api_body;
pub mod api_guard;
pub mod api_time;
pub mod calls;
pub mod config;
pub mod contact_plan;
pub mod control;
pub mod core;
pub mod dashboard;
pub mod discovery;
mod error;
pub mod exec;
pub mod facts;
pub mod identity;
pub use host::inbox;
pub mod keys;
mod metrics;
mod netlink;
pub mod provider_socket;
pub mod providers;
pub mod relay;
pub mod rpc_shell;
pub mod tls;
pub mod udp;

use std::net::SocketAddr;

use node::{Node, NodeConfig};
use store::{DiskStore, MemoryStore, Store, Tables as _};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use config::Config;
pub use control::ControlHandle;
pub use error::StartError;
use error::{IoContext as _, StoreContext as _};

/// A daemon that is running.
pub struct Running {
    /// Talks to the event loop (what the API uses).
    pub control: ControlHandle,
    /// Where the API listens, if it does.
    pub api_addr: Option<SocketAddr>,
    /// What API requests must present (`Authorization: Bearer <token>`): the contents of
    /// `<data_dir>/api-token`.
    pub api_token: String,
    /// Where TCPCL listens.
    pub tcpcl_addrs: Vec<SocketAddr>,
    /// Where the UDP convergence layer listens.
    pub udp_addr: Option<SocketAddr>,
    shutdown: oneshot::Sender<()>,
    event_loop: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops the daemon: sessions are closed, the store is flushed, and the listeners end.
    pub async fn shut_down(self) {
        let _ = self.shutdown.send(());
        let _ = self.event_loop.await;
        for t in self.tasks {
            t.abort();
        }
    }

    /// Waits until the event loop ends by itself (it does not, unless it failed).
    pub async fn wait(&mut self) {
        let _ = (&mut self.event_loop).await;
    }
}

/// The store `config` names: the disk store in `data_dir`, recovered after a crash (what lost
/// its files is dropped, and said so), or an empty memory store; with how many entries
/// recovery dropped.
fn open_store(
    config: &Config,
    data_dir: &std::path::Path,
) -> Result<(Box<dyn Store + Send>, u64), StartError> {
    if config.store == config::StoreKind::Memory {
        tracing::info!(
            "memory store of {} bytes: nothing this node holds survives it",
            config.store_quota
        );
        // Inboxes and calls count too: in memory they would otherwise grow with what strangers
        // send until the process runs out of it.
        let store = MemoryStore::new(config.store_quota).counting_tables();
        return Ok((Box::new(store), 0));
    }
    let (mut store, recovery) = DiskStore::open(data_dir, config.store_quota)
        .doing(|| format!("opening the store in {}", data_dir.display()))?;
    if !recovery.dropped.is_empty()
        || !recovery.rpc_dropped.is_empty()
        || recovery.orphans_removed > 0
    {
        tracing::warn!(
            "store recovery: {} bundles and {} other entries had lost their files and were dropped, {} orphan files removed",
            recovery.dropped.len(),
            recovery.rpc_dropped.len(),
            recovery.orphans_removed
        );
    }
    // An inbox bundle whose payload was lost cannot be delivered: drop its description too,
    // rather than list a bundle no application could fetch.
    let lost_payloads = recovery
        .rpc_dropped
        .iter()
        .filter(|(table, _)| *table == store::RpcTable::InboxPayload);
    for (_, key) in lost_payloads {
        store
            .rpc_remove(store::RpcTable::Inbox, key)
            .doing(|| "removing an inbox entry whose payload was lost".into())?;
    }
    store
        .flush()
        .doing(|| "flushing the store after recovery".into())?;
    let dropped = (recovery.dropped.len() + recovery.rpc_dropped.len()) as u64;
    Ok((Box::new(store), dropped))
}

/// Opens the store, binds every listener and starts the event loop. Errors say which address or
/// directory was the problem.
pub async fn start(mut config: Config) -> Result<Running, StartError> {
    raise_open_file_limit();
    // Certificates first: a mistake there is the operator's to fix before anything runs.
    let tls = match &config.tls {
        Some(t) => Some(tls::load(t, &config.node_id)?),
        None => None,
    };
    let clock = core::Clock::new();
    let data_dir = match &config.data_dir {
        Some(dir) => dir.clone(),
        None => {
            let xdg = std::env::var_os("XDG_DATA_HOME");
            let home = std::env::var_os("HOME");
            store::default_data_dir(xdg.as_deref(), home.as_deref()).ok_or_else(|| {
                StartError::Config(
                    "finding the default data directory: neither XDG_DATA_HOME nor HOME is an \
                     absolute path; set data_dir"
                        .into(),
                )
            })?
        }
    };
    let (store, recovered_dropped) = open_store(&config, &data_dir)?;
    if config.seed == 0 {
        config.seed = clock.now().as_millis() ^ u64::from(std::process::id()).rotate_left(32);
    }

    let mut listening = Vec::new();
    let mut tasks = Vec::new();
    let (accepted_tx, accepted) = mpsc::channel(64);
    let mut tcpcl_addrs = Vec::new();
    for addr in &config.tcpcl_listen {
        let bind = |source| StartError::Bind {
            what: "listening for TCPCL",
            addr: *addr,
            source,
        };
        let listener = TcpListener::bind(addr).await.map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        tcpcl_addrs.push(local);
        listening.push(format!("tcpcl://{local}"));
        let tx = accepted_tx.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok(conn) => {
                        if tx.send(conn).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!("accepting a TCPCL connection: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        }));
    }

    let (datagram_tx, datagrams) = mpsc::channel(udp::QUEUE);
    // Shared with the loop, which tells it the sessions' addresses and shows its counters.
    let udp_gate = udp::Gate::new(config.udp_max_bundle, config.udp_max_rate);
    let mut udp_addr = None;
    let udp = match config.udp_listen {
        Some(addr) => {
            let bind = |source| StartError::Bind {
                what: "binding the UDP convergence layer",
                addr,
                source,
            };
            let socket = udp::bind(addr).await.map_err(bind)?;
            let local = socket.local_addr().map_err(bind)?;
            udp_addr = Some(local);
            listening.push(format!("udp://{local}"));
            tasks.push(tokio::spawn(udp::listen(
                socket.clone(),
                datagram_tx,
                udp_gate.clone(),
            )));
            Some(socket)
        }
        None => None,
    };

    let (beacon_tx, beacons) = mpsc::channel(256);
    if config.discovery.enabled && config.discovery.formats.ferry {
        let socket =
            discovery::bind_listener(&config.discovery).map_err(|source| StartError::Bind {
                what: "listening for discovery beacons",
                addr: SocketAddr::new(config.discovery.address.into(), config.discovery.port),
                source,
            })?;
        listening.push(format!(
            "beacons://{}:{}",
            config.discovery.address, config.discovery.port
        ));
        tasks.push(tokio::spawn(discovery::listen(socket, beacon_tx.clone())));
    }
    if config.discovery.enabled && config.discovery.formats.dtn7 {
        let group = wire::ipnd::IPND_GROUP_V4;
        let socket = discovery::bind_dtn7_listener(&config.discovery).map_err(|source| {
            StartError::Bind {
                what: "listening for dtn7-rs discovery beacons",
                addr: SocketAddr::new(group.into(), config.discovery.dtn7_port),
                source,
            }
        })?;
        listening.push(format!(
            "dtn7-beacons://{group}:{}",
            config.discovery.dtn7_port
        ));
        tasks.push(tokio::spawn(discovery::listen_dtn7(
            socket,
            beacon_tx,
            config.discovery.clone(),
        )));
    }

    let (control, control_ends) = ControlHandle::channel(256);
    let api_token = api_guard::load_or_create_token(&data_dir)?;
    // Shared with the loop, which shows its counters in the metrics.
    let bodies = api_body::Bodies::new(config.api_max_payload, config.api_max_uploads);
    let api_addr = match config.api_listen {
        Some(addr) => {
            if !addr.ip().is_loopback() {
                if !config.api_allow_remote {
                    return Err(StartError::Config(format!(
                        "api.listen {addr} is reachable from other hosts; set api.allow_remote = true \
                         to allow it (requests still need the token, which plain HTTP does not hide \
                         from anyone on the path)"
                    )));
                }
                tracing::warn!(
                    "the API on {addr} is reachable from other hosts: anyone with the token in {} \
                     can use this node, and plain HTTP shows the token to anyone on the path",
                    data_dir.join(api_guard::TOKEN_FILE).display()
                );
            }
            let guard = api_guard::Guard::new(
                api_token.clone(),
                config.api_allowed_hosts.clone(),
                bodies.clone(),
            );
            let local = spawn_api(addr, control.clone(), bodies.clone(), guard, &mut tasks)
                .await
                .map_err(|source| StartError::Bind {
                    what: "starting the API",
                    addr,
                    source,
                })?;
            listening.push(format!("http://{local}"));
            Some(local)
        }
        None => None,
    };

    let mut node_config = NodeConfig::new(config.node_id.clone());
    node_config.seed = config.seed;
    node_config.strategy = config.strategy;
    node_config.max_bundle_piece = config.bundle_piece;
    node_config.summary_grace = config.summary_grace;
    node_config.bpsec = config.bpsec.clone();
    // The fixed field of this run's AES-GCM IVs (bpsec::IvSource): new at every start, since
    // the invocation counter starts again at zero.
    getrandom::getrandom(&mut node_config.bpsec.iv_fixed).map_err(|error| StartError::Random {
        what: "the BPSec IV field",
        error,
    })?;
    if let Some(path) = &config.contact_plan {
        node_config.contact_graph = Some(contact_plan::load(
            path,
            &config.node_id.node_id(),
            clock.now(),
        )?);
    }
    let mut node = Node::new(node_config, store, clock.now());
    let (rpc, engine, finished, provider_timers) =
        rpc_shell::RpcShell::new(&config, &data_dir, &mut node, clock.now())?;
    // Working directories a crashed daemon left behind hold nothing anyone waits for: the
    // executions they belonged to are answered `internal` by the restarted engine.
    exec::clear_work_root(rpc.work_root())
        .await
        .doing(|| format!("clearing {}", rpc.work_root().display()))?;
    // A link, address or route that comes up wakes the loop (one wake-up for a burst).
    let (link_tx, link_changes) = mpsc::channel(1);
    match netlink::watch(link_tx) {
        Ok(_thread) => {}
        Err(e) => tracing::info!(
            "link changes are not watched (netlink: {e}): peers are redialled on their backoff"
        ),
    }
    let (readings_tx, readings) = mpsc::channel(1);
    tasks.push(tokio::spawn(read_facts(
        config.rpc.clone(),
        data_dir.clone(),
        readings_tx,
    )));

    // Session events may each hold a whole received bundle; a full channel stops the sessions'
    // reading, and TCP's flow control reaches the peers. 128 is one pump's worth of small
    // bundles, and bounds what waits here to 128 bundles however large they are.
    let (tcpcl_tx, tcpcl) = mpsc::channel(128);
    let (connected_tx, connected) = mpsc::channel(64);
    let mut daemon = core::Daemon::new(
        node,
        clock,
        config.clone(),
        listening,
        tcpcl_addrs.first().map(|a| a.port()),
        udp,
        tcpcl_tx,
        connected_tx,
        recovered_dropped,
        control_ends.deliveries,
        control_ends.calls,
        (rpc, engine),
        tls,
    )
    .doing(|| "loading the inboxes".into())?;
    daemon.api_bodies = bodies;
    daemon.udp_gate = udp_gate;
    let inputs = core::Inputs {
        tcpcl,
        accepted,
        connected,
        datagrams,
        beacons,
        requests: control_ends.requests,
        finished,
        provider_timers,
        link_changes,
        readings,
    };
    let (shutdown, shutdown_rx) = oneshot::channel();
    tracing::info!(
        "node {} up: tcpcl {:?}, udp {:?}, api {:?}",
        config.node_id,
        tcpcl_addrs,
        udp_addr,
        api_addr
    );
    let event_loop = tokio::spawn(daemon.run(inputs, shutdown_rx));
    Ok(Running {
        control,
        api_addr,
        api_token,
        tcpcl_addrs,
        udp_addr,
        shutdown,
        event_loop,
        tasks,
    })
}

/// How often battery, disk, load and the rest are read for the RPC predicates.
const FACTS_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads the system for the RPC predicates now and every [`FACTS_PERIOD`], until the event loop
/// is gone.
async fn read_facts(
    cfg: config::RpcConfig,
    data_dir: std::path::PathBuf,
    readings: mpsc::Sender<facts::Readings>,
) {
    loop {
        let r = facts::read(&cfg, &data_dir).await;
        if readings.send(r).await.is_err() {
            return;
        }
        tokio::time::sleep(FACTS_PERIOD).await;
    }
}

async fn spawn_api(
    addr: SocketAddr,
    control: ControlHandle,
    bodies: api_body::Bodies,
    guard: api_guard::Guard,
    tasks: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = api::router(control, bodies, guard);
    tasks.push(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the API server on {local} stopped: {e}");
        }
    }));
    Ok(local)
}

/// Raises the soft limit on open files to the hard one. Each session, API connection, store
/// file and execution takes descriptors; at a soft limit of 1024 a crowd of sessions could leave
/// none for the API. `tcpcl.max_sessions` bounds sessions well below the usual hard limit.
fn raise_open_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::debug!("raising the open-file limit from {soft} to {hard}: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("reading the open-file limit: {e}"),
    }
}
