use super::*;
use crate::retract::value::Ymd;
use crate::schema::{ColumnType, SqlType};

fn kind(sql: SqlType) -> KeyKind {
    KeyKind::of(&ColumnType::new(sql, false)).unwrap()
}

const DAY: Ymd = Ymd {
    year: 1,
    month: 1,
    day: 1,
};

#[test]
fn feldera_names_are_always_quoted_in_their_canonical_spelling() {
    assert_eq!(feldera_ident(&Name::unquoted("users")), "\"users\"");
    assert_eq!(
        feldera_ident(&Name::unquoted("USERS")),
        "\"users\"",
        "Feldera folds unquoted names to lowercase"
    );
    assert_eq!(feldera_ident(&Name::quoted("Order")), "\"Order\"");
    assert_eq!(
        feldera_ident(&Name::quoted("a\"b\"; DROP")),
        "\"a\"\"b\"\"; DROP\""
    );
}

#[test]
fn postgres_strings_use_e_quotes_only_for_backslashes() {
    assert_eq!(pg_string("plain").as_deref(), Some("'plain'"));
    assert_eq!(pg_string("it's").as_deref(), Some("'it''s'"));
    assert_eq!(
        pg_string("a\\'b").as_deref(),
        Some("E'a\\\\''b'"),
        "safe whatever standard_conforming_strings says"
    );
    assert_eq!(
        pg_string("'); DROP TABLE users; --").as_deref(),
        Some("'''); DROP TABLE users; --'")
    );
    assert_eq!(pg_string("nul\0"), None);
    assert_eq!(
        pg_ident("Mixed \"Case\"").as_deref(),
        Some("\"Mixed \"\"Case\"\"\"")
    );
    assert_eq!(pg_ident("a\0"), None);
}

#[test]
fn postgres_literals_cast_to_the_source_column_type() {
    let lit = |pg: u32, k: KeyKind, v: KeyValue| pg_literal(pg, k, &v);
    assert_eq!(
        lit(oid::INT8, kind(SqlType::BigInt), KeyValue::Int(-1)).as_deref(),
        Some("'-1'::pg_catalog.int8")
    );
    let dec = KeyKind::of(&ColumnType::decimal(10, 2, false)).unwrap();
    assert_eq!(
        lit(oid::NUMERIC, dec, KeyValue::Decimal(5)).as_deref(),
        Some("'0.05'::pg_catalog.numeric")
    );
    assert_eq!(
        lit(
            oid::BYTEA,
            kind(SqlType::Varbinary),
            KeyValue::Binary(vec![0, 255])
        )
        .as_deref(),
        Some("E'\\\\x00ff'::pg_catalog.bytea")
    );
    let ts = KeyValue::Timestamp(DAY, 0);
    assert_eq!(
        lit(oid::TIMESTAMPTZ, kind(SqlType::Timestamp), ts.clone()).as_deref(),
        Some("'0001-01-01 00:00:00+00'::pg_catalog.timestamptz"),
        "timestamptz values reached Feldera as UTC"
    );
    assert_eq!(
        lit(oid::TIMESTAMP, kind(SqlType::Timestamp), ts).as_deref(),
        Some("'0001-01-01 00:00:00'::pg_catalog.timestamp")
    );
    assert_eq!(
        lit(
            oid::CHAR,
            kind(SqlType::Varchar),
            KeyValue::Text("x".into())
        )
        .as_deref(),
        Some("'x'::pg_catalog.\"char\"")
    );
    assert_eq!(
        lit(
            oid::TIMESTAMPTZ,
            kind(SqlType::Varchar),
            KeyValue::Text("2024-01-01 00:00:00+00".into())
        )
        .as_deref(),
        Some("'2024-01-01 00:00:00+00'::pg_catalog.timestamptz"),
        "a VARCHAR key holds PostgreSQL's own text, cast back to the column type"
    );
}

#[test]
fn values_postgres_cannot_hold_have_no_literal() {
    assert_eq!(
        pg_literal(oid::TIME, kind(SqlType::Time), &KeyValue::Time(1)),
        None,
        "a nanosecond"
    );
    assert_eq!(
        pg_literal(
            oid::TEXT,
            kind(SqlType::Varchar),
            &KeyValue::Text("a\0b".into())
        ),
        None
    );
    assert_eq!(
        pg_literal(
            oid::JSON,
            kind(SqlType::Varchar),
            &KeyValue::Text("{}".into())
        ),
        None,
        "json has no equality"
    );
}
