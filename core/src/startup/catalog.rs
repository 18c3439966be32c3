//! The catalog questions slotline asks PostgreSQL before it creates or uses a slot, and how
//! their answers are read.
//!
//! Each question is a SQL text for the simple query protocol (literals quoted here, since
//! there are no bind parameters there) and a parser over the answer's rows (text columns,
//! `None` for NULL). Parsers are strict: an answer of an unexpected shape is an error that
//! quotes the question, never a guess.

use crate::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use crate::Lsn;
use std::fmt;

/// One row of a simple-query answer: text columns, `None` for NULL.
pub type Row<'a> = &'a [Option<&'a str>];

/// An answer that does not have the shape its question promised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogError {
    pub question: &'static str,
    pub problem: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unexpected answer to the {} query: {}",
            self.question, self.problem
        )
    }
}

impl std::error::Error for CatalogError {}

fn bad(question: &'static str, problem: impl Into<String>) -> CatalogError {
    CatalogError {
        question,
        problem: problem.into(),
    }
}

/// A SQL string literal for `value` (standard_conforming_strings is on since 9.1: only
/// quotes are doubled). NUL cannot appear in a PostgreSQL string and is refused.
pub fn quote_literal(value: &str) -> Option<String> {
    if value.contains('\0') {
        return None;
    }
    Some(format!("'{}'", value.replace('\'', "''")))
}

/// A SQL identifier for `name`, always quoted (exact spelling).
pub fn quote_ident(name: &str) -> Option<String> {
    if name.contains('\0') {
        return None;
    }
    Some(format!("\"{}\"", name.replace('"', "\"\"")))
}

fn column<'a>(question: &'static str, row: Row<'a>, index: usize) -> Result<&'a str, CatalogError> {
    match row.get(index) {
        Some(Some(text)) => Ok(text),
        Some(None) => Err(bad(question, format!("column {index} is NULL"))),
        None => Err(bad(
            question,
            format!("row has {} columns, expected more than {index}", row.len()),
        )),
    }
}

fn boolean(question: &'static str, text: &str) -> Result<bool, CatalogError> {
    match text {
        "t" => Ok(true),
        "f" => Ok(false),
        other => Err(bad(question, format!("expected t or f, got {other:?}"))),
    }
}

/// `IDENTIFY_SYSTEM`: system id, timeline, current WAL position, database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemIdentity {
    pub system_id: String,
    pub timeline: u32,
    pub xlogpos: Lsn,
    pub database: Option<String>,
}

pub const IDENTIFY_SYSTEM: &str = "IDENTIFY_SYSTEM";

pub fn parse_identify_system(rows: &[Row<'_>]) -> Result<SystemIdentity, CatalogError> {
    const Q: &str = "IDENTIFY_SYSTEM";
    let [row] = rows else {
        return Err(bad(Q, format!("{} rows, expected 1", rows.len())));
    };
    let timeline = column(Q, row, 1)?
        .parse()
        .map_err(|_| bad(Q, "timeline is not a number"))?;
    let xlogpos = column(Q, row, 2)?
        .parse()
        .map_err(|e: crate::lsn::ParseLsnError| bad(Q, e.to_string()))?;
    Ok(SystemIdentity {
        system_id: column(Q, row, 0)?.to_owned(),
        timeline,
        xlogpos,
        database: row.get(3).copied().flatten().map(str::to_owned),
    })
}

/// What a publication publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    pub name: String,
    pub all_tables: bool,
    pub inserts: bool,
    pub updates: bool,
    pub deletes: bool,
    pub truncates: bool,
}

pub fn publication_query(publication: &str) -> Option<String> {
    Some(format!(
        "SELECT pubname, puballtables, pubinsert, pubupdate, pubdelete, pubtruncate \
         FROM pg_catalog.pg_publication WHERE pubname = {}",
        quote_literal(publication)?
    ))
}

