//! How old the oldest change not yet acknowledged is, by the source's commit timestamps:
//! what `slotline_replication_lag_seconds` exports (docs/guide/operating.md, "Metrics and health").
//!
//! Each commit read is remembered with its transaction's commit time until the flush
//! position passes its end; a transaction still being read counts from its own commit
//! time (pgoutput's Begin carries it). Memory is bounded: beyond `MAX_ENTRIES`, adjacent
//! entries are merged into one that ends where the later ended and is as old as the earlier
//! was, so the age reported can only be too high (a lag alert fires early, never late).
//! Entries outlive a session (its commits are read again, and are not added twice); a new
//! slot history drops them (its copy holds what they were).

use crate::time::PgTime;
use crate::Lsn;
use std::collections::VecDeque;

/// Entries kept at most before adjacent ones are merged.
const MAX_ENTRIES: usize = 4096;

#[derive(Debug, Default)]
pub struct CommitAges {
    /// `(end_lsn, commit_time)` of commits read and not known to be acknowledged, oldest
    /// first.
    commits: VecDeque<(Lsn, PgTime)>,
    /// The commit time of the transaction being read (between Begin and Commit).
    open: Option<PgTime>,
}

impl CommitAges {
    /// A transaction begins: `commit_time` is when it committed at the source.
    pub fn on_begin(&mut self, commit_time: PgTime) {
        self.open = Some(commit_time);
    }

    /// The transaction ends at `end_lsn`; `flush` is the acknowledged position now.
    pub fn on_commit(&mut self, end_lsn: Lsn, flush: Lsn) {
        let time = self.open.take();
        self.forget(flush);
        let Some(time) = time else {
            return;
        };
        if end_lsn <= flush || self.commits.back().is_some_and(|(end, _)| *end >= end_lsn) {
            // Acknowledged already, or read again by a later session.
            return;
        }
        if self.commits.len() >= MAX_ENTRIES {
            self.halve();
        }
        self.commits.push_back((end_lsn, time));
    }

    /// The session ended: a transaction it was reading is read again by the next one.
    pub fn on_session_end(&mut self) {
        self.open = None;
    }

    /// A new slot history starts (its copy holds every commit before it).
    pub fn clear(&mut self) {
        self.commits.clear();
        self.open = None;
    }

    /// The commit time of the oldest change not acknowledged at `flush`; `None` when every
    /// change read is acknowledged.
    pub fn oldest(&self, flush: Lsn) -> Option<PgTime> {
        self.commits
            .iter()
            .find(|(end, _)| *end > flush)
            .map(|(_, time)| *time)
            .or(self.open)
    }

    fn forget(&mut self, flush: Lsn) {
        while self.commits.front().is_some_and(|(end, _)| *end <= flush) {
            self.commits.pop_front();
        }
    }

    /// Merges adjacent pairs: the later end, the earlier time.
    fn halve(&mut self) {
        let merged: VecDeque<(Lsn, PgTime)> = self
            .commits
            .iter()
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|pair| {
                let end = pair.iter().map(|(end, _)| *end).max().unwrap_or(Lsn::ZERO);
                let time = pair.iter().map(|(_, t)| *t).min().unwrap_or(PgTime(0));
                (end, time)
            })
            .collect();
        self.commits = merged;
    }
}

/// How fresh what Feldera receives is: the source commit time of each cut batch's newest
/// change, kept until the batch is durable (`slotline_commit_to_durable_seconds`,
/// docs/pipelining.md). One per session (a new session's batches are new); bounded like
/// [`CommitAges`]: past `MAX_ENTRIES` batches the oldest is forgotten (not measured).
#[derive(Debug, Default)]
pub struct BatchCommitTimes {
    /// The commit time of the transaction being read.
    open: Option<PgTime>,
    /// The commit time of the newest change buffered and not cut yet.
    buffered: Option<PgTime>,
    /// Batches cut and not durable: their newest change's commit time.
    cut: VecDeque<(u64, PgTime)>,
}

impl BatchCommitTimes {
    pub fn on_begin(&mut self, commit_time: PgTime) {
        self.open = Some(commit_time);
    }

    /// A change of the open transaction was buffered.
    pub fn on_buffered(&mut self) {
        if self.open.is_some() {
            self.buffered = self.open.max(self.buffered);
        }
    }

    /// The commit time of the newest change buffered and not cut yet.
    pub fn newest_buffered(&self) -> Option<PgTime> {
        self.buffered
    }

    /// What was buffered is cut as batch `seq`.
    pub fn on_cut(&mut self, seq: u64) {
        let Some(time) = self.buffered.take() else {
            return;
        };
        if self.cut.len() >= MAX_ENTRIES {
            self.cut.pop_front();
        }
        self.cut.push_back((seq, time));
    }

