//! The pipeline the double pretends to run: one incarnation's tables, its input endpoints,
//! the queue of accepted-but-unprocessed requests, completion, transactions, pause and
//! restart.
//!
//! Model: an accepted request joins a FIFO queue of groups; a group is processed (applied to
//! the tables, one step) once its completion delay has elapsed and the pipeline is not
//! paused. Queries and inspection see processed state only, and a token is complete once
//! every request up to it on its endpoint is processed.
//!
//! Transactions, as Feldera runs them: one at a time (a second start is refused while one
//! is open); starting one takes in what was accepted and not processed yet; it holds every
//! request accepted while it is open (their tokens are in progress, with a step: their
//! records are in the circuit); a commit only starts the commit and queues the held
//! requests as one group, processed like any other (after the completion delay, in one
//! step): the commit is asynchronous. Committing with none open is refused.
//!
//! A restart drops the queue and any open transaction (what was accepted but not processed
//! is lost, as in Feldera) and, if asked, the tables.
//!
//! Owns: all of that state. Never sees HTTP; time arrives as `now`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

use super::faults::Faults;
use super::phase::Phase;
use super::row::Change;
use super::schema::Schema;
use super::table::TableState;
use super::token::CompletionToken;

/// Feldera refuses more distinct HTTP input endpoints than this (429 ApiConnectionLimit).
pub const MAX_INGRESS_ENDPOINTS: usize = 100;

/// How long after acceptance a request is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionDelay {
    /// Processed this long after acceptance (zero: at once).
    Fixed(Duration),
    /// Processed only when released (`release_completions`).
    Never,
}

#[derive(Debug)]
struct Batch {
    table: usize,
    endpoint: u64,
    seq: u64,
    changes: Vec<Change>,
}

#[derive(Debug)]
struct Group {
    /// `None`: waits for a release.
    ready_at: Option<Instant>,
    batches: Vec<Batch>,
    /// A committed transaction: its records are in the circuit already.
    transaction: bool,
}

#[derive(Debug, Default, Clone)]
struct EndpointCounters {
    accepted: u64,
    /// Step in which each processed request (by `seq - 1`) was processed; requests on one
    /// endpoint are processed in order, so its length is the processed count.
    processed_steps: Vec<u64>,
}

/// Answer to a completion query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    Complete {
        step: u64,
    },
    /// `step` once the records are in the circuit (inside a transaction), `None` while
    /// they wait in the input queue.
    InProgress {
        step: Option<u64>,
    },
}

/// Why a token cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Issued by an earlier incarnation: 410 PipelineRestarted.
    Restarted,
    /// Endpoint id never issued in this incarnation.
    UnknownEndpoint(u64),
}

/// The simulated pipeline.
#[derive(Debug)]
pub struct Pipeline {
    pub schema: Arc<Schema>,
    pub incarnation: String,
    pub tables: Vec<TableState>,
    pub step: u64,
    pub completion_delay: CompletionDelay,
    pub faults: Faults,
    pub paused: bool,
    pub proxy_timeout: Duration,
    /// Answer ad-hoc queries as one JSON array instead of NDJSON.
    pub query_array: bool,
    /// Lifecycle phase; pipeline endpoints answer errors outside `Running`.
    pub phase: Phase,
    /// Committed transactions wait for a release (`release_completions`) whatever the
    /// completion delay: a commit that takes as long as a test needs.
    pub hold_commits: bool,
    endpoints: BTreeMap<String, u64>,
    /// Endpoint ids removed since they were created (their tokens answer 410).
    removed: BTreeSet<u64>,
    counters: Vec<EndpointCounters>,
    pending: VecDeque<Group>,
    txn: Option<(u64, Vec<Batch>)>,
    next_txn_id: u64,
}

impl Pipeline {
    pub fn new(schema: Arc<Schema>, delay: CompletionDelay, proxy_timeout: Duration) -> Pipeline {
        let tables = schema.inputs.iter().map(TableState::new).collect();
        Pipeline {
            schema,
            incarnation: uuid::Uuid::new_v4().to_string(),
            tables,
            step: 0,
            completion_delay: delay,
            faults: Faults::default(),
            paused: false,
            proxy_timeout,
            query_array: false,
            phase: Phase::Running,
            hold_commits: false,
            endpoints: BTreeMap::new(),
            removed: BTreeSet::new(),
            counters: Vec::new(),
            pending: VecDeque::new(),
            txn: None,
            next_txn_id: 1,
        }
    }

