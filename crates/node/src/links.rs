//! The link table: what the node knows about each adjacency the shell maintains, with the
//! links' timers in time order ([`LinkTable`]).

use std::cell::{Cell, RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::time::Duration;

use wire::{BundleId, DtnTime, Eid};

use crate::LinkId;

/// The node's links, and each link's earliest timer ([`Link::next_due`]) in time order, so that
/// the node finds its next wake-up and the links with a timer due without looking at every link
/// (a node of a full mesh has a link, with a summary timer, to every other node).
///
/// Reads go through `Deref` to the map. Every way to change a link goes through this table,
/// which notes the link as changed; its entry in the time order is brought up to date at the
/// next look at the timers.
#[derive(Debug)]
pub(crate) struct LinkTable {
    links: BTreeMap<LinkId, Link>,
    /// Beacon periods missed before a neighbour counts as gone ([`Link::expiry`]).
    missed: u64,
    timers: RefCell<LinkTimers>,
}

#[derive(Debug, Default)]
struct LinkTimers {
    /// (earliest timer, link), for every link not in `changed`.
    by_time: BTreeSet<(DtnTime, LinkId)>,
    /// The same, by link.
    of: BTreeMap<LinkId, DtnTime>,
    /// Links handed out to be changed since their entry was made, each once
    /// ([`Link::timer_noted`]); a link removed since may be among them.
    changed: Vec<LinkId>,
}

impl Deref for LinkTable {
    type Target = BTreeMap<LinkId, Link>;

    fn deref(&self) -> &Self::Target {
        &self.links
    }
}

impl LinkTable {
    pub(crate) fn new(missed: u64) -> Self {
        Self {
            links: BTreeMap::new(),
            missed,
            timers: RefCell::default(),
        }
    }

    /// A link, to change.
    pub(crate) fn get_mut(&mut self, id: &LinkId) -> Option<&mut Link> {
        let link = self.links.get_mut(id)?;
        if !link.timer_noted.replace(true) {
            self.timers.get_mut().changed.push(*id);
        }
        Some(link)
    }

    /// Adds a link, or replaces the one with this id.
    pub(crate) fn insert(&mut self, id: LinkId, link: Link) -> Option<Link> {
        link.timer_noted.set(true);
        self.timers.get_mut().changed.push(id);
        self.links.insert(id, link)
    }

    /// Removes a link.
    pub(crate) fn remove(&mut self, id: &LinkId) -> Option<Link> {
        let t = self.timers.get_mut();
        if let Some(at) = t.of.remove(id) {
            t.by_time.remove(&(at, *id));
        }
        self.links.remove(id)
    }

    /// Takes a bundle out of every link's backlog (which no timer depends on).
    pub(crate) fn remove_from_backlogs(&mut self, id: &BundleId) {
        for l in self.links.values_mut() {
            l.backlog.remove(id);
        }
    }

    /// The timers, with the links changed since the last look put in their place.
    fn timers(&self) -> RefMut<'_, LinkTimers> {
        let mut t = self.timers.borrow_mut();
        let LinkTimers {
            by_time,
            of,
            changed,
        } = &mut *t;
        for id in changed.drain(..) {
            let link = self.links.get(&id);
            if let Some(l) = link {
                l.timer_noted.set(false);
            }
            let at = link.and_then(|l| l.next_due(self.missed));
            let before = of.get(&id).copied();
            if before == at {
                continue; // most changes touch no timer
            }
            if let Some(before) = before {
                by_time.remove(&(before, id));
                of.remove(&id);
            }
            if let Some(at) = at {
                by_time.insert((at, id));
                of.insert(id, at);
            }
        }
        t
    }

    /// The earliest timer of any link.
    pub(crate) fn next_due(&self) -> Option<DtnTime> {
        self.timers().by_time.first().map(|(at, _)| *at)
    }

    /// The first link after `after` (in id order; from the first if `None`) with a timer due
    /// at `now`.
    pub(crate) fn next_due_link(&self, now: DtnTime, after: Option<LinkId>) -> Option<LinkId> {
        self.timers()
            .by_time
            .range(..=(now, LinkId(u64::MAX)))
            .map(|(_, id)| *id)
            .filter(|id| after.is_none_or(|a| *id > a))
            .min()
    }
}

