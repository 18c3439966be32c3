//! The harness: drives a pipeline (or an operator's command) against the fake servers on
//! a virtual clock and records the trace (see the module docs of `testing`).

use super::fake_pg::{default_settings, FakePg, FakeSlotHealth};
use super::feldera::fake_feldera_for;
use crate::config::Config;
use crate::feldera::HttpRequest;
use crate::io::{Command, ConnId, Driver, HttpId, Input, Level, Topic};
use crate::pipeline::Pipeline;
use crate::time::{Mono, Now, PgTime};
use crate::timer::Deadline;
use crate::wire::backend::BackendMessage;
use crate::wire::testing::{encode_backend, replication_frame};
use crate::wire::{PrimaryKeepalive, ReplicationMessage, XLogData};
use crate::Lsn;
use bytes::Bytes;
use std::collections::VecDeque;

/// An operator's command (`check`, `status`, `drop-slot`) driven by the same harness.
pub trait Operation: Driver + std::fmt::Debug {}

impl<T: Driver + std::fmt::Debug> Operation for T {}

/// What the harness drives: the pipeline, or an operator's command.
#[derive(Debug)]
pub(super) enum Machine {
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

/// The harness. See the module docs.
#[derive(Debug)]
pub struct Script {
    pub(super) pipeline: Machine,
    /// How the fake server answers an online copy's chunks and watermarks.
    pub online: super::fake_pg::FakeOnline,
    /// `server_version` as the fake server reports it.
    pub(super) server_version: String,
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
    pub(super) now: Now,
    pub(super) trace: Vec<String>,
    pub(super) pg: FakePg,
    pub(super) schema: String,
    pub(super) repl: Option<ConnId>,
    /// Connections other than the replication connection (snapshot workers, the graceful
    /// stop's control connection).
    pub(super) others: std::collections::BTreeSet<ConnId>,
    /// The state file's contents (`None`: absent).
    pub state_file: Option<Vec<u8>>,
    pub(super) http: VecDeque<(HttpId, HttpRequest)>,
    pub(super) tokens: u32,
    pub(super) last_deadline: Option<Deadline>,
    pub(super) exit: Option<(i32, String)>,
    /// The flush position PostgreSQL last heard.
    pub confirmed: Lsn,
    /// Status updates are lost on the way (the slot stops moving).
    pub(super) frozen: bool,
    /// Replication bytes are delivered in chunks of this many bytes (0 = all at once).
    pub(super) chunk: usize,
    /// Acceptance order, table and body of ingress requests by token, until complete.
    pub(super) bodies_by_token: std::collections::BTreeMap<String, (u32, String, String)>,
    /// Feldera's incarnation (1 at first; `restart_feldera` starts the next) and the input
    /// endpoints it opened, in order: a token names both, as Feldera's do.
    pub(super) incarnation: u32,
    /// The incarnation whose start began the line of checkpoints the current one resumed
    /// from (`global_metrics.initial_start_time`); `None`: the fake reports no start times,
    /// as Feldera before v0.125.
    pub(super) line_began: Option<u32>,
    /// The pipeline's `id` (`pipeline-N`): a pipeline deleted and created again has another.
    pub(super) pipeline_generation: u32,
    pub(super) endpoints: Vec<String>,
    /// Each token issued and the short name traces show for it (`t1`, `t2`, ...).
    pub(super) token_names: std::collections::BTreeMap<String, String>,
    /// A Feldera transaction is open (started through `step`, or left by an earlier run:
    /// set it before the pipeline's first request). Tokens accepted while it is open stay
    /// in progress until `step` answers its commit.
    pub transaction_open: bool,
    pub(super) tokens_in_transaction: std::collections::BTreeSet<String>,
    /// Feldera's tables as completed requests left them.
    pub feldera: super::fake_feldera::FakeFeldera,
    pub(super) completed_bodies: Vec<String>,
    pub(super) wal_end: Lsn,
    /// Answers the fake servers gave while commands were being executed, fed in order once
    /// the pipeline has no command left.
    pub(super) replies: VecDeque<Input>,
    /// Requests to `GET .../stats` are traced (and their deadline shown). Off by default:
    /// the fake Feldera answers them at once with its incarnation, unseen, so that traces
    /// about other things do not fill with the keeper's questions every 2 s.
    pub(super) watch_visible: bool,
    /// `global_metrics.state` in `GET .../stats` answers (`Running` by default).
    pub(super) pipeline_state: String,
    /// The `inputs` list of `GET .../stats` answers, as JSON (`None`: the answers have no
    /// such list, as by default).
    pub(super) stats_inputs: Option<String>,
    /// Requests the trace does not show: traced ids are numbered without them.
    pub(super) unseen_ids: std::collections::BTreeSet<HttpId>,
    /// Feldera's `runtime_config.fault_tolerance.model` (`None`: no fault tolerance).
    pub(super) fault_tolerance: Option<String>,
    /// Checkpoints Feldera was asked for, the tables as each held them (by sequence
    /// number), and the last that succeeded.
    pub(super) checkpoints: Vec<super::fake_feldera::FakeFeldera>,
    pub(super) checkpoint_succeeded: Option<u64>,
    /// Streamed answers (`HttpRequest::streamed`) are cut into pieces of this many bytes
    /// (0: one piece).
    pub(super) piece: usize,
    /// The pieces of streamed answers not yet read, by request.
    pub(super) streams: std::collections::BTreeMap<HttpId, VecDeque<Bytes>>,
    /// A streamed answer fails (`HttpFailed` with this text) when asked for a piece after
    /// this many were delivered.
    pub(super) stream_failure: Option<(usize, String)>,
    /// Pieces delivered, by request.
    pub(super) pieces_delivered: std::collections::BTreeMap<HttpId, usize>,
    /// PostgreSQL does not answer: every connection attempt fails with this message.
    pub pg_down: Option<String>,
    /// Feldera does not answer: every request fails without a status with this message.
    pub feldera_down: Option<String>,
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
            // Set, as an operator sets it: a trace of the default directory unsets it ("").
            ("STATE_DIR", crate::config::DETACHED_STATE_DIR),
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
            online: Default::default(),
            chunk: 0,
            piece: 0,
            streams: std::collections::BTreeMap::new(),
            stream_failure: None,
            pieces_delivered: std::collections::BTreeMap::new(),
            bodies_by_token: std::collections::BTreeMap::new(),
            incarnation: 1,
            line_began: Some(1),
            pipeline_generation: 1,
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
            stats_inputs: None,
            unseen_ids: std::collections::BTreeSet::new(),
            fault_tolerance: None,
            checkpoints: Vec::new(),
            checkpoint_succeeded: None,
            pg_down: None,
            feldera_down: None,
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
    pub(super) fn shown(&self, id: HttpId) -> String {
        let unseen = self.unseen_ids.range(..id).count() as u64;
        format!("http#{}", id.0 - unseen)
    }

