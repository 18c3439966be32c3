//! The part of Feldera's pipeline manager slotline talks to, in front of real pipeline
//! processes (`feldera-pipeline`, Feldera's own server with this crate's circuit).
//!
//! What it does is what `crates/pipeline-manager` does (docs/feldera.md, "Against Feldera's
//! own server", lists each behaviour with the function of the manager it follows):
//!
//! - `GET /v0/pipelines/{name}`: the fields of `PipelineInfo` slotline reads: the program's
//!   schema (the circuit's), `runtime_config` (the one the process was started with), the
//!   deployment statuses and `deployment_error`; `GET /v0/pipelines?selector=status`: every
//!   pipeline's name and status. Both always answer, whatever the pipeline does.
//! - Every other pipeline endpoint is checked against the deployment status first
//!   (`runner/interaction.rs`, `check_pipeline`): resources not provisioned (stopped,
//!   provisioning, stopping) answer 503 `PipelineInteractionNotDeployed`, a runtime status
//!   `Unavailable` 503 `PipelineUnavailable`. The status is read through a cache entry that
//!   lives 5 s from the read that made it and is dropped whenever a status changes.
//! - The requests without a body (completion, stats, transactions, checkpoints, pause,
//!   resume) are sent without the client's body or headers, with a 10 s timeout (120 s for
//!   `checkpoint`), and the answer is read whole; a failure to send or to read the answer
//!   (a timeout included) is retried once when the status came from the cache
//!   (`forward_http_request_to_pipeline_by_name`), else answers 503
//!   `PipelineInteractionUnreachable` (500 `PipelineInteractionInvalidResponse` for an
//!   unreadable answer). A retried request may thus reach the pipeline twice.
//! - Ingress, ad-hoc queries and the other streamed endpoints are forwarded once, bodies
//!   streamed both ways, never retried (`streaming_proxy`): ingress with the manager's 30 s
//!   (`http_input`; per pipeline here, `ingress_timeout_ms`), queries without a timeout.
//! - `POST .../pause` and `.../resume` are carried out as the runner does (`GET /pause`,
//!   `GET /start` on the process); `POST .../start` starts a stopped pipeline on its
//!   storage (202), and is refused with 400 `IllegalPipelineAction` while it is stopping.
//! - The automaton (`runner/pipeline_automata.rs`) looks at each provisioned pipeline every
//!   2.5 s: a process that exited makes it `Stopping` with a `RunnerCheckError` in
//!   `deployment_error` and the desired status `Stopped`; 1 s later it is `Stopped`, the
//!   error kept. Nothing restarts it: only a `POST .../start` does. A process that lives
//!   but does not answer `/status` within 5 s is `Unavailable` (after the 20 s grace period
//!   of a start, during which it is `Initializing`).
//!
//! With `--community` it answers `POST .../checkpoint` itself with 501 `EnterpriseFeature`,
//! as the community edition's manager does (`pipeline_interaction.rs`, `checkpoint`).
//!
//! Tests manage pipelines through `/control` (the double's control prefix):
//!
//! - `PUT /control/pipelines/{name}` `{"fault_tolerance": null | "at_least_once" | "exactly_once",
//!   "storage": bool, "ingress_timeout_ms": n, "request_timeout_ms": n}` starts a fresh
//!   pipeline (new storage, new deployment), replacing one of that name; a fault-tolerance
//!   model implies storage; the two timeouts replace the manager's 30 s and 10 s;
//! - `POST /control/pipelines/{name}/kill` kills the process (SIGKILL): a crash, which the
//!   automaton then finds as above;
//! - `POST /control/pipelines/{name}/crash_restart` kills it, waits until the automaton
//!   stopped it, and starts it again on the same storage (what an operator does after a
//!   crash: `POST .../start`);
//! - `POST /control/pipelines/{name}/freeze` `{"ms": n}` stops the process (SIGSTOP) and
//!   lets it go on (SIGCONT) `n` ms later: a pipeline that answers nothing for a while;
//! - `DELETE /control/pipelines/{name}` kills it and removes its storage (its log stays for
//!   `./run` to show when a test failed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::http::{header, Method, StatusCode};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use clap::Parser;
use feldera_types::config::PipelineConfig;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    /// Port to listen on (127.0.0.1).
    #[arg(long)]
    port: u16,
    /// The pipeline server binary (`feldera-pipeline`).
    #[arg(long)]
    pipeline_binary: PathBuf,
    /// Directory under which each pipeline gets its working directory and storage.
    #[arg(long)]
    work_dir: PathBuf,
    /// DBSP worker threads per pipeline.
    #[arg(long, default_value_t = 2)]
    workers: u16,
    /// Answer as the community edition's manager does: `POST .../checkpoint` is refused
    /// with 501 `EnterpriseFeature` and never reaches the pipeline.
    #[arg(long)]
    community: bool,
}

