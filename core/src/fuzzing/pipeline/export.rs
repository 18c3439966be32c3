//! The snapshot a slot exports, and the copying connections that import it, as the fake
//! PostgreSQL serves them (docs/snapshot.md, "The copy"; docs/retraction.md, "Comparing
//! with PostgreSQL").
//!
//! `CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')` freezes the tables as of the slot's
//! consistent point. The snapshot can be imported (`SET TRANSACTION SNAPSHOT`) only while
//! the connection that created the slot is open and has run no other command; a worker that
//! imported it keeps it until its transaction ends. Under it a worker measures the tables
//! (heap blocks and row estimates), copies ranges of `ctid` (rows lie `blocks_per_row`
//! blocks apart, users by id and items by sku number, so the ranges the pipeline plans cut
//! the tables for real) and asks which keys of a retraction page exist; both read what the
//! publication publishes, and must say so in their SQL (`publication`).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use super::catalog::{result_set_with, text_row};
use super::publication::{evaluate, Publication};
use super::workload::Key;
use crate::io::ConnId;
use crate::wire::backend::{BackendMessage, CopyResponse, TransactionStatus};
use crate::wire::testing::pg_error;
use crate::Lsn;

/// The tables the copy reads: PostgreSQL's qualified name, Feldera's segment.
const TABLES: [(&str, &str); 2] = [
    ("\"public\".\"users\"", "users"),
    ("\"public\".\"items\"", "items"),
];

/// An exported snapshot.
#[derive(Debug)]
pub(super) struct Export {
    pub(super) name: String,
    /// The replication connection that created the slot.
    pub(super) holder: ConnId,
    /// It can still be imported.
    pub(super) valid: bool,
    /// The slot's consistent point.
    pub(super) point: Lsn,
    /// Every row as of the consistent point.
    pub(super) rows: BTreeMap<Key, Value>,
    /// Exported by a temporary slot (routes added since the slot's own copy): the slot
    /// streamed from is not touched.
    pub(super) temporary: bool,
}

/// A plain connection's transaction, once it asked for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WorkerTx {
    /// Inside the export of this index.
    Snapshot(usize),
    /// A statement failed: everything is refused until the transaction ends.
    Failed,
}

/// What a copying connection's statement gets: the messages, whether it is a COPY (whose
/// rows wait for the fuzz input's deliveries), and the transaction afterwards.
pub(super) struct Reply {
    pub(super) messages: Vec<BackendMessage>,
    pub(super) copy: bool,
    pub(super) tx: Option<WorkerTx>,
}

fn error(code: &str, message: &str) -> BackendMessage {
    BackendMessage::ErrorResponse(Box::new(pg_error("ERROR", code, message)))
}

fn done(tag: &str) -> BackendMessage {
    BackendMessage::CommandComplete {
        tag: tag.to_owned(),
    }
}

/// The ordinal that places a row in the heap: a user's id, an item's sku number.
fn ordinal(key: &Key) -> u64 {
    key.1
        .trim_matches('"')
        .trim_start_matches('s')
        .parse()
        .unwrap_or(0)
}

/// The Feldera segment of the qualified table `sql` names after `FROM `.
fn table_after_from(sql: &str) -> Option<&'static str> {
    let rest = sql.split(" FROM ").nth(1)?;
    TABLES
        .iter()
        .find(|(qualified, _)| rest.starts_with(qualified))
        .map(|(_, segment)| *segment)
}

/// The block number in `'(n,0)'::tid` after `marker`.
fn block_after(sql: &str, marker: &str) -> Option<u64> {
    let rest = sql.split(marker).nth(1)?;
    rest.strip_prefix("'(")?.split(',').next()?.parse().ok()
}

