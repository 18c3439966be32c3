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

/// The state file's record of the bound, and a write of it under way.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    /// The state file as last written or read (`None`: no state file is kept,
    /// `SNAPSHOT_MODE=never`, and no bound is needed: there is no copy to repair with).
    record: Option<StateFile>,
    /// The timeline this session reads.
    timeline: Option<u32>,
    /// The bound a write under way records.
    writing: Option<Delivered>,
}

impl Bound {
    pub(crate) fn new(record: Option<StateFile>, timeline: Option<u32>) -> Bound {
        Bound {
            record,
            timeline,
            writing: None,
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
        let mut file = record.clone();
        file.delivered = Some(bound);
        file.updated_at = Some(rfc3339_utc(queue.now.wall));
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "rows reaching {at} in the WAL wait until the state file records that Feldera may hold WAL up to {} of timeline {timeline}",
                bound.through
            ),
        );
        queue.push(Command::WriteState {
            path: path.to_owned(),
            contents: Bytes::from(file.encode()),
        });
        self.writing = Some(bound);
    }

    /// A write finished: `true` when it was this one's (the bound is recorded on success).
    pub(crate) fn written(&mut self, result: &Result<(), String>) -> bool {
        let Some(bound) = self.writing.take() else {
            return false;
        };
        if result.is_ok() {
            if let Some(record) = self.record.as_mut() {
                record.delivered = Some(bound);
            }
        }
        true
    }

    /// A write is under way.
    pub(crate) fn writing(&self) -> bool {
        self.writing.is_some()
    }
}
