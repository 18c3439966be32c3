//! The pipeline: routes inputs to the decision modules and orders the commands they produce.
//!
//! Drive contract (see `io`): after `new` and after every `handle`, drain `poll_command`
//! until `None`, then wait until `poll_timeout` or the next input. The pipeline owns the
//! session lifecycle (connect → startup → stream → end → backoff → connect) and the graceful
//! stop; each decision it routes lives in its own module: `ack` (which position),
//! `outbox` (when to cut), `convert` (what a change means), `backoff` (when to retry, when to
//! give up), `status` (when to report), `completion` (when to poll), `crash` (injected
//! exits), `startup::checks` (whether to start at all).

mod ctx;
mod flush;
mod pg;
#[cfg(any(test, feature = "testing"))]
pub mod script;
mod sink;
mod startup;
mod stop;
mod stream;

use crate::ack::AckTracker;
use crate::backoff::{Backoff, ProgressDeadline};
use crate::config::{AckMode, Config, ConfigError, SnapshotMode, TablesSpec};
use crate::contract::routes::{parse_pair, parse_tables, Route};
use crate::crash::CrashInjector;
use crate::feldera::{classify_pipeline, FelderaEndpoint, PipelineOutcome, Reply};
use crate::io::{exit, Command, Driver, HttpId, Input, Level};
use crate::outbox::{Outbox, Thresholds};
use crate::time::{Mono, Now};
use crate::timer::{Deadline, TimerKind, TimerTable};
use ctx::Ctx;
use pg::{LinkClosed, PgLink};
use sink::InFlight;
use startup::{Startup, StartupError};
use stop::Stop;
use stream::Stream;

/// A snapshot of the pipeline for logs, metrics and health checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub sessions: u32,
    pub streaming: bool,
    pub flush: crate::Lsn,
    pub received: crate::Lsn,
    pub buffered_rows: u64,
    pub batch_in_flight: Option<u64>,
}

/// One connection's life: startup, then streaming.
#[derive(Debug)]
struct Session {
    repl: PgLink,
    startup: Startup,
    schema_request: Option<HttpId>,
    stream: Option<Stream>,
}

/// The streaming pipeline (see the module docs).
#[derive(Debug)]
pub struct Pipeline {
    ctx: Ctx,
    config: Config,
    routes: Vec<Route>,
    endpoint: FelderaEndpoint,
    ack: AckTracker,
    outbox: Outbox,
    in_flight: Option<InFlight>,
    backoff: Backoff,
    progress: ProgressDeadline,
    crash: CrashInjector,
    timers: TimerTable,
    session: Option<Session>,
    reconnect_at: Option<Mono>,
    stop: Option<Stop>,
    sessions: u32,
}

fn config_error(variable: &str, value: Option<&str>, accepted: impl Into<String>) -> ConfigError {
    ConfigError {
        variable: variable.to_owned(),
        value: value.map(str::to_owned),
        accepted: accepted.into(),
    }
}

impl Pipeline {
    /// Builds a pipeline from a validated configuration and starts the first session. What
    /// the configuration alone can refuse is refused here, before any command: the shells
    /// exit 2. `seed` drives every random choice (backoff jitter); `now` is the shell's clock.
    pub fn new(config: Config, seed: u64, now: Now) -> Result<Pipeline, ConfigError> {
        let routes = match &config.tables {
            TablesSpec::List(list) => parse_tables(list),
            TablesSpec::Single {
                pg_table,
                feldera_table,
            } => parse_pair(pg_table, feldera_table.as_deref()).map(|r| vec![r]),
        }
        .map_err(|e| config_error(e.variable, None, format!("{}; {}", e.problem, e.accepted)))?;
        let endpoint = FelderaEndpoint::new(
            &config.feldera_url,
            &config.feldera_pipeline,
            config.feldera_api_key.as_ref().map(|k| k.expose()),
        )
        .map_err(|e| config_error("FELDERA_URL", Some(&config.feldera_url), e.to_string()))?;
        let thresholds = Thresholds {
            max_rows: config.batch_max_rows,
            max_bytes: config.batch_max_bytes,
            linger_us: config.batch_linger_ms * 1000,
        };
        let mut pipeline = Pipeline {
            ctx: Ctx::new(now),
            outbox: Outbox::new(routes.len(), thresholds),
            routes,
            endpoint,
            ack: AckTracker::new(crate::Lsn::ZERO),
            in_flight: None,
            backoff: Backoff::new(seed, Backoff::DEFAULT_BASE_MS, Backoff::DEFAULT_CAP_MS),
            progress: ProgressDeadline::new(now.mono, config.no_progress_timeout_secs),
            crash: CrashInjector::new(config.crash),
            timers: TimerTable::default(),
            session: None,
            reconnect_at: None,
            stop: None,
            sessions: 0,
            config,
        };
        pipeline.begin();
        Ok(pipeline)
    }

