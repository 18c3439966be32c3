//! How far in the WAL what Feldera holds may reach: the state file's `delivered` bound is
//! written past a batch's rows before the batch is sent, so a later start that finds the
//! server on a timeline that forked behind it knows Feldera may hold changes the server
//! never had (docs/snapshot.md, "A timeline that forked").

use crate::io::{Command, Level, Topic};
use crate::pipeline::queue::Queue;
use crate::snapshot::state::{rfc3339_utc, Delivered, StateFile};
use crate::Lsn;
use bytes::Bytes;

/// WAL past the position read that one write of the bound covers. Fewer writes (one per 4
/// MiB of WAL streamed, not one per batch), at a price only after a restart: a fork less
/// than this far past what an earlier process sent is taken for one behind it (copied
/// again). Within a process the plan compares the exact positions sent.
pub(crate) const BOUND_AHEAD: u64 = 4 << 20;

/// The state file's record of the bound, and a write of it under way. Every write of the
/// file while streaming goes through here (the bound's, and a route's online copy
/// recorded), one at a time, each carrying the other's latest change.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    /// The state file as last written or read (`None`: no state file is kept,
    /// `SNAPSHOT_MODE=never`, and no bound is needed: there is no copy to repair with).
    record: Option<StateFile>,
    /// The timeline this session reads.
    timeline: Option<u32>,
    /// The file a write under way writes.
    writing: Option<StateFile>,
    /// A change of the routes waiting for the write under way to end.
    changed: Option<StateFile>,
}

impl Bound {
    pub(crate) fn new(record: Option<StateFile>, timeline: Option<u32>) -> Bound {
        Bound {
            record,
            timeline,
            writing: None,
            changed: None,
        }
    }

    /// Whether rows reaching `at` are inside the recorded bound (always, without a
    /// state file or a known timeline).
    pub(crate) fn covers(&self, at: Lsn) -> bool {
        let (Some(record), Some(timeline)) = (&self.record, self.timeline) else {
            return true;
        };
        record
            .delivered
            .is_some_and(|d| d.timeline == timeline && d.through >= at)
    }

    /// Writes the bound `BOUND_AHEAD` past `at` (never below the one recorded), unless a
    /// write is under way.
    pub(crate) fn extend(&mut self, queue: &mut Queue, path: &str, at: Lsn) {
        if self.writing.is_some() || self.covers(at) {
            return;
        }
        let (Some(record), Some(timeline)) = (self.record.as_mut(), self.timeline) else {
            return;
        };
        let earlier = record.delivered.map_or(Lsn::ZERO, |d| d.through);
        let bound = Delivered {
            timeline,
            through: Lsn(at.0.saturating_add(BOUND_AHEAD)).max(earlier),
        };
        let mut file = self.changed.take().unwrap_or_else(|| record.clone());
        file.delivered = Some(bound);
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "rows reaching {at} in the WAL wait until the state file records that Feldera may hold WAL up to {} of timeline {timeline}",
                bound.through
            ),
        );
        self.write(queue, path, file);
    }

    /// Records a change of the file's routes (a route's online copy finished): written now,
    /// or once the write under way ended.
    pub(crate) fn change(
        &mut self,
        queue: &mut Queue,
        path: &str,
        change: impl FnOnce(&mut StateFile),
    ) {
        let Some(record) = self.record.as_ref() else {
            return;
        };
        let mut file = self.changed.take().unwrap_or_else(|| record.clone());
        change(&mut file);
        if self.writing.is_some() {
            self.changed = Some(file);
        } else {
            self.write(queue, path, file);
        }
    }

    fn write(&mut self, queue: &mut Queue, path: &str, mut file: StateFile) {
        file.updated_at = Some(rfc3339_utc(queue.now.wall));
        queue.push(Command::WriteState {
            path: path.to_owned(),
            contents: Bytes::from(file.encode()),
        });
        self.writing = Some(file);
    }

    /// A write finished: `true` when it was this one's (the bound is recorded on success).
    pub(crate) fn written(
        &mut self,
        queue: &mut Queue,
        path: &str,
        result: &Result<(), String>,
    ) -> bool {
        let Some(file) = self.writing.take() else {
            return false;
        };
        if result.is_ok() {
            self.record = Some(file);
        }
        if let Some(mut changed) = self.changed.take() {
            // Carries the bound just recorded (never one further than the record's).
            changed.delivered = self.record.as_ref().and_then(|r| r.delivered);
            self.write(queue, path, changed);
        }
        true
    }

    /// A write is under way.
    pub(crate) fn writing(&self) -> bool {
        self.writing.is_some()
    }
}