/// `None` when the publication does not exist.
pub fn parse_publication(rows: &[Row<'_>]) -> Result<Option<Publication>, CatalogError> {
    const Q: &str = "publication";
    let row = match rows {
        [] => return Ok(None),
        [row] => row,
        _ => return Err(bad(Q, format!("{} rows, expected at most 1", rows.len()))),
    };
    Ok(Some(Publication {
        name: column(Q, row, 0)?.to_owned(),
        all_tables: boolean(Q, column(Q, row, 1)?)?,
        inserts: boolean(Q, column(Q, row, 2)?)?,
        updates: boolean(Q, column(Q, row, 3)?)?,
        deletes: boolean(Q, column(Q, row, 4)?)?,
        truncates: boolean(Q, column(Q, row, 5)?)?,
    }))
}

/// A schema-qualified PostgreSQL table name, exactly as the catalog spells it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName {
    pub schema: String,
    pub table: String,
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let simple = |s: &str| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        let part = |s: &str| {
            if simple(s) {
                s.to_owned()
            } else {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
        };
        write!(f, "{}.{}", part(&self.schema), part(&self.table))
    }
}

pub fn published_tables_query(publication: &str) -> Option<String> {
    Some(format!(
        "SELECT schemaname, tablename FROM pg_catalog.pg_publication_tables \
         WHERE pubname = {} ORDER BY schemaname, tablename",
        quote_literal(publication)?
    ))
}

