//! Batches on their way into Feldera (see `docs/pipelining.md`). The sink holds up to
//! `window` batches in flight, in the order they were sent, and talks to Feldera per table:
//! one lane per ingress endpoint.
//!
//! - **Posting.** A lane has at most one ingress request unanswered: Feldera appends a
//!   request's records to the table's input queue as they arrive, so two requests on one
//!   table at once could interleave. The next batch's body for a table goes out when the
//!   previous one was answered; lanes of different tables post at the same time.
//! - **Completion.** On one endpoint a completion token counts the records ingested so far,
//!   and Feldera marks tokens complete in that order: a later token complete means every
//!   earlier one on the same table is. So a lane asks about its newest token first (one
//!   answer can complete several batches); when that one is still in progress it asks about
//!   the oldest, then the next, until one is in progress. Questions are paced by what
//!   Feldera did recently (`completion::PollPacer`).
//!
//! HTTP 200 from ingress only means "accepted into the input buffer"; a batch becomes
//! durable when every token is complete (or, in the unsafe accepted mode, on the last 200,
//! which the phase decides). Every failure is handed back as a [`Failure`] for the policy:
//! nothing here decides whether a session ends.
//!
//! Answers that complete several batches at once are reported one at a time: the first as
//! the answer's outcome, the others through [`Sink::take_ready`] (and, for phases that do
//! not ask, through the next `CompletionPoll` timer, armed for the instant they arrived).

use super::feldera_link::FelderaLink;
use super::policy::{Failure, FailureKind};
use super::queue::Queue;
use crate::ack::BatchSeq;
use crate::completion::{estimate_us, CompletionWait, PollPacer, PollRound};
use crate::feldera::token::vouches_for;
use crate::feldera::FORWARDED_TIMEOUT_MS;
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::feldera::{
    classify_completion, classify_ingress, CompletionOutcome, IngressOutcome, Reply,
};
use crate::io::{Command, HttpId, Level};
use crate::outbox::Batch;
use crate::schema::Name;
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};
use bytes::Bytes;
use std::collections::VecDeque;

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

#[derive(Debug)]
enum PartState {
    /// Its lane's previous request is not answered yet.
    Queued,
    Posting(HttpId),
    Accepted {
        token: String,
        at: Mono,
    },
    Complete,
}

/// One table's share of a batch.
#[derive(Debug)]
struct Part {
    lane: usize,
    body: Option<Bytes>,
    state: PartState,
}

/// What a lane is doing about completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Poll {
    /// Nothing to ask (or not yet awaited).
    Idle,
    /// Ask again at this instant.
    At(Mono),
    /// A question about batch `seq`'s token is out: the lane's newest (`walk` is `None`),
    /// or, walking from the oldest, one of the tokens up to batch `walk`.
    Asking {
        http: HttpId,
        seq: BatchSeq,
        walk: Option<BatchSeq>,
    },
}

/// One ingress endpoint: its request order and its completion questions.
#[derive(Debug)]
struct Lane {
    table: Name,
    /// The table's URL segment: two routes to one table share its lane.
    segment: String,
    /// The lane's ingress request waiting for an answer, and its batch.
    posting: Option<(HttpId, BatchSeq)>,
    poll: Poll,
    round: PollRound,
    /// The last answer "in progress": about which batch's token, and when. An earlier
    /// token in progress means every later one on the lane was too.
    in_progress: Option<(BatchSeq, Mono)>,
}

/// The batches in flight, oldest first. See the module docs.
#[derive(Debug)]
pub(crate) struct Sink {
    window: usize,
    batches: VecDeque<InFlight>,
    lanes: Vec<Lane>,
    pacer: PollPacer,
    /// Outcomes decided but not reported yet, and since when they wait.
    ready: VecDeque<(BatchSeq, SinkOutcome)>,
    ready_since: Option<Mono>,
}

