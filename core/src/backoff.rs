//! Reconnect delays and the no-progress deadline.
//!
//! Every connector attached to one primary can lose it at the same instant, so delays grow
//! exponentially with full jitter (uniform in `0..=min(cap, base * 2^attempt)`), drawn from
//! an RNG seeded by the caller so traces are reproducible. Only durable progress resets the
//! growth: a session that reconnects, replays and fails again has achieved nothing, and
//! must not disarm the deadline after which the process gives up (exit 69) rather than pin
//! WAL on the primary forever.

use crate::time::Mono;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Exponential backoff with full jitter.
#[derive(Debug)]
pub struct Backoff {
    base_ms: u64,
    cap_ms: u64,
    attempt: u32,
    rng: StdRng,
}

impl Backoff {
    pub const DEFAULT_BASE_MS: u64 = 100;
    pub const DEFAULT_CAP_MS: u64 = 30_000;

    pub fn new(seed: u64, base_ms: u64, cap_ms: u64) -> Backoff {
        debug_assert!(base_ms > 0 && cap_ms >= base_ms);
        Backoff {
            base_ms,
            cap_ms,
            attempt: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// How many delays were handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The ceiling of the next delay, before jitter.
    pub fn ceiling_ms(&self) -> u64 {
        let factor = 1u64.checked_shl(self.attempt.min(40)).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// The next delay (full jitter), growing the ceiling for the one after.
    pub fn next_delay_ms(&mut self) -> u64 {
        let ceiling = self.ceiling_ms();
        self.attempt = self.attempt.saturating_add(1);
        self.rng.random_range(0..=ceiling)
    }

    /// Durable progress was made: start again from the base delay.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The deadline after which, without durable progress, the process gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressDeadline {
    timeout_us: u64,
    last_progress: Mono,
    /// Work known to be under way until then (a Feldera commit within its own wait): no
    /// giving up before it.
    held_until: Mono,
}

impl ProgressDeadline {
    pub fn new(now: Mono, timeout_secs: u64) -> ProgressDeadline {
        ProgressDeadline {
            timeout_us: timeout_secs.saturating_mul(1_000_000),
            last_progress: now,
            held_until: now,
        }
    }

    /// Work under way has its own deadline `until` (which fails it when passed): the
    /// process does not give up before then.
    pub fn hold_until(&mut self, until: Mono) {
        self.held_until = self.held_until.max(until);
    }

    pub fn on_progress(&mut self, now: Mono) {
        self.last_progress = self.last_progress.max(now);
    }

    /// When durable progress (or what counts as it) was last made.
    pub fn last_progress(&self) -> Mono {
        self.last_progress
    }

    pub fn deadline(&self) -> Mono {
        self.last_progress
            .plus_us(self.timeout_us)
            .max(self.held_until)
    }

    pub fn expired(&self, now: Mono) -> bool {
        now >= self.deadline()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_moves_the_deadline_only_later() {
        let mut d = ProgressDeadline::new(Mono(0), 5);
        d.hold_until(Mono(2_000_000));
        assert_eq!(d.deadline(), Mono(5_000_000));
        d.hold_until(Mono(9_000_000));
        assert_eq!(d.deadline(), Mono(9_000_000));
        assert!(!d.expired(Mono(8_999_999)) && d.expired(Mono(9_000_000)));
        d.on_progress(Mono(6_000_000));
        assert_eq!(d.deadline(), Mono(11_000_000));
    }

    #[test]
    fn ceiling_doubles_to_the_cap_and_resets_on_progress() {
        let mut b = Backoff::new(7, 100, 1000);
        let ceilings: Vec<u64> = (0..6)
            .map(|_| {
                let c = b.ceiling_ms();
                b.next_delay_ms();
                c
            })
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!((b.attempt(), b.ceiling_ms()), (0, 100));
    }

    #[test]
    fn delays_are_within_the_ceiling_and_reproducible_from_the_seed() {
        let draw = |seed| {
            let mut b = Backoff::new(seed, 100, 30_000);
            (0..20)
                .map(|_| (b.ceiling_ms(), b.next_delay_ms()))
                .collect::<Vec<_>>()
        };
        let a = draw(42);
        assert!(a.iter().all(|(ceiling, delay)| delay <= ceiling));
        assert_eq!(a, draw(42));
        assert_ne!(a, draw(43));
        // Full jitter spreads delays: not all at the ceiling, not all at zero.
        assert!(a.iter().any(|(c, d)| d < c) && a.iter().any(|(_, d)| *d > 0));
    }

    #[test]
    fn huge_attempt_counts_saturate_at_the_cap() {
        let mut b = Backoff::new(1, 100, 30_000);
        for _ in 0..200 {
            assert!(b.next_delay_ms() <= 30_000);
        }
        assert_eq!(b.ceiling_ms(), 30_000);
    }

    #[test]
    fn progress_deadline_moves_only_forward_with_progress() {
        let mut d = ProgressDeadline::new(Mono(0), 5);
        assert_eq!(d.deadline(), Mono(5_000_000));
        assert!(!d.expired(Mono(4_999_999)));
        assert!(d.expired(Mono(5_000_000)));
        d.on_progress(Mono(3_000_000));
        d.on_progress(Mono(1_000_000));
        assert_eq!(d.deadline(), Mono(8_000_000));
    }
}
