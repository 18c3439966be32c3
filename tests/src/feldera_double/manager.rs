//! The pipeline manager in front of the double's pipeline, where slotline can tell it
//! from the pipeline (`crates/pipeline-manager/src/runner/interaction.rs` and
//! `runner/pipeline_automata.rs`; docs/feldera.md, "Against Feldera's own server"):
//!
//! - the deployment: provisioned, or, after a crash, `Stopping` (desired `Stopped`, a
//!   `RunnerCheckError` in `deployment_error`) and 1 s later `Stopped` with the error kept,
//!   until someone starts it; nothing restarts it by itself;
//! - the status check before forwarding: not provisioned answers 503
//!   `PipelineInteractionNotDeployed`, the check reading a cache entry that lives 5 s from the
//!   read that made it and goes whenever the status changes;
//! - the requests forwarded without a body (completion, stats, transactions, checkpoints):
//!   10 s to answer (120 s for `checkpoint`), else 503 `PipelineInteractionUnreachable`;
//!   a failure with a cached status is sent once more, so the pipeline may get it twice.
//!
//! Owns: the deployment status, the cache and the stall. Never builds HTTP answers.

use std::time::{Duration, Instant};

use axum::http::Method;
use serde_json::{json, Value as Json};

/// `RunnerInteraction::PIPELINE_HTTP_REQUEST_TIMEOUT`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// `POST .../checkpoint` (`pipeline_interaction.rs`, `checkpoint_pipeline`).
pub const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(120);
/// `CachedPipelineDescr::CACHE_TTL`.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// How long a crashed pipeline stays `Stopping`: the automaton's period while stopping
/// (`PipelineAutomaton::POLL_PERIOD_STOPPING`), after which the runner's stop is done.
pub const STOPPING_FOR: Duration = Duration::from_millis(1_000);

/// The deployment's resources status (`db/types/resources_status.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resources {
    Provisioned,
    Stopping,
    Stopped,
}

impl Resources {
    pub fn name(self) -> &'static str {
        match self {
            Resources::Provisioned => "Provisioned",
            Resources::Stopping => "Stopping",
            Resources::Stopped => "Stopped",
        }
    }
}

/// How the manager forwards one pipeline endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The manager's own endpoint (`start`): answered from its database, never checked.
    Manager,
    /// `forward_http_request_to_pipeline_by_name`: no body, this long to answer, retried
    /// once after a failure with a cached status.
    Whole(Duration),
    /// `forward_streaming_http_request_to_pipeline_by_name` (ingress, queries): checked,
    /// then passed on once; its timeouts are the endpoint's own.
    Streamed,
}

/// The route of `method` `endpoint` (the path after `/v0/pipelines/{p}/`).
pub fn route(method: &Method, endpoint: &str, request_timeout: Duration) -> Route {
    match (method.as_str(), endpoint) {
        ("POST", "start") => Route::Manager,
        ("POST", "checkpoint") => Route::Whole(CHECKPOINT_TIMEOUT),
        ("POST", "start_transaction" | "commit_transaction")
        | ("GET", "completion_status" | "stats" | "checkpoint_status") => {
            Route::Whole(request_timeout)
        }
        _ => Route::Streamed,
    }
}

/// What the manager knows of the deployment.
#[derive(Debug)]
pub struct ManagerState {
    /// When the process died; `None` while it is provisioned.
    crashed_at: Option<Instant>,
    deployment_error: Option<Json>,
    /// When the cached descriptor was read (`None`: no entry).
    cached_at: Option<Instant>,
    pub request_timeout: Duration,
    /// The pipeline answers no request forwarded whole until then.
    stall_until: Option<Instant>,
}

impl Default for ManagerState {
    fn default() -> ManagerState {
        ManagerState {
            crashed_at: None,
            deployment_error: None,
            cached_at: None,
            request_timeout: REQUEST_TIMEOUT,
            stall_until: None,
        }
    }
}

impl ManagerState {
    pub fn resources(&self, now: Instant) -> Resources {
        match self.crashed_at {
            None => Resources::Provisioned,
            Some(at) if now < at + STOPPING_FOR => Resources::Stopping,
            Some(_) => Resources::Stopped,
        }
    }

