//! The Stopping phase (graceful stop): stop reading, send what is buffered, wait (bounded by
//! the completion timeout) until it is durable, send the final status update, then read the
//! slot's `confirmed_flush_lsn` on a second connection until it shows the final position or
//! `SHUTDOWN_CONFIRM_MS` passes. The protocol has no acknowledgement of an acknowledgement:
//! without this wait the last update is often lost and the restart replays the last
//! transaction.
//!
//! Owns the streaming session while it drains, and the control connection.

use super::cx::Cx;
use super::handover::Next;
use super::keeper::News;
use super::pg_link::{LinkClosed, PgLink};
use super::queue::Queue;
use super::streaming::Streaming;
use crate::ack::BatchSeq;
use crate::catalog::questions;
use crate::conn::Event;
use crate::feldera::Reply;
use crate::io::{ConnFailure, ConnId, HttpId, Level};
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};
use crate::Lsn;

/// How often the slot is asked again while confirming.
const CONFIRM_POLL_US: u64 = 100_000;

/// Waiting for the slot to show the final position.
#[derive(Debug)]
struct Confirm {
    control: PgLink,
    target: Lsn,
    deadline: Mono,
    query_at: Option<Mono>,
    rows: Vec<Vec<Option<String>>>,
    last_seen: Option<Lsn>,
}

#[derive(Debug)]
pub(crate) struct Stopping {
    streaming: Streaming,
    confirm: Option<Confirm>,
    /// With checkpoints: the checkpoint asked for once drained did not succeed; the stop
    /// ends with what earlier checkpoints hold.
    checkpoint_given_up: bool,
    /// With checkpoints: said that the stop waits for one.
    checkpoint_asked: bool,
}

impl Stopping {
    /// The operator asked to stop while streaming.
    pub(crate) fn begin(cx: &mut Cx<'_>, mut streaming: Streaming) -> (Stopping, Next) {
        cx.queue.log(
            Level::Info,
            "stopping: no more reading; sending what is buffered",
        );
        streaming.start_draining(cx.queue);
        let mut stopping = Stopping {
            streaming,
            confirm: None,
            checkpoint_given_up: false,
            checkpoint_asked: false,
        };
        let next = stopping.advance(cx);
        (stopping, next)
    }

