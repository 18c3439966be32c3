//! A retraction: deleting from Feldera the keys it holds that it should not, when slotline
//! does not hold the key set. Used for a TRUNCATE (every key goes) and by a re-snapshot
//! (the keys PostgreSQL's snapshot no longer has go).
//!
//! Per table: read a page of Feldera's keys with keyset pagination in Feldera itself
//! (`RETRACT_PAGE_ROWS` at a time, `WHERE key > last ORDER BY key`), for leftovers ask
//! PostgreSQL which of them still exist (by equality under the snapshot, never by comparing
//! sort orders across systems), send a delete for each key to retract in bounded batches and
//! wait until they are durable; then the next page. Memory is one page of keys and the
//! batches in flight. Verification is a count query once the deletes are durable: a
//! TRUNCATE must leave zero rows, a re-snapshot exactly the rows it copied. An empty, short
//! or unreadable answer is never proof that nothing needs retracting.
//!
//! Owns the pages, the delete batches (its own outbox and sink: its batches never mix with
//! the stream's) and the crash points `retract_after_query` and `retract_mid_delete`. The
//! owning phase routes Feldera answers here and carries PostgreSQL questions to the
//! connection that holds the snapshot.

use super::policy::{Failure, FailureKind};
use super::sink::{Sink, SinkOutcome};
use super::{Cx, Next};
use crate::ack::BatchSeq;
use crate::config::{AckMode, CrashPoint};
use crate::contract::Name;
use crate::feldera::{classify_query, QueryOutcome, Reply};
use crate::io::{HttpId, Level, Topic};
use crate::outbox::{CutReason, Outbox};
use crate::retract::{
    count_query, existence_query, leftovers, page_query, read_count, Key, KeyPlan, LeftoverPlan,
    Page, PageQuery,
};
use crate::startup::catalog::Row;
use crate::timer::TimerTable;
use std::collections::VecDeque;

/// One table to retract.
#[derive(Debug)]
pub(crate) struct TableJob {
    pub(crate) route: usize,
    pub(crate) keys: KeyPlan,
    /// For leftovers: how to ask PostgreSQL which keys exist.
    pub(crate) leftovers: Option<LeftoverPlan>,
}

