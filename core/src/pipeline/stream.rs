//! The replication connection's events: startup answers until the stream opens, then
//! XLogData and keepalives, converted on arrival into the outbox.
//!
//! Backpressure: events wait in a backlog (and reading is paused) while a batch is in flight
//! and the outbox is already due (rows, bytes, or a commit with `BATCH_LINGER_MS=0`), so
//! memory stays bounded by the thresholds whatever the transaction size.

use super::Pipeline;
use crate::conn::{ConnError, Event};
use crate::contract::mapping::{plan_mapping, ColumnMapping, MappingOptions};
use crate::contract::schema::Table;
use crate::convert::Converter;
use crate::io::{exit, ConnId, Level};
use crate::outbox::CutReason;
use crate::pgoutput::{self, Message, RelationCache, RelationChange};
use crate::status::StatusSchedule;
use crate::wire::{PrimaryKeepalive, XLogData};
use crate::Lsn;
use std::collections::{BTreeMap, VecDeque};

/// A streaming session's state.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) status: StatusSchedule,
    relations: RelationCache,
    /// Route index and mapping of every relation seen in this session.
    mapped: BTreeMap<u32, (usize, ColumnMapping)>,
    /// Each route's Feldera table, as the schema describes it.
    pub(crate) tables: Vec<Table>,
    backlog: VecDeque<Event>,
    paused: bool,
    /// `BATCH_LINGER_MS=0`: a commit was read and its rows wait to be cut.
    pub(crate) cut_at_commit: bool,
    pub(crate) slot_confirmed_at_start: Lsn,
    /// A keepalive found this session with nothing open, buffered or in flight: the stream
    /// is caught up. Until then a new session may still be about to replay.
    pub(crate) caught_up: bool,
    /// The flush position of the last status update sent.
    pub(crate) reported: Option<Lsn>,
}

/// Server errors that no retry can fix: wrong password, unknown role or database, no
/// replication privilege.
fn is_permanent(error: &ConnError) -> bool {
    match error {
        ConnError::Server(e) => e.code.starts_with("28") || e.code == "3D000" || e.code == "42501",
        ConnError::UnsupportedAuthentication { .. }
        | ConnError::PasswordRequired { .. }
        | ConnError::Scram(_)
        | ConnError::TlsNotOffered
        | ConnError::Tls(_) => true,
        _ => false,
    }
}

impl Pipeline {
    pub(super) fn on_pg_connected(&mut self, conn: ConnId) {
        match self.session.as_mut() {
            Some(session) if session.repl.id == conn => session.repl.on_connected(&mut self.ctx),
            _ => self.stop_on_pg_connected(conn),
        }
    }

