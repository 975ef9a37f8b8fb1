//! How far a peer's "wake me" flag is trusted.
//!
//! Lazy notification costs a `futex_wake` only when the peer's flag says it
//! sleeps. A peer that sets the flag and never sleeps would make us pay a
//! system call per message. The kernel tells us how many sleepers a wake
//! found: a wake that found none is *futile*. An honest peer produces one
//! now and then (it set the flag, then found data and did not sleep), never
//! long runs of them. After `ChannelPolicy::futile_wake_limit` in a row the flag is
//! distrusted: the peer is woken at most once per `ChannelPolicy::max_age` (so an
//! honest peer misjudged still sees its messages within that bound, and
//! its own bounded sleep is the backstop), and a wake that does find a
//! sleeper restores trust. One gate per ring end we wake a peer on.

use std::time::{Duration, Instant};

use crate::channel::spsc::WakeResult;

/// Trust state of one peer flag.
#[derive(Debug, Default)]
pub(crate) struct WakeGate {
    /// Futile wakes in a row.
    streak: u32,
    /// The flag proved untrustworthy.
    distrusted: bool,
    /// Last wake issued while distrusted.
    last: Option<Instant>,
}

/// What recording a wake's outcome concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing new.
    Fine,
    /// The flag is distrusted from now on; the streak that caused it.
    Distrusted(u32),
}

impl WakeGate {
    /// Whether to issue a wake now: always while trusted; once per `every`
    /// while distrusted (reads the clock only then).
    pub fn allow(&mut self, every: Duration) -> bool {
        if !self.distrusted {
            return true;
        }
        let now = Instant::now();
        match self.last {
            Some(t) if now.saturating_duration_since(t) < every => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }

    /// Record what a wake found.
    pub fn record(&mut self, w: WakeResult, limit: u32) -> Verdict {
        match w {
            WakeResult::NotFlagged => Verdict::Fine,
            // A ring cannot be told futile from here (the bell's queue
            // holds it until the peer looks); the peer pays for a flood of
            // its own flags with wakes of its own event loop, which
            // `crate::bell` bounds on its side.
            WakeResult::Woken | WakeResult::Rang => {
                self.streak = 0;
                self.distrusted = false;
                Verdict::Fine
            }
            WakeResult::Futile => {
                self.streak = self.streak.saturating_add(1);
                if !self.distrusted && self.streak >= limit.max(1) {
                    self.distrusted = true;
                    self.last = Some(Instant::now());
                    Verdict::Distrusted(self.streak)
                } else {
                    Verdict::Fine
                }
            }
        }
    }

    /// Whether the flag is currently distrusted.
    #[cfg(test)]
    pub fn distrusted(&self) -> bool {
        self.distrusted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distrust_after_limit_rate_limit_and_recovery() {
        let mut g = WakeGate::default();
        for _ in 0..3 {
            assert!(g.allow(Duration::from_secs(3600)));
            assert_eq!(g.record(WakeResult::Futile, 4), Verdict::Fine);
        }
        assert_eq!(g.record(WakeResult::NotFlagged, 4), Verdict::Fine);
        assert_eq!(g.record(WakeResult::Futile, 4), Verdict::Distrusted(4));
        assert!(g.distrusted());
        // Within the hour after distrust: no more wakes.
        assert!(!g.allow(Duration::from_secs(3600)));
        // With a zero interval one is allowed at once.
        assert!(g.allow(Duration::ZERO));
        assert_eq!(
            g.record(WakeResult::Futile, 4),
            Verdict::Fine,
            "reported once"
        );
        // A wake that found a sleeper restores trust.
        assert_eq!(g.record(WakeResult::Woken, 4), Verdict::Fine);
        assert!(!g.distrusted());
        assert!(g.allow(Duration::from_secs(3600)));
    }
}