impl Sink {
    pub(crate) fn new(window: usize) -> Sink {
        debug_assert!(window > 0);
        Sink {
            window: window.max(1),
            batches: VecDeque::new(),
            lanes: Vec::new(),
            pacer: PollPacer::default(),
            ready: VecDeque::new(),
            ready_since: None,
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.batches.is_empty() && self.ready.is_empty()
    }

    /// Whether another batch may be sent now.
    pub(crate) fn has_room(&self) -> bool {
        self.batches.len() < self.window
    }

    /// Whether a batch in flight waits for the request `id`.
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        self.lanes.iter().any(|l| {
            l.posting.is_some_and(|(http, _)| http == id)
                || matches!(l.poll, Poll::Asking { http, .. } if http == id)
        })
    }

    /// Batches in the window: sent and not yet durable (a batch a Feldera transaction took
    /// out with `take_accepted` no longer counts).
    pub(crate) fn len(&self) -> usize {
        self.batches.len()
    }

    /// The oldest batch in flight.
    pub(crate) fn oldest(&self) -> Option<&InFlight> {
        self.batches.front()
    }

    /// Starts sending `batch`; `tables[route]` is each route's Feldera table.
    pub(crate) fn send(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        tables: &[Name],
        batch: Batch,
    ) {
        debug_assert!(self.has_room());
        let rows = batch.rows();
        let parts = batch
            .parts
            .into_iter()
            .map(|p| Part {
                lane: self.lane_of(&tables[p.route]),
                body: Some(Bytes::from(p.body)),
                state: PartState::Queued,
            })
            .collect();
        self.batches.push_back(InFlight {
            seq: batch.seq,
            rows,
            parts,
            wait: None,
            accepted: false,
            waited_us: None,
        });
        self.post_queued(queue, link);
    }

    fn lane_of(&mut self, table: &Name) -> usize {
        let segment = table.url_segment();
        if let Some(index) = self.lanes.iter().position(|l| l.segment == segment) {
            return index;
        }
        self.lanes.push(Lane {
            table: table.clone(),
            segment,
            posting: None,
            poll: Poll::Idle,
            round: PollRound::default(),
            in_progress: None,
        });
        self.lanes.len() - 1
    }

    /// An ingress request of an ended session ended: lanes it held back may post now.
    pub(crate) fn resume(&mut self, queue: &mut Queue, link: &mut FelderaLink) {
        self.post_queued(queue, link);
    }

    /// Every lane without a request out posts its oldest queued body, unless a request of
    /// an ended session to its table may still be delivering records (`feldera_link`).
    fn post_queued(&mut self, queue: &mut Queue, link: &mut FelderaLink) {
        for lane in 0..self.lanes.len() {
            if self.lanes[lane].posting.is_some() {
                continue;
            }
            let found = self.batches.iter_mut().find_map(|b| {
                let seq = b.seq;
                b.parts
                    .iter_mut()
                    .find(|p| p.lane == lane && matches!(p.state, PartState::Queued))
                    .map(|p| (seq, p))
            });
            let Some((seq, part)) = found else {
                continue;
            };
            let lane_ref = &self.lanes[lane];
            if !link.may_write(queue, &lane_ref.segment) {
                continue;
            }
            let body = part.body.take().unwrap_or_default();
            let http = link.post_ingress(queue, &lane_ref.segment, |endpoint| {
                endpoint.ingress(&lane_ref.table, body, FORWARDED_TIMEOUT_MS)
            });
            part.state = PartState::Posting(http);
            self.lanes[lane].posting = Some((http, seq));
        }
    }

