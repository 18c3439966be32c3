//! The core's leftover question asked of a real PostgreSQL: for every key type, a page of
//! keys written in Feldera's query encoding (some kept, some gone, some no PostgreSQL value
//! can be) is turned into the existence query, PostgreSQL runs it, and exactly the gone keys
//! come back as leftovers. Hostile text and bytes show the literals are quoted, and the
//! same questions asked in sessions with `standard_conforming_strings = off` get the same
//! answers.

use serde_json::{json, Value};
use slotline_core::catalog::questions::{parse_relation, relation_query, QualifiedName, Row};
use slotline_core::contract::mapping::{plan_mapping, MappingOptions};
use slotline_core::retract::{existence_query, leftovers, plan_leftovers, Key, LeftoverPlan};
use slotline_core::schema::parse_program_schema;
use slotline_core::value::PgTypes;
use slotline_tests::pg::PgCluster;

struct Case {
    table: &'static str,
    /// PostgreSQL column types of the key, in key order.
    pg_types: &'static [&'static str],
    /// Feldera column types of the key.
    feldera_types: Vec<Value>,
    /// Rows PostgreSQL holds, as SQL value lists.
    rows: &'static [&'static str],
    /// (Feldera's query answer for a key, whether PostgreSQL has it.)
    page: Vec<(Vec<Value>, bool)>,
}

fn ty(name: &str) -> Value {
    json!({"type": name, "nullable": false})
}

