//! A faithful double of the parts of Feldera's HTTP API slotline uses (see
//! `docs/feldera.md`), served over real HTTP on 127.0.0.1, with fault injection and
//! inspection for test oracles.
//!
//! ```no_run
//! use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble, FailMode};
//! let schema = serde_json::json!({"inputs": [], "outputs": []});
//! let double = FelderaDouble::start(DoubleConfig::new("p", schema)).expect("double starts");
//! double.fail_next_ingress(1, FailMode::AfterApply);
//! println!("{}", double.base_url());
//! // dropping `double` stops the server and frees the port
//! ```
//!
//! Ingress bodies are read as they arrive, as Feldera reads them: every line is parsed once
//! its newline is in, and the records of each piece of a body join the table's queue at
//! once, in arrival order, so concurrent requests to one table interleave record by record
//! and a step may begin mid-body. The completion delay counts from a record's arrival. A
//! token, given when the body ended, covers every record queued on its endpoint until then.
//! What arrived stays queued when the client goes away mid-body (it gets no answer and no
//! token). A request still uploading when the pipeline restarts loses the rest (it went to
//! the old pipeline process) and answers 503. `read_slowly` makes the next requests to a
//! table upload slowly, so a test can end a client while its request is still being read
//! and watch those records land after later requests' records.
//!
//! Checkpoints, incarnations and fault tolerance (`docs/feldera.md`, "Checkpoints,
//! incarnations and fault tolerance"): `set_fault_tolerance` chooses Feldera's model
//! (none by default, which the double treats as a pipeline without storage);
//! `POST /checkpoint` answers a sequence number (0, 1, ... in each incarnation) and the
//! checkpoint saves the processed tables when it starts: at once, or right after the
//! commit of a transaction that is open or committing. It ends after `set_checkpoint_delay`
//! (200 ms by default; `hold_checkpoints` keeps it until released), successfully unless
//! `fail_next_checkpoints` planned a failure; without fault tolerance it fails at once, as
//! a real pipeline without storage. A request made while a checkpoint is being written
//! shares that checkpoint, as in Feldera. Two restarts: `restart(keep_state)` chooses
//! whether the tables survive; `crash_restart` brings back what fault tolerance would
//! (nothing without it, the last successful checkpoint with `at_least_once`, every
//! processed step with `exactly_once`, whose journal Feldera replays). Both make a new
//! incarnation: old tokens answer 410, `/checkpoint_status` with the old
//! `incarnation_uuid` answers 400 `IncarnationUuidMismatch`, the queue and any open
//! transaction are lost.
//!
//! Module map (one job each): `schema` (relations, name matching), `temporal`/`value`/
//! `convert` (typed values and their JSON forms), `row`/`ingress` (events and bodies),
//! `query_parse`/`query` (the ad-hoc SQL subset), `table` (keyed upsert and multiset
//! semantics), `state` (incarnation, completion queue, transactions, restart),
//! `checkpoint` (fault tolerance, checkpoint numbering, status and saved tables), `stats`
//! (the `/stats` body), `token`, `faults`, `log`, `capture` (opt-in copies of request
//! bodies), `apply_times` (opt-in stamps of when each change became visible), `api`
//! (`/v0`), `control` (`/control`), `shared`, `server` (with its optional HTTPS listener).
//! This file is the public handle only.

mod answer;
mod api;
mod apply_times;
mod capture;
mod checkpoint;
mod control;
mod convert;
mod error;
mod faults;
mod ingress;
mod ingress_format;
mod log;
mod manager;
mod phase;
mod query;
mod query_parse;
mod row;
mod scan;
mod schema;
mod server;
mod shared;
mod state;
mod stats;
mod table;
mod temporal;
mod token;
mod value;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

