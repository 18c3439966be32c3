//! A scripted world for decision traces: a fake PostgreSQL that speaks the real wire
//! protocol (startup, catalog answers, CopyBoth), a fake Feldera that answers when the
//! script says so, a virtual clock, and a trace of every command the pipeline emits.
//!
//! Traces print relative times, counter ids and decoded frontend messages (never `Debug`
//! of internal structs), so a snapshot explains a rule to someone who has not read the code.
//! Decision lines (`ack`, `policy`, `batch`) appear whatever their level; other log lines
//! from `info` up.
//!
//! The harness keeps the drive contract strictly: the fake servers' answers are queued and
//! fed only once the pipeline's commands are drained, and it asserts that no command is left
//! before any input and that time never goes backwards.

use super::Pipeline;
use crate::config::Config;
use crate::feldera::HttpRequest;
use crate::io::{Command, ConnId, Driver, HttpId, Input, Level, Topic};
use crate::pgoutput::{encode, OldKind, Relation, RelationColumn, ReplicaIdentity};
use crate::time::{Mono, Now, PgTime};
use crate::timer::Deadline;
use crate::wire::backend::{
    Authentication, BackendKeyData, BackendMessage, CopyResponse, DataRow, RowDescription,
    TransactionStatus,
};
use crate::wire::testing::{decode_status_update, encode_backend, replication_frame};
use crate::wire::{PrimaryKeepalive, ReplicationMessage, XLogData};
use crate::Lsn;
use bytes::Bytes;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt::Write as _;

/// One table of the fake database.
#[derive(Clone, Debug)]
pub struct FakeTable {
    pub relation: Relation,
    /// What an initial snapshot copies (text values in column order, `None` for NULL).
    pub rows: Vec<Vec<Option<String>>>,
    /// Heap blocks the rows are spread over (row `i` lives in block `i * blocks / rows`).
    pub blocks: u64,
    /// `pg_class.reltuples` (`None`: never analyzed).
    pub estimated_rows: Option<u64>,
    /// When partitioned: its partitions at every depth (a partitioned table itself holds no
    /// rows; its leaves do).
    pub partitions: Vec<FakePartition>,
}

/// A partition of a fake partitioned table.
#[derive(Clone, Debug)]
pub struct FakePartition {
    /// Its own shape; its `rows` are in the partitioned table's column order (the order a
    /// copy selects them in).
    pub table: FakeTable,
    pub leaf: bool,
    /// The OID of the table it is a partition of.
    pub parent: u32,
}

impl FakeTable {
    /// `columns`: (name, type oid, part of the replica identity).
    pub fn new(
        oid: u32,
        name: &str,
        identity: ReplicaIdentity,
        columns: &[(&str, u32, bool)],
    ) -> FakeTable {
        FakeTable {
            relation: Relation {
                oid,
                namespace: "public".into(),
                name: name.into(),
                replica_identity: identity,
                columns: columns
                    .iter()
                    .map(|(n, t, k)| RelationColumn {
                        in_replica_identity: *k,
                        name: (*n).into(),
                        type_oid: *t,
                        type_modifier: -1,
                    })
                    .collect(),
            },
            rows: Vec::new(),
            blocks: 0,
            estimated_rows: None,
            partitions: Vec::new(),
        }
    }

    /// Adds a partition below `parent` (this table's OID or a partitioned partition's).
    pub fn with_partition(mut self, table: FakeTable, leaf: bool, parent: u32) -> FakeTable {
        self.partitions.push(FakePartition {
            table,
            leaf,
            parent,
        });
        self
    }

    /// The heaps a copy reads: its leaves, or the table itself when it has no partitions.
    fn heaps(&self) -> Vec<&FakeTable> {
        if self.partitions.is_empty() {
            return vec![self];
        }
        self.partitions
            .iter()
            .filter(|p| p.leaf)
            .map(|p| &p.table)
            .collect()
    }

    /// The table holds `rows` in `blocks` heap blocks (estimated exactly).
    pub fn with_rows(mut self, rows: Vec<Vec<Option<String>>>, blocks: u64) -> FakeTable {
        self.estimated_rows = Some(rows.len() as u64);
        self.rows = rows;
        self.blocks = blocks;
        self
    }

    /// The rows whose block is in `[start, end)` (`end` `None`: to the end).
    fn rows_in(&self, start: u64, end: Option<u64>) -> impl Iterator<Item = &Vec<Option<String>>> {
        let count = self.rows.len().max(1) as u64;
        let blocks = self.blocks;
        self.rows.iter().enumerate().filter_map(move |(i, row)| {
            let block = i as u64 * blocks / count;
            (block >= start && end.is_none_or(|e| block < e)).then_some(row)
        })
    }
}

/// What the fake PostgreSQL answers during startup.
#[derive(Clone, Debug)]
pub struct FakePg {
    pub wal_sender_timeout: String,
    pub tables: Vec<FakeTable>,
    /// `None`: the slot does not exist yet.
    pub slot_confirmed: Option<Lsn>,
    pub truncate_published: bool,
    /// How many startup slot queries answer that another process still holds the slot.
    pub slot_busy_answers: u32,
    /// `IDENTIFY_SYSTEM`'s system identifier.
    pub system_id: String,
    /// The publication's `publish_via_partition_root`.
    pub via_root: bool,
    /// How many `CREATE_REPLICATION_SLOT ... TEMPORARY` answer that the slot exists.
    pub temporary_slot_taken: u32,
}

/// An operator's command (`check`, `status`, `drop-slot`) driven by the same harness.
pub trait Operation: Driver + std::fmt::Debug {}

impl<T: Driver + std::fmt::Debug> Operation for T {}

/// What the harness drives: the pipeline, or an operator's command.
#[derive(Debug)]
enum Machine {
    Pipeline(Box<Pipeline>),
    Operation(Box<dyn Operation>),
}

impl Machine {
    fn driver(&mut self) -> &mut dyn Driver {
        match self {
            Machine::Pipeline(p) => &mut **p,
            Machine::Operation(o) => &mut **o,
        }
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        match self {
            Machine::Pipeline(p) => p.poll_timeout(),
            Machine::Operation(o) => o.poll_timeout(),
        }
    }

    fn replication_conn(&self) -> Option<ConnId> {
        match self {
            Machine::Pipeline(p) => p.replication_conn(),
            Machine::Operation(_) => None,
        }
    }
}

/// How the fake server answers the slot-health question (the monitor's, `status`'s and
/// `check`'s).
#[derive(Clone, Debug)]
pub struct FakeSlotHealth {
    pub current_wal: Lsn,
    pub restart_lsn: Lsn,
    pub wal_status: String,
    /// `max_slot_wal_keep_size` in MB (`-1`: unlimited).
    pub keep_mb: i64,
    pub invalidation_reason: Option<String>,
    pub active_pid: Option<u32>,
}

impl Default for FakeSlotHealth {
    fn default() -> Self {
        FakeSlotHealth {
            current_wal: Lsn(0x1_0000_0000),
            restart_lsn: Lsn(0xFFFF_0000),
            wal_status: "reserved".into(),
            keep_mb: -1,
            invalidation_reason: None,
            active_pid: None,
        }
    }
}

