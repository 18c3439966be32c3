//! Feldera transactions around source transactions (`FELDERA_TRANSACTIONS`; see
//! `docs/pipelining.md`): the batches of a source transaction that spans several batches
//! (with `all`, of every batch) go into one Feldera transaction, so views see all of it or
//! none of it.
//!
//! One transaction at a time, pipeline-wide (Feldera allows no more):
//! 1. **start**: `start_transaction`. A 409 means a transaction started through the API is
//!    still open (left by an earlier run that crashed inside one, or by someone else): it is
//!    adopted, and what this session sends goes into it.
//! 2. **open**: batches join it; they leave the sink's window as soon as they are accepted
//!    (their tokens complete only after the commit), so the window never fills with them.
//!    Only each table's newest token is kept.
//! 3. **settle**: once the batch ending at a source commit is accepted, each table's newest
//!    token is asked about until Feldera says its records are in the circuit (a step is
//!    known): a commit takes only what the circuit holds, and a table's input queue can hold
//!    more than one step takes.
//! 4. **commit**: `commit_transaction` only starts the commit.
//! 5. **await**: each table's newest token is asked about until it is complete (Feldera
//!    completes no token of the transaction before the commit finished, and a newer token
//!    complete means every older one on the table is). Then every batch of the transaction
//!    is durable at once.
//!
//! Nothing of the transaction is acknowledged before the commit finished. Failures go to
//! the policy like any other; what happens to a transaction Feldera still holds then is in
//! `docs/pipelining.md`.

use super::policy::{Failure, FailureKind};
use super::queue::Queue;

use super::feldera_link::FelderaLink;
use crate::ack::BatchSeq;
use crate::completion::{CompletionWait, PollRound};
use crate::feldera::token::vouches_for;
use crate::feldera::FORWARDED_TIMEOUT_MS;
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::feldera::{
    classify_commit_transaction, classify_start_transaction, classify_transaction_token,
    CommitOutcome, Reply, StartTransactionOutcome, TransactionTokenOutcome,
};
use crate::io::{Command, HttpId, Level, Topic};
use crate::schema::Name;
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};
use crate::Lsn;

/// A place in the stream's own order, which a replay repeats: transactions by commit
/// position (pgoutput sends them in commit order), then changes by their position inside
/// the transaction. WAL positions alone do not order the stream: a transaction's changes
/// can lie below the commit of one sent before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct StreamPos {
    /// The commit position of the transaction read (Begin's `final_lsn`).
    pub(crate) commit: Lsn,
    /// The position of the last message read in it.
    pub(crate) at: Lsn,
}

/// What an answer or a timer meant for the transaction.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TxnStep {
    Pending,
    /// The transaction is open: batches may join it.
    Opened,
    /// The commit finished: batches `first..=last` are durable.
    Durable {
        first: BatchSeq,
        last: BatchSeq,
        rows: u64,
    },
    Failed(Failure),
}

/// The batches of one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    first: BatchSeq,
    last: BatchSeq,
    rows: u64,
    /// Where the stream had read when its last batch was cut: how far the transaction
    /// reaches (a replay of it reaches no further than the first try).
    reach: StreamPos,
}

impl Span {
    /// `batch #3` or `batches #3..#5`.
    fn name(&self) -> String {
        if self.first == self.last {
            format!("batch #{}", self.first)
        } else {
            format!("batches #{}..#{}", self.first, self.last)
        }
    }
}

