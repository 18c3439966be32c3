//! The Streaming phase: XLogData and keepalives from the replication connection, converted
//! on arrival into the outbox, cut into batches, sent through the sink, and acknowledged to
//! PostgreSQL once durable. The ordered steps of a batch are where the streaming crash
//! points sit (`before_send`, `after_send`, `after_complete`, `after_ack`).
//!
//! Backpressure: events wait in a backlog (and reading is paused) while the sink is full and
//! the outbox is already due (rows, bytes, or a commit with `BATCH_LINGER_MS=0`), so memory
//! stays bounded by the thresholds whatever the transaction size. While draining (graceful
//! stop) nothing more is read.
//!
//! Owns the replication connection, the relation cache, the outbox and the sink for one
//! session. The positions live in the run's ack tracker, which alone decides how far the
//! flush position may move; this phase reports it.

use super::ctx::Ctx;
use super::pg::{conn_failure, PgLink};
use super::policy::{Failure, FailureKind};
use super::retraction::TableJob;
use super::sink::{Sink, SinkOutcome};
use super::starting::StreamStart;
use super::{Cx, Next};
use crate::ack::{AckTracker, Advance, BatchSeq};
use crate::config::{AckMode, CrashPoint};
use crate::conn::Event;
use crate::contract::mapping::{plan_mapping, ColumnMapping, MappingOptions};
use crate::contract::schema::Table;
use crate::contract::Name;
use crate::convert::Converter;
use crate::feldera::Reply;
use crate::io::{ConnFailure, HttpId, Level, Topic};
use crate::outbox::{CutReason, Outbox};
use crate::pgoutput::{self, Message, RelationCache, RelationChange, Truncate};
use crate::retract::plan_keys;
use crate::status::StatusSchedule;
use crate::timer::{TimerKind, TimerTable};
use crate::wire::{PrimaryKeepalive, StatusUpdate, XLogData};
use crate::Lsn;
use std::collections::{BTreeMap, VecDeque};

/// How many batches may be in flight at once.
const SINK_WINDOW: usize = 1;

#[derive(Debug)]
pub(crate) struct Streaming {
    repl: PgLink,
    status: StatusSchedule,
    relations: RelationCache,
    /// Route index and mapping of every relation seen in this session.
    mapped: BTreeMap<u32, (usize, ColumnMapping)>,
    /// Each route's Feldera table, as the schema describes it.
    tables: Vec<Table>,
    backlog: VecDeque<Event>,
    paused: bool,
    /// `BATCH_LINGER_MS=0`: a commit was read and its rows wait to be cut.
    cut_at_commit: bool,
    slot_confirmed_at_start: Lsn,
    /// A keepalive found this session with nothing open, buffered or in flight: the stream
    /// is caught up. Until then a new session may still be about to replay.
    caught_up: bool,
    /// The flush position of the last status update sent.
    reported: Option<Lsn>,
    outbox: Outbox,
    sink: Sink,
    /// A graceful stop: nothing more is read; what is buffered goes out.
    draining: bool,
    /// A retraction (TRUNCATE) runs: the stream waits where it is.
    held: bool,
}

type Step = Result<(), Next>;

fn fail(kind: FailureKind, message: impl Into<String>) -> Step {
    Err(Next::Fail(Failure::new(kind, message)))
}

fn next_of(step: Step) -> Next {
    step.err().unwrap_or(Next::Stay)
}

impl Streaming {
    /// The stream is open: streaming starts from the slot's confirmed position, with the
    /// events that arrived together with the stream's opening.
    pub(crate) fn start(cx: &mut Cx<'_>, repl: PgLink, start: StreamStart) -> (Streaming, Next) {
        let ready = start.ready;
        cx.run.ack.observe_confirmed(ready.slot_confirmed);
        let status = StatusSchedule::new(cx.now(), ready.wal_sender_timeout_ms);
        cx.ctx.log(
            Level::Info,
            format!(
                "streaming from slot {} (confirmed {}); status every {} ms",
                cx.env.config.slot,
                ready.slot_confirmed,
                status.interval_us() / 1000
            ),
        );
        let mut streaming = Streaming {
            repl,
            status,
            relations: RelationCache::new(),
            mapped: BTreeMap::new(),
            tables: ready.tables,
            backlog: start.pending.into(),
            paused: false,
            cut_at_commit: false,
            slot_confirmed_at_start: ready.slot_confirmed,
            caught_up: false,
            reported: None,
            outbox: Outbox::after(cx.env.routes.len(), cx.env.thresholds, cx.run.last_cut),
            sink: Sink::new(SINK_WINDOW),
            draining: false,
            held: false,
        };
        let next = next_of(streaming.pump(cx));
        (streaming, next)
    }

