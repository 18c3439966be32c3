//! The catalog questions slotline asks PostgreSQL before it creates or uses a slot, and how
//! their answers are read.
//!
//! Each question is a SQL text for the simple query protocol (literals quoted here, since
//! there are no bind parameters there) and a parser over the answer's rows (text columns,
//! `None` for NULL). Parsers are strict: an answer of an unexpected shape is an error that
//! quotes the question, never a guess.

use crate::contract::partitions::Partition;
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

/// `TIMELINE_HISTORY n`: the timelines before `n`, each with the position where it ended
/// (the next one branched off there), oldest first.
pub fn timeline_history_command(timeline: u32) -> String {
    format!("TIMELINE_HISTORY {timeline}")
}

/// One line of a timeline history file: `timeline` ended at `switch_point`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineSwitch {
    pub timeline: u32,
    pub switch_point: Lsn,
}

/// The answer to `TIMELINE_HISTORY`: one row, `filename` and `content`, the history file
/// as text (`<timeline>\t<switch point>\t<reason>` per line; blank lines and `#` comments
/// are skipped, as the server's own reader does).
pub fn parse_timeline_history(rows: &[Row<'_>]) -> Result<Vec<TimelineSwitch>, CatalogError> {
    const Q: &str = "TIMELINE_HISTORY";
    let [row] = rows else {
        return Err(bad(Q, format!("{} rows, expected 1", rows.len())));
    };
    let content = column(Q, row, 1)?;
    let mut switches = Vec::new();
    for line in content.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(timeline), Some(point)) = (fields.next(), fields.next()) else {
            return Err(bad(Q, format!("line {line:?} has no switch point")));
        };
        let timeline = timeline
            .parse()
            .map_err(|_| bad(Q, format!("timeline {timeline:?} is not a number")))?;
        let switch_point = point
            .parse()
            .map_err(|e: crate::lsn::ParseLsnError| bad(Q, format!("{point:?}: {e}")))?;
        switches.push(TimelineSwitch {
            timeline,
            switch_point,
        });
    }
    Ok(switches)
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
    /// `publish_via_partition_root`: a partition's rows are published as rows of its
    /// topmost published ancestor (else as rows of the partition itself).
    pub via_root: bool,
}

/// The answer to `publication_query`: the publication, or the names of the publications the
/// database has, for the refusal to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicationLookup {
    Found(Publication),
    /// The publication does not exist. `existing`: the database's publications in name
    /// order, at most `PUBLICATIONS_LISTED`; `more`: it has others besides.
    Missing {
        existing: Vec<String>,
        more: bool,
    },
}

/// How many other publications a missing publication's refusal names.
pub const PUBLICATIONS_LISTED: usize = 20;

/// The publication first when it exists, then the others by name: one question answers both
/// "what does it publish" and "which ones are there" (bounded by the `LIMIT`).
pub fn publication_query(publication: &str) -> Option<String> {
    Some(format!(
        "SELECT pubname, puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot \
         FROM pg_catalog.pg_publication ORDER BY pubname = {} DESC, pubname LIMIT {}",
        quote_literal(publication)?,
        PUBLICATIONS_LISTED + 1
    ))
}

/// The row named `publication`, else the names of the rows there are.
pub fn parse_publication(
    rows: &[Row<'_>],
    publication: &str,
) -> Result<PublicationLookup, CatalogError> {
    const Q: &str = "publication";
    let mut names = Vec::with_capacity(rows.len());
    for row in rows {
        let name = column(Q, row, 0)?;
        if name != publication {
            names.push(name.to_owned());
            continue;
        }
        return Ok(PublicationLookup::Found(Publication {
            name: name.to_owned(),
            all_tables: boolean(Q, column(Q, row, 1)?)?,
            inserts: boolean(Q, column(Q, row, 2)?)?,
            updates: boolean(Q, column(Q, row, 3)?)?,
            deletes: boolean(Q, column(Q, row, 4)?)?,
            truncates: boolean(Q, column(Q, row, 5)?)?,
            via_root: boolean(Q, column(Q, row, 6)?)?,
        }));
    }
    let more = names.len() > PUBLICATIONS_LISTED;
    names.truncate(PUBLICATIONS_LISTED);
    Ok(PublicationLookup::Missing {
        existing: names,
        more,
    })
}

/// A schema-qualified PostgreSQL table name, exactly as the catalog spells it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// A table the publication publishes, with the partitioned tables it is a partition of
/// (nearest first; empty for a table that is not a partition). With
/// `publish_via_partition_root = false` the catalog lists the leaf partitions of a
/// published partitioned table, not the table itself.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PublishedTable {
    pub name: QualifiedName,
    pub ancestors: Vec<QualifiedName>,
    /// The columns pgoutput publishes of it, in attribute order: the column list, or every
    /// column, with the stored generated columns PostgreSQL 18 publishes
    /// (`publish_generated_columns = stored`, or named in the list). `None` when the answer
    /// did not say, which reads as every column.
    pub columns: Option<Vec<String>>,
    /// The row filter (`WHERE` of `FOR TABLE`) as PostgreSQL prints it, e.g.
    /// `((id % 3) <> 0)`; `None` when every row is published.
    pub row_filter: Option<String>,
}

