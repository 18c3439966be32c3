//! End to end, value by value: the column types slotline reads from the catalog at startup
//! (docs/guide/types.md, "From PostgreSQL types to Feldera columns"): domains as their base type
//! (over a domain too, and arrays of a domain), arrays of enums, inet, cidr, macaddr and ranges as
//! VARCHAR arrays (one and two dimensions), composites as ROW columns (nested, with arrays and
//! domains inside, and arrays of them), citext as VARCHAR. On both shells, the same values are
//! copied by the initial snapshot (rows 1-4, there before the start) and streamed (rows 101-104,
//! then updated and deleted), with the database's defaults hostile as in `e2e_types.rs`.
//!
//! The oracle is PostgreSQL's own `to_json` of each column under the pinned settings (a
//! composite becomes an object keyed by its member names, exactly what a ROW takes), with
//! decimals read as their text (Feldera's DECIMAL keeps the scale); the hostile row is also
//! spelled out by hand.

use serde_json::{json, Map, Value};
use slotline_tests::e2e::{Env, Shell};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

const SETUP: &str = r#"
CREATE EXTENSION citext;
CREATE DOMAIN money12 AS numeric(12,2);
CREATE DOMAIN money12b AS money12 CHECK (VALUE > -1000000);
CREATE DOMAIN label AS text;
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'so "so", really');
CREATE TYPE addr AS (street text, zip int);
CREATE TYPE person AS (name text, home addr, tags text[], m mood, balance money12);
CREATE TABLE kinds (
  id int8 PRIMARY KEY,
  m money12, mb money12b, l label, p posint, pa posint[],
  e mood[], grid mood[], ip inet[], ci cidr[], mac macaddr[], r int4range[], tr tstzrange[],
  a addr, aa addr[], pe person,
  c citext, ca citext[]
);
CREATE PUBLICATION pub FOR TABLE kinds;
"#;

/// Every column but `id`, in table order.
const COLUMNS: [&str; 17] = [
    "m", "mb", "l", "p", "pa", "e", "grid", "ip", "ci", "mac", "r", "tr", "a", "aa", "pe", "c",
    "ca",
];

fn t(ty: &str) -> Value {
    json!({"type": ty, "nullable": true})
}

fn varchar() -> Value {
    json!({"type": "VARCHAR", "nullable": true, "precision": -1})
}

fn array(component: Value) -> Value {
    json!({"type": "ARRAY", "nullable": true, "component": component})
}

fn money() -> Value {
    json!({"type": "DECIMAL", "nullable": true, "precision": 12, "scale": 2})
}

/// A ROW column type as Feldera's compiler writes it: no `type`, members inline.
fn row(members: Value) -> Value {
    json!({"nullable": true, "fields": members})
}

fn addr() -> Value {
    row(json!([
        {"name": "street", "type": "VARCHAR", "nullable": true, "precision": -1},
        {"name": "zip", "type": "INTEGER", "nullable": true},
    ]))
}

fn schema() -> Value {
    let person = row(json!([
        {"name": "name", "type": "VARCHAR", "nullable": true, "precision": -1},
        {"name": "home", "nullable": true, "fields": addr()},
        {"name": "tags", "type": "ARRAY", "nullable": true, "component": varchar()},
        {"name": "m", "type": "VARCHAR", "nullable": true, "precision": -1},
        {"name": "balance", "type": "DECIMAL", "nullable": true, "precision": 12, "scale": 2},
    ]));
    let columns = [
        ("id", json!({"type": "BIGINT", "nullable": false})),
        ("m", money()),
        ("mb", money()),
        ("l", varchar()),
        ("p", t("INTEGER")),
        ("pa", array(t("INTEGER"))),
        ("e", array(varchar())),
        ("grid", array(array(varchar()))),
        ("ip", array(varchar())),
        ("ci", array(varchar())),
        ("mac", array(varchar())),
        ("r", array(varchar())),
        ("tr", array(varchar())),
        ("a", addr()),
        ("aa", array(addr())),
        ("pe", person),
        ("c", varchar()),
        ("ca", array(varchar())),
    ];
    let fields: Vec<Value> = columns
        .into_iter()
        .map(|(c, ty)| json!({"name": c, "case_sensitive": false, "columntype": ty}))
        .collect();
    json!({"inputs": [{"name": "kinds", "case_sensitive": false, "primary_key": ["id"],
                       "materialized": false, "properties": {}, "fields": fields}],
           "outputs": []})
}