    pub fn deployment_error(&self) -> Json {
        self.deployment_error.clone().unwrap_or(Json::Null)
    }

    /// The status check before a forward (`check_pipeline`): whether the status came from
    /// the cache, or the resources status that refuses the request.
    pub fn check(&mut self, now: Instant) -> Result<bool, Resources> {
        let hit = self
            .cached_at
            .is_some_and(|t| now.saturating_duration_since(t) <= CACHE_TTL);
        if !hit {
            self.cached_at = Some(now);
        }
        match self.resources(now) {
            Resources::Provisioned => Ok(hit),
            other => Err(other),
        }
    }

    /// A status changed: the database notification empties the cache. Also what a failure
    /// with a cached status does before the retry.
    pub fn evict(&mut self) {
        self.cached_at = None;
    }

    /// The process died (SIGKILL): the automaton's next look finds it gone.
    pub fn crash(&mut self, now: Instant) {
        self.crashed_at = Some(now);
        self.deployment_error = Some(json!({
            "message": "Pipeline check failed: compute and/or storage resources encountered a \
                        fatal error.\n\nPipeline process exited prematurely with signal: 9 \
                        (SIGKILL)",
            "error_code": "RunnerCheckError",
            "details": {"error": "Pipeline process exited prematurely with signal: 9 (SIGKILL)"},
        }));
        self.evict();
    }

    /// `POST /start` (dismissing the error, the manager's default); refused while stopping
    /// (`validate_resources_desired_status_transition`). `Ok(true)` when a stopped pipeline
    /// starts, `Ok(false)` when it already runs.
    pub fn start(&mut self, now: Instant) -> Result<bool, Resources> {
        match self.resources(now) {
            Resources::Provisioned => Ok(false),
            Resources::Stopping => Err(Resources::Stopping),
            Resources::Stopped => {
                self.crashed_at = None;
                self.deployment_error = None;
                self.evict();
                Ok(true)
            }
        }
    }

    pub fn stall(&mut self, now: Instant, duration: Duration) {
        self.stall_until = Some(now + duration);
    }

    /// When the stall ends, if one lasts at `now`.
    pub fn stalled_until(&self, now: Instant) -> Option<Instant> {
        self.stall_until.filter(|t| *t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_stops_then_a_start_provisions_and_the_cache_lives_five_seconds() {
        let mut m = ManagerState::default();
        let t0 = Instant::now();
        assert_eq!(m.check(t0), Ok(false), "no entry yet");
        assert_eq!(m.check(t0 + Duration::from_secs(5)), Ok(true));
        assert_eq!(
            m.check(t0 + Duration::from_millis(5_001)),
            Ok(false),
            "a hit does not renew the entry"
        );
        m.crash(t0);
        assert_eq!(m.resources(t0), Resources::Stopping);
        assert_eq!(m.start(t0), Err(Resources::Stopping));
        let later = t0 + STOPPING_FOR;
        assert_eq!(m.check(later), Err(Resources::Stopped));
        assert_eq!(m.deployment_error()["error_code"], "RunnerCheckError");
        assert_eq!(m.start(later), Ok(true));
        assert_eq!(m.deployment_error(), Json::Null);
        assert_eq!(m.check(later), Ok(false), "the start emptied the cache");
    }

    #[test]
    fn only_the_requests_without_a_body_are_forwarded_whole() {
        let t = Duration::from_secs(3);
        assert_eq!(route(&Method::GET, "stats", t), Route::Whole(t));
        assert_eq!(
            route(&Method::POST, "commit_transaction", t),
            Route::Whole(t)
        );
        assert_eq!(
            route(&Method::POST, "checkpoint", t),
            Route::Whole(CHECKPOINT_TIMEOUT)
        );
        assert_eq!(route(&Method::POST, "ingress/users", t), Route::Streamed);
        assert_eq!(route(&Method::GET, "query", t), Route::Streamed);
        assert_eq!(route(&Method::POST, "start", t), Route::Manager);
    }
}
