//! `ferry send --report`: follows a sent bundle to its destination by the status reports that
//! come back about it (and about its fragments), with a progress bar of the payload bytes the
//! destination has reported delivered.
//!
//! A large bundle that the network fragments is reported fragment by fragment (RFC 9171 §6.1.1:
//! a report about a fragment names its offset and length), so the bar moves as pieces arrive;
//! a whole bundle fills it at once. Without a terminal on stderr, each report is a line there.

use std::collections::BTreeSet;
use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::api::{ReportInfo, creation_ms_of, dtn_now_ms};
use crate::client::{Client, query};
use crate::exit::{Failure, Status};
use crate::output::fmt_offset_ms;

/// How often the node is asked for new reports (the reports API has no long poll).
const POLL: Duration = Duration::from_millis(200);
/// What the bar shows.
const BAR_TEMPLATE: &str = "{msg} [{bar:30}] {bytes}/{total_bytes} delivered";

/// The bytes of the payload a report is about: a fragment's `(offset, length)` from its id's
/// `-offset+length`, or `None` for the whole bundle.
pub(crate) fn fragment_of(id: &str) -> Option<(u64, u64)> {
    let (_, tail) = id.rsplit_once('-')?;
    let (offset, length) = tail.split_once('+')?;
    Some((offset.parse().ok()?, length.parse().ok()?))
}

/// What the reports say so far.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Reports seen (node, status, times, reason, bundle), each told once.
    seen: BTreeSet<(String, String, String, u64, u64)>,
    /// Fragments reported delivered: (offset, length).
    delivered_pieces: BTreeSet<(u64, u64)>,
    /// The whole bundle was reported delivered.
    delivered_whole: bool,
}

impl Progress {
    /// Takes a batch of reports; returns the new ones, in the order things happened.
    pub(crate) fn take(&mut self, reports: Vec<ReportInfo>) -> Vec<ReportInfo> {
        let mut fresh: Vec<ReportInfo> = reports
            .into_iter()
            .filter(|r| {
                self.seen.insert((
                    r.bundle.clone(),
                    r.from.clone(),
                    r.status.clone(),
                    r.at_ms,
                    r.arrived_ms,
                ))
            })
            .collect();
        fresh.sort_by_key(|r| {
            (
                if r.at_ms != 0 { r.at_ms } else { r.arrived_ms },
                r.arrived_ms,
            )
        });
        for r in fresh.iter().filter(|r| r.status == "delivered") {
            match fragment_of(&r.bundle) {
                Some(piece) => {
                    self.delivered_pieces.insert(piece);
                }
                None => self.delivered_whole = true,
            }
        }
        fresh
    }

    /// Payload bytes the destination has reported delivered, of `size` (overlapping fragments
    /// counted once).
    pub(crate) fn delivered(&self, size: u64) -> u64 {
        if self.delivered_whole {
            return size;
        }
        let mut covered = 0u64;
        let mut end = 0u64;
        for &(offset, length) in &self.delivered_pieces {
            let stop = offset.saturating_add(length).min(size);
            if stop > end {
                covered += stop - offset.max(end);
                end = stop;
            }
        }
        covered
    }

    /// How many reports came.
    pub(crate) fn reports(&self) -> usize {
        self.seen.len()
    }
}

/// One report for a person: `+1.25 s  dtn://b/ forwarded (fragment 0+1000)`.
fn report_text(r: &ReportInfo, origin_ms: u64) -> String {
    let when = if r.at_ms != 0 { r.at_ms } else { r.arrived_ms };
    let mut line = format!(
        "{}  {} {}",
        fmt_offset_ms(when as i64 - origin_ms as i64),
        r.from,
        r.status
    );
    if let Some((offset, length)) = fragment_of(&r.bundle) {
        line.push_str(&format!(" (bytes {offset}..{})", offset + length));
    }
    line
}

