//! The pipeline: slotline's whole life as one state machine, driven by inputs (see `io` for
//! the drive contract). This file holds every phase and every transition between them; each
//! phase's own work lives in its module and reports what should happen next as a [`Next`].
//!
//! ```text
//!                 ┌──(plan: snapshot)──► Snapshotting ──(copy durable, state complete)──┐
//!                 │                                                                      ▼
//!     new ──► Starting ──────────────(plan: stream)─────────────────────────────────► Streaming
//!                │  ▲                                              (TRUNCATE) ┌────────┤ ▲
//!                │  │                                                         ▼        │ │ (verified empty)
//!                │  │                                                     Retracting ──┼─┘
//!                │  ▲                                                                    │
//!   failure ─────┤  │ backoff elapsed                                                    │ SIGTERM
//!  (policy: end  ▼  │                                                                    ▼
//!  the session) BackingOff ◄───────────────── failure ───────────────────────────── Stopping
//!                                                                     (drained, confirmed: exit 0;
//!                                                                      a failure while stopping exits 0)
//!     any phase ──(policy: exit, crash point, stop before streaming)──► Exited
//! ```
//!
//! - **Starting** (`starting`): one replication connection asks its questions (settings,
//!   publication, tables, Feldera's schema, the slot), the state file is read, and the
//!   startup plan decides: stream from the slot, or snapshot first.
//! - **Snapshotting** (`snapshotting`): workers copy every routed table under the slot's
//!   exported snapshot; once every row is durable the state file says `complete` and
//!   replication starts at the consistent point.
//! - **Streaming** (`streaming`): changes are converted into the outbox, cut into batches,
//!   sent through the sink and acknowledged once durable.
//! - **Retracting** (`retracting`): a TRUNCATE holds the stream while every key the
//!   truncated Feldera tables hold is deleted and the tables are verified empty; then the
//!   stream goes on with the rest of the transaction.
//! - **Stopping** (`stopping`): no more reading; what is buffered is sent, the final position
//!   reported and confirmed on a second connection.
//! - **BackingOff**: the session ended; the next starts when the backoff elapses.
//! - **Exited**: an `Exit` command was emitted; nothing else ever is.
//!
//! What outlives a phase lives here: the configuration (`Env`) and the run's progress
//! (`Run`: the ack tracker, backoff, no-progress deadline, crash injector). Failures go
//! through one table (`policy`), which decides whether a session ends or the process exits.
//! Beside the phases run the slot monitor (`monitor`: samples the slot while one exists,
//! fails the run when it is invalidated) and the meter (`meter`: counts what reaches
//! Feldera); `status()` publishes both with the phase's own figures.
//!
//! The operator's one-shot commands are machines of their own over the same parts
//! (`check`: the startup conversation as a survey; `inspect`: `status` and `drop-slot`;
//! `ddl`: the catalog of the routed tables as Feldera SQL).

mod check;
mod ddl;
mod durability;
#[cfg(any(test, feature = "testing"))]
mod fake_feldera;
mod feldera_link;
mod feldera_txn;
mod inspect;
mod meter;
mod monitor;
mod pg;
mod policy;
mod queue;
mod replans;
mod retracting;
mod retraction;
#[cfg(any(test, feature = "testing"))]
pub mod script;
mod sink;
mod snapshotting;
mod starting;
mod startup;
mod stopping;
mod streaming;

use crate::ack::{AckTracker, BatchSeq};
use crate::backoff::{Backoff, ProgressDeadline};
use crate::config::{AckMode, Config, ConfigError, CrashPoint, TablesSpec};
use crate::contract::routes::{parse_pair, parse_tables, Route};
use crate::crash::CrashInjector;
use crate::feldera::{redact_userinfo, FelderaEndpoint, Reply};
use crate::health::{Health, PhaseName};
use crate::io::{exit, Command, Driver, HttpId, Input, Level, Topic};
use crate::outbox::Thresholds;
use crate::progress::ProgressReport;
use crate::time::{Mono, Now};
use crate::timer::{Deadline, TimerKind, TimerTable};
pub use check::Check;
pub use ddl::Ddl;
use durability::{FelderaFacts, Keeper, News};
use feldera_link::{Delivery, FelderaLink};
pub use inspect::{DropSlot, Inspect};
use meter::Meter;
use monitor::Monitor;
use policy::{Failure, FailureKind, Reaction, Situation};
use queue::Queue;
use retracting::Retracting;
use retraction::TableJob;
use snapshotting::{SnapshotStart, Snapshotting};
use starting::{Starting, StreamStart};
use stopping::Stopping;
use streaming::Streaming;

/// What never changes during a run: the configuration and what was derived from it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) config: Config,
    pub(crate) routes: Vec<Route>,
    pub(crate) endpoint: FelderaEndpoint,
    pub(crate) thresholds: Thresholds,
    /// `<STATE_DIR>/<slot>.state.json`.
    pub(crate) state_path: String,
}

