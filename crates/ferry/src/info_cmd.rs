//! `ferry status`, `ferry peers`, `ferry routes`, `ferry bundles`: what a running node knows,
//! as tables (or the API's JSON with `--json`).

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{BundleInfo, PeerInfo, RouteInfo, Status, dtn_now_ms};
use crate::client::{ApiArgs, Client};
use crate::output::{
    Align, Table, fmt_bytes, fmt_secs, key_values, print_json_pretty, write_stdout,
};

/// Which listing to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Info {
    /// `GET /v1/status`.
    Status,
    /// `GET /v1/peers`.
    Peers,
    /// `GET /v1/routes`.
    Routes,
    /// `GET /v1/bundles`.
    Bundles,
}

/// `ferry metrics`: `GET /metrics` as it comes. It is OpenMetrics text, a machine-readable
/// format of its own, so `--json` is refused rather than ignored: a script that asks for JSON
/// gets an error it can read instead of text it cannot parse as JSON.
pub(crate) fn run_metrics(args: ApiArgs) -> Result<()> {
    if args.json {
        return Err(crate::exit::usage(
            "ferry metrics prints OpenMetrics text (docs/api.md, Metrics), not JSON; \
             leave out --json",
        ));
    }
    let text = Client::new(&args.api).get_text("/metrics")?;
    Ok(write_stdout(&text)?)
}

pub(crate) fn run(info: Info, args: ApiArgs) -> Result<()> {
    let client = Client::new(&args.api);
    let path = match info {
        Info::Status => "/v1/status",
        Info::Peers => "/v1/peers",
        Info::Routes => "/v1/routes",
        Info::Bundles => "/v1/bundles",
    };
    let value = client.get_value(path)?;
    if args.json {
        // The answer as the API gave it, fields this version does not know included.
        return print_json_pretty(&value);
    }
    let text = match info {
        Info::Status => status_text(&parse(value)?),
        Info::Peers => peers_table(&parse::<Vec<PeerInfo>>(value)?),
        Info::Routes => routes_table(&parse::<Vec<RouteInfo>>(value)?, dtn_now_ms()),
        Info::Bundles => bundles_table(&parse::<Vec<BundleInfo>>(value)?, dtn_now_ms()),
    };
    Ok(write_stdout(&text)?)
}

fn parse<T: DeserializeOwned>(value: Value) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| anyhow::anyhow!("unexpected answer from the ferry node API: {e}"))
}

