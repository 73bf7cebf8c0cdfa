//! `ferry node`: runs the daemon in the foreground until SIGINT or SIGTERM.
//!
//! The configuration comes from `--config FILE`, else `$XDG_CONFIG_HOME/ferry/node.toml` (or
//! `~/.config/ferry/node.toml`) if it exists, else the defaults; command-line flags override it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use daemon::Config;
use daemon::config::parse_node_id;

/// Arguments of `ferry node`.
#[derive(Args)]
pub(crate) struct NodeArgs {
    /// Configuration file (TOML; see docs/configuration.md).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// This node's id, e.g. dtn://alpha/ (default: dtn://<host name>/).
    #[arg(long)]
    node_id: Option<String>,
    /// Directory of the persistent store (default: $XDG_DATA_HOME/ferry).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// TCPCL listen address; repeat for several (default 0.0.0.0:4556).
    #[arg(long = "tcpcl", value_name = "ADDR")]
    tcpcl: Vec<String>,
    /// UDP convergence layer address, or "" for none (default 0.0.0.0:4556).
    #[arg(long, value_name = "ADDR")]
    udp: Option<String>,
    /// API address, or "" for none (default 127.0.0.1:4550).
    #[arg(long, value_name = "ADDR")]
    api: Option<String>,
    /// A static TCPCL peer to keep a session with; repeat for several.
    #[arg(long = "peer", value_name = "ADDR")]
    peers: Vec<String>,
    /// Send and listen for no discovery beacons.
    #[arg(long)]
    no_discovery: bool,
    /// Send beacons on this interface only; repeat for several.
    #[arg(long = "discovery-interface", value_name = "NAME")]
    discovery_interfaces: Vec<String>,
    /// UDP port of discovery beacons (default 4551).
    #[arg(long, value_name = "PORT")]
    discovery_port: Option<u16>,
    /// Beacon format to send and listen for: ferry (Ferry's own) or dtn7 (dtn7-rs's, so that
    /// dtnd finds this node and is found); repeat for both (the default).
    #[arg(long = "beacon-format", value_name = "FORMAT")]
    beacon_formats: Vec<String>,
    /// TCPCL keepalive interval offered (a session is declared dead after two silent intervals).
    #[arg(long, value_parser = humantime::parse_duration)]
    keepalive: Option<std::time::Duration>,
    /// Send bundles larger than a peer's announced TCPCL transfer MRU whole instead of in
    /// fragments (`[tcpcl] ignore_peer_transfer_mru`): dtn7-rs 0.21 announces 64000 bytes, takes
    /// any size and cannot reassemble fragments.
    #[arg(long)]
    ignore_peer_transfer_mru: bool,
    /// Where bundles are kept: disk (the default: crash-safe) or memory (nothing survives the
    /// process; quota 512MB unless store_quota says otherwise).
    #[arg(long, value_name = "KIND")]
    store: Option<String>,
    /// The most bytes the store holds, e.g. 2GB.
    #[arg(long, value_name = "SIZE")]
    store_quota: Option<String>,
    /// Routing strategy: epidemic, spray-and-wait[:COPIES] or direct.
    #[arg(long)]
    strategy: Option<String>,
    /// Send bundles to one node larger than this in pieces of it, at every hop (e.g. 4MB; at
    /// least 64KiB).
    #[arg(long, value_name = "SIZE")]
    bundle_piece: Option<String>,
    /// Route by this contact plan (known future contacts; format in docs/configuration.md):
    /// bundles for the nodes it names go along their earliest planned journey.
    #[arg(long, value_name = "FILE")]
    contact_plan: Option<PathBuf>,
    /// More log output: -v for connections and sessions, -vv for every decision.
    #[arg(long, short, action = clap::ArgAction::Count)]
    verbose: u8,
}

