//! The Retracting phase: a TRUNCATE arrived in the stream. Feldera has no truncate, so
//! every key its table holds is deleted: first everything before the TRUNCATE in the stream
//! is sent and made durable, then the retraction pages through Feldera's keys and deletes
//! them, then a count query verifies each table is empty. Only then does the stream go on
//! with the rest of the transaction (inserts after the TRUNCATE survive), and its commit is
//! acknowledged like any other once its batches are durable. A crash anywhere replays the
//! transaction from the slot, which converges: deleting an absent key is harmless.
//!
//! Owns the held streaming session (its status updates keep flowing) and the retraction.

use super::cx::Cx;
use super::handover::Next;
use super::handover::TableJob;
use super::keeper::News;
use super::policy::{Failure, FailureKind};
use super::queue::Queue;
use super::retraction::{ask_count, read_count_answer, Retracted, Retraction};
use super::streaming::Streaming;
use crate::ack::BatchSeq;
use crate::feldera::Reply;
use crate::io::{ConnFailure, ConnId, HttpId, Level, Topic};
use crate::pipeline::feldera_link::FelderaLink;
use crate::retract::plan_keys;
use crate::timer::{TimerKind, TimerTable};

#[derive(Debug, PartialEq, Eq)]
enum Stage {
    /// What came before the TRUNCATE is being sent and made durable.
    Draining,
    /// Feldera's keys are read and deleted.
    Retracting,
    /// Counting what is left (route, request).
    Verifying(Vec<(usize, HttpId)>),
}

#[derive(Debug)]
pub(crate) struct Retracting {
    streaming: Streaming,
    retraction: Retraction,
    routes: Vec<usize>,
    stage: Stage,
}

impl Retracting {
    /// The stream holds at a TRUNCATE of `jobs`' tables.
    pub(crate) fn begin(
        cx: &mut Cx<'_>,
        mut streaming: Streaming,
        jobs: Vec<TableJob>,
    ) -> (Retracting, Next) {
        streaming.hold();
        let names = streaming.table_names();
        let tables: Vec<String> = jobs.iter().map(|j| names[j.route].to_string()).collect();
        cx.queue.note(
            Level::Info,
            Topic::Retract,
            format!(
                "TRUNCATE of {}: sending what came before it, then deleting every key Feldera holds",
                tables.join(", ")
            ),
        );
        let routes = jobs.iter().map(|j| j.route).collect();
        let retraction = Retraction::new(cx, jobs, names);
        let mut phase = Retracting {
            streaming,
            retraction,
            routes,
            stage: Stage::Draining,
        };
        let next = phase.advance(cx);
        (phase, next)
    }

    pub(crate) fn streaming(&self) -> &Streaming {
        &self.streaming
    }

    /// The held stream's own connections (its online copy's) still read and write.
    pub(crate) fn streaming_mut(&mut self) -> &mut Streaming {
        &mut self.streaming
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.streaming.resume_writes(cx);
        self.retraction.resume_writes(cx);
    }

    /// A checkpoint succeeded (or did not): the stream reports what moved.
    pub(crate) fn on_checkpoint(&mut self, cx: &mut Cx<'_>, news: &News) -> Next {
        self.streaming.on_checkpoint(cx, news)
    }

    /// The stream, for the phase that follows (streaming again, or stopping).
    pub(crate) fn into_streaming(self) -> Streaming {
        self.streaming
    }

    pub(crate) fn close(mut self, queue: &mut Queue, link: &mut FelderaLink) -> BatchSeq {
        self.retraction.close(queue, link);
        self.streaming.close(queue)
    }

    /// A piece of a streamed answer: `None` when it is not this phase's.
    pub(crate) fn on_http_chunk(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        bytes: &[u8],
    ) -> Option<Next> {
        if !self.retraction.owns(id) {
            return None;
        }
        Some(match self.retraction.on_chunk(cx, id, bytes) {
            Ok(step) => self.on_retracted(cx, step),
            Err(next) => next,
        })
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        self.streaming.arm(timers);
        self.retraction.arm(timers);
    }

