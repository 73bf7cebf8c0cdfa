//! Instants in the API's JSON for people and for tools that read dates: every instant field
//! `<name>_ms` (milliseconds since the DTN epoch, 2000-01-01T00:00:00Z, as RFC 9171 counts
//! them) gets a twin `<name>_utc` in RFC 3339 (`2026-11-27T06:00:00.123Z`).
//!
//! The `_ms` fields stay the API's contract; the twins are added to each answer as it is written
//! (HTTP bodies and WebSocket messages), so no type carries the same instant twice. A time of 0
//! means "unknown" (a node without a clock) and gets no twin.

use std::time::{Duration, SystemTime};

use serde_json::Value;

/// Seconds from the Unix epoch to the DTN epoch (2000-01-01T00:00:00Z).
const DTN_EPOCH_UNIX_S: u64 = 946_684_800;

/// The fields that are instants: `created_ms`, … (spans such as `run_ms` and `offset_ms` are
/// not, and keep no twin).
const INSTANTS: [&str; 10] = [
    "created_ms",
    "deadline_ms",
    "at_ms",
    "expiry_ms",
    "arrived_ms",
    "since_ms",
    "first_seen_ms",
    "last_seen_ms",
    "departs_ms",
    "arrives_ms",
];

/// An instant, milliseconds since the DTN epoch, in RFC 3339 UTC with milliseconds; `None` for 0
/// (unknown).
pub fn rfc3339(dtn_ms: u64) -> Option<String> {
    if dtn_ms == 0 {
        return None;
    }
    let unix = Duration::from_secs(DTN_EPOCH_UNIX_S).checked_add(Duration::from_millis(dtn_ms))?;
    let at = SystemTime::UNIX_EPOCH.checked_add(unix)?;
    // humantime formats years up to 9999 only; a time past that is no real clock's.
    (unix.as_secs() < 253_402_300_800).then(|| humantime::format_rfc3339_millis(at).to_string())
}

/// `value` with an `<name>_utc` twin beside every instant `<name>_ms`, at any depth.
pub fn with_utc_twins(mut value: Value) -> Value {
    add_twins(&mut value);
    value
}

fn add_twins(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for child in map.values_mut() {
                add_twins(child);
            }
            let twins: Vec<(String, String)> = INSTANTS
                .iter()
                .filter_map(|&field| {
                    let ms = map.get(field)?.as_u64()?;
                    let name = format!("{}_utc", field.strip_suffix("_ms")?);
                    (!map.contains_key(&name)).then_some((name, rfc3339(ms)?))
                })
                .collect();
            for (name, text) in twins {
                map.insert(name, Value::String(text));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(add_twins),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn dtn_milliseconds_as_rfc_3339() {
        assert_eq!(rfc3339(1).as_deref(), Some("2000-01-01T00:00:00.001Z"));
        // 2026-11-27T06:00:00.123Z is 849_074_400 s after the DTN epoch.
        assert_eq!(
            rfc3339(849_074_400_123).as_deref(),
            Some("2026-11-27T06:00:00.123Z")
        );
        assert_eq!(rfc3339(0), None);
        assert_eq!(rfc3339(u64::MAX), None);
    }

    #[test]
    fn every_instant_gets_a_twin_and_nothing_else_does() {
        let v = with_utc_twins(json!({
            "id": "ab",
            "created_ms": 1000,
            "deadline_ms": 0,
            "run_ms": 5,
            "replies": [{"at_ms": 2000, "offset_ms": 7}],
            "presented": {"first_seen_ms": 3000, "last_seen_ms": 3000},
        }));
        assert_eq!(v["created_utc"], "2000-01-01T00:00:01.000Z");
        assert!(v.get("deadline_utc").is_none(), "0 is unknown");
        assert!(v.get("run_utc").is_none());
        assert_eq!(v["replies"][0]["at_utc"], "2000-01-01T00:00:02.000Z");
        assert!(v["replies"][0].get("offset_utc").is_none());
        assert_eq!(v["presented"]["first_seen_utc"], "2000-01-01T00:00:03.000Z");
        assert_eq!(v["created_ms"], 1000, "the milliseconds stay");
    }
}
