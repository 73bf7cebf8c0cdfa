//! `ferry bench agent` (hidden): what `ferry bench` runs inside a namespace to reach a node's
//! API on that namespace's loopback. It feeds bundles (`feed`), counts the bundles delivered to
//! the bench endpoint (`delivered`, and `watch`, which prints each new count with the time it
//! saw it), reads a metric or the fragments held (`metric`, `fragments`) and times the API's
//! store and receive (`store`). It speaks Ferry's HTTP API (the token from `FERRY_API_TOKEN`)
//! and dtnd's (`/send`, `/status/info`); it never starts or stops a node, and every loop ends by
//! a count or a timeout.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use crate::client::{Client, encode_component, waiting_item_path, waiting_path};

#[derive(Args)]
pub(crate) struct AgentArgs {
    /// The node's implementation.
    #[arg(long, value_enum)]
    kind: Kind,
    /// The node's API, `host:port`.
    #[arg(long)]
    api: String,
    #[command(subcommand)]
    op: Op,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Kind {
    Ferry,
    Dtnd,
}

/// The endpoint the benchmarks deliver to (`dtn://b/bench`).
pub(crate) const ENDPOINT: &str = "bench";

#[derive(Subcommand)]
enum Op {
    /// Sends COUNT bundles of SIZE bytes to DEST; prints the seconds it took.
    Feed {
        #[arg(long)]
        dest: String,
        #[arg(long)]
        size: u64,
        #[arg(long)]
        count: u64,
        /// Requests at once.
        #[arg(long, default_value_t = 4)]
        threads: u64,
    },
    /// Prints how many bundles were delivered to the bench endpoint.
    Delivered,
    /// Polls the delivered count; prints `UNIX_MICROS COUNT` at each change, until COUNT is
    /// reached or the timeout passed.
    Watch {
        #[arg(long)]
        interval_ms: u64,
        #[arg(long)]
        until: u64,
        #[arg(long)]
        timeout_s: u64,
    },
    /// Prints a metric's value (Ferry's `/metrics`).
    Metric { name: String },
    /// Prints the payload bytes of fragments held for the bench endpoint (Ferry's store).
    Fragments,
    /// Sends COUNT bundles of SIZE to this node's own bench endpoint, then receives and
    /// acknowledges them; prints `STORE_SECONDS RECEIVE_SECONDS`.
    Store {
        #[arg(long)]
        dest: String,
        #[arg(long)]
        size: u64,
        #[arg(long)]
        count: u64,
    },
}

pub(crate) fn run(args: AgentArgs) -> Result<()> {
    let api = args.api.as_str();
    let mut out = std::io::stdout().lock();
    match args.op {
        Op::Feed {
            dest,
            size,
            count,
            threads,
        } => {
            let started = Instant::now();
            feed(args.kind, api, &dest, size, count, threads.clamp(1, 16))?;
            writeln!(out, "{:.6}", started.elapsed().as_secs_f64())?;
        }
        Op::Delivered => writeln!(out, "{}", delivered(args.kind, api)?)?,
        Op::Watch {
            interval_ms,
            until,
            timeout_s,
        } => {
            let deadline = Instant::now() + Duration::from_secs(timeout_s);
            let interval = Duration::from_millis(interval_ms.max(1));
            let mut last = None;
            while Instant::now() < deadline {
                // A failed poll (the node busy past the client's timeout) is tried again.
                if let Ok(n) = delivered(args.kind, api)
                    && last != Some(n)
                {
                    let us = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros();
                    writeln!(out, "{us} {n}")?;
                    out.flush()?;
                    last = Some(n);
                    if n >= until {
                        break;
                    }
                }
                std::thread::sleep(interval);
            }
        }
        Op::Metric { name } => {
            let text = Client::new(api)
                .get_text("/metrics")
                .map_err(|e| anyhow!("{e}"))?;
            writeln!(out, "{}", metric(&text, &name).unwrap_or(0))?;
        }
        Op::Fragments => {
            let list = Client::new(api)
                .get_value("/v1/bundles")
                .map_err(|e| anyhow!("{e}"))?;
            writeln!(out, "{}", fragment_bytes(&list))?;
        }
        Op::Store { dest, size, count } => {
            let client = Client::new(api);
            let payload = pattern(size);
            let path = raw_path(&dest);
            let started = Instant::now();
            for _ in 0..count {
                client
                    .post_raw(&path, std::io::Cursor::new(payload.clone()), size)
                    .map_err(|e| anyhow!("sending: {e}"))?;
            }
            let stored = started.elapsed();
            let started = Instant::now();
            let mut received = 0u64;
            // Bounded: every round takes at least one bundle or waits up to 1 s, 30 s in all.
            let deadline = Instant::now() + Duration::from_secs(30);
            while received < count {
                if Instant::now() > deadline {
                    bail!("only {received} of {count} bundles arrived in the inbox");
                }
                let list: Vec<Value> = client
                    .long_poll(
                        &waiting_path(ENDPOINT, 1000, Duration::from_secs(1), false),
                        Duration::from_secs(1),
                    )
                    .map_err(|e| anyhow!("listing: {e}"))?;
                for item in list {
                    let seq = item["seq"]
                        .as_u64()
                        .context("a listed bundle without seq")?;
                    let item_path = waiting_item_path(ENDPOINT, seq);
                    let (_, mut body) = client
                        .get_stream(&format!("{item_path}/payload"))
                        .map_err(|e| anyhow!("reading a payload: {e}"))?;
                    let mut got = Vec::new();
                    body.read_to_end(&mut got)?;
                    if got.len() as u64 != size {
                        bail!("a payload of {} bytes, not {size}", got.len());
                    }
                    client
                        .delete(&item_path)
                        .map_err(|e| anyhow!("acknowledging: {e}"))?;
                    received += 1;
                }
            }
            writeln!(
                out,
                "{:.6} {:.6}",
                stored.as_secs_f64(),
                started.elapsed().as_secs_f64()
            )?;
        }
    }
    Ok(())
}

/// A payload of `size` bytes that no layer can shrink to nothing (not all zeros).
fn pattern(size: u64) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

fn raw_path(dest: &str) -> String {
    format!(
        "/v1/bundles/raw?destination={}&lifetime=24h",
        encode_component(dest)
    )
}

/// dtnd's HTTP API, with a timeout (a node that stops answering fails the run, not hangs it).
fn dtnd_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn feed(kind: Kind, api: &str, dest: &str, size: u64, count: u64, threads: u64) -> Result<()> {
    let payload = std::sync::Arc::new(pattern(size));
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (payload, next) = (payload.clone(), next.clone());
            let (api, dest) = (api.to_owned(), dest.to_owned());
            std::thread::spawn(move || -> Result<()> {
                let ferry = Client::new(&api);
                let dtnd = dtnd_agent();
                let ferry_path = raw_path(&dest);
                let dtnd_url = format!(
                    "http://{api}/send?dst={}&lifetime=24h",
                    encode_component(&dest)
                );
                // Each worker takes the next number until all are taken: bounded by `count`.
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < count {
                    match kind {
                        Kind::Ferry => {
                            ferry
                                .post_raw(
                                    &ferry_path,
                                    std::io::Cursor::new(payload.as_ref().clone()),
                                    size,
                                )
                                .map_err(|e| anyhow!("sending to Ferry: {e}"))?;
                        }
                        Kind::Dtnd => {
                            dtnd.post(&dtnd_url).send(payload.as_slice()).map_err(|e| {
                                anyhow!(
                                    "sending a {} body to dtnd's POST /send: {e}",
                                    super::size_text(size)
                                )
                            })?;
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| anyhow!("a feeding thread panicked"))??;
    }
    Ok(())
}

/// Bundles delivered to the bench endpoint: Ferry's inbox count (`/v1/status`: what waits in
/// local inboxes; nothing else delivers there, and control bundles never do), dtnd's
/// `delivered` counter (`/status/info`).
fn delivered(kind: Kind, api: &str) -> Result<u64> {
    match kind {
        Kind::Ferry => {
            let status = Client::new(api)
                .get_value("/v1/status")
                .map_err(|e| anyhow!("{e}"))?;
            status["inbox_bundles"]
                .as_u64()
                .context("no inbox_bundles in /v1/status")
        }
        Kind::Dtnd => {
            let mut answer = dtnd_agent()
                .get(format!("http://{api}/status/info"))
                .call()
                .context("asking dtnd")?;
            let info: Value = answer.body_mut().read_json().context("dtnd's status")?;
            info["delivered"]
                .as_u64()
                .context("no delivered in dtnd's /status/info")
        }
    }
}

/// A sample's value in OpenMetrics text (the line `NAME VALUE`).
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The payload bytes of the fragments in a `/v1/bundles` listing that are for the bench
/// endpoint (a fragment's id ends `-OFFSET+LENGTH`).
fn fragment_bytes(list: &Value) -> u64 {
    let Some(items) = list.as_array() else {
        return 0;
    };
    items
        .iter()
        .filter(|b| {
            b["destination"]
                .as_str()
                .is_some_and(|d| d.ends_with(&format!("/{ENDPOINT}")))
        })
        .filter_map(|b| {
            let id = b["id"].as_str()?;
            let (_, length) = id.rsplit_once('+')?;
            length.parse::<u64>().ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{fragment_bytes, metric};

    #[test]
    fn fragments_are_summed_from_their_ids_and_metrics_read_by_name() {
        let list = serde_json::json!([
            {"id": "dtn://a/-1-0-0+4000", "destination": "dtn://b/bench"},
            {"id": "dtn://a/-1-1", "destination": "dtn://b/bench"},
            {"id": "dtn://a/-1-2-100+50", "destination": "dtn://b/other"},
        ]);
        assert_eq!(fragment_bytes(&list), 4000);
        let text = "ferry_x_total 3\nferry_x_total_more 9\nferry_y 2.0\n";
        assert_eq!(metric(text, "ferry_x_total"), Some(3));
        assert_eq!(metric(text, "ferry_y"), Some(2));
        assert_eq!(metric(text, "ferry_z"), None);
    }
}