fn status_text(s: &Status) -> String {
    let c = &s.counters;
    let quota = if s.store_quota > 0 {
        format!(
            " of {} ({:.1}%)",
            fmt_bytes(s.store_quota),
            s.stored_bytes as f64 * 100.0 / s.store_quota as f64
        )
    } else {
        String::new()
    };
    let mut pairs = vec![
        ("node", s.node_id.clone()),
        ("version", s.version.clone()),
        ("uptime", fmt_secs(s.uptime_s)),
        ("strategy", s.strategy.clone()),
        ("peers", s.peers.to_string()),
        (
            "store",
            format!(
                "{}, {}{quota}",
                plural(s.stored_bundles, "bundle"),
                fmt_bytes(s.stored_bytes)
            ),
        ),
        (
            "inbox",
            format!("{} waiting", plural(s.inbox_bundles, "bundle")),
        ),
        ("received", plural(c.bundles_received, "bundle")),
        (
            "sent",
            format!(
                "{}, {}",
                plural(c.bundles_sent, "bundle"),
                fmt_bytes(c.bytes_sent)
            ),
        ),
        ("delivered", c.delivered.to_string()),
        ("duplicates", c.duplicates.to_string()),
        ("dropped", c.dropped.to_string()),
        (
            "calls",
            format!(
                "{} made; {} accepted, {} refused, {} ({} running), {} answered from the cache, {} forged messages dropped",
                s.rpc.calls_made,
                s.rpc.calls_accepted,
                s.rpc.calls_rejected,
                plural(s.rpc.executions, "execution"),
                s.rpc.running,
                plural(s.rpc.duplicates, "duplicate"),
                s.rpc.forged
            ),
        ),
        ("key", s.public_key.clone()),
    ];
    if s.rpc.key_mismatches > 0 {
        pairs.push((
            "key alarms",
            format!(
                "{} signed by another key than the sender's known one, dropped (ferry keys)",
                plural(s.rpc.key_mismatches, "message")
            ),
        ));
    }
    pairs.push((
        "listening",
        if s.listening.is_empty() {
            "-".into()
        } else {
            s.listening.join(", ")
        },
    ));
    key_values(&pairs)
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn peers_table(peers: &[PeerInfo]) -> String {
    if peers.is_empty() {
        return "no peers\n".into();
    }
    let mut t = Table::new(&[
        ("NODE", Align::Left),
        ("CLA", Align::Left),
        ("ADDRESS", Align::Left),
        ("DIR", Align::Left),
        ("UP", Align::Right),
        ("QUEUED", Align::Right),
    ]);
    for p in peers {
        t.row(vec![
            p.node_id.clone(),
            p.cla.join(","),
            peer_address(p),
            if p.outbound { "out" } else { "in" }.into(),
            fmt_secs(p.up_s),
            fmt_bytes(p.queued_bytes),
        ]);
    }
    t.render()
}

/// Where the peer can be reached: its listening address; for a session it opened whose listening
/// address nothing announced, its host alone (the session's port is an ephemeral one, of no use
/// to anyone dialling it).
fn peer_address(p: &PeerInfo) -> String {
    if let Some(listen) = &p.listen_address {
        return listen.clone();
    }
    match p.address.parse::<std::net::SocketAddr>() {
        Ok(remote) => remote.ip().to_string(),
        Err(_) => p.address.clone(),
    }
}

fn routes_table(routes: &[RouteInfo], now_ms: u64) -> String {
    if routes.is_empty() {
        return "no routes\n".into();
    }
    let planned = routes.iter().any(|r| r.via == "plan");
    let mut columns = vec![
        ("DESTINATION", Align::Left),
        ("NEXT HOP", Align::Left),
        ("HOPS", Align::Right),
    ];
    if planned {
        columns.extend([
            ("VIA", Align::Left),
            ("DEPARTS", Align::Right),
            ("ARRIVES", Align::Right),
        ]);
    }
    let mut t = Table::new(&columns);
    let when = |ms: Option<u64>| match ms {
        None => String::new(),
        Some(ms) if ms <= now_ms => "now".into(),
        Some(ms) => format!("in {}", fmt_secs((ms - now_ms).div_ceil(1000))),
    };
    for r in routes {
        let mut row = vec![
            r.destination.clone(),
            r.next_hop.clone(),
            r.hops.to_string(),
        ];
        if planned {
            row.extend([r.via.clone(), when(r.departs_ms), when(r.arrives_ms)]);
        }
        t.row(row);
    }
    t.render()
}

fn bundles_table(bundles: &[BundleInfo], now_ms: u64) -> String {
    if bundles.is_empty() {
        return "no bundles stored\n".into();
    }
    let mut t = Table::new(&[
        ("ID", Align::Left),
        ("DESTINATION", Align::Left),
        ("SIZE", Align::Right),
        ("EXPIRES", Align::Right),
        ("RETENTION", Align::Left),
    ]);
    for b in bundles {
        let expires = if b.expiry_ms > now_ms {
            format!("in {}", fmt_secs((b.expiry_ms - now_ms).div_ceil(1000)))
        } else {
            "expired".into()
        };
        t.row(vec![
            b.id.clone(),
            b.destination.clone(),
            fmt_bytes(b.size),
            expires,
            b.retention.clone(),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use daemon::control::Counters;

    #[test]
    fn status_lines() {
        let s = Status {
            node_id: "dtn://a/".into(),
            version: "0.1.0".into(),
            uptime_s: 3725,
            strategy: "epidemic".into(),
            peers: 2,
            stored_bundles: 1,
            stored_bytes: 1536,
            store_quota: 1 << 30,
            inbox_bundles: 3,
            counters: Counters {
                bundles_received: 10,
                bundles_sent: 4,
                bytes_sent: 2048,
                delivered: 3,
                duplicates: 1,
                dropped: 0,
            },
            listening: vec!["tcpcl://127.0.0.1:4556".into(), "udp://0.0.0.0:4556".into()],
            public_key: "ab".repeat(32),
            rpc: daemon::control::RpcCounters {
                calls_made: 2,
                calls_accepted: 5,
                calls_rejected: 1,
                executions: 5,
                duplicates: 1,
                forged: 0,
                untrusted_notices: 0,
                key_mismatches: 0,
                running: 1,
                calls_in_memory: 2,
                served_in_memory: 5,
                file_bytes: 0,
                file_budget: 1 << 30,
            },
        };
        let text = status_text(&s);
        assert!(text.starts_with("node        dtn://a/\n"), "{text}");
        assert!(!text.contains("key alarms"), "{text}");
        assert!(text.contains("uptime      1h 2m\n"), "{text}");
        assert!(
            text.contains("store       1 bundle, 1.5 KiB of 1.0 GiB (0.0%)\n"),
            "{text}"
        );
        assert!(text.contains("inbox       3 bundles waiting\n"), "{text}");
        assert!(text.contains("sent        4 bundles, 2.0 KiB\n"), "{text}");
        assert!(
            text.contains("calls       2 made; 5 accepted, 1 refused, 5 executions (1 running), 1 duplicate answered from the cache, 0 forged messages dropped\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("key         {}\n", "ab".repeat(32))),
            "{text}"
        );
        assert!(
            text.contains("listening   tcpcl://127.0.0.1:4556, udp://0.0.0.0:4556\n"),
            "{text}"
        );
        let mut alarmed = s.clone();
        alarmed.rpc.key_mismatches = 3;
        let text = status_text(&alarmed);
        assert!(
            text.contains("key alarms  3 messages signed by another key than the sender's known one, dropped (ferry keys)\n"),
            "{text}"
        );
    }

    #[test]
    fn peers_as_a_table() {
        let peers = vec![
            PeerInfo {
                node_id: "dtn://b/".into(),
                cla: vec!["tcpcl".into(), "udp".into()],
                address: "10.0.0.2:4556".into(),
                listen_address: Some("10.0.0.2:4556".into()),
                outbound: true,
                up_s: 75,
                queued_bytes: 0,
            },
            PeerInfo {
                node_id: "dtn://charlie/".into(),
                cla: vec!["tcpcl".into()],
                address: "10.0.0.3:40000".into(),
                listen_address: None,
                outbound: false,
                up_s: 5,
                queued_bytes: 3 << 20,
            },
            PeerInfo {
                node_id: "dtn://d/".into(),
                cla: vec!["tcpcl".into()],
                address: "[fe80::1]:40001".into(),
                listen_address: Some("[fe80::1]:4556".into()),
                outbound: false,
                up_s: 0,
                queued_bytes: 0,
            },
        ];
        assert_eq!(
            peers_table(&peers),
            "NODE            CLA        ADDRESS         DIR      UP   QUEUED\n\
             dtn://b/        tcpcl,udp  10.0.0.2:4556   out  1m 15s      0 B\n\
             dtn://charlie/  tcpcl      10.0.0.3        in       5s  3.0 MiB\n\
             dtn://d/        tcpcl      [fe80::1]:4556  in       0s      0 B\n"
        );
        assert_eq!(peers_table(&[]), "no peers\n");
    }

    #[test]
    fn routes_and_bundles_as_tables() {
        let mut routes = vec![RouteInfo {
            destination: "dtn://c/".into(),
            next_hop: "dtn://b/".into(),
            hops: 2,
            via: "mesh".into(),
            departs_ms: None,
            arrives_ms: None,
        }];
        assert_eq!(
            routes_table(&routes, 0),
            "DESTINATION  NEXT HOP  HOPS\ndtn://c/     dtn://b/     2\n"
        );
        // Planned routes add when the journey starts and ends.
        routes.push(RouteInfo {
            destination: "dtn://far/".into(),
            next_hop: "dtn://mule/".into(),
            hops: 3,
            via: "plan".into(),
            departs_ms: Some(1_000),
            arrives_ms: Some(601_000),
        });
        assert_eq!(
            routes_table(&routes, 1_000),
            "DESTINATION  NEXT HOP     HOPS  VIA   DEPARTS    ARRIVES\n\
             dtn://c/     dtn://b/        2  mesh\n\
             dtn://far/   dtn://mule/     3  plan      now  in 10m 0s\n"
        );
        let bundles = vec![
            BundleInfo {
                id: "dtn://a/-1000-1".into(),
                destination: "dtn://c/inbox".into(),
                size: 100,
                expiry_ms: 61_000,
                retention: "originated".into(),
            },
            BundleInfo {
                id: "dtn://a/-1000-2".into(),
                destination: "dtn://c/inbox".into(),
                size: 100,
                expiry_ms: 500,
                retention: "carried".into(),
            },
        ];
        let text = bundles_table(&bundles, 1000);
        assert!(text.contains("in 1m 0s"), "{text}");
        assert!(text.contains("expired"), "{text}");
        assert_eq!(bundles_table(&[], 0), "no bundles stored\n");
    }
}
