//! End to end: `slotline ddl` round trip, in both shells. On a real PostgreSQL, the
//! acceptance schema (users, items), a table whose names need quotes and a table with a
//! column of every mapped type are described by `ddl --format json`; that JSON becomes
//! the Feldera double's program schema, `check` passes against it, and a run copies the
//! rows (the snapshot) and streams inserts, updates and deletes until both sides hold the
//! same rows. The SQL output is snapshot tested; a missing table and a bad flag fail; an
//! explicit `--publication` describes the publication's tables over a TABLES inherited from
//! the environment.
//!
//! Feldera's SQL compiler is not run here (a Java program this suite does not install):
//! the SQL is checked by its snapshot, the JSON by slotline and the double reading it.

use serde_json::{json, Map, Value};
use slotline_tests::e2e::{operation, Env, Shell};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use std::time::Duration;

const SETUP: &str = "
  CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
  CREATE TYPE addr AS (street text, \"Zip\" int4);
  CREATE DOMAIN money12 AS numeric(12, 2);
  CREATE TABLE users (id bigint PRIMARY KEY, name text);
  CREATE TABLE items (sku text PRIMARY KEY, qty int NOT NULL);
  CREATE TABLE \"Order Lines\" (\"order\" bigint, \"LineNo\" int, \"Unit Price\" float8,
    PRIMARY KEY (\"order\", \"LineNo\"));
  CREATE TABLE every_type (id int8 PRIMARY KEY, b bool, i2 int2, i4 int4 NOT NULL,
    f4 float4, f8 float8, n numeric(12, 3), t text, vc varchar(20), bc char(5), by bytea,
    d date, tm time, ts timestamp, tz timestamptz, u uuid, jb jsonb, ai int4[], at text[],
    m money12, home addr, e mood, iv interval);
  CREATE PUBLICATION pub FOR TABLE users, items, \"Order Lines\", every_type;";

/// Rows before the start (the snapshot copies them).
const SEED: &str = "
  INSERT INTO users VALUES (1, 'ada'), (2, 'grace');
  INSERT INTO items VALUES ('a-1', 3), ('b-2', 0);
  INSERT INTO \"Order Lines\" VALUES (10, 1, 2.5), (10, 2, 0.25);
  INSERT INTO every_type VALUES (1, true, 12, 1234, 1.5, 2.718281828459045, 12.345,
    'hello', 'varying', 'ab', '\\x0102ff', '2024-06-01', '13:14:15', '2024-06-01 13:14:15',
    '2024-06-01 17:30:00+05:30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    '{\"z\": true, \"a\": [1, 2]}', '{1,NULL,3}', '{a,\"b c\"}', 1234.5, ROW('Main St', 12345),
    'happy', '1 day 02:03:04'),
    (2, NULL, NULL, -7, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);";

/// Changes while streaming: inserts, updates (a key change too) and deletes.
const WORKLOAD: &str = "
  INSERT INTO users VALUES (3, 'edsger');
  UPDATE users SET name = 'Ada' WHERE id = 1;
  DELETE FROM users WHERE id = 2;
  UPDATE items SET sku = 'a-9', qty = 7 WHERE sku = 'a-1';
  INSERT INTO \"Order Lines\" VALUES (11, 1, 9.75);
  DELETE FROM \"Order Lines\" WHERE \"order\" = 10 AND \"LineNo\" = 2;
  INSERT INTO every_type VALUES (3, false, -32768, 2147483647, -0.5, 1e300, -0.5,
    E'quote\" nl\\n é', '', 'x', '\\x00', '2000-02-29', '23:59:59.999999',
    '1999-12-31 23:59:59.000001', '2000-01-01 00:00:00.5-08',
    '00000000-0000-0000-0000-000000000000', '[1, \"two\", null]', '{}', '{\"\"}', -0.01,
    ROW(NULL, NULL), 'sad', '-3 mons');
  UPDATE every_type SET t = 'changed', home = ROW('Side St', 1), i4 = 5 WHERE id = 1;
  DELETE FROM every_type WHERE id = 2;";

/// The configuration of `ddl`: the connection only (no TABLES: the publication's tables).
fn ddl_pairs(env: &Env) -> Vec<(String, String)> {
    let mut pairs = env.config(&[]);
    pairs.retain(|(k, _)| {
        !matches!(
            k.as_str(),
            "FELDERA_PIPELINE" | "PG_PUBLICATION" | "PG_SLOT"
        )
    });
    pairs
}

/// In the publication's (the catalog's) order, so `--tables` prints what the publication does.
const TABLES: &str = "\"Order Lines\",every_type,items,users";

/// What the double holds for a value PostgreSQL's `to_json` gives (under UTC and ISO
/// settings), per the type table of docs/guide/types.md; numerics are read as text.
fn expected_value(column: &str, pg: &Value) -> Value {
    let text = || pg.as_str().map(str::to_owned).unwrap_or_default();
    match column {
        _ if pg.is_null() => Value::Null,
        "by" => {
            let hex = text();
            let hex = hex.strip_prefix("\\x").unwrap_or(&hex).to_owned();
            let bytes: Vec<Value> = (0..hex.len())
                .step_by(2)
                .map(|i| json!(u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)))
                .collect();
            Value::Array(bytes)
        }
        "ts" => json!(text().replacen('T', " ", 1)),
        _ => pg.clone(),
    }
}

fn every_type_rows_equal(env: &Env) {
    let columns = [
        "id", "b", "i2", "i4", "f4", "f8", "n", "t", "vc", "bc", "by", "d", "tm", "ts", "tz", "u",
        "jb", "ai", "at", "m", "home", "e", "iv",
    ];
    let parts: Vec<String> = columns
        .iter()
        .map(|c| match *c {
            "n" | "m" => format!("'{c}', {c}::text"),
            _ => format!("'{c}', {c}"),
        })
        .collect();
    let out = env.sql(&format!(
        "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; \
         SET extra_float_digits = 3; SET bytea_output = 'hex'; \
         SELECT coalesce(json_agg(json_build_object({}) ORDER BY id), '[]') FROM every_type",
        parts.join(", ")
    ));
    let pg: Vec<Value> = serde_json::from_str(&out).expect("json_agg output");
    let expected: Vec<Value> = pg
        .iter()
        .map(|row| {
            let row = row.as_object().cloned().unwrap_or_default();
            let mapped: Map<String, Value> = row
                .iter()
                .map(|(c, v)| (c.clone(), expected_value(c, v)))
                .collect();
            Value::Object(mapped)
        })
        .collect();
    let mut actual = env.feldera_rows("every_type", "id");
    actual.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(
        actual, expected,
        "every_type: Feldera (left) and PostgreSQL (right) differ"
    );
}

fn ddl_json_is_a_schema_check_and_a_run_accept(shell: Shell) {
    let placeholder = json!({"inputs": [], "outputs": []});
    let mut env = Env::new("ddl", SETUP, placeholder);
    env.sql(SEED);
    let out = operation(
        shell,
        &ddl_pairs(&env),
        &["ddl", "--publication", "pub", "--format", "json"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let schema: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    env.feldera = FelderaDouble::start(DoubleConfig::new("p", schema)).expect("start the double");

    let pairs = env.config(&[("TABLES", TABLES), ("SNAPSHOT_MODE", "initial")]);
    let check = operation(shell, &pairs, &["check"]);
    assert_eq!(
        check.code,
        Some(0),
        "check refuses ddl's own schema:\n{check}"
    );
    // The one warning is the nullable VARIANT's, which ddl's SQL comments on too.
    assert!(
        !check.stdout.lines().any(|l| l.starts_with("FAIL")),
        "{check}"
    );
    assert!(check.stdout.contains("check: all good"), "{check}");

    let mut connector = env.start(shell, &[("TABLES", TABLES), ("SNAPSHOT_MODE", "initial")]);
    assert!(
        env.wait_snapshot_complete_and_caught_up(Duration::from_secs(60)),
        "no snapshot:\n{}",
        connector.log_text()
    );
    env.sql(WORKLOAD);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "did not catch up:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    env.assert_rows_equal("items", "items", "sku");
    let mut lines = env.feldera_rows("\"Order Lines\"", "order");
    lines.sort_by_key(|r| (r["order"].as_i64(), r["LineNo"].as_i64()));
    let pg = env.pg_rows("\"Order Lines\"", "\"order\", \"LineNo\"");
    assert_eq!(
        lines, pg,
        "\"Order Lines\": Feldera (left) and PostgreSQL (right) differ"
    );
    every_type_rows_equal(&env);
    let log = connector.log_text();
    assert!(!log.contains("ERROR") && !log.contains("mismatch"), "{log}");
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0), "{log}");
}

fn ddl_sql_is_the_same_in_both_shells_and_names_what_fails(shell: Shell) -> String {
    let env = Env::new("ddlsql", SETUP, json!({"inputs": [], "outputs": []}));
    let pairs = ddl_pairs(&env);
    let by_publication = operation(shell, &pairs, &["ddl", "--publication", "pub"]);
    assert_eq!(by_publication.code, Some(0), "{by_publication}");
    // The SQL is the answer: no timestamped "exiting with code 0" line after it.
    assert!(
        !by_publication.stderr.contains("exiting with code"),
        "{by_publication}"
    );
    let by_tables = operation(shell, &pairs, &["ddl", "--tables", TABLES]);
    assert_eq!(by_tables.stdout, by_publication.stdout, "{by_tables}");

    // A TABLES inherited from the environment (set for the run) chooses the tables of a
    // plain `ddl`, and gives way to an explicit --publication, which says so on stderr.
    let mut inherited = pairs.clone();
    inherited.push(("TABLES".into(), "users".into()));
    inherited.push(("PG_PUBLICATION".into(), "pub".into()));
    let by_env_tables = operation(shell, &inherited, &["ddl"]);
    assert_eq!(by_env_tables.code, Some(0), "{by_env_tables}");
    assert!(
        by_env_tables.stdout.contains("CREATE TABLE users (")
            && !by_env_tables.stdout.contains("CREATE TABLE items ("),
        "{by_env_tables}"
    );
    let over_env_tables = operation(shell, &inherited, &["ddl", "--publication", "pub"]);
    assert_eq!(over_env_tables.code, Some(0), "{over_env_tables}");
    assert_eq!(
        over_env_tables.stdout, by_publication.stdout,
        "--publication describes the publication's tables, not TABLES's: {over_env_tables}"
    );
    let notice = format!(
        "{} ddl: describing the tables of publication pub (--publication); TABLES from the \
         environment is ignored",
        shell.binary_name()
    );
    assert!(
        over_env_tables.stderr.lines().any(|l| l == notice),
        "{over_env_tables}"
    );
    // Both explicit: the flag's tables, as the publication publishes them.
    let both = operation(
        shell,
        &inherited,
        &["ddl", "--publication", "pub", "--tables", "items"],
    );
    assert_eq!(both.code, Some(0), "{both}");
    assert!(
        both.stdout.contains("CREATE TABLE items (")
            && !both.stdout.contains("CREATE TABLE users (")
            && !both.stderr.contains("ignored"),
        "{both}"
    );

    let missing = operation(shell, &pairs, &["ddl", "--tables", "users,nope"]);
    assert_eq!(missing.code, Some(1), "{missing}");
    assert!(
        missing.stdout.is_empty() && missing.stderr.contains("public.nope"),
        "{missing}"
    );
    let no_tables = operation(shell, &pairs, &["ddl"]);
    assert_eq!(no_tables.code, Some(2), "{no_tables}");
    assert!(no_tables.stderr.contains("TABLES"), "{no_tables}");
    let bad = operation(
        shell,
        &pairs,
        &["ddl", "--publication", "pub", "--format", "yaml"],
    );
    assert_eq!(bad.code, Some(2), "{bad}");
    let mut down = pairs.clone();
    down.retain(|(k, _)| k != "PG_URL");
    down.push((
        "PG_URL".into(),
        "postgres://postgres@127.0.0.1:1/postgres".into(),
    ));
    let unreachable = operation(shell, &down, &["ddl", "--publication", "pub"]);
    assert_eq!(unreachable.code, Some(1), "{unreachable}");
    assert!(unreachable.stderr.contains("cannot"), "{unreachable}");
    by_publication.stdout
}

#[test]
fn ddl_json_is_a_schema_check_and_a_run_accept_tokio() {
    ddl_json_is_a_schema_check_and_a_run_accept(Shell::Tokio);
}

#[test]
fn ddl_json_is_a_schema_check_and_a_run_accept_blocking() {
    ddl_json_is_a_schema_check_and_a_run_accept(Shell::Blocking);
}

#[test]
fn ddl_sql_of_a_real_catalog() {
    let tokio = ddl_sql_is_the_same_in_both_shells_and_names_what_fails(Shell::Tokio);
    let blocking = ddl_sql_is_the_same_in_both_shells_and_names_what_fails(Shell::Blocking);
    assert_eq!(tokio, blocking, "the shells print different SQL");
    insta::assert_snapshot!(tokio);
}
