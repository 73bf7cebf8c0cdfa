//! The report of `ferry bench` (`--out DIR`): README.md with each part's table, how each
//! number was measured, the targets (met or not, from the figures alone), the exact command and
//! the machine (`/proc/cpuinfo`, `uname`, memory, load before and after); and plots of the
//! sweeps as SVG and PNG (`plot.rs`: the same font and drawing as `ferry eval`'s report). It
//! only writes what the parts measured.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::procs::Impl;
use super::stats::Spread;
use super::{Common, contact, queue, rate_text, rpc, size_text, store};
use crate::plot::{Figure, draw, e};

pub(crate) struct Report {
    command: String,
    repeat: u32,
    quick: bool,
    dtnd_missing: Option<String>,
    machine: String,
    load_before: String,
    pub(crate) wall: Duration,
    pub(crate) contact: Option<contact::Results>,
    pub(crate) store: Option<store::Results>,
    pub(crate) queue: Option<queue::Results>,
    pub(crate) rpc: Option<rpc::Results>,
}

impl Report {
    pub(crate) fn new(common: &Common, dtnd_missing: Option<String>) -> Self {
        let command = std::env::args()
            .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
            .collect::<Vec<_>>()
            .join(" ");
        Report {
            command,
            repeat: common.repeat,
            quick: common.quick,
            dtnd_missing,
            machine: machine(),
            load_before: loadavg(),
            wall: Duration::ZERO,
            contact: None,
            store: None,
            queue: None,
            rpc: None,
        }
    }

