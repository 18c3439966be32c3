//! Classification of every Feldera answer slotline receives.
//!
//! Owns the mapping from (HTTP status, body) or a transport failure to an outcome the
//! pipeline acts on: accepted / complete / transient (retry) / restarted (replay) / fatal
//! (exit). Every error keeps Feldera's `message` and `error_code`; a body that is not JSON
//! is quoted by a bounded prefix. Never retries and never decides what a failure means for
//! acknowledgements: that is the pipeline's job.
//!
//! The rules, the same for every endpoint (docs/feldera.md lists each answer):
//! - no answer, 408, 502, 503 and 504 are transient: the pipeline is starting, in standby,
//!   awaiting approval, paused past the manager's proxy timeout, suspended or not deployed,
//!   and may come back; the error carries a hint saying which, and what an operator can do;
//! - 410 is never fatal: `Terminating` (the pipeline is shutting down, on every endpoint)
//!   is transient, and on completion polls `PipelineRestarted` and
//!   `UnknownEndpointInCompletionToken` mean the token no longer names anything Feldera
//!   can check ([`CompletionOutcome::Restarted`]). Nothing was acknowledged, so ending the
//!   session and replaying from the slot is always safe;
//! - 500 is fatal with what the operator must do (a failed pipeline stays failed until it
//!   is restarted), except the manager's `PipelineInteractionInvalidResponse`, a lost
//!   answer (transient);
//! - every other non-2xx status is fatal.

use crate::schema::program::{parse_pipeline, PipelineInfo, SchemaError};
use serde_json::Value;
use std::fmt;

/// What came back for a request: an HTTP answer, or no answer at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    Answered {
        status: u16,
        body: &'a [u8],
    },
    /// Connection refused or reset, TLS failure, timeout: the shell's description.
    Failed {
        error: &'a str,
    },
}

/// Most bytes of a body quoted in an error.
pub const BODY_PREFIX_BYTES: usize = 200;
/// Most characters of a Feldera message kept in an error.
pub(super) const MESSAGE_CHARS: usize = 1_000;
/// Parse-error descriptions kept in a summary, and characters kept of each.
const PARSE_ERRORS_KEPT: usize = 3;
const DESCRIPTION_CHARS: usize = 300;
/// Longest completion token accepted (Feldera's are ~100 characters of base64).
const TOKEN_MAX_BYTES: usize = 4_096;

/// The first rows of a 400 `ParseErrors` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseErrorSummary {
    pub num_errors: u64,
    /// At most three descriptions, each prefixed with its event number when Feldera gave one.
    pub first: Vec<String>,
}

/// A failed request, as Feldera (or the transport) described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FelderaError {
    /// `None` when no HTTP answer arrived.
    pub status: Option<u16>,
    pub message: String,
    pub error_code: Option<String>,
    pub parse_errors: Option<ParseErrorSummary>,
    /// What the answer means for the pipeline and what an operator can do, when slotline
    /// knows (`None` for answers that speak for themselves).
    pub hint: Option<&'static str>,
}

impl FelderaError {
    pub(super) fn transport(error: &str) -> FelderaError {
        FelderaError {
            status: None,
            message: format!("no answer from Feldera: {}", truncate(error, MESSAGE_CHARS)),
            error_code: None,
            parse_errors: None,
            hint: None,
        }
    }

    pub(super) fn unexpected(status: u16, what: &str, body: &[u8]) -> FelderaError {
        FelderaError {
            status: Some(status),
            message: format!("{what}; body starts: {}", body_prefix(body)),
            error_code: None,
            parse_errors: None,
            hint: None,
        }
    }
}

impl fmt::Display for FelderaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(status) = self.status {
            write!(f, "HTTP {status} ")?;
        }
        if let Some(code) = &self.error_code {
            write!(f, "{code}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(summary) = &self.parse_errors {
            write!(f, " ({} parse error(s)", summary.num_errors)?;
            if !summary.first.is_empty() {
                write!(f, ", first: {}", summary.first.join("; "))?;
            }
            f.write_str(")")?;
        }
        if let Some(hint) = self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for FelderaError {}

/// Quotes the start of a body: at most [`BODY_PREFIX_BYTES`], decoded lossily, escaped so
/// that it stays on one log line.
pub fn body_prefix(body: &[u8]) -> String {
    if body.is_empty() {
        return "(empty)".to_owned();
    }
    let cut = body.get(..BODY_PREFIX_BYTES).unwrap_or(body);
    let more = if cut.len() < body.len() { "..." } else { "" };
    format!("\"{}\"{more}", String::from_utf8_lossy(cut).escape_debug())
}

pub(super) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}...", text.get(..end).unwrap_or(text)),
        None => text.to_owned(),
    }
}

pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 502 | 503 | 504)
}

pub(super) fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// Reads Feldera's error body (`{"message", "error_code", "details"}`); anything else is
/// quoted.
pub fn error_from(status: u16, body: &[u8]) -> FelderaError {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
        return FelderaError::unexpected(status, "not a Feldera error body", body);
    };
    let message = match object.get("message") {
        Some(Value::String(message)) => truncate(message, MESSAGE_CHARS),
        _ => return FelderaError::unexpected(status, "error body without `message`", body),
    };
    let error_code = object
        .get("error_code")
        .and_then(Value::as_str)
        .map(|code| truncate(code, 100));
    let parse_errors = match error_code.as_deref() {
        Some("ParseErrors") => object.get("details").map(summarise_parse_errors),
        _ => None,
    };
    let hint = hint_for(status, error_code.as_deref());
    FelderaError {
        status: Some(status),
        message,
        error_code,
        parse_errors,
        hint,
    }
}

/// What an error answer means beyond its message: the pipeline state behind it and what an
/// operator can do. Answers whose message already says it (`PipelineUnavailable`,
/// `PipelineRestarted`) get none. Codes are Feldera's (the pipeline's `PipelineError`/`ControllerError`
/// and the manager's `RunnerError`); see docs/feldera.md.
fn hint_for(status: u16, error_code: Option<&str>) -> Option<&'static str> {
    let hint = match (status, error_code?) {
        (503, "Initializing") => {
            "the pipeline is starting, replaying or in standby; slotline retries with backoff"
        }
        (503, "AwaitingApproval") => {
            "the pipeline waits for an operator to approve bootstrapping its changed program \
             (POST /v0/pipelines/<name>/approve); slotline retries with backoff meanwhile"
        }
        (503, "Suspended") => {
            "the pipeline was suspended; once it is Stopped an operator must start it again \
             (POST /v0/pipelines/<name>/start), slotline retries with backoff until \
             NO_PROGRESS_TIMEOUT_SECS"
        }
        (503, "PipelineInteractionNotDeployed") => {
            "the pipeline is not deployed: stopped (start it), stopping or suspended (start \
             it once it is Stopped) or still provisioning (wait); slotline retries with \
             backoff until NO_PROGRESS_TIMEOUT_SECS"
        }
        (503, "PipelineInteractionUnreachable") => {
            "the pipeline did not answer the manager in time (busy, or paused: a paused \
             pipeline takes no input until resumed); slotline retries with backoff"
        }
        (410, "Terminating") => {
            "the pipeline is shutting down; nothing was acknowledged, slotline reconnects and \
             replays from the slot"
        }
        (410, "UnknownEndpointInCompletionToken") => {
            "the input endpoint of the token was removed; nothing was acknowledged, slotline \
             reconnects and replays from the slot"
        }
        (400, "IncarnationUuidMismatch") => {
            "the pipeline process restarted since the checkpoint was requested; what no \
             checkpoint holds may be lost"
        }
        (501, "EnterpriseFeature") => {
            "this Feldera edition lacks the feature (checkpoints and fault tolerance need \
             Feldera's enterprise edition)"
        }
        (500, "InitializationError") => {
            "the pipeline failed to initialize; fix its program or configuration and start it \
             again, then restart slotline"
        }
        (500, "PipelineInteractionInvalidResponse") => {
            "the manager lost the pipeline's answer; slotline retries with backoff"
        }
        (500, _) => {
            "the pipeline failed (its deployment_error in GET /v0/pipelines/<name> says why); \
             an operator must restart it, then restart slotline"
        }
        _ => return None,
    };
    Some(hint)
}

fn summarise_parse_errors(details: &Value) -> ParseErrorSummary {
    let errors = details.get("errors").and_then(Value::as_array);
    let listed = errors.map_or(0, Vec::len) as u64;
    let num_errors = details
        .get("num_errors")
        .and_then(Value::as_u64)
        .unwrap_or(listed);
    let first = errors
        .into_iter()
        .flatten()
        .take(PARSE_ERRORS_KEPT)
        .map(|error| {
            let description = error
                .get("description")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            let description = truncate(&description, DESCRIPTION_CHARS);
            match error.get("event_number").and_then(Value::as_u64) {
                Some(n) => format!("event {n}: {description}"),
                None => description,
            }
        })
        .collect();
    ParseErrorSummary { num_errors, first }
}

/// The common split of a failed reply, the same for every endpoint.
pub(super) enum Failure {
    Transient(FelderaError),
    /// 410 `PipelineRestarted` or `UnknownEndpointInCompletionToken`: a completion token
    /// names an incarnation or endpoint that is gone. Other endpoints treat it as transient.
    TokenGone(FelderaError),
    Fatal(FelderaError),
}

