//! The Snapshotting phase itself: its state, the workers' schedule, the copy's batches and its end
//! (see the module docs of `snapshotting`).

use crate::ack::BatchSeq;
use crate::catalog::questions::{self, QualifiedName};
use crate::config::{AckMode, CrashPoint};
use crate::conn::Event;
use crate::contract::mapping::{plan_mapping, ColumnMapping, MappingOptions};
use crate::copy::CopyRow;
use crate::feldera::Reply;
use crate::io::{Command, ConnFailure, ConnId, HttpId, Level, Topic};
use crate::outbox::{CutReason, Outbox};
use crate::pipeline::cx::Cx;
use crate::pipeline::feldera_link::FelderaLink;
use crate::pipeline::handover::Next;
use crate::pipeline::handover::Ready;
use crate::pipeline::handover::SnapshotStart;
use crate::pipeline::handover::StreamStart;
use crate::pipeline::keeper::News;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::policy::{Failure, FailureKind};
use crate::pipeline::queue::Queue;
use crate::pipeline::retraction::{ask_count, Retraction};
use crate::pipeline::sink::{Sink, SinkOutcome};
use crate::retract::plan_keys;
use crate::schema::Name;
use crate::snapshot::progress::Progress;
use crate::snapshot::ranges::WorkItem;
use crate::snapshot::state::{rfc3339_utc, Delivered, RoutePhase, SnapshotPhase, StateRoute};
use crate::timer::{TimerKind, TimerTable};
use crate::wire::PgError;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WorkerStage {
    Connecting,
    Importing,
    Idle,
    Sizing,
    /// Asking PostgreSQL which keys of a retraction page exist (worker 0 only).
    Checking,
    Copying(WorkItem),
    Committing,
    Closed,
}

#[derive(Debug)]
pub(super) struct Worker {
    pub(super) link: PgLink,
    pub(super) stage: WorkerStage,
    pub(super) backlog: VecDeque<Event>,
    pub(super) paused: bool,
    pub(super) answer: Vec<Vec<Option<String>>>,
    pub(super) error: Option<Box<PgError>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Workers import the snapshot; the first measures the tables.
    Preparing,
    /// Ranges are copied and sent.
    Copying,
    /// With checkpoints: everything is durable and verified; waiting until a Feldera
    /// checkpoint holds it before the state file may say `complete`.
    Checkpointing,
    /// `inconsistent`: everything is durable; the slot is being created now.
    CreatingSlot,
    /// Everything is copied and durable: Feldera's counts of the retracted tables are being
    /// checked against the rows copied.
    Verifying,
    /// Everything is durable; the state file is being rewritten `complete`.
    WritingState,
    /// An added-route copy is recorded; its temporary slot is being dropped.
    DroppingTemporarySlot,
    /// `START_REPLICATION` was sent.
    StartingStream,
}

pub(super) type Step = Result<(), Next>;

pub(super) fn fail(kind: FailureKind, message: impl Into<String>) -> Step {
    Err(Next::Fail(Failure::new(kind, message)))
}

fn next_of(step: Step) -> Next {
    step.err().unwrap_or(Next::Stay)
}

#[derive(Debug)]
pub(crate) struct Snapshotting {
    pub(super) repl: PgLink,
    pub(super) start: SnapshotStart,
    pub(super) mappings: Vec<ColumnMapping>,
    pub(super) names: Vec<Name>,
    pub(super) stage: Stage,
    pub(super) workers: Vec<Worker>,
    /// Workers to open once the work is planned.
    pub(super) planned_workers: usize,
    pub(super) queue: VecDeque<WorkItem>,
    /// Every heap the copy reads (a table's own, or a leaf partition's), by `WorkItem::heap`.
    pub(super) heaps: Vec<QualifiedName>,
    /// Ranges not finished yet, per route.
    pub(super) ranges_left: Vec<usize>,
    /// Rows read from COPY, per route: the snapshot's exact row count once a route is done.
    pub(super) copied: Vec<u64>,
    pub(super) outbox: Outbox,
    pub(super) sink: Sink,
    /// Each batch in flight: rows per route, to credit progress when it is durable.
    pub(super) batch_rows: BTreeMap<BatchSeq, Vec<(usize, u64)>>,
    pub(super) progress: Progress,
    pub(super) row: CopyRow,
    /// Feldera row counts asked for: the emptiness check before the copy, the verification
    /// after it. Route, request.
    pub(super) counts: Vec<(usize, HttpId)>,
    /// Routes whose leftovers are retracted (and verified by count).
    pub(super) retracted_routes: Vec<usize>,
    /// Leftover retraction, running on worker 0 under the snapshot while the others copy.
    pub(super) retraction: Option<Retraction>,
    /// The retraction may start (every emptiness count is in).
    pub(super) retraction_decided: bool,
    /// An added-route copy: every route's Feldera table, for the stream afterwards (the
    /// phase itself sees only the routes it copies).
    pub(super) stream_tables: Option<Vec<crate::schema::program::Table>>,
}

