//! End to end: ALTER TABLE while slotline streams and a writer commits to the same table
//! (docs/guide/types.md, "Changing the schema"). Real PostgreSQL, the Feldera double, both shells.
//!
//! Each change reaches slotline as a new Relation message before the first row written
//! under the new shape; slotline maps the table again from it. What Feldera's schema can
//! take goes on (a new column is not sent, a dropped nullable column becomes NULL, one with
//! a DEFAULT takes it, a retyped column is converted from its new type); what it cannot
//! take ends the run with exit 1 before that transaction is acknowledged.

use serde_json::{json, Value};
use slotline_tests::e2e::{Env, Shell, Writer};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Feldera's `t`: `qty` nullable, `score` NOT NULL with DEFAULT 7, `must` NOT NULL without
/// one, `note` nullable and absent from PostgreSQL's `t` at first.
fn schema() -> Value {
    json!({"inputs": [
        {"name": "t", "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}},
            {"name": "qty", "case_sensitive": false, "columntype": {"type": "INTEGER", "nullable": true}},
            {"name": "score", "case_sensitive": false, "columntype": {"type": "INTEGER", "nullable": false}, "default": "7"},
            {"name": "must", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "note", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE t (id bigint PRIMARY KEY, name text, qty int, score int NOT NULL DEFAULT 3, must bigint NOT NULL);
    INSERT INTO t SELECT g, 'r' || g, g, g % 5, g FROM generate_series(1, 20) g;
    CREATE PUBLICATION pub FOR TABLE t;";

/// The writer's n-th transaction: an insert and an update, naming only columns every
/// shape of the table keeps.
fn write(n: u64) -> String {
    let id = 1000 + n;
    format!(
        "INSERT INTO t (id, name, must) VALUES ({id}, 'w{n}', {id}) ON CONFLICT (id) DO NOTHING;
         UPDATE t SET name = name || '.' WHERE id = {}",
        1 + n % 20
    )
}

fn started(env: &Env, connector: &slotline_tests::e2e::Connector) {
    assert!(
        wait_for(WAIT, || env.slot_exists().then_some(())).is_some(),
        "connector did not start:\n{}",
        connector.log_text()
    );
}

/// Rows of Feldera's `t` by id.
fn feldera(env: &Env) -> Vec<Value> {
    env.feldera_rows("t", "id")
}

/// The changes Feldera's schema can take, one after the other, with a writer committing
/// throughout: the stream goes on, each change is logged once, and Feldera ends equal to
/// PostgreSQL column by column (a dropped column as NULL or its DEFAULT).
fn changes_feldera_can_take_go_on_while_a_writer_commits(shell: Shell) {
    let env = Env::new("schema_ok", SETUP, schema());
    let mut connector = env.start(shell, &[("TABLES", "t"), ("SNAPSHOT_MODE", "initial")]);
    started(&env, &connector);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(5), write);
    let steps = [
        // A column Feldera does not declare: not sent.
        "ALTER TABLE t ADD COLUMN extra text DEFAULT 'e'",
        // A column Feldera declares: sent from now on.
        "ALTER TABLE t ADD COLUMN note text DEFAULT 'n'",
        // Widened and retyped columns Feldera still takes: converted from the new type.
        "ALTER TABLE t ALTER COLUMN name TYPE varchar(80)",
        "ALTER TABLE t ALTER COLUMN must TYPE int USING must::int",
        // A nullable Feldera column loses its PostgreSQL column: NULL from now on.
        "ALTER TABLE t DROP COLUMN qty",
        // A Feldera column with a DEFAULT loses its PostgreSQL column: the DEFAULT.
        "ALTER TABLE t DROP COLUMN score",
    ];
    for (i, step) in steps.iter().enumerate() {
        let before = writer.committed();
        assert!(
            writer.wait_committed(before + 20, WAIT),
            "writer stalled before step {i}"
        );
        env.sql(step);
    }
    let before = writer.committed();
    assert!(writer.wait_committed(before + 20, WAIT), "writer stalled");
    let written = writer.stop();
    // Every row changes once more under the last shape.
    env.sql("UPDATE t SET name = name || '!'");
    assert!(
        env.wait_caught_up(WAIT),
        "not caught up after {written} transactions:\n{}",
        connector.log_text()
    );
    assert!(connector.is_running(), "{}", connector.log_text());
    let pg = env.pg_rows("t", "id");
    let mut pg: Vec<Value> = pg
        .into_iter()
        .map(|mut row| {
            let object = row.as_object_mut().expect("a row is an object");
            object.remove("extra");
            object.insert("qty".into(), Value::Null);
            object.insert("score".into(), json!(7));
            row
        })
        .collect();
    pg.sort_by(|a, b| a["id"].to_string().cmp(&b["id"].to_string()));
    assert_eq!(feldera(&env), pg, "{}", connector.log_text());
    let log = connector.log_text();
    for expected in [
        "PostgreSQL column(s) extra have no Feldera column and are not sent",
        "Feldera column(s) qty have no PostgreSQL column and stay NULL",
        "Feldera column(s) score (DEFAULT 7) have no PostgreSQL column and take their DEFAULT",
    ] {
        assert!(log.contains(expected), "no {expected:?} in:\n{log}");
    }
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// A change Feldera's schema cannot take stops the stream with exit 1 naming the table,
/// the column and the fixes, and acknowledges nothing of the transaction that brought it;
/// a start after it refuses the same way, before acknowledging anything either.
fn a_change_feldera_cannot_take_exits_1_before_acknowledging_it(
    shell: Shell,
    alter: &str,
    after: &str,
    expected: &[&str],
) {
    let env = Env::new("schema_refused", SETUP, schema());
    let mut connector = env.start(shell, &[("TABLES", "t")]);
    started(&env, &connector);
    env.sql("INSERT INTO t (id, name, score, must) VALUES (500, 'before', 1, 500)");
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    env.sql(alter);
    let lsn = env.write_txn(after);
    assert_eq!(
        connector.wait_exit(WAIT),
        Some(1),
        "{}",
        connector.log_text()
    );
    let log = connector.log_text();
    for needle in expected {
        assert!(log.contains(needle), "no {needle:?} in:\n{log}");
    }
    assert!(
        env.slot_at_or_before(&lsn),
        "the refused transaction was acknowledged:\n{log}"
    );
    let rows = feldera(&env);
    assert!(
        rows.iter().any(|r| r["id"] == json!(500)) && !rows.iter().any(|r| r["id"] == json!(501)),
        "{rows:?}"
    );
    // The same refusal again: restarting is no way around it.
    let mut again = env.start(shell, &[("TABLES", "t")]);
    assert_eq!(again.wait_exit(WAIT), Some(1), "{}", again.log_text());
    assert!(env.slot_at_or_before(&lsn), "{}", again.log_text());
}

fn a_dropped_not_null_column_without_default(shell: Shell) {
    a_change_feldera_cannot_take_exits_1_before_acknowledging_it(
        shell,
        "ALTER TABLE t DROP COLUMN must",
        "INSERT INTO t (id, name) VALUES (501, 'after')",
        &[
            "public.t",
            "Feldera column must (BIGINT NOT NULL) has no PostgreSQL column and no DEFAULT",
            "a DEFAULT on the Feldera column",
            "Nothing of this transaction was acknowledged",
        ],
    );
}

fn a_column_retyped_to_a_type_feldera_cannot_take(shell: Shell) {
    a_change_feldera_cannot_take_exits_1_before_acknowledging_it(
        shell,
        "ALTER TABLE t ALTER COLUMN qty TYPE date USING date '2024-01-01' + qty",
        "INSERT INTO t (id, name, must) VALUES (501, 'after', 501)",
        &[
            "public.t",
            "qty",
            "date",
            "INTEGER",
            "Nothing of this transaction was acknowledged",
        ],
    );
}

/// `RENAME COLUMN` is a drop and an add to slotline (columns are matched by name): the
/// Feldera column of the old name becomes NULL for rows written after it, the new name is
/// not sent unless Feldera declares it.
fn a_renamed_column_is_matched_by_its_new_name(shell: Shell) {
    let env = Env::new("schema_rename", SETUP, schema());
    let mut connector = env.start(shell, &[("TABLES", "t"), ("SNAPSHOT_MODE", "initial")]);
    started(&env, &connector);
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    env.sql("ALTER TABLE t RENAME COLUMN qty TO amount");
    env.sql("UPDATE t SET name = 'renamed' WHERE id <= 5");
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    let rows = feldera(&env);
    assert_eq!(rows.len(), 20, "{rows:?}");
    for row in &rows {
        let id = row["id"].as_i64().expect("id");
        let qty = if id <= 5 { Value::Null } else { json!(id) };
        assert_eq!(row["qty"], qty, "{row}");
    }
    let log = connector.log_text();
    for expected in [
        "PostgreSQL column(s) amount have no Feldera column and are not sent",
        "Feldera column(s) qty, note have no PostgreSQL column and stay NULL",
    ] {
        assert!(log.contains(expected), "no {expected:?} in:\n{log}");
    }
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

#[test]
fn changes_feldera_can_take_go_on_while_a_writer_commits_tokio() {
    changes_feldera_can_take_go_on_while_a_writer_commits(Shell::Tokio);
}

#[test]
fn changes_feldera_can_take_go_on_while_a_writer_commits_blocking() {
    changes_feldera_can_take_go_on_while_a_writer_commits(Shell::Blocking);
}

#[test]
fn a_dropped_not_null_column_without_default_exits_1_unacknowledged_tokio() {
    a_dropped_not_null_column_without_default(Shell::Tokio);
}

#[test]
fn a_dropped_not_null_column_without_default_exits_1_unacknowledged_blocking() {
    a_dropped_not_null_column_without_default(Shell::Blocking);
}

#[test]
fn a_column_retyped_to_a_type_feldera_cannot_take_exits_1_unacknowledged_tokio() {
    a_column_retyped_to_a_type_feldera_cannot_take(Shell::Tokio);
}

#[test]
fn a_column_retyped_to_a_type_feldera_cannot_take_exits_1_unacknowledged_blocking() {
    a_column_retyped_to_a_type_feldera_cannot_take(Shell::Blocking);
}

#[test]
fn a_renamed_column_is_matched_by_its_new_name_tokio() {
    a_renamed_column_is_matched_by_its_new_name(Shell::Tokio);
}

#[test]
fn a_renamed_column_is_matched_by_its_new_name_blocking() {
    a_renamed_column_is_matched_by_its_new_name(Shell::Blocking);
}
