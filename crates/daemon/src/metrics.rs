//! The node's Prometheus metrics, as `GET /metrics` shows them (OpenMetrics text, written by
//! the Prometheus project's `prometheus-client`).
//!
//! Three kinds of figures:
//! - **events** the loop counts as they happen ([`Metrics`]'s families and [`Counters`]):
//!   calls made and finished, executions, drops by reason, latencies, and the loop's own
//!   counters (sessions, UDP, beacons, store);
//! - **figures other parts keep** (the node's, the engine's, the store's, the API bodies'),
//!   read at each scrape from a [`Sources`] the loop fills and written as constant metrics;
//! - **the process**: resident memory, CPU time, open descriptors, start time, read from
//!   `/proc/self` (Linux; absent elsewhere), and `ferry_build_info`.
//!
//! Every label set is bounded: its values come from closed enums of this code base (a mode, a
//! transport, a call state, a reject code's name, a drop reason), never from what a peer or a
//! caller chose (call ids, node ids, endpoints, procedure names), which would let anyone who
//! can send a bundle grow the scrape, and the memory behind it, without end.

use std::collections::BTreeSet;
use std::time::Duration;

use node::{DropReason, NodeStats};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric as _, MetricEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rpc::{CallRef, CallState, RpcStats};
use wire::DtnTime;
use wire::rpc::{Message, RejectCode};

/// The content type of the exposition.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency buckets, seconds: 10 ms to about 11.6 days (RPC over DTN may take days), each
/// step ×4.
fn latency_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.01, 4.0, 14,
    ))
}

/// Store sync buckets, seconds: 50 µs to about 1.6 s, each step ×2 (a sync of an SSD's log takes
/// a tenth of a millisecond, a busy SD card's a second).
fn sync_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 16,
    ))
}

/// A call's mode and transport (closed enums).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MadeLabels {
    mode: &'static str,
    transport: &'static str,
}

/// How a call this node made ended: its state, and the reject code of the reply that failed
/// it (`none` otherwise).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    mode: &'static str,
    outcome: &'static str,
    code: &'static str,
}

/// A call's mode alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

/// How an execution this node ran for a caller ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExecutionLabels {
    outcome: &'static str,
    code: &'static str,
}

/// Why a bundle was dropped.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

/// The loop's own counters, bumped where it sees what they count.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) sessions_opened: u64,
    pub(crate) sessions_closed: u64,
    pub(crate) udp_sent: u64,
    pub(crate) udp_received: u64,
    pub(crate) udp_send_errors: u64,
    /// Datagrams that passed the listener's gate but are not bundles.
    pub(crate) udp_malformed: u64,
    pub(crate) udp_broadcasts: u64,
    pub(crate) refused_duplicates: u64,
    pub(crate) beacons_sent: u64,
    pub(crate) beacons_heard: u64,
    /// dtn7-rs's beacons, sent (per interface) and heard (see `[discovery] formats`).
    pub(crate) dtn7_beacons_sent: u64,
    pub(crate) dtn7_beacons_heard: u64,
    pub(crate) store_errors: u64,
    pub(crate) store_syncs: u64,
    pub(crate) reactive_fragments_received: u64,
    pub(crate) recovered_dropped: u64,
    pub(crate) refusals: Refusals,
    /// Sessions established over TLS.
    pub(crate) tls_sessions: u64,
    /// Sessions whose TLS handshake failed (untrusted or unfit certificate, protocol error,
    /// timeout).
    pub(crate) tls_handshake_failures: u64,
    /// Sessions ended because the peer's node id is not in its certificate.
    pub(crate) tls_node_id_mismatches: u64,
    /// Sessions refused because the peer did not offer TLS where it is required.
    pub(crate) tls_required_refusals: u64,
}

/// Refusals of what strangers may grow, counted; the first of each kind is also logged.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    pub(crate) sessions_total: u64,
    pub(crate) sessions_per_address: u64,
    pub(crate) discovery_dials_deferred: u64,
    pub(crate) discovered_forgotten: u64,
    pub(crate) beacon_redirects_ignored: u64,
    /// Kinds already logged.
    logged: BTreeSet<&'static str>,
}

