use super::*;
use crate::feldera::query::{
    classify_commit_transaction, classify_query, classify_start_transaction, CommitOutcome,
    QueryOutcome, StartTransactionOutcome,
};
use insta::assert_snapshot;
use serde_json::json;

fn answered(status: u16, body: &str) -> Reply<'_> {
    Reply::Answered {
        status,
        body: body.as_bytes(),
    }
}

fn error_body(code: &str, message: &str) -> String {
    json!({"message": message, "error_code": code, "details": {}}).to_string()
}

fn ingress_label(outcome: &IngressOutcome) -> String {
    match outcome {
        IngressOutcome::Accepted { token } => format!("accepted {token}"),
        IngressOutcome::Transient(e) => {
            format!("transient {}", e.error_code.as_deref().unwrap_or("-"))
        }
        IngressOutcome::Fatal(e) => format!("fatal {}", e.error_code.as_deref().unwrap_or("-")),
    }
}

#[test]
fn ingress_answers_classify_by_status_and_body() {
    let parse_errors = json!({
        "message": "Errors parsing input data (2 errors)",
        "error_code": "ParseErrors",
        "details": {"num_errors": 2, "errors": [
            {"description": "missing field `id`", "event_number": 1},
            {"description": "invalid type: string \"x\", expected i64", "event_number": 3}
        ]}
    })
    .to_string();
    let cases: Vec<(u16, String, &str)> = vec![
        (200, r#"{"token": "<opaque>"}"#.into(), "accepted <opaque>"),
        (400, parse_errors, "fatal ParseErrors"),
        (
            404,
            error_body("UnknownPipelineName", "Unknown pipeline name 'x'"),
            "fatal UnknownPipelineName",
        ),
        (
            404,
            error_body("ConfigError.UnknownInputStream", "unknown input table 'x'"),
            "fatal ConfigError.UnknownInputStream",
        ),
        (
            408,
            error_body("Timeout", "request timed out"),
            "transient Timeout",
        ),
        (
            410,
            error_body("Terminating", "pipeline terminating"),
            "transient Terminating",
        ),
        (
            429,
            error_body("ApiConnectionLimit", "too many connections"),
            "fatal ApiConnectionLimit",
        ),
        (500, error_body("Internal", "boom"), "fatal Internal"),
        (
            500,
            error_body("InitializationError", "failed to initialize"),
            "fatal InitializationError",
        ),
        (
            500,
            error_body("PipelineInteractionInvalidResponse", "body lost"),
            "transient PipelineInteractionInvalidResponse",
        ),
        (
            503,
            error_body("Suspended", "suspended"),
            "transient Suspended",
        ),
        (
            503,
            error_body("AwaitingApproval", "waiting for approval"),
            "transient AwaitingApproval",
        ),
        (502, "<html>Bad Gateway</html>".into(), "transient -"),
        (
            503,
            error_body("PipelineInteractionNotDeployed", "not deployed"),
            "transient PipelineInteractionNotDeployed",
        ),
        (
            503,
            error_body("PipelineUnavailable", "unavailable"),
            "transient PipelineUnavailable",
        ),
        (
            503,
            error_body("PipelineInteractionUnreachable", "timeout"),
            "transient PipelineInteractionUnreachable",
        ),
        (
            503,
            error_body("Initializing", "starting"),
            "transient Initializing",
        ),
        (504, String::new(), "transient -"),
        (
            401,
            error_body("Unauthorized", "bad key"),
            "fatal Unauthorized",
        ),
        (200, "{}".into(), "fatal -"),
        (200, r#"{"token": ""}"#.into(), "fatal -"),
        (200, r#"{"token": 7}"#.into(), "fatal -"),
        (200, "not json".into(), "fatal -"),
    ];
    for (status, body, expected) in cases {
        let outcome = classify_ingress(answered(status, &body));
        assert_eq!(
            ingress_label(&outcome),
            expected,
            "status {status} body {body}"
        );
    }
    let failed = classify_ingress(Reply::Failed {
        error: "connection refused",
    });
    assert_eq!(ingress_label(&failed), "transient -");
}

#[test]
fn parse_errors_are_summarised_with_count_and_first_descriptions() {
    let body = json!({
        "message": "Errors parsing input data (5 errors)",
        "error_code": "ParseErrors",
        "details": {"num_errors": 5, "errors": [
            {"description": "missing field `id`", "event_number": 1},
            {"description": "bad", "event_number": 2},
            {"description": "worse", "event_number": 3},
            {"description": "not shown", "event_number": 4}
        ]}
    })
    .to_string();
    let IngressOutcome::Fatal(error) = classify_ingress(answered(400, &body)) else {
        panic!("400 ParseErrors must be fatal");
    };
    assert_eq!(
        error.parse_errors,
        Some(ParseErrorSummary {
            num_errors: 5,
            first: vec![
                "event 1: missing field `id`".into(),
                "event 2: bad".into(),
                "event 3: worse".into()
            ],
        })
    );
    assert_snapshot!(error, @"HTTP 400 ParseErrors: Errors parsing input data (5 errors) (5 parse error(s), first: event 1: missing field `id`; event 2: bad; event 3: worse)");
}

#[test]
fn errors_keep_message_and_code_and_quote_non_json_bodies_briefly() {
    let error = error_from(
        404,
        error_body("UnknownPipelineName", "Unknown pipeline name 'shop'").as_bytes(),
    );
    assert_snapshot!(error, @"HTTP 404 UnknownPipelineName: Unknown pipeline name 'shop'");
    let long = format!("<html>{}</html>\n", "x".repeat(500));
    let error = error_from(502, long.as_bytes());
    let text = error.to_string();
    assert!(
        text.starts_with("HTTP 502 not a Feldera error body; body starts: \"<html>xxx"),
        "{text}"
    );
    assert!(text.ends_with("xxx\"..."), "{text}");
    assert!(text.len() < 300, "prefix must be bounded: {}", text.len());
    let no_message = error_from(500, br#"{"error_code":"X"}"#);
    assert!(no_message
        .message
        .starts_with("error body without `message`"));
    assert_snapshot!(error_from(503, b""), @"HTTP 503 not a Feldera error body; body starts: (empty)");
    assert_snapshot!(body_prefix(b"a\nb\xff"), @r#""a\nb�""#);
}

#[test]
fn transport_failures_are_transient_without_status() {
    let CompletionOutcome::Transient(error) = classify_completion(Reply::Failed {
        error: "timed out after 60000 ms",
    }) else {
        panic!("a transport failure is transient");
    };
    assert_eq!(error.status, None);
    assert_snapshot!(error, @"no answer from Feldera: timed out after 60000 ms");
}

fn completion_label(outcome: &CompletionOutcome) -> String {
    match outcome {
        CompletionOutcome::Complete { step } => format!("complete {step:?}"),
        CompletionOutcome::InProgress => "inprogress".into(),
        CompletionOutcome::Restarted(_) => "restarted".into(),
        CompletionOutcome::Transient(_) => "transient".into(),
        CompletionOutcome::Fatal(_) => "fatal".into(),
    }
}

#[test]
fn completion_answers_classify_by_status_and_body() {
    let cases: Vec<(u16, String, &str)> = vec![
        (
            200,
            r#"{"status": "complete", "step": 42}"#.into(),
            "complete Some(42)",
        ),
        (
            202,
            r#"{"status": "complete", "step": 42}"#.into(),
            "complete Some(42)",
        ),
        (
            200,
            r#"{"status": "inprogress", "step": null}"#.into(),
            "inprogress",
        ),
        (
            202,
            r#"{"status": "inprogress", "step": null}"#.into(),
            "inprogress",
        ),
        (200, r#"{"status": "Complete"}"#.into(), "complete None"),
        (200, r#"{"status": "done"}"#.into(), "fatal"),
        (200, "[]".into(), "fatal"),
        (200, String::new(), "fatal"),
        (400, error_body("InvalidParam", "invalid token"), "fatal"),
        (
            410,
            error_body("PipelineRestarted", "token from a previous run"),
            "restarted",
        ),
        (410, error_body("Terminating", "terminating"), "transient"),
        (
            410,
            error_body("UnknownEndpointInCompletionToken", "endpoint 3 removed"),
            "restarted",
        ),
        (410, error_body("SomethingGone", "gone"), "transient"),
        (503, error_body("Initializing", "starting"), "transient"),
        (503, error_body("Suspended", "suspended"), "transient"),
        (
            500,
            error_body("InitializationError", "failed to initialize"),
            "fatal",
        ),
        (
            503,
            error_body("PipelineUnavailable", "unavailable"),
            "transient",
        ),
        (504, "gateway timeout".into(), "transient"),
        (404, error_body("UnknownPipelineName", "gone"), "fatal"),
    ];
    for (status, body, expected) in cases {
        let outcome = classify_completion(answered(status, &body));
        assert_eq!(
            completion_label(&outcome),
            expected,
            "status {status} body {body}"
        );
    }
}

#[test]
fn a_restart_carries_feldera_message() {
    let body = error_body("PipelineRestarted", "the pipeline was restarted");
    let CompletionOutcome::Restarted(error) = classify_completion(answered(410, &body)) else {
        panic!("410 PipelineRestarted means restarted");
    };
    assert_snapshot!(error, @"HTTP 410 PipelineRestarted: the pipeline was restarted");
}

const PIPELINE: &str = r#"{"name":"p","program_status":"Success","deployment_status":"Running",
 "program_info":{"schema":{"inputs":[{"name":"t","case_sensitive":false,
 "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
           {"name":"amount","case_sensitive":false,"columntype":{"type":"DECIMAL","nullable":true,"precision":10,"scale":2}},
           {"name":"tags","case_sensitive":false,"columntype":{"type":"ARRAY","nullable":true,"component":{"type":"VARCHAR","nullable":true,"precision":-1}}}],
 "primary_key":["id"],"materialized":false,"properties":{}}],"outputs":[]}}}"#;

#[test]
fn pipeline_answers_give_a_schema_or_say_why_not() {
    let PipelineOutcome::Ready(info) = classify_pipeline(answered(200, PIPELINE)) else {
        panic!("a compiled pipeline gives its schema");
    };
    assert_eq!(info.schema.inputs[0].fields.len(), 3);
    assert_eq!(
        classify_pipeline(answered(
            200,
            r#"{"program_status":"Pending","program_info":null}"#
        )),
        PipelineOutcome::NotCompiled {
            program_status: Some("Pending".into())
        }
    );
    assert!(matches!(
        classify_pipeline(answered(200, "<html>")),
        PipelineOutcome::BadSchema(_)
    ));
    assert!(matches!(
        classify_pipeline(answered(404, &error_body("UnknownPipelineName", "no"))),
        PipelineOutcome::Fatal(_)
    ));
    assert!(matches!(
        classify_pipeline(answered(503, "")),
        PipelineOutcome::Transient(_)
    ));
    assert!(matches!(
        classify_pipeline(Reply::Failed { error: "reset" }),
        PipelineOutcome::Transient(_)
    ));
}

fn rows(outcome: QueryOutcome) -> Vec<Value> {
    match outcome {
        QueryOutcome::Rows(rows) => rows.into_iter().map(Value::Object).collect(),
        other => panic!("expected rows, got {other:?}"),
    }
}

#[test]
fn query_answers_are_read_as_ndjson_or_as_one_array() {
    let ndjson = "{\"id\": 1, \"name\": null}\n{\"id\": 2, \"name\": \"b\"}\n";
    let array = r#"[{"id": 1, "name": null}, {"id": 2, "name": "b"}]"#;
    let expected = vec![
        json!({"id": 1, "name": null}),
        json!({"id": 2, "name": "b"}),
    ];
    assert_eq!(rows(classify_query(answered(200, ndjson))), expected);
    assert_eq!(rows(classify_query(answered(200, array))), expected);
    assert_eq!(
        rows(classify_query(answered(200, "\r\n{\"id\":1}\r\n\r\n"))),
        vec![json!({"id": 1})]
    );
}

#[test]
fn an_empty_query_answer_is_zero_rows() {
    assert!(rows(classify_query(answered(200, ""))).is_empty());
    assert!(rows(classify_query(answered(200, " \n"))).is_empty());
    assert!(rows(classify_query(answered(200, "[]"))).is_empty());
}

#[test]
fn a_trailing_error_line_interrupts_the_answer() {
    let body = "{\"id\": 1}\n{\"error\": \"table t is not materialized\"}\n";
    let QueryOutcome::Interrupted(error) = classify_query(answered(200, body)) else {
        panic!("a trailing error line is an error, not a row");
    };
    assert_snapshot!(error, @"HTTP 200 table t is not materialized");
    // A row with more columns than `error` is a row.
    let body = "{\"error\": \"x\", \"id\": 1}\n";
    assert_eq!(rows(classify_query(answered(200, body))).len(), 1);
}

#[test]
fn unreadable_query_answers_are_fatal_and_quote_the_line() {
    let QueryOutcome::Fatal(error) = classify_query(answered(200, "{\"id\":1}\n{\"id\":\n")) else {
        panic!("a broken line is fatal");
    };
    assert!(
        error.message.starts_with("query answer line 2 is not JSON"),
        "{}",
        error.message
    );
    let QueryOutcome::Fatal(error) = classify_query(answered(200, "[1]")) else {
        panic!("a non-object row is fatal");
    };
    assert_snapshot!(error.message, @r#"query answer element 0 is "1", not a row object; body starts: "[1]""#);
    assert!(matches!(
        classify_query(answered(400, &error_body("AdHocQueryError", "not queryable"))),
        QueryOutcome::Fatal(e) if e.error_code.as_deref() == Some("AdHocQueryError")
    ));
    assert!(matches!(
        classify_query(answered(503, "")),
        QueryOutcome::Transient(_)
    ));
}

#[test]
fn transaction_answers_classify() {
    assert_eq!(
        classify_start_transaction(answered(200, r#"{"transaction_id": 3}"#)),
        StartTransactionOutcome::Started { transaction_id: 3 }
    );
    assert!(matches!(
        classify_start_transaction(answered(409, &error_body("TransactionInProgress", "open"))),
        StartTransactionOutcome::AlreadyOpen(_)
    ));
    assert!(matches!(
        classify_start_transaction(answered(200, "{}")),
        StartTransactionOutcome::Fatal(_)
    ));
    assert!(matches!(
        classify_start_transaction(answered(503, "")),
        StartTransactionOutcome::Transient(_)
    ));
    assert!(matches!(
        classify_commit_transaction(answered(400, &error_body("NoTransaction", "none open"))),
        CommitOutcome::Fatal(_)
    ));
    assert!(matches!(
        classify_commit_transaction(Reply::Failed { error: "reset" }),
        CommitOutcome::Transient(_)
    ));
}

#[test]
fn commit_transaction_only_starts_a_commit_and_no_transaction_is_400() {
    assert_eq!(
        classify_commit_transaction(answered(200, r#""Transaction commit initiated""#)),
        CommitOutcome::CommitStarted
    );
    assert!(matches!(
        classify_commit_transaction(answered(200, r#"{"transaction_id": 1}"#)),
        CommitOutcome::Fatal(_)
    ));
    let none = error_body(
        "NoTransactionInProgress",
        "This operation requires an active transaction, but none is currently in progress",
    );
    let CommitOutcome::NoTransaction(error) = classify_commit_transaction(answered(400, &none))
    else {
        panic!("400 NoTransactionInProgress means there was nothing to commit");
    };
    assert_eq!(error.status, Some(400));
    assert!(matches!(
        classify_commit_transaction(answered(409, &error_body("TransactionInProgress", "busy"))),
        CommitOutcome::Fatal(_)
    ));
    assert!(matches!(
        classify_commit_transaction(answered(410, &error_body("Terminating", "bye"))),
        CommitOutcome::Transient(_)
    ));
}

#[test]
fn pipeline_states_behind_503_and_500_carry_what_the_operator_can_do() {
    let cases = [
        (503, "Initializing", "Operation failed because the pipeline has not finished initializing."),
        (503, "AwaitingApproval", "Operation failed: the pipeline is waiting for approval to bootstrap modified components."),
        (503, "Suspended", "Operation failed because the pipeline has been suspended."),
        (503, "PipelineInteractionNotDeployed", "Unable to interact with pipeline because the deployment status (stopped) indicates it is not (yet) fully provisioned"),
        (410, "Terminating", "Operation failed because the pipeline is shutting down."),
        (500, "InitializationError", "Operation failed because the pipeline failed to initialize. Error details: boom."),
        (500, "StepError", "step failed"),
    ];
    let shown: Vec<String> = cases
        .iter()
        .map(|(status, code, message)| {
            let outcome = match classify_ingress(answered(*status, &error_body(code, message))) {
                IngressOutcome::Transient(e) => format!("transient: {e}"),
                IngressOutcome::Fatal(e) => format!("fatal: {e}"),
                IngressOutcome::Accepted { .. } => "accepted".into(),
            };
            outcome
        })
        .collect();
    assert_snapshot!(shown.join("\n"));
}

#[test]
fn gone_tokens_end_the_session_on_every_endpoint() {
    let gone = error_body("UnknownEndpointInCompletionToken", "endpoint 7 removed");
    assert!(matches!(
        classify_ingress(answered(410, &gone)),
        IngressOutcome::Transient(_)
    ));
    assert!(matches!(
        classify_query(answered(410, &error_body("Terminating", "bye"))),
        QueryOutcome::Transient(_)
    ));
    assert!(matches!(
        classify_pipeline(answered(410, &error_body("Terminating", "bye"))),
        PipelineOutcome::Transient(_)
    ));
}

#[test]
fn fuzz_harness_survives_seed_inputs() {
    for seed in [
        PIPELINE.as_bytes(),
        b"",
        b"\xff\xfe",
        b"[[[[[[[[",
        b"{\"error\":\"x\"}",
        b"{\"token\":\"a\"}\n{\"id\":1,\"ID\":2}",
        b"[{\"id\":1,\"ID\":2}]",
    ] {
        crate::feldera::fuzz::fuzz_feldera_responses(seed);
    }
}

proptest::proptest! {
    #[test]
    fn every_parser_is_total_on_arbitrary_bytes(data in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        crate::feldera::fuzz::fuzz_feldera_responses(&data);
    }

    #[test]
    fn every_parser_is_total_on_json_like_text(text in r#"[\[\]{}":,0-9a-z \n]{0,200}"#) {
        crate::feldera::fuzz::fuzz_feldera_responses(text.as_bytes());
    }
}
