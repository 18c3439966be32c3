//! No table data of a session moves before a Feldera transaction left open is settled.
//!
//! Feldera has one transaction at a time, pipeline-wide, and it outlives whoever started it:
//! a run (or a session) that stopped inside one leaves it open. Everything ingested while it
//! is open joins it, and nothing of it completes or becomes visible to a query before its
//! commit. A session that copies a snapshot or retracts keys before its stream has taken the
//! transaction over would write into it and wait for ever, or read keys that omit what it
//! holds. So with `FELDERA_TRANSACTIONS` on, a session's requests that read or write table
//! data (ingress, ad-hoc queries, checkpoints) wait until the session knows no transaction
//! is open that it did not start or adopt:
//! - the stream's own transaction (`feldera_txn`) starts or adopts one before its first
//!   batch: from then on the session owns it ([`Gate::own_transaction`]);
//! - otherwise the first such request starts `start_transaction`: 409 (one is open) or 200 (a
//!   fresh, empty one) is answered by `commit_transaction`, and then the waiting requests go
//!   out in order. What the old transaction held becomes visible: those are replays of
//!   changes the slot has not acknowledged, which this session writes again.
//!
//! A session starts or settles no transaction while a transaction request of an earlier
//! session is still out (the ledger's `control_blocks`): a late commit would commit this
//! session's.
//!
//! A session has one owner of the pipeline's transaction: the gate while it settles, else
//! the stream. The stream starts none while the gate settles ([`Gate::settling`]), and its
//! first transaction request makes it the owner at once, so the gate never settles (commits)
//! a transaction the stream is starting or holds: a source transaction would otherwise
//! become visible in pieces.
//!
//! Owns: the gate and the requests waiting behind it. Never decides what a request is for.

use super::ledger::{Ledger, Owner};
use crate::feldera::{
    classify_commit_transaction, classify_start_transaction, CommitOutcome, FelderaEndpoint,
    HttpRequest, Reply, StartTransactionOutcome, FORWARDED_TIMEOUT_MS,
};
use crate::io::{Command, HttpId, Level, Topic};
use crate::pipeline::policy::{Failure, FailureKind};
use crate::pipeline::queue::Queue;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing to settle (`FELDERA_TRANSACTIONS=off`, or settled in this session).
    #[default]
    Settled,
    /// A transaction may be open; nothing asked yet.
    Unknown,
    Starting(HttpId),
    Committing(HttpId),
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    state: State,
    /// Requests that wait for the gate, in the order they were made.
    waiting: Vec<(HttpId, HttpRequest)>,
}

/// Whether this session may start or settle a Feldera transaction now: false (and said once
/// per session) while a transaction request of an earlier session is still out.
pub(crate) fn may_start_transaction(queue: &mut Queue, ledger: &mut Ledger) -> bool {
    let earlier = ledger.control_blocks();
    if earlier == 0 {
        return true;
    }
    if ledger.first_control_wait() {
        queue.note(
            Level::Info,
            Topic::Batch,
            format!(
                "waiting until {earlier} Feldera transaction request(s) of an ended session end before starting or settling a transaction \
                 (a late commit would commit this session's; each ends within its timeout)"
            ),
        );
    }
    false
}

impl Gate {
    /// A new session: with Feldera transactions on, a transaction may be open that nobody
    /// of this session started. Requests that waited in the ended session were never sent:
    /// they are forgotten (and so is their place in the ledger).
    pub(crate) fn start_session(&mut self, ledger: &mut Ledger, transactions: bool) {
        for (id, _) in std::mem::take(&mut self.waiting) {
            ledger.forget(id);
        }
        self.state = if transactions {
            State::Unknown
        } else {
            State::Settled
        };
    }

    /// Whether the gate is settling an open transaction, or about to (requests wait behind
    /// it): the stream must not start one meanwhile (see the module docs).
    pub(crate) fn settling(&self) -> bool {
        match self.state {
            State::Starting(_) | State::Committing(_) => true,
            State::Unknown => !self.waiting.is_empty(),
            State::Settled => false,
        }
    }

    /// The stream asked for or adopted a Feldera transaction: this session owns whatever
    /// is open, and its own requests need not wait.
    pub(crate) fn own_transaction(&mut self) {
        if matches!(self.state, State::Unknown) {
            self.state = State::Settled;
        }
    }

