//! Time as the Bundle Protocol counts it: [`DtnTime`], an instant, in milliseconds since the DTN
//! epoch (RFC 9171 §4.2.6). Spans of time are [`std::time::Duration`]s.
//!
//! Instants and spans are different types so that they cannot be mixed up: an instant plus a
//! span is an instant, two instants differ by a span, and two instants do not add. Fields of the
//! wire formats that count milliseconds (a bundle's lifetime, its age, a beacon's period) stay
//! integers named `_ms`, as the formats define them; code turns them into a `Duration` where it
//! computes with them.
//!
//! Arithmetic saturates: an instant past the end of `u64` milliseconds (about 584 million years)
//! is "never", and a span that would be negative is zero. Nothing here reads a clock.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant: milliseconds since the DTN epoch, 2000-01-01 00:00:00 UTC. The value 0 in a
/// creation timestamp means the creating node had no clock ([`DtnTime::UNKNOWN`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DtnTime(u64);

impl DtnTime {
    /// The DTN epoch itself; in a creation timestamp, "unknown".
    pub const UNKNOWN: DtnTime = DtnTime(0);
    /// The latest instant: what a saturating sum reaches, "never".
    pub const MAX: DtnTime = DtnTime(u64::MAX);

    /// The instant `ms` milliseconds after the DTN epoch.
    pub const fn from_millis(ms: u64) -> Self {
        DtnTime(ms)
    }

    /// Milliseconds since the DTN epoch: the value the wire formats carry.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whether this is the "unknown" time (0) of a node without a clock.
    pub const fn is_unknown(self) -> bool {
        self.0 == 0
    }

    /// `self + span`, or `None` past [`DtnTime::MAX`].
    pub fn checked_add(self, span: Duration) -> Option<Self> {
        span_millis(span)
            .and_then(|ms| self.0.checked_add(ms))
            .map(DtnTime)
    }

    /// `self + span`, at most [`DtnTime::MAX`].
    pub fn saturating_add(self, span: Duration) -> Self {
        self.checked_add(span).unwrap_or(DtnTime::MAX)
    }

    /// `self - span`, or `None` before the epoch.
    pub fn checked_sub(self, span: Duration) -> Option<Self> {
        span_millis(span)
            .and_then(|ms| self.0.checked_sub(ms))
            .map(DtnTime)
    }

    /// `self - span`, at least the epoch.
    pub fn saturating_sub(self, span: Duration) -> Self {
        DtnTime(self.0.saturating_sub(millis(span)))
    }

    /// The span from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: DtnTime) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// The span from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_since(self, earlier: DtnTime) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_millis)
    }

    /// The bytes of the milliseconds, big-endian: keys that sort as the instants do.
    pub const fn to_be_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// The instant of [`DtnTime::to_be_bytes`]'s bytes.
    pub const fn from_be_bytes(bytes: [u8; 8]) -> Self {
        DtnTime(u64::from_be_bytes(bytes))
    }
}

/// Whole milliseconds of a span, at most `u64::MAX`: what a wire field of milliseconds holds.
pub fn millis(span: Duration) -> u64 {
    u64::try_from(span.as_millis()).unwrap_or(u64::MAX)
}

/// `span` in whole milliseconds, if that fits a `u64`: what `u64::try_from(span.as_millis())`
/// gives, without its 128-bit arithmetic (every timer of every node adds spans to times).
fn span_millis(span: Duration) -> Option<u64> {
    span.as_secs()
        .checked_mul(1_000)
        .and_then(|ms| ms.checked_add(u64::from(span.subsec_millis())))
}

impl Add<Duration> for DtnTime {
    type Output = DtnTime;
    /// Saturating: see [`DtnTime::saturating_add`].
    fn add(self, span: Duration) -> DtnTime {
        self.saturating_add(span)
    }
}

impl AddAssign<Duration> for DtnTime {
    fn add_assign(&mut self, span: Duration) {
        *self = self.saturating_add(span);
    }
}

impl Sub<Duration> for DtnTime {
    type Output = DtnTime;
    /// Saturating: see [`DtnTime::saturating_sub`].
    fn sub(self, span: Duration) -> DtnTime {
        self.saturating_sub(span)
    }
}

impl Sub for DtnTime {
    type Output = Duration;
    /// Saturating: see [`DtnTime::saturating_since`].
    fn sub(self, earlier: DtnTime) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Debug for DtnTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DtnTime({})", self.0)
    }
}

/// The milliseconds since the epoch, as the wire formats and the logs show them.
impl fmt::Display for DtnTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_spans() {
        let t = DtnTime::from_millis(1_000);
        assert_eq!(t + Duration::from_millis(500), DtnTime::from_millis(1_500));
        assert_eq!(t - Duration::from_millis(400), DtnTime::from_millis(600));
        assert_eq!(DtnTime::from_millis(1_500) - t, Duration::from_millis(500));
        // A span never goes negative, and an instant never wraps.
        assert_eq!(t - DtnTime::from_millis(1_500), Duration::ZERO);
        assert_eq!(t.checked_since(DtnTime::from_millis(1_500)), None);
        assert_eq!(t - Duration::from_secs(5), DtnTime::UNKNOWN);
        assert_eq!(DtnTime::MAX + Duration::from_millis(1), DtnTime::MAX);
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert_eq!(t.checked_sub(Duration::from_millis(1_001)), None);
        assert_eq!(
            t.checked_sub(Duration::from_millis(1_000)),
            Some(DtnTime::UNKNOWN)
        );
        assert_eq!(t + Duration::MAX, DtnTime::MAX);
        // Sub-millisecond parts of a span are dropped, as the wire formats drop them.
        assert_eq!(
            t + Duration::from_micros(1_999),
            DtnTime::from_millis(1_001)
        );
        assert_eq!(millis(Duration::MAX), u64::MAX);
        // The 64-bit conversion gives what the 128-bit one does, at the edges too.
        let edge = u64::MAX / 1_000;
        for span in [
            Duration::ZERO,
            Duration::from_nanos(999_999),
            Duration::from_micros(1_999),
            Duration::new(edge, 615_999_999),
            Duration::new(edge, 616_000_000),
            Duration::new(edge + 1, 0),
            Duration::MAX,
        ] {
            assert_eq!(span_millis(span), u64::try_from(span.as_millis()).ok());
        }
    }

    #[test]
    fn byte_keys_sort_as_instants() {
        let a = DtnTime::from_millis(255);
        let b = DtnTime::from_millis(256);
        assert!(a.to_be_bytes() < b.to_be_bytes());
        assert_eq!(DtnTime::from_be_bytes(b.to_be_bytes()), b);
        assert!(DtnTime::UNKNOWN.is_unknown() && !a.is_unknown());
    }
}
