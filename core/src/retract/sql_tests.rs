use super::*;
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use crate::retract::plan::{plan_keys, plan_leftovers};
use crate::retract::value::{KeyValue, Ymd};
use crate::schema::{ColumnType, Field, Name, SqlType, Table};
use crate::value::oid;
use crate::value::PgTypes;

fn table(name: Name, fields: Vec<(Name, ColumnType)>, key: &[usize]) -> Table {
    Table {
        name,
        primary_key: Some(key.iter().map(|i| fields[*i].0.clone()).collect()),
        fields: fields
            .into_iter()
            .map(|(name, columntype)| Field::new(name, columntype))
            .collect(),
        materialized: false,
    }
}

fn users() -> Table {
    table(
        Name::unquoted("users"),
        vec![(
            Name::unquoted("id"),
            ColumnType::new(SqlType::BigInt, false),
        )],
        &[0],
    )
}

/// A hostile composite key: a quoted table and column names with quotes and spaces.
fn ledger() -> Table {
    table(
        Name::quoted("Led\"ger; --"),
        vec![
            (
                Name::quoted("Who \"me\""),
                ColumnType::new(SqlType::Varchar, false),
            ),
            (Name::unquoted("amount"), ColumnType::decimal(10, 2, false)),
            (
                Name::unquoted("at"),
                ColumnType::new(SqlType::Timestamp, false),
            ),
        ],
        &[0, 1, 2],
    )
}

const DAY: Ymd = Ymd {
    year: 2024,
    month: 1,
    day: 2,
};

fn hostile_key() -> Key {
    Key(vec![
        KeyValue::Text("O'Brien\"); DROP TABLE users; --".into()),
        KeyValue::Decimal(-110),
        KeyValue::Timestamp(DAY, 3_600_000_000_000),
    ])
}

#[test]
fn the_scan_selects_the_qualified_key_with_no_filter_order_or_limit() {
    let sql = scan_query(&plan_keys(&users()).unwrap());
    insta::assert_snapshot!(sql, @r#"SELECT "users"."id" AS "k0" FROM "users""#);
}

#[test]
fn composite_keys_are_aliased_in_order_with_hostile_names_quoted_and_decimals_as_text() {
    let sql = scan_query(&plan_keys(&ledger()).unwrap());
    insta::assert_snapshot!(sql, @r#"SELECT "Led""ger; --"."Who ""me""" AS "k0", CAST("Led""ger; --"."amount" AS VARCHAR) AS "k1", "Led""ger; --"."at" AS "k2" FROM "Led""ger; --""#);
}

#[test]
fn the_count_is_aliased_so_it_cannot_pass_for_an_error_line() {
    insta::assert_snapshot!(count_query(&plan_keys(&users()).unwrap()), @r#"SELECT COUNT(*) AS "slotline_count" FROM "users""#);
    insta::assert_snapshot!(count_query(&plan_keys(&ledger()).unwrap()), @r#"SELECT COUNT(*) AS "slotline_count" FROM "Led""ger; --""#);
}

fn ledger_leftovers() -> crate::retract::LeftoverPlan {
    let t = ledger();
    let rel = Relation {
        oid: 1,
        namespace: "public".into(),
        name: "Led\"ger; --".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: [
            ("Who \"me\"", oid::TEXT),
            ("amount", oid::NUMERIC),
            ("at", oid::TIMESTAMPTZ),
        ]
        .iter()
        .map(|(name, type_oid)| RelationColumn {
            in_replica_identity: true,
            name: (*name).into(),
            type_oid: *type_oid,
            type_modifier: -1,
        })
        .collect(),
    };
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), MappingOptions::default()).unwrap();
    plan_leftovers(&t, &mapping, &rel).unwrap()
}

#[test]
fn the_existence_query_compares_typed_literals_in_postgres() {
    let plan = ledger_leftovers();
    let second = Key(vec![
        KeyValue::Text("back\\slash".into()),
        KeyValue::Decimal(0),
        KeyValue::Timestamp(DAY, 0),
    ]);
    let sql = existence_query(&plan, &[hostile_key(), second]).unwrap();
    insta::assert_snapshot!(sql, @r#"SELECT t."Who ""me""", t."amount", t."at" FROM "public"."Led""ger; --" AS t WHERE (t."Who ""me""", t."amount", t."at") IN (VALUES ('O''Brien"); DROP TABLE users; --'::pg_catalog.text, '-1.10'::pg_catalog.numeric, '2024-01-02 01:00:00+00'::pg_catalog.timestamptz), (E'back\\slash'::pg_catalog.text, '0.00'::pg_catalog.numeric, '2024-01-02 00:00:00+00'::pg_catalog.timestamptz))"#);
}

#[test]
fn keys_postgres_cannot_hold_are_not_asked_about() {
    let plan = ledger_leftovers();
    let nul = Key(vec![
        KeyValue::Text("nul\0".into()),
        KeyValue::Decimal(1),
        KeyValue::Timestamp(DAY, 0),
    ]);
    assert_eq!(existence_query(&plan, std::slice::from_ref(&nul)), None);
    assert_eq!(existence_query(&plan, &[]), None);
    let sql = existence_query(&plan, &[nul, hostile_key()]).unwrap();
    assert_eq!(sql.matches("::pg_catalog.text").count(), 1, "{sql}");
}

#[test]
fn the_existence_query_asks_only_among_the_published_rows() {
    let mut plan = ledger_leftovers();
    plan.published_rows = Some("((amount > (0)::numeric))".into());
    let sql = existence_query(&plan, &[hostile_key()]).unwrap();
    assert!(
        sql.ends_with(")) AND ((amount > (0)::numeric))"),
        "the filter narrows the rows that count as existing: {sql}"
    );
    plan.published_rows = None;
    let sql = existence_query(&plan, &[hostile_key()]).unwrap();
    assert!(sql.ends_with("::pg_catalog.timestamptz))"), "{sql}");
}
