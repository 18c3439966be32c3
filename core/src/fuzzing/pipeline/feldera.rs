//! The fake Feldera of the pipeline target: it holds every request the pipeline made until
//! the fuzz input answers it, with any class of answer, in any order, and keeps the input
//! tables as Feldera would.
//!
//! - An ingress request's records are queued into its table as its body arrives: the fuzz
//!   input lands them a few at a time (`upload`), interleaved with other requests, and the
//!   rest land just before a 200 (Feldera answers once it has read the whole body). Any
//!   other answer ends the upload: what landed stays, the rest never arrives. A request
//!   keeps landing records until it is answered, whichever session sent it.
//! - Tokens are Feldera's: base64 of the incarnation, the table's endpoint and a count. A
//!   token complete makes its request durable and every earlier one of the same
//!   incarnation and endpoint (in accepted mode a 200 does). A token of an earlier
//!   incarnation answers 410 `PipelineRestarted`.
//! - One transaction at a time: `start_transaction` answers 409 while one is open (a run may
//!   find one open at the start), `commit_transaction` 400 while none is; the tokens of
//!   records ingested while one is open stay `inprogress` (with a step once the answer
//!   would have been `complete`) until its commit.
//! - Ad-hoc queries (a retraction's key scans and counts) are answered from the tables as
//!   a query sees them: without the records of an open transaction, which nothing reads
//!   before its commit; either once Feldera processed everything else queued (those
//!   records are then complete, as their tokens would say) or while processing lags
//!   behind (only what completions reported).
//! - A restart (`restart`) begins a new incarnation: requests out fail, the transaction is
//!   gone, and the tables either keep everything or fall back to the durable records alone
//!   (only what no completion vouched for is lost, as the promise assumes). With the
//!   snapshot phase and no fault tolerance the second kind is what Feldera really does: the
//!   tables come back empty, and the pipeline copies every table again.
//! - Before the run, the tables may hold rows (`seed`): an earlier copy's or stale ones,
//!   processed and, with fault tolerance, held by the last checkpoint.
//! - With fault tolerance (`at_least_once` in the pipeline's answer) Feldera checkpoints:
//!   `POST /checkpoint` answered 200 gives the next sequence number of the incarnation
//!   (from 0) and starts a checkpoint holding the records processed then (those a
//!   completion vouched for), unless one is being written already: Feldera writes one at a
//!   time, and a request arriving meanwhile gets that one's result. Feldera may also start
//!   one on its own (`own_checkpoint`). The fuzz input decides when the one being written
//!   ends, through the answers to `checkpoint_status`: success (not while a transaction is
//!   open), still in progress, or a failure of its sequence numbers. A restart then
//!   resumes from the last successful checkpoint (empty without one), or after a suspend
//!   that checkpointed everything; what is durable is what a successful checkpoint held
//!   (`holds`).
//! - Bodies outlive their request (docs/feldera.md, "Bodies that outlive their request").
//!   When the process that sent a request dies (`sender_died`), Feldera keeps every request
//!   it holds: a body keeps landing records (`upload`, or all at once when the fuzz input
//!   answers it), a transaction request still opens or commits, but nothing is answered to
//!   anyone (an orphan). The fuzz input may pause the pipeline (`pause`): a paused endpoint
//!   reads nothing, so an ingress request Feldera would answer 200 gets the manager's 503
//!   after its timeout instead and its body stays, unread, an orphan too; completions stay
//!   in progress (nothing is processed). The resume reads every held body at once, in an
//!   order the input picks (the live process's among them). While the pipeline runs an
//!   endpoint reads a body at once: the fake may still land an orphan's records late, but
//!   they are queued (`buffered_records`, `buffered_bytes` in `/stats`) and so reach the
//!   table before any record of a later request to the same endpoint (`land_held_before`).
//! - `GET .../stats` shows each table's ingress endpoint as Feldera does: created by the
//!   first request to the table in this incarnation (a restarted pipeline has none), with
//!   the records and bytes landed through it (`total_records`, `total_bytes`) and the
//!   records of bodies it is reading, not yet landed, as buffered; the pipeline's state is
//!   `Paused` while paused (an endpoint holding an unread body then does not run).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use super::workload::Key;
use crate::feldera::HttpRequest;
use crate::io::HttpId;

pub(super) const BASE_URL: &str = "http://feldera:8080";
const PIPELINE_URL: &str = "http://feldera:8080/v0/pipelines/p";

