//! The Starting phase: one session's replication connection runs the startup conversation
//! (`startup`) while Feldera is asked for the pipeline's schema, until `START_REPLICATION`
//! opens the stream.
//!
//! Owns the replication connection until the stream opens, then hands it over (with any
//! events that arrived in the same read) to the Streaming phase. Never reads the stream.

use super::pg::{conn_failure, PgLink};
use super::policy::{Failure, FailureKind};
use super::startup::{Ready, Startup, StartupError};
use super::{Cx, Next};
use crate::conn::Event;
use crate::feldera::{classify_pipeline, PipelineOutcome, Reply};
use crate::io::{Command, ConnId, HttpId, Level};

/// What the Streaming phase starts from, besides the connection (`Starting::into_repl`).
#[derive(Debug)]
pub(crate) struct StreamStart {
    pub(crate) ready: Ready,
    /// Events read after the stream opened, in the same read.
    pub(crate) pending: Vec<Event>,
}

#[derive(Debug)]
pub(crate) struct Starting {
    repl: PgLink,
    startup: Startup,
    schema_request: Option<HttpId>,
}

impl From<StartupError> for Failure {
    fn from(error: StartupError) -> Failure {
        match error {
            StartupError::Refused(reason) | StartupError::Server(reason) => Failure::new(
                FailureKind::SetupRefused,
                format!("refusing to start: {reason}"),
            ),
            StartupError::Busy(reason) => Failure::new(FailureKind::SlotBusy, reason),
        }
    }
}

impl Starting {
    /// A new session: the replication connection and the schema request.
    pub(crate) fn begin(cx: &mut Cx<'_>) -> Result<Starting, Failure> {
        let config = &cx.env.config;
        cx.run.sessions += 1;
        let application_name = format!("slotline/{}", config.slot);
        let repl = PgLink::open(cx.ctx, &config.pg, true, &application_name).map_err(|e| {
            Failure::new(
                FailureKind::ConfigInvalid,
                format!("cannot connect to PostgreSQL: {e}"),
            )
        })?;
        let startup = Startup::new(
            &config.publication,
            &config.slot,
            &config.pg.database,
            cx.env.routes.clone(),
            config.require_primary_key,
        );
        let schema_request = cx.ctx.http_id();
        cx.ctx.push(Command::Http {
            id: schema_request,
            request: cx.env.endpoint.get_pipeline(super::sink::POLL_TIMEOUT_MS),
        });
        cx.ctx
            .log(Level::Info, format!("session {} starting", cx.run.sessions));
        Ok(Starting {
            repl,
            startup,
            schema_request: Some(schema_request),
        })
    }

    pub(crate) fn conn(&self) -> ConnId {
        self.repl.id
    }

    /// The replication connection, for the Streaming phase once the stream is open.
    pub(crate) fn into_repl(self) -> PgLink {
        self.repl
    }

    pub(crate) fn on_pg_connected(&mut self, cx: &mut Cx<'_>, conn: ConnId) -> Next {
        if conn == self.repl.id {
            self.repl.on_connected(cx.ctx);
        }
        Next::Stay
    }

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let mut events = self.repl.on_bytes(cx.ctx, bytes).into_iter();
        while let Some(event) = events.next() {
            match self.on_event(cx, event) {
                Ok(None) => {}
                Ok(Some(ready)) => {
                    return Next::Stream(Box::new(StreamStart {
                        ready,
                        pending: events.collect(),
                    }));
                }
                Err(failure) => return Next::Fail(failure),
            }
        }
        Next::Stay
    }

    /// One startup event; `Some` once the stream is open.
    fn on_event(&mut self, cx: &mut Cx<'_>, event: Event) -> Result<Option<Ready>, Failure> {
        let startup = &mut self.startup;
        match event {
            Event::Ready => startup.on_ready(cx.ctx, &mut self.repl)?,
            Event::DataRow(row) => startup.on_row(&row)?,
            Event::QueryError(error) => startup.on_query_error(error.to_string()),
            Event::QueryDone { .. } => startup.on_query_done(cx.ctx, &mut self.repl)?,
            Event::StreamStarted(_) => return Ok(Some(startup.on_stream_started()?)),
            Event::Notice(notice) => cx.ctx.log(Level::Info, format!("PostgreSQL: {notice}")),
            Event::Failed(error) => return Err(conn_failure(error)),
            Event::XLogData(_) | Event::Keepalive(_) => {
                return Err(Failure::new(
                    FailureKind::PgProtocol,
                    "protocol error: replication data before START_REPLICATION",
                ))
            }
            _ => {}
        }
        Ok(None)
    }

    pub(crate) fn on_pg_closed(&mut self, cx: &mut Cx<'_>, error: Option<String>) -> Next {
        self.repl.abandon(cx.ctx);
        let why = error.unwrap_or_else(|| "the server closed the connection".to_owned());
        Next::Fail(Failure::new(
            FailureKind::PgUnreachable,
            format!("replication connection lost: {why}"),
        ))
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        if self.schema_request != Some(id) {
            return Next::Stay;
        }
        self.schema_request = None;
        let pipeline = &cx.env.config.feldera_pipeline;
        let failure = match classify_pipeline(reply) {
            PipelineOutcome::Ready(info) => {
                return match self.startup.on_schema(cx.ctx, &mut self.repl, info.schema) {
                    Ok(()) => Next::Stay,
                    Err(error) => Next::Fail(error.into()),
                }
            }
            PipelineOutcome::NotCompiled { program_status } => Failure::new(
                FailureKind::FelderaNotReady,
                format!(
                    "Feldera pipeline {pipeline} has no compiled program yet (program_status {})",
                    program_status.as_deref().unwrap_or("unknown")
                ),
            ),
            PipelineOutcome::BadSchema(e) => Failure::new(
                FailureKind::FelderaUnreadable,
                format!("cannot read Feldera's schema: {e}"),
            ),
            PipelineOutcome::Transient(e) => Failure::new(
                FailureKind::FelderaUnavailable,
                format!("Feldera unavailable: {e}"),
            ),
            PipelineOutcome::Fatal(e) => Failure::new(
                FailureKind::FelderaRefused,
                format!("Feldera refused the pipeline request: {e}"),
            ),
        };
        Next::Fail(failure)
    }

    /// Ends the phase's connection.
    pub(crate) fn close(mut self, ctx: &mut super::ctx::Ctx) {
        self.repl.close(ctx);
    }
}