    /// Writes README.md and the plots into `dir`; returns how many files.
    pub(crate) fn write(&self, dir: &Path) -> Result<usize> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::plot::register_font();
        let mut files = 0;
        let mut plots = Vec::new();
        if let Some(c) = &self.contact {
            plots.push(("contact-share", contact_share(c)));
            plots.push(("contact-first-payload", contact_first(c)));
        }
        if let Some(q) = &self.queue {
            plots.push(("queue", queue_plot(q)));
        }
        if let Some(s) = &self.store {
            plots.push(("store", store_plot(s)));
        }
        for (name, plot) in &plots {
            for ext in ["svg", "png"] {
                draw(&dir.join(format!("{name}.{ext}")), plot, (900, 520))?;
                files += 1;
            }
        }
        for (name, text) in self.csvs() {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            files += 1;
        }
        let md = dir.join("README.md");
        std::fs::write(&md, self.markdown())
            .with_context(|| format!("writing {}", md.display()))?;
        print!("{}", self.tables());
        Ok(files + 1)
    }

    /// Every run's figures, one line a run (what the tables summarise), as CSV files.
    fn csvs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(c) = &self.contact {
            let mut t = String::from(
                "rate_bit_s,bundle_bytes,node,run,share_pct,first_payload_s_median,\
                 bundles_at_b,bundles_queued,contacts,payload_bytes,wire_bytes,cuts_kept,feed_s\n",
            );
            for row in &c.rows {
                for (k, r) in row.runs.iter().enumerate() {
                    let first = Spread::of(&r.first_bytes())
                        .map_or(String::new(), |s| format!("{:.4}", s.median));
                    let _ = writeln!(
                        t,
                        "{},{},{},{},{:.3},{first},{},{},{},{},{},{},{:.3}",
                        r.rate,
                        r.size,
                        r.kind.csv_name(),
                        k + 1,
                        r.share(),
                        r.delivered,
                        r.queued,
                        r.contacts.len(),
                        r.payload,
                        r.wire,
                        r.kept_cuts.map_or(String::new(), |k| k.to_string()),
                        r.feed_s
                    );
                }
            }
            out.push(("contact.csv", t));
            let mut t = String::from("rate_bit_s,bundle_bytes,node,run,contact,t_s,rx_bytes\n");
            for row in &c.rows {
                for (k, r) in row.runs.iter().enumerate() {
                    for (n, contact) in r.contacts.iter().enumerate() {
                        for (at, rx) in &contact.received {
                            let _ = writeln!(
                                t,
                                "{},{},{},{},{},{at:.3},{rx}",
                                r.rate,
                                r.size,
                                r.kind.csv_name(),
                                k + 1,
                                n + 1
                            );
                        }
                    }
                }
            }
            out.push(("contact-timeline.csv", t));
        }
        if let Some(q) = &self.queue {
            let mut t = String::from("bundle_bytes,node,run,bundles,seconds\n");
            for row in &q.rows {
                for (k, secs) in row.seconds.iter().enumerate() {
                    let _ = writeln!(
                        t,
                        "{},{},{},{},{secs:.4}",
                        row.size,
                        row.kind.csv_name(),
                        k + 1,
                        q.count
                    );
                }
            }
            out.push(("queue.csv", t));
            let mut t = String::from("reference,run,mbytes_per_s\n");
            for (name, v) in [("iperf3", &q.iperf3), ("dd_fdatasync", &q.dd)] {
                for (k, mbs) in v.iter().flatten().enumerate() {
                    let _ = writeln!(t, "{name},{},{mbs:.2}", k + 1);
                }
            }
            out.push(("references.csv", t));
        }
        if let Some(s) = &self.store {
            let mut t = String::from("bundle_bytes,store,run,bundles,store_s,receive_s\n");
            for row in &s.rows {
                for (k, (a, b)) in row.store_s.iter().zip(&row.receive_s).enumerate() {
                    let _ = writeln!(
                        t,
                        "{},{},{},{},{a:.4},{b:.4}",
                        row.size,
                        store::store_name(row.kind),
                        k + 1,
                        s.count
                    );
                }
            }
            out.push(("store.csv", t));
        }
        out
    }

    /// The tables alone (also printed on stdout).
    fn tables(&self) -> String {
        let mut t = String::new();
        if let Some(c) = &self.contact {
            t += "\nOpportunistic contact\n\n";
            t += &contact::table(c);
        }
        if let Some(s) = &self.store {
            t += "\nAPI store and receive (IBR-DTN 5.1)\n\n";
            t += &store::table(s);
        }
        if let Some(q) = &self.queue {
            t += "\nQueued bundles after the link opens (IBR-DTN 5.2)\n\n";
            t += &queue::table(q);
        }
        t
    }

    fn markdown(&self) -> String {
        let mut m = String::from("# `ferry bench` report\n\n");
        let _ = writeln!(
            m,
            "Command (as run, from the directory it was run in):\n\n```\n{}\n```\n",
            self.command
        );
        let _ = writeln!(
            m,
            "Repeats: {} (figures are median [min–max] over them){}. Wall time: {:.0} s. \
             Load average before: {}; after: {}.\n",
            self.repeat,
            if self.quick {
                "; `--quick`: a smoke run, not figures to quote"
            } else {
                ""
            },
            self.wall.as_secs_f64(),
            self.load_before,
            loadavg()
        );
        let _ = writeln!(m, "## Machine\n\n{}\n", self.machine);
        if let Some(why) = &self.dtnd_missing {
            let _ = writeln!(m, "dtn7-rs `dtnd`: {why}; its rows say so.\n");
        }
        if let Some(c) = &self.contact {
            m += &contact_section(c);
        }
        if let Some(s) = &self.store {
            let _ = writeln!(
                m,
                "## API store and receive (IBR-DTN Sec. 5.1)\n\n\
                 A fresh `ferry node` in a namespace of its own per size and repeat; {} bundles \
                 sent through `POST /v1/bundles/raw` to its own endpoint, one after another, each \
                 answered once durable (\"store\"), then listed, read (`GET …/payload`) and \
                 acknowledged (`DELETE`) one by one (\"receive\"), as `ferry recv` does. \
                 Seconds are the agent's, inside the namespace, for all {} together. Each size \
                 runs with the disk store and with the memory store (`ferry node --store \
                 memory`: nothing waits for a disk).\n\n{}\n\n![store](store.svg)\n",
                s.count,
                s.count,
                store::table(s),
            );
        }
        if let Some(q) = &self.queue {
            m += &queue_section(q);
        }
        if let Some(r) = &self.rpc {
            m += &rpc_section(r);
        }
        m
    }
}

