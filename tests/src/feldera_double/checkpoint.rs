//! Fault tolerance and checkpoints as one pipeline process of Feldera keeps them: the
//! fault-tolerance model, the sequence numbers `POST /checkpoint` hands out, the
//! `/checkpoint_status` answer, the checkpoint being written, and the last checkpoint that
//! succeeded (what a restart with at-least-once fault tolerance comes back to).
//!
//! Facts (Feldera's repository):
//! - `crates/adapters/src/server.rs`, `CheckpointState`: sequence numbers start at 0 in
//!   every pipeline process (the state is `Default` in `ServerState::new`, as is the
//!   incarnation UUID); `completed` raises `success` only to a larger number and replaces
//!   `failure` only with a larger number, so a failure never clears `success` and a later
//!   success never clears `failure`.
//! - `crates/adapters/src/controller.rs`, `CircuitThread::checkpoint`: one checkpoint is
//!   written at a time; every request that arrives while it is delayed or written waits in
//!   `checkpoint_requests` and gets **its** result when it ends, so a request made while a
//!   checkpoint is being written succeeds with a checkpoint of the state from before the
//!   request. `Controller::can_suspend`: without storage the checkpoint fails at once
//!   (`PermanentSuspendError::StorageRequired`); while a transaction is started or
//!   committing it is delayed (`TemporarySuspendError::TransactionInProgress`).
//!
//! The double ties storage to fault tolerance: without a fault-tolerance model it has no
//! storage (a real pipeline of Feldera's enterprise edition may have storage and no fault
//! tolerance, and then checkpoints succeed). It takes no periodic checkpoints
//! (`checkpoint_interval_secs`).
//!
//! Feldera's community edition (`feldera-enterprise` cargo feature off) refuses fault
//! tolerance when the pipeline starts (`server.rs`, `start_controller`:
//! `ControllerError::EnterpriseFeature("fault tolerance")`) and every checkpoint
//! (`Controller::can_suspend` adds `PermanentSuspendError::EnterpriseFeature` first), which
//! `[Edition::Community]` reproduces; measured on the real server by `tests/real-feldera`
//! (docs/feldera.md, "Against Feldera's own server").
//!
//! Owns: that bookkeeping and the saved tables. Never sees HTTP; time arrives as `now`.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value as Json};

use super::table::TableState;
use super::temporal::format_system_time;

/// How long a checkpoint takes to write unless configured otherwise.
pub const DEFAULT_CHECKPOINT_DELAY: Duration = Duration::from_millis(200);

/// `ControllerError::SuspendError(SuspendError::Permanent([StorageRequired]))` as Feldera
/// prints it (`crates/feldera-types/src/suspend.rs`, `impl Display for SuspendError`).
pub const NO_STORAGE_ERROR: &str =
    "The pipeline does not support checkpointing for the following reasons: Storage must be configured";

/// The same refusal by Feldera's community edition, whose pipelines have no storage in the
/// double: `EnterpriseFeature` comes first, then `StorageRequired` (as the real server
/// answered, docs/feldera.md).
pub const COMMUNITY_ERROR: &str = "The pipeline does not support checkpointing for the following reasons: Suspend is an enterprise feature, Storage must be configured";

/// The community edition's manager refuses `POST /checkpoint` itself
/// (`CommonError::EnterpriseFeature`, 501).
pub const COMMUNITY_CHECKPOINT_ERROR: &str =
    "Cannot use enterprise-only feature (checkpoint) in Feldera community edition.";

/// Feldera's refusal to start a community-edition pipeline with fault tolerance
/// (`ControllerError::EnterpriseFeature`, `crates/adapters/src/controller/error.rs`).
pub const COMMUNITY_FAULT_TOLERANCE_ERROR: &str =
    "Cannot use enterprise-only feature (fault tolerance) in Feldera community edition.";

/// Which Feldera build the double plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Edition {
    /// Fault tolerance and checkpoints work (given storage).
    #[default]
    Enterprise,
    /// No fault tolerance, and every checkpoint fails.
    Community,
}