    /// Batch `seq` is durable at `now`: microseconds since its newest change committed (0
    /// when the clocks disagree), once per batch.
    pub fn on_durable(&mut self, seq: u64, now: PgTime) -> Option<u64> {
        let index = self.cut.iter().position(|(s, _)| *s == seq)?;
        let (_, time) = self.cut.remove(index)?;
        Some(now.0.saturating_sub(time.0).max(0) as u64)
    }
}

/// Seconds from `commit_time` to `now` (0 when none, or when the clocks disagree).
pub fn lag_seconds(oldest: Option<PgTime>, now: PgTime) -> f64 {
    oldest.map_or(0.0, |t| (now.0.saturating_sub(t.0)).max(0) as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_unacknowledged_commit_ages_until_the_flush_passes_it() {
        let mut ages = CommitAges::default();
        assert_eq!(ages.oldest(Lsn(0)), None, "caught up: nothing to age");
        ages.on_begin(PgTime(1_000));
        assert_eq!(
            ages.oldest(Lsn(0)),
            Some(PgTime(1_000)),
            "a transaction being read"
        );
        ages.on_commit(Lsn(100), Lsn(0));
        ages.on_begin(PgTime(2_000));
        ages.on_commit(Lsn(200), Lsn(0));
        assert_eq!(ages.oldest(Lsn(0)), Some(PgTime(1_000)));
        assert_eq!(
            ages.oldest(Lsn(100)),
            Some(PgTime(2_000)),
            "the first is acknowledged"
        );
        assert_eq!(ages.oldest(Lsn(200)), None);
        assert_eq!(lag_seconds(ages.oldest(Lsn(0)), PgTime(3_501_000)), 3.5);
        assert_eq!(lag_seconds(None, PgTime(3_501_000)), 0.0);
        assert_eq!(
            lag_seconds(Some(PgTime(5)), PgTime(1)),
            0.0,
            "a clock behind"
        );
    }

    #[test]
    fn a_session_reading_the_same_commits_again_adds_nothing() {
        let mut ages = CommitAges::default();
        ages.on_begin(PgTime(1_000));
        ages.on_commit(Lsn(100), Lsn(0));
        ages.on_begin(PgTime(5_000));
        ages.on_session_end();
        assert_eq!(
            ages.oldest(Lsn(0)),
            Some(PgTime(1_000)),
            "still unacknowledged"
        );
        ages.on_begin(PgTime(1_000));
        ages.on_commit(Lsn(100), Lsn(0));
        assert_eq!(ages.commits.len(), 1);
        ages.clear();
        assert_eq!(ages.oldest(Lsn(0)), None);
    }

    #[test]
    fn a_batch_is_as_old_as_its_newest_change_and_is_measured_once() {
        let mut times = BatchCommitTimes::default();
        times.on_begin(PgTime(1_000));
        times.on_buffered();
        times.on_begin(PgTime(3_000));
        times.on_buffered();
        times.on_cut(1);
        // A transaction without buffered changes leaves batch 2 empty of times.
        times.on_begin(PgTime(4_000));
        times.on_cut(2);
        times.on_buffered();
        times.on_cut(3);
        assert_eq!(times.on_durable(1, PgTime(10_000)), Some(7_000));
        assert_eq!(times.on_durable(1, PgTime(11_000)), None, "once");
        assert_eq!(times.on_durable(2, PgTime(10_000)), None);
        assert_eq!(
            times.on_durable(3, PgTime(2_000)),
            Some(0),
            "a clock behind the source's"
        );
        for seq in 0..(2 * MAX_ENTRIES as u64) {
            times.on_buffered();
            times.on_cut(seq);
        }
        assert_eq!(times.cut.len(), MAX_ENTRIES);
    }

    #[test]
    fn memory_is_bounded_and_a_merged_entry_is_never_younger() {
        let mut ages = CommitAges::default();
        for i in 1..=(3 * MAX_ENTRIES as u64) {
            ages.on_begin(PgTime(i as i64 * 10));
            ages.on_commit(Lsn(i * 100), Lsn(0));
            assert!(ages.commits.len() <= MAX_ENTRIES);
        }
        // Past each commit, the age reported is at least the true one.
        for i in (1..3 * MAX_ENTRIES as u64).step_by(97) {
            let flush = Lsn(i * 100);
            let truth = PgTime((i as i64 + 1) * 10);
            let reported = ages.oldest(flush).expect("later commits remain");
            assert!(
                reported <= truth,
                "at {flush}: {reported:?} younger than {truth:?}"
            );
        }
        assert_eq!(ages.oldest(Lsn(3 * MAX_ENTRIES as u64 * 100)), None);
    }
}
