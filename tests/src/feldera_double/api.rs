//! The `/v0` HTTP routes: the list of pipelines, pipeline status with schema, ingress, completion status, ad-hoc
//! query, transactions, stats and checkpoints, each answering in Feldera's shapes and error
//! codes, plus the gate that answers 503 on every `/v0` call while the pipeline is made
//! unavailable.
//!
//! Owns: request decoding and response encoding. Semantics live in `state`, `ingress`,
//! `query`; this file only routes and translates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, Query, RawQuery, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use http_body_util::BodyExt;
use serde_json::json;

use super::answer::{self, Framing};
use super::checkpoint::{ft_config_json, Edition, COMMUNITY_CHECKPOINT_ERROR};
use super::error::{api_error, invalid_param, note, unknown_pipeline};
use super::faults::FailMode;
use super::ingress::{errors_details, BodyMode, BodyReader, Completed, ParseError};
use super::ingress_format;
use super::log::{LogDeferred, LogTicket};
use super::manager::{self, Resources, Route};
use super::query;
use super::shared::Shared;
use super::state::{Completion, Restarted, TokenError, Upload};
use super::stats::stats_json;
use super::token::CompletionToken;

type Params = Query<BTreeMap<String, String>>;

/// After answering, at most this much of an unread ingress body is read and dropped.
const MAX_DRAINED_BYTES: usize = 256 * 1024 * 1024;
/// A slowly read body is read in pieces of about this share of a second, so its records
/// trickle in even when the client's bytes arrived in one large chunk.
const SLOW_PIECES_PER_SEC: u64 = 20;
/// The largest piece a slow read takes at once.
const MAX_SLOW_PIECE_BYTES: usize = 64 * 1024;
/// How often a reader waiting for room in a full queue looks again.
const ROOM_POLL: Duration = Duration::from_millis(5);

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v0/pipelines", get(list_pipelines))
        .route("/v0/pipelines/{pipeline}", get(get_pipeline))
        .route("/v0/pipelines/{pipeline}/start", post(start_pipeline))
        .route("/v0/pipelines/{pipeline}/ingress/{table}", post(ingress))
        .route(
            "/v0/pipelines/{pipeline}/completion_status",
            get(completion_status),
        )
        .route("/v0/pipelines/{pipeline}/query", get(adhoc_query))
        .route(
            "/v0/pipelines/{pipeline}/start_transaction",
            post(start_transaction),
        )
        .route(
            "/v0/pipelines/{pipeline}/commit_transaction",
            post(commit_transaction),
        )
        .route("/v0/pipelines/{pipeline}/stats", get(stats))
        .route("/v0/pipelines/{pipeline}/checkpoint", post(checkpoint))
        .route(
            "/v0/pipelines/{pipeline}/checkpoint_status",
            get(checkpoint_status),
        )
}

/// Middleware: while an unavailability window is open every `/v0` call gets 503. Then the
/// manager's part (`manager`): a pipeline endpoint of a deployment that is not provisioned
/// answers 503 `PipelineInteractionNotDeployed`; a request forwarded whole has the
/// manager's timeout and its one retry. Behind that, the pipeline's: while it is not
/// running (`phase`), every pipeline endpoint gets that phase's answer.
pub async fn unavailable_gate(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    let code = shared.state().faults.unavailable_code(Instant::now());
    if let Some(code) = code {
        return api_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &code,
            "pipeline unavailable (injected by the Feldera double)",
            json!({}),
        );
    }
    // The pipeline GET and the list are the manager's database, and so is an unknown name
    // (the handlers' 404); every endpoint below a known pipeline is forwarded.
    let segments: Vec<&str> = req
        .uri()
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    if segments.len() <= 3 || segments[2] != shared.pipeline_name {
        return next.run(req).await;
    }
    let endpoint = segments[3..].join("/");
    let request_timeout = shared.manager().request_timeout;
    match manager::route(req.method(), &endpoint, request_timeout) {
        Route::Manager => next.run(req).await,
        Route::Streamed => {
            let checked = shared.manager().check(Instant::now());
            match checked {
                Ok(_) => pipeline_answer(&shared, req, next).await,
                Err(resources) => not_deployed(&shared.pipeline_name, resources),
            }
        }
        Route::Whole(timeout) => forward_whole(shared, req, next, timeout).await,
    }
}

