//! The ack tracker: the only place a position to report to PostgreSQL is chosen.
//!
//! It owns three facts and the rules that join them:
//! - the **received** position: the `wal_start` of the last XLogData read (never `wal_end`,
//!   which is the server's WAL head, and never a zero start, which Relation messages carry);
//! - the **commits** seen, each with the outbox batch that holds its last row;
//! - which batches are **durable** (Feldera completed them), as a contiguous prefix.
//!
//! The **flush** position is the `end_lsn` (never the `commit_lsn`) of the last commit all of
//! whose rows are in durable batches. Batches may finish out of order; like a transport's
//! send buffer, only the contiguous durable prefix counts. An idle keepalive's `wal_end`
//! may be acknowledged when no transaction is open and nothing is buffered or in flight:
//! then everything below it has been read, and WAL written to unpublished tables is
//! released. Positions never move backwards.
//!
//! With checkpoints (`FELDERA_DURABILITY=checkpoint`, see `docs/contract.md`) a fourth fact
//! joins them: what Feldera's last successful **checkpoint** holds. Then the position the
//! rules above reach is only **complete** (processed by Feldera, lost by a restart that
//! resumes from the checkpoint), and the flush follows it only through checkpoints: a
//! checkpoint requested when the complete position was C holds every commit up to C. The
//! flush may also follow the complete position directly while no write to Feldera has
//! completed since the request of the last successful checkpoint (idle keepalives and
//! commits without routed rows add nothing a restart could lose).
//!
//! It never decides when to send a status update or a batch; it only answers "how far".

use crate::Lsn;
use std::collections::{BTreeSet, VecDeque};

/// A batch's sequence number in the outbox, starting at 1. Batch `n` is cut before `n+1`,
/// and on each table its request goes out first (tables are written side by side).
pub type BatchSeq = u64;

/// A commit waiting for its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingCommit {
    end_lsn: Lsn,
    /// The highest batch holding rows of this commit or of anything before it.
    needs: BatchSeq,
}

/// Tracks received, durable and acknowledgeable positions. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct AckTracker {
    received: Lsn,
    /// What may be reported to PostgreSQL.
    flush: Lsn,
    /// The last commit (or idle keepalive) whose rows Feldera completed: `flush` itself
    /// unless `checkpointing`.
    complete: Lsn,
    /// Only checkpoints move `flush` past what a checkpoint holds.
    checkpointing: bool,
    /// Writes to Feldera (stream, snapshot or retraction batches) that completed so far,
    /// and how many of them the last successful checkpoint holds.
    writes_completed: u64,
    writes_saved: u64,
    in_transaction: bool,
    pending: VecDeque<PendingCommit>,
    /// Every batch `<= durable_prefix` is durable.
    durable_prefix: BatchSeq,
    /// Durable batches beyond the prefix (finished out of order).
    durable_ahead: BTreeSet<BatchSeq>,
    /// The highest batch any commit has needed so far.
    highest_needed: BatchSeq,
    /// Counts the slots created while running (`new_slot`): checkpoint marks of an earlier
    /// history credit no position.
    history: u32,
}

/// What a checkpoint requested now will hold: every commit up to `complete` (a position of
/// slot history `history`), and the first `writes` completed writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointMark {
    pub complete: Lsn,
    pub writes: u64,
    pub history: u32,
}

/// Why the flush position moved, for traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advance {
    /// The last commit whose batches are all durable.
    Commit {
        end_lsn: Lsn,
        through_batch: BatchSeq,
    },
    /// An idle keepalive: nothing open, buffered or in flight.
    Idle { wal_end: Lsn },
}

impl AckTracker {
    /// Starts from the slot's confirmed position (or zero when unknown): nothing below it is
    /// ever reported as new progress.
    pub fn new(confirmed: Lsn) -> AckTracker {
        AckTracker {
            received: confirmed,
            flush: confirmed,
            complete: confirmed,
            ..AckTracker::default()
        }
    }

