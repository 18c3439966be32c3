//! The HTTP server: the router (`/v0` behind the unavailability gate, `/control` beside
//! it, the request-log middleware around both) and its own tokio runtime on a background
//! thread, so plain blocking `#[test]`s can use the double.
//!
//! Owns: the listener (plain TCP, or TCP with TLS handshakes in front), the runtime and an
//! orderly stop. Never handles a request itself beyond logging it.

use std::future::{Future, IntoFuture};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::Router;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::capture;
use super::error::api_error;
use super::log::{LogDeferred, LogNote, LogTicket};
use super::shared::Shared;
use super::{api, control};

/// Largest control request body accepted (ingress bodies are read as a stream and limited
/// by `ingress::MAX_UNFINISHED_BYTES` instead).
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// How long in-flight requests (e.g. one waiting on a paused pipeline) may delay a stop.
const STOP_GRACE: Duration = Duration::from_millis(500);
/// How long a client may take to finish a TLS handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for the HTTP server to take them.
const ACCEPTED_BACKLOG: usize = 64;

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

/// Records every non-control request with its timing and the handler's note, and with
/// body capture on, a copy of what the handler read of its body.
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
    let authorization = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let ticket = LogTicket {
        seq: shared.log().arrival(),
        method,
        path,
        authorization,
        started: Instant::now(),
    };
    let mut req = req;
    req.extensions_mut().insert(ticket.clone());
    let (req, sink) = match shared.capture {
        Some(_) => {
            let (parts, body) = req.into_parts();
            let (body, sink) = capture::tee(body);
            (Request::from_parts(parts, body), Some(sink))
        }
        None => (req, None),
    };
    let resp = next.run(req).await;
    if let (Some(captured), Some(sink)) = (&shared.capture, &sink) {
        captured.keep(ticket.seq, ticket.path.clone(), sink);
    }
    if resp.extensions().get::<LogDeferred>().is_some() {
        return resp;
    }
    let note = resp
        .extensions()
        .get::<LogNote>()
        .cloned()
        .unwrap_or_default();
    let status = resp.status().as_u16();
    ticket.record(&shared, status, note, Instant::now());
    resp
}

/// A running server; dropping it stops the server and joins its thread.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    handshake_failures: Arc<AtomicU64>,
}

/// The rustls configuration serving `identity`; unusable PEM is `InvalidInput`.
pub fn tls_config(identity: &super::TlsIdentity) -> io::Result<Arc<ServerConfig>> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
    let chain = CertificateDer::pem_slice_iter(identity.cert_chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the TLS certificate chain is not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(
            "the TLS certificate chain holds no PEM certificate".to_owned(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes())
        .map_err(|e| invalid(format!("the TLS key is not a PEM private key: {e}")))?;
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS protocol versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| invalid(format!("the TLS certificate and key do not fit: {e}")))?;
    Ok(Arc::new(config))
}

impl Server {
    /// Binds 127.0.0.1:`port` (0 = any free port) before returning, so the address is
    /// known and connectable at once. With `tls`, every connection is a TLS handshake
    /// first.
    pub fn spawn(
        shared: Arc<Shared>,
        port: u16,
        tls: Option<Arc<ServerConfig>>,
    ) -> io::Result<Server> {
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
        let handshake_failures = Arc::new(AtomicU64::new(0));
        let failures = handshake_failures.clone();
        let thread = std::thread::Builder::new()
            .name("feldera-double".to_string())
            .spawn(move || {
                runtime.block_on(serve(listener, tls, failures, app, stop_rx));
                runtime.shutdown_timeout(STOP_GRACE);
            })?;
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
            handshake_failures,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn tls_handshake_failures(&self) -> u64 {
        self.handshake_failures.load(Ordering::Relaxed)
    }
}

/// Connections whose TLS handshake finished, handed to the HTTP server. Handshakes run in
/// their own tasks, so a slow or refusing client never holds up the others.
struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(connection) => connection,
            // The accepting task ended (the runtime is stopping): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// Accepts TCP connections and runs each one's handshake, forwarding those that finish.
async fn accept_tls(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    failures: Arc<AtomicU64>,
    accepted: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(connection) => connection,
            Err(e) => {
                eprintln!("feldera-double: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, failures, accepted) = (acceptor.clone(), failures.clone(), accepted.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = accepted.send((tls, peer)).await;
                }
                Ok(Err(_)) | Err(_) => {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

async fn serve(
    listener: std::net::TcpListener,
    tls: Option<Arc<ServerConfig>>,
    failures: Arc<AtomicU64>,
    app: Router,
    stop: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("feldera-double: cannot register the listener: {e}");
            return;
        }
    };
    let mut graceful = stop.clone();
    let shutdown = async move {
        let _ = graceful.wait_for(|s| *s).await;
    };
    let server: Pin<Box<dyn Future<Output = io::Result<()>> + Send>> = match tls {
        None => Box::pin(
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .into_future(),
        ),
        Some(config) => {
            let addr = match listener.local_addr() {
                Ok(addr) => addr,
                Err(e) => {
                    eprintln!("feldera-double: the listener has no address: {e}");
                    return;
                }
            };
            let (sender, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
            tokio::spawn(accept_tls(
                listener,
                TlsAcceptor::from(config),
                failures,
                sender,
            ));
            Box::pin(
                axum::serve(TlsListener { accepted, addr }, app)
                    .with_graceful_shutdown(shutdown)
                    .into_future(),
            )
        }
    };
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
