//! The record of one evaluation call and the CSV it is kept in: what `ferry eval` writes for every
//! call it simulated, and what a real-process testbed writes for every call it made, so one report
//! (`ferry eval --from CSV`) reads either. Also the per-setup summary every report is built from,
//! and the DTN-RPC paper's stated figures to set beside it.
//!
//! The CSV (written and read by the `csv` crate, quoting where a field needs it) has a header
//! line and one line per call. Columns, in order: [`CSV_HEADER`]. Empty fields mean "does not
//! apply" (no RTT for a call without a result, no journey check for an answered call).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};

/// How a call first left, read from its timeline's texts (the RPC engine's words, as the API
/// and `ferry call --json` show them too): `stream`, `datagram` or `dtn`; empty if it never left.
pub fn first_transport<'a>(timeline: impl IntoIterator<Item = &'a str>) -> &'static str {
    timeline
        .into_iter()
        .find(|t| t.starts_with("called"))
        .and_then(|t| {
            ["stream", "datagram", "dtn"]
                .into_iter()
                .find(|how| t.contains(&format!(" by {how}")))
        })
        .unwrap_or("")
}

/// Whether a call was sent by dtn at some point, read from its timeline's texts.
pub fn went_dtn<'a>(timeline: impl IntoIterator<Item = &'a str>) -> bool {
    timeline.into_iter().any(|t| {
        (t.starts_with("called") && t.contains(" by dtn")) || t.contains("call sent by dtn")
    })
}

/// How a call ended, in the paper's Fig. 5 terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Its first complete result came by a real-time transport (stream or datagram; the paper's
    /// MSP or MDP, "non-DTN").
    NonDtn,
    /// Its first complete result came by dtn (the paper's Rhizome).
    Dtn,
    /// No complete result within its time.
    None,
}

impl Outcome {
    /// `non-dtn`, `dtn`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::NonDtn => "non-dtn",
            Outcome::Dtn => "dtn",
            Outcome::None => "none",
        }
    }
}

/// One call of an evaluation run: which setup, which seed, how it went. Its fields, in order,
/// are the CSV's columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Who measured it: `sim` (the simulator) or `testbed` (real processes).
    pub source: String,
    /// `hub`, `chained` or `islands`.
    pub topology: String,
    /// Nodes in the network.
    pub nodes: usize,
    /// Servers, per cent of the nodes (Hub and Islands: 5 or 50); `None` for Chained's one
    /// server at the far end.
    pub servers_percent: Option<u32>,
    /// Servers in the network.
    pub servers: usize,
    /// The test set: `0MB`, `1MB`, `100MB`.
    pub set: String,
    /// Bytes of the file the call carries and gets back (0 for `0MB`: no file).
    pub file_bytes: u64,
    /// `explicit`, `any` or `all`.
    pub mode: String,
    /// The transport asked for: `dtn`, `datagram`, `stream` or `auto` (the paper's transparent).
    pub transport: String,
    /// The time each call had, ms (the paper: 210 000).
    pub budget_ms: u64,
    /// The run's seed.
    pub seed: u64,
    /// The call's index in its run (0-based).
    pub call: usize,
    /// The calling node's index.
    pub client: usize,
    /// The server an explicit call named (its index); `None` for any and all.
    pub target: Option<usize>,
    /// How the call was first sent: `stream`, `datagram` or `dtn` (empty if it never left).
    pub called_by: String,
    /// Whether the call was sent by dtn at any point (at first or as a fallback).
    pub went_dtn: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// How its first complete result came (`stream`, `datagram`, `dtn`; empty without one).
    pub result_via: String,
    /// Round-trip time: from the call to its first complete result, ms.
    pub rtt_ms: Option<u64>,
    /// For a call without a result: whether the links as they came and went offered a journey
    /// from the client to a server it called and back within its time (each hop taking the time
    /// its file needs on an idle link). `Some(false)`: no protocol could have answered it;
    /// `Some(true)`: Ferry's fault.
    #[serde(with = "yes_no")]
    pub journey: Option<bool>,
    /// The most times the call ran on one server (at most once: ≤ 1).
    pub max_runs: u32,
    /// Servers that ran it.
    pub servers_ran: usize,
    /// When the call was made, ms from the run's start.
    pub made_at_ms: u64,
}