impl Refusals {
    /// Logs `what` the first time `kind` happens; later ones are only counted.
    pub(crate) fn log_once(&mut self, kind: &'static str, what: std::fmt::Arguments<'_>) {
        if self.logged.insert(kind) {
            tracing::warn!("{what} (logged once; the metric ferry_{kind}_total counts them)");
        }
    }
}

/// What the loop reads from the parts that keep their own figures, at each scrape.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    pub(crate) node: NodeStats,
    pub(crate) rpc: RpcStats,
    /// Served-call records kept, in memory and in the store.
    pub(crate) rpc_served_records: u64,
    /// Neighbours with a session.
    pub(crate) peers: u64,
    /// (bundles, bytes, quota), if the store could say.
    pub(crate) store: Option<(u64, u64, u64)>,
    pub(crate) inbox_bundles: u64,
    pub(crate) store_commits: u64,
    pub(crate) udp_refused_oversize: u64,
    pub(crate) udp_refused_rate: u64,
    /// (in use, limit, refused) of the TCPCL receive budget, if there is one.
    pub(crate) receive_memory: Option<(u64, u64, u64)>,
    pub(crate) discovered_nodes: u64,
    pub(crate) api_payload_too_large: u64,
    pub(crate) api_uploads: u64,
    pub(crate) api_uploads_limit: u64,
    pub(crate) api_uploads_waited: u64,
    pub(crate) purge_set_entries: u64,
    /// Applications connected to serve procedures, and their counters.
    pub(crate) providers: (u64, crate::providers::ProviderCounters),
}

