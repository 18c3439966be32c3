//! End to end: TRUNCATE propagated to Feldera as retractions, against a real PostgreSQL and
//! the Feldera double, both shells. Feldera has no truncate: the connector reads the keys
//! Feldera holds page by page, deletes them in bounded batches, verifies the table is empty
//! by a count, and only then goes on with the rest of the transaction; its commit is
//! acknowledged once all of that is durable.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(180);

fn schema_with(id_field: Value) -> Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            id_field,
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

fn schema() -> Value {
    schema_with(
        json!({"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}}),
    )
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

fn fill(env: &Env, rows: u64) {
    env.sql(&format!(
        "INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, {rows}) g"
    ));
}

/// Starts with an initial copy of what `users` holds, and waits until it is streaming.
fn start_seeded(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> Connector {
    let mut pairs = vec![("TABLES", "users"), ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(extra);
    let connector = env.start(shell, &pairs);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the initial copy did not finish:\n{}",
        connector.log_text()
    );
    connector
}

fn stop(connector: &mut Connector) {
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

/// Changes before the TRUNCATE in the same transaction vanish with it; the 3 inserts after
/// it survive.
const TRUNCATE_THEN_INSERT: &str = "INSERT INTO users VALUES (60000, 'before truncate');
    UPDATE users SET name = 'updated before truncate' WHERE id = 2;
    TRUNCATE users;
    INSERT INTO users VALUES (1, 'after truncate'), (70000, 'new'), (70001, 'newer')";

fn truncate_then_inserts(shell: Shell) {
    let env = Env::new("trunc_inserts", SETUP, schema());
    fill(&env, 100);
    let mut connector = start_seeded(&env, shell, &[]);
    assert_eq!(env.feldera_count("users"), 100);
    let inside = env.write_txn(TRUNCATE_THEN_INSERT);
    assert!(
        env.wait_caught_up(LONG),
        "the TRUNCATE's transaction was not acknowledged:\n{}",
        connector.log_text()
    );
    assert!(
        !env.slot_at_or_before(&inside),
        "the slot did not move past the TRUNCATE's transaction"
    );
    let rows = env.feldera_rows("users", "id");
    assert_eq!(
        rows,
        [
            json!({"id": 1, "name": "after truncate"}),
            json!({"id": 70000, "name": "new"}),
            json!({"id": 70001, "name": "newer"})
        ],
        "Feldera must hold exactly the 3 rows inserted after the TRUNCATE"
    );
    env.assert_rows_equal("users", "users", "id");
    let log = connector.log_text();
    assert!(
        log.contains("users: empty in Feldera, as after the TRUNCATE"),
        "no count check after the deletes:\n{log}"
    );
    stop(&mut connector);
}

mod truncate_and_3_inserts_in_one_transaction_leave_exactly_those_rows {
    use super::*;

    #[test]
    fn tokio() {
        truncate_then_inserts(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        truncate_then_inserts(Shell::Blocking);
    }
}

/// A transaction's rows still lingering in the outbox when the next transaction, a lone
/// TRUNCATE, arrives, and nothing after it: the rows go out before the retraction (which
/// deletes them again) and both commits are acknowledged without any later change.
fn truncate_after_lingering_rows_of_an_earlier_commit(shell: Shell) {
    let env = Env::new("trunc_linger", SETUP, schema());
    fill(&env, 10);
    let mut connector = start_seeded(&env, shell, &[("BATCH_LINGER_MS", "3000")]);
    env.sql("INSERT INTO users VALUES (500, 'lingers')");
    let truncate = env.write_txn("TRUNCATE users");
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "the slot stalled before the TRUNCATE's commit ({:?}, TRUNCATE committed after {truncate}):\n{}",
        env.slot_confirmed(),
        connector.log_text()
    );
    assert_eq!(env.feldera_count("users"), 0);
    env.assert_rows_equal("users", "users", "id");
    stop(&mut connector);
}

mod a_lone_truncate_after_lingering_rows_of_an_earlier_commit_is_acknowledged {
    use super::*;

    #[test]
    fn tokio() {
        truncate_after_lingering_rows_of_an_earlier_commit(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        truncate_after_lingering_rows_of_an_earlier_commit(Shell::Blocking);
    }
}

/// A TRUNCATE committed while the initial copy runs: it waits for the copy's locks, lands
/// after the slot's consistent point, and is the stream's first change once the copy is
/// complete. Feldera must end with exactly the rows inserted after it.
fn truncate_during_the_initial_copy(shell: Shell) {
    let env = Env::with_double(
        "trunc_copy",
        SETUP,
        DoubleConfig::new("p", schema()).with_completion_delay(CompletionDelay::Never),
    );
    fill(&env, 5_000);
    let connector = env.start(shell, &[("TABLES", "users"), ("SNAPSHOT_MODE", "initial")]);
    assert!(
        wait_for(LONG, || env.slot_exists().then_some(())).is_some(),
        "{}",
        connector.log_text()
    );
    // Feldera holds the copy's first batch; the TRUNCATE queues behind the copy's locks.
    let (pg, db) = (env.pg, env.db.clone());
    let truncate = std::thread::spawn(move || pg.psql(&db, TRUNCATE_THEN_INSERT));
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    truncate.join().expect("the TRUNCATE's transaction");
    let mut connector = connector;
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(env.feldera_count("users"), 3);
    let log = connector.log_text();
    assert!(
        !log.contains("reconnecting in"),
        "a session was retried:\n{log}"
    );
    stop(&mut connector);
}

mod truncate_committed_during_the_initial_copy_is_propagated_after_it {
    use super::*;

    #[test]
    fn tokio() {
        truncate_during_the_initial_copy(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        truncate_during_the_initial_copy(Shell::Blocking);
    }
}

/// 50,000 rows truncated with pages of 1,000 keys. Each key is 400 bytes of text, so the
/// key set is 20 MB: held whole (with its JSON encodings) it alone would pass the ceiling,
/// while a page and a delete batch are well under it.
fn truncate_of_50k_rows(shell: Shell) {
    let env = Env::new(
        "trunc_large",
        "CREATE TABLE users (id text PRIMARY KEY, name text);
         CREATE PUBLICATION pub FOR TABLE users;",
        schema_with(json!({"name": "id", "case_sensitive": false,
            "columntype": {"type": "VARCHAR", "nullable": false, "precision": -1}})),
    );
    env.sql(
        "INSERT INTO users SELECT lpad(g::text, 400, 'k'), 'user ' || g FROM generate_series(1, 50000) g",
    );
    let mut connector = start_seeded(&env, shell, &[("RETRACT_PAGE_ROWS", "1000")]);
    assert_eq!(env.feldera_count("users"), 50_000);
    env.sql("TRUNCATE users");
    assert!(
        env.wait_caught_up(LONG),
        "the TRUNCATE was not acknowledged:\n{}",
        connector.log_text()
    );
    let peak_kib = connector
        .peak_rss_kib()
        .expect("the connector is still running");
    assert_eq!(
        env.feldera_count("users"),
        0,
        "Feldera's users is not empty"
    );
    let log = connector.log_text();
    assert!(scan_deleted(&log, "users", 50000), "{log}");
    eprintln!(
        "{}: peak RSS {} KiB over a copy and a TRUNCATE of 50,000 rows",
        shell.binary_name(),
        peak_kib
    );
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB is over the 64 MiB ceiling"
    );
    stop(&mut connector);
}

mod truncate_of_50k_rows_empties_the_table_in_bounded_memory {
    use super::*;

    #[test]
    fn tokio() {
        truncate_of_50k_rows(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        truncate_of_50k_rows(Shell::Blocking);
    }
}

/// Crashes the retraction at `point` (the `after`-th time); nothing of the TRUNCATE's
/// transaction may be acknowledged; a restart replays it and converges.
fn crash_then_restart_converges(shell: Shell, point: &str, after: &str) {
    let env = Env::new("trunc_crash", SETUP, schema());
    fill(&env, 1_000);
    let mut crashing = start_seeded(
        &env,
        shell,
        &[
            ("RETRACT_PAGE_ROWS", "300"),
            ("BATCH_MAX_ROWS", "100"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", after),
        ],
    );
    let inside = env.write_txn(TRUNCATE_THEN_INSERT);
    let code = crashing.wait_exit(LONG);
    let log = crashing.log_text();
    assert_eq!(code, Some(70), "{log}");
    assert!(
        log.contains(&format!("crash injected at {point}")),
        "the log does not name the crash point:\n{log}"
    );
    assert!(
        env.slot_at_or_before(&inside),
        "the slot ({:?}) moved past the TRUNCATE's transaction before it was verified",
        env.slot_confirmed()
    );
    let left = env.feldera_count("users");
    match point {
        "retract_after_query" => assert_eq!(left, 1_000, "nothing deleted before the first page"),
        _ => assert!(
            (1..1_000).contains(&left),
            "a crash mid-delete leaves part of the table: {left}"
        ),
    }
    // Committed while the connector is down: replayed after the TRUNCATE's transaction.
    env.sql("INSERT INTO users VALUES (80000, 'while down'); UPDATE users SET name = 'changed' WHERE id = 1;");

    let mut restarted = env.start(
        shell,
        &[
            ("TABLES", "users"),
            ("SNAPSHOT_MODE", "initial"),
            ("RETRACT_PAGE_ROWS", "300"),
            ("BATCH_MAX_ROWS", "100"),
        ],
    );
    assert!(
        env.wait_caught_up(LONG),
        "the restart did not catch up:\n{}",
        restarted.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(env.feldera_count("users"), 4);
    stop(&mut restarted);
}

macro_rules! crash_case {
    ($name:ident, $point:literal, $after:literal) => {
        mod $name {
            use super::*;

            #[test]
            fn tokio() {
                crash_then_restart_converges(Shell::Tokio, $point, $after);
            }

            #[test]
            fn blocking() {
                crash_then_restart_converges(Shell::Blocking, $point, $after);
            }
        }
    };
}

crash_case!(
    crash_after_the_first_key_page_then_restart_converges,
    "retract_after_query",
    "1"
);
crash_case!(
    crash_at_the_4th_durable_delete_batch_then_restart_converges,
    "retract_mid_delete",
    "4"
);

/// A keyed table whose key column has LATENESS is not materialized, so Feldera answers no
/// ad-hoc query on it: its keys cannot be read, and a TRUNCATE could not be propagated.
fn non_queryable_table_is_refused(shell: Shell) {
    let env = Env::new(
        "trunc_refused",
        SETUP,
        schema_with(json!({"name": "id", "case_sensitive": false,
            "columntype": {"type": "BIGINT", "nullable": false}, "lateness": "10"})),
    );
    fill(&env, 10);
    // The double refuses to query it, as Feldera would.
    let url = format!("{}/v0/pipelines/p/query", env.feldera.base_url());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let answer = agent
        .get(&url)
        .query("sql", "SELECT id FROM users")
        .query("format", "json")
        .call()
        .expect("query the double");
    assert_eq!(
        answer.status().as_u16(),
        400,
        "the double answered a query on a non-materialized table"
    );

    let mut refused = env.start(shell, &[("TABLES", "users"), ("SNAPSHOT_MODE", "initial")]);
    let code = refused.wait_exit(LONG);
    let log = refused.log_text();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("users"),
        "the refusal does not name the table:\n{log}"
    );
    assert!(
        log.contains("materialized") && log.contains("LATENESS"),
        "the refusal does not say what makes the table queryable:\n{log}"
    );
    assert!(
        log.contains("ALTER PUBLICATION pub SET (publish = 'insert, update, delete')"),
        "the refusal does not offer to stop publishing TRUNCATE:\n{log}"
    );
    assert!(!env.slot_exists(), "a refused start created the slot");
    assert_eq!(
        env.state_bytes(),
        None,
        "a refused start wrote the state file"
    );
    let ingress = env
        .feldera
        .requests()
        .iter()
        .filter(|r| r.endpoint == "ingress")
        .count();
    assert_eq!(ingress, 0);
}

mod non_queryable_table_with_truncate_published_is_refused_at_start {
    use super::*;

    #[test]
    fn tokio() {
        non_queryable_table_is_refused(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        non_queryable_table_is_refused(Shell::Blocking);
    }
}

/// Whether the connector logged the end of a key scan of `table` (any table when empty)
/// that sent `deleted` deletes: `<table>: scan ended: N keys read, D deletes sent, K kept`.
fn scan_deleted(log: &str, table: &str, deleted: u64) -> bool {
    let ended = format!("{table}: scan ended: ");
    let sent = format!(", {deleted} deletes sent, ");
    log.lines()
        .any(|line| line.contains(&ended) && line.contains(&sent))
}
