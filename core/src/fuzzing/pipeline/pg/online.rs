//! The online copy's connection as the fake PostgreSQL answers it (docs/online-copy.md,
//! "One chunk on a primary"): the copier's first question, each chunk's read, and each
//! chunk's high watermark.
//!
//! - The probe answers that the role sees every wait and that no synchronous standby is
//!   configured.
//! - A chunk is read when its query arrives, as of every transaction committed by then: the
//!   fake commits a transaction whole at its `Tx` event (its commit record and its
//!   visibility are one instant, and nothing runs in between), so the snapshot is
//!   `x:x:` with `x` the next xid, which sees every transaction committed before and none
//!   after, and no transaction is running, committed or waiting for a standby. Its rows are
//!   items (the only table the model copies online) inside the publication's filter, after
//!   the key the query starts from, in key order, at most the query's `LIMIT`.
//! - The watermark is a non-transactional logical message appended to the WAL when it is
//!   asked for: a streaming session gets it at the end of its queue, after every
//!   transaction committed before and before every later one, and a later
//!   `START_REPLICATION` sends it again when it lies at or after the slot's position.
//!
//! The chunk's and the watermark's answers wait on the copier's connection for deliveries,
//! like the stream's bytes, so the fuzz input decides whether the stream carries the
//! watermark before its answer arrives (a chunk judged late) or after; transactions
//! committed between a chunk's read and its watermark are its window.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::super::catalog::{result_set, result_set_with, text_row};
use super::super::publication::evaluate;
use super::super::workload::Key;
use super::{send, FakePg, Mark, Piece, Tx, RECORD};
use crate::backfill::chunk::WATERMARK_PREFIX;
use crate::backfill::keyset;
use crate::io::ConnId;
use crate::pgoutput::encode;
use crate::wire::backend::{BackendMessage, CopyResponse, TransactionStatus};
use crate::wire::testing::encode_backend;
use crate::Lsn;

/// The copier's first question (`streaming::copier`'s `PROBE`).
const PROBE: &str = "SELECT pg_has_role('pg_read_all_stats', 'USAGE')::text, \
     current_setting('synchronous_standby_names')";
/// The start of a watermark without `flush` (the fake reports no `server_version`, so the
/// pipeline takes it for one before 17).
const WATERMARK: &str = "SELECT pg_logical_emit_message(false, 'slotline', '";
/// The key condition of a chunk after the first, before its value.
const AFTER: &str = "(\"sku\") > (";

/// A chunk read whose watermark is not written yet: the keys it covers.
#[derive(Clone, Debug)]
struct Window {
    after: Option<String>,
    /// Its last row's key, `None` without rows.
    last: Option<String>,
    /// Fewer rows than its limit: it covers every key after `after`.
    short: bool,
}

impl Window {
    fn covers(&self, sku: &str) -> bool {
        self.after.as_deref().is_none_or(|after| sku > after)
            && (self.short || self.last.as_deref().is_some_and(|last| sku <= last))
    }
}

/// What the online copy did on the fake server, and what the harness needs of it.
#[derive(Debug, Default)]
pub(in super::super) struct Online {
    /// Chunk reads answered.
    pub(in super::super) chunks: u32,
    /// Watermarks written.
    pub(in super::super) watermarks: u32,
    /// Transactions that changed a key of a chunk between its read and its watermark.
    pub(in super::super) window_changes: u32,
    /// Watermark messages the stream delivered before the copier had its answer.
    pub(in super::super) late: u32,
    /// A connection's first chunk read started after a key (a copy going on).
    pub(in super::super) resumed_reads: u32,
    /// Whether the stream delivered the run's first watermark before the copier had its
    /// answer (once one of them arrived).
    pub(in super::super) first_late: Option<bool>,
    first: Option<Lsn>,
    /// The chunk read whose watermark is due.
    window: Option<Window>,
    /// Connections that have read a chunk.
    readers: BTreeSet<ConnId>,
    /// Watermarks whose answer the copier has not received, by position.
    unanswered: BTreeMap<Lsn, ConnId>,
    /// Watermark positions the pipeline read from the stream: in any slot's life, and in
    /// the current slot's.
    read: BTreeSet<Lsn>,
    life_read: BTreeSet<Lsn>,
}

impl Online {
    /// The stream delivered the watermark message at `at`, from the current slot's life or
    /// not.
    pub(super) fn on_watermark_read(&mut self, at: Lsn, current: bool) {
        self.read.insert(at);
        if current {
            self.life_read.insert(at);
        }
        if self.unanswered.remove(&at).is_some() {
            self.late += 1;
            self.settle_first(at, true);
        }
    }

