//! `ferry trace`: follows one bundle through the network by its status reports, like
//! dtntracepath.
//!
//! It sends a bundle that asks for every report (received, forwarded, delivered, deleted) to the
//! node's discard service (`dtn://bravo/discard`, `ipn:2.9`), which a Ferry node delivers,
//! reports and drops, so a trace leaves nothing in any inbox; then it polls the node for the
//! reports that came back about it and prints each once, until one says "delivered" or the
//! timeout passes. Times are relative to the bundle's creation.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use crate::api::{ClassArg, ReportInfo, SendReply, SendRequest, creation_ms_of, dtn_now_ms};
use crate::client::{ApiArgs, Client, api_duration, query};
use crate::exit::{Failure, Status};
use crate::names;
use crate::output::{fmt_offset_ms, print_json_line, write_stdout};

/// How often the node is asked for new reports (the reports API has no long poll).
const POLL: Duration = Duration::from_millis(200);
/// Width of the node column: longer ids push the rest of their line right.
const NODE_WIDTH: usize = 24;

/// Arguments of `ferry trace`.
#[derive(Args, Debug)]
pub(crate) struct TraceArgs {
    /// The node to trace to: charlie, dtn://charlie/ or ipn:3 (an endpoint names its node). The
    /// trace bundle goes to its discard service, which keeps nothing.
    destination: String,
    /// Lifetime of the trace bundle.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    lifetime: Duration,
    /// How long to wait for the delivery report.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Forwarding class of the trace bundle.
    #[arg(long, value_enum, default_value = "dtn")]
    class: ClassArg,
    #[command(flatten)]
    api: ApiArgs,
}