/// How long a started process may take until its HTTP server answers `/stats`.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// Feldera's manager forwards an ingress request with this timeout
/// (`pipeline_interaction.rs`, `http_input`).
const INGRESS_TIMEOUT: Duration = Duration::from_secs(30);

/// The manager's timeout for the other requests it forwards unless the endpoint names
/// another (`runner/interaction.rs`, `RunnerInteraction::PIPELINE_HTTP_REQUEST_TIMEOUT`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `POST .../checkpoint` and `.../checkpoint/sync` (`pipeline_interaction.rs`,
/// `checkpoint_pipeline`, `sync_checkpoint`).
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(120);

/// An ad-hoc query is streamed without a timeout (`pipeline_adhoc_sql` passes
/// `Duration::MAX`); an hour stands for it here.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long a cached pipeline descriptor is used (`CachedPipelineDescr::CACHE_TTL`).
const CACHE_TTL: Duration = Duration::from_secs(5);

/// The largest answer the manager reads of a request without a body
/// (`runner/interaction.rs`, `RESPONSE_SIZE_LIMIT`).
const RESPONSE_SIZE_LIMIT: usize = 50 * 1024 * 1024;

/// The automaton's period while a pipeline is provisioned, and while it is stopping
/// (`PipelineAutomaton::POLL_PERIOD_PROVISIONED`, `POLL_PERIOD_STOPPING`).
const POLL_PERIOD_PROVISIONED: Duration = Duration::from_millis(2_500);
const POLL_PERIOD_STOPPING: Duration = Duration::from_millis(1_000);

/// The automaton's timeout for `GET /status`, and how long after provisioning an
/// unreachable pipeline still counts as initializing
/// (`PIPELINE_STATUS_HTTP_REQUEST_TIMEOUT`, `PROVISIONED_GRACE_PERIOD`).
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);
const PROVISIONED_GRACE_PERIOD: Duration = Duration::from_secs(20);

/// The deployment's resources status (`db/types/resources_status.rs`, `ResourcesStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resources {
    Provisioning,
    Provisioned,
    Stopping { since: Instant },
    Stopped,
}

impl Resources {
    fn name(self) -> &'static str {
        match self {
            Resources::Provisioning => "Provisioning",
            Resources::Provisioned => "Provisioned",
            Resources::Stopping { .. } => "Stopping",
            Resources::Stopped => "Stopped",
        }
    }
}

struct Pipeline {
    /// The running process; `None` once the automaton stopped it.
    child: Option<Child>,
    port: u16,
    ingress_timeout: Duration,
    request_timeout: Duration,
    dir: PathBuf,
    config: PipelineConfig,
    deployment_id: String,
    resources: Resources,
    /// `deployment_runtime_status` while provisioned.
    runtime: &'static str,
    deployment_error: Value,
    provisioned_at: Instant,
    next_check: Instant,
    /// When the cached descriptor was read; `None` when there is none.
    cached_at: Option<Instant>,
}

impl Pipeline {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        forget_pid(&self.dir);
    }

    /// A status change: the database notification empties the manager's cache.
    fn set_status(&mut self, resources: Resources, runtime: &'static str) {
        if self.resources != resources || self.runtime != runtime {
            self.cached_at = None;
        }
        self.resources = resources;
        self.runtime = runtime;
    }

    fn deployment_status(&self) -> &'static str {
        match self.resources {
            Resources::Provisioned => self.runtime,
            other => other.name(),
        }
    }

    fn desired_status(&self) -> &'static str {
        match self.resources {
            Resources::Stopping { .. } | Resources::Stopped => "Stopped",
            _ => "Running",
        }
    }
}

/// The file in a pipeline's directory holding the pid of its running process, from its
/// start until the process was waited for: `./run` kills the pids these files still name
/// when the manager did not (it ended without stopping its pipelines).
fn pid_file(dir: &Path) -> PathBuf {
    dir.join("pid")
}

fn forget_pid(dir: &Path) {
    let _ = std::fs::remove_file(pid_file(dir));
}

struct Manager {
    args: Args,
    pipelines: Mutex<BTreeMap<String, Pipeline>>,
}

fn error(status: u16, code: &str, message: String) -> HttpResponse {
    let status = StatusCode::from_u16(status).expect("valid status");
    HttpResponse::build(status).json(json!({
        "message": message,
        "error_code": code,
        "details": {},
    }))
}

fn unknown_pipeline(name: &str) -> HttpResponse {
    error(
        404,
        "UnknownPipelineName",
        format!("Unknown pipeline name '{name}'"),
    )
}

