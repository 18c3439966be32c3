//! Time as the core sees it: integers handed in by the shell, never read from a clock.

use std::fmt;

/// Monotonic time in microseconds since the shell started. Traces print it as `+1.250s`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mono(pub u64);

impl Mono {
    pub fn plus_ms(self, ms: u64) -> Mono {
        Mono(self.0.saturating_add(ms.saturating_mul(1000)))
    }

    pub fn plus_us(self, us: u64) -> Mono {
        Mono(self.0.saturating_add(us))
    }

    /// Microseconds from `earlier` to `self` (0 when `earlier` is later).
    pub fn since(self, earlier: Mono) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Mono {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{}.{:03}s", self.0 / 1_000_000, (self.0 / 1000) % 1000)
    }
}

/// Wall-clock time in microseconds since 2000-01-01 00:00:00 UTC: the epoch of the
/// replication protocol's timestamps (status updates, keepalives, XLogData).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgTime(pub i64);

impl PgTime {
    /// Seconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
    pub const UNIX_EPOCH_OFFSET_SECS: i64 = 946_684_800;

    /// Converts microseconds since the Unix epoch (what a shell's clock gives).
    pub fn from_unix_micros(us: i64) -> PgTime {
        PgTime(us.saturating_sub(Self::UNIX_EPOCH_OFFSET_SECS * 1_000_000))
    }
}

/// The instant an input happened, in both clocks. Shells move them together; tests use a
/// fake clock that does the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Now {
    pub mono: Mono,
    pub wall: PgTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mono_prints_relative_seconds_with_millis() {
        assert_eq!(Mono(1_250_000).to_string(), "+1.250s");
        assert_eq!(Mono(83_999).to_string(), "+0.083s");
    }

    #[test]
    fn pg_epoch_is_2000_01_01() {
        // 2000-01-01T00:00:00Z is 946684800 s after the Unix epoch.
        assert_eq!(PgTime::from_unix_micros(946_684_800_000_000), PgTime(0));
        assert_eq!(
            PgTime::from_unix_micros(946_684_801_000_000),
            PgTime(1_000_000)
        );
    }
}
