//! Reading one table's chunks on a connection of their own: the conversation of
//! docs/online-copy.md, "One chunk on a primary" (and its hot-standby form), driven by the
//! connection's events. Hands back each chunk with what judges it at its high watermark;
//! never sees the stream and never decides what a chunk's rows mean.
//!
//! On a primary a chunk is two queries: its short transaction (snapshot, keyset COPY, the
//! committed-but-running xids, `COMMIT`) in one string, then the high watermark, written only
//! once the rows are here, so the stream cannot reach it before the chunk is complete. On a
//! hot standby it is one string: the replay position, the COPY, the replay position again.

use super::key::{copy_row_key, RowKey};
use super::keyset;
use super::xid::TxSnapshot;
use crate::catalog::questions::QualifiedName;
use crate::conn::Event;
use crate::copy::CopyRow;
use crate::pgoutput::Relation;
use crate::wire::{PgError, TransactionStatus};
use crate::Lsn;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::fmt;

/// The watermark messages' prefix in the WAL.
pub const WATERMARK_PREFIX: &str = "slotline";

/// What is copied: the table as the publication publishes it, and its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpec {
    /// The published columns, in the table's order (`snapshot::sql::copy_range`).
    pub relation: Relation,
    /// What COPY reads from: the table itself (a partitioned table is read at its root).
    pub heap: QualifiedName,
    /// The primary key's positions in `relation.columns`, in key order.
    pub key: Vec<usize>,
    /// The publication's row filter, as PostgreSQL prints it.
    pub filter: Option<String>,
    /// Rows per chunk.
    pub limit: u64,
}

/// Where chunks are read, which decides how a chunk is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A primary: watermarks are logical messages, `flush` on PostgreSQL 17+.
    Primary { flush: bool },
    /// A hot standby: no messages; the replay positions around the read.
    Standby,
}

/// How the stream judges a chunk once it reaches the chunk's high watermark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judge {
    /// `window::Retained::close_by_snapshot`, at the message the stream carries at `high`
    /// with `content`.
    Snapshot {
        snapshot: TxSnapshot,
        committed_in_progress: BTreeSet<u64>,
        high: Lsn,
        content: String,
    },
    /// `window::Retained::close_by_positions`, once the stream has passed `after_read`.
    Positions { before_read: Lsn, after_read: Lsn },
}

/// One chunk read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Numbered from 0 per reader.
    pub number: u64,
    /// The key the chunk started after (`None`: the table's first).
    pub after: Option<Vec<String>>,
    /// Each row's key and its COPY line, in key order.
    pub rows: Vec<(RowKey, Bytes)>,
    /// Fewer rows than the limit: the table ends with this chunk.
    pub last: bool,
    pub judge: Judge,
}

impl Chunk {
    /// The key the next chunk starts after: this chunk's last row's, or where it started.
    pub fn end_key(&self) -> Option<Vec<String>> {
        match self.rows.last() {
            Some((key, _)) => Some(key_text(key)),
            None => self.after.clone(),
        }
    }
}

