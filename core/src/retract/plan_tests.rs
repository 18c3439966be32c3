use super::*;
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::convert::Converter;
use crate::pgoutput::encode::row;
use crate::pgoutput::{Delete, OldKind, OldTuple, ReplicaIdentity};
use crate::schema::program::parse_program_schema;
use crate::schema::Field;
use crate::value::PgTypes;
use serde_json::{json, Value as Json};

fn table(fields: &[(&str, ColumnType)], key: &[&str]) -> Table {
    Table {
        name: Name::unquoted("t"),
        fields: fields
            .iter()
            .map(|(name, columntype)| Field::new(Name::unquoted(name), columntype.clone()))
            .collect(),
        primary_key: Some(key.iter().map(|k| Name::unquoted(k)).collect()),
        materialized: false,
    }
}

fn relation(columns: &[(&str, u32, i32)]) -> Relation {
    Relation {
        oid: 1,
        namespace: "public".into(),
        name: "t".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|(name, type_oid, type_modifier)| RelationColumn {
                in_replica_identity: true,
                name: (*name).into(),
                type_oid: *type_oid,
                type_modifier: *type_modifier,
            })
            .collect(),
    }
}

fn varchar(length: i64) -> ColumnType {
    ColumnType::new(SqlType::Varchar, false).with_precision(length)
}

fn not_null(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, false)
}

/// The delete slotline's converter writes for a PostgreSQL DELETE carrying `pg_texts`,
/// and the one retraction writes for the same key read from Feldera's query answer.
fn both_deletes(
    table: &Table,
    relation: &Relation,
    pg_texts: &[&str],
    query_values: &[Json],
) -> (String, String) {
    let mapping =
        plan_mapping(relation, table, &PgTypes::new(), MappingOptions::default()).unwrap();
    let values: Vec<Option<&str>> = pg_texts.iter().map(|t| Some(*t)).collect();
    let delete = Delete {
        relation_oid: 1,
        old: OldTuple {
            kind: OldKind::Key,
            tuple: row(&values),
        },
    };
    let mut streamed = Vec::new();
    Converter::new(&mapping)
        .delete(&delete, &mut streamed)
        .unwrap();
    let plan = plan_keys(table).unwrap();
    let key = Key(plan
        .columns
        .iter()
        .zip(query_values)
        .map(|(c, v)| c.kind.from_query(v).unwrap())
        .collect());
    let mut retracted = Vec::new();
    plan.write_delete(&key, &mut retracted);
    (
        String::from_utf8(streamed).unwrap(),
        String::from_utf8(retracted).unwrap(),
    )
}

