//! The daemon's configuration: a TOML file, every key optional. With no file at all the node runs
//! on the defaults.
//!
//! The reference of the format (every key, its default, unit and bound, the errors, and the
//! matching `ferry node` flags) is `docs/configuration.md`; `examples/node.toml` is a working
//! file. This module parses the text into a checked [`Config`]: unknown keys are refused, and
//! every error is a [`ConfigError`] naming the key at fault.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use node::StrategyKind;
use serde::Deserialize;
use wire::Eid;

/// Default TCPCLv4 port (IANA "dtn-bundle", RFC 9174).
pub const DEFAULT_TCPCL_PORT: u16 = 4556;
/// Default port of the UDP convergence layer (IANA "dtn-bundle" over UDP).
pub const DEFAULT_UDP_PORT: u16 = 4556;
/// Default of `udp.max_rate`: datagrams a second from one session's address, or from all
/// strangers together. A thousand 60 KB datagrams a second is more than a radio link carries,
/// and a small fraction of what the event loop can decode and store.
pub const DEFAULT_UDP_MAX_RATE: u32 = 1000;
/// Default of `api.max_uploads`: a few large sends or calls at once, each up to
/// `api.max_payload`.
pub const DEFAULT_API_MAX_UPLOADS: usize = 4;
/// Default UDP port of discovery beacons (the IP Neighbor Discovery port, 4551).
pub const DEFAULT_DISCOVERY_PORT: u16 = 4551;
/// Default address of the local API.
pub const DEFAULT_API_ADDR: &str = "127.0.0.1:4550";
/// The smallest `bundle_piece` taken: 64 KiB.
pub const MIN_BUNDLE_PIECE: u64 = 64 << 10;

/// Default `store_quota` of the disk store (10 GB).
pub const DEFAULT_DISK_QUOTA: u64 = 10_000_000_000;
/// Default `store_quota` of the memory store (512 MB): what a stranger's bundles may take of
/// the machine's memory before the quota refuses or evicts them.
pub const DEFAULT_MEMORY_QUOTA: u64 = 512_000_000;

/// Where a node keeps its bundles, inboxes and calls (`store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// SQLite and payload files in the data directory, each commit synced: everything a node
    /// acknowledged survives a crash or a power cut.
    #[default]
    Disk,
    /// Memory only: nothing waits for a disk, and nothing survives the process. For nodes
    /// without a disk worth writing to, and for measuring what the disk costs.
    Memory,
}

impl StoreKind {
    /// `store_quota` when the configuration gives none.
    pub fn default_quota(self) -> u64 {
        match self {
            Self::Disk => DEFAULT_DISK_QUOTA,
            Self::Memory => DEFAULT_MEMORY_QUOTA,
        }
    }
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "disk" => Ok(Self::Disk),
            "memory" => Ok(Self::Memory),
            other => Err(format!(
                "unknown store \"{other}\": expected disk or memory"
            )),
        }
    }
}

/// A complete, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id.
    pub node_id: Eid,
    /// Where the store lives; `None` means the user's default data directory.
    pub data_dir: Option<PathBuf>,
    /// Where bundles are kept: on disk (the default) or in memory only.
    pub store: StoreKind,
    /// Store quota in bytes.
    pub store_quota: u64,
    /// Store-carry-forward strategy.
    pub strategy: StrategyKind,
    /// Bundles to one node larger than this are sent in pieces of this size at every hop
    /// (`node::NodeConfig::max_bundle_piece`); `None`: sent whole.
    pub bundle_piece: Option<u64>,
    /// How long a new neighbour has to send Ferry's summary vector before it is taken for
    /// another implementation (`node::NodeConfig::summary_grace`).
    pub summary_grace: Duration,
    /// A contact plan file to route by (`node::plan` format), as an absolute path.
    pub contact_plan: Option<PathBuf>,
    /// TCPCL listen addresses.
    pub tcpcl_listen: Vec<SocketAddr>,
    /// TCPCL keepalive interval offered.
    pub keepalive: Duration,
    /// Send bundles larger than a peer's transfer MRU whole instead of fragmenting them to it.
    pub ignore_peer_transfer_mru: bool,
    /// What a stranger's sessions may hold: memory, numbers, silence.
    pub session_limits: SessionLimits,
    /// UDP convergence layer address, if any.
    pub udp_listen: Option<SocketAddr>,
    /// Largest encoded bundle sent or taken in one UDP datagram.
    pub udp_max_bundle: usize,
    /// Datagrams a second taken from each session's address, and from all others together.
    pub udp_max_rate: u32,
    /// Discovery settings.
    pub discovery: Discovery,
    /// Static peers.
    pub peers: Vec<SocketAddr>,
    /// TCPCL over TLS (`[tcpcl.tls]`); `None`: TLS is neither offered nor used.
    pub tls: Option<TlsConfig>,
    /// Static peers whose sessions (those this node opens) override `tls.require`
    /// (`[[peers]] tls`), by address.
    pub peer_tls: std::collections::BTreeMap<SocketAddr, PeerTls>,
    /// API listen address, if any.
    pub api_listen: Option<SocketAddr>,
    /// Largest payload the API accepts.
    pub api_max_payload: usize,
    /// Request bodies above 64 KiB the API reads or holds at once (`api.max_uploads`).
    pub api_max_uploads: usize,
    /// Host names the API answers to besides IP literals and `localhost`.
    pub api_allowed_hosts: Vec<String>,
    /// Whether `api_listen` may be an address other hosts reach.
    pub api_allow_remote: bool,
    /// Seed of the node's randomness (beacon jitter, stream ids); the daemon draws it at start.
    pub seed: u64,
    /// RPC serving: predicates' inputs and the procedures (`[rpc]`; none by default).
    pub rpc: RpcConfig,
    /// BPSec (`[bpsec]`): keys and what is signed, encrypted, verified and decrypted with them
    /// (empty by default). The IVs' fixed field is drawn at start, not configured.
    pub bpsec: bpsec::Policy,
}

/// The bounds on TCPCL sessions (`[tcpcl]`): any device in radio range may open them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLimits {
    /// Our transfer MRU: the largest bundle one transfer may bring.
    pub transfer_mru: u64,
    /// Bytes all sessions together may hold in unfinished incoming transfers.
    pub receive_memory: u64,
    /// Sessions at once; accepted connections and discovered nodes beyond it are refused
    /// (static peers are always dialled).
    pub max_sessions: usize,
    /// Sessions with one IP address at once (accepted, or dialled to a discovered node).
    pub max_sessions_per_address: usize,
    /// How long a session without keepalives may stay silent.
    pub idle_timeout: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            transfer_mru: 64 << 20,
            receive_memory: 256 << 20,
            max_sessions: 256,
            max_sessions_per_address: 8,
            idle_timeout: Duration::from_secs(600),
        }
    }
}

/// `[tcpcl.tls]`: this node's certificate and key, the roots peers must chain to. The files are
/// read at start (`daemon::start`), where errors name the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificate chain, end-entity first; it must name the node id as a URI SAN.
    pub cert: PathBuf,
    /// PEM private key of the certificate; a file others may read is refused.
    pub key: PathBuf,
    /// PEM roots that peers' certificates must chain to.
    pub ca: PathBuf,
    /// Refuse sessions with peers that do not offer TLS.
    pub require: bool,
}

/// A static peer's TLS policy (`[[peers]] tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerTls {
    /// Sessions to it must use TLS.
    Required,
    /// Sessions to it use TLS if it offers it, plain TCPCL if not.
    Optional,
}

/// Discovery settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// Whether beacons are sent and listened for.
    pub enabled: bool,
    /// UDP port beacons go to and are received on.
    pub port: u16,
    /// Broadcast address or multicast group.
    pub address: std::net::Ipv4Addr,
    /// Interfaces to send on; empty: every interface that is up but loopback (see
    /// docs/configuration.md, `[discovery] interfaces`).
    pub interfaces: Vec<String>,
    /// Time between beacons.
    pub period: Duration,
    /// Which beacon formats are sent and listened for (`[discovery] formats`).
    pub formats: BeaconFormats,
    /// UDP port of dtn7-rs's beacons (`[discovery] dtn7_port`, 3003 as dtnd's).
    pub dtn7_port: u16,
}

/// The beacon formats a node speaks (`[discovery] formats`); each is sent on the same interfaces
/// and period, and heard on its own port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeaconFormats {
    /// Ferry's own beacons (`wire::Beacon`), to [`Discovery::address`]:[`Discovery::port`].
    pub ferry: bool,
    /// dtn7-rs's (`wire::ipnd`), to 224.0.0.26:[`Discovery::dtn7_port`], so that `dtnd` and
    /// Ferry find each other.
    pub dtn7: bool,
}