fn contact_section(c: &contact::Results) -> String {
    let p = &c.plan;
    let mut m = format!(
        "## Opportunistic contact\n\n\
         Two network namespaces joined by a veth; `tc tbf` on a's end limits a → b to the rate \
         (burst 10 ms of the rate, at least 64 KB; 100 ms of queue). Per rate, bundle size, node \
         and repeat, fresh namespaces and fresh nodes: the link down, b started, then a {}; {} \
         queued at a for `dtn://b/bench` in bundles of \
         one size through a's API; the link kept down for the rest of the off time ({} s); then \
         contacts of {} s every {} s (`ip link set up|down` on a's end: both ends lose carrier), \
         until every bundle is at b or the contacts that could carry it all twice, and two \
         more, have passed ({}).\n\n\
         Nodes: Ferry (this build; defaults{}{}) and \
         dtn7-rs `dtnd` 0.21 (defaults: memory store, epidemic routing; `-s \
         tcp://10.99.0.2:4556/b`, `--disable_nd`, janitor 1 s).\n\n\
         What the columns mean:\n\n\
         - **capacity delivered**: payload bytes at b (whole bundles in b's bench inbox, or \
         counted delivered by dtnd, plus, for Ferry, the payload of fragments b holds at the \
         end) ÷ (rate × the time the link was up while bundles were still missing at b: a \
         whole contact, or the last one until the last bundle arrived, as the 50 ms poll of \
         b's deliveries saw it). The token bucket counts the headers too (TCP/IP, TCPCL, the \
         bundle's blocks: the next column), and the time to the first payload is part of the \
         contact, so 100 % is out of reach by a few per cent.\n\
         - **link up → first payload**: from `ip link set up` until b's veth had received \
         {} bytes since (read from `/proc/<b's pid>/net/dev` every {} ms from outside the \
         namespace): more than a TCP handshake, TCPCL's contact header, the session's init and \
         ARP come to, so a packet of bundle data; the first byte of payload came at most one \
         packet earlier (0.5 ms at 24 Mbit/s). Median [min–max] over every contact of every \
         repeat that had one. It includes the kernel's carrier change (Linux works carrier \
         changes in one queue, at most once a second), the node's redial, and TCP and session \
         setup.\n\
         - **wire ÷ payload − 1**: bytes b's veth received over the run against the payload \
         delivered: framing (TCP/IP, TCPCL and bundle headers, as many as the counters see: \
         a packet segmented late counts its headers once), plus whatever was sent and thrown away (a transfer cut at a \
         contact's end that is sent again from its start). Ferry keeps what arrived of a cut \
         transfer (reactive fragmentation) and sends only the rest; dtnd starts the bundle \
         again.\n\
         - **cuts kept as fragments at b**: Ferry's `ferry_reactive_fragments_received_total` \
         at b: transfers cut at a contact's end whose received part b kept.\n\n\
         `contact.csv` has every run's figures; `contact-timeline.csv` the bytes b's veth had \
         received, every 20 ms of each contact from the first payload on (where the time went: \
         pauses between bundles, or a lower steady rate).\n\n",
        if p.discovery {
            "(Ferry's two nodes find each other by their beacons alone, discovery at its \
             defaults; dtnd's a has b as its static peer)"
        } else {
            "with b as its static peer (discovery off)"
        },
        size_text(p.total),
        (p.period - p.up).as_secs_f64(),
        p.up.as_secs_f64(),
        p.period.as_secs_f64(),
        p.rates
            .iter()
            .map(|&r| format!("{} at {}", p.max_contacts(r), rate_text(r)))
            .collect::<Vec<_>>()
            .join(", "),
        if p.discovery {
            ", discovery on, no static peer"
        } else {
            ", `--no-discovery`, `--peer 10.99.0.2:4556`"
        },
        p.bundle_piece
            .map(|piece| format!(
                ", `--bundle-piece {piece}`: bundles in pieces of {}",
                size_text(piece)
            ))
            .unwrap_or_default(),
        contact::FIRST_BYTES,
        contact::FIRST_POLL.as_millis(),
    );
    m += &contact::table(c);
    m += "\n![share of capacity](contact-share.svg)\n\n![first payload](contact-first-payload.svg)\n\n";
    m += &targets(c);
    m
}

