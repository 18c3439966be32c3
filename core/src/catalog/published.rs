//! What the publication publishes of each routed table: which of its columns (the column
//! list, and on PostgreSQL 18 the stored generated columns) and which of its rows (the row
//! filter). The copy reads exactly that, so the copy and the stream agree
//! (docs/snapshot.md, "What the publication publishes").
//!
//! Decided from the published tables' answer ([`PublishedTable`]) and the routed table's
//! shape; never asks anything.

use super::questions::{quote_ident, quote_literal, PublishedTable, QualifiedName};
use crate::contract::partitions::Partition;
use crate::pgoutput::Relation;
use std::collections::BTreeSet;

/// What the publication publishes of one route's table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// The columns, by name; `None` for every column.
    pub columns: Option<BTreeSet<String>>,
    pub rows: RowFilter,
}

/// The rows a route's publication publishes, as SQL over the route's table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowFilter {
    /// The filter of the routed table itself (with `publish_via_partition_root = true`, the
    /// partitioned table's, which PostgreSQL applies to every partition's rows).
    pub table: Option<String>,
    /// With `publish_via_partition_root = false`: the leaf partitions published with a
    /// filter of their own, by name, in name order.
    pub leaves: Vec<(QualifiedName, String)>,
}

impl RowFilter {
    /// Whether every row is published.
    pub fn is_empty(&self) -> bool {
        self.table.is_none() && self.leaves.is_empty()
    }

    /// The filter of the rows read from `heap` (the route's own table or one of its leaf
    /// partitions), as PostgreSQL applies it.
    pub fn for_heap(&self, heap: &QualifiedName) -> Option<&str> {
        self.leaves
            .iter()
            .find(|(leaf, _)| leaf == heap)
            .map(|(_, filter)| filter.as_str())
            .or(self.table.as_deref())
    }

    /// A condition over the route's table, named without an alias's columns (the filters
    /// name columns unqualified), true of exactly the published rows: `None` when all of
    /// them are. A leaf's filter is tied to its rows by `tableoid`.
    pub fn predicate(&self) -> Option<String> {
        if self.leaves.is_empty() {
            return self.table.as_ref().map(|table| format!("({table})"));
        }
        let mut leaves = Vec::with_capacity(self.leaves.len());
        let mut arms = Vec::with_capacity(self.leaves.len() + 1);
        for (leaf, filter) in &self.leaves {
            let name = format!(
                "{}.{}",
                quote_ident(&leaf.schema)?,
                quote_ident(&leaf.table)?
            );
            let regclass = format!("{}::regclass", quote_literal(&name)?);
            arms.push(format!("(tableoid = {regclass} AND ({filter}))"));
            leaves.push(regclass);
        }
        arms.insert(0, format!("tableoid <> ALL (ARRAY[{}])", leaves.join(", ")));
        let leaves = format!("({})", arms.join(" OR "));
        Some(match &self.table {
            Some(table) => format!("(({table}) AND {leaves})"),
            None => leaves,
        })
    }

    /// The filters, as a line says them: `(id > 3)` or `public.t_eu: (id > 3); ...`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.table.iter().cloned().collect();
        parts.extend(
            self.leaves
                .iter()
                .map(|(leaf, filter)| format!("{leaf}: {filter}")),
        );
        parts.join("; ")
    }
}

/// What the publication publishes of routed table `table` (whose partitions are
/// `partitions`), from the published tables. Refused: leaf partitions published with
/// different column lists (the copy reads one shape per route).
pub fn published(
    table: &QualifiedName,
    published: &[PublishedTable],
    partitions: &[Partition],
) -> Result<Published, String> {
    if let Some(own) = published.iter().find(|t| &t.name == table) {
        return Ok(Published {
            columns: own.columns.as_ref().map(|c| c.iter().cloned().collect()),
            rows: RowFilter {
                table: own.row_filter.clone(),
                leaves: Vec::new(),
            },
        });
    }
    // Published through its leaves (publish_via_partition_root = false).
    let leaves: Vec<&PublishedTable> = published
        .iter()
        .filter(|t| t.ancestors.contains(table))
        .filter(|t| {
            partitions
                .iter()
                .any(|p| p.relation.namespace == t.name.schema && p.relation.name == t.name.table)
        })
        .collect();
    let mut columns: Option<(BTreeSet<String>, &PublishedTable)> = None;
    let mut every_column: Option<&PublishedTable> = None;
    for leaf in &leaves {
        match (&leaf.columns, &columns) {
            (None, _) => every_column = every_column.or(Some(leaf)),
            (Some(list), None) => columns = Some((list.iter().cloned().collect(), leaf)),
            (Some(list), Some((first, first_leaf))) => {
                let set: BTreeSet<String> = list.iter().cloned().collect();
                if &set != first {
                    return Err(different_lists(table, first_leaf, leaf));
                }
            }
        }
    }
    if let (Some((_, listed)), Some(all)) = (&columns, every_column) {
        return Err(different_lists(table, listed, all));
    }
    let mut filtered: Vec<(QualifiedName, String)> = leaves
        .iter()
        .filter_map(|t| t.row_filter.clone().map(|f| (t.name.clone(), f)))
        .collect();
    filtered.sort();
    Ok(Published {
        columns: columns.map(|(set, _)| set),
        rows: RowFilter {
            table: None,
            leaves: filtered,
        },
    })
}

fn different_lists(table: &QualifiedName, a: &PublishedTable, b: &PublishedTable) -> String {
    let list = |t: &PublishedTable| match &t.columns {
        Some(columns) => columns.join(", "),
        None => "every column".to_owned(),
    };
    format!(
        "the partitions of {table} are published with different columns ({}: {}; {}: {}); the copy \
         reads one set of columns per routed table: give them the same column list, or publish \
         {table} itself with publish_via_partition_root = true",
        a.name,
        list(a),
        b.name,
        list(b)
    )
}

/// What a state file records of what the publication publishes of a routed table, to see
/// at a later start whether it changed: its row filter and the columns of the table it
/// leaves out (`left_out`, as [`narrow`] found them), as one line. A column added to or
/// dropped from the table changes it only when the publication has a column list.
pub fn fingerprint(published: &Published, left_out: &[String]) -> String {
    let rows = match published.rows.is_empty() {
        true => "every row".to_owned(),
        false => format!("rows where {}", published.rows.describe()),
    };
    let mut left_out = left_out.to_vec();
    left_out.sort();
    let columns = match left_out.is_empty() {
        true => "every column".to_owned(),
        false => format!("columns but {}", left_out.join(", ")),
    };
    format!("{rows}; {columns}")
}

/// `relation` with only the columns `published` names (all of them for `None`), in its
/// order, and the names of the ones left out.
pub fn narrow(relation: &mut Relation, published: &Published) -> Vec<String> {
    let Some(columns) = &published.columns else {
        return Vec::new();
    };
    let mut left_out = Vec::new();
    relation.columns.retain(|c| {
        let keep = columns.contains(&c.name);
        if !keep {
            left_out.push(c.name.clone());
        }
        keep
    });
    left_out
}

#[cfg(test)]
#[path = "published_tests.rs"]
mod tests;
