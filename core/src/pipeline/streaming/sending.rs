//! Batches out and acknowledgements back: cutting the outbox, sending through the sink (inside
//! Feldera transactions when they are on), and moving the flush once batches are durable.

use crate::pipeline::cx::Cx;
use crate::pipeline::feldera_txn::TxnStep;
use crate::pipeline::handover::Next;
use crate::pipeline::policy::FailureKind;

use crate::ack::BatchSeq;
use crate::config::{AckMode, CrashPoint, FelderaTransactions};
use crate::io::{Level, Topic};
use crate::outbox::{Batch, CutReason};
use crate::pipeline::sink::SinkOutcome;
use crate::schema::Name;
use crate::wire::StatusUpdate;

use super::phase::{fail, note_advance, Step, Streaming};

impl Streaming {
    pub(super) fn cut_and_send(&mut self, cx: &mut Cx<'_>, reason: CutReason) -> Step {
        let Some(batch) = self.outbox.cut(reason) else {
            return Ok(());
        };
        self.cut_at_commit = false;
        cx.run.sent.note(self.reach());
        self.commit_times.on_cut(batch.seq);
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "#{} cut ({}): {} rows, {} bytes",
                batch.seq,
                reason.name(),
                batch.rows(),
                batch.bytes()
            ),
        );
        if cx.crash_at(CrashPoint::BeforeSend) {
            return Err(Next::Crash(CrashPoint::BeforeSend));
        }
        self.dispatch(cx, batch);
        Ok(())
    }

    /// Sends a cut batch: plainly, into the open Feldera transaction, or, when it needs one,
    /// after a transaction starts.
    fn dispatch(&mut self, cx: &mut Cx<'_>, batch: Batch) {
        let ends_inside = self.in_source_tx;
        let first = std::mem::replace(&mut self.first_batch, false);
        let Some(txn) = self.txn.as_ref() else {
            self.send(cx, batch);
            return;
        };
        if txn.is_open() {
            return self.send_in_txn(cx, batch, ends_inside);
        }
        let all = cx.env.config.feldera_transactions == FelderaTransactions::All;
        let why = if all {
            "FELDERA_TRANSACTIONS=all"
        } else if first {
            "the session's first batch (a transaction an earlier run left open is adopted)"
        } else if ends_inside && !self.held {
            "it ends inside a source transaction"
        } else {
            return self.send(cx, batch);
        };
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!("#{} waits for a Feldera transaction: {why}", batch.seq),
        );
        self.waiting = Some((batch, ends_inside));
        self.start_waiting(cx);
    }

    fn send(&mut self, cx: &mut Cx<'_>, batch: Batch) {
        let tables: Vec<Name> = self.tables.iter().map(|t| t.name.clone()).collect();
        self.sink.send(cx.queue, cx.link, &tables, batch);
    }

    /// Sends a batch into the open Feldera transaction; one that ends at a source commit
    /// (or any, while a TRUNCATE holds the stream) closes it.
    fn send_in_txn(&mut self, cx: &mut Cx<'_>, batch: Batch, ends_inside: bool) {
        let (seq, rows) = (batch.seq, batch.rows());
        let Some(txn) = self.txn.as_mut() else {
            return self.send(cx, batch);
        };
        txn.join(seq, rows, self.read_at);
        self.send(cx, batch);
        if !ends_inside || self.held {
            let why = if ends_inside {
                "a TRUNCATE needs what came before it committed"
            } else {
                "it ends at a source commit"
            };
            cx.queue.note(
                Level::Debug,
                Topic::Batch,
                format!("#{seq} closes the Feldera transaction: {why}"),
            );
            let now = cx.now();
            if let Some(txn) = self.txn.as_mut() {
                txn.close(cx.queue, cx.link, now);
            }
            self.credit_commit(cx);
        }
    }

    /// A commit of the Feldera transaction is under way (settling, committing or awaiting):
    /// the process does not give up on it before its own wait ends, the first time the
    /// transaction gets this far (`Run::commit_credit`).
    fn credit_commit(&self, cx: &mut Cx<'_>) {
        if let Some((reach, until)) = self.txn.as_ref().and_then(|t| t.commit_wait()) {
            cx.run.commit_credit(reach, until);
        }
    }

    /// A batch waits for a Feldera transaction: start one once nothing else is in flight
    /// and no transaction request of an ended session is still out (`feldera_link`).
    pub(super) fn start_waiting(&mut self, cx: &mut Cx<'_>) {
        let Some(txn) = self.txn.as_mut() else {
            return;
        };
        if self.waiting.is_some()
            && txn.is_idle()
            && self.sink.is_idle()
            && cx.link.may_start_transaction(cx.queue)
        {
            txn.begin(cx.queue, cx.link);
        }
    }

    pub(super) fn on_txn_step(&mut self, cx: &mut Cx<'_>, step: TxnStep) -> Step {
        match step {
            TxnStep::Pending => Ok(()),
            TxnStep::Opened => {
                if let Some((batch, ends_inside)) = self.waiting.take() {
                    self.send_in_txn(cx, batch, ends_inside);
                }
                self.flush_more(cx)
            }
            TxnStep::Durable { first, last, rows } => self.txn_durable(cx, first, last, rows),
            TxnStep::Failed(failure) => Err(Next::Fail(failure)),
        }
    }

    pub(super) fn on_sink_outcome(
        &mut self,
        cx: &mut Cx<'_>,
        seq: BatchSeq,
        outcome: SinkOutcome,
    ) -> Step {
        match outcome {
            SinkOutcome::Pending => Ok(()),
            SinkOutcome::Accepted => {
                if cx.crash_at(CrashPoint::AfterSend) {
                    return Err(Next::Crash(CrashPoint::AfterSend));
                }
                if self.txn.as_ref().is_some_and(|t| t.holds(seq)) {
                    // Its tokens complete only after the commit: it leaves the window.
                    let tokens = self.sink.take_accepted(seq).map(|(_, t)| t);
                    let now = cx.now();
                    if let (Some(txn), Some(tokens)) = (self.txn.as_mut(), tokens) {
                        if let Some(reach) = txn.accepted(cx.queue, cx.link, now, seq, tokens) {
                            cx.run.txn_accepted(cx.queue.now.mono, reach);
                        }
                    }
                    self.credit_commit(cx);
                    return self.flush_more(cx);
                }
                if cx.env.config.ack_mode == AckMode::Accepted {
                    if cx.crash_at(CrashPoint::AfterComplete) {
                        return Err(Next::Crash(CrashPoint::AfterComplete));
                    }
                    return self.batch_durable(cx, seq);
                }
                let (now, timeout_ms) = (cx.now(), cx.env.config.completion_timeout_ms);
                self.sink
                    .await_completion(cx.queue, cx.link, seq, now, timeout_ms);
                Ok(())
            }
            SinkOutcome::Complete => {
                if cx.crash_at(CrashPoint::AfterComplete) {
                    return Err(Next::Crash(CrashPoint::AfterComplete));
                }
                self.batch_durable(cx, seq)
            }
            SinkOutcome::Failed(failure) => Err(Next::Fail(failure)),
        }
    }

    /// Batch `seq` is durable: the ack tracker may move the flush position, which is
    /// reported at once.
    fn batch_durable(&mut self, cx: &mut Cx<'_>, seq: BatchSeq) -> Step {
        let Some(batch) = self.sink.take(seq) else {
            return Ok(());
        };
        cx.run.write_durable(cx.queue.now.mono);
        cx.run
            .report
            .on_batch_durable(batch.completion_wait_us(cx.now()));
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            format!("#{} durable ({} rows)", batch.seq, batch.rows()),
        );
        self.acknowledge(cx, seq..=seq)
    }

    /// The Feldera transaction of batches `first..=last` is committed: all of them are
    /// durable at once.
    fn txn_durable(&mut self, cx: &mut Cx<'_>, first: BatchSeq, last: BatchSeq, rows: u64) -> Step {
        if cx.crash_at(CrashPoint::AfterComplete) {
            return Err(Next::Crash(CrashPoint::AfterComplete));
        }
        cx.run.write_durable(cx.queue.now.mono);
        cx.queue.note(
            Level::Debug,
            Topic::Batch,
            if first == last {
                format!("#{first} durable: its Feldera transaction is committed ({rows} rows)")
            } else {
                format!(
                    "#{first}..#{last} durable: their Feldera transaction is committed ({rows} rows)"
                )
            },
        );
        self.acknowledge(cx, first..=last)
    }

    fn acknowledge(
        &mut self,
        cx: &mut Cx<'_>,
        batches: std::ops::RangeInclusive<BatchSeq>,
    ) -> Step {
        let before = cx.run.ack.complete();
        let mut advanced = None;
        let now = cx.queue.now.wall;
        for seq in batches {
            if let Some(age_us) = self.commit_times.on_durable(seq, now) {
                cx.run.commit_to_durable.observe(age_us);
            }
            advanced = cx.run.ack.on_batch_durable(seq).or(advanced);
        }
        if let Some(advance) = advanced {
            note_advance(cx, before, advance);
            self.send_status(cx)?;
            if cx.crash_at(CrashPoint::AfterAck) {
                return Err(Next::Crash(CrashPoint::AfterAck));
            }
        }
        self.flush_more(cx)
    }

    /// Room appeared: send what is due and read on (not while draining or held).
    fn flush_more(&mut self, cx: &mut Cx<'_>) -> Step {
        if self.draining || self.held {
            self.start_waiting(cx);
            return Ok(());
        }
        self.maybe_flush(cx)?;
        self.pump(cx)
    }

    /// Sends a standby status update: flush = the last durable commit's end, write = what
    /// was read (never behind flush).
    pub(crate) fn send_status(&mut self, cx: &mut Cx<'_>) -> Step {
        let now = cx.queue.now;
        let flush = cx.run.ack.flush();
        let update = StatusUpdate {
            write: cx.run.ack.received().max(flush),
            flush,
            apply: flush,
            client_time: now.wall,
            reply_requested: false,
        };
        self.status.sent(now.mono);
        self.reported = Some(flush);
        match self.repl.send_status(cx.queue, update) {
            Ok(()) => Ok(()),
            Err(e) => fail(
                FailureKind::PgUnreachable,
                format!("cannot send a status update: {e}"),
            ),
        }
    }

    // ---- draining (graceful stop) ----
}
