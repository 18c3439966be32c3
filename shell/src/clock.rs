//! The shells' clock: `Now` for every input, and the mapping between the core's monotonic
//! microseconds and `Instant`s for waiting.
//!
//! Owns the process's time origin. Never decides what a deadline means; it only says
//! whether one has been reached.

use slotline_core::time::{Mono, Now, PgTime};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Monotonic time since the shell started, plus the wall clock, read together.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Starts the clock: `Mono(0)` is now.
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The current instant in both clocks.
    pub fn now(&self) -> Now {
        Now {
            mono: self.mono_of(Instant::now()),
            wall: wall_now(),
        }
    }

    /// `instant` as microseconds since the start (0 for instants before it).
    pub fn mono_of(&self, instant: Instant) -> Mono {
        let micros = instant.saturating_duration_since(self.start).as_micros();
        Mono(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// The `Instant` at which the monotonic clock reads `at`. Far-future deadlines that
    /// `Instant` cannot represent become a year from now: still "never" for a wait that is
    /// recomputed after every input.
    pub fn instant_at(&self, at: Mono) -> Instant {
        self.start
            .checked_add(Duration::from_micros(at.0))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    }

    /// Whether the monotonic clock has reached `at`. A wait that woke up is not proof of
    /// this (timers may fire early on some platforms): the run loops check it before
    /// feeding `Input::Tick`.
    pub fn reached(&self, at: Mono) -> bool {
        self.mono_of(Instant::now()) >= at
    }
}

/// The wall clock as PostgreSQL's epoch-2000 microseconds. A clock set before 1970 gives a
/// negative Unix time rather than an error: the core only puts it in status updates.
fn wall_now() -> PgTime {
    let unix_micros = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_micros()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |m| -m),
    };
    PgTime::from_unix_micros(unix_micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mono_starts_near_zero_and_moves_forward() {
        let clock = Clock::start();
        let first = clock.now();
        std::thread::sleep(Duration::from_millis(5));
        let second = clock.now();
        assert!(
            first.mono.0 < 1_000_000,
            "start is near zero: {:?}",
            first.mono
        );
        assert!(second.mono.0 >= first.mono.0 + 5_000);
        assert!(second.wall >= first.wall);
    }

    #[test]
    fn wall_clock_is_after_2020_in_pg_epoch() {
        // 2020-01-01 is 20 years (631152000 s) after the PostgreSQL epoch.
        let wall = Clock::start().now().wall;
        assert!(wall.0 > 631_152_000 * 1_000_000, "{wall:?}");
    }

    #[test]
    fn instant_at_and_mono_of_round_trip() {
        let clock = Clock::start();
        let at = Mono(1_234_567);
        assert_eq!(clock.mono_of(clock.instant_at(at)), at);
    }

    #[test]
    fn reached_is_false_before_and_true_after_the_deadline() {
        let clock = Clock::start();
        let soon = clock.now().mono.plus_ms(20);
        assert!(!clock.reached(soon));
        std::thread::sleep(Duration::from_millis(25));
        assert!(clock.reached(soon));
    }

    #[test]
    fn far_future_deadlines_do_not_overflow() {
        let clock = Clock::start();
        assert!(clock.instant_at(Mono(u64::MAX)) > Instant::now());
    }
}
