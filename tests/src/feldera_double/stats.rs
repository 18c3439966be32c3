//! The body of `GET /v0/pipelines/{p}/stats`: Feldera's `ControllerStatus`
//! (`crates/feldera-types/src/adapter_stats.rs`, `ExternalControllerStatus` and
//! `ExternalGlobalControllerMetrics`, filled by `crates/adapters/src/controller/stats.rs`,
//! `ControllerStatus::to_api_type`; the manager forwards the pipeline's answer unchanged).
//!
//! Every field of `global_metrics` is present; what the double does not model (memory,
//! CPU, storage, bytes, output stalls) is 0, `inputs` lists the ingress endpoints with
//! their record counts (`Pipeline::inputs_json`) and `outputs` is empty. The
//! incarnation, state, transaction, record and step counters and the checkpoint fields are
//! the double's own.
//!
//! Owns: that shape. Never changes the pipeline.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value as Json};

use super::state::{Pipeline, TxnState};

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `ControllerStatus` of the pipeline as it is at `now` (advance it first).
pub fn stats_json(p: &Pipeline, now: Instant) -> Json {
    let (transaction_status, transaction_id, msecs, records, by_api) = match p.transaction() {
        TxnState::None => ("NoTransaction", 0, None, None, None),
        TxnState::Started(id, records, since) => (
            "TransactionInProgress",
            id,
            Some(now.saturating_duration_since(since).as_millis() as u64),
            Some(records),
            Some("Started"),
        ),
        TxnState::Committing(id, records) => (
            "CommitInProgress",
            id,
            None,
            Some(records),
            Some("Committed"),
        ),
    };
    let storage = p.fault_tolerance.is_some();
    let suspend_error = if !storage {
        json!({"Permanent": ["StorageRequired"]})
    } else if transaction_id != 0 {
        json!({"Temporary": ["TransactionInProgress"]})
    } else {
        Json::Null
    };
    let uptime = SystemTime::now()
        .duration_since(p.started_at)
        .map_or(0, |d| d.as_millis() as u64);
    let steps = p.step;
    let buffered = p.queued_records();
    json!({
        "global_metrics": {
            "state": if p.paused { "Paused" } else { "Running" },
            "bootstrap_in_progress": false,
            "transaction_status": transaction_status,
            "transaction_id": transaction_id,
            "transaction_msecs": msecs,
            "transaction_records": records,
            "commit_progress": null,
            "transaction_initiators": {
                "transaction_id": (transaction_id != 0).then_some(transaction_id),
                "initiated_by_api": by_api,
                "initiated_by_connectors": {},
            },
            "concurrent_bootstrap_phase": "Inactive",
            "concurrent_bootstrap_progress": null,
            "rss_bytes": 0,
            "memory_pressure": "low",
            "memory_pressure_epoch": 0,
            "cpu_msecs": 0,
            "uptime_msecs": uptime,
            "start_time": epoch_secs(p.started_at),
            "incarnation_uuid": p.incarnation,
            "initial_start_time": epoch_secs(p.initial_start),
            "storage_bytes": 0,
            "storage_mb_secs": 0,
            "runtime_elapsed_msecs": 0,
            "buffered_input_records": buffered,
            "buffered_input_bytes": 0,
            "total_input_records": p.total_input_records,
            "total_input_bytes": 0,
            "total_processed_records": p.total_processed_records,
            "total_processed_bytes": 0,
            "total_completed_records": p.total_processed_records,
            "output_stall_msecs": 0,
            "total_initiated_steps": steps,
            "total_completed_steps": steps,
            "pipeline_complete": false,
        },
        "suspend_error": suspend_error,
        "checkpoint_activity": p.checkpoints.activity_json(),
        "permanent_checkpoint_errors": (!storage).then(|| json!(["StorageRequired"])),
        "inputs": p.inputs_json(),
        "outputs": [],
    })
}
