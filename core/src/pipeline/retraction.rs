//! A retraction: deleting from Feldera the keys it holds that it should not, when slotline
//! does not hold the key set. Used for a TRUNCATE (every key goes) and by a re-snapshot
//! (the keys PostgreSQL's snapshot no longer has go).
//!
//! Per table, one query reads every key Feldera holds (`retract::scan_query`: no filter, no
//! order, no limit, since Feldera's ad-hoc engine scans the whole table for any query; see
//! docs/retraction.md), and its answer is read as a stream, piece by piece: each piece's
//! keys are turned into deletes (for leftovers, after PostgreSQL said which of them it still
//! has, `RETRACT_PAGE_ROWS` keys per question, by equality under the snapshot) before the
//! next piece is asked for, and deletes go out in bounded batches. So memory is one piece,
//! one group of keys and the batches in flight, whatever the table's size. Once the answer
//! ended and every delete is durable, the next table. Verification is a count query once
//! every table is done (the owner's): a TRUNCATE must leave zero rows, a re-snapshot exactly
//! the rows it copied. An empty, short, interrupted or unreadable answer is never proof
//! that nothing needs retracting.
//!
//! Owns the scans, the delete batches (its own outbox and sink: its batches never mix with
//! the stream's) and the crash points `retract_after_query` and `retract_mid_delete`. The
//! owning phase routes Feldera answers here and carries PostgreSQL questions to the
//! connection that holds the snapshot.

use super::cx::Cx;
use super::handover::Next;
use super::handover::TableJob;
use super::policy::{Failure, FailureKind};
use super::queue::Queue;
use super::sink::{Sink, SinkOutcome};
use crate::ack::BatchSeq;
use crate::catalog::questions::Row;
use crate::config::{AckMode, CrashPoint};
use crate::feldera::{classify_query, QueryOutcome, Reply, RowStream, StreamError};
use crate::io::{Command, HttpId, Level, Topic};
use crate::outbox::{CutReason, Outbox};
use crate::pipeline::feldera_link::FelderaLink;
use crate::retract::{
    count_query, existence_query, leftovers, read_count, read_keys, scan_query, Key, KeyPlan,
};
use crate::schema::Name;
use crate::time::Mono;
use crate::timer::TimerTable;
use std::collections::VecDeque;

/// How often a scan says how far it got.
const PROGRESS_LOG_MS: u64 = 10_000;

/// Where the scan's answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The next piece was asked for (or the query was sent): it is Feldera's move.
    Reading,
    /// A piece was read and its keys are being handled; the next is not asked for yet.
    Holding,
    /// The answer ended; every key it held was read.
    Ended,
}

/// The scan of the current table.
#[derive(Debug)]
struct Scan {
    http: HttpId,
    answer: Answer,
    reader: RowStream,
    /// Keys read so far.
    read: u64,
    /// A piece (or the end) of the answer was read.
    any_read: bool,
    /// Leftovers: keys read and not yet asked about.
    unchecked: VecDeque<Key>,
    /// Leftovers: the keys PostgreSQL is being asked about.
    checking: Option<Vec<Key>>,
    /// Keys to delete that wait for room in the outbox.
    queue: VecDeque<Key>,
    /// Deletes queued so far.
    deleted: u64,
    /// Leftovers: keys PostgreSQL still has.
    kept: u64,
    started: Mono,
    logged: Mono,
}

/// What the owning phase must do after a step.
#[derive(Debug)]
pub(crate) enum Retracted {
    /// Nothing; wait for the next answer.
    Waiting,
    /// Ask PostgreSQL this (under the snapshot) and hand the answer to `on_pg_answer`.
    AskPg(String),
    /// Every table's keys to delete are deleted and durable (or there were none). Checking
    /// the result is the owner's call: it asks Feldera for each table's count
    /// (`ask_count`, read by `read_count_answer`).
    Done,
}