/// `forward_http_request_to_pipeline_by_name`: the pipeline gets no body, and `timeout` to
/// answer. A failure (here: no answer in time) with a cached status drops the entry and
/// sends the request again, checked afresh, so at most once more; the first attempt is not
/// called back: the pipeline carries it out when it gets to it, before the second, and its
/// answer goes nowhere.
async fn forward_whole(
    shared: Arc<Shared>,
    req: Request,
    next: Next,
    timeout: Duration,
) -> Response {
    let (parts, _) = req.into_parts();
    let mut earlier: Option<tokio::task::JoinHandle<Response>> = None;
    loop {
        let cache_hit = match shared.manager().check(Instant::now()) {
            Ok(hit) => hit,
            Err(resources) => return not_deployed(&shared.pipeline_name, resources),
        };
        let req = Request::from_parts(parts.clone(), Body::empty());
        let (pipeline, next, before) = (shared.clone(), next.clone(), earlier.take());
        let mut attempt = tokio::spawn(async move {
            pipeline.wait_unstalled().await;
            if let Some(before) = before {
                let _ = before.await;
            }
            pipeline_answer(&pipeline, req, next).await
        });
        match tokio::time::timeout(timeout, &mut attempt).await {
            Ok(Ok(answer)) => return answer,
            Ok(Err(e)) => {
                return api_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "PipelineInteractionInvalidResponse",
                    format!("the double's handler failed: {e}"),
                    json!({}),
                )
            }
            Err(_) if cache_hit => {
                shared.manager().evict();
                earlier = Some(attempt);
            }
            Err(_) => {
                return api_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "PipelineInteractionUnreachable",
                    format!(
                        "Error sending HTTP request to pipeline '{}': timeout ({}s) was reached: \
                         this means the pipeline took too long to respond",
                        shared.pipeline_name,
                        timeout.as_secs()
                    ),
                    json!({}),
                )
            }
        }
    }
}

/// The pipeline's own answer: its phase's error while not running (`checkpoint_status`
/// answers in every phase: Feldera's handler never asks for the controller, `server.rs`,
/// `checkpoint_status`, whose absence makes the others' phase errors), else the handler's.
async fn pipeline_answer(shared: &Shared, req: Request, next: Next) -> Response {
    let phase = shared.state().phase.answer();
    let exempt = req.uri().path().ends_with("/checkpoint_status");
    match phase {
        Some((status, code, message)) if !exempt => {
            // Read what the client sends first (see `ingress`): an answer before the end of
            // its body can be destroyed by the reset of a socket closed with unread data.
            drain(&mut req.into_body()).await;
            api_error(status, &code, message, json!(null))
        }
        _ => next.run(req).await,
    }
}

/// `RunnerError::PipelineInteractionNotDeployed` (`runner/error.rs`).
fn not_deployed(pipeline: &str, resources: Resources) -> Response {
    api_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "PipelineInteractionNotDeployed",
        format!(
            "Unable to interact with pipeline because the deployment status ({}) indicates it \
             is not (yet) fully provisioned (pipeline: '{pipeline}')",
            resources.name()
        ),
        json!({}),
    )
}

/// `POST /v0/pipelines/{p}/start` (`pipeline_management.rs`, `post_pipeline_start`): 202
/// once it starts; 400 `IllegalPipelineAction` while it is stopping.
async fn start_pipeline(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    match shared.start_pipeline() {
        Ok(_) => (StatusCode::ACCEPTED, Json(json!("Pipeline is starting"))).into_response(),
        Err(_) => api_error(
            StatusCode::BAD_REQUEST,
            "IllegalPipelineAction",
            "Cannot restart the pipeline while it is stopping. Wait until it is stopped before \
             starting the pipeline again.",
            json!({}),
        ),
    }
}

