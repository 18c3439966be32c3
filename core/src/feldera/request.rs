//! Every HTTP request slotline makes against Feldera, built from a base URL and a pipeline
//! name.
//!
//! Owns URL spelling (percent-encoding of pipeline, table, token and SQL; one spelling per
//! table, so Feldera creates one ingress endpoint per table) and the `Authorization` header.
//! Never sends anything and never assigns request ids: the pipeline wraps these requests
//! with its own ids and the shells execute them.

use crate::schema::names::percent_encode_component;
use crate::schema::Name;
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request for a shell to execute as it is.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
    /// Give up after this long and report a transport failure.
    pub timeout_ms: u64,
    /// Deliver a successful answer's body in pieces, one per `Command::HttpRead`
    /// (`Input::HttpChunk`), instead of whole: a table scan's answer can be larger than
    /// memory should hold.
    pub streamed: bool,
}

impl HttpRequest {
    /// A header's value by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Debug for HttpRequest {
    /// Never prints the API key, nor the body (which may be megabytes of rows).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| {
                if name.eq_ignore_ascii_case("authorization") {
                    (*name, "<redacted>")
                } else {
                    (*name, value.as_str())
                }
            })
            .collect();
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &redact_userinfo(&self.url))
            .field("headers", &headers)
            .field("body_bytes", &self.body.len())
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

/// `url` as a message, a log line or `Debug` may show it: the user info of its authority
/// (`user:password@`) replaced by `***@`. The configuration refuses a `FELDERA_URL` with user
/// info, but a URL can reach a printer by other paths (a library caller, the fuzzer), and
/// user info is a password or a token (the user name too: some services take the token
/// there), so all of it is hidden. A password may hold a raw `/` or `@`: everything up to the
/// last `@` before any query or fragment counts as user info (generated paths
/// percent-encode `@`, so this hides nothing else of slotline's own URLs).
/// `http://user:pw@host:8080/p` is shown as `http://***@host:8080/p`.
pub fn redact_userinfo(url: &str) -> Cow<'_, str> {
    // Without a scheme (`user:password@host`, refused as no URL), the text is all authority.
    let start = url
        .find("://")
        .map_or(0, |scheme_end| scheme_end + "://".len());
    let rest = &url[start..];
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => Cow::Owned(format!("{}***{}", &url[..start], &rest[at..])),
        None => Cow::Borrowed(url),
    }
}

/// `FELDERA_URL`, `FELDERA_PIPELINE` or `FELDERA_API_KEY` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointError {
    pub variable: &'static str,
    pub problem: String,
    pub accepted: &'static str,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}; accepted: {}",
            self.variable, self.problem, self.accepted
        )
    }
}

impl std::error::Error for EndpointError {}

/// How long slotline waits for a request Feldera's manager forwards to the pipeline and
/// that may take long (ingress, `start_transaction`, `commit_transaction`): the manager
/// gives up on an ingress request after 30 s, and on a transaction request after 10 s, or
/// 20 s when it sends it once more (docs/feldera.md, "The manager in front of the
/// pipeline"), and answers 503, so slotline waits a little longer to hear that answer
/// rather than cut the request off itself.
pub const FORWARDED_TIMEOUT_MS: u64 = 35_000;

/// How long slotline waits for a question's answer (completion, stats, the pipeline's
/// schema, a checkpoint's status).
pub const QUESTION_TIMEOUT_MS: u64 = 10_000;

/// One Feldera pipeline's API: builds every request slotline makes against it.
#[derive(Clone, PartialEq, Eq)]
pub struct FelderaEndpoint {
    /// Without trailing slash.
    base_url: String,
    pipeline: String,
    /// `{base_url}/v0/pipelines/{encoded pipeline}`.
    pipeline_url: String,
    /// `Bearer <key>`, when a key is configured.
    authorization: Option<String>,
}