fn unreachable(name: &str, what: String) -> HttpResponse {
    error(
        503,
        "PipelineInteractionUnreachable",
        format!("Error sending HTTP request to pipeline '{name}': {what}"),
    )
}

/// The configuration file Feldera's runner writes (`generate_pipeline_config` plus the
/// storage the local runner adds), parsed by Feldera's own type so that a key it does not
/// know fails here rather than in the process.
fn pipeline_config(
    name: &str,
    dir: &Path,
    workers: u16,
    model: Option<&str>,
    storage: bool,
) -> Result<PipelineConfig, String> {
    let (storage, fault_tolerance) = match model {
        None | Some("none") if storage => (json!({}), json!({"model": "none"})),
        None | Some("none") => (Value::Null, json!({"model": "none"})),
        Some(model @ ("at_least_once" | "exactly_once")) => (
            json!({}),
            json!({"model": model, "checkpoint_interval_secs": 60}),
        ),
        Some(other) => return Err(format!("unknown fault tolerance model {other:?}")),
    };
    let config = json!({
        "workers": workers,
        "storage": storage,
        "fault_tolerance": fault_tolerance,
        "name": format!("pipeline-{}", uuid::Uuid::new_v4()),
        "given_name": name,
        "storage_config": {"path": dir.join("storage").display().to_string()},
        "inputs": {},
        "outputs": {},
    });
    serde_json::from_value(config).map_err(|e| format!("pipeline configuration: {e}"))
}

