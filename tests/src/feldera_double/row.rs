//! One `insert_delete` event (`{"insert": row}`, `{"delete": row}`, `{"update": row}`) →
//! typed changes for one relation, with Feldera's per-event rules: an insert needs every
//! NOT NULL column, a keyed delete only the key, an update the key plus the listed columns,
//! and `update` on a table without a primary key is an error.
//!
//! Owns: which columns an event must carry. Never touches table state (see `table`).

use serde_json::{Map, Value as Json};

use super::convert::{lookup, parse_value};
use super::schema::Relation;
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

/// Parses one event. Feldera applies an event's `delete` before its `insert`, then `update`.
pub fn parse_event(rel: &Relation, event: &Json) -> Result<Vec<Change>, EventError> {
    let obj = event.as_object().ok_or_else(|| {
        EventError::new("an event must be a JSON object with `insert`, `delete` or `update`")
    })?;
    let mut changes = Vec::with_capacity(1);
    if let Some(row) = obj.get("delete") {
        let row = as_row(row, "delete")?;
        changes.push(match &rel.primary_key {
            Some(key) => Change::DeleteKey(key_values(rel, key, row)?),
            None => Change::DeleteRow(full_row(rel, row)?),
        });
    }
    if let Some(row) = obj.get("insert") {
        changes.push(Change::Insert(full_row(rel, as_row(row, "insert")?)?));
    }
    if let Some(row) = obj.get("update") {
        let row = as_row(row, "update")?;
        let key = rel.primary_key.as_ref().ok_or_else(|| {
            EventError::new(format!(
                "`update` on table `{}`, which has no primary key: updates need a key",
                rel.name
            ))
        })?;
        changes.push(Change::Update(partial_row(rel, key, row)?));
    }
    if changes.is_empty() {
        return Err(EventError::new(
            "event has none of `insert`, `delete` or `update`",
        ));
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

/// Every column: present values must parse, absent nullable columns become NULL, absent
/// NOT NULL columns are errors. Unknown keys are ignored.
fn full_row(rel: &Relation, row: &Map<String, Json>) -> Result<Vec<Value>, EventError> {
    rel.fields
        .iter()
        .map(
            |f| match lookup(row, f).map_err(|e| EventError::at(&f.name, e))? {
                Some(j) => parse_value(&f.columntype, j).map_err(|e| EventError::at(&f.name, e)),
                None if f.columntype.nullable => Ok(Value::Null),
                None => Err(EventError::at(
                    &f.name,
                    "missing field (column is NOT NULL)",
                )),
            },
        )
        .collect()
}

fn key_values(
    rel: &Relation,
    key: &[usize],
    row: &Map<String, Json>,
) -> Result<Vec<Value>, EventError> {
    key.iter()
        .map(|&i| {
            let f = &rel.fields[i];
            match lookup(row, f).map_err(|e| EventError::at(&f.name, e))? {
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
    rel.fields
        .iter()
        .enumerate()
        .map(
            |(i, f)| match lookup(row, f).map_err(|e| EventError::at(&f.name, e))? {
                Some(j) => parse_value(&f.columntype, j)
                    .map(Some)
                    .map_err(|e| EventError::at(&f.name, e)),
                None if key.contains(&i) => {
                    Err(EventError::at(&f.name, "missing primary key field"))
                }
                None => Ok(None),
            },
        )
        .collect()
}
