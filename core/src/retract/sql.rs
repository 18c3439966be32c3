//! The three questions retraction asks: a page of the keys Feldera holds (keyset
//! pagination in Feldera's own order), how many rows Feldera holds, and which keys of a
//! page PostgreSQL still has.
//!
//! Owns the SQL text. Every name and value goes through `literal`; nothing is pasted.
//! Feldera's ad-hoc engine gets no row-value comparison (`(a, b) > (x, y)`): the keyset
//! condition is spelled out as `a > x OR (a = x AND b > y)`. Orders are never compared
//! across the two systems: PostgreSQL is asked only "which of these exist", by equality.
//! Never reads answers (see `page`).

use super::literal::{feldera_ident, feldera_literal, pg_literal};
use super::plan::{Key, KeyPlan, LeftoverPlan};
use super::value::KeyKind;

/// The alias of the count in the count query's answer (never `error`, which would read as
/// Feldera's failure line).
pub const COUNT_ALIAS: &str = "slotline_count";

/// The alias of key column `index` in a page answer. Aliases keep the answer's keys
/// independent of the columns' spelling, and the table-qualified `ORDER BY` can never bind
/// to them.
pub fn key_alias(index: usize) -> String {
    format!("k{index}")
}

/// One keyset page query: the keys after `after` (all keys when `None`), in key order, at
/// most `limit` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageQuery {
    pub sql: String,
    pub after: Option<Key>,
    /// At least 1.
    pub limit: u32,
}

/// `SELECT <key columns> FROM <table> [WHERE <after>] ORDER BY <key columns> LIMIT <n>`.
/// DECIMAL keys are selected as text so the answer carries every digit; `limit` 0 is
/// read as 1.
pub fn page_query(plan: &KeyPlan, after: Option<Key>, limit: u32) -> PageQuery {
    let limit = limit.max(1);
    let table = feldera_ident(&plan.table);
    let column = |i: usize| {
        let name = plan.columns.get(i).map(|c| feldera_ident(&c.name));
        format!("{table}.{}", name.unwrap_or_default())
    };
    let select: Vec<String> = plan
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let alias = format!("\"{}\"", key_alias(i));
            match c.kind {
                KeyKind::Decimal { .. } => format!("CAST({} AS VARCHAR) AS {alias}", column(i)),
                _ => format!("{} AS {alias}", column(i)),
            }
        })
        .collect();
    let order: Vec<String> = (0..plan.columns.len()).map(column).collect();
    let mut sql = format!("SELECT {} FROM {table}", select.join(", "));
    if let Some(after) = &after {
        sql.push_str(" WHERE ");
        sql.push_str(&after_condition(plan, after, &column));
    }
    sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", order.join(", ")));
    PageQuery { sql, after, limit }
}

/// `(a > x) OR (a = x AND b > y) OR ...`: strictly after `after` in key order.
fn after_condition(plan: &KeyPlan, after: &Key, column: &dyn Fn(usize) -> String) -> String {
    debug_assert_eq!(after.0.len(), plan.columns.len(), "a value per key column");
    let literal = |i: usize| match (plan.columns.get(i), after.0.get(i)) {
        (Some(c), Some(v)) => feldera_literal(c.kind, v),
        _ => String::from("NULL"),
    };
    let branches: Vec<String> = (0..plan.columns.len())
        .map(|last| {
            let mut terms: Vec<String> = (0..last)
                .map(|i| format!("{} = {}", column(i), literal(i)))
                .collect();
            terms.push(format!("{} > {}", column(last), literal(last)));
            format!("({})", terms.join(" AND "))
        })
        .collect();
    branches.join(" OR ")
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
/// `SELECT t.a, t.b FROM s.t AS t WHERE (t.a, t.b) IN (VALUES (x1, y1), ...)`. Keys no
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
    Some(format!(
        "SELECT {columns} FROM {} AS t WHERE ({columns}) IN (VALUES {})",
        plan.source_sql,
        rows.join(", ")
    ))
}

#[cfg(test)]
#[path = "sql_tests.rs"]
mod tests;
