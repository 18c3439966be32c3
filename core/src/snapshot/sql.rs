//! The SQL a snapshot worker sends: importing the exported snapshot, measuring the routed
//! tables under it, and copying one range of one table.
//!
//! Every name and literal is quoted here (the simple query protocol has no parameters).
//! Owns the statements and the parsing of the size answer; never decides what to copy.

use super::ranges::BlockRange;
use crate::catalog::questions::{quote_ident, quote_literal, QualifiedName, Row};
use crate::pgoutput::Relation;

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

/// The heaps of every routed table, measured under the worker's snapshot: heap blocks and
/// the planner's row estimate of a table, or, for a partitioned table (which has no heap of
/// its own), of each of its leaf partitions at any depth. `relations[i]` is route `i`'s
/// table. The partitions are listed here, in the snapshot's transaction, rather than taken
/// from the startup catalog: one attached between the two is copied like a scan of the
/// partitioned table would copy it (docs/snapshot.md, "Partitioned tables").
pub fn sizes_query(relations: &[&Relation]) -> Option<String> {
    let mut values = Vec::with_capacity(relations.len());
    for (route, relation) in relations.iter().enumerate() {
        values.push(format!(
            "({route}, {})",
            quote_literal(&qualified(relation)?)?
        ));
    }
    Some(format!(
        "SELECT v.route, n.nspname, c.relname, \
         pg_catalog.pg_relation_size(c.oid) / pg_catalog.current_setting('block_size')::bigint, \
         c.reltuples::bigint FROM (VALUES {}) AS v(route, name) \
         CROSS JOIN LATERAL (SELECT t.relid FROM pg_catalog.pg_partition_tree(v.name::regclass) t \
           WHERE t.isleaf AND t.level > 0 \
           UNION ALL SELECT v.name::regclass WHERE NOT EXISTS \
           (SELECT FROM pg_catalog.pg_partition_tree(v.name::regclass) t WHERE t.level > 0)) AS h(relid) \
         JOIN pg_catalog.pg_class c ON c.oid = h.relid \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         ORDER BY v.route, n.nspname, c.relname",
        values.join(", ")
    ))
}

/// One heap a route's rows live in: its table's, or one leaf partition's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heap {
    pub route: usize,
    pub table: QualifiedName,
    /// Heap blocks (`pg_relation_size / block_size`).
    pub blocks: u64,
    /// `pg_class.reltuples`: an estimate, `None` when never analyzed.
    pub estimated_rows: Option<u64>,
}

/// Reads the answer of [`sizes_query`]: the heaps in route order (a partitioned table
/// without leaves has none).
pub fn parse_sizes(rows: &[Row<'_>], routes: usize) -> Result<Vec<Heap>, String> {
    let mut heaps: Vec<Heap> = Vec::with_capacity(rows.len());
    for row in rows {
        let text = |i: usize| -> Result<&str, String> {
            row.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| format!("the table size query left column {i} empty"))
        };
        let number = |i: usize| -> Result<i64, String> {
            let text = text(i)?;
            text.parse()
                .map_err(|_| format!("the table size query answered {text:?}, not a number"))
        };
        let route = usize::try_from(number(0)?)
            .ok()
            .filter(|route| *route < routes)
            .ok_or_else(|| format!("the table size query answered a route out of 0..{routes}"))?;
        if heaps.last().is_some_and(|last| last.route > route) {
            return Err("the table size query answered out of order".into());
        }
        heaps.push(Heap {
            route,
            table: QualifiedName {
                schema: text(1)?.to_owned(),
                table: text(2)?.to_owned(),
            },
            blocks: u64::try_from(number(3)?).unwrap_or(0),
            estimated_rows: u64::try_from(number(4)?).ok(),
        });
    }
    Ok(heaps)
}

