//! SQL spellings of names and key values, for Feldera's ad-hoc query engine (Apache
//! DataFusion, generic dialect) and for PostgreSQL.
//!
//! Owns quoting and typed literals, so no other code pastes a name or a value into SQL.
//! Feldera: identifiers always double-quoted in their canonical spelling (unquoted schema
//! names are already lowercase, and quoting keeps reserved words such as `order` usable);
//! strings in single quotes with `''` (the generic dialect has no backslash escapes);
//! typed values through `CAST('text' AS type)` at the column's own precision, because a
//! bare DataFusion literal would be a float (decimals) or nanoseconds (timestamps, which
//! overflow outside 1677-2262). PostgreSQL: identifiers always double-quoted, values as
//! `'text'::pg_catalog.type`, written as `E'...'` with doubled backslashes whenever the
//! text has a backslash, so the literal means the same whatever
//! `standard_conforming_strings` says. Never decides which values to write.

use super::value::{date_text, decimal_text, time_text, KeyKind, KeyValue};
use crate::schema::Name;
use crate::value::oid;

/// A Feldera table or column name for the ad-hoc query engine.
pub fn feldera_ident(name: &Name) -> String {
    format!("\"{}\"", name.canonical().replace('"', "\"\""))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A PostgreSQL identifier, always quoted (exact catalog spelling). `None` for a name with
/// NUL, which no PostgreSQL identifier has.
pub fn pg_ident(name: &str) -> Option<String> {
    if name.contains('\0') {
        return None;
    }
    Some(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A PostgreSQL string literal meaning exactly `text` under either setting of
/// `standard_conforming_strings`. `None` for text with NUL, which PostgreSQL text cannot
/// hold.
pub fn pg_string(text: &str) -> Option<String> {
    if text.contains('\0') {
        return None;
    }
    let quoted = text.replace('\'', "''");
    Some(if text.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    })
}

/// The SQL name of a PostgreSQL type a key literal can be cast to: the built-in types with
/// an equality operator that slotline converts. `None` for every other type (user types
/// have no fixed OID, `json` has no equality, arrays are not handled).
pub fn pg_type_name(pg_type: u32) -> Option<&'static str> {
    Some(match pg_type {
        oid::BOOL => "pg_catalog.bool",
        oid::INT2 => "pg_catalog.int2",
        oid::INT4 => "pg_catalog.int4",
        oid::INT8 => "pg_catalog.int8",
        oid::OID => "pg_catalog.oid",
        oid::FLOAT4 => "pg_catalog.float4",
        oid::FLOAT8 => "pg_catalog.float8",
        oid::NUMERIC => "pg_catalog.numeric",
        oid::TEXT => "pg_catalog.text",
        oid::VARCHAR => "pg_catalog.varchar",
        oid::BPCHAR => "pg_catalog.bpchar",
        oid::NAME => "pg_catalog.name",
        oid::CHAR => "pg_catalog.\"char\"",
        oid::BYTEA => "pg_catalog.bytea",
        oid::DATE => "pg_catalog.date",
        oid::TIME => "pg_catalog.time",
        oid::TIMESTAMP => "pg_catalog.timestamp",
        oid::TIMESTAMPTZ => "pg_catalog.timestamptz",
        oid::UUID => "pg_catalog.uuid",
        oid::JSONB => "pg_catalog.jsonb",
        oid::INTERVAL => "pg_catalog.interval",
        oid::TIMETZ => "pg_catalog.timetz",
        _ => return None,
    })
}

/// The PostgreSQL input text of a key value for a column of type `pg_type`, or `None` when
/// no PostgreSQL value converts to it (finer than microseconds, NUL in text): such a key
/// cannot exist in PostgreSQL.
pub fn pg_input_text(pg_type: u32, kind: KeyKind, value: &KeyValue) -> Option<String> {
    Some(match value {
        KeyValue::Int(n) => n.to_string(),
        KeyValue::Bool(b) => b.to_string(),
        KeyValue::Text(s) if s.contains('\0') => return None,
        KeyValue::Text(s) => s.clone(),
        KeyValue::Decimal(unscaled) => decimal_text(*unscaled, kind.scale()),
        KeyValue::Binary(bytes) => format!("\\x{}", hex(bytes)),
        KeyValue::Date(d) => date_text(*d),
        KeyValue::Time(t) if t % 1_000 != 0 => return None,
        KeyValue::Time(t) => time_text(*t),
        KeyValue::Timestamp(d, t) => {
            // A timestamptz column's values were shifted to UTC on the way to Feldera.
            let zone = if pg_type == oid::TIMESTAMPTZ {
                "+00"
            } else {
                ""
            };
            format!("{} {}{zone}", date_text(*d), time_text(*t))
        }
    })
}

/// `'text'::type` for a key value, or `None` when no PostgreSQL value matches it.
pub fn pg_literal(pg_type: u32, kind: KeyKind, value: &KeyValue) -> Option<String> {
    let text = pg_input_text(pg_type, kind, value)?;
    Some(format!("{}::{}", pg_string(&text)?, pg_type_name(pg_type)?))
}

#[cfg(test)]
#[path = "literal_tests.rs"]
mod tests;
