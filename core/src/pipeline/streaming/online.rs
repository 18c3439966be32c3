//! The Streaming phase's side of the online copy (docs/online-copy.md, "Emitting,
//! acknowledging, resuming"): the copier's connection, every stream message handed to it,
//! each chunk it judged put into the outbox as a transaction committed at the chunk's
//! watermark (so batching, Feldera transactions, completion or checkpoints and the
//! acknowledgement treat it as they treat the stream's own transactions), and the route's
//! copy recorded in the state file once the acknowledgement passed its last chunk.

use super::copier::{Copier, CopyFailure, CopyStep, Emitted, OnlineCopy};
use super::phase::{fail, Step, Streaming};
use crate::backfill::key::RowKey;
use crate::conn::Event;
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::convert::Converter;
use crate::io::{ConnFailure, ConnId, Level, Topic};
use crate::pgoutput::{Message, Relation};
use crate::pipeline::cx::Cx;
use crate::pipeline::feldera_txn::StreamPos;
use crate::pipeline::handover::Next;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::policy::{Failure, FailureKind};
use crate::snapshot::state::{RoutePhase, StateRoute};
use crate::Lsn;
use bytes::Bytes;

impl Streaming {
    /// Opens the copier's connection when routes are to be copied online.
    pub(super) fn open_copier(&mut self, cx: &mut Cx<'_>, online: Vec<OnlineCopy>) -> Step {
        let Some(first) = online.first() else {
            return Ok(());
        };
        let source = first.source;
        let name = format!("slotline/{}/online-copy", cx.env.config.slot);
        let pg = cx.env.config.pg.at(cx.run.hosts.index);
        let link = PgLink::open(cx.queue, &pg, false, &name).map_err(|e| {
            Next::Fail(Failure::new(
                FailureKind::ConfigInvalid,
                format!("cannot connect to PostgreSQL: {e}"),
            ))
        })?;
        // Names this session's watermarks apart from an earlier session's still in the WAL.
        let run = format!("{}", cx.queue.now.wall.0);
        let mut copier = Copier::new(link, source, run, online);
        let relations = &self.relations;
        let mapped = &self.mapped;
        copier.start_next(cx.queue, |route| {
            mapped
                .iter()
                .filter(|(_, (r, _))| *r == route)
                .filter_map(|(oid, _)| relations.get(*oid))
                .collect()
        });
        self.copier = Some(copier);
        Ok(())
    }

    pub(crate) fn owns_copier_conn(&self, conn: ConnId) -> bool {
        self.copier.as_ref().is_some_and(|c| c.owns(conn))
    }

    pub(crate) fn on_copier_connected(&mut self, cx: &mut Cx<'_>) {
        if let Some(copier) = self.copier.as_mut() {
            copier.link.on_connected(cx.queue);
        }
    }

    pub(crate) fn on_copier_tls_ready(&mut self, cx: &mut Cx<'_>, certificate: Option<&[u8]>) {
        if let Some(copier) = self.copier.as_mut() {
            copier.link.on_tls_ready(cx.queue, certificate);
        }
    }

    pub(crate) fn on_copier_closed(&mut self, cx: &mut Cx<'_>, error: Option<ConnFailure>) -> Next {
        let pg = cx.env.config.pg.at(cx.run.hosts.index);
        match self.copier.as_mut() {
            Some(copier) => {
                copier
                    .link
                    .closed(cx.queue, &pg, error, "the online copy's connection")
            }
            None => Next::Stay,
        }
    }

