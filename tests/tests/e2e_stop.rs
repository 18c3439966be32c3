//! End to end: stopping the connector. A graceful stop (SIGTERM) leaves the slot at the last
//! commit's end, so a restart posts nothing again; a SIGKILL mid-workload loses nothing and
//! redelivers what was not acknowledged (docs/postgres.md, "Status updates and
//! keepalives"; docs/contract.md, "Stopping and giving up" and "Exit codes"). Both shells.
//!
//! The graceful stop is checked against the insert position just before the last commit
//! record (`Env::write_txn`): the slot is past it exactly when that commit was acknowledged,
//! whatever other WAL the shared cluster writes meanwhile. The tests of this file still run
//! one at a time, so that their stops are not slowed by each other.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

const TABLES: (&str, &str) = ("TABLES", "users");

/// Feldera's rows equal PostgreSQL's, value by value (both ordered by numeric id:
/// `feldera_rows` sorts its keys as text).
fn same_rows(env: &Env) -> bool {
    let mut feldera = env.feldera_rows("users", "id");
    feldera.sort_by_key(|r| r["id"].as_i64());
    feldera == env.pg_rows("users", "id")
}

/// Status updates every ~0.7 s instead of 10 s (per database: the cluster is shared).
fn short_status_interval(env: &Env) {
    env.sql(&format!(
        "ALTER DATABASE \"{}\" SET wal_sender_timeout = '2s'",
        env.db
    ));
}

/// Claim: a graceful stop confirms the last commit's end; the next run posts no row again.
///
/// Even runs stop once Feldera has processed every row (the connector has usually
/// reported the position already). Odd runs stop once every row was accepted by Feldera
/// and none processed: the stop must wait for completion, send the final status update
/// and see it confirmed. A SIGKILL in place of the SIGTERM fails these runs (checked), not
/// the even ones. (The stop is only sent once the connector has read the last commit: a
/// graceful stop stops reading, so a commit the walsender had not sent yet is, rightly,
/// left for the next run; on a loaded machine that happened.)
fn graceful_stop_confirms_the_last_commit_eight_times(shell: Shell) {
    const RUNS: u64 = 8;
    const ROWS_PER_RUN: u64 = 4;
    let _serial = serial();
    let env = Env::new("gracestop", SETUP, schema());
    short_status_interval(&env);
    for run in 0..RUNS {
        let in_flight = run % 2 == 1;
        env.feldera.clear_requests();
        env.feldera.set_completion_delay(if in_flight {
            CompletionDelay::Never
        } else {
            CompletionDelay::Fixed(Duration::ZERO)
        });
        let mut connector = env.start(shell, &[TABLES]);
        assert!(
            wait_for(Duration::from_secs(30), || env.walsender()).is_some(),
            "run {run}: connector did not start streaming:\n{}",
            connector.log_text()
        );
        // Three single-row transactions, then one with an insert, an update and a delete.
        let base = run * 100;
        let singles: String = (0..ROWS_PER_RUN - 1)
            .map(|i| format!("INSERT INTO users VALUES ({}, 'r{run}');", base + i))
            .collect();
        env.sql(&singles);
        // The insert position just before the last commit record: the slot is past it
        // exactly when the last transaction was acknowledged (WAL the server writes later,
        // for its own bookkeeping, cannot make this pass or fail).
        let inside = env.write_txn(&format!(
            "INSERT INTO users VALUES ({}, 'last'); UPDATE users SET name = 'u{run}' WHERE id = {base}; \
             DELETE FROM users WHERE id = {}",
            base + ROWS_PER_RUN - 1,
            base + 1
        ));
        if in_flight {
            assert!(
                wait_for(Duration::from_secs(30), || (env.ingress_rows()
                    >= ROWS_PER_RUN + 2)
                    .then_some(()))
                .is_some(),
                "run {run}: not every row accepted:\n{}",
                connector.log_text()
            );
            assert!(env.feldera.status()["pending_groups"].as_u64().unwrap_or(0) > 0);
            env.feldera
                .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
            connector.signal("TERM");
            // Feldera finishes the batch it held only after the stop began.
            std::thread::sleep(Duration::from_millis(200));
            env.feldera.release_completions();
        } else {
            assert!(
                wait_for(Duration::from_secs(30), || same_rows(&env).then_some(())).is_some(),
                "run {run}: Feldera did not get the rows:\n{}",
                connector.log_text()
            );
            connector.signal("TERM");
        }
        assert_eq!(
            connector.wait_exit(Duration::from_secs(20)),
            Some(0),
            "run {run}: graceful stop:\n{}",
            connector.log_text()
        );
        let confirmed = env.slot_confirmed().expect("slot");
        assert!(
            !env.lsn_at_least(&inside, &confirmed),
            "run {run}: slot at {confirmed}, not past the last commit (its commit record comes after {inside}):\n{}",
            connector.log_text()
        );
        assert!(same_rows(&env), "run {run}: Feldera differs after the stop");
        // This run delivered its own rows and nothing from the previous run: 3 inserts,
        // then insert + update + delete (the update and the delete are one event each).
        assert_eq!(
            env.ingress_rows(),
            ROWS_PER_RUN + 2,
            "run {run}: rows posted in this run (a replay of the previous run would add more):\n{}",
            connector.log_text()
        );
    }
}