/// `deployment_status`, `deployment_desired_status`, `deployment_resources_status`,
/// `deployment_runtime_status` and `deployment_error` as the manager combines them
/// (`db/types/combined_status.rs`, `CombinedStatus::new`).
fn deployment(shared: &Shared) -> serde_json::Map<String, serde_json::Value> {
    let (resources, error) = {
        let m = shared.manager();
        (m.resources(Instant::now()), m.deployment_error())
    };
    let runtime = {
        let st = shared.state();
        match st.phase.runtime_status() {
            "Running" if st.paused => "Paused",
            status => status,
        }
    };
    let fields = match resources {
        Resources::Provisioned => json!({
            "deployment_status": runtime,
            "deployment_desired_status": runtime,
            "deployment_resources_status": "Provisioned",
            "deployment_runtime_status": runtime,
            "deployment_error": error,
        }),
        other => json!({
            "deployment_status": other.name(),
            "deployment_desired_status": "Stopped",
            "deployment_resources_status": other.name(),
            "deployment_runtime_status": null,
            "deployment_error": error,
        }),
    };
    match fields {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

async fn get_pipeline(State(shared): State<Arc<Shared>>, Path(pipeline): Path<String>) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let deployment = deployment(&shared);
    let st = shared.state();
    let mut body = json!({
        "id": shared.pipeline_id(),
        "name": shared.pipeline_name,
        "description": "",
        "version": 1,
        "program_version": 1,
        "program_code": "",
        "program_config": {},
        "runtime_config": {"fault_tolerance": ft_config_json(st.fault_tolerance)},
        "program_status": "Success",
        "program_error": {},
        "program_info": {
            "schema": st.schema.raw,
            "main_rust": "",
            "udf_stubs": "",
            "input_connectors": {},
            "output_connectors": {},
            "dataflow": null,
        },
        "incarnation_uuid": st.incarnation,
    });
    if let Some(map) = body.as_object_mut() {
        map.extend(deployment);
    }
    Json(body).into_response()
}

/// `GET /v0/pipelines`: the one pipeline the double serves, with the fields Feldera's
/// `selector=status` keeps (no program, no runtime configuration). `all`, Feldera's default,
/// would add those; the double answers it the same (slotline asks for `status` only).
async fn list_pipelines(State(shared): State<Arc<Shared>>, Query(params): Params) -> Response {
    match params.get("selector").map(String::as_str) {
        None | Some("all" | "status") => {}
        Some(other) => {
            return invalid_param(format!(
                "unknown variant `{other}`, expected `all` or `status`"
            ))
        }
    }
    let mut entry = json!({
        "id": shared.pipeline_id(),
        "name": shared.pipeline_name,
        "description": "",
        "version": 1,
        "program_version": 1,
        "program_status": "Success",
    });
    if let Some(map) = entry.as_object_mut() {
        let mut deployment = deployment(&shared);
        deployment.remove("deployment_resources_status");
        deployment.remove("deployment_runtime_status");
        map.extend(deployment);
    }
    Json(json!([entry])).into_response()
}

/// Reads the body as it arrives (see `read_body`); the answer waits for its end.
async fn ingress(
    State(shared): State<Arc<Shared>>,
    Path((pipeline, table)): Path<(String, String)>,
    RawQuery(raw_query): RawQuery,
    Query(params): Params,
    mut body: Body,
) -> Response {
    let mut resp = ingress_inner(&shared, &pipeline, &table, raw_query, &params, &mut body).await;
    // An answer sent while the client is still writing makes the server close a socket
    // with unread data, and the reset that follows can destroy the answer before the
    // client reads it: read the rest first.
    drain(&mut body).await;
    note(&mut resp, |n| n.table = Some(table));
    resp
}

async fn ingress_inner(
    shared: &Arc<Shared>,
    pipeline: &str,
    table: &str,
    raw_query: Option<String>,
    params: &BTreeMap<String, String>,
    body: &mut Body,
) -> Response {
    // The manager's timeout runs from the request's arrival, whatever keeps the pipeline
    // from answering: a pause, a full queue, a slow read.
    let arrived = Instant::now();
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(pipeline);
    }
    // Feldera reads the parser configuration before it looks for the table.
    let format = match ingress_format::read(table, params, raw_query.as_deref().unwrap_or("")) {
        Ok(format) => format,
        Err(resp) => return *resp,
    };
    let Some(index) = shared.schema.input_by_path(table) else {
        return api_error(
            StatusCode::NOT_FOUND,
            "ConfigError.UnknownInputStream",
            format!("Input endpoint '{table}.api-ingress-json' specifies unknown table '{table}'"),
            json!({"endpoint_name": format!("{table}.api-ingress-json"), "stream_name": table}),
        );
    };
    let mode = match shared.discard {
        true => BodyMode::Discard,
        false => format.mode,
    };
    let Some(endpoint) = shared.state().endpoint_for(&format.endpoint) else {
        return api_error(
            StatusCode::TOO_MANY_REQUESTS,
            "ApiConnectionLimit",
            "too many distinct HTTP input endpoints",
            json!({}),
        );
    };
    // Only the start waits for a pause: records arriving after a pause began mid-body are
    // queued, and wait with everything else until the resume.
    let arrived_in = shared.state().incarnation.clone();
    if !shared.wait_unpaused().await {
        // The manager gives up and answers 503, but the pipeline keeps the request: its
        // handler reads what the client sent once the pipeline resumes and applies it then,
        // however late (`transport/http/input.rs`, `complete_request`; measured on the real
        // server, docs/feldera.md). Unless the process restarts meanwhile: its connections
        // die with it.
        let sent = collect(body).await;
        let incarnation = arrived_in;
        let late = shared.clone();
        tokio::spawn(async move {
            late.wait_unpaused_for_ever().await;
            if late.state().incarnation != incarnation {
                return;
            }
            let upload = late.state().begin_upload(index, endpoint);
            let _ = read_body(&late, &upload, mode, None, &mut Body::from(sent)).await;
        });
        return api_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "PipelineInteractionUnreachable",
            "timed out waiting for the paused pipeline to answer",
            json!({}),
        );
    }
    // A request that waited for a pause through a restart went to the process that died.
    if shared.state().incarnation != arrived_in {
        return restarted_mid_body();
    }
    let (failure, upload, slow) = {
        let mut st = shared.state();
        let failure = st.faults.take_ingress_failure();
        // A request refused before reading does not use up a planned slow read.
        let refused = failure.as_ref().map(|f| f.mode) == Some(FailMode::BeforeApply);
        let slow = (!refused)
            .then(|| st.faults.take_slow_read(index))
            .flatten();
        (failure, st.begin_upload(index, endpoint), slow)
    };
    if let Some(f) = failure.as_ref().filter(|f| f.mode == FailMode::BeforeApply) {
        return injected_503(&f.error_code, false);
    }
    // The pipeline reads the body in its own task, which goes on when the manager gives
    // up (below): Feldera keeps reading a request whose client got a 503, and applies what
    // it reads, however late (docs/feldera.md, "Answers while the pipeline is not running").
    let mut reading = {
        let shared = shared.clone();
        let upload = upload.clone();
        let mut owned = std::mem::replace(body, Body::empty());
        tokio::spawn(async move {
            let read = read_body(&shared, &upload, mode, slow, &mut owned).await;
            (read, owned)
        })
    };
    let timeout = shared
        .state()
        .proxy_timeout
        .saturating_sub(arrived.elapsed());
    let read = match tokio::time::timeout(timeout, &mut reading).await {
        Ok(Ok((read, rest))) => {
            // What an early answer left unread is drained by the caller.
            *body = rest;
            read
        }
        Ok(Err(panicked)) => {
            return api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal",
                format!("the double's reader failed: {panicked}"),
                json!({}),
            )
        }
        Err(_) => {
            // A full queue (backpressure) or a slow read outlasted the manager's timeout:
            // the same 503 the manager answers for a pause; the body is still being read.
            return api_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "PipelineInteractionUnreachable",
                "timed out waiting for the pipeline to read the request",
                json!({}),
            );
        }
    };
    let (events, errors) = match read {
        Ok(read) => read,
        Err(resp) => return *resp,
    };
    let mut resp = answer(shared, &upload, &errors);
    if let Some(f) = failure {
        resp = injected_503(&f.error_code, true);
    }
    note(&mut resp, |n| n.rows = Some(events));
    resp
}