pub use answer::{QueryStats, TableQueries, CHANNEL_PIECES, PIECE_BYTES, PIECE_ROWS};
pub use capture::CapturedBody;
pub use checkpoint::{
    CheckpointCounts, Edition, COMMUNITY_ERROR, COMMUNITY_FAULT_TOLERANCE_ERROR,
    DEFAULT_CHECKPOINT_DELAY,
};
pub use faults::FailMode;
pub use log::RequestRecord;
pub use manager::{CACHE_TTL, REQUEST_TIMEOUT, STOPPING_FOR};
pub use phase::Phase;
pub use state::CompletionDelay;
pub use token::CompletionToken;

use checkpoint::FtModel;
use faults::{DEFAULT_INGRESS_FAILURE_CODE, DEFAULT_UNAVAILABLE_CODE};
use schema::Schema;
use server::Server;
use shared::Shared;

/// Feldera's manager gives up on a pipeline after this long.
pub const DEFAULT_PROXY_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start a double.
#[derive(Debug, Clone)]
pub struct DoubleConfig {
    /// The only pipeline name served; others get 404 UnknownPipelineName.
    pub pipeline: String,
    /// `{"inputs": [...], "outputs": [...]}` in Feldera's shape.
    pub schema: Json,
    /// 0 = any free port.
    pub port: u16,
    pub completion_delay: CompletionDelay,
    /// How long an ingress call waits on a paused pipeline before 503.
    pub proxy_timeout: Duration,
    /// Answer `inprogress` with 202 (as Feldera's OpenAPI document says) instead of 200
    /// (what its code does): clients must accept both.
    pub inprogress_202: bool,
    /// Serve HTTPS with this certificate instead of plain HTTP.
    pub tls: Option<TlsIdentity>,
    /// A benchmark sink: ingress bodies are accepted (a token, completed after the delay)
    /// but never parsed nor applied, so tables stay empty; each body's non-blank lines are
    /// counted as its records (for tokens) and as its rows in the request log. Measures a client without the double's own
    /// cost of parsing and applying every row.
    pub discard: bool,
    /// The Feldera build played: the enterprise edition (the default) or the community
    /// edition, which refuses fault tolerance and every checkpoint.
    pub edition: Edition,
    /// Keep a copy of every request body the double reads (see `with_body_capture`).
    pub capture_bodies: bool,
    /// Stamp every applied change with when it became visible (see `with_apply_times`).
    pub apply_times: bool,
    /// How long the manager waits for the pipeline's answer to a request it forwards whole
    /// (completion, stats, transactions, checkpoint status): Feldera's 10 s by default.
    pub request_timeout: Duration,
}

