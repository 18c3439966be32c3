//! End to end, both shells: the Feldera pipeline restarts while a writer runs (real
//! PostgreSQL, the Feldera double's crash restarts, the real binaries).
//!
//! - Without fault tolerance the pipeline comes back empty: slotline notices the new
//!   incarnation and copies every table again, without the process exiting.
//! - With fault tolerance (`at_least_once`) it comes back as its last successful checkpoint
//!   held it: with `FELDERA_DURABILITY=auto` (checkpoints) the slot never passed that
//!   checkpoint, so replaying from the slot converges; with `FELDERA_DURABILITY=completion`
//!   the same restart loses rows for good, which is what checkpoint mode prevents.
//! - A restart is trusted only on Feldera's evidence that the process resumed from the
//!   checkpoints the copy was written under (`initial_start_time`, the pipeline's `id`):
//!   fault tolerance switched on at a restart (nothing to resume from), a pipeline deleted
//!   and created again under its name, and storage cleared under fault tolerance all come
//!   back empty while the configuration says a restart keeps the tables; each is copied
//!   again.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell, Writer};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

fn field(name: &str, columntype: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": columntype})
}

fn schema() -> Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            field("id", json!({"type": "BIGINT", "nullable": false})),
            field("name", json!({"type": "VARCHAR", "nullable": true, "precision": -1})),
            field("score", json!({"type": "INTEGER", "nullable": true}))]},
        {"name": "items", "case_sensitive": false, "primary_key": ["sku"], "materialized": true, "properties": {},
         "fields": [
            field("sku", json!({"type": "VARCHAR", "nullable": false, "precision": -1})),
            field("qty", json!({"type": "INTEGER", "nullable": true}))]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text, score integer);
    CREATE TABLE items (sku text PRIMARY KEY, qty integer);
    INSERT INTO users SELECT g, 'user ' || g, 0 FROM generate_series(1, 2000) g;
    INSERT INTO items SELECT 'sku-' || g, g FROM generate_series(1, 500) g;
    CREATE PUBLICATION pub FOR TABLE users, items;";

/// The n-th transaction: a new user, an update, a delete, an item upserted.
fn transaction(n: u64) -> String {
    let updated = (n * 7_919) % 2000 + 1;
    let deleted = (n * 104_729 + 13) % 2000 + 1;
    format!(
        "BEGIN;
         INSERT INTO users VALUES ({}, 'new {n}', {n});
         UPDATE users SET score = score + 1, name = name || '+' WHERE id = {updated};
         DELETE FROM users WHERE id = {deleted};
         INSERT INTO items VALUES ('new-{n}', {n}) ON CONFLICT (sku) DO UPDATE SET qty = excluded.qty;
         COMMIT;",
        100_000 + n
    )
}