/// Rows `base + 1` .. `base + 4`: ordinary, hostile (quotes, commas, backslashes,
/// parentheses, braces, whitespace and unicode in members and elements), all NULL, and
/// empties and edges.
fn insert_sql(base: u64) -> String {
    format!(
        r#"INSERT INTO kinds VALUES
  ({one}, '12.50', '3', 'label', 7, '{{1,2,3}}',
   '{{sad,happy}}', '{{{{sad,ok}},{{happy,NULL}}}}', '{{127.0.0.1,::1,192.168.0.0/16}}',
   '{{10.0.0.0/8}}', '{{08:00:2b:01:02:03}}', '{{"[1,5)",empty}}',
   '{{"[2024-01-01 00:00:00+00,2024-02-01 05:30:00+05:30)"}}',
   ROW('Main St', 12345), ARRAY[ROW('a b', 1)::addr, NULL, ROW(NULL, NULL)::addr, ROW('', 2)::addr],
   ROW('x', ROW('y,z', 3), '{{a,"b c"}}', 'ok', 1.5), 'CiText', '{{A,b}}'),
  ({two}, '-0.01', '999999.99', E'quote" back\\ nl\n tab\t é ☃', 2147483647, '{{NULL}}',
   '{{"so \"so\", really",sad,NULL}}', '{{}}', '{{}}', NULL, '{{NULL}}', '{{"(,)","[-5,-1]"}}',
   '{{empty}}',
   ROW(E'Main "St", 1\\2 (back)', -1),
   ARRAY[ROW(E'{{x,"y"}}\\', 0)::addr, ROW(' lead, trail ', NULL)::addr],
   ROW(E'ünï ☃ "q"', ROW(E'a\\b,c)', 9), ARRAY['', NULL, 'NULL', E'x"y\\z'],
       'so "so", really', -0.5),
   E'Ünï "Cité"', ARRAY['', 'a,b', NULL]),
  ({three}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL),
  ({four}, '0', '0.01', '', 1, '{{}}', '{{}}', '{{{{sad}}}}', '{{0.0.0.0/0}}', '{{::/0}}',
   '{{ff:ff:ff:ff:ff:ff}}', '{{empty}}', '{{"(,)"}}', ROW(NULL, NULL), '{{}}',
   ROW(NULL, NULL, '{{}}', NULL, NULL), '', '{{}}');"#,
        one = base + 1,
        two = base + 2,
        three = base + 3,
        four = base + 4,
    )
}

/// The settings a session needs for PostgreSQL to print what the connector reads.
const PINNED: &str =
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; \
     SET extra_float_digits = 3; SET bytea_output = 'hex';";

/// What Feldera must hold, per PostgreSQL: `to_json` of each column, decimals as text
/// (in `pe` too), a NULL composite as null (`pe::text IS NULL`: a composite whose members
/// are all NULL is not NULL, but `IS NULL` says it is).
fn expected_rows(env: &Env) -> Vec<Map<String, Value>> {
    let parts: Vec<String> = COLUMNS
        .iter()
        .map(|c| match *c {
            "m" | "mb" => format!("'{c}', {c}::text"),
            "pe" => "'pe', CASE WHEN pe::text IS NULL THEN NULL ELSE json_build_object(\
                     'name', (pe).name, 'home', to_json((pe).home), 'tags', to_json((pe).tags), \
                     'm', (pe).m, 'balance', (pe).balance::text) END"
                .to_owned(),
            _ => format!("'{c}', to_json({c})"),
        })
        .collect();
    let sql = format!(
        "{PINNED} SELECT coalesce(json_agg(json_build_object('id', id, {}) ORDER BY id), '[]') \
         FROM kinds",
        parts.join(", ")
    );
    let rows: Vec<Value> = serde_json::from_str(&env.sql(&sql)).expect("json_agg output");
    rows.into_iter()
        .map(|r| match r {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        })
        .collect()
}