/// The file's shape. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    node_id: Option<String>,
    data_dir: Option<PathBuf>,
    store: Option<String>,
    store_quota: Option<String>,
    strategy: Option<String>,
    bundle_piece: Option<String>,
    summary_grace: Option<String>,
    contact_plan: Option<PathBuf>,
    #[serde(default)]
    tcpcl: TcpclFile,
    #[serde(default)]
    udp: UdpFile,
    #[serde(default)]
    discovery: DiscoveryFile,
    #[serde(default)]
    peers: Vec<PeerFile>,
    #[serde(default)]
    api: ApiFile,
    #[serde(default)]
    rpc: RpcFile,
    #[serde(default)]
    bpsec: BpsecFile,
}

/// `[bpsec]`: named keys and the rules that use them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BpsecFile {
    #[serde(default)]
    key: Vec<BpsecKeyFile>,
    #[serde(default)]
    sign: Vec<BpsecSendFile>,
    #[serde(default)]
    encrypt: Vec<BpsecSendFile>,
    #[serde(default)]
    verify: Vec<BpsecReceiveFile>,
    #[serde(default)]
    decrypt: Vec<BpsecReceiveFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BpsecKeyFile {
    name: String,
    hex: Option<String>,
    file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BpsecSendFile {
    destinations: String,
    key: String,
    sha: Option<u64>,
    scope: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BpsecReceiveFile {
    sources: String,
    key: String,
    required: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TcpclFile {
    listen: Option<Vec<String>>,
    keepalive: Option<String>,
    ignore_peer_transfer_mru: Option<bool>,
    transfer_mru: Option<String>,
    receive_memory: Option<String>,
    max_sessions: Option<i64>,
    max_sessions_per_address: Option<i64>,
    idle_timeout: Option<String>,
    tls: Option<TlsFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    require: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UdpFile {
    listen: Option<String>,
    max_bundle: Option<String>,
    max_rate: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscoveryFile {
    enabled: Option<bool>,
    port: Option<u16>,
    address: Option<String>,
    interfaces: Option<Vec<String>>,
    period: Option<String>,
    formats: Option<Vec<String>>,
    dtn7_port: Option<u16>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerFile {
    address: String,
    tls: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiFile {
    listen: Option<String>,
    max_payload: Option<String>,
    max_uploads: Option<i64>,
    allowed_hosts: Option<Vec<String>>,
    allow_remote: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RpcFile {
    accept: Option<String>,
    tags: Option<Vec<String>>,
    battery_command: Option<Vec<String>>,
    moving_command: Option<Vec<String>>,
    work_dir: Option<PathBuf>,
    ack_timeout: Option<String>,
    result_timeout: Option<String>,
    dtn_timeout: Option<String>,
    file_budget: Option<String>,
    finished_in_memory: Option<i64>,
    max_served_calls: Option<i64>,
    max_served_calls_per_caller: Option<i64>,
    trusted_servers: Option<Vec<String>>,
    provider_grace: Option<String>,
    #[serde(default)]
    procedure: Vec<ProcedureFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcedureFile {
    name: String,
    #[serde(default)]
    params: Vec<String>,
    exec: PathBuf,
    args: Option<Vec<String>>,
    timeout: Option<String>,
    max_output: Option<String>,
    max_concurrent: Option<i64>,
    idempotent: Option<bool>,
    allow: Option<Vec<String>>,
    require: Option<String>,
    description: Option<String>,
    returns: Option<String>,
}

/// The `[rpc]` table: what this node serves and how it judges whether it can serve now.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcConfig {
    /// The server-wide predicate (`accept`), as written; checked before a call's own
    /// requirements. `None` accepts whenever a procedure has room.
    pub accept: Option<String>,
    /// Hardware tags (`tags`) that `has(...)` in predicates finds.
    pub tags: Vec<String>,
    /// A command (argv) printing the battery percentage; `None` reads /sys/class/power_supply.
    pub battery_command: Option<Vec<String>>,
    /// A command (argv) printing whether this node is moving (1/0, yes/no, true/false).
    pub moving_command: Option<Vec<String>>,
    /// Where executions get their working directories; `None` means `<data_dir>/work`
    /// (see [`RpcConfig::work_dir`]).
    pub work_dir: Option<PathBuf>,
    /// How long a call this node makes waits for an ack (the paper's 30 s).
    pub ack_timeout: Duration,
    /// How long it then waits for the result (the paper's 90 s).
    pub result_timeout: Duration,
    /// How much longer it waits on dtn after that (the paper's 90 s).
    pub dtn_timeout: Duration,
    /// Bytes of data-channel files (parameters and results, made here or received) kept at once.
    pub file_budget: u64,
    /// Finished calls kept in memory, of the calls made here and of those served here (each);
    /// older finished calls are read back from the store when asked for
    /// (`rpc::RpcConfig::finished_in_memory`).
    pub finished_in_memory: usize,
    /// Served-call records kept at once, in memory and in the store; a new call from another
    /// node beyond it is dropped unheard (`rpc::RpcConfig::max_served_calls`).
    pub max_served_calls: usize,
    /// Served-call records one caller may have among them
    /// (`rpc::RpcConfig::max_served_calls_per_caller`).
    pub max_served_calls_per_caller: usize,
    /// The servers (Ed25519 public keys) whose any-mode notices this node acts on; `None`: any
    /// signer's.
    pub trusted_servers: Option<Vec<[u8; 32]>>,
    /// How long the procedures of an application that disconnected stay offered (its calls
    /// waiting for it), and how long calls a restart cut off wait for their application
    /// (`provider_grace`, 15 s).
    pub provider_grace: Duration,
    /// The procedures this node serves, in file order (`[[rpc.procedure]]`).
    pub procedures: Vec<ProcedureConfig>,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            accept: None,
            tags: Vec::new(),
            battery_command: None,
            moving_command: None,
            work_dir: None,
            ack_timeout: Duration::from_secs(30),
            result_timeout: Duration::from_secs(90),
            dtn_timeout: Duration::from_secs(90),
            file_budget: rpc::RpcConfig::default().max_file_bytes,
            finished_in_memory: rpc::RpcConfig::default().finished_in_memory,
            max_served_calls: rpc::RpcConfig::default().max_served_calls,
            max_served_calls_per_caller: rpc::RpcConfig::default().max_served_calls_per_caller,
            trusted_servers: None,
            provider_grace: crate::providers::PROVIDER_GRACE,
            procedures: Vec::new(),
        }
    }
}

impl RpcConfig {
    /// The root of the executions' working directories: `work_dir`, else `<data_dir>/work`.
    pub fn work_dir(&self, data_dir: &Path) -> PathBuf {
        self.work_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("work"))
    }

    /// The procedure with exactly this name (no prefix matching).
    pub fn procedure(&self, name: &str) -> Option<&ProcedureConfig> {
        self.procedures.iter().find(|p| p.name == name)
    }
}

/// One `[[rpc.procedure]]`: a procedure this node serves.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureConfig {
    /// Its name (`[A-Za-z0-9_.-]+`, unique), matched exactly.
    pub name: String,
    /// The declared types of its parameters, in order.
    pub params: Vec<rpc::ParamType>,
    /// The parameters' names, where declared (`params = ["zoom: int"]`), for typed stubs.
    pub param_names: Vec<Option<String>>,
    /// What its value (stdout) is, where declared (`returns`), for typed stubs.
    pub returns: Option<Returns>,
    /// The executable, as an absolute path (a relative `exec` was resolved against the
    /// configuration file's directory); it existed and was executable at load.
    pub exec: PathBuf,
    /// The argv after the program, with the default (every parameter in order) filled in. Every
    /// [`ArgTemplate::Param`] index is below `params.len()`.
    pub args: Vec<ArgTemplate>,
    /// Longest an execution may run before its process group is killed (default 60 s).
    pub timeout: Duration,
    /// Most bytes of stdout plus output files (default 1 MiB).
    pub max_output: u64,
    /// Most executions at once (default 1, never 0).
    pub max_concurrent: u32,
    /// Whether an execution a crash or restart cut off may run again (default false: its
    /// caller is answered `result_lost`).
    pub idempotent: bool,
    /// Callers' Ed25519 public keys allowed to call it; `None` allows anyone, an empty list no
    /// one.
    pub allow: Option<Vec<[u8; 32]>>,
    /// Its own predicate (`require`), as written, checked after the server-wide one.
    pub require: Option<String>,
    /// What it does, for people.
    pub description: Option<String>,
}

pub use crate::exec::ArgTemplate;

/// What a procedure's value is, as its declaration says (`returns`): typed stubs decode it so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// UTF-8 text.
    Text,
    /// Bytes.
    Bytes,
    /// A JSON document.
    Json,
}

impl Returns {
    /// The name used in declarations.
    pub fn name(self) -> &'static str {
        match self {
            Returns::Text => "text",
            Returns::Bytes => "bytes",
            Returns::Json => "json",
        }
    }
}

impl std::str::FromStr for Returns {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Returns::Text, Returns::Bytes, Returns::Json]
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("{s:?} is not a value type (text, bytes or json)"))
    }
}