#[test]
fn a_retraction_delete_is_byte_identical_to_the_streamed_delete_for_every_key_type() {
    let dec = |p, s| ColumnType::decimal(p, s, false);
    let char3 = ColumnType::new(SqlType::Char, false).with_precision(3);
    let binary = ColumnType::new(SqlType::Varbinary, false).with_precision(-1);
    // (PostgreSQL type, typmod, Feldera type, PostgreSQL text, Feldera's query answer)
    let cases: Vec<(u32, i32, ColumnType, &str, Json)> = vec![
        (
            oid::INT2,
            -1,
            not_null(SqlType::TinyInt),
            "-128",
            json!(-128),
        ),
        (
            oid::INT2,
            -1,
            not_null(SqlType::SmallInt),
            "-32768",
            json!(-32768),
        ),
        (
            oid::INT4,
            -1,
            not_null(SqlType::Integer),
            "2147483647",
            json!(2147483647),
        ),
        (
            oid::INT8,
            -1,
            not_null(SqlType::BigInt),
            "-9223372036854775808",
            json!(i64::MIN),
        ),
        (
            oid::OID,
            -1,
            not_null(SqlType::BigInt),
            "4294967295",
            json!(4294967295u32),
        ),
        (oid::BOOL, -1, not_null(SqlType::Boolean), "t", json!(true)),
        (
            oid::TEXT,
            -1,
            varchar(-1),
            "it's \"q\" \\ é😀\n\t",
            json!("it's \"q\" \\ é😀\n\t"),
        ),
        (oid::VARCHAR, 9, varchar(5), "abc", json!("abc")),
        (oid::BPCHAR, 7, char3, "ab ", json!("ab ")),
        (
            oid::UUID,
            -1,
            not_null(SqlType::Uuid),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ),
        (oid::NUMERIC, -1, dec(10, 2), "-1.10", json!("-1.10")),
        (oid::NUMERIC, -1, dec(10, 2), "0.00", json!("0.00")),
        (
            oid::NUMERIC,
            -1,
            dec(38, 0),
            "99999999999999999999999999999999999999",
            json!("99999999999999999999999999999999999999"),
        ),
        (
            oid::NUMERIC,
            -1,
            dec(38, 38),
            "0.00000000000000000000000000000000000001",
            json!("0.00000000000000000000000000000000000001"),
        ),
        (oid::BYTEA, -1, binary, "\\x00ab10", json!("00ab10")),
        (
            oid::BYTEA,
            -1,
            not_null(SqlType::Binary).with_precision(2),
            "\\xffff",
            json!("ffff"),
        ),
        (
            oid::DATE,
            -1,
            not_null(SqlType::Date),
            "0001-01-01",
            json!("0001-01-01"),
        ),
        (
            oid::DATE,
            -1,
            not_null(SqlType::Date),
            "9999-12-31",
            json!("9999-12-31"),
        ),
        (
            oid::TIME,
            -1,
            not_null(SqlType::Time),
            "12:34:56.5",
            json!("12:34:56.500"),
        ),
        (
            oid::TIME,
            -1,
            not_null(SqlType::Time),
            "23:59:59.999999",
            json!("23:59:59.999999"),
        ),
        (
            oid::TIME,
            -1,
            not_null(SqlType::Time),
            "00:00:00",
            json!("00:00:00"),
        ),
        (
            oid::TIMESTAMP,
            -1,
            not_null(SqlType::Timestamp),
            "2024-01-02 03:04:05.12",
            json!("2024-01-02T03:04:05.120"),
        ),
        (
            oid::TIMESTAMP,
            -1,
            not_null(SqlType::Timestamp),
            "0001-01-01 00:00:00",
            json!("0001-01-01T00:00:00"),
        ),
        (
            oid::TIMESTAMPTZ,
            -1,
            not_null(SqlType::Timestamp),
            "2024-01-02 05:04:05+02",
            json!("2024-01-02T03:04:05"),
        ),
        (
            oid::TIMESTAMPTZ,
            -1,
            not_null(SqlType::TimestampTz),
            "9999-12-31 23:59:59.999999+00",
            json!("9999-12-31T23:59:59.999999Z"),
        ),
        (oid::INT4, -1, varchar(-1), "42", json!("42")),
        (
            oid::TIMESTAMPTZ,
            -1,
            varchar(-1),
            "2024-01-02 03:04:05+00",
            json!("2024-01-02 03:04:05+00"),
        ),
        (oid::NUMERIC, -1, varchar(-1), "1.10", json!("1.10")),
    ];
    for (pg_type, typmod, target, pg_text, answer) in cases {
        let described = format!("{} from {pg_text:?} / {answer}", target);
        let t = table(&[("k", target)], &["k"]);
        let (streamed, retracted) = both_deletes(
            &t,
            &relation(&[("k", pg_type, typmod)]),
            &[pg_text],
            &[answer],
        );
        assert_eq!(retracted, streamed, "{described}");
    }
}