    pub(crate) fn conn(&self) -> crate::io::ConnId {
        self.repl.id
    }

    pub(crate) fn buffered_rows(&self) -> u64 {
        self.outbox.rows()
    }

    pub(crate) fn batch_in_flight(&self) -> Option<BatchSeq> {
        self.sink.oldest().map(|b| b.seq)
    }

    pub(crate) fn slot_confirmed_at_start(&self) -> Lsn {
        self.slot_confirmed_at_start
    }

    pub(crate) fn reported(&self) -> Option<Lsn> {
        self.reported
    }

    /// Whether anything waits to become durable, or the stream has not shown it is caught
    /// up (a keepalive found nothing pending). A caught-up stream is progress; a fresh
    /// session that may be about to replay is not.
    pub(crate) fn has_pending_work(&self, ack: &AckTracker) -> bool {
        !self.caught_up
            || !self.sink.is_idle()
            || !self.outbox.is_empty()
            || ack.in_transaction()
            || ack.pending_commits() > 0
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        timers.set(TimerKind::StatusInterval, self.status.next_at());
        if self.sink.has_room() {
            if let Some(at) = self.outbox.linger_deadline() {
                timers.set(TimerKind::Linger, at);
            }
        }
        self.sink.arm(timers);
    }

    /// Closes the replication connection; returns the last batch number used.
    pub(crate) fn close(mut self, ctx: &mut Ctx) -> BatchSeq {
        self.repl.close(ctx);
        self.outbox.last_cut_seq()
    }