/// A key's columns as text, for the next chunk's literals. The session's client encoding
/// is UTF8 (pinned), so the text is valid UTF-8.
pub fn key_text(key: &RowKey) -> Vec<String> {
    key.0
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// Why a chunk could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The server refused a statement; the chunk can be read again (the reader rolled its
    /// transaction back first).
    Server(Box<PgError>),
    /// An answer that is not what the statement returns (a bad snapshot, a row without its
    /// key, an LSN that does not parse).
    Answer(String),
    /// The table's spec cannot be written as SQL.
    Unwritable(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Server(e) => write!(f, "PostgreSQL refused a chunk read: {e}"),
            ReadError::Answer(what) => write!(f, "unexpected answer to a chunk read: {what}"),
            ReadError::Unwritable(what) => write!(f, "cannot write a chunk read: {what}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Nothing running; the next query is the next chunk's (or the rollback after an error).
    Idle,
    /// The chunk's read is running; `statement` counts the statements finished.
    Reading { statement: usize },
    /// The rows are in; the high watermark is the next query.
    Mark,
    /// The high watermark is being written.
    Marking,
    /// A failed chunk's transaction is being rolled back.
    RollingBack,
    /// The table's last chunk was read.
    Finished,
}

/// Reads one table's chunks, one at a time.
#[derive(Debug)]
pub struct Reader {
    spec: TableSpec,
    source: Source,
    /// Unique per run (a watermark's content names it with the chunk's number).
    run: String,
    after: Option<Vec<String>>,
    number: u64,
    stage: Stage,
    rollback: bool,
    row: CopyRow,
    rows: Vec<(RowKey, Bytes)>,
    values: Vec<String>,
    snapshot: Option<TxSnapshot>,
    committed: BTreeSet<u64>,
    before_read: Option<Lsn>,
    error: Option<ReadError>,
    /// Rows and chunks read so far (including chunks read again).
    pub rows_read: u64,
    pub chunks_read: u64,
}

impl Reader {
    /// A reader starting after `after` (a resumed copy's last durable key), `run` naming
    /// this run in its watermarks.
    pub fn new(
        spec: TableSpec,
        source: Source,
        run: impl Into<String>,
        after: Option<Vec<String>>,
    ) -> Reader {
        Reader {
            spec,
            source,
            run: run.into(),
            after,
            number: 0,
            stage: Stage::Idle,
            rollback: false,
            row: CopyRow::new(),
            rows: Vec::new(),
            values: Vec::new(),
            snapshot: None,
            committed: BTreeSet::new(),
            before_read: None,
            error: None,
            rows_read: 0,
            chunks_read: 0,
        }
    }

    /// Every chunk was read (the last one was short).
    pub fn finished(&self) -> bool {
        self.stage == Stage::Finished
    }

    /// Nothing runs on the connection and no query is due: the next chunk may be asked
    /// for (or every chunk was read).
    pub fn idle(&self) -> bool {
        matches!(self.stage, Stage::Idle | Stage::Finished) && !self.rollback
    }

    /// A chunk's read or its watermark is under way on the connection (a rewind waits for
    /// it: the read's end would move the reader past the rewind).
    pub fn reading(&self) -> bool {
        !matches!(self.stage, Stage::Idle | Stage::Finished)
    }

    /// Reads again from `after` (a chunk that had to be read again, or an emission that did
    /// not become durable before a session ended).
    pub fn rewind(&mut self, after: Option<Vec<String>>) {
        self.after = after;
        if self.stage == Stage::Finished {
            self.stage = Stage::Idle;
        }
    }

    /// The watermark content of chunk `number`.
    pub fn content(&self, number: u64) -> String {
        format!("chunk {} {}", self.run, number)
    }

    /// The next query to send: the high watermark once the rows are in, the rollback of a
    /// chunk that failed, or (when idle) the next chunk's read, which the caller asks for
    /// only when it wants another chunk.
    pub fn next_query(&mut self) -> Result<Option<String>, ReadError> {
        if self.stage == Stage::Mark {
            let content = self.content(self.number);
            let Source::Primary { flush } = self.source else {
                unreachable!("only a primary's chunk is marked");
            };
            let sql = keyset::watermark(WATERMARK_PREFIX, &content, flush)
                .ok_or_else(|| ReadError::Unwritable("the watermark's content".into()))?;
            self.stage = Stage::Marking;
            return Ok(Some(sql));
        }
        if self.stage != Stage::Idle {
            return Ok(None);
        }
        if std::mem::take(&mut self.rollback) {
            self.stage = Stage::RollingBack;
            return Ok(Some("ROLLBACK".to_owned()));
        }
        let copy = keyset::chunk_copy(
            &self.spec.relation,
            &self.spec.heap,
            &self.spec.key,
            self.spec.filter.as_deref(),
            self.after.as_deref(),
            self.spec.limit,
        )
        .ok_or_else(|| {
            ReadError::Unwritable(format!(
                "{}.{}: a name or key that cannot be quoted",
                self.spec.heap.schema, self.spec.heap.table
            ))
        })?;
        let sql = match self.source {
            Source::Primary { .. } => format!(
                "{}; {copy}; {}; COMMIT",
                keyset::chunk_begin(),
                keyset::committed_but_running_query()
            ),
            Source::Standby => format!("{REPLAY}; {copy}; {REPLAY}"),
        };
        self.stage = Stage::Reading { statement: 0 };
        self.rows.clear();
        self.values.clear();
        self.snapshot = None;
        self.committed.clear();
        self.before_read = None;
        self.error = None;
        Ok(Some(sql))
    }

    /// One event of the chunk connection. Returns a chunk once it is read (and, on a
    /// primary, its high watermark written), or why it could not be; then the next query
    /// may be sent. `Ok(None)` with a query from [`Reader::next_query`] means: send it.
    pub fn on_event(&mut self, event: &Event) -> Result<Option<Chunk>, ReadError> {
        match (self.stage, event) {
            (Stage::Reading { statement }, Event::DataRow(row)) => {
                let text = row
                    .columns
                    .first()
                    .and_then(|c| c.as_ref())
                    .map(|c| String::from_utf8_lossy(c).into_owned());
                self.on_value(statement, text);
            }
            (Stage::Marking, Event::DataRow(row)) => {
                if let Some(Some(c)) = row.columns.first() {
                    self.values.push(String::from_utf8_lossy(c).into_owned());
                }
            }
            (Stage::Reading { .. }, Event::CopyOutData(line)) => self.on_copy_line(line),
            (Stage::Reading { statement }, Event::CommandComplete { .. }) => {
                self.stage = Stage::Reading {
                    statement: statement + 1,
                };
            }
            (Stage::Reading { .. } | Stage::Marking, Event::QueryError(e)) => {
                self.error = Some(ReadError::Server(e.clone()));
            }
            (Stage::Reading { .. }, Event::QueryDone { transaction }) => {
                if let Some(e) = self.error.take() {
                    self.rollback = *transaction != TransactionStatus::Idle;
                    self.stage = Stage::Idle;
                    return Err(e);
                }
                return self.read_done();
            }
            (Stage::RollingBack, Event::QueryDone { .. }) => self.stage = Stage::Idle,
            (Stage::Marking, Event::QueryDone { .. }) => {
                if let Some(e) = self.error.take() {
                    self.stage = Stage::Idle;
                    return Err(e);
                }
                return self.marked();
            }
            _ => {}
        }
        Ok(None)
    }

    /// A single-value row of statement `statement` of the read.
    fn on_value(&mut self, statement: usize, text: Option<String>) {
        let Some(text) = text else {
            self.error
                .get_or_insert(ReadError::Answer("a NULL where a value was due".into()));
            return;
        };
        match (self.source, statement) {
            // BEGIN; snapshot; COPY; committed-but-running; COMMIT
            (Source::Primary { .. }, 1) => match TxSnapshot::parse(&text) {
                Ok(s) => self.snapshot = Some(s),
                Err(e) => {
                    self.error.get_or_insert(ReadError::Answer(e.to_string()));
                }
            },
            (Source::Primary { .. }, 3) => match text.parse::<u64>() {
                Ok(x) => {
                    self.committed.insert(x);
                }
                Err(_) => {
                    self.error
                        .get_or_insert(ReadError::Answer(format!("{text:?} is not an xid")));
                }
            },
            // replay position; COPY; replay position
            (Source::Standby, 0 | 2) => self.values.push(text),
            _ => {
                self.error
                    .get_or_insert(ReadError::Answer(format!("an unexpected row {text:?}")));
            }
        }
    }

    fn on_copy_line(&mut self, line: &Bytes) {
        let columns = self.spec.relation.columns.len();
        let key = match self.row.parse(line, columns) {
            Ok(()) => copy_row_key(&self.row, &self.spec.key),
            Err(e) => {
                self.error.get_or_insert(ReadError::Answer(format!(
                    "a COPY row that does not parse: {e}"
                )));
                return;
            }
        };
        match key {
            Some(key) => {
                self.rows.push((key, line.clone()));
            }
            None => {
                self.error
                    .get_or_insert(ReadError::Answer("a COPY row without its key".into()));
            }
        }
    }

    /// The read's query finished.
    fn read_done(&mut self) -> Result<Option<Chunk>, ReadError> {
        match self.source {
            Source::Primary { .. } => {
                if self.snapshot.is_none() {
                    self.stage = Stage::Idle;
                    return Err(ReadError::Answer("the chunk's snapshot is missing".into()));
                }
                self.stage = Stage::Mark;
                self.values.clear();
                Ok(None)
            }
            Source::Standby => {
                let positions: Result<Vec<Lsn>, String> = self
                    .values
                    .iter()
                    .map(|v| v.parse::<Lsn>().map_err(|_| format!("{v:?} is not an LSN")))
                    .collect();
                self.stage = Stage::Idle;
                match positions.map_err(ReadError::Answer)?.as_slice() {
                    [before_read, after_read] => Ok(Some(self.finish(Judge::Positions {
                        before_read: *before_read,
                        after_read: *after_read,
                    }))),
                    other => Err(ReadError::Answer(format!(
                        "{} replay positions where two were due",
                        other.len()
                    ))),
                }
            }
        }
    }

    /// The high watermark was written.
    fn marked(&mut self) -> Result<Option<Chunk>, ReadError> {
        self.stage = Stage::Idle;
        let high = match self.values.as_slice() {
            [lsn] => lsn
                .parse::<Lsn>()
                .map_err(|_| ReadError::Answer(format!("{lsn:?} is not an LSN")))?,
            other => {
                return Err(ReadError::Answer(format!(
                    "{} watermark positions where one was due",
                    other.len()
                )))
            }
        };
        let judge = Judge::Snapshot {
            snapshot: self.snapshot.take().expect("checked before marking"),
            committed_in_progress: std::mem::take(&mut self.committed),
            high,
            content: self.content(self.number),
        };
        Ok(Some(self.finish(judge)))
    }

    fn finish(&mut self, judge: Judge) -> Chunk {
        let rows = std::mem::take(&mut self.rows);
        let last = (rows.len() as u64) < self.spec.limit;
        let chunk = Chunk {
            number: self.number,
            after: self.after.clone(),
            rows,
            last,
            judge,
        };
        self.number += 1;
        self.chunks_read += 1;
        self.rows_read += chunk.rows.len() as u64;
        self.after = chunk.end_key();
        if last {
            self.stage = Stage::Finished;
        }
        chunk
    }
}

/// A hot standby's replay position.
const REPLAY: &str = "SELECT pg_last_wal_replay_lsn()::text";

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