/// Reads the body piece by piece and queues the records of every line a piece completes
/// before reading on, as Feldera's endpoints do: a request still uploading has its first
/// records queued (and, after the completion delay, processed), and what was queued stays
/// queued if the client goes away before the end. `slow`: read at about that many bytes
/// per second. Returns the events seen and the parse errors.
async fn read_body(
    shared: &Shared,
    upload: &Upload,
    mode: BodyMode,
    slow: Option<u64>,
    body: &mut Body,
) -> Result<(u64, Vec<ParseError>), Box<Response>> {
    let mut reader = BodyReader::new(&shared.schema.inputs[upload.table], mode);
    let piece_len = slow.map_or(usize::MAX, |rate| {
        usize::try_from(rate / SLOW_PIECES_PER_SEC)
            .unwrap_or(MAX_SLOW_PIECE_BYTES)
            .clamp(1, MAX_SLOW_PIECE_BYTES)
    });
    loop {
        let chunk = match body.frame().await {
            None => break,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers carry no records.
                Err(_) => continue,
            },
            Some(Err(e)) => return Err(Box::new(disconnected(&e))),
        };
        for piece in chunk.chunks(piece_len) {
            let done = reader.feed(piece).map_err(|_| Box::new(line_too_long()))?;
            queue_when_room(shared, upload, done).await?;
            if let Some(rate) = slow {
                let secs = piece.len() as f64 / rate as f64;
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            }
        }
    }
    queue(shared, upload, reader.finish())?;
    Ok((reader.events, reader.errors))
}

