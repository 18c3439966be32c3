//! The three questions retraction asks: every key Feldera holds (one scan per table), how
//! many rows Feldera holds, and which keys of a group PostgreSQL still has.
//!
//! Owns the SQL text. Every name and value goes through `literal`; nothing is pasted.
//! Orders are never compared across the two systems: PostgreSQL is asked only "which of
//! these exist", by equality. Never reads answers (see `page`).

use super::literal::{feldera_ident, pg_literal};
use super::plan::{Key, KeyPlan, LeftoverPlan};
use super::value::KeyKind;
use crate::schema::Name;

/// The alias of the count in the count query's answer (never `error`, which would read as
/// Feldera's failure line).
pub const COUNT_ALIAS: &str = "slotline_count";

/// The alias of key column `index` in a scan answer. Aliases keep the answer's keys
/// independent of the columns' spelling (and never `error`, which would read as Feldera's
/// failure line).
pub fn key_alias(index: usize) -> String {
    format!("k{index}")
}

/// `SELECT <key columns> FROM <table>`: every key Feldera holds, in no particular order,
/// in one answer read as a stream. Feldera's ad-hoc engine pushes neither a filter nor a
/// limit into its table scan, so every query costs a scan of the whole table whatever it
/// says: one scan per table, with nothing to sort, is the cheapest way to read the keys
/// (docs/retraction.md). DECIMAL keys are selected as text so the answer carries every
/// digit.
pub fn scan_query(plan: &KeyPlan) -> String {
    let table = feldera_ident(&plan.table);
    let select: Vec<String> = plan
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let column = format!("{table}.{}", feldera_ident(&c.name));
            let alias = format!("\"{}\"", key_alias(i));
            match c.kind {
                KeyKind::Decimal { .. } => format!("CAST({column} AS VARCHAR) AS {alias}"),
                _ => format!("{column} AS {alias}"),
            }
        })
        .collect();
    format!("SELECT {} FROM {table}", select.join(", "))
}

/// `SELECT * FROM <table> LIMIT 0`: asks whether ad-hoc queries of `table` are answered in
/// the format slotline reads, at no cost (the query engine answers a zero limit without
/// scanning; `slotline check` sends it).
pub fn probe_query(table: &Name) -> String {
    format!("SELECT * FROM {} LIMIT 0", feldera_ident(table))
}

/// `SELECT COUNT(*) AS "slotline_count" FROM <table>`.
pub fn count_query(plan: &KeyPlan) -> String {
    format!(
        "SELECT COUNT(*) AS \"{COUNT_ALIAS}\" FROM {}",
        feldera_ident(&plan.table)
    )
}

/// The PostgreSQL query returning, as text, the key columns of every row whose key equals
/// (by PostgreSQL's equality) one of `keys`:
/// `SELECT t.a, t.b FROM s.t AS t WHERE (t.a, t.b) IN (VALUES (x1, y1), ...)`, and only among
/// the rows the publication publishes (`AND <row filter>`: a row it leaves out is not in
/// Feldera's copy either). Keys no
/// PostgreSQL value can equal are left out; `None` when that leaves none, so there is
/// nothing to ask. PostgreSQL's equality may be coarser than Feldera's (`1.10 = 1.1`):
/// the caller compares the answer under Feldera's (see `page::leftovers`).
pub fn existence_query(plan: &LeftoverPlan, keys: &[Key]) -> Option<String> {
    let kinds: Vec<KeyKind> = plan.keys.columns.iter().map(|c| c.kind).collect();
    let rows: Vec<String> = keys
        .iter()
        .filter_map(|key| {
            let literals = plan
                .columns
                .iter()
                .zip(&kinds)
                .zip(&key.0)
                .map(|((pg, kind), value)| pg_literal(pg.pg_type, *kind, value))
                .collect::<Option<Vec<String>>>()?;
            Some(format!("({})", literals.join(", ")))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let columns: Vec<String> = plan
        .columns
        .iter()
        .map(|c| format!("t.{}", c.sql_name))
        .collect();
    let columns = columns.join(", ");
    let published = plan
        .published_rows
        .as_ref()
        .map(|filter| format!(" AND {filter}"))
        .unwrap_or_default();
    Some(format!(
        "SELECT {columns} FROM {} AS t WHERE ({columns}) IN (VALUES {}){published}",
        plan.source_sql,
        rows.join(", ")
    ))
}

#[cfg(test)]
#[path = "sql_tests.rs"]
mod tests;