impl Env {
    /// What the configuration alone derives (routes, Feldera endpoint, state file path),
    /// or what it refuses.
    pub(crate) fn new(config: Config) -> Result<Env, ConfigError> {
        Env::derive(config, true)
    }

    /// The environment of `status` and `drop-slot` (`Purpose::SlotOperation`): no routes
    /// (they are not used, and `TABLES` may be absent). Without `FELDERA_PIPELINE` the
    /// endpoint names a pipeline `-`; the operations do not ask Feldera then.
    pub(crate) fn for_slot_operation(config: Config) -> Result<Env, ConfigError> {
        Env::derive(config, false)
    }

    /// The environment of `ddl`: the routes when `TABLES` (or `PG_TABLE`) names tables,
    /// none when they are to come from the publication.
    pub(crate) fn for_ddl(config: Config) -> Result<Env, ConfigError> {
        let with_routes = !matches!(&config.tables, TablesSpec::List(list) if list.is_empty());
        Env::derive(config, with_routes)
    }

    fn derive(config: Config, with_routes: bool) -> Result<Env, ConfigError> {
        let routes = match &config.tables {
            _ if !with_routes => Ok(Vec::new()),
            TablesSpec::List(list) => parse_tables(list),
            TablesSpec::Single {
                pg_table,
                feldera_table,
            } => parse_pair(pg_table, feldera_table.as_deref()).map(|r| vec![r]),
        }
        .map_err(|e| {
            let accepted = format!("{}; accepted: {}", e.problem, e.accepted);
            config_error(&config, e.variable, accepted)
        })?;
        let pipeline = match config.feldera_pipeline.as_str() {
            // No pipeline (status, drop-slot and ddl may run without one): Feldera is not asked.
            "" => "-",
            name => name,
        };
        let endpoint = FelderaEndpoint::new(
            &config.feldera_url,
            pipeline,
            config.feldera_api_key.as_ref().map(|k| k.expose()),
        )
        .map_err(|e| {
            let accepted = format!("{}; accepted: {}", e.problem, e.accepted);
            config_error(&config, e.variable, accepted)
        })?;
        let state_path = crate::snapshot::state::state_path(&config.state_dir, &config.slot)
            .map_err(|e| config_error(&config, "PG_SLOT", e.to_string()))?;
        let thresholds = Thresholds {
            max_rows: config.batch_max_rows,
            max_bytes: config.batch_max_bytes,
            linger_us: config.batch_linger_ms * 1000,
        };
        Ok(Env {
            routes,
            endpoint,
            thresholds,
            state_path,
            config,
        })
    }
}

/// What outlives sessions: positions, retry state and counters.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) ack: AckTracker,
    /// The commit times of what is not acknowledged yet (`lag`).
    pub(crate) ages: crate::lag::CommitAges,
    pub(crate) backoff: Backoff,
    pub(crate) progress: ProgressDeadline,
    pub(crate) crash: CrashInjector,
    /// The periodic progress line's counters (`crate::progress`).
    pub(crate) report: ProgressReport,
    /// The message of the last failure, for the reason of a no-progress exit.
    pub(crate) last_failure: Option<String>,
    pub(crate) sessions: u32,
    /// The last batch number used by an ended session (the next session's batches follow).
    pub(crate) last_cut: BatchSeq,
    /// Batches that became durable (each calls `progressed` once).
    pub(crate) batches_durable: u64,
    /// A session of this run found the slot usable (or created it): if a later session
    /// finds it invalidated, it was lost while this process ran.
    pub(crate) slot_seen_valid: bool,
    /// Changes that ended a session so the next one reads the catalog again (`replans`).
    pub(crate) replans: replans::Replans,
    /// The Feldera pipeline's fault tolerance and incarnation, and how this run
    /// acknowledges (`durability`).
    pub(crate) feldera: FelderaFacts,
}

impl Run {
    /// Durable progress (a batch became durable): the no-progress deadline moves and the
    /// backoff starts over.
    pub(crate) fn progressed(&mut self, now: Mono) {
        self.progress.on_progress(now);
        self.backoff.reset();
        self.last_failure = None;
        self.batches_durable += 1;
    }

    /// A batch written to Feldera (stream, snapshot or retraction) is complete: progress,
    /// and something a checkpoint must hold before the flush may pass it.
    pub(crate) fn write_durable(&mut self, now: Mono) {
        self.ack.on_write_complete();
        self.progressed(now);
    }
}

/// What a phase hands its work: the command queue and the state outside phases.
#[derive(Debug)]
pub(crate) struct Cx<'a> {
    pub(crate) queue: &'a mut Queue,
    pub(crate) link: &'a mut FelderaLink,
    pub(crate) env: &'a Env,
    pub(crate) run: &'a mut Run,
}

