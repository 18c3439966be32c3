//! The Streaming phase itself: its state, the stream's messages into the outbox, and its
//! timers (see the module docs of `streaming`).

use super::skipping::Skips;
use crate::ack::{AckTracker, Advance, BatchSeq};
use crate::config::{AckMode, FelderaTransactions};
use crate::conn::Event;
use crate::contract::mapping::ColumnMapping;
use crate::contract::partitions::Placement;
use crate::convert::Converter;
use crate::feldera::Reply;
use crate::io::{ConnFailure, HttpId, Level, Topic};
use crate::outbox::{Batch, CutReason, Outbox};
use crate::pgoutput::{self, Message, RelationCache};
use crate::pipeline::cx::Cx;
use crate::pipeline::feldera_txn::{FelderaTxn, StreamPos};
use crate::pipeline::handover::Next;
use crate::pipeline::handover::StreamStart;
use crate::pipeline::keeper::News;
use crate::pipeline::pg_link::{conn_failure, PgLink};
use crate::pipeline::policy::{Failure, FailureKind};
use crate::pipeline::queue::Queue;
use crate::pipeline::sink::Sink;
use crate::schema::program::Table;
use crate::schema::Name;
use crate::standby::StatusSchedule;
use crate::timer::{TimerKind, TimerTable};
use crate::value::PgTypes;
use crate::wire::{PrimaryKeepalive, XLogData};
use crate::Lsn;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug)]
pub(crate) struct Streaming {
    pub(super) repl: PgLink,
    pub(super) status: StatusSchedule,
    pub(super) relations: RelationCache,
    /// Route index and mapping of every relation seen in this session.
    pub(super) mapped: BTreeMap<u32, (usize, ColumnMapping)>,
    /// The route of every partition of a routed table, as this session's catalog showed
    /// them.
    pub(super) placement: Placement,
    /// Relations announced that are neither routed nor a known partition, by name: only a
    /// change of one is a problem (`unplaceable`).
    pub(super) unplaced: BTreeMap<u32, String>,
    /// What the stream skips (routes copied apart from the others, removed routes).
    pub(super) skips: Skips,
    /// The routes whose changes in the open transaction are in their own copy already.
    pub(super) skipping: Vec<usize>,
    /// The commit position of the transaction being read (its Begin's `final_lsn`): what
    /// names a Relation inside it for `Replans`, as the same transaction replays.
    pub(super) transaction_at: Lsn,
    /// Where the last message read stands in the stream's order (`StreamPos`).
    pub(super) read_at: StreamPos,
    /// Relations of removed routes, by OID: their changes are skipped.
    pub(super) retired: std::collections::BTreeSet<u32>,
    /// Partitions whose Relation cannot be mapped onto their route's table: the route and
    /// why, refused when a row of them arrives (with `publish_via_partition_root = true`
    /// none ever does).
    pub(super) unmappable: BTreeMap<u32, (usize, String)>,
    /// Each route's Feldera table, as the schema describes it.
    pub(super) tables: Vec<Table>,
    /// The routed columns' non-builtin types, as the startup read them: a Relation message
    /// names only OIDs.
    pub(super) types: PgTypes,
    pub(super) backlog: VecDeque<Event>,
    pub(super) paused: bool,
    /// A commit was read and its rows wait to be cut there (`BATCH_LINGER_MS=0`, or a
    /// Feldera transaction waits for a batch that ends at a source commit).
    pub(super) cut_at_commit: bool,
    pub(super) slot_confirmed_at_start: Lsn,
    /// A keepalive found this session with nothing open, buffered or in flight: the stream
    /// is caught up. Until then a new session may still be about to replay.
    pub(super) caught_up: bool,
    /// The flush position of the last status update sent.
    pub(super) reported: Option<Lsn>,
    pub(super) outbox: Outbox,
    pub(super) sink: Sink,
    /// A graceful stop: nothing more is read; what is buffered goes out.
    pub(super) draining: bool,
    /// A retraction (TRUNCATE) runs: the stream waits where it is.
    pub(super) held: bool,
    /// The Feldera transaction (`None` with `FELDERA_TRANSACTIONS=off`).
    pub(super) txn: Option<FelderaTxn>,
    /// A batch cut but not sent: it waits for a Feldera transaction to start (and for every
    /// earlier batch to be durable first). Whether it ends inside a source transaction.
    pub(super) waiting: Option<(Batch, bool)>,
    /// No batch of this session has been cut yet.
    pub(super) first_batch: bool,
    /// A Begin was read and its Commit not yet.
    pub(super) in_source_tx: bool,
    /// The stop's note that it leaves a Feldera transaction open was written.
    pub(super) left_open_noted: bool,
    /// Each batch's newest source commit time, until it is durable (the freshness metric).
    pub(super) commit_times: crate::lag::BatchCommitTimes,
    /// The state file's bound on the WAL Feldera may hold (`bound`).
    pub(super) bound: super::bound::Bound,
    /// Routes copied online beside the stream (`copier`).
    pub(super) copier: Option<super::copier::Copier>,
    /// Parses a chunk's COPY lines when they are emitted.
    pub(super) copy_row: crate::copy::CopyRow,
}

