//! End to end: what the connector tells PostgreSQL, and when (docs/postgres.md, "Slots and
//! positions" and "Status updates and keepalives"; docs/contract.md). Real PostgreSQL, the
//! Feldera double, both shells.
//!
//! Every test sets `wal_sender_timeout` on its own database (the setting is per session
//! since PostgreSQL 12; the connector reads it with `SHOW` on its replication connection),
//! so status updates come every few hundred milliseconds and the shared cluster is left
//! alone.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::time::Duration;

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true}}]}
    ], "outputs": []})
}

/// `users` is published; `other` is not.
const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE TABLE other (id bigint PRIMARY KEY, payload text);
    CREATE PUBLICATION pub FOR TABLE users;";

const TABLES: (&str, &str) = ("TABLES", "users");

fn env_with(prefix: &str, delay: CompletionDelay, wal_sender_timeout: &str) -> Env {
    let env = Env::with_double(
        prefix,
        SETUP,
        DoubleConfig::new("p", schema()).with_completion_delay(delay),
    );
    env.sql(&format!(
        "ALTER DATABASE \"{}\" SET wal_sender_timeout = '{wal_sender_timeout}'",
        env.db
    ));
    env
}

/// `count` single-row transactions inserting ids `from..from+count`.
fn insert_each(env: &Env, from: u64, count: u64) {
    let sql: String = (from..from + count)
        .map(|i| format!("BEGIN; INSERT INTO users VALUES ({i}, 'user {i}'); COMMIT;"))
        .collect();
    env.sql(&sql);
}

fn wait_ready(env: &Env, connector: &slotline_tests::e2e::Connector) {
    assert!(
        wait_for(Duration::from_secs(30), || env.walsender()).is_some(),
        "connector did not start streaming:\n{}",
        connector.log_text()
    );
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "connector did not confirm the idle position:\n{}",
        connector.log_text()
    );
}

/// Feldera's rows equal PostgreSQL's, value by value (both ordered by numeric id:
/// `feldera_rows` sorts its keys as text).
fn assert_same_rows(env: &Env) {
    let mut feldera = env.feldera_rows("users", "id");
    feldera.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(feldera, env.pg_rows("users", "id"));
}

/// Claim: holding write/apply ahead with flush behind moves nothing; the slot moves once
/// Feldera completes.
///
/// The connector keeps one batch in flight; with completion withheld, the first batch is
/// accepted and never completes, so nothing after the first transaction's start may be
/// confirmed. (Before it, an idle keepalive may legitimately confirm WAL written elsewhere
/// in the shared cluster, so the bound is the first commit's end, not the slot's position
/// before the inserts.)
fn flush_behind_holds_the_slot_until_feldera_completes(shell: Shell) {
    let env = env_with("flushbehind", CompletionDelay::Never, "2s");
    let mut connector = env.start(shell, &[TABLES]);
    wait_ready(&env, &connector);

    // The first transaction's end: read in its own session right after its commit.
    let first_end = env.sql(
        "BEGIN; INSERT INTO users VALUES (1, 'user 1'); COMMIT; SELECT pg_current_wal_insert_lsn()",
    );
    insert_each(&env, 2, 4);
    assert!(
        wait_for(Duration::from_secs(20), || (env.ingress_rows() >= 1)
            .then_some(()))
        .is_some(),
        "the double never accepted a batch:\n{}",
        connector.log_text()
    );
    // Accepted but not applied: the double holds it, Feldera's table is empty.
    assert!(env.feldera.status()["pending_groups"].as_u64().unwrap_or(0) > 0);
    assert!(env.feldera_rows("users", "id").is_empty());
    // The connector reports what it read (write) at or past the first transaction while
    // what is durable (flush) stays before its end.
    let (_, write, flush) = wait_for(Duration::from_secs(20), || {
        env.walsender()
            .filter(|(_, write, _)| write != "-" && env.lsn_at_least(write, &first_end))
    })
    .unwrap_or_else(|| {
        panic!(
            "no status update reported the rows as written: {:?}",
            env.walsender()
        )
    });
    assert!(
        !env.lsn_at_least(&flush, &first_end),
        "flush {flush} reached {first_end} before Feldera completed"
    );
    // Several status intervals (wal_sender_timeout 2 s: one every ~0.7 s) go by; the slot
    // does not move at all.
    let held = env.slot_confirmed().expect("slot");
    assert!(!env.lsn_at_least(&held, &first_end));
    for _ in 0..30 {
        assert_eq!(
            env.slot_confirmed().as_deref(),
            Some(held.as_str()),
            "confirmed_flush_lsn moved while Feldera had not completed (write {write}):\n{}",
            connector.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(env.feldera_rows("users", "id").is_empty());

    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    assert!(
        env.wait_caught_up(Duration::from_secs(20)),
        "slot did not move to the current WAL position after completion:\n{}",
        connector.log_text()
    );
    assert_same_rows(&env);
    assert_eq!(env.pg_rows("users", "id").len(), 5);
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0));
}