/// The harness. See the module docs.
#[derive(Debug)]
pub struct Script {
    pipeline: Machine,
    /// `server_version` as the fake server reports it.
    server_version: String,
    /// The slot's health as the fake server reports it.
    pub slot_health: FakeSlotHealth,
    /// The fake server's answer to `check`'s settings question (wal_level, slots, senders,
    /// role), and to its SELECT privilege question (`t`/`f` for every table).
    pub settings: [String; 8],
    pub select_granted: bool,
    /// The publication exists (else its questions find nothing).
    pub publication_exists: bool,
    /// The database's other publications, in name order.
    pub other_publications: Vec<String>,
    /// Feldera has no pipeline `p` (its requests answer 404) but these, listed by
    /// `GET /v0/pipelines`; `None`: it has `p`.
    pub pipelines_instead: Option<Vec<String>>,
    /// The answer to the column types question (`catalog::types`), rows as text.
    pub types_answer: Vec<Vec<Option<String>>>,
    now: Now,
    trace: Vec<String>,
    pg: FakePg,
    schema: String,
    repl: Option<ConnId>,
    /// Connections other than the replication connection (snapshot workers, the graceful
    /// stop's control connection).
    others: std::collections::BTreeSet<ConnId>,
    /// The state file's contents (`None`: absent).
    pub state_file: Option<Vec<u8>>,
    http: VecDeque<(HttpId, HttpRequest)>,
    tokens: u32,
    last_deadline: Option<Deadline>,
    exit: Option<(i32, String)>,
    /// The flush position PostgreSQL last heard.
    pub confirmed: Lsn,
    /// Status updates are lost on the way (the slot stops moving).
    frozen: bool,
    /// Replication bytes are delivered in chunks of this many bytes (0 = all at once).
    chunk: usize,
    /// Acceptance order, table and body of ingress requests by token, until complete.
    bodies_by_token: std::collections::BTreeMap<String, (u32, String, String)>,
    /// Feldera's incarnation (1 at first; `restart_feldera` starts the next) and the input
    /// endpoints it opened, in order: a token names both, as Feldera's do.
    incarnation: u32,
    endpoints: Vec<String>,
    /// Each token issued and the short name traces show for it (`t1`, `t2`, ...).
    token_names: std::collections::BTreeMap<String, String>,
    /// A Feldera transaction is open (started through `step`, or left by an earlier run:
    /// set it before the pipeline's first request). Tokens accepted while it is open stay
    /// in progress until `step` answers its commit.
    pub transaction_open: bool,
    tokens_in_transaction: std::collections::BTreeSet<String>,
    /// Feldera's tables as completed requests left them.
    pub feldera: super::fake_feldera::FakeFeldera,
    completed_bodies: Vec<String>,
    wal_end: Lsn,
    /// Answers the fake servers gave while commands were being executed, fed in order once
    /// the pipeline has no command left.
    replies: VecDeque<Input>,
    /// Requests to `GET .../stats` are traced (and their deadline shown). Off by default:
    /// the fake Feldera answers them at once with its incarnation, unseen, so that traces
    /// about other things do not fill with the keeper's questions every 2 s.
    watch_visible: bool,
    /// `global_metrics.state` in `GET .../stats` answers (`Running` by default).
    pipeline_state: String,
    /// Requests the trace does not show: traced ids are numbered without them.
    unseen_ids: std::collections::BTreeSet<HttpId>,
    /// Feldera's `runtime_config.fault_tolerance.model` (`None`: no fault tolerance).
    fault_tolerance: Option<String>,
    /// Checkpoints Feldera was asked for, the tables as each held them (by sequence
    /// number), and the last that succeeded.
    checkpoints: Vec<super::fake_feldera::FakeFeldera>,
    checkpoint_succeeded: Option<u64>,
    /// Streamed answers (`HttpRequest::streamed`) are cut into pieces of this many bytes
    /// (0: one piece).
    piece: usize,
    /// The pieces of streamed answers not yet read, by request.
    streams: std::collections::BTreeMap<HttpId, VecDeque<Bytes>>,
    /// A streamed answer fails (`HttpFailed` with this text) when asked for a piece after
    /// this many were delivered.
    stream_failure: Option<(usize, String)>,
    /// Pieces delivered, by request.
    pieces_delivered: std::collections::BTreeMap<HttpId, usize>,
}

const SCHEMA_PREFIX: &str = r#"{"name":"p","program_status":"Success","deployment_status":"Running","program_info":{"schema":"#;

impl Script {
    /// Starts a pipeline with `config` (key/value pairs on top of a base configuration)
    /// against `pg` and a Feldera whose program schema is `schema` (`{"inputs":..,"outputs":..}`).
    pub fn new(config: &[(&str, &str)], pg: FakePg, schema: &str) -> Script {
        Script::with_state(config, pg, schema, None)
    }

    /// `new`, with `tweak` setting up the fake servers before the pipeline's first
    /// connection is answered.
    pub fn new_tweaked(
        config: &[(&str, &str)],
        pg: FakePg,
        schema: &str,
        tweak: impl FnOnce(&mut Script),
    ) -> Script {
        let mut script = Script::assemble(config, pg, schema, None, |config, now| {
            let pipeline = Pipeline::new(config, 7, now).expect("scripted pipeline starts");
            Machine::Pipeline(Box::new(pipeline))
        });
        tweak(&mut script);
        script.drain();
        script
    }

    /// `new`, with a state file already in the state directory (`None`: absent).
    pub fn with_state(
        config: &[(&str, &str)],
        pg: FakePg,
        schema: &str,
        state_file: Option<Vec<u8>>,
    ) -> Script {
        let mut script = Script::assemble(config, pg, schema, state_file, |config, now| {
            let pipeline = Pipeline::new(config, 7, now).expect("scripted pipeline starts");
            Machine::Pipeline(Box::new(pipeline))
        });
        script.drain();
        script
    }

    /// An operator's command built by `make` from the configuration, against the same
    /// fake servers; `tweak` sets them up before the command's first request is answered.
    pub fn operation(
        config: &[(&str, &str)],
        pg: FakePg,
        schema: &str,
        state_file: Option<Vec<u8>>,
        tweak: impl FnOnce(&mut Script),
        make: impl FnOnce(Config, Now) -> Box<dyn Operation>,
    ) -> Script {
        let mut script = Script::assemble(config, pg, schema, state_file, |config, now| {
            Machine::Operation(make(config, now))
        });
        tweak(&mut script);
        script.drain();
        script
    }

    fn assemble(
        config: &[(&str, &str)],
        pg: FakePg,
        schema: &str,
        state_file: Option<Vec<u8>>,
        make: impl FnOnce(Config, Now) -> Machine,
    ) -> Script {
        let mut pairs = vec![
            ("PG_URL", "postgres://slotline@db:5432/app?sslmode=disable"),
            ("PG_PUBLICATION", "pub"),
            ("FELDERA_URL", "http://feldera:8080"),
            ("FELDERA_PIPELINE", "p"),
            ("SNAPSHOT_MODE", "never"),
            // The progress line has traces of its own; elsewhere it would only interleave.
            ("PROGRESS_INTERVAL_SECS", "0"),
            // Traces show the slot monitor only where they turn it on.
            ("SLOT_CHECK_INTERVAL_MS", "0"),
        ];
        for (k, v) in config {
            pairs.retain(|(key, _)| key != k);
            pairs.push((k, v));
        }
        let config = Config::from_pairs(pairs).expect("scripted configuration is valid");
        let now = Now {
            mono: Mono(0),
            wall: PgTime(800_000_000_000_000),
        };
        let confirmed = pg.slot_confirmed.unwrap_or(Lsn::ZERO);
        Script {
            pipeline: make(config, now),
            server_version: "15.8".into(),
            slot_health: FakeSlotHealth::default(),
            settings: default_settings(),
            select_granted: true,
            publication_exists: true,
            other_publications: Vec::new(),
            pipelines_instead: None,
            types_answer: Vec::new(),
            now,
            trace: Vec::new(),
            pg,
            schema: format!("{SCHEMA_PREFIX}{schema}}}}}"),
            repl: None,
            others: std::collections::BTreeSet::new(),
            state_file,
            http: VecDeque::new(),
            tokens: 0,
            last_deadline: None,
            exit: None,
            confirmed,
            frozen: false,
            chunk: 0,
            piece: 0,
            streams: std::collections::BTreeMap::new(),
            stream_failure: None,
            pieces_delivered: std::collections::BTreeMap::new(),
            bodies_by_token: std::collections::BTreeMap::new(),
            incarnation: 1,
            endpoints: Vec::new(),
            token_names: std::collections::BTreeMap::new(),
            transaction_open: false,
            tokens_in_transaction: std::collections::BTreeSet::new(),
            feldera: fake_feldera_for(schema),
            completed_bodies: Vec::new(),
            wal_end: Lsn::ZERO,
            replies: VecDeque::new(),
            watch_visible: false,
            pipeline_state: "Running".into(),
            unseen_ids: std::collections::BTreeSet::new(),
            fault_tolerance: None,
            checkpoints: Vec::new(),
            checkpoint_succeeded: None,
        }
    }

    /// Feldera's pipeline has this fault-tolerance model (`at_least_once`, `exactly_once`),
    /// as its `runtime_config` says; set before the pipeline reads it.
    pub fn set_fault_tolerance(&mut self, model: &str) {
        self.fault_tolerance = Some(model.to_owned());
        self.schema = self.schema.replacen(
            "{\"name\":\"p\",",
            &format!(
                "{{\"name\":\"p\",\"runtime_config\":{{\"fault_tolerance\":{{\"model\":\"{model}\",\"checkpoint_interval_secs\":60}}}},"
            ),
            1,
        );
    }

    /// Trace the keeper's `GET .../stats` questions and their deadline from now on.
    pub fn show_feldera_watch(&mut self) {
        self.watch_visible = true;
    }

    /// How a request is shown in the trace: `http#N`, its id less the unseen requests
    /// allocated before it.
    fn shown(&self, id: HttpId) -> String {
        let unseen = self.unseen_ids.range(..id).count() as u64;
        format!("http#{}", id.0 - unseen)
    }

