//! The pipeline's lifecycle phase as its HTTP server reports it: while not running, every
//! pipeline endpoint (ingress, completion status, query, transactions) answers with the
//! error Feldera's pipeline gives in that phase; `GET /v0/pipelines/{p}` (the manager's
//! database) still answers and shows the phase.
//!
//! Owns: the phase names, their answers and their runtime status. Never holds rows.

use axum::http::StatusCode;

/// Error code of a failed pipeline unless another is asked for.
pub const DEFAULT_FAILED_CODE: &str = "StepError";

/// Where the simulated pipeline is in its lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// Starting or replaying: 503 `Initializing`.
    Initializing,
    /// Standby (waiting to take over): the pipeline is still initializing, 503 `Initializing`.
    Standby,
    /// Waiting for approval of a changed program: also 503 `Initializing` from the endpoints
    /// (the pipeline's status says `AwaitingApproval`).
    AwaitingApproval,
    /// Suspended to storage: 503 `Suspended`.
    Suspended,
    /// Shutting down: 410 `Terminating`.
    Terminating,
    /// Initialization failed: 500 `InitializationError`.
    InitializationError,
    /// Failed while running: 500 with the controller error's code.
    Failed {
        error_code: String,
    },
}

impl Phase {
    /// Parses a control request's phase name.
    pub fn parse(name: &str, error_code: Option<&str>) -> Result<Phase, String> {
        Ok(match name {
            "running" => Phase::Running,
            "initializing" => Phase::Initializing,
            "standby" => Phase::Standby,
            "awaiting_approval" => Phase::AwaitingApproval,
            "suspended" => Phase::Suspended,
            "terminating" => Phase::Terminating,
            "initialization_error" => Phase::InitializationError,
            "failed" => Phase::Failed {
                error_code: error_code.unwrap_or(DEFAULT_FAILED_CODE).to_string(),
            },
            other => {
                return Err(format!(
                    "phase `{other}`: expected running, initializing, standby, \
                     awaiting_approval, suspended, terminating, initialization_error or failed"
                ))
            }
        })
    }

    /// The answer every pipeline endpoint gives in this phase (`None` while running).
    pub fn answer(&self) -> Option<(StatusCode, String, String)> {
        let (status, code, message) = match self {
            Phase::Running => return None,
            Phase::Initializing | Phase::Standby | Phase::AwaitingApproval => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Initializing",
                "Operation failed because the pipeline has not finished initializing.",
            ),
            Phase::Suspended => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Suspended",
                "Operation failed because the pipeline has been suspended.",
            ),
            Phase::Terminating => (
                StatusCode::GONE,
                "Terminating",
                "Operation failed because the pipeline is shutting down.",
            ),
            Phase::InitializationError => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InitializationError",
                "Operation failed because the pipeline failed to initialize. Error details: \
                 injected by the Feldera double.",
            ),
            Phase::Failed { error_code } => {
                return Some((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    error_code.clone(),
                    "the pipeline failed (injected by the Feldera double)".to_string(),
                ))
            }
        };
        Some((status, code.to_string(), message.to_string()))
    }

    /// `deployment_runtime_status` of the pipeline GET answer.
    pub fn runtime_status(&self) -> &'static str {
        match self {
            Phase::Running => "Running",
            Phase::Initializing => "Initializing",
            Phase::Standby => "Standby",
            Phase::AwaitingApproval => "AwaitingApproval",
            Phase::Suspended => "Suspended",
            Phase::Terminating => "Stopping",
            Phase::InitializationError | Phase::Failed { .. } => "Unavailable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_answers_as_feldera_does() {
        let answer = |name: &str| {
            Phase::parse(name, None)
                .unwrap()
                .answer()
                .map(|(s, c, _)| (s.as_u16(), c))
        };
        assert_eq!(answer("running"), None);
        assert_eq!(answer("standby"), Some((503, "Initializing".into())));
        assert_eq!(
            answer("awaiting_approval"),
            Some((503, "Initializing".into()))
        );
        assert_eq!(answer("suspended"), Some((503, "Suspended".into())));
        assert_eq!(answer("terminating"), Some((410, "Terminating".into())));
        assert_eq!(
            answer("initialization_error"),
            Some((500, "InitializationError".into()))
        );
        assert_eq!(answer("failed"), Some((500, "StepError".into())));
        assert!(Phase::parse("asleep", None).is_err());
    }
}
