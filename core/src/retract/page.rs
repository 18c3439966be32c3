//! Reading the answers to retraction's questions: the rows of a key scan, a count, and
//! PostgreSQL's list of the keys that still exist.
//!
//! Owns the checks that keep a wrong answer from passing as a short one. Every key row must
//! have exactly the requested columns and a convertible non-NULL value in each; any failure
//! is a [`ReadError`], never a shorter list of keys. A scan that ends with zero rows only
//! says Feldera answered zero rows: it is not proof that nothing is left (the count after
//! the deletes are durable is). Never builds SQL and never decides what to do next.

use super::plan::{Key, KeyPlan, LeftoverPlan};
use super::sql::{key_alias, COUNT_ALIAS};
use super::value::{excerpt, KeyValue};
use crate::catalog::questions::Row;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt;

/// Most column names an error quotes from a hostile answer.
const MAX_NAMES_SHOWN: usize = 8;

/// A retraction answer that cannot be trusted. Always fatal to the retraction that asked:
/// nothing may be concluded from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// A row's columns are not the ones asked for.
    Columns {
        row: usize,
        found: Vec<String>,
        expected: Vec<String>,
    },
    /// A value does not read as its key column's type (NULL included).
    Value {
        row: usize,
        column: String,
        columntype: String,
        why: String,
    },
    /// The count query's answer is not one row holding one non-negative integer.
    Count { problem: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Columns {
                row,
                found,
                expected,
            } => write!(
                f,
                "row {row} of the key scan has columns [{}]; expected exactly [{}]",
                found.join(", "),
                expected.join(", ")
            ),
            ReadError::Value {
                row,
                column,
                columntype,
                why,
            } => write!(f, "row {row}, key column {column} ({columntype}): {why}"),
            ReadError::Count { problem } => write!(
                f,
                "the count answer {problem}; expected one row {{\"{COUNT_ALIAS}\": n}} with \
                 n a non-negative integer"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads the key rows of a scan answer (`sql::scan_query`), as they arrive; `first` is the
/// number of the first row among all the answer's rows (for messages). Rows of an
/// interrupted or failed answer are never keys to act on (see `feldera::RowStream`).
pub fn read_keys(
    plan: &KeyPlan,
    rows: Vec<Map<String, Value>>,
    first: usize,
) -> Result<Vec<Key>, ReadError> {
    let aliases: Vec<String> = (0..plan.columns.len()).map(key_alias).collect();
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| read_key(plan, &aliases, first + i, row))
        .collect()
}

fn read_key(
    plan: &KeyPlan,
    aliases: &[String],
    row: usize,
    mut values: Map<String, Value>,
) -> Result<Key, ReadError> {
    let exact = values.len() == aliases.len() && aliases.iter().all(|a| values.contains_key(a));
    if !exact {
        return Err(ReadError::Columns {
            row,
            found: values
                .keys()
                .take(MAX_NAMES_SHOWN)
                .map(|k| excerpt(k))
                .collect(),
            expected: aliases.to_vec(),
        });
    }
    let mut key = Vec::with_capacity(aliases.len());
    for (column, alias) in plan.columns.iter().zip(aliases) {
        let value = values.remove(alias).unwrap_or(Value::Null);
        let read = column
            .kind
            .from_query(&value)
            .map_err(|why| ReadError::Value {
                row,
                column: column.name.to_string(),
                columntype: column.columntype.to_string(),
                why,
            })?;
        key.push(read);
    }
    Ok(Key(key))
}

/// Reads the count query's answer.
pub fn read_count(rows: &[Map<String, Value>]) -> Result<u64, ReadError> {
    let problem = |p: String| Err(ReadError::Count { problem: p });
    let [row] = rows else {
        return problem(format!("has {} rows", rows.len()));
    };
    match (row.len(), row.get(COUNT_ALIAS)) {
        (1, Some(value)) => match value.as_u64() {
            Some(n) => Ok(n),
            None => problem(format!("holds {}", excerpt(&value.to_string()))),
        },
        _ => problem(format!(
            "has columns [{}]",
            row.keys()
                .take(MAX_NAMES_SHOWN)
                .map(|k| excerpt(k))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The keys of `group` that PostgreSQL does not have, in group order, given the answer to
/// `sql::existence_query` for that group (`None` when no query was needed). Each answered
/// row goes through the stream's own conversion and is compared under Feldera's equality,
/// so a key PostgreSQL finds only by a coarser equality (`1.10 = 1.1`) is not mistaken for
/// a kept one.
pub fn leftovers(
    plan: &LeftoverPlan,
    group: &[Key],
    existing: Option<&[Row<'_>]>,
) -> Result<Vec<Key>, ReadError> {
    let mut kept: BTreeSet<Key> = BTreeSet::new();
    for (i, row) in existing.unwrap_or_default().iter().enumerate() {
        kept.insert(pg_key(plan, i + 1, row)?);
    }
    Ok(group
        .iter()
        .filter(|k| !kept.contains(k))
        .cloned()
        .collect())
}

fn pg_key(plan: &LeftoverPlan, row: usize, cells: Row<'_>) -> Result<Key, ReadError> {
    if cells.len() != plan.columns.len() {
        return Err(ReadError::Columns {
            row,
            found: vec![format!("{} columns", cells.len())],
            expected: plan.columns.iter().map(|c| c.sql_name.clone()).collect(),
        });
    }
    let mut key: Vec<KeyValue> = Vec::with_capacity(cells.len());
    for ((pg, column), cell) in plan.columns.iter().zip(&plan.keys.columns).zip(cells) {
        let fail = |why: String| ReadError::Value {
            row,
            column: format!("{} (PostgreSQL {})", column.name, pg.sql_name),
            columntype: column.columntype.to_string(),
            why,
        };
        let mut json = Vec::new();
        pg.plan
            .write_datum(cell.map(str::as_bytes), &mut json)
            .map_err(|e| fail(e.to_string()))?;
        let value: Value = serde_json::from_slice(&json).map_err(|e| fail(e.to_string()))?;
        key.push(column.kind.from_ingress(&value).map_err(fail)?);
    }
    Ok(Key(key))
}

#[cfg(test)]
#[path = "page_tests.rs"]
mod tests;
