//! What outlives sessions: positions, retry state, counters and what the run learnt of the
//! Feldera pipeline.

use super::durability::FelderaFacts;
use super::env::Env;
use super::feldera_txn::StreamPos;
use super::replans;
use crate::ack::{AckTracker, BatchSeq};
use crate::backoff::{Backoff, ProgressDeadline};
use crate::crash::CrashInjector;
use crate::progress::ProgressReport;
use crate::snapshot::state::Delivered;
use crate::time::Mono;
use crate::Lsn;

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
    /// The slot monitor logged what failover or a standby source puts at risk.
    pub(crate) availability_said: bool,
    pub(crate) sessions: u32,
    /// The last batch number used by an ended session (the next session's batches follow).
    pub(crate) last_cut: BatchSeq,
    /// Batches that became durable (each calls `progressed` once).
    pub(crate) batches_durable: u64,
    /// A session of this run found the slot usable (or created it): if a later session
    /// finds it invalidated, it was lost while this process ran.
    pub(crate) slot_seen_valid: bool,
    /// Which servers answered at least once in this run: a server never reached is not
    /// retried (policy rule `never-reached`).
    pub(crate) reached: Reached,
    /// A back-off warning of this run named `slotline check` already.
    pub(crate) check_named: bool,
    /// Changes that ended a session so the next one reads the catalog again (`replans`).
    pub(crate) replans: replans::Replans,
    /// The Feldera pipeline's fault tolerance and incarnation, and how this run
    /// acknowledges (`durability`).
    pub(crate) feldera: FelderaFacts,
    /// From a streamed batch's newest source commit to the batch durable
    /// (`slotline_commit_to_durable_seconds`).
    pub(crate) commit_to_durable: crate::health::WaitHistogram,
    /// How far in the stream this run's Feldera transactions reached: the furthest batch
    /// accepted into one, and the furthest one whose commit started. Getting further is
    /// progress; a replay getting as far again is not (`txn_accepted`, `commit_credit`).
    pub(crate) txn_reach: TxnReach,
    /// How far in the WAL what this run sent reaches (`Sent`).
    pub(crate) sent: Sent,
    /// Which of `PG_URL`'s hosts sessions use (`Hosts`).
    pub(crate) hosts: Hosts,
    /// Writes of the state file issued by ended sessions whose answers have not come yet
    /// (writes are answered in order, so the next answers are theirs).
    pub(crate) stale_state_writes: u32,
}

/// Which of `PG_URL`'s hosts a session connects to, as libpq goes through them: the first,
/// then, while a host cannot be reached or is not what `target_session_attrs` asks for, the
/// next (docs/guide/configuration.md, "Several hosts").
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hosts {
    /// The host the current session uses, as an index of `PgConnConfig::hosts`.
    pub(crate) index: usize,
    /// Hosts passed over in a row since a session last read its slot.
    pub(crate) passed: usize,
    /// The current session read the slot on its host: the host served it.
    pub(crate) served: bool,
}

impl Hosts {
    /// A session ended: after one its host served, the next starts again at the first
    /// host; after one it could not use, at the next host.
    pub(crate) fn on_session_end(&mut self, count: usize) {
        if self.served || count <= 1 {
            self.index = 0;
            self.passed = 0;
        } else {
            self.index = (self.index + 1) % count;
            self.passed += 1;
        }
        self.served = false;
    }

    /// Every host was tried since a session last read its slot (the one failing now
    /// included).
    pub(crate) fn tried_all(&self, count: usize) -> bool {
        self.passed + 1 >= count
    }

    /// A whole round of the hosts went by without one serving (`prefer-standby` then takes
    /// a primary).
    pub(crate) fn round_passed(&self, count: usize) -> bool {
        self.passed >= count
    }
}

/// How far in the WAL what Feldera holds may reach, as this run knows it: what the start
/// plan compares with the server's timeline (docs/snapshot.md, "A timeline that forked").
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sent {
    /// The timeline of the server the current session reads (`IDENTIFY_SYSTEM`).
    pub(crate) timeline: Option<u32>,
    /// The state file's bound when this run first read the file (`Some(None)`: it had
    /// none): what earlier processes may have sent. `None` until the file was read.
    pub(crate) inherited: Option<Option<Delivered>>,
    /// The furthest position this run sent rows read up to (or copied at), and the
    /// timeline it was read from.
    pub(crate) furthest: Option<Delivered>,
}

impl Sent {
    /// Rows read up to `at` on the current timeline were sent.
    pub(crate) fn note(&mut self, at: Lsn) {
        let Some(timeline) = self.timeline else {
            return;
        };
        let through = match self.furthest {
            Some(d) if d.timeline == timeline => d.through.max(at),
            _ => at,
        };
        self.furthest = Some(Delivered { timeline, through });
    }

    /// A copy at `point` replaced what Feldera held: nothing earlier counts any more.
    pub(crate) fn copied_at(&mut self, point: Lsn) {
        let Some(timeline) = self.timeline else {
            return;
        };
        let copy = Delivered {
            timeline,
            through: point,
        };
        self.inherited = Some(Some(copy));
        self.furthest = Some(copy);
    }