impl fmt::Display for PublishedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.name.fmt(f)
    }
}

/// The published tables, one row per (table, ancestor), nearest ancestor first; a table
/// without ancestors has one row whose ancestor columns are NULL. Each row also carries the
/// columns pgoutput publishes (a JSON array) and the row filter. `attnames` lists a table's
/// generated columns on 15-17 when there is no column list, though pgoutput publishes them
/// only from 18 on (measured: docs/snapshot.md, "What the publication publishes"): they are
/// left out there.
pub fn published_tables_query(publication: &str) -> Option<String> {
    Some(format!(
        "SELECT p.schemaname, p.tablename, an.nspname, ac.relname, \
           (SELECT pg_catalog.json_agg(c.attname ORDER BY c.attnum) FROM pg_catalog.pg_attribute c \
             WHERE c.attrelid = pg_catalog.format('%I.%I', p.schemaname, p.tablename)::regclass \
             AND c.attnum > 0 AND NOT c.attisdropped AND c.attname = ANY(p.attnames) \
             AND (c.attgenerated = '' \
               OR pg_catalog.current_setting('server_version_num')::int >= 180000))::text, \
           p.rowfilter \
         FROM pg_catalog.pg_publication_tables p \
         LEFT JOIN LATERAL pg_catalog.pg_partition_ancestors(\
           pg_catalog.format('%I.%I', p.schemaname, p.tablename)::regclass) \
           WITH ORDINALITY AS a(relid, depth) ON a.depth > 1 \
         LEFT JOIN pg_catalog.pg_class ac ON ac.oid = a.relid \
         LEFT JOIN pg_catalog.pg_namespace an ON an.oid = ac.relnamespace \
         WHERE p.pubname = {} ORDER BY p.schemaname, p.tablename, a.depth",
        quote_literal(publication)?
    ))
}

