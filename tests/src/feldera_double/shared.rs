//! The state every request handler and the Rust handle share, and the control operations
//! both the `/control` routes and `FelderaDouble`'s methods call (one implementation, two
//! doors).
//!
//! Owns: locking and the pause signal. Locks are held only for short synchronous sections,
//! never across an `.await`, and never two at a time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tokio::sync::watch;

use super::answer::QueryStats;
use super::capture::Captured;
use super::checkpoint::{CheckpointCounts, Edition, FtModel, COMMUNITY_FAULT_TOLERANCE_ERROR};
use super::faults::FailMode;
use super::log::{RequestLog, RequestRecord};
use super::manager::{ManagerState, Resources};
use super::schema::Schema;
use super::state::{CompletionDelay, Pipeline};
use super::table::TableState;

/// State shared by the server tasks and the handle.
#[derive(Debug)]
pub struct Shared {
    pub pipeline_name: String,
    /// The pipeline's `id`: another after `recreate`.
    pipeline_id: Mutex<String>,
    pub schema: Arc<Schema>,
    /// Status code of an `inprogress` completion answer: 200, or 202 when configured.
    pub inprogress_202: bool,
    /// Ingress bodies are counted, never parsed or applied (`DoubleConfig::with_discard`).
    pub discard: bool,
    /// Request bodies are copied as they are read (`DoubleConfig::with_body_capture`).
    pub capture: Option<Captured>,
    state: Mutex<Pipeline>,
    log: Mutex<RequestLog>,
    queries: Mutex<QueryStats>,
    /// What a query's scan charges per row it visits (zero: nothing).
    scan_row_cost: Mutex<Duration>,
    /// Mirrors `Pipeline::paused` so ingress can wait for a resume without a lock.
    paused: watch::Sender<bool>,
    /// The pipeline manager's side: deployment status, cache, stall (`manager`).
    manager: Mutex<ManagerState>,
}

impl Shared {
    pub fn new(
        pipeline_name: String,
        schema: Arc<Schema>,
        delay: CompletionDelay,
        proxy_timeout: Duration,
        inprogress_202: bool,
    ) -> Shared {
        let (paused, _) = watch::channel(false);
        Shared {
            pipeline_name,
            pipeline_id: Mutex::new(uuid::Uuid::new_v4().to_string()),
            state: Mutex::new(Pipeline::new(schema.clone(), delay, proxy_timeout)),
            schema,
            inprogress_202,
            discard: false,
            capture: None,
            log: Mutex::new(RequestLog::new(Instant::now())),
            queries: Mutex::new(QueryStats::default()),
            scan_row_cost: Mutex::new(Duration::ZERO),
            paused,
            manager: Mutex::new(ManagerState::default()),
        }
    }

    pub fn manager(&self) -> MutexGuard<'_, ManagerState> {
        self.manager.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pipeline process dies and the manager's automaton finds it so: `Stopping`, then
    /// `Stopped`, with a `deployment_error`, until `start_pipeline`. What the process held
    /// is gone at once (its uploads answer 503, its tokens will answer 410); the next process
    /// brings back what fault tolerance kept (`Pipeline::crash_restart`). A pause stays
    /// until the start, so a body waiting on it dies with the process.
    pub fn crash(&self) {
        self.state().crash_restart(Instant::now());
        self.manager().crash(Instant::now());
    }

    /// `POST /v0/pipelines/{p}/start` after a crash: a new process, running. `Err` while
    /// the pipeline is still stopping (the manager refuses it); `Ok(false)` if it runs.
    pub fn start_pipeline(&self) -> Result<bool, Resources> {
        let started = self.manager().start(Instant::now())?;
        if started {
            self.state().paused = false;
            self.paused.send_replace(false);
        }
        Ok(started)
    }

    /// The pipeline answers none of the requests the manager forwards whole for `duration`
    /// (see `FelderaDouble::stall_answers`).
    pub fn stall_answers(&self, duration: Duration) {
        self.manager().stall(Instant::now(), duration);
    }