impl Edition {
    /// Why a checkpoint fails at once, if it does: `storage` is whether the pipeline has
    /// storage (in the double: a fault-tolerance model).
    pub fn checkpoint_refusal(self, storage: bool) -> Option<&'static str> {
        match self {
            Edition::Community => Some(COMMUNITY_ERROR),
            Edition::Enterprise if storage => None,
            Edition::Enterprise => Some(NO_STORAGE_ERROR),
        }
    }
}

/// The error text of an injected checkpoint failure.
pub const INJECTED_ERROR: &str =
    "storage error: injected checkpoint failure (Feldera double `fail_next_checkpoints`)";

/// `FtConfig::checkpoint_interval_secs` when not given (`default_checkpoint_interval_secs`).
const DEFAULT_CHECKPOINT_INTERVAL_SECS: u64 = 60;

/// Feldera's `FtModel` (`crates/feldera-types/src/config.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FtModel {
    /// No journal: a restart comes back as of the last checkpoint.
    AtLeastOnce,
    /// Every step's input is journaled and replayed after a restart.
    ExactlyOnce,
}

impl FtModel {
    /// `None`/`"none"`: no fault tolerance; otherwise Feldera's snake_case names
    /// (case-insensitive, as `FtModel::from_str` reads them).
    pub fn parse(model: Option<&str>) -> Result<Option<FtModel>, String> {
        match model.map(str::to_ascii_lowercase).as_deref() {
            None | Some("none") => Ok(None),
            Some("at_least_once") => Ok(Some(FtModel::AtLeastOnce)),
            Some("exactly_once") => Ok(Some(FtModel::ExactlyOnce)),
            Some(other) => Err(format!(
                "fault tolerance model `{other}`: expected none, at_least_once or exactly_once"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FtModel::AtLeastOnce => "at_least_once",
            FtModel::ExactlyOnce => "exactly_once",
        }
    }
}

/// `runtime_config.fault_tolerance` as the manager stores and serves it: `FtConfig`
/// serialized, with `model` `"none"` when disabled (`none_as_string`) and the default
/// interval (the manager re-serializes the validated `RuntimeConfig`, so defaults appear).
pub fn ft_config_json(model: Option<FtModel>) -> Json {
    json!({
        "model": model.map_or("none", FtModel::as_str),
        "checkpoint_interval_secs": DEFAULT_CHECKPOINT_INTERVAL_SECS,
    })
}

/// What a checkpoint holds: the processed tables and the counters restored with them.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub tables: Vec<TableState>,
    pub step: u64,
    pub processed_records: u64,
}

/// A checkpoint being written, for every request it answers.
#[derive(Debug)]
struct Run {
    seqs: Vec<u64>,
    snapshot: Snapshot,
    started_at: SystemTime,
    /// `None`: held until released.
    done_at: Option<Instant>,
    fails: bool,
}

/// `CheckpointFailure`.
#[derive(Debug, Clone)]
struct Failure {
    sequence_number: u64,
    error: String,
    failed_at: SystemTime,
}

/// Requests, outcomes and the saved state, as counted for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointCounts {
    /// `POST /checkpoint` requests answered with a sequence number.
    pub requested: u64,
    /// Requests whose checkpoint succeeded.
    pub succeeded: u64,
    /// Requests whose checkpoint failed (no storage, or injected).
    pub failed: u64,
}

/// Checkpoint bookkeeping. The per-process part (`next_seq`, `success`, `failure`, the
/// waiting and running requests) starts afresh with every incarnation; the last successful
/// checkpoint is on storage and outlives it.
#[derive(Debug)]
pub struct Checkpoints {
    next_seq: u64,
    success: Option<u64>,
    failure: Option<Failure>,
    /// Requested, not started: delayed by a transaction.
    waiting: Vec<u64>,
    delayed_since: Option<SystemTime>,
    running: Option<Run>,
    last: Option<Snapshot>,
    pub delay: Duration,
    hold: bool,
    fail_next: usize,
    counts: CheckpointCounts,
}

