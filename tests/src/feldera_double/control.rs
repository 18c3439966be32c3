//! The `/control` routes: fault injection and inspection over HTTP, for tests that drive
//! the double as a separate process. Every route calls the same `Shared` operation as the
//! matching `FelderaDouble` method.
//!
//! Owns: decoding control requests. Never changes Feldera-facing behaviour by itself.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::checkpoint::FtModel;
use super::error::api_error;
use super::faults::{FailMode, DEFAULT_INGRESS_FAILURE_CODE, DEFAULT_UNAVAILABLE_CODE};
use super::phase::Phase;
use super::shared::Shared;
use super::state::CompletionDelay;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/control/fail_ingress", post(fail_ingress))
        .route("/control/read_slowly", post(read_slowly))
        .route("/control/fail_query", post(fail_query))
        .route("/control/query_format", post(query_format))
        .route("/control/queries", get(queries).delete(clear_queries))
        .route("/control/scan_cost", post(scan_cost))
        .route("/control/unavailable", post(unavailable).delete(available))
        .route("/control/restart", post(restart))
        .route("/control/crash_restart", post(crash_restart))
        .route("/control/crash", post(crash))
        .route("/control/start", post(start))
        .route("/control/stall", post(stall))
        .route("/control/request_timeout", post(request_timeout))
        .route("/control/fault_tolerance", post(fault_tolerance))
        .route("/control/checkpoint_delay", post(checkpoint_delay))
        .route("/control/hold_checkpoints", post(hold_checkpoints))
        .route("/control/fail_checkpoints", post(fail_checkpoints))
        .route("/control/phase", post(phase))
        .route("/control/remove_endpoints", post(remove_endpoints))
        .route("/control/pause", post(pause))
        .route("/control/resume", post(resume))
        .route("/control/proxy_timeout", post(proxy_timeout))
        .route("/control/completion_delay", post(completion_delay))
        .route("/control/release", post(release))
        .route("/control/hold_commits", post(hold_commits))
        .route("/control/tables", get(tables))
        .route("/control/status", get(status))
        .route("/control/log", get(log).delete(clear_log))
}

/// Decodes a control body; an empty body means `{}`.
fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Box<Response>> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|e| {
        Box::new(api_error(
            StatusCode::BAD_REQUEST,
            "BadControlRequest",
            format!("invalid control request: {e}"),
            json!({}),
        ))
    })
}

