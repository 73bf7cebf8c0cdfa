//! `ferry bench store`: IBR-DTN Sec. 5.1. Per bundle size and repeat, a fresh `ferry node` in a
//! namespace of its own is handed `--count` bundles (default 100) for its own endpoint through
//! the HTTP API, each answered once durable ("store"), then they are listed, read and
//! acknowledged one by one ("receive"), as `ferry recv` does; once with the disk store
//! (SQLite in WAL mode and payload files, synced before a send is answered) and once with the
//! memory store (`ferry node --store memory`). It never measures anything but the API's answers.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::netns::Pair;
use super::procs::{Impl, Node};
use super::stats::Spread;
use super::{Common, WorkDir, check_interrupt, parse_size, size_text};

#[derive(Args)]
pub(crate) struct StoreArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Bundle sizes [default: 5,1KiB,10KiB,100KiB,1MiB; --quick: 5,1MiB].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub(crate) sizes: Vec<u64>,
    /// Bundles stored and received per measurement.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) count: u64,
}

/// One size and store over the repeats: seconds to store and to receive `count` bundles.
pub(crate) struct Row {
    pub(crate) size: u64,
    /// [`Impl::Ferry`] (disk store) or [`Impl::FerryMemory`].
    pub(crate) kind: Impl,
    pub(crate) store_s: Vec<f64>,
    pub(crate) receive_s: Vec<f64>,
    pub(crate) missing: Option<String>,
}

pub(crate) struct Results {
    pub(crate) count: u64,
    pub(crate) rows: Vec<Row>,
}

pub(crate) fn run(common: &Common, sizes: &[u64], count: u64, work: &WorkDir) -> Result<Results> {
    let sizes = if !sizes.is_empty() {
        sizes.to_vec()
    } else if common.quick {
        vec![5, 1 << 20]
    } else {
        vec![5, 1024, 10 * 1024, 100 * 1024, 1 << 20]
    };
    let mut rows: Vec<Row> = sizes
        .iter()
        .flat_map(|&size| {
            [Impl::Ferry, Impl::FerryMemory].map(|kind| Row {
                size,
                kind,
                store_s: Vec::new(),
                receive_s: Vec::new(),
                missing: None,
            })
        })
        .collect();
    let pair = Pair::create("s")?;
    for repeat in 0..common.repeat {
        for row in rows.iter_mut().filter(|r| r.missing.is_none()) {
            check_interrupt()?;
            match one_run(&pair, row.kind, row.size, count, work) {
                Ok((store, receive)) => {
                    eprintln!(
                        "store {count} × {} {} store #{}: store {:.0} bundles/s, receive {:.0} bundles/s",
                        size_text(row.size),
                        store_name(row.kind),
                        repeat + 1,
                        count as f64 / store,
                        count as f64 / receive
                    );
                    row.store_s.push(store);
                    row.receive_s.push(receive);
                }
                Err(e) => {
                    check_interrupt()?;
                    eprintln!(
                        "store {} {} store: failed: {e:#}",
                        size_text(row.size),
                        store_name(row.kind)
                    );
                    row.missing = Some(format!("failed: {e:#}"));
                }
            }
        }
    }
    Ok(Results { count, rows })
}

/// "disk" or "memory".
pub(crate) fn store_name(kind: Impl) -> &'static str {
    if kind == Impl::FerryMemory {
        "memory"
    } else {
        "disk"
    }
}

fn one_run(pair: &Pair, kind: Impl, size: u64, count: u64, work: &WorkDir) -> Result<(f64, f64)> {
    let node = Node::start(
        kind,
        &pair.a,
        "s",
        &work.fresh("store")?,
        None,
        None,
        &[],
        false,
    )?;
    let out = node.agent_output(&[
        "store",
        "--dest",
        &format!("dtn://s/{}", super::agent::ENDPOINT),
        "--size",
        &size.to_string(),
        "--count",
        &count.to_string(),
    ])?;
    let mut parts = out.split_whitespace().map(str::parse::<f64>);
    let (Some(Ok(store)), Some(Ok(receive))) = (parts.next(), parts.next()) else {
        anyhow::bail!("the agent said {out:?}");
    };
    drop(node);
    // The node is gone before the next one starts on the same port.
    std::thread::sleep(Duration::from_millis(100));
    Ok((store, receive))
}

fn rates(count: u64, size: u64, secs: &[f64]) -> (Option<Spread>, Option<Spread>) {
    let per_s: Vec<f64> = secs.iter().map(|s| count as f64 / s).collect();
    let mb: Vec<f64> = secs
        .iter()
        .map(|s| (count * size) as f64 / s / 1e6)
        .collect();
    (Spread::of(&per_s), Spread::of(&mb))
}

/// Bundles/s of storing, per row (for the plot).
pub(crate) fn store_rate(results: &Results, row: &Row) -> Option<Spread> {
    rates(results.count, row.size, &row.store_s).0
}

/// Bundles/s of receiving, per row (for the plot).
pub(crate) fn receive_rate(results: &Results, row: &Row) -> Option<Spread> {
    rates(results.count, row.size, &row.receive_s).0
}

/// The summary table, Markdown.
pub(crate) fn table(results: &Results) -> String {
    let mut t = format!(
        "| bundle size | store | store {n}: bundles/s | MB/s | receive {n}: bundles/s | MB/s |\n\
         |---|---|---|---|---|---|\n",
        n = results.count
    );
    for row in &results.rows {
        if row.store_s.is_empty() {
            let why = row.missing.clone().unwrap_or_else(|| "–".into());
            t += &format!(
                "| {} | {} | {why} | – | – | – |\n",
                size_text(row.size),
                store_name(row.kind)
            );
            continue;
        }
        let (s_n, s_mb) = rates(results.count, row.size, &row.store_s);
        let (r_n, r_mb) = rates(results.count, row.size, &row.receive_s);
        t += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            size_text(row.size),
            store_name(row.kind),
            super::stats::text(s_n, 0),
            super::stats::text(s_mb, 2),
            super::stats::text(r_n, 0),
            super::stats::text(r_mb, 2)
        );
    }
    t
}