impl Snapshotting {
    /// The slot and its snapshot exist (or, under `inconsistent`, will be created after the
    /// copy): open the first worker.
    pub(crate) fn begin(
        cx: &mut Cx<'_>,
        repl: PgLink,
        mut start: SnapshotStart,
    ) -> (Snapshotting, Next) {
        // An added-route copy sees only the routes it copies: route indexes of its batches,
        // progress and retraction are positions in that list.
        let stream_tables = start
            .added
            .as_ref()
            .map(|added| added.routes.clone())
            .map(|routes| start.keep_only(&routes));
        let options = MappingOptions {
            require_primary_key: cx.env.config.require_primary_key,
        };
        let mut mappings = Vec::with_capacity(start.relations.len());
        for (relation, table) in start.relations.iter().zip(&start.ready.tables) {
            match plan_mapping(relation, table, &start.ready.types, options) {
                Ok(mapping) => mappings.push(mapping),
                Err(e) => {
                    let failure =
                        Failure::new(FailureKind::SetupRefused, format!("refusing to start: {e}"));
                    return (Self::empty(cx, repl, start), Next::Fail(failure));
                }
            }
        }
        let names: Vec<Name> = start.ready.tables.iter().map(|t| t.name.clone()).collect();
        let mut phase = Self::empty(cx, repl, start);
        phase.mappings = mappings;
        phase.names = names;
        phase.stream_tables = stream_tables;
        match phase.start.snapshot {
            Some(_) => {
                if cx.crash_at(CrashPoint::SnapshotAfterSlot) {
                    return (phase, Next::Crash(CrashPoint::SnapshotAfterSlot));
                }
            }
            None => cx.queue.note(
                Level::Warn,
                Topic::Snapshot,
                "SNAPSHOT_MODE=inconsistent: copying before the slot exists; every change committed between a table's copy and the slot's creation is lost (this mode exists to show that loss)",
            ),
        }
        let next = next_of(
            phase
                .plan_leftovers(cx)
                .and_then(|()| phase.open_worker(cx)),
        );
        (phase, next)
    }

