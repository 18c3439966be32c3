//! The progress line: a periodic summary of what the stream did, so an operator watching
//! the log sees that slotline is alive and how far behind the server it is.
//!
//! Every `PROGRESS_INTERVAL_SECS` (0 turns it off) the pipeline asks for a line. One comes
//! only when something happened since the last: rows or transactions read, or batches made
//! durable. An idle stream stays quiet, however often keepalives move its position. The
//! line carries the counts since the last line (and whether a source transaction is still
//! open), the flushed position, the lag behind the server's current WAL position as the slot
//! monitor last sampled it (`pg_current_wal_lsn()`, every `SLOT_CHECK_INTERVAL_MS`), and the
//! median and 99th percentile of the completion waits of the batches made durable meanwhile.
//! A logical walsender's `wal_end` is how far it has decoded, not the server's position (in
//! the middle of a large transaction they are far apart): without a sample the line says
//! "decoded up to" that instead.
//!
//! Owns the counters, the schedule and the wording. Never decides anything about the
//! stream: the phases report what happened through the `on_*` methods.

use crate::time::Mono;
use crate::Lsn;
use std::fmt::Write as _;

/// Completion waits kept per interval for the percentiles (the most recent ones win).
pub const WAIT_SAMPLES: usize = 1024;

/// The counters and the schedule of the progress line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressReport {
    /// `None`: the line is off.
    interval_us: Option<u64>,
    last_at: Mono,
    rows: u64,
    transactions: u64,
    batches: u64,
    /// Completion waits (µs) of the batches made durable this interval, at most
    /// [`WAIT_SAMPLES`]; `waits_seen` counts all of them.
    waits_us: Vec<u64>,
    waits_seen: u64,
    /// The furthest `wal_end` the walsender reported (how far it decoded); zero until it
    /// reported one.
    decoded: Lsn,
    /// The server's current WAL position as last sampled, and when.
    server: Option<(Lsn, Mono)>,
    /// A source transaction's Begin was read and its Commit not yet.
    open: bool,
}

impl ProgressReport {
    /// Starts counting at `now`; the first line is due one interval later.
    pub fn new(now: Mono, interval_secs: u64) -> ProgressReport {
        ProgressReport {
            interval_us: (interval_secs > 0).then(|| interval_secs.saturating_mul(1_000_000)),
            last_at: now,
            rows: 0,
            transactions: 0,
            batches: 0,
            waits_us: Vec::new(),
            waits_seen: 0,
            decoded: Lsn::ZERO,
            server: None,
            open: false,
        }
    }

    /// When the next line is due, unless the line is off.
    pub fn next_at(&self) -> Option<Mono> {
        self.interval_us.map(|us| self.last_at.plus_us(us))
    }

    /// A row change (insert, update or delete) was read from the stream.
    pub fn on_row(&mut self) {
        self.rows += 1;
    }

    /// A transaction's Begin was read from the stream.
    pub fn on_begin(&mut self) {
        self.open = true;
    }

    /// A transaction's commit was read from the stream.
    pub fn on_commit(&mut self) {
        self.transactions += 1;
        self.open = false;
    }

    /// The session ended: a transaction it had begun is read again from its Begin.
    pub fn on_session_end(&mut self) {
        self.open = false;
    }

    /// The walsender said how far it decoded (a keepalive's or an XLogData's `wal_end`).
    pub fn on_server_wal(&mut self, wal_end: Lsn) {
        self.decoded = self.decoded.max(wal_end);
    }

    /// The slot monitor sampled the server's current WAL position at `at`.
    pub fn on_server_position(&mut self, position: Lsn, at: Mono) {
        self.server = Some((position, at));
    }

    /// A batch became durable, after waiting `completion_wait_us` for Feldera to complete
    /// it (`None` when it did not wait: the accepted mode).
    pub fn on_batch_durable(&mut self, completion_wait_us: Option<u64>) {
        self.batches += 1;
        let Some(wait) = completion_wait_us else {
            return;
        };
        if self.waits_us.len() < WAIT_SAMPLES {
            self.waits_us.push(wait);
        } else {
            let slot = (self.waits_seen % WAIT_SAMPLES as u64) as usize;
            self.waits_us[slot] = wait;
        }
        self.waits_seen += 1;
    }

