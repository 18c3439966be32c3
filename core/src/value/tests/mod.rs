//! Table-driven tests of the mapping (one row per case of the value table in docs/postgres.md,
//! "Values", and its edges), plus properties over generated values.

mod catalog_types;
mod guide_table;
mod properties;
mod records;
mod scalars;
mod structured;
mod temporal;

use super::*;
use crate::schema::ColumnType;
use crate::schema::SqlType;

fn col(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, true)
}

fn not_null(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, false)
}

fn array(component: ColumnType) -> ColumnType {
    ColumnType::array_of(component, true)
}

/// Decodes `text` and returns the JSON, or the error's Display.
fn decode(pg_type: u32, target: &ColumnType, text: &[u8]) -> Result<String, String> {
    decode_in(&PgTypes::new(), pg_type, target, text)
}

/// `decode` for a type `types` describes.
fn decode_in(
    types: &PgTypes,
    pg_type: u32,
    target: &ColumnType,
    text: &[u8],
) -> Result<String, String> {
    let plan = plan(types, pg_type, target).map_err(|e| format!("unsupported: {e}"))?;
    let mut out = Vec::new();
    plan.write_json(text, &mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).expect("decoders write UTF-8"))
}

/// One case: type, column, input, and either the exact JSON or a piece of the error.
struct Case {
    pg_type: u32,
    target: ColumnType,
    text: &'static [u8],
    expected: Result<&'static str, &'static str>,
}

fn ok(pg_type: u32, target: ColumnType, text: &'static str, json: &'static str) -> Case {
    Case {
        pg_type,
        target,
        text: text.as_bytes(),
        expected: Ok(json),
    }
}

fn err(pg_type: u32, target: ColumnType, text: &'static str, message: &'static str) -> Case {
    Case {
        pg_type,
        target,
        text: text.as_bytes(),
        expected: Err(message),
    }
}

fn check(cases: Vec<Case>) {
    check_in(&PgTypes::new(), cases);
}

/// `check` for types `types` describes.
fn check_in(types: &PgTypes, cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in &cases {
        let got = decode_in(types, case.pg_type, &case.target, case.text);
        let pass = match (&got, case.expected) {
            (Ok(json), Ok(want)) => json == want,
            (Err(message), Err(want)) => message.contains(want),
            _ => false,
        };
        if !pass {
            failures.push(format!(
                "{} {:?} -> {}: got {got:?}, want {:?}",
                types.name(case.pg_type),
                String::from_utf8_lossy(case.text),
                case.target,
                case.expected
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