/// Answers one statement on a plain connection in transaction `tx` (`None`: none open).
/// `exports` are every snapshot ever exported; `sizes` gives each table's heap blocks now;
/// the copy and the leftover question read what `publication` publishes, and must say so.
/// Statements the pipeline has no reason to send there are a harness gap: they panic.
pub(super) fn answer(
    sql: &str,
    tx: Option<WorkerTx>,
    exports: &[Export],
    blocks_per_row: u64,
    next_ordinal: impl Fn(&str) -> u64,
    publication: &Publication,
) -> Reply {
    let reply = |messages, tx| Reply {
        messages,
        copy: false,
        tx,
    };
    let in_tx = BackendMessage::ReadyForQuery(TransactionStatus::InTransaction);
    let failed = BackendMessage::ReadyForQuery(TransactionStatus::Failed);
    if let Some(rest) = sql.strip_prefix("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
        assert!(
            tx.is_none(),
            "a copying connection began a transaction inside one: {sql}"
        );
        let Some(name) = rest
            .strip_prefix("; SET TRANSACTION SNAPSHOT '")
            .and_then(|n| n.strip_suffix('\''))
        else {
            panic!("a copy outside the exported snapshot (SNAPSHOT_MODE=inconsistent is not modelled): {sql}");
        };
        return match exports.iter().position(|e| e.name == name && e.valid) {
            Some(i) => reply(
                vec![done("BEGIN"), done("SET"), in_tx],
                Some(WorkerTx::Snapshot(i)),
            ),
            None => reply(
                vec![
                    done("BEGIN"),
                    error("22023", &format!("invalid snapshot identifier: \"{name}\"")),
                    failed,
                ],
                Some(WorkerTx::Failed),
            ),
        };
    }
    if sql == "COMMIT" {
        let tag = match tx {
            Some(WorkerTx::Failed) => "ROLLBACK",
            _ => "COMMIT",
        };
        let idle = BackendMessage::ReadyForQuery(TransactionStatus::Idle);
        return reply(vec![done(tag), idle], None);
    }
    let export = match tx {
        Some(WorkerTx::Snapshot(i)) => &exports[i],
        Some(WorkerTx::Failed) => {
            let aborted = error(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            );
            return reply(vec![aborted, failed], tx);
        }
        None => panic!("a copying connection asked outside its snapshot's transaction: {sql}"),
    };
    if sql.contains("pg_catalog.pg_relation_size(") {
        return reply(sizes(sql, export, blocks_per_row, next_ordinal), tx);
    }
    if let Some(inner) = sql.strip_prefix("COPY (") {
        return Reply {
            messages: copy(inner, export, blocks_per_row, publication),
            copy: true,
            tx,
        };
    }
    if sql.contains(" AS t WHERE (") {
        return reply(existing(sql, export, publication), tx);
    }
    panic!("a copying connection sent SQL the fake server does not know: {sql}");
}

/// Heap blocks (the table's size now: past the last row ever placed, which the
/// snapshot's rows never pass) and the planner's estimate, per route in route order (the
/// fake's tables are not partitioned: one heap each).
fn sizes(
    sql: &str,
    export: &Export,
    blocks_per_row: u64,
    next_ordinal: impl Fn(&str) -> u64,
) -> Vec<BackendMessage> {
    let values = sql
        .split("(VALUES ")
        .nth(1)
        .and_then(|rest| rest.split(") AS v(").next())
        .unwrap_or_else(|| panic!("a size query without its tables: {sql}"));
    let mut rows = Vec::new();
    for entry in values.split("), (") {
        let entry = entry.trim_matches(|c| c == '(' || c == ')');
        let (route, name) = entry
            .split_once(", '")
            .unwrap_or_else(|| panic!("a size query the fake cannot read: {sql}"));
        let name = name.trim_end_matches('\'');
        let Some((_, table)) = TABLES.iter().find(|(q, _)| *q == name) else {
            panic!("a size query of a table the fake does not have: {sql}");
        };
        // The measured size ends at the last row's block: the row there lies past it, so
        // only an open-ended last range copies it (docs/snapshot.md, "Ranges").
        let blocks = next_ordinal(table).saturating_sub(1) * blocks_per_row;
        let estimate = export.rows.keys().filter(|(t, _)| t == table).count();
        let relname = name.rsplit('.').next().unwrap_or(name).trim_matches('"');
        rows.push(text_row(&[
            route,
            "public",
            relname,
            &blocks.to_string(),
            &estimate.to_string(),
        ]));
    }
    result_set_with(rows, TransactionStatus::InTransaction)
}