/// The server's identity for HTTPS: PEM text, as files hold it.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The server's certificate first, then any intermediates.
    pub cert_chain_pem: String,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: String,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_chain_pem", &self.cert_chain_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl DoubleConfig {
    /// Any free port, completion at once, Feldera's 30 s proxy timeout.
    pub fn new(pipeline: impl Into<String>, schema: Json) -> DoubleConfig {
        DoubleConfig {
            pipeline: pipeline.into(),
            schema,
            port: 0,
            completion_delay: CompletionDelay::Fixed(Duration::ZERO),
            proxy_timeout: DEFAULT_PROXY_TIMEOUT,
            inprogress_202: false,
            tls: None,
            discard: false,
            edition: Edition::Enterprise,
            capture_bodies: false,
            apply_times: false,
            request_timeout: REQUEST_TIMEOUT,
        }
    }

    /// The manager's timeout for requests it forwards whole (see `request_timeout`).
    pub fn with_request_timeout(mut self, timeout: Duration) -> DoubleConfig {
        self.request_timeout = timeout;
        self
    }

    pub fn with_port(mut self, port: u16) -> DoubleConfig {
        self.port = port;
        self
    }

    pub fn with_completion_delay(mut self, delay: CompletionDelay) -> DoubleConfig {
        self.completion_delay = delay;
        self
    }

    pub fn with_proxy_timeout(mut self, timeout: Duration) -> DoubleConfig {
        self.proxy_timeout = timeout;
        self
    }

    pub fn with_inprogress_202(mut self, yes: bool) -> DoubleConfig {
        self.inprogress_202 = yes;
        self
    }

    /// Serves the same API over HTTPS (TLS 1.2 or 1.3) presenting `cert_chain_pem` (leaf
    /// first) with `key_pem`; `base_url` then starts with `https://`. Unusable PEM makes
    /// `start` fail with `InvalidInput`.
    pub fn with_tls(
        mut self,
        cert_chain_pem: impl Into<String>,
        key_pem: impl Into<String>,
    ) -> DoubleConfig {
        self.tls = Some(TlsIdentity {
            cert_chain_pem: cert_chain_pem.into(),
            key_pem: key_pem.into(),
        });
        self
    }

    /// Plays Feldera's community or enterprise edition (see `edition`).
    pub fn with_edition(mut self, edition: Edition) -> DoubleConfig {
        self.edition = edition;
        self
    }

    /// A benchmark sink (see `discard`).
    pub fn with_discard(mut self, yes: bool) -> DoubleConfig {
        self.discard = yes;
        self
    }

    /// Keeps a copy of every byte each `/v0` handler reads from its request's body, with
    /// the request's number and path (`FelderaDouble::captured_bodies`), so that a test can
    /// assert on what was sent and not only on the tables it produced: a value the
    /// connector must never send (a column its publication leaves out) may not appear in
    /// any body, even one a later change overwrote. Reading is unchanged (the copy is taken
    /// frame by frame as the handler reads). Off by default: every body stays in memory
    /// until the double is dropped or `clear_captured_bodies`.
    pub fn with_body_capture(mut self, yes: bool) -> DoubleConfig {
        self.capture_bodies = yes;
        self
    }

    /// Stamps every change applied to an input table with the instant it became visible
    /// (`FelderaDouble::apply_times`), on this process's monotonic clock, so a benchmark
    /// running the double in-process can time a row from its source to the table. Off by
    /// default: the stamps (a key and an `Instant` per change) stay in memory until the
    /// double is dropped. Nothing applied or answered changes.
    pub fn with_apply_times(mut self, yes: bool) -> DoubleConfig {
        self.apply_times = yes;
        self
    }
}

/// One row of an inspected table with its weight (always 1 in a keyed table).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedRow {
    /// Ingress-form JSON object keyed by the schema's column names.
    pub row: Json,
    pub weight: i64,
}

/// A processed table's contents as a test oracle sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSnapshot {
    pub name: String,
    pub rows: Vec<WeightedRow>,
    /// Semantic faults, e.g. a delete of a row that was not in a keyless table.
    pub faults: Vec<String>,
}