    /// Checkpoint mode on or off (between sessions, or before the first).
    pub fn set_checkpointing(&mut self, on: bool) {
        self.checkpointing = on;
        self.follow_complete();
    }

    pub fn checkpointing(&self) -> bool {
        self.checkpointing
    }

    /// The position Feldera completed (processed), at or ahead of `flush`.
    pub fn complete(&self) -> Lsn {
        self.complete
    }

    /// A write to Feldera completed (any batch: stream, snapshot, retraction).
    pub fn on_write_complete(&mut self) {
        self.writes_completed += 1;
    }

    /// A decision relied on the state Feldera processed (a query's answer: a table verified
    /// empty after a TRUNCATE, a copy's count). That state may hold records whose requests
    /// were never seen complete (an ended session's), so, like a completed write, a
    /// checkpoint must hold it before the flush passes what the decision acknowledges.
    pub fn on_feldera_state_relied_on(&mut self) {
        self.writes_completed += 1;
    }

    /// Whether something Feldera completed is not yet in a successful checkpoint.
    pub fn unsaved(&self) -> bool {
        self.writes_completed > self.writes_saved
    }

    /// What a checkpoint requested now holds.
    pub fn checkpoint_mark(&self) -> CheckpointMark {
        CheckpointMark {
            complete: self.complete,
            writes: self.writes_completed,
            history: self.history,
        }
    }

    /// A slot was created (again) at `consistent_point`: a new acknowledgement history
    /// starts there. Positions of the slot before it name other WAL (a restored or failed
    /// over server writes different records at the same positions), so nothing completed
    /// under it, and no checkpoint requested before now, ever moves this slot's flush.
    ///
    /// Returns the earlier history's flush when it lay past the new slot's start.
    pub fn new_slot(&mut self, consistent_point: Lsn) -> Option<Lsn> {
        let replaced = (self.flush > consistent_point).then_some(self.flush);
        self.history += 1;
        self.flush = consistent_point;
        self.complete = consistent_point;
        self.received = consistent_point;
        replaced
    }

    /// The checkpoint requested at `mark` succeeded. Returns whether the flush moved.
    pub fn on_checkpoint_saved(&mut self, mark: CheckpointMark) -> bool {
        let before = self.flush;
        self.writes_saved = self.writes_saved.max(mark.writes);
        // A session that started after the request begins at its slot (`start_from_slot`),
        // possibly below `mark.complete`: never report past what this session completed.
        // A mark of an earlier slot's history says nothing about this slot's positions.
        if mark.history == self.history {
            self.flush = self.flush.max(mark.complete.min(self.complete));
        }
        self.follow_complete();
        self.flush > before
    }

    /// Without checkpoints, or with nothing completed since the last checkpoint's request,
    /// the flush is the complete position.
    fn follow_complete(&mut self) {
        if !self.checkpointing || !self.unsaved() {
            self.flush = self.flush.max(self.complete);
        }
    }

    pub fn received(&self) -> Lsn {
        self.received
    }

    pub fn flush(&self) -> Lsn {
        self.flush
    }

    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Commits seen whose rows are not all durable yet.
    pub fn pending_commits(&self) -> usize {
        self.pending.len()
    }

    /// A session starts streaming from a slot that has confirmed `slot_confirmed`: its
    /// acknowledgement history starts there, below or above what earlier sessions reported.
    /// Returns the flush position this replaces when that was higher.
    ///
    /// Only the slot knows what PostgreSQL still holds. A slot this session created (a
    /// re-snapshot, a dropped slot, a server restored from a backup or failed over to a
    /// lagging standby) starts at its own consistent point, possibly below an earlier
    /// session's flush; reporting that older position would let PostgreSQL move the new
    /// slot past changes that were never delivered. Called only between sessions
    /// (`reset_session` already voided everything not durable).
    pub fn start_from_slot(&mut self, slot_confirmed: Lsn) -> Option<Lsn> {
        debug_assert!(self.pending.is_empty() && !self.in_transaction);
        let replaced = (self.flush > slot_confirmed).then_some(self.flush);
        self.flush = slot_confirmed;
        self.complete = slot_confirmed;
        self.received = slot_confirmed;
        replaced
    }

