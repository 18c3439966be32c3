//! The contents of one input table and how changes apply to it: a keyed table upserts and
//! ignores deletes and updates of absent keys; a keyless table is a multiset (Z-set) with
//! weights, where deleting an absent row is recorded as a fault (undefined in Feldera).
//!
//! Owns: rows, weights and faults of one table. Never parses JSON or knows about HTTP.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::row::Change;
use super::schema::Relation;
use super::value::{to_ingress_json, Value};

/// Rows of one table.
#[derive(Debug, Clone)]
pub enum Rows {
    /// Primary key values (in key order) → full row.
    Keyed(BTreeMap<Vec<Value>, Vec<Value>>),
    /// Full row → weight. Entries with weight 0 are removed; a negative weight is what a
    /// Z-set holds after deleting an absent row.
    Multiset(BTreeMap<Vec<Value>, i64>),
}

/// One table's state.
#[derive(Debug, Clone)]
pub struct TableState {
    pub rows: Rows,
    /// Human-readable descriptions of semantic faults (e.g. delete of an absent row).
    pub faults: Vec<String>,
}

impl TableState {
    pub fn new(rel: &Relation) -> TableState {
        TableState {
            rows: match rel.primary_key {
                Some(_) => Rows::Keyed(BTreeMap::new()),
                None => Rows::Multiset(BTreeMap::new()),
            },
            faults: Vec::new(),
        }
    }

    pub fn apply(&mut self, rel: &Relation, change: Change) {
        match (&mut self.rows, change) {
            (Rows::Keyed(rows), Change::Insert(row)) => {
                rows.insert(key_of(rel, &row), row);
            }
            (Rows::Keyed(rows), Change::DeleteKey(key)) => {
                rows.remove(&key);
            }
            (Rows::Keyed(rows), Change::Update(partial)) => {
                let key: Vec<Value> = key_indices(rel)
                    .iter()
                    .map(|&i| partial[i].clone().unwrap_or(Value::Null))
                    .collect();
                if let Some(row) = rows.get_mut(&key) {
                    for (slot, new) in row.iter_mut().zip(partial) {
                        if let Some(v) = new {
                            *slot = v;
                        }
                    }
                }
            }
            (Rows::Multiset(rows), Change::Insert(row)) => add_weight(rows, row, 1),
            (Rows::Multiset(rows), Change::DeleteRow(row)) => {
                if rows.get(&row).copied().unwrap_or(0) <= 0 {
                    self.faults.push(format!(
                        "delete of a row that is not in the table: {}",
                        row_json(rel, &row)
                    ));
                }
                add_weight(rows, row, -1);
            }
            (_, other) => {
                // `row::parse_event` builds changes from the same relation, so a mismatch
                // is a bug in the double; record it rather than panic in a server task.
                self.faults.push(format!(
                    "internal: change {other:?} does not fit this table"
                ));
            }
        }
    }

    /// Rows a query sees: keyed rows once each, multiset rows repeated by positive weight.
    pub fn visible_rows(&self) -> Vec<Vec<Value>> {
        match &self.rows {
            Rows::Keyed(rows) => rows.values().cloned().collect(),
            Rows::Multiset(rows) => rows
                .iter()
                .filter(|(_, w)| **w > 0)
                .flat_map(|(row, w)| std::iter::repeat_n(row.clone(), *w as usize))
                .collect(),
        }
    }

    /// How many rows `visible_rows` holds, without building them.
    pub fn visible_len(&self) -> usize {
        match &self.rows {
            Rows::Keyed(rows) => rows.len(),
            Rows::Multiset(rows) => rows.values().filter(|w| **w > 0).map(|w| *w as usize).sum(),
        }
    }

    /// Inspection view: `{"rows": [{"row": {...}, "weight": n}], "faults": [...]}`.
    pub fn to_json(&self, rel: &Relation) -> Json {
        let rows: Vec<Json> = match &self.rows {
            Rows::Keyed(rows) => rows
                .values()
                .map(|r| json!({"row": row_json(rel, r), "weight": 1}))
                .collect(),
            Rows::Multiset(rows) => rows
                .iter()
                .map(|(r, w)| json!({"row": row_json(rel, r), "weight": w}))
                .collect(),
        };
        json!({"name": rel.name, "rows": rows, "faults": self.faults})
    }
}

fn add_weight(rows: &mut BTreeMap<Vec<Value>, i64>, row: Vec<Value>, delta: i64) {
    match rows.entry(row) {
        Entry::Occupied(mut e) => {
            *e.get_mut() += delta;
            if *e.get() == 0 {
                e.remove();
            }
        }
        Entry::Vacant(e) => {
            e.insert(delta);
        }
    }
}

fn key_indices(rel: &Relation) -> &[usize] {
    rel.primary_key.as_deref().unwrap_or(&[])
}

fn key_of(rel: &Relation, row: &[Value]) -> Vec<Value> {
    key_indices(rel)
        .iter()
        .map(|&i| row.get(i).cloned().unwrap_or(Value::Null))
        .collect()
}

/// A row as an ingress-form JSON object keyed by the schema's column names.
pub fn row_json(rel: &Relation, row: &[Value]) -> Json {
    Json::Object(
        rel.fields
            .iter()
            .zip(row)
            .map(|(f, v)| (f.name.clone(), to_ingress_json(v, &f.columntype)))
            .collect(),
    )
}
