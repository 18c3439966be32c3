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
    rule!(
        "A 410 Terminating on ingress (the pipeline is shutting down) ends the session without acknowledging anything; the slot replays it (decision lines only).",
        decisions(&s.take_trace())
    );
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
    rule!(
        "A 410 Terminating while completion is polled ends the session without acknowledging the batch (decision lines only).",
        decisions(&s.take_trace())
    );
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
    rule!(
        "A 410 UnknownEndpointInCompletionToken (the input endpoint was removed) is handled like a restart: the session ends and the slot replays (decision lines only).",
        decisions(&s.take_trace())
    );
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
    rule!(
        "Each pipeline state Feldera answers with 503 (Initializing, AwaitingApproval, Suspended, unreachable or paused) ends the session with a hint saying what the operator can do, and the session retries after a backoff.",
        shown.join("\n")
    );
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
    rule!(
        "A failed pipeline (HTTP 500) exits 1 with the operator's next step in the message (decision lines only).",
        decisions(&s.take_trace())
    );
}

/// The test schema with `users` extended by `extra` fields and one more table `extra_table`.
fn schema_with(extra_users_fields: &str, extra_table: &str) -> String {
    let bio = r#"{"name":"bio","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}"#;
    let schema = SCHEMA.replacen(
        &format!("{bio}]"),
        &format!("{bio}{extra_users_fields}]"),
        1,
    );
    if extra_table.is_empty() {
        schema
    } else {
        schema.replacen(
            "\n],\"outputs\"",
            &format!(",{extra_table}\n],\"outputs\""),
            1,
        )
    }
}

fn startup_decisions(schema: &str) -> (String, Option<i32>) {
    let mut pg = pg();
    pg.slot_confirmed = None;
    let mut s = Script::new(&[TABLES], pg, schema);
    let trace = s.take_trace();
    let shown = trace
        .lines()
        .filter(|l| {
            l.contains("log ") || l.contains("exit") || l.contains("CREATE_REPLICATION_SLOT")
        })
        .collect::<Vec<_>>()
        .join("\n");
    (shown, s.exit().map(|e| e.0))
}

#[test]
fn a_struct_in_the_compilers_shape_in_an_unrouted_table_does_not_stop_startup() {
    let people = r#"{"name":"people","case_sensitive":false,"materialized":false,"fields":[
      {"name":"p","case_sensitive":false,"columntype":{"nullable":true,"fields":[
        {"name":"first","nullable":true,"precision":30,"type":"VARCHAR"},
        {"name":"age","nullable":true,"type":"UINTEGER"},
        {"name":"address","nullable":true,"fields":{"nullable":true,"fields":[
          {"name":"zip","nullable":false,"precision":5,"type":"CHAR"}]}}]}}]}"#;
    let (trace, exit) = startup_decisions(&schema_with("", people));
    assert_eq!(exit, None, "{trace}");
    assert!(trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
}

#[test]
fn a_not_null_column_with_a_default_that_postgres_lacks_is_accepted_and_said() {
    let score = r#",{"name":"score","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":false},"default":"0"}"#;
    let (trace, exit) = startup_decisions(&schema_with(score, ""));
    assert_eq!(exit, None, "{trace}");
    rule!(
        "A NOT NULL Feldera column with a DEFAULT and no PostgreSQL column is accepted (Feldera fills in the DEFAULT), and the start says so in a warning.",
        trace
    );
}

#[test]
fn a_routed_table_with_id_and_quoted_id_is_refused_before_the_slot_exists() {
    let upper =
        r#",{"name":"ID","case_sensitive":true,"columntype":{"type":"BIGINT","nullable":true}}"#;
    let (trace, exit) = startup_decisions(&schema_with(upper, ""));
    assert_eq!(exit, Some(1), "{trace}");
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    rule!(
        "A routed Feldera table with both id and \"ID\" is refused before the slot exists: Feldera matches JSON fields by lowercase name and would mix them up.",
        trace
    );
}

#[test]
fn a_complete_token_of_a_restarted_feldera_vouches_for_nothing_the_old_incarnation_accepted() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.advance(3);
    s.in_progress();
    s.restart_feldera();
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    for _ in 0..20 {
        if !s.step() {
            s.advance(50);
        }
        if s.waiting_requests() == 0 && s.confirmed != START {
            break;
        }
    }
    assert_eq!(
        s.confirmed, START,
        "tx 700 was lost with the old incarnation: nothing may be acknowledged"
    );
    assert_eq!(
        s.feldera.keys("users").len(),
        1,
        "Feldera holds only tx 701's row"
    );
    rule!(
        "After Feldera restarts, batch #2's token (new incarnation) completes, but it says nothing about batch #1's token of the old incarnation: that one is asked about itself, answers 410 PipelineRestarted, and the session ends without acknowledging either commit, so both replay.",
        s.take_trace()
    );
}
