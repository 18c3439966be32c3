use super::*;
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use crate::retract::plan::{plan_keys, plan_leftovers};
use crate::schema::{ColumnType, Field, Name, SqlType, Table};
use crate::value::oid;
use crate::value::PgTypes;
use serde_json::json;

fn table(fields: Vec<(&str, ColumnType)>) -> Table {
    Table {
        name: Name::unquoted("t"),
        primary_key: Some(fields.iter().map(|(n, _)| Name::unquoted(n)).collect()),
        fields: fields
            .into_iter()
            .map(|(name, columntype)| Field::new(Name::unquoted(name), columntype))
            .collect(),
        materialized: false,
    }
}

/// Key (name VARCHAR, amount DECIMAL(10, 2)).
fn pair() -> KeyPlan {
    plan_keys(&table(vec![
        ("name", ColumnType::new(SqlType::Varchar, false)),
        ("amount", ColumnType::decimal(10, 2, false)),
    ]))
    .unwrap()
}

fn rows(values: Vec<Value>) -> Vec<Map<String, Value>> {
    values
        .into_iter()
        .map(|v| match v {
            Value::Object(map) => map,
            other => panic!("not a row: {other}"),
        })
        .collect()
}

fn read(answer: Vec<Value>) -> Result<Vec<Key>, ReadError> {
    read_keys(&pair(), rows(answer), 1)
}

#[test]
fn key_rows_read_as_keys_in_answer_order() {
    let keys = read(vec![
        json!({"k0": "b", "k1": "10.00"}),
        json!({"k0": "a", "k1": "9.50"}),
        json!({"k1": "-1.00", "k0": "a"}),
    ])
    .unwrap();
    assert_eq!(
        keys,
        vec![
            Key(vec![KeyValue::Text("b".into()), KeyValue::Decimal(1000)]),
            Key(vec![KeyValue::Text("a".into()), KeyValue::Decimal(950)]),
            Key(vec![KeyValue::Text("a".into()), KeyValue::Decimal(-100)]),
        ],
        "a scan has no order: the keys come as they were answered"
    );
    assert_eq!(
        read(vec![]).unwrap(),
        vec![],
        "zero rows: no keys, no error"
    );
}

#[test]
fn rows_are_numbered_across_the_pieces_of_an_answer() {
    let err = read_keys(&pair(), rows(vec![json!({"k0": "a"})]), 41).unwrap_err();
    insta::assert_snapshot!(err, @"row 41 of the key scan has columns [k0]; expected exactly [k0, k1]");
}

#[test]
fn an_answer_with_other_columns_is_refused() {
    for (answer, why) in [
        (json!({"k0": "a"}), "a column missing"),
        (
            json!({"k0": "a", "k1": "1.00", "k2": 3}),
            "a column too many",
        ),
        (
            json!({"name": "a", "amount": "1.00"}),
            "column names instead of aliases",
        ),
        (json!({"K0": "a", "k1": "1.00"}), "aliases are exact"),
        (json!({"error": "boom"}), "an error line is never a key"),
        (json!({}), "an empty object"),
    ] {
        let err = read(vec![answer.clone()]).unwrap_err();
        assert!(
            matches!(err, ReadError::Columns { row: 1, .. }),
            "{why}: {err}"
        );
    }
    insta::assert_snapshot!(
        read(vec![json!({"k0": "a", "k1": "1.00"}), json!({"k0": "b"})]).unwrap_err(),
        @"row 2 of the key scan has columns [k0]; expected exactly [k0, k1]"
    );
}

#[test]
fn null_and_unreadable_values_are_refused() {
    insta::assert_snapshot!(
        read(vec![json!({"k0": null, "k1": "1.00"})]).unwrap_err(),
        @"row 1, key column name (VARCHAR NOT NULL): NULL in a primary key column"
    );
    insta::assert_snapshot!(
        read(vec![json!({"k0": "a", "k1": 1.1})]).unwrap_err(),
        @"row 1, key column amount (DECIMAL(10, 2) NOT NULL): DECIMAL key 1.1 arrived as a JSON number, which may have lost digits; accepted: its text (the key scan casts DECIMAL keys to VARCHAR)"
    );
    assert!(matches!(
        read(vec![json!({"k0": "a", "k1": "1.001"})]),
        Err(ReadError::Value { .. })
    ));
}