#[test]
fn flush_behind_holds_the_slot_until_feldera_completes_tokio() {
    flush_behind_holds_the_slot_until_feldera_completes(Shell::Tokio);
}

#[test]
fn flush_behind_holds_the_slot_until_feldera_completes_blocking() {
    flush_behind_holds_the_slot_until_feldera_completes(Shell::Blocking);
}

/// Claim: 80 inserts whose last 30 were never acknowledged replay exactly those 30
/// (80 single-row transactions, linger 0: one request per transaction).
fn unacknowledged_tail_is_replayed_exactly_after_a_kill(shell: Shell) {
    let env = env_with("replay30", CompletionDelay::Fixed(Duration::ZERO), "2s");
    let linger = [TABLES, ("BATCH_LINGER_MS", "0")];
    let mut first = env.start(shell, &linger);
    wait_ready(&env, &first);

    insert_each(&env, 1, 50);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "first 50 not acknowledged:\n{}",
        first.log_text()
    );
    env.feldera.set_completion_delay(CompletionDelay::Never);
    env.feldera.clear_requests();
    let end_51 = env.sql(
        "BEGIN; INSERT INTO users VALUES (51, 'user 51'); COMMIT; SELECT pg_current_wal_insert_lsn()",
    );
    insert_each(&env, 52, 29);
    // One batch is in flight at a time: the first of the 30 is accepted and never
    // completes; the rest wait in the connector.
    assert!(
        wait_for(Duration::from_secs(30), || (env.ingress_rows() >= 1)
            .then_some(()))
        .is_some(),
        "the double did not accept a batch of the last 30:\n{}",
        first.log_text()
    );
    assert!(env.feldera.status()["pending_groups"].as_u64().unwrap_or(0) > 0);
    // A few status intervals later the slot is still before the 51st transaction's end.
    let held = env.slot_confirmed().expect("slot");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(env.slot_confirmed(), Some(held.clone()));
    assert!(
        !env.lsn_at_least(&held, &end_51),
        "slot {held} passed {end_51}"
    );
    first.kill();

    // Feldera finishes what it accepted; the connector never learnt it.
    env.feldera.release_completions();
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.clear_requests();
    let mut second = env.start(shell, &linger);
    assert!(
        wait_for(Duration::from_secs(30), || env.walsender()).is_some(),
        "restart did not stream:\n{}",
        second.log_text()
    );
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "restart did not catch up:\n{}",
        second.log_text()
    );
    assert_eq!(
        env.ingress_rows(),
        30,
        "the restart must replay exactly the 30 unacknowledged transactions:\n{}",
        second.log_text()
    );
    assert_same_rows(&env);
    assert_eq!(env.pg_rows("users", "id").len(), 80);
    assert_eq!(second.stop(Duration::from_secs(15)), Some(0));
}

#[test]
fn unacknowledged_tail_is_replayed_exactly_after_a_kill_tokio() {
    unacknowledged_tail_is_replayed_exactly_after_a_kill(Shell::Tokio);
}

#[test]
fn unacknowledged_tail_is_replayed_exactly_after_a_kill_blocking() {
    unacknowledged_tail_is_replayed_exactly_after_a_kill(Shell::Blocking);
}