    fn begin(&mut self) {
        if self.config.snapshot_mode != SnapshotMode::Never {
            let mode = if self.config.snapshot_mode == SnapshotMode::Initial {
                "initial"
            } else {
                "inconsistent"
            };
            self.ctx.exit(
                exit::FATAL,
                format!("SNAPSHOT_MODE={mode} is not supported yet; use SNAPSHOT_MODE=never (stream only, for a Feldera pipeline that is already seeded)"),
            );
            return;
        }
        if self.config.ack_mode == AckMode::Accepted {
            self.ctx.log(
                Level::Warn,
                "FELDERA_ACK_MODE=accepted: WAL is released when Feldera accepts a batch, before it is processed; a Feldera restart can lose rows",
            );
        }
        self.start_session();
        self.refresh_timers();
    }

    pub fn status(&self) -> Status {
        Status {
            sessions: self.sessions,
            streaming: self.session.as_ref().is_some_and(|s| s.stream.is_some()),
            flush: self.ack.flush(),
            received: self.ack.received(),
            buffered_rows: self.outbox.rows(),
            batch_in_flight: self.in_flight.as_ref().map(|f| f.seq),
        }
    }

    fn start_session(&mut self) {
        self.reconnect_at = None;
        self.sessions += 1;
        let application_name = format!("slotline/{}", self.config.slot);
        let repl = match PgLink::open(&mut self.ctx, &self.config.pg, true, &application_name) {
            Ok(link) => link,
            Err(e) => {
                return self
                    .ctx
                    .exit(exit::FATAL, format!("cannot connect to PostgreSQL: {e}"))
            }
        };
        let startup = Startup::new(
            &self.config.publication,
            &self.config.slot,
            &self.config.pg.database,
            self.routes.clone(),
            self.config.require_primary_key,
        );
        let schema_request = self.ctx.http_id();
        self.ctx.push(Command::Http {
            id: schema_request,
            request: self.endpoint.get_pipeline(sink::POLL_TIMEOUT_MS),
        });
        self.ctx
            .log(Level::Info, format!("session {} starting", self.sessions));
        self.session = Some(Session {
            repl,
            startup,
            schema_request: Some(schema_request),
            stream: None,
        });
    }

    /// Ends the session: nothing unacknowledged survives (it will be replayed from the
    /// slot), and the next session starts after a backoff, unless there has been no
    /// durable progress for too long.
    fn end_session(&mut self, reason: String) {
        if let Some(mut session) = self.session.take() {
            session.repl.close(&mut self.ctx);
        }
        self.in_flight = None;
        self.outbox.clear();
        self.ack.reset_session(self.outbox.last_cut_seq());
        if self.stop.is_some() {
            return self.ctx.exit(
                exit::OK,
                format!("stopped; the last session ended early: {reason}"),
            );
        }
        let now = self.ctx.now.mono;
        if self.progress.expired(now) {
            return self.no_progress_exit();
        }
        let delay_ms = self.backoff.next_delay_ms();
        self.reconnect_at = Some(now.plus_ms(delay_ms));
        self.ctx.log(
            Level::Warn,
            format!(
                "session {} ended: {reason}; reconnecting in {delay_ms} ms (attempt {})",
                self.sessions,
                self.backoff.attempt()
            ),
        );
    }

    fn no_progress_exit(&mut self) {
        self.ctx.exit(
            exit::NO_PROGRESS,
            format!(
                "no durable progress for {} s (NO_PROGRESS_TIMEOUT_SECS); giving up so the slot's pinned WAL gets attention",
                self.config.no_progress_timeout_secs
            ),
        );
    }

    fn fatal(&mut self, reason: impl Into<String>) {
        self.ctx.exit(exit::FATAL, reason);
    }

    fn on_http(&mut self, id: HttpId, reply: Reply<'_>) {
        let schema_request = self.session.as_ref().and_then(|s| s.schema_request);
        if schema_request == Some(id) {
            return self.on_schema(reply);
        }
        // Otherwise the answer belongs to a request of an ended session: nothing waits for it.
        if self.in_flight.as_ref().is_some_and(|f| f.owns(id)) {
            self.on_sink_reply(reply);
        }
    }

    fn on_schema(&mut self, reply: Reply<'_>) {
        let Some(session) = self.session.as_mut() else {
            return;
        };
        session.schema_request = None;
        match classify_pipeline(reply) {
            PipelineOutcome::Ready(info) => {
                let result =
                    session
                        .startup
                        .on_schema(&mut self.ctx, &mut session.repl, info.schema);
                self.on_startup_result(result);
            }
            PipelineOutcome::NotCompiled { program_status } => self.end_session(format!(
                "Feldera pipeline {} has no compiled program yet (program_status {})",
                self.config.feldera_pipeline,
                program_status.as_deref().unwrap_or("unknown")
            )),
            PipelineOutcome::BadSchema(e) => {
                self.fatal(format!("cannot read Feldera's schema: {e}"))
            }
            PipelineOutcome::Transient(e) => self.end_session(format!("Feldera unavailable: {e}")),
            PipelineOutcome::Fatal(e) => {
                self.fatal(format!("Feldera refused the pipeline request: {e}"))
            }
        }
    }

