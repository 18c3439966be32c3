//! Whether a table's keys can be retracted, decided once at startup: the answer is a plan
//! the SQL builders and the page reader follow, or a refusal naming the table, the column
//! and the type.
//!
//! Two questions, because they need different things. Propagating TRUNCATE only reads
//! Feldera's keys and sends them back as deletes ([`plan_keys`]). Retracting the leftovers
//! of a re-snapshot also asks PostgreSQL which of those keys still exist
//! ([`plan_leftovers`]), which is sound only when the way into Feldera loses nothing a
//! PostgreSQL equality could see. Never builds SQL and never reads answers.

use super::literal::{pg_ident, pg_type_name};
use super::value::{KeyKind, KeyValue};
use crate::contract::{ColumnMapping, PgTable};
use crate::pgoutput::{Relation, RelationColumn};
use crate::schema::{ColumnType, Name, SqlType, Table};
use crate::value::{oid, ValuePlan};
use std::fmt;

/// A primary key value: one value per key column, in key order. Ordered as the query
/// engine's `ORDER BY` over the key columns orders it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub Vec<KeyValue>);

/// One column of Feldera's primary key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumn {
    pub name: Name,
    /// `name` as a JSON string literal, as the row encoder writes it.
    pub json_key: String,
    pub columntype: ColumnType,
    pub kind: KeyKind,
}

/// How to read a Feldera table's keys and delete them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPlan {
    pub table: Name,
    /// In primary key order.
    pub columns: Vec<KeyColumn>,
}

impl KeyPlan {
    /// Appends `{"delete":{<key fields>}}` and a newline: the line slotline's converter
    /// writes for a DELETE of the same row.
    pub fn write_delete(&self, key: &Key, out: &mut Vec<u8>) {
        debug_assert_eq!(key.0.len(), self.columns.len(), "a key per key column");
        out.extend_from_slice(b"{\"delete\":{");
        for (i, (column, value)) in self.columns.iter().zip(&key.0).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(column.json_key.as_bytes());
            out.push(b':');
            column.kind.write_ingress(value, out);
        }
        out.extend_from_slice(b"}}\n");
    }

    /// The key as `col=value, ...` in ingress JSON, for logs and errors.
    pub fn describe(&self, key: &Key) -> String {
        let parts: Vec<String> = self
            .columns
            .iter()
            .zip(&key.0)
            .map(|(column, value)| {
                let mut json = Vec::new();
                column.kind.write_ingress(value, &mut json);
                format!("{}={}", column.name, String::from_utf8_lossy(&json))
            })
            .collect();
        parts.join(", ")
    }
}

/// One key column as PostgreSQL knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgKeyColumn {
    /// The column name, quoted for SQL.
    pub sql_name: String,
    pub pg_type: u32,
    /// The conversion the stream uses for this column: it turns PostgreSQL's answer into
    /// the form Feldera holds, so both sides are compared under Feldera's equality.
    pub plan: ValuePlan,
}

/// A [`KeyPlan`] that may also ask PostgreSQL which keys exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftoverPlan {
    pub keys: KeyPlan,
    pub source: PgTable,
    /// `"schema"."table"`, quoted for SQL.
    pub source_sql: String,
    /// In primary key order, parallel to `keys.columns`.
    pub columns: Vec<PgKeyColumn>,
    /// The condition the publication's row filter puts on the table's rows
    /// (`catalog::published::RowFilter::predicate`): a row outside it is not published, so a
    /// Feldera row whose key PostgreSQL has only outside it is a leftover too. `None`: every
    /// row is published.
    pub published_rows: Option<String>,
}

/// What retraction is needed for; named in refusals so the remedy is clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// The publication publishes TRUNCATE: Feldera's keys are read and deleted.
    Truncate,
    /// A re-snapshot must delete the keys PostgreSQL no longer has.
    Leftovers,
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Purpose::Truncate => {
                "the publication publishes TRUNCATE, which slotline propagates by reading \
                 the keys Feldera holds (an ad-hoc query) and deleting each"
            }
            Purpose::Leftovers => {
                "a re-snapshot must delete the rows PostgreSQL no longer has, found by \
                 reading the keys Feldera holds and asking PostgreSQL which still exist"
            }
        })
    }
}

/// Retraction is needed and cannot be done exactly: startup refuses (exit 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetractRefusal {
    pub table: Name,
    pub purpose: Purpose,
    /// Each names a column and its type, what is wrong and what is accepted.
    pub problems: Vec<String>,
}

impl fmt::Display for RetractRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot retract rows of Feldera table {}: {}.",
            self.table, self.purpose
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RetractRefusal {}

/// Whether a table's keys can be read and deleted exactly (what TRUNCATE needs).
pub fn plan_keys(table: &Table) -> Result<KeyPlan, RetractRefusal> {
    key_plan(table, Purpose::Truncate)
}

