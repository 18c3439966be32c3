//! Classification of Feldera's checkpoint answers and of the pipeline's incarnation.
//!
//! Owns the JSON of `POST .../checkpoint`, `GET .../checkpoint_status` and the one field of
//! `GET .../stats` slotline reads (`global_metrics.incarnation_uuid`), and which errors mean
//! "this pipeline cannot checkpoint" or "the pipeline process restarted". Never decides
//! what a checkpoint means for acknowledgements: that is the pipeline's job.
//!
//! What Feldera answers (docs/feldera.md, "Checkpoints and incarnations", names the source
//! files each fact was read from):
//! - `POST /checkpoint` → 200 `{"checkpoint_sequence_number": n, "incarnation_uuid": u}`
//!   (`incarnation_uuid` since v0.337). The checkpoint runs after the answer: a pipeline
//!   that cannot checkpoint (no storage configured, an input connector without fault
//!   tolerance) still answers 200, and the reason shows up as the `failure` of that
//!   sequence number in `checkpoint_status`. Only the community edition's manager refuses
//!   at once: 501 `EnterpriseFeature`.
//! - `GET /checkpoint_status?incarnation_uuid=u` → 200 `{"success": n|null, "failure":
//!   {"sequence_number", "error", "failed_at"}|null}`: the latest successful and the latest
//!   failed sequence numbers (neither is cleared by the other). 400 `IncarnationUuidMismatch`
//!   when the process is another incarnation than `u`: sequence numbers start again at 0
//!   after a restart, so a status without this check could report an earlier number as done.
//! - `GET /stats` → `{"global_metrics": {"incarnation_uuid": u, "start_time": s,
//!   "initial_start_time": i, ...}, ...}` (the UUID since v0.44, `initial_start_time` since
//!   v0.125): `i` is when the first process of the checkpoints this one resumed from
//!   started, `s` when this one did; `i == s` for a process that resumed from nothing.
//!
//! Fault tolerance off does not stop a checkpoint: with storage configured, checkpoints
//! succeed; the model only decides whether a restarted pipeline resumes from them on its own
//! ([`FaultTolerance::survives_restart`]).

use super::response::{
    error_from, failure, is_success, truncate, Failure, FelderaError, Reply, MESSAGE_CHARS,
};
pub use crate::schema::program::FaultTolerance;
use serde_json::{Map, Value};

/// The running pipeline process, as `GET .../stats` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incarnation {
    /// `global_metrics.incarnation_uuid`: another value later means the process restarted
    /// in between.
    pub uuid: String,
    /// `global_metrics.start_time`: when this process started, in seconds since the epoch.
    pub start_time: Option<u64>,
    /// `global_metrics.initial_start_time` (since Feldera v0.125): when the
    /// first process of the line of checkpoints this one resumed from started; equal to
    /// `start_time` for a process that resumed from no checkpoint.
    pub initial_start_time: Option<u64>,
}

impl Incarnation {
    /// An incarnation known only by its UUID.
    pub fn named(uuid: impl Into<String>) -> Incarnation {
        Incarnation {
            uuid: uuid.into(),
            start_time: None,
            initial_start_time: None,
        }
    }

    /// Whether this process resumed from a checkpoint of an earlier one: `Some(false)` when
    /// its line of checkpoints started with itself (it came up with what it was started
    /// with: empty tables, or none of an earlier process's), `None` when Feldera does not
    /// say. Both times are seconds: a process that resumed within the second its line
    /// began reads as not resumed, the side that copies again rather than trusts.
    pub fn resumed(&self) -> Option<bool> {
        Some(self.initial_start_time? < self.start_time?)
    }
}

/// Longest incarnation accepted (Feldera's are 36-character UUIDs).
const INCARNATION_MAX_BYTES: usize = 128;

/// How Feldera displays `SuspendError::Permanent` (docs/feldera.md): the start of
/// a `checkpoint_status` failure when the pipeline cannot checkpoint at all.
const CANNOT_CHECKPOINT: &str = "The pipeline does not support checkpointing";

/// Answer to `GET .../stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatsOutcome {
    /// The running pipeline process.
    Incarnation(Incarnation),
    Transient(FelderaError),
    /// Authentication, an unknown pipeline, or an answer without a usable incarnation.
    Fatal(FelderaError),
}