#[test]
fn the_count_is_one_row_with_one_non_negative_integer() {
    assert_eq!(read_count(&rows(vec![json!({"slotline_count": 0})])), Ok(0));
    assert_eq!(
        read_count(&rows(vec![json!({"slotline_count": 25_000})])),
        Ok(25_000)
    );
    for (answer, why) in [
        (vec![], "no row"),
        (
            vec![json!({"slotline_count": 1}), json!({"slotline_count": 1})],
            "two rows",
        ),
        (vec![json!({"count(*)": 0})], "not the alias"),
        (vec![json!({"slotline_count": 0, "x": 1})], "another column"),
        (vec![json!({"slotline_count": -1})], "negative"),
        (vec![json!({"slotline_count": "0"})], "text"),
        (vec![json!({"slotline_count": 0.5})], "a fraction"),
        (vec![json!({"slotline_count": null})], "null"),
    ] {
        assert!(
            matches!(read_count(&rows(answer)), Err(ReadError::Count { .. })),
            "{why}"
        );
    }
    insta::assert_snapshot!(
        read_count(&rows(vec![json!({"error": "boom"})])).unwrap_err(),
        @r#"the count answer has columns [error]; expected one row {"slotline_count": n} with n a non-negative integer"#
    );
}

fn leftover_plan(pg_type: u32, target: ColumnType) -> LeftoverPlan {
    let t = table(vec![("k", target)]);
    let rel = Relation {
        oid: 1,
        namespace: "public".into(),
        name: "t".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![RelationColumn {
            in_replica_identity: true,
            name: "k".into(),
            type_oid: pg_type,
            type_modifier: -1,
        }],
    };
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), MappingOptions::default()).unwrap();
    plan_leftovers(&t, &mapping, &rel).unwrap()
}

fn keys_of(plan: &LeftoverPlan, answers: &[Value]) -> Vec<Key> {
    answers
        .iter()
        .map(|v| Key(vec![plan.keys.columns[0].kind.from_query(v).unwrap()]))
        .collect()
}

#[test]
fn leftovers_are_the_page_keys_postgres_did_not_return() {
    let plan = leftover_plan(oid::NUMERIC, ColumnType::decimal(10, 2, false));
    let page = keys_of(&plan, &[json!("1.10"), json!("2.00"), json!("3.00")]);
    // PostgreSQL prints numeric as stored: `1.1` is Feldera's 1.10.
    let existing: Vec<Row<'_>> = vec![&[Some("1.1")], &[Some("3.00")]];
    let left = leftovers(&plan, &page, Some(&existing)).unwrap();
    assert_eq!(left, keys_of(&plan, &[json!("2.00")]));
    assert_eq!(
        leftovers(&plan, &page, None).unwrap(),
        page,
        "no query asked: every key is a leftover"
    );
}

#[test]
fn a_coarser_postgres_equality_does_not_keep_a_different_feldera_key() {
    // numeric into VARCHAR: Feldera holds PostgreSQL's text, so "1.10" and "1.1" are two
    // Feldera keys, while PostgreSQL finds 1.1 for both literals.
    let plan = leftover_plan(oid::NUMERIC, ColumnType::new(SqlType::Varchar, false));
    let page = keys_of(&plan, &[json!("1.1"), json!("1.10")]);
    let existing: Vec<Row<'_>> = vec![&[Some("1.1")], &[Some("1.1")]];
    let left = leftovers(&plan, &page, Some(&existing)).unwrap();
    assert_eq!(left, keys_of(&plan, &[json!("1.10")]));
}

#[test]
fn an_unreadable_postgres_answer_is_an_error_not_a_leftover() {
    let plan = leftover_plan(oid::INT8, ColumnType::new(SqlType::BigInt, false));
    let page = keys_of(&plan, &[json!(1)]);
    let wrong_width: Vec<Row<'_>> = vec![&[Some("1"), Some("2")]];
    assert!(matches!(
        leftovers(&plan, &page, Some(&wrong_width)),
        Err(ReadError::Columns { row: 1, .. })
    ));
    let garbage: Vec<Row<'_>> = vec![&[Some("one")]];
    assert!(matches!(
        leftovers(&plan, &page, Some(&garbage)),
        Err(ReadError::Value { row: 1, .. })
    ));
    let null: Vec<Row<'_>> = vec![&[None]];
    insta::assert_snapshot!(
        leftovers(&plan, &page, Some(&null)).unwrap_err(),
        @"row 1, key column k (PostgreSQL \"k\") (BIGINT NOT NULL): PostgreSQL int8 value for Feldera BIGINT NOT NULL: NULL cannot be sent to a NOT NULL column"
    );
}