    /// Hands an answer to the lane waiting for it: `None` when no lane owns the request (it
    /// belongs to an ended session). The outcome is the first decided (see the module docs).
    pub(crate) fn on_reply(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Option<(BatchSeq, SinkOutcome)> {
        let lane = self.lanes.iter().position(|l| {
            l.posting.is_some_and(|(http, _)| http == id)
                || matches!(l.poll, Poll::Asking { http, .. } if http == id)
        })?;
        let seq = match (self.lanes[lane].posting, self.lanes[lane].poll) {
            (Some((http, seq)), _) if http == id => {
                self.lanes[lane].posting = None;
                if self.on_ingress(now, lane, seq, id, reply) {
                    self.post_queued(queue, link);
                }
                seq
            }
            (_, Poll::Asking { seq, walk, .. }) => {
                self.on_poll_answer(queue, link, now, lane, seq, walk, reply);
                seq
            }
            _ => return None,
        };
        Some(self.take_ready().unwrap_or((seq, SinkOutcome::Pending)))
    }

    /// An ingress answer for `seq`'s part on `lane`; false when it failed (nothing more
    /// should be posted).
    fn on_ingress(
        &mut self,
        now: Mono,
        lane: usize,
        seq: BatchSeq,
        id: HttpId,
        reply: Reply<'_>,
    ) -> bool {
        let table = self.lanes[lane].table.clone();
        let Some(batch) = self.batches.iter_mut().find(|b| b.seq == seq) else {
            return true;
        };
        let Some(part) = batch
            .parts
            .iter_mut()
            .find(|p| matches!(p.state, PartState::Posting(http) if http == id))
        else {
            return true;
        };
        let outcome = match classify_ingress(reply) {
            IngressOutcome::Accepted { token } => {
                part.state = PartState::Accepted { token, at: now };
                let all = batch
                    .parts
                    .iter()
                    .all(|p| matches!(p.state, PartState::Accepted { .. }));
                if !all || batch.accepted {
                    return true;
                }
                batch.accepted = true;
                SinkOutcome::Accepted
            }
            IngressOutcome::Transient(e) => failed(
                FailureKind::FelderaUnavailable,
                format!("ingress into {table} failed: {e}"),
            ),
            IngressOutcome::Fatal(e) => failed(
                FailureKind::FelderaRefused,
                format!(
                    "Feldera refused rows for table {table}: {e}. The batch was not acknowledged"
                ),
            ),
        };
        let ok = !matches!(outcome, SinkOutcome::Failed(_));
        self.push_ready(now, seq, outcome);
        ok
    }

    /// A completion answer about `seq`'s token on `lane`.
    #[allow(clippy::too_many_arguments)]
    fn on_poll_answer(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        lane: usize,
        seq: BatchSeq,
        walk: Option<BatchSeq>,
        reply: Reply<'_>,
    ) {
        self.lanes[lane].poll = Poll::Idle;
        match classify_completion(reply) {
            CompletionOutcome::Complete { .. } => {
                if let Some(at) = self.accepted_at(lane, seq) {
                    let in_progress = self.lanes[lane]
                        .in_progress
                        .filter(|(asked, _)| *asked <= seq)
                        .map(|(_, t)| t);
                    self.pacer.observe(estimate_us(at, in_progress, now));
                }
                self.complete_through(now, lane, seq);
                let Some((oldest, _)) = self.awaited(lane).first().copied() else {
                    self.lanes[lane].round = self.pacer.round();
                    return;
                };
                match walk {
                    // Walking from the oldest: the next one may be complete too.
                    Some(limit) if oldest <= limit => {
                        self.ask(queue, link, lane, oldest, walk);
                    }
                    // Newer tokens arrived after the round began: a new round for them.
                    _ => {
                        self.lanes[lane].round = self.pacer.round();
                        self.schedule(queue, link, now, lane, now);
                    }
                }
            }
            CompletionOutcome::InProgress => {
                self.lanes[lane].in_progress = Some((seq, now));
                let oldest = self.awaited(lane).first().map(|(s, _)| *s);
                match oldest {
                    Some(oldest) if walk.is_none() && oldest != seq => {
                        self.ask(queue, link, lane, oldest, Some(seq));
                    }
                    Some(_) => {
                        let gap = self.lanes[lane].round.next_gap_us();
                        self.lanes[lane].poll = Poll::At(now.plus_us(gap));
                    }
                    None => {}
                }
            }
            CompletionOutcome::Restarted(e) => self.push_ready(
                now,
                seq,
                failed(
                    FailureKind::FelderaRestarted,
                    format!("Feldera no longer vouches for what it accepted (the pipeline restarted or the endpoint is gone); it will be replayed: {e}"),
                ),
            ),
            CompletionOutcome::Transient(e) => self.push_ready(
                now,
                seq,
                failed(
                    FailureKind::FelderaUnavailable,
                    format!("completion status failed: {e}"),
                ),
            ),
            CompletionOutcome::Fatal(e) => self.push_ready(
                now,
                seq,
                failed(
                    FailureKind::FelderaRefused,
                    format!("completion status refused: {e}. The batch was not acknowledged"),
                ),
            ),
        }
    }

    /// The awaited, incomplete parts of `lane`: (batch, token), oldest first.
    fn awaited(&self, lane: usize) -> Vec<(BatchSeq, &str)> {
        self.batches
            .iter()
            .filter(|b| b.wait.is_some())
            .flat_map(|b| {
                b.parts.iter().filter_map(move |p| match &p.state {
                    PartState::Accepted { token, .. } if p.lane == lane => {
                        Some((b.seq, token.as_str()))
                    }
                    _ => None,
                })
            })
            .collect()
    }

    fn accepted_at(&self, lane: usize, seq: BatchSeq) -> Option<Mono> {
        let batch = self.batches.iter().find(|b| b.seq == seq)?;
        batch.parts.iter().find_map(|p| match p.state {
            PartState::Accepted { at, .. } if p.lane == lane => Some(at),
            _ => None,
        })
    }

    /// Feldera said `seq`'s token on `lane` is complete: so is every earlier awaited one on
    /// the lane that the same incarnation issued on the same endpoint (`feldera::token`; a
    /// token from before a restart is asked about itself, and answers 410). Batches with
    /// every part complete are ready, oldest first.
    fn complete_through(&mut self, now: Mono, lane: usize, seq: BatchSeq) {
        let Some(answered) = self
            .awaited(lane)
            .into_iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, t)| t.to_owned())
        else {
            return;
        };
        let mut done = Vec::new();
        for batch in self.batches.iter_mut().filter(|b| b.wait.is_some()) {
            if batch.seq > seq {
                continue;
            }
            for part in batch.parts.iter_mut().filter(|p| p.lane == lane) {
                if matches!(&part.state, PartState::Accepted { token, .. } if vouches_for(&answered, token))
                {
                    part.state = PartState::Complete;
                }
            }
            let complete = batch
                .parts
                .iter()
                .all(|p| matches!(p.state, PartState::Complete));
            if complete {
                if let Some(wait) = batch.wait.take() {
                    batch.waited_us = Some(now.since(wait.started()));
                    done.push(batch.seq);
                }
            }
        }
        for seq in done {
            self.push_ready(now, seq, SinkOutcome::Complete);
        }
    }

    fn ask(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        lane: usize,
        seq: BatchSeq,
        walk: Option<BatchSeq>,
    ) {
        let token = self
            .awaited(lane)
            .into_iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, t)| t.to_owned());
        let Some(token) = token else {
            self.lanes[lane].poll = Poll::Idle;
            return;
        };
        let http = queue.http_id();
        queue.push(Command::Http {
            id: http,
            request: link
                .endpoint()
                .completion_status(&token, QUESTION_TIMEOUT_MS),
        });
        self.lanes[lane].poll = Poll::Asking { http, seq, walk };
    }

    /// Asks the lane's newest awaited token at `due` (now if it is due).
    fn schedule(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        lane: usize,
        due: Mono,
    ) {
        if due > now {
            self.lanes[lane].poll = Poll::At(due);
            return;
        }
        match self.awaited(lane).last().map(|(s, _)| *s) {
            Some(newest) => self.ask(queue, link, lane, newest, None),
            None => self.lanes[lane].poll = Poll::Idle,
        }
    }

    /// Timers fired: an outcome decided earlier, then due questions, timeouts and the slow
    /// log. Returns the first outcome decided.
    pub(crate) fn on_timer(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
    ) -> Option<(BatchSeq, SinkOutcome)> {
        if let Some(ready) = self.take_ready() {
            return Some(ready);
        }
        for lane in 0..self.lanes.len() {
            if matches!(self.lanes[lane].poll, Poll::At(at) if now >= at) {
                self.schedule(queue, link, now, lane, now);
            }
        }
        let mut timed_out = None;
        for batch in &mut self.batches {
            let Some(wait) = batch.wait.as_mut() else {
                continue;
            };
            if let Some(waited_us) = wait.timed_out(now) {
                timed_out = Some((batch.seq, batch.timed_out(waited_us)));
                break;
            }
            if wait.take_slow_log(now) {
                let waited_ms = now.since(wait.started()) / 1000;
                queue.log(Level::Warn, format!("batch #{} ({} rows) still not complete after {waited_ms} ms; WAL stays pinned meanwhile", batch.seq, batch.rows));
            }
        }
        if let Some((seq, failure)) = timed_out {
            self.push_ready(now, seq, failure);
        }
        self.take_ready()
    }

    /// Batch `seq` was accepted: wait for its completion. Its lanes ask at once, then as
    /// the pacer says.
    pub(crate) fn await_completion(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        seq: BatchSeq,
        now: Mono,
        timeout_ms: u64,
    ) {
        let Some(batch) = self.batches.iter_mut().find(|b| b.seq == seq) else {
            return;
        };
        batch.wait = Some(CompletionWait::new(now, timeout_ms));
        let mut lanes: Vec<usize> = batch.parts.iter().map(|p| p.lane).collect();
        lanes.dedup();
        for lane in lanes {
            if self.lanes[lane].poll == Poll::Idle {
                self.lanes[lane].round = self.pacer.round();
                self.schedule(queue, link, now, lane, now);
            }
        }
    }

    /// An outcome decided but not reported yet (several batches completed by one answer).
    pub(crate) fn take_ready(&mut self) -> Option<(BatchSeq, SinkOutcome)> {
        let ready = self.ready.pop_front();
        if self.ready.is_empty() {
            self.ready_since = None;
        }
        ready
    }

    fn push_ready(&mut self, now: Mono, seq: BatchSeq, outcome: SinkOutcome) {
        self.ready_since.get_or_insert(now);
        self.ready.push_back((seq, outcome));
    }

    /// Batch `seq` is durable (or leaves for another reason): it leaves the sink.
    pub(crate) fn take(&mut self, seq: BatchSeq) -> Option<InFlight> {
        let index = self.batches.iter().position(|b| b.seq == seq)?;
        self.batches.remove(index)
    }

    /// Batch `seq` leaves the sink once accepted, with each part's table and token (a
    /// Feldera transaction waits for its tokens itself).
    pub(crate) fn take_accepted(
        &mut self,
        seq: BatchSeq,
    ) -> Option<(InFlight, Vec<(Name, String)>)> {
        let batch = self.take(seq)?;
        let tokens = batch
            .parts
            .iter()
            .filter_map(|p| match &p.state {
                PartState::Accepted { token, .. } => {
                    Some((self.lanes[p.lane].table.clone(), token.clone()))
                }
                _ => None,
            })
            .collect();
        Some((batch, tokens))
    }

    /// Arms the timers the batches need.
    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        let mut earliest = |kind: TimerKind, at: Mono| {
            if timers.get(kind).is_none_or(|t| at < t) {
                timers.set(kind, at);
            }
        };
        if let Some(since) = self.ready_since {
            earliest(TimerKind::CompletionPoll, since);
        }
        for lane in &self.lanes {
            if let Poll::At(at) = lane.poll {
                earliest(TimerKind::CompletionPoll, at);
            }
        }
        for wait in self.batches.iter().filter_map(|b| b.wait.as_ref()) {
            earliest(TimerKind::CompletionTimeout, wait.timeout_at());
            if let Some(at) = wait.slow_log_at() {
                earliest(TimerKind::SlowCompletionLog, at);
            }
        }
    }
}

/// A batch in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) seq: BatchSeq,
    rows: u64,
    parts: Vec<Part>,
    /// Set while its completion is awaited.
    wait: Option<CompletionWait>,
    /// `Accepted` was reported.
    accepted: bool,
    /// How long its completion took, once complete.
    waited_us: Option<u64>,
}

impl InFlight {
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// How long this batch waited for Feldera to complete it (`None`: it never waited,
    /// as in the accepted mode).
    pub(crate) fn completion_wait_us(&self, now: Mono) -> Option<u64> {
        self.waited_us
            .or_else(|| self.wait.as_ref().map(|w| now.since(w.started())))
    }

    fn timed_out(&self, waited_us: u64) -> SinkOutcome {
        failed(FailureKind::CompletionTimeout, format!(
            "batch #{} not complete after {} ms (FELDERA_COMPLETION_TIMEOUT_MS); not acknowledging, it will be replayed",
            self.seq,
            waited_us / 1000
        ))
    }
}

fn failed(kind: FailureKind, message: impl Into<String>) -> SinkOutcome {
    SinkOutcome::Failed(Failure::new(kind, message))
}
