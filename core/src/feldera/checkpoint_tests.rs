use super::*;
use insta::assert_snapshot;
use serde_json::json;

const UUID: &str = "0198c2d4-7e1a-7b3c-9f00-1a2b3c4d5e6f";

fn answered(status: u16, body: &str) -> Reply<'_> {
    Reply::Answered {
        status,
        body: body.as_bytes(),
    }
}

/// Feldera's error body (`ErrorResponse`).
fn error_body(code: &str, message: &str, details: Value) -> String {
    json!({"message": message, "error_code": code, "details": details}).to_string()
}

/// What the 501 of the community edition's manager says to `POST .../checkpoint`.
fn enterprise_feature() -> String {
    error_body(
        "EnterpriseFeature",
        "Cannot use enterprise-only feature (checkpoint) in Feldera community edition.",
        json!({"feature": "checkpoint"}),
    )
}

/// A `ControllerError::SuspendError`: untagged, so `details` is the `SuspendError` itself.
fn suspend_error(details: Value, message: &str) -> String {
    error_body("SuspendError", message, details)
}

fn mismatch() -> String {
    error_body(
        "IncarnationUuidMismatch",
        &format!(
            "Incarnation UUID mismatch ({UUID} in request, expected 0198c2d9-0000-7000-8000-000000000000)"
        ),
        json!({"requested": UUID, "expected": "0198c2d9-0000-7000-8000-000000000000"}),
    )
}

/// The start of a `/stats` answer as Feldera serializes `ExternalControllerStatus`.
fn stats_body(incarnation: Value) -> String {
    json!({
        "global_metrics": {
            "state": "Running",
            "bootstrap_in_progress": false,
            "rss_bytes": 123_456_789,
            "cpu_msecs": 4_200,
            "uptime_msecs": 60_000,
            "start_time": 1_755_800_000,
            "incarnation_uuid": incarnation,
            "initial_start_time": 1_755_790_000,
            "storage_bytes": 0,
            "buffered_input_records": 0,
            "total_input_records": 10,
            "total_processed_records": 10,
            "pipeline_complete": false
        },
        "suspend_error": null,
        "checkpoint_activity": {"status": "delayed", "reasons": ["Replaying"], "delayed_since": "2026-08-21T10:00:00Z"},
        "permanent_checkpoint_errors": null,
        "inputs": [],
        "outputs": []
    })
    .to_string()
}

fn label<T: std::fmt::Debug>(outcome: T) -> String {
    format!("{outcome:?}")
}

#[test]
fn stats_give_the_incarnation() {
    assert_eq!(
        classify_stats(answered(200, &stats_body(json!(UUID)))),
        StatsOutcome::Incarnation(Incarnation {
            uuid: UUID.to_owned(),
            start_time: Some(1_755_800_000),
            initial_start_time: Some(1_755_790_000),
        })
    );
}

#[test]
fn stats_say_whether_the_process_resumed() {
    let process = |start: Option<u64>, initial: Option<u64>| Incarnation {
        uuid: UUID.to_owned(),
        start_time: start,
        initial_start_time: initial,
    };
    // Resumed from a line of checkpoints an earlier process began.
    assert_eq!(process(Some(200), Some(100)).resumed(), Some(true));
    // Its line began with itself: it resumed from nothing.
    assert_eq!(process(Some(200), Some(200)).resumed(), Some(false));
    // Feldera before initial_start_time: unknown, never guessed.
    assert_eq!(process(Some(200), None).resumed(), None);
    assert_eq!(Incarnation::named(UUID).resumed(), None);
    let fresh = json!({"global_metrics": {"incarnation_uuid": UUID, "start_time": 5, "initial_start_time": 5}});
    let StatsOutcome::Incarnation(read) = classify_stats(answered(200, &fresh.to_string())) else {
        panic!("expected an incarnation");
    };
    assert_eq!(read.resumed(), Some(false));
}

