//! `ferry bench contact`: the opportunistic contact (issue 31; the contact-study methodology,
//! IBR-DTN Sec. 5). Per rate, bundle size, implementation and repeat, in fresh namespaces with
//! fresh nodes:
//!
//! 1. the link a – b is down and limited by `tc tbf` to the rate; b is started, then a with b as
//!    its static peer (discovery off), or, with `--discovery`, Ferry's two nodes to find each
//!    other by beacons alone;
//! 2. `--total` bytes in bundles of one size are queued at a for `dtn://b/bench` through a's API;
//!    the link stays down for the rest of the down time (`--period` − `--up`);
//! 3. contacts: the link is up for `--up`, then down until the next period starts, until every
//!    bundle is at b or the contacts that could carry it twice over have passed.
//!
//! Measured: the share of the capacity delivered (payload bytes at b ÷ (rate × the time the
//! link was up while bundles were still missing at b)); the time from `ip link set up` to the
//! first payload at b (b's veth counters polled every 2 ms from outside its namespace, the first
//! poll at which b had received [`FIRST_BYTES`] since link up: more than a connection and
//! session setup, so a packet of bundle data); the bytes b's veth received against the payload
//! delivered (framing, and what a cut transfer threw away and sent again), and for Ferry the
//! transfers cut and kept as reactive fragments at b.
//!
//! It never tunes either node beyond what is stated (Ferry: defaults, `--no-discovery`, a static
//! peer, or defaults alone with `--discovery`; dtnd: defaults, a static peer, janitor 1 s).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use super::netns::{Pair, rx_bytes};
use super::procs::{Impl, Node, Peering, Watch, instant_of};
use super::stats::Spread;
use super::{
    Common, WorkDir, check_interrupt, parse_rate, parse_size, pause, rate_text, size_text,
};

/// Bytes b must have received since the link came up before the first payload is taken to
/// have arrived: a TCP handshake, TCPCL's contact header and session init, and ARP come to well
/// under 1 KB from a; a full data packet is 1,514.
pub(crate) const FIRST_BYTES: u64 = 1_500;

/// How often b's veth counters are read while waiting for the first payload.
pub(crate) const FIRST_POLL: Duration = Duration::from_millis(2);

/// How often the agent asks b for its deliveries.
const WATCH_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Args)]
pub(crate) struct ContactArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) options: ContactOptions,
}

#[derive(Args, Clone)]
pub(crate) struct ContactOptions {
    /// Link rates a → b, as tc writes them [default: 24mbit,100mbit; --quick: 24mbit].
    #[arg(long, value_delimiter = ',', value_parser = parse_rate)]
    rate: Vec<u64>,
    /// Bytes queued at a [default: 200MB; --quick: 12MB].
    #[arg(long, value_parser = parse_size)]
    total: Option<u64>,
    /// Bundle sizes [default: 10KB,100KB,1MB,10MB,100MB; --quick: 100KB,1MB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// How long the link is up in each period [default: 20s; --quick: 3s].
    #[arg(long, value_parser = crate::positive_duration)]
    up: Option<Duration>,
    /// The period of the link's contacts [default: 60s; --quick: 6s].
    #[arg(long, value_parser = crate::positive_duration)]
    period: Option<Duration>,
    /// Ferry's nodes send bundles larger than this in pieces of it (their `bundle_piece`,
    /// e.g. 4MB) [default: whole, as configured by default].
    #[arg(long, value_parser = parse_bundle_piece)]
    bundle_piece: Option<u64>,
    /// Ferry's nodes find each other by their beacons alone (discovery on, at its defaults; no
    /// static peer) [default: a dials b as its static peer, discovery off]. dtnd keeps its
    /// static peer.
    #[arg(long)]
    discovery: bool,
}

fn parse_bundle_piece(s: &str) -> Result<u64, String> {
    daemon::config::parse_bundle_piece(s).map_err(|e| format!("pieces{e}"))
}

/// The options with their defaults filled in.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) rates: Vec<u64>,
    pub(crate) total: u64,
    pub(crate) sizes: Vec<u64>,
    pub(crate) up: Duration,
    pub(crate) period: Duration,
    pub(crate) bundle_piece: Option<u64>,
    /// Ferry's nodes find each other by beacons, not as a static peer.
    pub(crate) discovery: bool,
}

