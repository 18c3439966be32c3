//! End to end, value by value: every PostgreSQL type of the value table (docs/postgres.md) reaches
//! Feldera as the JSON the table promises, through inserts, updates (key-changing too),
//! deletes and unchanged-TOAST updates, under REPLICA IDENTITY FULL (`typed`) and DEFAULT
//! (`items`, routed as `public.items:lineitems`), on both shells.
//!
//! The database's own defaults are hostile (TimeZone Asia/Kolkata, DateStyle SQL/DMY,
//! IntervalStyle sql_standard, extra_float_digits 0, bytea_output escape): the rows can
//! only match if the connector pins its session settings (docs/postgres.md, "Session settings
//! that change the bytes").
//!
//! The oracle is PostgreSQL's own `to_json` of each column, read in a session with the
//! pinned settings, normalised per Feldera column type by `expected_value` below (the
//! normalisation is the mapping table itself, written out). One row is also spelled out
//! literally, so the normalisation is checked against the table by hand.

use serde_json::{json, Map, Value};
use slotline_tests::e2e::{Env, Shell};
use std::time::Duration;

/// (column, PostgreSQL type, Feldera column type JSON). Both tables have these columns.
fn columns() -> Vec<(&'static str, &'static str, Value)> {
    let t = |ty: &str| json!({"type": ty, "nullable": true});
    vec![
        (
            "id",
            "int8 PRIMARY KEY",
            json!({"type": "BIGINT", "nullable": false}),
        ),
        ("b", "bool", t("BOOLEAN")),
        ("i2", "int2", t("SMALLINT")),
        ("i4", "int4", t("INTEGER")),
        ("i8", "int8", t("BIGINT")),
        ("o", "oid", t("BIGINT")),
        ("f4", "float4", t("REAL")),
        ("f8", "float8", t("DOUBLE")),
        (
            "n",
            "numeric(12,3)",
            json!({"type": "DECIMAL", "nullable": true, "precision": 12, "scale": 3}),
        ),
        ("t", "text", t("VARCHAR")),
        ("vc", "varchar(20)", t("VARCHAR")),
        (
            "bc",
            "char(5)",
            json!({"type": "CHAR", "nullable": true, "precision": 5}),
        ),
        ("nm", "name", t("VARCHAR")),
        ("by", "bytea", t("VARBINARY")),
        ("d", "date", t("DATE")),
        ("tm", "time", t("TIME")),
        ("ts", "timestamp", t("TIMESTAMP")),
        ("tz", "timestamptz", t("TIMESTAMP")),
        ("tzz", "timestamptz", t("TIMESTAMP_TZ")),
        ("u", "uuid", t("UUID")),
        ("uv", "uuid", t("VARCHAR")),
        ("j", "json", t("VARIANT")),
        ("jb", "jsonb", t("VARIANT")),
        ("jv", "jsonb", t("VARCHAR")),
        (
            "ai",
            "int4[]",
            json!({"type": "ARRAY", "nullable": true, "component": {"type": "INTEGER", "nullable": true}}),
        ),
        (
            "at",
            "text[]",
            json!({"type": "ARRAY", "nullable": true, "component": {"type": "VARCHAR", "nullable": true}}),
        ),
        ("e", "mood", t("VARCHAR")),
        ("iv", "interval", t("VARCHAR")),
        ("big", "text", t("VARCHAR")),
    ]
}

fn relation(name: &str) -> Value {
    let fields: Vec<Value> = columns()
        .into_iter()
        .map(|(c, _, ty)| json!({"name": c, "case_sensitive": false, "columntype": ty}))
        .collect();
    json!({"name": name, "case_sensitive": false, "primary_key": ["id"],
           "materialized": false, "properties": {}, "fields": fields})
}

fn schema() -> Value {
    json!({"inputs": [relation("typed"), relation("lineitems")], "outputs": []})
}