/// Follows bundle `id` of `size` payload bytes until the destination reports all of it
/// delivered, or `wait` passes. The reports come back as lines on stderr (or move a bar on a
/// terminal); with `quiet` (`--json`) nothing is printed. Returns the reports.
pub(crate) fn follow(
    client: &Client,
    id: &str,
    size: u64,
    wait: Duration,
    quiet: bool,
) -> Result<Vec<ReportInfo>> {
    let origin_ms = creation_ms_of(id).unwrap_or_else(dtn_now_ms);
    let bar = (!quiet && io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(size.max(1));
        if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message("sent");
        bar
    });
    let path = format!("/v1/reports{}", query(&[("bundle", id.to_owned())]));
    let deadline = Instant::now() + wait;
    let mut progress = Progress::default();
    let mut all = Vec::new();
    loop {
        let reports: Vec<ReportInfo> = client
            .get_json(&path)
            .context("asking the node for the bundle's status reports")?;
        for r in progress.take(reports) {
            let text = report_text(&r, origin_ms);
            match &bar {
                Some(bar) => {
                    bar.println(&text);
                    bar.set_message(format!("{} {}", r.status, r.from));
                }
                None if !quiet => eprintln!("{text}"),
                None => {}
            }
            all.push(r);
        }
        let delivered = progress.delivered(size);
        if let Some(bar) = &bar {
            bar.set_position(delivered);
        }
        if delivered >= size && (size > 0 || progress.delivered_whole) {
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            if !quiet {
                eprintln!(
                    "delivered: {} reports in {}",
                    progress.reports(),
                    fmt_offset_ms(dtn_now_ms() as i64 - origin_ms as i64)
                );
            }
            return Ok(all);
        }
        let now = Instant::now();
        if now >= deadline {
            if let Some(bar) = bar {
                bar.abandon();
            }
            return Err(Failure::new(
                Status::NoResult,
                format!(
                    "{id}: {} of {size} bytes reported delivered within {} ({} reports); the \
                     bundle goes on, and later reports show in ferry trace's way: \
                     GET /v1/reports?bundle=…",
                    delivered,
                    humantime::format_duration(wait),
                    progress.reports()
                ),
            )
            .into());
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(bundle: &str, from: &str, status: &str, at_ms: u64) -> ReportInfo {
        ReportInfo {
            bundle: bundle.into(),
            from: from.into(),
            status: status.into(),
            at_ms,
            arrived_ms: at_ms + 1,
            reason: 0,
        }
    }

    #[test]
    fn fragments_are_named_by_offset_and_length() {
        assert_eq!(fragment_of("dtn://a/-1000-1-0+500"), Some((0, 500)));
        assert_eq!(fragment_of("dtn://a/-1000-1-500+250"), Some((500, 250)));
        assert_eq!(fragment_of("dtn://a/-1000-1"), None);
    }

    #[test]
    fn delivered_bytes_grow_with_delivered_fragments_counted_once() {
        let mut p = Progress::default();
        let id = "dtn://a/-1000-1";
        let fresh = p.take(vec![
            report(&format!("{id}-0+400"), "dtn://c/", "delivered", 1003),
            report(&format!("{id}-0+400"), "dtn://b/", "forwarded", 1002),
        ]);
        // In the order things happened.
        assert_eq!(fresh[0].status, "forwarded");
        assert_eq!(p.delivered(1000), 400);
        // The same report again is not news; an overlapping piece adds only what is new.
        assert!(
            p.take(vec![report(
                &format!("{id}-0+400"),
                "dtn://c/",
                "delivered",
                1003
            )])
            .is_empty()
        );
        p.take(vec![report(
            &format!("{id}-300+400"),
            "dtn://c/",
            "delivered",
            1004,
        )]);
        assert_eq!(p.delivered(1000), 700);
        p.take(vec![report(
            &format!("{id}-700+300"),
            "dtn://c/",
            "delivered",
            1005,
        )]);
        assert_eq!(p.delivered(1000), 1000);
        assert_eq!(p.reports(), 4);
        // A report about the whole bundle says all of it.
        let mut whole = Progress::default();
        whole.take(vec![report(id, "dtn://c/", "received", 1001)]);
        assert_eq!(whole.delivered(1000), 0);
        whole.take(vec![report(id, "dtn://c/", "delivered", 1002)]);
        assert_eq!(whole.delivered(1000), 1000);
    }

    #[test]
    fn report_lines_say_when_who_what_and_which_bytes() {
        assert_eq!(
            report_text(
                &report("dtn://a/-1000-1-0+500", "dtn://b/", "forwarded", 1250),
                1000
            ),
            "+250 ms  dtn://b/ forwarded (bytes 0..500)"
        );
        assert_eq!(
            report_text(
                &report("dtn://a/-1000-1", "dtn://c/", "delivered", 3000),
                1000
            ),
            "+2.00 s  dtn://c/ delivered"
        );
        assert!(ProgressStyle::with_template(BAR_TEMPLATE).is_ok());
    }
}