impl TableSnapshot {
    fn from_json(j: &Json) -> TableSnapshot {
        let rows = j["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| WeightedRow {
                        row: r["row"].clone(),
                        weight: r["weight"].as_i64().unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let faults = j["faults"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        TableSnapshot {
            name: j["name"].as_str().unwrap_or_default().to_string(),
            rows,
            faults,
        }
    }
}

/// A running double. Dropping it stops the server, joins its thread and frees the port.
#[derive(Debug)]
pub struct FelderaDouble {
    shared: Arc<Shared>,
    server: Server,
    https: bool,
}

impl FelderaDouble {
    /// Parses the schema, binds 127.0.0.1 and starts serving on a background runtime.
    /// A schema error or an unusable TLS identity is `InvalidInput` with a message naming
    /// what was wrong.
    pub fn start(config: DoubleConfig) -> io::Result<FelderaDouble> {
        let schema = Schema::parse(config.schema)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tls = config.tls.as_ref().map(server::tls_config).transpose()?;
        let https = tls.is_some();
        let mut shared = Shared::new(
            config.pipeline,
            Arc::new(schema),
            config.completion_delay,
            config.proxy_timeout,
            config.inprogress_202,
        );
        shared.discard = config.discard;
        shared.set_request_timeout(config.request_timeout);
        shared.capture = config.capture_bodies.then(capture::Captured::default);
        shared.state().edition = config.edition;
        shared.state().apply_times = config
            .apply_times
            .then(|| apply_times::ApplyTimes::new(shared.schema.inputs.len()));
        let shared = Arc::new(shared);
        let server = Server::spawn(shared.clone(), config.port, tls)?;
        Ok(FelderaDouble {
            shared,
            server,
            https,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS), no trailing slash.
    pub fn base_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr())
    }

    /// TLS handshakes that failed since the start (with TLS only): e.g. clients that
    /// refused the certificate.
    pub fn tls_handshake_failures(&self) -> u64 {
        self.server.tls_handshake_failures()
    }

    pub fn pipeline_name(&self) -> &str {
        &self.shared.pipeline_name
    }

    /// UUID of the current incarnation (the `u` of its tokens).
    pub fn incarnation(&self) -> String {
        self.shared.incarnation()
    }

    /// The next `count` ingress calls answer 503 PipelineInteractionUnreachable, either
    /// without ingesting (`BeforeApply`) or after ingesting (`AfterApply`, no token given).
    pub fn fail_next_ingress(&self, count: usize, mode: FailMode) {
        self.shared
            .fail_next_ingress(count, mode, DEFAULT_INGRESS_FAILURE_CODE);
    }

    /// As `fail_next_ingress`, with another 503 error code (e.g. `PipelineUnavailable`).
    pub fn fail_next_ingress_with(&self, count: usize, mode: FailMode, error_code: &str) {
        self.shared.fail_next_ingress(count, mode, error_code);
    }

    /// The next `requests` ingress calls to input table `table` (named as for `table`) have
    /// their bodies read at about `bytes_per_sec`: the double reads a piece, queues the
    /// records it completed, then sleeps, so the upload takes long and the client's writes
    /// block on TCP backpressure. Replaces any slow reading planned for that table;
    /// `requests == 0` ends it. `InvalidInput` for an unknown table or a zero rate.
    pub fn read_slowly(&self, table: &str, requests: usize, bytes_per_sec: u64) -> io::Result<()> {
        self.shared
            .read_slowly(table, requests, bytes_per_sec)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }

    /// The next `count` successful ad-hoc queries answer 200, stream their rows, then end
    /// with Feldera's `{"error": "..."}` line (an error after streaming started).
    pub fn fail_next_queries(&self, count: usize) {
        self.shared.fail_next_queries(count);
    }

    /// Answer ad-hoc queries as one JSON array (`true`) or as NDJSON (`false`, default).
    pub fn set_query_array(&self, array: bool) {
        self.shared.set_query_array(array);
    }

    /// Ad-hoc queries so far: per relation and in total, the rows their full scans
    /// visited, and the answer bytes produced and still held by the double (see
    /// `QueryStats`; `GET /control/queries`).
    pub fn query_stats(&self) -> QueryStats {
        self.shared.query_stats()
    }

    /// Zeroes the query counters (answers still streaming stay open).
    pub fn clear_query_stats(&self) {
        self.shared.clear_query_stats();
    }

    /// Every row a query's scan visits costs `per_row` of the scan's time from now on (zero,
    /// the default, costs nothing): a slower engine for benchmarks.
    pub fn set_scan_row_cost(&self, per_row: Duration) {
        self.shared.set_scan_row_cost(per_row);
    }

    /// Every `/v0` call answers 503 PipelineUnavailable for `duration` (`None`: until
    /// `clear_unavailable`).
    pub fn set_unavailable(&self, duration: Option<Duration>) {
        self.shared
            .set_unavailable(duration, DEFAULT_UNAVAILABLE_CODE);
    }

    pub fn set_unavailable_with(&self, duration: Option<Duration>, error_code: &str) {
        self.shared.set_unavailable(duration, error_code);
    }

    pub fn clear_unavailable(&self) {
        self.shared.clear_unavailable();
    }

    /// Puts the pipeline in a lifecycle phase: while not `Running`, ingress, completion
    /// status, queries and transactions answer what Feldera's pipeline answers in that phase
    /// (503 `Initializing` or `Suspended`, 410 `Terminating`, 500 when failed); the pipeline
    /// GET still answers and shows it.
    pub fn set_phase(&self, phase: Phase) {
        self.shared.state().phase = phase;
    }

    /// The HTTP input endpoints the pipeline holds, as Feldera would have created them: one
    /// per table (as the URL names it) and parser configuration, whatever the spelling of
    /// the parameters; at most 100 until a restart. Each is named
    /// `<table>.api-ingress <format> <configuration>`, in the order they were created.
    pub fn ingress_endpoints(&self) -> Vec<String> {
        self.shared.state().endpoint_names()
    }

    /// Removes every ingress endpoint, as when Feldera drops an input connector: tokens they
    /// issued answer 410 `UnknownEndpointInCompletionToken`; the next ingress call creates a
    /// new endpoint. What they accepted is still processed.
    pub fn remove_endpoints(&self) {
        self.shared.state().remove_endpoints();
    }

    /// A new incarnation: earlier tokens answer 410 PipelineRestarted, queued but
    /// unprocessed records and an open transaction are lost, a request still uploading
    /// loses the rest of its body (and answers 503), a pause ends; processed rows survive
    /// only with `keep_state`, whatever the fault tolerance (the test decides; see
    /// `crash_restart` for what Feldera would bring back). Checkpoint numbering and status
    /// start afresh; the last successful checkpoint survives only with `keep_state`.
    /// Returns the new incarnation UUID.
    pub fn restart(&self, keep_state: bool) -> String {
        self.shared.restart(keep_state)
    }

    /// The pipeline is deleted and created again under the same name (same program and
    /// settings): another `id`, empty tables, no checkpoint. Returns the new incarnation.
    pub fn recreate(&self) -> String {
        self.shared.recreate()
    }

    /// The pipeline process dies and a new one starts, as after a crash: everything
    /// `restart` does, and the tables come back as fault tolerance brings them back:
    /// empty without it; as of the last successful checkpoint (empty if none) with
    /// `at_least_once`; as processed with `exactly_once` (Feldera replays its journal of
    /// every step). A checkpoint still being written is lost. Returns the new incarnation
    /// UUID.
    pub fn crash_restart(&self) -> String {
        self.shared.crash_restart()
    }

    /// The pipeline process dies as the pipeline manager sees it (docs/feldera.md, "Against
    /// Feldera's own server"): the deployment is `Stopping` (desired `Stopped`, a
    /// `RunnerCheckError` in `deployment_error`), `Stopped` `STOPPING_FOR` later with the
    /// error kept, and stays so; every pipeline endpoint answers 503
    /// `PipelineInteractionNotDeployed` until `start_pipeline`. The tables then come back as
    /// `crash_restart` brings them back.
    pub fn crash(&self) {
        self.shared.crash();
    }

    /// `POST /v0/pipelines/{p}/start`: a stopped pipeline starts a new process (its error
    /// dismissed), running at once. `InvalidInput` while it is still `Stopping` (the manager
    /// refuses it); nothing happens to a pipeline that runs.
    pub fn start_pipeline(&self) -> io::Result<()> {
        self.shared.start_pipeline().map(|_| ()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the pipeline is stopping: wait until it is stopped",
            )
        })
    }

