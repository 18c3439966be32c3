//! What outlives sessions: positions, retry state, counters and what the run learnt of the
//! Feldera pipeline.

use super::durability::FelderaFacts;
use super::env::Env;
use super::replans;
use crate::ack::{AckTracker, BatchSeq};
use crate::backoff::{Backoff, ProgressDeadline};
use crate::crash::CrashInjector;
use crate::progress::ProgressReport;
use crate::time::Mono;

/// What outlives sessions: positions, retry state and counters.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) ack: AckTracker,
    /// The commit times of what is not acknowledged yet (`lag`).
    pub(crate) ages: crate::lag::CommitAges,
    pub(crate) backoff: Backoff,
    pub(crate) progress: ProgressDeadline,
    pub(crate) crash: CrashInjector,
    /// The periodic progress line's counters (`crate::progress`).
    pub(crate) report: ProgressReport,
    /// The message of the last failure, for the reason of a no-progress exit.
    pub(crate) last_failure: Option<String>,
    pub(crate) sessions: u32,
    /// The last batch number used by an ended session (the next session's batches follow).
    pub(crate) last_cut: BatchSeq,
    /// Batches that became durable (each calls `progressed` once).
    pub(crate) batches_durable: u64,
    /// A session of this run found the slot usable (or created it): if a later session
    /// finds it invalidated, it was lost while this process ran.
    pub(crate) slot_seen_valid: bool,
    /// Changes that ended a session so the next one reads the catalog again (`replans`).
    pub(crate) replans: replans::Replans,
    /// The Feldera pipeline's fault tolerance and incarnation, and how this run
    /// acknowledges (`durability`).
    pub(crate) feldera: FelderaFacts,
    /// From a streamed batch's newest source commit to the batch durable
    /// (`slotline_commit_to_durable_seconds`).
    pub(crate) commit_to_durable: crate::health::WaitHistogram,
}

impl Run {
    /// Durable progress (a batch became durable): the no-progress deadline moves and the
    /// backoff starts over.
    pub(crate) fn progressed(&mut self, now: Mono) {
        self.progress.on_progress(now);
        self.backoff.reset();
        self.last_failure = None;
        self.batches_durable += 1;
    }

    /// A batch written to Feldera (stream, snapshot or retraction) is complete: progress,
    /// and something a checkpoint must hold before the flush may pass it.
    pub(crate) fn write_durable(&mut self, now: Mono) {
        self.ack.on_write_complete();
        self.progressed(now);
    }
}

/// Why the run gives up: the deadline, and the last failure that held progress back (the
/// only hint an operator gets when warnings are filtered out).
pub(crate) fn no_progress_reason(env: &Env, run: &Run) -> String {
    let mut reason = format!(
        "no durable progress for {} s (NO_PROGRESS_TIMEOUT_SECS); giving up so the slot's pinned WAL gets attention",
        env.config.no_progress_timeout_secs
    );
    if let Some(last) = &run.last_failure {
        reason.push_str("; the last failure: ");
        reason.push_str(last);
    }
    reason
}
