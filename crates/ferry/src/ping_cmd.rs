//! `ferry ping`: round trips to a node's echo service, like dtnping.
//!
//! Each ping is a bundle from a fresh endpoint of this node (`dtn://me/ping-<random>`) to
//! `<node>/echo`, carrying a sequence number and its send time; the echo service sends the payload
//! back to the source. Answers are collected from that endpoint with long polls and acknowledged
//! one by one, so none stays behind in the node's inbox.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use base64::Engine as _;
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::api::{ClassArg, SendRequest, Status, Waiting};
use crate::client::{ApiArgs, Client, api_duration, waiting_item_path, waiting_path};
use crate::exit::Failure;
use crate::names;
use crate::output::{print_json_pretty, write_stdout};

/// A ping payload starts with this, then the sequence number (u32) and the send time (u64, µs
/// since the Unix epoch), big-endian.
const MAGIC: &[u8; 4] = b"FYPG";
/// Bytes of that header: the smallest `-s`.
const HEADER_LEN: usize = 16;
/// The largest `-s`: pings are for latency, not bulk transfer.
const MAX_SIZE: i64 = 1 << 20;
/// Answers listed per long poll.
const BATCH: usize = 64;

/// Arguments of `ferry ping`.
#[derive(Args, Debug)]
pub(crate) struct PingArgs {
    /// The node to ping: bravo, dtn://bravo/ or ipn:2 (its echo service answers: dtn://bravo/echo,
    /// ipn:2.7).
    node: String,
    /// Pings to send.
    #[arg(short = 'c', long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
    /// Time between pings.
    #[arg(short = 'i', long, default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Payload bytes of each ping (at least 16: sequence number and send time).
    #[arg(short = 's', long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(HEADER_LEN as i64..=MAX_SIZE))]
    size: u32,
    /// How long to wait for each answer (also the lifetime of each ping).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Forwarding class: dtn (store-carry-forward) or datagram (needs a live path now).
    #[arg(long, value_enum, default_value = "dtn")]
    class: PingClass,
    #[command(flatten)]
    api: ApiArgs,
}

/// The classes a ping may use (a stream is not a sequence of independent probes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PingClass {
    /// Store-carry-forward.
    Dtn,
    /// Real time, best effort.
    Datagram,
}

impl From<PingClass> for ClassArg {
    fn from(c: PingClass) -> Self {
        match c {
            PingClass::Dtn => ClassArg::Dtn,
            PingClass::Datagram => ClassArg::Datagram,
        }
    }
}