    fn settle_first(&mut self, at: Lsn, late: bool) {
        if self.first == Some(at) && self.first_late.is_none() {
            self.first_late = Some(late);
        }
    }

    /// The copier's connection delivered the watermark's answer.
    pub(super) fn on_watermark_answered(&mut self, at: Lsn) {
        if self.unanswered.remove(&at).is_some() {
            self.settle_first(at, false);
        }
    }

    /// A transaction committed that changed `keys`.
    pub(super) fn on_commit(&mut self, keys: &[Key]) {
        let Some(window) = &self.window else {
            return;
        };
        let inside = keys.iter().any(|(table, key)| {
            *table == "items"
                && serde_json::from_str::<String>(key).is_ok_and(|sku| window.covers(&sku))
        });
        if inside {
            self.window_changes += 1;
        }
    }

    /// A slot is created: its life's positions start afresh.
    pub(super) fn new_life(&mut self) {
        self.life_read.clear();
    }

    /// Whether `flush` may be where a chunk of the online copy was placed: one byte past a
    /// position the pipeline read (`told`, or a watermark), once a chunk was read
    /// (`streaming::copier`: past the furthest position read or acknowledged). `current`:
    /// watermarks of the current slot's life only.
    pub(in super::super) fn placed(&self, flush: Lsn, told: &BTreeSet<Lsn>, current: bool) -> bool {
        let Some(before) = flush.0.checked_sub(1).filter(|_| self.chunks > 0) else {
            return false;
        };
        let read = if current { &self.life_read } else { &self.read };
        told.contains(&Lsn(before)) || read.contains(&Lsn(before))
    }
}

fn done(tag: &str) -> BackendMessage {
    BackendMessage::CommandComplete {
        tag: tag.to_owned(),
    }
}

/// A result set inside the chunk's transaction, without its ReadyForQuery (one query
/// string answers with one at its end).
fn statement(rows: Vec<Vec<Option<String>>>) -> Vec<BackendMessage> {
    let mut messages = result_set_with(rows, TransactionStatus::InTransaction);
    messages.pop();
    messages
}

/// The key a chunk starts after, from its condition `("sku") > ('<text>')`.
fn after_value(condition: &str) -> Option<String> {
    let literal = condition.strip_prefix(AFTER)?.strip_suffix(')')?;
    let text = literal.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(text.replace("''", "'"))
}