/// Backpressure: a piece with records waits while its endpoint's queue is full (see
/// `Pipeline::admit`), as Feldera's endpoint stops reading then; admitted, it is queued
/// under the same lock, so no other waiter slips in between.
async fn queue_when_room(
    shared: &Shared,
    upload: &Upload,
    done: Completed,
) -> Result<(), Box<Response>> {
    if done.records == 0 {
        return queue(shared, upload, done);
    }
    let mut ticket = None;
    loop {
        {
            let mut st = shared.state();
            let now = Instant::now();
            match st.admit(upload, &mut ticket, now) {
                Ok(true) => {
                    return st
                        .queue(upload, done.changes, done.records, now)
                        .map_err(|Restarted| Box::new(restarted_mid_body()));
                }
                Ok(false) => {}
                Err(Restarted) => return Err(Box::new(restarted_mid_body())),
            }
        }
        tokio::time::sleep(ROOM_POLL).await;
    }
}

fn queue(shared: &Shared, upload: &Upload, done: Completed) -> Result<(), Box<Response>> {
    shared
        .state()
        .queue(upload, done.changes, done.records, Instant::now())
        .map_err(|Restarted| Box::new(restarted_mid_body()))
}

/// What the client sent of a body, up to `MAX_DRAINED_BYTES` (all of it, or what arrived
/// before the client went away).
async fn collect(body: &mut Body) -> axum::body::Bytes {
    let mut sent = Vec::new();
    while sent.len() <= MAX_DRAINED_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    sent.extend_from_slice(data);
                }
            }
            None | Some(Err(_)) => break,
        }
    }
    sent.into()
}

/// Reads and drops what is left of a body, up to `MAX_DRAINED_BYTES`.
async fn drain(body: &mut Body) {
    let mut drained = 0usize;
    while drained <= MAX_DRAINED_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => drained += frame.data_ref().map_or(0, |d| d.len()),
            None | Some(Err(_)) => return,
        }
    }
}

/// The answer to a body read to its end: a token, or `ParseErrors` (the valid events
/// were queued all the same).
fn answer(shared: &Shared, upload: &Upload, errors: &[ParseError]) -> Response {
    if !errors.is_empty() {
        return api_error(
            StatusCode::BAD_REQUEST,
            "ParseErrors",
            format!("errors parsing input data ({} errors)", errors.len()),
            errors_details(errors),
        );
    }
    let token = shared.state().token(upload);
    match token {
        Ok(token) => Json(json!({ "token": token })).into_response(),
        Err(Restarted) => restarted_mid_body(),
    }
}