impl Plan {
    fn of(o: &ContactOptions, quick: bool) -> Result<Plan> {
        let or = |given: &Vec<u64>, full: &[u64], small: &[u64]| {
            if !given.is_empty() {
                given.clone()
            } else if quick {
                small.to_vec()
            } else {
                full.to_vec()
            }
        };
        let plan = Plan {
            rates: or(&o.rate, &[24_000_000, 100_000_000], &[24_000_000]),
            total: o
                .total
                .unwrap_or(if quick { 12_000_000 } else { 200_000_000 }),
            sizes: or(
                &o.sizes,
                &[10_000, 100_000, 1_000_000, 10_000_000, 100_000_000],
                &[100_000, 1_000_000],
            ),
            up: o
                .up
                .unwrap_or(Duration::from_secs(if quick { 3 } else { 20 })),
            period: o
                .period
                .unwrap_or(Duration::from_secs(if quick { 6 } else { 60 })),
            bundle_piece: o.bundle_piece,
            discovery: o.discovery,
        };
        if plan.up >= plan.period {
            anyhow::bail!(
                "--up ({:?}) must be shorter than --period ({:?}): the link has to go down",
                plan.up,
                plan.period
            );
        }
        Ok(plan)
    }

    /// Bundles queued for a size.
    pub(crate) fn count(&self, size: u64) -> u64 {
        self.total.div_ceil(size).max(1)
    }

    /// Contacts a run may take: those that could carry the total, twice over, and two more
    /// (dtnd resends a cut transfer from its start: a bundle larger than a contact never
    /// arrives, and this bounds how long that is watched).
    pub(crate) fn max_contacts(&self, rate: u64) -> u32 {
        let per_contact = rate as f64 / 8.0 * self.up.as_secs_f64();
        ((self.total as f64 / per_contact).ceil() as u32 + 2).min(50)
    }
}

/// One contact of a run.
#[derive(Clone, Debug)]
pub(crate) struct Contact {
    /// Link up → first payload at b (None: none came in this contact).
    pub(crate) first_byte: Option<Duration>,
    /// Bytes b's veth had received since link up, every 20 ms or so after the first payload
    /// (seconds since link up): where a contact's time went (gaps between bundles, a slow start).
    pub(crate) received: Vec<(f64, u64)>,
    /// The time this contact counts for capacity: the whole up time, or until the last bundle
    /// was at b.
    pub(crate) counted: Duration,
}

/// One run: a rate, a size, an implementation, a repeat.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub(crate) rate: u64,
    pub(crate) size: u64,
    pub(crate) kind: Impl,
    pub(crate) queued: u64,
    pub(crate) delivered: u64,
    /// Payload bytes at b: whole bundles and (Ferry) fragments held.
    pub(crate) payload: u64,
    pub(crate) contacts: Vec<Contact>,
    /// Bytes b's veth received over the run.
    pub(crate) wire: u64,
    /// Ferry: transfers cut at a contact's end whose received part b kept (reactive
    /// fragments); None for dtnd.
    pub(crate) kept_cuts: Option<u64>,
    /// Seconds the API took to queue the bundles at a.
    pub(crate) feed_s: f64,
}

impl Run {
    /// Share of the capacity delivered, per cent.
    pub(crate) fn share(&self) -> f64 {
        let counted: f64 = self.contacts.iter().map(|c| c.counted.as_secs_f64()).sum();
        let capacity = self.rate as f64 / 8.0 * counted;
        if capacity <= 0.0 {
            return 0.0;
        }
        100.0 * self.payload as f64 / capacity
    }

    /// First-payload times of the contacts that had one, seconds.
    pub(crate) fn first_bytes(&self) -> Vec<f64> {
        self.contacts
            .iter()
            .filter_map(|c| c.first_byte.map(|d| d.as_secs_f64()))
            .collect()
    }
}