    /// What the run knows once it read the state file: its own furthest send on the
    /// latest timeline it sent from, never below what earlier processes recorded.
    pub(crate) fn known(&self) -> Option<Delivered> {
        let inherited = self.inherited?;
        match (inherited, self.furthest) {
            (None, furthest) => furthest,
            (Some(earlier), None) => Some(earlier),
            (Some(earlier), Some(own)) => Some(Delivered {
                timeline: own.timeline,
                through: own.through.max(earlier.through),
            }),
        }
    }
}

/// How far this run's Feldera transactions reached in the stream's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxnReach {
    pub(crate) accepted: StreamPos,
    pub(crate) committing: StreamPos,
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

    /// A batch reaching `reach` in the WAL was accepted into a Feldera transaction: nothing
    /// of it is durable before the commit, but Feldera holding more of the source
    /// transaction than ever in this run is progress (the no-progress deadline moves; the
    /// backoff does not start over). A replay is progress only once it gets further.
    pub(crate) fn txn_accepted(&mut self, now: Mono, reach: StreamPos) {
        if reach > self.txn_reach.accepted {
            self.txn_reach.accepted = reach;
            self.progress.on_progress(now);
        }
    }

    /// A Feldera transaction reaching `reach` is being committed, with a wait that times
    /// out at `until`: a commit reaching further than any earlier one of this run is work
    /// under way, and the process does not give up on it before its own wait ends. A commit
    /// of a replay that reaches no further gets no such credit.
    pub(crate) fn commit_credit(&mut self, reach: StreamPos, until: Mono) {
        if reach > self.txn_reach.committing {
            self.txn_reach.committing = reach;
            self.progress.hold_until(until);
        }
    }

    /// A batch written to Feldera (stream, snapshot or retraction) is complete: progress,
    /// and something a checkpoint must hold before the flush may pass it.
    pub(crate) fn write_durable(&mut self, now: Mono) {
        self.ack.on_write_complete();
        self.progressed(now);
    }
}

/// Whether PostgreSQL and Feldera answered at least once in this run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reached {
    /// A PostgreSQL connection received a byte.
    pub(crate) pg: bool,
    /// A Feldera request got an HTTP answer (any status).
    pub(crate) feldera: bool,
}

impl Reached {
    /// Notes what `input` says was reached.
    pub(crate) fn on_input(&mut self, input: &crate::io::Input) {
        use crate::io::Input;
        match input {
            Input::PgBytes { .. } => self.pg = true,
            Input::HttpDone { .. } | Input::HttpChunk { .. } => self.feldera = true,
            _ => {}
        }
    }

    /// `kind` is a server not answering that this run never heard from.
    pub(crate) fn never(&self, kind: super::policy::FailureKind) -> bool {
        use super::policy::FailureKind as K;
        match kind {
            K::PgUnreachable => !self.pg,
            K::FelderaUnavailable => !self.feldera,
            _ => false,
        }
    }
}

/// Why a first contact that failed ends the run: what did not answer, and where to look.
pub(crate) fn never_reached_reason(kind: super::policy::FailureKind, message: &str) -> String {
    let server = match kind {
        super::policy::FailureKind::FelderaUnavailable => "Feldera",
        _ => "PostgreSQL",
    };
    format!(
        "no durable progress possible: this run never reached {server}, so it gives up at once rather than \
         retrying until NO_PROGRESS_TIMEOUT_SECS (a run retries a server only once it has answered); the last \
         failure: {message}. `slotline check` shows every problem of the setup at once"
    )
}

/// Why the run gives up: the deadline, and the last failure that held progress back (the
/// only hint an operator gets when warnings are filtered out).
pub(crate) fn no_progress_reason(env: &Env, run: &Run) -> String {
    let why = if run.slot_seen_valid {
        "giving up so the slot's pinned WAL gets attention"
    } else {
        "giving up (no session reached the slot, so it pins no WAL of this run)"
    };
    let mut reason = format!(
        "no durable progress for {} s (NO_PROGRESS_TIMEOUT_SECS); {why}",
        env.config.no_progress_timeout_secs
    );
    if let Some(last) = &run.last_failure {
        reason.push_str("; the last failure: ");
        reason.push_str(last);
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::Hosts;

    #[test]
    fn sessions_go_through_the_hosts_and_start_again_at_the_first_after_one_served() {
        let mut hosts = Hosts::default();
        assert!(
            !hosts.tried_all(3),
            "the first host failing is not all of them"
        );
        hosts.on_session_end(3);
        assert_eq!((hosts.index, hosts.passed), (1, 1));
        hosts.on_session_end(3);
        assert_eq!((hosts.index, hosts.passed), (2, 2));
        assert!(hosts.tried_all(3), "the third failing is the last untried");
        assert!(!hosts.round_passed(3));
        hosts.on_session_end(3);
        assert_eq!(hosts.index, 0, "round and round");
        assert!(hosts.round_passed(3));
        hosts.served = true;
        hosts.on_session_end(3);
        assert_eq!((hosts.index, hosts.passed, hosts.served), (0, 0, false));
        let mut one = Hosts::default();
        assert!(one.tried_all(1));
        one.on_session_end(1);
        assert_eq!((one.index, one.passed), (0, 0));
    }
}