    /// `GET .../stats` as Feldera answers it: the state and the current incarnation.
    fn stats_body(&self) -> String {
        format!(
            "{{\"global_metrics\":{{\"state\":\"{}\",\"incarnation_uuid\":\"incarnation-{}\"}}}}",
            self.pipeline_state, self.incarnation
        )
    }

    /// `GET .../stats` answers show the pipeline in this state (`Running`, `Paused`, ...).
    pub fn set_pipeline_state(&mut self, state: &str) {
        self.pipeline_state = state.to_owned();
    }

    /// The fake server reports this `server_version` on connections opened from now on.
    pub fn set_server_version(&mut self, version: &str) {
        self.server_version = version.to_owned();
    }

    /// Feldera reports the pipeline in this deployment status (`Running` by default).
    pub fn set_deployment_status(&mut self, status: &str) {
        self.schema = self.schema.replacen(
            "\"deployment_status\":\"Running\"",
            &format!("\"deployment_status\":\"{status}\""),
            1,
        );
    }

    /// Feldera answers the pipeline request with this status and body instead.
    pub fn set_pipeline_answer(&mut self, body: &str) {
        self.schema = body.to_owned();
    }

    /// Runs startup to streaming and forgets its trace: most traces start there.
    pub fn streaming(config: &[(&str, &str)], pg: FakePg, schema: &str) -> Script {
        let mut script = Script::new(config, pg, schema);
        script.trace.clear();
        script
    }

    /// From now on the server ignores status updates (the slot does not move).
    pub fn freeze_confirmed(&mut self) {
        self.frozen = true;
    }

    /// Hands the pipeline over (for benchmarks that drive it without a trace), with the
    /// replication connection's id and the current time.
    pub fn into_parts(self) -> (Pipeline, ConnId, Now) {
        let repl = self.repl.expect("replication connection");
        let Machine::Pipeline(pipeline) = self.pipeline else {
            panic!("the harness drives an operation, not the pipeline");
        };
        (*pipeline, repl, self.now)
    }

    pub fn exit(&self) -> Option<&(i32, String)> {
        self.exit.as_ref()
    }

    pub fn pipeline(&self) -> &Pipeline {
        match &self.pipeline {
            Machine::Pipeline(pipeline) => pipeline,
            Machine::Operation(_) => panic!("the harness drives an operation, not the pipeline"),
        }
    }

    /// The trace so far, one line per event, and clears it.
    pub fn take_trace(&mut self) -> String {
        let mut out = self.trace.join("\n");
        out.push('\n');
        self.trace.clear();
        out
    }

    fn at(&self) -> String {
        format!("{:>8}", self.now.mono.to_string())
    }

    fn note(&mut self, line: String) {
        self.trace.push(line);
    }

    fn feed(&mut self, input: Input) {
        self.handle(input);
        self.drain();
    }

    /// Hands one input to the pipeline, keeping the drive contract.
    fn handle(&mut self, input: Input) {
        if let Machine::Pipeline(pipeline) = &self.pipeline {
            assert!(
                pipeline.queue.drained(),
                "an input arrived before the previous input's commands were drained"
            );
            assert!(
                self.now.mono >= pipeline.queue.now.mono,
                "the harness moved time backwards"
            );
        }
        self.pipeline.driver().handle(self.now, input);
    }

    /// Executes every command; the fake servers' answers are fed after the commands are
    /// drained, until neither commands nor answers are left.
    fn drain(&mut self) {
        loop {
            while let Some(command) = self.pipeline.driver().poll_command() {
                self.execute(command);
            }
            match self.replies.pop_front() {
                Some(input) if self.exit.is_none() => self.handle(input),
                _ => break,
            }
        }
        self.replies.clear();
        let deadline = self.shown_deadline();
        if deadline != self.last_deadline {
            if let Some(d) = deadline {
                let line = format!("         next {} {}", d.at, d.why);
                self.note(line);
            }
            self.last_deadline = deadline;
        }
    }

    /// The earliest deadline the trace shows: the keeper's watch only when it is traced.
    fn shown_deadline(&self) -> Option<Deadline> {
        let Machine::Pipeline(pipeline) = &self.pipeline else {
            return self.pipeline.poll_timeout();
        };
        if self.watch_visible || pipeline.queue.exited() {
            return pipeline.poll_timeout();
        }
        crate::timer::TimerKind::ALL
            .into_iter()
            .filter(|kind| *kind != crate::timer::TimerKind::FelderaWatch)
            .filter_map(|why| pipeline.timers.get(why).map(|at| Deadline { at, why }))
            .min_by_key(|d| d.at)
    }

    fn execute(&mut self, command: Command) {
        let at = self.at();
        match command {
            Command::PgConnect { conn, target, .. } => {
                self.note(format!("{at} -> {conn} connect {target}"));
                if self.repl.is_none() || self.pipeline.replication_conn() == Some(conn) {
                    self.repl = Some(conn);
                } else {
                    self.others.insert(conn);
                }
                self.replies.push_back(Input::PgConnected { conn });
            }
            Command::PgStartTls { conn, .. } => self.note(format!("{at} -> {conn} start TLS")),
            Command::PgWrite { conn, bytes } => self.on_frontend(conn, &bytes),
            Command::PgPauseRead { conn } => self.note(format!("{at} -> {conn} pause reading")),
            Command::PgResumeRead { conn } => self.note(format!("{at} -> {conn} resume reading")),
            Command::PgClose { conn } => self.note(format!("{at} -> {conn} close")),
            Command::Http { id, request } => self.on_http(id, request),
            Command::HttpRead { id } => {
                let shown = self.shown(id);
                let delivered = self.pieces_delivered.get(&id).copied().unwrap_or(0);
                if let Some((_, error)) = self
                    .stream_failure
                    .clone()
                    .filter(|(after, _)| delivered >= *after)
                {
                    self.streams.remove(&id);
                    self.note(format!("{at} -> {shown} read on; <- failed: {error}"));
                    self.replies.push_back(Input::HttpFailed { id, error });
                    return;
                }
                *self.pieces_delivered.entry(id).or_default() += 1;
                let next = self.streams.get_mut(&id).map(VecDeque::pop_front);
                match next {
                    Some(Some(piece)) => {
                        self.note(format!("{at} -> {shown} read on; <- {} bytes", piece.len()));
                        self.replies
                            .push_back(Input::HttpChunk { id, bytes: piece });
                    }
                    Some(None) => {
                        self.streams.remove(&id);
                        self.note(format!("{at} -> {shown} read on; <- end of the answer"));
                        self.replies.push_back(Input::HttpDone {
                            id,
                            status: 200,
                            body: Bytes::new(),
                        });
                    }
                    None => panic!("{shown}: read on, but no streamed answer is open"),
                }
            }
            Command::HttpCancel { id } => {
                let shown = self.shown(id);
                self.note(format!("{at} -> {shown} cancel"));
                if self.streams.remove(&id).is_some() {
                    self.replies.push_back(Input::HttpFailed {
                        id,
                        error: "cancelled".to_owned(),
                    });
                }
            }
            Command::Log {
                level,
                topic: Topic::General,
                message,
            } => {
                if level >= Level::Info {
                    let level = format!("{level:?}").to_lowercase();
                    self.note(format!("         log {level}: {message}"));
                }
            }
            Command::Log { topic, message, .. } => {
                self.note(format!("         {:<6} {message}", topic.name()));
            }
            Command::ReadState { path } => {
                let found = if self.state_file.is_some() {
                    "present"
                } else {
                    "absent"
                };
                self.note(format!("{at} -> read state file {path} ({found})"));
                self.replies.push_back(Input::StateRead {
                    contents: Ok(self.state_file.clone().map(Bytes::from)),
                });
            }
            Command::WriteState { path, contents } => {
                let text = String::from_utf8_lossy(&contents);
                let phase = text
                    .lines()
                    .find(|l| l.contains("\"phase\""))
                    .map_or("?", |l| l.trim().trim_end_matches(','));
                self.note(format!("{at} -> write state file {path}: {phase}"));
                self.state_file = Some(contents.to_vec());
                self.replies
                    .push_back(Input::StateWritten { result: Ok(()) });
            }
            Command::RemoveState { path } => {
                let found = self.state_file.take().is_some();
                self.note(format!("{at} -> remove state file {path} (found {found})"));
                self.replies
                    .push_back(Input::StateRemoved { result: Ok(found) });
            }
            Command::Print { text } => {
                for line in text.lines() {
                    self.note(format!("         print {line}"));
                }
            }
            Command::Exit { code, reason } => {
                self.note(format!("{at} exit {code}: {reason}"));
                self.exit = Some((code, reason));
            }
        }
    }