/// The daemon's metrics: the event families, the loop's counters, and how to write them all.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// The loop's own counters (written with the other figures at each scrape).
    pub(crate) counters: Counters,
    calls_made: Family<MadeLabels, Counter>,
    calls_finished: Family<FinishedLabels, Counter>,
    call_seconds: HistogramFamily<ModeLabels>,
    call_first_result_seconds: HistogramFamily<ModeLabels>,
    executions: Family<ExecutionLabels, Counter>,
    drops: Family<DropLabels, Counter>,
    delivery_seconds: Histogram,
    store_sync_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("ferry");
        let calls_made = Family::<MadeLabels, Counter>::default();
        registry.register(
            "rpc_calls_made",
            "Calls this node made through its API, by mode and transport",
            calls_made.clone(),
        );
        let calls_finished = Family::<FinishedLabels, Counter>::default();
        registry.register(
            "rpc_calls_finished",
            "Calls this node made that ended, by mode, outcome (succeeded, failed, expired, \
             cancelled) and the reject code that failed them (none otherwise)",
            calls_finished.clone(),
        );
        let call_seconds: HistogramFamily<ModeLabels> =
            Family::new_with_constructor(latency_buckets);
        registry.register(
            "rpc_call_seconds",
            "Seconds from making a call to its end, for calls this node made, by mode",
            call_seconds.clone(),
        );
        let call_first_result_seconds: HistogramFamily<ModeLabels> =
            Family::new_with_constructor(latency_buckets);
        registry.register(
            "rpc_call_first_result_seconds",
            "Seconds from making a call to its first result, for calls this node made that \
             had one, by mode",
            call_first_result_seconds.clone(),
        );
        let executions = Family::<ExecutionLabels, Counter>::default();
        registry.register(
            "rpc_executions_finished",
            "Executions of procedures this node ran for callers (executables and providers) \
             that ended, by outcome (success, failure) and reject code (none on success)",
            executions.clone(),
        );
        let drops = Family::<DropLabels, Counter>::default();
        registry.register(
            "bundle_drops",
            "Bundles the node dropped, by reason",
            drops.clone(),
        );
        let delivery_seconds = latency_buckets();
        registry.register(
            "bundle_delivery_seconds",
            "Seconds from a bundle's creation (its source's clock) to its delivery here; \
             bundles created without a clock (time 0) are not counted",
            delivery_seconds.clone(),
        );
        let store_sync_seconds = sync_buckets();
        registry.register(
            "store_sync_seconds",
            "Seconds each sync of the store's log took: every durable promise (an answer, an \
             acknowledged bundle, a bundle forwarded) waits for one",
            store_sync_seconds.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "The ferry build running, as labels", build);
        Self {
            registry,
            counters: Counters::default(),
            calls_made,
            calls_finished,
            call_seconds,
            call_first_result_seconds,
            executions,
            drops,
            delivery_seconds,
            store_sync_seconds,
        }
    }

    /// A call this node made was sent on its way.
    pub(crate) fn call_made(&self, call: &wire::rpc::Call) {
        self.calls_made
            .get_or_create(&MadeLabels {
                mode: call.mode.name(),
                transport: call.transport.name(),
            })
            .inc();
    }

    /// A call this node made is over (`now` is when).
    pub(crate) fn call_finished(&self, now: DtnTime, call: CallRef<'_>) {
        let mode = call.call.mode.name();
        let code = match call.state {
            CallState::Failed => call
                .replies
                .iter()
                .rev()
                .find_map(|r| match &r.message {
                    Message::Reject(reject) => Some(reject.code.name()),
                    _ => None,
                })
                .unwrap_or("none"),
            _ => "none",
        };
        self.calls_finished
            .get_or_create(&FinishedLabels {
                mode,
                outcome: call.state.name(),
                code,
            })
            .inc();
        let labels = ModeLabels { mode };
        self.call_seconds
            .get_or_create(&labels)
            .observe(seconds(now.saturating_since(call.created)));
        let first_result = call
            .replies
            .iter()
            .filter(|r| matches!(r.message, Message::Result(_)))
            .map(|r| r.at)
            .min();
        if let Some(at) = first_result {
            self.call_first_result_seconds
                .get_or_create(&labels)
                .observe(seconds(at.saturating_since(call.created)));
        }
    }

    /// An execution this node ran for a caller ended.
    pub(crate) fn execution_finished(&self, outcome: &rpc::Outcome) {
        let labels = match outcome {
            rpc::Outcome::Success { .. } => ExecutionLabels {
                outcome: "success",
                code: "none",
            },
            rpc::Outcome::Failure { code, .. } => ExecutionLabels {
                outcome: "failure",
                code: code_name(*code),
            },
        };
        self.executions.get_or_create(&labels).inc();
    }

    /// The node dropped a bundle.
    pub(crate) fn dropped(&self, reason: DropReason) {
        self.drops
            .get_or_create(&DropLabels {
                reason: drop_reason(reason),
            })
            .inc();
    }

    /// A bundle was delivered here this long after its creation.
    pub(crate) fn delivered(&self, age: Duration) {
        self.delivery_seconds.observe(seconds(age));
    }

    /// A sync of the store's log ended after `took`.
    pub(crate) fn store_synced(&self, took: Duration) {
        self.store_sync_seconds.observe(seconds(took));
    }

    /// The exposition: the event families, the figures from `sources` and the loop's counters,
    /// the process's, and the closing `# EOF`.
    pub(crate) fn render(&self, sources: &Sources) -> String {
        let mut out = String::new();
        let mut figures = Registry::with_prefix("ferry");
        figures.register_collector(Box::new(Figures(node_figures(sources, &self.counters))));
        let mut process = Registry::default();
        process.register_collector(Box::new(Figures(process_figures())));
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        // Writing to a String does not fail; the library refuses only values it cannot write,
        // which this module does not give it. Should it, the scrape says so instead of being cut
        // short silently: it has no `# EOF`, which scrapers take as a failed scrape.
        let written = encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &figures))
            .and_then(|()| encode_registry(&mut out, &process));
        match written {
            Ok(()) => {
                let _ = encode_eof(&mut out);
            }
            Err(_) => tracing::error!("metrics: a value could not be written; the scrape is cut"),
        }
        out
    }
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The reject code's name; codes this build does not know are all `other` (a bounded set).
fn code_name(code: RejectCode) -> &'static str {
    code.name()
}