    fn on_startup_result(&mut self, result: Result<(), StartupError>) {
        match result {
            Ok(()) => {}
            Err(StartupError::Refused(reason)) | Err(StartupError::Server(reason)) => {
                self.fatal(format!("refusing to start: {reason}"));
            }
            Err(StartupError::Busy(reason)) => self.end_session(reason),
        }
    }

    fn on_pg_closed(&mut self, conn: crate::io::ConnId, error: Option<crate::io::ConnFailure>) {
        if let Some(session) = self.session.as_mut().filter(|s| s.repl.id == conn) {
            match session.repl.on_closed(&mut self.ctx, error) {
                LinkClosed::Retrying => {}
                LinkClosed::Fatal(why) => {
                    self.fatal(format!("cannot connect to PostgreSQL: {why}"))
                }
                LinkClosed::Lost(why) => {
                    session.repl.abandon(&mut self.ctx);
                    self.end_session(format!("replication connection lost: {why}"));
                }
            }
            return;
        }
        self.stop_on_pg_closed(conn, error);
    }

    fn on_pg_tls_ready(&mut self, conn: crate::io::ConnId, certificate: Option<&[u8]>) {
        match self.session.as_mut().filter(|s| s.repl.id == conn) {
            Some(session) => session.repl.on_tls_ready(&mut self.ctx, certificate),
            None => self.stop_on_pg_tls_ready(conn, certificate),
        }
    }

    fn on_tick(&mut self) {
        let now = self.ctx.now.mono;
        for kind in self.timers.expire(now) {
            if self.ctx.exited() {
                return;
            }
            match kind {
                TimerKind::StatusInterval => self.send_status(),
                TimerKind::Linger => self.maybe_flush(),
                TimerKind::CompletionPoll
                | TimerKind::CompletionTimeout
                | TimerKind::SlowCompletionLog => self.on_sink_timer(),
                TimerKind::Reconnect => {
                    if self.reconnect_at.is_some_and(|at| now >= at) {
                        self.start_session();
                    }
                }
                TimerKind::NoProgress => {
                    if self.has_pending_work() && self.progress.expired(now) {
                        self.no_progress_exit();
                    }
                }
                TimerKind::ShutdownConfirm => self.on_stop_timer(),
            }
        }
    }

    /// Whether anything waits to become durable, or the stream has not shown it is caught
    /// up (a keepalive found nothing pending): only then does the no-progress deadline run.
    /// A caught-up stream is progress; a fresh session that may be about to replay is not.
    fn has_pending_work(&self) -> bool {
        let caught_up = self
            .session
            .as_ref()
            .and_then(|s| s.stream.as_ref())
            .is_some_and(|s| s.caught_up);
        !caught_up
            || self.in_flight.is_some()
            || !self.outbox.is_empty()
            || self.ack.in_transaction()
            || self.ack.pending_commits() > 0
    }

    /// Re-derives every timer from the state, so a deadline exists whenever work is pending.
    fn refresh_timers(&mut self) {
        let now = self.ctx.now.mono;
        if !self.has_pending_work() {
            self.progress.on_progress(now);
        }
        let mut timers = TimerTable::default();
        if let Some(stream) = self.session.as_ref().and_then(|s| s.stream.as_ref()) {
            timers.set(TimerKind::StatusInterval, stream.status.next_at());
            if self.in_flight.is_none() {
                if let Some(at) = self.outbox.linger_deadline() {
                    timers.set(TimerKind::Linger, at);
                }
            }
        }
        if let Some(in_flight) = &self.in_flight {
            for (at, kind) in in_flight.deadlines().into_iter().flatten() {
                timers.set(kind, at);
            }
        }
        if let Some(at) = self.reconnect_at {
            timers.set(TimerKind::Reconnect, at);
        }
        if self.has_pending_work() {
            timers.set(TimerKind::NoProgress, self.progress.deadline());
        }
        if let Some(at) = self.stop.as_ref().and_then(Stop::deadline) {
            timers.set(TimerKind::ShutdownConfirm, at);
        }
        self.timers = timers;
    }
}

impl Driver for Pipeline {
    fn handle(&mut self, now: Now, input: Input) {
        if self.ctx.exited() {
            return;
        }
        self.ctx.now = Now {
            mono: self.ctx.now.mono.max(now.mono),
            wall: now.wall,
        };
        match input {
            Input::PgConnected { conn } => self.on_pg_connected(conn),
            Input::PgTlsReady {
                conn,
                server_certificate,
            } => self.on_pg_tls_ready(conn, server_certificate.as_deref()),
            Input::PgBytes { conn, bytes } => self.on_pg_bytes(conn, &bytes),
            Input::PgClosed { conn, error } => self.on_pg_closed(conn, error),
            Input::HttpDone { id, status, body } => self.on_http(
                id,
                Reply::Answered {
                    status,
                    body: &body,
                },
            ),
            Input::HttpFailed { id, error } => self.on_http(id, Reply::Failed { error: &error }),
            Input::Tick => self.on_tick(),
            Input::Shutdown => self.on_shutdown(),
        }
        if !self.ctx.exited() {
            self.refresh_timers();
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.ctx.pop()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        if self.ctx.exited() {
            return None;
        }
        self.timers.next()
    }
}

#[cfg(test)]
mod tests;