    /// `GET .../stats` as Feldera answers it: the state, the current incarnation and, unless
    /// `feldera_reports_no_start_times`, when it and its line of checkpoints started (an
    /// incarnation N starts at 1,700,000,000 + 60 N seconds).
    pub(super) fn stats_body(&self) -> String {
        let started = |incarnation: u32| 1_700_000_000 + 60 * u64::from(incarnation);
        let times = self.line_began.map_or_else(String::new, |line| {
            format!(
                ",\"start_time\":{},\"initial_start_time\":{}",
                started(self.incarnation),
                started(line)
            )
        });
        let inputs = self
            .stats_inputs
            .as_ref()
            .map_or_else(String::new, |list| format!(",\"inputs\":{list}"));
        format!(
            "{{\"global_metrics\":{{\"state\":\"{}\",\"incarnation_uuid\":\"incarnation-{}\"{times}}}{inputs}}}",
            self.pipeline_state, self.incarnation
        )
    }

    /// `GET .../stats` answers carry no `start_time` nor `initial_start_time` (Feldera
    /// before v0.125).
    pub fn feldera_reports_no_start_times(&mut self) {
        self.line_began = None;
    }

    /// The pipeline's `GET` answer, with its `id`.
    pub(super) fn pipeline_body(&self) -> String {
        self.schema.replacen(
            '{',
            &format!("{{\"id\":\"pipeline-{}\",", self.pipeline_generation),
            1,
        )
    }

