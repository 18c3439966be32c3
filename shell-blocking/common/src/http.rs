//! The executor of `Command::Http`, shared by both shells: a small pool of threads running
//! requests with one `ureq` agent (connections are reused across requests).
//!
//! Every request ends in exactly one input: any HTTP status, 4xx and 5xx included, is an
//! answer (`HttpDone`); only a failure to get an answer (refused, reset, timed out, body
//! unreadable or over the limit) is `HttpFailed`. The executor never retries, never follows
//! redirects (a 3xx is an answer too) and never reads what the body says: those are the
//! core's decisions. A failure's text says what went wrong in the operator's terms (a
//! refused certificate names `FELDERA_CA_CERT` or `FELDERA_URL`); it never holds a header.

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use rustls::pki_types::CertificateDer;
use rustls::CertificateError;
use slotline_core::feldera::{HttpRequest, Method};
use slotline_core::io::{HttpId, Input};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::Agent;

/// Worker threads of the binaries' pools: requests in flight at once. The core keeps its
/// own limits on concurrent requests; this only has to exceed them.
pub const DEFAULT_WORKERS: usize = 8;

/// The largest response body read into memory. A Feldera answer beyond this (a runaway
/// query) fails the request instead of exhausting memory.
pub const MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;

/// Hands an input to the run loop, from any thread (blocking until it has room).
pub type Deliver = Arc<dyn Fn(Input) + Send + Sync>;

/// A running pool. Dropping it lets the workers finish their current request and end.
#[derive(Debug)]
pub struct HttpPool {
    jobs: Sender<(HttpId, HttpRequest)>,
}

impl HttpPool {
    /// Starts `workers` threads (at least one) running requests with `agent` and
    /// delivering results through `deliver`.
    pub fn start(workers: usize, agent: Agent, deliver: Deliver) -> io::Result<HttpPool> {
        let (jobs, queue) = crossbeam_channel::unbounded::<(HttpId, HttpRequest)>();
        for index in 0..workers.max(1) {
            let (queue, agent, deliver) = (queue.clone(), agent.clone(), deliver.clone());
            std::thread::Builder::new()
                .name(format!("slotline-http-{index}"))
                .spawn(move || work(&queue, &agent, &*deliver))?;
        }
        Ok(HttpPool { jobs })
    }

    /// Queues a request; its result arrives as an input.
    pub fn submit(&self, id: HttpId, request: HttpRequest) {
        // The workers hold the receiver until the pool is dropped, so this cannot fail
        // while `self` exists.
        let _ = self.jobs.send((id, request));
    }
}

fn work(queue: &Receiver<(HttpId, HttpRequest)>, agent: &Agent, deliver: &(dyn Fn(Input) + Sync)) {
    while let Ok((id, request)) = queue.recv() {
        deliver(perform(agent, id, &request));
    }
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
    let timeout = Some(Duration::from_millis(request.timeout_ms.max(1)));
    let result = match request.method {
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
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            return Input::HttpFailed {
                id,
                error: describe(&error),
            }
        }
    };
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