    pub(super) fn on_pg_bytes(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(session) = self.session.as_mut().filter(|s| s.repl.id == conn) else {
            return self.stop_on_pg_bytes(conn, bytes);
        };
        let events = session.repl.on_bytes(&mut self.ctx, bytes);
        let mut events = events.into_iter();
        while self.session.as_ref().is_some_and(|s| s.stream.is_none()) {
            let Some(event) = events.next() else { return };
            self.on_startup_event(event);
            if self.ctx.exited() {
                return;
            }
        }
        if let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) {
            stream.backlog.extend(events);
        }
        self.pump();
    }

    fn on_startup_event(&mut self, event: Event) {
        let Some(session) = self.session.as_mut() else {
            return;
        };
        let result = match event {
            Event::Ready => session.startup.on_ready(&mut self.ctx, &mut session.repl),
            Event::DataRow(row) => session.startup.on_row(&row),
            Event::QueryError(error) => {
                session.startup.on_query_error(error.to_string());
                Ok(())
            }
            Event::QueryDone { .. } => session
                .startup
                .on_query_done(&mut self.ctx, &mut session.repl),
            Event::StreamStarted(_) => match session.startup.on_stream_started() {
                Ok(ready) => {
                    self.ack.observe_confirmed(ready.slot_confirmed);
                    let now = self.ctx.now.mono;
                    let status = StatusSchedule::new(now, ready.wal_sender_timeout_ms);
                    self.ctx.log(
                        Level::Info,
                        format!(
                            "streaming from slot {} (confirmed {}); status every {} ms",
                            self.config.slot,
                            ready.slot_confirmed,
                            status.interval_us() / 1000
                        ),
                    );
                    let session = self.session.as_mut().expect("checked above");
                    session.stream = Some(Stream {
                        status,
                        relations: RelationCache::new(),
                        mapped: BTreeMap::new(),
                        tables: ready.tables,
                        backlog: VecDeque::new(),
                        paused: false,
                        cut_at_commit: false,
                        slot_confirmed_at_start: ready.slot_confirmed,
                        caught_up: false,
                        reported: None,
                    });
                    Ok(())
                }
                Err(e) => Err(e),
            },
            Event::Notice(notice) => {
                self.ctx.log(Level::Info, format!("PostgreSQL: {notice}"));
                Ok(())
            }
            Event::Failed(error) => return self.on_conn_failed(error),
            Event::XLogData(_) | Event::Keepalive(_) => {
                return self.fatal("protocol error: replication data before START_REPLICATION");
            }
            _ => Ok(()),
        };
        self.on_startup_result(result);
    }

    fn on_conn_failed(&mut self, error: ConnError) {
        if is_permanent(&error) {
            self.fatal(format!("PostgreSQL refused the connection: {error}"));
        } else {
            self.end_session(format!("replication connection failed: {error}"));
        }
    }

    /// Whether stream events must wait: a batch is in flight and the outbox is already due
    /// by size or by a commit boundary, or a graceful stop stopped reading.
    fn blocked(&self) -> bool {
        if self.stop.is_some() {
            return true;
        }
        let at_commit = self
            .session
            .as_ref()
            .and_then(|s| s.stream.as_ref())
            .is_some_and(|s| s.cut_at_commit);
        self.in_flight.is_some()
            && matches!(
                self.outbox.due(self.ctx.now.mono, at_commit),
                Some(CutReason::Rows | CutReason::Bytes | CutReason::Commit)
            )
    }

    /// Handles backlogged stream events until the backlog is empty or must wait.
    pub(super) fn pump(&mut self) {
        loop {
            if self.ctx.exited() {
                return;
            }
            let blocked = self.blocked();
            let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) else {
                return;
            };
            if blocked {
                if !stream.backlog.is_empty() && !stream.paused {
                    stream.paused = true;
                    let session = self.session.as_ref().expect("streaming session");
                    session.repl.pause_read(&mut self.ctx);
                }
                return;
            }
            let Some(event) = stream.backlog.pop_front() else {
                if stream.paused && self.stop.is_none() {
                    stream.paused = false;
                    let session = self.session.as_ref().expect("streaming session");
                    session.repl.resume_read(&mut self.ctx);
                }
                return;
            };
            self.on_stream_event(event);
        }
    }

    fn on_stream_event(&mut self, event: Event) {
        match event {
            Event::XLogData(xlog) => self.on_xlog(xlog),
            Event::Keepalive(keepalive) => self.on_keepalive(keepalive),
            Event::StreamServerDone => {
                self.end_session("the server ended the replication stream".into())
            }
            Event::Notice(notice) => self.ctx.log(Level::Info, format!("PostgreSQL: {notice}")),
            Event::Failed(error) => self.on_conn_failed(error),
            _ => {}
        }
    }

    fn on_keepalive(&mut self, keepalive: PrimaryKeepalive) {
        let idle = self.outbox.is_empty() && self.in_flight.is_none();
        if idle && !self.ack.in_transaction() && self.ack.pending_commits() == 0 {
            if let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) {
                stream.caught_up = true;
            }
        }
        if self.ack.on_keepalive(keepalive.wal_end, idle).is_some() {
            self.progress.on_progress(self.ctx.now.mono);
            self.send_status();
        } else if keepalive.reply_requested {
            self.send_status();
        }
    }

    fn on_xlog(&mut self, xlog: XLogData) {
        self.ack.on_wal_data(xlog.wal_start);
        let message = match pgoutput::parse(&xlog.data) {
            Ok(message) => message,
            Err(e) => {
                return self.fatal(format!(
                    "cannot decode pgoutput message at {}: {e}",
                    xlog.wal_start
                ))
            }
        };
        match message {
            Message::Begin(_) => self.ack.on_begin(),
            Message::Commit(commit) => self.on_commit(commit.end_lsn),
            Message::Relation(relation) => self.on_relation(relation),
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) => self.on_row(&message),
            Message::Truncate(_) => {
                let names = self.truncated_names(&message);
                self.fatal(format!(
                    "TRUNCATE of {names} arrived; propagating TRUNCATE as retractions is not supported yet. \
                     Nothing after the previous commit was acknowledged"
                ));
            }
            Message::Type(_) | Message::Origin(_) | Message::Logical(_) => {}
        }
    }

    fn truncated_names(&self, message: &Message<'_>) -> String {
        let stream = self.session.as_ref().and_then(|s| s.stream.as_ref());
        match (message, stream) {
            (Message::Truncate(t), Some(stream)) => match stream.relations.truncated(t) {
                Ok(relations) => relations
                    .iter()
                    .map(|r| r.qualified_name())
                    .collect::<Vec<_>>()
                    .join(", "),
                Err(e) => e.to_string(),
            },
            _ => "a table".into(),
        }
    }

    fn on_commit(&mut self, end_lsn: Lsn) {
        if self
            .ack
            .on_commit(end_lsn, self.outbox.seq_for_commit())
            .is_some()
        {
            self.progress.on_progress(self.ctx.now.mono);
            self.send_status();
        }
        let linger_zero = self.config.batch_linger_ms == 0;
        if let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) {
            stream.cut_at_commit |= linger_zero && !self.outbox.is_empty();
        }
        self.maybe_flush();
    }

    fn on_relation(&mut self, relation: pgoutput::Relation) {
        let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) else {
            return;
        };
        let Some(route) = self
            .routes
            .iter()
            .position(|r| r.source.is(&relation.namespace, &relation.name))
        else {
            let name = relation.qualified_name();
            return self.fatal(format!(
                "a change to {name} arrived but {name} is not routed; add it to TABLES or remove it from publication {}. \
                 Nothing of this transaction was acknowledged",
                self.config.publication
            ));
        };
        let options = MappingOptions {
            require_primary_key: self.config.require_primary_key,
        };
        let mapping = match plan_mapping(&relation, &stream.tables[route], options) {
            Ok(mapping) => mapping,
            Err(e) => {
                return self.fatal(format!(
                    "table changed in a way Feldera's schema does not accept: {e}"
                ))
            }
        };
        let oid = relation.oid;
        if let RelationChange::Replaced {
            shape_changed: true,
            ..
        } = stream.relations.apply(relation)
        {
            self.ctx.log(
                Level::Info,
                format!(
                    "{} changed shape mid-stream; using its new columns",
                    mapping.source
                ),
            );
        }
        let warnings = mapping.warnings();
        stream.mapped.insert(oid, (route, mapping));
        for warning in warnings {
            self.ctx.log(Level::Warn, warning);
        }
    }

    fn on_row(&mut self, message: &Message<'_>) {
        let now = self.ctx.now.mono;
        let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) else {
            return;
        };
        if let Err(e) = stream.relations.check(message) {
            return self.fatal(format!("protocol error: {e}"));
        }
        let oid = message.row_relation_oid().unwrap_or_default();
        let Some((route, mapping)) = stream.mapped.get(&oid) else {
            return self.fatal(format!(
                "protocol error: a row for relation {oid} arrived before its Relation message"
            ));
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
                self.outbox.finish_lines(mark, lines, now);
                self.maybe_flush();
            }
            Err(e) => {
                self.outbox.abandon_line(mark);
                self.ctx.exit(
                    exit::FATAL,
                    format!("{e}. Nothing of this transaction was acknowledged"),
                );
            }
        }
    }
}
