//! Store-carry-forward routing strategies: which held bundle goes to which neighbour.
//!
//! The node does the bookkeeping every strategy needs (what each neighbour holds, from its summary
//! vector and from completed transfers; the purge set; in-flight transfers) and asks the strategy
//! one question per (bundle, neighbour that lacks it): [`Strategy::decide`].

use std::fmt;

/// What to do with one held bundle for one neighbour that does not hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Do not send it to this neighbour.
    Skip,
    /// Send a copy; this node keeps its own.
    Replicate,
    /// Send a copy that carries `give` of this node's spray-and-wait copies; this node keeps the
    /// rest once the transfer completes.
    Hand {
        /// Copies handed over.
        give: u64,
    },
}

/// A store-carry-forward routing strategy.
pub trait Strategy: fmt::Debug + Send {
    /// A short name for reports.
    fn name(&self) -> &'static str;

    /// Copies a bundle created on this node starts with, if the strategy counts copies.
    fn initial_copies(&self) -> Option<u64> {
        None
    }

    /// Whether and how to send a bundle holding `copies` (if counted) to a neighbour that lacks
    /// it. `toward_destination` is true when the neighbour is the bundle's destination node or the
    /// next hop of a live mesh path to it.
    fn decide(&self, copies: Option<u64>, toward_destination: bool) -> Decision;

    /// Whether it sends every bundle to every neighbour that lacks it, so that a neighbour
    /// running it passes a bundle on to that neighbour's own neighbours without our help.
    fn floods(&self) -> bool {
        false
    }
}

/// Which strategy a node runs (configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyKind {
    /// [`Epidemic`].
    Epidemic,
    /// [`SprayAndWait`] with this many copies per bundle.
    SprayAndWait {
        /// Copies L.
        copies: u64,
    },
    /// [`Direct`].
    Direct,
}

impl StrategyKind {
    /// The strategy.
    pub fn build(self) -> Box<dyn Strategy> {
        match self {
            StrategyKind::Epidemic => Box::new(Epidemic),
            StrategyKind::SprayAndWait { copies } => Box::new(SprayAndWait {
                copies: copies.max(1),
            }),
            StrategyKind::Direct => Box::new(Direct),
        }
    }
}

/// Why a strategy's name does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseStrategyError {
    /// `spray-and-wait:0`.
    #[error("spray-and-wait needs at least 1 copy")]
    NoCopies,
    /// `spray-and-wait:` followed by something other than a number.
    #[error("spray-and-wait copies must be a number, got {0:?}")]
    Copies(String),
    /// None of the names.
    #[error("unknown strategy {0:?}: expected epidemic, spray-and-wait[:COPIES] or direct")]
    Unknown(String),
}

impl std::str::FromStr for StrategyKind {
    type Err = ParseStrategyError;

    /// Parses `epidemic`, `direct`, `spray-and-wait` (8 copies) or `spray-and-wait:COPIES`
    /// (`spray` for short), as configuration files and command lines spell them.
    fn from_str(s: &str) -> Result<Self, ParseStrategyError> {
        match s.split_once(':') {
            None if s == "epidemic" => Ok(StrategyKind::Epidemic),
            None if s == "direct" => Ok(StrategyKind::Direct),
            None if s == "spray-and-wait" || s == "spray" => {
                Ok(StrategyKind::SprayAndWait { copies: 8 })
            }
            Some(("spray-and-wait" | "spray", n)) => match n.parse::<u64>() {
                Ok(0) => Err(ParseStrategyError::NoCopies),
                Ok(copies) => Ok(StrategyKind::SprayAndWait { copies }),
                Err(_) => Err(ParseStrategyError::Copies(n.to_string())),
            },
            _ => Err(ParseStrategyError::Unknown(s.to_string())),
        }
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrategyKind::Epidemic => write!(f, "epidemic"),
            StrategyKind::SprayAndWait { copies } => write!(f, "spray-and-wait({copies})"),
            StrategyKind::Direct => write!(f, "direct"),
        }
    }
}