    /// Sends a request that reads or writes table data, or holds it until an open Feldera
    /// transaction is settled (see the module docs).
    pub(crate) fn send(
        &mut self,
        queue: &mut Queue,
        ledger: &mut Ledger,
        endpoint: &FelderaEndpoint,
        id: HttpId,
        request: HttpRequest,
    ) {
        match self.state {
            State::Settled => queue.push(Command::Http { id, request }),
            State::Unknown => {
                self.waiting.push((id, request));
                self.start_settling(queue, ledger, endpoint);
            }
            State::Starting(_) | State::Committing(_) => self.waiting.push((id, request)),
        }
    }

    /// Asks whether a transaction is open, unless a transaction request of an earlier
    /// session is still out: then [`Gate::resume`] asks once it ended.
    fn start_settling(
        &mut self,
        queue: &mut Queue,
        ledger: &mut Ledger,
        endpoint: &FelderaEndpoint,
    ) {
        if !may_start_transaction(queue, ledger) {
            return;
        }
        let http = queue.http_id();
        ledger.started_control(http, Owner::Gate);
        let request = endpoint.start_transaction(FORWARDED_TIMEOUT_MS);
        queue.push(Command::Http { id: http, request });
        self.state = State::Starting(http);
    }

    /// The last transaction request of an earlier session ended: requests waiting behind
    /// an unsettled gate may start the settling now.
    pub(crate) fn resume(
        &mut self,
        queue: &mut Queue,
        ledger: &mut Ledger,
        endpoint: &FelderaEndpoint,
    ) {
        if self.state == State::Unknown && !self.waiting.is_empty() {
            self.start_settling(queue, ledger, endpoint);
        }
    }

    /// Forgets a request still waiting behind the gate (never sent); false when none was.
    pub(crate) fn unwait(&mut self, id: HttpId) -> bool {
        let before = self.waiting.len();
        self.waiting.retain(|(waiting, _)| *waiting != id);
        self.waiting.len() != before
    }

    /// Whether `id` is one of the gate's own requests.
    pub(crate) fn owns(&self, id: HttpId) -> bool {
        matches!(self.state, State::Starting(h) | State::Committing(h) if h == id)
    }

    /// An answer to one of the gate's requests: the next step (true once settled: the
    /// waiting requests went out and the stream may start a transaction), or why the
    /// session cannot go on.
    pub(crate) fn on_reply(
        &mut self,
        queue: &mut Queue,
        ledger: &mut Ledger,
        endpoint: &FelderaEndpoint,
        reply: Reply<'_>,
    ) -> Result<bool, Failure> {
        match self.state {
            State::Starting(_) => {
                match classify_start_transaction(reply) {
                    StartTransactionOutcome::Started { transaction_id } => queue.note(
                        Level::Debug,
                        Topic::Batch,
                        format!(
                            "no Feldera transaction was open; committing the empty one just started ({transaction_id}) before reading or writing table data"
                        ),
                    ),
                    StartTransactionOutcome::AlreadyOpen(e) => queue.log(
                        Level::Warn,
                        format!(
                            "a Feldera transaction is open ({e}): left by a run or session that stopped inside one, or started by someone else. \
                             Committing it before this session reads or writes table data; what it holds are replays that are written again"
                        ),
                    ),
                    StartTransactionOutcome::Transient(e) => {
                        return Err(Failure::new(
                            FailureKind::FelderaUnavailable,
                            format!("start_transaction (settling an open transaction) failed: {e}"),
                        ))
                    }
                    StartTransactionOutcome::Fatal(e) => {
                        return Err(Failure::new(
                            FailureKind::FelderaRefused,
                            format!("Feldera refused start_transaction (settling an open transaction): {e}"),
                        ))
                    }
                }
                let http = queue.http_id();
                ledger.started_control(http, Owner::Gate);
                let request = endpoint.commit_transaction(FORWARDED_TIMEOUT_MS);
                queue.push(Command::Http { id: http, request });
                self.state = State::Committing(http);
                Ok(false)
            }
            State::Committing(_) => {
                match classify_commit_transaction(reply) {
                    CommitOutcome::CommitStarted | CommitOutcome::NoTransaction(_) => {}
                    CommitOutcome::Transient(e) => {
                        return Err(Failure::new(
                            FailureKind::FelderaUnavailable,
                            format!("commit_transaction (settling an open transaction) failed: {e}"),
                        ))
                    }
                    CommitOutcome::Fatal(e) => {
                        return Err(Failure::new(
                            FailureKind::FelderaRefused,
                            format!("Feldera refused commit_transaction (settling an open transaction): {e}"),
                        ))
                    }
                }
                self.state = State::Settled;
                for (id, request) in std::mem::take(&mut self.waiting) {
                    queue.push(Command::Http { id, request });
                }
                Ok(true)
            }
            State::Settled | State::Unknown => Ok(false),
        }
    }
}