    /// The line due at `now`, if one is due and something happened since the last one.
    /// Either way a due line starts the next interval.
    pub fn report(&mut self, now: Mono, phase: &str, flush: Lsn) -> Option<String> {
        let due = self.next_at().is_some_and(|at| now >= at);
        if !due {
            return None;
        }
        let elapsed_us = now.since(self.last_at);
        self.last_at = now;
        let quiet = self.rows == 0 && self.transactions == 0 && self.batches == 0;
        let line = (!quiet).then(|| self.line(now, elapsed_us, phase, flush));
        self.rows = 0;
        self.transactions = 0;
        self.batches = 0;
        self.waits_us.clear();
        self.waits_seen = 0;
        line
    }

    fn line(&mut self, now: Mono, elapsed_us: u64, phase: &str, flush: Lsn) -> String {
        let open = if self.open {
            ", a transaction still open"
        } else {
            ""
        };
        let mut line = format!(
            "{phase}; in the last {}: {} in {} read{open}, {} durable; flushed {flush}",
            seconds(elapsed_us),
            counted(self.rows, "row", "rows"),
            counted(self.transactions, "transaction", "transactions"),
            counted(self.batches, "batch", "batches"),
        );
        match self.server {
            Some((position, at)) => {
                let lag = position.saturating_distance_from(flush);
                let _ = write!(
                    line,
                    ", {lag} bytes behind the server's current WAL position {position} (sampled {} ago)",
                    seconds(now.since(at))
                );
            }
            None if self.decoded.is_zero() => {
                line.push_str(", the server's position not known yet")
            }
            None => {
                let lag = self.decoded.saturating_distance_from(flush);
                let _ = write!(
                    line,
                    ", {lag} bytes behind what the walsender decoded, {} (the server's own position not sampled yet)",
                    self.decoded
                );
            }
        }
        match (
            percentile(&mut self.waits_us, 50),
            percentile(&mut self.waits_us, 99),
        ) {
            (Some(p50), Some(p99)) => {
                let _ = write!(
                    line,
                    "; completion wait p50 {} ms, p99 {} ms",
                    millis(p50),
                    millis(p99)
                );
            }
            _ => line.push_str("; no completion waits"),
        }
        line
    }
}

/// The nearest-rank percentile `p` (1..=100) of `samples` (sorted in place).
fn percentile(samples: &mut [u64], p: u64) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let n = samples.len() as u64;
    let rank = (p * n).div_ceil(100).clamp(1, n);
    samples.get(rank as usize - 1).copied()
}

/// `1 row`, `2 rows`.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn millis(us: u64) -> String {
    format!("{}.{}", us / 1000, (us % 1000) / 100)
}