/// A row of the summary: one rate, size and implementation over the repeats.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) rate: u64,
    pub(crate) size: u64,
    pub(crate) kind: Impl,
    pub(crate) runs: Vec<Run>,
    /// Why the row has no runs (dtnd not found, or a run failed).
    pub(crate) missing: Option<String>,
}

impl Row {
    pub(crate) fn share(&self) -> Option<Spread> {
        Spread::of(&self.runs.iter().map(Run::share).collect::<Vec<_>>())
    }
    pub(crate) fn first_byte(&self) -> Option<Spread> {
        Spread::of(
            &self
                .runs
                .iter()
                .flat_map(Run::first_bytes)
                .collect::<Vec<_>>(),
        )
    }
    /// Wire bytes per payload byte delivered, minus one, per cent.
    pub(crate) fn overhead(&self) -> Option<Spread> {
        Spread::of(
            &self
                .runs
                .iter()
                .filter(|r| r.payload > 0)
                .map(|r| 100.0 * (r.wire as f64 / r.payload as f64 - 1.0))
                .collect::<Vec<_>>(),
        )
    }
}

/// What the contact part measured.
pub(crate) struct Results {
    pub(crate) plan: Plan,
    pub(crate) rows: Vec<Row>,
}

pub(crate) fn run(
    common: &Common,
    options: &ContactOptions,
    work: &WorkDir,
    dtnd: Result<&std::path::PathBuf, &str>,
) -> Result<Results> {
    let (dtnd, no_dtnd) = (dtnd.ok(), dtnd.err().unwrap_or_default());
    let plan = Plan::of(options, common.quick)?;
    let mut rows = Vec::new();
    for &rate in &plan.rates {
        for &size in &plan.sizes {
            for kind in [Impl::Ferry, Impl::Dtnd] {
                let mut row = Row {
                    rate,
                    size,
                    kind,
                    runs: Vec::new(),
                    missing: None,
                };
                if kind == Impl::Dtnd && dtnd.is_none() {
                    row.missing = Some(format!("dtnd {no_dtnd}"));
                    rows.push(row);
                    continue;
                }
                for repeat in 0..common.repeat {
                    check_interrupt()?;
                    match one_run(&plan, rate, size, kind, work, dtnd.map(|p| p.as_path())) {
                        Ok(r) => {
                            eprintln!(
                                "contact {} {} {} #{}: {:.1} % of capacity, first payload {}, \
                                 {}/{} bundles in {} contacts",
                                rate_text(rate),
                                size_text(size),
                                kind.name(),
                                repeat + 1,
                                r.share(),
                                Spread::of(&r.first_bytes())
                                    .map_or("none".into(), |s| format!("{} s", s.text(3))),
                                r.delivered,
                                r.queued,
                                r.contacts.len()
                            );
                            row.runs.push(r);
                        }
                        Err(e) => {
                            check_interrupt()?;
                            eprintln!(
                                "contact {} {} {}: failed: {e:#}",
                                rate_text(rate),
                                size_text(size),
                                kind.name()
                            );
                            row.missing = Some(format!("failed: {e:#}"));
                            break;
                        }
                    }
                }
                rows.push(row);
            }
        }
    }
    Ok(Results { plan, rows })
}