pub fn classify_stats(reply: Reply<'_>) -> StatsOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => return StatsOutcome::Transient(FelderaError::transport(error)),
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => StatsOutcome::Transient(e),
            Err(e) => StatsOutcome::Fatal(e),
        };
    }
    const EXPECTED: &str =
        "expected {\"global_metrics\": {\"incarnation_uuid\": \"<uuid>\", ...}, ...}";
    let Some(root) = json_object(body) else {
        return StatsOutcome::Fatal(FelderaError::unexpected(
            status,
            &format!("the statistics answer is not a JSON object ({EXPECTED})"),
            body,
        ));
    };
    let value = root
        .get("global_metrics")
        .and_then(|metrics| metrics.get("incarnation_uuid"));
    match value {
        Some(Value::String(uuid)) if usable_incarnation(uuid) => {
            let metrics = root.get("global_metrics");
            let seconds = |name: &str| metrics.and_then(|m| m.get(name)).and_then(Value::as_u64);
            StatsOutcome::Incarnation(Incarnation {
                uuid: uuid.clone(),
                start_time: seconds("start_time"),
                initial_start_time: seconds("initial_start_time"),
            })
        }
        None | Some(Value::Null) => StatsOutcome::Fatal(FelderaError::unexpected(
            status,
            "the statistics answer has no global_metrics.incarnation_uuid, which Feldera \
             reports since v0.44 (Feldera too old?): slotline needs it to notice a restarted \
             pipeline; upgrade Feldera",
            body,
        )),
        Some(other) => StatsOutcome::Fatal(FelderaError::unexpected(
            status,
            &format!(
                "global_metrics.incarnation_uuid is {}, not a UUID string",
                shown(other)
            ),
            body,
        )),
    }
}

/// `global_metrics.state` of a `GET .../stats` answer (`Running`, `Paused`, ...), or `None`
/// when there is no such answer.
pub fn pipeline_state(reply: Reply<'_>) -> Option<String> {
    let Reply::Answered { status, body } = reply else {
        return None;
    };
    if !is_success(status) {
        return None;
    }
    json_object(body)?
        .get("global_metrics")?
        .get("state")?
        .as_str()
        .map(str::to_owned)
}

/// Answer to `POST .../checkpoint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointOutcome {
    /// The checkpoint is under way: poll `checkpoint_status` until `seq` succeeded or
    /// failed. `incarnation` is `None` from pipelines before v0.337 (check `/stats`
    /// instead).
    Requested {
        seq: u64,
        incarnation: Option<String>,
    },
    /// This Feldera cannot checkpoint at all: 501 `EnterpriseFeature` (the community
    /// edition's manager), or a `SuspendError` listing permanent reasons (storage not
    /// configured, an input connector without fault tolerance).
    Unsupported(FelderaError),
    /// No answer, a retryable status, 410 `Terminating`, or a `SuspendError` listing
    /// temporary reasons (replaying, bootstrapping, a transaction in progress).
    Transient(FelderaError),
    Fatal(FelderaError),
}

pub fn classify_checkpoint(reply: Reply<'_>) -> CheckpointOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return CheckpointOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        let error = error_from(status, body);
        match error.error_code.as_deref() {
            Some("EnterpriseFeature") => return CheckpointOutcome::Unsupported(error),
            Some("SuspendError") => {
                let details = json_object(body).and_then(|root| root.get("details").cloned());
                let reasons = |kind: &str| details.as_ref().and_then(|d| d.get(kind)).is_some();
                if reasons("Permanent") || error.message.starts_with(CANNOT_CHECKPOINT) {
                    return CheckpointOutcome::Unsupported(error);
                }
                if reasons("Temporary") {
                    return CheckpointOutcome::Transient(error);
                }
            }
            _ => {}
        }
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => CheckpointOutcome::Transient(e),
            Err(e) => CheckpointOutcome::Fatal(e),
        };
    }
    const EXPECTED: &str =
        "expected {\"checkpoint_sequence_number\": <n>, \"incarnation_uuid\": \"<uuid>\"}";
    let Some(root) = json_object(body) else {
        return CheckpointOutcome::Fatal(FelderaError::unexpected(
            status,
            &format!("the checkpoint answer is not a JSON object ({EXPECTED})"),
            body,
        ));
    };
    let Some(seq) = root
        .get("checkpoint_sequence_number")
        .and_then(Value::as_u64)
    else {
        return CheckpointOutcome::Fatal(FelderaError::unexpected(
            status,
            &format!("the checkpoint answer has no usable checkpoint_sequence_number ({EXPECTED})"),
            body,
        ));
    };
    let incarnation = match root.get("incarnation_uuid") {
        None | Some(Value::Null) => None,
        Some(Value::String(uuid)) if usable_incarnation(uuid) => Some(uuid.clone()),
        Some(other) => {
            return CheckpointOutcome::Fatal(FelderaError::unexpected(
                status,
                &format!(
                "the checkpoint answer's incarnation_uuid is {}, not a UUID string ({EXPECTED})",
                shown(other)
            ),
                body,
            ))
        }
    };
    CheckpointOutcome::Requested { seq, incarnation }
}

