//! What an operator must do for a pipeline that is not running, by the status the
//! pipeline manager reports (`deployment_status` and `deployment_desired_status` of
//! `GET /v0/pipelines/{name}`; the states and the action each needs are in
//! docs/feldera.md, "Pipeline states").
//!
//! Owns: the one place that turns a status into advice. `slotline check` prints it and a
//! session start logs it. Never decides anything: a pipeline that is not running makes
//! Feldera's endpoints answer 503, and the failure policy handles those.

/// What makes a pipeline in some status take input again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// `Running`: nothing to do.
    None,
    /// `Stopped`: `POST .../start`.
    Start,
    /// `Paused`: `POST .../resume` (`/start` leaves a paused pipeline paused).
    Resume,
    /// `AwaitingApproval`: `POST .../approve`, to bootstrap its changed program.
    Approve,
    /// `Standby`: `POST .../activate`.
    Activate,
    /// `Stopping`, `Suspended`, or any status while the desired one is `Stopped` or
    /// `Suspended`: the manager refuses `/start` until it is `Stopped`.
    WaitThenStart,
    /// A status the pipeline leaves on its own (provisioning, initializing, replaying,
    /// bootstrapping, unavailable, or on its way to the desired status).
    Wait,
    /// A status this slotline does not know (a newer Feldera).
    Unknown,
}

/// The remedy for `status`, given where the operator asked the pipeline to go
/// (`desired`, absent in old managers).
pub fn remedy(status: &str, desired: Option<&str>) -> Remedy {
    let stopping = matches!(desired, Some("Stopped" | "Suspended"));
    match status {
        "Running" => Remedy::None,
        "Stopped" if stopping || desired.is_none() => Remedy::Start,
        "Stopping" | "Suspended" => Remedy::WaitThenStart,
        _ if stopping => Remedy::WaitThenStart,
        // Asked to run (or pause, or stand by) and not there yet: it is on its way.
        "Stopped" => Remedy::Wait,
        "Paused" if desired == Some("Running") => Remedy::Wait,
        "Paused" => Remedy::Resume,
        "AwaitingApproval" => Remedy::Approve,
        "Standby" if desired == Some("Running") || desired == Some("Paused") => Remedy::Wait,
        "Standby" => Remedy::Activate,
        "Provisioning"
        | "Initializing"
        | "Bootstrapping"
        | "ConcurrentBootstrapping"
        | "Synchronizing"
        | "Replaying"
        | "Coordination"
        | "Unavailable" => Remedy::Wait,
        _ => Remedy::Unknown,
    }
}

