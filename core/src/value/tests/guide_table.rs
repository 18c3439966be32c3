//! The type table users read (docs/guide/types.md, "From PostgreSQL types to Feldera
//! columns") against the one that decides (`plan`): every builtin pair a row lists is
//! planned, and every typed Feldera column no row lists for a builtin type is refused. The
//! guide's table is a rendering of `plan`, never a second decision.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

const GUIDE: &str = include_str!("../../../../docs/guide/types.md");

/// The PostgreSQL spellings the guide uses for builtin types.
fn pg_oid(name: &str) -> Option<u32> {
    Some(match name {
        "boolean" => oid::BOOL,
        "smallint" => oid::INT2,
        "integer" => oid::INT4,
        "bigint" => oid::INT8,
        "oid" => oid::OID,
        "real" => oid::FLOAT4,
        "double precision" => oid::FLOAT8,
        "numeric" => oid::NUMERIC,
        "text" => oid::TEXT,
        "varchar(n)" => oid::VARCHAR,
        "char(n)" => oid::BPCHAR,
        "name" => oid::NAME,
        "\"char\"" => oid::CHAR,
        "bytea" => oid::BYTEA,
        "date" => oid::DATE,
        "time" => oid::TIME,
        "timestamp" => oid::TIMESTAMP,
        "timestamptz" => oid::TIMESTAMPTZ,
        "uuid" => oid::UUID,
        "json" => oid::JSON,
        "jsonb" => oid::JSONB,
        _ => return None,
    })
}

/// The Feldera spellings the guide uses for scalar column types.
fn feldera_type(name: &str) -> Option<ColumnType> {
    let sql = match name {
        "BOOLEAN" => SqlType::Boolean,
        "TINYINT" => SqlType::TinyInt,
        "SMALLINT" => SqlType::SmallInt,
        "INTEGER" => SqlType::Integer,
        "BIGINT" => SqlType::BigInt,
        "REAL" => SqlType::Real,
        "DOUBLE" => SqlType::Double,
        "DECIMAL(p, s)" => return Some(ColumnType::decimal(12, 2, true)),
        "VARCHAR(n)" => SqlType::Varchar,
        "CHAR(n)" => SqlType::Char,
        "BINARY(n)" => SqlType::Binary,
        "VARBINARY(n)" => SqlType::Varbinary,
        "DATE" => SqlType::Date,
        "TIME" => SqlType::Time,
        "TIMESTAMP" => SqlType::Timestamp,
        "TIMESTAMP_TZ" => SqlType::TimestampTz,
        "UUID" => SqlType::Uuid,
        "VARIANT" => SqlType::Variant,
        _ => return None,
    };
    Some(col(sql))
}

/// Every scalar column type a builtin could be declared as besides VARCHAR (which takes
/// every type).
const TYPED: [SqlType; 17] = [
    SqlType::Boolean,
    SqlType::TinyInt,
    SqlType::SmallInt,
    SqlType::Integer,
    SqlType::BigInt,
    SqlType::Real,
    SqlType::Double,
    SqlType::Decimal,
    SqlType::Char,
    SqlType::Binary,
    SqlType::Varbinary,
    SqlType::Date,
    SqlType::Time,
    SqlType::Timestamp,
    SqlType::TimestampTz,
    SqlType::Uuid,
    SqlType::Variant,
];

/// The names in backticks in a table cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The guide's rows whose PostgreSQL cell names builtins and whose Feldera cell names only
/// scalar types: each builtin with the targets the guide lists for it (a type may
/// appear in several rows).
fn listed_pairs() -> BTreeMap<&'static str, Vec<&'static str>> {
    let section = GUIDE
        .split("## From PostgreSQL types to Feldera columns")
        .nth(1)
        .expect("the guide has the type table's section");
    let mut listed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let [pg, feldera, ..] = cells[..] else {
            continue;
        };
        // A row may name an extension type beside builtins (`citext`): the builtins count.
        let pg_names: Vec<&str> = quoted(pg.trim_start_matches('|'))
            .into_iter()
            .filter(|n| pg_oid(n).is_some())
            .collect();
        let targets = quoted(feldera);
        let scalar = !targets.is_empty() && targets.iter().all(|t| feldera_type(t).is_some());
        if !pg_names.is_empty() && scalar {
            for name in pg_names {
                listed
                    .entry(name)
                    .or_default()
                    .extend(targets.iter().copied());
            }
        }
    }
    listed
}

#[test]
fn every_builtin_pair_the_guide_lists_is_planned() {
    let listed = listed_pairs();
    assert!(
        listed.len() >= 20,
        "the guide's table should name the builtins it maps; read: {listed:?}"
    );
    let types = PgTypes::new();
    for (pg, targets) in &listed {
        let oid = pg_oid(pg).expect("only builtins are listed");
        for target in targets {
            let column = feldera_type(target).expect("only scalar types are listed");
            if let Err(e) = plan(&types, oid, &column) {
                panic!("the guide pairs {pg} with {target}, but plan refuses it: {e}");
            }
        }
    }
}

#[test]
fn every_typed_column_the_guide_does_not_list_for_a_builtin_is_refused() {
    let types = PgTypes::new();
    for (pg, targets) in listed_pairs() {
        let oid = pg_oid(pg).expect("only builtins are listed");
        let allowed: BTreeSet<SqlType> = targets
            .iter()
            .filter_map(|t| feldera_type(t))
            .map(|c| c.sql)
            .collect();
        for sql in TYPED.into_iter().filter(|sql| !allowed.contains(sql)) {
            let column = if sql == SqlType::Decimal {
                ColumnType::decimal(12, 2, true)
            } else {
                col(sql)
            };
            assert!(
                plan(&types, oid, &column).is_err(),
                "plan accepts {pg} into {sql}, which the guide's table does not list"
            );
        }
    }
}
