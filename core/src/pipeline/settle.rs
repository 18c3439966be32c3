//! No table data of a session moves before a Feldera transaction left open is settled.
//!
//! Feldera has one transaction at a time, pipeline-wide, and it outlives whoever started it:
//! a run (or a session) that stopped inside one leaves it open. Everything ingested while it
//! is open joins it, and nothing of it completes or becomes visible to a query before its
//! commit. A session that copies a snapshot or retracts keys before its stream has taken the
//! transaction over would write into it and wait for ever, or read keys that omit what it
//! holds. So with `FELDERA_TRANSACTIONS` on, a session's requests that read or write table
//! data (ingress, ad-hoc queries: [`Queue::push_table_request`]) wait until the session knows
//! no transaction is open that it did not start or adopt:
//! - the stream's own transaction (`feldera_txn`) starts or adopts one before its first
//!   batch: from then on the session owns it ([`Queue::own_transaction`]);
//! - otherwise the first such request starts `start_transaction`: 409 (one is open) or 200 (a
//!   fresh, empty one) is answered by `commit_transaction`, and then the waiting requests go
//!   out in order. What the old transaction held becomes visible: those are replays of
//!   changes the slot has not acknowledged, which this session writes again.
//!
//! Owns: the gate and the requests waiting behind it. Never decides what a request is for.

use super::policy::{Failure, FailureKind};
use super::queue::Queue;
use crate::feldera::{
    classify_commit_transaction, classify_start_transaction, CommitOutcome, FelderaEndpoint,
    HttpRequest, Reply, StartTransactionOutcome,
};
use crate::io::{Command, HttpId, Level, Topic};

/// Request timeout of the settling `start_transaction` and `commit_transaction`.
const SETTLE_TIMEOUT_MS: u64 = 35_000;

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

impl Queue {
    /// A new session: with Feldera transactions on, a transaction may be open that nobody
    /// of this session started. Requests that waited in the ended session were never sent:
    /// they are forgotten (and so is their place in `writes`).
    pub(crate) fn settle_at_session_start(&mut self, transactions: bool) {
        for (id, _) in std::mem::take(&mut self.gate.waiting) {
            self.writes.forget(id);
        }
        self.gate.state = if transactions {
            State::Unknown
        } else {
            State::Settled
        };
    }

    /// The stream started or adopted a Feldera transaction: this session owns whatever is
    /// open, and its own requests need not wait.
    pub(crate) fn own_transaction(&mut self) {
        if matches!(self.gate.state, State::Unknown) {
            self.gate.state = State::Settled;
        }
    }

    /// Sends a request that reads or writes table data, or holds it until an open Feldera
    /// transaction is settled (see the module docs).
    pub(crate) fn push_table_request(
        &mut self,
        endpoint: &FelderaEndpoint,
        id: HttpId,
        request: HttpRequest,
    ) {
        match self.gate.state {
            State::Settled => self.push(Command::Http { id, request }),
            State::Unknown => {
                self.gate.waiting.push((id, request));
                self.start_settling(endpoint);
            }
            State::Starting(_) | State::Committing(_) => self.gate.waiting.push((id, request)),
        }
    }

    /// Asks whether a transaction is open, unless a transaction request of an earlier
    /// session is still out (`writes`): then [`Queue::resume_settle`] asks once it ended.
    fn start_settling(&mut self, endpoint: &FelderaEndpoint) {
        if !self.may_start_transaction() {
            return;
        }
        let http = self.http_id();
        self.push_txn_control(http, endpoint.start_transaction(SETTLE_TIMEOUT_MS));
        self.gate.state = State::Starting(http);
    }

    /// The last transaction request of an earlier session ended: requests waiting behind
    /// an unsettled gate may start the settling now.
    pub(crate) fn resume_settle(&mut self, endpoint: &FelderaEndpoint) {
        if self.gate.state == State::Unknown && !self.gate.waiting.is_empty() {
            self.start_settling(endpoint);
        }
    }

    /// Forgets a request still waiting behind the gate (never sent); false when none was.
    pub(crate) fn unwait(&mut self, id: HttpId) -> bool {
        let before = self.gate.waiting.len();
        self.gate.waiting.retain(|(waiting, _)| *waiting != id);
        self.gate.waiting.len() != before
    }

    /// Whether `id` is one of the gate's own requests.
    pub(crate) fn settle_owns(&self, id: HttpId) -> bool {
        matches!(self.gate.state, State::Starting(h) | State::Committing(h) if h == id)
    }

    /// An answer to one of the gate's requests: the next step, or why the session cannot go
    /// on.
    pub(crate) fn on_settle_reply(
        &mut self,
        endpoint: &FelderaEndpoint,
        reply: Reply<'_>,
    ) -> Result<(), Failure> {
        match self.gate.state {
            State::Starting(_) => {
                match classify_start_transaction(reply) {
                    StartTransactionOutcome::Started { transaction_id } => self.note(
                        Level::Debug,
                        Topic::Batch,
                        format!(
                            "no Feldera transaction was open; committing the empty one just started ({transaction_id}) before reading or writing table data"
                        ),
                    ),
                    StartTransactionOutcome::AlreadyOpen(e) => self.log(
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
                let http = self.http_id();
                self.push_txn_control(http, endpoint.commit_transaction(SETTLE_TIMEOUT_MS));
                self.gate.state = State::Committing(http);
                Ok(())
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
                self.gate.state = State::Settled;
                for (id, request) in std::mem::take(&mut self.gate.waiting) {
                    self.push(Command::Http { id, request });
                }
                Ok(())
            }
            State::Settled | State::Unknown => Ok(()),
        }
    }
}