/// Starts the process in `dir` and waits until its HTTP server answers.
fn spawn(binary: &Path, dir: &Path, deployment_id: &str) -> Result<(Child, u16), String> {
    let port_file = dir.join("port");
    let _ = std::fs::remove_file(&port_file);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pipeline.log"))
        .map_err(|e| format!("open pipeline.log: {e}"))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new(binary)
        .current_dir(dir)
        .args([
            "--config-file",
            "config.json",
            "--bind-address",
            "127.0.0.1",
        ])
        .args(["--initial", "running", "--deployment-id", deployment_id])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| format!("start {}: {e}", binary.display()))?;
    if let Err(e) = std::fs::write(pid_file(dir), child.id().to_string()) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("write {}: {e}", pid_file(dir).display()));
    }
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            forget_pid(dir);
            return Err(format!(
                "the pipeline process exited with {status}; see {}",
                dir.join("pipeline.log").display()
            ));
        }
        let port = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|text| text.trim().parse::<u16>().ok());
        if let Some(port) = port {
            let ready = probe(port, "/stats", Duration::from_secs(5)).map(|(code, _)| code);
            if ready == Some(200) {
                return Ok((child, port));
            }
        }
        if started.elapsed() > READY_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            forget_pid(dir);
            return Err(format!(
                "the pipeline did not answer /stats within {READY_TIMEOUT:?}; see {}",
                dir.join("pipeline.log").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status code and body of a plain `GET path` on 127.0.0.1:`port`, or `None` when no
/// answer came within `timeout` (a process that is gone, or stopped).
fn probe(port: u16, path: &str, timeout: Duration) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let deadline = Instant::now() + timeout;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
        if Instant::now() > deadline {
            return None;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let code = text.get(9..12)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Some((code, body))
}

/// The JSON of an answer body, also when it came chunked.
fn body_json(body: &str) -> Option<Value> {
    serde_json::from_str(body.trim()).ok().or_else(|| {
        let start = body.find(['{', '"'])?;
        let end = body.rfind(['}', '"'])?;
        serde_json::from_str(body.get(start..=end)?).ok()
    })
}

fn runtime_name(name: &str) -> &'static str {
    match name {
        "Coordination" => "Coordination",
        "Standby" => "Standby",
        "AwaitingApproval" => "AwaitingApproval",
        "Initializing" => "Initializing",
        "Bootstrapping" => "Bootstrapping",
        "ConcurrentBootstrapping" => "ConcurrentBootstrapping",
        "Synchronizing" => "Synchronizing",
        "Replaying" => "Replaying",
        "Paused" => "Paused",
        "Running" => "Running",
        "Suspended" => "Suspended",
        _ => "Unavailable",
    }
}

/// What one `GET /status` says (`PipelineAutomaton::parse_status_result`): the runtime
/// status, or the error that makes the automaton stop the pipeline.
fn parse_status(answer: Option<(u16, String)>, in_grace: bool) -> Result<&'static str, Value> {
    let Some((code, body)) = answer else {
        return Ok(if in_grace {
            "Initializing"
        } else {
            "Unavailable"
        });
    };
    let json = body_json(&body).unwrap_or(Value::Null);
    match code {
        200 => Ok(match &json {
            Value::String(s) => runtime_name(s),
            Value::Object(o) => runtime_name(
                o.get("runtime_status")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            _ => "Unavailable",
        }),
        503 => Ok(match json.get("error_code").and_then(Value::as_str) {
            Some("Initializing") => "Initializing",
            Some("Suspended") => "Suspended",
            _ => "Unavailable",
        }),
        _ => Err(json),
    }
}

/// `RunnerError::RunnerCheckError` as the automaton stores it in `deployment_error` when
/// the local runner finds the process gone (`local_runner.rs`, `inner_check`).
fn runner_check_error(exit: &str) -> Value {
    json!({
        "message": format!(
            "Pipeline check failed: compute and/or storage resources encountered a fatal error.\n\n\
             Pipeline process exited prematurely with {exit}"
        ),
        "error_code": "RunnerCheckError",
        "details": {"error": format!("Pipeline process exited prematurely with {exit}")},
    })
}

/// The automaton of every pipeline, one step each `POLL_PERIOD_*`: a provisioned
/// pipeline whose process exited goes `Stopping` (desired `Stopped`, the error kept), a
/// living one has its runtime status read; a stopping one is stopped.
fn automaton(manager: Arc<Manager>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = Instant::now();
        let mut probes = Vec::new();
        {
            let mut pipelines = manager.pipelines.lock().unwrap();
            for (name, pipeline) in pipelines.iter_mut() {
                match pipeline.resources {
                    Resources::Provisioned if now >= pipeline.next_check => {
                        pipeline.next_check = now + POLL_PERIOD_PROVISIONED;
                        let exited = match pipeline.child.as_mut().map(Child::try_wait) {
                            Some(Ok(None)) => None,
                            Some(Ok(Some(status))) => Some(status.to_string()),
                            Some(Err(e)) => Some(format!("a status that could not be read: {e}")),
                            None => Some("no process".to_owned()),
                        };
                        match exited {
                            Some(exit) => {
                                eprintln!("feldera-manager: {name}: the process exited ({exit}): Stopping");
                                pipeline.deployment_error = runner_check_error(&exit);
                                pipeline.set_status(Resources::Stopping { since: now }, "");
                            }
                            None => probes.push((
                                name.clone(),
                                pipeline.port,
                                pipeline.deployment_id.clone(),
                                pipeline.provisioned_at,
                            )),
                        }
                    }
                    Resources::Stopping { since } if now >= since + POLL_PERIOD_STOPPING => {
                        pipeline.kill();
                        pipeline.set_status(Resources::Stopped, "");
                    }
                    _ => {}
                }
            }
        }
        for (name, port, deployment_id, provisioned_at) in probes {
            let answer = probe(port, "/status", STATUS_TIMEOUT);
            let in_grace = provisioned_at.elapsed() <= PROVISIONED_GRACE_PERIOD;
            let status = parse_status(answer, in_grace);
            let mut pipelines = manager.pipelines.lock().unwrap();
            let Some(pipeline) = pipelines.get_mut(&name).filter(|p| {
                p.deployment_id == deployment_id && p.resources == Resources::Provisioned
            }) else {
                continue;
            };
            let now = Instant::now();
            match status {
                // A suspended pipeline is stopped without an error.
                Ok("Suspended") => pipeline.set_status(Resources::Stopping { since: now }, ""),
                Ok(runtime) => pipeline.set_status(Resources::Provisioned, runtime),
                Err(error) => {
                    eprintln!("feldera-manager: {name}: fatal status {error}: Stopping");
                    pipeline.deployment_error = error;
                    pipeline.set_status(Resources::Stopping { since: now }, "");
                }
            }
        }
    }
}

/// Where a pipeline was provisioned, as `start` leaves it.
fn provisioned(
    manager: &Manager,
    name: &str,
    child: Child,
    port: u16,
    deployment_id: String,
) -> Result<(), String> {
    let mut pipelines = manager.pipelines.lock().unwrap();
    let pipeline = pipelines
        .get_mut(name)
        .filter(|p| p.deployment_id == deployment_id)
        .ok_or("deleted or started again while starting")?;
    let now = Instant::now();
    pipeline.child = Some(child);
    pipeline.port = port;
    pipeline.provisioned_at = now;
    pipeline.next_check = now + POLL_PERIOD_PROVISIONED;
    pipeline.set_status(Resources::Provisioned, "Running");
    Ok(())
}

