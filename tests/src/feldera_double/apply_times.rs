//! Opt-in record of when each change became visible in its table
//! (`DoubleConfig::with_apply_times`), so a benchmark in the same process can measure a
//! row's way from its source to the double against one monotonic clock.
//!
//! A change is stamped with the instant its group became visible to any reader: the
//! group's due time (its arrival plus the completion delay, or the release that made it
//! due), never before the group ahead of it (groups are processed in order) nor before the
//! end of a pause. Processing itself is lazy (it runs when a request or an inspection next
//! looks), but every reader processes what is due before it reads, so the due time is when
//! the row could first be seen, as a pipeline that processes at once would show it.
//!
//! Owns: the stamps and the keys they belong to. Never changes what is applied.

use std::time::Instant;

use serde_json::Value as Json;

use super::row::Change;
use super::schema::Relation;
use super::value::{to_ingress_json, Value};

/// Every stamped change, per input table, in the order applied.
#[derive(Debug, Default)]
pub struct ApplyTimes {
    /// One list per input table (schema order): (key of the change, when visible).
    tables: Vec<Vec<(Vec<Value>, Instant)>>,
    /// The latest stamp given, or the end of the latest pause: no group is visible before.
    floor: Option<Instant>,
}

impl ApplyTimes {
    pub fn new(tables: usize) -> ApplyTimes {
        ApplyTimes {
            tables: (0..tables).map(|_| Vec::new()).collect(),
            floor: None,
        }
    }

    /// The stamp of a group due at `due` that is processed now; later groups get no earlier
    /// one.
    pub fn stamp(&mut self, due: Instant) -> Instant {
        let at = self.floor.map_or(due, |floor| floor.max(due));
        self.floor = Some(at);
        at
    }

    /// A pause ended at `now`: nothing due during it became visible before `now`.
    pub fn resumed(&mut self, now: Instant) {
        self.floor = Some(self.floor.map_or(now, |floor| floor.max(now)));
    }

    /// Records `change` to `table` as visible at `at` (from `stamp`).
    pub fn record(&mut self, table: usize, rel: &Relation, change: &Change, at: Instant) {
        if let Some(list) = self.tables.get_mut(table) {
            list.push((key_of(rel, change), at));
        }
    }

    /// Table `table`'s stamps with their keys as JSON arrays (the key columns' values in
    /// key order; a keyless table's whole row).
    pub fn of_table(&self, table: usize, rel: &Relation) -> Vec<(Json, Instant)> {
        let columns: Vec<usize> = match &rel.primary_key {
            Some(key) => key.clone(),
            None => (0..rel.fields.len()).collect(),
        };
        self.tables.get(table).map_or_else(Vec::new, |list| {
            list.iter()
                .map(|(key, at)| {
                    let values = key
                        .iter()
                        .zip(&columns)
                        .map(|(v, &i)| to_ingress_json(v, &rel.fields[i].columntype))
                        .collect();
                    (Json::Array(values), *at)
                })
                .collect()
        })
    }
}

/// The key a change touches: the primary key's values, or a keyless table's whole row.
fn key_of(rel: &Relation, change: &Change) -> Vec<Value> {
    let pick = |row: &[Value]| -> Vec<Value> {
        match &rel.primary_key {
            Some(key) => key
                .iter()
                .map(|&i| row.get(i).cloned().unwrap_or(Value::Null))
                .collect(),
            None => row.to_vec(),
        }
    };
    match change {
        Change::Insert(row) | Change::DeleteRow(row) => pick(row),
        Change::DeleteKey(key) => key.clone(),
        Change::Update(partial) => rel
            .primary_key
            .iter()
            .flatten()
            .map(|&i| partial.get(i).cloned().flatten().unwrap_or(Value::Null))
            .collect(),
    }
}
