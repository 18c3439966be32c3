//! End to end: what real Feldera pipelines answer, against both shells.
//!
//! - A pipeline shutting down (410 `Terminating`), suspended (503 `Suspended`), starting
//!   (503 `Initializing`) or whose ingress endpoint was removed (410
//!   `UnknownEndpointInCompletionToken` on a token) ends the session: nothing is
//!   acknowledged, the connector never exits, and once the pipeline runs again everything is
//!   delivered.
//! - A failed pipeline (500) exits 1 saying what an operator must do; the slot stays put.
//! - A schema in the compiler's shape: a struct in a table slotline does not route, a NOT
//!   NULL column with a DEFAULT PostgreSQL lacks, a VARCHAR(n) PostgreSQL may exceed, a
//!   nullable and a NOT NULL VARIANT fed from jsonb: it streams, warns once per column, and
//!   Feldera stores what it would store.
//! - A routed table with columns `id` and `"ID"` is refused at start.

use serde_json::{json, Value};
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, Phase};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

const TABLES: (&str, &str) = ("TABLES", "users");
const LINGER_0: (&str, &str) = ("BATCH_LINGER_MS", "0");
const WAIT: Duration = Duration::from_secs(60);

fn users_schema() -> Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"nullable": false, "type": "BIGINT"}, "unused": false},
            {"name": "name", "case_sensitive": false, "columntype": {"nullable": true, "precision": -1, "type": "VARCHAR"}, "unused": false}]}
    ], "outputs": []})
}

/// Answers with `status` and `code` the double logged since the start.
fn answered(env: &Env, status: u16, code: &str) -> bool {
    env.feldera
        .requests()
        .iter()
        .any(|r| r.status == status && r.error_code.as_deref() == Some(code))
}

/// While the pipeline is in `phase`, a row is not acknowledged and the connector keeps
/// running, ending sessions; then the pipeline runs again and the row arrives.
fn survive_phase(env: &Env, connector: &mut slotline_tests::e2e::Connector, phase: Phase, id: i64) {
    let (status, code) = match phase.answer() {
        Some((status, code, _)) => (status.as_u16(), code),
        None => panic!("{phase:?} answers nothing"),
    };
    env.feldera.set_phase(phase.clone());
    let txn = env.write_txn(&format!("INSERT INTO users VALUES ({id}, 'during {code}')"));
    let seen = wait_for(WAIT, || answered(env, status, &code).then_some(()));
    assert!(
        seen.is_some(),
        "no {status} {code}:\n{}",
        connector.log_text()
    );
    assert!(
        connector.wait_log(&format!("HTTP {status} {code}"), WAIT),
        "the session did not end on {code}:\n{}",
        connector.log_text()
    );
    assert!(
        connector.is_running(),
        "exited on {code}:\n{}",
        connector.log_text()
    );
    assert!(
        env.slot_at_or_before(&txn),
        "acknowledged while {phase:?}: slot {:?}",
        env.slot_confirmed()
    );
    env.feldera.set_phase(Phase::Running);
    assert!(
        env.wait_caught_up(WAIT),
        "no catch-up after {phase:?}:\n{}",
        connector.log_text()
    );
}

fn pipeline_states_end_sessions_and_replay(shell: Shell) {
    let env = Env::new("phases", SETUP, users_schema());
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(WAIT),
        "not streaming:\n{}",
        connector.log_text()
    );
    survive_phase(&env, &mut connector, Phase::Terminating, 1);
    survive_phase(&env, &mut connector, Phase::Suspended, 2);
    survive_phase(&env, &mut connector, Phase::Initializing, 3);

    // A token whose endpoint is removed while Feldera still processes its input.
    env.feldera.set_completion_delay(CompletionDelay::Never);
    env.feldera.clear_requests();
    let txn = env.write_txn("INSERT INTO users VALUES (4, 'token gone')");
    let accepted = wait_for(WAIT, || {
        env.feldera
            .requests()
            .iter()
            .any(|r| r.endpoint == "completion_status" && r.status == 200)
            .then_some(())
    });
    assert!(
        accepted.is_some(),
        "no completion poll:\n{}",
        connector.log_text()
    );
    env.feldera.remove_endpoints();
    assert!(
        connector.wait_log("UnknownEndpointInCompletionToken", WAIT),
        "{}",
        connector.log_text()
    );
    assert!(env.slot_at_or_before(&txn));
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());

    env.assert_rows_equal("users", "users", "id");
    let log = connector.log_text();
    assert!(
        log.contains("the pipeline is shutting down; nothing was acknowledged"),
        "{log}"
    );
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0), "{log}");
}

#[test]
fn terminating_suspended_initializing_and_gone_tokens_end_sessions_then_deliver_tokio() {
    pipeline_states_end_sessions_and_replay(Shell::Tokio);
}

#[test]
fn terminating_suspended_initializing_and_gone_tokens_end_sessions_then_deliver_blocking() {
    pipeline_states_end_sessions_and_replay(Shell::Blocking);
}

fn failed_pipeline_exits_1(shell: Shell) {
    let env = Env::new("failed", SETUP, users_schema());
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(WAIT),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.feldera.set_phase(Phase::InitializationError);
    env.sql("INSERT INTO users VALUES (1, 'never')");
    let code = connector.wait_exit(WAIT);
    let log = connector.log_text();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("HTTP 500 InitializationError"), "{log}");
    assert!(
        log.contains("start it again, then restart slotline"),
        "{log}"
    );
    assert_eq!(env.slot_pending_changes(), 1, "the slot moved:\n{log}");
}