async fn create(
    manager: web::Data<Arc<Manager>>,
    name: web::Path<String>,
    body: web::Json<Value>,
) -> HttpResponse {
    let name = name.into_inner();
    let model = body
        .get("fault_tolerance")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let storage = body
        .get("storage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let timeout = |key: &str, default: Duration| {
        body.get(key)
            .and_then(Value::as_u64)
            .map_or(default, Duration::from_millis)
    };
    let ingress_timeout = timeout("ingress_timeout_ms", INGRESS_TIMEOUT);
    let request_timeout = timeout("request_timeout_ms", REQUEST_TIMEOUT);
    let manager = manager.get_ref().clone();
    let result = web::block(move || -> Result<Value, String> {
        let dir = manager.args.work_dir.join(&name);
        if let Some(mut old) = manager.pipelines.lock().unwrap().remove(&name) {
            old.kill();
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("storage")).map_err(|e| e.to_string())?;
        let config = pipeline_config(&name, &dir, manager.args.workers, model.as_deref(), storage)?;
        let text = serde_json::to_string_pretty(&config).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("config.json"), text).map_err(|e| e.to_string())?;
        let deployment_id = uuid::Uuid::new_v4().to_string();
        let (child, port) = spawn(&manager.args.pipeline_binary, &dir, &deployment_id)?;
        let now = Instant::now();
        manager.pipelines.lock().unwrap().insert(
            name.clone(),
            Pipeline {
                child: Some(child),
                port,
                ingress_timeout,
                request_timeout,
                dir,
                config,
                deployment_id,
                resources: Resources::Provisioned,
                runtime: "Running",
                deployment_error: Value::Null,
                provisioned_at: now,
                next_check: now + POLL_PERIOD_PROVISIONED,
                cached_at: None,
            },
        );
        Ok(json!({"name": name, "port": port}))
    })
    .await;
    match result {
        Ok(Ok(answer)) => HttpResponse::Created().json(answer),
        Ok(Err(e)) => error(500, "PipelineStartFailed", e),
        Err(e) => error(500, "PipelineStartFailed", e.to_string()),
    }
}

/// `POST /v0/pipelines/{name}/start` of a stopped pipeline: the error is dismissed (the
/// manager's default, `dismiss_error=true`), a new deployment starts on the same storage.
/// Returns the deployment being started, or the answer refusing it.
fn begin_start(manager: &Manager, name: &str) -> Result<Option<String>, HttpResponse> {
    let mut pipelines = manager.pipelines.lock().unwrap();
    let Some(pipeline) = pipelines.get_mut(name) else {
        return Err(unknown_pipeline(name));
    };
    match pipeline.resources {
        Resources::Stopped => {}
        Resources::Stopping { .. } => {
            return Err(error(
                400,
                "IllegalPipelineAction",
                "Cannot restart the pipeline while it is stopping. Wait until it is stopped \
                 before starting the pipeline again."
                    .into(),
            ))
        }
        Resources::Provisioning | Resources::Provisioned => return Ok(None),
    }
    pipeline.deployment_error = Value::Null;
    pipeline.deployment_id = uuid::Uuid::new_v4().to_string();
    pipeline.set_status(Resources::Provisioning, "");
    Ok(Some(pipeline.deployment_id.clone()))
}

/// Provisions the deployment `begin_start` began; a process that does not come up leaves
/// the pipeline stopped with the reason.
fn provision(manager: &Manager, name: &str, deployment_id: String) -> Result<(), String> {
    let dir = manager.args.work_dir.join(name);
    match spawn(&manager.args.pipeline_binary, &dir, &deployment_id) {
        Ok((child, port)) => provisioned(manager, name, child, port, deployment_id),
        Err(e) => {
            let mut pipelines = manager.pipelines.lock().unwrap();
            if let Some(pipeline) = pipelines.get_mut(name) {
                pipeline.deployment_error =
                    json!({"message": e, "error_code": "RunnerProvisionError", "details": {}});
                pipeline.set_status(Resources::Stopped, "");
            }
            Err(e)
        }
    }
}

async fn start(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let name = name.into_inner();
    let deployment = match begin_start(&manager, &name) {
        Ok(deployment) => deployment,
        Err(refusal) => return refusal,
    };
    if let Some(deployment_id) = deployment {
        let manager = manager.get_ref().clone();
        std::thread::spawn(move || {
            if let Err(e) = provision(&manager, &name, deployment_id) {
                eprintln!("feldera-manager: {name}: start failed: {e}");
            }
        });
    }
    HttpResponse::Accepted().json("Pipeline is starting")
}

/// SIGKILL: the automaton finds the process gone at its next look.
async fn kill(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let mut pipelines = manager.pipelines.lock().unwrap();
    match pipelines.get_mut(name.as_str()) {
        Some(pipeline) => {
            if let Some(child) = pipeline.child.as_mut() {
                let _ = child.kill();
            }
            HttpResponse::Ok().json(json!({"name": name.as_str(), "killed": true}))
        }
        None => unknown_pipeline(&name),
    }
}