pub(crate) fn run(args: NodeArgs) -> Result<()> {
    init_logging(args.verbose, "warn");
    let config = build_config(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut running = daemon::start(config).await?;
        if let Some(addr) = running.api_addr {
            // So that `ferry status --api ADDR` and the other commands of this user find it.
            if let Err(e) = crate::api_token::publish(addr.port(), &running.api_token) {
                tracing::warn!(
                    "could not leave the API token where the ferry commands look ({e:#}); \
                     give it to them with FERRY_API_TOKEN"
                );
            }
        }
        let api = running
            .api_addr
            .map(|a| format!("http://{a}"))
            .unwrap_or_else(|| "off".into());
        eprintln!(
            "ferry node {} running: tcpcl {}, api {api}. Ctrl-C stops it.",
            running_node_id(&running).await,
            running
                .tcpcl_addrs
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(addr) = running.api_addr {
            // The page's address only: the token stays out of logs (`ferry dashboard` adds it).
            eprintln!(
                "web dashboard: http://{addr}/ (`ferry dashboard --api {addr}` prints it with the token)"
            );
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            _ = running.wait() => anyhow::bail!("the event loop stopped unexpectedly"),
        }
        eprintln!("ferry node: stopping (store flushed, sessions closed)");
        running.shut_down().await;
        Ok(())
    })
}

async fn running_node_id(running: &daemon::Running) -> String {
    running
        .control
        .ask(daemon::control::Request::Status)
        .await
        .map(|s| s.node_id)
        .unwrap_or_default()
}

/// Logs to stderr: `quiet` when not `verbose`, then info (`-v`) and debug (`-vv`); `RUST_LOG`
/// overrides.
pub(crate) fn init_logging(verbose: u8, quiet: &str) {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour codes only for a person at a terminal: a log file or journald gets plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "ferry".into())
}

fn default_config_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    let path = base.join("ferry").join("node.toml");
    path.exists().then_some(path)
}

