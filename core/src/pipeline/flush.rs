//! Cutting batches, following the one in flight, and reporting positions: the ordered steps
//! where the crash points sit (`before_send`, `after_send`, `after_complete`, `after_ack`).

use super::sink::{InFlight, SinkOutcome};
use super::Pipeline;
use crate::config::{AckMode, CrashPoint};
use crate::contract::Name;
use crate::feldera::Reply;
use crate::io::{exit, Level};
use crate::outbox::CutReason;
use crate::wire::StatusUpdate;

impl Pipeline {
    /// Exits with code 70 when the configured crash point is reached for the N-th time.
    fn crash_at(&mut self, point: CrashPoint) -> bool {
        if self.crash.reached(point) {
            self.ctx.exit(
                exit::CRASH,
                format!("crash injected at {} (CRASH_AT)", point.name()),
            );
            return true;
        }
        false
    }

    /// Cuts and sends a batch when one is due and none is in flight.
    pub(super) fn maybe_flush(&mut self) {
        if self.in_flight.is_some() || self.ctx.exited() {
            return;
        }
        let Some(stream) = self.session.as_ref().and_then(|s| s.stream.as_ref()) else {
            return;
        };
        if let Some(reason) = self.outbox.due(self.ctx.now.mono, stream.cut_at_commit) {
            self.cut_and_send(reason);
        }
    }

    pub(super) fn cut_and_send(&mut self, reason: CutReason) {
        let Some(stream) = self.session.as_mut().and_then(|s| s.stream.as_mut()) else {
            return;
        };
        let Some(batch) = self.outbox.cut(reason) else {
            return;
        };
        stream.cut_at_commit = false;
        let tables: Vec<Name> = stream.tables.iter().map(|t| t.name.clone()).collect();
        self.ctx.log(
            Level::Debug,
            format!(
                "batch #{} cut ({}): {} rows, {} bytes",
                batch.seq,
                reason.name(),
                batch.rows(),
                batch.bytes()
            ),
        );
        if self.crash_at(CrashPoint::BeforeSend) {
            return;
        }
        self.in_flight = Some(InFlight::start(
            &mut self.ctx,
            &self.endpoint,
            &tables,
            batch,
        ));
    }

    pub(super) fn on_sink_reply(&mut self, reply: Reply<'_>) {
        let now = self.ctx.now.mono;
        let Some(in_flight) = self.in_flight.as_mut() else {
            return;
        };
        let outcome = in_flight.on_reply(&mut self.ctx, &self.endpoint, now, reply);
        self.on_sink_outcome(outcome);
    }

    pub(super) fn on_sink_timer(&mut self) {
        let now = self.ctx.now.mono;
        let Some(in_flight) = self.in_flight.as_mut() else {
            return;
        };
        let outcome = in_flight.on_timer(&mut self.ctx, &self.endpoint, now);
        self.on_sink_outcome(outcome);
    }

    fn on_sink_outcome(&mut self, outcome: SinkOutcome) {
        match outcome {
            SinkOutcome::Pending => {}
            SinkOutcome::Accepted => {
                if self.crash_at(CrashPoint::AfterSend) {
                    return;
                }
                if self.config.ack_mode == AckMode::Accepted {
                    if self.crash_at(CrashPoint::AfterComplete) {
                        return;
                    }
                    return self.batch_durable();
                }
                let now = self.ctx.now.mono;
                if let Some(in_flight) = self.in_flight.as_mut() {
                    in_flight.await_completion(
                        &mut self.ctx,
                        &self.endpoint,
                        now,
                        self.config.completion_timeout_ms,
                    );
                }
            }
            SinkOutcome::Complete => {
                if !self.crash_at(CrashPoint::AfterComplete) {
                    self.batch_durable();
                }
            }
            SinkOutcome::EndSession(reason) => self.end_session(reason),
            SinkOutcome::Fatal(reason) => {
                self.fatal(format!("{reason}. The batch was not acknowledged"))
            }
        }
    }

    /// The batch in flight is durable: the ack tracker may move the flush position, which
    /// is reported at once.
    fn batch_durable(&mut self) {
        let Some(batch) = self.in_flight.take() else {
            return;
        };
        let now = self.ctx.now.mono;
        self.progress.on_progress(now);
        self.backoff.reset();
        self.ctx.log(
            Level::Debug,
            format!("batch #{} durable ({} rows)", batch.seq, batch.rows()),
        );
        if let Some(advance) = self.ack.on_batch_durable(batch.seq) {
            self.ctx.log(
                Level::Debug,
                format!("flush position {} ({advance:?})", self.ack.flush()),
            );
            self.send_status();
            if self.crash_at(CrashPoint::AfterAck) {
                return;
            }
        }
        if self.stop.is_some() {
            return self.continue_stop();
        }
        self.maybe_flush();
        self.pump();
    }

    /// Sends a standby status update: flush = the last durable commit's end, write = what
    /// was read (never behind flush).
    pub(super) fn send_status(&mut self) {
        let now = self.ctx.now;
        let Some(session) = self.session.as_mut() else {
            return;
        };
        let Some(stream) = session.stream.as_mut() else {
            return;
        };
        let flush = self.ack.flush();
        let update = StatusUpdate {
            write: self.ack.received().max(flush),
            flush,
            apply: flush,
            client_time: now.wall,
            reply_requested: false,
        };
        stream.status.sent(now.mono);
        stream.reported = Some(flush);
        if let Err(e) = session.repl.send_status(&mut self.ctx, update) {
            self.end_session(format!("cannot send a status update: {e}"));
        }
    }
}
