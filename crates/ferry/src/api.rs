//! The JSON shapes of the `ferry node` local API, as the client commands see them.
//!
//! Most bodies are the daemon's own types (`daemon::control`), so both sides of the contract have
//! one definition; the receive listing (with `seq` and `size`) and the forwarding class flag are
//! the client's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

pub(crate) use daemon::control::{
    ApiError, BundleInfo, PeerInfo, ReportInfo, RouteInfo, SendReply, SendRequest, Status,
};

/// One bundle waiting at a local endpoint (`GET /v1/endpoints/{endpoint}/bundles`). Listing does
/// not remove it: `DELETE …/bundles/{seq}` does, once the application has it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// Its place in the endpoint's inbox; names it in the payload and acknowledge calls.
    pub(crate) seq: u64,
    /// The bundle id.
    pub(crate) id: String,
    /// Its source endpoint.
    pub(crate) source: String,
    /// The endpoint it was for.
    pub(crate) destination: String,
    /// Creation time, milliseconds since the DTN epoch.
    pub(crate) created_ms: u64,
    /// Payload bytes.
    pub(crate) size: u64,
    /// The payload, base64, when listed with `payload=true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) payload_base64: Option<String>,
}

/// A bundle's forwarding class, as `--class` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ClassArg {
    /// Store-carry-forward: waits in stores for a contact.
    Dtn,
    /// Real time, best effort: needs a live path now.
    Datagram,
    /// Real time, reliable and ordered: needs a live path now.
    Stream,
}

impl ClassArg {
    /// The name the API uses.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ClassArg::Dtn => "dtn",
            ClassArg::Datagram => "datagram",
            ClassArg::Stream => "stream",
        }
    }
}

/// Seconds from the Unix epoch to the DTN epoch (2000-01-01T00:00:00Z).
const DTN_EPOCH_UNIX_S: u64 = 946_684_800;

/// Now on this machine's clock, in milliseconds since the DTN epoch: the daemon's times are in
/// these units, and it runs on the same machine.
pub(crate) fn dtn_now_ms() -> u64 {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    (unix.as_millis() as u64).saturating_sub(DTN_EPOCH_UNIX_S * 1000)
}

/// The creation time (DTN ms) in a bundle id `source-creation_ms-sequence[-offset+length]`, if it
/// has one (0 means the source had no clock).
pub(crate) fn creation_ms_of(id: &str) -> Option<u64> {
    // A fragment's id ends in `-offset+length`: drop it first.
    let id = match id.rsplit_once('-') {
        Some((head, tail)) if tail.contains('+') => head,
        _ => id,
    };
    let mut parts = id.rsplitn(3, '-');
    let _sequence: u64 = parts.next()?.parse().ok()?;
    let creation: u64 = parts.next()?.parse().ok()?;
    parts.next()?;
    (creation != 0).then_some(creation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_time_comes_from_the_bundle_id() {
        assert_eq!(
            creation_ms_of("dtn://a/-848700477656-1"),
            Some(848700477656)
        );
        assert_eq!(
            creation_ms_of("dtn://a/x-y-848700477656-3-100+20"),
            Some(848700477656)
        );
        assert_eq!(creation_ms_of("ipn:5.1-1000-0"), Some(1000));
        assert_eq!(
            creation_ms_of("dtn://a/-0-4"),
            None,
            "no clock at the source"
        );
        assert_eq!(creation_ms_of("garbage"), None);
    }

    #[test]
    fn a_waiting_bundle_parses_with_and_without_its_payload() {
        let listed: Vec<Waiting> = serde_json::from_str(
            r#"[{"seq":7,"id":"dtn://a/-1-0","source":"dtn://a/","destination":"dtn://b/inbox",
                 "created_ms":1,"size":5},
                {"seq":8,"id":"dtn://a/-2-0","source":"dtn://a/","destination":"dtn://b/inbox",
                 "created_ms":2,"size":5,"payload_base64":"aGVsbG8="}]"#,
        )
        .unwrap();
        assert_eq!(listed[0].seq, 7);
        assert_eq!(listed[0].payload_base64, None);
        assert_eq!(listed[1].payload_base64.as_deref(), Some("aGVsbG8="));
    }

    #[test]
    fn the_dtn_clock_is_after_2020() {
        // 2020-01-01 is 631 152 000 s after the DTN epoch.
        assert!(dtn_now_ms() > 631_152_000_000);
    }
}