#[test]
fn stats_without_an_incarnation_are_fatal_and_say_why() {
    let StatsOutcome::Fatal(e) = classify_stats(answered(200, &stats_body(Value::Null))) else {
        panic!("expected Fatal");
    };
    assert!(e.message.contains("Feldera too old?"), "{e}");
    assert!(e.message.contains("v0.44"), "{e}");
    let old = json!({"global_metrics": {"state": "Running", "run_uuid": UUID}}).to_string();
    assert!(matches!(
        classify_stats(answered(200, &old)),
        StatsOutcome::Fatal(e) if e.message.contains("incarnation_uuid")
    ));
    for bad in [json!(7), json!(""), json!("a b"), json!("x".repeat(200))] {
        let outcome = classify_stats(answered(200, &stats_body(bad.clone())));
        assert!(
            matches!(&outcome, StatsOutcome::Fatal(e) if e.message.contains("not a UUID string")),
            "{bad}: {outcome:?}"
        );
    }
}

#[test]
fn stats_errors_split_like_every_endpoint() {
    let cases = [
        (
            503,
            error_body("Initializing", "initializing", json!(null)),
            "Transient",
        ),
        (
            410,
            error_body("Terminating", "terminating", json!(null)),
            "Transient",
        ),
        (
            404,
            error_body(
                "UnknownPipelineName",
                "Unknown pipeline name 'p'",
                json!({"pipeline_name": "p"}),
            ),
            "Fatal",
        ),
        (401, "Unauthorized".to_owned(), "Fatal"),
    ];
    for (status, body, expected) in cases {
        let outcome = label(classify_stats(answered(status, &body)));
        assert!(outcome.starts_with(expected), "{status}: {outcome}");
    }
    assert!(matches!(
        classify_stats(Reply::Failed { error: "connection refused" }),
        StatsOutcome::Transient(e) if e.status.is_none()
    ));
}

#[test]
fn malformed_stats_are_fatal_naming_what_was_expected() {
    for body in ["", "<html>", "[]", r#"{"global_metrics": 3}"#] {
        let StatsOutcome::Fatal(e) = classify_stats(answered(200, body)) else {
            panic!("expected Fatal for {body:?}");
        };
        assert!(e.message.contains("incarnation_uuid"), "{body:?}: {e}");
    }
    assert_snapshot!(
        label(classify_stats(answered(200, "<html>"))),
        @r#"Fatal(FelderaError { status: Some(200), message: "the statistics answer is not a JSON object (expected {\"global_metrics\": {\"incarnation_uuid\": \"<uuid>\", ...}, ...}); body starts: \"<html>\"", error_code: None, parse_errors: None, hint: None })"#
    );
}

#[test]
fn checkpoint_requests_give_the_sequence_number_and_incarnation() {
    let body = json!({"checkpoint_sequence_number": 3, "incarnation_uuid": UUID}).to_string();
    assert_eq!(
        classify_checkpoint(answered(200, &body)),
        CheckpointOutcome::Requested {
            seq: 3,
            incarnation: Some(UUID.to_owned())
        }
    );
    // Pipelines before v0.337 send no incarnation; Feldera's own client reads it as None.
    for body in [
        r#"{"checkpoint_sequence_number": 0}"#,
        r#"{"checkpoint_sequence_number": 0, "incarnation_uuid": null}"#,
    ] {
        assert_eq!(
            classify_checkpoint(answered(200, body)),
            CheckpointOutcome::Requested {
                seq: 0,
                incarnation: None
            }
        );
    }
}

#[test]
fn a_feldera_that_cannot_checkpoint_is_unsupported() {
    let outcome = classify_checkpoint(answered(501, &enterprise_feature()));
    let CheckpointOutcome::Unsupported(e) = outcome else {
        panic!("expected Unsupported, got {outcome:?}");
    };
    assert_snapshot!(e, @"HTTP 501 EnterpriseFeature: Cannot use enterprise-only feature (checkpoint) in Feldera community edition. (this Feldera edition lacks the feature (checkpoints and fault tolerance need Feldera's enterprise edition))");
    let permanent = suspend_error(
        json!({"Permanent": ["StorageRequired"]}),
        "The pipeline does not support checkpointing for the following reasons: Storage must be configured",
    );
    assert!(matches!(
        classify_checkpoint(answered(500, &permanent)),
        CheckpointOutcome::Unsupported(e) if e.error_code.as_deref() == Some("SuspendError")
    ));
    let temporary = suspend_error(
        json!({"Temporary": ["Replaying"]}),
        "Checkpointing the pipeline will be temporarily delayed for the following reasons: The pipeline is replaying the journal",
    );
    assert!(matches!(
        classify_checkpoint(answered(500, &temporary)),
        CheckpointOutcome::Transient(_)
    ));
}