impl fmt::Debug for FelderaEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FelderaEndpoint")
            .field("pipeline_url", &redact_userinfo(&self.pipeline_url))
            .field(
                "api_key",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl FelderaEndpoint {
    pub fn new(
        base_url: &str,
        pipeline: &str,
        api_key: Option<&str>,
    ) -> Result<FelderaEndpoint, EndpointError> {
        let base_url = check_base_url(base_url)?;
        if pipeline.is_empty() {
            return Err(EndpointError {
                variable: "FELDERA_PIPELINE",
                problem: "the pipeline name is empty".into(),
                accepted: "the name of an existing Feldera pipeline",
            });
        }
        let authorization = match api_key {
            None => None,
            Some(key) if key.is_empty() || key.chars().any(|c| c.is_control() || c == ' ') => {
                return Err(EndpointError {
                    variable: "FELDERA_API_KEY",
                    // Never echo the key itself.
                    problem: "the API key is empty or contains spaces or control characters".into(),
                    accepted:
                        "a Feldera API key (printable characters, no spaces), or leave it unset",
                });
            }
            Some(key) => Some(format!("Bearer {key}")),
        };
        let pipeline_url = format!(
            "{base_url}/v0/pipelines/{}",
            percent_encode_component(pipeline)
        );
        Ok(FelderaEndpoint {
            base_url,
            pipeline: pipeline.to_owned(),
            pipeline_url,
            authorization,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Where requests go, for messages about an unreachable Feldera: scheme, host and port
    /// (the scheme's default port spelled out), never a path, user or key.
    pub fn origin(&self) -> String {
        let (scheme, rest) = self.base_url.split_once("://").unwrap_or(("http", ""));
        let authority = rest.split('/').next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let has_port = host_port.rsplit_once(':').is_some_and(|(host, port)| {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.starts_with('[') || host.ends_with(']'))
        });
        let scheme = scheme.to_ascii_lowercase();
        if has_port {
            format!("{scheme}://{host_port}")
        } else {
            let port = if scheme == "https" { 443 } else { 80 };
            format!("{scheme}://{host_port}:{port}")
        }
    }

    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// `GET /v0/pipelines/{p}`: status and program schema.
    pub fn get_pipeline(&self, timeout_ms: u64) -> HttpRequest {
        self.request(
            Method::Get,
            self.pipeline_url.clone(),
            Bytes::new(),
            timeout_ms,
        )
    }

    /// `GET /v0/pipelines?selector=status`: every pipeline's name and status, without
    /// programs (`pipelines`: asked only to say which pipelines exist).
    pub fn list_pipelines(&self, timeout_ms: u64) -> HttpRequest {
        self.request(
            Method::Get,
            format!("{}/v0/pipelines?selector=status", self.base_url),
            Bytes::new(),
            timeout_ms,
        )
    }

    /// The ingress URL of a table: always this spelling and these parameters, so that
    /// Feldera creates one input endpoint per table (it keys endpoints by table and parser
    /// configuration and allows 100 until it restarts). `lines=single` makes Feldera split
    /// the body at newlines instead of scanning every top-level JSON value: every line
    /// slotline writes is one compact JSON object (docs/feldera.md, "Ingress").
    pub fn ingress_url(&self, table: &Name) -> String {
        format!(
            "{}/ingress/{}?format=json&update_format=insert_delete&lines=single",
            self.pipeline_url,
            table.url_segment()
        )
    }

    /// `POST .../ingress/{table}` with an already encoded NDJSON body.
    pub fn ingress(&self, table: &Name, body: Bytes, timeout_ms: u64) -> HttpRequest {
        let mut request = self.request(Method::Post, self.ingress_url(table), body, timeout_ms);
        request
            .headers
            .push(("Content-Type", "application/json".to_owned()));
        request
    }

    /// `GET .../completion_status?token=...`.
    pub fn completion_status(&self, token: &str, timeout_ms: u64) -> HttpRequest {
        let url = format!(
            "{}/completion_status?token={}",
            self.pipeline_url,
            percent_encode_component(token)
        );
        self.request(Method::Get, url, Bytes::new(), timeout_ms)
    }

    /// `GET .../query?sql=...&format=json`: an ad-hoc query answered as NDJSON.
    pub fn query(&self, sql: &str, timeout_ms: u64) -> HttpRequest {
        let url = format!(
            "{}/query?sql={}&format=json",
            self.pipeline_url,
            percent_encode_component(sql)
        );
        self.request(Method::Get, url, Bytes::new(), timeout_ms)
    }

    /// The same ad-hoc query, its answer delivered in pieces (`HttpRequest::streamed`): for
    /// answers as large as a table.
    pub fn query_streamed(&self, sql: &str, timeout_ms: u64) -> HttpRequest {
        let mut request = self.query(sql, timeout_ms);
        request.streamed = true;
        request
    }

    /// `POST .../start_transaction`.
    pub fn start_transaction(&self, timeout_ms: u64) -> HttpRequest {
        let url = format!("{}/start_transaction", self.pipeline_url);
        self.request(Method::Post, url, Bytes::new(), timeout_ms)
    }

    /// `POST .../commit_transaction`.
    pub fn commit_transaction(&self, timeout_ms: u64) -> HttpRequest {
        let url = format!("{}/commit_transaction", self.pipeline_url);
        self.request(Method::Post, url, Bytes::new(), timeout_ms)
    }

    /// `GET .../stats`: the pipeline's statistics, read for
    /// `global_metrics.incarnation_uuid`.
    pub fn stats(&self, timeout_ms: u64) -> HttpRequest {
        let url = format!("{}/stats", self.pipeline_url);
        self.request(Method::Get, url, Bytes::new(), timeout_ms)
    }

    /// `POST .../checkpoint`: asks for a checkpoint; the answer carries its sequence number.
    pub fn checkpoint(&self, timeout_ms: u64) -> HttpRequest {
        let url = format!("{}/checkpoint", self.pipeline_url);
        self.request(Method::Post, url, Bytes::new(), timeout_ms)
    }

    /// `GET .../checkpoint_status`, with `?incarnation_uuid=...` when given: Feldera then
    /// answers 400 `IncarnationUuidMismatch` if the pipeline process is no longer that
    /// incarnation (pipelines before v0.337 ignore the parameter).
    pub fn checkpoint_status(&self, incarnation: Option<&str>, timeout_ms: u64) -> HttpRequest {
        let url = match incarnation {
            Some(uuid) => format!(
                "{}/checkpoint_status?incarnation_uuid={}",
                self.pipeline_url,
                percent_encode_component(uuid)
            ),
            None => format!("{}/checkpoint_status", self.pipeline_url),
        };
        self.request(Method::Get, url, Bytes::new(), timeout_ms)
    }

    fn request(&self, method: Method, url: String, body: Bytes, timeout_ms: u64) -> HttpRequest {
        let mut headers = Vec::with_capacity(2);
        if let Some(auth) = &self.authorization {
            headers.push(("Authorization", auth.clone()));
        }
        HttpRequest {
            method,
            url,
            headers,
            body,
            timeout_ms,
            streamed: false,
        }
    }
}

const BASE_URL_ACCEPTED: &str =
    "http://host[:port][/path] or https://host[:port][/path], without query or fragment";

/// Validates `FELDERA_URL` and drops trailing slashes (with or without, the same URLs).
fn check_base_url(text: &str) -> Result<String, EndpointError> {
    let refuse = |problem: String| EndpointError {
        variable: "FELDERA_URL",
        problem,
        accepted: BASE_URL_ACCEPTED,
    };
    let text = text.trim();
    let shown = redact_userinfo(text);
    let lower = text.to_ascii_lowercase();
    let scheme_len = ["http://", "https://"]
        .iter()
        .find(|scheme| lower.starts_with(**scheme))
        .map(|scheme| scheme.len());
    let Some((scheme, rest)) = scheme_len.and_then(|n| Some((text.get(..n)?, text.get(n..)?)))
    else {
        return Err(refuse(format!(
            "`{shown}` is not an http:// or https:// URL"
        )));
    };
    let rest = rest.trim_end_matches('/');
    if rest.split('/').next().unwrap_or_default().is_empty() {
        return Err(refuse(format!("`{shown}` has no host")));
    }
    if let Some(c) = rest
        .chars()
        .find(|c| matches!(c, '?' | '#') || c.is_whitespace())
    {
        return Err(refuse(format!("`{shown}` contains `{}`", c.escape_debug())));
    }
    Ok(format!("{scheme}{rest}"))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