/// A dtn-class bundle (or a piece of one) handed to the shell on a link, awaiting its result.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// The held bundle it was cut from.
    pub held: BundleId,
    /// Payload range of the held bundle this transmission carries.
    pub start: u64,
    pub end: u64,
    /// Encoded size of the transmission (headers, payload, CRC): what it occupies of the window.
    pub bytes: u64,
    /// Spray-and-wait copies handed over with it.
    pub give: Option<u64>,
    /// The peer is the next hop of the bundle's planned route: the node releases its copy once
    /// the peer holds it whole.
    pub release: bool,
    /// The shell wrote its last byte out ([`crate::Node::handle_transfer_written`]) and holds
    /// none of it any more: it no longer counts against the window; its result is to come.
    pub written: bool,
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
    pub peer_period: Duration,
    /// Whether beacons keep the neighbour alive (false until the first beacon: a link reported up
    /// by the shell with a known peer stays until the shell says it is down).
    pub beacon_liveness: bool,
    /// When the next beacon goes out on this link; never on a session (a link reported up with
    /// its peer): the session's handshake told the peer who we are, and the shell says when the
    /// session ends, so a beacon would tell nothing (the daemon's TCPCL sessions carry none).
    pub next_beacon: Option<DtnTime>,
    pub next_summary: Option<DtnTime>,
    /// Summary vectors sent to the peer on this link (see `Node::send_summary`).
    pub summaries_sent: u32,
    /// The purge entries (by their place in the node's purge order) the peer was told of.
    pub purges_told: u64,
    /// When the peer's summary vector is due at the latest, after contact start: past it
    /// without one, the peer is another implementation ([`crate::NodeConfig::summary_grace`]).
    pub summary_due: Option<DtnTime>,
    /// The peer sends no summary vectors (another implementation): it gets no control traffic.
    pub foreign: bool,
    /// The peer sent control traffic on this link: it speaks Ferry's control protocol.
    pub speaks_ferry: bool,
    /// Store-carry-forward pieces handed to the shell and not yet reported, and what they occupy.
    pub flights: Flights,
    /// Held bundles offered to the peer that wait for room in the window, first come first served.
    pub backlog: Backlog,
    /// The last peer control traffic went to on this link, and its control endpoint: made once,
    /// not for every summary and advertisement.
    pub control_endpoint: Option<(Eid, Eid)>,
    /// Whether the table has noted this link as changed since it last put its timer in place.
    timer_noted: Cell<bool>,
}

impl Link {
    /// A link that has just come up, with nothing in flight.
    pub(crate) fn new(
        mtu: Option<u64>,
        bandwidth_bps: u64,
        contact_end: Option<DtnTime>,
        now: DtnTime,
        peer_period: Duration,
        beacons: bool,
    ) -> Self {
        Self {
            peer: None,
            control_endpoint: None,
            timer_noted: Cell::new(false),
            mtu,
            bandwidth_bps,
            contact_end,
            last_heard: now,
            peer_period,
            beacon_liveness: false,
            next_beacon: beacons.then_some(now),
            next_summary: None,
            summaries_sent: 0,
            purges_told: 0,
            summary_due: None,
            foreign: false,
            speaks_ferry: false,
            flights: Flights::default(),
            backlog: Backlog::default(),
        }
    }

    /// When the neighbour counts as gone if no beacon arrives.
    pub(crate) fn expiry(&self, missed_periods: u64) -> Option<DtnTime> {
        (self.beacon_liveness && self.peer.is_some()).then(|| {
            let missed = u32::try_from(missed_periods).unwrap_or(u32::MAX);
            self.last_heard + self.peer_period.saturating_mul(missed)
        })
    }