pub(crate) fn run(args: PingArgs) -> Result<()> {
    let (node, echo) = echo_endpoint(&args.node)?;
    let client = Client::new(&args.api.api);
    let status: Status = client.get_json("/v1/status")?;
    let source = own_endpoint(&status.node_id, random_tag())?;
    // Answers are listed by the service's name on a dtn: node, by the full id on an ipn: one.
    let service = match source.strip_prefix(&status.node_id) {
        Some(name) if status.node_id.starts_with("dtn:") => name.to_owned(),
        _ => source.clone(),
    };
    let quiet = args.api.json;
    if !quiet {
        write_stdout(&format!(
            "PING {echo} from {source}: {} bytes, class {}\n",
            args.size,
            ClassArg::from(args.class).as_str()
        ))?;
    }

    let started = Instant::now();
    let mut stats = Stats::default();
    // Pings sent and not yet answered: seq → (when, the send time in the payload).
    let mut outstanding: BTreeMap<u32, (Instant, u64)> = BTreeMap::new();
    let mut next_seq = 1;
    let mut next_send = started;
    loop {
        let now = Instant::now();
        if next_seq <= args.count && now >= next_send {
            let sent_us = unix_micros();
            let request = SendRequest {
                source: Some(source.clone()),
                payload_base64: Some(
                    base64::engine::general_purpose::STANDARD.encode(ping_payload(
                        next_seq,
                        sent_us,
                        args.size as usize,
                    )),
                ),
                // A ping nobody waits for any more is of no use to anyone: let it expire.
                lifetime: Some(api_duration(args.timeout.max(Duration::from_secs(1)))),
                class: Some(ClassArg::from(args.class).as_str().to_owned()),
                ..SendRequest::to(echo.clone())
            };
            stats.transmitted += 1;
            // The round trip counts from before the request: an answer can be back before the
            // node has even replied to the send.
            let at = Instant::now();
            match client.post_json("/v1/bundles", &request) {
                Ok(_) => {
                    outstanding.insert(next_seq, (at, sent_us));
                }
                // The node refused this one (no route now, store full): say so and go on, as
                // ping does when a send fails.
                Err(e) if e.is_api_error() => {
                    stats.errors += 1;
                    if !quiet {
                        eprintln!("ferry: seq={next_seq}: {e}");
                    }
                }
                Err(e) => return Err(e.into()),
            }
            next_seq += 1;
            next_send += args.interval;
            continue;
        }
        outstanding.retain(|_, (at, _)| now.duration_since(*at) < args.timeout);
        if next_seq > args.count && outstanding.is_empty() {
            break;
        }
        // Listen until the next send is due, or until the last answer would be too late.
        let until = if next_seq <= args.count {
            next_send
        } else {
            outstanding
                .values()
                .map(|(at, _)| *at + args.timeout)
                .max()
                .unwrap_or(now)
        };
        let wait = until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        let listed: Vec<Waiting> =
            client.long_poll(&waiting_path(&service, BATCH, wait, true), wait)?;
        for item in listed {
            if let Some((seq, rtt)) = answer(&item, &mut outstanding) {
                stats.rtts.push(rtt);
                if !quiet {
                    write_stdout(&format!(
                        "{} bytes from {}: seq={seq} time={:.3} ms\n",
                        item.size,
                        node_of(&item.source).unwrap_or_else(|| node.clone()),
                        millis(rtt)
                    ))?;
                }
            }
            // Ours either way (late, duplicated or not): leave nothing behind in the inbox.
            match client.delete(&waiting_item_path(&service, item.seq)) {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
        }
    }

    let summary = stats.summary(&node, started.elapsed());
    let failed = (summary.received == 0).then(|| {
        Failure::new(
            crate::exit::Status::NoResult,
            format!("no answer from {node}"),
        )
    });
    match (failed, args.api.json) {
        (None, true) => print_json_pretty(&summary),
        (None, false) => Ok(write_stdout(&summary.text())?),
        // One document: the error, with the summary of what was sent.
        (Some(failure), true) => Err(failure
            .with_document("summary", serde_json::to_value(&summary)?)
            .into()),
        (Some(failure), false) => {
            write_stdout(&summary.text())?;
            Err(failure.into())
        }
    }
}

/// The sequence number and round-trip time of an answer to an outstanding ping (which it
/// removes), if it is one: late answers, duplicates and strangers are not.
fn answer(
    item: &Waiting,
    outstanding: &mut BTreeMap<u32, (Instant, u64)>,
) -> Option<(u32, Duration)> {
    let (seq, sent_us) = ping_header(&decode(item))?;
    match outstanding.get(&seq) {
        Some(&(at, us)) if us == sent_us => {
            outstanding.remove(&seq);
            Some((seq, at.elapsed()))
        }
        _ => None,
    }
}

fn decode(item: &Waiting) -> Vec<u8> {
    item.payload_base64
        .as_deref()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default()
}

/// A ping's payload: header, then a filler pattern up to `size` bytes.
fn ping_payload(seq: u32, sent_us: u64, size: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(size.max(HEADER_LEN));
    p.extend_from_slice(MAGIC);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&sent_us.to_be_bytes());
    p.extend((HEADER_LEN..size).map(|i| (i % 251) as u8));
    p
}

/// Sequence number and send time of a ping payload.
fn ping_header(payload: &[u8]) -> Option<(u32, u64)> {
    let header = payload.get(..HEADER_LEN)?;
    if &header[..4] != MAGIC {
        return None;
    }
    let seq = u32::from_be_bytes(header[4..8].try_into().ok()?);
    let sent_us = u64::from_be_bytes(header[8..16].try_into().ok()?);
    Some((seq, sent_us))
}

/// The node id and echo endpoint for a NODE argument (any of its names, [`names::node`]).
fn echo_endpoint(node: &str) -> Result<(String, String)> {
    let node = names::node(node, false)?;
    Ok((node.to_string(), names::echo_of(&node).to_string()))
}

/// A fresh endpoint of this node for the answers: `dtn://me/ping-<tag>`, or on an `ipn:` node a
/// service number from the tag above the 32-bit range other applications use.
fn own_endpoint(node_id: &str, tag: u32) -> Result<String> {
    match node_id.parse::<wire::Eid>() {
        Ok(wire::Eid::Ipn { node, .. }) => {
            Ok(format!("ipn:{node}.{}", (1u64 << 32) | u64::from(tag)))
        }
        Ok(wire::Eid::Dtn(_)) => Ok(format!("{node_id}ping-{tag:08x}")),
        _ => bail!("the node's id {node_id:?} is neither dtn: nor ipn:"),
    }
}