#[derive(Debug)]
struct Open {
    /// `None` when adopted (Feldera's 409 does not say which).
    id: Option<u64>,
    span: Option<Span>,
    /// Batches joined and not accepted yet, with how far each reaches in the WAL.
    unaccepted: Vec<(BatchSeq, StreamPos)>,
    /// The last batch has joined (it ends at a source commit).
    closing: bool,
    /// Each table's newest token, with the batch it came from. Requests on one table are
    /// sent one after the other, so the later batch holds the newer token; but batches are
    /// accepted out of order (a batch with several tables is accepted when its last table
    /// answers), so acceptance order does not say which token is newer. A newer token
    /// stands for an older one only when both come from the same incarnation and endpoint
    /// (`feldera::token`): after a Feldera restart the older one stays, is asked about, and
    /// answers 410.
    tokens: Vec<(Name, BatchSeq, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    At(Mono),
    Out(HttpId),
    Done,
}

/// One table's newest token, asked about while settling and awaiting.
#[derive(Debug)]
struct TokenLane {
    table: Name,
    token: String,
    ask: Ask,
    round: PollRound,
}

#[derive(Debug)]
enum Stage {
    Idle,
    Starting {
        http: HttpId,
    },
    Open(Open),
    /// Waiting for every table's records to be in the circuit.
    Settling {
        id: Option<u64>,
        span: Span,
        lanes: Vec<TokenLane>,
        wait: CompletionWait,
    },
    Committing {
        id: Option<u64>,
        span: Span,
        lanes: Vec<TokenLane>,
        wait: CompletionWait,
        http: HttpId,
    },
    /// Waiting for every table's newest token to complete.
    Awaiting {
        span: Span,
        lanes: Vec<TokenLane>,
        wait: CompletionWait,
    },
}

/// The Feldera transaction of a streaming session. See the module docs.
#[derive(Debug)]
pub(crate) struct FelderaTxn {
    stage: Stage,
    /// `FELDERA_ACK_MODE=accepted`: the commit's 200 makes the transaction durable.
    accepted_mode: bool,
    timeout_ms: u64,
}

impl FelderaTxn {
    pub(crate) fn new(accepted_mode: bool, timeout_ms: u64) -> FelderaTxn {
        FelderaTxn {
            stage: Stage::Idle,
            accepted_mode,
            timeout_ms,
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.stage, Stage::Idle)
    }

    /// Open, and batches may still join.
    pub(crate) fn is_open(&self) -> bool {
        matches!(&self.stage, Stage::Open(open) if !open.closing)
    }

    /// Whether a batch may be sent now: no transaction, or an open one it joins.
    pub(crate) fn accepts_batches(&self) -> bool {
        self.is_idle() || self.is_open()
    }

    /// Whether `seq` belongs to the open transaction.
    pub(crate) fn holds(&self, seq: BatchSeq) -> bool {
        matches!(&self.stage, Stage::Open(Open { span: Some(span), .. }) if (span.first..=span.last).contains(&seq))
    }

    /// The first batch of the transaction, for status.
    pub(crate) fn first_batch(&self) -> Option<BatchSeq> {
        match &self.stage {
            Stage::Idle | Stage::Starting { .. } => None,
            Stage::Open(open) => open.span.map(|s| s.first),
            Stage::Settling { span, .. }
            | Stage::Committing { span, .. }
            | Stage::Awaiting { span, .. } => Some(span.first),
        }
    }

    /// Batches of the transaction accepted by Feldera and held here until the commit (the
    /// others are still in the sink), for status.
    pub(crate) fn batches_held(&self) -> u64 {
        let count = |s: &Span| s.last - s.first + 1;
        match &self.stage {
            Stage::Idle | Stage::Starting { .. } => 0,
            Stage::Open(open) => open.span.map_or(0, |s| {
                count(&s).saturating_sub(open.unaccepted.len() as u64)
            }),
            Stage::Settling { span, .. }
            | Stage::Committing { span, .. }
            | Stage::Awaiting { span, .. } => count(span),
        }
    }

    /// The open transaction's id and batches, for the stop's warning.
    pub(crate) fn describe(&self) -> String {
        match &self.stage {
            Stage::Open(open) => {
                let id = open.id.map_or("(adopted)".to_owned(), |id| id.to_string());
                let span = open.span.map_or("no batch".to_owned(), |s| s.name());
                format!("Feldera transaction {id} with {span}")
            }
            _ => "no Feldera transaction".to_owned(),
        }
    }

    /// Starts a transaction.
    pub(crate) fn begin(&mut self, queue: &mut Queue, link: &mut FelderaLink) {
        debug_assert!(self.is_idle());
        let http = link.send_txn_control(queue, |endpoint| {
            endpoint.start_transaction(FORWARDED_TIMEOUT_MS)
        });
        self.stage = Stage::Starting { http };
    }

    /// Batch `seq` of `rows` rows, cut when the stream had read up to `reach`, joins the
    /// open transaction.
    pub(crate) fn join(&mut self, seq: BatchSeq, rows: u64, reach: StreamPos) {
        let Stage::Open(open) = &mut self.stage else {
            return;
        };
        let span = open.span.get_or_insert(Span {
            first: seq,
            last: seq,
            rows: 0,
            reach,
        });
        span.last = seq;
        span.rows += rows;
        span.reach = span.reach.max(reach);
        open.unaccepted.push((seq, reach));
    }