/// Epidemic routing (Vahdat and Becker; IBR-DTN's variant): every neighbour that lacks a bundle
/// gets a copy. Summary vectors tell what a neighbour lacks; the purge set deletes delivered bundles
/// network-wide.
#[derive(Debug, Clone, Copy)]
pub struct Epidemic;

impl Strategy for Epidemic {
    fn name(&self) -> &'static str {
        "epidemic"
    }

    fn decide(&self, _copies: Option<u64>, _toward_destination: bool) -> Decision {
        Decision::Replicate
    }

    fn floods(&self) -> bool {
        true
    }
}

/// Binary spray-and-wait (Spyropoulos et al.): the source starts with L copies; a holder of n > 1
/// copies hands ⌊n/2⌋ to a neighbour that lacks the bundle and keeps ⌈n/2⌉; a holder of one copy
/// waits to meet the destination (or a live mesh path to it).
#[derive(Debug, Clone, Copy)]
pub struct SprayAndWait {
    /// Copies L per bundle.
    pub copies: u64,
}

impl Strategy for SprayAndWait {
    fn name(&self) -> &'static str {
        "spray-and-wait"
    }

    fn initial_copies(&self) -> Option<u64> {
        Some(self.copies)
    }

    fn decide(&self, copies: Option<u64>, toward_destination: bool) -> Decision {
        // A bundle that arrived without a copies block (another implementation's) is one copy.
        let copies = copies.unwrap_or(1);
        if toward_destination {
            Decision::Replicate
        } else if copies > 1 {
            Decision::Hand { give: copies / 2 }
        } else {
            Decision::Skip
        }
    }
}

/// Direct delivery: a bundle goes only to its destination node (or along a live mesh path to it).
#[derive(Debug, Clone, Copy)]
pub struct Direct;

impl Strategy for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn decide(&self, _copies: Option<u64>, toward_destination: bool) -> Decision {
        if toward_destination {
            Decision::Replicate
        } else {
            Decision::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_as_configs_spell_them() {
        assert_eq!(
            "epidemic".parse::<StrategyKind>(),
            Ok(StrategyKind::Epidemic)
        );
        assert_eq!("direct".parse::<StrategyKind>(), Ok(StrategyKind::Direct));
        assert_eq!(
            "spray-and-wait:4".parse::<StrategyKind>(),
            Ok(StrategyKind::SprayAndWait { copies: 4 })
        );
        assert_eq!(
            "spray".parse::<StrategyKind>(),
            Ok(StrategyKind::SprayAndWait { copies: 8 })
        );
        assert!("spray:0".parse::<StrategyKind>().is_err());
        assert!("spray:x".parse::<StrategyKind>().is_err());
        assert!("flood".parse::<StrategyKind>().is_err());
    }

    #[test]
    fn spray_and_wait_halves_then_waits() {
        let s = SprayAndWait { copies: 8 };
        assert_eq!(s.initial_copies(), Some(8));
        assert_eq!(s.decide(Some(8), false), Decision::Hand { give: 4 });
        assert_eq!(s.decide(Some(3), false), Decision::Hand { give: 1 });
        assert_eq!(s.decide(Some(1), false), Decision::Skip);
        assert_eq!(s.decide(None, false), Decision::Skip);
        assert_eq!(s.decide(Some(1), true), Decision::Replicate);
    }

    #[test]
    fn direct_and_epidemic() {
        assert_eq!(Direct.decide(None, false), Decision::Skip);
        assert_eq!(Direct.decide(None, true), Decision::Replicate);
        assert_eq!(Epidemic.decide(None, false), Decision::Replicate);
        assert!(Epidemic.floods());
        assert!(!Direct.floods() && !SprayAndWait { copies: 8 }.floods());
    }
}