fn start(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> Connector {
    let mut pairs = vec![
        ("TABLES", "users,items"),
        ("SNAPSHOT_MODE", "initial"),
        ("FELDERA_CHECKPOINT_INTERVAL_SECS", "1"),
    ];
    pairs.extend_from_slice(extra);
    env.start(shell, &pairs)
}

/// One table's rows on both sides, each sorted by its key's JSON text.
fn same_rows(env: &Env, table: &str, key: &str) -> bool {
    let sorted = |mut rows: Vec<Value>| {
        rows.sort_by_key(|row| row[key].to_string());
        rows
    };
    sorted(env.pg_rows(table, key)) == sorted(env.feldera_rows(table, key))
}

/// Starts the connector and waits until its first copy is complete and the stream caught up.
fn seeded(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> Connector {
    let connector = start(env, shell, extra);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the first copy did not finish:\n{}",
        connector.log_text()
    );
    connector
}

/// Both tables, compared value by value.
fn converged(env: &Env) -> bool {
    same_rows(env, "users", "id") && same_rows(env, "items", "sku")
}

fn wait_converged(env: &Env, connector: &Connector) {
    assert!(
        wait_for(LONG, || (env.wait_caught_up(Duration::from_secs(5))
            && converged(env))
        .then_some(()))
        .is_some(),
        "Feldera never converged to PostgreSQL:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    env.assert_rows_equal("items", "items", "sku");
}

fn a_pipeline_without_fault_tolerance_restarted_empty_converges_without_the_process_exiting(
    shell: Shell,
) {
    let env = Env::new("ft_none", SETUP, schema());
    let mut connector = seeded(&env, shell, &[]);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(5), transaction);
    assert!(writer.wait_committed(50, LONG));
    let first = env.feldera.incarnation();
    env.feldera.crash_restart();
    assert_eq!(env.feldera_count("users"), 0, "the double came back empty");
    assert!(writer.wait_committed(150, LONG));
    writer.stop();
    assert!(
        connector.wait_log("copying every table again", LONG),
        "the restart was not answered with a copy:\n{}",
        connector.log_text()
    );
    wait_converged(&env, &connector);
    assert!(connector.is_running(), "{}", connector.log_text());
    let state = env.state().expect("a state file");
    assert_eq!(state["phase"], "complete");
    assert_eq!(state["feldera_incarnation"], env.feldera.incarnation());
    assert_ne!(state["feldera_incarnation"], first);
    assert_eq!(
        env.feldera.checkpoint_counts().requested,
        0,
        "auto chose completion: no checkpoints"
    );
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

fn a_pipeline_with_fault_tolerance_restarted_from_its_last_checkpoint_converges_by_replay(
    shell: Shell,
) {
    let env = Env::new("ft_alo", SETUP, schema());
    env.feldera
        .set_fault_tolerance(Some("at_least_once"))
        .expect("fault tolerance");
    let mut connector = seeded(&env, shell, &[]);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(5), transaction);
    assert!(writer.wait_committed(60, LONG));
    let succeeded = env.feldera.checkpoint_counts().succeeded;
    assert!(succeeded >= 2, "checkpoints ran: {succeeded}");
    let restarted = env.feldera.crash_restart();
    assert!(writer.wait_committed(160, LONG));
    writer.stop();
    wait_converged(&env, &connector);
    let log = connector.log_text();
    assert!(
        !log.contains("copying every table again"),
        "a restart from a checkpoint needs no copy:\n{log}"
    );
    assert!(
        log.contains(&format!("incarnation {restarted}; FELDERA_DURABILITY=auto")),
        "a session started against the restarted pipeline:\n{log}"
    );
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

fn with_completion_durability_the_same_restart_loses_rows_for_good(shell: Shell) {
    let env = Env::new("ft_lossy", SETUP, schema());
    env.feldera
        .set_fault_tolerance(Some("at_least_once"))
        .expect("fault tolerance");
    let mut connector = seeded(&env, shell, &[("FELDERA_DURABILITY", "completion")]);
    assert!(
        connector.wait_log("a Feldera restart loses what completed", LONG),
        "the startup line warns:\n{}",
        connector.log_text()
    );
    operator_checkpoint(&env);
    env.sql("UPDATE users SET score = -1 WHERE id <= 100");
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    // Slotline asked for no checkpoint; the one the operator took first holds the copy
    // and not the update. The restart resumes from it (so it is trusted), without the
    // update, while the slot is past it.
    assert_eq!(env.feldera.checkpoint_counts().requested, 1);
    std::thread::sleep(Duration::from_millis(1_100));
    env.feldera.crash_restart();
    env.sql("INSERT INTO users VALUES (900001, 'after', 0)");
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    std::thread::sleep(Duration::from_secs(3));
    let stale = env
        .feldera_rows("users", "id")
        .iter()
        .filter(|row| row["id"].as_i64().is_some_and(|id| id <= 100) && row["score"] != json!(-1))
        .count();
    assert_eq!(
        stale,
        100,
        "Feldera lost the update that completed after the checkpoint:\n{}",
        connector.log_text()
    );
    assert!(!connector.log_text().contains("copying every table again"));
    assert!(!converged(&env));
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

/// What an operator's `POST .../checkpoint` does: a checkpoint, waited for.
fn operator_checkpoint(env: &Env) {
    let before = env.feldera.checkpoint_counts().succeeded;
    let url = format!("{}/v0/pipelines/p/checkpoint", env.feldera.base_url());
    ureq::post(&url).send_empty().expect("checkpoint requested");
    assert!(
        wait_for(LONG, || (env.feldera.checkpoint_counts().succeeded
            > before)
            .then_some(()))
        .is_some(),
        "the checkpoint never succeeded"
    );
}

/// A seeded connector on a pipeline without fault tolerance; the operator turns it on
/// and restarts the pipeline, which has no checkpoint to resume from and comes back empty
/// while its configuration now says restarts keep the tables.
fn fault_tolerance_switched_on_at_a_restart_is_copied_again(shell: Shell) {
    let env = Env::new("ft_switch", SETUP, schema());
    let mut connector = seeded(&env, shell, &[]);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(5), transaction);
    assert!(writer.wait_committed(30, LONG));
    env.feldera
        .set_fault_tolerance(Some("at_least_once"))
        .expect("fault tolerance");
    env.feldera.crash_restart();
    assert_eq!(env.feldera_count("users"), 0, "the double came back empty");
    assert!(writer.wait_committed(90, LONG));
    writer.stop();
    assert!(
        connector.wait_log("restarted with nothing to resume from", LONG),
        "the emptied pipeline was trusted:\n{}",
        connector.log_text()
    );
    wait_converged(&env, &connector);
    let state = env.state().expect("a state file");
    assert_eq!(
        state["feldera_written_under"]["fault_tolerance"], "at_least_once",
        "{state}"
    );
    assert!(connector.is_running(), "{}", connector.log_text());
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

/// With fault tolerance, a pipeline deleted and created again under its name, then one
/// whose storage is cleared: both come back empty, and both are copied again.
fn a_recreated_pipeline_or_cleared_storage_is_copied_again(shell: Shell) {
    let env = Env::new("ft_recreate", SETUP, schema());
    env.feldera
        .set_fault_tolerance(Some("at_least_once"))
        .expect("fault tolerance");
    let mut connector = seeded(&env, shell, &[]);
    let id_before =
        env.state().expect("a state file")["feldera_written_under"]["pipeline_id"].clone();
    assert!(id_before.is_string(), "the copy records the pipeline id");
    env.feldera.recreate();
    assert_eq!(env.feldera_count("users"), 0);
    env.sql("UPDATE users SET score = 7 WHERE id <= 10");
    assert!(
        connector.wait_log("was deleted and created again", LONG),
        "the new pipeline was trusted:\n{}",
        connector.log_text()
    );
    wait_converged(&env, &connector);
    let state = env.state().expect("a state file");
    assert_ne!(state["feldera_written_under"]["pipeline_id"], id_before);
    // Storage cleared: the pipeline restarts with nothing, its id unchanged.
    std::thread::sleep(Duration::from_millis(1_100));
    env.feldera.restart(false);
    env.sql("UPDATE users SET score = 8 WHERE id <= 10");
    assert!(
        connector.wait_log("storage was cleared", LONG),
        "the cleared pipeline was trusted:\n{}",
        connector.log_text()
    );
    wait_converged(&env, &connector);
    assert!(connector.is_running(), "{}", connector.log_text());
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

slotline_tests::both_shells!(
    fault_tolerance_switched_on_at_a_restart_is_copied_again,
    a_recreated_pipeline_or_cleared_storage_is_copied_again,
    a_pipeline_without_fault_tolerance_restarted_empty_converges_without_the_process_exiting,
    a_pipeline_with_fault_tolerance_restarted_from_its_last_checkpoint_converges_by_replay,
    with_completion_durability_the_same_restart_loses_rows_for_good,
);