    pub(crate) fn on_copier_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let Some(copier) = self.copier.as_mut() else {
            return Next::Stay;
        };
        let events = copier.link.on_bytes(cx.queue, bytes);
        if events.iter().any(|e| matches!(e, Event::Ready)) {
            let link = &copier.link;
            let reported = |name: &str| link.parameter(name).unwrap_or("").to_owned();
            if let Err(refusal) = crate::catalog::checks::pinned_settings(
                &reported("DateStyle"),
                &reported("TimeZone"),
                &reported("IntervalStyle"),
                &reported("client_encoding"),
            ) {
                return Next::Fail(Failure::new(
                    FailureKind::SetupRefused,
                    format!("refusing to start: {refusal}"),
                ));
            }
        }
        copier.note_position(cx.run.ack.complete().max(cx.run.ack.received()));
        let between = !self.in_source_tx && !self.held && !self.draining;
        let step = match copier.on_events(cx.queue, events, self.read_at.at, between) {
            Ok(steps) => self.on_copy_steps(cx, steps),
            Err(failure) => copy_failed(failure),
        };
        let step = step.and_then(|()| self.pump(cx));
        self.after(cx, step)
    }

    /// After the stream's message was handled: the copier's part in it.
    pub(super) fn copier_after_message(
        &mut self,
        cx: &mut Cx<'_>,
        message: &Message<'_>,
        wal_start: Lsn,
    ) -> Step {
        let Some(copier) = self.copier.as_mut() else {
            return Ok(());
        };
        let route = match message {
            Message::Relation(relation) => self.mapped.get(&relation.oid).map(|(r, _)| *r),
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) => message
                .row_relation_oid()
                .and_then(|oid| self.mapped.get(&oid))
                .map(|(r, _)| *r),
            _ => None,
        };
        copier.note_position(cx.run.ack.complete());
        let steps = copier.on_message(cx.queue, message, route, wal_start);
        self.on_copy_steps(cx, steps)
    }

    /// A keepalive: the stream stands at `wal_end`, between transactions unless one is
    /// open (a late chunk is judged there).
    pub(super) fn copier_at_keepalive(&mut self, cx: &mut Cx<'_>, wal_end: Lsn) -> Step {
        let Some(copier) = self.copier.as_mut() else {
            return Ok(());
        };
        copier.note_position(wal_end.max(cx.run.ack.complete()));
        if self.in_source_tx || self.held || self.draining {
            return Ok(());
        }
        let steps = copier.between(cx.queue);
        self.on_copy_steps(cx, steps)
    }

    fn on_copy_steps(&mut self, cx: &mut Cx<'_>, steps: Vec<CopyStep>) -> Step {
        for step in steps {
            match step {
                CopyStep::Emit {
                    route,
                    relation,
                    rows,
                    emitted,
                } => self.emit_chunk(cx, route, &relation, &rows, &emitted)?,
            }
        }
        if let Some(copier) = self.copier.as_mut() {
            copier.read_more(cx.queue).or_else(copy_failed)?;
        }
        Ok(())
    }

    /// A judged chunk's rows, as one transaction committed at its watermark: between two of
    /// the stream's transactions, in stream order.
    fn emit_chunk(
        &mut self,
        cx: &mut Cx<'_>,
        route: usize,
        relation: &Relation,
        rows: &[(RowKey, Bytes)],
        emitted: &Emitted,
    ) -> Step {
        debug_assert!(
            !self.in_source_tx,
            "a watermark is never inside a transaction"
        );
        let at = emitted.at;
        self.transaction_at = at;
        self.read_at = StreamPos { commit: at, at };
        cx.run.ack.on_begin();
        self.outbox.mark_transaction_start();
        self.in_source_tx = true;
        // The catalog's shape of the table, which the chunk's COPY reads (the stream may
        // not have announced the table in this session at all).
        let options = MappingOptions {
            require_primary_key: cx.env.config.require_primary_key,
        };
        let mapping = match plan_mapping(relation, &self.tables[route], &self.types, options) {
            Ok(mapping) => mapping,
            Err(e) => return fail(FailureKind::DataRefused, e.to_string()),
        };
        let converter = Converter::new(&mapping);
        let columns = relation.columns.len();
        for (_, line) in rows {
            if let Err(e) = self.copy_row.parse(line, columns) {
                return fail(
                    FailureKind::PgProtocol,
                    format!(
                        "a COPY row of {} does not parse: {e}",
                        self.tables[route].name
                    ),
                );
            }
            let (mark, body) = self.outbox.start_line(route);
            match converter.snapshot_row(&self.copy_row, body) {
                Ok(lines) => self.outbox.finish_lines(mark, lines, cx.now()),
                Err(e) => {
                    self.outbox.abandon_line(mark);
                    return fail(
                        FailureKind::DataRefused,
                        format!("{e}. The online copy of this table was not acknowledged"),
                    );
                }
            }
        }
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "{} rows of {}'s online copy are a transaction at {at}",
                rows.len(),
                self.tables[route].name
            ),
        );
        self.on_commit(cx, at)
    }

    /// The acknowledgement moved: record the routes whose last chunk it passed, and go on
    /// with the next route's copy.
    pub(super) fn copy_progress(&mut self, cx: &mut Cx<'_>) -> Step {
        let Some(copier) = self.copier.as_mut() else {
            return Ok(());
        };
        let passed = copier.passed(cx.run.ack.flush());
        let since = self.slot_confirmed_at_start;
        for emitted in passed {
            if !emitted.last && cx.crash_at(crate::config::CrashPoint::SnapshotMidCopy) {
                // A chunk is durable and not yet recorded, the copy not finished.
                return Err(Next::Crash(crate::config::CrashPoint::SnapshotMidCopy));
            }
            let route = &cx.env.routes[emitted.route];
            let record = StateRoute::of(route);
            if emitted.last {
                cx.queue.log(
                    Level::Info,
                    format!(
                        "{} is copied online: every chunk is durable in Feldera (acknowledged through {})",
                        route.source,
                        cx.run.ack.flush()
                    ),
                );
            }
            let (last, end_key) = (emitted.last, emitted.end_key);
            self.bound.change(cx.queue, &cx.env.state_path, |file| {
                if let Some(r) = file.routes.iter_mut().find(|r| r.same_route(&record)) {
                    if last {
                        r.phase = Some(RoutePhase::Complete);
                        r.consistent_point = Some(since);
                        r.copied_through = None;
                    } else {
                        r.copied_through = end_key;
                    }
                }
            });
        }
        let relations = &self.relations;
        let mapped = &self.mapped;
        if let Some(copier) = self.copier.as_mut() {
            copier.start_next(cx.queue, |route| {
                mapped
                    .iter()
                    .filter(|(_, (r, _))| *r == route)
                    .filter_map(|(oid, _)| relations.get(*oid))
                    .collect()
            });
            copier.read_more(cx.queue).or_else(copy_failed)?;
        }
        Ok(())
    }

    /// A chunk that had to be read again may be read now.
    pub(crate) fn on_copy_retry(&mut self, cx: &mut Cx<'_>) -> Next {
        let step = match self.copier.as_mut() {
            Some(copier) => copier.read_more(cx.queue).or_else(copy_failed),
            None => Ok(()),
        };
        self.after(cx, step)
    }

    /// When a chunk that had to be read again may be read (`TimerKind::CopyRetry`).
    pub(crate) fn copy_retry_at(&self) -> Option<crate::time::Mono> {
        self.copier.as_ref()?.retry_at()
    }

    /// The online copy's progress, for the progress line.
    pub(crate) fn copy_description(&self, now: crate::time::Mono) -> Option<String> {
        self.copier.as_ref()?.describe(now)
    }

    /// The copier's connection closes with the stream's.
    pub(super) fn close_copier(&mut self, queue: &mut crate::pipeline::queue::Queue) {
        if let Some(copier) = self.copier.as_mut() {
            copier.close(queue);
        }
    }
}

fn copy_failed(failure: CopyFailure) -> Step {
    fail(FailureKind::PgUnreachable, failure.0)
}