fn cases() -> Vec<Case> {
    let varchar = json!({"type": "VARCHAR", "nullable": false, "precision": -1});
    let one =
        |keys: Vec<(Value, bool)>| keys.into_iter().map(|(k, kept)| (vec![k], kept)).collect();
    vec![
        Case {
            table: "ints",
            pg_types: &["int8"],
            feldera_types: vec![ty("BIGINT")],
            rows: &["-9223372036854775808", "0", "9223372036854775807"],
            page: one(vec![
                (json!(i64::MIN), true),
                (json!(0), true),
                (json!(5), false),
                (json!(i64::MAX), true),
            ]),
        },
        Case {
            table: "texts",
            pg_types: &["text"],
            feldera_types: vec![varchar.clone()],
            rows: &[
                "''",
                "'it''s'",
                "E'back\\\\slash'",
                "'é😀'",
                "'\"); DROP TABLE texts; --'",
                "E'\\\\'' OR ''1''=''1'",
            ],
            page: one(vec![
                (json!(""), true),
                (json!("it's"), true),
                (json!("back\\slash"), true),
                (json!("é😀"), true),
                (json!("\"); DROP TABLE texts; --"), true),
                (json!("\\' OR '1'='1"), true),
                (json!("missing"), false),
                (json!("nul\u{0}"), false),
            ]),
        },
        Case {
            table: "decimals",
            pg_types: &["numeric(10,2)"],
            feldera_types: vec![
                json!({"type": "DECIMAL", "nullable": false, "precision": 10, "scale": 2}),
            ],
            rows: &["1.1", "-0.05", "99999999.99"],
            page: one(vec![
                (json!("-0.05"), true),
                (json!("1.10"), true),
                (json!("2.00"), false),
                (json!("99999999.99"), true),
            ]),
        },
        Case {
            table: "bins",
            pg_types: &["bytea"],
            feldera_types: vec![ty("VARBINARY")],
            rows: &["'\\x'", "'\\x00ab'", "'\\x5c27'"],
            page: one(vec![
                (json!(""), true),
                (json!("00ab"), true),
                (json!("5c27"), true),
                (json!("ff"), false),
            ]),
        },
        Case {
            table: "dates",
            pg_types: &["date"],
            feldera_types: vec![ty("DATE")],
            rows: &["'0001-01-01'", "'9999-12-31'"],
            page: one(vec![
                (json!("0001-01-01"), true),
                (json!("2000-01-01"), false),
                (json!("9999-12-31"), true),
            ]),
        },
        Case {
            table: "times",
            pg_types: &["time"],
            feldera_types: vec![ty("TIME")],
            rows: &["'12:34:56.5'"],
            page: one(vec![
                (json!("00:00:00"), false),
                (json!("12:34:56.000000001"), false),
                (json!("12:34:56.500"), true),
            ]),
        },
        Case {
            table: "stamps",
            pg_types: &["timestamp"],
            feldera_types: vec![ty("TIMESTAMP")],
            rows: &["'0001-01-01 00:00:00'", "'2024-01-02 03:04:05.123456'"],
            page: one(vec![
                (json!("0001-01-01T00:00:00"), true),
                (json!("2024-01-02T03:04:05.123456"), true),
                (json!("2024-01-02T03:04:05.123457"), false),
            ]),
        },
        Case {
            table: "zoned",
            pg_types: &["timestamptz"],
            feldera_types: vec![ty("TIMESTAMP_TZ")],
            rows: &["'2024-01-02 05:04:05+02'"],
            page: one(vec![
                (json!("2024-01-02T03:04:05Z"), true),
                (json!("2024-01-02T05:04:05Z"), false),
            ]),
        },
        Case {
            table: "walls",
            pg_types: &["timestamptz"],
            feldera_types: vec![ty("TIMESTAMP")],
            rows: &["'9999-12-31 23:59:59.999999+00'"],
            page: one(vec![
                (json!("9999-12-31T23:59:59.999999"), true),
                (json!("0001-01-01T00:00:00"), false),
            ]),
        },
        Case {
            table: "uuids",
            pg_types: &["uuid"],
            feldera_types: vec![ty("UUID")],
            rows: &["'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'"],
            page: one(vec![
                (json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), true),
                (json!("b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), false),
            ]),
        },
        Case {
            table: "bools",
            pg_types: &["bool"],
            feldera_types: vec![ty("BOOLEAN")],
            rows: &["true"],
            page: one(vec![(json!(false), false), (json!(true), true)]),
        },
        Case {
            // PostgreSQL's equality is coarser than the text Feldera holds: '042'::int4 = 42.
            table: "numbers_as_text",
            pg_types: &["int4"],
            feldera_types: vec![varchar.clone()],
            rows: &["42"],
            page: one(vec![(json!("042"), false), (json!("42"), true)]),
        },
        Case {
            // bpchar ignores trailing spaces; Feldera's CHAR(3) holds what PostgreSQL printed.
            table: "padded",
            pg_types: &["char(3)"],
            feldera_types: vec![json!({"type": "CHAR", "nullable": false, "precision": 3})],
            rows: &["'ab'"],
            page: one(vec![(json!("ab"), false), (json!("ab "), true)]),
        },
        Case {
            table: "pairs",
            pg_types: &["text", "numeric(10,2)", "timestamptz"],
            feldera_types: vec![
                varchar,
                json!({"type": "DECIMAL", "nullable": false, "precision": 10, "scale": 2}),
                ty("TIMESTAMP"),
            ],
            rows: &[
                "'a', 1.5, '2024-01-01 00:00:00+00'",
                "'b''', -1, '0001-01-01 00:00:00+00'",
            ],
            page: vec![
                (
                    vec![json!("a"), json!("1.50"), json!("2024-01-01T00:00:00")],
                    true,
                ),
                (
                    vec![json!("a"), json!("1.50"), json!("2024-01-01T00:00:01")],
                    false,
                ),
                (
                    vec![json!("b'"), json!("-1.00"), json!("0001-01-01T00:00:00")],
                    true,
                ),
                (
                    vec![json!("b"), json!("-1.00"), json!("0001-01-01T00:00:00")],
                    false,
                ),
            ],
        },
    ]
}

fn feldera_schema(case: &Case) -> Vec<u8> {
    let fields: Vec<Value> = case
        .feldera_types
        .iter()
        .enumerate()
        .map(|(i, ty)| json!({"name": format!("c{i}"), "case_sensitive": false, "columntype": ty}))
        .collect();
    let key: Vec<String> = (0..fields.len()).map(|i| format!("c{i}")).collect();
    json!({"inputs": [{"name": case.table, "case_sensitive": false, "materialized": false,
                       "properties": {}, "primary_key": key, "fields": fields}],
           "outputs": []})
    .to_string()
    .into_bytes()
}

fn text_rows(owned: &[Vec<Option<String>>]) -> Vec<Vec<Option<&str>>> {
    owned
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref()).collect())
        .collect()
}