/// `COPY (SELECT <published columns> FROM t [WHERE (<filter>)] [AND ctid >= '(a,0)'::tid
/// [AND ctid < '(b,0)'::tid]]) TO STDOUT`: the snapshot's rows of `t` whose block lies in
/// the range and that the filter lets through, only the published columns, one CopyData
/// each. A COPY that reads other columns or rows than the publication publishes panics
/// (`Publication::check_copy`).
fn copy(
    inner: &str,
    export: &Export,
    blocks_per_row: u64,
    publication: &Publication,
) -> Vec<BackendMessage> {
    let Some(table) = table_after_from(inner) else {
        panic!("a COPY of a table the fake does not have: {inner}");
    };
    let filter = publication.check_copy(table, inner);
    let from = block_after(inner, "ctid >= ").unwrap_or(0);
    let to = block_after(inner, "ctid < ");
    let lines: Vec<String> = export
        .rows
        .iter()
        .filter(|(key, _)| key.0 == table)
        .filter(|(key, _)| {
            let block = ordinal(key) * blocks_per_row;
            block >= from && to.is_none_or(|to| block < to)
        })
        .filter(|(_, row)| filter.as_deref().is_none_or(|f| evaluate(f, row)))
        .map(|(_, row)| publication.copy_line(table, row))
        .collect();
    let mut messages = vec![BackendMessage::CopyOutResponse(CopyResponse {
        format: 0,
        column_formats: vec![0; publication.columns(table).len()],
    })];
    let n = lines.len();
    messages.extend(
        lines
            .into_iter()
            .map(|line| BackendMessage::CopyData(Bytes::from(line))),
    );
    messages.extend([
        BackendMessage::CopyDone,
        done(&format!("COPY {n}")),
        BackendMessage::ReadyForQuery(TransactionStatus::InTransaction),
    ]);
    messages
}

/// `SELECT t.k FROM s.t AS t WHERE (t.k) IN (VALUES ('x'::pg_catalog.type), ...) [AND
/// (<filter>)]`: the keys asked about that exist under the snapshot inside the
/// publication's filter, as text. A question without the filter panics
/// (`Publication::check_existence`).
fn existing(sql: &str, export: &Export, publication: &Publication) -> Vec<BackendMessage> {
    let Some(table) = table_after_from(sql) else {
        panic!("a key question about a table the fake does not have: {sql}");
    };
    let sql = publication.check_existence(table, sql);
    let values = sql
        .split(" IN (VALUES ")
        .nth(1)
        .unwrap_or_else(|| panic!("a key question without keys: {sql}"));
    let mut rows = Vec::new();
    for literal in values.split("('").skip(1) {
        let Some((text, _)) = literal.split_once("'::pg_catalog.") else {
            panic!("a key literal the fake cannot read: {sql}");
        };
        let text = text.replace("''", "'");
        let key: Key = match table {
            "users" => (table_static(table), text.clone()),
            _ => (table_static(table), Value::from(text.clone()).to_string()),
        };
        let published = export
            .rows
            .get(&key)
            .is_some_and(|row| publication.publishes(table, row));
        if published {
            rows.push(text_row(&[&text]));
        }
    }
    result_set_with(rows, TransactionStatus::InTransaction)
}

fn table_static(table: &str) -> &'static str {
    TABLES
        .iter()
        .find(|(_, t)| *t == table)
        .map_or("", |(_, t)| *t)
}