pub(crate) fn run(args: TraceArgs) -> Result<()> {
    let node = names::node(&args.destination, true)?;
    let discard = names::discard_of(&node).to_string();
    let client = Client::new(&args.api.api);
    let request = SendRequest {
        payload: Some("ferry trace".into()),
        lifetime: Some(api_duration(args.lifetime)),
        class: Some(args.class.as_str().to_owned()),
        report: true,
        ..SendRequest::to(discard)
    };
    let sent_ms = dtn_now_ms();
    let reply: SendReply = serde_json::from_value(client.post_json("/v1/bundles", &request)?)
        .context("unexpected answer from the ferry node API to a send")?;
    // The node's own creation stamp is the best origin; a node without a clock stamps 0.
    let origin_ms = creation_ms_of(&reply.id).unwrap_or(sent_ms);
    if !args.api.json {
        write_stdout(&format!(
            "trace {} to {node}, waiting up to {}\n{}\n",
            reply.id,
            humantime::format_duration(args.timeout),
            header()
        ))?;
    }

    let path = format!("/v1/reports{}", query(&[("bundle", reply.id.clone())]));
    let deadline = Instant::now() + args.timeout;
    let mut seen = BTreeSet::new();
    loop {
        let answer = client.get_value(&path)?;
        let mut fresh: Vec<(ReportInfo, Value)> = Vec::new();
        for value in answer.as_array().into_iter().flatten() {
            let report: ReportInfo = serde_json::from_value(value.clone())
                .context("unexpected status report from the ferry node API")?;
            let key = (
                report.from.clone(),
                report.status.clone(),
                report.at_ms,
                report.arrived_ms,
                report.reason,
            );
            if seen.insert(key) {
                fresh.push((report, value.clone()));
            }
        }
        // Reports travel back on their own paths; show each batch in the order things happened.
        fresh.sort_by_key(|(r, _)| (event_ms(r), r.arrived_ms));
        let mut delivered = false;
        for (report, value) in &fresh {
            delivered |= report.status == "delivered";
            if args.api.json {
                print_json_line(value)?;
            } else {
                write_stdout(&report_line(report, origin_ms))?;
            }
        }
        if delivered {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Failure::new(
                Status::NoResult,
                format!(
                    "no delivery report for {} within {} ({} report{} so far)",
                    reply.id,
                    humantime::format_duration(args.timeout),
                    seen.len(),
                    if seen.len() == 1 { "" } else { "s" }
                ),
            )
            .into());
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

/// When the reported event happened: the reporter's time if it gave one, else when its report
/// arrived here.
fn event_ms(r: &ReportInfo) -> u64 {
    if r.at_ms != 0 { r.at_ms } else { r.arrived_ms }
}

fn header() -> String {
    format!(
        "{:<NODE_WIDTH$}  {:<9}  {:>10}  {:>10}",
        "NODE", "STATUS", "AT", "ARRIVED"
    )
}

/// One report: node, status, the reporter's time and the arrival time (relative to the bundle's
/// creation), and why, when a reason was given.
fn report_line(r: &ReportInfo, origin_ms: u64) -> String {
    let rel = |ms: u64| fmt_offset_ms(ms as i64 - origin_ms as i64);
    let at = if r.at_ms == 0 {
        // The reporter had no clock (or did not say): RFC 9171 allows that.
        "-".to_owned()
    } else {
        rel(r.at_ms)
    };
    let mut line = format!(
        "{:<NODE_WIDTH$}  {:<9}  {:>10}  {:>10}",
        r.from,
        r.status,
        at,
        rel(r.arrived_ms)
    );
    if r.reason != 0 {
        line.push_str("  (");
        line.push_str(&reason_text(r.reason));
        line.push(')');
    }
    line.push('\n');
    line
}

/// RFC 9171 Table 1 in words.
fn reason_text(code: u64) -> String {
    let text = match code {
        0 => "no additional information",
        1 => "lifetime expired",
        2 => "forwarded over unidirectional link",
        3 => "transmission canceled",
        4 => "depleted storage",
        5 => "destination endpoint unavailable",
        6 => "no known route to destination from here",
        7 => "no timely contact with next node on route",
        8 => "block unintelligible",
        9 => "hop limit exceeded",
        10 => "traffic pared",
        11 => "block unsupported",
        _ => return format!("reason {code}"),
    };
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(from: &str, status: &str, at_ms: u64, arrived_ms: u64, reason: u64) -> ReportInfo {
        ReportInfo {
            bundle: "dtn://a/-1000-1".into(),
            from: from.into(),
            status: status.into(),
            at_ms,
            arrived_ms,
            reason,
        }
    }

    #[test]
    fn report_lines() {
        assert_eq!(
            header(),
            "NODE                      STATUS             AT     ARRIVED"
        );
        assert_eq!(
            report_line(&report("dtn://b/", "forwarded", 1003, 1005, 0), 1000),
            "dtn://b/                  forwarded       +3 ms       +5 ms\n"
        );
        assert_eq!(
            report_line(&report("dtn://c/", "delivered", 0, 2250, 0), 1000),
            "dtn://c/                  delivered           -     +1.25 s\n"
        );
        assert_eq!(
            report_line(&report("dtn://b/", "deleted", 999, 1001, 6), 1000),
            "dtn://b/                  deleted         -1 ms       +1 ms  \
             (no known route to destination from here)\n"
        );
        assert!(report_line(&report("x", "deleted", 1, 1, 200), 0).contains("(reason 200)"));
    }

    #[test]
    fn events_are_ordered_by_the_reporters_time_if_it_has_one() {
        assert_eq!(event_ms(&report("b", "received", 7, 9, 0)), 7);
        assert_eq!(event_ms(&report("b", "received", 0, 9, 0)), 9);
    }

    #[test]
    fn defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            trace: TraceArgs,
        }
        let a = Cli::try_parse_from(["trace", "dtn://c/inbox"])
            .unwrap()
            .trace;
        assert_eq!(a.lifetime, Duration::from_secs(3600));
        assert_eq!(a.timeout, Duration::from_secs(30));
        assert_eq!(a.class, ClassArg::Dtn);
    }
}
