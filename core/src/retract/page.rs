//! Reading the answers to retraction's questions: a page of keys, a count, and PostgreSQL's
//! list of the keys that still exist.
//!
//! Owns the checks that keep a wrong answer from passing as a short one. A page must have
//! exactly the requested columns, a convertible non-NULL value in each, keys strictly
//! ascending and strictly after the page's start, and no more rows than the limit; any
//! failure is a [`ReadError`], never an empty page. An empty page only says Feldera answered
//! zero rows to that query: it is not proof that nothing is left (the count after the
//! deletes are durable is). Never builds SQL and never decides what to do next.

use super::plan::{Key, KeyPlan, LeftoverPlan};
use super::sql::{key_alias, PageQuery, COUNT_ALIAS};
use super::value::{excerpt, KeyValue};
use crate::startup::catalog::Row;
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
    /// Keys out of order: the answer is not the keyset page asked for.
    Order {
        row: usize,
        key: String,
        previous: String,
    },
    /// More rows than the `LIMIT`.
    TooManyRows { rows: usize, limit: u32 },
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
                "row {row} of the key page has columns [{}]; expected exactly [{}]",
                found.join(", "),
                expected.join(", ")
            ),
            ReadError::Value {
                row,
                column,
                columntype,
                why,
            } => write!(f, "row {row}, key column {column} ({columntype}): {why}"),
            ReadError::Order { row, key, previous } => write!(
                f,
                "row {row} of the key page ({key}) does not come strictly after {previous}; \
                 expected keys in ascending order after the page's start"
            ),
            ReadError::TooManyRows { rows, limit } => write!(
                f,
                "the key page has {rows} rows, more than its LIMIT {limit}"
            ),
            ReadError::Count { problem } => write!(
                f,
                "the count answer {problem}; expected one row {{\"{COUNT_ALIAS}\": n}} with \
                 n a non-negative integer"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// One page of the keys Feldera holds, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    keys: Vec<Key>,
    limit: u32,
}

impl Page {
    /// Reads the rows of `query`'s answer (`QueryOutcome::Rows`; an interrupted, failed or
    /// transient answer is never a page).
    pub fn read(
        plan: &KeyPlan,
        query: &PageQuery,
        rows: Vec<Map<String, Value>>,
    ) -> Result<Page, ReadError> {
        if rows.len() > query.limit as usize {
            return Err(ReadError::TooManyRows {
                rows: rows.len(),
                limit: query.limit,
            });
        }
        let aliases: Vec<String> = (0..plan.columns.len()).map(key_alias).collect();
        let mut keys: Vec<Key> = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            let number = i + 1;
            let key = read_key(plan, &aliases, number, row)?;
            let previous = keys.last().or(query.after.as_ref());
            if let Some(previous) = previous.filter(|p| key <= **p) {
                return Err(ReadError::Order {
                    row: number,
                    key: plan.describe(&key),
                    previous: plan.describe(previous),
                });
            }
            keys.push(key);
        }
        Ok(Page {
            keys,
            limit: query.limit,
        })
    }

    /// The keys, strictly ascending.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Feldera answered zero rows. Not proof that the table is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// As many rows as the limit: more may follow.
    pub fn is_full(&self) -> bool {
        self.keys.len() >= self.limit as usize
    }

    /// Where the next page starts (`None` for an empty page).
    pub fn last(&self) -> Option<&Key> {
        self.keys.last()
    }

    pub fn into_keys(self) -> Vec<Key> {
        self.keys
    }
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

/// The keys of `page` that PostgreSQL does not have, in page order, given the answer to
/// `sql::existence_query` for that page (`None` when no query was needed). Each answered
/// row goes through the stream's own conversion and is compared under Feldera's equality,
/// so a key PostgreSQL finds only by a coarser equality (`1.10 = 1.1`) is not mistaken for
/// a kept one.
pub fn leftovers(
    plan: &LeftoverPlan,
    page: &[Key],
    existing: Option<&[Row<'_>]>,
) -> Result<Vec<Key>, ReadError> {
    let mut kept: BTreeSet<Key> = BTreeSet::new();
    for (i, row) in existing.unwrap_or_default().iter().enumerate() {
        kept.insert(pg_key(plan, i + 1, row)?);
    }
    Ok(page.iter().filter(|k| !kept.contains(k)).cloned().collect())
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
