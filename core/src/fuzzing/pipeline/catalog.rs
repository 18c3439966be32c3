//! The fake PostgreSQL's catalog: the two published tables, the Relation messages and
//! `pg_attribute` rows that describe them, and simple-query result sets.

use bytes::Bytes;

use super::pg::{ITEMS, USERS};
use crate::catalog::questions;
use crate::pgoutput::Relation;
use crate::wire::backend::{
    BackendMessage, DataRow, FieldDescription, RowDescription, TransactionStatus,
};

/// A column: name, type oid, part of the key.
type Column = (&'static str, u32, bool);

/// The published tables: oid, name, columns.
const TABLES: [(u32, &str, [Column; 2]); 2] = [
    (USERS, "users", [("id", 20, true), ("name", 25, false)]),
    (ITEMS, "items", [("sku", 25, true), ("qty", 23, false)]),
];

/// The Relation message of a table: what the catalog answer describes.
pub(super) fn relation(oid: u32) -> Relation {
    let rows = TABLES
        .iter()
        .find(|(o, ..)| *o == oid)
        .map_or_else(Vec::new, |(_, name, _)| {
            column_rows(&format!("\"{name}\"'::regclass"))
        });
    let borrowed: Vec<Vec<Option<&str>>> = rows
        .iter()
        .map(|row| row.iter().map(Option::as_deref).collect())
        .collect();
    let views: Vec<&[Option<&str>]> = borrowed.iter().map(Vec::as_slice).collect();
    match questions::parse_relation(&views) {
        Ok(relation) => relation,
        Err(e) => panic!("the fake catalog describes table {oid} badly: {e}"),
    }
}

/// A row of text values.
pub(super) fn text_row(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some((*v).to_owned())).collect()
}

/// `pg_attribute` rows of the table the query names (`catalog::questions::relation_query`'s
/// layout; the fake's tables have no partitions).
pub(super) fn column_rows(sql: &str) -> Vec<Vec<Option<String>>> {
    let Some((oid, name, columns)) = TABLES
        .into_iter()
        .find(|(_, name, _)| sql.contains(&format!("\"{name}\"'::regclass")))
    else {
        return Vec::new();
    };
    let oid = oid.to_string();
    columns
        .iter()
        .map(|(column, type_oid, key)| {
            let key = if *key { "t" } else { "f" };
            let mut row = text_row(&[
                &oid,
                "public",
                name,
                "d",
                column,
                &type_oid.to_string(),
                "-1",
                key,
                "0",
            ]);
            // Not partitioned: level 0, no leaf flag, no parent; no row-level security.
            row.extend([None, None, Some("f".to_owned())]);
            row
        })
        .collect()
}

/// A whole simple-query answer outside a transaction: text columns, the rows, the tag,
/// ReadyForQuery.
pub(super) fn result_set(rows: Vec<Vec<Option<String>>>) -> Vec<BackendMessage> {
    result_set_with(rows, TransactionStatus::Idle)
}

/// `result_set`, ending with ReadyForQuery of `status`.
pub(super) fn result_set_with(
    rows: Vec<Vec<Option<String>>>,
    status: TransactionStatus,
) -> Vec<BackendMessage> {
    let width = rows.first().map_or(0, Vec::len);
    let field = |i: usize| FieldDescription {
        name: format!("column{i}"),
        table_oid: 0,
        column_id: 0,
        type_oid: 25,
        type_size: -1,
        type_modifier: -1,
        format: 0,
    };
    let tag = format!("SELECT {}", rows.len());
    std::iter::once(BackendMessage::RowDescription(RowDescription {
        fields: (0..width).map(field).collect(),
    }))
    .chain(rows.into_iter().map(|row| {
        BackendMessage::DataRow(DataRow {
            columns: row.into_iter().map(|v| v.map(Bytes::from)).collect(),
        })
    }))
    .chain([
        BackendMessage::CommandComplete { tag },
        BackendMessage::ReadyForQuery(status),
    ])
    .collect()
}
