//! When to send a standby status update.
//!
//! PostgreSQL closes a replication connection that stays silent for `wal_sender_timeout`.
//! slotline reports every third of it, clamped to 500 ms..10 s (10 s when the timeout is 0,
//! i.e. disabled: the position still has to reach the server for the slot to release WAL),
//! and keeps reporting while it waits for Feldera. A keepalive that asks for a reply is
//! answered at once, and so is every move of the flush position.

use crate::time::Mono;

/// The floor and ceiling of the status interval.
pub const MIN_INTERVAL_US: u64 = 500_000;
pub const MAX_INTERVAL_US: u64 = 10_000_000;

/// The status interval for a `wal_sender_timeout` in milliseconds.
pub fn interval_us(wal_sender_timeout_ms: u64) -> u64 {
    if wal_sender_timeout_ms == 0 {
        return MAX_INTERVAL_US;
    }
    (wal_sender_timeout_ms.saturating_mul(1000) / 3).clamp(MIN_INTERVAL_US, MAX_INTERVAL_US)
}

/// Parses `SHOW wal_sender_timeout` output (`60s`, `4s`, `500ms`, `1min`, `0`, `2h`, `1d`)
/// into milliseconds.
pub fn parse_guc_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let value: u64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    value.checked_mul(factor)
}

/// The status-update schedule of one replication session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusSchedule {
    interval_us: u64,
    next_at: Mono,
}

impl StatusSchedule {
    pub fn new(now: Mono, wal_sender_timeout_ms: u64) -> StatusSchedule {
        let interval_us = interval_us(wal_sender_timeout_ms);
        StatusSchedule {
            interval_us,
            next_at: now.plus_us(interval_us),
        }
    }

    pub fn interval_us(&self) -> u64 {
        self.interval_us
    }

    pub fn next_at(&self) -> Mono {
        self.next_at
    }

    /// An update was sent now: the next one is a full interval away.
    pub fn sent(&mut self, now: Mono) {
        self.next_at = now.plus_us(self.interval_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_is_a_third_of_the_timeout_clamped() {
        assert_eq!(interval_us(60_000), 10_000_000);
        assert_eq!(interval_us(4_000), 1_333_333);
        assert_eq!(interval_us(900), 500_000);
        assert_eq!(
            interval_us(0),
            10_000_000,
            "disabled timeout still reports at the ceiling"
        );
    }

    #[test]
    fn guc_durations_parse_with_postgres_units() {
        assert_eq!(parse_guc_duration_ms("60s"), Some(60_000));
        assert_eq!(parse_guc_duration_ms("4s"), Some(4_000));
        assert_eq!(parse_guc_duration_ms("500ms"), Some(500));
        assert_eq!(parse_guc_duration_ms("1min"), Some(60_000));
        assert_eq!(parse_guc_duration_ms("2h"), Some(7_200_000));
        assert_eq!(parse_guc_duration_ms("0"), Some(0));
        assert_eq!(parse_guc_duration_ms("abc"), None);
        assert_eq!(parse_guc_duration_ms("5 fortnights"), None);
    }
}