#[test]
fn composite_keys_are_written_in_primary_key_order() {
    let t = table(
        &[
            ("id", not_null(SqlType::BigInt)),
            ("name", varchar(-1)),
            ("at", not_null(SqlType::Date)),
        ],
        &["name", "id"],
    );
    let rel = relation(&[
        ("id", oid::INT8, -1),
        ("name", oid::TEXT, -1),
        ("at", oid::DATE, -1),
    ]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), MappingOptions::default()).unwrap();
    let delete = Delete {
        relation_oid: 1,
        old: OldTuple {
            kind: OldKind::Key,
            tuple: row(&[Some("7"), Some("x"), None]),
        },
    };
    let mut streamed = Vec::new();
    Converter::new(&mapping)
        .delete(&delete, &mut streamed)
        .unwrap();
    let plan = plan_keys(&t).unwrap();
    let key = Key(vec![KeyValue::Text("x".into()), KeyValue::Int(7)]);
    let mut retracted = Vec::new();
    plan.write_delete(&key, &mut retracted);
    assert_eq!(
        String::from_utf8(retracted).unwrap(),
        "{\"delete\":{\"name\":\"x\",\"id\":7}}\n"
    );
    assert_eq!(streamed, {
        let mut again = Vec::new();
        plan.write_delete(&key, &mut again);
        again
    });
    assert_eq!(plan.describe(&key), "name=\"x\", id=7");
}

