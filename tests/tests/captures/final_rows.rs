//! The rows each table holds after a stream (or a COPY) is applied the way Feldera applies
//! `insert`, partial `update` and `delete` to a keyed table: what the COPY equivalence test
//! compares.

use std::collections::BTreeMap;

use slotline_core::contract::ColumnMapping;
use slotline_core::pgoutput::{self, Message};
use slotline_core::wire::Frame;

use super::decode::{item, Item, JsonDecoder};

/// One row as field JSON in schema order: `(json key, value)`, `None` for a `u` hole.
pub type Row = Vec<(String, Option<String>)>;

/// Table → key → row.
pub struct FinalRows {
    /// Latest mapping and relation width per table name.
    mappings: BTreeMap<String, (ColumnMapping, usize)>,
    tables: BTreeMap<String, BTreeMap<String, Row>>,
}

impl FinalRows {
    pub fn from_stream(frames: &[Frame]) -> FinalRows {
        let mut decoder = JsonDecoder::new();
        let mut rows = FinalRows {
            mappings: BTreeMap::new(),
            tables: BTreeMap::new(),
        };
        for frame in frames {
            let Item::XLog { data, .. } = item(frame) else {
                continue;
            };
            let message = pgoutput::parse(&data).expect("a pgoutput message");
            decoder.line(&message);
            rows.apply(&decoder, &message);
        }
        rows
    }

    /// The same mappings, no rows.
    pub fn empty_like(&self) -> FinalRows {
        FinalRows {
            mappings: self.mappings.clone(),
            tables: BTreeMap::new(),
        }
    }

    pub fn mapping_named(&self, table: &str) -> &ColumnMapping {
        &self.mappings[table].0
    }

    pub fn relation_width(&self, table: &str) -> usize {
        self.mappings[table].1
    }

    pub fn table(&self, table: &str) -> &BTreeMap<String, Row> {
        static EMPTY: BTreeMap<String, Row> = BTreeMap::new();
        self.tables.get(table).unwrap_or(&EMPTY)
    }

    /// Inserts or overwrites a row under its key.
    pub fn put(&mut self, table: &str, row: Row) {
        let key = self.key(table, &row);
        self.tables
            .entry(table.to_owned())
            .or_default()
            .insert(key, row);
    }

    fn key(&self, table: &str, row: &Row) -> String {
        let mapping = self.mapping_named(table);
        let key = mapping.key.as_ref().expect("fixture tables have keys");
        key.iter()
            .map(|k| {
                let name = &mapping.fields[k.field].json_key;
                row.iter()
                    .find(|(field, _)| field == name)
                    .and_then(|(_, value)| value.clone())
                    .expect("key fields are always sent")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn apply(&mut self, decoder: &JsonDecoder, message: &Message<'_>) {
        match message {
            Message::Relation(relation) => {
                let name = decoder.mapping(relation.oid).table.name.clone();
                let mapping = decoder.mapping(relation.oid).clone();
                self.mappings
                    .insert(name, (mapping, relation.columns.len()));
            }
            Message::Insert(insert) => {
                let (table, row) = decoder.row_fields(insert.relation_oid, &insert.new);
                self.put(&table, row);
            }
            Message::Update(update) => {
                let (table, new) =
                    decoder.row_fields(update.relation_oid, &update.new_filled_from_old());
                let old_key = match &update.old {
                    Some(old) => self.key(
                        &table,
                        &decoder.row_fields(update.relation_oid, &old.tuple).1,
                    ),
                    None => self.key(&table, &new),
                };
                let previous = self
                    .tables
                    .get_mut(&table)
                    .and_then(|rows| rows.remove(&old_key))
                    .unwrap_or_default();
                // A `u` hole keeps what the table held (Feldera's partial update).
                let merged = new
                    .into_iter()
                    .map(|(field, value)| {
                        let kept = || {
                            previous
                                .iter()
                                .find(|(f, _)| *f == field)
                                .and_then(|(_, v)| v.clone())
                        };
                        let value = value.or_else(kept);
                        (field, value)
                    })
                    .collect();
                self.put(&table, merged);
            }
            Message::Delete(delete) => {
                let (table, old) = decoder.row_fields(delete.relation_oid, &delete.old.tuple);
                let key = self.key(&table, &old);
                if let Some(rows) = self.tables.get_mut(&table) {
                    rows.remove(&key);
                }
            }
            Message::Truncate(truncate) => {
                for oid in &truncate.relation_oids {
                    let table = decoder.mapping(*oid).table.name.clone();
                    self.tables.remove(&table);
                }
            }
            _ => {}
        }
    }
}
