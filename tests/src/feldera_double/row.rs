//! One `insert_delete` event (`{"insert": row}`, `{"delete": row}`, `{"update": row}`) →
//! typed changes for one relation, with Feldera's per-event rules: an insert needs every
//! NOT NULL column, a keyed delete only the key, an update the key plus the listed columns,
//! and `update` on a table without a primary key is an error.
//!
//! Owns: which columns an event must carry. Never touches table state (see `table`).

use serde_json::{Map, Value as Json};

use super::convert::parse_value;
use super::schema::{Field, Relation, TypeKind};
use super::value::Value;

/// A validated change to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A full row, one value per column.
    Insert(Vec<Value>),
    /// Keyed table: the key values, in primary-key order.
    DeleteKey(Vec<Value>),
    /// Keyless table: a full row (multiset element).
    DeleteRow(Vec<Value>),
    /// Keyed table: one entry per column; `None` = not listed (unchanged), key columns set.
    Update(Vec<Option<Value>>),
}

/// A rejected event: what was wrong, and the column when one is to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    pub description: String,
    pub field: Option<String>,
}

impl EventError {
    fn new(description: impl Into<String>) -> EventError {
        EventError {
            description: description.into(),
            field: None,
        }
    }

    fn at(field: &str, description: impl Into<String>) -> EventError {
        EventError {
            description: format!("field `{field}`: {}", description.into()),
            field: Some(field.to_string()),
        }
    }
}

/// The keys an `insert_delete` event may have; Feldera refuses any other
/// (`deny_unknown_fields`). `table` is accepted and ignored.
const EVENT_KEYS: [&str; 4] = ["table", "insert", "delete", "update"];

/// Parses one event. Feldera applies an event's `delete` before its `insert`, then `update`;
/// an operation that is absent or `null` is skipped, so `{}` changes nothing.
pub fn parse_event(rel: &Relation, event: &Json) -> Result<Vec<Change>, EventError> {
    let obj = event.as_object().ok_or_else(|| {
        EventError::new("an event must be a JSON object with `insert`, `delete` or `update`")
    })?;
    if let Some(unknown) = obj.keys().find(|k| !EVENT_KEYS.contains(&k.as_str())) {
        return Err(EventError::new(format!(
            "unknown field `{unknown}`, expected one of `table`, `insert`, `delete`, `update`"
        )));
    }
    let op = |name: &str| obj.get(name).filter(|v| !v.is_null());
    let mut changes = Vec::with_capacity(1);
    if let Some(row) = op("delete") {
        let row = as_row(row, "delete")?;
        changes.push(match &rel.primary_key {
            Some(key) => Change::DeleteKey(key_values(rel, key, row)?),
            None => Change::DeleteRow(full_row(rel, row)?),
        });
    }
    if let Some(row) = op("insert") {
        changes.push(Change::Insert(full_row(rel, as_row(row, "insert")?)?));
    }
    if let Some(row) = op("update") {
        let row = as_row(row, "update")?;
        let key = rel.primary_key.as_ref().ok_or_else(|| {
            EventError::new(format!(
                "`update` on table `{}`, which has no primary key: updates need a key",
                rel.name
            ))
        })?;
        changes.push(Change::Update(partial_row(rel, key, row)?));
    }
    Ok(changes)
}

fn as_row<'a>(row: &'a Json, op: &str) -> Result<&'a Map<String, Json>, EventError> {
    row.as_object().ok_or_else(|| {
        EventError::new(format!(
            "`{op}` must hold a JSON object keyed by column name"
        ))
    })
}

/// Every column: present values must parse, absent columns take their DEFAULT (or NULL
/// when nullable), absent NOT NULL columns without a DEFAULT are errors. Unknown keys are
/// ignored.
fn full_row(rel: &Relation, row: &Map<String, Json>) -> Result<Vec<Value>, EventError> {
    let found = match_columns(rel, row)?;
    rel.fields
        .iter()
        .zip(found)
        .map(|(f, j)| match j {
            Some(j) => parse_value(&f.columntype, j).map_err(|e| EventError::at(&f.name, e)),
            None => match &f.default {
                Some(sql) => default_value(f, sql).map_err(|e| EventError::at(&f.name, e)),
                None if f.columntype.nullable => Ok(Value::Null),
                None => Err(EventError::at(
                    &f.name,
                    "missing field (column is NOT NULL and has no DEFAULT)",
                )),
            },
        })
        .collect()
}

/// Each column's value in `row`, the way Feldera's generated record deserializer finds it:
/// through a map from each column name's lowercase form to the column (a later column
/// shadows an earlier one of the same lowercase name), a key for a quoted column must match
/// exactly, and a key seen twice keeps its last value.
fn match_columns<'a>(
    rel: &Relation,
    row: &'a Map<String, Json>,
) -> Result<Vec<Option<&'a Json>>, EventError> {
    let mut by_lowercase = std::collections::BTreeMap::new();
    for (i, f) in rel.fields.iter().enumerate() {
        by_lowercase.insert(f.name.to_lowercase(), i);
    }
    let mut found = vec![None; rel.fields.len()];
    for (key, value) in row {
        let Some(&i) = by_lowercase.get(&key.to_lowercase()) else {
            continue;
        };
        let f = &rel.fields[i];
        if f.case_sensitive && *key != f.name {
            return Err(EventError::new(format!(
                "incorrect case-sensitive field name: expected: {}, found: {key}",
                f.name
            )));
        }
        found[i] = Some(value);
    }
    Ok(found)
}

/// A DEFAULT's SQL text as a value. The double evaluates literals only (numbers, strings,
/// TRUE/FALSE, NULL, as the compiler prints them); any other expression is a parse error
/// saying so.
fn default_value(f: &Field, sql: &str) -> Result<Value, String> {
    let text = sql.trim();
    let json = if text.eq_ignore_ascii_case("NULL") {
        Json::Null
    } else if text.eq_ignore_ascii_case("TRUE") || text.eq_ignore_ascii_case("FALSE") {
        Json::Bool(text.eq_ignore_ascii_case("TRUE"))
    } else if let Some(inner) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        Json::String(inner.replace("''", "'"))
    } else if let Ok(n) = text.parse::<i64>() {
        Json::from(n)
    } else if let Ok(x) = text.parse::<f64>() {
        match f.columntype.kind {
            TypeKind::Decimal => Json::String(text.to_string()),
            _ => serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number),
        }
    } else {
        return Err(format!(
            "DEFAULT {text}: the double evaluates only literal DEFAULTs"
        ));
    };
    parse_value(&f.columntype, &json)
}

fn key_values(
    rel: &Relation,
    key: &[usize],
    row: &Map<String, Json>,
) -> Result<Vec<Value>, EventError> {
    let found = match_columns(rel, row)?;
    key.iter()
        .map(|&i| {
            let f = &rel.fields[i];
            match found[i] {
                Some(j) => parse_value(&f.columntype, j).map_err(|e| EventError::at(&f.name, e)),
                None => Err(EventError::at(&f.name, "missing primary key field")),
            }
        })
        .collect()
}

fn partial_row(
    rel: &Relation,
    key: &[usize],
    row: &Map<String, Json>,
) -> Result<Vec<Option<Value>>, EventError> {
    let found = match_columns(rel, row)?;
    rel.fields
        .iter()
        .zip(found)
        .enumerate()
        .map(|(i, (f, j))| match j {
            Some(j) => parse_value(&f.columntype, j)
                .map(Some)
                .map_err(|e| EventError::at(&f.name, e)),
            None if key.contains(&i) => Err(EventError::at(&f.name, "missing primary key field")),
            None => Ok(None),
        })
        .collect()
}