impl FakePg {
    /// Answers `sql` on a plain connection when it is the online copier's; false when it
    /// is not.
    pub(super) fn on_online_query(&mut self, id: ConnId, sql: &str) -> bool {
        if sql == PROBE {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.copying = true;
            }
            self.answer(id, &result_set(vec![text_row(&["true", ""])]));
        } else if let Some(rest) = sql.strip_prefix(keyset::chunk_begin()) {
            self.read_chunk(id, rest);
        } else if let Some(rest) = sql.strip_prefix(WATERMARK) {
            self.write_watermark(id, rest);
        } else if sql.starts_with("SELECT pg_logical_emit_message") {
            panic!(
                "a watermark the fake does not know (another prefix, or flush before 17): {sql}"
            );
        } else {
            return false;
        }
        true
    }

    /// A chunk's read (`rest`: its query string after the snapshot's statement).
    fn read_chunk(&mut self, id: ConnId, rest: &str) {
        let tail = format!(
            ") TO STDOUT; {}; COMMIT",
            keyset::committed_but_running_query()
        );
        let Some(inner) = rest
            .strip_prefix("; COPY (")
            .and_then(|r| r.strip_suffix(tail.as_str()))
        else {
            panic!("a chunk read the fake cannot read: {rest}");
        };
        let Some((body, order)) = inner.rsplit_once(" ORDER BY ") else {
            panic!("a chunk read without its key order: {inner}");
        };
        let Some(("\"sku\"", limit)) = order.split_once(" LIMIT ") else {
            panic!("a chunk read not in items' key order (the model copies only items online): {inner}");
        };
        let Ok(limit) = limit.parse::<usize>() else {
            panic!("a chunk read with a limit the fake cannot read: {inner}");
        };
        assert!(
            body.contains(" FROM \"public\".\"items\""),
            "an online copy of a table the model does not copy online: {inner}"
        );
        // The key condition, the last one when there is one; the rest is what the
        // publication's filter must be, as for any COPY.
        let (select, conditions) = match body.split_once(" WHERE ") {
            Some((select, conditions)) => (select, conditions.split(" AND ").collect()),
            None => (body, Vec::new()),
        };
        let mut others: Vec<&str> = Vec::new();
        let mut after = None;
        for condition in conditions {
            match condition.starts_with(AFTER) {
                true => {
                    assert!(
                        after.is_none(),
                        "a chunk read with two key conditions: {inner}"
                    );
                    let Some(value) = after_value(condition) else {
                        panic!("a key condition the fake cannot read: {inner}");
                    };
                    after = Some(value);
                }
                false => {
                    assert!(
                        after.is_none(),
                        "a chunk read with a condition after its key's: {inner}"
                    );
                    others.push(condition);
                }
            }
        }
        let copy = match others.is_empty() {
            true => format!("{select}) TO STDOUT"),
            false => format!("{select} WHERE {}) TO STDOUT", others.join(" AND ")),
        };
        let publication = self.workload.publication;
        let filter = publication.check_copy("items", &copy);
        let mut rows: Vec<(String, serde_json::Value)> = self
            .workload
            .tables()
            .into_iter()
            .filter(|(key, _)| key.0 == "items")
            .filter_map(|(_, row)| {
                let sku = row.get("sku")?.as_str()?.to_owned();
                Some((sku, row))
            })
            .filter(|(sku, _)| after.as_deref().is_none_or(|after| sku.as_str() > after))
            .filter(|(_, row)| filter.as_deref().is_none_or(|f| evaluate(f, row)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows.truncate(limit);
        // Every transaction committed so far is visible, none is running.
        let snapshot = format!("{0}:{0}:", self.next_xid);
        let mut messages = vec![done("BEGIN")];
        messages.extend(statement(vec![text_row(&[&snapshot])]));
        messages.push(BackendMessage::CopyOutResponse(CopyResponse {
            format: 0,
            column_formats: vec![0; publication.columns("items").len()],
        }));
        for (_, row) in &rows {
            let line = publication.copy_line("items", row);
            messages.push(BackendMessage::CopyData(Bytes::from(line)));
        }
        messages.push(BackendMessage::CopyDone);
        messages.push(done(&format!("COPY {}", rows.len())));
        messages.extend(statement(Vec::new()));
        messages.push(done("COMMIT"));
        messages.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
        self.online.chunks += 1;
        if self.online.readers.insert(id) && after.is_some() {
            self.online.resumed_reads += 1;
        }
        self.online.window = Some(Window {
            after,
            last: rows.last().map(|(sku, _)| sku.clone()),
            short: rows.len() < limit,
        });
        self.queue_waiting(id, &messages, Mark::Plain);
    }

    /// A chunk's watermark (`rest`: after the prefix's argument's opening quote).
    fn write_watermark(&mut self, id: ConnId, rest: &str) {
        let Some(content) = rest.strip_suffix("')::text") else {
            panic!("a watermark the fake cannot read: {rest}");
        };
        assert!(
            !content.contains('\''),
            "a watermark whose content the fake cannot read: {content}"
        );
        let at = Lsn(self.head.0 + RECORD);
        self.head = Lsn(at.0 + RECORD);
        let payload = encode::logical_message(false, at, WATERMARK_PREFIX, content.as_bytes());
        // Sent again by a stream that starts at or before it.
        let tx = Tx {
            end: Lsn(at.0 + 1),
            commit: at,
            markers: Vec::new(),
            retracted: Vec::new(),
            pieces: vec![Piece::Message {
                at,
                relations: Vec::new(),
                payload,
                mark: Mark::Watermark(at),
            }],
        };
        let (head, publication) = (self.head, self.workload.publication);
        if let Some(conn) = self.streaming_session() {
            send(conn, &tx, head, &publication);
        }
        self.wal.push(tx);
        self.online.watermarks += 1;
        self.online.first.get_or_insert(at);
        self.online.window = None;
        self.online.unanswered.insert(at, id);
        let answer = result_set(vec![text_row(&[&at.to_string()])]);
        self.queue_waiting(id, &answer, Mark::WatermarkAnswer(at));
    }

    /// Queues `messages` on `id` to wait for deliveries, `last` marking the end of the
    /// last one.
    fn queue_waiting(&mut self, id: ConnId, messages: &[BackendMessage], last: Mark) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.copying = true;
        let n = messages.len();
        for (i, message) in messages.iter().enumerate() {
            let mark = if i + 1 == n { last } else { Mark::Plain };
            conn.push(&encode_backend(message), mark);
        }
    }
}
