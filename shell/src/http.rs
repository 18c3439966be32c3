//! The executor of `Command::Http`, shared by both shells: a small pool of threads running
//! requests with one `ureq` agent (connections are reused across requests).
//!
//! Every request ends in exactly one input: any HTTP status, 4xx and 5xx included, is an
//! answer (`HttpDone`); only a failure to get an answer (refused, reset, timed out, body
//! unreadable or over the limit) is `HttpFailed`. A streamed request's successful answer
//! comes first in pieces (`HttpChunk`), each next one read from the socket only once the
//! core asked for it (`HttpRead`), then ends the same way; `HttpCancel` closes it. The executor never retries, never follows
//! redirects (a 3xx is an answer too) and never reads what the body says: those are the
//! core's decisions. A failure's text says what went wrong in the operator's terms (a
//! refused certificate names `FELDERA_CA_CERT` or `FELDERA_URL`); it never holds a header.

use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rustls::pki_types::CertificateDer;
use rustls::CertificateError;
use slotline_core::feldera::{HttpRequest, Method};
use slotline_core::io::{HttpId, Input};
use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ureq::http::Response;
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::Agent;

/// Worker threads of the binaries' pools: requests in flight at once. The core keeps its
/// own limits on concurrent requests; this only has to exceed them.
pub const DEFAULT_WORKERS: usize = 8;

/// The largest response body read into memory. A Feldera answer beyond this (a runaway
/// query) fails the request instead of exhausting memory.
pub const MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;

/// A streamed answer (`HttpRequest::streamed`) is handed over in pieces of at least this
/// many bytes (or what is left)...
pub const STREAM_PIECE_MIN: usize = 64 * 1024;
/// ... and at most this many.
pub const STREAM_PIECE_MAX: usize = 256 * 1024;

/// Hands an input to the run loop, from any thread (blocking until it has room).
pub type Deliver = Arc<dyn Fn(Input) + Send + Sync>;

/// What the core said about a streamed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `Command::HttpRead`: the next piece.
    More,
    /// `Command::HttpCancel`: nothing more; close it.
    Cancel,
}

/// The streamed requests not yet ended, and how to tell each one's worker what the core
/// wants next.
type Streams = Arc<Mutex<HashMap<HttpId, Sender<Step>>>>;

/// One request for a worker, with the channel a streamed one listens on.
type Job = (HttpId, HttpRequest, Option<Receiver<Step>>);

/// A running pool. Dropping it lets the workers finish their current request and end.
#[derive(Debug)]
pub struct HttpPool {
    jobs: Sender<Job>,
    streams: Streams,
}

impl HttpPool {
    /// Starts `workers` threads (at least one) running requests with `agent` and
    /// delivering results through `deliver`.
    pub fn start(workers: usize, agent: Agent, deliver: Deliver) -> io::Result<HttpPool> {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        let streams = Streams::default();
        for index in 0..workers.max(1) {
            let (queue, agent, deliver) = (queue.clone(), agent.clone(), deliver.clone());
            let streams = streams.clone();
            std::thread::Builder::new()
                .name(format!("slotline-http-{index}"))
                .spawn(move || work(&queue, &agent, &*deliver, &streams))?;
        }
        Ok(HttpPool { jobs, streams })
    }

    /// Queues a request; its result arrives as an input (a streamed one's in pieces).
    pub fn submit(&self, id: HttpId, request: HttpRequest) {
        let steps = request.streamed.then(|| {
            let (tell, listen) = crossbeam_channel::unbounded();
            lock(&self.streams).insert(id, tell);
            listen
        });
        // The workers hold the receiver until the pool is dropped, so this cannot fail
        // while `self` exists.
        let _ = self.jobs.send((id, request, steps));
    }

    /// The core read a piece of `id`'s answer and wants the next.
    pub fn read_more(&self, id: HttpId) {
        if let Some(tell) = lock(&self.streams).get(&id) {
            let _ = tell.send(Step::More);
        }
    }

    /// The core wants nothing more of `id`'s answer: its connection is closed and its end
    /// reported (unless it ended already).
    pub fn cancel(&self, id: HttpId) {
        if let Some(tell) = lock(&self.streams).remove(&id) {
            let _ = tell.send(Step::Cancel);
        }
    }
}

fn lock(streams: &Streams) -> std::sync::MutexGuard<'_, HashMap<HttpId, Sender<Step>>> {
    // A worker that panicked while holding the lock left the map consistent (one insert or
    // remove at a time).
    streams
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn work(queue: &Receiver<Job>, agent: &Agent, deliver: &(dyn Fn(Input) + Sync), streams: &Streams) {
    while let Ok((id, request, steps)) = queue.recv() {
        match steps {
            Some(steps) => {
                stream(agent, id, &request, &steps, deliver);
                lock(streams).remove(&id);
            }
            None => deliver(perform(agent, id, &request)),
        }
    }
}