/// Claim: WAL written to unpublished tables is released by the idle keepalive
/// acknowledgement.
fn idle_keepalives_release_wal_of_unpublished_tables(shell: Shell) {
    const NEAR_ZERO: i64 = 64 * 1024;
    let env = env_with("idlewal", CompletionDelay::Fixed(Duration::ZERO), "2s");
    let mut connector = env.start(shell, &[TABLES]);
    wait_ready(&env, &connector);

    let before = env.sql("SELECT pg_current_wal_lsn()");
    env.sql("INSERT INTO other SELECT i, md5(i::text) FROM generate_series(1, 10000) i");
    // The workload is big enough to see: far more WAL than the bound below (the slot may
    // already have released it, so measure the WAL itself, not the slot).
    let written: i64 = env
        .sql(&format!("SELECT pg_current_wal_lsn() - '{before}'::pg_lsn"))
        .parse()
        .expect("a byte count");
    assert!(
        written > 4 * NEAR_ZERO,
        "10,000 rows should write more than {} bytes of WAL, wrote {written}",
        4 * NEAR_ZERO
    );
    let released = wait_for(Duration::from_secs(20), || {
        env.retained_wal_bytes().filter(|&b| b < NEAR_ZERO)
    });
    assert!(
        released.is_some(),
        "retained WAL stayed at {:?} bytes:\n{}",
        env.retained_wal_bytes(),
        connector.log_text()
    );
    assert!(env.feldera_rows("users", "id").is_empty());
    assert_eq!(env.ingress_rows(), 0, "nothing published was written");
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0));
}

#[test]
fn idle_keepalives_release_wal_of_unpublished_tables_tokio() {
    idle_keepalives_release_wal_of_unpublished_tables(Shell::Tokio);
}

#[test]
fn idle_keepalives_release_wal_of_unpublished_tables_blocking() {
    idle_keepalives_release_wal_of_unpublished_tables(Shell::Blocking);
}

/// Claim: with wal_sender_timeout 4 s, a 22 s wait for Feldera keeps one session alive
/// (status updates continue while waiting), and the slot moves after completion.
fn long_feldera_wait_keeps_one_session(shell: Shell) {
    let env = env_with(
        "longwait",
        CompletionDelay::Fixed(Duration::from_secs(22)),
        "4s",
    );
    let mut connector = env.start(shell, &[TABLES]);
    wait_ready(&env, &connector);
    let (pid, _, _) = env.walsender().expect("walsender");

    insert_each(&env, 1, 1);
    let target = env.sql("SELECT pg_current_wal_lsn()");
    assert!(
        wait_for(Duration::from_secs(20), || (env.ingress_rows() == 1)
            .then_some(()))
        .is_some(),
        "the double never accepted the row:\n{}",
        connector.log_text()
    );
    let mut saw_waiting = false;
    let moved = wait_for(Duration::from_secs(60), || {
        let walsender = env.walsender();
        assert_eq!(
            walsender.as_ref().map(|w| &w.0),
            Some(&pid),
            "the walsender changed or vanished:\n{}",
            connector.log_text()
        );
        let confirmed = env.slot_confirmed().expect("slot");
        if env.lsn_at_least(&confirmed, &target) {
            return Some(());
        }
        // Not yet confirmed: Feldera must not have processed the row either.
        saw_waiting = true;
        None
    });
    assert!(
        moved.is_some(),
        "slot never moved:\n{}",
        connector.log_text()
    );
    assert!(saw_waiting, "the slot moved before the 22 s completion");
    assert_same_rows(&env);
    let log = connector.log_text();
    assert_eq!(log.matches("session 1 starting").count(), 1, "{log}");
    assert!(!log.contains("session 2"), "{log}");
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0));
}

#[test]
fn long_feldera_wait_keeps_one_session_tokio() {
    long_feldera_wait_keeps_one_session(Shell::Tokio);
}

#[test]
fn long_feldera_wait_keeps_one_session_blocking() {
    long_feldera_wait_keeps_one_session(Shell::Blocking);
}