pub fn parse_published_tables(rows: &[Row<'_>]) -> Result<Vec<PublishedTable>, CatalogError> {
    const Q: &str = "published tables";
    let mut tables: Vec<PublishedTable> = Vec::new();
    for row in rows {
        if row.len() != 6 {
            return Err(bad(Q, format!("row has {} columns, expected 6", row.len())));
        }
        let name = QualifiedName {
            schema: column(Q, row, 0)?.to_owned(),
            table: column(Q, row, 1)?.to_owned(),
        };
        let ancestor = match (row[2], row[3]) {
            (Some(schema), Some(table)) => Some(QualifiedName {
                schema: schema.to_owned(),
                table: table.to_owned(),
            }),
            (None, None) => None,
            _ => return Err(bad(Q, format!("half an ancestor of {name}"))),
        };
        let columns = row[4]
            .map(|text| {
                serde_json::from_str::<Vec<String>>(text).map_err(|e| {
                    bad(
                        Q,
                        format!("the columns of {name} are not a list of names: {e}"),
                    )
                })
            })
            .transpose()?;
        let row_filter = row[5].map(str::to_owned);
        match tables.last_mut() {
            Some(last) if last.name == name => match ancestor {
                Some(ancestor)
                    if !last.ancestors.is_empty()
                        && last.columns == columns
                        && last.row_filter == row_filter =>
                {
                    last.ancestors.push(ancestor)
                }
                _ => return Err(bad(Q, format!("{name} is listed twice"))),
            },
            _ => tables.push(PublishedTable {
                name,
                ancestors: ancestor.into_iter().collect(),
                columns,
                row_filter,
            }),
        }
    }
    Ok(tables)
}

/// The table's shape as a Relation message would describe it (columns in attribute order,
/// without dropped or generated columns, identity flags per the replica identity), so the
/// column mapping can be validated before the slot exists; and, when it is partitioned, the
/// shape of every partition below it, at any depth. Columns: oid, namespace, name,
/// relreplident, attname, atttypid, atttypmod, in identity, level (0 for the table),
/// isleaf and the parent's OID (NULL for the table). The table's rows come first, then the
/// partitions' by name; the last column says whether row-level security applies to the
/// relation for this session's role (`row_security_active`: enabled on it, and the role is
/// neither a superuser, nor BYPASSRLS, nor its owner unless it forces row security). Read with
/// [`parse_relation`], [`parse_partitions`] and [`parse_row_security`].
pub fn relation_query(table: &QualifiedName) -> Option<String> {
    let name = regclass(table)?;
    Some(format!(
        "SELECT c.oid, n.nspname, c.relname, c.relreplident, a.attname, a.atttypid, a.atttypmod, \
           {IN_IDENTITY}, t.level, t.isleaf, t.parent, pg_catalog.row_security_active(c.oid) \
         FROM (SELECT {name} AS relid, 0 AS level, NULL::bool AS isleaf, NULL::oid AS parent \
           UNION ALL SELECT p.relid, p.level, p.isleaf, p.parentrelid::oid \
           FROM pg_catalog.pg_partition_tree({name}) p WHERE p.level > 0) AS t \
         JOIN pg_catalog.pg_class c ON c.oid = t.relid \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid \
         WHERE {LIVE_COLUMN} \
         ORDER BY t.level > 0, n.nspname, c.relname, c.oid, a.attnum"
    ))
}

/// `'"schema"."table"'::regclass`.
fn regclass(table: &QualifiedName) -> Option<String> {
    let name = format!(
        "{}.{}",
        quote_ident(&table.schema)?,
        quote_ident(&table.table)?
    );
    Some(format!("{}::regclass", quote_literal(&name)?))
}

/// Whether column `a` of relation `c` is in the replica identity, as pgoutput flags it.
const IN_IDENTITY: &str =
    "a.attnum = ANY(COALESCE((SELECT i.indkey::int2[] FROM pg_catalog.pg_index i \
    WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) \
    OR (c.relreplident = 'i' AND i.indisreplident)) LIMIT 1), '{}'::int2[])) \
    OR c.relreplident = 'f'";

/// The columns a Relation message may list: neither system nor dropped, and not generated
/// unless stored on PostgreSQL 18 or newer, which publishes those when the publication
/// says so. Which of them it publishes is the published tables' answer
/// ([`PublishedTable::columns`]); the startup narrows the relation to those.
const LIVE_COLUMN: &str = "a.attnum > 0 AND NOT a.attisdropped AND (a.attgenerated = '' \
    OR (a.attgenerated = 's' AND pg_catalog.current_setting('server_version_num')::int >= 180000))";

/// The table itself from the answer of [`relation_query`].
pub fn parse_relation(rows: &[Row<'_>]) -> Result<Relation, CatalogError> {
    const Q: &str = "table columns";
    let own = levels(Q, rows)?.0;
    if own.is_empty() {
        return Err(bad(Q, "the table has no columns"));
    }
    relation_of(Q, own)
}

/// The columns of a row of [`relation_query`]'s answer.
const RELATION_COLUMNS: usize = 12;

/// The relations of [`relation_query`]'s answer (the table, then its partitions) whose rows
/// this session's role would read only in part: row-level security applies to it
/// (`schema.name` each, in the answer's order). A copy reads through that role's policies
/// while decoding ignores them, so such a table is never copied whole (docs/snapshot.md,
/// "Row-level security").
pub fn parse_row_security(rows: &[Row<'_>]) -> Result<Vec<String>, CatalogError> {
    const Q: &str = "table columns";
    levels(Q, rows)?;
    let mut secured: Vec<String> = Vec::new();
    for row in rows {
        if boolean(Q, column(Q, row, 11)?)? {
            let name = format!("{}.{}", column(Q, row, 1)?, column(Q, row, 2)?);
            if !secured.contains(&name) {
                secured.push(name);
            }
        }
    }
    Ok(secured)
}

/// The answer of [`relation_query`] split into the table's rows and its partitions' rows.
fn levels<'r, 'a>(
    q: &'static str,
    rows: &'r [Row<'a>],
) -> Result<(&'r [Row<'a>], &'r [Row<'a>]), CatalogError> {
    for row in rows {
        if row.len() != RELATION_COLUMNS {
            return Err(bad(
                q,
                format!("row has {} columns, expected {RELATION_COLUMNS}", row.len()),
            ));
        }
    }
    let own = rows
        .iter()
        .position(|row| row[8] != Some("0"))
        .unwrap_or(rows.len());
    Ok(rows.split_at(own))
}