/// The CSV header, the columns of [`CallRecord`] in order.
pub const CSV_HEADER: &str = "source,topology,nodes,servers_percent,servers,set,file_bytes,mode,transport,budget_ms,seed,call,client,target,called_by,went_dtn,outcome,result_via,rtt_ms,journey,max_runs,servers_ran,made_at_ms";

/// A CSV line that is not a call record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct CsvError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl CallRecord {
    /// The setup this call belongs to (every field but seed and call).
    pub fn setup(&self) -> SetupKey {
        SetupKey {
            source: self.source.clone(),
            topology: self.topology.clone(),
            nodes: self.nodes,
            servers_percent: self.servers_percent,
            file_bytes: self.file_bytes,
            set: self.set.clone(),
            mode: self.mode.clone(),
            transport: self.transport.clone(),
            budget_ms: self.budget_ms,
        }
    }
}

/// `journey` as `yes`, `no` or empty.
mod yes_no {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match v {
            Some(true) => "yes",
            Some(false) => "no",
            None => "",
        })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match String::deserialize(d)?.as_str() {
            "" => Ok(None),
            "yes" => Ok(Some(true)),
            "no" => Ok(Some(false)),
            other => Err(serde::de::Error::custom(format!(
                "journey {other:?} is not yes, no or empty"
            ))),
        }
    }
}

/// Writes the header and one line per record.
pub fn write_csv(out: impl Write, records: &[CallRecord]) -> io::Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    w.write_record(CSV_HEADER.split(','))?;
    for r in records {
        w.serialize(r)?;
    }
    w.flush()
}

/// Reads what [`write_csv`] wrote (the header first; blank lines are skipped).
pub fn read_csv(input: impl BufRead) -> Result<Vec<CallRecord>, CsvError> {
    let error = |e: csv::Error| CsvError {
        line: e.position().map_or(0, |p| p.line() as usize),
        what: e.to_string(),
    };
    let mut r = csv::Reader::from_reader(input);
    let header: Vec<String> = r
        .headers()
        .map_err(error)?
        .iter()
        .map(str::to_owned)
        .collect();
    if header.join(",") != CSV_HEADER {
        return Err(CsvError {
            line: 1,
            what: "not the header of a call CSV".into(),
        });
    }
    r.deserialize().map(|row| row.map_err(error)).collect()
}

/// What makes a setup: everything about a call but its seed and index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SetupKey {
    /// `hub`, `chained`, `islands`.
    pub topology: String,
    /// Nodes.
    pub nodes: usize,
    /// Servers, per cent (`None`: Chained's one server).
    pub servers_percent: Option<u32>,
    /// File bytes (orders the sets: 0 MB, 1 MB, 100 MB).
    pub file_bytes: u64,
    /// The set's name.
    pub set: String,
    /// Addressing mode.
    pub mode: String,
    /// Transport asked for.
    pub transport: String,
    /// Time each call had, ms.
    pub budget_ms: u64,
    /// `sim` or `testbed` (last: the same setup from both sit side by side in order).
    pub source: String,
}

impl SetupKey {
    /// The paper's name of the mode: `explicit by dtn`, `any transparent`, `explicit by stream`.
    pub fn mode_name(&self) -> String {
        let how = match self.transport.as_str() {
            "auto" => "transparent".to_string(),
            t => format!("by {t}"),
        };
        format!("{} {how}", self.mode)
    }

    /// `chained-32`, `hub-28 5 %`, `islands-64 50 %`; a setup run on the testbed says so:
    /// `islands-16 25 % (testbed)`.
    pub fn network_name(&self) -> String {
        let name = match self.servers_percent {
            Some(p) => format!("{}-{} {p} %", self.topology, self.nodes),
            None => format!("{}-{}", self.topology, self.nodes),
        };
        if self.source == "sim" {
            name
        } else {
            format!("{name} ({})", self.source)
        }
    }
}