/// The node part of an endpoint: `dtn://b/echo` → `dtn://b/`, `ipn:5.7` → `ipn:5.0`.
fn node_of(endpoint: &str) -> Option<String> {
    endpoint
        .parse::<wire::Eid>()
        .ok()
        .map(|e| e.node_id().to_string())
}

/// Eight hex digits that differ between runs: the clock's nanoseconds and the process id, mixed
/// (SplitMix64's finaliser) so that runs started together still differ in every digit.
fn random_tag() -> u32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos ^ (u64::from(std::process::id()) << 32);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x as u32
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Milliseconds to the microsecond (finer is noise, and would clutter `--json`).
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// What happened to the pings.
#[derive(Debug, Default)]
struct Stats {
    /// Pings sent (or tried).
    transmitted: u32,
    /// Sends the node refused.
    errors: u32,
    /// Round-trip times of the answers, in arrival order.
    rtts: Vec<Duration>,
}

/// The closing summary (`--json` prints this).
#[derive(Debug, Serialize, PartialEq)]
struct Summary {
    node: String,
    transmitted: u32,
    received: u32,
    errors: u32,
    loss_percent: f64,
    time_ms: f64,
    min_ms: Option<f64>,
    avg_ms: Option<f64>,
    p50_ms: Option<f64>,
    max_ms: Option<f64>,
    rtt_ms: Vec<f64>,
}

impl Stats {
    fn summary(&self, node: &str, time: Duration) -> Summary {
        let received = self.rtts.len() as u32;
        let loss_percent = if self.transmitted == 0 {
            0.0
        } else {
            f64::from(self.transmitted - received) * 100.0 / f64::from(self.transmitted)
        };
        let mut sorted = self.rtts.clone();
        sorted.sort();
        let avg =
            (!sorted.is_empty()).then(|| sorted.iter().sum::<Duration>() / sorted.len() as u32);
        // Nearest rank: the smallest value at or above half of them.
        let p50 = sorted
            .get(sorted.len().div_ceil(2).saturating_sub(1))
            .copied();
        Summary {
            node: node.to_owned(),
            transmitted: self.transmitted,
            received,
            errors: self.errors,
            loss_percent,
            time_ms: millis(time),
            min_ms: sorted.first().copied().map(millis),
            avg_ms: avg.map(millis),
            p50_ms: p50.map(millis),
            max_ms: sorted.last().copied().map(millis),
            rtt_ms: self.rtts.iter().copied().map(millis).collect(),
        }
    }
}