    /// The endpoint id for one spelling of an ingress URL (table segment plus parameters),
    /// created on first use as Feldera creates HTTP input endpoints; `None` past the limit.
    pub fn endpoint_for(&mut self, spelling: &str) -> Option<u64> {
        if let Some(id) = self.endpoints.get(spelling) {
            return Some(*id);
        }
        if self.endpoints.len() >= MAX_INGRESS_ENDPOINTS {
            return None;
        }
        let id = self.counters.len() as u64;
        self.counters.push(EndpointCounters::default());
        self.endpoints.insert(spelling.to_string(), id);
        Some(id)
    }

    /// Accepts a request's valid changes and returns its token.
    pub fn accept(
        &mut self,
        table: usize,
        endpoint: u64,
        changes: Vec<Change>,
        now: Instant,
    ) -> String {
        let counters = &mut self.counters[endpoint as usize];
        counters.accepted += 1;
        let seq = counters.accepted;
        let batch = Batch {
            table,
            endpoint,
            seq,
            changes,
        };
        match &mut self.txn {
            Some((_, held)) => held.push(batch),
            None => {
                let ready_at = self.ready_at(now);
                self.pending.push_back(Group {
                    ready_at,
                    batches: vec![batch],
                    transaction: false,
                });
                // A zero delay means processed at once, not "when someone next looks".
                self.advance(now);
            }
        }
        CompletionToken {
            u: self.incarnation.clone(),
            e: endpoint,
            c: seq,
        }
        .encode()
    }

    fn ready_at(&self, now: Instant) -> Option<Instant> {
        match self.completion_delay {
            CompletionDelay::Fixed(d) => Some(now + d),
            CompletionDelay::Never => None,
        }
    }

    /// Processes every queued group that is due, in order. Call before reading state.
    pub fn advance(&mut self, now: Instant) {
        if self.paused {
            return;
        }
        while self
            .pending
            .front()
            .is_some_and(|g| g.ready_at.is_some_and(|t| t <= now))
        {
            let Some(group) = self.pending.pop_front() else {
                break;
            };
            self.step += 1;
            for batch in group.batches {
                let rel = &self.schema.inputs[batch.table];
                for change in batch.changes {
                    self.tables[batch.table].apply(rel, change);
                }
                let c = &mut self.counters[batch.endpoint as usize];
                debug_assert_eq!(
                    c.processed_steps.len() as u64 + 1,
                    batch.seq,
                    "FIFO per endpoint"
                );
                c.processed_steps.push(self.step);
            }
        }
    }

    /// Makes every queued group due now (the "never until released" release).
    pub fn release_completions(&mut self, now: Instant) {
        for g in &mut self.pending {
            g.ready_at = Some(g.ready_at.map_or(now, |t| t.min(now)));
        }
    }

    pub fn completion(
        &mut self,
        token: &CompletionToken,
        now: Instant,
    ) -> Result<Completion, TokenError> {
        if token.u != self.incarnation {
            return Err(TokenError::Restarted);
        }
        if self.removed.contains(&token.e) {
            return Err(TokenError::UnknownEndpoint(token.e));
        }
        self.advance(now);
        let c = self
            .counters
            .get(token.e as usize)
            .ok_or(TokenError::UnknownEndpoint(token.e))?;
        // Feldera reports the step that processed the token's data.
        Ok(
            match token
                .c
                .checked_sub(1)
                .map(|i| c.processed_steps.get(i as usize))
            {
                Some(Some(step)) => Completion::Complete { step: *step },
                Some(None) => Completion::InProgress {
                    step: self.in_circuit(token.e, token.c).then_some(self.step + 1),
                },
                None => Completion::Complete { step: 0 },
            },
        )
    }

    /// Forgets every ingress spelling; their ids stay known as removed, never reused.
    pub fn remove_endpoints(&mut self) {
        let ids: Vec<u64> = self.endpoints.values().copied().collect();
        self.removed.extend(ids);
        self.endpoints.clear();
    }

    /// Whether request `seq` of `endpoint` is held by the open transaction or queued with a
    /// committed one (its records are in the circuit, not yet processed to completion).
    fn in_circuit(&self, endpoint: u64, seq: u64) -> bool {
        let held = |b: &Batch| b.endpoint == endpoint && b.seq == seq;
        self.txn
            .as_ref()
            .is_some_and(|(_, batches)| batches.iter().any(held))
            || self
                .pending
                .iter()
                .filter(|g| g.transaction)
                .any(|g| g.batches.iter().any(held))
    }

