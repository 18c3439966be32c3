//! The pipeline the double pretends to run: one incarnation's tables, its input endpoints,
//! the queue of arrived-but-unprocessed records, completion, transactions, pause and
//! restart.
//!
//! Model: records are queued as their request's body arrives, not when the request ends
//! (Feldera's endpoints parse and queue each piece of a body as it is read). Each piece's
//! records join a FIFO queue of groups in arrival order, so concurrent requests to one
//! table interleave; a group is processed (applied to the tables, one step) once its
//! completion delay, counted from its arrival, has elapsed and the pipeline is not paused.
//! A step may therefore begin mid-body. Every endpoint counts the records queued on it; a
//! request's token carries that count when its body ended, and is complete once every
//! record up to it on its endpoint is processed. Queries and inspection see processed state
//! only.
//!
//! Transactions, as Feldera runs them: one at a time (a second start is refused while one
//! is open); starting one takes in what was queued and not processed yet; it holds every
//! record queued while it is open (their tokens are in progress, with a step: their records
//! are in the circuit); a commit only starts the commit and queues the held records as one
//! group, processed like any other (after the completion delay, in one step): the commit is
//! asynchronous. Committing with none open is refused.
//!
//! A restart drops the queue and any open transaction (what was queued but not processed
//! is lost, as in Feldera) and, if asked, the tables. A request still uploading belongs to
//! the incarnation it started in: its later records are refused (see `Upload`).
//!
//! Checkpoints (see `checkpoint`): a checkpoint starts when requested unless a transaction
//! is open or committing, else right after the commit is processed; it saves the processed
//! tables as they are when it starts. A crash restart (`crash_restart`) brings the tables
//! back as fault tolerance would: empty without it, as of the last successful checkpoint
//! with at-least-once, as processed with exactly-once (the journal replays every step).
//!
//! Owns: all of that state. Never sees HTTP; time arrives as `now`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value as Json};

use super::apply_times::ApplyTimes;
use super::checkpoint::{Checkpoints, Edition, FtModel, Snapshot};
use super::faults::Faults;
use super::phase::Phase;
use super::row::Change;
use super::schema::Schema;
use super::table::TableState;
use super::token::CompletionToken;

/// Feldera refuses more distinct HTTP input endpoints than this (429 ApiConnectionLimit).
pub const MAX_INGRESS_ENDPOINTS: usize = 100;

/// An HTTP ingress endpoint's queue is full at this many buffered records: its readers
/// stop reading until the circuit takes some (`HttpInputTransport::default_max_buffered_records`
/// in Feldera's `transport/http/input.rs`, applied by the controller's backpressure).
pub const INGRESS_QUEUE_RECORDS: u64 = 100_000;

/// How long after their arrival records are processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionDelay {
    /// Processed this long after arrival (zero: at once).
    Fixed(Duration),
    /// Processed only when released (`release_completions`).
    Never,
}

/// Records of one request that arrived together.
#[derive(Debug)]
struct Batch {
    table: usize,
    endpoint: u64,
    /// The endpoint's record count after this batch: its records are `end - records + 1
    /// ..= end`.
    end: u64,
    records: u64,
    /// Empty in a discarding double, whose records are counted only.
    changes: Vec<Change>,
}

#[derive(Debug)]
struct Group {
    /// `None`: waits for a release.
    ready_at: Option<Instant>,
    batches: Vec<Batch>,
    /// A committed transaction (its id): its records are in the circuit already.
    transaction: Option<u64>,
}

#[derive(Debug, Default, Clone)]
struct EndpointCounters {
    queued: u64,
    processed: u64,
    /// `(record count after a batch, step that processed it)`, one per processed batch;
    /// an endpoint's records are processed in order, so both columns ascend.
    steps: Vec<(u64, u64)>,
}

/// A request reading its body: where its records go. It belongs to the incarnation it
/// started in.
///
/// A restart of Feldera is a new pipeline process: the connection of a request still
/// uploading went to the old one and dies with it, so nothing it sends afterwards reaches
/// the new incarnation. The double keeps the connection but drops those records and
/// answers 503 (what the manager answers when the pipeline goes away mid-request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub table: usize,
    pub endpoint: u64,
    incarnation: String,
}