impl fmt::Display for SetupKey {
    /// `islands-64 5 %, 100MB, any transparent, 210 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {}, {}, {} s",
            self.network_name(),
            self.set,
            self.mode_name(),
            self.budget_ms / 1_000
        )
    }
}

/// One setup's calls over every seed, counted.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupSummary {
    /// The setup.
    pub key: SetupKey,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Calls.
    pub calls: usize,
    /// Answered via non-DTN.
    pub non_dtn: usize,
    /// Answered via DTN.
    pub dtn: usize,
    /// Not answered, and no journey existed.
    pub lost_no_journey: usize,
    /// Not answered though a journey existed (or the check was not made): Ferry's fault.
    pub lost_ferry: usize,
    /// RTTs of the answered calls, ms, ascending.
    pub rtts_ms: Vec<u64>,
    /// The most times any call ran on one server.
    pub max_runs: u32,
}

impl SetupSummary {
    /// Calls without a result.
    pub fn lost(&self) -> usize {
        self.lost_no_journey + self.lost_ferry
    }

    /// `part` per cent of the calls.
    pub fn percent(&self, part: usize) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            100.0 * part as f64 / self.calls as f64
        }
    }

    /// The RTT at percentile `p` (0–100), nearest rank.
    pub fn rtt_percentile_ms(&self, p: f64) -> Option<u64> {
        let n = self.rtts_ms.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * (n - 1) as f64).round() as usize;
        self.rtts_ms.get(rank.min(n - 1)).copied()
    }

    /// Mean RTT of the answered calls, ms.
    pub fn rtt_mean_ms(&self) -> Option<f64> {
        (!self.rtts_ms.is_empty())
            .then(|| self.rtts_ms.iter().sum::<u64>() as f64 / self.rtts_ms.len() as f64)
    }
}

/// The records grouped by setup, in setup order.
pub fn summarise(records: &[CallRecord]) -> Vec<SetupSummary> {
    let mut by: BTreeMap<SetupKey, SetupSummary> = BTreeMap::new();
    for r in records {
        let key = r.setup();
        let s = by.entry(key.clone()).or_insert_with(|| SetupSummary {
            key,
            seeds: Vec::new(),
            calls: 0,
            non_dtn: 0,
            dtn: 0,
            lost_no_journey: 0,
            lost_ferry: 0,
            rtts_ms: Vec::new(),
            max_runs: 0,
        });
        if !s.seeds.contains(&r.seed) {
            s.seeds.push(r.seed);
        }
        s.calls += 1;
        match r.outcome {
            Outcome::NonDtn => s.non_dtn += 1,
            Outcome::Dtn => s.dtn += 1,
            Outcome::None if r.journey == Some(false) => s.lost_no_journey += 1,
            Outcome::None => s.lost_ferry += 1,
        }
        if let (Some(rtt), true) = (r.rtt_ms, r.outcome != Outcome::None) {
            s.rtts_ms.push(rtt);
        }
        s.max_runs = s.max_runs.max(r.max_runs);
    }
    let mut out: Vec<SetupSummary> = by.into_values().collect();
    for s in &mut out {
        s.seeds.sort_unstable();
        s.rtts_ms.sort_unstable();
    }
    out
}

