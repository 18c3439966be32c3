//! The HTTP server: the router (`/v0` behind the unavailability gate, `/control` beside
//! it, the request-log middleware around both) and its own tokio runtime on a background
//! thread, so plain blocking `#[test]`s can use the double.
//!
//! Owns: the listener, the runtime and an orderly stop. Never handles a request itself
//! beyond logging it.

use std::future::IntoFuture;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::Router;
use serde_json::json;
use tokio::sync::watch;

use super::error::api_error;
use super::log::LogNote;
use super::shared::Shared;
use super::{api, control};

/// Largest request body accepted (Feldera itself streams; a test never needs more).
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// How long in-flight requests (e.g. one waiting on a paused pipeline) may delay a stop.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// The router over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    let v0 = api::routes().layer(from_fn_with_state(shared.clone(), api::unavailable_gate));
    v0.merge(control::routes())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(from_fn_with_state(shared.clone(), log_requests))
        .with_state(shared)
}

async fn not_found(req: Request) -> Response {
    api_error(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no such endpoint: {} {}", req.method(), req.uri().path()),
        json!({}),
    )
}

/// Records every non-control request with its timing and the handler's note.
async fn log_requests(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    if path.starts_with("/control") {
        return next.run(req).await;
    }
    let method = req.method().to_string();
    let seq = shared.log().arrival();
    let started = Instant::now();
    let resp = next.run(req).await;
    let note = resp
        .extensions()
        .get::<LogNote>()
        .cloned()
        .unwrap_or_default();
    let status = resp.status().as_u16();
    shared
        .log()
        .record(seq, &method, &path, status, note, started, Instant::now());
    resp
}

/// A running server; dropping it stops the server and joins its thread.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0 = any free port) before returning, so the address is
    /// known and connectable at once.
    pub fn spawn(shared: Arc<Shared>, port: u16) -> io::Result<Server> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("feldera-double-worker")
            .enable_all()
            .build()?;
        let (stop, stop_rx) = watch::channel(false);
        let app = router(shared);
        let thread = std::thread::Builder::new()
            .name("feldera-double".to_string())
            .spawn(move || {
                runtime.block_on(serve(listener, app, stop_rx));
                runtime.shutdown_timeout(STOP_GRACE);
            })?;
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

async fn serve(listener: std::net::TcpListener, app: Router, stop: watch::Receiver<bool>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("feldera-double: cannot register the listener: {e}");
            return;
        }
    };
    let mut graceful = stop.clone();
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = graceful.wait_for(|s| *s).await;
        })
        .into_future();
    // Graceful shutdown waits for in-flight requests; bound that wait.
    let mut hard = stop;
    let deadline = async move {
        let _ = hard.wait_for(|s| *s).await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        result = server => {
            if let Err(e) = result {
                eprintln!("feldera-double: server error: {e}");
            }
        }
        () = deadline => {}
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            // A panic in the server thread was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}