/// A configuration error, naming the key at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl Config {
    /// The defaults, for a node on a host with this name.
    pub fn defaults(host_name: &str) -> Self {
        Self::from_toml("", host_name).expect("the empty configuration is valid")
    }

    /// Reads and checks a configuration file.
    pub fn load(path: &Path, host_name: &str) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Self::from_toml_in(&text, host_name, path.parent())
            .map_err(|ConfigError(m)| ConfigError(format!("{}: {m}", path.display())))
    }

    /// Parses and checks configuration text; relative paths in it (procedures' `exec`) are taken
    /// from the current directory.
    pub fn from_toml(text: &str, host_name: &str) -> Result<Self, ConfigError> {
        Self::from_toml_in(text, host_name, None)
    }

    /// Parses and checks configuration text read from a file in directory `base` (`None`: the
    /// current directory), against which relative procedure paths are resolved.
    pub fn from_toml_in(
        text: &str,
        host_name: &str,
        base: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        let node_id = match file.node_id {
            Some(id) => parse_node_id(&id)?,
            None => default_node_id(host_name),
        };
        let addr = |key: &str, value: &str| -> Result<SocketAddr, ConfigError> {
            value.parse().map_err(|_| {
                ConfigError(format!(
                    "{key}: {value:?} is not an address like 0.0.0.0:4556 or [::1]:4556"
                ))
            })
        };
        let optional_addr = |key: &str, value: Option<String>, default: &str| {
            let value = value.unwrap_or_else(|| default.to_owned());
            if value.is_empty() {
                Ok(None)
            } else {
                addr(key, &value).map(Some)
            }
        };
        let session_limits = session_limits(&file.tcpcl)?;
        let tcpcl_listen = file
            .tcpcl
            .listen
            .unwrap_or_else(|| vec![format!("0.0.0.0:{DEFAULT_TCPCL_PORT}")])
            .iter()
            .map(|a| addr("tcpcl.listen", a))
            .collect::<Result<_, _>>()?;
        let discovery_address = file
            .discovery
            .address
            .unwrap_or_else(|| "255.255.255.255".into());
        let discovery = Discovery {
            enabled: file.discovery.enabled.unwrap_or(true),
            port: file.discovery.port.unwrap_or(DEFAULT_DISCOVERY_PORT),
            address: discovery_address.parse().map_err(|_| {
                ConfigError(format!(
                    "discovery.address: {discovery_address:?} is not an IPv4 broadcast address or multicast group"
                ))
            })?,
            interfaces: file.discovery.interfaces.unwrap_or_default(),
            period: duration("discovery.period", file.discovery.period, "2s")?,
            formats: beacon_formats(file.discovery.formats)?,
            dtn7_port: file.discovery.dtn7_port.unwrap_or(wire::ipnd::IPND_PORT),
        };
        if discovery.period < Duration::from_millis(100) {
            return Err(ConfigError(
                "discovery.period must be at least 100ms".into(),
            ));
        }
        let tls = file.tcpcl.tls.map(|t| {
            let path = |p: PathBuf| match base {
                Some(dir) if p.is_relative() => dir.join(p),
                _ => p,
            };
            TlsConfig {
                cert: path(t.cert),
                key: path(t.key),
                ca: path(t.ca),
                require: t.require.unwrap_or(false),
            }
        });
        let mut peer_tls = std::collections::BTreeMap::new();
        for p in &file.peers {
            let Some(policy) = &p.tls else { continue };
            let policy = match policy.as_str() {
                "required" => PeerTls::Required,
                "optional" => PeerTls::Optional,
                other => {
                    return Err(ConfigError(format!(
                        "peers.tls: {other:?} is neither \"required\" nor \"optional\""
                    )));
                }
            };
            if tls.is_none() {
                return Err(ConfigError(format!(
                    "peers.tls for {}: needs [tcpcl.tls] (cert, key, ca)",
                    p.address
                )));
            }
            peer_tls.insert(addr("peers.address", &p.address)?, policy);
        }
        let summary_grace = duration("summary_grace", file.summary_grace, "25s")?;
        if summary_grace.is_zero() {
            // Every neighbour would be taken for another implementation before it could answer.
            return Err(ConfigError("summary_grace must be more than 0s".into()));
        }
        let store: StoreKind = match file.store.as_deref() {
            None => StoreKind::default(),
            Some(s) => s.parse().map_err(|e| ConfigError(format!("store: {e}")))?,
        };
        let keepalive = duration("tcpcl.keepalive", file.tcpcl.keepalive, "30s")?;
        if keepalive.as_secs() > u64::from(u16::MAX) {
            return Err(ConfigError(
                "tcpcl.keepalive must be at most 65535 s".into(),
            ));
        }
        Ok(Self {
            node_id,
            data_dir: file.data_dir,
            store,
            store_quota: match file.store_quota {
                Some(quota) => size("store_quota", Some(quota), "")?,
                None => store.default_quota(),
            },
            strategy: file
                .strategy
                .as_deref()
                .unwrap_or("epidemic")
                .parse()
                .map_err(|e| ConfigError(format!("strategy: {e}")))?,
            bundle_piece: file
                .bundle_piece
                .as_deref()
                .map(|text| {
                    parse_bundle_piece(text).map_err(|e| ConfigError(format!("bundle_piece{e}")))
                })
                .transpose()?,
            summary_grace,
            contact_plan: file.contact_plan.map(|p| resolve(base, &p)),
            tcpcl_listen,
            keepalive,
            ignore_peer_transfer_mru: file.tcpcl.ignore_peer_transfer_mru.unwrap_or(false),
            session_limits,
            udp_listen: optional_addr(
                "udp.listen",
                file.udp.listen,
                &format!("0.0.0.0:{DEFAULT_UDP_PORT}"),
            )?,
            udp_max_bundle: usize::try_from(size("udp.max_bundle", file.udp.max_bundle, "60KB")?)
                .unwrap_or(usize::MAX)
                .min(65_000),
            udp_max_rate: match file.udp.max_rate {
                None => DEFAULT_UDP_MAX_RATE,
                Some(n) if n >= 1 => u32::try_from(n)
                    .map_err(|_| ConfigError(format!("udp.max_rate: {n} is too large")))?,
                Some(n) => {
                    return Err(ConfigError(format!(
                        "udp.max_rate: {n} is not a rate of at least 1 datagram a second"
                    )));
                }
            },
            discovery,
            peers: file
                .peers
                .iter()
                .map(|p| addr("peers.address", &p.address))
                .collect::<Result<_, _>>()?,
            tls,
            peer_tls,
            api_listen: optional_addr("api.listen", file.api.listen, DEFAULT_API_ADDR)?,
            api_max_payload: usize::try_from(size(
                "api.max_payload",
                file.api.max_payload,
                "256MiB",
            )?)
            .unwrap_or(usize::MAX),
            api_max_uploads: match file.api.max_uploads {
                None => DEFAULT_API_MAX_UPLOADS,
                Some(n) if n >= 1 => usize::try_from(n)
                    .map_err(|_| ConfigError(format!("api.max_uploads: {n} is too large")))?,
                Some(n) => {
                    return Err(ConfigError(format!(
                        "api.max_uploads: {n} is not a count of at least 1"
                    )));
                }
            },
            api_allowed_hosts: file.api.allowed_hosts.unwrap_or_default(),
            api_allow_remote: file.api.allow_remote.unwrap_or(false),
            seed: 0,
            rpc: rpc_config(file.rpc, base)?,
            bpsec: bpsec_policy(file.bpsec, base)?,
        })
    }
}

/// Longer than any key file: what is read before giving up.
const MAX_KEY_FILE_LEN: u64 = 4096;