/// The issue's contact targets, judged from the rows.
fn targets(c: &contact::Results) -> String {
    let mut m = String::from("### Targets (issue 31)\n\n");
    let ferry: Vec<&contact::Row> = c
        .rows
        .iter()
        .filter(|r| r.kind == Impl::Ferry && !r.runs.is_empty())
        .collect();
    let big: Vec<&&contact::Row> = ferry.iter().filter(|r| r.size >= 100_000).collect();
    if big.is_empty() {
        m += "- ≥ 90 % of the capacity for bundles of 100 KB and larger: not measured in this run.\n";
    } else {
        let worst = big
            .iter()
            .filter_map(|r| r.share().map(|s| (s.median, r)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((share, row)) = worst {
            let _ = writeln!(
                m,
                "- ≥ 90 % of the capacity for bundles of 100 KB and larger: **{}** (lowest \
                 median {share:.1} %, {} bundles at {}).",
                if share >= 90.0 { "met" } else { "not met" },
                size_text(row.size),
                rate_text(row.rate)
            );
        }
    }
    let firsts: Vec<f64> = ferry
        .iter()
        .flat_map(|r| r.runs.iter().flat_map(contact::Run::first_bytes))
        .collect();
    match Spread::of(&firsts) {
        Some(s) => {
            let _ = writeln!(
                m,
                "- first payload byte ≤ 0.5 s after the link comes up: **{}** (median {:.3} s, \
                 slowest {:.3} s over {} contacts).",
                if s.max <= 0.5 {
                    "met"
                } else if s.median <= 0.5 {
                    "met at the median, not in every contact"
                } else {
                    "not met"
                },
                s.median,
                s.max,
                s.n
            );
        }
        None => m += "- first payload byte ≤ 0.5 s: not measured in this run.\n",
    }
    m.push('\n');
    m
}

fn queue_section(q: &queue::Results) -> String {
    format!(
        "## Queued bundles after the link opens (IBR-DTN Sec. 5.2)\n\n\
         Per size, node and repeat, fresh namespaces and nodes with no rate limit on the veth: \
         {} bundles queued at a for b through a's API while the link is down (a with b as its \
         static peer, as above), then `ip link set up` and the time until all {} were at b \
         (b's deliveries polled every 10 ms inside its namespace). References in the same run, \
         once per repeat: iperf3 a → b over the same kind of veth (TCP, 3 s, the receiver's \
         rate), and `dd if=/dev/zero bs=1M count={} conv=fdatasync` into {} (the stores' \
         directory, so the same disk, as many MiB as the largest bundles' run writes).\n\n{}\n\
         ![queue](queue.svg)\n\n{}",
        q.count,
        q.count,
        q.dd_mib,
        q.disk.display(),
        queue::table(q),
        queue_targets(q)
    )
}

/// The issue's bulk and small-bundle targets, judged from the queue's rows.
fn queue_targets(q: &queue::Results) -> String {
    let median = |r: &Result<Vec<f64>, String>| r.as_ref().ok().and_then(|v| Spread::of(v));
    let row = |kind: Impl, size: u64| {
        q.rows
            .iter()
            .find(|r| r.kind == kind && r.size == size && !r.seconds.is_empty())
    };
    let verdict = |met: bool| if met { "met" } else { "not met" };
    let mut m = String::from("### Targets (issue 31)\n\n");
    let (iperf3, dd) = (median(&q.iperf3), median(&q.dd));
    for (kind, what, goal, reference) in [
        (
            Impl::Ferry,
            "1 MiB bundles, durable, ≥ 80 % of the slower of iperf3 and dd",
            0.8,
            match (iperf3, dd) {
                (Some(i), Some(d)) => Some(i.median.min(d.median)),
                _ => None,
            },
        ),
        (
            Impl::FerryMemory,
            "1 MiB bundles, memory store, ≥ 50 % of iperf3",
            0.5,
            iperf3.map(|i| i.median),
        ),
    ] {
        match (
            row(kind, 1 << 20).and_then(|r| r.mbytes_per_s(q.count)),
            reference,
        ) {
            (Some(got), Some(reference)) => {
                let _ = writeln!(
                    m,
                    "- {what}: **{}** ({:.1} MB/s, {:.0} % of {reference:.1} MB/s).",
                    verdict(got.median >= goal * reference),
                    got.median,
                    100.0 * got.median / reference
                );
            }
            _ => {
                let _ = writeln!(m, "- {what}: not measured in this run.");
            }
        }
    }
    for (kind, what, goal) in [
        (Impl::Ferry, "1 KiB bundles, durable, ≥ 50,000/s", 50_000.0),
        (
            Impl::FerryMemory,
            "1 KiB bundles, memory store, ≥ 100,000/s",
            100_000.0,
        ),
    ] {
        match row(kind, 1024).and_then(|r| r.bundles_per_s(q.count)) {
            Some(got) => {
                let _ = writeln!(
                    m,
                    "- {what}: **{}** ({:.0}/s over {} bundles; b's deliveries are polled \
                     every 10 ms, so short runs are coarse).",
                    verdict(got.median >= goal),
                    got.median,
                    q.count
                );
            }
            None => {
                let _ = writeln!(m, "- {what}: not measured in this run.");
            }
        }
    }
    m
}

fn rpc_section(r: &rpc::Results) -> String {
    let env = if r.env.is_empty() {
        "(no `FERRY_BENCH_*` set: the defaults)".to_string()
    } else {
        r.env
            .iter()
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let body = match &r.output {
        Ok(text) => format!("Its output:\n\n```\n{}\n```\n", text.trim_end()),
        Err(why) => format!(
            "{why}. To measure it, from the source tree (it builds the bench with the release \
             profile first):\n\n```\n{}\n```\n\n(`ferry bench rpc --source DIR` runs that and \
             puts the table here.) Settings are environment variables, documented at the top of \
             `crates/bench/benches/rpc.rs` (`FERRY_BENCH_CALLS`, `FERRY_BENCH_INFLIGHT_CALLS`, \
             `FERRY_BENCH_ONLY`, `FERRY_BENCH_QUICK=1`, …).\n",
            rpc::COMMAND
        ),
    };
    format!(
        "## RPC against gRPC\n\n\
         Ferry's `null` and `echo` calls between two daemons on loopback beside a tonic gRPC \
         echo in the same process and run: p50/p90/p99 of sequential calls and calls/s with \
         64 in flight (`{}`; settings {env}).\n\n{body}\n",
        rpc::COMMAND
    )
}

/// CPU, kernel and memory, from /proc and uname.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|x| x.1.trim())
        })
        .unwrap_or("unknown")
        .to_owned();
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let uname = std::process::Command::new("uname")
        .arg("-a")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "- CPU: {model}, {cpus} logical CPUs (/proc/cpuinfo)\n- Memory: {mem}\n- Kernel: \
         `{uname}`\n- Date: {}",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
    )
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A sweep over bundle sizes: one line per series (median, with min–max bars), a logarithmic
/// x axis of sizes, the y axis linear or logarithmic, and horizontal reference lines.
pub(crate) struct Sweep {
    title: String,
    y_label: String,
    log_y: bool,
    series: Vec<Series>,
    /// (label, value, colour): a target or a reference measured in the same run.
    lines: Vec<(String, f64, RGBColor)>,
}

