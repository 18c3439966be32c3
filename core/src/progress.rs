//! The progress line: a periodic summary of what the stream did, so an operator watching
//! the log sees that slotline is alive and how far behind the server it is.
//!
//! Every `PROGRESS_INTERVAL_SECS` (0 turns it off) the pipeline asks for a line. One comes
//! only when something happened since the last: rows or transactions read, or batches made
//! durable. An idle stream stays quiet, however often keepalives move its position. The
//! line carries the counts since the last line, the flushed position, the lag to the end
//! of the server's WAL (the latest `wal_end` of a keepalive or an XLogData) and the median
//! and 99th percentile of the completion waits of the batches made durable meanwhile.
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
    /// The furthest end of WAL the server reported; zero until it reported one.
    server_wal_end: Lsn,
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
            server_wal_end: Lsn::ZERO,
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

    /// A transaction's commit was read from the stream.
    pub fn on_commit(&mut self) {
        self.transactions += 1;
    }

    /// The server said where its WAL ends (a keepalive's or an XLogData's `wal_end`).
    pub fn on_server_wal(&mut self, wal_end: Lsn) {
        self.server_wal_end = self.server_wal_end.max(wal_end);
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
        let line = (!quiet).then(|| self.line(elapsed_us, phase, flush));
        self.rows = 0;
        self.transactions = 0;
        self.batches = 0;
        self.waits_us.clear();
        self.waits_seen = 0;
        line
    }

    fn line(&mut self, elapsed_us: u64, phase: &str, flush: Lsn) -> String {
        let mut line = format!(
            "{phase}; in the last {}: {} rows in {} transactions read, {} batches durable; flushed {flush}",
            seconds(elapsed_us),
            self.rows,
            self.transactions,
            self.batches,
        );
        if self.server_wal_end.is_zero() {
            line.push_str(", server's WAL end not known yet");
        } else {
            let lag = self.server_wal_end.saturating_distance_from(flush);
            let _ = write!(
                line,
                ", {lag} bytes behind the server's WAL end {}",
                self.server_wal_end
            );
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
            Some("streaming; in the last 30.0 s: 3 rows in 1 transactions read, 1 batches durable; flushed 0/4000, 4096 bytes behind the server's WAL end 0/5000; completion wait p50 12.0 ms, p99 12.0 ms")
        );
        assert_eq!(p.next_at(), Some(Mono(60 * S)));
        p.on_commit();
        assert_eq!(
            p.report(Mono(60 * S), "streaming", Lsn(0x5000)).as_deref(),
            Some("streaming; in the last 30.0 s: 0 rows in 1 transactions read, 0 batches durable; flushed 0/5000, 0 bytes behind the server's WAL end 0/5000; no completion waits"),
            "counts start over; the server's WAL end is remembered"
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
        assert!(line.contains("server's WAL end not known yet"), "{line}");
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
}
