//! End to end, both shells: retraction at scale costs a bounded number of Feldera queries.
//!
//! Feldera's ad-hoc engine pushes no filter and no limit into its table scan, so every query
//! reads the whole table (`docs/feldera.md`); the double charges the same (its
//! `QueryStats`). Reading a table's keys must therefore take one streamed query, not one
//! query per page: a TRUNCATE of 200,000 keys, and a re-snapshot that finds 50,000
//! leftovers, may send at most 3 queries per table (the key scan and the counts around it),
//! whatever the number of keys.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(300);
const KEYS: u64 = 200_000;
/// Queries a retraction may send per table, whatever the number of keys.
const MAX_QUERIES_PER_TABLE: u64 = 3;

fn field(name: &str, columntype: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": columntype})
}

fn schema() -> Value {
    json!({"inputs": [
        {"name": "big", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "properties": {}, "fields": [
            field("id", json!({"type": "BIGINT", "nullable": false})),
            field("name", json!({"type": "VARCHAR", "nullable": true, "precision": -1}))]},
        {"name": "pairs", "case_sensitive": false, "primary_key": ["a", "amount"],
         "materialized": false, "properties": {}, "fields": [
            field("a", json!({"type": "BIGINT", "nullable": false})),
            field("amount", json!({"type": "DECIMAL", "nullable": false, "precision": 10, "scale": 2})),
            field("note", json!({"type": "VARCHAR", "nullable": true, "precision": -1}))]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE big (id bigint PRIMARY KEY, name text);
    CREATE TABLE pairs (a bigint, amount numeric(10,2), note text, PRIMARY KEY (a, amount));
    CREATE PUBLICATION pub FOR TABLE big, pairs;";

/// `big`: ids 1..=200,000. `pairs`: 3,000 rows with a composite key holding a DECIMAL
/// (its keys are read as text).
fn fill(env: &Env) {
    env.sql(&format!(
        "INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, {KEYS}) g;
         INSERT INTO pairs SELECT g / 3, (g % 3) + 0.10, 'pair ' || g FROM generate_series(1, 3000) g;"
    ));
}

/// Starts a connector that copies both tables first.
fn start_copying(env: &Env, shell: Shell) -> Connector {
    env.start(
        shell,
        &[("TABLES", "big,pairs"), ("SNAPSHOT_MODE", "initial")],
    )
}

/// Waits until `connector`'s copy is complete (a state file saying so, for another
/// consistent point than `earlier`'s) and it caught up; fails at once if it exits.
fn wait_copied(env: &Env, connector: &mut Connector, earlier: Option<&Value>) {
    let copied = wait_for(LONG, || {
        assert!(
            connector.is_running(),
            "the connector exited:\n{}",
            connector.log_text()
        );
        let state = env.state()?;
        let new = earlier.is_none_or(|e| e["consistent_point"] != state["consistent_point"]);
        (state["phase"] == "complete" && new).then_some(())
    });
    assert!(
        copied.is_some() && env.wait_caught_up(LONG),
        "the copy did not finish:\n{}",
        connector.log_text()
    );
}

/// Starts with an initial copy of both tables and waits until it streams.
fn start_seeded(env: &Env, shell: Shell) -> Connector {
    let mut connector = start_copying(env, shell);
    wait_copied(env, &mut connector, None);
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

/// The queries the double counted per table since its counters were last cleared.
fn assert_few_queries(env: &Env, tables: &[&str], connector: &Connector) {
    let stats = env.feldera.query_stats();
    for table in tables {
        eprintln!(
            "{table}: {} queries, {} rows scanned",
            stats.queries_of(table),
            stats.rows_scanned_of(table)
        );
        let sent = stats.queries_of(table);
        assert!(
            sent <= MAX_QUERIES_PER_TABLE,
            "{sent} queries of {table} (at most {MAX_QUERIES_PER_TABLE}); rows scanned {}; \
             all counters {stats:?}\n{}",
            stats.rows_scanned_of(table),
            connector.log_text()
        );
    }
}

/// The keys of `table` were read as a stream: one query answered all `keys` of them, and
/// the first delete of `table` reached the double before that answer ended. With a cost
/// per row visited, the double's scan lasts seconds, so a client that read the whole answer
/// before deleting anything would send its first delete after the answer's end.
fn assert_keys_streamed(env: &Env, table: &str, keys: u64, connector: &Connector) {
    let log = env.feldera.requests();
    let queries: Vec<_> = log.iter().filter(|r| r.endpoint == "query").collect();
    let scan = queries
        .iter()
        .find(|r| r.table.as_deref() == Some(table) && r.rows == Some(keys))
        .unwrap_or_else(|| {
            panic!(
                "no query answered all {keys} keys of {table} at once: {queries:?}\n{}",
                connector.log_text()
            )
        });
    let first_delete = log
        .iter()
        .filter(|r| r.endpoint == "ingress" && r.table.as_deref() == Some(table))
        .map(|r| r.started)
        .min()
        .unwrap_or_else(|| panic!("no delete of {table} reached the double"));
    assert!(
        first_delete < scan.finished,
        "the first delete of {table} came at {first_delete:?}, after the key scan's answer \
         ended at {:?}: the keys were not read as a stream",
        scan.finished
    );
}

/// `pairs` on both sides, with the decimal as text (PostgreSQL prints it with its scale,
/// the double's rows hold it as a string), sorted by the unique note.
fn assert_pairs_equal(env: &Env) {
    let pg: Value = serde_json::from_str(&env.sql(
        "SELECT coalesce(json_agg(json_build_object('a', a, 'amount', amount::text, 'note', note) \
         ORDER BY note), '[]') FROM pairs",
    ))
    .expect("PostgreSQL's pairs as JSON");
    let feldera = env.feldera_rows("pairs", "note");
    assert_eq!(
        Value::Array(feldera),
        pg,
        "Feldera's pairs (left) differs from PostgreSQL's (right)"
    );
}

/// (a) A TRUNCATE of a table holding 200,000 keys in Feldera: every key deleted, the count
/// checked, the slot past the TRUNCATE; at most 3 queries of that table, the keys read as
/// a stream.
fn truncate_of_200k_keys(shell: Shell) {
    let env = Env::new("scale_trunc", SETUP, schema());
    fill(&env);
    let mut connector = start_seeded(&env, shell);
    assert_eq!(env.feldera.row_count("big"), Some(KEYS as usize));
    env.feldera.clear_query_stats();
    env.feldera.clear_requests();
    // A slower engine: a scan of the 200,000 keys takes at least 4 s (see
    // `assert_keys_streamed`).
    env.feldera.set_scan_row_cost(Duration::from_micros(20));

    let inside = env.write_txn("TRUNCATE big");
    assert!(
        env.wait_caught_up(LONG),
        "the TRUNCATE was not acknowledged:\n{}",
        connector.log_text()
    );
    assert!(
        !env.slot_at_or_before(&inside),
        "the slot did not move past the TRUNCATE"
    );
    assert_eq!(
        env.feldera.row_count("big"),
        Some(0),
        "Feldera's big is not empty"
    );
    env.feldera.set_scan_row_cost(Duration::ZERO);
    assert_few_queries(&env, &["big"], &connector);
    assert_keys_streamed(&env, "big", KEYS, &connector);
    let stats = env.feldera.query_stats();
    assert_eq!(
        stats.queries_of("pairs"),
        0,
        "only the truncated table is read: {stats:?}"
    );
    // The stream goes on after the retraction.
    env.sql("INSERT INTO big VALUES (7, 'after the truncate')");
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    env.assert_rows_equal("big", "big", "id");
    assert_pairs_equal(&env);
    stop(&mut connector);
}

/// (b) A re-snapshot (the slot dropped while slotline was down) where Feldera holds 50,000
/// rows PostgreSQL deleted, and about 600 of `pairs`: afterwards both sides are equal and at most
/// 3 queries per table were sent.
fn resnapshot_with_50k_leftovers(shell: Shell) {
    let env = Env::new("scale_resnap", SETUP, schema());
    fill(&env);
    let mut first = start_seeded(&env, shell);
    stop(&mut first);
    drop(first);

    env.sql(
        "DELETE FROM big WHERE id % 4 = 0;
         UPDATE big SET name = 'changed while down' WHERE id % 1000 = 1;
         DELETE FROM pairs WHERE a % 5 = 0;",
    );
    env.sql(&format!(
        "SELECT pg_drop_replication_slot('{}')",
        env.slot_name()
    ));
    assert_eq!(
        env.feldera.row_count("big"),
        Some(KEYS as usize),
        "the ghosts are there"
    );
    env.feldera.clear_query_stats();

    // The state file says complete for the dropped slot's copy; the restart copies again
    // and writes it anew.
    let copied_before = env.state().expect("the first copy's state file");
    let mut restarted = start_copying(&env, shell);
    wait_copied(&env, &mut restarted, Some(&copied_before));
    assert_eq!(
        env.feldera.row_count("big"),
        Some((KEYS - KEYS / 4) as usize)
    );
    env.assert_rows_equal("big", "big", "id");
    assert_pairs_equal(&env);
    assert_few_queries(&env, &["big", "pairs"], &restarted);
    stop(&mut restarted);
}

slotline_tests::both_shells!(truncate_of_200k_keys, resnapshot_with_50k_leftovers);