/// The latest failed checkpoint of a `checkpoint_status` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointFailed {
    pub seq: u64,
    /// Feldera's error, at most 1000 characters.
    pub error: String,
}

impl CheckpointFailed {
    /// Whether the failure says the pipeline cannot checkpoint at all (no storage
    /// configured, an input connector without fault tolerance): no later checkpoint will
    /// succeed until the pipeline's configuration changes.
    pub fn unsupported(&self) -> bool {
        self.error.starts_with(CANNOT_CHECKPOINT)
    }
}

/// Answer to `GET .../checkpoint_status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointStatusOutcome {
    /// The latest successful and the latest failed sequence numbers of this incarnation
    /// (Feldera completes requests in order and only ever raises either). Checkpoint `seq`
    /// is written when `success >= seq`; otherwise it failed when `failure.seq >= seq` (a
    /// later failure replaces an earlier one); otherwise it is still delayed or being
    /// written.
    Status {
        success: Option<u64>,
        failure: Option<CheckpointFailed>,
    },
    /// 400 `IncarnationUuidMismatch` (or 410 `PipelineRestarted`): the pipeline process
    /// restarted since the checkpoint was requested. Its outcome is unknown and what was not
    /// in an earlier checkpoint may be lost.
    Restarted(FelderaError),
    Transient(FelderaError),
    Fatal(FelderaError),
}

pub fn classify_checkpoint_status(reply: Reply<'_>) -> CheckpointStatusOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return CheckpointStatusOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        let error = error_from(status, body);
        let code = error.error_code.as_deref();
        if matches!(
            (status, code),
            (400, Some("IncarnationUuidMismatch")) | (410, Some("PipelineRestarted"))
        ) {
            return CheckpointStatusOutcome::Restarted(error);
        }
        return match failure(status, body) {
            Failure::Transient(e) | Failure::TokenGone(e) => CheckpointStatusOutcome::Transient(e),
            Failure::Fatal(e) => CheckpointStatusOutcome::Fatal(e),
        };
    }
    match read_status(body) {
        Ok((success, failure)) => CheckpointStatusOutcome::Status { success, failure },
        Err(what) => CheckpointStatusOutcome::Fatal(FelderaError::unexpected(
            status,
            &format!(
                "{what} (expected {{\"success\": <n>|null, \"failure\": {{\"sequence_number\": \
                 <n>, \"error\": \"...\"}}|null}})"
            ),
            body,
        )),
    }
}

fn read_status(body: &[u8]) -> Result<(Option<u64>, Option<CheckpointFailed>), String> {
    let root = json_object(body).ok_or("the checkpoint status is not a JSON object")?;
    let success = match root.get("success") {
        None => return Err("the checkpoint status has no `success`".to_owned()),
        Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| {
            format!(
                "the checkpoint status's success is {}, not a sequence number",
                shown(value)
            )
        })?),
    };
    let failure = match root.get("failure") {
        None => return Err("the checkpoint status has no `failure`".to_owned()),
        Some(Value::Null) => None,
        Some(Value::Object(failed)) => {
            let seq = failed.get("sequence_number").and_then(Value::as_u64);
            let error = failed.get("error").and_then(Value::as_str);
            match (seq, error) {
                (Some(seq), Some(error)) => Some(CheckpointFailed {
                    seq,
                    error: truncate(error, MESSAGE_CHARS),
                }),
                _ => {
                    return Err(
                        "the checkpoint status's failure lacks a sequence_number or an error"
                            .to_owned(),
                    )
                }
            }
        }
        Some(other) => {
            return Err(format!(
                "the checkpoint status's failure is {}, not an object",
                shown(other)
            ))
        }
    };
    Ok((success, failure))
}

fn json_object(body: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// A UUID as Feldera writes it, or anything else safe to send back: printable ASCII, no
/// spaces, bounded (it is percent-encoded into a URL either way).
fn usable_incarnation(uuid: &str) -> bool {
    !uuid.is_empty()
        && uuid.len() <= INCARNATION_MAX_BYTES
        && uuid.bytes().all(|b| b.is_ascii_graphic())
}

/// A JSON value in a message, bounded.
fn shown(value: &Value) -> String {
    truncate(&value.to_string(), 80)
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