#[test]
fn a_failed_pipeline_exits_1_saying_what_to_do_tokio() {
    failed_pipeline_exits_1(Shell::Tokio);
}

#[test]
fn a_failed_pipeline_exits_1_saying_what_to_do_blocking() {
    failed_pipeline_exits_1(Shell::Blocking);
}

/// The compiler's shapes: `docs` has DEFAULT, length, VARIANT columns; `people` (not routed)
/// has a struct column written with inline members.
fn compiler_schema() -> Value {
    json!({"inputs": [
        {"name": "docs", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"nullable": false, "type": "BIGINT"}, "unused": false},
            {"name": "name", "case_sensitive": false, "columntype": {"nullable": true, "precision": 5, "type": "VARCHAR"}, "unused": false},
            {"name": "score", "case_sensitive": false, "columntype": {"nullable": false, "type": "INTEGER"}, "default": "7", "unused": false},
            {"name": "doc", "case_sensitive": false, "columntype": {"nullable": true, "type": "VARIANT"}, "unused": false},
            {"name": "strict", "case_sensitive": false, "columntype": {"nullable": false, "type": "VARIANT"}, "unused": false}]},
        {"name": "people", "case_sensitive": false, "materialized": false,
         "fields": [
            {"name": "p", "case_sensitive": false, "columntype": {"nullable": true, "fields": [
                {"name": "first", "nullable": true, "precision": 30, "type": "VARCHAR"},
                {"name": "address", "nullable": true, "fields": {"nullable": true, "fields": [
                    {"name": "zip", "nullable": false, "precision": 5, "type": "CHAR"}]}}]}, "unused": false}]}
    ], "outputs": []})
}

const DOCS: &str =
    "CREATE TABLE docs (id bigint PRIMARY KEY, name text, doc jsonb, strict jsonb NOT NULL);
    CREATE PUBLICATION pub FOR TABLE docs;";

fn compiler_shaped_schema_streams(shell: Shell) {
    let env = Env::new("shapes", DOCS, compiler_schema());
    let mut connector = env.start(shell, &[("TABLES", "docs"), LINGER_0]);
    assert!(
        env.wait_caught_up(WAIT),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql(
        "INSERT INTO docs VALUES (1, 'longer than five', 'null', 'null'),
                                 (2, 'ok', '{\"a\": [1, null]}', '[]'),
                                 (3, NULL, NULL, 'true')",
    );
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    let rows = env.feldera_rows("docs", "id");
    assert_eq!(
        rows,
        vec![
            json!({"id": 1, "name": "longer than five", "score": 7, "doc": null, "strict": null}),
            json!({"id": 2, "name": "ok", "score": 7, "doc": {"a": [1, null]}, "strict": []}),
            json!({"id": 3, "name": null, "score": 7, "doc": null, "strict": true}),
        ]
    );
    // SQL NULL and the VARIANT null differ in Feldera's query answer (a VARIANT travels as
    // its JSON text): the nullable column holds SQL NULL, the NOT NULL one `null`.
    let answer = ureq_get(&format!(
        "{}/v0/pipelines/p/query?format=json&sql=SELECT%20*%20FROM%20docs%20ORDER%20BY%20id",
        env.feldera.base_url()
    ));
    let first: Value = serde_json::from_str(answer.lines().next().unwrap_or("{}")).unwrap();
    assert_eq!(
        (&first["doc"], &first["strict"]),
        (&Value::Null, &json!("null")),
        "{answer}"
    );

    let log = connector.log_text();
    // Said with the mapping (when routes are checked and when the Relation arrives), never
    // per value: three rows, at most two warnings each.
    for needle in [
        "Feldera column(s) score (DEFAULT 7) have no PostgreSQL column and take their DEFAULT",
        "Feldera column name is VARCHAR(5) but PostgreSQL column name (text) may hold longer values",
        "Feldera column doc is a nullable VARIANT",
    ] {
        let said = log.matches(needle).count();
        assert!((1..=2).contains(&said), "{needle:?} said {said} times:\n{log}");
    }
    assert!(
        !log.contains("Feldera column strict is a nullable VARIANT"),
        "{log}"
    );
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0), "{log}");
}

fn ureq_get(url: &str) -> String {
    let mut answer = ureq::get(url).call().expect("query answered");
    answer.body_mut().read_to_string().expect("query body")
}

#[test]
fn compiler_shaped_schema_with_defaults_lengths_and_variants_streams_tokio() {
    compiler_shaped_schema_streams(Shell::Tokio);
}

#[test]
fn compiler_shaped_schema_with_defaults_lengths_and_variants_streams_blocking() {
    compiler_shaped_schema_streams(Shell::Blocking);
}

fn colliding_columns_refused(shell: Shell) {
    let schema = json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"nullable": false, "type": "BIGINT"}},
            {"name": "ID", "case_sensitive": true, "columntype": {"nullable": true, "type": "BIGINT"}}]}
    ], "outputs": []});
    let env = Env::new("collide", SETUP, schema);
    let mut connector = env.start(shell, &[TABLES]);
    let code = connector.wait_exit(WAIT);
    let log = connector.log_text();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains(
            r#"Feldera table users has columns id and "ID", whose names differ only in case"#
        ),
        "{log}"
    );
    assert!(!env.slot_exists(), "a refused start left a slot behind");
}

#[test]
fn a_table_with_id_and_quoted_id_is_refused_at_start_tokio() {
    colliding_columns_refused(Shell::Tokio);
}

#[test]
fn a_table_with_id_and_quoted_id_is_refused_at_start_blocking() {
    colliding_columns_refused(Shell::Blocking);
}