#[derive(Debug)]
pub(crate) struct Retraction {
    jobs: VecDeque<TableJob>,
    /// Keys per PostgreSQL question (leftovers).
    group: usize,
    scan: Option<Scan>,
    outbox: Outbox,
    sink: Sink,
    names: Vec<Name>,
}

type Result<T> = std::result::Result<T, Next>;

fn fail(kind: FailureKind, message: impl Into<String>) -> Next {
    Next::Fail(Failure::new(kind, message))
}

impl Retraction {
    /// `names[route]` is each route's Feldera table.
    pub(crate) fn new(cx: &Cx<'_>, jobs: Vec<TableJob>, names: Vec<Name>) -> Retraction {
        Retraction {
            jobs: jobs.into(),
            group: cx.env.config.retract_page_rows.max(1) as usize,
            scan: None,
            outbox: Outbox::new(names.len(), cx.env.thresholds),
            sink: Sink::new(cx.env.config.max_in_flight_batches),
            names,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.scan.is_none() && self.jobs.is_empty()
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.sink.resume(cx.queue, cx.link);
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        self.sink.arm(timers);
    }

    /// The session ends: a scan still answering is stopped (its connection closed), so
    /// nothing more of it is read.
    pub(crate) fn close(&mut self, queue: &mut Queue, link: &mut FelderaLink) {
        if let Some(scan) = self.scan.take().filter(|s| s.answer != Answer::Ended) {
            link.cancel(queue, scan.http);
        }
    }

    /// Starts the scan of the first table.
    pub(crate) fn start(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        let Some(job) = self.jobs.front() else {
            return Ok(Retracted::Done);
        };
        cx.queue.note(
            Level::Info,
            Topic::Retract,
            format!(
                "reading every key Feldera holds in {} (one query, read as it streams)",
                job.keys.table
            ),
        );
        let timeout_ms = cx.env.config.query_timeout_secs * 1000;
        let request = cx
            .link
            .endpoint()
            .query_streamed(&scan_query(&job.keys), timeout_ms);
        let segment = job.keys.table.url_segment();
        let http = cx.link.query_table(cx.queue, &segment, request);
        let now = cx.now();
        self.scan = Some(Scan {
            http,
            answer: Answer::Reading,
            reader: RowStream::default(),
            read: 0,
            any_read: false,
            unchecked: VecDeque::new(),
            checking: None,
            queue: VecDeque::new(),
            deleted: 0,
            kept: 0,
            started: now,
            logged: now,
        });
        Ok(Retracted::Waiting)
    }

    /// Whether `id` is this retraction's (the scan or a delete batch).
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        self.scan.as_ref().is_some_and(|s| s.http == id) || self.sink.owns(id)
    }

    /// A piece of the scan's answer.
    pub(crate) fn on_chunk(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        bytes: &[u8],
    ) -> Result<Retracted> {
        let Some(scan) = self.scan.as_mut().filter(|s| s.http == id) else {
            return Ok(Retracted::Waiting);
        };
        let Some(job) = self.jobs.front() else {
            return Ok(Retracted::Waiting);
        };
        let rows = scan
            .reader
            .push(bytes)
            .map_err(|e| stream_failure(&job.keys.table, e))?;
        scan.answer = Answer::Holding;
        self.take_rows(cx, rows)?;
        self.pump(cx)
    }

