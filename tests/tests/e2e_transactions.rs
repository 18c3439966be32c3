//! End to end, both shells: with `FELDERA_TRANSACTIONS=large` a PostgreSQL transaction larger
//! than a batch goes into one Feldera transaction, so an ad-hoc query sees none of its rows
//! until the commit finished, then all of them (real PostgreSQL, the Feldera double, the real
//! binaries).

use serde_json::json;
use slotline_core::feldera::{classify_query, FelderaEndpoint, QueryOutcome, Reply};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const ROWS: u64 = 1000;

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

/// `SELECT COUNT(*) FROM users` through Feldera's ad-hoc query API, as slotline builds it.
fn count_users(env: &Env) -> u64 {
    let endpoint = FelderaEndpoint::new(&env.feldera.base_url(), "p", None).expect("endpoint");
    let request = endpoint.query("SELECT COUNT(*) AS n FROM users", 10_000);
    let mut response = ureq::get(&request.url).call().expect("query answered");
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_vec().expect("query body");
    match classify_query(Reply::Answered {
        status,
        body: &body,
    }) {
        QueryOutcome::Rows(rows) => rows[0]["n"].as_u64().expect("a count"),
        other => panic!("query failed: {other:?}"),
    }
}

fn calls(env: &Env, endpoint: &str) -> usize {
    env.feldera
        .requests()
        .iter()
        .filter(|r| r.endpoint == endpoint && r.status == 200)
        .count()
}

/// Starts slotline on `env` with `config`, once its slot exists writes user 0, and returns
/// it once the slot confirmed that row.
fn started_with_one_row(env: &Env, shell: Shell, config: &[(&str, &str)]) -> Connector {
    let connector = env.start(shell, config);
    assert!(
        wait_for(Duration::from_secs(20), || env.slot_exists().then_some(())).is_some(),
        "connector did not start:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (0, 'before')");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not caught up:\n{}",
        connector.log_text()
    );
    connector
}