    /// For `duration`, the pipeline answers none of the requests the manager forwards whole
    /// (completion status, stats, transactions, checkpoints): each waits, is carried out when
    /// the stall ends, and the manager answers 503 `PipelineInteractionUnreachable` if that
    /// is past its timeout; with a status it read from its cache it first sends the request
    /// once more (both attempts are then carried out, in order). Ingress and queries are not
    /// held.
    pub fn stall_answers(&self, duration: Duration) {
        self.shared.stall_answers(duration);
    }

    /// The manager's timeout for requests it forwards whole, from now on.
    pub fn set_request_timeout(&self, timeout: Duration) {
        self.shared.set_request_timeout(timeout);
    }

    /// Feldera's fault-tolerance model: `None` or `"none"` (the default; the double then
    /// has no storage and every checkpoint fails), `"at_least_once"`, `"exactly_once"`.
    /// Shown in `runtime_config.fault_tolerance` of the pipeline GET. `InvalidInput` for
    /// another name.
    pub fn set_fault_tolerance(&self, model: Option<&str>) -> io::Result<()> {
        let model =
            FtModel::parse(model).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // The community edition's real pipeline does not start at all (docs/feldera.md).
        self.shared
            .set_fault_tolerance(model)
            .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e))
    }

    /// How long a checkpoint takes to write from its start (default
    /// `DEFAULT_CHECKPOINT_DELAY`); applies to checkpoints that start from now on.
    pub fn set_checkpoint_delay(&self, delay: Duration) {
        self.shared.set_checkpoint_delay(delay);
    }

    /// `true`: checkpoints that start from now on stay in progress until `false` releases
    /// the one being written (it ends at once, with its planned outcome).
    pub fn hold_checkpoints(&self, hold: bool) {
        self.shared.hold_checkpoints(hold);
    }

    /// The next `count` checkpoints that start fail (`checkpoint_status.failure`; `success`
    /// and the saved state stay as they were). Every request sharing a checkpoint shares
    /// its failure.
    pub fn fail_next_checkpoints(&self, count: usize) {
        self.shared.fail_next_checkpoints(count);
    }

    /// Checkpoint requests since the start, and how many of them succeeded or failed so
    /// far (over all incarnations; requests lost in a restart are in neither).
    pub fn checkpoint_counts(&self) -> CheckpointCounts {
        self.shared.checkpoint_counts()
    }

    /// Records processed so far (`total_processed_records` of `/stats`: restored ones
    /// included), after processing whatever is due. Cheap: no table is copied.
    pub fn processed_records(&self) -> u64 {
        self.shared.processed_records()
    }

    /// Ingress calls wait until `resume` (503 PipelineInteractionUnreachable after the
    /// proxy timeout, not ingested) and nothing is processed meanwhile. A request that was
    /// already reading its body keeps queueing what arrives.
    pub fn pause(&self) {
        self.shared.pause(None);
    }

    pub fn resume(&self) {
        self.shared.resume();
    }

    pub fn set_proxy_timeout(&self, timeout: Duration) {
        self.shared.set_proxy_timeout(timeout);
    }

    /// Applies to records arriving from now on.
    pub fn set_completion_delay(&self, delay: CompletionDelay) {
        self.shared.set_completion_delay(delay);
    }

    /// Transactions committed from now on wait for `release_completions` (`false`: they
    /// follow the completion delay again).
    pub fn hold_commits(&self, hold: bool) {
        self.shared.set_hold_commits(hold);
    }

    /// Processes every record queued so far (ends a `Never` wait or a long delay).
    pub fn release_completions(&self) {
        self.shared.release_completions();
    }

    /// Every input table, in schema order, as processed so far.
    pub fn tables(&self) -> Vec<TableSnapshot> {
        match self.shared.tables_json() {
            Json::Array(tables) => tables.iter().map(TableSnapshot::from_json).collect(),
            _ => Vec::new(),
        }
    }

    /// One input table by its schema name (exactly), or by an ingress-style name
    /// (unquoted case-insensitive, `"Quoted"` exact).
    pub fn table(&self, name: &str) -> Option<TableSnapshot> {
        let index = self.shared.input_index(name)?;
        self.tables().into_iter().nth(index)
    }

    /// How many rows a query of input table `name` (named as for `table`) sees now: each
    /// row of a keyed table once, a keyless table's rows by their positive weights. Cheap
    /// at any size, where `table` converts every row.
    pub fn row_count(&self, name: &str) -> Option<usize> {
        let index = self.shared.input_index(name)?;
        Some(self.shared.row_count(index))
    }

    /// Incarnation, step, pause, queue length (`pending_groups`, `queued_records`), delay,
    /// queued failures, planned slow reads, fault tolerance and checkpoints as JSON (the
    /// body of `GET /control/status`).
    pub fn status(&self) -> Json {
        self.shared.status_json()
    }

    /// When each change to input table `name` (named as for `table`) became visible, in
    /// the order applied, over all incarnations: its key as a JSON array (the key columns'
    /// values in key order; a keyless table's whole row) and the instant. A change is
    /// stamped with its group's due time (arrival plus the completion delay, or the release
    /// that made it due), never before the group ahead of it nor before the end of a pause:
    /// when a reader could first have seen it. Inserts, updates and deletes alike; a key
    /// applied twice appears twice. Empty unless started `with_apply_times(true)` (or in a
    /// discarding double); `None` for an unknown table.
    pub fn apply_times(&self, name: &str) -> Option<Vec<(Json, Instant)>> {
        let index = self.shared.input_index(name)?;
        Some(self.shared.apply_times(index))
    }

    /// Every logged `/v0` request, in finishing order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.requests()
    }

    /// Requests per endpoint kind (`ingress`, `completion_status`, `query`, ...).
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.shared.request_counts()
    }

    pub fn clear_requests(&self) {
        self.shared.log().clear();
    }

    /// Every non-empty request body read so far, in the order their handlers finished, when
    /// the double was started `with_body_capture(true)`; empty otherwise. An ingress body is
    /// captured whole whatever the answer (a refused or failed request's too), or as far as
    /// it arrived when the client went away.
    pub fn captured_bodies(&self) -> Vec<CapturedBody> {
        self.shared
            .capture
            .as_ref()
            .map_or_else(Vec::new, capture::Captured::bodies)
    }

    /// The captured bodies (see `captured_bodies`) that hold `needle` anywhere.
    pub fn bodies_containing(&self, needle: &str) -> Vec<CapturedBody> {
        let mut bodies = self.captured_bodies();
        bodies.retain(|b| b.contains(needle.as_bytes()));
        bodies
    }

    /// Forgets the bodies captured so far (capturing goes on).
    pub fn clear_captured_bodies(&self) {
        if let Some(capture) = &self.shared.capture {
            capture.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keyed_schema() -> Json {
        json!({"inputs": [{"name": "t", "case_sensitive": false, "primary_key": ["id"],
            "materialized": false, "properties": {}, "fields": [
                {"name": "id", "case_sensitive": false,
                 "columntype": {"type": "BIGINT", "nullable": false}}]}],
            "outputs": []})
    }

    fn json_of(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Json {
        let text = response
            .expect("a 200 answer")
            .body_mut()
            .read_to_string()
            .expect("a text body");
        serde_json::from_str(&text).expect("a JSON body")
    }

    #[test]
    fn a_discarding_double_completes_requests_logs_their_rows_and_applies_nothing() {
        let double =
            FelderaDouble::start(DoubleConfig::new("p", keyed_schema()).with_discard(true))
                .expect("the double starts");
        let base = format!("{}/v0/pipelines/p", double.base_url());
        // The second event would be a ParseErrors 400 if the body were parsed.
        let body = "{\"insert\": {\"id\": 1}}\n\n{\"insert\": {\"id\": \"x\"}}\n";
        let answer = json_of(
            ureq::post(format!(
                "{base}/ingress/t?format=json&update_format=insert_delete"
            ))
            .send(body),
        );
        let token = answer["token"].as_str().expect("a token");
        let status = json_of(
            ureq::get(format!("{base}/completion_status"))
                .query("token", token)
                .call(),
        );
        assert_eq!(status["status"], "complete");
        assert_eq!(double.table("t").expect("table t").rows, Vec::new());
        let ingress: Vec<Option<u64>> = double
            .requests()
            .iter()
            .filter(|r| r.endpoint == "ingress")
            .map(|r| r.rows)
            .collect();
        assert_eq!(ingress, vec![Some(2)]);
    }
}