fn key_plan(table: &Table, purpose: Purpose) -> Result<KeyPlan, RetractRefusal> {
    let refuse = |problems| RetractRefusal {
        table: table.name.clone(),
        purpose,
        problems,
    };
    let Some(key) = &table.primary_key else {
        return Err(refuse(vec![
            "the table has no PRIMARY KEY, and retraction deletes rows by key; accepted: a \
             PRIMARY KEY in the Feldera program"
                .to_owned(),
        ]));
    };
    let mut problems = Vec::new();
    if !table.queryable() {
        problems.push(
            "the table cannot be queried ad hoc: Feldera keeps a table with a PRIMARY KEY \
             queryable only when no key column has LATENESS; accepted: WITH ('materialized' \
             = 'true') on the table, or no LATENESS on its key columns"
                .to_owned(),
        );
    }
    let mut columns = Vec::with_capacity(key.len());
    for name in key {
        let Some(field) = table.fields.iter().find(|f| f.name == *name) else {
            problems.push(format!("key column {name} is not a column of the table"));
            continue;
        };
        match KeyKind::of(&field.columntype) {
            Ok(kind) => columns.push(KeyColumn {
                name: field.name.clone(),
                json_key: field.name.json_key(),
                columntype: field.columntype.clone(),
                kind,
            }),
            Err(why) => problems.push(format!(
                "key column {name} ({}): {why}; accepted key types: TINYINT, SMALLINT, \
                 INTEGER, BIGINT, BOOLEAN, CHAR, VARCHAR, UUID, DECIMAL(p, s), BINARY, \
                 VARBINARY, DATE, TIME, TIMESTAMP, TIMESTAMP_TZ",
                field.columntype
            )),
        }
    }
    if problems.is_empty() {
        Ok(KeyPlan {
            table: table.name.clone(),
            columns,
        })
    } else {
        Err(refuse(problems))
    }
}

/// Whether a re-snapshot can retract this table's leftovers exactly: [`plan_keys`], plus
/// for every key column a PostgreSQL type slotline can write a literal for and a path into
/// Feldera that keeps distinct PostgreSQL values distinct.
pub fn plan_leftovers(
    table: &Table,
    mapping: &ColumnMapping,
    relation: &Relation,
) -> Result<LeftoverPlan, RetractRefusal> {
    debug_assert!(
        table.name.same_as(&mapping.table),
        "the mapping is the table's"
    );
    let keys = key_plan(table, Purpose::Leftovers)?;
    let mut problems = Vec::new();
    let mut columns = Vec::with_capacity(keys.columns.len());
    for column in &keys.columns {
        match pg_key_column(column, mapping, relation) {
            Ok(pg) => columns.push(pg),
            Err(why) => problems.push(format!(
                "key column {} ({}): {why}",
                column.name, column.columntype
            )),
        }
    }
    let source = mapping.source.clone();
    let source_sql = match (pg_ident(&source.schema), pg_ident(&source.name)) {
        (Some(schema), Some(name)) => format!("{schema}.{name}"),
        _ => {
            problems.push(format!("PostgreSQL table {source} has NUL in its name"));
            String::new()
        }
    };
    if !problems.is_empty() {
        return Err(RetractRefusal {
            table: table.name.clone(),
            purpose: Purpose::Leftovers,
            problems,
        });
    }
    Ok(LeftoverPlan {
        keys,
        source,
        source_sql,
        columns,
        published_rows: None,
    })
}

fn pg_key_column(
    column: &KeyColumn,
    mapping: &ColumnMapping,
    relation: &Relation,
) -> Result<PgKeyColumn, String> {
    let source = mapping
        .fields
        .iter()
        .find(|f| f.name == column.name)
        .and_then(|f| f.source.as_ref())
        .ok_or("it has no PostgreSQL column in the mapping")?;
    let pg = relation
        .columns
        .get(source.column)
        .ok_or("the mapping points past the relation's columns")?;
    let pg_name = &source.plan.pg_name;
    if pg_type_name(pg.type_oid).is_none() {
        return Err(format!(
            "it comes from PostgreSQL column {} of type {pg_name}, which slotline cannot \
             compare by equality from a literal; accepted: built-in scalar types with \
             equality (not json, arrays or user-defined types)",
            pg.name
        ));
    }
    if loses_trailing_spaces(pg, &column.columntype) {
        return Err(format!(
            "it comes from PostgreSQL column {} of type {pg_name}, whose longer values lose \
             trailing spaces on the way into {}, so two PostgreSQL keys can become one \
             Feldera key; accepted: no length on the Feldera column, or one at least as long \
             as PostgreSQL's",
            pg.name, column.columntype
        ));
    }
    Ok(PgKeyColumn {
        sql_name: pg_ident(&pg.name).ok_or("its PostgreSQL name has NUL")?,
        pg_type: pg.type_oid,
        plan: source.plan.clone(),
    })
}

/// Whether a string of PostgreSQL's column can be longer than the Feldera column's length:
/// the stream then cuts trailing spaces (SQL's store-assignment rule). Only text types can
/// end with spaces; every other type's text output never does.
fn loses_trailing_spaces(pg: &RelationColumn, target: &ColumnType) -> bool {
    if !matches!(target.sql, SqlType::Varchar | SqlType::Char) {
        return false;
    }
    let Some(limit) = target.precision.filter(|n| *n >= 0) else {
        return false;
    };
    let declared = || (pg.type_modifier >= 4).then(|| i64::from(pg.type_modifier) - 4);
    let longest: Option<i64> = match pg.type_oid {
        oid::TEXT => None,
        oid::VARCHAR | oid::BPCHAR => declared(),
        oid::NAME => Some(63),
        oid::CHAR => Some(1),
        _ => Some(0),
    };
    longest.is_none_or(|n| n > limit)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