    pub(crate) fn streaming(&self) -> &Streaming {
        &self.streaming
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume_writes(&mut self, cx: &mut Cx<'_>) {
        self.streaming.resume_writes(cx);
    }

    /// Closes both connections; returns the last batch number used.
    pub(crate) fn close(self, queue: &mut Queue) -> BatchSeq {
        if let Some(mut confirm) = self.confirm {
            confirm.control.close(queue);
        }
        self.streaming.close(queue)
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        self.streaming.arm(timers);
        if let Some(confirm) = &self.confirm {
            let at = confirm
                .query_at
                .map_or(confirm.deadline, |q| q.min(confirm.deadline));
            timers.set(TimerKind::ShutdownConfirm, at);
        }
    }

    /// Moves the stop on once the session is drained: the final status update, then the
    /// confirmation.
    fn advance(&mut self, cx: &mut Cx<'_>) -> Next {
        if self.confirm.is_some() {
            return Next::Stay;
        }
        if !self.streaming.drained() {
            return self.streaming.drain_step(cx);
        }
        // With checkpoints, what was drained is acknowledged once a checkpoint holds it.
        if cx.run.feldera.checkpointing()
            && cx.run.ack.complete() > cx.run.ack.flush()
            && cx.run.ack.unsaved()
            && !self.checkpoint_given_up
        {
            if self.streaming.leaves_feldera_transaction_open() {
                // Feldera delays a checkpoint while a transaction is open (docs/feldera.md,
                // "Checkpoints and incarnations"), and this stop leaves one open: waiting
                // would only spend the completion timeout, past a service manager's stop
                // timeout.
                self.checkpoint_given_up = true;
                cx.queue.log(
                    Level::Info,
                    format!(
                        "stopping: the Feldera transaction left open holds back every checkpoint, so the stop ends with what the last \
                         checkpoint holds (acknowledged up to {}); the next start replays the rest",
                        cx.run.ack.flush()
                    ),
                );
                return self.advance(cx);
            }
            cx.run.feldera.checkpoint_wanted = true;
            if !self.checkpoint_asked {
                self.checkpoint_asked = true;
                cx.queue.log(
                    Level::Info,
                    format!(
                        "stopping: waiting for a Feldera checkpoint to hold everything complete up to {}",
                        cx.run.ack.complete()
                    ),
                );
            }
            return Next::Stay;
        }
        let target = cx.run.ack.flush();
        if self.streaming.reported() != Some(target) {
            if let Err(next) = self.streaming.send_status(cx) {
                return next;
            }
        }
        let already = self.streaming.slot_confirmed_at_start();
        let config = &cx.env.config;
        if target <= already || config.shutdown_confirm_ms == 0 {
            return Next::Stopped(format!("stopped at {target}"));
        }
        let pg = config.pg.at(cx.run.hosts.index);
        let control = match PgLink::open(cx.queue, &pg, false, "slotline-confirm") {
            Ok(link) => link,
            Err(e) => return Next::Stopped(format!("stopped at {target}, unconfirmed: {e}")),
        };
        self.confirm = Some(Confirm {
            control,
            target,
            deadline: cx.now().plus_ms(config.shutdown_confirm_ms),
            query_at: None,
            rows: Vec::new(),
            last_seen: None,
        });
        Next::Stay
    }

    /// The stop's checkpoint (or another) succeeded or failed: move the stop on.
    pub(crate) fn on_checkpoint(&mut self, cx: &mut Cx<'_>, news: &News) -> Next {
        if self.confirm.is_some() {
            return Next::Stay;
        }
        if *news == News::NotSaved {
            self.checkpoint_given_up = true;
        }
        self.advance(cx)
    }

    fn then_advance(&mut self, cx: &mut Cx<'_>, next: Next) -> Next {
        match next {
            Next::Stay => self.advance(cx),
            other => other,
        }
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        let next = self.streaming.on_http(cx, id, reply);
        self.then_advance(cx, next)
    }

    /// The stream's write of the state file's bound ended: what waited for it may go out.
    pub(crate) fn on_state_written(&mut self, cx: &mut Cx<'_>, result: Result<(), String>) -> Next {
        let next = self.streaming.on_state_written(cx, result);
        self.then_advance(cx, next)
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Next {
        if kind == TimerKind::ShutdownConfirm {
            return self.on_confirm_timer(cx);
        }
        let next = self.streaming.on_timer(cx, kind);
        self.then_advance(cx, next)
    }

    fn is_control(&self, conn: ConnId) -> bool {
        self.confirm.as_ref().is_some_and(|c| c.control.id == conn)
    }

    pub(crate) fn on_pg_connected(&mut self, cx: &mut Cx<'_>, conn: ConnId) -> Next {
        if let Some(confirm) = self.confirm.as_mut().filter(|c| c.control.id == conn) {
            confirm.control.on_connected(cx.queue);
        }
        Next::Stay
    }

    pub(crate) fn on_pg_closed(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        error: Option<ConnFailure>,
    ) -> Next {
        if conn == self.streaming.conn() {
            return self.streaming.on_pg_closed(cx, error);
        }
        let Some(confirm) = self.confirm.as_mut().filter(|c| c.control.id == conn) else {
            return Next::Stay;
        };
        let why = match confirm.control.on_closed(cx.queue, error) {
            LinkClosed::Retrying => return Next::Stay,
            LinkClosed::Lost(why) | LinkClosed::Fatal(why) => why,
        };
        Next::Stopped(format!(
            "stopped at {}, unconfirmed: the control connection closed ({why})",
            confirm.target
        ))
    }

    pub(crate) fn on_pg_tls_ready(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        certificate: Option<&[u8]>,
    ) {
        if let Some(confirm) = self.confirm.as_mut().filter(|c| c.control.id == conn) {
            confirm.control.on_tls_ready(cx.queue, certificate);
        }
    }

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, conn: ConnId, bytes: &[u8]) -> Next {
        if conn == self.streaming.conn() {
            let next = self.streaming.on_pg_bytes(cx, bytes);
            return self.then_advance(cx, next);
        }
        if !self.is_control(conn) {
            return Next::Stay;
        }
        let Some(confirm) = self.confirm.as_mut() else {
            return Next::Stay;
        };
        for event in confirm.control.on_bytes(cx.queue, bytes) {
            let next = match event {
                Event::Ready => self.ask_slot(cx),
                Event::DataRow(row) => {
                    let text = row
                        .columns
                        .iter()
                        .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                        .collect();
                    if let Some(confirm) = self.confirm.as_mut() {
                        confirm.rows.push(text);
                    }
                    Next::Stay
                }
                Event::QueryDone { .. } => self.on_slot_answer(cx),
                Event::Failed(error) => {
                    let target = self.confirm.as_ref().map_or(Lsn::ZERO, |c| c.target);
                    Next::Stopped(format!("stopped at {target}, unconfirmed: {error}"))
                }
                _ => Next::Stay,
            };
            if !matches!(next, Next::Stay) {
                return next;
            }
        }
        Next::Stay
    }

    fn ask_slot(&mut self, cx: &mut Cx<'_>) -> Next {
        let Some(confirm) = self.confirm.as_mut() else {
            return Next::Stay;
        };
        confirm.rows.clear();
        confirm.query_at = None;
        if let Some(sql) = questions::slot_query(&cx.env.config.slot) {
            let _ = confirm.control.query(cx.queue, &sql);
        }
        Next::Stay
    }

    fn on_slot_answer(&mut self, cx: &mut Cx<'_>) -> Next {
        let now = cx.now();
        let Some(confirm) = self.confirm.as_mut() else {
            return Next::Stay;
        };
        let rows = std::mem::take(&mut confirm.rows);
        let borrowed: Vec<Vec<Option<&str>>> = rows
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let views: Vec<questions::Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        let confirmed = questions::parse_slot(&views)
            .ok()
            .flatten()
            .and_then(|s| s.confirmed_flush);
        confirm.last_seen = confirmed;
        let target = confirm.target;
        if confirmed.is_some_and(|c| c >= target) {
            return Next::Stopped(format!("stopped; the slot confirmed {target}"));
        }
        confirm.query_at = Some(now.plus_us(CONFIRM_POLL_US));
        Next::Stay
    }

    fn on_confirm_timer(&mut self, cx: &mut Cx<'_>) -> Next {
        let now = cx.now();
        let Some(confirm) = self.confirm.as_ref() else {
            return Next::Stay;
        };
        if now >= confirm.deadline {
            let seen = confirm
                .last_seen
                .map_or("nothing".to_owned(), |l| l.to_string());
            let target = confirm.target;
            cx.queue.log(
                Level::Warn,
                format!("the slot did not show {target} within SHUTDOWN_CONFIRM_MS (last seen {seen}); a restart may replay from there"),
            );
            return Next::Stopped(format!("stopped at {target}, unconfirmed"));
        }
        if confirm.query_at.is_some_and(|q| now >= q) {
            return self.ask_slot(cx);
        }
        Next::Stay
    }
}