    /// `GET .../stats` answers show the pipeline in this state (`Running`, `Paused`, ...).
    pub fn set_pipeline_state(&mut self, state: &str) {
        self.pipeline_state = state.to_owned();
    }

    /// `GET .../stats` answers list these HTTP ingress endpoints from now on: `(table,
    /// total_records, buffered_records)` each (Feldera's `inputs`).
    pub fn set_ingress_endpoints(&mut self, endpoints: &[(&str, u64, u64)]) {
        let list: Vec<String> = endpoints
            .iter()
            .map(|(table, total, buffered)| {
                format!(
                    "{{\"endpoint_name\":\"{table}.api-ingress-0123456789abcdef\",\"paused\":false,\
                     \"metrics\":{{\"total_records\":{total},\"total_bytes\":{},\"buffered_records\":{buffered}}}}}",
                    total * 40
                )
            })
            .collect();
        self.stats_inputs = Some(format!("[{}]", list.join(",")));
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

    /// The script's clock (what the next input will carry).
    pub fn now(&self) -> Now {
        self.now
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

    pub(super) fn at(&self) -> String {
        format!("{:>8}", self.now.mono.to_string())
    }

    pub(super) fn note(&mut self, line: String) {
        self.trace.push(line);
    }

    pub(super) fn feed(&mut self, input: Input) {
        self.handle(input);
        self.drain();
    }

    /// Hands one input to the pipeline, keeping the drive contract.
    fn handle(&mut self, input: Input) {
        if let Machine::Pipeline(pipeline) = &self.pipeline {
            assert!(
                pipeline.drained(),
                "an input arrived before the previous input's commands were drained"
            );
            assert!(
                self.now.mono >= pipeline.clock().0,
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
        if self.watch_visible || pipeline.clock().1 {
            return pipeline.poll_timeout();
        }
        crate::timer::TimerKind::ALL
            .into_iter()
            .filter(|kind| *kind != crate::timer::TimerKind::FelderaWatch)
            .filter_map(|why| pipeline.timer(why).map(|at| Deadline { at, why }))
            .min_by_key(|d| d.at)
    }

    fn execute(&mut self, command: Command) {
        let at = self.at();
        match command {
            Command::PgConnect { conn, target, .. } => {
                self.note(format!("{at} -> {conn} connect {target}"));
                if let Some(message) = self.pg_down.clone() {
                    self.note(format!("{at} <- {conn} failed: {message}"));
                    self.replies.push_back(Input::PgClosed {
                        conn,
                        error: Some(crate::io::ConnFailure::new(
                            crate::io::FailureKind::Connect,
                            message,
                        )),
                    });
                    return;
                }
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
}

impl Script {
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

    pub(super) fn send_backend(&mut self, conn: ConnId, messages: &[BackendMessage]) {
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
                data: Bytes::from(self.stamped(payload)),
            });
            bytes.extend(replication_frame(&message));
        }
        self.note(format!("{} <- {conn} {what}", self.at()));
        self.feed_replication(conn, bytes);
    }

    /// A Begin built without a commit time (`wal::begin`) committed just now, as on a live
    /// server; one with a time (`wal::begin_at`) keeps it.
    fn stamped(&self, payload: &[u8]) -> Vec<u8> {
        let mut payload = payload.to_vec();
        // 'B', final_lsn (8 bytes), commit_time (8 bytes), xid (4 bytes).
        if payload.len() == 21 && payload[0] == b'B' && payload[9..17] == [0; 8] {
            payload[9..17].copy_from_slice(&self.now.wall.0.to_be_bytes());
        }
        payload
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

    /// The server is now on `timeline`, whose history file says `history` (`None`: it
    /// cannot be read): a standby promoted, or a server restored to an earlier point.
    pub fn switch_timeline(&mut self, timeline: u32, history: Option<&str>) {
        self.note(format!(
            "{} -- the server is on timeline {timeline} now (history: {})",
            self.at(),
            history.map_or("unreadable".to_owned(), |h| h
                .trim()
                .replace('\t', " ")
                .replace('\n', "; "))
        ));
        self.pg.timeline = timeline;
        self.pg.timeline_history = history.map(str::to_owned);
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