fn one_run(
    plan: &Plan,
    rate: u64,
    size: u64,
    kind: Impl,
    work: &WorkDir,
    dtnd: Option<&Path>,
) -> Result<Run> {
    let pair = Pair::create("c")?;
    pair.set_link(false)?;
    pair.limit(Some(rate))?;
    let link_down = Instant::now();
    let tag = kind.kind();
    let ferry_args: Vec<String> = plan
        .bundle_piece
        .map(|piece| vec!["--bundle-piece".to_owned(), piece.to_string()])
        .unwrap_or_default();
    let peering = if plan.discovery {
        Peering::Beacons
    } else {
        Peering::Static
    };
    let (a, b) = Node::start_pair(kind, &pair, work, tag, dtnd, &ferry_args, peering)?;
    let count = plan.count(size);
    let feed = a.feed(size, count)?;
    let feed_s: f64 = feed.trim().parse().unwrap_or(f64::NAN);
    // The rest of the down time: the node has been out of contact for a whole off-period
    // (its redial backoff grown), whatever the feeding took.
    let down = plan.period - plan.up;
    pause(down.saturating_sub(link_down.elapsed()))?;

    let max_contacts = plan.max_contacts(rate);
    let watch = Watch::start(
        &b,
        WATCH_INTERVAL,
        count,
        plan.period * max_contacts + Duration::from_secs(60),
    )?;
    let rx_start = rx_bytes(b.pid(), &pair.dev_b)?;
    let mut contacts = Vec::new();
    for _ in 0..max_contacts {
        let up_at = Instant::now();
        pair.set_link(true)?;
        let rx_up = rx_bytes(b.pid(), &pair.dev_b)?;
        let end = up_at + plan.up;
        let mut first_byte = None;
        let mut done_at = None;
        let mut received = Vec::new();
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            let (n, seen) = watch.latest();
            if n >= count {
                done_at = Some(seen.map_or(now, instant_of).max(up_at));
                break;
            }
            if first_byte.is_none() {
                if rx_bytes(b.pid(), &pair.dev_b)?.saturating_sub(rx_up) >= FIRST_BYTES {
                    first_byte = Some(now - up_at);
                }
                pause(FIRST_POLL)?;
            } else {
                let rx = rx_bytes(b.pid(), &pair.dev_b)?.saturating_sub(rx_up);
                received.push(((now - up_at).as_secs_f64(), rx));
                pause(Duration::from_millis(20))?;
            }
        }
        pair.set_link(false)?;
        let counted = done_at.map_or(plan.up, |d| d - up_at).min(plan.up);
        contacts.push(Contact {
            first_byte,
            received,
            counted,
        });
        if done_at.is_some() {
            break;
        }
        pause((up_at + plan.period).saturating_duration_since(Instant::now()))?;
    }
    // Counts settle: the last poll of the watch and a store commit at b.
    pause(Duration::from_millis(500))?;
    let delivered = b.delivered()?;
    let (fragments, kept_cuts) = match kind {
        Impl::Ferry | Impl::FerryMemory => (
            b.agent_output(&["fragments"])?.trim().parse().unwrap_or(0),
            Some(
                b.agent_output(&["metric", "ferry_reactive_fragments_received_total"])?
                    .trim()
                    .parse()
                    .unwrap_or(0),
            ),
        ),
        Impl::Dtnd => (0, None),
    };
    let wire = rx_bytes(b.pid(), &pair.dev_b)?.saturating_sub(rx_start);
    drop(watch);
    drop((a, b));
    drop(pair);
    Ok(Run {
        rate,
        size,
        kind,
        queued: count,
        delivered,
        payload: delivered.min(count) * size + fragments,
        contacts,
        wire,
        kept_cuts,
        feed_s,
    })
}

/// The summary table, Markdown.
pub(crate) fn table(results: &Results) -> String {
    let mut t = String::from(
        "| rate | bundle size | node | capacity delivered, % | link up → first payload, s | \
         bundles at b / queued | contacts | wire ÷ payload − 1, % | cuts kept as fragments at b |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for row in &results.rows {
        let runs = &row.runs;
        let cell_missing = row.missing.clone().unwrap_or_else(|| "–".into());
        if runs.is_empty() {
            t += &format!(
                "| {} | {} | {} | {cell_missing} | – | – | – | – | – |\n",
                rate_text(row.rate),
                size_text(row.size),
                row.kind.name()
            );
            continue;
        }
        let at_b: Vec<String> = runs
            .iter()
            .map(|r| format!("{}/{}", r.delivered, r.queued))
            .collect();
        let contacts: Vec<String> = runs.iter().map(|r| r.contacts.len().to_string()).collect();
        let kept: Vec<String> = runs
            .iter()
            .map(|r| r.kept_cuts.map_or("–".into(), |k| k.to_string()))
            .collect();
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            rate_text(row.rate),
            size_text(row.size),
            row.kind.name(),
            super::stats::text(row.share(), 1),
            super::stats::text(row.first_byte(), 3),
            at_b.join(", "),
            contacts.join(", "),
            super::stats::text(row.overhead(), 1),
            kept.join(", ")
        );
    }
    t
}