    pub(super) fn empty(cx: &mut Cx<'_>, repl: PgLink, start: SnapshotStart) -> Snapshotting {
        let routes = start.relations.len();
        let names = start
            .relations
            .iter()
            .map(|r| format!("{}.{}", r.namespace, r.name))
            .collect();
        Snapshotting {
            repl,
            mappings: Vec::new(),
            names: Vec::new(),
            stage: Stage::Preparing,
            workers: Vec::new(),
            planned_workers: 1,
            queue: VecDeque::new(),
            heaps: Vec::new(),
            ranges_left: vec![0; routes],
            copied: vec![0; routes],
            outbox: Outbox::new(routes, cx.env.thresholds),
            sink: Sink::new(cx.env.config.max_in_flight_batches),
            batch_rows: BTreeMap::new(),
            progress: Progress::new(cx.now(), names),
            row: CopyRow::new(),
            counts: Vec::new(),
            retracted_routes: Vec::new(),
            retraction: None,
            retraction_decided: false,
            stream_tables: None,
            start,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn conn(&self) -> ConnId {
        self.repl.id
    }

    fn worker_of(&self, conn: ConnId) -> Option<usize> {
        self.workers.iter().position(|w| w.link.id == conn)
    }

    pub(crate) fn into_repl(self) -> PgLink {
        self.repl
    }

    /// Closes every connection (the slot stays; the state file says `pending`, so the next
    /// start copies again).
    pub(crate) fn close(mut self, queue: &mut Queue, link: &mut FelderaLink) {
        if let Some(retraction) = self.retraction.as_mut() {
            retraction.close(queue, link);
        }
        for worker in &mut self.workers {
            worker.link.close(queue);
        }
        self.repl.close(queue);
    }

    pub(crate) fn buffered_rows(&self) -> u64 {
        self.outbox.rows()
    }

    pub(crate) fn batches_in_flight(&self) -> u64 {
        self.sink.len() as u64
    }

    pub(crate) fn batch_in_flight(&self) -> Option<BatchSeq> {
        self.sink.oldest().map(|b| b.seq)
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.sink.resume(cx.queue, cx.link);
        if let Some(retraction) = self.retraction.as_mut() {
            retraction.resume_writes(cx);
        }
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        if self.sink.has_room() {
            if let Some(at) = self.outbox.linger_deadline() {
                timers.set(TimerKind::Linger, at);
            }
        }
        self.sink.arm(timers);
        if let Some(retraction) = &self.retraction {
            retraction.arm(timers);
        }
        if matches!(self.stage, Stage::Preparing | Stage::Copying) {
            timers.set(TimerKind::SnapshotProgress, self.progress.next_report());
        }
    }

    // ---- input ----

    pub(crate) fn on_pg_connected(&mut self, cx: &mut Cx<'_>, conn: ConnId) -> Next {
        if let Some(w) = self.worker_of(conn) {
            self.workers[w].link.on_connected(cx.queue);
        }
        Next::Stay
    }

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, conn: ConnId, bytes: &[u8]) -> Next {
        if conn == self.repl.id {
            return next_of(self.on_repl_bytes(cx, bytes));
        }
        let Some(w) = self.worker_of(conn) else {
            return Next::Stay;
        };
        let worker = &mut self.workers[w];
        worker
            .link
            .on_bytes_into(cx.queue, bytes, &mut worker.backlog);
        next_of(self.pump(cx).and_then(|()| self.maybe_finish(cx)))
    }

    pub(crate) fn on_pg_closed(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        error: Option<ConnFailure>,
    ) -> Next {
        if conn == self.repl.id {
            return self.repl.closed(
                cx.queue,
                &cx.env.config.pg,
                error,
                "the replication connection holding the snapshot",
            );
        }
        match self.worker_of(conn) {
            Some(w) if self.workers[w].stage != WorkerStage::Closed => {
                let what = format!("snapshot connection {w}");
                self.workers[w].link.closed(
                    cx.queue,
                    &cx.env.config.pg.at(cx.run.hosts.index),
                    error,
                    &what,
                )
            }
            _ => Next::Stay,
        }
    }

    pub(crate) fn on_pg_tls_ready(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        certificate: Option<&[u8]>,
    ) {
        if let Some(w) = self.worker_of(conn) {
            self.workers[w].link.on_tls_ready(cx.queue, certificate);
        }
    }

    /// A piece of a streamed answer: `None` when it is not this phase's.
    pub(crate) fn on_http_chunk(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        bytes: &[u8],
    ) -> Option<Next> {
        let retraction = self.retraction.as_mut().filter(|r| r.owns(id))?;
        let step = retraction
            .on_chunk(cx, id, bytes)
            .and_then(|s| self.on_retracted(cx, s));
        Some(next_of(step.and_then(|()| self.maybe_finish(cx))))
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        if let Some(index) = self.counts.iter().position(|(_, http)| *http == id) {
            return next_of(self.on_count(cx, index, reply));
        }
        if let Some(retraction) = self.retraction.as_mut().filter(|r| r.owns(id)) {
            let step = retraction
                .on_http(cx, id, reply)
                .and_then(|s| self.on_retracted(cx, s));
            return next_of(step.and_then(|()| self.maybe_finish(cx)));
        }
        let now = cx.now();
        let step = match self.sink.on_reply(cx.queue, cx.link, now, id, reply) {
            Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
            None => Ok(()),
        };
        next_of(step.and_then(|()| self.maybe_finish(cx)))
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Next {
        let step = match kind {
            TimerKind::Linger => self.maybe_flush(cx),
            TimerKind::SnapshotProgress => {
                if let Some(line) = self.progress.report(cx.now()) {
                    cx.queue.note(Level::Info, Topic::Snapshot, line);
                }
                Ok(())
            }
            TimerKind::CompletionPoll
            | TimerKind::CompletionTimeout
            | TimerKind::SlowCompletionLog => {
                let now = cx.now();
                let copy = match self.sink.on_timer(cx.queue, cx.link, now) {
                    Some((seq, outcome)) => self.on_sink_outcome(cx, seq, outcome),
                    None => Ok(()),
                };
                copy.and_then(|()| match self.retraction.as_mut() {
                    Some(retraction) => retraction
                        .on_timer(cx)
                        .and_then(|s| self.on_retracted(cx, s)),
                    None => Ok(()),
                })
            }
            _ => Ok(()),
        };
        next_of(step.and_then(|()| self.maybe_finish(cx)))
    }

    pub(crate) fn on_state_written(&mut self, cx: &mut Cx<'_>, result: Result<(), String>) -> Next {
        if self.stage != Stage::WritingState {
            return Next::Stay;
        }
        if let Err(e) = result {
            return Next::Fail(Failure::new(
                FailureKind::SetupRefused,
                format!("cannot record the finished snapshot in the state file: {e}"),
            ));
        }
        cx.queue.note(
            Level::Info,
            Topic::Snapshot,
            match &self.start.added {
                None => format!(
                    "state file {} says complete (consistent point {})",
                    self.start.state_path, self.start.ready.slot_confirmed
                ),
                Some(_) => format!(
                    "state file {} says {} complete (consistent point {})",
                    self.start.state_path,
                    self.names
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.start.ready.slot_confirmed
                ),
            },
        );
        if let Some(added) = &self.start.added {
            let Some(command) = questions::drop_slot_command(&added.temporary_slot) else {
                return Next::Fail(Failure::new(
                    FailureKind::ConfigInvalid,
                    "a slot name contains a NUL byte",
                ));
            };
            self.stage = Stage::DroppingTemporarySlot;
            return match self.repl.query(cx.queue, &command) {
                Ok(()) => Next::Stay,
                Err(e) => Next::Fail(Failure::new(
                    FailureKind::PgUnreachable,
                    format!("cannot drop the temporary slot: {e}"),
                )),
            };
        }
        next_of(self.start_stream(cx))
    }

    /// `START_REPLICATION` on the connection that held the snapshot.
    fn start_stream(&mut self, cx: &mut Cx<'_>) -> Step {
        let Some(command) = questions::start_replication_command(
            &cx.env.config.slot,
            &cx.env.config.publication,
            false,
        ) else {
            return fail(
                FailureKind::ConfigInvalid,
                "a slot or publication name contains a NUL byte",
            );
        };
        self.stage = Stage::StartingStream;
        self.repl.query(cx.queue, &command).map_err(|e| {
            Next::Fail(Failure::new(
                FailureKind::PgUnreachable,
                format!("cannot start replication: {e}"),
            ))
        })
    }

    // ---- the replication connection: idle until the end ----

    fn on_repl_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Step {
        let mut events = self.repl.on_bytes(cx.queue, bytes).into_iter();
        while let Some(event) = events.next() {
            match event {
                Event::QueryDone { .. } if self.stage == Stage::DroppingTemporarySlot => {
                    if let Some(added) = &self.start.added {
                        cx.queue.log(
                            Level::Info,
                            format!(
                                "dropped temporary replication slot {}",
                                added.temporary_slot
                            ),
                        );
                    }
                    self.start_stream(cx)?;
                }
                Event::StreamStarted(_) if self.stage == Stage::StartingStream => {
                    let tables = match self.stream_tables.take() {
                        Some(tables) => tables,
                        None => std::mem::take(&mut self.start.ready.tables),
                    };
                    let slot_confirmed = match &self.start.added {
                        Some(added) => added.slot_confirmed,
                        None => self.start.ready.slot_confirmed,
                    };
                    let ready = Ready {
                        wal_sender_timeout_ms: self.start.ready.wal_sender_timeout_ms,
                        tables,
                        types: std::mem::take(&mut self.start.ready.types),
                        slot_confirmed,
                        placement: std::mem::take(&mut self.start.ready.placement),
                        skips: crate::pipeline::streaming::Skips::of(
                            &self.start.state,
                            &cx.env.routes,
                        ),
                    };
                    return Err(Next::Stream(Box::new(StreamStart {
                        ready,
                        pending: events.collect(),
                        record: Some(self.start.state.clone()),
                        online: Vec::new(),
                    })));
                }
                Event::DataRow(row) if self.stage == Stage::CreatingSlot => {
                    let text = row_text(&row.columns);
                    let views: Vec<Option<&str>> = text.iter().map(|c| c.as_deref()).collect();
                    match questions::parse_created_slot(&[views.as_slice()]) {
                        Ok((point, _)) => self.start.ready.slot_confirmed = point,
                        Err(e) => return fail(FailureKind::PgProtocol, e.to_string()),
                    }
                }
                Event::QueryDone { .. } if self.stage == Stage::CreatingSlot => {
                    cx.queue.log(
                        Level::Info,
                        format!(
                            "created replication slot {} at {} (SNAPSHOT 'nothing', after the copy)",
                            cx.env.config.slot, self.start.ready.slot_confirmed
                        ),
                    );
                    if cx.crash_at(CrashPoint::SnapshotAfterSlot) {
                        return Err(Next::Crash(CrashPoint::SnapshotAfterSlot));
                    }
                    self.write_complete(cx);
                }
                Event::QueryError(error) => {
                    return fail(
                        FailureKind::SetupRefused,
                        format!("the replication connection refused a command: {error}"),
                    )
                }
                Event::Notice(notice) => cx.queue.log(Level::Info, format!("PostgreSQL: {notice}")),
                Event::Failed(error) => {
                    return fail(
                        FailureKind::PgUnreachable,
                        format!("the replication connection holding the snapshot failed: {error}"),
                    )
                }
                Event::XLogData(_) | Event::Keepalive(_) => {
                    return fail(
                        FailureKind::PgProtocol,
                        "protocol error: replication data before START_REPLICATION",
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }

    // ---- batches ----

    pub(super) fn maybe_flush(&mut self, cx: &mut Cx<'_>) -> Step {
        match self.outbox.due(cx.now(), false) {
            Some(reason) => self.cut(cx, reason),
            None => Ok(()),
        }
    }

    /// Cuts and sends a batch when the sink has room.
    pub(super) fn cut(&mut self, cx: &mut Cx<'_>, reason: CutReason) -> Step {
        if !self.sink.has_room() {
            return Ok(());
        }
        let Some(batch) = self.outbox.cut(reason) else {
            return Ok(());
        };
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "snapshot #{} cut ({}): {} rows, {} bytes",
                batch.seq,
                reason.name(),
                batch.rows(),
                batch.bytes()
            ),
        );
        self.batch_rows.insert(
            batch.seq,
            batch.parts.iter().map(|p| (p.route, p.rows)).collect(),
        );
        self.sink.send(cx.queue, cx.link, &self.names, batch);
        Ok(())
    }

    fn on_sink_outcome(&mut self, cx: &mut Cx<'_>, seq: BatchSeq, outcome: SinkOutcome) -> Step {
        match outcome {
            SinkOutcome::Pending => Ok(()),
            SinkOutcome::Accepted if cx.env.config.ack_mode == AckMode::Accepted => {
                self.batch_durable(cx, seq)
            }
            SinkOutcome::Accepted => {
                let (now, timeout_ms) = (cx.now(), cx.env.config.completion_timeout_ms);
                self.sink
                    .await_completion(cx.queue, cx.link, seq, now, timeout_ms);
                Ok(())
            }
            SinkOutcome::Complete => self.batch_durable(cx, seq),
            SinkOutcome::Failed(failure) => Err(Next::Fail(failure)),
        }
    }

    fn batch_durable(&mut self, cx: &mut Cx<'_>, seq: BatchSeq) -> Step {
        let Some(batch) = self.sink.take(seq) else {
            return Ok(());
        };
        cx.run.write_durable(cx.now());
        for (route, rows) in self.batch_rows.remove(&seq).unwrap_or_default() {
            self.progress.on_durable(route, rows);
        }
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!("snapshot #{} durable ({} rows)", batch.seq, batch.rows()),
        );
        if cx.crash_at(CrashPoint::SnapshotMidCopy) {
            return Err(Next::Crash(CrashPoint::SnapshotMidCopy));
        }
        self.maybe_flush(cx)?;
        self.pump(cx)
    }

    // ---- the end of the copy ----

    fn copy_finished(&self) -> bool {
        self.stage == Stage::Copying
            && self.retraction_decided
            && self.retraction.as_ref().is_none_or(Retraction::is_done)
            && self.queue.is_empty()
            && self.workers.iter().all(|w| {
                !matches!(
                    w.stage,
                    WorkerStage::Copying(_)
                        | WorkerStage::Importing
                        | WorkerStage::Connecting
                        | WorkerStage::Sizing
                        | WorkerStage::Checking
                )
            })
    }

    /// Once every range is copied: send what is left; when every batch is durable, verify
    /// the retracted tables' counts; when they agree, record the snapshot as complete.
    pub(super) fn maybe_finish(&mut self, cx: &mut Cx<'_>) -> Step {
        if self.stage == Stage::Verifying {
            return match self.counts.is_empty() {
                true => self.finish(cx),
                false => Ok(()),
            };
        }
        if !self.copy_finished() {
            return Ok(());
        }
        if !self.outbox.is_empty() {
            return self.cut(cx, CutReason::Drain);
        }
        if !self.sink.is_idle() {
            return Ok(());
        }
        for route in 0..self.copied.len() {
            self.progress.on_table_done(route);
        }
        cx.queue.note(
            Level::Info,
            Topic::Snapshot,
            self.progress.summary(cx.now()),
        );
        self.stage = Stage::Verifying;
        for route in std::mem::take(&mut self.retracted_routes) {
            let table = &self.start.ready.tables[route];
            let plan = plan_keys(table)
                .map_err(|e| Next::Fail(Failure::new(FailureKind::SetupRefused, e.to_string())))?;
            let http = ask_count(cx, &plan);
            self.counts.push((route, http));
        }
        self.maybe_finish(cx)
    }

    /// Once the counts agree: the crash point, a checkpoint when acknowledgements wait for
    /// one, then `complete`.
    fn finish(&mut self, cx: &mut Cx<'_>) -> Step {
        if cx.crash_at(CrashPoint::SnapshotBeforeComplete) {
            return Err(Next::Crash(CrashPoint::SnapshotBeforeComplete));
        }
        if cx.run.feldera.checkpointing() && cx.run.ack.unsaved() {
            // A Feldera restart resumes from its last checkpoint: a copy recorded
            // `complete` before one holds it could be lost with nothing left to repair it.
            self.stage = Stage::Checkpointing;
            cx.run.feldera.checkpoint_wanted = true;
            cx.queue.note(
                Level::Info,
                Topic::Snapshot,
                "copy verified; waiting for a Feldera checkpoint to hold it before recording it complete",
            );
            return Ok(());
        }
        self.after_checkpoint(cx)
    }

    /// A checkpoint succeeded (or did not) while the copy waits for one.
    pub(crate) fn on_checkpoint(&mut self, cx: &mut Cx<'_>, news: &News) -> Next {
        if self.stage != Stage::Checkpointing {
            return Next::Stay;
        }
        if *news == News::Saved && !cx.run.ack.unsaved() {
            return next_of(self.after_checkpoint(cx));
        }
        // Not yet everything (or it failed): the keeper asks again.
        cx.run.feldera.checkpoint_wanted = true;
        Next::Stay
    }

    fn after_checkpoint(&mut self, cx: &mut Cx<'_>) -> Step {
        if self.start.snapshot.is_none() {
            let Some(command) = questions::create_slot_command(&cx.env.config.slot, false) else {
                return fail(
                    FailureKind::ConfigInvalid,
                    "the slot name contains a NUL byte",
                );
            };
            self.stage = Stage::CreatingSlot;
            return self.repl.query(cx.queue, &command).map_err(|e| {
                Next::Fail(Failure::new(
                    FailureKind::PgUnreachable,
                    format!("cannot create the slot: {e}"),
                ))
            });
        }
        self.write_complete(cx);
        Ok(())
    }

    fn write_complete(&mut self, cx: &mut Cx<'_>) {
        self.stage = Stage::WritingState;
        let point = self.start.ready.slot_confirmed;
        let state = &mut self.start.state;
        // Feldera holds the copy: WAL up to its consistent point (`streaming::bound`).
        let timeline = cx.run.sent.timeline;
        match &self.start.added {
            None => {
                state.phase = SnapshotPhase::Complete;
                state.consistent_point = Some(point);
                state.delivered = timeline.map(|timeline| Delivered {
                    timeline,
                    through: point,
                });
                cx.run.sent.copied_at(point);
            }
            Some(added) => {
                // Only the copied routes: the file's own copy and the other routes stay.
                for &route in &added.routes {
                    // The record keeps what the publication published when the copy began.
                    let copied = StateRoute::of(&cx.env.routes[route]);
                    for recorded in state.routes.iter_mut().filter(|r| r.same_route(&copied)) {
                        *recorded = recorded.with_phase(Some(RoutePhase::Complete), Some(point));
                    }
                }
                if let Some(timeline) = timeline {
                    let earlier = state
                        .delivered
                        .filter(|d| d.timeline == timeline)
                        .map_or(point, |d| d.through.max(point));
                    state.delivered = Some(Delivered {
                        timeline,
                        through: earlier,
                    });
                }
                cx.run.sent.note(point);
            }
        }
        state.updated_at = Some(rfc3339_utc(cx.queue.now.wall));
        cx.queue.push(Command::WriteState {
            path: self.start.state_path.clone(),
            contents: Bytes::from(state.encode()),
        });
    }
}

pub(super) fn row_text(columns: &[Option<Bytes>]) -> Vec<Option<String>> {
    columns
        .iter()
        .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}
