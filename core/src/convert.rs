//! What a row change means for Feldera: pgoutput Insert/Update/Delete → NDJSON events in
//! `insert_delete` format, written straight into a route's request body.
//!
//! The rules (docs/postgres.md, "pgoutput messages and their traps"; docs/contract.md,
//! "At-least-once"):
//! - insert → `insert` of the new row;
//! - update that kept the key → `insert` of the new row (an upsert on a keyed table);
//! - update that changed the key → `delete` of the old key, then `insert` of the new row.
//!   "Changed" is decided from what the message carried (a `K` image is sent only when the
//!   key changed; with an `O` image, REPLICA IDENTITY FULL, the Feldera key columns of the two
//!   images are compared), never by guessing from a missing old row;
//! - delete → `delete` naming Feldera's key (the whole row for a table without a key);
//! - an unchanged TOASTed value (`u`) is a hole, not a value: filled from the old row under
//!   FULL; otherwise, when the key did not change, sent as a partial `update` that omits
//!   the column (Feldera leaves omitted columns as they are); otherwise refused;
//! - a retraction that does not carry Feldera's key is refused: Feldera would silently
//!   match nothing and keep the row.
//!
//! Refusals are fatal data errors (exit 1), naming the table and column: no event is ever
//! dropped silently. This module never decides when anything is sent.

use crate::contract::mapping::{ColumnMapping, FieldMapping};
use crate::copy::CopyRow;
use crate::pgoutput::{Datum, Delete, Insert, OldKind, Tuple, Update};
use std::fmt;

/// A change that cannot be sent honestly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertError {
    /// `public.users -> users`
    pub route: String,
    pub problem: String,
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.route, self.problem)
    }
}

impl std::error::Error for ConvertError {}

/// Which event a line carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Insert,
    Delete,
    Update,
}

impl Event {
    fn prefix(self) -> &'static [u8] {
        match self {
            Event::Insert => b"{\"insert\":{",
            Event::Delete => b"{\"delete\":{",
            Event::Update => b"{\"update\":{",
        }
    }
}

/// Writes the events for a change into `out` and returns how many lines it wrote. On error
/// `out` may hold a partial line: the caller rolls it back.
#[derive(Debug)]
pub struct Converter<'m> {
    mapping: &'m ColumnMapping,
}

impl<'m> Converter<'m> {
    pub fn new(mapping: &'m ColumnMapping) -> Self {
        Converter { mapping }
    }

    fn error(&self, problem: impl Into<String>) -> ConvertError {
        ConvertError {
            route: format!("{} -> {}", self.mapping.source, self.mapping.table),
            problem: problem.into(),
        }
    }

    /// A row of the initial snapshot (`COPY` text fields in relation order): an `insert`.
    /// Fields are read from the row in place, never collected into a tuple.
    pub fn snapshot_row(&self, row: &CopyRow, out: &mut Vec<u8>) -> Result<u64, ConvertError> {
        let datum = |column| match row.field(column) {
            Some(Some(text)) => Datum::Text(text),
            _ => Datum::Null,
        };
        self.write_row_of(Event::Insert, datum, out)?;
        Ok(1)
    }

    pub fn insert(&self, insert: &Insert<'_>, out: &mut Vec<u8>) -> Result<u64, ConvertError> {
        self.refuse_holes(&insert.new, "an INSERT")?;
        self.write_row(Event::Insert, &insert.new, out)?;
        Ok(1)
    }

    pub fn update(&self, update: &Update<'_>, out: &mut Vec<u8>) -> Result<u64, ConvertError> {
        let new = update.new_filled_from_old();
        let old = update.old.as_ref();
        let key_changed = match update.key_changed_per_message() {
            Some(changed) => changed,
            None => old.is_some_and(|old| self.key_differs(&old.tuple, &new)),
        };
        if self.mapping.key.is_none() {
            // A multiset: an update is "remove that row, add this one", which needs the
            // whole old row.
            let old = old.filter(|o| o.kind == OldKind::Row).ok_or_else(|| {
                self.error("an UPDATE on a Feldera table without a primary key needs the whole old row, but REPLICA IDENTITY is not FULL")
            })?;
            self.refuse_holes(&new, "an UPDATE")?;
            self.write_row(Event::Delete, &old.tuple, out)?;
            self.write_row(Event::Insert, &new, out)?;
            return Ok(2);
        }
        if key_changed {
            let old =
                old.ok_or_else(|| self.error("the key changed but the UPDATE carried no old key"))?;
            self.write_key(&old.tuple, out, "an UPDATE that changed the key")?;
            self.refuse_holes(&new, "an UPDATE that changed the key")?;
            self.write_row(Event::Insert, &new, out)?;
            return Ok(2);
        }
        if new.has_unchanged() {
            self.write_partial_update(&new, out)?;
        } else {
            self.write_row(Event::Insert, &new, out)?;
        }
        Ok(1)
    }