struct Series {
    name: String,
    color: RGBColor,
    points: Vec<(u64, Spread)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(65, 105, 225),
    RGBColor(220, 50, 47),
    RGBColor(46, 139, 87),
    RGBColor(230, 140, 0),
    RGBColor(128, 0, 128),
    RGBColor(0, 150, 160),
];

impl Figure for Sweep {
    fn render<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        e(root.fill(&WHITE))?;
        let ty = |v: f64| {
            if self.log_y { v.max(1e-9).log10() } else { v }
        };
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| (p.0 as f64).log10()))
            .collect();
        let ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().flat_map(|p| [ty(p.1.min), ty(p.1.max)]))
            .chain(self.lines.iter().map(|l| ty(l.1)))
            .collect();
        let (x0, x1) = bounds(&xs, 0.3);
        let (mut y0, mut y1) = bounds(&ys, 0.1);
        if !self.log_y {
            y0 = 0.0_f64.min(y0);
            y1 = y1.max(y0 + 1.0);
        }
        let log_y = self.log_y;
        let mut chart = e(ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1))?;
        e(chart
            .configure_mesh()
            .x_desc("bundle size")
            .y_desc(&self.y_label)
            // The sizes measured are labelled below, each where it was measured.
            .x_labels(0)
            .y_label_formatter(&|v| {
                let v = if log_y { 10f64.powf(*v) } else { *v };
                if v.abs() >= 10.0 || v == 0.0 {
                    format!("{v:.0}")
                } else if v.abs() >= 1.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v:.2}")
                }
            })
            .label_style(("sans-serif", 12))
            .draw())?;
        let mut sizes: Vec<u64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let label = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        for size in sizes {
            let (px, py) = chart.backend_coord(&((size as f64).log10(), y0));
            e(root.draw(&Text::new(size_text(size), (px, py + 6), label.clone())))?;
        }
        for (label, value, color) in &self.lines {
            let y = ty(*value);
            let color = *color;
            e(chart.draw_series(LineSeries::new([(x0, y), (x1, y)], color.stroke_width(1))))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
        }
        for s in &self.series {
            let color = s.color;
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|(x, sp)| ((*x as f64).log10(), ty(sp.median)))
                .collect();
            e(chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))))?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 16, y + 4)], color.filled())
                });
            e(chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled()))))?;
            e(chart.draw_series(s.points.iter().map(|(x, sp)| {
                let x = (*x as f64).log10();
                PathElement::new([(x, ty(sp.min)), (x, ty(sp.max))], color.stroke_width(1))
            })))?;
        }
        e(chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .position(SeriesLabelPosition::LowerRight)
            .draw())?;
        e(root.present())?;
        Ok(())
    }
}