fn setup_sql() -> String {
    let cols: Vec<String> = columns()
        .iter()
        .map(|(c, ty, _)| format!("\"{c}\" {ty}"))
        .collect();
    let cols = cols.join(", ");
    format!(
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
         CREATE TABLE typed ({cols});
         ALTER TABLE typed REPLICA IDENTITY FULL;
         CREATE TABLE items ({cols});
         CREATE PUBLICATION pub FOR TABLE typed, items;"
    )
}

/// The settings a session needs for PostgreSQL to print what the connector reads.
const PINNED: &str =
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; \
     SET extra_float_digits = 3; SET bytea_output = 'hex';";

/// Rows 1-4: ordinary values, edge values, all nulls, extremes. `big` gets the TOAST value
/// separately.
const INSERT_VALUES: &str = "
  (1, true, 12, 1234, 123456789012, 42, 3.14, 2.718281828459045, 12.345,
   'hello', 'varying', 'ab', 'a_name', '\\x0102ff', '2024-06-01', '13:14:15',
   '2024-06-01 13:14:15', '2024-06-01 17:30:00+05:30', '2024-06-01 17:30:00+05:30',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12',
   '{\"b\": 1,   \"a\": [1, 2]}', '{\"z\": true, \"a\": null}', '{\"k\": [1, {\"x\": \"y\"}]}',
   '{1,2,3}', '{a,b}', 'happy', '1 day 02:03:04', NULL),
  (2, false, -32768, -2147483648, -9223372036854775808, 4294967295, 'NaN', 'Infinity',
   -0.5, E'quote\" back\\\\ nl\\n tab\\t é ☃', '', 'x', 'n2', '\\x00', '2000-02-29',
   '23:59:59.999999', '1999-12-31 23:59:59.000001', '2000-01-01 00:00:00.5-08',
   '1970-01-01 00:00:00+00', '00000000-0000-0000-0000-000000000000',
   'ffffffff-ffff-ffff-ffff-ffffffffffff', '[1, \"two\", 3.5, null, {\"é\": \"\\u00e9\"}]',
   '\"just a string\"', '[]', '{NULL,-1}', '{\"\",NULL,\"with space\",\"q\\\"uote\"}', 'sad',
   '-3 mons +4 days -00:00:01.5', 'small'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, true, 32767, 2147483647, 9223372036854775807, 0, '-Infinity', 1e308,
   999999999.999, 'x', 'y', 'abcde', 'n4', '\\x', '0001-01-01', '00:00:00',
   '9999-12-31 23:59:59.999999', '0001-01-01 00:00:00+00', '2262-04-11 23:47:16.854775+00',
   'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A13', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a14', '12.5',
   '{\"nested\": {\"deep\": [[1], [2]]}}', 'false', '{}', '{}', 'ok', '00:00:00', NULL)";

/// ~200 KB of text that does not compress: hex digests of consecutive numbers.
fn toast_value_sql(seed: u32) -> String {
    format!("(SELECT string_agg(md5((i + {seed})::text), '') FROM generate_series(1, 6250) i)")
}

/// The workload, identical for both tables; `key_change_toast` says whether the row with
/// the TOAST value may change its key (FULL only: under DEFAULT the new key would arrive
/// with a hole and nothing to fill it, which the connector refuses by design).
fn workload(table: &str, full: bool) -> String {
    let cols: Vec<String> = columns()
        .iter()
        .map(|(c, _, _)| format!("\"{c}\""))
        .collect();
    let cols = cols.join(", ");
    let moved = if full {
        format!("UPDATE {table} SET id = 100 WHERE id = 1;")
    } else {
        format!("UPDATE {table} SET id = 200, i4 = 7 WHERE id = 2;")
    };
    format!(
        "INSERT INTO {table} ({cols}) VALUES {INSERT_VALUES};
         UPDATE {table} SET big = {} WHERE id = 1;
         UPDATE {table} SET big = {} WHERE id = 4;
         UPDATE {table} SET i4 = i4 + 1, t = 'updated' WHERE id = 1;
         UPDATE {table} SET jb = '{{\"after\": [true]}}', ai = '{{9}}', f4 = 1.5 WHERE id = 4;
         {moved}
         UPDATE {table} SET big = {} WHERE id = 4;
         DELETE FROM {table} WHERE id = 3;",
        toast_value_sql(0),
        toast_value_sql(1),
        toast_value_sql(2),
    )
}

