//! The SQL a snapshot worker sends: importing the exported snapshot, measuring the routed
//! tables under it, and copying one range of one table.
//!
//! Every name and literal is quoted here (the simple query protocol has no parameters).
//! Owns the statements and the parsing of the size answer; never decides what to copy.

use super::ranges::{BlockRange, TableSize};
use crate::pgoutput::Relation;
use crate::startup::catalog::{quote_ident, quote_literal, Row};

/// Starts the worker's transaction inside the exported snapshot (`name`), or, without one
/// (`SNAPSHOT_MODE=inconsistent`), in a snapshot of its own. `READ ONLY` because a copy
/// never writes; `REPEATABLE READ` because `SET TRANSACTION SNAPSHOT` requires it.
pub fn import_snapshot(name: Option<&str>) -> Option<String> {
    let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    match name {
        Some(name) => Some(format!(
            "{begin}; SET TRANSACTION SNAPSHOT {}",
            quote_literal(name)?
        )),
        None => Some(begin.to_owned()),
    }
}

/// `schema.table` with both parts quoted.
pub fn qualified(relation: &Relation) -> Option<String> {
    Some(format!(
        "{}.{}",
        quote_ident(&relation.namespace)?,
        quote_ident(&relation.name)?
    ))
}

/// Heap blocks and estimated rows of each routed table, under the worker's snapshot.
/// `relations[i]` is route `i`'s table.
pub fn sizes_query(relations: &[&Relation]) -> Option<String> {
    let mut values = Vec::with_capacity(relations.len());
    for (route, relation) in relations.iter().enumerate() {
        values.push(format!(
            "({route}, {})",
            quote_literal(&qualified(relation)?)?
        ));
    }
    Some(format!(
        "SELECT v.route, pg_catalog.pg_relation_size(c.oid) / pg_catalog.current_setting('block_size')::bigint, \
         c.reltuples::bigint FROM (VALUES {}) AS v(route, name) \
         JOIN pg_catalog.pg_class c ON c.oid = v.name::regclass ORDER BY v.route",
        values.join(", ")
    ))
}

/// Reads the answer of [`sizes_query`]: one row per route, in route order.
pub fn parse_sizes(rows: &[Row<'_>], routes: usize) -> Result<Vec<TableSize>, String> {
    if rows.len() != routes {
        return Err(format!(
            "the table size query answered {} rows for {routes} tables",
            rows.len()
        ));
    }
    rows.iter()
        .enumerate()
        .map(|(route, row)| {
            let number = |i: usize| -> Result<i64, String> {
                let text = row
                    .get(i)
                    .copied()
                    .flatten()
                    .ok_or_else(|| format!("the table size query left column {i} empty"))?;
                text.parse()
                    .map_err(|_| format!("the table size query answered {text:?}, not a number"))
            };
            if number(0)? != route as i64 {
                return Err("the table size query answered out of order".into());
            }
            let blocks = u64::try_from(number(1)?).unwrap_or(0);
            let estimated_rows = u64::try_from(number(2)?).ok();
            Ok(TableSize {
                route,
                blocks,
                estimated_rows,
            })
        })
        .collect()
}

/// `COPY (SELECT <every column, in order> FROM t [WHERE <range>]) TO STDOUT`: text format,
/// one row per CopyData, values rendered exactly as pgoutput renders them (same output
/// functions, same pinned session settings).
pub fn copy_range(relation: &Relation, range: BlockRange) -> Option<String> {
    let mut columns = Vec::with_capacity(relation.columns.len());
    for column in &relation.columns {
        columns.push(quote_ident(&column.name)?);
    }
    let select = if columns.is_empty() {
        "SELECT".to_owned()
    } else {
        format!("SELECT {}", columns.join(", "))
    };
    let mut sql = format!("COPY ({select} FROM {}", qualified(relation)?);
    if !range.is_whole() {
        sql.push_str(&format!(" WHERE ctid >= '({},0)'::tid", range.start));
        if let Some(end) = range.end {
            sql.push_str(&format!(" AND ctid < '({end},0)'::tid"));
        }
    }
    sql.push_str(") TO STDOUT");
    Some(sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::{RelationColumn, ReplicaIdentity};

    fn relation(namespace: &str, name: &str, columns: &[&str]) -> Relation {
        Relation {
            oid: 1,
            namespace: namespace.into(),
            name: name.into(),
            replica_identity: ReplicaIdentity::Default,
            columns: columns
                .iter()
                .map(|c| RelationColumn {
                    in_replica_identity: false,
                    name: (*c).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        }
    }

    #[test]
    fn import_joins_the_exported_snapshot_read_only() {
        assert_eq!(
            import_snapshot(Some("00000003-0000001B-1")).as_deref(),
            Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '00000003-0000001B-1'")
        );
        assert_eq!(
            import_snapshot(None).as_deref(),
            Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        );
        assert_eq!(import_snapshot(Some("x'; DROP")).as_deref(), Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT 'x''; DROP'"));
    }

    #[test]
    fn copy_statements_quote_names_and_bound_ranges() {
        let r = relation("public", "Odd \"name\"", &["id", "Mixed Case"]);
        assert_eq!(
            copy_range(&r, BlockRange::WHOLE).as_deref(),
            Some(r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""") TO STDOUT"#)
        );
        assert_eq!(
            copy_range(
                &r,
                BlockRange {
                    start: 1024,
                    end: Some(2048)
                }
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""" WHERE ctid >= '(1024,0)'::tid AND ctid < '(2048,0)'::tid) TO STDOUT"#
            )
        );
        assert_eq!(
            copy_range(
                &r,
                BlockRange {
                    start: 2048,
                    end: None
                }
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""" WHERE ctid >= '(2048,0)'::tid) TO STDOUT"#
            )
        );
        assert_eq!(
            copy_range(&relation("s", "t\0", &[]), BlockRange::WHOLE),
            None
        );
    }

    #[test]
    fn sizes_are_read_in_route_order_and_unanalyzed_tables_have_no_estimate() {
        let users = relation("public", "users", &["id"]);
        let items = relation("shop", "items", &["sku"]);
        let sql = sizes_query(&[&users, &items]).unwrap();
        assert!(
            sql.contains(r#"(0, '"public"."users"'), (1, '"shop"."items"')"#),
            "{sql}"
        );
        let rows: Vec<Vec<Option<&str>>> = vec![
            vec![Some("0"), Some("12"), Some("1500")],
            vec![Some("1"), Some("0"), Some("-1")],
        ];
        let views: Vec<Row<'_>> = rows.iter().map(Vec::as_slice).collect();
        let sizes = parse_sizes(&views, 2).unwrap();
        assert_eq!((sizes[0].blocks, sizes[0].estimated_rows), (12, Some(1500)));
        assert_eq!((sizes[1].blocks, sizes[1].estimated_rows), (0, None));
        assert!(parse_sizes(&views[..1], 2).is_err());
        let swapped = [views[1], views[0]];
        assert!(parse_sizes(&swapped, 2).is_err());
    }
}