impl Cx<'_> {
    pub(crate) fn now(&self) -> Mono {
        self.queue.now.mono
    }

    /// True the N-th time `point` is reached when `CRASH_AT` names it.
    pub(crate) fn crash_at(&mut self, point: CrashPoint) -> bool {
        self.run.crash.reached(point)
    }
}

/// What a phase says should happen after it handled an input.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing changes phase.
    Stay,
    /// Starting opened the replication stream, or Snapshotting finished: stream.
    Stream(Box<StreamStart>),
    /// Starting created the slot for a snapshot: copy.
    Snapshot(Box<SnapshotStart>),
    /// Streaming read a TRUNCATE of these tables: retract.
    Retract(Vec<TableJob>),
    /// Retracting verified the truncated tables are empty: stream on.
    Resume,
    /// Something failed: the policy decides.
    Fail(Failure),
    /// A crash point was reached (`CRASH_AT`): exit 70 now.
    Crash(CrashPoint),
    /// A graceful stop finished: exit 0 with this reason.
    Stopped(String),
}

/// Where the pipeline is in its life (see the module docs for the diagram).
#[derive(Debug)]
enum Phase {
    Starting(Box<Starting>),
    Snapshotting(Box<Snapshotting>),
    Streaming(Box<Streaming>),
    Retracting(Box<Retracting>),
    Stopping(Box<Stopping>),
    BackingOff { until: Mono },
    Exited,
}

impl Phase {
    fn name(&self) -> PhaseName {
        match self {
            Phase::Starting(_) => PhaseName::Starting,
            Phase::Snapshotting(_) => PhaseName::Snapshotting,
            Phase::Streaming(_) => PhaseName::Streaming,
            Phase::Retracting(_) => PhaseName::Retracting,
            Phase::Stopping(_) => PhaseName::Stopping,
            Phase::BackingOff { .. } => PhaseName::BackingOff,
            Phase::Exited => PhaseName::Exited,
        }
    }
}

/// The whole machine (see the module docs).
#[derive(Debug)]
pub struct Pipeline {
    queue: Queue,
    link: FelderaLink,
    env: Env,
    run: Run,
    phase: Phase,
    timers: TimerTable,
    monitor: Option<Monitor>,
    /// The session's watch over the Feldera pipeline (restarts, checkpoints).
    keeper: Option<Keeper>,
    meter: Meter,
}

/// A value the configuration accepted but a later check refuses: the variable as the user
/// set it, its value (secrets masked) and what is accepted.
fn config_error(config: &Config, variable: &str, accepted: impl Into<String>) -> ConfigError {
    let value = match variable {
        "TABLES" => match &config.tables {
            TablesSpec::List(list) => Some(list.clone()),
            TablesSpec::Single { .. } => None,
        },
        "PG_TABLE" | "FELDERA_TABLE" => match &config.tables {
            TablesSpec::Single {
                pg_table,
                feldera_table,
            } => {
                if variable == "PG_TABLE" {
                    Some(pg_table.clone())
                } else {
                    feldera_table.clone()
                }
            }
            TablesSpec::List(_) => None,
        },
        // The configuration refuses user info in FELDERA_URL; masked all the same, since
        // this message goes to stderr and logs as it is.
        "FELDERA_URL" => Some(redact_userinfo(&config.feldera_url).into_owned()),
        "FELDERA_PIPELINE" => Some(config.feldera_pipeline.clone()),
        "FELDERA_API_KEY" => Some("(not shown)".to_owned()),
        "PG_SLOT" => Some(config.slot.clone()),
        _ => None,
    };
    let mut error = ConfigError::new(variable, value.as_deref(), accepted);
    // Only reached for a value that was given: never "is required".
    error.value.get_or_insert_with(|| "(as given)".to_owned());
    error
}

impl Pipeline {
    /// Builds a pipeline from a validated configuration and starts the first session. What
    /// the configuration alone can refuse is refused here, before any command: the shells
    /// exit 2. `seed` drives every random choice (backoff jitter); `now` is the shell's clock.
    pub fn new(config: Config, seed: u64, now: Now) -> Result<Pipeline, ConfigError> {
        let env = Env::new(config)?;
        let config = &env.config;
        let run = Run {
            ack: AckTracker::new(crate::Lsn::ZERO),
            ages: crate::lag::CommitAges::default(),
            backoff: Backoff::new(seed, Backoff::DEFAULT_BASE_MS, Backoff::DEFAULT_CAP_MS),
            progress: ProgressDeadline::new(now.mono, config.no_progress_timeout_secs),
            crash: CrashInjector::new(config.crash),
            report: ProgressReport::new(now.mono, config.progress_interval_secs),
            last_failure: None,
            sessions: 0,
            last_cut: 0,
            batches_durable: 0,
            slot_seen_valid: false,
            replans: replans::Replans::default(),
            feldera: FelderaFacts::default(),
        };
        let mut pipeline = Pipeline {
            queue: Queue::new(now),
            link: FelderaLink::new(env.endpoint.clone()),
            env,
            run,
            phase: Phase::Exited,
            timers: TimerTable::default(),
            monitor: None,
            keeper: None,
            meter: Meter::default(),
        };
        pipeline.begin();
        Ok(pipeline)
    }