/// The range of `v` widened by `pad` on each side (a unit range around a single value).
fn bounds(v: &[f64], pad: f64) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let span = (hi - lo).max(1e-6);
    if span < 1e-3 {
        return (lo - 0.5, hi + 0.5);
    }
    (lo - pad * span.max(1.0), hi + pad * span.max(1.0))
}

fn contact_series(
    c: &contact::Results,
    value: impl Fn(&contact::Row) -> Option<Spread>,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for &rate in &c.plan.rates {
        for kind in [Impl::Ferry, Impl::Dtnd] {
            let points: Vec<(u64, Spread)> = c
                .rows
                .iter()
                .filter(|r| r.rate == rate && r.kind == kind)
                .filter_map(|r| Some((r.size, value(r)?)))
                .collect();
            if points.is_empty() {
                continue;
            }
            out.push(Series {
                name: format!("{} at {}", kind.name(), rate_text(rate)),
                color: COLORS[out.len() % COLORS.len()],
                points,
            });
        }
    }
    out
}

fn contact_share(c: &contact::Results) -> Sweep {
    Sweep {
        title: format!(
            "Share of a contact's capacity delivered ({} s of every {} s, {} queued)",
            c.plan.up.as_secs_f64(),
            c.plan.period.as_secs_f64(),
            size_text(c.plan.total)
        ),
        y_label: "capacity delivered, %".into(),
        log_y: false,
        series: contact_series(c, contact::Row::share),
        lines: vec![
            ("target 90 %".into(), 90.0, RGBColor(120, 120, 120)),
            ("100 %".into(), 100.0, RGBColor(0, 0, 0)),
        ],
    }
}

fn contact_first(c: &contact::Results) -> Sweep {
    Sweep {
        title: "Link up → first payload byte at b".into(),
        y_label: "seconds".into(),
        log_y: false,
        series: contact_series(c, contact::Row::first_byte),
        lines: vec![("target 0.5 s".into(), 0.5, RGBColor(120, 120, 120))],
    }
}

fn queue_plot(q: &queue::Results) -> Sweep {
    let mut series = Vec::new();
    for kind in [Impl::Ferry, Impl::FerryMemory, Impl::Dtnd] {
        let points: Vec<(u64, Spread)> = q
            .rows
            .iter()
            .filter(|r| r.kind == kind)
            .filter_map(|r| Some((r.size, r.mbytes_per_s(q.count)?)))
            .collect();
        if !points.is_empty() {
            series.push(Series {
                name: kind.name().into(),
                color: COLORS[series.len()],
                points,
            });
        }
    }
    let mut lines = Vec::new();
    if let Ok(v) = &q.iperf3
        && let Some(s) = Spread::of(v)
    {
        lines.push(("iperf3 a → b".into(), s.median, COLORS[3]));
    }
    if let Ok(v) = &q.dd
        && let Some(s) = Spread::of(v)
    {
        lines.push(("dd conv=fdatasync".into(), s.median, COLORS[4]));
    }
    Sweep {
        title: format!("{} bundles queued, link up → all at b", q.count),
        y_label: "MB/s (log)".into(),
        log_y: true,
        series,
        lines,
    }
}

fn store_plot(s: &store::Results) -> Sweep {
    let mut series = Vec::new();
    for kind in [Impl::Ferry, Impl::FerryMemory] {
        for (what, f) in [
            (
                "store",
                store::store_rate as fn(&store::Results, &store::Row) -> Option<Spread>,
            ),
            ("receive", store::receive_rate),
        ] {
            let points: Vec<(u64, Spread)> = s
                .rows
                .iter()
                .filter(|r| r.kind == kind)
                .filter_map(|r| Some((r.size, f(s, r)?)))
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{what} ({})", store::store_name(kind)),
                    color: COLORS[series.len() % COLORS.len()],
                    points,
                });
            }
        }
    }
    Sweep {
        title: format!("API store and receive of {} bundles", s.count),
        y_label: "bundles/s (log)".into(),
        log_y: true,
        series,
        lines: Vec::new(),
    }
}
