//! Batches on their way into Feldera. The sink holds up to `window` batches in flight, in the
//! order they were sent; each posts its routes' bodies in route order, then polls each token
//! until Feldera says `complete`.
//!
//! HTTP 200 from ingress only means "accepted into the input buffer"; a batch becomes
//! durable when every token is complete (or, in the unsafe accepted mode, on the last 200,
//! which the phase decides). Every failure is handed back as a [`Failure`] for the policy:
//! nothing here decides whether a session ends.

use super::ctx::Ctx;
use super::policy::{Failure, FailureKind};
use crate::ack::BatchSeq;
use crate::completion::{CompletionWait, WaitVerdict};
use crate::contract::Name;
use crate::feldera::{
    classify_completion, classify_ingress, CompletionOutcome, FelderaEndpoint, IngressOutcome,
    Reply,
};
use crate::io::{Command, HttpId, Level};
use crate::outbox::Batch;
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};
use bytes::Bytes;
use std::collections::VecDeque;

/// Request timeouts. Feldera's manager gives up on a pipeline after 30 s.
pub(crate) const INGRESS_TIMEOUT_MS: u64 = 35_000;
pub(crate) const POLL_TIMEOUT_MS: u64 = 10_000;

#[derive(Debug)]
enum Step {
    Posting {
        part: usize,
        http: HttpId,
    },
    /// `http` is `None` while waiting for the next poll time.
    Polling {
        part: usize,
        http: Option<HttpId>,
    },
}

/// What an answer or a timer meant for a batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SinkOutcome {
    Pending,
    /// Every part answered 200 with a token.
    Accepted,
    /// Every token is complete.
    Complete,
    /// The batch cannot become durable in this session.
    Failed(Failure),
}

/// The batches in flight, oldest first.
#[derive(Debug)]
pub(crate) struct Sink {
    window: usize,
    batches: VecDeque<InFlight>,
}

impl Sink {
    pub(crate) fn new(window: usize) -> Sink {
        debug_assert!(window > 0);
        Sink {
            window,
            batches: VecDeque::new(),
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.batches.is_empty()
    }

    /// Whether another batch may be sent now.
    pub(crate) fn has_room(&self) -> bool {
        self.batches.len() < self.window
    }

    /// Whether a batch in flight waits for the request `id`.
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        self.batches.iter().any(|b| b.owns(id))
    }

    /// The oldest batch in flight.
    pub(crate) fn oldest(&self) -> Option<&InFlight> {
        self.batches.front()
    }

    pub(crate) fn send(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        tables: &[Name],
        batch: Batch,
    ) {
        debug_assert!(self.has_room());
        let in_flight = InFlight::start(ctx, endpoint, tables, batch);
        self.batches.push_back(in_flight);
    }