    /// The earliest of the link's timers (beacon, summary, summary grace, neighbour expiry), if
    /// it has any: [`crate::Node::handle_timeout`] has nothing to do for a link before it.
    pub(crate) fn next_due(&self, missed_periods: u64) -> Option<DtnTime> {
        [
            self.next_beacon,
            self.next_summary,
            self.summary_due,
            self.expiry(missed_periods),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Bytes the rest of the contact can still carry, if the contact's end and bandwidth are known.
    pub(crate) fn remaining_capacity(&self, now: DtnTime) -> Option<u64> {
        let end = self.contact_end?;
        if self.bandwidth_bps == 0 {
            return None;
        }
        let left = end - now;
        // 95 %: leave room for beacons, control traffic and a late start.
        let bytes = left.as_millis() * u128::from(self.bandwidth_bps) * 95 / 800_000;
        Some(
            u64::try_from(bytes)
                .unwrap_or(u64::MAX)
                .saturating_sub(self.flights.queued_payload),
        )
    }
}

/// The in-flight table of one link, indexed both ways: by the id of the piece as transmitted (what
/// the shell reports) and by the held bundle it was cut from (what `offer` asks about).
#[derive(Debug, Default)]
pub(crate) struct Flights {
    by_piece: BTreeMap<BundleId, InFlight>,
    /// How many pieces of each held bundle are in flight.
    by_held: BTreeMap<BundleId, usize>,
    /// Encoded bytes of every piece in flight not written out yet: what the window bounds.
    pub bytes: u64,
    /// Payload bytes in flight not written out yet, to estimate what a contact can still carry.
    pub queued_payload: u64,
    /// Pieces in flight not written out yet.
    unwritten: usize,
    /// Encoded bytes, and the number, of pieces written out whose result is awaited.
    written_bytes: u64,
    written_pieces: usize,
}

impl Flights {
    /// Records a piece handed to the shell.
    pub(crate) fn insert(&mut self, piece: BundleId, flight: InFlight) {
        // The same piece twice (it cannot happen while `offer` skips held bundles in flight)
        // must not count twice.
        self.remove(&piece);
        if !flight.written {
            self.count_in(&flight);
        }
        *self.by_held.entry(flight.held.clone()).or_default() += 1;
        self.by_piece.insert(piece, flight);
    }

    fn count_in(&mut self, flight: &InFlight) {
        self.bytes += flight.bytes;
        self.queued_payload += flight.end - flight.start;
        self.unwritten += 1;
    }

    fn count_out(&mut self, bytes: u64, payload: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
        self.queued_payload = self.queued_payload.saturating_sub(payload);
        self.unwritten = self.unwritten.saturating_sub(1);
    }

    /// The shell wrote a piece out: it leaves the window, and stays in flight until its result
    /// comes. Returns whether that changed anything (a piece not in flight, or reported twice,
    /// does not).
    pub(crate) fn written(&mut self, piece: &BundleId) -> bool {
        let Some(flight) = self.by_piece.get_mut(piece) else {
            return false;
        };
        if flight.written {
            return false;
        }
        flight.written = true;
        let (bytes, payload) = (flight.bytes, flight.end.saturating_sub(flight.start));
        self.count_out(bytes, payload);
        self.written_bytes += bytes;
        self.written_pieces += 1;
        true
    }

    /// Takes a piece the shell reported on.
    pub(crate) fn remove(&mut self, piece: &BundleId) -> Option<InFlight> {
        let flight = self.by_piece.remove(piece)?;
        if flight.written {
            self.written_bytes = self.written_bytes.saturating_sub(flight.bytes);
            self.written_pieces = self.written_pieces.saturating_sub(1);
        } else {
            self.count_out(flight.bytes, flight.end.saturating_sub(flight.start));
        }
        if let Some(count) = self.by_held.get_mut(&flight.held) {
            *count -= 1;
            if *count == 0 {
                self.by_held.remove(&flight.held);
            }
        }
        Some(flight)
    }

    /// Whether pieces of this held bundle are in flight.
    pub(crate) fn carries(&self, held: &BundleId) -> bool {
        self.by_held.contains_key(held)
    }

    /// Pieces in flight.
    pub(crate) fn pieces(&self) -> usize {
        self.by_piece.len()
    }

    /// Held bundles with pieces in flight.
    pub(crate) fn bundles(&self) -> usize {
        self.by_held.len()
    }

    /// Whether an offer of `bytes` more fits in a window of `window` bytes. Something always fits
    /// an empty window, so a bundle larger than the window still moves, alone. Pieces written
    /// out and waiting for their result are not in the window: the next bundle goes on the
    /// wire while the peer makes the last one durable. They are bounded apart, by the window
    /// again or one piece: a peer that never confirms gets the window and a piece or two, not
    /// the backlog (and the session's list of transfers awaiting acknowledgement stays short).
    pub(crate) fn has_room(&self, bytes: u64, window: u64) -> bool {
        let unwritten_room = self.unwritten == 0 || self.bytes.saturating_add(bytes) <= window;
        let awaiting_room = self.written_pieces <= 1 || self.written_bytes <= window;
        unwritten_room && awaiting_room
    }

    /// Forgets everything in flight (the neighbour is gone: the shell will not report it).
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// Held bundles waiting for room in a link's window, in the order they were first offered. A
/// bundle is in it at most once; an offer of one already waiting keeps its place.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    queue: BTreeMap<u64, BundleId>,
    position: BTreeMap<BundleId, u64>,
    next: u64,
}

impl Backlog {
    /// Adds a bundle at the end, unless it is already waiting.
    pub(crate) fn push(&mut self, id: &BundleId) {
        if self.position.contains_key(id) {
            return;
        }
        self.queue.insert(self.next, id.clone());
        self.position.insert(id.clone(), self.next);
        self.next += 1;
    }

    /// The bundle that has waited longest.
    pub(crate) fn first(&self) -> Option<&BundleId> {
        self.queue.values().next()
    }

    /// Takes a bundle out wherever it is (sent, or no longer held).
    pub(crate) fn remove(&mut self, id: &BundleId) {
        if let Some(at) = self.position.remove(id) {
            self.queue.remove(&at);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> DtnTime {
        DtnTime::from_millis(ms)
    }

    fn link(summary_at: Option<u64>) -> Link {
        let mut l = Link::new(None, 0, None, at(0), Duration::from_secs(1), false);
        l.next_summary = summary_at.map(at);
        l
    }

    #[test]
    fn the_timer_order_follows_every_change_made_through_the_table() {
        let mut t = LinkTable::new(3);
        t.insert(LinkId(1), link(Some(500)));
        t.insert(LinkId(2), link(Some(300)));
        t.insert(LinkId(3), link(None));
        assert_eq!(t.next_due(), Some(at(300)));
        assert_eq!(t.next_due_link(at(400), None), Some(LinkId(2)));
        // Changes, some touching no timer, several to one link between two looks.
        t.get_mut(&LinkId(2)).unwrap().next_summary = Some(at(900));
        t.get_mut(&LinkId(2)).unwrap().speaks_ferry = true;
        t.get_mut(&LinkId(1)).unwrap().foreign = true;
        t.get_mut(&LinkId(3)).unwrap().next_summary = Some(at(700));
        assert_eq!(t.next_due(), Some(at(500)));
        assert_eq!(t.next_due_link(at(400), None), None);
        assert_eq!(t.next_due_link(at(700), None), Some(LinkId(1)));
        assert_eq!(t.next_due_link(at(700), Some(LinkId(1))), Some(LinkId(3)));
        // A link changed, then removed before the next look; then one taken out and put back.
        t.get_mut(&LinkId(1)).unwrap().next_summary = Some(at(100));
        t.remove(&LinkId(1));
        assert_eq!(t.next_due(), Some(at(700)));
        t.remove(&LinkId(3));
        t.insert(LinkId(3), link(Some(50)));
        assert_eq!(t.next_due(), Some(at(50)));
        t.get_mut(&LinkId(3)).unwrap().next_summary = None;
        t.get_mut(&LinkId(2)).unwrap().next_summary = None;
        assert_eq!(t.next_due(), None);
        assert_eq!(t.timers.borrow().of.len(), 0);
        assert_eq!(t.timers.borrow().by_time.len(), 0);
        // A change after a look is noted again.
        t.get_mut(&LinkId(2)).unwrap().next_summary = Some(at(20));
        assert_eq!(t.next_due(), Some(at(20)));
    }
}