impl Summary {
    /// The summary as ping prints it.
    fn text(&self) -> String {
        let loss = if self.loss_percent.fract() == 0.0 {
            format!("{:.0}%", self.loss_percent)
        } else {
            format!("{:.1}%", self.loss_percent)
        };
        let errors = if self.errors > 0 {
            format!(", {} refused", self.errors)
        } else {
            String::new()
        };
        let mut out = format!(
            "--- {} ping statistics ---\n\
             {} bundles transmitted, {} received{errors}, {loss} loss, time {:.0} ms\n",
            self.node, self.transmitted, self.received, self.time_ms
        );
        if let (Some(min), Some(avg), Some(p50), Some(max)) =
            (self.min_ms, self.avg_ms, self.p50_ms, self.max_ms)
        {
            out.push_str(&format!(
                "rtt min/avg/p50/max = {min:.3}/{avg:.3}/{p50:.3}/{max:.3} ms\n"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ping: PingArgs,
    }

    fn parse(args: &[&str]) -> Result<PingArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("ping").chain(args.iter().copied())).map(|c| c.ping)
    }

    #[test]
    fn defaults_and_limits() {
        let a = parse(&["dtn://b/"]).unwrap();
        assert_eq!(
            (a.count, a.interval, a.size, a.timeout, a.class),
            (
                5,
                Duration::from_secs(1),
                64,
                Duration::from_secs(5),
                PingClass::Dtn
            )
        );
        let a = parse(&[
            "dtn://b", "-c", "3", "-i", "200ms", "-s", "16", "--class", "datagram",
        ])
        .unwrap();
        assert_eq!((a.count, a.size, a.class), (3, 16, PingClass::Datagram));
        assert!(
            parse(&["dtn://b/", "-s", "15"]).is_err(),
            "below the header"
        );
        assert!(parse(&["dtn://b/", "-c", "0"]).is_err());
        assert!(parse(&["dtn://b/", "--class", "stream"]).is_err());
    }

    #[test]
    fn node_arguments() {
        let both = |n: &str| echo_endpoint(n).unwrap();
        assert_eq!(both("dtn://b/"), ("dtn://b/".into(), "dtn://b/echo".into()));
        assert_eq!(both("dtn://b"), ("dtn://b/".into(), "dtn://b/echo".into()));
        assert_eq!(
            both("bravo"),
            ("dtn://bravo/".into(), "dtn://bravo/echo".into())
        );
        assert_eq!(both("ipn:5"), ("ipn:5.0".into(), "ipn:5.7".into()));
        assert_eq!(both("ipn:5.0"), ("ipn:5.0".into(), "ipn:5.7".into()));
        assert!(echo_endpoint("dtn://b/inbox").is_err());
        assert!(echo_endpoint("dtn:///").is_err());
        assert_eq!(
            own_endpoint("dtn://a/", 0x1f).unwrap(),
            "dtn://a/ping-0000001f"
        );
        assert_eq!(own_endpoint("ipn:5.0", 3).unwrap(), "ipn:5.4294967299");
        assert_eq!(node_of("dtn://b/echo").as_deref(), Some("dtn://b/"));
        assert_eq!(node_of("ipn:5.7").as_deref(), Some("ipn:5.0"));
        assert_eq!(node_of("nonsense"), None);
    }

    #[test]
    fn payloads_carry_seq_and_time() {
        let p = ping_payload(7, 1_234_567, 64);
        assert_eq!(p.len(), 64);
        assert_eq!(ping_header(&p), Some((7, 1_234_567)));
        assert_eq!(ping_payload(1, 2, 16).len(), 16);
        assert_eq!(ping_header(&p[..15]), None);
        assert_eq!(ping_header(b"not a ping payload at all"), None);
    }

    #[test]
    fn answers_match_outstanding_pings_once() {
        let item = |seq: u32, sent: u64| Waiting {
            seq: 1,
            id: "dtn://b/echo-1-0".into(),
            source: "dtn://b/echo".into(),
            destination: "dtn://a/ping-1".into(),
            created_ms: 1,
            size: 16,
            payload_base64: Some(
                base64::engine::general_purpose::STANDARD.encode(ping_payload(seq, sent, 16)),
            ),
        };
        let mut outstanding =
            BTreeMap::from([(1, (Instant::now(), 100)), (2, (Instant::now(), 200))]);
        assert!(
            answer(&item(2, 999), &mut outstanding).is_none(),
            "wrong send time"
        );
        assert!(answer(&item(2, 200), &mut outstanding).is_some());
        assert!(
            answer(&item(2, 200), &mut outstanding).is_none(),
            "duplicate"
        );
        assert!(
            answer(&item(3, 300), &mut outstanding).is_none(),
            "never sent"
        );
        assert_eq!(outstanding.len(), 1);
    }

    #[test]
    fn statistics() {
        let ms = Duration::from_millis;
        let stats = Stats {
            transmitted: 5,
            errors: 0,
            rtts: vec![ms(4), ms(1), ms(3), ms(2)],
        };
        let s = stats.summary("dtn://b/", ms(4000));
        assert_eq!((s.transmitted, s.received), (5, 4));
        assert_eq!(s.loss_percent, 20.0);
        assert_eq!(s.min_ms, Some(1.0));
        assert_eq!(s.avg_ms, Some(2.5));
        assert_eq!(s.p50_ms, Some(2.0));
        assert_eq!(s.max_ms, Some(4.0));
        assert_eq!(s.rtt_ms, vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(
            s.text(),
            "--- dtn://b/ ping statistics ---\n\
             5 bundles transmitted, 4 received, 20% loss, time 4000 ms\n\
             rtt min/avg/p50/max = 1.000/2.500/2.000/4.000 ms\n"
        );

        let odd = Stats {
            transmitted: 3,
            errors: 1,
            rtts: vec![ms(5), ms(1), ms(9)],
        }
        .summary("dtn://b/", ms(2000));
        assert_eq!(odd.p50_ms, Some(5.0));
        assert_eq!(odd.loss_percent, 0.0);

        let none = Stats {
            transmitted: 3,
            errors: 1,
            rtts: vec![],
        }
        .summary("dtn://b/", ms(7000));
        assert_eq!(none.loss_percent, 100.0);
        assert_eq!((none.min_ms, none.p50_ms), (None, None));
        assert_eq!(
            none.text(),
            "--- dtn://b/ ping statistics ---\n\
             3 bundles transmitted, 0 received, 1 refused, 100% loss, time 7000 ms\n"
        );
        let third = Stats {
            transmitted: 3,
            errors: 0,
            rtts: vec![ms(1)],
        }
        .summary("x", ms(1));
        assert!(third.text().contains(", 66.7% loss"), "{}", third.text());
    }

    #[test]
    fn tags_differ_between_runs() {
        let a = random_tag();
        std::thread::sleep(Duration::from_micros(10));
        assert_ne!(a, random_tag());
    }
}