    pub(crate) fn on_http(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Result<Retracted> {
        if self.scan.as_ref().is_some_and(|s| s.http == id) {
            return self.on_scan_end(cx, reply);
        }
        let now = cx.now();
        match self.sink.on_reply(cx.queue, cx.link, now, id, reply) {
            Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
            None => Ok(Retracted::Waiting),
        }
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        let now = cx.now();
        match self.sink.on_timer(cx.queue, cx.link, now) {
            Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
            None => Ok(Retracted::Waiting),
        }
    }

    /// The scan's answer ended: with its last line, or with why it failed.
    fn on_scan_end(&mut self, cx: &mut Cx<'_>, reply: Reply<'_>) -> Result<Retracted> {
        let Some(job) = self.jobs.front() else {
            return Ok(Retracted::Waiting);
        };
        let table = job.keys.table.clone();
        let body = match reply {
            Reply::Answered { status, body } if (200..300).contains(&status) => body,
            other => {
                // Not a success: the answer came whole, and says why.
                return Err(match classify_query(other) {
                    QueryOutcome::Fatal(e) => fail(
                        FailureKind::FelderaRefused,
                        format!("Feldera refused the query for the keys of {table}: {e}. Nothing was acknowledged"),
                    ),
                    QueryOutcome::Interrupted(e) | QueryOutcome::Transient(e) => fail(
                        FailureKind::FelderaUnavailable,
                        format!("reading the keys of {table} failed: {e}; nothing is concluded from a partial answer"),
                    ),
                    QueryOutcome::Rows(_) => fail(
                        FailureKind::FelderaUnavailable,
                        format!("reading the keys of {table} ended without a success"),
                    ),
                });
            }
        };
        let Some(scan) = self.scan.as_mut() else {
            return Ok(Retracted::Waiting);
        };
        // A shell may hand a short answer over whole: read it as one last piece.
        let mut rows = scan
            .reader
            .push(body)
            .map_err(|e| stream_failure(&table, e))?;
        rows.extend(
            scan.reader
                .finish()
                .map_err(|e| stream_failure(&table, e))?,
        );
        scan.answer = Answer::Ended;
        self.take_rows(cx, rows)?;
        self.pump(cx)
    }

    /// Reads a piece's rows as keys and queues them: to ask PostgreSQL about (leftovers) or
    /// to delete (TRUNCATE).
    fn take_rows(
        &mut self,
        cx: &mut Cx<'_>,
        rows: Vec<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<()> {
        let (Some(scan), Some(job)) = (self.scan.as_mut(), self.jobs.front()) else {
            return Ok(());
        };
        let first = scan.read as usize + 1;
        let keys = read_keys(&job.keys, rows, first).map_err(|e| {
            fail(
                FailureKind::FelderaUnreadable,
                format!(
                    "cannot trust Feldera's answer for the keys of {}: {e}. Nothing was acknowledged",
                    job.keys.table
                ),
            )
        })?;
        let now = cx.now();
        // Reading the table is progress, even before a delete is durable (a large table's
        // scan would otherwise trip the no-progress deadline).
        cx.run.progress.on_progress(now);
        let first_piece = !std::mem::replace(&mut scan.any_read, true);
        scan.read += keys.len() as u64;
        if job.leftovers.is_some() {
            scan.unchecked.extend(keys);
        } else {
            scan.deleted += keys.len() as u64;
            scan.queue.extend(keys);
        }
        if now.since(scan.logged) >= PROGRESS_LOG_MS * 1000 {
            scan.logged = now;
            let line = format!("{}: {}", job.keys.table, scan.progress(now));
            cx.queue.note(Level::Info, Topic::Retract, line);
        }
        if first_piece && cx.crash_at(CrashPoint::RetractAfterQuery) {
            return Err(Next::Crash(CrashPoint::RetractAfterQuery));
        }
        Ok(())
    }

    /// PostgreSQL answered which keys of the group exist (rows of key columns).
    pub(crate) fn on_pg_answer(&mut self, cx: &mut Cx<'_>, rows: &[Row<'_>]) -> Result<Retracted> {
        let (Some(scan), Some(job)) = (self.scan.as_mut(), self.jobs.front()) else {
            return Ok(Retracted::Waiting);
        };
        let (Some(group), Some(plan)) = (scan.checking.take(), job.leftovers.as_ref()) else {
            return Ok(Retracted::Waiting);
        };
        let gone = leftovers(plan, &group, Some(rows)).map_err(|e| {
            fail(
                FailureKind::PgProtocol,
                format!(
                    "cannot read PostgreSQL's answer about the keys of {}: {e}",
                    plan.source
                ),
            )
        })?;
        // A group checked is progress even when every key is kept: a long check of a large
        // table must not trip the no-progress deadline.
        cx.run.progress.on_progress(cx.now());
        scan.kept += (group.len() - gone.len()) as u64;
        scan.deleted += gone.len() as u64;
        scan.queue.extend(gone);
        self.pump(cx)
    }

    /// Moves the scan on as far as it can: asks PostgreSQL about a group, fills the outbox
    /// and sends batches while the sink has room, asks for the next piece once this one's
    /// keys are all on their way, and moves to the next table once the answer ended and
    /// every delete is durable.
    fn pump(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        let (Some(scan), Some(job)) = (self.scan.as_mut(), self.jobs.front()) else {
            return Ok(Retracted::Waiting);
        };
        let route = job.route;
        // Leftovers: a full group (or what is left once the answer ended) is asked about.
        let mut ask = None;
        if let Some(plan) = &job.leftovers {
            let ready = scan.unchecked.len() >= self.group
                || (scan.answer == Answer::Ended && !scan.unchecked.is_empty());
            if scan.checking.is_none() && ready {
                let take = scan.unchecked.len().min(self.group);
                let group: Vec<Key> = scan.unchecked.drain(..take).collect();
                match existence_query(plan, &group) {
                    Some(sql) => {
                        scan.checking = Some(group);
                        ask = Some(sql);
                    }
                    // No PostgreSQL value can equal any of them: all are leftovers.
                    None => {
                        scan.deleted += group.len() as u64;
                        scan.queue.extend(group);
                    }
                }
            }
        }
        let keys = &job.keys;
        while self.sink.has_room() {
            while self.outbox.due(cx.now(), false).is_none() {
                let Some(key) = scan.queue.pop_front() else {
                    break;
                };
                let (mark, body) = self.outbox.start_line(route);
                keys.write_delete(&key, body);
                self.outbox.finish_lines(mark, 1, cx.now());
            }
            // A batch short of the thresholds goes out only when no more keys will come.
            let last = scan.answer == Answer::Ended
                && scan.unchecked.is_empty()
                && scan.checking.is_none()
                && scan.queue.is_empty();
            let full = self.outbox.due(cx.now(), false).is_some();
            if self.outbox.is_empty() || !(full || last) {
                break;
            }
            cut(
                cx,
                &mut self.outbox,
                &mut self.sink,
                &self.names,
                CutReason::Rows,
            );
        }
        // The next piece, once this one's keys are all on their way (memory stays one
        // piece, one group and the batches in flight).
        let room = scan.unchecked.len() < self.group && scan.checking.is_none();
        if scan.answer == Answer::Holding && scan.queue.is_empty() && room {
            scan.answer = Answer::Reading;
            cx.queue.push(Command::HttpRead { id: scan.http });
        }
        let finished = scan.answer == Answer::Ended
            && scan.unchecked.is_empty()
            && scan.checking.is_none()
            && scan.queue.is_empty()
            && self.outbox.is_empty()
            && self.sink.is_idle();
        if let Some(sql) = ask {
            return Ok(Retracted::AskPg(sql));
        }
        if !finished {
            // A piece, an answer from PostgreSQL or a durable batch moves it on.
            return Ok(Retracted::Waiting);
        }
        cx.run.progress.on_progress(cx.now());
        let line = format!(
            "{}: scan ended: {}",
            job.keys.table,
            scan.progress(cx.now())
        );
        cx.queue.note(Level::Info, Topic::Retract, line);
        self.scan = None;
        self.jobs.pop_front();
        match self.jobs.front() {
            Some(_) => self.start(cx),
            None => Ok(Retracted::Done),
        }
    }

    fn on_sink_outcome(
        &mut self,
        cx: &mut Cx<'_>,
        seq: BatchSeq,
        outcome: SinkOutcome,
    ) -> Result<Retracted> {
        match outcome {
            SinkOutcome::Pending => Ok(Retracted::Waiting),
            SinkOutcome::Accepted if cx.env.config.ack_mode == AckMode::Accepted => {
                self.durable(cx, seq)
            }
            SinkOutcome::Accepted => {
                let (now, timeout_ms) = (cx.now(), cx.env.config.completion_timeout_ms);
                self.sink
                    .await_completion(cx.queue, cx.link, seq, now, timeout_ms);
                Ok(Retracted::Waiting)
            }
            SinkOutcome::Complete => self.durable(cx, seq),
            SinkOutcome::Failed(failure) => Err(Next::Fail(failure)),
        }
    }

    fn durable(&mut self, cx: &mut Cx<'_>, seq: BatchSeq) -> Result<Retracted> {
        let Some(batch) = self.sink.take(seq) else {
            return Ok(Retracted::Waiting);
        };
        cx.run.write_durable(cx.now());
        cx.queue.note(
            Level::Debug,
            Topic::Retract,
            format!(
                "delete batch r{} durable ({} rows)",
                batch.seq,
                batch.rows()
            ),
        );
        if cx.crash_at(CrashPoint::RetractMidDelete) {
            return Err(Next::Crash(CrashPoint::RetractMidDelete));
        }
        self.pump(cx)
    }
}

impl Scan {
    /// `400000 keys read, 400000 deletes sent, 0 kept in 10 s (40000 keys/s)`; the time and
    /// rate once a second has passed.
    fn progress(&self, now: Mono) -> String {
        let counts = format!(
            "{} keys read, {} deletes sent, {} kept",
            self.read, self.deleted, self.kept
        );
        let elapsed_us = now.since(self.started);
        if elapsed_us < 1_000_000 {
            return counts;
        }
        let rate = self.read.saturating_mul(1_000_000) / elapsed_us;
        format!("{counts} in {} s ({rate} keys/s)", elapsed_us / 1_000_000)
    }
}

/// A streamed answer that cannot be read on.
fn stream_failure(table: &Name, error: StreamError) -> Next {
    match error {
        StreamError::Interrupted(e) => fail(
            FailureKind::FelderaUnavailable,
            format!("reading the keys of {table} failed: {e}; nothing is concluded from a partial answer"),
        ),
        StreamError::Unreadable(what) => fail(
            FailureKind::FelderaUnreadable,
            format!("cannot trust Feldera's answer for the keys of {table}: {what}. Nothing was acknowledged"),
        ),
    }
}

/// Cuts the buffered deletes into a batch and sends it.
fn cut(cx: &mut Cx<'_>, outbox: &mut Outbox, sink: &mut Sink, names: &[Name], reason: CutReason) {
    let Some(batch) = outbox.cut(reason) else {
        return;
    };
    cx.queue.note(
        Level::Debug,
        Topic::Retract,
        format!("delete batch r{} cut: {} rows", batch.seq, batch.rows()),
    );
    sink.send(cx.queue, cx.link, names, batch);
}

/// Asks Feldera how many rows `plan`'s table holds; the answer is read by `read_count_answer`.
pub(crate) fn ask_count(cx: &mut Cx<'_>, plan: &KeyPlan) -> HttpId {
    let timeout_ms = cx.env.config.query_timeout_secs * 1000;
    let request = cx.link.endpoint().query(&count_query(plan), timeout_ms);
    cx.link
        .query_table(cx.queue, &plan.table.url_segment(), request)
}

/// Reads a count answer; any answer that is not one trustworthy number is a failure.
pub(crate) fn read_count_answer(
    table: &Name,
    reply: Reply<'_>,
) -> std::result::Result<u64, Failure> {
    match classify_query(reply) {
        QueryOutcome::Rows(rows) => read_count(&rows).map_err(|e| {
            Failure::new(
                FailureKind::FelderaUnreadable,
                format!("cannot trust Feldera's count of {table}: {e}"),
            )
        }),
        QueryOutcome::Interrupted(e) | QueryOutcome::Transient(e) => Err(Failure::new(
            FailureKind::FelderaUnavailable,
            format!("counting the rows of {table} failed: {e}"),
        )),
        QueryOutcome::Fatal(e) => Err(Failure::new(
            FailureKind::FelderaRefused,
            format!("Feldera refused to count the rows of {table}: {e}"),
        )),
    }
}