/// PostgreSQL's rows with the pinned settings: `to_json` per column, except numeric and
/// jsonb-as-VARCHAR, read as their text output (to_json would turn them into numbers /
/// objects and lose what the connector sends).
fn pg_values(env: &Env, table: &str) -> Vec<Map<String, Value>> {
    let parts: Vec<String> = columns()
        .iter()
        .map(|(c, _, _)| match *c {
            "n" | "jv" => format!("'{c}', \"{c}\"::text"),
            _ => format!("'{c}', \"{c}\""),
        })
        .collect();
    let sql = format!(
        "{PINNED} SELECT coalesce(json_agg(json_build_object({}) ORDER BY id), '[]') FROM {table}",
        parts.join(", ")
    );
    let out = env.sql(&sql);
    let rows: Vec<Value> = serde_json::from_str(&out).expect("json_agg output");
    rows.into_iter()
        .map(|r| match r {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        })
        .collect()
}

/// What Feldera must hold for a PostgreSQL value (given as `to_json` under the pinned
/// settings), per the value table of docs/postgres.md ("Values").
fn expected_value(column: &str, pg: &Value) -> Value {
    if pg.is_null() {
        return Value::Null;
    }
    let text = || pg.as_str().expect("text-like value").to_owned();
    match column {
        // float4/float8: NaN and ±Infinity have no JSON number; to_json quotes them.
        "f4" | "f8" if pg.is_string() => Value::Null,
        // oid → BIGINT: a number; to_json quotes oids, so parse the quoted digits.
        "o" => json!(text().parse::<u64>().expect("oid digits")),
        // bytea: `\x` hex text → array of byte numbers.
        "by" => {
            let hex = text();
            let hex = hex.strip_prefix("\\x").expect("hex bytea output");
            let bytes: Vec<Value> = (0..hex.len())
                .step_by(2)
                .map(|i| json!(u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit")))
                .collect();
            Value::Array(bytes)
        }
        // timestamp: to_json writes `T`; Feldera's TIMESTAMP is `YYYY-MM-DD HH:MM:SS[.f]`.
        "ts" => json!(text().replacen('T', " ", 1)),
        // timestamptz → TIMESTAMP: UTC wall time (to_json under TimeZone=UTC ends `+00:00`).
        "tz" => {
            let t = text();
            let wall = t.strip_suffix("+00:00").expect("UTC offset");
            json!(wall.replacen('T', " ", 1))
        }
        // timestamptz → TIMESTAMP_TZ: RFC 3339 with `+00:00`, which is to_json's spelling.
        // numeric and jsonb→VARCHAR were read as text; everything else is to_json's form.
        _ => pg.clone(),
    }
}

fn expected_rows(env: &Env, table: &str) -> Vec<Value> {
    pg_values(env, table)
        .into_iter()
        .map(|row| {
            let mapped: Map<String, Value> = row
                .iter()
                .map(|(c, v)| (c.clone(), expected_value(c, v)))
                .collect();
            Value::Object(mapped)
        })
        .collect()
}

/// Row 2 of `items` (moved to id 200) written out by hand from the mapping table.
fn literal_row_200() -> Value {
    json!({
        "id": 200, "b": false, "i2": -32768, "i4": 7, "i8": -9223372036854775808_i64,
        "o": 4294967295_i64, "f4": null, "f8": null, "n": "-0.500",
        "t": "quote\" back\\ nl\n tab\t é ☃", "vc": "", "bc": "x    ", "nm": "n2",
        "by": [0], "d": "2000-02-29", "tm": "23:59:59.999999",
        "ts": "1999-12-31 23:59:59.000001", "tz": "2000-01-01 08:00:00.5",
        "tzz": "1970-01-01T00:00:00+00:00", "u": "00000000-0000-0000-0000-000000000000",
        "uv": "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "j": [1, "two", 3.5, null, {"é": "é"}], "jb": "just a string", "jv": "[]",
        "ai": [null, -1], "at": ["", null, "with space", "q\"uote"], "e": "sad",
        "iv": "-3 mons +4 days -00:00:01.5", "big": "small"
    })
}

fn compare(env: &Env, pg_table: &str, feldera_table: &str) {
    let expected = expected_rows(env, pg_table);
    let mut actual = env.feldera_rows(feldera_table, "id");
    // `feldera_rows` sorts keys as text ("100" < "2"); PostgreSQL ordered them as numbers.
    actual.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(
        actual.len(),
        expected.len(),
        "{feldera_table}: row count differs"
    );
    for (want, got) in expected.iter().zip(&actual) {
        for (column, _, _) in columns() {
            assert_eq!(
                got[column], want[column],
                "{feldera_table}: row id={} column {column} differs",
                want["id"]
            );
        }
        assert_eq!(got, want, "{feldera_table}: extra or missing fields");
    }
}

fn streams_every_mapped_type_value_by_value(shell: Shell) {
    let env = Env::new("types", &setup_sql(), schema());
    env.sql(&format!(
        "ALTER DATABASE \"{db}\" SET TimeZone = 'Asia/Kolkata';
         ALTER DATABASE \"{db}\" SET DateStyle = 'SQL, DMY';
         ALTER DATABASE \"{db}\" SET IntervalStyle = 'sql_standard';
         ALTER DATABASE \"{db}\" SET extra_float_digits = 0;
         ALTER DATABASE \"{db}\" SET bytea_output = 'escape';
         ALTER DATABASE \"{db}\" SET wal_sender_timeout = '2s';",
        db = env.db
    ));
    assert_eq!(
        env.sql("SHOW TimeZone"),
        "Asia/Kolkata",
        "new sessions see the hostile defaults"
    );
    let mut connector = env.start(shell, &[("TABLES", "typed,public.items:lineitems")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "connector did not start:\n{}",
        connector.log_text()
    );
    env.sql(&workload("typed", true));
    env.sql(&workload("items", false));
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "not caught up:\n{}",
        connector.log_text()
    );

    // The TOAST values are real: ~200 KB each, and the updates that did not touch them
    // left them intact (FULL: filled from the old row; DEFAULT: partial update).
    for (table, id) in [("typed", 100), ("items", 1)] {
        let len = env.sql(&format!("SELECT length(big) FROM {table} WHERE id = {id}"));
        assert_eq!(len, "200000", "{table} id {id}");
    }
    compare(&env, "typed", "typed");
    compare(&env, "items", "lineitems");

    let lineitems = env.feldera_rows("lineitems", "id");
    let row_200 = lineitems
        .iter()
        .find(|r| r["id"] == json!(200))
        .expect("row 200 in lineitems");
    assert_eq!(row_200, &literal_row_200());
    let typed = env.feldera_rows("typed", "id");
    let row_100 = typed
        .iter()
        .find(|r| r["id"] == json!(100))
        .expect("row 100");
    assert_eq!(row_100["tz"], json!("2024-06-01 12:00:00"));
    assert_eq!(row_100["tzz"], json!("2024-06-01T12:00:00+00:00"));
    assert_eq!(row_100["t"], json!("updated"));
    assert_eq!(row_100["i4"], json!(1235));
    assert_eq!(row_100["big"].as_str().map(str::len), Some(200_000));
    assert!(typed
        .iter()
        .all(|r| r["id"] != json!(1) && r["id"] != json!(3)));

    assert_eq!(
        connector.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn streams_every_mapped_type_value_by_value_tokio() {
    streams_every_mapped_type_value_by_value(Shell::Tokio);
}

#[test]
fn streams_every_mapped_type_value_by_value_blocking() {
    streams_every_mapped_type_value_by_value(Shell::Blocking);
}