/// Runs a streamed request: a successful answer's body goes to the core in pieces, each
/// next one read only when the core asks for it (`Step::More`), so a table-sized answer
/// never sits in memory; anything else ends as `perform` ends it. The request's timeout
/// bounds the whole answer, the waits for the core included.
fn stream(
    agent: &Agent,
    id: HttpId,
    request: &HttpRequest,
    steps: &Receiver<Step>,
    deliver: &(dyn Fn(Input) + Sync),
) {
    let deadline = Instant::now() + Duration::from_millis(request.timeout_ms.max(1));
    let cancelled = || Input::HttpFailed {
        id,
        error: "cancelled: the answer is not wanted any more".to_owned(),
    };
    let response = match call(agent, request) {
        Ok(response) => response,
        Err(error) => {
            return deliver(Input::HttpFailed {
                id,
                error: describe(&error),
            })
        }
    };
    if steps.try_recv() == Ok(Step::Cancel) {
        return deliver(cancelled());
    }
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return deliver(read_whole(id, response));
    }
    let mut body = response.into_body().into_reader();
    loop {
        let piece = match read_piece(&mut body) {
            Ok(piece) => piece,
            Err(error) => {
                return deliver(Input::HttpFailed {
                    id,
                    error: format!("status {status}, body unreadable: {error}"),
                })
            }
        };
        if piece.is_empty() {
            return deliver(Input::HttpDone {
                id,
                status,
                body: Bytes::new(),
            });
        }
        deliver(Input::HttpChunk {
            id,
            bytes: Bytes::from(piece),
        });
        match steps.recv_deadline(deadline) {
            Ok(Step::More) => {}
            // Dropping the reader closes the connection: Feldera stops the query.
            Ok(Step::Cancel) | Err(RecvTimeoutError::Disconnected) => return deliver(cancelled()),
            Err(RecvTimeoutError::Timeout) => {
                return deliver(Input::HttpFailed {
                    id,
                    error: format!(
                        "timed out: the answer was not read to its end within {} ms",
                        request.timeout_ms
                    ),
                })
            }
        }
    }
}

/// Reads the next piece: at least `STREAM_PIECE_MIN` bytes unless the body ends first, at
/// most `STREAM_PIECE_MAX`; empty at the end of the body.
fn read_piece(body: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut piece = vec![0; STREAM_PIECE_MAX];
    let mut filled = 0;
    while filled < STREAM_PIECE_MIN {
        match body.read(&mut piece[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    piece.truncate(filled);
    Ok(piece)
}

/// The agent all requests share: statuses are answers, redirects are not followed. An
/// `https://` Feldera is checked against `roots` when given (`FELDERA_CA_CERT`: a private
/// CA), otherwise against the built-in public roots.
pub fn new_agent(roots: Option<&[CertificateDer<'static>]>) -> Agent {
    let mut config = Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0);
    if let Some(roots) = roots {
        let certificates: Vec<Certificate<'static>> = roots
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect();
        let tls = TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&certificates))
            .build();
        config = config.tls_config(tls);
    }
    config.build().new_agent()
}

/// Runs one request to its end and says how it ended.
pub fn perform(agent: &Agent, id: HttpId, request: &HttpRequest) -> Input {
    match call(agent, request) {
        Ok(response) => read_whole(id, response),
        Err(error) => Input::HttpFailed {
            id,
            error: describe(&error),
        },
    }
}

/// Sends the request and waits for the answer's head.
fn call(agent: &Agent, request: &HttpRequest) -> Result<Response<ureq::Body>, ureq::Error> {
    let timeout = Some(Duration::from_millis(request.timeout_ms.max(1)));
    match request.method {
        Method::Get => {
            let mut builder = agent.get(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(*name, value.as_str());
            }
            builder.config().timeout_global(timeout).build().call()
        }
        Method::Post => {
            let mut builder = agent.post(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(*name, value.as_str());
            }
            builder
                .config()
                .timeout_global(timeout)
                .build()
                .send(&request.body[..])
        }
    }
}

/// Reads a whole answer (up to `MAX_RESPONSE_BYTES`).
fn read_whole(id: HttpId, mut response: Response<ureq::Body>) -> Input {
    let status = response.status().as_u16();
    match response
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE_BYTES)
        .read_to_vec()
    {
        Ok(body) => Input::HttpDone {
            id,
            status,
            body: Bytes::from(body),
        },
        Err(error) => Input::HttpFailed {
            id,
            error: format!("status {status}, body unreadable: {error}"),
        },
    }
}

/// The text of a failed request. A TLS failure is spelled out with its likely fix;
/// anything else is ureq's own text (which names no header, so never the API key).
pub fn describe(error: &ureq::Error) -> String {
    let tls = match error {
        ureq::Error::Rustls(e) => Some(e),
        // A handshake failure reaches ureq as the I/O error rustls wraps it in.
        ureq::Error::Io(e) => e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    match tls {
        Some(e) => describe_tls(e),
        None => error.to_string(),
    }
}

fn describe_tls(error: &rustls::Error) -> String {
    let rustls::Error::InvalidCertificate(reason) = error else {
        return format!(
            "TLS handshake with Feldera failed: {error} (an https:// FELDERA_URL needs a \
             server speaking TLS on that port)"
        );
    };
    match reason {
        CertificateError::UnknownIssuer => format!(
            "Feldera's TLS certificate is not trusted: no trusted CA signed it ({error}); \
             if a private CA signed it, set FELDERA_CA_CERT to a PEM file holding that CA"
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "Feldera's TLS certificate does not name the host of FELDERA_URL ({error}); \
                 connect by a name the certificate holds"
            )
        }
        _ => format!("Feldera's TLS certificate was refused ({error})"),
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