/// `[bpsec]` checked: every key read (from the file or the hex given), every rule's key known
/// and of a length its context takes, every pattern valid.
fn bpsec_policy(file: BpsecFile, base: Option<&Path>) -> Result<bpsec::Policy, ConfigError> {
    let mut keys = std::collections::BTreeMap::new();
    for k in file.key {
        let at = format!("bpsec.key {:?}", k.name);
        let bytes = match (k.hex, k.file) {
            (Some(hex), None) => {
                parse_key_hex(&hex).map_err(|e| ConfigError(format!("{at}: hex {e}")))?
            }
            (None, Some(path)) => {
                let path = match base {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path,
                };
                read_key_file(&path).map_err(|e| ConfigError(format!("{at}: {e}")))?
            }
            _ => {
                return Err(ConfigError(format!(
                    "{at}: give the key as either hex = \"…\" or file = \"…\" (one of them)"
                )));
            }
        };
        if bytes.is_empty() {
            return Err(ConfigError(format!("{at}: the key is empty")));
        }
        if keys
            .insert(k.name.clone(), bpsec::Key::new(&bytes))
            .is_some()
        {
            return Err(ConfigError(format!("{at}: a second key of that name")));
        }
    }
    let key = |section: &str, name: &str, aes: bool| -> Result<bpsec::Key, ConfigError> {
        let k = keys.get(name).ok_or_else(|| {
            ConfigError(format!("bpsec.{section}: no [[bpsec.key]] named {name:?}"))
        })?;
        if aes && !matches!(k.len(), 16 | 32) {
            return Err(ConfigError(format!(
                "bpsec.{section}: key {name:?} has {} bytes; AES-GCM takes 16 (AES-128) or 32 \
                 (AES-256)",
                k.len()
            )));
        }
        Ok(k.clone())
    };
    let pattern = |section: &str, text: &str| {
        bpsec::Pattern::parse(text).map_err(|e| ConfigError(format!("bpsec.{section}: {e}")))
    };
    let scope = |section: &str, names: Option<Vec<String>>| -> Result<u64, ConfigError> {
        let Some(names) = names else {
            return Ok(bpsec::SCOPE_ALL);
        };
        let mut flags = 0;
        for n in names {
            flags |= match n.as_str() {
                "primary" => bpsec::SCOPE_PRIMARY,
                "target-header" => bpsec::SCOPE_TARGET_HEADER,
                "security-header" => bpsec::SCOPE_SECURITY_HEADER,
                other => {
                    return Err(ConfigError(format!(
                        "bpsec.{section}.scope: {other:?} is not \"primary\", \"target-header\" \
                         or \"security-header\""
                    )));
                }
            };
        }
        Ok(flags)
    };
    let mut policy = bpsec::Policy::default();
    for r in file.sign {
        let sha = match r.sha.unwrap_or(384) {
            256 => bpsec::bib::ShaVariant::Sha256,
            384 => bpsec::bib::ShaVariant::Sha384,
            512 => bpsec::bib::ShaVariant::Sha512,
            other => {
                return Err(ConfigError(format!(
                    "bpsec.sign.sha: {other} is not 256, 384 or 512"
                )));
            }
        };
        policy.sign.push(bpsec::SignRule {
            destinations: pattern("sign", &r.destinations)?,
            key: key("sign", &r.key, false)?,
            sha,
            scope: scope("sign", r.scope)?,
        });
    }
    for r in file.encrypt {
        if r.sha.is_some() {
            return Err(ConfigError(
                "bpsec.encrypt: sha is for [[bpsec.sign]] (AES-GCM's variant follows from the key's length)".into(),
            ));
        }
        policy.encrypt.push(bpsec::EncryptRule {
            destinations: pattern("encrypt", &r.destinations)?,
            key: key("encrypt", &r.key, true)?,
            scope: scope("encrypt", r.scope)?,
        });
    }
    for r in file.verify {
        policy.verify.push(bpsec::VerifyRule {
            sources: pattern("verify", &r.sources)?,
            key: key("verify", &r.key, false)?,
            required: r.required.unwrap_or(false),
        });
    }
    for r in file.decrypt {
        policy.decrypt.push(bpsec::DecryptRule {
            sources: pattern("decrypt", &r.sources)?,
            key: key("decrypt", &r.key, true)?,
            required: r.required.unwrap_or(false),
        });
    }
    Ok(policy)
}

/// A key as hex digits (either case; spaces and a `0x` prefix are not accepted).
fn parse_key_hex(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("is not an even number of hex digits".into());
    }
    Ok((0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap_or(0))
        .collect())
}

/// Reads a key file: its hex digits on one line. Like the identity file, it must be readable by
/// its owner only (mode 0600 or stricter): one that group or others may read is refused, not
/// repaired, since the key may already be known.
fn read_key_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{shown} holds a secret key but group or others may access it (mode {mode:04o}); \
             make it private with `chmod 600 {shown}` (and, if others may have read it, make a \
             new key)"
        ));
    }
    let mut text = seal::Zeroizing::new(String::new());
    file.take(MAX_KEY_FILE_LEN)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    parse_key_hex(&text).map_err(|e| format!("{shown} {e}"))
}

fn session_limits(file: &TcpclFile) -> Result<SessionLimits, ConfigError> {
    let defaults = SessionLimits::default();
    let bytes = |key: &str, value: &Option<String>, default: u64| match value {
        Some(text) => match parse_size(text) {
            Ok(0) => Err(ConfigError(format!("tcpcl.{key}: must be more than zero"))),
            Ok(n) => Ok(n),
            Err(e) => Err(ConfigError(format!("tcpcl.{key}: {e}"))),
        },
        None => Ok(default),
    };
    let count = |key: &str, value: Option<i64>, default: usize| match value {
        Some(n) if n >= 1 => {
            usize::try_from(n).map_err(|_| ConfigError(format!("tcpcl.{key}: too large")))
        }
        Some(n) => Err(ConfigError(format!(
            "tcpcl.{key}: {n} is not a count of at least 1"
        ))),
        None => Ok(default),
    };
    let limits = SessionLimits {
        transfer_mru: bytes("transfer_mru", &file.transfer_mru, defaults.transfer_mru)?,
        receive_memory: bytes(
            "receive_memory",
            &file.receive_memory,
            defaults.receive_memory,
        )?,
        max_sessions: count("max_sessions", file.max_sessions, defaults.max_sessions)?,
        max_sessions_per_address: count(
            "max_sessions_per_address",
            file.max_sessions_per_address,
            defaults.max_sessions_per_address,
        )?,
        idle_timeout: match &file.idle_timeout {
            Some(_) => duration("tcpcl.idle_timeout", file.idle_timeout.clone(), "")?,
            None => defaults.idle_timeout,
        },
    };
    if limits.idle_timeout < Duration::from_secs(1) {
        return Err(ConfigError("tcpcl.idle_timeout must be at least 1s".into()));
    }
    if limits.max_sessions_per_address > limits.max_sessions {
        return Err(ConfigError(format!(
            "tcpcl.max_sessions_per_address ({}) is more than tcpcl.max_sessions ({})",
            limits.max_sessions_per_address, limits.max_sessions
        )));
    }
    Ok(limits)
}

fn rpc_config(file: RpcFile, base: Option<&Path>) -> Result<RpcConfig, ConfigError> {
    let defaults = RpcConfig::default();
    let tags = file.tags.unwrap_or_default();
    for tag in &tags {
        if !is_name(tag) || tag.contains('.') {
            return Err(ConfigError(format!(
                "rpc.tags: {tag:?} is not a tag (letters, digits, _ and - only)"
            )));
        }
    }
    let command = |key: &str, argv: Option<Vec<String>>| match argv {
        Some(argv) if argv.first().is_none_or(|p| p.is_empty()) => Err(ConfigError(format!(
            "rpc.{key}: a command is a non-empty list, its program first"
        ))),
        argv => Ok(argv),
    };
    let positive = |key: &str, value: Option<String>, default: Duration| {
        let d = match value {
            Some(v) => duration(key, Some(v), "")?,
            None => default,
        };
        if d.is_zero() {
            return Err(ConfigError(format!("{key}: must be more than zero")));
        }
        Ok(d)
    };
    let count = |key: &str, value: Option<i64>, default: usize| match value {
        Some(n) => usize::try_from(n)
            .map_err(|_| ConfigError(format!("{key}: {n} is not a count (0 or more)"))),
        None => Ok(default),
    };
    let mut procedures: Vec<ProcedureConfig> = Vec::new();
    for (i, p) in file.procedure.into_iter().enumerate() {
        let procedure = procedure_config(i, p, base)?;
        if procedures.iter().any(|q| q.name == procedure.name) {
            return Err(ConfigError(format!(
                "rpc.procedure[{i}].name: {:?} is declared twice",
                procedure.name
            )));
        }
        procedures.push(procedure);
    }
    Ok(RpcConfig {
        accept: file.accept,
        tags,
        battery_command: command("battery_command", file.battery_command)?,
        moving_command: command("moving_command", file.moving_command)?,
        work_dir: file.work_dir.map(|d| resolve(base, &d)),
        ack_timeout: positive("rpc.ack_timeout", file.ack_timeout, defaults.ack_timeout)?,
        result_timeout: positive(
            "rpc.result_timeout",
            file.result_timeout,
            defaults.result_timeout,
        )?,
        dtn_timeout: positive("rpc.dtn_timeout", file.dtn_timeout, defaults.dtn_timeout)?,
        file_budget: match file.file_budget {
            Some(text) => {
                parse_size(&text).map_err(|e| ConfigError(format!("rpc.file_budget: {e}")))?
            }
            None => defaults.file_budget,
        },
        finished_in_memory: count(
            "rpc.finished_in_memory",
            file.finished_in_memory,
            defaults.finished_in_memory,
        )?,
        max_served_calls: count(
            "rpc.max_served_calls",
            file.max_served_calls,
            defaults.max_served_calls,
        )?,
        max_served_calls_per_caller: count(
            "rpc.max_served_calls_per_caller",
            file.max_served_calls_per_caller,
            defaults.max_served_calls_per_caller,
        )?,
        trusted_servers: public_keys("rpc.trusted_servers", file.trusted_servers)?,
        provider_grace: positive(
            "rpc.provider_grace",
            file.provider_grace,
            defaults.provider_grace,
        )?,
        procedures,
    })
}