#[test]
fn checkpoint_errors_split_like_every_endpoint() {
    let cases = [
        (
            503,
            error_body("Initializing", "initializing", json!(null)),
            "Transient",
        ),
        (
            503,
            error_body("PipelineInteractionNotDeployed", "not deployed", json!({})),
            "Transient",
        ),
        (
            410,
            error_body("Terminating", "terminating", json!(null)),
            "Transient",
        ),
        (
            500,
            error_body("PipelineInteractionInvalidResponse", "lost", json!({})),
            "Transient",
        ),
        (
            500,
            error_body("ControllerExit", "the controller exited", json!(null)),
            "Fatal",
        ),
        (
            404,
            error_body(
                "UnknownPipelineName",
                "Unknown pipeline name 'p'",
                json!({"pipeline_name": "p"}),
            ),
            "Fatal",
        ),
        // A SuspendError body whose details are neither kind: as its status says.
        (500, suspend_error(json!(null), "odd"), "Fatal"),
        (503, suspend_error(json!(null), "odd"), "Transient"),
    ];
    for (status, body, expected) in cases {
        let outcome = label(classify_checkpoint(answered(status, &body)));
        assert!(outcome.starts_with(expected), "{status} {body}: {outcome}");
    }
    assert!(matches!(
        classify_checkpoint(Reply::Failed { error: "timed out" }),
        CheckpointOutcome::Transient(_)
    ));
}

#[test]
fn malformed_checkpoint_answers_are_fatal_naming_what_was_expected() {
    for body in [
        "",
        "ok",
        "[3]",
        r#"{"checkpoint_sequence_number": -1}"#,
        r#"{"checkpoint_sequence_number": "3"}"#,
        r#"{"sequence_number": 3}"#,
        r#"{"checkpoint_sequence_number": 3, "incarnation_uuid": 5}"#,
        r#"{"checkpoint_sequence_number": 3, "incarnation_uuid": ""}"#,
    ] {
        let outcome = classify_checkpoint(answered(200, body));
        assert!(
            matches!(&outcome, CheckpointOutcome::Fatal(e) if e.message.contains("expected {\"checkpoint_sequence_number\"")),
            "{body:?}: {outcome:?}"
        );
    }
}

#[test]
fn checkpoint_status_reports_success_and_failure() {
    let body = json!({"success": null, "failure": null}).to_string();
    assert_eq!(
        classify_checkpoint_status(answered(200, &body)),
        CheckpointStatusOutcome::Status {
            success: None,
            failure: None
        }
    );
    let body = json!({
        "success": 4,
        "failure": {
            "sequence_number": 2,
            "error": "I/O error writing checkpoint: No space left on device",
            "failed_at": "2026-08-21T10:00:00.123456Z"
        }
    })
    .to_string();
    let outcome = classify_checkpoint_status(answered(200, &body));
    assert_eq!(
        outcome,
        CheckpointStatusOutcome::Status {
            success: Some(4),
            failure: Some(CheckpointFailed {
                seq: 2,
                error: "I/O error writing checkpoint: No space left on device".to_owned()
            })
        }
    );
    let CheckpointStatusOutcome::Status {
        failure: Some(failed),
        ..
    } = outcome
    else {
        unreachable!()
    };
    assert!(!failed.unsupported());
}

#[test]
fn a_checkpoint_without_storage_fails_in_the_status_as_unsupported() {
    // Feldera answers the request with 200 and a sequence number, then fails it.
    let body = json!({
        "success": null,
        "failure": {
            "sequence_number": 0,
            "error": "The pipeline does not support checkpointing for the following reasons: Storage must be configured",
            "failed_at": "2026-08-21T10:00:00Z"
        }
    })
    .to_string();
    let CheckpointStatusOutcome::Status {
        success: None,
        failure: Some(failed),
    } = classify_checkpoint_status(answered(200, &body))
    else {
        panic!("expected a failure");
    };
    assert_eq!(failed.seq, 0);
    assert!(failed.unsupported());
}