    pub fn health(&self) -> Health {
        let streaming = match &self.phase {
            Phase::Streaming(s) => Some(&**s),
            Phase::Retracting(s) => Some(s.streaming()),
            Phase::Stopping(s) => Some(s.streaming()),
            _ => None,
        };
        let (buffered_rows, batch_in_flight, batches_in_flight) = match (&self.phase, streaming) {
            (Phase::Snapshotting(s), _) => (
                s.buffered_rows(),
                s.batch_in_flight(),
                s.batches_in_flight(),
            ),
            (_, Some(s)) => (
                s.buffered_rows(),
                s.batch_in_flight(),
                s.batches_in_flight(),
            ),
            _ => (0, None, 0),
        };
        let (slot, slot_wal_warning) = self.monitor.as_ref().map_or((None, false), |m| m.sample());
        let progress_deadline = self.run.progress.deadline();
        let timeout_us = self
            .env
            .config
            .no_progress_timeout_secs
            .saturating_mul(1_000_000);
        Health {
            phase: self.phase.name(),
            sessions: self.run.sessions,
            streaming: streaming.is_some(),
            flush: self.run.ack.flush(),
            complete: self.run.ack.complete(),
            received: self.run.ack.received(),
            buffered_rows,
            batch_in_flight,
            batches_in_flight,
            batches_durable: self.run.batches_durable,
            sent: self.meter.counts().clone(),
            backoff_attempt: self.run.backoff.attempt(),
            reconnect_at: match self.phase {
                Phase::BackingOff { until } => Some(until),
                _ => None,
            },
            slot: slot.cloned(),
            slot_wal_warning,
            last_progress: Mono(progress_deadline.0.saturating_sub(timeout_us)),
            progress_deadline,
            pending_work: self.has_pending_work(),
            checkpoints: self.run.feldera.counts.clone(),
            oldest_unacknowledged: self.run.ages.oldest(self.run.ack.flush()),
        }
    }