/// `COPY (SELECT <every column of relation, in its order> FROM heap [WHERE <range>]) TO
/// STDOUT`: text format, one row per CopyData, values rendered exactly as pgoutput renders
/// them (same output functions, same pinned session settings). `heap` is the relation
/// itself or one of its leaf partitions, whose columns have the same names whatever their
/// order: selected by name, they come in the relation's order.
///
/// `filter` is the publication's row filter for the heap's rows (`None`: every row): the copy
/// reads what the stream would publish, as PostgreSQL's own table synchronisation does, and
/// `relation` holds only the published columns (docs/snapshot.md, "What the publication
/// publishes").
pub fn copy_range(
    relation: &Relation,
    heap: &QualifiedName,
    range: BlockRange,
    filter: Option<&str>,
) -> Option<String> {
    let mut columns = Vec::with_capacity(relation.columns.len());
    for column in &relation.columns {
        columns.push(quote_ident(&column.name)?);
    }
    let select = if columns.is_empty() {
        "SELECT".to_owned()
    } else {
        format!("SELECT {}", columns.join(", "))
    };
    let from = format!(
        "{}.{}",
        quote_ident(&heap.schema)?,
        quote_ident(&heap.table)?
    );
    let mut conditions = Vec::new();
    if let Some(filter) = filter {
        conditions.push(format!("({filter})"));
    }
    if !range.is_whole() {
        conditions.push(format!("ctid >= '({},0)'::tid", range.start));
        if let Some(end) = range.end {
            conditions.push(format!("ctid < '({end},0)'::tid"));
        }
    }
    let mut sql = format!("COPY ({select} FROM {from}");
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
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

    fn heap(schema: &str, table: &str) -> QualifiedName {
        QualifiedName {
            schema: schema.into(),
            table: table.into(),
        }
    }

    #[test]
    fn copy_statements_quote_names_and_bound_ranges() {
        let r = relation("public", "Odd \"name\"", &["id", "Mixed Case"]);
        let own = heap("public", "Odd \"name\"");
        assert_eq!(
            copy_range(&r, &own, BlockRange::WHOLE, None).as_deref(),
            Some(r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""") TO STDOUT"#)
        );
        assert_eq!(
            copy_range(
                &r,
                &own,
                BlockRange {
                    start: 1024,
                    end: Some(2048)
                },
                None
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""" WHERE ctid >= '(1024,0)'::tid AND ctid < '(2048,0)'::tid) TO STDOUT"#
            )
        );
        assert_eq!(
            copy_range(
                &r,
                &own,
                BlockRange {
                    start: 2048,
                    end: None
                },
                None
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "id", "Mixed Case" FROM "public"."Odd ""name""" WHERE ctid >= '(2048,0)'::tid) TO STDOUT"#
            )
        );
        assert_eq!(
            copy_range(
                &relation("s", "t\0", &[]),
                &heap("s", "t\0"),
                BlockRange::WHOLE,
                None
            ),
            None
        );
    }

    #[test]
    fn a_partition_is_copied_with_the_partitioned_tables_columns_in_its_order() {
        let metrics = relation("public", "metrics", &["id", "ts", "v"]);
        assert_eq!(
            copy_range(
                &metrics,
                &heap("public", "metrics_2025"),
                BlockRange::WHOLE,
                None
            )
            .as_deref(),
            Some(r#"COPY (SELECT "id", "ts", "v" FROM "public"."metrics_2025") TO STDOUT"#)
        );
    }

    #[test]
    fn the_row_filter_bounds_every_range_of_the_copy() {
        let users = relation("public", "users", &["id", "name"]);
        let own = heap("public", "users");
        let filter = Some("((id % 3) <> 0)");
        assert_eq!(
            copy_range(&users, &own, BlockRange::WHOLE, filter).as_deref(),
            Some(
                r#"COPY (SELECT "id", "name" FROM "public"."users" WHERE (((id % 3) <> 0))) TO STDOUT"#
            )
        );
        assert_eq!(
            copy_range(
                &users,
                &own,
                BlockRange {
                    start: 8,
                    end: Some(16)
                },
                filter
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "id", "name" FROM "public"."users" WHERE (((id % 3) <> 0)) AND ctid >= '(8,0)'::tid AND ctid < '(16,0)'::tid) TO STDOUT"#
            )
        );
    }

    #[test]
    fn sizes_are_read_per_heap_in_route_order_and_unanalyzed_tables_have_no_estimate() {
        let users = relation("public", "users", &["id"]);
        let metrics = relation("shop", "metrics", &["sku"]);
        let sql = sizes_query(&[&users, &metrics]).unwrap();
        assert!(
            sql.contains(r#"(0, '"public"."users"'), (1, '"shop"."metrics"')"#),
            "{sql}"
        );
        assert!(sql.contains("pg_partition_tree"), "{sql}");
        let rows: Vec<Vec<Option<&str>>> = vec![
            vec![
                Some("0"),
                Some("public"),
                Some("users"),
                Some("12"),
                Some("1500"),
            ],
            vec![
                Some("1"),
                Some("shop"),
                Some("metrics_2024"),
                Some("0"),
                Some("-1"),
            ],
            vec![
                Some("1"),
                Some("shop"),
                Some("metrics_2025"),
                Some("7"),
                Some("700"),
            ],
        ];
        let views: Vec<Row<'_>> = rows.iter().map(Vec::as_slice).collect();
        let sizes = parse_sizes(&views, 2).unwrap();
        assert_eq!(
            sizes
                .iter()
                .map(|h| (h.route, h.table.table.as_str(), h.blocks, h.estimated_rows))
                .collect::<Vec<_>>(),
            [
                (0, "users", 12, Some(1500)),
                (1, "metrics_2024", 0, None),
                (1, "metrics_2025", 7, Some(700))
            ]
        );
        let swapped = [views[1], views[0]];
        assert!(parse_sizes(&swapped, 2).is_err(), "out of route order");
        assert!(
            parse_sizes(&views, 1).is_err(),
            "a route that does not exist"
        );
    }
}