/// The request began before a restart: the pipeline process it was talking to is gone.
fn restarted_mid_body() -> Response {
    api_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "PipelineInteractionUnreachable",
        "the pipeline restarted while the request was uploading; records sent after the \
         restart were dropped",
        json!({}),
    )
}

/// Only the request log sees this answer: the client is gone.
fn disconnected(e: &axum::Error) -> Response {
    api_error(
        StatusCode::BAD_REQUEST,
        "IncompleteRequestBody",
        format!("the client went away before the body ended ({e}); what arrived is queued"),
        json!({}),
    )
}

fn line_too_long() -> Response {
    api_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "LineTooLong",
        format!(
            "the double holds at most {} bytes of one line (of an array body: of the body)",
            super::ingress::MAX_UNFINISHED_BYTES
        ),
        json!({}),
    )
}

/// `Ok(true)` for JSON, `Ok(false)` for CSV (Feldera's default), an error response for
/// anything the double does not speak.
fn injected_503(code: &str, applied: bool) -> Response {
    let message = if applied {
        "injected failure after the request was applied"
    } else {
        "injected failure before the request was applied"
    };
    api_error(StatusCode::SERVICE_UNAVAILABLE, code, message, json!({}))
}

async fn completion_status(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
    Query(params): Params,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let Some(raw) = params.get("token") else {
        return invalid_param("missing query parameter `token`");
    };
    let token = match CompletionToken::decode(raw) {
        Ok(t) => t,
        Err(e) => return invalid_param(format!("invalid completion token: {e}")),
    };
    let answer = shared.state().completion(&token, Instant::now());
    match answer {
        Ok(Completion::Complete { step }) => {
            Json(json!({"status": "complete", "step": step})).into_response()
        }
        Ok(Completion::InProgress { step }) => {
            let status = if shared.inprogress_202 {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            (status, Json(json!({"status": "inprogress", "step": step}))).into_response()
        }
        Err(TokenError::Restarted) => api_error(
            StatusCode::GONE,
            "PipelineRestarted",
            "the completion token was issued by a previous incarnation of the pipeline",
            json!({"error": "token from a previous incarnation"}),
        ),
        Err(TokenError::UnknownEndpoint(e)) => api_error(
            StatusCode::GONE,
            "UnknownEndpointInCompletionToken",
            format!(
                "completion token specifies input endpoint id {e}, which doesn't exist; this \
                 indicates that the input connector was deleted after the completion token \
                 was generated"
            ),
            json!({"endpoint_id": e}),
        ),
    }
}

/// Plans the query under the lock (its rows are the snapshot it reads), then streams the
/// answer from a full scan (`scan`, `answer`); the request is logged when the answer ended.
async fn adhoc_query(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
    Query(params): Params,
    ticket: Option<Extension<LogTicket>>,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let sql = match (params.get("format").map(String::as_str), params.get("sql")) {
        (Some("json"), Some(sql)) => sql,
        (Some("json"), None) => {
            shared.queries().count_query(None);
            return invalid_param("missing query parameter `sql`");
        }
        _ => {
            shared.queries().count_query(None);
            return invalid_param("the double answers ad-hoc queries only with `format=json`");
        }
    };
    let (table, planned, framing) = {
        let mut st = shared.state();
        st.advance(Instant::now());
        let (table, planned) = query::plan(&shared.schema, &st.tables, sql);
        // A mid-stream failure is planned only for queries that would have streamed.
        let midstream_error = planned.is_ok() && st.faults.take_query_failure();
        let framing = Framing {
            array: st.query_array,
            midstream_error,
        };
        (table, planned, framing)
    };
    shared.queries().count_query(table.as_deref());
    match planned {
        Ok(plan) => {
            let per_row = shared.scan_row_cost();
            let body = answer::stream(
                shared.clone(),
                plan,
                framing,
                per_row,
                ticket.map(|Extension(t)| t),
            );
            let content_type = if framing.array {
                "application/json"
            } else {
                "application/x-ndjson"
            };
            let mut resp =
                ([(header::CONTENT_TYPE, content_type)], Body::new(body)).into_response();
            resp.extensions_mut().insert(LogDeferred);
            resp
        }
        Err(e) => {
            let mut resp = api_error(
                StatusCode::BAD_REQUEST,
                "AdHocQueryError",
                e.clone(),
                json!({"error": e}),
            );
            note(&mut resp, |n| n.table = table);
            resp
        }
    }
}

async fn start_transaction(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let started = shared.state().start_transaction(Instant::now());
    match started {
        Ok(id) => Json(json!({"transaction_id": id})).into_response(),
        Err(_) => api_error(
            StatusCode::CONFLICT,
            "TransactionInProgress",
            "Cannot perform this operation while there is a transaction in progress",
            json!(null),
        ),
    }
}

async fn commit_transaction(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let committed = shared.state().commit_transaction(Instant::now());
    match committed {
        // Feldera only starts the commit here; the answer is a JSON string.
        Some(_) => Json(json!("Transaction commit initiated")).into_response(),
        None => api_error(
            StatusCode::BAD_REQUEST,
            "NoTransactionInProgress",
            "This operation requires an active transaction, but none is currently in progress",
            json!(null),
        ),
    }
}

/// `ControllerStatus` (`server.rs`, `stats`); a paused pipeline answers with state `Paused`.
async fn stats(State(shared): State<Arc<Shared>>, Path(pipeline): Path<String>) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let body = {
        let mut st = shared.state();
        let now = Instant::now();
        st.advance(now);
        stats_json(&st, now)
    };
    Json(body).into_response()
}