pub(super) fn failure(status: u16, body: &[u8]) -> Failure {
    let error = error_from(status, body);
    let code = error.error_code.as_deref();
    match status {
        410 if matches!(
            code,
            Some("PipelineRestarted" | "UnknownEndpointInCompletionToken")
        ) =>
        {
            Failure::TokenGone(error)
        }
        410 => Failure::Transient(error),
        500 if code == Some("PipelineInteractionInvalidResponse") => Failure::Transient(error),
        _ if is_transient_status(status) => Failure::Transient(error),
        _ => Failure::Fatal(error),
    }
}

impl Failure {
    /// For endpoints without a token: a gone token context is one more reason to end the
    /// session.
    pub(super) fn transient_or_fatal(self) -> Result<FelderaError, FelderaError> {
        match self {
            Failure::Transient(e) | Failure::TokenGone(e) => Ok(e),
            Failure::Fatal(e) => Err(e),
        }
    }
}

/// Answer to `POST .../ingress/{table}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IngressOutcome {
    /// Parsed and buffered (not yet processed): wait for the token's completion.
    Accepted { token: String },
    /// No answer, a retryable status or 410 `Terminating`. The data may or may not have
    /// been ingested (Feldera's proxy gives 503 after 30 s even when the pipeline took it):
    /// end the session and resend.
    Transient(FelderaError),
    /// 400 `ParseErrors` (the valid lines were still ingested), 404 unknown table or
    /// pipeline, 429 too many endpoints, 500 failed pipeline, authentication, and bodies
    /// slotline cannot read.
    Fatal(FelderaError),
}

pub fn classify_ingress(reply: Reply<'_>) -> IngressOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return IngressOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => IngressOutcome::Transient(e),
            Err(e) => IngressOutcome::Fatal(e),
        };
    }
    let token = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("token").and_then(Value::as_str).map(str::to_owned));
    match token {
        Some(token) if !token.is_empty() && token.len() <= TOKEN_MAX_BYTES => {
            IngressOutcome::Accepted { token }
        }
        _ => IngressOutcome::Fatal(FelderaError::unexpected(
            status,
            "ingress succeeded without a usable completion token (expected {\"token\": \"...\"}; \
             Feldera too old for completion tokens?)",
            body,
        )),
    }
}

/// Answer to `GET .../completion_status?token=...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompletionOutcome {
    /// Everything up to the token is processed and written to every output connector.
    Complete {
        step: Option<u64>,
    },
    InProgress,
    /// 410 `PipelineRestarted` (the token is from an earlier run) or
    /// `UnknownEndpointInCompletionToken` (its input endpoint was removed): what it covered
    /// may be lost. Do not acknowledge; reconnect and replay.
    Restarted(FelderaError),
    Transient(FelderaError),
    Fatal(FelderaError),
}

pub fn classify_completion(reply: Reply<'_>) -> CompletionOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return CompletionOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return match failure(status, body) {
            Failure::TokenGone(e) => CompletionOutcome::Restarted(e),
            Failure::Transient(e) => CompletionOutcome::Transient(e),
            Failure::Fatal(e) => CompletionOutcome::Fatal(e),
        };
    }
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let state = parsed
        .as_ref()
        .and_then(|v| v.get("status"))
        .and_then(Value::as_str);
    let step = parsed
        .as_ref()
        .and_then(|v| v.get("step"))
        .and_then(Value::as_u64);
    match state {
        Some(s) if s.eq_ignore_ascii_case("complete") => CompletionOutcome::Complete { step },
        Some(s) if s.eq_ignore_ascii_case("inprogress") => CompletionOutcome::InProgress,
        _ => CompletionOutcome::Fatal(FelderaError::unexpected(
            status,
            "completion status is neither \"complete\" nor \"inprogress\"",
            body,
        )),
    }
}

/// Answer to `GET /v0/pipelines/{p}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipelineOutcome {
    Ready(PipelineInfo),
    /// The program has not compiled (yet): there is no schema to check routes against.
    NotCompiled {
        program_status: Option<String>,
    },
    /// The answer arrived but its schema cannot be read.
    BadSchema(SchemaError),
    Transient(FelderaError),
    /// 404 unknown pipeline, authentication, ...
    Fatal(FelderaError),
}

pub fn classify_pipeline(reply: Reply<'_>) -> PipelineOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return PipelineOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => PipelineOutcome::Transient(e),
            Err(e) => PipelineOutcome::Fatal(e),
        };
    }
    match parse_pipeline(body) {
        Ok(info) => PipelineOutcome::Ready(info),
        Err(SchemaError::NotCompiled { program_status }) => {
            PipelineOutcome::NotCompiled { program_status }
        }
        Err(error) => PipelineOutcome::BadSchema(error),
    }
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
