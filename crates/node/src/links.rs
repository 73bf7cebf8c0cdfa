//! The link table: what the node knows about each adjacency the shell maintains.

use std::collections::BTreeMap;

use wire::{BundleId, DtnTime, Eid};

/// A dtn-class bundle (or a piece of one) handed to the shell on a link, awaiting its result.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// The held bundle it was cut from.
    pub held: BundleId,
    /// Payload range of the held bundle this transmission carries.
    pub start: u64,
    pub end: u64,
    /// Spray-and-wait copies handed over with it.
    pub give: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct Link {
    pub peer: Option<Eid>,
    pub mtu: Option<u64>,
    pub bandwidth_bps: u64,
    /// When the contact is expected to end (from a contact plan), if known.
    pub contact_end: Option<DtnTime>,
    /// Last time we heard from the peer (beacon, or link up).
    pub last_heard: DtnTime,
    /// The beacon period the peer announced.
    pub peer_period_ms: u64,
    /// Whether beacons keep the neighbour alive (false until the first beacon: a link reported up
    /// by the shell with a known peer stays until the shell says it is down).
    pub beacon_liveness: bool,
    pub next_beacon: DtnTime,
    pub next_summary: Option<DtnTime>,
    /// Payload bytes queued but not yet reported, to estimate what a contact can still carry.
    pub queued_bytes: u64,
    pub in_flight: BTreeMap<BundleId, InFlight>,
}

impl Link {
    /// When the neighbour counts as gone if no beacon arrives.
    pub(crate) fn expiry(&self, missed_periods: u64) -> Option<DtnTime> {
        (self.beacon_liveness && self.peer.is_some()).then(|| {
            self.last_heard
                .saturating_add(self.peer_period_ms.saturating_mul(missed_periods))
        })
    }

    /// Bytes the rest of the contact can still carry, if the contact's end and bandwidth are known.
    pub(crate) fn remaining_capacity(&self, now: DtnTime) -> Option<u64> {
        let end = self.contact_end?;
        if self.bandwidth_bps == 0 {
            return None;
        }
        let ms = end.saturating_sub(now);
        // 95 %: leave room for beacons, control traffic and a late start.
        let bytes = u128::from(ms) * u128::from(self.bandwidth_bps) * 95 / 800_000;
        Some(
            u64::try_from(bytes)
                .unwrap_or(u64::MAX)
                .saturating_sub(self.queued_bytes),
        )
    }
}