/// One relation from its column rows (the layout of [`relation_query`]: oid, namespace,
/// name, relreplident, then one column per row).
fn relation_of(q: &'static str, rows: &[Row<'_>]) -> Result<Relation, CatalogError> {
    let first = rows
        .first()
        .ok_or_else(|| bad(q, "a relation without columns"))?;
    let number = |text: &str, what: &str| {
        text.parse::<i64>()
            .map_err(|_| bad(q, format!("{what} {text:?} is not a number")))
    };
    let replica_identity = match column(q, first, 3)? {
        "d" => ReplicaIdentity::Default,
        "n" => ReplicaIdentity::Nothing,
        "f" => ReplicaIdentity::Full,
        "i" => ReplicaIdentity::Index,
        other => return Err(bad(q, format!("unknown relreplident {other:?}"))),
    };
    let columns = rows
        .iter()
        .map(|row| {
            Ok(RelationColumn {
                in_replica_identity: boolean(q, column(q, row, 7)?)?,
                name: column(q, row, 4)?.to_owned(),
                type_oid: u32::try_from(number(column(q, row, 5)?, "type oid")?)
                    .map_err(|_| bad(q, "type oid out of range"))?,
                type_modifier: i32::try_from(number(column(q, row, 6)?, "typmod")?)
                    .map_err(|_| bad(q, "typmod out of range"))?,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    Ok(Relation {
        oid: u32::try_from(number(column(q, first, 0)?, "oid")?)
            .map_err(|_| bad(q, "oid out of range"))?,
        namespace: column(q, first, 1)?.to_owned(),
        name: column(q, first, 2)?.to_owned(),
        replica_identity,
        columns,
    })
}

/// The partitions of the table from the answer of [`relation_query`]: none for a table
/// that is not partitioned (or is itself a leaf partition).
pub fn parse_partitions(rows: &[Row<'_>]) -> Result<Vec<Partition>, CatalogError> {
    const Q: &str = "table columns";
    let rows = levels(Q, rows)?.1;
    let mut partitions = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let oid = column(Q, rows[start], 0)?;
        let end = rows[start..]
            .iter()
            .position(|row| row[0] != Some(oid))
            .map_or(rows.len(), |n| start + n);
        let group = &rows[start..end];
        let first = group[0];
        for row in group {
            if row[8..] != first[8..] {
                return Err(bad(Q, format!("the rows of relation {oid} disagree")));
            }
        }
        if column(Q, first, 8)? == "0" {
            return Err(bad(
                Q,
                format!("relation {oid} is listed after the partitions"),
            ));
        }
        let leaf = boolean(Q, column(Q, first, 9)?)?;
        let parent_text = column(Q, first, 10)?;
        let parent = parent_text
            .parse()
            .map_err(|_| bad(Q, format!("parent OID {parent_text:?} is not a number")))?;
        let relation = relation_of(Q, group)?;
        if partitions
            .iter()
            .any(|p: &Partition| p.relation.oid == relation.oid)
        {
            return Err(bad(Q, format!("relation {oid} is listed twice")));
        }
        partitions.push(Partition {
            relation,
            leaf,
            parent,
        });
        start = end;
    }
    Ok(partitions)
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

/// The temporary slot a start creates to copy routes added since the slot's own copy:
/// `<slot>_add`, the slot's name cut to leave room (a slot name has at most 63 bytes).
pub fn temporary_slot_name(slot: &str) -> String {
    let mut end = slot.len().min(59);
    while !slot.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}_add", &slot[..end])
}

/// `CREATE_REPLICATION_SLOT ... TEMPORARY ... (SNAPSHOT 'export')`: dropped by the server
/// when the connection ends, if not before.
pub fn create_temporary_slot_command(slot: &str) -> Option<String> {
    Some(format!(
        "CREATE_REPLICATION_SLOT {} TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')",
        quote_ident(slot)?
    ))
}

/// `DROP_REPLICATION_SLOT` for a slot that is not in use (no `WAIT`: a slot someone holds is
/// an error, never waited for).
pub fn drop_slot_command(slot: &str) -> Option<String> {
    Some(format!("DROP_REPLICATION_SLOT {}", quote_ident(slot)?))
}

/// `START_REPLICATION` from the slot's own position (`0/0`), pgoutput protocol 1; with
/// `messages`, logical decoding messages too (an online copy's watermarks,
/// docs/online-copy.md).
pub fn start_replication_command(slot: &str, publication: &str, messages: bool) -> Option<String> {
    let names = quote_literal(&quote_ident(publication)?)?;
    Some(format!(
        "START_REPLICATION SLOT {} LOGICAL 0/0 (proto_version '1', publication_names {names}{})",
        quote_ident(slot)?,
        if messages { ", messages 'true'" } else { "" }
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
#[path = "questions_tests.rs"]
mod tests;