async fn crash_restart(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let name = name.into_inner();
    let manager = manager.get_ref().clone();
    let result = web::block(move || -> Result<Option<Value>, String> {
        {
            let mut pipelines = manager.pipelines.lock().unwrap();
            let Some(pipeline) = pipelines.get_mut(&name) else {
                return Ok(None);
            };
            if let Some(child) = pipeline.child.as_mut() {
                let _ = child.kill();
            }
        }
        // The automaton stops it (at most a period to notice, one to stop).
        let deadline = Instant::now() + 4 * (POLL_PERIOD_PROVISIONED + POLL_PERIOD_STOPPING);
        loop {
            let resources = manager
                .pipelines
                .lock()
                .unwrap()
                .get(&name)
                .map(|p| p.resources);
            match resources {
                None => return Err("deleted while restarting".into()),
                Some(Resources::Stopped) => break,
                Some(_) if Instant::now() > deadline => {
                    return Err("the automaton did not stop the killed pipeline".into())
                }
                Some(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let deployment_id = match begin_start(&manager, &name) {
            Ok(Some(deployment_id)) => deployment_id,
            _ => return Err("the stopped pipeline could not be started".into()),
        };
        provision(&manager, &name, deployment_id)?;
        let port = manager.pipelines.lock().unwrap().get(&name).map(|p| p.port);
        Ok(Some(json!({"name": name, "port": port})))
    })
    .await;
    match result {
        Ok(Ok(Some(answer))) => HttpResponse::Ok().json(answer),
        Ok(Ok(None)) => error(404, "UnknownPipelineName", "no such pipeline".into()),
        Ok(Err(e)) => error(500, "PipelineStartFailed", e),
        Err(e) => error(500, "PipelineStartFailed", e.to_string()),
    }
}

/// SIGSTOP now, SIGCONT `ms` later: the process answers nothing meanwhile.
async fn freeze(
    manager: web::Data<Arc<Manager>>,
    name: web::Path<String>,
    body: web::Json<Value>,
) -> HttpResponse {
    let ms = body.get("ms").and_then(Value::as_u64).unwrap_or(0);
    let pid = match manager.pipelines.lock().unwrap().get(name.as_str()) {
        Some(pipeline) => pipeline.child.as_ref().map(Child::id),
        None => return unknown_pipeline(&name),
    };
    let Some(pid) = pid else {
        return error(409, "NoProcess", "the pipeline has no process".into());
    };
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !signal("-STOP") {
        return error(500, "FreezeFailed", format!("kill -STOP {pid} failed"));
    }
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        let _ = Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
    });
    HttpResponse::Ok().json(json!({"name": name.as_str(), "frozen_ms": ms}))
}

async fn delete(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let name = name.into_inner();
    let manager = manager.get_ref().clone();
    let _ = web::block(move || {
        if let Some(mut pipeline) = manager.pipelines.lock().unwrap().remove(&name) {
            pipeline.kill();
            let _ = std::fs::remove_dir_all(pipeline.dir.join("storage"));
        }
    })
    .await;
    HttpResponse::NoContent().finish()
}

fn runtime_status(pipeline: &Pipeline) -> Value {
    match pipeline.resources {
        Resources::Provisioned => json!(pipeline.runtime),
        _ => Value::Null,
    }
}

async fn get_pipeline(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let pipelines = manager.pipelines.lock().unwrap();
    let Some(pipeline) = pipelines.get(name.as_str()) else {
        return unknown_pipeline(&name);
    };
    let schema: Value = serde_json::from_str(slotline_real_feldera::SCHEMA_JSON).expect("schema");
    HttpResponse::Ok().json(json!({
        "name": name.as_str(),
        "program_status": "Success",
        "program_info": {"schema": schema},
        "runtime_config": serde_json::to_value(&pipeline.config.global).expect("runtime config"),
        "deployment_status": pipeline.deployment_status(),
        "deployment_desired_status": pipeline.desired_status(),
        "deployment_resources_status": pipeline.resources.name(),
        "deployment_runtime_status": runtime_status(pipeline),
        "deployment_error": pipeline.deployment_error,
    }))
}

async fn list_pipelines(manager: web::Data<Arc<Manager>>) -> HttpResponse {
    let pipelines = manager.pipelines.lock().unwrap();
    let list: Vec<Value> = pipelines
        .iter()
        .map(|(name, pipeline)| {
            json!({"name": name, "program_status": "Success",
                   "deployment_status": pipeline.deployment_status(),
                   "deployment_desired_status": pipeline.desired_status(),
                   "deployment_error": pipeline.deployment_error})
        })
        .collect();
    HttpResponse::Ok().json(list)
}

/// The manager's status check before it forwards anything (`check_pipeline`,
/// `deployment_location_based_on_status`): the process's port and whether the status came
/// from the cache, or the 503 the status calls for.
fn check(manager: &Manager, name: &str) -> Result<(u16, bool), HttpResponse> {
    let mut pipelines = manager.pipelines.lock().unwrap();
    let Some(pipeline) = pipelines.get_mut(name) else {
        return Err(unknown_pipeline(name));
    };
    let now = Instant::now();
    let hit = pipeline
        .cached_at
        .is_some_and(|t| now.duration_since(t) <= CACHE_TTL);
    if !hit {
        pipeline.cached_at = Some(now);
    }
    match pipeline.resources {
        Resources::Provisioned if pipeline.runtime == "Unavailable" => Err(error(
            503,
            "PipelineUnavailable",
            format!("Pipeline '{name}' is unavailable"),
        )),
        Resources::Provisioned => Ok((pipeline.port, hit)),
        other => Err(error(
            503,
            "PipelineInteractionNotDeployed",
            format!(
                "Unable to interact with pipeline because the deployment status ({}) indicates \
                 it is not (yet) fully provisioned (pipeline: '{name}')",
                other.name()
            ),
        )),
    }
}

fn evict(manager: &Manager, name: &str) {
    if let Some(pipeline) = manager.pipelines.lock().unwrap().get_mut(name) {
        pipeline.cached_at = None;
    }
}

/// How the manager forwards one endpoint.
enum Route {
    /// `forward_http_request_to_pipeline_by_name`: no body, answer read whole, retried.
    Bodiless {
        method: Method,
        endpoint: String,
        timeout: Duration,
    },
    /// `forward_streaming_http_request_to_pipeline_by_name`: streamed, never retried.
    Streamed { timeout: Duration },
}

fn route(method: &Method, endpoint: &str, ingress: Duration, request: Duration) -> Route {
    let bodiless = |method: Method, endpoint: &str, timeout: Duration| Route::Bodiless {
        method,
        endpoint: endpoint.to_owned(),
        timeout,
    };
    match (method.as_str(), endpoint) {
        // The runner's way of pausing and resuming (`post_pipeline_pause`, `_resume`).
        ("POST", "pause") => bodiless(Method::GET, "pause", request),
        ("POST", "resume") => bodiless(Method::GET, "start", request),
        ("POST", "checkpoint" | "checkpoint/sync") => {
            bodiless(Method::POST, endpoint, CHECKPOINT_TIMEOUT)
        }
        ("POST", "start_transaction" | "commit_transaction") => {
            bodiless(Method::POST, endpoint, request)
        }
        (
            "GET",
            "completion_status"
            | "completion_token"
            | "stats"
            | "metrics"
            | "time_series"
            | "checkpoint_status"
            | "checkpoint/sync_status"
            | "checkpoints",
        ) => bodiless(Method::GET, endpoint, request),
        (_, "query") => Route::Streamed {
            timeout: QUERY_TIMEOUT,
        },
        (_, e) if e.starts_with("ingress/") => Route::Streamed { timeout: ingress },
        _ => Route::Streamed { timeout: request },
    }
}

/// Hop-by-hop headers a proxy must not pass on (RFC 9110, 7.6.1), the ones the client
/// library sets itself, and what `streaming_proxy` leaves out (`accept-encoding`,
/// `authorization`).
fn passes(name: &header::HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "upgrade"
            | "host"
            | "content-length"
            | "proxy-connection"
            | "trailer"
            | "accept-encoding"
            | "authorization"
    )
}

