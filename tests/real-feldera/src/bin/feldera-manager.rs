//! The part of Feldera's pipeline manager slotline talks to, in front of real pipeline
//! processes (`feldera-pipeline`, Feldera's own server with this crate's circuit).
//!
//! Feldera's manager owns `/v0/pipelines/{name}` and forwards every other pipeline endpoint
//! to the pipeline process unchanged (`crates/pipeline-manager/src/runner/interaction.rs`);
//! this stand-in does the same:
//!
//! - `GET /v0/pipelines/{name}`: the fields of `PipelineInfo` slotline reads: the program's
//!   schema (the circuit's), `runtime_config` (the one the process was started with) and the
//!   deployment statuses;
//! - `GET /v0/pipelines?selector=status`: every pipeline's name and status;
//! - `POST /v0/pipelines/{name}/pause` and `.../resume`: the manager's own lifecycle
//!   endpoints, which it carries out by `GET /pause` and `GET /start` on the process;
//! - `/v0/pipelines/{name}/{endpoint}`: forwarded to the process, request and answer bodies
//!   streamed both ways; an unreachable process answers 503 `PipelineInteractionUnreachable`
//!   as the manager does, and so does an ingress request the process has not answered
//!   within the manager's ingress timeout (30 s in Feldera, `http_input`; per pipeline
//!   here, `ingress_timeout_ms`).
//!
//! With `--community` it answers `POST .../checkpoint` itself with 501 `EnterpriseFeature`,
//! as the community edition's manager does (`pipeline_interaction.rs`, `checkpoint`).
//!
//! Tests manage pipelines through `/control` (the double's control prefix):
//!
//! - `PUT /control/pipelines/{name}` `{"fault_tolerance": null | "at_least_once" | "exactly_once",
//!   "storage": bool, "ingress_timeout_ms": n}` starts a fresh pipeline (new storage, new deployment), replacing one
//!   of that name; a fault-tolerance model implies storage;
//! - `POST /control/pipelines/{name}/crash_restart` kills the process (SIGKILL) and starts
//!   it again on the same storage, as the local runner does after a crash;
//! - `DELETE /control/pipelines/{name}` kills it and removes its storage (its log stays for
//!   `./run` to show when a test failed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::http::header;
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

struct Pipeline {
    child: Child,
    port: u16,
    ingress_timeout: Duration,
    dir: PathBuf,
    config: PipelineConfig,
    deployment_id: String,
}