fn ok(body: Value) -> Response {
    Json(body).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailIngress {
    count: usize,
    /// `"before"` or `"after"` (applying the request).
    mode: String,
    error_code: Option<String>,
}

async fn fail_ingress(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: FailIngress = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let mode = match req.mode.as_str() {
        "before" => FailMode::BeforeApply,
        "after" => FailMode::AfterApply,
        other => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "BadControlRequest",
                format!("mode `{other}`: expected `before` or `after`"),
                json!({}),
            )
        }
    };
    let code = req
        .error_code
        .as_deref()
        .unwrap_or(DEFAULT_INGRESS_FAILURE_CODE);
    shared.fail_next_ingress(req.count, mode, code);
    ok(json!({"queued": req.count, "mode": req.mode, "error_code": code}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadSlowly {
    table: String,
    requests: usize,
    bytes_per_sec: u64,
}

async fn read_slowly(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: ReadSlowly = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    match shared.read_slowly(&req.table, req.requests, req.bytes_per_sec) {
        Ok(()) => ok(json!({
            "table": req.table,
            "requests": req.requests,
            "bytes_per_sec": req.bytes_per_sec,
        })),
        Err(e) => api_error(StatusCode::BAD_REQUEST, "BadControlRequest", e, json!({})),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailQuery {
    count: usize,
}

async fn fail_query(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<FailQuery>(&body) {
        Ok(req) => {
            shared.fail_next_queries(req.count);
            ok(json!({"queued": req.count}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryFormat {
    array: bool,
}

async fn query_format(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<QueryFormat>(&body) {
        Ok(req) => {
            shared.set_query_array(req.array);
            ok(json!({"array": req.array}))
        }
        Err(resp) => *resp,
    }
}

async fn queries(State(shared): State<Arc<Shared>>) -> Response {
    ok(shared.query_stats().to_json())
}

async fn clear_queries(State(shared): State<Arc<Shared>>) -> Response {
    shared.clear_query_stats();
    ok(json!({"cleared": true}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanCost {
    ns_per_row: u64,
}

async fn scan_cost(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<ScanCost>(&body) {
        Ok(req) => {
            shared.set_scan_row_cost(Duration::from_nanos(req.ns_per_row));
            ok(json!({"ns_per_row": req.ns_per_row}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetUnavailable {
    /// Absent or null: until cleared with `DELETE /control/unavailable`.
    duration_ms: Option<u64>,
    error_code: Option<String>,
}

async fn unavailable(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: SetUnavailable = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let code = req
        .error_code
        .as_deref()
        .unwrap_or(DEFAULT_UNAVAILABLE_CODE);
    shared.set_unavailable(req.duration_ms.map(Duration::from_millis), code);
    ok(json!({"unavailable": true, "duration_ms": req.duration_ms, "error_code": code}))
}

async fn available(State(shared): State<Arc<Shared>>) -> Response {
    shared.clear_unavailable();
    ok(json!({"unavailable": false}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Restart {
    #[serde(default)]
    keep_state: bool,
}

async fn restart(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<Restart>(&body) {
        Ok(req) => {
            ok(json!({"incarnation": shared.restart(req.keep_state), "keep_state": req.keep_state}))
        }
        Err(resp) => *resp,
    }
}

async fn crash_restart(State(shared): State<Arc<Shared>>) -> Response {
    ok(json!({"incarnation": shared.crash_restart()}))
}

async fn crash(State(shared): State<Arc<Shared>>) -> Response {
    shared.crash();
    ok(json!({"crashed": true}))
}

async fn start(State(shared): State<Arc<Shared>>) -> Response {
    match shared.start_pipeline() {
        Ok(started) => ok(json!({"started": started, "incarnation": shared.incarnation()})),
        Err(resources) => api_error(
            StatusCode::BAD_REQUEST,
            "IllegalPipelineAction",
            format!(
                "the pipeline is {}: wait until it is stopped",
                resources.name()
            ),
            json!({}),
        ),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stall {
    ms: u64,
}

async fn stall(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<Stall>(&body) {
        Ok(req) => {
            shared.stall_answers(Duration::from_millis(req.ms));
            ok(json!({"stall_ms": req.ms}))
        }
        Err(resp) => *resp,
    }
}

async fn request_timeout(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<ProxyTimeout>(&body) {
        Ok(req) => {
            shared.set_request_timeout(Duration::from_millis(req.ms));
            ok(json!({"request_timeout_ms": req.ms}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultTolerance {
    /// Absent, null or `"none"`: no fault tolerance; `"at_least_once"`, `"exactly_once"`.
    model: Option<String>,
}

async fn fault_tolerance(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: FaultTolerance = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    match FtModel::parse(req.model.as_deref()) {
        Ok(model) => match shared.set_fault_tolerance(model) {
            Ok(()) => ok(json!({"model": model.map_or("none", FtModel::as_str)})),
            Err(e) => api_error(StatusCode::BAD_REQUEST, "EnterpriseFeature", e, json!({})),
        },
        Err(e) => api_error(StatusCode::BAD_REQUEST, "BadControlRequest", e, json!({})),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointDelay {
    ms: u64,
}

async fn checkpoint_delay(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<CheckpointDelay>(&body) {
        Ok(req) => {
            shared.set_checkpoint_delay(Duration::from_millis(req.ms));
            ok(json!({"ms": req.ms}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldCheckpoints {
    hold: bool,
}

async fn hold_checkpoints(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<HoldCheckpoints>(&body) {
        Ok(req) => {
            shared.hold_checkpoints(req.hold);
            ok(json!({"hold": req.hold}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailCheckpoints {
    count: usize,
}

async fn fail_checkpoints(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<FailCheckpoints>(&body) {
        Ok(req) => {
            shared.fail_next_checkpoints(req.count);
            ok(json!({"queued": req.count}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetPhase {
    phase: String,
    /// For `failed`: the controller error's code (default `StepError`).
    error_code: Option<String>,
}

async fn phase(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: SetPhase = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    match Phase::parse(&req.phase, req.error_code.as_deref()) {
        Ok(phase) => {
            let status = phase.runtime_status();
            shared.state().phase = phase;
            ok(json!({"phase": req.phase, "runtime_status": status}))
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, "BadControlRequest", e, json!({})),
    }
}

async fn remove_endpoints(State(shared): State<Arc<Shared>>) -> Response {
    shared.state().remove_endpoints();
    ok(json!({"removed": true}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pause {
    proxy_timeout_ms: Option<u64>,
}

async fn pause(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<Pause>(&body) {
        Ok(req) => {
            shared.pause(req.proxy_timeout_ms.map(Duration::from_millis));
            ok(json!({"paused": true}))
        }
        Err(resp) => *resp,
    }
}

async fn resume(State(shared): State<Arc<Shared>>) -> Response {
    shared.resume();
    ok(json!({"paused": false}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyTimeout {
    ms: u64,
}

async fn proxy_timeout(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    match decode::<ProxyTimeout>(&body) {
        Ok(req) => {
            shared.set_proxy_timeout(Duration::from_millis(req.ms));
            ok(json!({"proxy_timeout_ms": req.ms}))
        }
        Err(resp) => *resp,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetDelay {
    /// Milliseconds, or the string `"never"`.
    delay_ms: Value,
}

async fn completion_delay(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: SetDelay = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let delay = match &req.delay_ms {
        Value::String(s) if s == "never" => CompletionDelay::Never,
        v => match v.as_u64() {
            Some(ms) => CompletionDelay::Fixed(Duration::from_millis(ms)),
            None => {
                return api_error(
                    StatusCode::BAD_REQUEST,
                    "BadControlRequest",
                    format!("delay_ms {v}: expected milliseconds or \"never\""),
                    json!({}),
                )
            }
        },
    };
    shared.set_completion_delay(delay);
    ok(json!({"delay_ms": req.delay_ms}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldCommits {
    hold: bool,
}

async fn hold_commits(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let req: HoldCommits = match decode(&body) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    shared.set_hold_commits(req.hold);
    ok(json!({"hold": req.hold}))
}

async fn release(State(shared): State<Arc<Shared>>) -> Response {
    shared.release_completions();
    ok(json!({"released": true}))
}

async fn tables(State(shared): State<Arc<Shared>>) -> Response {
    ok(json!({"tables": shared.tables_json()}))
}

async fn status(State(shared): State<Arc<Shared>>) -> Response {
    ok(shared.status_json())
}

async fn log(State(shared): State<Arc<Shared>>) -> Response {
    ok(shared.log().to_json())
}

async fn clear_log(State(shared): State<Arc<Shared>>) -> Response {
    shared.log().clear();
    ok(json!({"cleared": true}))
}