/// One attempt of a request without a body (`forward_http_request_to_pipeline`): the answer
/// with the pipeline's status and headers, or the manager's error answer.
async fn send_bodiless(
    name: &str,
    port: u16,
    method: Method,
    endpoint: &str,
    query: &str,
    timeout: Duration,
) -> Result<HttpResponse, HttpResponse> {
    let url = format!("http://127.0.0.1:{port}/{endpoint}?{query}");
    let client = awc::Client::builder().disable_redirects().finish();
    let request = client.request(method, &url).timeout(timeout).force_close();
    let mut answer = request.send().await.map_err(|e| match e {
        awc::error::SendRequestError::Timeout => unreachable(
            name,
            format!(
                "timeout ({}s) was reached: the pipeline took too long to respond",
                timeout.as_secs()
            ),
        ),
        e => unreachable(name, e.to_string()),
    })?;
    let mut response = HttpResponse::build(answer.status());
    for (key, value) in answer.headers() {
        if !matches!(
            key.as_str(),
            "connection" | "content-length" | "content-encoding"
        ) {
            response.insert_header((key.clone(), value.clone()));
        }
    }
    let body = answer
        .body()
        .limit(RESPONSE_SIZE_LIMIT)
        .await
        .map_err(|e| {
            error(
                500,
                "PipelineInteractionInvalidResponse",
                format!("unable to reconstruct response body due to: {e}"),
            )
        })?;
    Ok(response.body(body))
}