impl Default for Checkpoints {
    fn default() -> Checkpoints {
        Checkpoints {
            next_seq: 0,
            success: None,
            failure: None,
            waiting: Vec::new(),
            delayed_since: None,
            running: None,
            last: None,
            delay: DEFAULT_CHECKPOINT_DELAY,
            hold: false,
            fail_next: 0,
            counts: CheckpointCounts::default(),
        }
    }
}

impl Checkpoints {
    /// A `POST /checkpoint`: its sequence number. With a `refusal` (no storage, or the
    /// community edition: [`Edition::checkpoint_refusal`]) it has already failed;
    /// otherwise it joins the checkpoint being written, or waits for one to start
    /// (`start`).
    pub fn request(&mut self, refusal: Option<&'static str>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.counts.requested += 1;
        if let Some(reason) = refusal {
            self.completed(&[seq], Err(reason));
        } else if let Some(run) = &mut self.running {
            run.seqs.push(seq);
        } else {
            if self.waiting.is_empty() {
                self.delayed_since = Some(SystemTime::now());
            }
            self.waiting.push(seq);
        }
        seq
    }

    /// Whether requests wait for a checkpoint to start.
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Starts writing a checkpoint of `snapshot` for every waiting request (the caller
    /// knows nothing delays it); `at` is when it starts.
    pub fn start(&mut self, snapshot: Snapshot, at: Instant) {
        if self.running.is_some() || self.waiting.is_empty() {
            return;
        }
        let fails = self.fail_next > 0;
        self.fail_next = self.fail_next.saturating_sub(1);
        self.running = Some(Run {
            seqs: std::mem::take(&mut self.waiting),
            snapshot,
            started_at: SystemTime::now(),
            done_at: (!self.hold).then(|| at + self.delay),
            fails,
        });
        self.delayed_since = None;
    }

    /// Ends the checkpoint being written if it is due by `now`.
    pub fn finish_due(&mut self, now: Instant) {
        let due = self
            .running
            .as_ref()
            .and_then(|r| r.done_at)
            .is_some_and(|t| t <= now);
        if !due {
            return;
        }
        let Some(run) = self.running.take() else {
            return;
        };
        if run.fails {
            self.completed(&run.seqs, Err(INJECTED_ERROR));
        } else {
            self.completed(&run.seqs, Ok(()));
            self.last = Some(run.snapshot);
        }
    }

    /// `CheckpointState::completed` for each request a checkpoint answers.
    fn completed(&mut self, seqs: &[u64], result: Result<(), &str>) {
        for &seq in seqs {
            match result {
                Ok(()) => {
                    self.counts.succeeded += 1;
                    if self.success.is_none_or(|s| s < seq) {
                        self.success = Some(seq);
                    }
                }
                Err(error) => {
                    self.counts.failed += 1;
                    if self
                        .failure
                        .as_ref()
                        .is_none_or(|f| f.sequence_number < seq)
                    {
                        self.failure = Some(Failure {
                            sequence_number: seq,
                            error: error.to_string(),
                            failed_at: SystemTime::now(),
                        });
                    }
                }
            }
        }
    }

    /// Checkpoints started from now on wait for a release (`false` releases the one being
    /// written: it ends at the next look).
    pub fn set_hold(&mut self, hold: bool, now: Instant) {
        self.hold = hold;
        if !hold {
            if let Some(run) = &mut self.running {
                run.done_at.get_or_insert(now);
            }
        }
    }

    /// The next `count` checkpoints that start fail (added to any already planned).
    pub fn fail_next(&mut self, count: usize) {
        self.fail_next = self.fail_next.saturating_add(count);
    }

    pub fn counts(&self) -> CheckpointCounts {
        self.counts
    }

    /// The last checkpoint that succeeded, in any incarnation.
    pub fn last(&self) -> Option<&Snapshot> {
        self.last.as_ref()
    }

    /// A new pipeline process: numbering and status start afresh, a checkpoint being
    /// written or waiting is lost with the old process (its requests never end). The last
    /// successful checkpoint stays only when `keep_storage`.
    pub fn new_incarnation(&mut self, keep_storage: bool) {
        self.next_seq = 0;
        self.success = None;
        self.failure = None;
        self.waiting.clear();
        self.delayed_since = None;
        self.running = None;
        if !keep_storage {
            self.last = None;
        }
    }

    /// The body of `GET /checkpoint_status` (`CheckpointStatus`).
    pub fn status_json(&self) -> Json {
        json!({
            "success": self.success,
            "failure": self.failure.as_ref().map(|f| json!({
                "sequence_number": f.sequence_number,
                "error": f.error,
                "failed_at": format_system_time(f.failed_at),
            })),
        })
    }

    /// `checkpoint_activity` of `/stats` (`CheckpointActivity`, tagged by `status`).
    pub fn activity_json(&self) -> Json {
        if let Some(run) = &self.running {
            return json!({"status": "in_progress",
                          "started_at": format_system_time(run.started_at)});
        }
        match self.delayed_since {
            Some(since) if !self.waiting.is_empty() => json!({
                "status": "delayed",
                "reasons": ["TransactionInProgress"],
                "delayed_since": format_system_time(since),
            }),
            _ => json!({"status": "idle"}),
        }
    }

    /// A summary for `GET /control/status`.
    pub fn control_json(&self) -> Json {
        json!({
            "next_sequence_number": self.next_seq,
            "waiting": self.waiting,
            "running": self.running.as_ref().map(|r| json!({
                "sequence_numbers": r.seqs,
                "held": r.done_at.is_none(),
                "fails": r.fails,
            })),
            "last_checkpoint_step": self.last.as_ref().map(|s| s.step),
            "delay_ms": self.delay.as_millis() as u64,
            "hold": self.hold,
            "queued_failures": self.fail_next,
            "requested": self.counts.requested,
            "succeeded": self.counts.succeeded,
            "failed": self.counts.failed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(step: u64) -> Snapshot {
        Snapshot {
            tables: Vec::new(),
            step,
            processed_records: step,
        }
    }

    #[test]
    fn numbers_start_at_zero_and_a_request_during_a_write_shares_its_result() {
        let mut c = Checkpoints::default();
        let t0 = Instant::now();
        assert_eq!(c.request(None), 0);
        c.start(snapshot(1), t0);
        assert_eq!(c.request(None), 1, "joins the checkpoint being written");
        c.start(snapshot(2), t0);
        c.finish_due(t0 + DEFAULT_CHECKPOINT_DELAY);
        assert_eq!(c.status_json()["success"], 1);
        assert_eq!(
            c.last().map(|s| s.step),
            Some(1),
            "written from the first start"
        );
        assert_eq!(
            c.counts(),
            CheckpointCounts {
                requested: 2,
                succeeded: 2,
                failed: 0
            }
        );
        c.new_incarnation(true);
        assert_eq!(c.request(None), 0, "numbering restarts with the process");
        assert_eq!(c.status_json()["success"], Json::Null);
    }

    #[test]
    fn failures_never_clear_success_and_no_storage_fails_at_once() {
        let mut c = Checkpoints::default();
        let t0 = Instant::now();
        c.request(None);
        c.start(snapshot(1), t0);
        c.finish_due(t0 + DEFAULT_CHECKPOINT_DELAY);
        c.fail_next(1);
        c.request(None);
        c.start(snapshot(2), t0);
        c.finish_due(t0 + DEFAULT_CHECKPOINT_DELAY);
        let status = c.status_json();
        assert_eq!(status["success"], 0);
        assert_eq!(status["failure"]["sequence_number"], 1);
        assert_eq!(c.last().map(|s| s.step), Some(1));
        assert_eq!(c.request(Edition::Enterprise.checkpoint_refusal(false)), 2);
        assert_eq!(c.status_json()["failure"]["error"], NO_STORAGE_ERROR);
        assert_eq!(c.request(Edition::Community.checkpoint_refusal(true)), 3);
        assert_eq!(c.status_json()["failure"]["error"], COMMUNITY_ERROR);
        assert_eq!(Edition::Enterprise.checkpoint_refusal(true), None);
        assert!(!c.waiting());
    }
}