    /// Opens a transaction, which takes in what was accepted and not processed yet (outside
    /// a committed transaction); `Err(open id)` when one is already open.
    pub fn start_transaction(&mut self, now: Instant) -> Result<u64, u64> {
        if let Some((id, _)) = &self.txn {
            return Err(*id);
        }
        self.advance(now);
        let id = self.next_txn_id;
        self.next_txn_id += 1;
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        for group in self.pending.drain(..) {
            if group.transaction {
                kept.push_back(group);
            } else {
                taken.extend(group.batches);
            }
        }
        self.pending = kept;
        self.txn = Some((id, taken));
        Ok(id)
    }

    /// Starts the commit: everything the open transaction holds is queued as one group,
    /// processed later like any other; `None` if none is open.
    pub fn commit_transaction(&mut self, now: Instant) -> Option<u64> {
        let (id, batches) = self.txn.take()?;
        let ready_at = if self.hold_commits {
            None
        } else {
            self.ready_at(now)
        };
        self.pending.push_back(Group {
            ready_at,
            batches,
            transaction: true,
        });
        self.advance(now);
        Some(id)
    }

    /// A new incarnation: old tokens answer 410, the queue and any open transaction are
    /// lost, endpoints start afresh; the tables survive only when `keep_state`. What was
    /// due by `now` was processed before the restart.
    pub fn restart(&mut self, keep_state: bool, now: Instant) {
        self.advance(now);
        self.incarnation = uuid::Uuid::new_v4().to_string();
        self.pending.clear();
        self.txn = None;
        self.endpoints.clear();
        self.removed.clear();
        self.counters.clear();
        self.paused = false;
        self.phase = Phase::Running;
        if !keep_state {
            self.tables = self.schema.inputs.iter().map(TableState::new).collect();
            self.step = 0;
        }
    }

    /// A summary for `GET /control/status`.
    pub fn status_json(&self) -> Json {
        json!({
            "incarnation": self.incarnation,
            "step": self.step,
            "paused": self.paused,
            "pending_groups": self.pending.len(),
            "transaction_id": self.txn.as_ref().map(|(id, _)| *id),
            "completion_delay_ms": match self.completion_delay {
                CompletionDelay::Fixed(d) => json!(d.as_millis() as u64),
                CompletionDelay::Never => json!("never"),
            },
            "proxy_timeout_ms": self.proxy_timeout.as_millis() as u64,
            "query_array": self.query_array,
            "phase": self.phase.runtime_status(),
            "hold_commits": self.hold_commits,
            "queued_ingress_failures": self.faults.queued_ingress_failures(),
        })
    }