fn compare(env: &Env) {
    let expected = expected_rows(env);
    let mut actual = env.feldera_rows("kinds", "id");
    actual.sort_by_key(|r| r["id"].as_i64());
    let ids =
        |rows: &[Value]| -> Vec<i64> { rows.iter().filter_map(|r| r["id"].as_i64()).collect() };
    let want: Vec<Value> = expected.into_iter().map(Value::Object).collect();
    assert_eq!(ids(&actual), ids(&want), "the rows differ");
    for (got, want) in actual.iter().zip(&want) {
        for column in COLUMNS {
            assert_eq!(
                got[column], want[column],
                "row id={} column {column} differs",
                want["id"]
            );
        }
        assert_eq!(got, want, "extra or missing fields");
    }
}

/// Row 2's composites and arrays written out by hand from the mapping table.
fn assert_hostile_row(env: &Env, id: i64) {
    let rows = env.feldera_rows("kinds", "id");
    let row = rows
        .iter()
        .find(|r| r["id"] == json!(id))
        .unwrap_or_else(|| panic!("row {id}"));
    assert_eq!(row["l"], json!("quote\" back\\ nl\n tab\t é ☃"));
    assert_eq!(row["e"], json!(["so \"so\", really", "sad", null]));
    assert_eq!(row["grid"], json!([]));
    assert_eq!(row["r"], json!(["(,)", "[-5,0)"]));
    assert_eq!(
        row["a"],
        json!({"street": "Main \"St\", 1\\2 (back)", "zip": -1})
    );
    assert_eq!(
        row["aa"],
        json!([{"street": "{x,\"y\"}\\", "zip": 0}, {"street": " lead, trail ", "zip": null}])
    );
    assert_eq!(
        row["pe"],
        json!({"name": "ünï ☃ \"q\"", "home": {"street": "a\\b,c)", "zip": 9},
               "tags": ["", null, "NULL", "x\"y\\z"], "m": "so \"so\", really",
               "balance": "-0.50"})
    );
    assert_eq!(row["c"], json!("Ünï \"Cité\""));
    assert_eq!(row["ca"], json!(["", "a,b", null]));
    assert_eq!(row["mb"], json!("999999.99"));
}