fn seconds(us: u64) -> String {
    format!("{}.{} s", us / 1_000_000, (us % 1_000_000) / 100_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    #[test]
    fn a_due_line_counts_what_happened_since_the_last_one() {
        let mut p = ProgressReport::new(Mono(0), 30);
        assert_eq!(p.next_at(), Some(Mono(30 * S)));
        p.on_server_wal(Lsn(0x5000));
        for _ in 0..3 {
            p.on_row();
        }
        p.on_commit();
        p.on_batch_durable(Some(12_000));
        assert_eq!(
            p.report(Mono(29 * S), "streaming", Lsn(0x4000)),
            None,
            "not due"
        );
        assert_eq!(
            p.report(Mono(30 * S), "streaming", Lsn(0x4000)).as_deref(),
            Some("streaming; in the last 30.0 s: 3 rows in 1 transaction read, 1 batch durable; flushed 0/4000, 4096 bytes behind what the walsender decoded, 0/5000 (the server's own position not sampled yet); completion wait p50 12.0 ms, p99 12.0 ms")
        );
        assert_eq!(p.next_at(), Some(Mono(60 * S)));
        p.on_commit();
        assert_eq!(
            p.report(Mono(60 * S), "streaming", Lsn(0x5000)).as_deref(),
            Some("streaming; in the last 30.0 s: 0 rows in 1 transaction read, 0 batches durable; flushed 0/5000, 0 bytes behind what the walsender decoded, 0/5000 (the server's own position not sampled yet); no completion waits"),
            "counts start over; the decoded position is remembered"
        );
    }

    #[test]
    fn a_quiet_interval_logs_nothing_but_starts_the_next() {
        let mut p = ProgressReport::new(Mono(0), 1);
        p.on_server_wal(Lsn(0x9000));
        assert_eq!(p.report(Mono(S), "streaming", Lsn(0x1000)), None);
        assert_eq!(p.next_at(), Some(Mono(2 * S)));
    }

    #[test]
    fn zero_interval_turns_the_line_off() {
        let mut p = ProgressReport::new(Mono(0), 0);
        p.on_row();
        assert_eq!(p.next_at(), None);
        assert_eq!(p.report(Mono(3600 * S), "streaming", Lsn(1)), None);
    }

    #[test]
    fn percentiles_use_the_nearest_rank_of_the_interval_waits() {
        let mut p = ProgressReport::new(Mono(0), 10);
        // 1..=100 ms: p50 is 50 ms, p99 is 99 ms.
        for ms in (1..=100u64).rev() {
            p.on_batch_durable(Some(ms * 1000));
        }
        p.on_batch_durable(None);
        let line = p
            .report(Mono(10 * S), "stopping", Lsn(0x10))
            .unwrap_or_default();
        assert!(line.starts_with("stopping; "), "{line}");
        assert!(line.contains("101 batches durable"), "{line}");
        assert!(
            line.contains("the server's position not known yet"),
            "{line}"
        );
        assert!(line.ends_with("p50 50.0 ms, p99 99.0 ms"), "{line}");
    }

    #[test]
    fn only_the_most_recent_waits_are_kept() {
        let mut p = ProgressReport::new(Mono(0), 10);
        for _ in 0..WAIT_SAMPLES {
            p.on_batch_durable(Some(1_000_000));
        }
        for _ in 0..WAIT_SAMPLES {
            p.on_batch_durable(Some(2_000));
        }
        assert_eq!(p.waits_us.len(), WAIT_SAMPLES);
        let line = p
            .report(Mono(10 * S), "streaming", Lsn(0))
            .unwrap_or_default();
        assert!(line.ends_with("p50 2.0 ms, p99 2.0 ms"), "{line}");
    }

    #[test]
    fn percentile_of_one_sample_is_that_sample() {
        assert_eq!(percentile(&mut [7], 50), Some(7));
        assert_eq!(percentile(&mut [7], 99), Some(7));
        assert_eq!(percentile(&mut [], 50), None);
        assert_eq!(percentile(&mut [3, 1, 2], 99), Some(3));
        assert_eq!(percentile(&mut [3, 1, 2], 50), Some(2));
    }

    /// Half way through a large transaction the walsender's `wal_end` is where it decoded
    /// to, far behind the server: the lag is taken from the sampled position, and the open
    /// transaction is said.
    #[test]
    fn the_lag_is_behind_the_sampled_server_position_and_an_open_transaction_is_said() {
        let mut p = ProgressReport::new(Mono(0), 30);
        p.on_server_position(Lsn(0x60_0000), Mono(25 * S));
        p.on_begin();
        p.on_server_wal(Lsn(0x1000));
        for _ in 0..447 {
            p.on_row();
        }
        assert_eq!(
            p.report(Mono(30 * S), "streaming", Lsn(0x800)).as_deref(),
            Some("streaming; in the last 30.0 s: 447 rows in 0 transactions read, a transaction still open, 0 batches durable; flushed 0/800, 6289408 bytes behind the server's current WAL position 0/600000 (sampled 5.0 s ago); no completion waits")
        );
        p.on_commit();
        p.on_server_position(Lsn(0x60_0000), Mono(59 * S));
        let line = p.report(Mono(60 * S), "streaming", Lsn(0x60_0000)).unwrap();
        assert!(
            line.contains("0 rows in 1 transaction read, 0 batches durable")
                && line.contains("0 bytes behind"),
            "{line}"
        );
        p.on_begin();
        p.on_row();
        p.on_session_end();
        let line = p.report(Mono(90 * S), "streaming", Lsn(0x60_0000)).unwrap();
        assert!(
            !line.contains("still open"),
            "a replayed session reads its Begin again: {line}"
        );
    }
}