fn plan(pg: &PgCluster, db: &str, case: &Case) -> LeftoverPlan {
    let owned = pg.query_rows(
        db,
        &relation_query(&QualifiedName {
            schema: "public".into(),
            table: case.table.into(),
        })
        .expect("a query"),
    );
    let borrowed = text_rows(&owned);
    let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    let relation = parse_relation(&rows).expect("the relation");
    let schema = parse_program_schema(&feldera_schema(case)).expect("schema");
    let table = &schema.inputs[0];
    let mapping = plan_mapping(&relation, table, &PgTypes::new(), MappingOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    plan_leftovers(table, &mapping, &relation).unwrap_or_else(|e| panic!("{e}"))
}

/// The leftovers PostgreSQL's answer implies. The answer is read through psql, whose
/// unaligned output cannot show a row made of one empty string: a constant first column is
/// added around the query and dropped again.
fn ask(pg: &PgCluster, db: &str, plan: &LeftoverPlan, page: &[Key]) -> Vec<Key> {
    let Some(sql) = existence_query(plan, page) else {
        return leftovers(plan, page, None).expect("no answer to read");
    };
    let owned = pg.query_rows(db, &format!("SELECT 1, q.* FROM ({sql}) AS q"));
    let owned: Vec<Vec<Option<String>>> = owned.into_iter().map(|r| r[1..].to_vec()).collect();
    let borrowed = text_rows(&owned);
    let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    leftovers(plan, page, Some(&rows)).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn postgres_returns_exactly_the_kept_keys_of_every_type() {
    let pg = PgCluster::start();
    let db = pg.create_database("leftovers");
    let mut questions: Vec<(&str, LeftoverPlan, Vec<Key>, Vec<Key>)> = Vec::new();
    for case in cases() {
        let columns: Vec<String> = case
            .pg_types
            .iter()
            .enumerate()
            .map(|(i, t)| format!("c{i} {t}"))
            .collect();
        let key: Vec<String> = (0..columns.len()).map(|i| format!("c{i}")).collect();
        let values: Vec<String> = case.rows.iter().map(|r| format!("({r})")).collect();
        pg.psql(
            &db,
            &format!(
                "CREATE TABLE {} ({}, PRIMARY KEY ({})); INSERT INTO {} VALUES {};",
                case.table,
                columns.join(", "),
                key.join(", "),
                case.table,
                values.join(", ")
            ),
        );
        let plan = plan(&pg, &db, &case);
        let page: Vec<Key> = case
            .page
            .iter()
            .map(|(values, _)| {
                Key(plan
                    .keys
                    .columns
                    .iter()
                    .zip(values)
                    .map(|(c, v)| c.kind.from_query(v).unwrap_or_else(|e| panic!("{v}: {e}")))
                    .collect())
            })
            .collect();
        let gone: Vec<Key> = page
            .iter()
            .zip(&case.page)
            .filter(|(_, (_, kept))| !kept)
            .map(|(k, _)| k.clone())
            .collect();
        questions.push((case.table, plan, page, gone));
    }
    for (table, plan, page, gone) in &questions {
        assert_eq!(&ask(&pg, &db, plan, page), gone, "{table}");
    }
    // The setting is read when a query string is parsed: it must hold for the session.
    pg.psql(
        "postgres",
        &format!("ALTER DATABASE {db} SET standard_conforming_strings = off"),
    );
    assert_eq!(
        pg.query_rows(&db, "SHOW standard_conforming_strings"),
        vec![vec![Some("off".to_owned())]]
    );
    for (table, plan, page, gone) in &questions {
        assert_eq!(
            &ask(&pg, &db, plan, page),
            gone,
            "{table}: literals mean the same without standard_conforming_strings"
        );
    }
    assert_eq!(
        pg.query_rows(&db, "SELECT count(*) FROM texts"),
        vec![vec![Some("6".to_owned())]],
        "the hostile key dropped nothing"
    );
}