    /// The replication connection of the current session (for the scripted harness).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn replication_conn(&self) -> Option<crate::io::ConnId> {
        match &self.phase {
            Phase::Starting(s) => Some(s.conn()),
            Phase::Snapshotting(s) => Some(s.conn()),
            Phase::Streaming(s) => Some(s.conn()),
            Phase::Retracting(s) => Some(s.streaming().conn()),
            Phase::Stopping(s) => Some(s.streaming().conn()),
            Phase::BackingOff { .. } | Phase::Exited => None,
        }
    }

    fn cx(&mut self) -> (Cx<'_>, &mut Phase) {
        (
            Cx {
                queue: &mut self.queue,
                link: &mut self.link,
                env: &self.env,
                run: &mut self.run,
            },
            &mut self.phase,
        )
    }

    // ---- transitions: every change of phase happens below ----

    /// The first phase.
    fn begin(&mut self) {
        if self.env.config.ack_mode == AckMode::Accepted {
            self.queue.log(
                Level::Warn,
                "FELDERA_ACK_MODE=accepted: WAL is released when Feldera accepts a batch, before it is processed; a Feldera restart can lose rows",
            );
        }
        self.start_session();
        self.refresh_timers();
    }

    /// Starting: a new session.
    fn start_session(&mut self) {
        let (mut cx, _) = self.cx();
        match Starting::begin(&mut cx) {
            Ok(starting) => self.phase = Phase::Starting(Box::new(starting)),
            Err(failure) => self.fail(failure),
        }
    }

    /// Applies what a phase said should happen next.
    fn apply(&mut self, next: Next) {
        match next {
            Next::Stay => {}
            Next::Stream(start) => {
                let repl = match std::mem::replace(&mut self.phase, Phase::Exited) {
                    Phase::Starting(starting) => starting.into_repl(),
                    Phase::Snapshotting(snapshotting) => snapshotting.into_repl(),
                    _ => unreachable!("only Starting and Snapshotting open the stream"),
                };
                self.watch_slot();
                let (mut cx, _) = self.cx();
                let (streaming, next) = Streaming::start(&mut cx, repl, *start);
                self.phase = Phase::Streaming(Box::new(streaming));
                self.apply(next);
            }
            Next::Snapshot(start) => {
                let Phase::Starting(starting) = std::mem::replace(&mut self.phase, Phase::Exited)
                else {
                    unreachable!("only Starting begins a snapshot");
                };
                self.watch_slot();
                let (mut cx, _) = self.cx();
                let (snapshotting, next) =
                    Snapshotting::begin(&mut cx, starting.into_repl(), *start);
                self.phase = Phase::Snapshotting(Box::new(snapshotting));
                self.apply(next);
            }
            Next::Retract(jobs) => {
                let Phase::Streaming(streaming) = std::mem::replace(&mut self.phase, Phase::Exited)
                else {
                    unreachable!("only Streaming reads a TRUNCATE");
                };
                let (mut cx, _) = self.cx();
                let (retracting, next) = Retracting::begin(&mut cx, *streaming, jobs);
                self.phase = Phase::Retracting(Box::new(retracting));
                self.apply(next);
            }
            Next::Resume => {
                let Phase::Retracting(retracting) =
                    std::mem::replace(&mut self.phase, Phase::Exited)
                else {
                    unreachable!("only Retracting resumes the stream");
                };
                let mut streaming = retracting.into_streaming();
                let (mut cx, _) = self.cx();
                let next = streaming.release(&mut cx);
                self.phase = Phase::Streaming(Box::new(streaming));
                self.apply(next);
            }
            Next::Fail(failure) => self.fail(failure),
            Next::Crash(point) => self.exit(
                exit::CRASH,
                format!("crash injected at {} (CRASH_AT)", point.name()),
            ),
            Next::Stopped(reason) => {
                self.close_phase();
                self.exit(exit::OK, reason);
            }
        }
    }

    /// Streaming (or Retracting, which abandons its retraction: the TRUNCATE's transaction
    /// is not acknowledged and replays) → Stopping on the operator's signal; earlier phases
    /// just end.
    fn stop(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Exited) {
            Phase::Streaming(streaming) => self.begin_stopping(*streaming),
            Phase::Retracting(retracting) => self.begin_stopping(retracting.into_streaming()),
            Phase::Stopping(stopping) => self.phase = Phase::Stopping(stopping),
            Phase::Starting(starting) => {
                self.phase = Phase::Starting(starting);
                self.apply(Next::Stopped(
                    "stopped before streaming started; nothing to confirm".into(),
                ));
            }
            Phase::Snapshotting(snapshotting) => {
                self.phase = Phase::Snapshotting(snapshotting);
                self.apply(Next::Stopped(
                    "stopped during the initial snapshot; the state file says pending, so the next start copies again".into(),
                ));
            }
            Phase::BackingOff { .. } => self.apply(Next::Stopped(
                "stopped before streaming started; nothing to confirm".into(),
            )),
            Phase::Exited => {}
        }
    }

    fn begin_stopping(&mut self, streaming: Streaming) {
        let (mut cx, _) = self.cx();
        let (stopping, next) = Stopping::begin(&mut cx, streaming);
        self.phase = Phase::Stopping(Box::new(stopping));
        self.apply(next);
    }

    /// Asks the policy what a failure means and carries it out.
    fn fail(&mut self, mut failure: Failure) {
        if failure.kind == FailureKind::FelderaUnavailable {
            // Say which Feldera could not be reached (scheme, host, port; never the key).
            failure.message = format!(
                "{} (Feldera at {})",
                failure.message,
                self.env.endpoint.origin()
            );
        }
        if failure.kind != FailureKind::NoProgress {
            self.run.last_failure = Some(failure.message.clone());
        }
        let now = self.queue.now.mono;
        let situation = Situation {
            stopping: matches!(self.phase, Phase::Stopping(_)),
            progress_expired: self.run.progress.expired(now),
        };
        let decision = policy::decide(failure.kind, situation);
        self.queue.note(
            Level::Debug,
            Topic::Policy,
            format!("{}: {}", decision.rule, decision.reaction),
        );
        if decision.ends_session {
            self.end_session();
        }
        match decision.reaction {
            Reaction::EndSession => self.back_off(&failure.message),
            Reaction::Exit(exit::OK) => self.exit(
                exit::OK,
                format!("stopped; the last session ended early: {}", failure.message),
            ),
            Reaction::Exit(exit::NO_PROGRESS) => {
                self.exit(exit::NO_PROGRESS, no_progress_reason(&self.env, &self.run))
            }
            Reaction::Exit(code) => self.exit(code, failure.message),
        }
    }

    /// Closes the session's connections and forgets everything not durable: the next
    /// session replays it from the slot, which never moved past it.
    fn end_session(&mut self) {
        self.close_phase();
        self.run.ack.reset_session(self.run.last_cut);
        self.run.ages.on_session_end();
    }

    /// A slot exists for this session from now on: sample it (once per session).
    fn watch_slot(&mut self) {
        self.run.slot_seen_valid = true;
        if self.keeper.is_none() {
            self.keeper = Some(Keeper::start(self.queue.now.mono));
        }
        if self.monitor.is_none() {
            let (mut cx, _) = self.cx();
            self.monitor = Monitor::start(&mut cx);
        }
    }

    /// Closes the current phase's connections, remembering the last batch number it used.
    fn close_phase(&mut self) {
        if let Some(monitor) = self.monitor.take() {
            monitor.close(&mut self.queue);
        }
        // Answers to its requests find no owner from now on.
        self.keeper = None;
        let last_cut = match std::mem::replace(&mut self.phase, Phase::Exited) {
            Phase::Starting(s) => {
                s.close(&mut self.queue);
                None
            }
            Phase::Snapshotting(s) => {
                s.close(&mut self.queue, &mut self.link);
                None
            }
            Phase::Streaming(s) => Some(s.close(&mut self.queue)),
            Phase::Retracting(s) => Some(s.close(&mut self.queue, &mut self.link)),
            Phase::Stopping(s) => Some(s.close(&mut self.queue)),
            Phase::BackingOff { .. } | Phase::Exited => None,
        };
        if let Some(last_cut) = last_cut {
            self.run.last_cut = last_cut;
        }
    }

    /// BackingOff until the next session.
    fn back_off(&mut self, reason: &str) {
        let now = self.queue.now.mono;
        let ceiling_ms = self.run.backoff.ceiling_ms();
        let delay_ms = self.run.backoff.next_delay_ms();
        self.phase = Phase::BackingOff {
            until: now.plus_ms(delay_ms),
        };
        self.queue.log(
            Level::Warn,
            format!(
                "session {} ended: {reason}; reconnecting in {delay_ms} ms (attempt {}, delay drawn from 0..={ceiling_ms} ms)",
                self.run.sessions,
                self.run.backoff.attempt()
            ),
        );
    }

    /// Exited.
    fn exit(&mut self, code: i32, reason: impl Into<String>) {
        self.phase = Phase::Exited;
        self.queue.exit(code, reason);
    }

    // ---- routing inputs to the phase that owns them ----

    /// An input for the slot monitor's connection: `None` when it is not one.
    fn dispatch_monitor(&mut self, input: &Input) -> Option<Next> {
        let conn = match input {
            Input::PgConnected { conn }
            | Input::PgTlsReady { conn, .. }
            | Input::PgBytes { conn, .. }
            | Input::PgClosed { conn, .. } => *conn,
            _ => return None,
        };
        let monitor = self.monitor.as_mut().filter(|m| m.owns(conn))?;
        let cx = &mut Cx {
            queue: &mut self.queue,
            link: &mut self.link,
            env: &self.env,
            run: &mut self.run,
        };
        Some(match input {
            Input::PgConnected { .. } => {
                monitor.on_connected(cx);
                Next::Stay
            }
            Input::PgTlsReady {
                server_certificate, ..
            } => {
                monitor.on_tls_ready(cx, server_certificate.as_deref());
                Next::Stay
            }
            Input::PgBytes { bytes, .. } => monitor.on_bytes(cx, bytes),
            Input::PgClosed { error, .. } => {
                monitor.on_closed(cx, error.clone());
                Next::Stay
            }
            _ => Next::Stay,
        })
    }

    /// A request ended: the link does its part of the end and says whom the answer is for.
    fn on_http_end(&mut self, id: HttpId, answered: bool, how: &str, reply: Reply<'_>) -> Next {
        let delivery = self.link.deliver(&mut self.queue, id, answered, how, reply);
        if matches!(delivery, Delivery::Keeper) {
            // An ended session's keeper asked too: its answer finds no owner but the phase.
            if let Some(keeper) = self.keeper.as_mut().filter(|k| k.owns(id)) {
                let cx = &mut Cx {
                    queue: &mut self.queue,
                    link: &mut self.link,
                    env: &self.env,
                    run: &mut self.run,
                };
                let news = keeper.on_http(cx, id, reply);
                return self.on_keeper_news(news);
            }
        }
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match delivery {
            Delivery::Phase | Delivery::Keeper => route_http(cx, phase, id, reply),
            Delivery::Handled => Next::Stay,
            Delivery::Freed => {
                resume_phase_writes(cx, phase);
                Next::Stay
            }
            Delivery::Failed(failure) => Next::Fail(failure),
        }
    }

    /// What the keeper learned, for the phase.
    fn on_keeper_news(&mut self, news: Result<News, Failure>) -> Next {
        let news = match news {
            Ok(News::Nothing) => return Next::Stay,
            Ok(news) => news,
            Err(failure) => return Next::Fail(failure),
        };
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match phase {
            Phase::Snapshotting(s) => s.on_checkpoint(cx, &news),
            Phase::Streaming(s) => s.on_checkpoint(cx, &news),
            Phase::Retracting(s) => s.on_checkpoint(cx, &news),
            Phase::Stopping(s) => s.on_checkpoint(cx, &news),
            Phase::Starting(_) | Phase::BackingOff { .. } | Phase::Exited => Next::Stay,
        }
    }

    fn dispatch(&mut self, input: Input) -> Next {
        if let Some(next) = self.dispatch_monitor(&input) {
            return next;
        }
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match input {
            Input::PgConnected { conn } => match phase {
                Phase::Starting(s) => s.on_pg_connected(cx, conn),
                Phase::Snapshotting(s) => s.on_pg_connected(cx, conn),
                Phase::Stopping(s) => s.on_pg_connected(cx, conn),
                _ => Next::Stay,
            },
            Input::PgTlsReady {
                conn,
                server_certificate,
            } => {
                let certificate = server_certificate.as_deref();
                match phase {
                    Phase::Starting(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    Phase::Snapshotting(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    Phase::Stopping(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    _ => {}
                }
                Next::Stay
            }
            Input::PgBytes { conn, bytes } => match phase {
                Phase::Starting(s) if s.conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Snapshotting(s) => s.on_pg_bytes(cx, conn, &bytes),
                Phase::Streaming(s) if s.conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Retracting(s) if s.streaming().conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Stopping(s) => s.on_pg_bytes(cx, conn, &bytes),
                _ => Next::Stay,
            },
            Input::PgClosed { conn, error } => match phase {
                Phase::Starting(s) if s.conn() == conn => s.on_pg_closed(cx, error),
                Phase::Snapshotting(s) => s.on_pg_closed(cx, conn, error),
                Phase::Streaming(s) if s.conn() == conn => s.on_pg_closed(cx, error),
                Phase::Retracting(s) => s.on_pg_closed(cx, conn, error),
                Phase::Stopping(s) => s.on_pg_closed(cx, conn, error),
                _ => Next::Stay,
            },
            Input::HttpChunk { id, bytes } => {
                let owned = match phase {
                    Phase::Retracting(s) => s.on_http_chunk(cx, id, &bytes),
                    Phase::Snapshotting(s) => s.on_http_chunk(cx, id, &bytes),
                    _ => None,
                };
                // A streamed answer nobody reads any more (its session ended): stop it, so
                // the shell does not hold it open until its timeout.
                owned.unwrap_or_else(|| {
                    cx.queue.push(Command::HttpCancel { id });
                    Next::Stay
                })
            }
            Input::Tick => {
                self.on_tick();
                Next::Stay
            }
            Input::Shutdown => {
                self.stop();
                Next::Stay
            }
            Input::StateRead { contents } => match phase {
                Phase::Starting(s) => s.on_state_read(cx, contents),
                _ => Next::Stay,
            },
            Input::StateWritten { result } => match phase {
                Phase::Starting(s) => s.on_state_written(cx, result),
                Phase::Snapshotting(s) => s.on_state_written(cx, result),
                _ => Next::Stay,
            },
            // The pipeline never removes the state file.
            Input::StateRemoved { .. } => Next::Stay,
            Input::HttpDone { id, status, body } => {
                let reply = Reply::Answered {
                    status,
                    body: &body,
                };
                self.on_http_end(id, status < 500, &format!("answered {status}"), reply)
            }
            Input::HttpFailed { id, error } => {
                let how = format!("failed: {error}");
                self.on_http_end(id, false, &how, Reply::Failed { error: &error })
            }
        }
    }

    /// Timers that fired, earliest first; each may move the pipeline on.
    fn on_tick(&mut self) {
        let now = self.queue.now.mono;
        for kind in self.timers.expire(now) {
            if self.queue.exited() {
                break;
            }
            let next = match kind {
                TimerKind::NoProgress => {
                    if self.has_pending_work() && self.run.progress.expired(now) {
                        Next::Fail(Failure::new(
                            FailureKind::NoProgress,
                            no_progress_reason(&self.env, &self.run),
                        ))
                    } else {
                        Next::Stay
                    }
                }
                TimerKind::Reconnect => {
                    if matches!(self.phase, Phase::BackingOff { until } if now >= until) {
                        self.start_session();
                    }
                    Next::Stay
                }
                TimerKind::Progress => {
                    let flush = self.run.ack.flush();
                    if let Some(line) =
                        self.run
                            .report
                            .report(now, self.phase.name().as_str(), flush)
                    {
                        self.queue.note(Level::Info, Topic::Progress, line);
                    }
                    Next::Stay
                }
                TimerKind::FelderaWatch | TimerKind::Checkpoint => match self.keeper.as_mut() {
                    Some(keeper) => {
                        let cx = &mut Cx {
                            queue: &mut self.queue,
                            link: &mut self.link,
                            env: &self.env,
                            run: &mut self.run,
                        };
                        let news = keeper.on_timer(cx, kind);
                        self.on_keeper_news(news)
                    }
                    None => Next::Stay,
                },
                TimerKind::Quarantine => {
                    let (mut cx, phase) = self.cx();
                    if cx.link.on_quarantine_timer(cx.queue) {
                        resume_phase_writes(&mut cx, phase);
                    }
                    Next::Stay
                }
                TimerKind::SlotMonitor => {
                    if let Some(monitor) = self.monitor.as_mut() {
                        let cx = &mut Cx {
                            queue: &mut self.queue,
                            link: &mut self.link,
                            env: &self.env,
                            run: &mut self.run,
                        };
                        monitor.on_timer(cx);
                    }
                    Next::Stay
                }
                other => {
                    let (mut cx, phase) = self.cx();
                    match phase {
                        Phase::Snapshotting(s) => s.on_timer(&mut cx, other),
                        Phase::Streaming(s) => s.on_timer(&mut cx, other),
                        Phase::Retracting(s) => s.on_timer(&mut cx, other),
                        Phase::Stopping(s) => s.on_timer(&mut cx, other),
                        _ => Next::Stay,
                    }
                }
            };
            self.apply(next);
        }
    }

    /// Whether anything waits to become durable, or the stream has not shown it is caught
    /// up: only then does the no-progress deadline run.
    fn has_pending_work(&self) -> bool {
        let streaming = match &self.phase {
            Phase::Streaming(s) => &**s,
            Phase::Stopping(s) => s.streaming(),
            Phase::Exited => return false,
            Phase::Starting(_)
            | Phase::Snapshotting(_)
            | Phase::Retracting(_)
            | Phase::BackingOff { .. } => return true,
        };
        streaming.has_pending_work(&self.run.ack)
    }

    /// Re-derives every timer from the state, so a deadline exists whenever work is pending.
    fn refresh_timers(&mut self) {
        let now = self.queue.now.mono;
        let pending = self.has_pending_work();
        if !pending {
            self.run.progress.on_progress(now);
        }
        let mut timers = TimerTable::default();
        match &self.phase {
            Phase::Snapshotting(s) => s.arm(&mut timers),
            Phase::Streaming(s) => s.arm(&mut timers),
            Phase::Retracting(s) => s.arm(&mut timers),
            Phase::Stopping(s) => s.arm(&mut timers),
            Phase::BackingOff { until } => timers.set(TimerKind::Reconnect, *until),
            Phase::Starting(_) | Phase::Exited => {}
        }
        if let Some(monitor) = &self.monitor {
            monitor.arm(&mut timers);
        }
        if let Some(keeper) = &self.keeper {
            keeper.arm(&mut timers, &self.run, now);
        }
        if pending {
            timers.set(TimerKind::NoProgress, self.run.progress.deadline());
        }
        if let Some(at) = self.run.report.next_at() {
            timers.set(TimerKind::Progress, at);
        }
        if let Some(at) = self.link.quarantine_deadline() {
            timers.set(TimerKind::Quarantine, at);
        }
        self.timers = timers;
    }
}

fn resume_phase_writes(cx: &mut Cx<'_>, phase: &mut Phase) {
    match phase {
        Phase::Snapshotting(s) => s.resume_writes(cx),
        Phase::Streaming(s) => s.resume_writes(cx),
        Phase::Retracting(s) => s.resume_writes(cx),
        Phase::Stopping(s) => s.resume_writes(cx),
        Phase::Starting(_) | Phase::BackingOff { .. } | Phase::Exited => {}
    }
}

fn route_http(cx: &mut Cx<'_>, phase: &mut Phase, id: HttpId, reply: Reply<'_>) -> Next {
    // An answer to a request of an ended session finds no owner: nothing waits for it.
    match phase {
        Phase::Starting(s) => s.on_http(cx, id, reply),
        Phase::Snapshotting(s) => s.on_http(cx, id, reply),
        Phase::Streaming(s) => s.on_http(cx, id, reply),
        Phase::Retracting(s) => s.on_http(cx, id, reply),
        Phase::Stopping(s) => s.on_http(cx, id, reply),
        Phase::BackingOff { .. } | Phase::Exited => Next::Stay,
    }
}

/// Why the run gives up: the deadline, and the last failure that held progress back (the
/// only hint an operator gets when warnings are filtered out).
fn no_progress_reason(env: &Env, run: &Run) -> String {
    let mut reason = format!(
        "no durable progress for {} s (NO_PROGRESS_TIMEOUT_SECS); giving up so the slot's pinned WAL gets attention",
        env.config.no_progress_timeout_secs
    );
    if let Some(last) = &run.last_failure {
        reason.push_str("; the last failure: ");
        reason.push_str(last);
    }
    reason
}

impl Driver for Pipeline {
    fn handle(&mut self, now: Now, input: Input) {
        if self.queue.exited() {
            return;
        }
        debug_assert!(
            self.queue.drained(),
            "the commands of the previous input were not drained before the next input"
        );
        debug_assert!(now.mono >= self.queue.now.mono, "time went backwards");
        self.queue.now = Now {
            mono: self.queue.now.mono.max(now.mono),
            wall: now.wall,
        };
        self.meter.on_input(&input, self.queue.now.mono);
        let next = self.dispatch(input);
        self.apply(next);
        if !self.queue.exited() {
            self.refresh_timers();
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        let command = self.queue.pop()?;
        let snapshot = matches!(self.phase, Phase::Snapshotting(_));
        self.meter.on_command(&command, snapshot);
        Some(command)
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        if self.queue.exited() {
            return None;
        }
        self.timers.next()
    }

    fn health(&self) -> Option<Health> {
        Some(Pipeline::health(self))
    }
}

#[cfg(test)]
mod tests;