/// The advice for a pipeline in `status` (`None` while it runs): what is going on and what
/// to do, naming the request. `url` is the Feldera base URL as it may be printed (no user
/// info).
pub fn advice(status: &str, desired: Option<&str>, url: &str, pipeline: &str) -> Option<String> {
    let post = |action: &str| format!("POST {url}/v0/pipelines/{pipeline}/{action}");
    let text = match remedy(status, desired) {
        Remedy::None => return None,
        Remedy::Start => format!("start it ({}, or from the Feldera console)", post("start")),
        Remedy::Resume => format!(
            "resume it ({}, or from the Feldera console); /start does not resume a paused pipeline",
            post("resume")
        ),
        Remedy::Approve => format!(
            "its program changed since its checkpoint and it waits for approval to bootstrap the \
             changed views: approve it ({}, or from the Feldera console)",
            post("approve")
        ),
        Remedy::Activate => format!(
            "it is a standby following another pipeline's checkpoints: activate it ({})",
            post("activate")
        ),
        Remedy::WaitThenStart => format!(
            "it is being stopped (desired status {}); Feldera refuses /start until it is Stopped: \
             wait for that, then start it ({})",
            desired.unwrap_or("Stopped"),
            post("start")
        ),
        Remedy::Wait => match desired {
            Some(desired) if desired != status => format!(
                "wait: it is on its way to {desired} and gets there on its own (slotline retries meanwhile)"
            ),
            _ => "wait: Feldera leaves this state on its own (slotline retries meanwhile); \
                  if it lasts, see the pipeline's deployment_error and logs"
                .to_owned(),
        },
        Remedy::Unknown => format!(
            "make it Running ({} for a stopped pipeline, {} for a paused one)",
            post("start"),
            post("resume")
        ),
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://f:8080";

    fn says(status: &str, desired: Option<&str>) -> String {
        advice(status, desired, URL, "p").unwrap_or_else(|| "-".to_owned())
    }

    #[test]
    fn running_needs_nothing() {
        assert_eq!(remedy("Running", Some("Running")), Remedy::None);
        assert_eq!(advice("Running", None, URL, "p"), None);
    }

    #[test]
    fn stopped_is_started() {
        assert_eq!(remedy("Stopped", Some("Stopped")), Remedy::Start);
        assert_eq!(remedy("Stopped", None), Remedy::Start);
        assert!(
            says("Stopped", Some("Stopped")).contains("POST http://f:8080/v0/pipelines/p/start")
        );
    }

    #[test]
    fn stopped_on_its_way_up_is_waited_for() {
        assert_eq!(remedy("Stopped", Some("Running")), Remedy::Wait);
        assert!(says("Stopped", Some("Running")).starts_with("wait: it is on its way to Running"));
    }

    #[test]
    fn paused_is_resumed_not_started() {
        assert_eq!(remedy("Paused", Some("Paused")), Remedy::Resume);
        let advice = says("Paused", Some("Paused"));
        assert!(
            advice.contains("POST http://f:8080/v0/pipelines/p/resume"),
            "{advice}"
        );
        assert!(!advice.contains("/p/start"), "{advice}");
    }

    #[test]
    fn paused_while_resuming_is_waited_for() {
        assert_eq!(remedy("Paused", Some("Running")), Remedy::Wait);
    }

    #[test]
    fn awaiting_approval_is_approved() {
        assert_eq!(remedy("AwaitingApproval", Some("Running")), Remedy::Approve);
        assert!(says("AwaitingApproval", Some("Running")).contains("/v0/pipelines/p/approve"));
    }

    #[test]
    fn standby_is_activated() {
        assert_eq!(remedy("Standby", Some("Standby")), Remedy::Activate);
        assert!(says("Standby", Some("Standby")).contains("/v0/pipelines/p/activate"));
    }

    #[test]
    fn standby_asked_to_run_is_waited_for() {
        assert_eq!(remedy("Standby", Some("Running")), Remedy::Wait);
    }

    #[test]
    fn stopping_is_waited_for_then_started() {
        assert_eq!(remedy("Stopping", Some("Stopped")), Remedy::WaitThenStart);
        let advice = says("Stopping", Some("Stopped"));
        assert!(
            advice.contains("refuses /start until it is Stopped"),
            "{advice}"
        );
        assert!(advice.contains("/v0/pipelines/p/start"), "{advice}");
    }

    #[test]
    fn suspended_is_waited_for_then_started() {
        assert_eq!(
            remedy("Suspended", Some("Suspended")),
            Remedy::WaitThenStart
        );
        assert!(says("Suspended", Some("Suspended")).contains("desired status Suspended"));
    }

    #[test]
    fn any_status_asked_to_stop_is_waited_for_then_started() {
        assert_eq!(remedy("Paused", Some("Stopped")), Remedy::WaitThenStart);
        assert_eq!(
            remedy("Initializing", Some("Suspended")),
            Remedy::WaitThenStart
        );
    }

    #[test]
    fn transient_states_are_waited_for() {
        for status in [
            "Provisioning",
            "Initializing",
            "Bootstrapping",
            "ConcurrentBootstrapping",
            "Synchronizing",
            "Replaying",
            "Coordination",
            "Unavailable",
        ] {
            assert_eq!(remedy(status, Some("Running")), Remedy::Wait, "{status}");
            assert!(
                says(status, Some(status)).starts_with("wait: Feldera leaves"),
                "{status}"
            );
        }
    }

    #[test]
    fn an_unknown_status_names_both_common_remedies() {
        assert_eq!(remedy("Hibernating", Some("Running")), Remedy::Unknown);
        let advice = says("Hibernating", None);
        assert!(
            advice.contains("/p/start") && advice.contains("/p/resume"),
            "{advice}"
        );
    }
}