/// A list of Ed25519 public keys (64 hex digits each), if given.
fn public_keys(key: &str, keys: Option<Vec<String>>) -> Result<Option<Vec<[u8; 32]>>, ConfigError> {
    keys.map(|keys| {
        keys.iter()
            .map(|k| {
                parse_public_key(k).ok_or_else(|| {
                    ConfigError(format!(
                        "{key}: {k:?} is not an Ed25519 public key (64 hex digits)"
                    ))
                })
            })
            .collect()
    })
    .transpose()
}

fn procedure_config(
    i: usize,
    p: ProcedureFile,
    base: Option<&Path>,
) -> Result<ProcedureConfig, ConfigError> {
    if !is_name(&p.name) {
        return Err(ConfigError(format!(
            "rpc.procedure[{i}].name: {:?} is not a procedure name (letters, digits, _ . - only)",
            p.name
        )));
    }
    if p.name.starts_with("ferry.") {
        return Err(ConfigError(format!(
            "rpc.procedure[{i}].name: {:?}: names starting \"ferry.\" are the node's own (ferry.procedures lists what it serves); choose another name",
            p.name
        )));
    }
    if p.name == crate::rpc_shell::NULL_PROCEDURE {
        return Err(ConfigError(format!(
            "rpc.procedure[{i}].name: \"null\" is served by every node itself (no parameters, an empty result); choose another name"
        )));
    }
    let key = |k: &str| format!("rpc.procedure[{i}].{k} (procedure {:?})", p.name);
    // Each parameter is a type (`int`) or a name and a type (`zoom: int`).
    let mut params = Vec::with_capacity(p.params.len());
    let mut param_names: Vec<Option<String>> = Vec::with_capacity(p.params.len());
    for text in &p.params {
        let (name, ty) = match text.split_once(':') {
            Some((name, ty)) => (Some(name.trim()), ty.trim()),
            None => (None, text.trim()),
        };
        if let Some(name) = name {
            if !crate::providers::is_identifier(name) {
                return Err(ConfigError(format!(
                    "{}: {name:?} is not a parameter name (letters, digits and _, not starting with a digit)",
                    key("params")
                )));
            }
            if param_names.iter().any(|n| n.as_deref() == Some(name)) {
                return Err(ConfigError(format!(
                    "{}: {name:?} is declared twice",
                    key("params")
                )));
            }
        }
        params.push(
            ty.parse::<rpc::ParamType>()
                .map_err(|e| ConfigError(format!("{}: {e}", key("params"))))?,
        );
        param_names.push(name.map(str::to_owned));
    }
    let returns = p
        .returns
        .as_deref()
        .map(str::parse::<Returns>)
        .transpose()
        .map_err(|e| ConfigError(format!("{}: {e}", key("returns"))))?;
    let exec = resolve(base, &p.exec);
    match std::fs::metadata(&exec) {
        Err(e) => {
            return Err(ConfigError(format!(
                "{}: cannot use {} (from {:?}): {e}",
                key("exec"),
                exec.display(),
                p.exec
            )));
        }
        Ok(m) if !m.is_file() => {
            return Err(ConfigError(format!(
                "{}: {} is not a file",
                key("exec"),
                exec.display()
            )));
        }
        Ok(m) => {
            use std::os::unix::fs::PermissionsExt as _;
            if m.permissions().mode() & 0o111 == 0 {
                return Err(ConfigError(format!(
                    "{}: {} is not executable (chmod +x it)",
                    key("exec"),
                    exec.display()
                )));
            }
        }
    }
    let args = match p.args {
        None => (0..params.len()).map(ArgTemplate::Param).collect(),
        Some(args) => {
            let mut parsed = Vec::with_capacity(args.len());
            for a in &args {
                let t = ArgTemplate::parse(a)
                    .map_err(|e| ConfigError(format!("{}: {e}", key("args"))))?;
                if let ArgTemplate::Param(n) = t
                    && n >= params.len()
                {
                    return Err(ConfigError(format!(
                        "{}: {a:?} refers to parameter {} but params declares {}",
                        key("args"),
                        n + 1,
                        params.len()
                    )));
                }
                parsed.push(t);
            }
            parsed
        }
    };
    let timeout = duration(&key("timeout"), p.timeout, "60s")?;
    if timeout.is_zero() {
        return Err(ConfigError(format!(
            "{}: must be more than zero",
            key("timeout")
        )));
    }
    let max_concurrent = match p.max_concurrent {
        None => 1,
        Some(n) => u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
            ConfigError(format!(
                "{}: {n} is not a number of executions (1 or more)",
                key("max_concurrent")
            ))
        })?,
    };
    let allow = public_keys(&key("allow"), p.allow)?;
    Ok(ProcedureConfig {
        max_output: size(&key("max_output"), p.max_output, "1MiB")?,
        name: p.name,
        params,
        param_names,
        returns,
        exec,
        args,
        timeout,
        max_concurrent,
        idempotent: p.idempotent.unwrap_or(false),
        allow,
        require: p.require,
        description: p.description,
    })
}

/// `[A-Za-z0-9_.-]+`: procedure names (and, without `.`, hardware tags, as `has(...)` reads
/// them).
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// 64 hex digits (either case) to 32 bytes.
pub(crate) fn parse_public_key(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

/// A path from the file, made absolute: relative ones are taken from `base` (the file's
/// directory), else from the current directory.
fn resolve(base: Option<&Path>, path: &Path) -> PathBuf {
    let joined = match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_owned(),
    };
    std::path::absolute(&joined).unwrap_or(joined)
}

/// Parses a node id given by a person: `dtn://name/` (the trailing slash may be left out) or
/// `ipn:N.0`.
pub fn parse_node_id(text: &str) -> Result<Eid, ConfigError> {
    let mut text = text.trim().to_owned();
    if text.starts_with("dtn://") && text[6..].find('/').is_none() {
        text.push('/');
    }
    let eid: Eid = text
        .parse()
        .map_err(|e| ConfigError(format!("node_id: {text:?}: {e}")))?;
    if eid.is_null() || eid.node_id() != eid {
        return Err(ConfigError(format!(
            "node_id: {text:?} is not a node id (expected dtn://name/ or ipn:N.0)"
        )));
    }
    Ok(eid)
}

/// `dtn://<host name>/`, with characters a dtn node name cannot hold replaced by `-`.
fn default_node_id(host_name: &str) -> Eid {
    let name: String = host_name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = if name.is_empty() {
        "ferry".into()
    } else {
        name
    };
    Eid::dtn(&name, "").unwrap_or_else(|_| Eid::dtn("ferry", "").expect("valid name"))
}

/// `discovery.formats`: both unless said otherwise, so that a node finds `dtnd` (and is found by
/// it) out of the box; one beacon more per period and interface is the cost.
fn beacon_formats(names: Option<Vec<String>>) -> Result<BeaconFormats, ConfigError> {
    match names {
        None => Ok(BeaconFormats {
            ferry: true,
            dtn7: true,
        }),
        Some(names) => BeaconFormats::from_names(&names, "discovery.formats"),
    }
}

impl BeaconFormats {
    /// The formats `names` lists (`"ferry"`, `"dtn7"`), each at most once and at least one;
    /// `key` names the setting in errors (`discovery.formats`, `--beacon-format`).
    pub fn from_names(names: &[String], key: &str) -> Result<Self, ConfigError> {
        let mut formats = BeaconFormats {
            ferry: false,
            dtn7: false,
        };
        for name in names {
            let slot = match name.as_str() {
                "ferry" => &mut formats.ferry,
                "dtn7" => &mut formats.dtn7,
                _ => {
                    return Err(ConfigError(format!(
                        "{key}: unknown beacon format {name:?} (known: \"ferry\", \"dtn7\")"
                    )));
                }
            };
            if std::mem::replace(slot, true) {
                return Err(ConfigError(format!("{key}: {name:?} is listed twice")));
            }
        }
        if !formats.ferry && !formats.dtn7 {
            return Err(ConfigError(format!(
                "{key} is empty; to send no beacons, set discovery.enabled = false"
            )));
        }
        Ok(formats)
    }
}