    /// Waits out a stall, however often it is extended.
    pub async fn wait_unstalled(&self) {
        loop {
            let until = self.manager().stalled_until(Instant::now());
            match until {
                Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
                None => return,
            }
        }
    }

    pub fn set_request_timeout(&self, timeout: Duration) {
        self.manager().request_timeout = timeout;
    }

    /// The pipeline state. A panic while holding the lock leaves consistent data (every
    /// mutation is a single step), so a poisoned lock is recovered rather than spread.
    pub fn state(&self) -> MutexGuard<'_, Pipeline> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn log(&self) -> MutexGuard<'_, RequestLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn queries(&self) -> MutexGuard<'_, QueryStats> {
        self.queries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn query_stats(&self) -> QueryStats {
        self.queries().clone()
    }

    /// Zeroes the counters; what is open now (answers, unsent bytes) stays, and is the
    /// new high-water mark.
    pub fn clear_query_stats(&self) {
        let mut stats = self.queries();
        *stats = QueryStats {
            open_answers: stats.open_answers,
            unsent_bytes: stats.unsent_bytes,
            max_unsent_bytes: stats.unsent_bytes,
            ..QueryStats::default()
        };
    }

    pub fn scan_row_cost(&self) -> Duration {
        *self
            .scan_row_cost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set_scan_row_cost(&self, cost: Duration) {
        *self
            .scan_row_cost
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = cost;
    }

    /// Waits until the pipeline runs, however long that takes.
    pub async fn wait_unpaused_for_ever(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|paused| !*paused).await;
    }

    /// Waits while paused; `false` when the proxy timeout ran out first.
    pub async fn wait_unpaused(&self) -> bool {
        let timeout = self.state().proxy_timeout;
        let mut rx = self.paused.subscribe();
        let resumed = tokio::time::timeout(timeout, rx.wait_for(|paused| !*paused)).await;
        matches!(resumed, Ok(Ok(_)))
    }

    pub fn fail_next_ingress(&self, count: usize, mode: FailMode, error_code: &str) {
        self.state()
            .faults
            .fail_next_ingress(count, mode, error_code);
    }

