//! The daemon's configuration: a TOML file, every key optional. With no file at all the node runs
//! with the defaults below, which are also the documentation of the format (README "Configuration").
//!
//! ```toml
//! node_id = "dtn://alpha/"          # default: dtn://<host name>/
//! data_dir = "/var/lib/ferry"       # default: $XDG_DATA_HOME/ferry or ~/.local/share/ferry
//! store_quota = "10GB"              # default 10 GB
//! strategy = "epidemic"             # epidemic | spray-and-wait[:COPIES] | direct
//!
//! [tcpcl]
//! listen = ["0.0.0.0:4556"]         # TCPCLv4 (RFC 9174); [] to accept no sessions
//! keepalive = "30s"
//! ignore_peer_transfer_mru = false  # true sends whole bundles above a peer's transfer MRU
//!                                   # (dtn7-rs 0.21 announces 64000 bytes, takes any size and
//!                                   # cannot reassemble fragments)
//!
//! [udp]
//! listen = "0.0.0.0:4556"           # one bundle per datagram, for real-time traffic; "" for none
//! max_bundle = "60KB"
//!
//! [discovery]
//! enabled = true
//! port = 4551                       # beacons are sent to and received on this UDP port
//! address = "255.255.255.255"       # broadcast, or a multicast group such as "224.0.0.108"
//! interfaces = []                   # names ("eth0"); [] sends on the default route's interface
//! period = "2s"
//!
//! [[peers]]                         # static TCPCL peers, reconnected with backoff
//! address = "10.0.0.2:4556"
//!
//! [api]
//! listen = "127.0.0.1:4550"         # HTTP/JSON and WebSocket; "" for none
//! max_payload = "256MiB"
//! ```

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
/// Default UDP port of discovery beacons (the IP Neighbor Discovery port, 4551).
pub const DEFAULT_DISCOVERY_PORT: u16 = 4551;
/// Default address of the local API.
pub const DEFAULT_API_ADDR: &str = "127.0.0.1:4550";

/// A complete, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id.
    pub node_id: Eid,
    /// Where the store lives; `None` means the user's default data directory.
    pub data_dir: Option<PathBuf>,
    /// Store quota in bytes.
    pub store_quota: u64,
    /// Store-carry-forward strategy.
    pub strategy: StrategyKind,
    /// TCPCL listen addresses.
    pub tcpcl_listen: Vec<SocketAddr>,
    /// TCPCL keepalive interval offered.
    pub keepalive: Duration,
    /// Send bundles larger than a peer's transfer MRU whole instead of fragmenting them to it.
    pub ignore_peer_transfer_mru: bool,
    /// UDP convergence layer address, if any.
    pub udp_listen: Option<SocketAddr>,
    /// Largest encoded bundle sent in one UDP datagram.
    pub udp_max_bundle: usize,
    /// Discovery settings.
    pub discovery: Discovery,
    /// Static peers.
    pub peers: Vec<SocketAddr>,
    /// API listen address, if any.
    pub api_listen: Option<SocketAddr>,
    /// Largest payload the API accepts.
    pub api_max_payload: usize,
    /// Seed of the node's randomness (beacon jitter, stream ids); the daemon draws it at start.
    pub seed: u64,
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
    /// Interfaces to send on; empty means the default one.
    pub interfaces: Vec<String>,
    /// Time between beacons.
    pub period: Duration,
}