    pub fn delete(&self, delete: &Delete<'_>, out: &mut Vec<u8>) -> Result<u64, ConvertError> {
        if self.mapping.key.is_none() {
            if delete.old.kind != OldKind::Row {
                return Err(self.error(
                    "a DELETE on a Feldera table without a primary key needs the whole old row, but REPLICA IDENTITY is not FULL",
                ));
            }
            self.refuse_holes(&delete.old.tuple, "a DELETE")?;
            self.write_row(Event::Delete, &delete.old.tuple, out)?;
        } else {
            self.write_key(&delete.old.tuple, out, "a DELETE")?;
        }
        Ok(1)
    }

    fn key_differs<'a>(&self, old: &Tuple<'a>, new: &Tuple<'a>) -> bool {
        match &self.mapping.key {
            Some(key) => key.iter().any(|k| old.get(k.column) != new.get(k.column)),
            // Without a key every column identifies the row.
            None => old.columns != new.columns,
        }
    }

    fn refuse_holes(&self, tuple: &Tuple<'_>, what: &str) -> Result<(), ConvertError> {
        for field in &self.mapping.fields {
            if let Some(source) = &field.source {
                if tuple.get(source.column).is_some_and(Datum::is_unchanged) {
                    return Err(self.error(format!(
                        "{what} left column {} as an unchanged TOASTed value and there is no old value to fill it \
                         (REPLICA IDENTITY FULL sends one); refusing to invent a value",
                        field.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// `{"delete":{<key fields>}}` from an old image, which must carry every key column.
    fn write_key(
        &self,
        old: &Tuple<'_>,
        out: &mut Vec<u8>,
        what: &str,
    ) -> Result<(), ConvertError> {
        let key = self.mapping.key.as_deref().unwrap_or_default();
        out.extend_from_slice(Event::Delete.prefix());
        for (i, k) in key.iter().enumerate() {
            let field = &self.mapping.fields[k.field];
            let datum = old.get(k.column).copied().unwrap_or(Datum::Null);
            if !matches!(datum, Datum::Text(_)) {
                return Err(self.error(format!(
                    "{what} does not carry Feldera key column {} (its old image has {}); Feldera would keep the row. \
                     Make the replica identity include it (e.g. REPLICA IDENTITY FULL)",
                    field.name,
                    describe(datum)
                )));
            }
            if i > 0 {
                out.push(b',');
            }
            self.write_field(field, datum, out)?;
        }
        out.extend_from_slice(b"}}\n");
        Ok(())
    }

    /// A whole row: every mapped field, in schema order.
    fn write_row(
        &self,
        event: Event,
        tuple: &Tuple<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        let datum = |column| tuple.get(column).copied().unwrap_or(Datum::Null);
        self.write_row_of(event, datum, out)
    }

    /// `write_row` over any source of column values (`datum(column)`; absent is NULL).
    fn write_row_of<'d>(
        &self,
        event: Event,
        datum: impl Fn(usize) -> Datum<'d>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        out.extend_from_slice(event.prefix());
        let mut first = true;
        for field in &self.mapping.fields {
            let Some(source) = &field.source else {
                continue;
            };
            let datum = datum(source.column);
            if !first {
                out.push(b',');
            }
            first = false;
            self.write_field(field, datum, out)?;
        }
        out.extend_from_slice(b"}}\n");
        Ok(())
    }

    /// `{"update":{...}}` with every field except the holes; the key fields must be there.
    fn write_partial_update(&self, new: &Tuple<'_>, out: &mut Vec<u8>) -> Result<(), ConvertError> {
        out.extend_from_slice(Event::Update.prefix());
        let key = self.mapping.key.as_deref().unwrap_or_default();
        let mut first = true;
        for (index, field) in self.mapping.fields.iter().enumerate() {
            let Some(source) = &field.source else {
                continue;
            };
            let datum = new.get(source.column).copied().unwrap_or(Datum::Null);
            if datum.is_unchanged() {
                if key.iter().any(|k| k.field == index) {
                    return Err(self.error(format!(
                        "an UPDATE left key column {} as an unchanged TOASTed value; cannot address the row",
                        field.name
                    )));
                }
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            self.write_field(field, datum, out)?;
        }
        out.extend_from_slice(b"}}\n");
        Ok(())
    }

    fn write_field(
        &self,
        field: &FieldMapping,
        datum: Datum<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        let Some(source) = &field.source else {
            return Ok(());
        };
        out.extend_from_slice(field.json_key.as_bytes());
        out.push(b':');
        let result = match datum {
            Datum::Null => source.plan.write_null(out),
            Datum::Text(text) => source.plan.write_json(text, out),
            Datum::Binary(_) => {
                return Err(self.error(format!(
                    "column {} arrived in binary format, which slotline never asks for (pgoutput binary 'false')",
                    field.name
                )))
            }
            Datum::Unchanged => {
                return Err(self.error(format!("column {} is an unchanged TOASTed value here", field.name)))
            }
        };
        result.map_err(|e| {
            self.error(
                e.in_column(self.mapping.source.to_string(), field.name.to_string())
                    .to_string(),
            )
        })
    }
}

fn describe(datum: Datum<'_>) -> &'static str {
    match datum {
        Datum::Null => "NULL",
        Datum::Unchanged => "an unchanged TOAST marker",
        Datum::Text(_) => "a value",
        Datum::Binary(_) => "a binary value",
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