/// The pipeline restarted since the upload began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restarted;

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
    /// `None`: no fault tolerance, and (in the double) no storage.
    pub fault_tolerance: Option<FtModel>,
    /// The Feldera build played (`DoubleConfig::with_edition`).
    pub edition: Edition,
    pub checkpoints: Checkpoints,
    /// When this incarnation's process started.
    pub started_at: SystemTime,
    /// When the process whose state this one carries on started (Feldera's
    /// `initial_start_time`).
    pub initial_start: SystemTime,
    /// Records queued in this incarnation, plus those restored (`total_input_records`).
    pub total_input_records: u64,
    /// Records processed, restored with the state (`total_processed_records`).
    pub total_processed_records: u64,
    /// When each change became visible, if asked for (`DoubleConfig::with_apply_times`);
    /// kept over restarts.
    pub apply_times: Option<ApplyTimes>,
    endpoints: BTreeMap<String, u64>,
    /// Endpoint ids removed since they were created (their tokens answer 410).
    removed: BTreeSet<u64>,
    counters: Vec<EndpointCounters>,
    pending: VecDeque<Group>,
    txn: Option<(u64, Vec<Batch>)>,
    txn_started: Option<Instant>,
    next_txn_id: u64,
    /// Records an endpoint may buffer before its readers wait (`INGRESS_QUEUE_RECORDS`).
    pub queue_records: u64,
    /// Readers waiting for room in an endpoint's queue, by endpoint: their tickets.
    waiting: BTreeMap<u64, BTreeSet<u64>>,
    next_ticket: u64,
}