    /// Moves the phase on: drained → retract; retracted → verify.
    fn advance(&mut self, cx: &mut Cx<'_>) -> Next {
        match self.stage {
            Stage::Draining if !self.streaming.drained() => self.streaming.drain_step(cx),
            // The deletes act at the TRUNCATE's position: the state file's bound covers it
            // first (`streaming::bound`).
            Stage::Draining if !self.streaming.covers_read(cx) => Next::Stay,
            Stage::Draining => {
                self.stage = Stage::Retracting;
                match self.retraction.start(cx) {
                    Ok(step) => self.on_retracted(cx, step),
                    Err(next) => next,
                }
            }
            Stage::Retracting | Stage::Verifying(_) => Next::Stay,
        }
    }

    fn on_retracted(&mut self, cx: &mut Cx<'_>, step: Retracted) -> Next {
        match step {
            Retracted::Waiting => Next::Stay,
            Retracted::AskPg(_) => Next::Fail(Failure::new(
                FailureKind::PgProtocol,
                "a TRUNCATE retraction never asks PostgreSQL which keys exist",
            )),
            Retracted::Done => {
                let mut counts = Vec::with_capacity(self.routes.len());
                for &route in &self.routes {
                    let plan = match plan_keys(self.streaming.table(route)) {
                        Ok(plan) => plan,
                        Err(e) => {
                            return Next::Fail(Failure::new(
                                FailureKind::DataRefused,
                                e.to_string(),
                            ))
                        }
                    };
                    counts.push((route, ask_count(cx, &plan)));
                }
                self.stage = Stage::Verifying(counts);
                Next::Stay
            }
        }
    }

    fn on_count(&mut self, cx: &mut Cx<'_>, index: usize, reply: Reply<'_>) -> Next {
        let Stage::Verifying(counts) = &mut self.stage else {
            return Next::Stay;
        };
        let (route, _) = counts.remove(index);
        let names = self.streaming.table_names();
        let table = &names[route];
        match read_count_answer(table, reply) {
            Ok(0) => {
                cx.run.ack.on_feldera_state_relied_on();
                cx.queue.note(
                    Level::Info,
                    Topic::Retract,
                    format!("{table}: empty in Feldera, as after the TRUNCATE"),
                )
            }
            Ok(left) => {
                return Next::Fail(Failure::new(
                    FailureKind::Unverified,
                    format!(
                        "after TRUNCATE's deletes were durable, Feldera table {table} still holds {left} row(s); \
                         nothing of the transaction was acknowledged"
                    ),
                ))
            }
            Err(failure) => return Next::Fail(failure),
        }
        if counts.is_empty() {
            return Next::Resume;
        }
        Next::Stay
    }

    // ---- input ----

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let next = self.streaming.on_pg_bytes(cx, bytes);
        self.then_advance(cx, next)
    }

    pub(crate) fn on_pg_closed(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        error: Option<ConnFailure>,
    ) -> Next {
        if conn != self.streaming.conn() {
            return Next::Stay;
        }
        self.streaming.on_pg_closed(cx, error)
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        if let Stage::Verifying(counts) = &self.stage {
            if let Some(index) = counts.iter().position(|(_, http)| *http == id) {
                return self.on_count(cx, index, reply);
            }
        }
        if self.retraction.owns(id) {
            return match self.retraction.on_http(cx, id, reply) {
                Ok(step) => self.on_retracted(cx, step),
                Err(next) => next,
            };
        }
        let next = self.streaming.on_http(cx, id, reply);
        self.then_advance(cx, next)
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Next {
        let next = self.streaming.on_timer(cx, kind);
        if !matches!(next, Next::Stay) {
            return next;
        }
        if matches!(
            kind,
            TimerKind::CompletionPoll | TimerKind::CompletionTimeout | TimerKind::SlowCompletionLog
        ) {
            let next = match self.retraction.on_timer(cx) {
                Ok(step) => self.on_retracted(cx, step),
                Err(next) => next,
            };
            if !matches!(next, Next::Stay) {
                return next;
            }
        }
        self.advance(cx)
    }

    /// The stream's write of the state file's bound ended: the retraction may go on.
    pub(crate) fn on_state_written(&mut self, cx: &mut Cx<'_>, result: Result<(), String>) -> Next {
        let next = self.streaming.on_state_written(cx, result);
        self.then_advance(cx, next)
    }

    fn then_advance(&mut self, cx: &mut Cx<'_>, next: Next) -> Next {
        match next {
            Next::Stay => self.advance(cx),
            other => other,
        }
    }
}