    /// Hands an answer to the batch waiting for it: `None` when no batch owns the request
    /// (it belongs to an ended session).
    pub(crate) fn on_reply(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        now: Mono,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Option<(BatchSeq, SinkOutcome)> {
        let batch = self.batches.iter_mut().find(|b| b.owns(id))?;
        Some((batch.seq, batch.on_reply(ctx, endpoint, now, reply)))
    }

    /// Timers fired: the first batch with something to say says it.
    pub(crate) fn on_timer(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        now: Mono,
    ) -> Option<(BatchSeq, SinkOutcome)> {
        for batch in &mut self.batches {
            let outcome = batch.on_timer(ctx, endpoint, now);
            if outcome != SinkOutcome::Pending {
                return Some((batch.seq, outcome));
            }
        }
        None
    }

    /// Batch `seq` was accepted: wait for its completion (polling at once).
    pub(crate) fn await_completion(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        seq: BatchSeq,
        now: Mono,
        timeout_ms: u64,
    ) {
        if let Some(batch) = self.batches.iter_mut().find(|b| b.seq == seq) {
            batch.await_completion(ctx, endpoint, now, timeout_ms);
        }
    }

    /// Batch `seq` is durable: it leaves the sink.
    pub(crate) fn take(&mut self, seq: BatchSeq) -> Option<InFlight> {
        let index = self.batches.iter().position(|b| b.seq == seq)?;
        self.batches.remove(index)
    }

    /// Arms the timers the batches need.
    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        for batch in &self.batches {
            for (at, kind) in batch.deadlines().into_iter().flatten() {
                if timers.get(kind).is_none_or(|t| at < t) {
                    timers.set(kind, at);
                }
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) seq: BatchSeq,
    rows: u64,
    tables: Vec<Name>,
    bodies: Vec<Option<Bytes>>,
    tokens: Vec<String>,
    step: Step,
    wait: Option<CompletionWait>,
    next_poll_at: Option<Mono>,
}

impl InFlight {
    /// Starts posting `batch`; `tables[route]` is each route's Feldera table.
    pub(crate) fn start(
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        tables: &[Name],
        batch: Batch,
    ) -> InFlight {
        let rows = batch.rows();
        let part_tables = batch
            .parts
            .iter()
            .map(|p| tables[p.route].clone())
            .collect();
        let bodies = batch
            .parts
            .into_iter()
            .map(|p| Some(Bytes::from(p.body)))
            .collect();
        let mut in_flight = InFlight {
            seq: batch.seq,
            rows,
            tables: part_tables,
            bodies,
            tokens: Vec::new(),
            step: Step::Polling {
                part: 0,
                http: None,
            },
            wait: None,
            next_poll_at: None,
        };
        in_flight.post(ctx, endpoint, 0);
        in_flight
    }

    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// How long this batch has waited for Feldera to complete it (`None`: it never waited,
    /// as in the accepted mode).
    pub(crate) fn completion_wait_us(&self, now: Mono) -> Option<u64> {
        self.wait.map(|w| now.since(w.started()))
    }

    fn post(&mut self, ctx: &mut Ctx, endpoint: &FelderaEndpoint, part: usize) {
        let body = self.bodies[part].take().unwrap_or_default();
        let http = ctx.http_id();
        ctx.push(Command::Http {
            id: http,
            request: endpoint.ingress(&self.tables[part], body, INGRESS_TIMEOUT_MS),
        });
        self.step = Step::Posting { part, http };
    }

    fn poll(&mut self, ctx: &mut Ctx, endpoint: &FelderaEndpoint, part: usize) {
        let http = ctx.http_id();
        ctx.push(Command::Http {
            id: http,
            request: endpoint.completion_status(&self.tokens[part], POLL_TIMEOUT_MS),
        });
        self.step = Step::Polling {
            part,
            http: Some(http),
        };
        self.next_poll_at = None;
    }

    /// Whether `id` is the request this batch waits for.
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        matches!(self.step, Step::Posting { http, .. } | Step::Polling { http: Some(http), .. } if http == id)
    }

    /// Every part was accepted: start waiting for completion (polling at once).
    pub(crate) fn await_completion(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        now: Mono,
        timeout_ms: u64,
    ) {
        self.wait = Some(CompletionWait::new(now, timeout_ms));
        self.poll(ctx, endpoint, 0);
    }

    pub(crate) fn on_reply(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        now: Mono,
        reply: Reply<'_>,
    ) -> SinkOutcome {
        match self.step {
            Step::Posting { part, .. } => match classify_ingress(reply) {
                IngressOutcome::Accepted { token } => {
                    self.tokens.push(token);
                    if part + 1 < self.tables.len() {
                        self.post(ctx, endpoint, part + 1);
                        SinkOutcome::Pending
                    } else {
                        self.step = Step::Polling { part: 0, http: None };
                        SinkOutcome::Accepted
                    }
                }
                IngressOutcome::Transient(e) => failed(FailureKind::FelderaUnavailable, format!("ingress into {} failed: {e}", self.tables[part])),
                IngressOutcome::Fatal(e) => failed(FailureKind::FelderaRefused, format!("Feldera refused rows for table {}: {e}. The batch was not acknowledged", self.tables[part])),
            },
            Step::Polling { part, .. } => match classify_completion(reply) {
                CompletionOutcome::Complete { .. } if part + 1 < self.tokens.len() => {
                    self.poll(ctx, endpoint, part + 1);
                    SinkOutcome::Pending
                }
                CompletionOutcome::Complete { .. } => SinkOutcome::Complete,
                CompletionOutcome::InProgress => self.schedule_poll(now, part),
                CompletionOutcome::Restarted(e) => failed(
                    FailureKind::FelderaRestarted,
                    format!("Feldera no longer vouches for what it accepted (the pipeline restarted or the endpoint is gone); it will be replayed: {e}"),
                ),
                CompletionOutcome::Transient(e) => failed(FailureKind::FelderaUnavailable, format!("completion status failed: {e}")),
                CompletionOutcome::Fatal(e) => failed(FailureKind::FelderaRefused, format!("completion status refused: {e}. The batch was not acknowledged")),
            },
        }
    }

    fn schedule_poll(&mut self, now: Mono, part: usize) -> SinkOutcome {
        let Some(wait) = self.wait.as_mut() else {
            return failed(
                FailureKind::FelderaUnreadable,
                "Feldera answered a completion poll that was never sent",
            );
        };
        match wait.in_progress(now) {
            WaitVerdict::PollAt(at) => {
                self.step = Step::Polling { part, http: None };
                self.next_poll_at = Some(at);
                SinkOutcome::Pending
            }
            WaitVerdict::TimedOut { waited_us } => self.timed_out(waited_us),
        }
    }

    fn timed_out(&self, waited_us: u64) -> SinkOutcome {
        failed(FailureKind::CompletionTimeout, format!(
            "batch #{} not complete after {} ms (FELDERA_COMPLETION_TIMEOUT_MS); not acknowledging, it will be replayed",
            self.seq,
            waited_us / 1000
        ))
    }

    /// A timer fired: poll again, log a slow wait once, or give up.
    pub(crate) fn on_timer(
        &mut self,
        ctx: &mut Ctx,
        endpoint: &FelderaEndpoint,
        now: Mono,
    ) -> SinkOutcome {
        let Some(wait) = self.wait.as_mut() else {
            return SinkOutcome::Pending;
        };
        if now >= wait.timeout_at() {
            let waited_us = now.since(wait.started());
            return self.timed_out(waited_us);
        }
        if wait.take_slow_log(now) {
            let waited_ms = now.since(wait.started()) / 1000;
            ctx.log(Level::Warn, format!("batch #{} ({} rows) still not complete after {waited_ms} ms; WAL stays pinned meanwhile", self.seq, self.rows));
        }
        if let (Step::Polling { part, http: None }, Some(at)) = (&self.step, self.next_poll_at) {
            if now >= at {
                let part = *part;
                self.poll(ctx, endpoint, part);
            }
        }
        SinkOutcome::Pending
    }

    /// The instants this batch needs a timer for.
    fn deadlines(&self) -> [Option<(Mono, TimerKind)>; 3] {
        let wait = self.wait.as_ref();
        [
            self.next_poll_at.map(|at| (at, TimerKind::CompletionPoll)),
            wait.map(|w| (w.timeout_at(), TimerKind::CompletionTimeout)),
            wait.and_then(CompletionWait::slow_log_at)
                .map(|at| (at, TimerKind::SlowCompletionLog)),
        ]
    }
}

fn failed(kind: FailureKind, message: impl Into<String>) -> SinkOutcome {
    SinkOutcome::Failed(Failure::new(kind, message))
}