    /// The batch that joined last ends at a source commit: no more batches join; the
    /// commit follows once every batch is accepted.
    pub(crate) fn close(&mut self, queue: &mut Queue, link: &mut FelderaLink, now: Mono) {
        if let Stage::Open(open) = &mut self.stage {
            open.closing = true;
        }
        self.maybe_settle(queue, link, now);
    }

    /// Batch `seq` of the transaction was accepted with these tokens: how far it reaches in
    /// the WAL.
    pub(crate) fn accepted(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        seq: BatchSeq,
        tokens: Vec<(Name, String)>,
    ) -> Option<StreamPos> {
        let Stage::Open(open) = &mut self.stage else {
            return None;
        };
        let at = open.unaccepted.iter().position(|(s, _)| *s == seq);
        let reach = at.map(|at| open.unaccepted.swap_remove(at).1);
        for (table, token) in tokens {
            let same_origin = |(t, _, kept): &&mut (Name, BatchSeq, String)| {
                *t == table && (vouches_for(&token, kept) || vouches_for(kept, &token))
            };
            match open.tokens.iter_mut().find(same_origin) {
                Some(entry) if entry.1 < seq => (entry.1, entry.2) = (seq, token),
                Some(_) => {}
                None => open.tokens.push((table, seq, token)),
            }
        }
        self.maybe_settle(queue, link, now);
        reach
    }