#[test]
fn a_table_that_cannot_be_read_or_keyed_is_refused_naming_table_column_and_type() {
    let schema = parse_program_schema(
        br#"{"inputs":[
        {"name":"events","case_sensitive":false,"primary_key":["at"],"materialized":false,
         "fields":[{"name":"at","case_sensitive":false,"lateness":"INTERVAL 1 HOUR",
                    "columntype":{"type":"TIMESTAMP","nullable":false}},
                   {"name":"score","case_sensitive":false,"columntype":{"type":"DOUBLE","nullable":false}}]},
        {"name":"kept","case_sensitive":false,"primary_key":["at"],"materialized":true,
         "fields":[{"name":"at","case_sensitive":false,"lateness":"INTERVAL 1 HOUR",
                    "columntype":{"type":"TIMESTAMP","nullable":false}}]},
        {"name":"Scores","case_sensitive":true,"primary_key":["Score"],"materialized":false,
         "fields":[{"name":"Score","case_sensitive":true,"columntype":{"type":"DOUBLE","nullable":false}}]},
        {"name":"bag","case_sensitive":false,"materialized":true,
         "fields":[{"name":"x","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
        ],"outputs":[]}"#,
    )
    .unwrap();
    let [events, kept, scores, bag] = &schema.inputs[..] else {
        panic!("four tables");
    };
    insta::assert_snapshot!(plan_keys(events).unwrap_err(), @r"
    cannot retract rows of Feldera table events: the publication publishes TRUNCATE, which slotline propagates by reading the keys Feldera holds (an ad-hoc query) and deleting each.
      - the table cannot be queried ad hoc: Feldera keeps a table with a PRIMARY KEY queryable only when no key column has LATENESS; accepted: WITH ('materialized' = 'true') on the table, or no LATENESS on its key columns
    ");
    assert!(plan_keys(kept).is_ok(), "materialized despite LATENESS");
    insta::assert_snapshot!(plan_keys(scores).unwrap_err(), @r#"
    cannot retract rows of Feldera table "Scores": the publication publishes TRUNCATE, which slotline propagates by reading the keys Feldera holds (an ad-hoc query) and deleting each.
      - key column "Score" (DOUBLE NOT NULL): floating-point keys are refused: the query answer prints them as JSON numbers, and a round trip through text and back is not proven exact (nor is -0 vs 0); accepted key types: TINYINT, SMALLINT, INTEGER, BIGINT, BOOLEAN, CHAR, VARCHAR, UUID, DECIMAL(p, s), BINARY, VARBINARY, DATE, TIME, TIMESTAMP, TIMESTAMP_TZ
    "#);
    insta::assert_snapshot!(plan_keys(bag).unwrap_err(), @r"
    cannot retract rows of Feldera table bag: the publication publishes TRUNCATE, which slotline propagates by reading the keys Feldera holds (an ad-hoc query) and deleting each.
      - the table has no PRIMARY KEY, and retraction deletes rows by key; accepted: a PRIMARY KEY in the Feldera program
    ");
}

fn leftovers_for(pg_type: u32, typmod: i32, target: ColumnType) -> Result<LeftoverPlan, String> {
    let t = table(&[("k", target)], &["k"]);
    let rel = relation(&[("k", pg_type, typmod)]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), MappingOptions::default()).unwrap();
    plan_leftovers(&t, &mapping, &rel).map_err(|e| e.to_string())
}

#[test]
fn leftovers_need_a_path_into_feldera_that_keeps_postgres_keys_distinct() {
    // varchar(3) fits VARCHAR(3) and CHAR(3): nothing is ever cut.
    assert!(leftovers_for(oid::VARCHAR, 7, varchar(3)).is_ok());
    assert!(leftovers_for(
        oid::BPCHAR,
        7,
        ColumnType::new(SqlType::Char, false).with_precision(3)
    )
    .is_ok());
    assert!(leftovers_for(oid::TEXT, -1, varchar(-1)).is_ok());
    assert!(leftovers_for(oid::NAME, -1, varchar(63)).is_ok());
    // Non-text values never end in spaces, so a length cannot merge them.
    assert!(leftovers_for(oid::INT4, -1, varchar(20)).is_ok());
    assert!(leftovers_for(oid::JSONB, -1, varchar(-1)).is_ok());

    insta::assert_snapshot!(leftovers_for(oid::TEXT, -1, varchar(3)).unwrap_err(), @r"
    cannot retract rows of Feldera table t: a re-snapshot must delete the rows PostgreSQL no longer has, found by reading the keys Feldera holds and asking PostgreSQL which still exist.
      - key column k (VARCHAR(3) NOT NULL): it comes from PostgreSQL column k of type text, whose longer values lose trailing spaces on the way into VARCHAR(3) NOT NULL, so two PostgreSQL keys can become one Feldera key; accepted: no length on the Feldera column, or one at least as long as PostgreSQL's
    ");
    assert!(
        leftovers_for(oid::VARCHAR, 9, varchar(3)).is_err(),
        "varchar(5)"
    );
    assert!(
        leftovers_for(oid::VARCHAR, -1, varchar(3)).is_err(),
        "varchar"
    );
    insta::assert_snapshot!(leftovers_for(oid::JSON, -1, varchar(-1)).unwrap_err(), @r"
    cannot retract rows of Feldera table t: a re-snapshot must delete the rows PostgreSQL no longer has, found by reading the keys Feldera holds and asking PostgreSQL which still exist.
      - key column k (VARCHAR NOT NULL): it comes from PostgreSQL column k of type json, which slotline cannot compare by equality from a literal; accepted: built-in scalar types with equality (not json, arrays or user-defined types)
    ");
    assert!(
        leftovers_for(16_384, -1, varchar(-1)).is_err(),
        "a user type"
    );
    assert!(leftovers_for(1007, -1, varchar(-1)).is_err(), "int4[]");
}

#[test]
fn a_leftover_plan_quotes_postgres_names() {
    let t = table(&[("k", not_null(SqlType::BigInt))], &["k"]);
    let mut rel = relation(&[("K \"x\"", oid::INT8, -1)]);
    rel.namespace = "My Schema".into();
    rel.name = "t".into();
    let mut t_upper = t.clone();
    t_upper.fields[0].name = Name::quoted("K \"x\"");
    t_upper.primary_key = Some(vec![Name::quoted("K \"x\"")]);
    let mapping = plan_mapping(&rel, &t_upper, &PgTypes::new(), MappingOptions::default()).unwrap();
    let plan = plan_leftovers(&t_upper, &mapping, &rel).unwrap();
    assert_eq!(plan.source_sql, "\"My Schema\".\"t\"");
    assert_eq!(plan.columns[0].sql_name, "\"K \"\"x\"\"\"");
    assert_eq!(plan.columns[0].pg_type, oid::INT8);
}