    // ---- input ----

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let events = self.repl.on_bytes(cx.ctx, bytes);
        self.backlog.extend(events);
        next_of(self.pump(cx))
    }

    pub(crate) fn on_pg_closed(&mut self, cx: &mut Cx<'_>, error: Option<ConnFailure>) -> Next {
        self.repl.closed(cx.ctx, error, "replication connection")
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        let now = cx.now();
        match self.sink.on_reply(cx.ctx, &cx.env.endpoint, now, id, reply) {
            Some((seq, outcome)) => next_of(self.on_sink_outcome(cx, seq, outcome)),
            None => Next::Stay,
        }
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Next {
        let step = match kind {
            TimerKind::StatusInterval => self.send_status(cx),
            TimerKind::Linger => self.maybe_flush(cx),
            TimerKind::CompletionPoll
            | TimerKind::CompletionTimeout
            | TimerKind::SlowCompletionLog => {
                let now = cx.now();
                match self.sink.on_timer(cx.ctx, &cx.env.endpoint, now) {
                    Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        };
        next_of(step)
    }

    // ---- reading the stream ----

    /// Whether stream events must wait: the sink is full and the outbox is already due by
    /// size or by a commit boundary, or a graceful stop stopped reading.
    fn blocked(&self, cx: &Cx<'_>) -> bool {
        if self.draining || self.held {
            return true;
        }
        !self.sink.has_room()
            && matches!(
                self.outbox.due(cx.now(), self.cut_at_commit),
                Some(CutReason::Rows | CutReason::Bytes | CutReason::Commit)
            )
    }

    /// Handles backlogged stream events until the backlog is empty or must wait.
    fn pump(&mut self, cx: &mut Cx<'_>) -> Step {
        loop {
            if self.blocked(cx) {
                if !self.backlog.is_empty() && !self.paused {
                    self.paused = true;
                    self.repl.pause_read(cx.ctx);
                }
                return Ok(());
            }
            let Some(event) = self.backlog.pop_front() else {
                if self.paused {
                    self.paused = false;
                    self.repl.resume_read(cx.ctx);
                }
                return Ok(());
            };
            self.on_stream_event(cx, event)?;
        }
    }

    fn on_stream_event(&mut self, cx: &mut Cx<'_>, event: Event) -> Step {
        match event {
            Event::XLogData(xlog) => self.on_xlog(cx, xlog),
            Event::Keepalive(keepalive) => self.on_keepalive(cx, keepalive),
            Event::StreamServerDone => fail(
                FailureKind::PgUnreachable,
                "the server ended the replication stream",
            ),
            Event::Notice(notice) => {
                cx.ctx.log(Level::Info, format!("PostgreSQL: {notice}"));
                Ok(())
            }
            Event::Failed(error) => Err(Next::Fail(conn_failure(error))),
            _ => Ok(()),
        }
    }

    fn on_keepalive(&mut self, cx: &mut Cx<'_>, keepalive: PrimaryKeepalive) -> Step {
        cx.run.report.on_server_wal(keepalive.wal_end);
        let ack = &mut cx.run.ack;
        let idle = self.outbox.is_empty() && self.sink.is_idle();
        if idle && !ack.in_transaction() && ack.pending_commits() == 0 {
            self.caught_up = true;
        }
        let before = ack.flush();
        if let Some(advance) = ack.on_keepalive(keepalive.wal_end, idle) {
            cx.run.progress.on_progress(cx.ctx.now.mono);
            note_advance(cx, before, advance);
            self.send_status(cx)
        } else if keepalive.reply_requested {
            self.send_status(cx)
        } else {
            Ok(())
        }
    }

    fn on_xlog(&mut self, cx: &mut Cx<'_>, xlog: XLogData) -> Step {
        cx.run.ack.on_wal_data(xlog.wal_start);
        cx.run.report.on_server_wal(xlog.wal_end);
        let message = match pgoutput::parse(&xlog.data) {
            Ok(message) => message,
            Err(e) => {
                return fail(
                    FailureKind::PgProtocol,
                    format!("cannot decode pgoutput message at {}: {e}", xlog.wal_start),
                )
            }
        };
        match message {
            Message::Begin(_) => {
                cx.run.ack.on_begin();
                Ok(())
            }
            Message::Commit(commit) => {
                cx.run.report.on_commit();
                self.on_commit(cx, commit.end_lsn)
            }
            Message::Relation(relation) => self.on_relation(cx, relation),
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) => {
                self.on_row(cx, &message)
            }
            Message::Truncate(truncate) => self.on_truncate(&truncate),
            Message::Type(_) | Message::Origin(_) | Message::Logical(_) => Ok(()),
        }
    }

    /// A TRUNCATE: the truncated routes' unsent rows are dropped (PostgreSQL dropped them
    /// too) and the stream holds here while the Retracting phase empties their Feldera
    /// tables; the rest of the transaction follows once that is durable and verified.
    fn on_truncate(&mut self, truncate: &Truncate) -> Step {
        let relations = match self.relations.truncated(truncate) {
            Ok(relations) => relations,
            Err(e) => return fail(FailureKind::PgProtocol, format!("protocol error: {e}")),
        };
        let mut jobs: Vec<TableJob> = Vec::new();
        for relation in relations {
            let Some((route, _)) = self.mapped.get(&relation.oid) else {
                return fail(
                    FailureKind::PgProtocol,
                    format!(
                        "protocol error: TRUNCATE of {} before its Relation message",
                        relation.qualified_name()
                    ),
                );
            };
            if jobs.iter().any(|j| j.route == *route) {
                continue;
            }
            let table = &self.tables[*route];
            let keys = match plan_keys(table) {
                Ok(keys) => keys,
                Err(e) => {
                    return fail(
                        FailureKind::DataRefused,
                        format!("TRUNCATE of {} cannot be propagated: {e}. Nothing after the previous commit was acknowledged", relation.qualified_name()),
                    )
                }
            };
            self.outbox.discard_route(*route);
            jobs.push(TableJob {
                route: *route,
                keys,
                leftovers: None,
            });
        }
        Err(Next::Retract(jobs))
    }

    /// Holds the stream (a retraction runs): events wait in the backlog, reading pauses.
    pub(crate) fn hold(&mut self) {
        self.held = true;
    }

    /// The retraction is done: the stream continues where it held.
    pub(crate) fn release(&mut self, cx: &mut Cx<'_>) -> Next {
        self.held = false;
        next_of(self.maybe_flush(cx).and_then(|()| self.pump(cx)))
    }

    /// Each route's Feldera table name.
    pub(crate) fn table_names(&self) -> Vec<Name> {
        self.tables.iter().map(|t| t.name.clone()).collect()
    }

    pub(crate) fn table(&self, route: usize) -> &Table {
        &self.tables[route]
    }

    fn on_commit(&mut self, cx: &mut Cx<'_>, end_lsn: Lsn) -> Step {
        let before = cx.run.ack.flush();
        if let Some(advance) = cx.run.ack.on_commit(end_lsn, self.outbox.seq_for_commit()) {
            cx.run.progress.on_progress(cx.ctx.now.mono);
            note_advance(cx, before, advance);
            self.send_status(cx)?;
        }
        let linger_zero = cx.env.config.batch_linger_ms == 0;
        self.cut_at_commit |= linger_zero && !self.outbox.is_empty();
        self.maybe_flush(cx)
    }

    fn on_relation(&mut self, cx: &mut Cx<'_>, relation: pgoutput::Relation) -> Step {
        let config = &cx.env.config;
        let Some(route) = cx
            .env
            .routes
            .iter()
            .position(|r| r.source.is(&relation.namespace, &relation.name))
        else {
            let name = relation.qualified_name();
            return fail(
                FailureKind::DataRefused,
                format!(
                    "a change to {name} arrived but {name} is not routed; add it to TABLES or remove it from publication {}. \
                     Nothing of this transaction was acknowledged",
                    config.publication
                ),
            );
        };
        let options = MappingOptions {
            require_primary_key: config.require_primary_key,
        };
        let mapping = match plan_mapping(&relation, &self.tables[route], options) {
            Ok(mapping) => mapping,
            Err(e) => {
                return fail(
                    FailureKind::DataRefused,
                    format!("table changed in a way Feldera's schema does not accept: {e}"),
                )
            }
        };
        let oid = relation.oid;
        if let RelationChange::Replaced {
            shape_changed: true,
            ..
        } = self.relations.apply(relation)
        {
            cx.ctx.log(
                Level::Info,
                format!(
                    "{} changed shape mid-stream; using its new columns",
                    mapping.source
                ),
            );
        }
        let warnings = mapping.warnings();
        self.mapped.insert(oid, (route, mapping));
        for warning in warnings {
            cx.ctx.log(Level::Warn, warning);
        }
        Ok(())
    }

    fn on_row(&mut self, cx: &mut Cx<'_>, message: &Message<'_>) -> Step {
        if let Err(e) = self.relations.check(message) {
            return fail(FailureKind::PgProtocol, format!("protocol error: {e}"));
        }
        let oid = message.row_relation_oid().unwrap_or_default();
        let Some((route, mapping)) = self.mapped.get(&oid) else {
            return fail(
                FailureKind::PgProtocol,
                format!(
                    "protocol error: a row for relation {oid} arrived before its Relation message"
                ),
            );
        };
        let converter = Converter::new(mapping);
        let (mark, body) = self.outbox.start_line(*route);
        let written = match message {
            Message::Insert(insert) => converter.insert(insert, body),
            Message::Update(update) => converter.update(update, body),
            Message::Delete(delete) => converter.delete(delete, body),
            _ => Ok(0),
        };
        match written {
            Ok(lines) => {
                self.outbox.finish_lines(mark, lines, cx.now());
                cx.run.report.on_row();
                self.maybe_flush(cx)
            }
            Err(e) => {
                self.outbox.abandon_line(mark);
                fail(
                    FailureKind::DataRefused,
                    format!("{e}. Nothing of this transaction was acknowledged"),
                )
            }
        }
    }

    // ---- batches ----

    /// Cuts and sends a batch when one is due and the sink has room.
    fn maybe_flush(&mut self, cx: &mut Cx<'_>) -> Step {
        if !self.sink.has_room() {
            return Ok(());
        }
        match self.outbox.due(cx.now(), self.cut_at_commit) {
            Some(reason) => self.cut_and_send(cx, reason),
            None => Ok(()),
        }
    }

    fn cut_and_send(&mut self, cx: &mut Cx<'_>, reason: CutReason) -> Step {
        let Some(batch) = self.outbox.cut(reason) else {
            return Ok(());
        };
        self.cut_at_commit = false;
        cx.ctx.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "#{} cut ({}): {} rows, {} bytes",
                batch.seq,
                reason.name(),
                batch.rows(),
                batch.bytes()
            ),
        );
        if cx.crash_at(CrashPoint::BeforeSend) {
            return Err(Next::Crash(CrashPoint::BeforeSend));
        }
        let tables: Vec<Name> = self.tables.iter().map(|t| t.name.clone()).collect();
        self.sink.send(cx.ctx, &cx.env.endpoint, &tables, batch);
        Ok(())
    }

    fn on_sink_outcome(&mut self, cx: &mut Cx<'_>, seq: BatchSeq, outcome: SinkOutcome) -> Step {
        match outcome {
            SinkOutcome::Pending => Ok(()),
            SinkOutcome::Accepted => {
                if cx.crash_at(CrashPoint::AfterSend) {
                    return Err(Next::Crash(CrashPoint::AfterSend));
                }
                if cx.env.config.ack_mode == AckMode::Accepted {
                    if cx.crash_at(CrashPoint::AfterComplete) {
                        return Err(Next::Crash(CrashPoint::AfterComplete));
                    }
                    return self.batch_durable(cx, seq);
                }
                let (now, timeout_ms) = (cx.now(), cx.env.config.completion_timeout_ms);
                self.sink
                    .await_completion(cx.ctx, &cx.env.endpoint, seq, now, timeout_ms);
                Ok(())
            }
            SinkOutcome::Complete => {
                if cx.crash_at(CrashPoint::AfterComplete) {
                    return Err(Next::Crash(CrashPoint::AfterComplete));
                }
                self.batch_durable(cx, seq)
            }
            SinkOutcome::Failed(failure) => Err(Next::Fail(failure)),
        }
    }

    /// Batch `seq` is durable: the ack tracker may move the flush position, which is
    /// reported at once.
    fn batch_durable(&mut self, cx: &mut Cx<'_>, seq: BatchSeq) -> Step {
        let Some(batch) = self.sink.take(seq) else {
            return Ok(());
        };
        cx.run.progressed(cx.ctx.now.mono);
        cx.run
            .report
            .on_batch_durable(batch.completion_wait_us(cx.now()));
        cx.ctx.note(
            Level::Debug,
            Topic::Batch,
            format!("#{} durable ({} rows)", batch.seq, batch.rows()),
        );
        let before = cx.run.ack.flush();
        if let Some(advance) = cx.run.ack.on_batch_durable(batch.seq) {
            note_advance(cx, before, advance);
            self.send_status(cx)?;
            if cx.crash_at(CrashPoint::AfterAck) {
                return Err(Next::Crash(CrashPoint::AfterAck));
            }
        }
        if self.draining || self.held {
            return Ok(());
        }
        self.maybe_flush(cx)?;
        self.pump(cx)
    }

    /// Sends a standby status update: flush = the last durable commit's end, write = what
    /// was read (never behind flush).
    pub(crate) fn send_status(&mut self, cx: &mut Cx<'_>) -> Step {
        let now = cx.ctx.now;
        let flush = cx.run.ack.flush();
        let update = StatusUpdate {
            write: cx.run.ack.received().max(flush),
            flush,
            apply: flush,
            client_time: now.wall,
            reply_requested: false,
        };
        self.status.sent(now.mono);
        self.reported = Some(flush);
        match self.repl.send_status(cx.ctx, update) {
            Ok(()) => Ok(()),
            Err(e) => fail(
                FailureKind::PgUnreachable,
                format!("cannot send a status update: {e}"),
            ),
        }
    }

    // ---- draining (graceful stop) ----

    /// Stops reading for good: from now on only what is buffered goes out.
    pub(crate) fn start_draining(&mut self, ctx: &mut Ctx) {
        self.draining = true;
        self.repl.pause_read(ctx);
    }

    /// Nothing in flight and nothing buffered.
    pub(crate) fn drained(&self) -> bool {
        self.sink.is_idle() && self.outbox.is_empty()
    }

    /// While draining (a stop, or before a retraction) with the sink idle: sends what is
    /// buffered.
    pub(crate) fn drain_step(&mut self, cx: &mut Cx<'_>) -> Next {
        if !self.sink.is_idle() || self.outbox.is_empty() {
            return Next::Stay;
        }
        next_of(self.cut_and_send(cx, CutReason::Drain))
    }
}

/// The trace line saying why the flush position moved.
fn note_advance(cx: &mut Cx<'_>, before: Lsn, advance: Advance) {
    let why = match advance {
        Advance::Commit {
            end_lsn,
            through_batch,
        } => format!(
            "commit ending {end_lsn} has every row durable (batches through #{through_batch})"
        ),
        Advance::Idle { wal_end } => {
            format!("idle keepalive at {wal_end}: nothing open, buffered or in flight")
        }
    };
    let flush = cx.run.ack.flush();
    cx.ctx.note(
        Level::Debug,
        Topic::Ack,
        format!("flush {before} -> {flush}: {why}"),
    );
}