fn duration(key: &str, value: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    let value = value.unwrap_or_else(|| default.to_owned());
    humantime::parse_duration(&value)
        .map_err(|e| ConfigError(format!("{key}: {value:?} is not a duration like 30s: {e}")))
}

fn size(key: &str, value: Option<String>, default: &str) -> Result<u64, ConfigError> {
    let value = value.unwrap_or_else(|| default.to_owned());
    parse_size(&value).map_err(|e| ConfigError(format!("{key}: {e}")))
}

/// A size that does not parse (its `Display` says what was wrong and shows the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a size like 1MB, 100KiB or 512: {reason}")]
pub struct SizeError {
    /// The text.
    pub text: String,
    /// What the parser found wrong.
    pub reason: parse_size::Error,
}

/// Parses a `bundle_piece`: a size of at least [`MIN_BUNDLE_PIECE`]. The error reads after the
/// key's name (`: "…" is not a size …`, ` must be at least …`).
pub fn parse_bundle_piece(text: &str) -> Result<u64, String> {
    let piece = parse_size(text).map_err(|e| format!(": {e}"))?;
    if piece < MIN_BUNDLE_PIECE {
        // Pieces this small cost more in headers and bookkeeping than they gain; a link's MTU
        // splits bundles as finely as it needs anyway.
        return Err(format!(
            " must be at least {MIN_BUNDLE_PIECE} bytes, got {piece}"
        ));
    }
    Ok(piece)
}