async fn forward(
    manager: web::Data<Arc<Manager>>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    body: web::Payload,
) -> HttpResponse {
    let (name, endpoint) = path.into_inner();
    if manager.args.community
        && req.method() == Method::POST
        && (endpoint == "checkpoint" || endpoint == "checkpoint/sync")
    {
        return error(
            501,
            "EnterpriseFeature",
            "Cannot use enterprise-only feature (checkpoint) in Feldera community edition.".into(),
        );
    }
    let (ingress_timeout, request_timeout) = match manager.pipelines.lock().unwrap().get(&name) {
        Some(pipeline) => (pipeline.ingress_timeout, pipeline.request_timeout),
        None => return unknown_pipeline(&name),
    };
    match route(req.method(), &endpoint, ingress_timeout, request_timeout) {
        Route::Bodiless {
            method,
            endpoint,
            timeout,
        } => loop {
            // After a failure with a cached status, the entry goes and the request is sent
            // again with the status read afresh (not cached, so not retried again).
            let (port, cache_hit) = match check(&manager, &name) {
                Ok(found) => found,
                Err(answer) => return answer,
            };
            let attempt = send_bodiless(
                &name,
                port,
                method.clone(),
                &endpoint,
                req.query_string(),
                timeout,
            )
            .await;
            match attempt {
                Ok(answer) => return answer,
                Err(failure) if !cache_hit => return failure,
                Err(_) => {
                    eprintln!("feldera-manager: {name}: {endpoint} failed with a cached status: sent again");
                    evict(&manager, &name);
                }
            }
        },
        Route::Streamed { timeout } => {
            let port = match check(&manager, &name) {
                Ok((port, _)) => port,
                Err(answer) => return answer,
            };
            let url = format!("http://127.0.0.1:{port}/{endpoint}?{}", req.query_string());
            let client = awc::Client::builder().disable_redirects().finish();
            let mut request = client
                .request(req.method().clone(), &url)
                .timeout(timeout)
                .force_close()
                .no_decompress();
            for (key, value) in req.headers() {
                if passes(key) {
                    request = request.append_header((key.clone(), value.clone()));
                }
            }
            match request.send_stream(body).await {
                Ok(answer) => {
                    let mut response = HttpResponse::build(answer.status());
                    for (key, value) in answer.headers() {
                        if passes(key) {
                            response.append_header((key.clone(), value.clone()));
                        }
                    }
                    response.streaming(answer)
                }
                Err(awc::error::SendRequestError::Timeout) => unreachable(
                    &name,
                    format!(
                        "timeout ({}s) was reached: the pipeline took too long to respond",
                        timeout.as_secs()
                    ),
                ),
                Err(e) => unreachable(&name, e.to_string()),
            }
        }
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let port = args.port;
    std::fs::create_dir_all(&args.work_dir)?;
    let manager = Arc::new(Manager {
        args,
        pipelines: Mutex::new(BTreeMap::new()),
    });
    {
        let manager = manager.clone();
        std::thread::spawn(move || automaton(manager));
    }
    let stopping = manager.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(manager.clone()))
            .app_data(web::PayloadConfig::new(1 << 30))
            .route("/control/pipelines/{name}", web::put().to(create))
            .route("/control/pipelines/{name}", web::delete().to(delete))
            .route("/control/pipelines/{name}/kill", web::post().to(kill))
            .route("/control/pipelines/{name}/freeze", web::post().to(freeze))
            .route(
                "/control/pipelines/{name}/crash_restart",
                web::post().to(crash_restart),
            )
            .route("/v0/pipelines", web::get().to(list_pipelines))
            .route("/v0/pipelines/{name}", web::get().to(get_pipeline))
            .route("/v0/pipelines/{name}/start", web::post().to(start))
            .route(
                "/v0/pipelines/{name}/{endpoint:.*}",
                web::route().to(forward),
            )
    })
    .workers(2)
    .bind(("127.0.0.1", port))?
    .run();
    eprintln!("feldera-manager listening on 127.0.0.1:{port}");
    let result = server.await;
    for (_, mut pipeline) in std::mem::take(&mut *stopping.pipelines.lock().unwrap()) {
        pipeline.kill();
    }
    result
}