    fn on_http(&mut self, request_id: HttpId, request: HttpRequest) {
        let id = request_id;
        let at = self.at();
        let path = request
            .url
            .trim_start_matches("http://feldera:8080/v0/pipelines/p");
        if let Some(names) = &self.pipelines_instead {
            let listing = request.url.starts_with("http://feldera:8080/v0/pipelines?");
            let (what, status, body) = if listing {
                let list: Vec<String> = names
                    .iter()
                    .map(|n| format!(r#"{{"name":"{n}","deployment_status":"Running"}}"#))
                    .collect();
                let path = request.url.trim_start_matches("http://feldera:8080");
                (path.to_owned(), 200, format!("[{}]", list.join(",")))
            } else if path.is_empty() || path == "/stats" {
                let body = r#"{"message":"Unknown pipeline name 'p'","error_code":"UnknownPipelineName","details":{"pipeline_name":"p"}}"#;
                let what = if path.is_empty() { "pipeline" } else { "stats" };
                (what.to_owned(), 404, body.to_owned())
            } else {
                panic!("no pipeline p to ask {}", request.url);
            };
            let shown = self.shown(id);
            self.note(format!("{at} -> {shown} GET {what}"));
            self.note(format!("{at} <- {shown} {status}"));
            self.replies.push_back(Input::HttpDone {
                id,
                status,
                body: Bytes::from(body),
            });
            return;
        }
        if path == "/stats" {
            let body = self.stats_body();
            if !self.watch_visible {
                self.unseen_ids.insert(id);
            } else {
                let shown = self.shown(id);
                self.note(format!("{at} -> {shown} GET stats"));
                let incarnation = self.incarnation;
                let state = &self.pipeline_state;
                self.note(format!(
                    "{at} <- {shown} 200 {state} incarnation-{incarnation}"
                ));
            }
            self.replies.push_back(Input::HttpDone {
                id,
                status: 200,
                body: Bytes::from(body),
            });
            return;
        }
        let id_shown = self.shown(id);
        let id = &id_shown;
        if path.is_empty() {
            self.note(format!("{at} -> {id} GET pipeline"));
            let body = Bytes::from(self.schema.clone());
            self.replies.push_back(Input::HttpDone {
                id: request_id,
                status: 200,
                body,
            });
            return;
        }
        let line = if let Some(rest) = path.strip_prefix("/ingress/") {
            let table = rest.split('?').next().unwrap_or("");
            let rows = request.body.iter().filter(|b| **b == b'\n').count();
            format!("{at} -> {id} POST ingress {table} rows={rows}")
        } else if let Some(rest) = path.strip_prefix("/completion_status?token=") {
            format!(
                "{at} -> {id} GET completion_status {}",
                self.token_name(rest)
            )
        } else if path.starts_with("/query?sql=") {
            format!("{at} -> {id} GET query {}", query_sql(&request.url))
        } else {
            format!("{at} -> {id} {} {path}", request.method)
        };
        self.note(line);
        self.http.push_back((request_id, request));
    }

    /// The bodies of the requests waiting for an answer, oldest first (ingress bodies are
    /// the NDJSON events).
    pub fn pending_bodies(&self) -> Vec<String> {
        self.http
            .iter()
            .map(|(_, r)| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }

    /// Delivers replication bytes `chunk` bytes at a time (0: each message batch at once).
    pub fn set_chunking(&mut self, chunk: usize) {
        self.chunk = chunk;
    }

    /// Cuts streamed answers into pieces of `bytes` bytes (0: each answer in one piece),
    /// boundaries falling anywhere, inside a line too.
    pub fn set_pieces(&mut self, bytes: usize) {
        self.piece = bytes;
    }

    /// A streamed answer fails with `error` (as a transport failure: a timeout, a reset)
    /// when the pipeline reads on after `after` pieces.
    pub fn fail_streams_after(&mut self, after: usize, error: &str) {
        self.stream_failure = Some((after, error.to_owned()));
    }

    /// The NDJSON lines Feldera has completed so far (in completion order).
    pub fn completed_lines(&self) -> Vec<String> {
        self.completed_bodies
            .iter()
            .flat_map(|b| b.lines().map(str::to_owned))
            .collect()
    }

    /// Answers the oldest waiting request with `status` and `body`.
    pub fn answer(&mut self, status: u16, body: &str) {
        let (id, request) = self
            .http
            .pop_front()
            .expect("a request waits for an answer");
        self.track_durability(&request, status, body);
        let body_shown = match body
            .split('"')
            .nth(3)
            .filter(|_| body.starts_with("{\"token\""))
        {
            Some(token) => body.replacen(token, self.token_name(token), 1),
            None => body.to_owned(),
        };
        let lines: Vec<&str> = body_shown.trim_end().lines().collect();
        let shown = match lines.as_slice() {
            [first, .., last] if lines.len() > 4 => {
                format!("{} lines: {first} | ... | {last}", lines.len())
            }
            _ => lines.join(" | "),
        };
        let id_shown = self.shown(id);
        if request.streamed && (200..300).contains(&status) && !body.is_empty() {
            // Streamed: the first piece now, each next one when the pipeline reads on.
            let bytes = body.as_bytes();
            let size = if self.piece == 0 {
                bytes.len()
            } else {
                self.piece
            };
            let mut pieces: VecDeque<Bytes> =
                bytes.chunks(size).map(Bytes::copy_from_slice).collect();
            let first = pieces.pop_front().unwrap_or_default();
            self.note(format!(
                "{} <- {id_shown} {status} streamed, {} piece(s): {shown}",
                self.at(),
                pieces.len() + 1
            ));
            self.streams.insert(id, pieces);
            self.pieces_delivered.insert(id, 1);
            self.feed(Input::HttpChunk { id, bytes: first });
            return;
        }
        self.note(format!("{} <- {id_shown} {status} {shown}", self.at()));
        self.feed(Input::HttpDone {
            id,
            status,
            body: Bytes::from(body.to_owned()),
        });
    }

    fn track_durability(&mut self, request: &HttpRequest, status: u16, body: &str) {
        if status != 200 {
            return;
        }
        if let Some(rest) = request.url.split("/ingress/").nth(1) {
            let table = rest.split('?').next().unwrap_or("").to_owned();
            if let Some(token) = body.split('"').nth(3) {
                let text = String::from_utf8_lossy(&request.body).into_owned();
                let order = self.bodies_by_token.len() as u32 + self.completed_bodies.len() as u32;
                self.bodies_by_token
                    .insert(token.to_owned(), (order, table, text));
            }
        } else if body.contains("\"complete\"") {
            // On one table a token complete means every earlier one is, as in Feldera.
            let Some(token) = request.url.split("token=").nth(1) else {
                return;
            };
            let Some((order, table, _)) = self.bodies_by_token.get(token).cloned() else {
                return;
            };
            let mut covered: Vec<(u32, String)> = self
                .bodies_by_token
                .iter()
                .filter(|(_, (o, t, _))| *t == table && *o <= order)
                .map(|(k, (o, _, _))| (*o, k.clone()))
                .collect();
            covered.sort();
            for (_, key) in covered {
                if let Some((_, table, text)) = self.bodies_by_token.remove(&key) {
                    self.feldera.apply(&table, &text);
                    self.completed_bodies.push(text);
                }
            }
        }
    }

    /// The oldest waiting request fails without an answer.
    pub fn fail(&mut self, error: &str) {
        let (id, _) = self
            .http
            .pop_front()
            .expect("a request waits for an answer");
        let id_shown = self.shown(id);
        self.note(format!("{} <- {id_shown} failed: {error}", self.at()));
        self.feed(Input::HttpFailed {
            id,
            error: error.to_owned(),
        });
    }

    /// Ingress answers 200 with a fresh token, encoded as Feldera encodes its own (this
    /// incarnation, the table's endpoint, the count); traces show it as `t<count>`.
    pub fn accept(&mut self) {
        use base64::Engine as _;
        self.tokens += 1;
        let table = self
            .http
            .front()
            .and_then(|(_, r)| r.url.split("/ingress/").nth(1))
            .map(|rest| rest.split('?').next().unwrap_or("").to_owned())
            .unwrap_or_default();
        let endpoint = match self.endpoints.iter().position(|t| *t == table) {
            Some(endpoint) => endpoint,
            None => {
                self.endpoints.push(table);
                self.endpoints.len() - 1
            }
        };
        let origin = format!(
            "{{\"u\":\"incarnation-{}\",\"e\":{endpoint},\"c\":{}}}",
            self.incarnation, self.tokens
        );
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(origin);
        self.token_names
            .insert(token.clone(), format!("t{}", self.tokens));
        if self.transaction_open {
            self.tokens_in_transaction.insert(token.clone());
        }
        self.answer(200, &format!("{{\"token\":\"{token}\"}}"));
    }

    /// The name traces show for `token`.
    fn token_name<'a>(&'a self, token: &'a str) -> &'a str {
        self.token_names.get(token).map_or(token, String::as_str)
    }

    /// Whether `token` was issued by an earlier incarnation of Feldera.
    fn token_is_stale(&self, token: &str) -> bool {
        crate::feldera::token::token_origin(token)
            .is_some_and(|o| o.incarnation != format!("incarnation-{}", self.incarnation))
    }

    /// Feldera restarts without fault tolerance: its tables come back empty, what it had
    /// accepted and not completed is lost, its endpoints are numbered afresh, and tokens of
    /// the earlier incarnation answer 410 from now on (`step`).
    pub fn restart_feldera(&mut self) {
        self.new_incarnation("empty");
    }

    fn new_incarnation(&mut self, how: &str) {
        self.incarnation += 1;
        self.note(format!(
            "{} -- Feldera restarts {how} (incarnation {})",
            self.at(),
            self.incarnation
        ));
        self.endpoints.clear();
        self.bodies_by_token.clear();
        self.transaction_open = false;
        self.tokens_in_transaction.clear();
        self.feldera.empty_all();
    }

    /// Feldera restarts with fault tolerance: like `restart_feldera`, but its tables come
    /// back as the last successful checkpoint held them (empty without one).
    pub fn restart_feldera_from_checkpoint(&mut self) {
        let saved = self
            .checkpoint_succeeded
            .and_then(|n| self.checkpoints.get(n as usize - 1).cloned());
        let how = match self.checkpoint_succeeded {
            Some(n) => format!("from checkpoint #{n}"),
            None => "empty (no checkpoint succeeded)".to_owned(),
        };
        self.new_incarnation(&how);
        if let Some(tables) = saved {
            self.feldera = tables;
        }
        self.checkpoints.clear();
        self.checkpoint_succeeded = None;
    }

    pub fn complete(&mut self) {
        self.answer(200, r#"{"status":"complete","step":1}"#);
    }

    pub fn in_progress(&mut self) {
        self.answer(200, r#"{"status":"inprogress","step":null}"#);
    }

    /// Completion: in progress, but the token's records are in the circuit (a step is
    /// known), as inside a Feldera transaction before its commit finished.
    pub fn in_circuit(&mut self) {
        self.answer(200, r#"{"status":"inprogress","step":3}"#);
    }

    /// Moves the `index`-th waiting request (oldest first) to the front: the next answer
    /// goes to it.
    pub fn bring_forward(&mut self, index: usize) {
        let request = self
            .http
            .remove(index)
            .expect("that many requests wait for an answer");
        self.http.push_front(request);
    }

    /// One line per waiting request, oldest first: its id, method and path.
    pub fn waiting(&self) -> Vec<String> {
        self.http
            .iter()
            .map(|(id, r)| {
                let path = r
                    .url
                    .trim_start_matches("http://feldera:8080/v0/pipelines/p")
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let token = r
                    .url
                    .split("token=")
                    .nth(1)
                    .map(|t| format!(" {}", self.token_name(t)))
                    .unwrap_or_default();
                format!("{} {} {path}{token}", self.shown(*id), r.method)
            })
            .collect()
    }

    /// Accepts and completes every waiting request until none waits (or the pipeline
    /// exited: nobody answers it then).
    pub fn settle(&mut self) {
        while self.exit.is_none() && self.step() {}
    }

    /// Answers the oldest waiting request as Feldera would (ingress accepted, completion
    /// complete, queries from the table model); false when none waits.
    pub fn step(&mut self) -> bool {
        let Some((_, request)) = self.http.front() else {
            return false;
        };
        if request.url.contains("/ingress/") {
            self.accept();
        } else if request.url.ends_with("/start_transaction") {
            if self.transaction_open {
                self.answer(
                    409,
                    r#"{"message":"Cannot perform this operation while there is a transaction in progress","error_code":"TransactionInProgress","details":null}"#,
                );
            } else {
                self.transaction_open = true;
                self.answer(200, r#"{"transaction_id":1}"#);
            }
        } else if request.url.ends_with("/commit_transaction") {
            if self.transaction_open {
                self.transaction_open = false;
                self.tokens_in_transaction.clear();
                self.answer(200, r#""Transaction commit initiated""#);
            } else {
                self.answer(
                    400,
                    r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#,
                );
            }
        } else if request.url.ends_with("/checkpoint") {
            // Feldera accepts the request either way; a pipeline that cannot checkpoint
            // reports it as the failure of that sequence number.
            self.checkpoints.push(self.feldera.clone());
            let body = format!(
                "{{\"checkpoint_sequence_number\":{},\"incarnation_uuid\":\"incarnation-{}\"}}",
                self.checkpoints.len(),
                self.incarnation
            );
            self.answer(200, &body);
        } else if request.url.contains("/checkpoint_status") {
            let current = format!("incarnation-{}", self.incarnation);
            let asked = request.url.split("incarnation_uuid=").nth(1);
            if asked.is_some_and(|u| u != current) {
                self.answer(
                    400,
                    r#"{"message":"the pipeline restarted since the checkpoint was requested","error_code":"IncarnationUuidMismatch","details":null}"#,
                );
            } else if self.fault_tolerance.is_none() {
                let body = format!(
                    "{{\"success\":null,\"failure\":{{\"sequence_number\":{},\"error\":\"The pipeline does not support checkpointing because storage is not configured\",\"failed_at\":\"2026-12-02T00:00:00Z\"}}}}",
                    self.checkpoints.len()
                );
                self.answer(200, &body);
            } else {
                // Every checkpoint requested so far succeeds now.
                let done = self.checkpoints.len() as u64;
                self.checkpoint_succeeded = (done > 0).then_some(done);
                let success = self
                    .checkpoint_succeeded
                    .map_or_else(|| "null".to_owned(), |n| n.to_string());
                self.answer(200, &format!("{{\"success\":{success},\"failure\":null}}"));
            }
        } else if request.url.contains("/query?") {
            let sql = query_sql(&request.url);
            let answer = self
                .feldera
                .query(&sql)
                .unwrap_or_else(|| panic!("the fake Feldera does not model {sql}"));
            self.answer(200, &answer);
        } else if request
            .url
            .split("token=")
            .nth(1)
            .is_some_and(|t| self.tokens_in_transaction.contains(t))
        {
            self.in_progress();
        } else if request
            .url
            .split("token=")
            .nth(1)
            .is_some_and(|t| self.token_is_stale(t))
        {
            self.answer(
                410,
                r#"{"message":"the pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
            );
        } else {
            self.complete();
        }
        true
    }

    /// The SQL of the oldest waiting request, when it is an ad-hoc query.
    pub fn waiting_query(&self) -> Option<String> {
        self.http
            .front()
            .filter(|(_, r)| r.url.contains("/query?"))
            .map(|(_, r)| query_sql(&r.url))
    }

    /// The timeout the oldest waiting request was sent with (the shell enforces it).
    pub fn waiting_timeout_ms(&self) -> Option<u64> {
        self.http.front().map(|(_, r)| r.timeout_ms)
    }

    pub fn waiting_requests(&self) -> usize {
        self.http.len()
    }

    /// Moves the clock forward by `ms`, delivering a tick at every deadline on the way.
    pub fn advance(&mut self, ms: u64) {
        let target = self.now.mono.plus_ms(ms);
        while let Some(deadline) = self.pipeline.poll_timeout().filter(|d| d.at <= target) {
            if self.exit.is_some() {
                return;
            }
            self.set_time(deadline.at.max(self.now.mono));
            self.feed(Input::Tick);
        }
        self.set_time(target);
    }

    fn set_time(&mut self, mono: Mono) {
        let delta = mono.since(self.now.mono) as i64;
        self.now = Now {
            mono,
            wall: PgTime(self.now.wall.0 + delta),
        };
    }

    fn send_backend(&mut self, conn: ConnId, messages: &[BackendMessage]) {
        let bytes: Vec<u8> = messages.iter().flat_map(encode_backend).collect();
        self.replies.push_back(Input::PgBytes {
            conn,
            bytes: Bytes::from(bytes),
        });
    }

    /// Sends XLogData frames carrying pgoutput payloads on the replication connection;
    /// `wal_start` of each is given (zero for Relation messages, as PostgreSQL does).
    pub fn wal(&mut self, what: &str, messages: &[(Lsn, Vec<u8>)]) {
        let conn = self.repl.expect("replication connection");
        let mut bytes = Vec::new();
        for (wal_start, payload) in messages {
            // The server's WAL head runs ahead of what it sends.
            self.wal_end = self.wal_end.max(Lsn(wal_start.0 + 0x1_0000));
            let message = ReplicationMessage::XLogData(XLogData {
                wal_start: *wal_start,
                wal_end: self.wal_end,
                server_time: self.now.wall,
                data: Bytes::from(payload.clone()),
            });
            bytes.extend(replication_frame(&message));
        }
        self.note(format!("{} <- {conn} {what}", self.at()));
        self.feed_replication(conn, bytes);
    }

    fn feed_replication(&mut self, conn: ConnId, bytes: Vec<u8>) {
        if self.chunk == 0 {
            return self.feed(Input::PgBytes {
                conn,
                bytes: Bytes::from(bytes),
            });
        }
        for piece in bytes.chunks(self.chunk) {
            if self.exit.is_some() {
                return;
            }
            self.feed(Input::PgBytes {
                conn,
                bytes: Bytes::copy_from_slice(piece),
            });
        }
    }

    pub fn keepalive(&mut self, wal_end: Lsn, reply_requested: bool) {
        let conn = self.repl.expect("replication connection");
        self.wal_end = self.wal_end.max(wal_end);
        let message = ReplicationMessage::Keepalive(PrimaryKeepalive {
            wal_end,
            server_time: self.now.wall,
            reply_requested,
        });
        let reply = if reply_requested {
            " reply requested"
        } else {
            ""
        };
        self.note(format!(
            "{} <- {conn} keepalive wal_end={wal_end}{reply}",
            self.at()
        ));
        self.feed_replication(conn, replication_frame(&message));
    }

    /// The slot disappears (dropped by someone, or the server was restored from a backup
    /// that predates it): the next session finds no slot.
    pub fn lose_slot(&mut self) {
        self.note(format!("{} -- the slot is gone from the server", self.at()));
        self.pg.slot_confirmed = None;
    }

    /// The fake catalog changes (a partition attached or detached, ...): `what` says how,
    /// in the trace; the next session's startup reads the change.
    pub fn change_catalog(&mut self, what: &str, change: impl FnOnce(&mut FakePg)) {
        self.note(format!("{} -- catalog: {what}", self.at()));
        change(&mut self.pg);
    }

    /// The replication connection breaks.
    pub fn disconnect(&mut self) {
        let conn = self.repl.expect("replication connection");
        self.note(format!("{} <- {conn} connection reset", self.at()));
        self.feed(Input::PgClosed {
            conn,
            error: Some(crate::io::ConnFailure::new(
                crate::io::FailureKind::Broken,
                "connection reset by peer",
            )),
        });
    }

    pub fn shutdown(&mut self) {
        self.note(format!("{} <- signal SIGTERM", self.at()));
        self.feed(Input::Shutdown);
    }
}

/// pgoutput payload builders for scripts.
pub mod wal {
    use super::*;

    /// A Begin whose record starts 0x100 bytes before the commit record at `final_lsn`.
    pub fn begin(final_lsn: u64, xid: u32) -> (Lsn, Vec<u8>) {
        (
            Lsn(final_lsn - 0x100),
            encode::begin(Lsn(final_lsn), PgTime(0), xid),
        )
    }

    pub fn commit(commit_lsn: u64, end_lsn: u64) -> (Lsn, Vec<u8>) {
        (
            Lsn(commit_lsn),
            encode::commit(Lsn(commit_lsn), Lsn(end_lsn), PgTime(0)),
        )
    }

    pub fn relation(table: &FakeTable) -> (Lsn, Vec<u8>) {
        (Lsn::ZERO, encode::relation(&table.relation))
    }

    pub fn insert(at: u64, oid: u32, values: &[Option<&str>]) -> (Lsn, Vec<u8>) {
        (Lsn(at), encode::insert(oid, encode::row(values)))
    }

    pub fn update(
        at: u64,
        oid: u32,
        old: Option<(OldKind, &[Option<&str>])>,
        new: &[Option<&str>],
    ) -> (Lsn, Vec<u8>) {
        (
            Lsn(at),
            encode::update(oid, old.map(|(k, v)| (k, encode::row(v))), encode::row(new)),
        )
    }

    /// An update whose new row has an unchanged-TOAST hole at `hole`.
    pub fn update_with_hole(
        at: u64,
        oid: u32,
        old: Option<(OldKind, &[Option<&str>])>,
        new: &[Option<&str>],
        hole: usize,
    ) -> (Lsn, Vec<u8>) {
        let mut row = encode::row(new);
        row.columns[hole] = crate::pgoutput::Datum::Unchanged;
        (
            Lsn(at),
            encode::update(oid, old.map(|(k, v)| (k, encode::row(v))), row),
        )
    }

    pub fn delete(at: u64, oid: u32, kind: OldKind, old: &[Option<&str>]) -> (Lsn, Vec<u8>) {
        (Lsn(at), encode::delete(oid, kind, encode::row(old)))
    }

    pub fn truncate(at: u64, oids: &[u32]) -> (Lsn, Vec<u8>) {
        (Lsn(at), encode::truncate(oids, false, false))
    }
}

impl Script {
    /// Decodes what the pipeline wrote to PostgreSQL and lets the fake server answer.
    fn on_frontend(&mut self, conn: ConnId, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (message, tail) = split_frontend(rest);
            rest = tail;
            self.on_frontend_message(conn, message);
        }
    }

    fn on_frontend_message(&mut self, conn: ConnId, message: FrontendMessage<'_>) {
        let at = self.at();
        match message {
            FrontendMessage::Startup(params) => {
                self.note(format!("{at} -> {conn} startup {params}"));
                let mut answer = vec![BackendMessage::Authentication(Authentication::Ok)];
                for (name, value) in [
                    ("server_version", self.server_version.as_str()),
                    ("DateStyle", "ISO, MDY"),
                    ("TimeZone", "UTC"),
                    ("IntervalStyle", "postgres"),
                    ("client_encoding", "UTF8"),
                ] {
                    answer.push(BackendMessage::ParameterStatus {
                        name: name.into(),
                        value: value.into(),
                    });
                }
                answer.push(BackendMessage::BackendKeyData(BackendKeyData {
                    process_id: 42,
                    secret_key: Bytes::from_static(&[0, 0, 0, 1]),
                }));
                answer.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
                self.send_backend(conn, &answer);
            }
            FrontendMessage::Query(sql) => {
                self.note(format!("{at} -> {conn} query {}", summarize_sql(sql)));
                let answer = self.answer_query(conn, sql);
                self.send_backend(conn, &answer);
            }
            FrontendMessage::Status(payload) => match decode_status_update(payload) {
                Some(update) => {
                    if !self.frozen {
                        self.confirmed = self.confirmed.max(update.flush);
                    }
                    let reply = if update.reply_requested { " reply" } else { "" };
                    self.note(format!(
                        "{at} -> {conn} status write={} flush={} apply={}{reply}",
                        update.write, update.flush, update.apply
                    ));
                }
                None => self.note(format!("{at} -> {conn} copydata ({} bytes)", payload.len())),
            },
            FrontendMessage::CopyDone => self.note(format!("{at} -> {conn} copydone")),
            FrontendMessage::Terminate => self.note(format!("{at} -> {conn} terminate")),
            FrontendMessage::Other(tag) => {
                self.note(format!("{at} -> {conn} message {:?}", char::from(tag)))
            }
        }
    }

    fn answer_query(&mut self, conn: ConnId, sql: &str) -> Vec<BackendMessage> {
        if sql == crate::wire::frontend::DISABLE_TRANSACTION_TIMEOUT {
            return vec![
                BackendMessage::CommandComplete { tag: "SET".into() },
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ];
        }
        if let Some(answer) = self.answer_snapshot_query(sql) {
            return answer;
        }
        let rows: Vec<Vec<Option<String>>> = if sql == "IDENTIFY_SYSTEM" {
            vec![row(&[&self.pg.system_id, "1", "0/1000000", "app"])]
        } else if sql == "SHOW wal_sender_timeout" {
            vec![row(&[&self.pg.wal_sender_timeout])]
        } else if sql.contains("FROM pg_catalog.pg_publication ORDER BY") {
            // The query puts the one it names first, then the others by name.
            let flag = |on: bool| if on { "t" } else { "f" };
            let (truncate, via_root) = (flag(self.pg.truncate_published), flag(self.pg.via_root));
            let ours = row(&["pub", "f", "t", "t", "t", truncate, via_root]);
            let others = self
                .other_publications
                .iter()
                .map(|name| row(&[name, "f", "t", "t", "t", "t", "f"]));
            self.publication_exists
                .then_some(ours)
                .into_iter()
                .chain(others)
                .collect()
        } else if !self.publication_exists && sql.contains("pg_publication") {
            Vec::new()
        } else if sql.contains("pg_publication_tables") {
            self.published_rows()
        } else if sql.starts_with("WITH RECURSIVE reach") {
            self.types_answer.clone()
        } else if sql.contains("pg_attribute") {
            self.relation_rows(sql)
        } else if sql.contains("pg_last_wal_receive_lsn") {
            vec![self.health_row()]
        } else if sql.contains("FROM pg_catalog.pg_roles r") {
            vec![self.settings.iter().map(|v| Some(v.clone())).collect()]
        } else if sql.contains("has_table_privilege") {
            let granted = if self.select_granted { "t" } else { "f" };
            self.pg
                .tables
                .iter()
                .map(|t| {
                    let mut row = row(&["public", &t.relation.name, granted]);
                    row.push(None);
                    row
                })
                .collect()
        } else if sql.starts_with("SELECT pg_catalog.pg_drop_replication_slot(") {
            self.pg.slot_confirmed = None;
            vec![row(&[""])]
        } else if sql.contains("pg_replication_slots") {
            // Every connection sees what status updates confirmed (a new session's startup
            // too, as on a real server); the control connection of a graceful stop even
            // before the slot is known to exist.
            let other = self.others.contains(&conn);
            let confirmed = if other {
                Some(self.confirmed)
            } else {
                self.pg.slot_confirmed.map(|slot| slot.max(self.confirmed))
            };
            let active_pid = (!other && self.pg.slot_busy_answers > 0)
                .then(|| {
                    self.pg.slot_busy_answers -= 1;
                    "4242".to_owned()
                })
                .or_else(|| self.slot_health.active_pid.map(|p| p.to_string()));
            match confirmed {
                Some(lsn) => vec![vec![
                    Some("slotline_p".into()),
                    Some("pgoutput".into()),
                    Some("logical".into()),
                    Some("app".into()),
                    active_pid,
                    Some(lsn.to_string()),
                    Some(self.slot_health.wal_status.clone()),
                ]],
                None => Vec::new(),
            }
        } else if sql.starts_with("CREATE_REPLICATION_SLOT")
            && sql.contains(" TEMPORARY ")
            && self.pg.temporary_slot_taken > 0
        {
            self.pg.temporary_slot_taken -= 1;
            let name = sql.split_whitespace().nth(1).unwrap_or_default();
            let error = crate::wire::testing::pg_error(
                "ERROR",
                "42710",
                &format!("replication slot {name} already exists"),
            );
            return vec![
                BackendMessage::ErrorResponse(Box::new(error)),
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ];
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") && sql.contains(" TEMPORARY ") {
            // A temporary slot for added routes: the WAL is at 0/3000 by now, and the
            // slot streamed from stays where it is.
            let name = sql.split_whitespace().nth(1).unwrap_or_default().to_owned();
            vec![row(&[&name, "0/3000", "00000003-00000002-2", "pgoutput"])]
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") {
            self.pg.slot_confirmed = Some(Lsn(0x1000));
            self.confirmed = Lsn(0x1000);
            let snapshot = if sql.contains("'export'") {
                "00000003-00000002-1"
            } else {
                ""
            };
            vec![row(&["slotline_p", "0/1000", snapshot, "pgoutput"])]
        } else if sql.starts_with("START_REPLICATION") {
            return vec![BackendMessage::CopyBothResponse(CopyResponse {
                format: 0,
                column_formats: Vec::new(),
            })];
        } else {
            vec![]
        };
        let width = rows.first().map_or(0, Vec::len);
        let mut answer = vec![BackendMessage::RowDescription(RowDescription {
            fields: (0..width)
                .map(|i| crate::wire::backend::FieldDescription {
                    name: format!("c{i}"),
                    table_oid: 0,
                    column_id: 0,
                    type_oid: 25,
                    type_size: -1,
                    type_modifier: -1,
                    format: 0,
                })
                .collect(),
        })];
        let count = rows.len();
        answer.extend(rows.into_iter().map(|r| {
            BackendMessage::DataRow(DataRow {
                columns: r.into_iter().map(|c| c.map(Bytes::from)).collect(),
            })
        }));
        answer.push(BackendMessage::CommandComplete {
            tag: format!("SELECT {count}"),
        });
        answer.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
        answer
    }

    /// Statements a snapshot sends that do not answer with a plain result set: transaction
    /// control, dropping a slot, the table sizes and COPY.
    fn answer_snapshot_query(&mut self, sql: &str) -> Option<Vec<BackendMessage>> {
        let done = |tags: &[&str], status: TransactionStatus| {
            let mut answer: Vec<BackendMessage> = tags
                .iter()
                .map(|t| BackendMessage::CommandComplete { tag: (*t).into() })
                .collect();
            answer.push(BackendMessage::ReadyForQuery(status));
            answer
        };
        if sql.starts_with("BEGIN") {
            let tags: &[&str] = if sql.contains("SET TRANSACTION SNAPSHOT") {
                &["BEGIN", "SET"]
            } else {
                &["BEGIN"]
            };
            return Some(done(tags, TransactionStatus::InTransaction));
        }
        if sql == "COMMIT" {
            return Some(done(&["COMMIT"], TransactionStatus::Idle));
        }
        if sql.starts_with("DROP_REPLICATION_SLOT") {
            if !sql.ends_with("_add") {
                self.pg.slot_confirmed = None;
            }
            return Some(done(&["DROP_REPLICATION_SLOT"], TransactionStatus::Idle));
        }
        if sql.contains("pg_relation_size") {
            let mut tables: Vec<(usize, &FakeTable)> = self
                .pg
                .tables
                .iter()
                .filter_map(|t| {
                    sql.find(&format!("\"public\".\"{}\"'", t.relation.name))
                        .map(|at| (at, t))
                })
                .collect();
            tables.sort_by_key(|(at, _)| *at);
            let mut answer = vec![BackendMessage::RowDescription(RowDescription {
                fields: (0..5)
                    .map(|i| crate::wire::backend::FieldDescription {
                        name: format!("c{i}"),
                        table_oid: 0,
                        column_id: 0,
                        type_oid: 25,
                        type_size: -1,
                        type_modifier: -1,
                        format: 0,
                    })
                    .collect(),
            })];
            let mut count = 0;
            for (route, (_, table)) in tables.iter().enumerate() {
                let mut heaps = table.heaps();
                heaps.sort_by(|a, b| a.relation.name.cmp(&b.relation.name));
                for heap in heaps {
                    let estimate = heap
                        .estimated_rows
                        .map_or("-1".to_owned(), |e| e.to_string());
                    answer.push(BackendMessage::DataRow(DataRow {
                        columns: [
                            route.to_string(),
                            "public".to_owned(),
                            heap.relation.name.clone(),
                            heap.blocks.to_string(),
                            estimate,
                        ]
                        .into_iter()
                        .map(|c| Some(Bytes::from(c)))
                        .collect(),
                    }));
                    count += 1;
                }
            }
            answer.push(BackendMessage::CommandComplete {
                tag: format!("SELECT {count}"),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        if let Some((head, values)) = sql.split_once(") IN (VALUES ") {
            // A retraction's existence check: which of these keys (first column) exist.
            let table = self.pg.tables.iter().find(|t| {
                head.contains(&format!("FROM \"public\".\"{}\" AS t", t.relation.name))
            })?;
            let asked: Vec<String> = values
                .split("('")
                .skip(1)
                .filter_map(|v| v.split("'::").next())
                .map(|v| v.replace("''", "'"))
                .collect();
            let mut answer = vec![BackendMessage::RowDescription(RowDescription {
                fields: vec![crate::wire::backend::FieldDescription {
                    name: "k".into(),
                    table_oid: 0,
                    column_id: 0,
                    type_oid: 25,
                    type_size: -1,
                    type_modifier: -1,
                    format: 0,
                }],
            })];
            let existing: Vec<&String> = asked
                .iter()
                .filter(|k| {
                    table
                        .heaps()
                        .iter()
                        .flat_map(|heap| &heap.rows)
                        .any(|r| r.first().and_then(|c| c.as_ref()) == Some(*k))
                })
                .collect();
            for key in &existing {
                answer.push(BackendMessage::DataRow(DataRow {
                    columns: vec![Some(Bytes::from((*key).clone()))],
                }));
            }
            answer.push(BackendMessage::CommandComplete {
                tag: format!("SELECT {}", existing.len()),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        if let Some(rest) = sql.strip_prefix("COPY (") {
            let table = self
                .pg
                .tables
                .iter()
                .flat_map(FakeTable::heaps)
                .find(|t| rest.contains(&format!("FROM \"public\".\"{}\"", t.relation.name)))?;
            let bound = |marker: &str| {
                let at = rest.find(marker)? + marker.len();
                rest[at..].split(',').next()?.parse::<u64>().ok()
            };
            let start = bound("ctid >= '(").unwrap_or(0);
            let end = bound("ctid < '(");
            let mut answer = vec![BackendMessage::CopyOutResponse(CopyResponse {
                format: 0,
                column_formats: vec![0; table.relation.columns.len()],
            })];
            let mut count = 0;
            for row in table.rows_in(start, end) {
                let fields: Vec<Option<&[u8]>> = row
                    .iter()
                    .map(|v| v.as_deref().map(str::as_bytes))
                    .collect();
                answer.push(BackendMessage::CopyData(Bytes::from(
                    crate::copy::encode_row(&fields),
                )));
                count += 1;
            }
            answer.push(BackendMessage::CopyDone);
            answer.push(BackendMessage::CommandComplete {
                tag: format!("COPY {count}"),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        None
    }

    /// The slot-health row (`catalog::slot::slot_health_query`'s twelve columns).
    fn health_row(&self) -> Vec<Option<String>> {
        let h = &self.slot_health;
        let mut row = vec![Some(h.current_wal.to_string()), Some(h.keep_mb.to_string())];
        match self.pg.slot_confirmed {
            None => row.extend(std::iter::repeat_n(None, 10)),
            Some(_) => {
                let confirmed = self
                    .confirmed
                    .max(self.pg.slot_confirmed.unwrap_or(Lsn::ZERO));
                let safe = (h.keep_mb >= 0).then(|| {
                    let keep = (h.keep_mb as u64) << 20;
                    let retained = h.current_wal.saturating_distance_from(h.restart_lsn);
                    (keep as i64 - retained as i64).to_string()
                });
                let version = crate::catalog::slot::parse_server_version(&self.server_version)
                    .unwrap_or(150_000);
                let since = |v: u32, value: Option<String>| if version >= v { value } else { None };
                row.extend([
                    Some("slotline_p".into()),
                    Some(if h.active_pid.is_some() { "t" } else { "f" }.into()),
                    h.active_pid.map(|p| p.to_string()),
                    Some(confirmed.to_string()),
                    Some(h.restart_lsn.to_string()),
                    Some(h.wal_status.clone()),
                    safe,
                    since(160_000, Some("f".into())),
                    since(170_000, h.invalidation_reason.clone()),
                    since(170_000, Some("f".into())),
                ]);
            }
        }
        row
    }

    /// `catalog::questions::relation_query`'s answer: the table's columns, then each
    /// partition's.
    fn relation_rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let named = |t: &FakeTable| sql.contains(&format!("\"{}\"'::regclass", t.relation.name));
        let mut answer = Vec::new();
        if let Some(table) = self.pg.tables.iter().find(|t| named(t)) {
            answer.extend(column_rows(&table.relation, None));
            let mut partitions: Vec<&FakePartition> = table.partitions.iter().collect();
            partitions.sort_by(|a, b| a.table.relation.name.cmp(&b.table.relation.name));
            for p in partitions {
                answer.extend(column_rows(&p.table.relation, Some((p.leaf, p.parent))));
            }
        } else if let Some(p) = self
            .pg
            .tables
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| named(&p.table))
        {
            answer.extend(column_rows(&p.table.relation, None));
        }
        answer
    }

    /// `pg_publication_tables` with ancestors: a partitioned table's leaves under
    /// `publish_via_partition_root = false`, else the table.
    fn published_rows(&self) -> Vec<Vec<Option<String>>> {
        let mut rows = Vec::new();
        for table in &self.pg.tables {
            if table.partitions.is_empty() || self.pg.via_root {
                rows.push(vec![
                    Some("public".into()),
                    Some(table.relation.name.clone()),
                    None,
                    None,
                ]);
                continue;
            }
            for leaf in table.partitions.iter().filter(|p| p.leaf) {
                let mut parent = leaf.parent;
                while let Some(ancestor) = std::iter::once(table)
                    .chain(table.partitions.iter().map(|p| &p.table))
                    .find(|t| t.relation.oid == parent)
                {
                    rows.push(row(&[
                        "public",
                        &leaf.table.relation.name,
                        "public",
                        &ancestor.relation.name,
                    ]));
                    parent = table
                        .partitions
                        .iter()
                        .find(|p| p.table.relation.oid == parent)
                        .map_or(0, |p| p.parent);
                }
            }
        }
        rows
    }
}

/// The rows `relation_query` answers for one relation: level 0 for the table itself,
/// 1 with `partition` (leaf, parent) for a partition.
fn column_rows(r: &Relation, partition: Option<(bool, u32)>) -> Vec<Vec<Option<String>>> {
    let identity = match r.replica_identity {
        ReplicaIdentity::Default => "d",
        ReplicaIdentity::Nothing => "n",
        ReplicaIdentity::Full => "f",
        ReplicaIdentity::Index => "i",
    };
    r.columns
        .iter()
        .map(|c| {
            let oid = r.oid.to_string();
            let type_oid = c.type_oid.to_string();
            let flag = if c.in_replica_identity { "t" } else { "f" };
            let mut row = row(&[
                &oid, "public", &r.name, identity, &c.name, &type_oid, "-1", flag,
            ]);
            match partition {
                None => row.extend([Some("0".to_owned()), None, None]),
                Some((leaf, parent)) => row.extend([
                    Some("1".to_owned()),
                    Some(if leaf { "t" } else { "f" }.to_owned()),
                    Some(parent.to_string()),
                ]),
            }
            row
        })
        .collect()
}

/// The decoded `sql` parameter of a query URL.
fn query_sql(url: &str) -> String {
    let encoded = url
        .split("sql=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
        .unwrap_or("");
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8_lossy()
        .into_owned()
}

/// A fake Feldera with every keyed input table of `schema` (single-column keys).
fn fake_feldera_for(schema: &str) -> super::fake_feldera::FakeFeldera {
    let mut feldera = super::fake_feldera::FakeFeldera::default();
    let Ok(Value::Object(schema)) = serde_json::from_str::<Value>(schema) else {
        return feldera;
    };
    for input in schema
        .get("inputs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = input.get("name").and_then(Value::as_str);
        let key = input
            .get("primary_key")
            .and_then(Value::as_array)
            .and_then(|k| k.first())
            .and_then(Value::as_str);
        if let (Some(name), Some(key)) = (name, key) {
            feldera.table(&name.to_lowercase(), &key.to_lowercase());
        }
    }
    feldera
}

/// A server ready for slotline: wal_level logical, room for slots and senders, a role
/// with REPLICATION.
fn default_settings() -> [String; 8] {
    ["logical", "10", "1", "10", "1", "slotline", "t", "f"].map(str::to_owned)
}

fn row(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some((*v).to_owned())).collect()
}

fn summarize_sql(sql: &str) -> String {
    let known = [
        ("pg_relation_size", "<table sizes>"),
        ("pg_publication_tables", "<published tables>"),
        ("pg_catalog.pg_publication ORDER BY", "<publication>"),
        ("WITH RECURSIVE reach", "<column types>"),
        ("pg_attribute", "<table columns>"),
        ("pg_last_wal_receive_lsn", "<slot health>"),
        ("FROM pg_catalog.pg_roles r", "<server settings>"),
        ("has_table_privilege", "<select privileges>"),
        ("pg_replication_slots", "<slot>"),
    ];
    known
        .iter()
        .find(|(needle, _)| sql.contains(needle))
        .map_or_else(|| sql.to_owned(), |(_, short)| (*short).to_owned())
}

#[derive(Debug)]
enum FrontendMessage<'a> {
    Startup(String),
    Query(&'a str),
    Status(&'a [u8]),
    CopyDone,
    Terminate,
    Other(u8),
}

/// Splits one frontend message off `bytes` (test input is well-formed: the core wrote it).
fn split_frontend(bytes: &[u8]) -> (FrontendMessage<'_>, &[u8]) {
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if bytes[0] == 0 {
        // StartupMessage: length, protocol, then name/value pairs.
        let len = be32(bytes);
        let params: Vec<&str> = std::str::from_utf8(&bytes[8..len])
            .unwrap_or("")
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect();
        let mut shown = String::new();
        for pair in params.chunks(2) {
            if let [name, value] = pair {
                if ["user", "database", "replication"].contains(name) {
                    let _ = write!(shown, "{name}={value} ");
                }
            }
        }
        return (
            FrontendMessage::Startup(shown.trim_end().to_owned()),
            &bytes[len..],
        );
    }
    let tag = bytes[0];
    let len = be32(&bytes[1..]);
    let body = &bytes[5..1 + len];
    let rest = &bytes[1 + len..];
    let message = match tag {
        b'Q' => FrontendMessage::Query(std::str::from_utf8(&body[..body.len() - 1]).unwrap_or("")),
        b'd' => FrontendMessage::Status(body),
        b'c' => FrontendMessage::CopyDone,
        b'X' => FrontendMessage::Terminate,
        other => FrontendMessage::Other(other),
    };
    (message, rest)
}
