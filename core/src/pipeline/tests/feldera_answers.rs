//! Every non-success answer a real Feldera pipeline gives ends in one of two ways: the
//! session ends without acknowledging (replayed from the slot after a backoff), or the
//! connector exits 1 naming what an operator must do. Never exit 1 for a pipeline that is
//! merely starting, paused, suspended, awaiting approval or shutting down.
use super::*;

fn error(code: &str, message: &str) -> String {
    format!(r#"{{"message":"{message}","error_code":"{code}","details":{{}}}}"#)
}

/// The lines that say what happened: answers, logs and exits (not the reconnect chatter).
fn decisions(trace: &str) -> String {
    trace
        .lines()
        .filter(|l| l.contains("<- http") || l.contains("log ") || l.contains("exit"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn ingress_410_terminating_ends_the_session_and_replays() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.answer(
        410,
        &error(
            "Terminating",
            "Operation failed because the pipeline is shutting down.",
        ),
    );
    s.advance(1000);
    assert_eq!(s.exit(), None);
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(decisions(&s.take_trace()));
}

#[test]
fn completion_410_terminating_ends_the_session_without_acknowledging() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.answer(
        410,
        &error(
            "Terminating",
            "Operation failed because the pipeline is shutting down.",
        ),
    );
    s.advance(1000);
    assert_eq!(s.exit(), None);
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(decisions(&s.take_trace()));
}

#[test]
fn completion_410_unknown_endpoint_in_token_is_a_restart() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.answer(
        410,
        &error(
            "UnknownEndpointInCompletionToken",
            "completion token specifies input endpoint id 3, which doesn't exist",
        ),
    );
    s.advance(1000);
    assert_eq!(s.exit(), None);
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(decisions(&s.take_trace()));
}

#[test]
fn pipeline_states_behind_503_end_the_session_with_a_hint() {
    let mut shown = Vec::new();
    for (code, message) in [
        (
            "Initializing",
            "Operation failed because the pipeline has not finished initializing.",
        ),
        (
            "AwaitingApproval",
            "Operation failed: the pipeline is waiting for approval to bootstrap modified components.",
        ),
        (
            "Suspended",
            "Operation failed because the pipeline has been suspended.",
        ),
        (
            "PipelineInteractionUnreachable",
            "timeout (30s) was reached",
        ),
    ] {
        let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
        insert_tx(&mut s, 700, 0x2100, &["1"]);
        s.answer(503, &error(code, message));
        assert_eq!(s.exit(), None, "{code}");
        assert_eq!(s.confirmed, START);
        let trace = s.take_trace();
        shown.extend(
            trace
                .lines()
                .filter(|l| l.contains("session 1 ended"))
                .map(str::to_owned),
        );
    }
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn a_failed_pipeline_exits_1_saying_what_the_operator_must_do() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.answer(
        500,
        &error(
            "InitializationError",
            "Operation failed because the pipeline failed to initialize.",
        ),
    );
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(decisions(&s.take_trace()));
}