#[test]
fn long_failure_messages_are_bounded() {
    let body = json!({"success": null, "failure": {"sequence_number": 1, "error": "x".repeat(5_000), "failed_at": "2026-08-21T10:00:00Z"}}).to_string();
    let CheckpointStatusOutcome::Status {
        failure: Some(failed),
        ..
    } = classify_checkpoint_status(answered(200, &body))
    else {
        panic!("expected a failure");
    };
    assert!(
        failed.error.len() <= MESSAGE_CHARS + 3,
        "{}",
        failed.error.len()
    );
}

#[test]
fn another_incarnation_is_a_restart() {
    let outcome = classify_checkpoint_status(answered(400, &mismatch()));
    let CheckpointStatusOutcome::Restarted(e) = outcome else {
        panic!("expected Restarted, got {outcome:?}");
    };
    assert_snapshot!(e, @"HTTP 400 IncarnationUuidMismatch: Incarnation UUID mismatch (0198c2d4-7e1a-7b3c-9f00-1a2b3c4d5e6f in request, expected 0198c2d9-0000-7000-8000-000000000000) (the pipeline process restarted since the checkpoint was requested; what no checkpoint holds may be lost)");
    let restarted = error_body(
        "PipelineRestarted",
        "pipeline restarted",
        json!({"error": "pipeline restarted"}),
    );
    assert!(matches!(
        classify_checkpoint_status(answered(410, &restarted)),
        CheckpointStatusOutcome::Restarted(_)
    ));
}

#[test]
fn checkpoint_status_errors_split_like_every_endpoint() {
    let cases = [
        (
            503,
            error_body("Initializing", "initializing", json!(null)),
            "Transient",
        ),
        (
            410,
            error_body("Terminating", "terminating", json!(null)),
            "Transient",
        ),
        (
            410,
            error_body("UnknownEndpointInCompletionToken", "gone", json!({})),
            "Transient",
        ),
        // Only this code on 400 means another incarnation.
        (
            400,
            error_body("InvalidParam", "bad uuid", json!({})),
            "Fatal",
        ),
        (
            400,
            "Query deserialize error: UUID parsing failed".to_owned(),
            "Fatal",
        ),
        (500, error_body("Internal", "boom", json!({})), "Fatal"),
    ];
    for (status, body, expected) in cases {
        let outcome = label(classify_checkpoint_status(answered(status, &body)));
        assert!(outcome.starts_with(expected), "{status} {body}: {outcome}");
    }
    assert!(matches!(
        classify_checkpoint_status(Reply::Failed { error: "reset" }),
        CheckpointStatusOutcome::Transient(_)
    ));
}

#[test]
fn malformed_checkpoint_status_is_fatal_naming_what_was_expected() {
    let cases = [
        ("", "not a JSON object"),
        ("[]", "not a JSON object"),
        (r#"{"failure": null}"#, "no `success`"),
        (r#"{"success": null}"#, "no `failure`"),
        (r#"{"success": "3", "failure": null}"#, "success is \"3\""),
        (r#"{"success": -1, "failure": null}"#, "success is -1"),
        (
            r#"{"success": null, "failure": "disk full"}"#,
            "failure is \"disk full\"",
        ),
        (
            r#"{"success": null, "failure": {"sequence_number": 1}}"#,
            "lacks a sequence_number or an error",
        ),
    ];
    for (body, what) in cases {
        let outcome = classify_checkpoint_status(answered(200, body));
        assert!(
            matches!(&outcome, CheckpointStatusOutcome::Fatal(e)
                if e.message.contains(what) && e.message.contains("expected {\"success\"")),
            "{body:?}: {outcome:?}"
        );
    }
}

#[test]
fn no_status_and_no_body_panics() {
    let bodies: [&[u8]; 5] = [
        b"",
        b"\xff\xfe",
        b"{",
        b"null",
        b"{\"global_metrics\":{\"incarnation_uuid\":{}}}",
    ];
    for status in [0, 100, 200, 204, 299, 400, 410, 501, 599, 999] {
        for body in bodies {
            let reply = Reply::Answered { status, body };
            let _ = classify_stats(reply);
            let _ = classify_checkpoint(reply);
            let _ = classify_checkpoint_status(reply);
        }
    }
}