fn build_config(args: &NodeArgs) -> Result<Config> {
    let host = host_name();
    let mut config = match args.config.clone().or_else(default_config_file) {
        Some(path) => Config::load(&path, &host)?,
        None => Config::defaults(&host),
    };
    if let Some(id) = &args.node_id {
        config.node_id = parse_node_id(id)?;
    }
    if let Some(dir) = &args.data_dir {
        config.data_dir = Some(dir.clone());
    }
    let addr = |flag: &str, a: &str| -> Result<std::net::SocketAddr> {
        a.parse()
            .with_context(|| format!("{flag} {a:?} is not an address like 127.0.0.1:4556"))
    };
    let optional = |flag: &str, a: &str| -> Result<Option<std::net::SocketAddr>> {
        if a.is_empty() {
            Ok(None)
        } else {
            addr(flag, a).map(Some)
        }
    };
    if !args.tcpcl.is_empty() {
        config.tcpcl_listen = args
            .tcpcl
            .iter()
            .map(|a| addr("--tcpcl", a))
            .collect::<Result<_>>()?;
    }
    if let Some(a) = &args.udp {
        config.udp_listen = optional("--udp", a)?;
    }
    if let Some(a) = &args.api {
        config.api_listen = optional("--api", a)?;
    }
    for p in &args.peers {
        config.peers.push(addr("--peer", p)?);
    }
    if args.no_discovery {
        config.discovery.enabled = false;
    }
    if !args.discovery_interfaces.is_empty() {
        config.discovery.interfaces = args.discovery_interfaces.clone();
    }
    if let Some(port) = args.discovery_port {
        config.discovery.port = port;
    }
    if !args.beacon_formats.is_empty() {
        config.discovery.formats =
            daemon::config::BeaconFormats::from_names(&args.beacon_formats, "--beacon-format")?;
    }
    if let Some(k) = args.keepalive {
        anyhow::ensure!(
            (1..=65_535).contains(&k.as_secs()),
            "--keepalive must be between 1s and 65535s"
        );
        config.keepalive = k;
    }
    if args.ignore_peer_transfer_mru {
        config.ignore_peer_transfer_mru = true;
    }
    if let Some(kind) = &args.store {
        let kind: daemon::config::StoreKind =
            kind.parse().map_err(|e| anyhow::anyhow!("--store: {e}"))?;
        // A quota left at its kind's default becomes the new kind's default.
        if config.store_quota == config.store.default_quota() {
            config.store_quota = kind.default_quota();
        }
        config.store = kind;
    }
    if let Some(quota) = &args.store_quota {
        config.store_quota =
            daemon::config::parse_size(quota).map_err(|e| anyhow::anyhow!("--store-quota: {e}"))?;
    }
    if let Some(s) = &args.strategy {
        config.strategy = s.parse().map_err(anyhow::Error::msg)?;
    }
    if let Some(piece) = &args.bundle_piece {
        config.bundle_piece = Some(
            daemon::config::parse_bundle_piece(piece)
                .map_err(|e| anyhow::anyhow!("--bundle-piece{e}"))?,
        );
    }
    if let Some(plan) = &args.contact_plan {
        config.contact_plan = Some(std::path::absolute(plan).unwrap_or_else(|_| plan.clone()));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    fn config_of(extra: &[&str]) -> Config {
        let dir = std::env::temp_dir().join(format!("ferry-node-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("node.toml");
        std::fs::write(&file, "").unwrap();
        let mut args = vec!["node", "--config", file.to_str().unwrap()];
        args.extend(extra);
        build_config(&Cli::try_parse_from(args).unwrap().node).unwrap()
    }

    #[test]
    fn flags_override_the_file() {
        assert!(!config_of(&[]).ignore_peer_transfer_mru);
        assert!(config_of(&["--ignore-peer-transfer-mru"]).ignore_peer_transfer_mru);
        let plan = config_of(&["--contact-plan", "plans/x.plan"])
            .contact_plan
            .unwrap();
        assert!(
            plan.is_absolute() && plan.ends_with("plans/x.plan"),
            "{plan:?}"
        );
        assert_eq!(
            config_of(&["--keepalive", "7s"]).keepalive,
            std::time::Duration::from_secs(7)
        );
        let formats = |flags: &[&str]| {
            let f = config_of(flags).discovery.formats;
            (f.ferry, f.dtn7)
        };
        let store = |flags: &[&str]| {
            let c = config_of(flags);
            (c.store, c.store_quota)
        };
        use daemon::config::StoreKind::{Disk, Memory};
        assert_eq!(store(&[]), (Disk, 10_000_000_000));
        assert_eq!(store(&["--store", "memory"]), (Memory, 512_000_000));
        assert_eq!(
            store(&["--store", "memory", "--store-quota", "2GB"]),
            (Memory, 2_000_000_000)
        );
        assert_eq!(store(&["--store-quota", "1MiB"]), (Disk, 1 << 20));
        assert_eq!(config_of(&[]).bundle_piece, None);
        assert_eq!(
            config_of(&["--bundle-piece", "4MB"]).bundle_piece,
            Some(4_000_000)
        );
        assert_eq!(formats(&[]), (true, true));
        assert_eq!(formats(&["--beacon-format", "dtn7"]), (false, true));
        assert_eq!(
            formats(&["--beacon-format", "ferry", "--beacon-format", "dtn7"]),
            (true, true)
        );
    }

    #[test]
    fn an_unknown_beacon_format_is_refused_by_its_flag() {
        let file =
            std::env::temp_dir().join(format!("ferry-node-cmd-bf-{}.toml", std::process::id()));
        std::fs::write(&file, "").unwrap();
        let args = [
            "node",
            "--config",
            file.to_str().unwrap(),
            "--beacon-format",
            "ipnd",
        ];
        let err = build_config(&Cli::try_parse_from(args).unwrap().node).unwrap_err();
        assert!(
            err.to_string()
                .contains("--beacon-format: unknown beacon format \"ipnd\""),
            "{err}"
        );
    }
}
