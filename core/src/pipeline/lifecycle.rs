//! The whole machine: the phase the pipeline is in, what outlives phases, and every
//! transition between phases (the diagram is in the module docs of `pipeline`). Inputs are
//! routed to their owner in `routing`; each phase's own work lives in its module and
//! reports what should happen next as a `Next`.

use super::cx::Cx;
use super::durability::FelderaFacts;
use super::env::Env;
use super::feldera_link::FelderaLink;
use super::handover::Next;
use super::keeper::Keeper;
use super::meter::Meter;
use super::monitor::Monitor;
use super::policy::{self, Failure, FailureKind, Reaction, Situation};
use super::queue::Queue;
use super::replans;
use super::retracting::Retracting;
use super::run::{never_reached_reason, no_progress_reason, Run};
use super::snapshotting::Snapshotting;
use super::starting::Starting;
use super::stopping::Stopping;
use super::streaming::Streaming;
use crate::ack::AckTracker;
use crate::backoff::{Backoff, ProgressDeadline};
use crate::config::{AckMode, Config, ConfigError};
use crate::crash::CrashInjector;
use crate::health::{Health, PhaseName};
use crate::io::{exit, Command, Driver, Input, Level, Topic};
use crate::progress::ProgressReport;
use crate::time::{Mono, Now};
use crate::timer::{Deadline, TimerTable};

/// Where the pipeline is in its life (see the module docs for the diagram).
#[derive(Debug)]
pub(super) enum Phase {
    Starting(Box<Starting>),
    Snapshotting(Box<Snapshotting>),
    Streaming(Box<Streaming>),
    Retracting(Box<Retracting>),
    Stopping(Box<Stopping>),
    BackingOff { until: Mono },
    Exited,
}

impl Phase {
    pub(super) fn name(&self) -> PhaseName {
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
    pub(super) queue: Queue,
    pub(super) link: FelderaLink,
    pub(super) env: Env,
    pub(super) run: Run,
    pub(super) phase: Phase,
    pub(super) timers: TimerTable,
    pub(super) monitor: Option<Monitor>,
    /// The session's watch over the Feldera pipeline (restarts, checkpoints).
    pub(super) keeper: Option<Keeper>,
    pub(super) meter: Meter,
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
            availability_said: false,
            sessions: 0,
            last_cut: 0,
            batches_durable: 0,
            slot_seen_valid: false,
            reached: Default::default(),
            check_named: false,
            replans: replans::Replans::default(),
            feldera: FelderaFacts::default(),
            commit_to_durable: Default::default(),
            txn_reach: Default::default(),
            sent: Default::default(),
            hosts: Default::default(),
            stale_state_writes: 0,
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
            last_progress: self.run.progress.last_progress(),
            progress_deadline,
            pending_work: self.has_pending_work(),
            checkpoints: self.run.feldera.counts.clone(),
            oldest_unacknowledged: self.run.ages.oldest(self.run.ack.flush()),
            commit_to_durable: self.run.commit_to_durable.clone(),
        }
    }

    /// Whether every command of the last input was taken (for the scripted harness).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn drained(&self) -> bool {
        self.queue.drained()
    }

    /// The pipeline's own clock and exit latch (for the scripted harness).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn clock(&self) -> (Mono, bool) {
        (self.queue.now.mono, self.queue.exited())
    }

    /// The deadline armed for `kind` (for the scripted harness).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn timer(&self, kind: crate::timer::TimerKind) -> Option<Mono> {
        self.timers.get(kind)
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

    pub(super) fn cx(&mut self) -> (Cx<'_>, &mut Phase) {
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
    pub(super) fn start_session(&mut self) {
        let (mut cx, _) = self.cx();
        match Starting::begin(&mut cx) {
            Ok(starting) => self.phase = Phase::Starting(Box::new(starting)),
            Err(failure) => self.fail(failure),
        }
    }

    /// Applies what a phase said should happen next.
    pub(super) fn apply(&mut self, next: Next) {
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
    pub(super) fn stop(&mut self) {
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
    pub(super) fn fail(&mut self, mut failure: Failure) {
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
            // With several hosts, a run has not failed to reach PostgreSQL before it tried
            // each of them.
            never_reached: self.run.reached.never(failure.kind)
                && self.run.hosts.tried_all(self.env.config.pg.hosts.len()),
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
            Reaction::Exit(exit::NO_PROGRESS) if situation.never_reached => self.exit(
                exit::NO_PROGRESS,
                never_reached_reason(failure.kind, &failure.message),
            ),
            Reaction::Exit(exit::NO_PROGRESS) => {
                self.exit(exit::NO_PROGRESS, no_progress_reason(&self.env, &self.run))
            }
            Reaction::Exit(code) => self.exit(code, failure.message),
        }
    }

    /// Closes the session's connections and forgets everything not durable: the next
    /// session replays it from the slot, which never moved past it.
    pub(super) fn end_session(&mut self) {
        self.close_phase();
        self.run
            .hosts
            .on_session_end(self.env.config.pg.hosts.len());
        self.run.ack.reset_session(self.run.last_cut);
        self.run.ages.on_session_end();
        self.run.report.on_session_end();
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
    pub(super) fn close_phase(&mut self) {
        if let Some(monitor) = self.monitor.take() {
            monitor.close(&mut self.queue);
        }
        // Answers to its requests find no owner from now on.
        self.keeper = None;
        // The answer to a write of the stream's bound still comes, before any later write's.
        let writing = match &self.phase {
            Phase::Streaming(s) => s.writing_bound(),
            Phase::Retracting(s) => s.streaming().writing_bound(),
            Phase::Stopping(s) => s.streaming().writing_bound(),
            _ => false,
        };
        self.run.stale_state_writes += u32::from(writing);
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
    pub(super) fn back_off(&mut self, reason: &str) {
        let now = self.queue.now.mono;
        let ceiling_ms = self.run.backoff.ceiling_ms();
        let delay_ms = self.run.backoff.next_delay_ms();
        self.phase = Phase::BackingOff {
            until: now.plus_ms(delay_ms),
        };
        // The first warning of a run none of whose sessions got as far as the slot says
        // where to look.
        let hint = if !self.run.slot_seen_valid && !self.run.check_named {
            self.run.check_named = true;
            "; `slotline check` shows every problem of the setup at once"
        } else {
            ""
        };
        self.queue.log(
            Level::Warn,
            format!(
                "session {} ended: {reason}; reconnecting in {delay_ms} ms (attempt {}, delay drawn from 0..={ceiling_ms} ms){hint}",
                self.run.sessions,
                self.run.backoff.attempt()
            ),
        );
    }

    /// Exited.
    pub(super) fn exit(&mut self, code: i32, reason: impl Into<String>) {
        self.phase = Phase::Exited;
        self.queue.exit(code, reason);
    }
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
        self.run.reached.on_input(&input);
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
