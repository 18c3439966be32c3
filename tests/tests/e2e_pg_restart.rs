//! End to end: PostgreSQL restarted (immediate stop, i.e. a crash, then start) while slotline
//! streams. The connector reconnects with backoff and loses nothing.
//!
//! Own test binary: the restart hits the whole cluster, which every test of a binary
//! shares. The two shells' cases take a lock so neither restarts the other's server.
//! After an immediate stop the slot's position falls back to what the last checkpoint
//! saved, so the replay may repeat acknowledged transactions: harmless with keyed tables.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::sync::Mutex;
use std::time::Duration;

static ONE_RESTART_AT_A_TIME: Mutex<()> = Mutex::new(());

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

fn postgres_restarted_mid_stream(shell: Shell) {
    let _alone = ONE_RESTART_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Slow completions keep a batch in flight when the server goes away.
    let double = DoubleConfig::new("p", schema())
        .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(300)));
    let env = Env::with_double("pgrestart", SETUP, double);
    let mut connector = env.start(shell, &[("TABLES", "users"), ("BATCH_LINGER_MS", "0")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    for id in 1..=4 {
        env.sql(&format!("INSERT INTO users VALUES ({id}, 'first {id}')"));
    }
    let sent = wait_for(Duration::from_secs(30), || {
        env.feldera
            .requests()
            .iter()
            .any(|r| r.endpoint == "ingress")
            .then_some(())
    });
    assert!(sent.is_some(), "{}", connector.log_text());

    env.pg.restart();

    env.sql("UPDATE users SET id = 20, name = 'moved' WHERE id = 2");
    env.sql("DELETE FROM users WHERE id = 3");
    env.sql("INSERT INTO users VALUES (3, 'again'), (5, 'e')");
    assert!(
        env.wait_caught_up(Duration::from_secs(90)),
        "no catch-up after the restart:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    let log = connector.log_text();
    assert!(
        log.contains("replication connection lost")
            || log.contains("replication connection failed"),
        "the restart went unnoticed:\n{log}"
    );
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0), "{log}");
}

#[test]
fn postgres_restarted_mid_stream_reconnects_and_loses_nothing_tokio() {
    postgres_restarted_mid_stream(Shell::Tokio);
}

#[test]
fn postgres_restarted_mid_stream_reconnects_and_loses_nothing_blocking() {
    postgres_restarted_mid_stream(Shell::Blocking);
}