/// Feldera hands out the sequence number at once and checkpoints in the background
/// (`server.rs`, `checkpoint`): even a checkpoint that cannot succeed (no storage) is
/// answered 200 and fails in `checkpoint_status`. The community edition's manager never
/// forwards it: 501 `EnterpriseFeature` (`pipeline_interaction.rs`, `checkpoint`;
/// `common_error.rs`).
async fn checkpoint(State(shared): State<Arc<Shared>>, Path(pipeline): Path<String>) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    if shared.state().edition == Edition::Community {
        return api_error(
            StatusCode::NOT_IMPLEMENTED,
            "EnterpriseFeature",
            COMMUNITY_CHECKPOINT_ERROR,
            json!(null),
        );
    }
    let (seq, incarnation) = {
        let mut st = shared.state();
        let seq = st.request_checkpoint(Instant::now());
        (seq, st.incarnation.clone())
    };
    Json(json!({"checkpoint_sequence_number": seq, "incarnation_uuid": incarnation}))
        .into_response()
}

/// `CheckpointStatus`, or 400 `IncarnationUuidMismatch` when `incarnation_uuid` names
/// another incarnation (`server.rs`, `check_incarnation_uuid`; `server/error.rs`).
async fn checkpoint_status(
    State(shared): State<Arc<Shared>>,
    Path(pipeline): Path<String>,
    Query(params): Params,
) -> Response {
    if pipeline != shared.pipeline_name {
        return unknown_pipeline(&pipeline);
    }
    let requested = match params
        .get("incarnation_uuid")
        .map(|u| uuid::Uuid::parse_str(u))
    {
        None => None,
        Some(Ok(u)) => Some(u),
        // actix's `web::Query` refuses it before the handler runs: 400, plain text.
        Some(Err(e)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("Query deserialize error: {e}"),
            )
                .into_response();
        }
    };
    let (expected, body) = {
        let mut st = shared.state();
        st.advance(Instant::now());
        (st.incarnation.clone(), st.checkpoints.status_json())
    };
    match requested {
        Some(u) if uuid::Uuid::parse_str(&expected).ok() != Some(u) => api_error(
            StatusCode::BAD_REQUEST,
            "IncarnationUuidMismatch",
            format!("Incarnation UUID mismatch ({u} in request, expected {expected})"),
            json!({"requested": u.to_string(), "expected": expected}),
        ),
        _ => Json(body).into_response(),
    }
}