    /// Closing and every batch accepted: ask whether their records are in the circuit.
    fn maybe_settle(&mut self, queue: &mut Queue, link: &mut FelderaLink, now: Mono) {
        let Stage::Open(open) = &mut self.stage else {
            return;
        };
        if !open.closing || !open.unaccepted.is_empty() {
            return;
        }
        let Some(span) = open.span else {
            // Nothing joined: nothing to commit.
            self.stage = Stage::Idle;
            return;
        };
        let id = open.id;
        let lanes = std::mem::take(&mut open.tokens)
            .into_iter()
            .map(|(table, _, token)| TokenLane {
                table,
                token,
                ask: Ask::At(now),
                round: PollRound::default(),
            })
            .collect();
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "Feldera transaction {}: {} accepted; asking whether every table's records are in the circuit before committing",
                id_text(id),
                span.name()
            ),
        );
        self.stage = Stage::Settling {
            id,
            span,
            lanes,
            wait: CompletionWait::new(now, commit_timeout_ms(self.timeout_ms, &span)),
        };
        self.ask_due(queue, link, now);
    }

    /// Once every batch of the transaction is accepted: how far it reaches in the WAL and
    /// when its commit wait (settling, committing, awaiting) times out. Feldera working on
    /// a commit is progress (`Run::commit_credit`).
    pub(crate) fn commit_wait(&self) -> Option<(StreamPos, Mono)> {
        match &self.stage {
            Stage::Settling { span, wait, .. }
            | Stage::Committing { span, wait, .. }
            | Stage::Awaiting { span, wait, .. } => Some((span.reach, wait.timeout_at())),
            Stage::Idle | Stage::Starting { .. } | Stage::Open(_) => None,
        }
    }

    /// Whether `id` is a request of the transaction.
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        match &self.stage {
            Stage::Starting { http } => *http == id,
            Stage::Committing { http, .. } => *http == id,
            Stage::Settling { lanes, .. } | Stage::Awaiting { lanes, .. } => {
                lanes.iter().any(|l| l.ask == Ask::Out(id))
            }
            Stage::Idle | Stage::Open(_) => false,
        }
    }

    pub(crate) fn on_http(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        id: HttpId,
        reply: Reply<'_>,
    ) -> TxnStep {
        match &mut self.stage {
            Stage::Starting { http } if *http == id => self.on_started(queue, link, reply),
            Stage::Committing { http, .. } if *http == id => {
                self.on_committed(queue, link, now, reply)
            }
            Stage::Settling { .. } => self.on_token(queue, link, now, id, true, reply),
            Stage::Awaiting { .. } => self.on_token(queue, link, now, id, false, reply),
            _ => TxnStep::Pending,
        }
    }

    fn on_started(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        reply: Reply<'_>,
    ) -> TxnStep {
        let outcome = classify_start_transaction(reply);
        if matches!(
            outcome,
            StartTransactionOutcome::Started { .. } | StartTransactionOutcome::AlreadyOpen(_)
        ) {
            link.own_transaction();
        }
        let id = match outcome {
            StartTransactionOutcome::Started { transaction_id } => {
                queue.note(
                    Level::Debug,
                    Topic::Batch,
                    format!("Feldera transaction {transaction_id} started"),
                );
                Some(transaction_id)
            }
            StartTransactionOutcome::AlreadyOpen(e) => {
                queue.log(
                    Level::Warn,
                    format!(
                        "a Feldera transaction is already open ({e}): left by an earlier run that stopped inside one, or started by someone else; \
                         slotline continues it and commits it at the end of the source transaction it replays"
                    ),
                );
                None
            }
            StartTransactionOutcome::Transient(e) => {
                return failed(
                    FailureKind::FelderaUnavailable,
                    format!("start_transaction failed: {e}"),
                )
            }
            StartTransactionOutcome::Fatal(e) => {
                return failed(
                    FailureKind::FelderaRefused,
                    format!("Feldera refused start_transaction: {e}"),
                )
            }
        };
        self.stage = Stage::Open(Open {
            id,
            span: None,
            unaccepted: Vec::new(),
            closing: false,
            tokens: Vec::new(),
        });
        TxnStep::Opened
    }

    fn on_committed(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        reply: Reply<'_>,
    ) -> TxnStep {
        let Stage::Committing {
            id,
            span,
            lanes,
            wait,
            ..
        } = std::mem::replace(&mut self.stage, Stage::Idle)
        else {
            return TxnStep::Pending;
        };
        match classify_commit_transaction(reply) {
            CommitOutcome::CommitStarted => queue.note(
                Level::Debug,
                Topic::Batch,
                format!(
                    "Feldera transaction {} commit started; waiting until its tokens are complete",
                    id_text(id)
                ),
            ),
            CommitOutcome::NoTransaction(e) => queue.log(
                Level::Warn,
                format!(
                    "committing Feldera transaction {}: Feldera has no open transaction ({e}); someone else committed it, or Feldera restarted. \
                     Its tokens decide whether {} is durable",
                    id_text(id),
                    span.name()
                ),
            ),
            CommitOutcome::Transient(e) => {
                return failed(
                    FailureKind::FelderaUnavailable,
                    format!("commit_transaction failed: {e}; {} not acknowledged", span.name()),
                )
            }
            CommitOutcome::Fatal(e) => {
                return failed(
                    FailureKind::FelderaRefused,
                    format!("Feldera refused commit_transaction: {e}; {} not acknowledged", span.name()),
                )
            }
        }
        if self.accepted_mode {
            return durable(span);
        }
        let lanes = lanes
            .into_iter()
            .map(|l| TokenLane {
                ask: Ask::At(now),
                round: PollRound::default(),
                ..l
            })
            .collect();
        self.stage = Stage::Awaiting { span, lanes, wait };
        self.ask_due(queue, link, now);
        TxnStep::Pending
    }

    fn on_token(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
        id: HttpId,
        settling: bool,
        reply: Reply<'_>,
    ) -> TxnStep {
        let (Stage::Settling { lanes, span, .. } | Stage::Awaiting { lanes, span, .. }) =
            &mut self.stage
        else {
            return TxnStep::Pending;
        };
        let span = *span;
        let Some(lane) = lanes.iter_mut().find(|l| l.ask == Ask::Out(id)) else {
            return TxnStep::Pending;
        };
        let done = match classify_transaction_token(reply) {
            TransactionTokenOutcome::Complete => true,
            TransactionTokenOutcome::InCircuit => settling,
            TransactionTokenOutcome::Queued => false,
            TransactionTokenOutcome::Restarted(e) => {
                return failed(
                    FailureKind::FelderaRestarted,
                    format!("Feldera pipeline restarted while its transaction held {}; what it held is lost (or committed by Feldera's own recovery) and will be replayed: {e}", span.name()),
                )
            }
            TransactionTokenOutcome::Transient(e) => {
                return failed(
                    FailureKind::FelderaUnavailable,
                    format!("completion status of {} failed: {e}", lane.table),
                )
            }
            TransactionTokenOutcome::Fatal(e) => {
                return failed(
                    FailureKind::FelderaRefused,
                    format!("completion status refused: {e}. {} not acknowledged", span.name()),
                )
            }
        };
        lane.ask = if done {
            Ask::Done
        } else {
            Ask::At(now.plus_us(lane.round.next_gap_us()))
        };
        if lanes.iter().any(|l| l.ask != Ask::Done) {
            return TxnStep::Pending;
        }
        if settling {
            self.commit(queue, link);
            TxnStep::Pending
        } else {
            self.stage = Stage::Idle;
            durable(span)
        }
    }

    /// Every table's records are in the circuit: commit.
    fn commit(&mut self, queue: &mut Queue, link: &mut FelderaLink) {
        let Stage::Settling {
            id,
            span,
            lanes,
            wait,
        } = std::mem::replace(&mut self.stage, Stage::Idle)
        else {
            return;
        };
        let http = link.send_txn_control(queue, |endpoint| {
            endpoint.commit_transaction(FORWARDED_TIMEOUT_MS)
        });
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "Feldera transaction {}: {} ({} rows) in the circuit; committing",
                id_text(id),
                span.name(),
                span.rows
            ),
        );
        self.stage = Stage::Committing {
            id,
            span,
            lanes,
            wait,
            http,
        };
    }

    /// Sends the questions that are due.
    fn ask_due(&mut self, queue: &mut Queue, link: &mut FelderaLink, now: Mono) {
        let (Stage::Settling { lanes, .. } | Stage::Awaiting { lanes, .. }) = &mut self.stage
        else {
            return;
        };
        for lane in lanes.iter_mut() {
            if matches!(lane.ask, Ask::At(at) if now >= at) {
                let http = queue.http_id();
                queue.push(Command::Http {
                    id: http,
                    request: link
                        .endpoint()
                        .completion_status(&lane.token, QUESTION_TIMEOUT_MS),
                });
                lane.ask = Ask::Out(http);
            }
        }
    }

    /// Timers fired: due questions, the timeout, the slow log.
    pub(crate) fn on_timer(
        &mut self,
        queue: &mut Queue,
        link: &mut FelderaLink,
        now: Mono,
    ) -> TxnStep {
        let (Stage::Settling { span, wait, .. }
        | Stage::Committing { span, wait, .. }
        | Stage::Awaiting { span, wait, .. }) = &mut self.stage
        else {
            return TxnStep::Pending;
        };
        if let Some(waited_us) = wait.timed_out(now) {
            return failed(
                FailureKind::CompletionTimeout,
                format!(
                    "Feldera transaction of {} not committed after {} ms (FELDERA_COMPLETION_TIMEOUT_MS for each of its {} batches); not acknowledging, it will be replayed",
                    span.name(),
                    waited_us / 1000,
                    span.last - span.first + 1
                ),
            );
        }
        if wait.take_slow_log(now) {
            let waited_ms = now.since(wait.started()) / 1000;
            queue.log(
                Level::Warn,
                format!(
                    "Feldera transaction of {} ({} rows) still not committed after {waited_ms} ms; WAL stays pinned meanwhile",
                    span.name(),
                    span.rows
                ),
            );
        }
        self.ask_due(queue, link, now);
        TxnStep::Pending
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        let (Stage::Settling { lanes, wait, .. }
        | Stage::Committing { lanes, wait, .. }
        | Stage::Awaiting { lanes, wait, .. }) = &self.stage
        else {
            return;
        };
        let mut earliest = |kind: TimerKind, at: Mono| {
            if timers.get(kind).is_none_or(|t| at < t) {
                timers.set(kind, at);
            }
        };
        earliest(TimerKind::CompletionTimeout, wait.timeout_at());
        if let Some(at) = wait.slow_log_at() {
            earliest(TimerKind::SlowCompletionLog, at);
        }
        if matches!(self.stage, Stage::Committing { .. }) {
            return;
        }
        for lane in lanes {
            if let Ask::At(at) = lane.ask {
                earliest(TimerKind::CompletionPoll, at);
            }
        }
    }
}

/// How long a transaction's commit may take, from its last batch accepted to every token
/// complete: the completion timeout for each of its batches, the time each would have had
/// on its own outside a transaction. Feldera's commit runs the whole transaction through
/// the circuit, so a large one takes long in proportion (docs/pipelining.md).
fn commit_timeout_ms(timeout_ms: u64, span: &Span) -> u64 {
    timeout_ms.saturating_mul(span.last - span.first + 1)
}

fn id_text(id: Option<u64>) -> String {
    id.map_or("(adopted)".to_owned(), |id| id.to_string())
}

fn durable(span: Span) -> TxnStep {
    TxnStep::Durable {
        first: span.first,
        last: span.last,
        rows: span.rows,
    }
}

fn failed(kind: FailureKind, message: impl Into<String>) -> TxnStep {
    TxnStep::Failed(Failure::new(kind, message))
}