    /// An input table by its schema name (exactly), or by an ingress-style name (unquoted
    /// case-insensitive, `"Quoted"` exact).
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.schema
            .inputs
            .iter()
            .position(|r| r.name == name)
            .or_else(|| self.schema.input_by_path(name))
    }

    /// Plans slow reading for `table` (see `FelderaDouble::read_slowly`).
    pub fn read_slowly(
        &self,
        table: &str,
        requests: usize,
        bytes_per_sec: u64,
    ) -> Result<(), String> {
        let index = self
            .input_index(table)
            .ok_or_else(|| format!("no input table `{table}`"))?;
        if bytes_per_sec == 0 {
            return Err("bytes_per_sec must be at least 1".to_string());
        }
        self.state()
            .faults
            .read_slowly(index, requests, bytes_per_sec);
        Ok(())
    }

    pub fn fail_next_queries(&self, count: usize) {
        self.state().faults.fail_next_queries(count);
    }

    pub fn set_query_array(&self, array: bool) {
        self.state().query_array = array;
    }

    pub fn set_unavailable(&self, duration: Option<Duration>, error_code: &str) {
        self.state()
            .faults
            .set_unavailable(Instant::now(), duration, error_code);
    }

    pub fn clear_unavailable(&self) {
        self.state().faults.clear_unavailable();
    }

    pub fn pipeline_id(&self) -> String {
        self.pipeline_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The pipeline is deleted and created again under its name: another `id`, and a
    /// process with empty tables and no checkpoint (whatever its fault tolerance). Returns
    /// the new incarnation.
    pub fn recreate(&self) -> String {
        *self
            .pipeline_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = uuid::Uuid::new_v4().to_string();
        self.restart(false)
    }

    /// New incarnation; returns its UUID. Also resumes a paused pipeline.
    pub fn restart(&self, keep_state: bool) -> String {
        self.manager().evict();
        let incarnation = {
            let mut st = self.state();
            st.restart(keep_state, Instant::now());
            st.incarnation.clone()
        };
        self.paused.send_replace(false);
        incarnation
    }

    /// A pipeline process restart with the tables fault tolerance brings back (see
    /// `Pipeline::crash_restart`); returns the new incarnation. Also resumes. The manager
    /// is not involved: see `crash` and `start_pipeline` for a crash as it sees one.
    pub fn crash_restart(&self) -> String {
        self.manager().evict();
        let incarnation = {
            let mut st = self.state();
            st.crash_restart(Instant::now());
            st.incarnation.clone()
        };
        self.paused.send_replace(false);
        incarnation
    }

    /// Refused with Feldera's message by the community edition (whose pipeline would not
    /// start).
    pub fn set_fault_tolerance(&self, model: Option<FtModel>) -> Result<(), &'static str> {
        let mut st = self.state();
        if model.is_some() && st.edition == Edition::Community {
            return Err(COMMUNITY_FAULT_TOLERANCE_ERROR);
        }
        st.fault_tolerance = model;
        Ok(())
    }

    /// Applies to checkpoints that start from now on.
    pub fn set_checkpoint_delay(&self, delay: Duration) {
        self.state().checkpoints.delay = delay;
    }

    pub fn hold_checkpoints(&self, hold: bool) {
        let mut st = self.state();
        let now = Instant::now();
        st.checkpoints.set_hold(hold, now);
        st.advance(now);
    }

    pub fn fail_next_checkpoints(&self, count: usize) {
        self.state().checkpoints.fail_next(count);
    }

    pub fn checkpoint_counts(&self) -> CheckpointCounts {
        let mut st = self.state();
        st.advance(Instant::now());
        st.checkpoints.counts()
    }

    pub fn processed_records(&self) -> u64 {
        let mut st = self.state();
        st.advance(Instant::now());
        st.total_processed_records
    }

    pub fn pause(&self, proxy_timeout: Option<Duration>) {
        self.manager().evict();
        {
            let mut st = self.state();
            st.paused = true;
            if let Some(t) = proxy_timeout {
                st.proxy_timeout = t;
            }
        }
        self.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.manager().evict();
        {
            let mut st = self.state();
            let was_paused = std::mem::replace(&mut st.paused, false);
            if let Some(times) = st.apply_times.as_mut().filter(|_| was_paused) {
                times.resumed(Instant::now());
            }
        }
        self.paused.send_replace(false);
    }

    pub fn set_proxy_timeout(&self, timeout: Duration) {
        self.state().proxy_timeout = timeout;
    }

    pub fn set_completion_delay(&self, delay: CompletionDelay) {
        self.state().completion_delay = delay;
    }

    pub fn set_hold_commits(&self, hold: bool) {
        self.state().hold_commits = hold;
    }

    pub fn release_completions(&self) {
        let mut st = self.state();
        let now = Instant::now();
        st.release_completions(now);
        st.advance(now);
    }

    pub fn incarnation(&self) -> String {
        self.state().incarnation.clone()
    }

    pub fn status_json(&self) -> Json {
        let mut st = self.state();
        st.advance(Instant::now());
        st.status_json()
    }

    pub fn tables_json(&self) -> Json {
        let mut st = self.state();
        st.advance(Instant::now());
        st.tables_json()
    }

    /// Rows a query of input table `index` sees (processed state).
    pub fn row_count(&self, index: usize) -> usize {
        let mut st = self.state();
        st.advance(Instant::now());
        st.tables.get(index).map_or(0, TableState::visible_len)
    }

    /// Input table `index`'s apply stamps (see `FelderaDouble::apply_times`); empty when
    /// not recorded.
    pub fn apply_times(&self, index: usize) -> Vec<(Json, Instant)> {
        let mut st = self.state();
        st.advance(Instant::now());
        let rel = &self.schema.inputs[index];
        st.apply_times
            .as_ref()
            .map_or_else(Vec::new, |times| times.of_table(index, rel))
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log().records()
    }

    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.log().counts()
    }
}
