//! The core's timers: one slot per reason, and `poll_timeout` as the earliest armed slot.
//!
//! Every deadline carries why it exists, so traces say `next +3.333s StatusInterval` rather
//! than a bare instant. Timers are absolute monotonic instants: re-arming with the same
//! instant is a no-op, so recomputing a deadline on every input never postpones it.

use crate::time::Mono;
use std::fmt;

/// Why the core wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    /// Time to send a standby status update.
    StatusInterval,
    /// The oldest buffered event has waited `BATCH_LINGER_MS`.
    Linger,
    /// Ask Feldera again whether a batch is complete.
    CompletionPoll,
    /// A completion wait exceeded `FELDERA_COMPLETION_TIMEOUT_MS`.
    CompletionTimeout,
    /// A completion wait passed 5 s: log it once.
    SlowCompletionLog,
    /// Backoff elapsed: start the next session.
    Reconnect,
    /// `NO_PROGRESS_TIMEOUT_SECS` without durable progress.
    NoProgress,
    /// Graceful stop: poll the slot's confirmed position again, or give up waiting.
    ShutdownConfirm,
    /// The initial snapshot's progress line is due.
    SnapshotProgress,
    /// The streaming progress line is due (`PROGRESS_INTERVAL_SECS`).
    Progress,
    /// Time to sample the slot's health (the monitor).
    SlotMonitor,
    /// An operator's command (`check`, `status`, `drop-slot`) gives up waiting.
    OperationDeadline,
    /// Time to ask Feldera for its incarnation (the keeper).
    FelderaWatch,
    /// Time to request a Feldera checkpoint, or to ask about the one requested.
    Checkpoint,
    /// Time to ask whether Feldera runs again, or to let a quarantined table go (a request
    /// to it ended without the pipeline's answer: `pipeline::feldera_link::quarantine`).
    Quarantine,
    /// An online copy's chunk that had to be read again may be read now.
    CopyRetry,
}

impl TimerKind {
    pub const ALL: [TimerKind; 16] = [
        TimerKind::StatusInterval,
        TimerKind::Linger,
        TimerKind::CompletionPoll,
        TimerKind::CompletionTimeout,
        TimerKind::SlowCompletionLog,
        TimerKind::Reconnect,
        TimerKind::NoProgress,
        TimerKind::ShutdownConfirm,
        TimerKind::SnapshotProgress,
        TimerKind::Progress,
        TimerKind::SlotMonitor,
        TimerKind::OperationDeadline,
        TimerKind::FelderaWatch,
        TimerKind::Checkpoint,
        TimerKind::Quarantine,
        TimerKind::CopyRetry,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TimerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A wake-up request: when, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline {
    pub at: Mono,
    pub why: TimerKind,
}

/// One optional deadline per `TimerKind`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimerTable {
    slots: [Option<Mono>; TimerKind::ALL.len()],
}

impl TimerTable {
    pub fn set(&mut self, kind: TimerKind, at: Mono) {
        self.slots[kind.index()] = Some(at);
    }

    pub fn clear(&mut self, kind: TimerKind) {
        self.slots[kind.index()] = None;
    }

    pub fn get(&self, kind: TimerKind) -> Option<Mono> {
        self.slots[kind.index()]
    }

    /// The earliest armed deadline (ties go to the kind listed first).
    pub fn next(&self) -> Option<Deadline> {
        TimerKind::ALL
            .iter()
            .filter_map(|kind| self.get(*kind).map(|at| Deadline { at, why: *kind }))
            .min_by_key(|d| d.at)
    }

    /// Disarms and returns every timer that is due at `now`, earliest first.
    pub fn expire(&mut self, now: Mono) -> Vec<TimerKind> {
        let mut due: Vec<(Mono, TimerKind)> = TimerKind::ALL
            .iter()
            .filter_map(|kind| {
                self.get(*kind)
                    .filter(|at| *at <= now)
                    .map(|at| (at, *kind))
            })
            .collect();
        due.sort();
        for (_, kind) in &due {
            self.clear(*kind);
        }
        due.into_iter().map(|(_, kind)| kind).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_the_earliest_with_its_reason() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(TimerKind::StatusInterval, Mono(3_000));
        t.set(TimerKind::Linger, Mono(1_000));
        t.set(TimerKind::NoProgress, Mono(9_000));
        assert_eq!(
            t.next(),
            Some(Deadline {
                at: Mono(1_000),
                why: TimerKind::Linger
            })
        );
        t.clear(TimerKind::Linger);
        assert_eq!(t.next().map(|d| d.why), Some(TimerKind::StatusInterval));
    }

    #[test]
    fn expire_returns_due_timers_in_time_order_and_disarms_them() {
        let mut t = TimerTable::default();
        t.set(TimerKind::NoProgress, Mono(5));
        t.set(TimerKind::Linger, Mono(7));
        t.set(TimerKind::StatusInterval, Mono(20));
        assert_eq!(
            t.expire(Mono(10)),
            [TimerKind::NoProgress, TimerKind::Linger]
        );
        assert_eq!(t.expire(Mono(10)), []);
        assert_eq!(t.next().map(|d| d.why), Some(TimerKind::StatusInterval));
    }
}