    /// An XLogData record started at `wal_start` has been read.
    pub fn on_wal_data(&mut self, wal_start: Lsn) {
        if !wal_start.is_zero() {
            self.received = self.received.max(wal_start);
        }
    }

    pub fn on_begin(&mut self) {
        self.in_transaction = true;
    }

    /// A commit was read. `last_batch` is the batch that holds (or will hold) its last row;
    /// pass the last batch opened so far when the transaction carried no routed row, since
    /// acknowledging it also acknowledges everything before it.
    pub fn on_commit(&mut self, end_lsn: Lsn, last_batch: BatchSeq) -> Option<Advance> {
        self.in_transaction = false;
        self.highest_needed = self.highest_needed.max(last_batch);
        self.pending.push_back(PendingCommit {
            end_lsn,
            needs: self.highest_needed,
        });
        self.release()
    }

    /// Feldera completed `batch` (or, in accepted mode, accepted it).
    pub fn on_batch_durable(&mut self, batch: BatchSeq) -> Option<Advance> {
        if batch > self.durable_prefix {
            self.durable_ahead.insert(batch);
        }
        while self.durable_ahead.remove(&(self.durable_prefix + 1)) {
            self.durable_prefix += 1;
        }
        self.release()
    }

    /// A primary keepalive. `idle` is the caller's word that nothing is buffered or in
    /// flight; the tracker adds its own condition (no open transaction, no pending commit).
    pub fn on_keepalive(&mut self, wal_end: Lsn, idle: bool) -> Option<Advance> {
        if !idle || self.in_transaction || !self.pending.is_empty() || wal_end <= self.complete {
            return None;
        }
        self.received = self.received.max(wal_end);
        self.complete = wal_end;
        self.follow_complete();
        Some(Advance::Idle { wal_end })
    }

    /// Forgets everything not durable: a new session replays it from the slot. Batches up
    /// to `last_cut` belong to the old session and are void; the new session's first batch
    /// is `last_cut + 1`.
    pub fn reset_session(&mut self, last_cut: BatchSeq) {
        *self = AckTracker {
            durable_prefix: last_cut,
            highest_needed: last_cut,
            complete: self.complete,
            checkpointing: self.checkpointing,
            writes_completed: self.writes_completed,
            writes_saved: self.writes_saved,
            history: self.history,
            ..AckTracker::new(self.flush)
        };
    }