fn copies_and_streams_catalog_types_value_by_value(shell: Shell) {
    let env = Env::new("cattypes", SETUP, schema());
    env.sql(&format!(
        "ALTER DATABASE \"{db}\" SET TimeZone = 'Asia/Kolkata';
         ALTER DATABASE \"{db}\" SET DateStyle = 'SQL, DMY';
         ALTER DATABASE \"{db}\" SET IntervalStyle = 'sql_standard';
         ALTER DATABASE \"{db}\" SET extra_float_digits = 0;",
        db = env.db
    ));
    env.sql(&insert_sql(0));
    let mut connector = env.start(shell, &[("TABLES", "kinds"), ("SNAPSHOT_MODE", "initial")]);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the snapshot did not complete:\n{}",
        connector.log_text()
    );
    // Rows 1-4 were committed before the slot existed: only the copy carries them.
    assert_eq!(env.feldera_count("kinds"), 4);
    compare(&env);
    assert_hostile_row(&env, 2);

    env.sql(&insert_sql(100));
    env.sql(
        "UPDATE kinds SET a.zip = 54321, aa[2] = ROW('filled', 7), e = e || 'ok'::mood, \
         pe.home = ROW('moved (x)', NULL) WHERE id = 101;
         UPDATE kinds SET l = 'touched' WHERE id = 102;
         DELETE FROM kinds WHERE id = 103;",
    );
    assert!(
        env.wait_caught_up(LONG),
        "not caught up:\n{}",
        connector.log_text()
    );
    compare(&env);
    let rows = env.feldera_rows("kinds", "id");
    let copied = |id: i64| rows.iter().find(|r| r["id"] == json!(id)).cloned();
    let (Some(mut copied_4), Some(mut streamed_104)) = (copied(4), copied(104)) else {
        panic!("rows 4 and 104: {rows:?}");
    };
    copied_4["id"] = json!(0);
    streamed_104["id"] = json!(0);
    assert_eq!(
        copied_4, streamed_104,
        "the copy and the stream send the same values"
    );
    let row_101 = copied(101).expect("row 101");
    assert_eq!(row_101["a"], json!({"street": "Main St", "zip": 54321}));
    assert_eq!(row_101["aa"][1], json!({"street": "filled", "zip": 7}));
    assert_eq!(
        row_101["pe"]["home"],
        json!({"street": "moved (x)", "zip": null})
    );
    assert!(copied(103).is_none(), "row 103 was deleted");

    // A composite altered while streaming prints values of its new shape: refused, and the
    // transaction is not acknowledged (docs/guide/types.md: until a restart reads the type).
    env.sql("ALTER TYPE addr ADD ATTRIBUTE extra int");
    env.sql("INSERT INTO kinds (id, a) VALUES (200, ROW('x', 1, 5))");
    assert_eq!(
        connector.wait_exit(LONG),
        Some(1),
        "{}",
        connector.log_text()
    );
    let log = connector.log_text();
    assert!(
        log.contains("column a (PostgreSQL addr (composite)")
            && log.contains("more members than its composite type"),
        "{log}"
    );
    // Everything before it was acknowledged; the refused insert is still in the slot.
    assert_eq!(env.slot_pending_changes(), 1, "{log}");
}

#[test]
fn copies_and_streams_catalog_types_value_by_value_tokio() {
    copies_and_streams_catalog_types_value_by_value(Shell::Tokio);
}

#[test]
fn copies_and_streams_catalog_types_value_by_value_blocking() {
    copies_and_streams_catalog_types_value_by_value(Shell::Blocking);
}

/// A domain created while streaming and given to a new column of a routed table: its
/// Relation names a type the session's catalog does not describe, the session ends once to
/// read the catalog again, and the replayed row arrives typed; the process never exits.
fn a_domain_created_mid_stream_is_read_from_the_catalog_again(shell: Shell) {
    let setup = "CREATE TABLE late (id int8 PRIMARY KEY);
                 CREATE PUBLICATION pub FOR TABLE late;";
    let schema = json!({"inputs": [{"name": "late", "case_sensitive": false, "primary_key": ["id"],
        "materialized": true, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "score", "case_sensitive": false, "columntype": t("INTEGER")}]}],
        "outputs": []});
    let env = Env::new("latedomain", setup, schema);
    let mut connector = env.start(shell, &[("TABLES", "late")]);
    assert!(
        connector.wait_log("streaming from slot", LONG),
        "{}",
        connector.log_text()
    );
    env.sql("INSERT INTO late VALUES (1)");
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    env.sql(
        "CREATE DOMAIN late_score AS int4 CHECK (VALUE >= 0);
         ALTER TABLE late ADD COLUMN score late_score;
         INSERT INTO late VALUES (2, 7);",
    );
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(
        log.contains("which is not in the catalog this session read (a type created since?); reading the catalog again"),
        "{log}"
    );
    let mut rows = env.feldera_rows("late", "id");
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(
        rows,
        [
            json!({"id": 1, "score": null}),
            json!({"id": 2, "score": 7})
        ],
        "{log}"
    );
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(Duration::from_secs(10)), Some(0));
}

#[test]
fn a_domain_created_mid_stream_is_read_from_the_catalog_again_tokio() {
    a_domain_created_mid_stream_is_read_from_the_catalog_again(Shell::Tokio);
}

#[test]
fn a_domain_created_mid_stream_is_read_from_the_catalog_again_blocking() {
    a_domain_created_mid_stream_is_read_from_the_catalog_again(Shell::Blocking);
}