fn a_large_transaction_is_invisible_until_its_commit_finished_then_visible_whole(shell: Shell) {
    let env = Env::new("txn", SETUP, schema());
    let mut connector = started_with_one_row(
        &env,
        shell,
        &[
            ("TABLES", "users"),
            ("FELDERA_TRANSACTIONS", "large"),
            ("BATCH_MAX_ROWS", "100"),
            ("MAX_IN_FLIGHT_BATCHES", "4"),
        ],
    );
    assert_eq!(count_users(&env), 1);

    // Requests are processed as soon as they are accepted (completion delay 0), except a
    // committed transaction, which now waits until released: the test looks at Feldera
    // while the commit is still running.
    env.feldera.hold_commits(true);
    env.feldera.clear_requests();
    // The insert position just before the commit record: acknowledging the transaction
    // moves the slot past it, while releasing WAL on a keepalive that arrives before the
    // commit was decoded legitimately moves it up to (never past) it.
    let inside = env.write_txn(&format!(
        "INSERT INTO users SELECT g, 'big' FROM generate_series(1, {ROWS}) g"
    ));
    assert!(
        wait_for(Duration::from_secs(20), || {
            (calls(&env, "commit_transaction") == 1).then_some(())
        })
        .is_some(),
        "no commit:\n{}",
        connector.log_text()
    );
    assert_eq!(env.ingress_rows(), ROWS, "every row was accepted");
    assert_eq!(calls(&env, "start_transaction"), 1);
    assert!(calls(&env, "ingress") >= 10, "batches of at most 100 rows");
    assert_eq!(count_users(&env), 1, "a query sees none of the transaction");
    assert!(
        env.slot_at_or_before(&inside),
        "nothing of it acknowledged before the commit finished: slot {:?}, commit after {inside}",
        env.slot_confirmed()
    );

    env.feldera.release_completions();
    assert!(
        env.wait_caught_up(Duration::from_secs(20)),
        "not caught up after the commit:\n{}",
        connector.log_text()
    );
    assert_eq!(count_users(&env), ROWS + 1, "then all of it");
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        connector.stop(Duration::from_secs(10)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn a_large_transaction_is_invisible_until_its_commit_finished_then_visible_whole_in_both_shells() {
    for shell in Shell::BOTH {
        a_large_transaction_is_invisible_until_its_commit_finished_then_visible_whole(shell);
    }
}

/// A source transaction that takes longer to stream than `NO_PROGRESS_TIMEOUT_SECS` (each
/// batch's body read slowly), whose Feldera commit then takes longer again: nothing is
/// durable for many times the timeout, yet Feldera accepting more of it and committing it
/// is progress, so the process waits and acknowledges it.
fn a_transaction_slower_than_the_no_progress_timeout_is_waited_for(shell: Shell) {
    let env = Env::new("txnslow", SETUP, schema());
    let mut connector = started_with_one_row(
        &env,
        shell,
        &[
            ("TABLES", "users"),
            ("FELDERA_TRANSACTIONS", "large"),
            ("BATCH_MAX_ROWS", "100"),
            ("NO_PROGRESS_TIMEOUT_SECS", "2"),
        ],
    );
    // Ten batches of about 3 KiB each, read at 6 KiB/s: some 5 s of streaming.
    env.feldera
        .read_slowly("users", 20, 6 * 1024)
        .expect("users is an input table");
    env.feldera.hold_commits(true);
    env.feldera.clear_requests();
    let started = std::time::Instant::now();
    env.write_txn(&format!(
        "INSERT INTO users SELECT g, 'big' FROM generate_series(1, {ROWS}) g"
    ));
    assert!(
        wait_for(Duration::from_secs(60), || {
            (calls(&env, "commit_transaction") == 1).then_some(())
        })
        .is_some(),
        "no commit:\n{}",
        connector.log_text()
    );
    let streamed = started.elapsed();
    assert!(
        streamed > Duration::from_secs(3),
        "the transaction streamed for longer than the timeout ({streamed:?})"
    );
    // The commit takes 4 s more: twice the timeout.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        connector.is_running(),
        "gave up on a transaction Feldera was taking in and committing:\n{}",
        connector.log_text()
    );
    env.feldera.release_completions();
    assert!(
        env.wait_caught_up(Duration::from_secs(20)),
        "not caught up after the commit:\n{}",
        connector.log_text()
    );
    assert_eq!(calls(&env, "start_transaction"), 1, "no replay");
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        connector.stop(Duration::from_secs(10)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn a_transaction_slower_than_the_no_progress_timeout_is_waited_for_in_both_shells() {
    for shell in Shell::BOTH {
        a_transaction_slower_than_the_no_progress_timeout_is_waited_for(shell);
    }
}

const TABLE_ROWS: u64 = 40_000;

/// With checkpoints (fault tolerance), a graceful stop that arrives inside a source
/// transaction leaves its Feldera transaction open, and Feldera delays every checkpoint
/// while one is open: the stop asks for none and exits at once with what the last
/// checkpoint holds, well inside a service manager's stop timeout (30 s), rather than
/// waiting out the completion timeout (60 s). The next start finishes the transaction.
fn a_stop_inside_a_transaction_with_checkpoints_exits_at_once(shell: Shell) {
    let env = Env::new("txnstopft", SETUP, schema());
    env.feldera
        .set_fault_tolerance(Some("at_least_once"))
        .expect("fault tolerance");
    let config = [
        ("TABLES", "users"),
        ("FELDERA_TRANSACTIONS", "large"),
        ("BATCH_MAX_ROWS", "100"),
    ];
    let mut connector = started_with_one_row(&env, shell, &config);
    // Complete, but no checkpoint holds it yet (the next is due an interval later): the
    // stop has something a checkpoint would acknowledge.
    env.sql("INSERT INTO users VALUES (-1, 'unsaved')");
    assert!(
        wait_for(Duration::from_secs(20), || {
            (env.feldera.row_count("users") == Some(2)).then_some(())
        })
        .is_some(),
        "{}",
        connector.log_text()
    );
    // Ten batches read at 6 KiB/s: the stop arrives while the transaction streams.
    env.feldera
        .read_slowly("users", 20, 6 * 1024)
        .expect("users is an input table");
    env.feldera.clear_requests();
    let inside = env.write_txn(&format!(
        "INSERT INTO users SELECT g, 'big' FROM generate_series(1, {ROWS}) g"
    ));
    assert!(
        wait_for(Duration::from_secs(20), || {
            (calls(&env, "ingress") >= 2).then_some(())
        })
        .is_some(),
        "the transaction is not streaming:\n{}",
        connector.log_text()
    );
    let stopping = std::time::Instant::now();
    let code = connector.stop(Duration::from_secs(25));
    let took = stopping.elapsed();
    let log = connector.log_text();
    assert_eq!(code, Some(0), "the stop did not end in 25 s:\n{log}");
    assert!(
        log.contains("the Feldera transaction left open holds back every checkpoint"),
        "{log}"
    );
    assert!(
        env.slot_at_or_before(&inside),
        "nothing of the transaction acknowledged: slot {:?}, commit after {inside} (took {took:?})",
        env.slot_confirmed()
    );
    assert_eq!(calls(&env, "commit_transaction"), 0, "left open");
    // The next start continues it, commits it and catches up.
    env.feldera.read_slowly("users", 0, 0).ok();
    let mut again = env.start(shell, &config);
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "not caught up after the restart:\n{}",
        again.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        again.stop(Duration::from_secs(25)),
        Some(0),
        "{}",
        again.log_text()
    );
}

#[test]
fn a_stop_inside_a_transaction_with_checkpoints_exits_at_once_in_both_shells() {
    for shell in Shell::BOTH {
        a_stop_inside_a_transaction_with_checkpoints_exits_at_once(shell);
    }
}

/// A run killed inside a Feldera transaction leaves it open; the state file is deleted (the
/// documented way to ask for a new snapshot) and the connector restarted. Everything the copy
/// sends would join that transaction and never complete: the session must commit it first.
fn a_re_snapshot_commits_a_feldera_transaction_left_open_by_a_killed_run(shell: Shell) {
    let env = Env::new("txn_resnap", SETUP, schema());
    env.sql(&format!(
        "INSERT INTO users SELECT g, 'seed' FROM generate_series(1, {TABLE_ROWS}) g"
    ));
    let config = [
        ("TABLES", "users"),
        ("SNAPSHOT_MODE", "initial"),
        ("FELDERA_TRANSACTIONS", "large"),
        ("BATCH_MAX_ROWS", "1000"),
    ];
    let mut crashing: Vec<(&str, &str)> = config.to_vec();
    crashing.push(("CRASH_AT", "after_send"));
    let mut first = env.start(shell, &crashing);
    assert!(
        env.wait_snapshot_complete_and_caught_up(Duration::from_secs(180)),
        "the first copy did not finish:\n{}",
        first.log_text()
    );
    env.sql("INSERT INTO users SELECT g, 'big' FROM generate_series(100001, 103000) g");
    assert_eq!(
        first.wait_exit(Duration::from_secs(60)),
        Some(70),
        "no crash inside the Feldera transaction:\n{}",
        first.log_text()
    );
    assert_eq!(
        calls(&env, "start_transaction"),
        calls(&env, "commit_transaction") + 1,
        "the crash left a transaction open"
    );

    std::fs::remove_file(env.state_path()).expect("remove the state file");
    let mut second = env.start(shell, &config);
    assert!(
        env.wait_snapshot_complete_and_caught_up(Duration::from_secs(180)),
        "the re-snapshot did not finish:\n{}",
        second.log_text()
    );
    assert!(
        second.log_text().contains("a Feldera transaction is open"),
        "{}",
        second.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        second.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        second.log_text()
    );
}

mod a_re_snapshot_commits_a_feldera_transaction_left_open_by_a_killed_run {
    use super::*;

    #[test]
    fn tokio() {
        a_re_snapshot_commits_a_feldera_transaction_left_open_by_a_killed_run(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        a_re_snapshot_commits_a_feldera_transaction_left_open_by_a_killed_run(Shell::Blocking);
    }
}