pub fn parse_published_tables(rows: &[Row<'_>]) -> Result<Vec<QualifiedName>, CatalogError> {
    const Q: &str = "published tables";
    rows.iter()
        .map(|row| {
            Ok(QualifiedName {
                schema: column(Q, row, 0)?.to_owned(),
                table: column(Q, row, 1)?.to_owned(),
            })
        })
        .collect()
}

/// The table's shape as a Relation message would describe it (columns in attribute order,
/// without dropped or generated columns, identity flags per the replica identity), so the
/// column mapping can be validated before the slot exists.
pub fn relation_query(table: &QualifiedName) -> Option<String> {
    let name = format!(
        "{}.{}",
        quote_ident(&table.schema)?,
        quote_ident(&table.table)?
    );
    Some(format!(
        "SELECT c.oid, n.nspname, c.relname, c.relreplident, a.attname, a.atttypid, a.atttypmod, \
           a.attnum = ANY(COALESCE((SELECT i.indkey::int2[] FROM pg_catalog.pg_index i \
             WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) \
             OR (c.relreplident = 'i' AND i.indisreplident)) LIMIT 1), '{{}}'::int2[])) \
           OR c.relreplident = 'f' \
         FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid \
         WHERE c.oid = {}::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' \
         ORDER BY a.attnum",
        quote_literal(&name)?
    ))
}

pub fn parse_relation(rows: &[Row<'_>]) -> Result<Relation, CatalogError> {
    const Q: &str = "table columns";
    let first = rows
        .first()
        .ok_or_else(|| bad(Q, "the table has no columns"))?;
    let number = |text: &str, what: &str| {
        text.parse::<i64>()
            .map_err(|_| bad(Q, format!("{what} {text:?} is not a number")))
    };
    let replica_identity = match column(Q, first, 3)? {
        "d" => ReplicaIdentity::Default,
        "n" => ReplicaIdentity::Nothing,
        "f" => ReplicaIdentity::Full,
        "i" => ReplicaIdentity::Index,
        other => return Err(bad(Q, format!("unknown relreplident {other:?}"))),
    };
    let columns = rows
        .iter()
        .map(|row| {
            Ok(RelationColumn {
                in_replica_identity: boolean(Q, column(Q, row, 7)?)?,
                name: column(Q, row, 4)?.to_owned(),
                type_oid: u32::try_from(number(column(Q, row, 5)?, "type oid")?)
                    .map_err(|_| bad(Q, "type oid out of range"))?,
                type_modifier: i32::try_from(number(column(Q, row, 6)?, "typmod")?)
                    .map_err(|_| bad(Q, "typmod out of range"))?,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    Ok(Relation {
        oid: u32::try_from(number(column(Q, first, 0)?, "oid")?)
            .map_err(|_| bad(Q, "oid out of range"))?,
        namespace: column(Q, first, 1)?.to_owned(),
        name: column(Q, first, 2)?.to_owned(),
        replica_identity,
        columns,
    })
}

/// A replication slot as `pg_replication_slots` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    pub name: String,
    pub plugin: Option<String>,
    pub slot_type: String,
    pub database: Option<String>,
    pub active_pid: Option<u32>,
    pub confirmed_flush: Option<Lsn>,
    pub wal_status: Option<String>,
}

pub fn slot_query(slot: &str) -> Option<String> {
    Some(format!(
        "SELECT slot_name, plugin, slot_type, database, active_pid, confirmed_flush_lsn, wal_status \
         FROM pg_catalog.pg_replication_slots WHERE slot_name = {}",
        quote_literal(slot)?
    ))
}

/// `None` when the slot does not exist.
pub fn parse_slot(rows: &[Row<'_>]) -> Result<Option<SlotInfo>, CatalogError> {
    const Q: &str = "replication slot";
    let row = match rows {
        [] => return Ok(None),
        [row] => row,
        _ => return Err(bad(Q, format!("{} rows, expected at most 1", rows.len()))),
    };
    let optional = |i: usize| row.get(i).copied().flatten();
    Ok(Some(SlotInfo {
        name: column(Q, row, 0)?.to_owned(),
        plugin: optional(1).map(str::to_owned),
        slot_type: column(Q, row, 2)?.to_owned(),
        database: optional(3).map(str::to_owned),
        active_pid: optional(4)
            .map(|p| p.parse().map_err(|_| bad(Q, "active_pid is not a number")))
            .transpose()?,
        confirmed_flush: optional(5)
            .map(|l| {
                l.parse()
                    .map_err(|e: crate::lsn::ParseLsnError| bad(Q, e.to_string()))
            })
            .transpose()?,
        wal_status: optional(6).map(str::to_owned),
    }))
}

/// `CREATE_REPLICATION_SLOT` for a pgoutput slot. `export` chooses `SNAPSHOT 'export'`;
/// otherwise `SNAPSHOT 'nothing'` is always spelled out so no xmin is pinned.
pub fn create_slot_command(slot: &str, export: bool) -> Option<String> {
    create_slot_command_with(slot, export, false)
}

/// `create_slot_command`, optionally as a failover slot (`FAILOVER true`, PostgreSQL 17+:
/// synchronized to standbys that have `sync_replication_slots` on).
pub fn create_slot_command_with(slot: &str, export: bool, failover: bool) -> Option<String> {
    let snapshot = if export { "export" } else { "nothing" };
    let failover = if failover { ", FAILOVER true" } else { "" };
    Some(format!(
        "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT '{snapshot}'{failover})",
        quote_ident(slot)?
    ))
}

/// `DROP_REPLICATION_SLOT` for a slot that is not in use (no `WAIT`: a slot someone holds is
/// an error, never waited for).
pub fn drop_slot_command(slot: &str) -> Option<String> {
    Some(format!("DROP_REPLICATION_SLOT {}", quote_ident(slot)?))
}

/// `START_REPLICATION` from the slot's own position (`0/0`), pgoutput protocol 1.
pub fn start_replication_command(slot: &str, publication: &str) -> Option<String> {
    let names = quote_literal(&quote_ident(publication)?)?;
    Some(format!(
        "START_REPLICATION SLOT {} LOGICAL 0/0 (proto_version '1', publication_names {names})",
        quote_ident(slot)?
    ))
}

/// The slot's consistent point from `CREATE_REPLICATION_SLOT`'s answer
/// (slot_name, consistent_point, snapshot_name, output_plugin).
pub fn parse_created_slot(rows: &[Row<'_>]) -> Result<(Lsn, Option<String>), CatalogError> {
    const Q: &str = "CREATE_REPLICATION_SLOT";
    let [row] = rows else {
        return Err(bad(Q, format!("{} rows, expected 1", rows.len())));
    };
    let lsn = column(Q, row, 1)?
        .parse()
        .map_err(|e: crate::lsn::ParseLsnError| bad(Q, e.to_string()))?;
    Ok((lsn, row.get(2).copied().flatten().map(str::to_owned)))
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