/// The file's shape. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    node_id: Option<String>,
    data_dir: Option<PathBuf>,
    store_quota: Option<String>,
    strategy: Option<String>,
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TcpclFile {
    listen: Option<Vec<String>>,
    keepalive: Option<String>,
    ignore_peer_transfer_mru: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UdpFile {
    listen: Option<String>,
    max_bundle: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscoveryFile {
    enabled: Option<bool>,
    port: Option<u16>,
    address: Option<String>,
    interfaces: Option<Vec<String>>,
    period: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerFile {
    address: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiFile {
    listen: Option<String>,
    max_payload: Option<String>,
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
        Self::from_toml(&text, host_name)
            .map_err(|ConfigError(m)| ConfigError(format!("{}: {m}", path.display())))
    }

    /// Parses and checks configuration text.
    pub fn from_toml(text: &str, host_name: &str) -> Result<Self, ConfigError> {
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
        };
        if discovery.period < Duration::from_millis(100) {
            return Err(ConfigError(
                "discovery.period must be at least 100ms".into(),
            ));
        }
        let keepalive = duration("tcpcl.keepalive", file.tcpcl.keepalive, "30s")?;
        if keepalive.as_secs() > u64::from(u16::MAX) {
            return Err(ConfigError(
                "tcpcl.keepalive must be at most 65535 s".into(),
            ));
        }
        Ok(Self {
            node_id,
            data_dir: file.data_dir,
            store_quota: size("store_quota", file.store_quota, "10GB")?,
            strategy: file
                .strategy
                .as_deref()
                .unwrap_or("epidemic")
                .parse()
                .map_err(|e| ConfigError(format!("strategy: {e}")))?,
            tcpcl_listen,
            keepalive,
            ignore_peer_transfer_mru: file.tcpcl.ignore_peer_transfer_mru.unwrap_or(false),
            udp_listen: optional_addr(
                "udp.listen",
                file.udp.listen,
                &format!("0.0.0.0:{DEFAULT_UDP_PORT}"),
            )?,
            udp_max_bundle: usize::try_from(size("udp.max_bundle", file.udp.max_bundle, "60KB")?)
                .unwrap_or(usize::MAX)
                .min(65_000),
            discovery,
            peers: file
                .peers
                .iter()
                .map(|p| addr("peers.address", &p.address))
                .collect::<Result<_, _>>()?,
            api_listen: optional_addr("api.listen", file.api.listen, DEFAULT_API_ADDR)?,
            api_max_payload: usize::try_from(size(
                "api.max_payload",
                file.api.max_payload,
                "256MiB",
            )?)
            .unwrap_or(usize::MAX),
            seed: 0,
        })
    }
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

fn duration(key: &str, value: Option<String>, default: &str) -> Result<Duration, ConfigError> {
    let value = value.unwrap_or_else(|| default.to_owned());
    humantime::parse_duration(&value)
        .map_err(|e| ConfigError(format!("{key}: {value:?} is not a duration like 30s: {e}")))
}

fn size(key: &str, value: Option<String>, default: &str) -> Result<u64, ConfigError> {
    let value = value.unwrap_or_else(|| default.to_owned());
    parse_size(&value).map_err(|e| ConfigError(format!("{key}: {e}")))
}

/// Parses `1MB`, `100KiB`, `1.5GB`, `512` (bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 1MB or 100KiB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?} in {s:?}")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(bytes as u64)
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
        assert_eq!(c.store_quota, 10_000_000_000);
        assert_eq!(c.strategy, StrategyKind::Epidemic);
        assert_eq!(c.keepalive, Duration::from_secs(30));
        assert!(c.peers.is_empty());
    }

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::from_toml(&example, "x").unwrap();
        assert_eq!(c.node_id.to_string(), "dtn://alpha/");
        assert_eq!(c.peers, vec!["10.0.0.2:4556".parse().unwrap()]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/var/lib/ferry")));
    }

    #[test]
    fn every_key_is_checked_with_a_clear_message() {
        let err = |text: &str| Config::from_toml(text, "x").unwrap_err().to_string();
        assert!(err("node_id = \"alpha\"").contains("node_id"));
        assert!(err("node_id = \"dtn://a/b\"").contains("not a node id"));
        assert!(err("strategy = \"flood\"").contains("unknown strategy"));
        assert!(err("store_quota = \"lots\"").contains("store_quota"));
        assert!(err("[tcpcl]\nlisten = [\"localhost\"]").contains("tcpcl.listen"));
        assert!(err("[discovery]\nperiod = \"1ms\"").contains("at least 100ms"));
        assert!(err("[discovery]\naddress = \"eth0\"").contains("discovery.address"));
        assert!(err("colour = \"blue\"").contains("unknown field"));
        assert!(err("[[peers]]\naddress = \"host\"").contains("peers.address"));
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
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("MB").is_err());
    }
}