/// The transaction state `/stats` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    None,
    /// Open: `(id, records so far, since)`.
    Started(u64, u64, Instant),
    /// Committed, not processed yet: `(id, records)`.
    Committing(u64, u64),
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
            fault_tolerance: None,
            edition: Edition::default(),
            checkpoints: Checkpoints::default(),
            started_at: SystemTime::now(),
            initial_start: SystemTime::now(),
            total_input_records: 0,
            total_processed_records: 0,
            apply_times: None,
            endpoints: BTreeMap::new(),
            removed: BTreeSet::new(),
            counters: Vec::new(),
            pending: VecDeque::new(),
            txn: None,
            txn_started: None,
            next_txn_id: 1,
            queue_records: INGRESS_QUEUE_RECORDS,
            waiting: BTreeMap::new(),
            next_ticket: 1,
        }
    }

    /// The endpoint id for one endpoint identity (the table as the URL names it and the
    /// parser configuration, `ingress_format`), created on first use as Feldera creates
    /// HTTP input endpoints; `None` past the limit.
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

    /// Starts reading a request's body for `table` on `endpoint` (from `endpoint_for`).
    pub fn begin_upload(&self, table: usize, endpoint: u64) -> Upload {
        Upload {
            table,
            endpoint,
            incarnation: self.incarnation.clone(),
        }
    }

    /// Queues records that just arrived for `upload`: `records` counts toward its
    /// endpoint's tokens, `changes` are what they do to the table (none when discarding).
    pub fn queue(
        &mut self,
        upload: &Upload,
        changes: Vec<Change>,
        records: u64,
        now: Instant,
    ) -> Result<(), Restarted> {
        if upload.incarnation != self.incarnation {
            return Err(Restarted);
        }
        if records == 0 {
            return Ok(());
        }
        self.total_input_records += records;
        let counters = &mut self.counters[upload.endpoint as usize];
        counters.queued += records;
        let batch = Batch {
            table: upload.table,
            endpoint: upload.endpoint,
            end: counters.queued,
            records,
            changes,
        };
        match &mut self.txn {
            Some((_, held)) => held.push(batch),
            None => {
                let ready_at = self.ready_at(now);
                self.pending.push_back(Group {
                    ready_at,
                    batches: vec![batch],
                    transaction: None,
                });
                // A zero delay means processed at once, not "when someone next looks".
                self.advance(now);
            }
        }
        Ok(())
    }

    /// The token of an upload whose body ended: it covers every record queued on its
    /// endpoint so far (Feldera reads the endpoint's count once the body is parsed), its
    /// own and any that concurrent requests queued before.
    pub fn token(&self, upload: &Upload) -> Result<String, Restarted> {
        if upload.incarnation != self.incarnation {
            return Err(Restarted);
        }
        Ok(CompletionToken {
            u: self.incarnation.clone(),
            e: upload.endpoint,
            c: self.counters[upload.endpoint as usize].queued,
        }
        .encode())
    }

    /// Records queued and not processed yet (held by a transaction included).
    pub fn queued_records(&self) -> u64 {
        let held = self.txn.iter().flat_map(|(_, batches)| batches);
        let pending = self.pending.iter().flat_map(|g| &g.batches);
        held.chain(pending).map(|b| b.records).sum()
    }

    /// Records of `endpoint` in its queue: arrived and not taken by the circuit yet.
    /// Records an open transaction holds, or a committed one, are in the circuit
    /// (Feldera's steps go on inside a transaction), so they are not buffered.
    pub fn buffered(&self, endpoint: u64) -> u64 {
        self.pending
            .iter()
            .filter(|g| g.transaction.is_none())
            .flat_map(|g| &g.batches)
            .filter(|b| b.endpoint == endpoint)
            .map(|b| b.records)
            .sum()
    }

    /// Backpressure: whether a reader of `upload` may queue more records now. An endpoint
    /// whose queue is full (`queue_records`) makes its readers wait, each joining the
    /// endpoint's waiters with a ticket; once there is room the newest waiter goes first
    /// (Feldera wakes waiting readers in no defined order; the double takes the one that
    /// reorders requests of one table). `Err` once the pipeline restarted.
    pub fn admit(
        &mut self,
        upload: &Upload,
        ticket: &mut Option<u64>,
        now: Instant,
    ) -> Result<bool, Restarted> {
        if upload.incarnation != self.incarnation {
            return Err(Restarted);
        }
        self.advance(now);
        let full = self.buffered(upload.endpoint) >= self.queue_records;
        let waiters = self.waiting.entry(upload.endpoint).or_default();
        if ticket.is_none() && waiters.is_empty() && !full {
            return Ok(true);
        }
        let mine = *ticket.get_or_insert_with(|| {
            self.next_ticket += 1;
            self.next_ticket
        });
        waiters.insert(mine);
        if !full && waiters.last() == Some(&mine) {
            waiters.remove(&mine);
            *ticket = None;
            return Ok(true);
        }
        Ok(false)
    }

    fn ready_at(&self, now: Instant) -> Option<Instant> {
        match self.completion_delay {
            CompletionDelay::Fixed(d) => Some(now + d),
            CompletionDelay::Never => None,
        }
    }

    /// Processes every queued group that is due, in order, and starts and ends
    /// checkpoints on the way (a paused pipeline still ends the one being written). Call
    /// before reading state.
    pub fn advance(&mut self, now: Instant) {
        self.checkpoints.finish_due(now);
        while !self.paused {
            let Some(at) = self
                .pending
                .front()
                .and_then(|g| g.ready_at)
                .filter(|t| *t <= now)
            else {
                break;
            };
            self.process_front(at);
            // A checkpoint delayed by this commit starts right after it.
            self.start_checkpoint(at);
            self.checkpoints.finish_due(now);
        }
        self.start_checkpoint(now);
        self.checkpoints.finish_due(now);
    }

    /// Applies the first queued group, due at `due`, as one step.
    fn process_front(&mut self, due: Instant) {
        if let Some(group) = self.pending.pop_front() {
            self.step += 1;
            let stamp = self.apply_times.as_mut().map(|times| times.stamp(due));
            for batch in group.batches {
                let rel = &self.schema.inputs[batch.table];
                for change in batch.changes {
                    if let (Some(times), Some(at)) = (self.apply_times.as_mut(), stamp) {
                        times.record(batch.table, rel, &change, at);
                    }
                    self.tables[batch.table].apply(rel, change);
                }
                self.total_processed_records += batch.records;
                let c = &mut self.counters[batch.endpoint as usize];
                debug_assert_eq!(c.processed + batch.records, batch.end, "FIFO per endpoint");
                c.processed = batch.end;
                c.steps.push((batch.end, self.step));
            }
        }
    }

    /// Starts a checkpoint for the waiting requests unless a transaction holds it back.
    fn start_checkpoint(&mut self, at: Instant) {
        if self.checkpoints.waiting() && self.transaction() == TxnState::None {
            let snapshot = Snapshot {
                tables: self.tables.clone(),
                step: self.step,
                processed_records: self.total_processed_records,
            };
            self.checkpoints.start(snapshot, at);
        }
    }

    /// A `POST /checkpoint`: its sequence number (see `Checkpoints::request`).
    pub fn request_checkpoint(&mut self, now: Instant) -> u64 {
        self.advance(now);
        let refusal = self
            .edition
            .checkpoint_refusal(self.fault_tolerance.is_some());
        let seq = self.checkpoints.request(refusal);
        self.advance(now);
        seq
    }

    /// The open transaction, else the oldest commit not processed yet.
    pub fn transaction(&self) -> TxnState {
        let records = |batches: &[Batch]| batches.iter().map(|b| b.records).sum();
        if let (Some((id, held)), Some(since)) = (&self.txn, self.txn_started) {
            return TxnState::Started(*id, records(held), since);
        }
        self.pending
            .iter()
            .find_map(|g| {
                g.transaction
                    .map(|id| TxnState::Committing(id, records(&g.batches)))
            })
            .unwrap_or(TxnState::None)
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
        if token.c > c.processed {
            return Ok(Completion::InProgress {
                step: self.in_circuit(token.e, token.c).then_some(self.step + 1),
            });
        }
        let batch = c.steps.partition_point(|(end, _)| *end < token.c);
        Ok(Completion::Complete {
            step: c.steps.get(batch).map_or(0, |(_, step)| *step),
        })
    }

    /// The ingress endpoints this incarnation holds (what counts toward Feldera's limit),
    /// in the order they were created.
    pub fn endpoint_names(&self) -> Vec<String> {
        self.endpoints_in_order()
            .into_iter()
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// The ingress endpoints with their ids, oldest first.
    fn endpoints_in_order(&self) -> Vec<(u64, &String)> {
        let mut named: Vec<(u64, &String)> = self
            .endpoints
            .iter()
            .map(|(name, id)| (*id, name))
            .collect();
        named.sort();
        named
    }

    /// `/stats` `inputs`: one entry per ingress endpoint this incarnation holds, in the order
    /// they were created, with the fields Feldera's `InputEndpointStatus` serializes
    /// (`crates/adapters/src/controller/stats.rs`) and the record counts the double keeps.
    /// The real server names an endpoint `<table>.api-ingress-<hash>`; the double keeps its
    /// readable name (`endpoint_names`).
    pub fn inputs_json(&self) -> Vec<serde_json::Value> {
        self.endpoints_in_order()
            .into_iter()
            .map(|(id, name)| {
                let stream = name.split(".api-ingress").next().unwrap_or(name);
                let counters = &self.counters[id as usize];
                serde_json::json!({
                    "endpoint_name": name,
                    "config": {"stream": stream},
                    "metrics": {
                        "total_records": counters.queued,
                        "buffered_records": self.buffered(id),
                        "num_transport_errors": 0,
                        "end_of_input": false,
                    },
                    "fatal_error": null,
                    "health": null,
                    "paused": false,
                    "barrier": false,
                    "completed_frontier": null,
                })
            })
            .collect()
    }

    /// Forgets every ingress endpoint; their ids stay known as removed, never reused.
    pub fn remove_endpoints(&mut self) {
        let ids: Vec<u64> = self.endpoints.values().copied().collect();
        self.removed.extend(ids);
        self.endpoints.clear();
    }

    /// Whether record `count` of `endpoint` is held by the open transaction or queued with
    /// a committed one (in the circuit, not yet processed to completion).
    fn in_circuit(&self, endpoint: u64, count: u64) -> bool {
        let held =
            |b: &Batch| b.endpoint == endpoint && b.end - b.records < count && count <= b.end;
        self.txn
            .as_ref()
            .is_some_and(|(_, batches)| batches.iter().any(held))
            || self
                .pending
                .iter()
                .filter(|g| g.transaction.is_some())
                .any(|g| g.batches.iter().any(held))
    }

    /// Opens a transaction, which takes in what was queued and not processed yet (outside
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
            if group.transaction.is_some() {
                kept.push_back(group);
            } else {
                taken.extend(group.batches);
            }
        }
        self.pending = kept;
        self.txn = Some((id, taken));
        self.txn_started = Some(now);
        Ok(id)
    }

    /// Starts the commit: everything the open transaction holds is queued as one group,
    /// processed later like any other; `None` if none is open.
    pub fn commit_transaction(&mut self, now: Instant) -> Option<u64> {
        let (id, batches) = self.txn.take()?;
        self.txn_started = None;
        let ready_at = if self.hold_commits {
            None
        } else {
            self.ready_at(now)
        };
        self.pending.push_back(Group {
            ready_at,
            batches,
            transaction: Some(id),
        });
        self.advance(now);
        Some(id)
    }

    /// A new incarnation: old tokens answer 410, the queue and any open transaction are
    /// lost, endpoints start afresh; the tables survive only when `keep_state`. What was
    /// due by `now` was processed before the restart.
    ///
    /// Also a new pipeline process for checkpoints: numbering and status start afresh, a
    /// checkpoint in progress is lost, and the last successful one stays only with
    /// `keep_state`.
    pub fn restart(&mut self, keep_state: bool, now: Instant) {
        self.advance(now);
        self.new_process();
        self.checkpoints.new_incarnation(keep_state);
        if !keep_state {
            self.restore(None);
        }
    }

    /// A pipeline process restart, and the tables as fault tolerance brings them back:
    /// empty without it, the last successful checkpoint (or empty) with at-least-once, as
    /// processed with exactly-once (checkpoint plus journal replay). Otherwise as `restart`.
    pub fn crash_restart(&mut self, now: Instant) {
        self.advance(now);
        let ft = self.fault_tolerance;
        let restored = match ft {
            None => Some(None),
            Some(FtModel::AtLeastOnce) => Some(self.checkpoints.last().cloned()),
            Some(FtModel::ExactlyOnce) => None,
        };
        self.new_process();
        self.checkpoints.new_incarnation(ft.is_some());
        if let Some(snapshot) = restored {
            self.restore(snapshot);
        }
    }

    /// What every restart does: a new incarnation without queue, transaction, endpoints or
    /// pause.
    fn new_process(&mut self) {
        self.incarnation = uuid::Uuid::new_v4().to_string();
        self.pending.clear();
        self.txn = None;
        self.txn_started = None;
        self.endpoints.clear();
        self.removed.clear();
        self.counters.clear();
        self.waiting.clear();
        self.paused = false;
        self.phase = Phase::Running;
        self.started_at = SystemTime::now();
        self.total_input_records = self.total_processed_records;
    }

    /// Replaces the processed state with a checkpoint's (`None`: empty, a fresh start).
    fn restore(&mut self, snapshot: Option<Snapshot>) {
        let snapshot = snapshot.unwrap_or_else(|| {
            self.initial_start = self.started_at;
            Snapshot {
                tables: self.schema.inputs.iter().map(TableState::new).collect(),
                step: 0,
                processed_records: 0,
            }
        });
        self.tables = snapshot.tables;
        self.step = snapshot.step;
        self.total_processed_records = snapshot.processed_records;
        self.total_input_records = snapshot.processed_records;
    }

    /// A summary for `GET /control/status`.
    pub fn status_json(&self) -> Json {
        json!({
            "incarnation": self.incarnation,
            "step": self.step,
            "paused": self.paused,
            "pending_groups": self.pending.len(),
            "queued_records": self.queued_records(),
            "transaction_id": self.txn.as_ref().map(|(id, _)| *id),
            "completion_delay_ms": match self.completion_delay {
                CompletionDelay::Fixed(d) => json!(d.as_millis() as u64),
                CompletionDelay::Never => json!("never"),
            },
            "proxy_timeout_ms": self.proxy_timeout.as_millis() as u64,
            "query_array": self.query_array,
            "phase": self.phase.runtime_status(),
            "hold_commits": self.hold_commits,
            "fault_tolerance": self.fault_tolerance.map(FtModel::as_str),
            "checkpoints": self.checkpoints.control_json(),
            "queued_ingress_failures": self.faults.queued_ingress_failures(),
            "slow_reads": self.faults.slow_reads().iter().map(|(table, plan)| json!({
                "table": self.schema.inputs[*table].name,
                "requests": plan.requests,
                "bytes_per_sec": plan.bytes_per_sec,
            })).collect::<Vec<_>>(),
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
#[path = "state_tests.rs"]
mod tests;