#[derive(Debug)]
enum Step {
    /// A page query is out.
    Query { http: HttpId, query: PageQuery },
    /// Waiting for PostgreSQL to say which keys of `page` exist.
    Check { page: Page },
    /// The page's keys to delete wait in `queue`, the outbox or the sink; `full` says more
    /// pages follow.
    Deleting {
        queue: VecDeque<Key>,
        full: bool,
        last: Option<Key>,
    },
    /// Nothing is out: before `start`, while an answer is being handled, and once every
    /// table's pages are done (then `jobs` is empty too: `is_done`).
    Done,
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
    page_rows: u32,
    step: Step,
    outbox: Outbox,
    sink: Sink,
    names: Vec<Name>,
    /// Keys of the current table deleted so far (for logs).
    deleted: u64,
    /// Keys of the current table Feldera held that were kept (leftovers only).
    kept: u64,
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
            page_rows: cx.env.config.retract_page_rows,
            step: Step::Done,
            outbox: Outbox::new(names.len(), cx.env.thresholds),
            sink: Sink::new(cx.env.config.max_in_flight_batches),
            names,
            deleted: 0,
            kept: 0,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        matches!(self.step, Step::Done) && self.jobs.is_empty()
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.sink.resume(cx.ctx, &cx.env.endpoint);
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        self.sink.arm(timers);
    }

    /// Asks for the first page of the first table.
    pub(crate) fn start(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        match self.jobs.front() {
            Some(job) => {
                cx.ctx.note(
                    Level::Info,
                    Topic::Retract,
                    format!("reading the keys Feldera holds in {}", job.keys.table),
                );
                self.ask_page(cx, None);
                Ok(Retracted::Waiting)
            }
            None => Ok(Retracted::Done),
        }
    }

    fn ask_page(&mut self, cx: &mut Cx<'_>, after: Option<Key>) {
        if after.is_none() {
            self.deleted = 0;
            self.kept = 0;
        }
        let Some(job) = self.jobs.front() else {
            return;
        };
        let query = page_query(&job.keys, after, self.page_rows);
        let http = cx.ctx.http_id();
        let endpoint = &cx.env.endpoint;
        let request = endpoint.query(&query.sql, super::sink::POLL_TIMEOUT_MS);
        let segment = job.keys.table.url_segment();
        cx.ctx.push_table_query(endpoint, http, request, &segment);
        self.step = Step::Query { http, query };
    }

    /// Whether `id` is this retraction's (a page query or a delete batch).
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        matches!(&self.step, Step::Query { http, .. } if *http == id) || self.sink.owns(id)
    }

    pub(crate) fn on_http(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Result<Retracted> {
        if let Step::Query { http, .. } = &self.step {
            if *http == id {
                return self.on_page(cx, reply);
            }
        }
        let now = cx.now();
        match self.sink.on_reply(cx.ctx, &cx.env.endpoint, now, id, reply) {
            Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
            None => Ok(Retracted::Waiting),
        }
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        let now = cx.now();
        match self.sink.on_timer(cx.ctx, &cx.env.endpoint, now) {
            Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
            None => Ok(Retracted::Waiting),
        }
    }

    fn on_page(&mut self, cx: &mut Cx<'_>, reply: Reply<'_>) -> Result<Retracted> {
        let Step::Query { query, .. } = std::mem::replace(&mut self.step, Step::Done) else {
            return Ok(Retracted::Waiting);
        };
        let Some(job) = self.jobs.front() else {
            return Ok(Retracted::Done);
        };
        let table = job.keys.table.clone();
        let rows = match classify_query(reply) {
            QueryOutcome::Rows(rows) => rows,
            QueryOutcome::Interrupted(e) | QueryOutcome::Transient(e) => {
                return Err(fail(
                    FailureKind::FelderaUnavailable,
                    format!("reading the keys of {table} failed: {e}; nothing is concluded from a partial answer"),
                ))
            }
            QueryOutcome::Fatal(e) => {
                return Err(fail(
                    FailureKind::FelderaRefused,
                    format!("Feldera refused the query for the keys of {table}: {e}. Nothing was acknowledged"),
                ))
            }
        };
        let page = Page::read(&job.keys, &query, rows).map_err(|e| {
            fail(
                FailureKind::FelderaUnreadable,
                format!("cannot trust Feldera's answer for the keys of {table}: {e}. Nothing was acknowledged"),
            )
        })?;
        cx.ctx.note(
            Level::Debug,
            Topic::Retract,
            format!(
                "{table}: page of {} key(s){}",
                page.keys().len(),
                if page.is_full() {
                    ", more may follow"
                } else {
                    ", the last"
                }
            ),
        );
        if cx.crash_at(CrashPoint::RetractAfterQuery) {
            return Err(Next::Crash(CrashPoint::RetractAfterQuery));
        }
        match &job.leftovers {
            Some(plan) if !page.is_empty() => {
                let sql = existence_query(plan, page.keys()).ok_or_else(|| {
                    fail(
                        FailureKind::DataRefused,
                        format!("a key of {table} cannot be written as a PostgreSQL literal"),
                    )
                })?;
                self.step = Step::Check { page };
                Ok(Retracted::AskPg(sql))
            }
            _ => {
                let full = page.is_full();
                let last = page.last().cloned();
                self.delete(cx, page.into_keys(), full, last)
            }
        }
    }

    /// PostgreSQL answered which keys of the page exist (rows of key columns).
    pub(crate) fn on_pg_answer(&mut self, cx: &mut Cx<'_>, rows: &[Row<'_>]) -> Result<Retracted> {
        let Step::Check { page } = std::mem::replace(&mut self.step, Step::Done) else {
            return Ok(Retracted::Waiting);
        };
        let Some(plan) = self.jobs.front().and_then(|j| j.leftovers.as_ref()) else {
            return Ok(Retracted::Waiting);
        };
        let gone = leftovers(plan, page.keys(), Some(rows)).map_err(|e| {
            fail(
                FailureKind::PgProtocol,
                format!(
                    "cannot read PostgreSQL's answer about the keys of {}: {e}",
                    plan.source
                ),
            )
        })?;
        self.kept += (page.keys().len() - gone.len()) as u64;
        let full = page.is_full();
        let last = page.last().cloned();
        self.delete(cx, gone, full, last)
    }

    /// Queues a delete per key; `advance` sends them in batches of at most the thresholds.
    fn delete(
        &mut self,
        cx: &mut Cx<'_>,
        keys: Vec<Key>,
        full: bool,
        last: Option<Key>,
    ) -> Result<Retracted> {
        self.deleted += keys.len() as u64;
        self.step = Step::Deleting {
            queue: keys.into(),
            full,
            last,
        };
        self.advance(cx)
    }

    /// Fills the outbox from the page's queue up to the thresholds and sends a batch
    /// whenever the sink has room; once the page's deletes are all durable, moves to the
    /// next page or table.
    fn advance(&mut self, cx: &mut Cx<'_>) -> Result<Retracted> {
        let Some(route) = self.jobs.front().map(|j| j.route) else {
            return Ok(Retracted::Done);
        };
        let Step::Deleting { queue, full, last } = &mut self.step else {
            return Ok(Retracted::Waiting);
        };
        let keys = &self.jobs[0].keys;
        while self.sink.has_room() {
            while self.outbox.due(cx.now(), false).is_none() {
                let Some(key) = queue.pop_front() else {
                    break;
                };
                let (mark, body) = self.outbox.start_line(route);
                keys.write_delete(&key, body);
                self.outbox.finish_lines(mark, 1, cx.now());
            }
            if self.outbox.is_empty() {
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
        if !queue.is_empty() || !self.outbox.is_empty() || !self.sink.is_idle() {
            return Ok(Retracted::Waiting);
        }
        // A page is finished: its keys were read, checked and the ones to go are durably
        // deleted. That is progress even when nothing was deleted (every key kept), or a
        // long check of a large table would trip the no-progress deadline.
        cx.run.progressed(cx.now());
        if *full {
            let after = last.take();
            self.ask_page(cx, after);
            return Ok(Retracted::Waiting);
        }
        if let Some(job) = self.jobs.pop_front() {
            cx.ctx.note(
                Level::Info,
                Topic::Retract,
                format!(
                    "{}: every page read; {} key(s) deleted, {} kept",
                    job.keys.table, self.deleted, self.kept
                ),
            );
        }
        match self.jobs.front() {
            Some(_) => self.start(cx),
            None => {
                self.step = Step::Done;
                Ok(Retracted::Done)
            }
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
                    .await_completion(cx.ctx, &cx.env.endpoint, seq, now, timeout_ms);
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
        cx.ctx.note(
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
        self.advance(cx)
    }
}

/// Cuts the buffered deletes into a batch and sends it.
fn cut(cx: &mut Cx<'_>, outbox: &mut Outbox, sink: &mut Sink, names: &[Name], reason: CutReason) {
    let Some(batch) = outbox.cut(reason) else {
        return;
    };
    cx.ctx.note(
        Level::Debug,
        Topic::Retract,
        format!("delete batch r{} cut: {} rows", batch.seq, batch.rows()),
    );
    sink.send(cx.ctx, &cx.env.endpoint, names, batch);
}

/// Asks Feldera how many rows `plan`'s table holds; the answer is read by `read_count_answer`.
pub(crate) fn ask_count(cx: &mut Cx<'_>, plan: &KeyPlan) -> HttpId {
    let http = cx.ctx.http_id();
    let endpoint = &cx.env.endpoint;
    let request = endpoint.query(&count_query(plan), super::sink::POLL_TIMEOUT_MS);
    cx.ctx
        .push_table_query(endpoint, http, request, &plan.table.url_segment());
    http
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