    fn release(&mut self) -> Option<Advance> {
        let mut advanced = None;
        while let Some(front) = self.pending.front().copied() {
            if front.needs > self.durable_prefix {
                break;
            }
            self.pending.pop_front();
            if front.end_lsn > self.complete {
                self.complete = front.end_lsn;
                advanced = Some(Advance::Commit {
                    end_lsn: front.end_lsn,
                    through_batch: front.needs,
                });
            }
        }
        self.follow_complete();
        advanced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commit_is_acknowledged_only_when_its_batch_is_durable() {
        let mut ack = AckTracker::new(Lsn(100));
        ack.on_begin();
        ack.on_wal_data(Lsn(120));
        assert_eq!(ack.on_commit(Lsn(200), 1), None);
        assert_eq!(ack.flush(), Lsn(100));
        assert_eq!(
            ack.on_batch_durable(1),
            Some(Advance::Commit {
                end_lsn: Lsn(200),
                through_batch: 1
            })
        );
        assert_eq!(ack.flush(), Lsn(200));
    }

    #[test]
    fn transaction_split_over_three_batches_waits_for_the_last() {
        let mut ack = AckTracker::new(Lsn::ZERO);
        ack.on_begin();
        assert_eq!(ack.on_commit(Lsn(500), 3), None);
        assert_eq!(ack.on_batch_durable(1), None);
        assert_eq!(ack.on_batch_durable(2), None);
        assert_eq!(ack.flush(), Lsn::ZERO);
        assert!(ack.on_batch_durable(3).is_some());
        assert_eq!(ack.flush(), Lsn(500));
    }

    #[test]
    fn out_of_order_durability_advances_only_the_contiguous_prefix() {
        let mut ack = AckTracker::new(Lsn::ZERO);
        ack.on_commit(Lsn(10), 1);
        ack.on_commit(Lsn(20), 2);
        assert_eq!(ack.on_batch_durable(2), None);
        assert_eq!(ack.flush(), Lsn::ZERO);
        assert_eq!(
            ack.on_batch_durable(1),
            Some(Advance::Commit {
                end_lsn: Lsn(20),
                through_batch: 2
            })
        );
    }

    #[test]
    fn commit_without_rows_waits_for_earlier_batches() {
        let mut ack = AckTracker::new(Lsn::ZERO);
        ack.on_commit(Lsn(10), 1);
        assert_eq!(
            ack.on_commit(Lsn(20), 0),
            None,
            "must not pass the earlier commit's batch"
        );
        assert!(ack.on_batch_durable(1).is_some());
        assert_eq!(ack.flush(), Lsn(20));
    }

    #[test]
    fn received_is_wal_start_and_ignores_zero() {
        let mut ack = AckTracker::new(Lsn(50));
        ack.on_wal_data(Lsn(80));
        ack.on_wal_data(Lsn::ZERO);
        ack.on_wal_data(Lsn(60));
        assert_eq!(ack.received(), Lsn(80));
    }

    #[test]
    fn idle_keepalive_is_acknowledged_but_not_with_open_transaction_or_work() {
        let mut ack = AckTracker::new(Lsn(100));
        assert_eq!(
            ack.on_keepalive(Lsn(900), true),
            Some(Advance::Idle { wal_end: Lsn(900) })
        );
        ack.on_begin();
        assert_eq!(ack.on_keepalive(Lsn(1000), true), None, "open transaction");
        ack.on_commit(Lsn(950), 1);
        assert_eq!(ack.on_keepalive(Lsn(1000), true), None, "pending commit");
        ack.on_batch_durable(1);
        assert_eq!(
            ack.on_keepalive(Lsn(1000), false),
            None,
            "caller has work in flight"
        );
        assert!(ack.on_keepalive(Lsn(1000), true).is_some());
        assert_eq!(ack.flush(), Lsn(1000));
    }

    #[test]
    fn session_reset_drops_pending_and_keeps_flush() {
        let mut ack = AckTracker::new(Lsn::ZERO);
        ack.on_commit(Lsn(10), 1);
        ack.on_batch_durable(1);
        ack.on_begin();
        ack.on_commit(Lsn(20), 2);
        ack.reset_session(2);
        assert_eq!(
            (ack.flush(), ack.pending_commits(), ack.in_transaction()),
            (Lsn(10), 0, false)
        );
        // The new session's first batch is 3, and it alone makes its commit durable.
        ack.on_begin();
        assert_eq!(ack.on_commit(Lsn(20), 3), None);
        assert!(ack.on_batch_durable(3).is_some());
        assert_eq!(ack.flush(), Lsn(20));
    }

    /// A commit whose one batch completed (a write Feldera completed).
    fn durable_commit(ack: &mut AckTracker, end: u64, batch: BatchSeq) {
        ack.on_begin();
        ack.on_commit(Lsn(end), batch);
        ack.on_write_complete();
        ack.on_batch_durable(batch);
    }

    #[test]
    fn with_checkpoints_the_flush_moves_to_what_was_complete_when_the_checkpoint_was_requested() {
        let mut ack = AckTracker::new(Lsn(100));
        ack.set_checkpointing(true);
        durable_commit(&mut ack, 200, 1);
        assert_eq!((ack.complete(), ack.flush()), (Lsn(200), Lsn(100)));
        let mark = ack.checkpoint_mark();
        // Completed after the request: the checkpoint may not hold it.
        durable_commit(&mut ack, 300, 2);
        assert!(ack.on_checkpoint_saved(mark));
        assert_eq!((ack.complete(), ack.flush()), (Lsn(300), Lsn(200)));
        assert!(ack.unsaved());
        // The next checkpoint holds everything: the flush follows completion again, also
        // through an idle keepalive.
        let mark = ack.checkpoint_mark();
        assert!(ack.on_checkpoint_saved(mark));
        assert_eq!(ack.flush(), Lsn(300));
        assert!(ack.on_keepalive(Lsn(400), true).is_some());
        assert_eq!(ack.flush(), Lsn(400));
    }

    #[test]
    fn with_checkpoints_an_idle_keepalive_waits_while_something_completed_is_not_held() {
        let mut ack = AckTracker::new(Lsn(100));
        ack.set_checkpointing(true);
        durable_commit(&mut ack, 200, 1);
        assert!(ack.on_keepalive(Lsn(500), true).is_some());
        assert_eq!((ack.complete(), ack.flush()), (Lsn(500), Lsn(100)));
        // A checkpoint requested now holds it all, keepalive included.
        let mark = ack.checkpoint_mark();
        ack.on_checkpoint_saved(mark);
        assert_eq!(ack.flush(), Lsn(500));
    }

    #[test]
    fn a_checkpoint_of_an_earlier_session_never_moves_a_new_slot_past_its_own_history() {
        let mut ack = AckTracker::new(Lsn(100));
        ack.set_checkpointing(true);
        durable_commit(&mut ack, 900, 1);
        let mark = ack.checkpoint_mark();
        ack.reset_session(1);
        ack.start_from_slot(Lsn(150));
        ack.on_checkpoint_saved(mark);
        assert_eq!(ack.flush(), Lsn(150));
    }

    #[test]
    fn a_checkpoint_requested_before_a_slot_was_created_again_credits_no_position_of_it() {
        let mut ack = AckTracker::new(Lsn(0x100000));
        ack.set_checkpointing(true);
        // The earlier slot's history completed up to 0/100090, and a checkpoint was asked.
        durable_commit(&mut ack, 0x100090, 1);
        let old = ack.checkpoint_mark();
        ack.reset_session(1);
        // The server was restored: a new slot at 0/100000, whose copy is then written.
        ack.new_slot(Lsn(0x100000));
        ack.on_write_complete();
        let copy = ack.checkpoint_mark();
        assert_eq!(copy.complete, Lsn(0x100000), "nothing of the old history");
        ack.start_from_slot(Lsn(0x100000));
        // A new transaction whose commit record lies at the old history's 0/100090.
        ack.on_begin();
        ack.on_commit(Lsn(0x1000C0), 2);
        assert!(ack.on_batch_durable(2).is_some());
        ack.on_write_complete();
        ack.on_checkpoint_saved(old);
        ack.on_checkpoint_saved(copy);
        assert_eq!(
            ack.flush(),
            Lsn(0x100000),
            "neither checkpoint holds the new commit, nor names a position of this slot past its start"
        );
        let now = ack.checkpoint_mark();
        ack.on_checkpoint_saved(now);
        assert_eq!(ack.flush(), Lsn(0x1000C0));
    }

    #[derive(Clone, Debug)]
    enum Step {
        Commit { gap: u64, rows_in_new_batch: bool },
        Durable(u64),
        Keepalive { ahead: u64, idle: bool },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1..1000u64, any::<bool>()).prop_map(|(gap, rows_in_new_batch)| Step::Commit {
                gap,
                rows_in_new_batch
            }),
            (1..12u64).prop_map(Step::Durable),
            (0..1000u64, any::<bool>()).prop_map(|(ahead, idle)| Step::Keepalive { ahead, idle }),
        ]
    }

    proptest! {
        /// The flush position never decreases and never passes the last commit whose
        /// batches (and all earlier ones) are durable, except through an idle keepalive.
        #[test]
        fn flush_is_monotonic_and_never_ahead_of_durable_commits(steps in proptest::collection::vec(step(), 1..60)) {
            let mut ack = AckTracker::new(Lsn::ZERO);
            let mut end = 0u64;
            let mut batch = 0u64;
            let mut commits: Vec<(u64, u64)> = Vec::new();
            let mut durable = BTreeSet::new();
            let mut idle_floor = 0u64;
            for s in steps {
                let before = ack.flush();
                match s {
                    Step::Commit { gap, rows_in_new_batch } => {
                        end += gap;
                        if rows_in_new_batch { batch += 1; }
                        commits.push((end, batch));
                        ack.on_begin();
                        ack.on_commit(Lsn(end), batch);
                    }
                    Step::Durable(b) => { durable.insert(b); ack.on_batch_durable(b); }
                    Step::Keepalive { ahead, idle } => {
                        if ack.on_keepalive(Lsn(end + ahead), idle).is_some() { idle_floor = end + ahead; }
                    }
                }
                prop_assert!(ack.flush() >= before);
                let prefix = (1..).take_while(|b| durable.contains(b)).last().unwrap_or(0);
                // Only commits in order count: stop at the first that is not durable.
                let mut in_order = 0;
                for (e, b) in &commits { if *b <= prefix { in_order = *e; } else { break; } }
                prop_assert!(ack.flush().0 <= in_order.max(idle_floor), "flush {} beyond durable {}", ack.flush(), in_order);
            }
        }

        /// With checkpoints, the flush never passes a commit whose rows no successful
        /// checkpoint holds: every commit with rows at or below the flush completed before
        /// the request of a checkpoint that succeeded.
        #[test]
        fn with_checkpoints_the_flush_never_passes_rows_no_checkpoint_holds(
            steps in proptest::collection::vec((step(), 0..4u8), 1..80)
        ) {
            let mut ack = AckTracker::new(Lsn::ZERO);
            ack.set_checkpointing(true);
            let mut end = 0u64;
            let mut batch = 0u64;
            let mut commits: Vec<(u64, u64)> = Vec::new();
            // When each batch completed (a logical clock), and the requests made so far.
            let mut clock = 0u64;
            let mut completed_at: std::collections::BTreeMap<u64, u64> = Default::default();
            let mut requested: Vec<(CheckpointMark, u64)> = Vec::new();
            // The latest request time of a checkpoint that succeeded.
            let mut saved_at: Option<u64> = None;
            for (s, checkpoint) in steps {
                clock += 1;
                let before = ack.flush();
                match s {
                    Step::Commit { gap, rows_in_new_batch } => {
                        end += gap;
                        if rows_in_new_batch { batch += 1; }
                        commits.push((end, batch));
                        ack.on_begin();
                        ack.on_commit(Lsn(end), batch);
                    }
                    Step::Durable(b) => {
                        if b <= batch && !completed_at.contains_key(&b) {
                            completed_at.insert(b, clock);
                            ack.on_write_complete();
                            ack.on_batch_durable(b);
                        }
                    }
                    Step::Keepalive { ahead, idle } => {
                        // WAL only grows: later commits end after the keepalive's position.
                        end += ahead;
                        ack.on_keepalive(Lsn(end), idle);
                    }
                }
                match checkpoint {
                    1 => requested.push((ack.checkpoint_mark(), clock)),
                    2 if !requested.is_empty() => {
                        let (mark, at) = requested.remove(0);
                        ack.on_checkpoint_saved(mark);
                        saved_at = saved_at.max(Some(at));
                    }
                    _ => {}
                }
                prop_assert!(ack.flush() >= before);
                prop_assert!(ack.flush() <= ack.complete());
                for (e, b) in &commits {
                    // A commit covered by the flush needs every batch up to its own.
                    if *e > ack.flush().0 || *b == 0 { continue; }
                    for needed in 1..=*b {
                        let held = completed_at.get(&needed).is_some_and(|c| saved_at.is_some_and(|s| *c <= s));
                        prop_assert!(held, "flush {} passes commit {e} whose batch {needed} no checkpoint holds", ack.flush());
                    }
                }
            }
        }
    }
}