impl Pipeline {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        forget_pid(&self.dir);
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
    let status = actix_web::http::StatusCode::from_u16(status).expect("valid status");
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
            let ready = ureq_like_get(port, "/stats");
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

/// The status code of a plain `GET path` on 127.0.0.1:`port`, or `None` when there is no
/// answer.
fn ureq_like_get(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
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
    let ingress_timeout = body
        .get("ingress_timeout_ms")
        .and_then(Value::as_u64)
        .map_or(INGRESS_TIMEOUT, Duration::from_millis);
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
        manager.pipelines.lock().unwrap().insert(
            name.clone(),
            Pipeline {
                child,
                port,
                ingress_timeout,
                dir,
                config,
                deployment_id,
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

async fn crash_restart(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let name = name.into_inner();
    let manager = manager.get_ref().clone();
    let result = web::block(move || -> Result<Option<Value>, String> {
        // The entry stays while the process is down: requests meanwhile find it unreachable.
        let (binary, dir, deployment_id) = {
            let mut pipelines = manager.pipelines.lock().unwrap();
            let Some(pipeline) = pipelines.get_mut(&name) else {
                return Ok(None);
            };
            pipeline.kill();
            (
                manager.args.pipeline_binary.clone(),
                pipeline.dir.clone(),
                pipeline.deployment_id.clone(),
            )
        };
        let (child, port) = spawn(&binary, &dir, &deployment_id)?;
        let mut pipelines = manager.pipelines.lock().unwrap();
        let pipeline = pipelines.get_mut(&name).ok_or("deleted while restarting")?;
        pipeline.child = child;
        pipeline.port = port;
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

fn status_fields(pipeline: &mut Pipeline) -> &'static str {
    match pipeline.child.try_wait() {
        Ok(None) => "Running",
        _ => "Unavailable",
    }
}

async fn get_pipeline(manager: web::Data<Arc<Manager>>, name: web::Path<String>) -> HttpResponse {
    let mut pipelines = manager.pipelines.lock().unwrap();
    let Some(pipeline) = pipelines.get_mut(name.as_str()) else {
        return unknown_pipeline(&name);
    };
    let status = status_fields(pipeline);
    let schema: Value = serde_json::from_str(slotline_real_feldera::SCHEMA_JSON).expect("schema");
    HttpResponse::Ok().json(json!({
        "name": name.as_str(),
        "program_status": "Success",
        "program_info": {"schema": schema},
        "runtime_config": serde_json::to_value(&pipeline.config.global).expect("runtime config"),
        "deployment_status": status,
        "deployment_desired_status": "Running",
        "deployment_runtime_status": status,
        "deployment_error": null,
    }))
}

async fn list_pipelines(manager: web::Data<Arc<Manager>>) -> HttpResponse {
    let mut pipelines = manager.pipelines.lock().unwrap();
    let list: Vec<Value> = pipelines
        .iter_mut()
        .map(|(name, pipeline)| {
            let status = status_fields(pipeline);
            json!({"name": name, "program_status": "Success", "deployment_status": status,
                   "deployment_desired_status": "Running", "deployment_error": null})
        })
        .collect();
    HttpResponse::Ok().json(list)
}

/// Hop-by-hop headers a proxy must not pass on (RFC 9110, 7.6.1), and the ones the client
/// library sets itself.
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
    )
}

async fn forward(
    manager: web::Data<Arc<Manager>>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    body: web::Payload,
) -> HttpResponse {
    let (name, endpoint) = path.into_inner();
    if manager.args.community
        && req.method() == actix_web::http::Method::POST
        && (endpoint == "checkpoint" || endpoint == "checkpoint/sync")
    {
        return error(
            501,
            "EnterpriseFeature",
            "Cannot use enterprise-only feature (checkpoint) in Feldera community edition.".into(),
        );
    }
    let (port, ingress_timeout) = match manager.pipelines.lock().unwrap().get(&name) {
        Some(pipeline) => (pipeline.port, pipeline.ingress_timeout),
        None => return unknown_pipeline(&name),
    };
    // The manager's lifecycle actions, as the runner carries them out on the process.
    let (method, endpoint) = match (req.method().as_str(), endpoint.as_str()) {
        ("POST", "pause") => (actix_web::http::Method::GET, "pause".to_owned()),
        ("POST", "resume") => (actix_web::http::Method::GET, "start".to_owned()),
        _ => (req.method().clone(), endpoint),
    };
    let timeout = if endpoint.starts_with("ingress/") {
        ingress_timeout
    } else {
        Duration::from_secs(3600)
    };
    let mut url = format!("http://127.0.0.1:{port}/{endpoint}");
    if !req.query_string().is_empty() {
        url.push('?');
        url.push_str(req.query_string());
    }
    let client = awc::Client::builder()
        .timeout(timeout)
        .disable_redirects()
        .finish();
    let mut request = client.request(method, &url);
    for (name, value) in req.headers() {
        if passes(name) {
            request = request.insert_header((name.clone(), value.clone()));
        }
    }
    match request.send_stream(body).await {
        Ok(answer) => {
            let mut response = HttpResponse::build(answer.status());
            for (name, value) in answer.headers() {
                if passes(name) {
                    response.insert_header((name.clone(), value.clone()));
                }
            }
            response.streaming(answer)
        }
        Err(e) => error(
            503,
            "PipelineInteractionUnreachable",
            format!("Error interacting with pipeline '{name}': {e}"),
        ),
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
    let stopping = manager.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(manager.clone()))
            .app_data(web::PayloadConfig::new(1 << 30))
            .route("/control/pipelines/{name}", web::put().to(create))
            .route("/control/pipelines/{name}", web::delete().to(delete))
            .route(
                "/control/pipelines/{name}/crash_restart",
                web::post().to(crash_restart),
            )
            .route("/v0/pipelines", web::get().to(list_pipelines))
            .route("/v0/pipelines/{name}", web::get().to(get_pipeline))
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
