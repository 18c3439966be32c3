//! End to end: real PostgreSQL, the Feldera double and the real binaries (both shells).

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::pg::wait_for;
use std::time::Duration;

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]},
        {"name": "lineitems", "case_sensitive": false, "primary_key": ["sku"], "materialized": false, "properties": {},
         "fields": [
            {"name": "sku", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": false, "precision": -1}},
            {"name": "qty", "case_sensitive": false, "columntype": {"type": "INTEGER", "nullable": true}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE TABLE items (sku text PRIMARY KEY, qty int);
    CREATE PUBLICATION pub FOR TABLE users, items;";

fn streams_inserts_updates_deletes_across_two_routes(shell: Shell) {
    let env = Env::new("stream", SETUP, schema());
    let mut connector = env.start(shell, &[("TABLES", "users,public.items:lineitems")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(20)) || env.slot_exists(),
        "connector did not start:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'a'), (2, 'b'), (3, 'c'); INSERT INTO items VALUES ('x', 1), ('y', 2)");
    env.sql("UPDATE users SET name = 'bb' WHERE id = 2; UPDATE users SET id = 30 WHERE id = 3; DELETE FROM users WHERE id = 1");
    env.sql("UPDATE items SET qty = 5 WHERE sku = 'x'; DELETE FROM items WHERE sku = 'y'");
    assert!(
        env.wait_caught_up(Duration::from_secs(20)),
        "not caught up:\n{}",
        connector.log_text()
    );
    assert_eq!(env.feldera_rows("users", "id"), env.pg_rows("users", "id"));
    assert_eq!(
        env.feldera_rows("lineitems", "sku"),
        env.pg_rows("items", "sku")
    );
    assert_eq!(
        connector.stop(Duration::from_secs(10)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn streams_inserts_updates_deletes_across_two_routes_tokio() {
    streams_inserts_updates_deletes_across_two_routes(Shell::Tokio);
}

#[test]
fn streams_inserts_updates_deletes_across_two_routes_blocking() {
    streams_inserts_updates_deletes_across_two_routes(Shell::Blocking);
}

/// Feldera keeps every HTTP input endpoint until it restarts and allows 100
/// (docs/feldera.md, "Ingress"): however many batches and sessions a run sends, one
/// spelling per table must keep it at one endpoint per table.
fn a_long_run_creates_one_ingress_endpoint_per_table(shell: Shell) {
    let env = Env::new("endpoints", SETUP, schema());
    let tables = [("TABLES", "users,public.items:lineitems")];
    let small_batches = [tables[0], ("BATCH_MAX_ROWS", "7"), ("BATCH_LINGER_MS", "0")];
    for run in 0..2 {
        let mut connector = env.start(shell, &small_batches);
        // The first run streams from the slot it creates: write only once it exists.
        assert!(
            wait_for(Duration::from_secs(20), || env.slot_exists().then_some(())).is_some(),
            "connector did not start:\n{}",
            connector.log_text()
        );
        for i in 0..20 {
            let id = run * 1000 + i * 10;
            env.sql(&format!(
                "INSERT INTO users SELECT g, 'u' || g FROM generate_series({id}, {id} + 9) g;
                 INSERT INTO items SELECT 's' || g, g FROM generate_series({id}, {id} + 9) g;
                 UPDATE users SET name = 'v' WHERE id = {id}"
            ));
        }
        assert!(
            env.wait_caught_up(Duration::from_secs(30)),
            "run {run} not caught up:\n{}",
            connector.log_text()
        );
        assert_eq!(
            connector.stop(Duration::from_secs(10)),
            Some(0),
            "{}",
            connector.log_text()
        );
    }
    env.assert_rows_equal("users", "users", "id");
    env.assert_rows_equal("items", "lineitems", "sku");
    let ingress: Vec<String> = env
        .feldera
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "ingress")
        .map(|r| r.path)
        .collect();
    assert!(
        ingress.len() >= 40,
        "many batches in two runs: {}",
        ingress.len()
    );
    let spellings: std::collections::BTreeSet<&String> = ingress.iter().collect();
    assert_eq!(spellings.len(), 2, "one URL per table: {spellings:?}");
    let endpoints = env.feldera.ingress_endpoints();
    assert_eq!(endpoints.len(), 2, "one per table: {endpoints:?}");
    assert!(
        endpoints.iter().all(|e| e.contains("lines=single")),
        "{endpoints:?}"
    );
}

#[test]
fn a_long_run_creates_one_ingress_endpoint_per_table_tokio() {
    a_long_run_creates_one_ingress_endpoint_per_table(Shell::Tokio);
}

#[test]
fn a_long_run_creates_one_ingress_endpoint_per_table_blocking() {
    a_long_run_creates_one_ingress_endpoint_per_table(Shell::Blocking);
}

/// The linger only coalesces behind batches in flight (docs/pipelining.md, "When a batch is
/// sent"): with an hour's linger, a lone commit and a run of commits still reach Feldera,
/// each batch going as soon as nothing is in flight.
fn a_commit_never_waits_for_the_linger_when_nothing_is_in_flight(shell: Shell) {
    let env = Env::new("idle_send", SETUP, schema());
    let mut connector = env.start(
        shell,
        &[
            ("TABLES", "users,public.items:lineitems"),
            ("BATCH_LINGER_MS", "3600000"),
        ],
    );
    assert!(
        wait_for(Duration::from_secs(20), || env.slot_exists().then_some(())).is_some(),
        "connector did not start:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'a')");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "a lone commit waited for the linger:\n{}",
        connector.log_text()
    );
    assert_eq!(env.feldera_rows("users", "id"), env.pg_rows("users", "id"));
    for id in 2..=40 {
        env.sql(&format!("INSERT INTO users VALUES ({id}, 'u{id}')"));
    }
    env.sql("UPDATE users SET name = 'last' WHERE id = 40");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "commits behind a batch in flight waited for the linger:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        connector.stop(Duration::from_secs(10)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn a_commit_never_waits_for_the_linger_when_nothing_is_in_flight_tokio() {
    a_commit_never_waits_for_the_linger_when_nothing_is_in_flight(Shell::Tokio);
}

#[test]
fn a_commit_never_waits_for_the_linger_when_nothing_is_in_flight_blocking() {
    a_commit_never_waits_for_the_linger_when_nothing_is_in_flight(Shell::Blocking);
}