/// The pipeline GET answer of a compiled, running pipeline with both tables.
const PIPELINE: &str = r#"{"name":"p","program_status":"Success","deployment_status":"Running","program_info":{"schema":{"inputs":[
{"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},"fields":[
 {"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
 {"name":"name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]},
{"name":"items","case_sensitive":false,"primary_key":["sku"],"materialized":false,"properties":{},"fields":[
 {"name":"sku","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":false,"precision":-1}},
 {"name":"qty","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
],"outputs":[]}}}"#;

/// Status 0 stands for a transport failure (no answer).
pub(super) const PIPELINE_ANSWERS: [(u16, &str); 6] = [
    (200, PIPELINE),
    (
        200,
        r#"{"name":"p","program_status":"Pending","program_info":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        404,
        r#"{"message":"unknown pipeline","error_code":"UnknownPipelineName","details":{}}"#,
    ),
    (200, "<html>proxy</html>"),
    (0, "connection refused"),
];

/// What `PIPELINE` says with fault tolerance (inserted after the name).
const FAULT_TOLERANCE: &str = r#""runtime_config":{"fault_tolerance":{"model":"at_least_once","checkpoint_interval_secs":60}},"#;

/// Index 0 answers with the next sequence number (and starts a checkpoint, or joins the
/// one being written).
pub(super) const CHECKPOINT_ANSWERS: [(u16, &str); 7] = [
    (200, ""),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (200, r#"{"checkpoint_sequence_number":"soon"}"#),
    (0, "connection reset by peer"),
    (
        501,
        r#"{"message":"checkpoints are an enterprise feature","error_code":"EnterpriseFeature","details":{}}"#,
    ),
    (502, ""),
];

/// Index 0 ends the checkpoint being written with a success, 1 leaves it in progress, 2
/// ends it with a failure; each then answers Feldera's latest success and failure (or 400
/// `IncarnationUuidMismatch` when the question names an earlier incarnation).
pub(super) const CHECKPOINT_STATUS_ANSWERS: [(u16, &str); 8] = [
    (200, ""),
    (200, ""),
    (200, ""),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "timed out"),
    (200, r#"{"success":"yes"}"#),
    (502, ""),
];

const INCARNATION_MISMATCH: (u16, &str) = (
    400,
    r#"{"message":"Incarnation UUID mismatch","error_code":"IncarnationUuidMismatch","details":null}"#,
);

/// Index 0 and 1 answer with a fresh token (200 and 202).
pub(super) const INGRESS_ANSWERS: [(u16, &str); 12] = [
    (200, ""),
    (202, ""),
    (
        400,
        r#"{"message":"Errors parsing input data (1 errors)","error_code":"ParseErrors","details":{"num_errors":1,"errors":[{"description":"bad value","event_number":1}]}}"#,
    ),
    (
        404,
        r#"{"message":"unknown input table","error_code":"UnknownInputTable","details":{}}"#,
    ),
    (
        410,
        r#"{"message":"pipeline is terminating","error_code":"Terminating","details":{}}"#,
    ),
    (
        429,
        r#"{"message":"too many requests","error_code":"TooManyRequests","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (200, "not json"),
    (0, "connection reset by peer"),
    (200, r#"{"token":""}"#),
    (408, ""),
];

/// Index 0 answers with a transaction id.
pub(super) const START_ANSWERS: [(u16, &str); 6] = [
    (200, r#"{"transaction_id":1}"#),
    (
        409,
        r#"{"message":"Cannot perform this operation while there is a transaction in progress","error_code":"TransactionInProgress","details":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (200, r#""not an object""#),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "connection reset by peer"),
];

pub(super) const COMMIT_ANSWERS: [(u16, &str); 5] = [
    (200, r#""Transaction commit initiated""#),
    (
        400,
        r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "timed out"),
];

pub(super) const COMPLETION_ANSWERS: [(u16, &str); 9] = [
    (200, r#"{"status":"complete","step":1}"#),
    (200, r#"{"status":"inprogress","step":null}"#),
    (
        410,
        r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (
        404,
        r#"{"message":"unknown pipeline","error_code":"UnknownPipelineName","details":{}}"#,
    ),
    (200, r#"{"status":"done"}"#),
    (0, "timed out"),
    (502, ""),
];

/// Index 0 answers with the rows once Feldera has processed everything queued, 1 with the
/// rows as the completions answered so far left them (processing lags), 6 with an error
/// line after the rows (an interrupted answer).
pub(super) const QUERY_ANSWERS: [(u16, &str); 8] = [
    (200, ""),
    (200, ""),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "connection reset by peer"),
    (200, "<html>proxy</html>"),
    (200, r#"{"error":"query interrupted"}"#),
    (502, ""),
];

/// What a manager answers an ingress request whose body a paused pipeline never read (its
/// proxy timeout).
const UNREAD: (u16, &str) = INGRESS_ANSWERS[7];

/// The tables the fake holds, with their key column (the same as `PIPELINE`'s schema).
const TABLES: [(&str, &str); 2] = [("users", "id"), ("items", "sku")];

const RESTARTED: (u16, &str) = (
    410,
    r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
);
/// A token of an open transaction whose records are in the circuit: Feldera knows the step,
/// and completes it only once the transaction's commit finished.
const IN_CIRCUIT: (u16, &str) = (200, r#"{"status":"inprogress","step":3}"#);

/// An ingress request being read.
#[derive(Debug)]
struct Upload {
    table: &'static str,
    /// Numbers requests in arrival order.
    request: u32,
    /// Records of the body not yet queued.
    pending: VecDeque<String>,
}

#[derive(Debug)]
enum Waiting {
    Pipeline,
    Ingress(Upload),
    Completion(String),
    /// An ad-hoc query: its SQL.
    Query(String),
    StartTransaction,
    CommitTransaction,
    Checkpoint,
    /// The incarnation the question names, if any.
    CheckpointStatus(Option<String>),
    Other,
}

/// One record of a table, with the request that queued it.
type Record = (u32, &'static str, String);

/// A checkpoint being written: the records it holds, and the sequence numbers whose
/// result it is.
#[derive(Debug)]
struct Writing {
    held: Vec<Record>,
    seqs: Vec<u64>,
}

/// Feldera's checkpoints (with fault tolerance; see the module docs).
#[derive(Debug, Default)]
struct Checkpoints {
    /// The next sequence number of this incarnation.
    next_seq: u64,
    writing: Option<Writing>,
    /// The latest successful and failed sequence numbers of this incarnation.
    success: Option<u64>,
    failure: Option<u64>,
    /// What the last successful checkpoint held (of any incarnation): a restart resumes
    /// from it.
    saved: Vec<Record>,
    /// Every record a successful checkpoint held, each once.
    saved_lines: HashSet<String>,
    /// Successful checkpoints, Feldera's own among them.
    succeeded: u32,
    /// Requests that got the result of a checkpoint started before them.
    joined: u32,
}

/// A token Feldera gave out.
#[derive(Debug, Clone)]
struct Issued {
    incarnation: u32,
    endpoint: usize,
    count: u32,
    request: u32,
}

/// An answer for the harness to feed.
#[derive(Debug)]
pub(super) enum Answer {
    Done { status: u16, body: String },
    Failed(String),
}

#[derive(Debug, Default)]
pub(super) struct FakeFeldera {
    /// Requests not answered yet, with whether a restart cut them off.
    waiting: Vec<(HttpId, Waiting, bool)>,
    /// `GET .../stats` questions, answered at once (`take_stats`).
    stats_questions: std::collections::VecDeque<HttpId>,
    accepted_mode: bool,
    incarnation: u32,
    /// The endpoint of each table this incarnation has seen: its index.
    endpoints: Vec<&'static str>,
    count: u32,
    requests: u32,
    tokens: BTreeMap<String, Issued>,
    /// Requests whose records are durable.
    durable: BTreeSet<u32>,
    /// Every record queued, with its request and table, in the order it landed.
    log: Vec<(u32, &'static str, String)>,
    /// The records of durable requests, each once.
    durable_lines: HashSet<String>,
    /// The tables as they are now.
    pub(super) tables: BTreeMap<Key, Value>,
    /// Rows changed since the harness last looked (`take_touched`).
    touched: BTreeSet<Key>,
    /// A transaction is open.
    transaction: bool,
    /// Requests ingested while the open transaction was: their tokens wait for its commit.
    in_transaction: BTreeSet<u32>,
    pub(super) durable_batches: u32,
    /// `commit_transaction` calls answered 200.
    pub(super) commits: u32,
    pub(super) restarts: u32,
    /// Records landed while their request was not the newest on the table.
    pub(super) interleaved: u32,
    /// Ad-hoc queries answered with their rows.
    pub(super) queries: u32,
    /// The pipeline has fault tolerance: checkpoints are durability (see the module docs).
    fault_tolerance: bool,
    checkpoints: Checkpoints,
    /// Restarts that resumed from a checkpoint that held something.
    pub(super) resumed: u32,
    /// A restart that keeps only what a completion vouched for empties the tables instead
    /// (the snapshot phase without fault tolerance).
    empties_on_restart: bool,
    /// The pipeline is paused: its endpoints read nothing (see the module docs).
    paused: bool,
    /// Waiting requests whose answer goes nowhere: their sender died, or (an ingress body
    /// held while paused) it got the manager's 503 already.
    orphans: BTreeSet<HttpId>,
    /// The ingress endpoint of each table this incarnation: what landed through it.
    ingress: BTreeMap<&'static str, Endpoint>,
    /// Times the pipeline was paused, and bodies of orphans that landed records.
    pub(super) pauses: u32,
    pub(super) orphans_landed: u32,
    /// A broken fake for the harness's own tests: `/stats` says `Running` while paused, so
    /// a start cannot see a body held unread.
    #[cfg(test)]
    pub(super) hide_pause: bool,
}

/// One table's HTTP ingress endpoint: records and bytes landed through it.
#[derive(Debug, Default, Clone, Copy)]
struct Endpoint {
    records: u64,
    bytes: u64,
}

/// Which answer a class byte picks: half of all values give the good answer, an eighth
/// the second one (in progress, 202, not compiled), the rest any.
fn index(class: u8, len: usize) -> usize {
    match class {
        0..=0x7f => 0,
        0x80..=0x9f => 1,
        _ => usize::from(class) % len,
    }
}

fn table_of(segment: &str) -> Option<&'static str> {
    TABLES.iter().find(|(t, _)| *t == segment).map(|(t, _)| *t)
}

impl FakeFeldera {
    /// `fault_tolerance`: checkpoints are what survives a restart (only when acknowledgements
    /// wait for completion: in accepted mode a restart keeps what was accepted, as before).
    pub(super) fn new(
        accepted_mode: bool,
        transaction_open: bool,
        fault_tolerance: bool,
    ) -> FakeFeldera {
        FakeFeldera {
            accepted_mode,
            transaction: transaction_open,
            fault_tolerance,
            ..FakeFeldera::default()
        }
    }

    /// Rows the tables hold before the run, each an NDJSON record: processed (request 0,
    /// durable) and, with fault tolerance, held by a checkpoint. With `empties_on_restart`
    /// a lossy restart empties the tables.
    pub(super) fn seed(&mut self, records: &[(&'static str, String)], empties_on_restart: bool) {
        self.empties_on_restart = empties_on_restart;
        for (table, record) in records {
            self.land(0, table, record.clone());
        }
        // They predate a transaction left open before the run.
        self.in_transaction.remove(&0);
        self.make_durable(0);
        self.checkpoints.saved = self.log.clone();
        self.checkpoints
            .saved_lines
            .extend(self.log.iter().map(|(_, _, record)| record.clone()));
        self.touched.clear();
    }

    /// Requests made so far: later ones are numbered above this.
    pub(super) fn requests_made(&self) -> u32 {
        self.requests
    }

    /// The incarnation as `GET .../stats` names it.
    pub(super) fn incarnation_name(&self) -> String {
        format!("incarnation-{}", self.incarnation)
    }

    /// Whether a restart resumes from the last checkpoint (fault tolerance, as the pipeline
    /// answer says): the tables are not emptied.
    pub(super) fn keeps_state(&self) -> bool {
        self.fault_tolerance
    }

    /// Whether what is durable is what a checkpoint holds (fault tolerance, completed mode).
    pub(super) fn checkpointing(&self) -> bool {
        self.fault_tolerance && !self.accepted_mode
    }

    /// The tables as a restart would bring them back: with checkpoints, as the last
    /// successful one holds them; otherwise as they are.
    pub(super) fn durable_tables(&self) -> BTreeMap<Key, Value> {
        if !self.checkpointing() {
            return self.tables.clone();
        }
        let mut tables = BTreeMap::new();
        for (_, table, record) in &self.checkpoints.saved {
            apply(&mut tables, table, record);
        }
        tables
    }

    /// The rows inserted by durable records of requests made after `floor` (with
    /// checkpoints: records the last successful checkpoint holds).
    pub(super) fn durable_inserts_since(&self, floor: u32) -> Vec<(Key, Value)> {
        let records: Vec<&Record> = match self.checkpointing() {
            true => self.checkpoints.saved.iter().collect(),
            false => self
                .log
                .iter()
                .filter(|(request, _, _)| self.durable.contains(request))
                .collect(),
        };
        records
            .into_iter()
            .filter(|(request, _, _)| *request > floor)
            .filter_map(|(_, table, record)| {
                let mut one = BTreeMap::new();
                apply(&mut one, table, record)?;
                one.into_iter().next()
            })
            .collect()
    }

    /// Successful checkpoints, and requests that joined one started before them.
    pub(super) fn checkpoint_counts(&self) -> (u32, u32) {
        (self.checkpoints.succeeded, self.checkpoints.joined)
    }

    /// A request arrives. Asking for the completion of a token Feldera never gave out, or
    /// posting to a table it does not have, is a pipeline bug, reported as an error.
    pub(super) fn request(&mut self, id: HttpId, request: HttpRequest) -> Result<(), String> {
        let path = request.url.strip_prefix(PIPELINE_URL).unwrap_or("?");
        if path == "/stats" {
            self.stats_questions.push_back(id);
            return Ok(());
        }
        let waiting = if path.is_empty() {
            Waiting::Pipeline
        } else if let Some(rest) = path.strip_prefix("/ingress/") {
            let segment = rest.split('?').next().unwrap_or_default();
            let Some(table) = table_of(segment) else {
                return Err(format!(
                    "{id} posts to table {segment:?}, which Feldera does not have"
                ));
            };
            self.requests += 1;
            // Feldera creates the endpoint before it reads the first body.
            self.ingress.entry(table).or_default();
            let text = String::from_utf8_lossy(&request.body);
            Waiting::Ingress(Upload {
                table,
                request: self.requests,
                pending: text.lines().map(str::to_owned).collect(),
            })
        } else if let Some(rest) = path.strip_prefix("/query?sql=") {
            let encoded = rest.split('&').next().unwrap_or_default();
            let sql = percent_encoding::percent_decode_str(encoded)
                .decode_utf8_lossy()
                .into_owned();
            Waiting::Query(sql)
        } else if path == "/start_transaction" {
            Waiting::StartTransaction
        } else if path == "/commit_transaction" {
            Waiting::CommitTransaction
        } else if path == "/checkpoint" {
            Waiting::Checkpoint
        } else if let Some(rest) = path.strip_prefix("/checkpoint_status") {
            let asked = rest.strip_prefix("?incarnation_uuid=").map(|u| {
                percent_encoding::percent_decode_str(u)
                    .decode_utf8_lossy()
                    .into_owned()
            });
            Waiting::CheckpointStatus(asked)
        } else if let Some(token) = path.strip_prefix("/completion_status?token=") {
            if !self.tokens.contains_key(token) {
                return Err(format!(
                    "{id} asks for the completion of token {token:?}, which Feldera never gave out"
                ));
            }
            Waiting::Completion(token.to_owned())
        } else {
            Waiting::Other
        };
        self.waiting.push((id, waiting, false));
        Ok(())
    }

    /// Whether any request waits for an answer.
    pub(super) fn busy(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The answer to the oldest `GET .../stats` not answered yet: the incarnation, the
    /// pipeline's state (`Paused` while paused), and each table's ingress endpoint (see the
    /// module docs): what landed through it, and, while the pipeline runs, the records of
    /// the bodies it is reading as buffered (a paused endpoint reads nothing, so nothing is
    /// buffered: its body waits unread). Stats questions are answered at once, like the
    /// server's own reads (a restart still shows as a new incarnation in the next answer).
    pub(super) fn take_stats(&mut self) -> Option<(HttpId, String)> {
        let id = self.stats_questions.pop_front()?;
        #[cfg(test)]
        let paused = self.paused && !self.hide_pause;
        #[cfg(not(test))]
        let paused = self.paused;
        let inputs: Vec<String> = self
            .ingress
            .iter()
            .map(|(table, endpoint)| {
                let (buffered_records, buffered_bytes) = match paused {
                    true => (0, 0),
                    false => self.unread(table),
                };
                format!(
                    "{{\"endpoint_name\":\"{table}.api-ingress-0000000000000000\",\"paused\":false,\
                     \"metrics\":{{\"total_records\":{},\"total_bytes\":{},\
                     \"buffered_records\":{buffered_records},\"buffered_bytes\":{buffered_bytes}}}}}",
                    endpoint.records, endpoint.bytes
                )
            })
            .collect();
        let state = if paused { "Paused" } else { "Running" };
        let body = format!(
            "{{\"global_metrics\":{{\"state\":\"{state}\",\"incarnation_uuid\":\"incarnation-{}\"}},\"inputs\":[{}]}}",
            self.incarnation,
            inputs.join(",")
        );
        Some((id, body))
    }

    /// The records (and their bytes, a newline each) of `table`'s bodies not landed yet.
    fn unread(&self, table: &str) -> (u64, u64) {
        let mut sum = (0u64, 0u64);
        for (_, waiting, dead) in &self.waiting {
            if let (Waiting::Ingress(upload), false) = (waiting, dead) {
                if upload.table == table {
                    sum.0 += upload.pending.len() as u64;
                    sum.1 += upload
                        .pending
                        .iter()
                        .map(|r| r.len() as u64 + 1)
                        .sum::<u64>();
                }
            }
        }
        sum
    }

    /// The stats body as the next `take_stats` would give it (for tests).
    #[cfg(test)]
    pub(super) fn stats_now(&mut self) -> String {
        self.stats_questions.push_front(HttpId(u64::MAX));
        self.take_stats().map(|(_, body)| body).unwrap_or_default()
    }

    /// The process that sent every waiting request died (see the module docs): Feldera keeps
    /// them, and answers none of them to anyone; its `/stats` questions go unanswered.
    pub(super) fn sender_died(&mut self) {
        self.orphans
            .extend(self.waiting.iter().map(|(id, _, _)| *id));
        self.stats_questions.clear();
    }

    /// The pipeline pauses, or (when paused) resumes: every body held is read at once, each
    /// request's records in a row, in arrival order rotated by `arg >> 1`, reversed with
    /// bit 0 (see the module docs).
    pub(super) fn pause(&mut self, arg: u8) {
        if !self.paused {
            self.paused = true;
            self.pauses += 1;
            return;
        }
        self.paused = false;
        let mut order: Vec<usize> = (0..self.waiting.len())
            .filter(|i| matches!(&self.waiting[*i], (_, Waiting::Ingress(_), false)))
            .collect();
        if arg & 1 != 0 {
            order.reverse();
        }
        if !order.is_empty() {
            let by = usize::from(arg >> 1) % order.len();
            order.rotate_left(by);
        }
        for at in order {
            self.land_pending(at);
        }
    }

    /// The world turns healthy: a paused pipeline resumes.
    pub(super) fn heal(&mut self) {
        if self.paused {
            self.pause(0);
        }
    }

    /// Every record of the waiting ingress request at `at` not landed yet lands.
    fn land_pending(&mut self, at: usize) {
        let (id, records) = match &mut self.waiting[at] {
            (id, Waiting::Ingress(upload), _) => {
                let records: Vec<String> = upload.pending.drain(..).collect();
                (*id, (upload.request, upload.table, records))
            }
            _ => return,
        };
        let (request, table, records) = records;
        if !records.is_empty() && self.orphans.contains(&id) {
            self.orphans_landed += 1;
        }
        for record in records {
            self.land(request, table, record);
        }
    }

    /// Before a record of `request` lands in `table` of a running pipeline, every orphan's
    /// body to the same table that arrived before it lands whole: the endpoint read those at
    /// once and queued their records ahead (they were buffered, `unread`).
    fn land_held_before(&mut self, table: &'static str, request: u32) {
        if self.paused {
            return;
        }
        let earlier: Vec<usize> = (0..self.waiting.len())
            .filter(|i| match &self.waiting[*i] {
                (id, Waiting::Ingress(upload), false) => {
                    self.orphans.contains(id)
                        && upload.table == table
                        && upload.request < request
                        && !upload.pending.is_empty()
                }
                _ => false,
            })
            .collect();
        for at in earlier {
            self.land_pending(at);
        }
    }

    /// Up to `n` more records of one uploading request (`pick` modulo how many upload) land
    /// in its table.
    pub(super) fn upload(&mut self, pick: u8, n: u8) {
        if self.paused {
            return;
        }
        let uploading: Vec<usize> = (0..self.waiting.len())
            .filter(|i| match &self.waiting[*i] {
                (_, Waiting::Ingress(upload), false) => !upload.pending.is_empty(),
                _ => false,
            })
            .collect();
        if uploading.is_empty() {
            return;
        }
        let at = uploading[usize::from(pick) % uploading.len()];
        let newest = uploading.iter().rev().find(|i| {
            matches!(&self.waiting[**i].1, Waiting::Ingress(u) if Some(u.table) == self.table_at(at))
        });
        if newest != Some(&at) {
            self.interleaved += 1;
        }
        let mut records = Vec::new();
        if let (id, Waiting::Ingress(upload), _) = &self.waiting[at] {
            if self.orphans.contains(id) {
                self.orphans_landed += 1;
            }
            let (table, request) = (upload.table, upload.request);
            self.land_held_before(table, request);
        }
        if let (_, Waiting::Ingress(upload), _) = &mut self.waiting[at] {
            for _ in 0..n {
                let Some(record) = upload.pending.pop_front() else {
                    break;
                };
                records.push((upload.request, upload.table, record));
            }
        }
        for (request, table, record) in records {
            self.land(request, table, record);
        }
    }

    fn table_at(&self, at: usize) -> Option<&'static str> {
        match &self.waiting.get(at)?.1 {
            Waiting::Ingress(upload) => Some(upload.table),
            _ => None,
        }
    }

    /// One record reaches its table: an insert replaces the row of its key, a delete
    /// removes it.
    pub(super) fn land(&mut self, request: u32, table: &'static str, record: String) {
        if self.transaction {
            self.in_transaction.insert(request);
        }
        if let Some(key) = apply(&mut self.tables, table, &record) {
            self.touched.insert(key);
        }
        if let Some(endpoint) = self.ingress.get_mut(table) {
            endpoint.records += 1;
            endpoint.bytes += record.len() as u64 + 1;
        }
        if self.durable.contains(&request) {
            self.durable_lines.insert(record.clone());
        }
        self.log.push((request, table, record));
    }

    /// Feldera restarts (see the module docs); `lossy`: what no completion vouched for is
    /// gone.
    pub(super) fn restart(&mut self, lossy: bool) {
        if self.fault_tolerance && !self.accepted_mode {
            return self.restart_from_checkpoint(lossy);
        }
        self.restarts += 1;
        self.touched.extend(self.tables.keys().cloned());
        self.incarnation += 1;
        self.endpoints.clear();
        // A restarted pipeline runs, and has no endpoint until the next request.
        self.ingress.clear();
        self.paused = false;
        self.transaction = false;
        self.in_transaction.clear();
        for (_, waiting, dead) in &mut self.waiting {
            *dead = true;
            if let Waiting::Ingress(upload) = waiting {
                upload.pending.clear();
            }
        }
        if lossy && self.empties_on_restart {
            self.log.clear();
            self.tables.clear();
        } else if lossy {
            let durable = &self.durable;
            self.log.retain(|(request, _, _)| durable.contains(request));
            self.tables.clear();
            for (_, table, record) in &self.log {
                apply(&mut self.tables, table, record);
            }
            self.touched.extend(self.tables.keys().cloned());
        } else {
            let landed: Vec<u32> = self.log.iter().map(|(request, _, _)| *request).collect();
            for request in landed {
                self.make_durable(request);
            }
        }
    }

    /// A restart with fault tolerance: from the last successful checkpoint, or (not
    /// `from_checkpoint`) after a suspend that wrote a checkpoint of everything that landed.
    fn restart_from_checkpoint(&mut self, from_checkpoint: bool) {
        if !from_checkpoint {
            // Suspending waits for the transaction's commit and for every record to be
            // processed: what landed is then all in the last checkpoint.
            let held = self.log.clone();
            self.checkpoints.writing = Some(Writing {
                held,
                seqs: Vec::new(),
            });
            self.end_checkpoint(true);
        }
        self.restarts += 1;
        self.touched.extend(self.tables.keys().cloned());
        self.incarnation += 1;
        self.endpoints.clear();
        // A restarted pipeline runs, and has no endpoint until the next request.
        self.ingress.clear();
        self.paused = false;
        self.transaction = false;
        self.in_transaction.clear();
        for (_, waiting, dead) in &mut self.waiting {
            *dead = true;
            if let Waiting::Ingress(upload) = waiting {
                upload.pending.clear();
            }
        }
        let checkpoints = &mut self.checkpoints;
        checkpoints.next_seq = 0;
        checkpoints.writing = None;
        checkpoints.success = None;
        checkpoints.failure = None;
        if !checkpoints.saved.is_empty() {
            self.resumed += 1;
        }
        self.log = checkpoints.saved.clone();
        self.tables.clear();
        for (_, table, record) in &self.log {
            apply(&mut self.tables, table, record);
        }
        // What the checkpoint holds was processed: a query sees it.
        let restored: Vec<u32> = self.log.iter().map(|(request, _, _)| *request).collect();
        for request in restored {
            self.make_durable(request);
        }
        self.touched.extend(self.tables.keys().cloned());
    }

    /// Feldera starts a checkpoint on its own, unless one is being written (with fault
    /// tolerance only).
    /// Returns whether Feldera has fault tolerance.
    pub(super) fn own_checkpoint(&mut self) -> bool {
        if self.fault_tolerance && self.checkpoints.writing.is_none() {
            self.start_checkpoint(Vec::new());
        }
        self.fault_tolerance
    }

    /// A checkpoint starts: it holds every record processed now (those of requests a
    /// completion vouched for, outside an open transaction).
    fn start_checkpoint(&mut self, seqs: Vec<u64>) {
        let held = self
            .log
            .iter()
            .filter(|(request, _, _)| {
                self.durable.contains(request) && !self.in_transaction.contains(request)
            })
            .cloned()
            .collect();
        self.checkpoints.writing = Some(Writing { held, seqs });
    }

    /// The checkpoint being written ends: a success holds its records from now on.
    fn end_checkpoint(&mut self, success: bool) {
        let Some(writing) = self.checkpoints.writing.take() else {
            return;
        };
        let checkpoints = &mut self.checkpoints;
        let last = writing.seqs.iter().max().copied();
        if !success {
            checkpoints.failure = last.or(checkpoints.failure);
            return;
        }
        checkpoints.success = last.or(checkpoints.success);
        checkpoints.succeeded += 1;
        checkpoints
            .saved_lines
            .extend(writing.held.iter().map(|(_, _, record)| record.clone()));
        checkpoints.saved = writing.held;
    }

    /// `POST /checkpoint` answered 200: the next sequence number, which joins the
    /// checkpoint being written or starts one.
    fn checkpoint_requested(&mut self) -> String {
        let seq = self.checkpoints.next_seq;
        self.checkpoints.next_seq += 1;
        match &mut self.checkpoints.writing {
            Some(writing) => {
                writing.seqs.push(seq);
                self.checkpoints.joined += 1;
            }
            None => self.start_checkpoint(vec![seq]),
        }
        format!(
            "{{\"checkpoint_sequence_number\":{seq},\"incarnation_uuid\":\"incarnation-{}\"}}",
            self.incarnation
        )
    }

    /// `GET /checkpoint_status` answered with class index `i` (see
    /// `CHECKPOINT_STATUS_ANSWERS`).
    fn checkpoint_status(&mut self, asked: Option<&str>, i: usize) -> (u16, String) {
        if i > 2 {
            let (status, body) = CHECKPOINT_STATUS_ANSWERS[i];
            return (status, body.to_owned());
        }
        if asked.is_some_and(|u| u != format!("incarnation-{}", self.incarnation)) {
            return (INCARNATION_MISMATCH.0, INCARNATION_MISMATCH.1.to_owned());
        }
        match i {
            // Feldera delays a checkpoint while a transaction is open.
            0 if !self.transaction => self.end_checkpoint(true),
            2 => self.end_checkpoint(false),
            _ => {}
        }
        let checkpoints = &self.checkpoints;
        let success = checkpoints
            .success
            .map_or_else(|| "null".to_owned(), |n| n.to_string());
        let failure = checkpoints.failure.map_or_else(
            || "null".to_owned(),
            |n| {
                format!(
                    "{{\"sequence_number\":{n},\"error\":\"No space left on device\",\"failed_at\":\"2026-12-02T00:00:00Z\"}}"
                )
            },
        );
        (
            200,
            format!("{{\"success\":{success},\"failure\":{failure}}}"),
        )
    }

    fn make_durable(&mut self, request: u32) {
        if !self.durable.insert(request) {
            return;
        }
        self.durable_batches += 1;
        for (r, _, record) in &self.log {
            if *r == request {
                self.durable_lines.insert(record.clone());
            }
        }
    }

    /// The request `id` is given up by the pipeline (`Command::HttpCancel`): true when it was
    /// still waiting, so that its end (a failure) is reported.
    pub(super) fn cancel(&mut self, id: HttpId) -> bool {
        let before = self.waiting.len();
        self.waiting.retain(|(waiting, _, _)| *waiting != id);
        self.waiting.len() != before
    }

    /// Answers one waiting request (see `Event::Answer`): `None` when none waits, or when
    /// the answer goes nowhere (an orphan's: its effect on Feldera happens all the same).
    pub(super) fn answer(&mut self, pick: u8, class: u8) -> Option<(HttpId, Answer)> {
        if self.waiting.is_empty() {
            return None;
        }
        let at = usize::from(pick) % self.waiting.len();
        let (id, waiting, dead) = &self.waiting[at];
        // A paused endpoint reads nothing: instead of the 200 of a body read whole, the
        // manager's 503 after its timeout, and the body stays held.
        let unread = matches!(waiting, Waiting::Ingress(upload) if !upload.pending.is_empty());
        if self.paused && !dead && unread && index(class, INGRESS_ANSWERS.len()) < 2 {
            let id = *id;
            return match self.orphans.insert(id) {
                true => Some((id, done(UNREAD.0, UNREAD.1.to_owned()))),
                false => None,
            };
        }
        if self.orphans.contains(id) && unread && index(class, INGRESS_ANSWERS.len()) < 2 {
            self.orphans_landed += 1;
        }
        let (id, answer) = self.answer_at(at, class)?;
        match self.orphans.remove(&id) {
            true => None,
            false => Some((id, answer)),
        }
    }

    fn answer_at(&mut self, at: usize, class: u8) -> Option<(HttpId, Answer)> {
        let (id, waiting, dead) = self.waiting.remove(at);
        if dead {
            return Some((id, Answer::Failed("connection reset by peer".to_owned())));
        }
        let (status, body) = match waiting {
            Waiting::Pipeline | Waiting::Other => {
                let i = index(class, PIPELINE_ANSWERS.len());
                if i == 0 {
                    let mut body = PIPELINE.to_owned();
                    if self.fault_tolerance {
                        body = body.replacen("{", &format!("{{{FAULT_TOLERANCE}"), 1);
                    }
                    if self.paused {
                        body = body.replacen("\"Running\"", "\"Paused\"", 1);
                    }
                    return Some((id, done(200, body)));
                }
                PIPELINE_ANSWERS[i]
            }
            Waiting::Checkpoint => {
                let i = index(class, CHECKPOINT_ANSWERS.len());
                if i == 0 {
                    let body = self.checkpoint_requested();
                    return Some((id, done(200, body)));
                }
                CHECKPOINT_ANSWERS[i]
            }
            Waiting::CheckpointStatus(asked) => {
                let i = index(class, CHECKPOINT_STATUS_ANSWERS.len());
                let (status, body) = self.checkpoint_status(asked.as_deref(), i);
                return Some((id, done(status, body)));
            }
            // The first two answers of each say what Feldera's state is: a 409 only while
            // a transaction is open, a 400 NoTransactionInProgress only while none is.
            Waiting::StartTransaction => match index(class, START_ANSWERS.len()) {
                0 | 1 if self.transaction => START_ANSWERS[1],
                0 | 1 => {
                    self.transaction = true;
                    START_ANSWERS[0]
                }
                i => START_ANSWERS[i],
            },
            Waiting::CommitTransaction => match index(class, COMMIT_ANSWERS.len()) {
                0 | 1 if !self.transaction => COMMIT_ANSWERS[1],
                0 | 1 => {
                    self.transaction = false;
                    self.in_transaction.clear();
                    self.commits += 1;
                    COMMIT_ANSWERS[0]
                }
                i => COMMIT_ANSWERS[i],
            },
            Waiting::Ingress(upload) => {
                let i = index(class, INGRESS_ANSWERS.len());
                if i < 2 {
                    return Some((id, self.accept(upload, INGRESS_ANSWERS[i].0)));
                }
                INGRESS_ANSWERS[i]
            }
            Waiting::Completion(token) => self.completion(&token, class),
            Waiting::Query(sql) => {
                let i = index(class, QUERY_ANSWERS.len());
                let body = match i {
                    0 | 1 => {
                        self.queries += 1;
                        // A paused pipeline processes nothing: the query sees what
                        // completions reported.
                        if i == 0 && !self.paused {
                            self.process();
                        }
                        self.query(&sql, i == 1 || self.paused)
                    }
                    6 => format!("{}{}\n", self.query(&sql, false), QUERY_ANSWERS[6].1),
                    _ => QUERY_ANSWERS[i].1.to_owned(),
                };
                return Some((id, done(QUERY_ANSWERS[i].0, body)));
            }
        };
        Some((id, done(status, body.to_owned())))
    }

    /// Feldera's circuit processes every record queued outside the open transaction: a
    /// query then shows them, and their tokens are complete. A request still uploading has
    /// only the records that landed processed.
    fn process(&mut self) {
        let uploading: BTreeSet<u32> = self
            .waiting
            .iter()
            .filter_map(|(_, waiting, dead)| match waiting {
                Waiting::Ingress(upload) if !dead && !upload.pending.is_empty() => {
                    Some(upload.request)
                }
                _ => None,
            })
            .collect();
        let landed: BTreeSet<u32> = self.log.iter().map(|(request, _, _)| *request).collect();
        for request in landed {
            if self.in_transaction.contains(&request) {
                continue;
            }
            if uploading.contains(&request) {
                let lines = self.log.iter().filter(|(r, _, _)| *r == request);
                let lines: Vec<String> = lines.map(|(_, _, record)| record.clone()).collect();
                self.durable_lines.extend(lines);
            } else {
                self.make_durable(request);
            }
        }
    }

    /// The tables as an ad-hoc query reads them: the records of requests in the open
    /// transaction are not there yet, and with `lagging` neither are those no completion
    /// reported processed.
    fn visible(&self, lagging: bool) -> BTreeMap<Key, Value> {
        if self.in_transaction.is_empty() && !lagging {
            return self.tables.clone();
        }
        let mut tables = BTreeMap::new();
        for (request, table, record) in &self.log {
            let processed = !lagging || self.durable.contains(request);
            if processed && !self.in_transaction.contains(request) {
                apply(&mut tables, table, record);
            }
        }
        tables
    }

    /// The NDJSON rows answering `sql`: the count of a table, or all of its keys (the shapes
    /// `retract::sql` writes for a single-column key). Other SQL is a question the pipeline
    /// has no reason to ask.
    pub(super) fn query(&self, sql: &str, lagging: bool) -> String {
        let table = sql
            .split(" FROM \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(table_of)
            .unwrap_or_else(|| panic!("an ad-hoc query of no table Feldera has: {sql}"));
        let rows: Vec<Value> = self
            .visible(lagging)
            .into_iter()
            .filter(|((t, _), _)| *t == table)
            .filter_map(|((_, key), _)| serde_json::from_str(&key).ok())
            .collect();
        if sql.starts_with("SELECT COUNT(*) AS \"slotline_count\" FROM") {
            return format!("{{\"slotline_count\":{}}}\n", rows.len());
        }
        // The scan of every key (`retract::scan_query`): in no promised order, so here
        // backwards.
        rows.iter()
            .rev()
            .map(|key| format!("{{\"k0\":{key}}}\n"))
            .collect()
    }

    /// The whole body was read: the rest of its records land, and a token is given out.
    fn accept(&mut self, mut upload: Upload, status: u16) -> Answer {
        self.land_held_before(upload.table, upload.request);
        for record in std::mem::take(&mut upload.pending) {
            self.land(upload.request, upload.table, record);
        }
        let endpoint = match self.endpoints.iter().position(|t| *t == upload.table) {
            Some(endpoint) => endpoint,
            None => {
                self.endpoints.push(upload.table);
                self.endpoints.len() - 1
            }
        };
        self.count += 1;
        let origin = format!(
            "{{\"u\":\"incarnation-{}\",\"e\":{endpoint},\"c\":{}}}",
            self.incarnation, self.count
        );
        let token = URL_SAFE_NO_PAD.encode(origin);
        let issued = Issued {
            incarnation: self.incarnation,
            endpoint,
            count: self.count,
            request: upload.request,
        };
        self.tokens.insert(token.clone(), issued);
        if self.transaction {
            self.in_transaction.insert(upload.request);
        }
        if self.accepted_mode {
            self.make_durable(upload.request);
        }
        Answer::Done {
            status,
            body: format!("{{\"token\":\"{token}\"}}"),
        }
    }

    /// What Feldera says about `token`: 410 when it is of an earlier incarnation, in
    /// progress while its records wait for a transaction's commit.
    fn completion(&mut self, token: &str, class: u8) -> (u16, &'static str) {
        let i = index(class, COMPLETION_ANSWERS.len());
        let Some(issued) = self.tokens.get(token).cloned() else {
            return COMPLETION_ANSWERS[i];
        };
        if i > 1 {
            return COMPLETION_ANSWERS[i];
        }
        if issued.incarnation != self.incarnation {
            return RESTARTED;
        }
        // A paused pipeline processes nothing.
        if i == 1 || self.paused {
            return COMPLETION_ANSWERS[1];
        }
        if self.in_transaction.contains(&issued.request) {
            return IN_CIRCUIT;
        }
        let covered: Vec<u32> = self
            .tokens
            .values()
            .filter(|t| {
                t.incarnation == issued.incarnation
                    && t.endpoint == issued.endpoint
                    && t.count <= issued.count
            })
            .map(|t| t.request)
            .collect();
        for request in covered {
            self.make_durable(request);
        }
        COMPLETION_ANSWERS[0]
    }

    /// The rows changed since the last call.
    pub(super) fn take_touched(&mut self) -> BTreeSet<Key> {
        std::mem::take(&mut self.touched)
    }

    /// Whether a durable record contains `marker`: with checkpoints, one a successful
    /// checkpoint held (it began after the record was processed); otherwise one a
    /// completion vouched for.
    pub(super) fn holds(&self, marker: &str) -> bool {
        let lines = match self.fault_tolerance && !self.accepted_mode {
            true => &self.checkpoints.saved_lines,
            false => &self.durable_lines,
        };
        lines.iter().any(|line| line.contains(marker))
    }
}

/// An answer of `status` (0: a transport failure) with `body`.
fn done(status: u16, body: String) -> Answer {
    if status == 0 {
        Answer::Failed(body)
    } else {
        Answer::Done { status, body }
    }
}

/// Queues one NDJSON record into `tables`. The pipeline writes only `insert` and `delete`
/// records with the key column; anything else is a bug it must not send. Returns the row's
/// key.
fn apply(tables: &mut BTreeMap<Key, Value>, table: &'static str, record: &str) -> Option<Key> {
    let parsed: Value = match serde_json::from_str(record) {
        Ok(value) => value,
        Err(e) => panic!("Feldera cannot parse the record {record:?} for {table}: {e}"),
    };
    let column = TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map_or("", |(_, column)| *column);
    let (row, insert) = match (parsed.get("insert"), parsed.get("delete")) {
        (Some(row), None) => (row, true),
        (None, Some(row)) => (row, false),
        _ => panic!("the record {record:?} for {table} is neither an insert nor a delete"),
    };
    let Some(key) = row.get(column) else {
        panic!("the record {record:?} for {table} has no {column}");
    };
    let key = (table, key.to_string());
    if insert {
        // A NULL field and an absent one are the same row (a nullable column a record
        // leaves out is NULL): kept absent, as the publication's view leaves it.
        let mut row = row.clone();
        if let Some(fields) = row.as_object_mut() {
            fields.retain(|_, value| !value.is_null());
        }
        tables.insert(key.clone(), row);
    } else {
        tables.remove(&key);
    }
    Some(key)
}