pub(super) type Step = Result<(), Next>;

pub(super) fn fail(kind: FailureKind, message: impl Into<String>) -> Step {
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
        if let Some(earlier) = cx.run.ack.start_from_slot(ready.slot_confirmed) {
            cx.queue.log(
                Level::Warn,
                format!(
                    "slot {} starts at {}, behind the position {earlier} an earlier session acknowledged \
                     (a new slot, or a server restored or failed over); acknowledging from the slot's position",
                    cx.env.config.slot, ready.slot_confirmed
                ),
            );
        }
        let status = StatusSchedule::new(cx.now(), ready.wal_sender_timeout_ms);
        cx.queue.log(
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
            placement: ready.placement,
            unplaced: BTreeMap::new(),
            skips: ready.skips,
            skipping: Vec::new(),
            transaction_at: Lsn::ZERO,
            read_at: Default::default(),
            retired: Default::default(),
            unmappable: BTreeMap::new(),
            tables: ready.tables,
            types: ready.types,
            backlog: start.pending.into(),
            paused: false,
            cut_at_commit: false,
            slot_confirmed_at_start: ready.slot_confirmed,
            caught_up: false,
            reported: None,
            outbox: Outbox::after(cx.env.routes.len(), cx.env.thresholds, cx.run.last_cut),
            sink: Sink::new(cx.env.config.max_in_flight_batches),
            draining: false,
            held: false,
            txn: (cx.env.config.feldera_transactions != FelderaTransactions::Off).then(|| {
                FelderaTxn::new(
                    cx.env.config.ack_mode == AckMode::Accepted,
                    cx.env.config.completion_timeout_ms,
                )
            }),
            waiting: None,
            first_batch: true,
            in_source_tx: false,
            commit_times: Default::default(),
            left_open_noted: false,
            bound: super::bound::Bound::new(start.record, cx.run.sent.timeline),
            copier: None,
            copy_row: crate::copy::CopyRow::new(),
        };
        if let Err(next) = streaming.open_copier(cx, start.online) {
            return (streaming, next);
        }
        let next = next_of(streaming.pump(cx));
        (streaming, next)
    }

    pub(crate) fn conn(&self) -> crate::io::ConnId {
        self.repl.id
    }

    pub(crate) fn buffered_rows(&self) -> u64 {
        self.outbox.rows()
    }

    /// Batches cut and not yet durable: in the sink's window, held by a Feldera
    /// transaction until its commit, or waiting for a transaction to start.
    pub(crate) fn batches_in_flight(&self) -> u64 {
        let held = self.txn.as_ref().map_or(0, FelderaTxn::batches_held);
        self.sink.len() as u64 + held + u64::from(self.waiting.is_some())
    }

    pub(crate) fn batch_in_flight(&self) -> Option<BatchSeq> {
        let txn = self.txn.as_ref().and_then(FelderaTxn::first_batch);
        let waiting = self.waiting.as_ref().map(|(b, _)| b.seq);
        [self.sink.oldest().map(|b| b.seq), txn, waiting]
            .into_iter()
            .flatten()
            .min()
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
            || !self.quiet()
            || !self.outbox.is_empty()
            || ack.in_transaction()
            || ack.pending_commits() > 0
            || self.copier.as_ref().is_some_and(|c| !c.done())
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.sink.resume(cx.queue, cx.link);
        self.start_waiting(cx);
    }

    /// A checkpoint succeeded (or did not): report a flush position that moved.
    pub(crate) fn on_checkpoint(&mut self, cx: &mut Cx<'_>, news: &News) -> Next {
        if *news != News::Saved || self.reported == Some(cx.run.ack.flush()) {
            return Next::Stay;
        }
        cx.run.progress.on_progress(cx.queue.now.mono);
        match self.send_status(cx) {
            Ok(()) => Next::Stay,
            Err(next) => next,
        }
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        timers.set(TimerKind::StatusInterval, self.status.next_at());
        if let Some(at) = self.copy_retry_at() {
            timers.set(TimerKind::CopyRetry, at);
        }
        if self.can_send() {
            if let Some(at) = self.outbox.linger_deadline() {
                timers.set(TimerKind::Linger, at);
            }
        }
        self.sink.arm(timers);
        if let Some(txn) = &self.txn {
            txn.arm(timers);
        }
    }

    /// Nothing in flight: no batch in the sink, waiting, or in a Feldera transaction.
    fn quiet(&self) -> bool {
        self.sink.is_idle()
            && self.waiting.is_none()
            && self.txn.as_ref().is_none_or(FelderaTxn::is_idle)
    }

    /// Whether a batch may be cut and sent now: the window has room, no batch waits for a
    /// Feldera transaction, and none is being started or committed.
    fn can_send(&self) -> bool {
        self.sink.has_room()
            && self.waiting.is_none()
            && self.txn.as_ref().is_none_or(FelderaTxn::accepts_batches)
            && (self.outbox.is_empty() || self.bound.covers(self.reach()))
    }

    /// How far in the WAL the rows read so far reach: past the commit record of the
    /// newest transaction read (its Begin's `final_lsn`). A timeline that left at or before
    /// that record does not have the transaction committed; one that left after it does.
    /// Never a keepalive's position: a standby promoted exactly there has everything sent.
    pub(super) fn reach(&self) -> Lsn {
        Lsn(self.transaction_at.0.saturating_add(1))
    }

    /// Rows wait to be sent past the state file's bound: write it further first.
    fn extend_bound(&mut self, cx: &mut Cx<'_>) {
        if !self.outbox.is_empty() {
            self.bound
                .extend(cx.queue, &cx.env.state_path, self.reach());
        }
    }

    /// The bound covers everything read (a TRUNCATE's retraction reaches where it was
    /// read), and the run counts it as sent; else the bound is being written further.
    pub(crate) fn covers_read(&mut self, cx: &mut Cx<'_>) -> bool {
        if self.bound.covers(self.reach()) {
            cx.run.sent.note(self.reach());
            return true;
        }
        self.bound
            .extend(cx.queue, &cx.env.state_path, self.reach());
        false
    }

    /// A write of the state file's bound is under way.
    pub(crate) fn writing_bound(&self) -> bool {
        self.bound.writing()
    }

    /// A state file write ended: the bound's, which lets what waited for it go out.
    pub(crate) fn on_state_written(&mut self, cx: &mut Cx<'_>, result: Result<(), String>) -> Next {
        if !self.bound.written(cx.queue, &cx.env.state_path, &result) {
            return Next::Stay;
        }
        if let Err(e) = result {
            return next_of(fail(
                FailureKind::SetupRefused,
                format!("cannot record in the state file how far Feldera's rows may reach in the WAL: {e}"),
            ));
        }
        let step = self.pump(cx);
        self.after(cx, step)
    }

    /// Closes the replication connection; returns the last batch number used.
    pub(crate) fn close(mut self, queue: &mut Queue) -> BatchSeq {
        self.repl.close(queue);
        self.close_copier(queue);
        self.outbox.last_cut_seq()
    }

    // ---- input ----

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let events = self.repl.on_bytes(cx.queue, bytes);
        self.backlog.extend(events);
        let step = self.pump(cx);
        self.after(cx, step)
    }

    pub(crate) fn on_pg_closed(&mut self, cx: &mut Cx<'_>, error: Option<ConnFailure>) -> Next {
        self.repl.closed(
            cx.queue,
            &cx.env.config.pg.at(cx.run.hosts.index),
            error,
            "replication connection",
        )
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        let now = cx.now();
        if let Some(txn) = self.txn.as_mut().filter(|t| t.owns(id)) {
            let step = txn.on_http(cx.queue, cx.link, now, id, reply);
            let step = self.on_txn_step(cx, step);
            return self.after(cx, step);
        }
        let step = match self.sink.on_reply(cx.queue, cx.link, now, id, reply) {
            Some((seq, outcome)) => self
                .on_sink_outcome(cx, seq, outcome)
                .and_then(|()| self.drain_ready(cx)),
            None => Ok(()),
        };
        self.after(cx, step)
    }

    /// Outcomes one answer decided beyond the first.
    fn drain_ready(&mut self, cx: &mut Cx<'_>) -> Step {
        while let Some((seq, outcome)) = self.sink.take_ready() {
            self.on_sink_outcome(cx, seq, outcome)?;
        }
        Ok(())
    }

    /// The end of handling an input: a stop's note about a transaction it leaves open.
    pub(super) fn after(&mut self, cx: &mut Cx<'_>, step: Step) -> Next {
        let step = step.and_then(|()| self.copy_progress(cx));
        if step.is_ok() {
            self.note_left_open(cx.queue);
        }
        next_of(step)
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Next {
        let step = match kind {
            TimerKind::StatusInterval => self.send_status(cx),
            TimerKind::Linger => self.maybe_flush(cx),
            TimerKind::CompletionPoll
            | TimerKind::CompletionTimeout
            | TimerKind::SlowCompletionLog => {
                let now = cx.now();
                let sink = match self.sink.on_timer(cx.queue, cx.link, now) {
                    Some((seq, outcome)) => self
                        .on_sink_outcome(cx, seq, outcome)
                        .and_then(|()| self.drain_ready(cx)),
                    None => Ok(()),
                };
                sink.and_then(|()| match self.txn.as_mut() {
                    Some(txn) => {
                        let step = txn.on_timer(cx.queue, cx.link, now);
                        self.on_txn_step(cx, step)
                    }
                    None => Ok(()),
                })
            }
            _ => Ok(()),
        };
        self.after(cx, step)
    }

    // ---- reading the stream ----

    /// Whether stream events must wait: no batch can be sent and the outbox is already due
    /// by size or by a commit boundary, or a graceful stop stopped reading.
    fn blocked(&self, cx: &Cx<'_>) -> bool {
        if self.draining || self.held {
            return true;
        }
        !self.can_send()
            && matches!(
                self.due(cx),
                Some(CutReason::Rows | CutReason::Bytes | CutReason::Commit)
            )
    }

    /// Whether (and why) the outbox should be cut now.
    pub(super) fn due(&self, cx: &Cx<'_>) -> Option<CutReason> {
        self.outbox
            .due(cx.now(), self.cut_at_commit)
            .or_else(|| {
                (self.cut_at_commit && !self.outbox.is_empty()).then_some(CutReason::Commit)
            })
            .or_else(|| self.idle_pipe(cx).then_some(CutReason::Idle))
    }

    /// The send rule for a quiet pipe (docs/pipelining.md, "When a batch is sent"): nothing
    /// is in flight, what is buffered ends at a source commit, no further event of the
    /// stream is already here and the newest change is fresh, so waiting for the linger
    /// could only add latency. While batches are in flight the linger coalesces as before;
    /// while the backlog holds more events the batch grows until what arrived is read.
    fn idle_pipe(&self, cx: &Cx<'_>) -> bool {
        !self.outbox.is_empty()
            && !self.in_source_tx
            && self.backlog.is_empty()
            && !self.held
            && self.quiet()
            && !self.catching_up(cx)
    }

    /// The newest buffered change committed longer than `BATCH_LINGER_MS` ago: the stream
    /// is behind, reading WAL written earlier. Sending it alone would not make it fresh and
    /// would cost a request per read; the linger coalesces instead, as throughput wants.
    /// The source's clock against ours: a source clock behind by more than the linger
    /// makes every commit look old, which only brings back the plain linger.
    fn catching_up(&self, cx: &Cx<'_>) -> bool {
        let linger_us = cx.env.config.batch_linger_ms.saturating_mul(1000);
        self.commit_times
            .newest_buffered()
            .is_some_and(|t| cx.queue.now.wall.0.saturating_sub(t.0) > linger_us as i64)
    }

    /// Handles backlogged stream events until the backlog is empty or must wait.
    pub(super) fn pump(&mut self, cx: &mut Cx<'_>) -> Step {
        loop {
            if self.blocked(cx) {
                // Rows due may be waiting for the bound alone.
                self.extend_bound(cx);
                if !self.backlog.is_empty() && !self.paused {
                    self.paused = true;
                    self.repl.pause_read(cx.queue);
                }
                return Ok(());
            }
            let Some(event) = self.backlog.pop_front() else {
                if self.paused {
                    self.paused = false;
                    self.repl.resume_read(cx.queue);
                }
                return self.maybe_flush(cx);
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
                cx.queue.log(Level::Info, format!("PostgreSQL: {notice}"));
                Ok(())
            }
            Event::Failed(error) => Err(Next::Fail(conn_failure(
                &cx.env.config.pg.at(cx.run.hosts.index),
                error,
            ))),
            _ => Ok(()),
        }
    }

    fn on_keepalive(&mut self, cx: &mut Cx<'_>, keepalive: PrimaryKeepalive) -> Step {
        cx.run.report.on_server_wal(keepalive.wal_end);
        // A late chunk is placed before the keepalive may move the acknowledgement.
        self.copier_at_keepalive(cx, keepalive.wal_end)?;
        let idle = self.outbox.is_empty() && self.quiet();
        let ack = &mut cx.run.ack;
        if idle && !ack.in_transaction() && ack.pending_commits() == 0 {
            self.caught_up = true;
        }
        let before = ack.complete();
        if let Some(advance) = ack.on_keepalive(keepalive.wal_end, idle) {
            cx.run.progress.on_progress(cx.queue.now.mono);
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
        self.read_at.at = self.read_at.at.max(xlog.wal_start);
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
        let step = self.on_message(cx, &message, xlog.wal_start);
        step.and_then(|()| self.copier_after_message(cx, &message, xlog.wal_start))
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, message: &Message<'_>, wal_start: Lsn) -> Step {
        match message {
            Message::Begin(begin) => {
                self.transaction_at = begin.final_lsn;
                self.read_at = StreamPos {
                    commit: begin.final_lsn,
                    at: wal_start,
                };
                self.skipping = self.skips.copied_before(begin.final_lsn);
                if !self.skipping.is_empty() {
                    cx.queue.note(
                        Level::Debug,
                        Topic::General,
                        format!(
                            "transaction committed at {} is in the own copy of {}: its changes of them are skipped",
                            begin.final_lsn,
                            self.skipping
                                .iter()
                                .map(|&r| self.tables[r].name.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                cx.run.ack.on_begin();
                cx.run.report.on_begin();
                cx.run.ages.on_begin(begin.commit_time);
                self.commit_times.on_begin(begin.commit_time);
                self.outbox.mark_transaction_start();
                self.in_source_tx = true;
                Ok(())
            }
            Message::Commit(commit) => {
                cx.run.report.on_commit();
                cx.run.ages.on_commit(commit.end_lsn, cx.run.ack.flush());
                self.on_commit(cx, commit.end_lsn)
            }
            Message::Relation(relation) => self.on_relation(cx, relation.clone()),
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) => {
                self.on_row(cx, message, wal_start)
            }
            Message::Truncate(truncate) => self.on_truncate(cx, truncate, wal_start),
            Message::Type(_) | Message::Origin(_) | Message::Logical(_) => Ok(()),
        }
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

    pub(super) fn on_commit(&mut self, cx: &mut Cx<'_>, end_lsn: Lsn) -> Step {
        self.in_source_tx = false;
        let before = cx.run.ack.complete();
        if let Some(advance) = cx.run.ack.on_commit(end_lsn, self.outbox.seq_for_commit()) {
            cx.run.progress.on_progress(cx.queue.now.mono);
            note_advance(cx, before, advance);
            self.send_status(cx)?;
        }
        let linger_zero = cx.env.config.batch_linger_ms == 0;
        // A Feldera transaction (open, or about to open for a waiting batch) ends with a
        // batch that ends at a source commit: cut here, or, when the last batch cut ended
        // right before this commit, that one closes it.
        let txn_waits =
            self.waiting.is_some() || self.txn.as_ref().is_some_and(FelderaTxn::is_open);
        if txn_waits && self.outbox.is_empty() {
            self.close_at_commit(cx);
        }
        self.cut_at_commit |= (linger_zero || txn_waits) && !self.outbox.is_empty();
        self.maybe_flush(cx)
    }

    /// A commit read with nothing buffered: the last batch cut (waiting for its transaction
    /// or already in it) ends at a source commit after all.
    fn close_at_commit(&mut self, cx: &mut Cx<'_>) {
        if let Some((batch, ends_inside)) = self.waiting.as_mut() {
            if *ends_inside {
                *ends_inside = false;
                cx.queue.note(
                    Level::Debug,
                    Topic::Batch,
                    format!("#{} ends at a source commit after all", batch.seq),
                );
            }
            return;
        }
        let now = cx.now();
        if let Some(txn) = self.txn.as_mut().filter(|t| t.is_open()) {
            cx.queue.note(
                Level::Debug,
                Topic::Batch,
                "the Feldera transaction closes: its last batch ended right before this source commit",
            );
            txn.close(cx.queue, cx.link, now);
        }
    }

    fn on_row(&mut self, cx: &mut Cx<'_>, message: &Message<'_>, at: Lsn) -> Step {
        if let Err(e) = self.relations.check(message) {
            return fail(FailureKind::PgProtocol, format!("protocol error: {e}"));
        }
        let oid = message.row_relation_oid().unwrap_or_default();
        if self.retired.contains(&oid) {
            return Ok(());
        }
        let Some((route, mapping)) = self.mapped.get(&oid) else {
            if let Some(name) = self.unplaced.get(&oid).cloned() {
                return self.unplaceable(cx, at, &format!("a change to {name}"), &name);
            }
            if let Some((route, problem)) = self.unmappable.get(&oid) {
                if self.skipping.contains(route) {
                    return Ok(());
                }
                return fail(
                    FailureKind::DataRefused,
                    format!("{problem}. Nothing of this transaction was acknowledged"),
                );
            }
            return fail(
                FailureKind::PgProtocol,
                format!(
                    "protocol error: a row for relation {oid} arrived before its Relation message"
                ),
            );
        };
        if self.skipping.contains(route) {
            return Ok(());
        }
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
                self.commit_times.on_buffered();
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

    /// Cuts and sends a batch when one is due and one can be sent; a batch waiting for a
    /// Feldera transaction starts it once every earlier batch is durable.
    pub(super) fn maybe_flush(&mut self, cx: &mut Cx<'_>) -> Step {
        self.start_waiting(cx);
        // Written as soon as rows past it are buffered: the write overlaps the linger.
        self.extend_bound(cx);
        if !self.can_send() {
            return Ok(());
        }
        match self.due(cx) {
            Some(reason) => self.cut_and_send(cx, reason),
            None => Ok(()),
        }
    }

    /// Stops reading for good: from now on only what is buffered goes out.
    pub(crate) fn start_draining(&mut self, queue: &mut Queue) {
        self.draining = true;
        self.close_copier(queue);
        self.repl.pause_read(queue);
        self.note_left_open(queue);
    }

    /// Nothing more will become durable in this session: nothing in flight and nothing
    /// buffered, or (a stop with Feldera transactions) what is left ends inside a source
    /// transaction and stays unsent, an open Feldera transaction left open.
    pub(crate) fn drained(&self) -> bool {
        if self.quiet() && self.outbox.is_empty() {
            return true;
        }
        self.stop_leaves_rest()
    }

    /// Whether the stop leaves a Feldera transaction open (see `stop_leaves_rest`): Feldera
    /// then delays every checkpoint until a commit this stop does not make.
    pub(crate) fn leaves_feldera_transaction_open(&self) -> bool {
        self.stop_leaves_rest() && self.txn.as_ref().is_some_and(FelderaTxn::is_open)
    }

    /// A stop with Feldera transactions, nothing in flight, and the rest ending inside a
    /// source transaction: an open transaction stays open (views never see part of the
    /// source transaction), and unsent rows stay unsent; the next start replays them.
    fn stop_leaves_rest(&self) -> bool {
        let Some(txn) = self.txn.as_ref().filter(|_| self.draining) else {
            return false;
        };
        self.sink.is_idle()
            && self.waiting.is_none()
            && (txn.is_open() || (txn.is_idle() && self.in_source_tx))
    }

    fn note_left_open(&mut self, queue: &mut Queue) {
        if self.left_open_noted || !self.stop_leaves_rest() {
            return;
        }
        self.left_open_noted = true;
        match self.txn.as_ref().filter(|t| t.is_open()) {
            Some(txn) => queue.log(
                Level::Warn,
                format!(
                    "stopping inside a source transaction: {} stays open, unacknowledged; the next start continues it and commits it \
                     once the source transaction is complete (to give it up instead, POST .../commit_transaction: views then see part of it until slotline replays it)",
                    txn.describe()
                ),
            ),
            None => queue.note(
                Level::Debug,
                Topic::Batch,
                "stopping inside a source transaction: its buffered rows are not sent; the next start replays them",
            ),
        }
    }

    /// While draining (a stop, or before a retraction) with room for a batch: sends what is
    /// buffered (a stop with Feldera transactions never sends rows ending inside a source
    /// transaction).
    pub(crate) fn drain_step(&mut self, cx: &mut Cx<'_>) -> Next {
        if self.held && self.outbox.is_empty() && self.txn.as_ref().is_some_and(FelderaTxn::is_open)
        {
            // Everything before the TRUNCATE is in the open transaction: commit it.
            cx.queue.note(
                Level::Debug,
                Topic::Batch,
                "the Feldera transaction closes: a TRUNCATE needs what came before it committed",
            );
            let now = cx.now();
            if let Some(txn) = self.txn.as_mut() {
                txn.close(cx.queue, cx.link, now);
            }
            return Next::Stay;
        }
        if self.outbox.is_empty() || self.stop_leaves_rest() {
            return Next::Stay;
        }
        if self.draining && self.txn.is_some() && self.in_source_tx {
            return Next::Stay;
        }
        self.extend_bound(cx);
        if !self.can_send() {
            return Next::Stay;
        }
        next_of(self.cut_and_send(cx, CutReason::Drain))
    }
}

/// The trace line saying why the flush position moved.
pub(super) fn note_advance(cx: &mut Cx<'_>, before: Lsn, advance: Advance) {
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
    let (flush, complete) = (cx.run.ack.flush(), cx.run.ack.complete());
    let line = if cx.run.ack.checkpointing() && complete != flush {
        format!("complete {before} -> {complete}: {why}; flush stays {flush} until a Feldera checkpoint holds it")
    } else {
        format!("flush {before} -> {flush}: {why}")
    };
    cx.queue.note(Level::Debug, Topic::Ack, line);
}