#[test]
fn graceful_stop_confirms_the_last_commit_eight_times_tokio() {
    graceful_stop_confirms_the_last_commit_eight_times(Shell::Tokio);
}

#[test]
fn graceful_stop_confirms_the_last_commit_eight_times_blocking() {
    graceful_stop_confirms_the_last_commit_eight_times(Shell::Blocking);
}

/// Claim: a SIGKILL mid-workload loses nothing; the restart redelivers at least the last
/// unacknowledged transaction, and Feldera ends equal to PostgreSQL.
fn kill_mid_workload_redelivers_and_converges(shell: Shell) {
    const TOTAL: u64 = 300;
    let _serial = serial();
    // Feldera takes a little while to process: at any moment some accepted batches are
    // not yet acknowledged, as on a loaded pipeline.
    let env = Env::with_double(
        "killmid",
        &format!(
            "{SETUP}
             CREATE PROCEDURE writer(n int) LANGUAGE plpgsql AS $$
             BEGIN
               FOR i IN 1..n LOOP
                 INSERT INTO users VALUES (i, 'w' || i);
                 COMMIT;
                 PERFORM pg_sleep(0.01);
               END LOOP;
             END $$;"
        ),
        DoubleConfig::new("p", schema())
            .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(300))),
    );
    short_status_interval(&env);
    let mut first = env.start(shell, &[TABLES]);
    assert!(
        wait_for(Duration::from_secs(30), || env.walsender()).is_some(),
        "connector did not start streaming:\n{}",
        first.log_text()
    );
    let (pg, db) = (env.pg, env.db.clone());
    let writer = std::thread::spawn(move || pg.psql(&db, &format!("CALL writer({TOTAL})")));
    assert!(
        wait_for(Duration::from_secs(60), || {
            (env.feldera.table("users").map_or(0, |t| t.rows.len()) >= 50).then_some(())
        })
        .is_some(),
        "Feldera never got 50 rows:\n{}",
        first.log_text()
    );
    first.kill();
    let at_kill = env.sql("SELECT count(*) FROM users");
    let delivered_first = env.ingress_rows();
    env.feldera.clear_requests();

    let mut second = env.start(shell, &[TABLES]);
    writer.join().expect("writer thread");
    assert!(
        at_kill.parse::<u64>().expect("count") < TOTAL,
        "the writer had finished before the kill ({at_kill} rows)"
    );
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "restart did not catch up:\n{}",
        second.log_text()
    );
    assert!(
        wait_for(Duration::from_secs(10), || same_rows(&env).then_some(())).is_some(),
        "Feldera differs from PostgreSQL after the restart:\n{}",
        second.log_text()
    );
    assert_eq!(env.pg_rows("users", "id").len() as u64, TOTAL);
    let delivered = delivered_first + env.ingress_rows();
    assert!(
        delivered > TOTAL,
        "{delivered} rows posted for {TOTAL} inserts: nothing was redelivered after the kill"
    );
    assert_eq!(second.stop(Duration::from_secs(15)), Some(0));
}

#[test]
fn kill_mid_workload_redelivers_and_converges_tokio() {
    kill_mid_workload_redelivers_and_converges(Shell::Tokio);
}

#[test]
fn kill_mid_workload_redelivers_and_converges_blocking() {
    kill_mid_workload_redelivers_and_converges(Shell::Blocking);
}