    /// Inspection view of every input table.
    pub fn tables_json(&self) -> Json {
        Json::Array(
            self.schema
                .inputs
                .iter()
                .zip(&self.tables)
                .map(|(rel, t)| t.to_json(rel))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feldera_double::value::Value;

    fn pipeline(delay: CompletionDelay) -> Pipeline {
        let schema = Schema::parse(json!({"inputs": [{"name": "t", "fields": [
            {"name": "id", "columntype": {"type": "BIGINT", "nullable": false}}],
            "primary_key": ["id"]}], "outputs": []}))
        .expect("schema");
        Pipeline::new(Arc::new(schema), delay, Duration::from_secs(1))
    }

    fn insert(id: i64) -> Vec<Change> {
        vec![Change::Insert(vec![Value::Int(id)])]
    }

    fn rows(p: &Pipeline) -> usize {
        p.tables[0].visible_rows().len()
    }

    fn status(p: &mut Pipeline, token: &str, now: Instant) -> Completion {
        let t = CompletionToken::decode(token).expect("own token decodes");
        p.completion(&t, now).expect("current incarnation")
    }

    #[test]
    fn requests_are_processed_in_order_once_due_and_not_while_paused() {
        let mut p = pipeline(CompletionDelay::Fixed(Duration::from_millis(10)));
        let t0 = Instant::now();
        let e = p.endpoint_for("t?format=json").unwrap();
        let a = p.accept(0, e, insert(1), t0);
        assert_eq!(
            status(&mut p, &a, t0),
            Completion::InProgress { step: None }
        );
        p.paused = true;
        assert_eq!(
            status(&mut p, &a, t0 + Duration::from_millis(20)),
            Completion::InProgress { step: None }
        );
        p.paused = false;
        assert_eq!(
            status(&mut p, &a, t0 + Duration::from_millis(20)),
            Completion::Complete { step: 1 }
        );
        assert_eq!(rows(&p), 1);
    }

    #[test]
    fn a_transaction_holds_its_requests_until_commit() {
        let mut p = pipeline(CompletionDelay::Fixed(Duration::ZERO));
        let now = Instant::now();
        let e = p.endpoint_for("t").unwrap();
        assert_eq!(p.start_transaction(now), Ok(1));
        assert_eq!(p.start_transaction(now), Err(1));
        let a = p.accept(0, e, insert(1), now);
        let b = p.accept(0, e, insert(2), now);
        assert_eq!(
            (rows(&p), status(&mut p, &b, now)),
            (0, Completion::InProgress { step: Some(1) }),
            "in the circuit, not complete"
        );
        assert_eq!(p.commit_transaction(now), Some(1));
        assert_eq!(rows(&p), 2);
        assert_eq!(
            status(&mut p, &a, now),
            status(&mut p, &b, now),
            "one step for the whole transaction"
        );
        assert_eq!(p.commit_transaction(now), None);
    }

    #[test]
    fn the_commit_is_asynchronous_and_a_start_takes_in_what_waits() {
        let delay = Duration::from_millis(10);
        let mut p = pipeline(CompletionDelay::Fixed(delay));
        let t0 = Instant::now();
        let e = p.endpoint_for("t").unwrap();
        let before = p.accept(0, e, insert(1), t0);
        assert_eq!(p.start_transaction(t0), Ok(1));
        let inside = p.accept(0, e, insert(2), t0);
        let later = t0 + 2 * delay;
        assert_eq!(
            status(&mut p, &before, later),
            Completion::InProgress { step: Some(1) },
            "taken into the transaction: not processed before its commit"
        );
        assert_eq!(p.commit_transaction(later), Some(1));
        assert_eq!(rows(&p), 0, "the commit only started");
        assert_eq!(p.start_transaction(later), Ok(2), "a new one may start");
        let done = later + delay;
        assert_eq!(
            status(&mut p, &inside, done),
            Completion::Complete { step: 1 }
        );
        assert_eq!(
            status(&mut p, &before, done),
            Completion::Complete { step: 1 }
        );
        assert_eq!(rows(&p), 2);
    }

    #[test]
    fn held_commits_wait_for_a_release_while_other_requests_are_processed() {
        let mut p = pipeline(CompletionDelay::Fixed(Duration::ZERO));
        let now = Instant::now();
        let e = p.endpoint_for("t").unwrap();
        p.hold_commits = true;
        assert_eq!(p.start_transaction(now), Ok(1));
        let a = p.accept(0, e, insert(1), now);
        assert_eq!(p.commit_transaction(now), Some(1));
        assert_eq!(rows(&p), 0, "the commit waits");
        assert_eq!(
            status(&mut p, &a, now),
            Completion::InProgress { step: Some(1) }
        );
        p.release_completions(now);
        p.advance(now);
        assert_eq!(
            (rows(&p), status(&mut p, &a, now)),
            (1, Completion::Complete { step: 1 })
        );
    }

    #[test]
    fn restart_loses_the_queue_and_invalidates_tokens() {
        let mut p = pipeline(CompletionDelay::Never);
        let now = Instant::now();
        let e = p.endpoint_for("t").unwrap();
        let a = p.accept(0, e, insert(1), now);
        p.restart(true, now);
        let t = CompletionToken::decode(&a).unwrap();
        assert_eq!(p.completion(&t, now), Err(TokenError::Restarted));
        p.release_completions(now);
        p.advance(now);
        assert_eq!(rows(&p), 0);
    }

    #[test]
    fn more_than_the_endpoint_limit_is_refused() {
        let mut p = pipeline(CompletionDelay::Never);
        for i in 0..MAX_INGRESS_ENDPOINTS {
            assert!(p.endpoint_for(&format!("t?n={i}")).is_some());
        }
        assert_eq!(
            p.endpoint_for("t?n=0"),
            Some(0),
            "a known spelling keeps its id"
        );
        assert_eq!(p.endpoint_for("t?n=new"), None);
    }
}