/// Parses `1MB`, `100KiB`, `1.5GB`, `10M`, `512` (bytes): decimal units (`k`, `M`, `G`, with or
/// without `B`) are powers of 1000, binary ones (`KiB`, `MiB`, `GiB`) of 1024, as the
/// `parse-size` crate reads them.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    parse_size::parse_size(s.trim()).map_err(|reason| SizeError {
        text: s.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_configuration_gives_documented_defaults() {
        let c = Config::defaults("Field Laptop");
        assert_eq!(c.node_id.to_string(), "dtn://field-laptop/");
        assert_eq!(c.tcpcl_listen, vec!["0.0.0.0:4556".parse().unwrap()]);
        assert_eq!(c.udp_listen, Some("0.0.0.0:4556".parse().unwrap()));
        assert_eq!(c.api_listen, Some("127.0.0.1:4550".parse().unwrap()));
        assert!(c.discovery.enabled);
        assert_eq!(c.discovery.port, 4551);
        assert_eq!(c.discovery.period, Duration::from_secs(2));
        assert_eq!(
            c.discovery.formats,
            BeaconFormats {
                ferry: true,
                dtn7: true
            }
        );
        assert_eq!(c.discovery.dtn7_port, 3003);
        assert_eq!(c.store_quota, 10_000_000_000);
        assert_eq!(c.strategy, StrategyKind::Epidemic);
        assert_eq!(c.summary_grace, Duration::from_secs(25));
        assert_eq!(c.keepalive, Duration::from_secs(30));
        assert!(c.peers.is_empty());
        assert_eq!(c.session_limits, SessionLimits::default());
    }

    #[test]
    fn beacon_formats_are_chosen_by_name() {
        let c =
            Config::from_toml("[discovery]\nformats = [\"dtn7\"]\ndtn7_port = 3004", "x").unwrap();
        assert_eq!(
            c.discovery.formats,
            BeaconFormats {
                ferry: false,
                dtn7: true
            }
        );
        assert_eq!(c.discovery.dtn7_port, 3004);
        let c = Config::from_toml("[discovery]\nformats = [\"ferry\"]", "x").unwrap();
        assert_eq!(
            c.discovery.formats,
            BeaconFormats {
                ferry: true,
                dtn7: false
            }
        );
    }

    #[test]
    fn tls_is_off_unless_configured_and_its_keys_are_checked() {
        let c = Config::defaults("x");
        assert!(c.tls.is_none() && c.peer_tls.is_empty());
        let text = "[tcpcl.tls]\ncert = \"c.pem\"\nkey = \"/k.pem\"\nca = \"ca.pem\"\nrequire = true\n\
                    [[peers]]\naddress = \"10.0.0.3:4556\"\ntls = \"optional\"\n";
        let c = Config::from_toml_in(text, "x", Some(Path::new("/etc/ferry"))).unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(
            tls.cert,
            Path::new("/etc/ferry/c.pem"),
            "relative to the file"
        );
        assert_eq!(tls.key, Path::new("/k.pem"));
        assert!(tls.require);
        assert_eq!(
            c.peer_tls.values().collect::<Vec<_>>(),
            [&PeerTls::Optional]
        );
        let err = |text: &str| Config::from_toml(text, "x").unwrap_err().to_string();
        assert!(err("[tcpcl.tls]\ncert = \"c\"\nkey = \"k\"\n").contains("ca"));
        assert!(
            err("[[peers]]\naddress = \"10.0.0.3:4556\"\ntls = \"required\"\n")
                .contains("needs [tcpcl.tls]")
        );
        assert!(
            err("[tcpcl.tls]\ncert = \"c\"\nkey = \"k\"\nca = \"a\"\n[[peers]]\naddress = \"10.0.0.3:4556\"\ntls = \"yes\"\n")
                .contains("peers.tls")
        );
    }

    #[test]
    fn the_documented_example_parses() {
        // docs/configuration.md, section "A complete file": its first ```toml block.
        let doc = include_str!("../../../docs/configuration.md");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::from_toml(&example, "x").unwrap();
        assert_eq!(c.node_id.to_string(), "dtn://alpha/");
        // The documented session limits are the defaults.
        assert_eq!(c.session_limits, SessionLimits::default());
        assert_eq!(c.session_limits.transfer_mru, 64 << 20);
        assert_eq!(c.session_limits.idle_timeout, Duration::from_secs(600));
        assert_eq!(c.peers, vec!["10.0.0.2:4556".parse().unwrap()]);
        let tls = c.tls.as_ref().expect("[tcpcl.tls]");
        assert_eq!(tls.cert, Path::new("node.pem"));
        assert!(!tls.require);
        assert_eq!(
            c.peer_tls.get(&"10.0.0.2:4556".parse().unwrap()),
            Some(&PeerTls::Required)
        );
        assert_eq!(c.data_dir, Some(PathBuf::from("/var/lib/ferry")));
        assert_eq!(c.bundle_piece, Some(10_000_000));
        let rpc = &c.rpc;
        assert_eq!(rpc.accept.as_deref(), Some("running < 4 && battery >= 20"));
        assert_eq!(rpc.tags, ["gps", "camera"]);
        assert_eq!(
            rpc.battery_command,
            Some(vec!["/usr/local/bin/battery".to_string()])
        );
        assert_eq!(
            rpc.work_dir(Path::new("/d")),
            Path::new("/var/tmp/ferry-work")
        );
        assert_eq!(rpc.result_timeout, Duration::from_secs(90));
        assert_eq!(rpc.procedures.len(), 1);
        let echo = rpc.procedure("echo").unwrap();
        assert!(rpc.procedure("ech").is_none(), "no prefix matching");
        assert_eq!(echo.params, [rpc::ParamType::Text]);
        assert_eq!(echo.exec, Path::new("/bin/echo"));
        assert_eq!(
            echo.args,
            [ArgTemplate::Literal("-n".into()), ArgTemplate::Param(0)]
        );
        assert_eq!(echo.timeout, Duration::from_secs(30));
        assert_eq!(echo.max_output, 1024 * 1024);
        assert_eq!(echo.max_concurrent, 2);
        assert!(echo.idempotent);
        let key = echo.allow.as_ref().unwrap()[0];
        assert_eq!((key[0], key[31]), (0x3b, 0x29));
        assert_eq!(echo.require.as_deref(), Some("has(gps)"));
        assert_eq!(echo.description.as_deref(), Some("says it back"));
        let b = &c.bpsec;
        assert_eq!(
            (
                b.sign.len(),
                b.encrypt.len(),
                b.verify.len(),
                b.decrypt.len()
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(b.sign[0].destinations.as_str(), "dtn://bravo/*");
        assert_eq!(b.sign[0].scope, bpsec::SCOPE_ALL);
        assert_eq!(b.encrypt[0].key.len(), 32);
        assert!(b.verify[0].required);
    }

    #[test]
    fn rpc_serves_nothing_by_default() {
        let c = Config::defaults("x");
        assert_eq!(c.rpc, RpcConfig::default());
        assert!(c.rpc.procedures.is_empty() && c.rpc.accept.is_none());
        assert_eq!(c.rpc.ack_timeout, Duration::from_secs(30));
        assert_eq!(c.rpc.dtn_timeout, Duration::from_secs(90));
        assert_eq!(c.rpc.file_budget, 1 << 30);
        let c = Config::from_toml("[rpc]\nfile_budget = \"200MB\"", "x").unwrap();
        assert_eq!(c.rpc.file_budget, 200_000_000);
        assert_eq!(c.rpc.finished_in_memory, 256);
        let c = Config::from_toml("[rpc]\nfinished_in_memory = 10", "x").unwrap();
        assert_eq!(c.rpc.finished_in_memory, 10);
        let c = Config::from_toml(
            "[rpc]\nmax_served_calls = 5000\nmax_served_calls_per_caller = 100",
            "x",
        )
        .unwrap();
        assert_eq!(
            (c.rpc.max_served_calls, c.rpc.max_served_calls_per_caller),
            (5000, 100)
        );
        let c = Config::from_toml("", "x").unwrap();
        assert_eq!(
            (c.rpc.max_served_calls, c.rpc.max_served_calls_per_caller),
            (1_000_000, 250_000)
        );
        assert_eq!(c.rpc.trusted_servers, None);
        let key = "ab".repeat(32);
        let c = Config::from_toml(&format!("[rpc]\ntrusted_servers = [\"{key}\"]"), "x").unwrap();
        assert_eq!(c.rpc.trusted_servers, Some(vec![[0xab; 32]]));
        let c = Config::defaults("x");
        assert_eq!(c.rpc.work_dir(Path::new("/d")), Path::new("/d/work"));
        // A procedure's own defaults.
        let c = Config::from_toml(
            "[[rpc.procedure]]\nname = \"p\"\nexec = \"/bin/echo\"\nparams = [\"int\", \"file\"]",
            "x",
        )
        .unwrap();
        let p = &c.rpc.procedures[0];
        assert_eq!(p.params, [rpc::ParamType::Int, rpc::ParamType::File]);
        assert_eq!(p.args, [ArgTemplate::Param(0), ArgTemplate::Param(1)]);
        assert_eq!(p.timeout, Duration::from_secs(60));
        assert_eq!(p.max_output, 1024 * 1024);
        assert_eq!(p.max_concurrent, 1);
        assert!(!p.idempotent);
        assert_eq!(
            (&p.allow, &p.require, &p.description),
            (&None, &None, &None)
        );
    }

    #[test]
    fn the_example_node_configuration_loads() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let c = Config::load(&examples.join("node.toml"), "x").unwrap();
        let names: Vec<_> = c.rpc.procedures.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["echo", "photo", "slow", "sum"]);
        for p in &c.rpc.procedures {
            assert!(
                p.exec.is_absolute() && p.exec.is_file(),
                "{}",
                p.exec.display()
            );
            assert!(p.exec.ends_with(format!("examples/{}.sh", p.name)));
        }
        let sum = c.rpc.procedure("sum").unwrap();
        assert_eq!(sum.args, [ArgTemplate::Param(0), ArgTemplate::Param(1)]);
        assert_eq!(
            c.rpc.procedure("photo").unwrap().max_output,
            4 * 1024 * 1024
        );
    }

    #[test]
    fn relative_exec_paths_are_taken_from_the_files_directory() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let text = "[[rpc.procedure]]\nname = \"e\"\nexec = \"echo.sh\"";
        let c = Config::from_toml_in(text, "x", Some(&examples)).unwrap();
        assert_eq!(
            c.rpc.procedures[0].exec,
            std::path::absolute(examples.join("echo.sh")).unwrap()
        );
        // Without a file, from the current directory (the crate's, under cargo test).
        let err = Config::from_toml(text, "x").unwrap_err().to_string();
        assert!(
            err.contains("rpc.procedure[0].exec") && err.contains("echo.sh"),
            "{err}"
        );
        let c = Config::from_toml(&text.replace("echo.sh", "../../examples/echo.sh"), "x").unwrap();
        assert!(c.rpc.procedures[0].exec.is_absolute());
    }

    #[test]
    fn rpc_keys_are_checked_with_clear_messages() {
        let err = |text: &str| match Config::from_toml(text, "x") {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        };
        let procedure =
            |extra: &str| format!("[[rpc.procedure]]\nname = \"p\"\nexec = \"/bin/echo\"\n{extra}");
        let key = "rpc.procedure[0].";
        let cases = [
            (
                procedure("params = [\"string\"]"),
                "params",
                "unknown parameter type `string`",
            ),
            (
                procedure("args = [\"{2}\"]\nparams = [\"int\"]"),
                "args",
                "parameter 2",
            ),
            (procedure("args = [\"{1}\"]"), "args", "params declares 0"),
            (
                procedure("args = [\"{0}\"]\nparams = [\"int\"]"),
                "args",
                "numbered from {1}",
            ),
            (procedure("timeout = \"0s\""), "timeout", "more than zero"),
            (procedure("timeout = \"soon\""), "timeout", "not a duration"),
            (
                procedure("max_concurrent = 0"),
                "max_concurrent",
                "1 or more",
            ),
            (
                procedure("max_concurrent = -2"),
                "max_concurrent",
                "1 or more",
            ),
            (procedure("max_output = \"lots\""), "max_output", "size"),
            (procedure("allow = [\"abc\"]"), "allow", "64 hex digits"),
            (
                procedure(&format!("allow = [\"{}\"]", "g".repeat(64))),
                "allow",
                "64 hex",
            ),
            (
                procedure(&format!("allow = [\"{}\"]", "a".repeat(63))),
                "allow",
                "64 hex",
            ),
        ];
        for (text, field, message) in cases {
            let e = err(&text);
            assert!(
                e.contains(&format!("{key}{field}")) && e.contains(message),
                "{text}: {e}"
            );
        }
        let two = format!("{}\n{}", procedure(""), procedure(""));
        assert!(err(&two).contains("rpc.procedure[1].name: \"p\" is declared twice"));
        let null = procedure("").replace("\"p\"", "\"null\"");
        assert!(
            err(&null).contains("served by every node itself"),
            "{}",
            err(&null)
        );
        for bad in ["", "a b", "x/y", "é", "../p"] {
            let text = procedure("").replace("\"p\"", &format!("{bad:?}"));
            assert!(err(&text).contains("rpc.procedure[0].name"), "{bad:?}");
        }
        let missing = procedure("").replace("/bin/echo", "/nonexistent/procedure");
        let e = err(&missing);
        assert!(
            e.contains("rpc.procedure[0].exec") && e.contains("/nonexistent/procedure"),
            "{e}"
        );
        let not_executable = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let e = err(&procedure("").replace("/bin/echo", not_executable));
        assert!(e.contains("exec") && e.contains("not executable"), "{e}");
        assert!(err(&procedure("").replace("/bin/echo", "/")).contains("not a file"));
        assert!(err("[[rpc.procedure]]\nname = \"p\"").contains("exec"));
        assert!(err(&procedure("colour = 1")).contains("unknown field"));
        assert!(err("[rpc]\ncolour = 1").contains("unknown field"));
        assert!(err("[rpc]\ntags = [\"a b\"]").contains("rpc.tags"));
        assert!(err("[rpc]\ntags = [\"a.b\"]").contains("rpc.tags"));
        assert!(err("[rpc]\nbattery_command = []").contains("rpc.battery_command"));
        assert!(err("[rpc]\nmoving_command = [\"\"]").contains("rpc.moving_command"));
        assert!(err("[rpc]\nack_timeout = \"0s\"").contains("rpc.ack_timeout"));
        assert!(err("[rpc]\ndtn_timeout = \"x\"").contains("rpc.dtn_timeout"));
        assert!(err("[rpc]\nfile_budget = \"lots\"").contains("rpc.file_budget"));
        assert!(err("[rpc]\nfinished_in_memory = -1").contains("rpc.finished_in_memory"));
        assert!(
            err("[rpc]\nmax_served_calls = -5")
                .contains("rpc.max_served_calls: -5 is not a count (0 or more)")
        );
        assert!(
            err("[rpc]\nmax_served_calls_per_caller = -1")
                .contains("rpc.max_served_calls_per_caller")
        );
        assert!(err("[rpc]\ntrusted_servers = [\"abc\"]").contains("rpc.trusted_servers"));
    }

    #[test]
    fn the_memory_store_has_its_own_default_quota() {
        let c = Config::defaults("x");
        assert_eq!((c.store, c.store_quota), (StoreKind::Disk, 10_000_000_000));
        let c = Config::from_toml("store = \"memory\"", "x").unwrap();
        assert_eq!((c.store, c.store_quota), (StoreKind::Memory, 512_000_000));
        let c = Config::from_toml("store = \"memory\"\nstore_quota = \"2GB\"", "x").unwrap();
        assert_eq!((c.store, c.store_quota), (StoreKind::Memory, 2_000_000_000));
    }

    #[test]
    fn bundle_piece_is_off_unless_set_and_refuses_tiny_pieces() {
        assert_eq!(Config::from_toml("", "x").unwrap().bundle_piece, None);
        let c = Config::from_toml("bundle_piece = \"4MiB\"", "x").unwrap();
        assert_eq!(c.bundle_piece, Some(4 << 20));
        let err = Config::from_toml("bundle_piece = \"1KB\"", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bundle_piece must be at least 65536 bytes, got 1000"
        );
        let err = Config::from_toml("bundle_piece = \"lots\"", "x").unwrap_err();
        assert!(err.to_string().starts_with("bundle_piece: "), "{err}");
    }

    #[test]
    fn every_key_is_checked_with_a_clear_message() {
        let err = |text: &str| Config::from_toml(text, "x").unwrap_err().to_string();
        assert!(err("node_id = \"alpha\"").contains("node_id"));
        assert!(err("node_id = \"dtn://a/b\"").contains("not a node id"));
        assert!(err("strategy = \"flood\"").contains("unknown strategy"));
        assert_eq!(
            err("store = \"ram\""),
            "store: unknown store \"ram\": expected disk or memory"
        );
        assert!(err("summary_grace = \"0s\"").contains("summary_grace must be more than 0s"));
        assert!(err("store_quota = \"lots\"").contains("store_quota"));
        assert!(err("[tcpcl]\nlisten = [\"localhost\"]").contains("tcpcl.listen"));
        assert!(err("[discovery]\nperiod = \"1ms\"").contains("at least 100ms"));
        assert!(err("[discovery]\naddress = \"eth0\"").contains("discovery.address"));
        assert!(
            err("[discovery]\nformats = [\"ipnd\"]").contains("unknown beacon format \"ipnd\"")
        );
        assert!(err("[discovery]\nformats = [\"dtn7\", \"dtn7\"]").contains("listed twice"));
        assert!(err("[discovery]\nformats = []").contains("discovery.enabled = false"));
        assert!(err("[discovery]\ndtn7_port = 70000").contains("dtn7_port"));
        assert!(err("colour = \"blue\"").contains("unknown field"));
        assert!(err("[[peers]]\naddress = \"host\"").contains("peers.address"));
        assert!(err("[tcpcl]\nreceive_memory = \"0\"").contains("tcpcl.receive_memory"));
        assert!(err("[tcpcl]\ntransfer_mru = \"big\"").contains("tcpcl.transfer_mru"));
        assert!(err("[tcpcl]\nmax_sessions = 0").contains("tcpcl.max_sessions"));
        assert!(
            err("[tcpcl]\nmax_sessions = 4\nmax_sessions_per_address = 5")
                .contains("is more than tcpcl.max_sessions")
        );
        assert!(err("[tcpcl]\nidle_timeout = \"10ms\"").contains("at least 1s"));
        assert!(err("[api]\nmax_uploads = 0").contains("api.max_uploads"));
        assert!(err("[udp]\nmax_rate = 0").contains("udp.max_rate"));
        assert_eq!(
            Config::from_toml("[udp]\nmax_rate = 50", "x")
                .unwrap()
                .udp_max_rate,
            50
        );
        assert_eq!(
            Config::from_toml("", "x").unwrap().api_max_uploads,
            DEFAULT_API_MAX_UPLOADS
        );
        assert_eq!(
            Config::from_toml("[api]\nmax_uploads = 1", "x")
                .unwrap()
                .api_max_uploads,
            1
        );
        let c = Config::from_toml(
            "[tcpcl]\nreceive_memory = \"8MiB\"\nmax_sessions_per_address = 2\nidle_timeout = \"1m\"",
            "x",
        )
        .unwrap();
        assert_eq!(c.session_limits.receive_memory, 8 << 20);
        assert_eq!(c.session_limits.max_sessions_per_address, 2);
        assert_eq!(c.session_limits.idle_timeout, Duration::from_secs(60));
    }

    #[test]
    fn empty_addresses_turn_parts_off() {
        let c = Config::from_toml(
            "node_id = \"dtn://b\"\n[udp]\nlisten = \"\"\n[api]\nlisten = \"\"\n[tcpcl]\nlisten = []\n[discovery]\nenabled = false",
            "x",
        )
        .unwrap();
        assert_eq!(c.node_id.to_string(), "dtn://b/");
        assert!(c.udp_listen.is_none() && c.api_listen.is_none() && c.tcpcl_listen.is_empty());
        assert!(!c.discovery.enabled);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("100KiB").unwrap(), 102_400);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("10M").unwrap(), 10_000_000);
        assert_eq!(parse_size("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_size(" 2 kB ").unwrap(), 2_000);
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("MB").is_err());
        let said = parse_size("1XB").unwrap_err().to_string();
        assert!(said.starts_with("\"1XB\" is not a size like 1MB"), "{said}");
    }

    #[test]
    fn bpsec_keys_and_rules_parse_and_every_mistake_is_named() {
        let hmac = "1a".repeat(32);
        let aes = "71".repeat(16);
        let text = format!(
            "[[bpsec.key]]\nname = \"h\"\nhex = \"{hmac}\"\n\
             [[bpsec.key]]\nname = \"a\"\nhex = \"{aes}\"\n\
             [[bpsec.sign]]\ndestinations = \"dtn://b/*\"\nkey = \"h\"\nsha = 512\nscope = [\"primary\"]\n\
             [[bpsec.encrypt]]\ndestinations = \"dtn://b/*\"\nkey = \"a\"\n\
             [[bpsec.verify]]\nsources = \"dtn://a/*\"\nkey = \"h\"\nrequired = true\n\
             [[bpsec.decrypt]]\nsources = \"*\"\nkey = \"a\"\n"
        );
        let c = Config::from_toml(&text, "x").unwrap();
        let p = &c.bpsec;
        assert_eq!(p.sign.len(), 1);
        assert_eq!(p.sign[0].sha, bpsec::bib::ShaVariant::Sha512);
        assert_eq!(p.sign[0].scope, bpsec::SCOPE_PRIMARY);
        assert_eq!(p.sign[0].key.as_bytes(), &[0x1a; 32]);
        assert_eq!(p.encrypt[0].scope, bpsec::SCOPE_ALL);
        assert_eq!(p.encrypt[0].key.len(), 16);
        assert!(p.verify[0].required && !p.decrypt[0].required);
        assert!(
            !format!("{c:?}").contains(&"1a".repeat(4)),
            "keys never printed"
        );
        assert!(Config::defaults("x").bpsec.sign.is_empty());

        let err = |t: &str| Config::from_toml(t, "x").unwrap_err().to_string();
        let key = format!("[[bpsec.key]]\nname = \"h\"\nhex = \"{hmac}\"\n");
        assert!(err("[bpsec]\nkeys = 1").contains("unknown field"));
        assert!(
            err(&format!(
                "{key}[[bpsec.sign]]\ndestinations = \"*\"\nkey = \"h\"\ncolour = 1"
            ))
            .contains("unknown field")
        );
        assert!(
            err(&format!(
                "{key}[[bpsec.sign]]\ndestinations = \"*\"\nkey = \"nope\""
            ))
            .contains("no [[bpsec.key]] named \"nope\"")
        );
        assert!(
            err(&format!(
                "[[bpsec.key]]\nname = \"h\"\nhex = \"{}\"\n[[bpsec.encrypt]]\ndestinations = \"*\"\nkey = \"h\"",
                "ab".repeat(20)
            ))
            .contains("AES-GCM takes 16")
        );
        assert!(
            err(&format!(
                "{key}[[bpsec.sign]]\ndestinations = \"*\"\nkey = \"h\"\nsha = 1"
            ))
            .contains("not 256, 384 or 512")
        );
        assert!(
            err(&format!(
                "{key}[[bpsec.sign]]\ndestinations = \"a*b\"\nkey = \"h\""
            ))
            .contains("endpoint pattern")
        );
        assert!(
            err(&format!(
                "{key}[[bpsec.sign]]\ndestinations = \"*\"\nkey = \"h\"\nscope = [\"all\"]"
            ))
            .contains("bpsec.sign.scope")
        );
        assert!(err("[[bpsec.key]]\nname = \"k\"\nhex = \"abc\"").contains("hex digits"));
        assert!(err("[[bpsec.key]]\nname = \"k\"").contains("either hex"));
        assert!(err(&format!("{key}{key}")).contains("a second key"));
    }

    #[test]
    fn a_bpsec_key_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("ferry-bpsec-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.key");
        std::fs::write(&path, format!("{}\n", "AB".repeat(32))).unwrap();
        let text = "[[bpsec.key]]\nname = \"k\"\nfile = \"k.key\"\n";
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Config::from_toml_in(text, "x", Some(&dir))
            .unwrap_err()
            .to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = format!("{text}[[bpsec.verify]]\nsources = \"*\"\nkey = \"k\"\n");
        let c = Config::from_toml_in(&text, "x", Some(&dir)).unwrap();
        assert_eq!(c.bpsec.verify[0].key.as_bytes(), &[0xab; 32]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