/// What the DTN-RPC paper states for a setup (Sec. V-E and V-F; our copy of the paper is its
/// text, without the figures' plotted values).
#[derive(Debug, Clone, PartialEq)]
pub struct PaperFigure {
    /// RTT the paper states, ms, and how it says it (`≈40 s`, `< 1 s`).
    pub rtt: Option<(u64, &'static str)>,
    /// Shares (non-DTN, DTN, none), per cent, where the text states them.
    pub shares: Option<[f64; 3]>,
    /// Where it comes from.
    pub source: &'static str,
}

/// The paper's stated figure for this setup, at its 210 s budget, if it states one.
///
/// - Sec. V-E, Fig. 4a: Chained 0 MB called by MDP or MSP (by datagram or stream) "within a
///   second"; every DTN test "about 40 seconds", whatever the file size; Hub's "do not differ
///   much" (so the same figures, marked as read from the text about Fig. 4b).
/// - Sec. V-F, Fig. 5 (Islands, 100 MB, transparent): explicit with 50 % servers: 41.9 % of the
///   results via DTN, 41.9 % none (so 16.2 % via non-DTN); implicit (any) with 5 % servers:
///   61.1 % via DTN, 27.8 % none (so 11.1 % via non-DTN).
pub fn paper_figure(key: &SetupKey) -> Option<PaperFigure> {
    if key.budget_ms != 210_000 {
        return None;
    }
    let pct = key.servers_percent;
    match (key.topology.as_str(), key.set.as_str()) {
        ("islands", "100MB") if key.transport == "auto" => match (key.mode.as_str(), pct) {
            ("explicit", Some(50)) => Some(PaperFigure {
                rtt: None,
                shares: Some([100.0 - 41.9 - 41.9, 41.9, 41.9]),
                source: "Sec. V-F text (Fig. 5): 41.9 % via DTN, 41.9 % none",
            }),
            ("any", Some(5)) => Some(PaperFigure {
                rtt: None,
                shares: Some([100.0 - 61.1 - 27.8, 61.1, 27.8]),
                source: "Sec. V-F text (Fig. 5): 61.1 % via DTN, 27.8 % none",
            }),
            _ => None,
        },
        ("chained" | "hub", set) => {
            let figure = if key.topology == "chained" {
                "Fig. 4a"
            } else {
                "Fig. 4b"
            };
            match key.transport.as_str() {
                "dtn" => Some(PaperFigure {
                    rtt: Some((40_000, "≈40 s")),
                    shares: None,
                    source: if figure == "Fig. 4a" {
                        "Sec. V-E text (Fig. 4a): DTN tests about 40 s"
                    } else {
                        "Sec. V-E text (Fig. 4b): as Chained, about 40 s"
                    },
                }),
                "datagram" | "stream" if set == "0MB" => Some(PaperFigure {
                    rtt: Some((1_000, "< 1 s")),
                    shares: None,
                    source: if figure == "Fig. 4a" {
                        "Sec. V-E text (Fig. 4a): 0MB by MDP/MSP within a second"
                    } else {
                        "Sec. V-E text (Fig. 4b): as Chained, within a second"
                    },
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(call: usize, outcome: Outcome, journey: Option<bool>) -> CallRecord {
        CallRecord {
            source: "sim".into(),
            topology: "islands".into(),
            nodes: 64,
            servers_percent: Some(5),
            servers: 3,
            set: "100MB".into(),
            file_bytes: 100_000_000,
            mode: "any".into(),
            transport: "auto".into(),
            budget_ms: 210_000,
            seed: 1,
            call,
            client: 7,
            target: None,
            called_by: "datagram".into(),
            went_dtn: true,
            outcome,
            result_via: if outcome == Outcome::None {
                String::new()
            } else {
                "dtn".into()
            },
            rtt_ms: (outcome != Outcome::None).then_some(41_000 + call as u64),
            journey,
            max_runs: 1,
            servers_ran: 1,
            made_at_ms: 10_000,
        }
    }

    #[test]
    fn csv_round_trips_and_summarises() {
        let records = vec![
            record(0, Outcome::Dtn, None),
            record(1, Outcome::None, Some(false)),
            record(2, Outcome::None, Some(true)),
            record(3, Outcome::NonDtn, None),
        ];
        let mut out = Vec::new();
        write_csv(&mut out, &records).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(text.lines().count(), 5);
        assert_eq!(read_csv(&out[..]).unwrap(), records);
        let s = summarise(&records);
        assert_eq!(s.len(), 1);
        let s = &s[0];
        assert_eq!(
            (s.calls, s.non_dtn, s.dtn, s.lost_no_journey, s.lost_ferry),
            (4, 1, 1, 1, 1)
        );
        assert_eq!(s.rtts_ms, vec![41_000, 41_003]);
        assert_eq!(
            paper_figure(&s.key).unwrap().shares.unwrap()[2],
            27.8,
            "any 5 % Islands 100MB transparent"
        );
        assert!(read_csv(&b"a,b\n"[..]).is_err());
    }
}