/// A stable snake_case name for each drop reason.
fn drop_reason(reason: DropReason) -> &'static str {
    match reason {
        DropReason::Expired => "expired",
        DropReason::HopLimitExceeded => "hop_limit_exceeded",
        DropReason::Malformed => "malformed",
        DropReason::NoRoute => "no_route",
        DropReason::StoreFull => "store_full",
        DropReason::Evicted => "evicted",
        DropReason::StoreError => "store_error",
        DropReason::Purged => "purged",
        DropReason::BlockUnsupported => "block_unsupported",
        DropReason::SecurityFailed => "security_failed",
        DropReason::SecurityMissing => "security_missing",
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A figure's value: a count, written as an integer, or seconds.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

/// One figure read at a scrape: its name (a counter's with its `_total`), help, kind, and its
/// series: each the one label it may have (`(name, value)`, from a closed set) and its value.
#[derive(Debug)]
struct Figure {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    series: Vec<(Option<(&'static str, &'static str)>, Value)>,
}

fn counter(name: &'static str, help: &'static str, value: u64) -> Figure {
    Figure {
        name,
        help,
        kind: Kind::Counter,
        series: vec![(None, Value::Int(value))],
    }
}

fn gauge(name: &'static str, help: &'static str, value: u64) -> Figure {
    Figure {
        name,
        help,
        kind: Kind::Gauge,
        series: vec![(None, Value::Int(value))],
    }
}

/// Figures read at a scrape, written as constant metrics.
#[derive(Debug)]
struct Figures(Vec<Figure>);

impl Collector for Figures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            let (family, kind) = match f.kind {
                // OpenMetrics names the family without the `_total` its sample carries.
                Kind::Counter => (
                    f.name.strip_suffix("_total").unwrap_or(f.name),
                    MetricType::Counter,
                ),
                Kind::Gauge => (f.name, MetricType::Gauge),
            };
            let mut m = encoder.encode_descriptor(family, f.help, None, kind)?;
            match f.series.as_slice() {
                // Without labels, as `name value` (an empty label set would be `name{} value`).
                [(None, value)] => encode_value(f.kind, *value, m)?,
                series => {
                    for (label, value) in series {
                        let labels: Vec<(&str, &str)> = label.iter().copied().collect();
                        encode_value(f.kind, *value, m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn encode_value(
    kind: Kind,
    value: Value,
    series: MetricEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    match (kind, value) {
        (Kind::Counter, Value::Int(v)) => ConstCounter::new(v).encode(series),
        (Kind::Counter, Value::Float(v)) => ConstCounter::new(v).encode(series),
        // The library's integer gauges are i64; a bound of u64::MAX (none set) is written as a
        // float rather than refused.
        (Kind::Gauge, Value::Int(v)) => match i64::try_from(v) {
            Ok(v) => ConstGauge::new(v).encode(series),
            Err(_) => ConstGauge::new(v as f64).encode(series),
        },
        (Kind::Gauge, Value::Float(v)) => ConstGauge::new(v).encode(series),
    }
}

/// The figures that existed before the metrics moved to `prometheus-client`, under the same
/// sample names, and the engine's call counters.
fn node_figures(s: &Sources, m: &Counters) -> Vec<Figure> {
    let n = &s.node;
    let r = &m.refusals;
    let (store_bundles, store_bytes, store_quota) = s.store.unwrap_or_default();
    let (receive_in_use, receive_limit, receive_refused) = s.receive_memory.unwrap_or_default();
    vec![
        counter(
            "bundles_received_total",
            "Bundles received on links.",
            n.bundles_received,
        ),
        counter(
            "bytes_received_total",
            "Encoded bytes of the bundles received on links.",
            n.bytes_received,
        ),
        counter(
            "bundles_sent_total",
            "Bundle transmissions.",
            n.bundles_sent,
        ),
        counter(
            "bytes_sent_total",
            "Encoded bytes transmitted.",
            n.bytes_sent,
        ),
        counter(
            "bundles_delivered_total",
            "Bundles delivered to local endpoints.",
            n.delivered,
        ),
        counter(
            "bundles_duplicate_total",
            "Duplicate bundles ignored.",
            n.duplicates,
        ),
        counter(
            "bundles_dropped_total",
            "Bundles dropped (ferry_bundle_drops_total says why).",
            n.dropped,
        ),
        counter(
            "fragments_sent_total",
            "Fragments cut and sent.",
            n.fragments_sent,
        ),
        counter(
            "mtu_too_small_total",
            "Offers of a bundle not sent to a TCPCL peer whose transfer MRU would have it cut into \
             pieces smaller than 4 KiB (the peer gets only bundles that fit it whole).",
            n.mtu_too_small,
        ),
        counter(
            "control_sent_total",
            "Control bundles sent.",
            n.control_sent,
        ),
        gauge("peers", "Neighbours with a session.", s.peers),
        gauge("store_bundles", "Bundles in the store.", store_bundles),
        gauge("store_bytes", "Bytes in the store.", store_bytes),
        gauge("store_quota_bytes", "The store's quota.", store_quota),
        gauge(
            "inbox_bundles",
            "Bundles waiting in local inboxes.",
            s.inbox_bundles,
        ),
        counter(
            "tcpcl_sessions_opened_total",
            "TCPCL sessions opened.",
            m.sessions_opened,
        ),
        counter(
            "tcpcl_sessions_closed_total",
            "TCPCL sessions ended.",
            m.sessions_closed,
        ),
        counter(
            "tcpcl_tls_sessions_total",
            "TCPCL sessions established over TLS (the peer's node id authenticated by its certificate).",
            m.tls_sessions,
        ),
        counter(
            "tcpcl_tls_handshake_failures_total",
            "TCPCL sessions whose TLS handshake failed (certificate not trusted or not for the address, protocol error, timeout).",
            m.tls_handshake_failures,
        ),
        counter(
            "tcpcl_tls_node_id_mismatches_total",
            "TCPCL sessions ended because the peer's node id is not a URI name of its certificate.",
            m.tls_node_id_mismatches,
        ),
        counter(
            "tcpcl_tls_required_refusals_total",
            "TCPCL sessions refused because the peer did not offer TLS where it is required.",
            m.tls_required_refusals,
        ),
        counter(
            "tcpcl_refused_duplicates_total",
            "Incoming transfers refused because the node already had the bundle.",
            m.refused_duplicates,
        ),
        counter(
            "reactive_fragments_received_total",
            "Fragments kept from cut incoming transfers.",
            m.reactive_fragments_received,
        ),
        counter(
            "udp_sent_total",
            "Bundles sent as UDP datagrams.",
            m.udp_sent,
        ),
        counter(
            "udp_received_total",
            "UDP datagrams taken by the event loop (past the size and rate bounds).",
            m.udp_received,
        ),
        counter(
            "udp_refused_oversize_total",
            "UDP datagrams dropped unread for being larger than udp.max_bundle.",
            s.udp_refused_oversize,
        ),
        counter(
            "udp_refused_rate_total",
            "UDP datagrams dropped unread for exceeding udp.max_rate (per session address, or of all addresses without a session together).",
            s.udp_refused_rate,
        ),
        counter(
            "udp_malformed_total",
            "UDP datagrams taken that were not bundles.",
            m.udp_malformed,
        ),
        counter(
            "udp_broadcasts_total",
            "Broadcast bundles flooded as one UDP broadcast per interface.",
            m.udp_broadcasts,
        ),
        counter(
            "udp_send_errors_total",
            "UDP sends that failed.",
            m.udp_send_errors,
        ),
        counter(
            "beacons_sent_total",
            "Discovery beacons sent (per interface).",
            m.beacons_sent,
        ),
        counter(
            "beacons_heard_total",
            "Discovery beacons heard from other nodes.",
            m.beacons_heard,
        ),
        counter(
            "dtn7_beacons_sent_total",
            "dtn7-rs discovery beacons sent (per interface).",
            m.dtn7_beacons_sent,
        ),
        counter(
            "dtn7_beacons_heard_total",
            "dtn7-rs discovery beacons heard from other nodes (those of Ferry nodes that also send Ferry's are left aside, uncounted).",
            m.dtn7_beacons_heard,
        ),
        counter(
            "store_errors_total",
            "Store operations that failed.",
            m.store_errors,
        ),
        counter(
            "store_commits_total",
            "Store commits (each a batch of changes, written but not yet synced).",
            s.store_commits,
        ),
        counter(
            "store_syncs_total",
            "Syncs of the store's log to the disk (each makes every commit before it durable).",
            m.store_syncs,
        ),
        counter(
            "tcpcl_sessions_refused_limit_total",
            "Sessions refused because tcpcl.max_sessions were open.",
            r.sessions_total,
        ),
        counter(
            "tcpcl_sessions_refused_address_limit_total",
            "Sessions refused because tcpcl.max_sessions_per_address were open with that address.",
            r.sessions_per_address,
        ),
        gauge(
            "tcpcl_receive_memory_bytes",
            "Bytes held by unfinished incoming transfers, all sessions together.",
            receive_in_use,
        ),
        gauge(
            "tcpcl_receive_memory_limit_bytes",
            "The bound on those bytes (tcpcl.receive_memory).",
            receive_limit,
        ),
        counter(
            "tcpcl_transfers_refused_memory_total",
            "Incoming transfers refused (XFER_REFUSE No Resources) because tcpcl.receive_memory was spent.",
            receive_refused,
        ),
        gauge(
            "discovered_nodes",
            "Nodes known from their beacons.",
            s.discovered_nodes,
        ),
        counter(
            "discovery_dials_deferred_total",
            "Discovered nodes not dialled at once because others were being dialled.",
            r.discovery_dials_deferred,
        ),
        counter(
            "discovered_forgotten_total",
            "Discovered nodes forgotten to make room for others (the table or an address's share was full).",
            r.discovered_forgotten,
        ),
        counter(
            "beacon_redirects_ignored_total",
            "Beacons naming a node with a session from another address than the session's (not believed).",
            r.beacon_redirects_ignored,
        ),
        counter(
            "store_recovered_dropped_total",
            "Bundles dropped by the store's recovery scan at start.",
            m.recovered_dropped,
        ),
        counter(
            "api_payload_too_large_total",
            "API request bodies refused (413) for exceeding their limit (api.max_payload), by declared length or as they streamed in.",
            s.api_payload_too_large,
        ),
        gauge(
            "api_uploads",
            "API request bodies above 64 KiB being read or held now.",
            s.api_uploads,
        ),
        gauge(
            "api_uploads_limit",
            "The bound on those (api.max_uploads).",
            s.api_uploads_limit,
        ),
        counter(
            "api_uploads_waited_total",
            "API request bodies above 64 KiB that waited because api.max_uploads were being read or held.",
            s.api_uploads_waited,
        ),
        gauge(
            "providers_connected",
            "Applications connected to /v1/providers to serve procedures.",
            s.providers.0,
        ),
        counter(
            "provider_registrations_refused_total",
            "Applications' registrations refused (a name served already, too many providers or procedures).",
            s.providers.1.registrations_refused,
        ),
        counter(
            "provider_calls_handed_over_total",
            "Calls handed to applications serving their procedures.",
            s.providers.1.handed_over,
        ),
        counter(
            "provider_calls_timed_out_total",
            "Calls ended because the application serving them did not answer within the procedure's timeout.",
            s.providers.1.timed_out,
        ),
        counter(
            "provider_calls_lost_total",
            "Calls ended because the application serving them went away and did not come back within rpc.provider_grace.",
            s.providers.1.lost,
        ),
        counter(
            "provider_results_refused_total",
            "Results applications returned that broke a limit (max_output, the number of files, a file name).",
            s.providers.1.results_refused,
        ),
        gauge(
            "purge_set_entries",
            "Keys of bundles known to be delivered (the purge set).",
            s.purge_set_entries,
        ),
        counter(
            "purge_set_full_total",
            "Keys of delivered bundles named by neighbours' summaries and not kept because the \
             purge set was full (the node's own entries are always kept).",
            n.purge_set_full,
        ),
        counter(
            "carry_refused_total",
            "Bundles carried for other nodes refused because the node held max_carried_bundles.",
            n.carry_refused,
        ),
        counter(
            "primary_crc_added_total",
            "Bundles received whose primary block had neither a CRC nor a BIB (RFC 9171 §4.3.1), \
             given a CRC-32C as they were accepted so that what this node forwards is valid.",
            n.primary_crc_added,
        ),
        counter(
            "bpsec_bib_verified_total",
            "BPSec integrity blocks (BIBs) verified on receipt with a configured key.",
            n.bib_verified,
        ),
        counter(
            "bpsec_bcb_decrypted_total",
            "BPSec confidentiality blocks (BCBs) decrypted at this node, their destination.",
            n.bcb_decrypted,
        ),
        counter(
            "bpsec_bib_failed_total",
            "Bundles dropped because a BIB did not verify or a security block was malformed.",
            n.bib_failed,
        ),
        counter(
            "bpsec_bcb_failed_total",
            "Bundles for this node dropped because a BCB could not be decrypted.",
            n.bcb_failed,
        ),
        counter(
            "bpsec_missing_total",
            "Bundles dropped because their source must sign or encrypt ([[bpsec.verify]] or \
             [[bpsec.decrypt]] required) and did not.",
            n.security_missing,
        ),
        counter(
            "bpsec_bib_added_total",
            "BIBs this node added to bundles it sent ([[bpsec.sign]]).",
            n.bib_added,
        ),
        counter(
            "bpsec_bcb_added_total",
            "BCBs this node added to bundles it sent ([[bpsec.encrypt]]).",
            n.bcb_added,
        ),
        counter(
            "planned_handoffs_total",
            "Bundles handed to the next hop of their route in the contact plan and released \
             here once it held them whole.",
            n.planned_handoffs,
        ),
        counter(
            "summary_purge_keys_ignored_total",
            "Keys of delivered bundles in a neighbour's summary beyond the most read from one \
             summary.",
            n.summary_purge_keys_ignored,
        ),
        counter(
            "rpc_forged_total",
            "RPC messages dropped for a bad signature, a failed decryption or garbage.",
            s.rpc.forged,
        ),
        counter(
            "rpc_key_mismatch_total",
            "RPC messages dropped because they were signed by another key than the one known for \
             the node they name as their sender (`ferry keys` shows the key presented).",
            s.rpc.key_mismatches,
        ),
        counter(
            "rpc_presented_keys_dropped_total",
            "Presented keys forgotten to keep their table within its bound (256 nodes).",
            s.rpc.presented_keys_dropped,
        ),
        counter(
            "rpc_keys_not_learnt_total",
            "New nodes' keys not learnt because the table of learnt keys is full.",
            s.rpc.keys_not_learnt,
        ),
        Figure {
            name: "rpc_calls_served_total",
            help: "Calls other nodes made to this one, by what became of them: accepted to run, \
                   rejected (not offered, not allowed, a predicate failed, bad arguments…), or a \
                   copy of a call already known (answered from the cache).",
            kind: Kind::Counter,
            series: vec![
                (
                    Some(("result", "accepted")),
                    Value::Int(s.rpc.calls_accepted),
                ),
                (
                    Some(("result", "rejected")),
                    Value::Int(s.rpc.calls_rejected),
                ),
                (Some(("result", "duplicate")), Value::Int(s.rpc.duplicates)),
            ],
        },
        gauge(
            "rpc_served_records",
            "Records of calls this node served (answered, refused or skipped), in memory and in \
             the store; each is kept until its call's deadline plus an hour.",
            s.rpc_served_records,
        ),
        Figure {
            name: "rpc_calls_dropped_unheard_total",
            help: "New calls from other nodes dropped without a record or a reply (never run) \
                   because this node kept its most served-call records (rpc.max_served_calls) \
                   or their caller its most (rpc.max_served_calls_per_caller).",
            kind: Kind::Counter,
            series: vec![
                (
                    Some(("bound", "total")),
                    Value::Int(s.rpc.served_table_full),
                ),
                (
                    Some(("bound", "caller")),
                    Value::Int(s.rpc.served_caller_full),
                ),
            ],
        },
        counter(
            "rpc_unmatched_replies_total",
            "RPC replies for no call of this node's, or arriving after the call ended.",
            s.rpc.unmatched,
        ),
    ]
}

/// The process's figures, under the names Prometheus's client libraries use, from
/// `/proc/self` (none where it cannot be read).
fn process_figures() -> Vec<Figure> {
    let mut out = Vec::new();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |field: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    if let Some(rss) = kib("VmRSS:") {
        out.push(gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            rss * 1024,
        ));
    }
    if let Some(vm) = kib("VmSize:") {
        out.push(gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            vm * 1024,
        ));
    }
    if let Ok(usage) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        out.push(Figure {
            name: "process_cpu_seconds_total",
            help: "Total user and system CPU time spent in seconds.",
            kind: Kind::Counter,
            series: vec![(
                None,
                Value::Float(secs(usage.user_time()) + secs(usage.system_time())),
            )],
        });
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        out.push(gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            fds.count() as u64,
        ));
    }
    if let Some(start) = process_start_time() {
        out.push(Figure {
            name: "process_start_time_seconds",
            help: "Start time of the process since unix epoch in seconds.",
            kind: Kind::Gauge,
            series: vec![(None, Value::Float(start))],
        });
    }
    out
}

/// When this process started, seconds since the Unix epoch: the boot time (`/proc/stat`'s
/// `btime`) and the process's start in clock ticks since boot (`/proc/self/stat`, field 22).
fn process_start_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted after
    // its closing parenthesis, which is field 3's predecessor.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&hz| hz > 0)?;
    Some(boot as f64 + ticks as f64 / hz as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample lines of `text` whose name is `name`, as (labels, value).
    fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (n, labels) = match series.split_once('{') {
                    Some((n, rest)) => (n, rest.strip_suffix('}')?),
                    None => (series, ""),
                };
                if n != name {
                    return None;
                }
                Some((labels, value.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn figures_keep_their_names_and_events_are_labelled_by_closed_sets() {
        let m = Metrics::new();
        m.dropped(DropReason::Expired);
        m.dropped(DropReason::Expired);
        m.dropped(DropReason::NoRoute);
        m.delivered(Duration::from_millis(30));
        m.store_synced(Duration::from_micros(120));
        m.store_synced(Duration::from_micros(80));
        m.execution_finished(&rpc::Outcome::Failure {
            code: RejectCode::TimedOut,
            detail: String::new(),
            exit_status: None,
            stderr_tail: bytes::Bytes::new(),
        });
        let mut sources = Sources::default();
        sources.node.bundles_received = 7;
        sources.rpc.calls_rejected = 2;
        // Bounds that are not set are u64::MAX: written all the same (the library's integer
        // gauges are i64), and the figures after them too.
        sources.receive_memory = Some((0, u64::MAX, 0));
        sources.api_uploads_limit = u64::MAX;
        let text = m.render(&sources);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("# TYPE ferry_bundles_received counter"),
            "{text}"
        );
        assert_eq!(samples(&text, "ferry_bundles_received_total"), [("", 7.0)]);
        assert_eq!(
            samples(&text, "ferry_api_uploads_limit"),
            [("", u64::MAX as f64)]
        );
        assert_eq!(
            samples(&text, "ferry_rpc_unmatched_replies_total"),
            [("", 0.0)]
        );
        assert!(!text.contains(".."), "a help with two periods: {text}");
        assert!(!text.contains("{}"), "an empty label set: {text}");
        let mut drops = samples(&text, "ferry_bundle_drops_total");
        drops.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(
            drops,
            [("reason=\"expired\"", 2.0), ("reason=\"no_route\"", 1.0)]
        );
        assert_eq!(
            samples(&text, "ferry_bundle_delivery_seconds_count"),
            [("", 1.0)]
        );
        assert_eq!(
            samples(&text, "ferry_store_sync_seconds_count"),
            [("", 2.0)]
        );
        let sum = samples(&text, "ferry_store_sync_seconds_sum")[0].1;
        assert!((sum - 0.0002).abs() < 1e-9, "{sum}");
        // 80 µs falls in the bucket up to 100 µs, 120 µs in the one up to 200 µs.
        let buckets = samples(&text, "ferry_store_sync_seconds_bucket");
        assert!(buckets.contains(&("le=\"0.0001\"", 1.0)), "{buckets:?}");
        assert!(buckets.contains(&("le=\"0.0002\"", 2.0)), "{buckets:?}");
        assert_eq!(
            samples(&text, "ferry_rpc_executions_finished_total"),
            [("outcome=\"failure\",code=\"timed_out\"", 1.0)]
        );
        assert!(
            samples(&text, "ferry_rpc_calls_served_total").contains(&("result=\"rejected\"", 2.0))
        );
        assert_eq!(
            samples(&text, "ferry_build_info"),
            [(concat!("version=\"", env!("CARGO_PKG_VERSION"), "\""), 1.0)]
        );
        #[cfg(target_os = "linux")]
        {
            let rss = samples(&text, "process_resident_memory_bytes");
            assert!(rss.len() == 1 && rss[0].1 > 0.0, "{text}");
            assert!(samples(&text, "process_open_fds")[0].1 >= 1.0, "{text}");
            let start = samples(&text, "process_start_time_seconds")[0].1;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!(start > 1.0e9 && start <= now + 1.0, "{start} vs {now}");
        }
    }
}
