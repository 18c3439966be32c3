//! The whole `Pipeline` under the fuzzer.
//!
//! The input (see `input`) configures a pipeline and then decides, event by event, what
//! the world does. With the snapshot bit the run begins with rows in PostgreSQL, a state
//! file and Feldera tables that match it (or not), under `SNAPSHOT_MODE=initial`: the
//! pipeline copies through an exported snapshot, in ranges, on several connections, and
//! copies again whenever the plan says so (`snapshot`, `export`). Then PostgreSQL commits
//! transactions (TRUNCATEs among their changes) and
//! sends keepalives, the slot is dropped or lost with a restore, replication bytes
//! arrive in chunks of any size (with the occasional damaged frame), Feldera answers any
//! waiting request with any class of answer (checkpoints among them, when the pipeline has
//! fault tolerance), Feldera restarts or checkpoints on its own, time passes (ticks at,
//! past and between deadlines), connections break, the operator asks for a stop, Feldera's
//! pipeline is paused and resumed, and the slotline process is killed (as by SIGKILL, or
//! after it exited) and a new `Pipeline` started with the same configuration
//! (`restart_process`). The world
//! is a fake PostgreSQL (`pg`) and a fake Feldera (`feldera`) that answer through the
//! pipeline's public drive contract only (`Driver`, `health()`), so the harness does not
//! depend on how the pipeline is built inside.
//!
//! After every input the harness drains the commands, carries them out, and checks:
//! - the flush position (reported in status updates, and in `health()`) never decreases
//!   within a session;
//! - it is always a position the pipeline was told it may acknowledge (the end of a commit
//!   it received, an idle keepalive, the slot's own position), and every commit ending at
//!   or before it has all its changes in records Feldera made durable, in any session
//!   (with fault tolerance, records a successful checkpoint held: one that began after
//!   they were processed, which is what a restart resumes from);
//! - a keepalive's position becomes the flush only if the keepalive came between
//!   transactions (and, like every flush, with every commit before it durable when it is
//!   reported: the pipeline may act on a keepalive later than it reads it);
//! - a session streaming from a slot created again reports only that slot's positions: at
//!   or after its creation point and told in its life, never the higher flush of the slot
//!   before it (`check_life_flush`);
//! - a TRUNCATE's commit counts as durable once every key its table held when the
//!   transaction began has a durable delete (the retraction's);
//! - Feldera's tables reflect everything the slot's confirmed position covers: each row
//!   holds the value of the last change the slot covers or of a later one, never an older
//!   one (a replay may re-apply, a late record must not undo);
//! - nothing follows `Exit`, and no deadline either; exit 0 only after a stop was asked
//!   for, exit 70 only with a crash point configured;
//! - commands are drained before the next input; ids are never reused; nothing is written
//!   to a closed connection; no log line names a secret;
//! - while work is pending (rows buffered, a batch in flight, a transaction open, a session
//!   ended and not yet replaced, a stop under way) `poll_timeout` gives a deadline;
//! - time never goes backwards, and the pipeline never panics;
//! - with the snapshot phase (`snapshot`): every slot is created exporting a snapshot; a
//!   state file written `complete` names the consistent point of the slot that exists and
//!   exported the snapshot copied, and only once every row of that snapshot is durable in
//!   Feldera from a record of this copy (with checkpoints: held by the last successful
//!   checkpoint) and Feldera holds nothing else (leftovers retracted); a status update or
//!   `health()` flush passes the consistent point of the current slot's copy only after
//!   that; Feldera's rows are checked against the slot (above) only while the current
//!   slot's copy is recorded complete (without fault tolerance, for Feldera's current
//!   incarnation: another one came back empty and is copied again); state-file reads and
//!   writes may fail, and a failed write leaves the old file;
//! - with a route added since the state file's copy and Feldera's table of it empty, the
//!   start copies it online, in chunks read beside the stream (`pg::online`): each chunk is
//!   read as of the transactions committed when its query arrives, its watermark enters the
//!   WAL when it is asked for, and the answers wait for deliveries like the stream's bytes,
//!   so transactions change the chunk's keys between its read and its watermark and the
//!   stream may carry the watermark before its answer arrives. A chunk is a transaction the
//!   pipeline places one byte past a position it read: a flush there is checked like any
//!   other. The route recorded complete names a position a stream started from, and every
//!   key of its table then holds, as a restart would bring it back, a value the key had at
//!   or after the slot's position (`snapshot::check_online_copies`);
//! - with a publication that filters rows or lists columns (`publication`, chosen by the
//!   setup): every oracle above compares Feldera with what the publication publishes (the
//!   rows inside the filter, without the column the list leaves out), no request to
//!   Feldera carries a value of a left-out column (in its URL or body), and a COPY or a
//!   leftover question that does not apply exactly the publication's filter and columns is
//!   a failure, never answered.
//!
//! Across processes: the fake PostgreSQL keeps the slot (the dead process's connections
//! end; a new session reconnects), the state file is as last written, and the fake Feldera
//! keeps every request of the dead process, answered to nobody: its bodies still land,
//! later, while the new process runs (while paused: at the resume, in any order with the
//! new process's; while running: ahead of a later request to the same table, as an endpoint
//! reads a body at once), and `/stats` shows them (the pipeline `Paused`, or buffered
//! records). The new process's ids are numbered above every id an earlier one used, and the
//! harness feeds nothing to a dead process. The checks on the world above (flush and
//! durability, the tables against the slot, ids, the end) hold across processes; those on
//! one process's behaviour (the `health()` flush within a session, nothing after `Exit`,
//! exit 0 only after a stop asked of it) hold per process.
//!
//! When the input is used up and the pipeline is still running, the world turns healthy
//! (`catch_up`): every byte is delivered, every request answered well, time moves from
//! deadline to deadline. The pipeline must then acknowledge every commit (with the
//! snapshot phase: stream after a copy recorded complete), and Feldera's tables must equal
//! PostgreSQL's as the publication publishes them, row for row. Only with
//! `SNAPSHOT_MODE=never` are some rows outside the promise: a slot created again starts at
//! the server's WAL end, and the contract (docs/contract.md, docs/snapshot.md) leaves what
//! it never streamed (commits the dropped
//! slot had not confirmed, commits while no slot existed, changes a restore took back) to
//! the operator, so a key they touched is compared again only once a later change of it is
//! covered (`Workload::lose`). With the snapshot phase the copy repairs all of that, and
//! nothing is exempt: no ghost row, no stale value.

mod catalog;
mod export;
mod feldera;
mod input;
mod pg;
mod publication;
mod workload;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use crate::config::Config;
use crate::io::{
    Command, ConnFailure, ConnId, Driver, FailureKind as ConnFailureKind, HttpId, Input,
};
use crate::pipeline::Pipeline;
use crate::snapshot::state::{SnapshotPhase, StateFile, StateRoute, FORMAT_VERSION};
use crate::time::{Mono, Now, PgTime};
use crate::Lsn;
use feldera::{Answer, FakeFeldera};
use input::{Cursor, Event, Setup};
use pg::FakePg;
use serde_json::Value;

/// Secrets in the configuration: no log line or exit reason may contain them.
const PG_PASSWORD: &str = "pg-secret-7c1e";
const API_KEY: &str = "api-secret-52d9";

/// The configuration every run shares; `Setup::variables` adds the rest.
const FIXED: [(&str, &str); 8] = [
    (
        "PG_URL",
        "postgres://slotline:pg-secret-7c1e@db:5432/app?sslmode=disable",
    ),
    ("PG_PUBLICATION", "pub"),
    ("FELDERA_URL", feldera::BASE_URL),
    ("FELDERA_PIPELINE", "p"),
    ("FELDERA_API_KEY", API_KEY),
    ("TABLES", "users,items"),
    // The slot monitor's questions are not modelled by the fake server.
    ("SLOT_CHECK_INTERVAL_MS", "0"),
    // A TRUNCATE's retraction reads Feldera's keys two at a time: several pages.
    ("RETRACT_PAGE_ROWS", "2"),
];

thread_local! {
    /// Whether this thread's run prints every input and command (`pipeline_traced`).
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn tracing() -> bool {
    TRACING.with(std::cell::Cell::get)
}

/// `pipeline`, printing every input the pipeline is fed and every command it gives to
/// stderr: the story of one seed.
pub fn pipeline_traced(data: &[u8]) {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            TRACING.with(|t| t.set(false));
        }
    }
    TRACING.with(|t| t.set(true));
    let _off = Off;
    run_pipeline(data);
}

/// How many inputs the fake servers and the pipeline may exchange on their own between
/// two fuzz events before the harness calls it a livelock.
const SETTLE_LIMIT: usize = 10_000;

/// Rounds of a healthy world (deliver, answer, tick) `catch_up` allows before it calls the
/// pipeline stalled; every round moves time to the next deadline at least.
const CATCH_UP_ROUNDS: usize = 400;
/// Seconds of a healthy world after which a working pipeline has made progress: the
/// reconnect backoff's cap (30 s) and then some.
const HEALTHY_GRACE_SECS: u64 = 60;
/// Requests answered per catch-up round: answers may make the pipeline ask again. A
/// healthy Feldera answers everything asked before the next deadline: a smaller bound let
/// a replay of thousands of batches find answers still queued when a 100 ms
/// `FELDERA_COMPLETION_TIMEOUT_MS` expired, and end every session before a checkpoint could
/// hold anything (seed `regression-healthy-world-answers-before-the-next-deadline`).
const CATCH_UP_ANSWERS: usize = 4096;

/// What a run reached, for tests that check the seeds go beyond startup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineRun {
    /// `START_REPLICATION`s the fake server answered.
    pub streams: u32,
    /// Standby status updates the pipeline sent while streaming.
    pub status_updates: u32,
    /// The highest flush position a status update reported.
    pub reported_flush: Lsn,
    /// Bodies Feldera made durable.
    pub durable_batches: u32,
    /// Feldera transactions committed (answered 200).
    pub commits: u32,
    /// Feldera restarts.
    pub restarts: u32,
    /// Records that landed while a newer request to their table was also being read.
    pub interleaved: u32,
    /// The run ended with the pipeline caught up and Feldera's tables equal to PostgreSQL's.
    pub converged: bool,
    /// Times the pipeline paused reading (backpressure or a stop).
    pub pauses: u32,
    /// Ad-hoc queries (a retraction's key scans and counts) answered with their rows.
    pub queries: u32,
    /// Slots the pipeline created (`CREATE_REPLICATION_SLOT`).
    pub slots_created: u32,
    /// One of them began below the highest position an earlier slot confirmed.
    pub slot_below_flush: bool,
    /// Feldera checkpoints that succeeded (with fault tolerance).
    pub checkpoints: u32,
    /// Checkpoint requests that got the result of a checkpoint started before them.
    pub checkpoints_joined: u32,
    /// Feldera restarts that resumed from a checkpoint holding something.
    pub resumed: u32,
    /// Snapshots a slot exported (each the start of a copy).
    pub exports: u32,
    /// State files written `complete` (each checked against the copy).
    pub completes: u32,
    /// State-file reads and writes answered with an error.
    pub state_failures: u32,
    /// Times the slotline process was killed and started again (`Event::ProcessRestart`).
    pub process_restarts: u32,
    /// Times Feldera's pipeline was paused.
    pub feldera_pauses: u32,
    /// Bodies nobody waited for any more (their sender dead, or answered 503 while paused)
    /// that landed records in Feldera afterwards.
    pub orphans_landed: u32,
    /// The last process's exit.
    pub exit: Option<i32>,
    /// Online copy chunks read, and their watermarks written (`pg::online`).
    pub online_chunks: u32,
    pub watermarks: u32,
    /// Transactions that changed a key of a chunk between its read and its watermark.
    pub window_changes: u32,
    /// Watermarks the stream delivered before the copier had their answer.
    pub late_watermarks: u32,
    /// Whether the first one was (`None`: neither arrived).
    pub first_chunk_late: Option<bool>,
    /// A connection's first chunk read went on after a key.
    pub resumed_reads: u32,
    /// Routes recorded copied online (each checked against PostgreSQL).
    pub online_completes: u32,
}

/// The fuzz target: any input returns normally unless the pipeline breaks an invariant.
pub fn pipeline(data: &[u8]) {
    run_pipeline(data);
}

/// Runs one input and says what it reached (panics on a broken invariant).
pub fn run_pipeline(data: &[u8]) -> PipelineRun {
    let mut input = Cursor::new(data);
    let setup = Setup::read(&mut input);
    let mut harness = Harness::start(&setup);
    harness.settle();
    while input.more() {
        let event = Event::read(&mut input);
        harness.apply(&event);
        harness.settle();
    }
    harness.catch_up();
    harness.run.streams = harness.pg.streams_started;
    harness.run.durable_batches = harness.feldera.durable_batches;
    harness.run.commits = harness.feldera.commits;
    harness.run.restarts = harness.feldera.restarts;
    harness.run.interleaved = harness.feldera.interleaved;
    harness.run.queries = harness.feldera.queries;
    harness.run.slots_created = harness.pg.slots_created;
    harness.run.slot_below_flush = harness.pg.created_below;
    (harness.run.checkpoints, harness.run.checkpoints_joined) = harness.feldera.checkpoint_counts();
    harness.run.resumed = harness.feldera.resumed;
    harness.run.feldera_pauses = harness.feldera.pauses;
    harness.run.orphans_landed = harness.feldera.orphans_landed;
    harness.run.exports = harness.pg.exports.len() as u32;
    let online = &harness.pg.online;
    harness.run.online_chunks = online.chunks;
    harness.run.watermarks = online.watermarks;
    harness.run.window_changes = online.window_changes;
    harness.run.late_watermarks = online.late;
    harness.run.first_chunk_late = online.first_late;
    harness.run.resumed_reads = online.resumed_reads;
    harness.run
}

struct Harness {
    pipeline: Pipeline,
    /// What every process of the run starts with (`Event::ProcessRestart`).
    config: Config,
    jitter_seed: u64,
    /// The ids of the current process are its own plus these: ids never collide between
    /// processes (each begins above every id an earlier one used), and an id below them
    /// belongs to a dead process, which is told nothing.
    conn_base: u32,
    http_base: u64,
    /// The highest ids seen (in the world's numbering).
    conn_max: u32,
    http_max: u64,
    now: Now,
    pg: FakePg,
    feldera: FakeFeldera,
    /// Connection attempts the world answers without a fuzz event: opened, or refused.
    queued: VecDeque<(ConnId, bool)>,
    /// Answers about the state file, fed once the connects are delivered.
    state_answers: VecDeque<Input>,
    /// Requests the pipeline wants answered in pieces (`HttpRequest::streamed`).
    streamed: BTreeSet<HttpId>,
    /// The pieces of streamed answers not yet read, by request.
    streams: BTreeMap<HttpId, VecDeque<Bytes>>,
    /// Pieces and ends of streamed answers the pipeline asked for, fed once it has no
    /// command left.
    stream_answers: VecDeque<Input>,
    conns: BTreeSet<ConnId>,
    closed: BTreeSet<ConnId>,
    requests: BTreeSet<HttpId>,
    crash_configured: bool,
    stop_requested: bool,
    exited: Option<i32>,
    /// The flush `health()` last showed, with its session and whether it streamed: it never
    /// goes backwards while a session streams; a session that starts streaming starts from
    /// the slot, which may be behind it (a status update lost with its connection, a slot
    /// created again).
    status_flush: (u32, bool, Lsn),
    /// The slot life whose start a flush already fell back to (see `check`).
    reset_life: u32,
    /// How many transactions of the WAL, from the front, are known durable.
    verified: usize,
    /// The last flush each connection reported.
    reported: BTreeMap<ConnId, Lsn>,
    /// Keepalive positions that arrived while the pipeline could be idle.
    idle_keepalives: BTreeSet<Lsn>,
    /// The slot's position at the last table check.
    tables_checked: Option<Lsn>,
    /// The slot's life (`FakePg::life`) the positions above belong to.
    life: u32,
    /// The last life of the slot in which `health()` showed the pipeline streaming.
    streamed_life: Option<u32>,
    no_progress_secs: u64,
    /// `SNAPSHOT_MODE=initial` (see `snapshot`).
    snapshot: bool,
    /// The state file as the shell would find it, and as parsed.
    disk: Option<(Vec<u8>, StateFile)>,
    /// State-file reads or writes still to fail.
    state_failures: u32,
    /// Requests Feldera had received when the current slot's snapshot was exported: the
    /// copy's records are in later ones.
    copy_floor: u32,
    /// Snapshots exported so far, as the harness last saw.
    exports_seen: usize,
    /// The slot's life whose copy was recorded `complete` after the checks of
    /// `check_complete` passed.
    copy_complete: Option<u32>,
    /// The slot's life in which a route's online copy was last recorded complete, and the
    /// WAL's end then: a TRUNCATE committed before is judged as one during the copy.
    online_done: Option<(u32, Lsn)>,
    run: PipelineRun,
}

impl Harness {
    fn start(setup: &Setup) -> Harness {
        let mut pairs: Vec<(&str, String)> =
            FIXED.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        pairs.extend(setup.variables());
        let config = match Config::from_pairs(pairs) {
            Ok(config) => config,
            Err(e) => panic!("the harness built an invalid configuration: {e}"),
        };
        let now = Now {
            mono: Mono(0),
            wall: PgTime(800_000_000_000_000),
        };
        let pipeline = match Pipeline::new(config.clone(), u64::from(setup.seed), now) {
            Ok(pipeline) => pipeline,
            Err(e) => panic!("the pipeline refused a valid configuration: {e}"),
        };
        let mut pg = FakePg::new(
            !setup.create_slot,
            setup.slot_busy,
            setup.slow_pg,
            setup.wal_sender_timeout(),
        );
        pg.publish(setup.publication());
        let mut feldera = FakeFeldera::new(
            setup.accepted,
            setup.transaction_open(),
            setup.fault_tolerance,
        );
        let disk = setup
            .snapshot
            .then(|| snapshot::before_the_run(setup, &mut pg, &mut feldera))
            .flatten();
        let mut harness = Harness {
            pipeline,
            config,
            jitter_seed: u64::from(setup.seed),
            conn_base: 0,
            http_base: 0,
            conn_max: 0,
            http_max: 0,
            now,
            pg,
            feldera,
            queued: VecDeque::new(),
            state_answers: VecDeque::new(),
            streamed: BTreeSet::new(),
            streams: BTreeMap::new(),
            stream_answers: VecDeque::new(),
            conns: BTreeSet::new(),
            closed: BTreeSet::new(),
            requests: BTreeSet::new(),
            crash_configured: setup.crash_configured(),
            stop_requested: false,
            exited: None,
            status_flush: (0, false, Lsn::ZERO),
            reset_life: 0,
            verified: 0,
            reported: BTreeMap::new(),
            idle_keepalives: BTreeSet::new(),
            tables_checked: None,
            life: 0,
            streamed_life: None,
            no_progress_secs: setup.no_progress_secs(),
            snapshot: setup.snapshot,
            disk,
            state_failures: 0,
            copy_floor: 0,
            exports_seen: 0,
            copy_complete: None,
            online_done: None,
            run: PipelineRun::default(),
        };
        harness.drain();
        harness.check();
        harness
    }

    fn apply(&mut self, event: &Event) {
        match event {
            Event::Tx(changes) => self.pg.commit(changes, self.now.wall),
            Event::Deliver(max) => {
                if let Some((conn, bytes, eof)) = self.pg.deliver(usize::from(*max)) {
                    self.judge_keepalives();
                    self.feed(Input::PgBytes {
                        conn,
                        bytes: Bytes::from(bytes),
                    });
                    if eof {
                        self.world_closes(conn, None);
                    }
                }
            }
            Event::Keepalive(arg) => self.pg.keepalive(8 * u64::from(arg >> 1), arg & 1 != 0),
            Event::Corrupt { kind, tag, body } => self.pg.corrupt(*kind, *tag, body),
            Event::Answer { pick, class } => {
                if let Some((id, answer)) = self.feldera.answer(*pick, *class) {
                    self.deliver_answer(id, answer, *class);
                }
            }
            Event::TickAtDeadline(late_ms) => {
                let due = self.pipeline.poll_timeout().map_or(self.now.mono, |d| d.at);
                self.advance_to(due.max(self.now.mono).plus_ms(u64::from(*late_ms)));
                self.feed(Input::Tick);
            }
            Event::Tick(arg) => {
                let ms = u64::from(*arg) * u64::from(*arg);
                self.advance_to(self.now.mono.plus_ms(ms));
                self.feed(Input::Tick);
            }
            Event::Disconnect(flags) => {
                if let Some(conn) = self.pg.disconnect(*flags) {
                    let error = (flags & 8 == 0).then(|| {
                        ConnFailure::new(ConnFailureKind::Broken, "connection reset by peer")
                    });
                    self.world_closes(conn, error);
                }
            }
            Event::Shutdown => {
                self.stop_requested = true;
                self.feed(Input::Shutdown);
            }
            Event::ServerEnds(arg) => self.pg.server_ends(arg & 1 != 0),
            Event::RefuseConnects(n) => {
                self.pg.refuse(u32::from(n % 4));
                self.state_failures += u32::from(n & 4 != 0);
            }
            Event::Upload { pick, n } => {
                self.feldera.upload(*pick, 1 + n % 4);
                self.check_tables();
            }
            Event::FelderaRestart(flags) => {
                if flags & 2 == 0 || !self.feldera.own_checkpoint() {
                    self.feldera.restart(flags & 1 != 0);
                }
                self.check_tables();
            }
            Event::ProcessRestart(flags) => self.restart_process(*flags),
            Event::FelderaPause(arg) => {
                self.feldera.pause(*arg);
                self.check_tables();
            }
            Event::SlotGone(arg) => {
                for conn in self.pg.slot_gone(*arg) {
                    let error = ConnFailure::new(
                        ConnFailureKind::Broken,
                        "terminating connection due to administrator command",
                    );
                    self.world_closes(conn, Some(error));
                }
                self.check_tables();
            }
        }
    }

    /// The slotline process dies as by SIGKILL and a new one starts (see
    /// `Event::ProcessRestart`): the old one is told nothing more, and what it asked for and
    /// nobody carried out yet is gone (connection attempts, state-file answers, streamed
    /// answers); its connections end (the server may notice the walsender's end late: with
    /// bit 0 the slot answers "active" once more); Feldera keeps every request it holds, to
    /// be answered to nobody. The new process has the same configuration and finds the
    /// state file as last written.
    fn restart_process(&mut self, flags: u8) {
        if tracing() {
            eprintln!("== the process is killed and started again");
        }
        for (conn, _) in std::mem::take(&mut self.queued) {
            self.pg.close(conn);
            self.closed.insert(conn);
        }
        let open: Vec<ConnId> = self.conns.difference(&self.closed).copied().collect();
        for conn in open {
            self.pg.close(conn);
            self.closed.insert(conn);
        }
        if flags & 1 != 0 {
            self.pg.hold_slot();
        }
        self.state_answers.clear();
        self.stream_answers.clear();
        self.streams.clear();
        self.feldera.sender_died();
        self.conn_base = self.conn_max.saturating_add(1);
        self.http_base = self.http_max.saturating_add(1);
        self.pipeline = match Pipeline::new(self.config.clone(), self.jitter_seed, self.now) {
            Ok(pipeline) => pipeline,
            Err(e) => panic!("the pipeline refused a configuration it ran with: {e}"),
        };
        self.exited = None;
        self.stop_requested = false;
        // The new process's sessions count from the start; it has streamed from no slot.
        self.status_flush = (0, false, Lsn::ZERO);
        self.streamed_life = None;
        self.run.exit = None;
        self.run.process_restarts += 1;
        self.drain();
        self.check();
    }

    /// A command of the current process, with its ids in the world's numbering.
    fn in_world(&mut self, mut command: Command) -> Command {
        match &mut command {
            Command::PgConnect { conn, .. }
            | Command::PgStartTls { conn, .. }
            | Command::PgWrite { conn, .. }
            | Command::PgPauseRead { conn }
            | Command::PgResumeRead { conn }
            | Command::PgClose { conn } => {
                conn.0 = conn
                    .0
                    .checked_add(self.conn_base)
                    .expect("connection ids ran out");
                self.conn_max = self.conn_max.max(conn.0);
            }
            Command::Http { id, .. } | Command::HttpRead { id } | Command::HttpCancel { id } => {
                id.0 =
                    id.0.checked_add(self.http_base)
                        .expect("request ids ran out");
                self.http_max = self.http_max.max(id.0);
            }
            _ => {}
        }
        command
    }

    /// An input of the world in the current process's numbering; `None` when it concerns a
    /// dead process (the harness drops everything of one, so that is never expected).
    fn in_process(&self, mut input: Input) -> Option<Input> {
        match &mut input {
            Input::PgConnected { conn }
            | Input::PgTlsReady { conn, .. }
            | Input::PgBytes { conn, .. }
            | Input::PgClosed { conn, .. } => conn.0 = conn.0.checked_sub(self.conn_base)?,
            Input::HttpChunk { id, .. }
            | Input::HttpDone { id, .. }
            | Input::HttpFailed { id, .. } => {
                id.0 = id.0.checked_sub(self.http_base)?;
            }
            _ => {}
        }
        Some(input)
    }

    /// A new life of the slot (dropped, restored, created): the WAL the positions above
    /// counted in is gone, and so are the keepalives judged idle in it.
    fn sync_life(&mut self) {
        if self.life != self.pg.life {
            self.life = self.pg.life;
            self.verified = 0;
            self.idle_keepalives.clear();
            self.tables_checked = None;
        }
    }

    /// The keepalives a delivery carries could be acknowledged if they came between
    /// transactions. Whether the pipeline was idle is judged when it acts on one, which may
    /// be later than it reads it (a backlog behind backpressure, or a stream held while a
    /// TRUNCATE is retracted): so the harness checks what idleness protects, every commit
    /// before the position durable, when the position is reported (`check_flush`).
    fn judge_keepalives(&mut self) {
        for (at, open) in std::mem::take(&mut self.pg.keepalives_read) {
            if !open {
                self.idle_keepalives.insert(at);
            }
        }
    }

    /// The world turns healthy (see the module docs) and the run ends with the oracle.
    fn catch_up(&mut self) {
        if self.stop_requested {
            return;
        }
        self.pg.heal();
        self.feldera.heal();
        self.check_tables();
        self.state_failures = 0;
        let start = self.now.mono;
        for _ in 0..CATCH_UP_ROUNDS {
            if let Some(code) = self.exited {
                // A timeout shorter than the reconnect backoff's cap (30 s) may expire in a
                // healthy world; a longer one only if the pipeline makes no progress there.
                // A healthy world lets a working pipeline progress within a backoff and a
                // few answers, so a longer one that expires after `HEALTHY_GRACE_SECS` of it
                // expired on a stall, even one that began before the world turned healthy.
                let healthy_secs = self.now.mono.since(start) / 1_000_000;
                assert!(
                    code != 69
                        || self.no_progress_secs < 60
                        || healthy_secs < HEALTHY_GRACE_SECS.min(self.no_progress_secs),
                    "exit 69 after {healthy_secs} s of a healthy world: the pipeline stalled"
                );
                return;
            }
            if self.caught_up() {
                return self.compare_tables();
            }
            while let Some((conn, bytes, eof)) = self.pg.deliver(0) {
                self.judge_keepalives();
                self.feed(Input::PgBytes {
                    conn,
                    bytes: Bytes::from(bytes),
                });
                if eof {
                    self.world_closes(conn, None);
                }
                self.settle();
            }
            for _ in 0..CATCH_UP_ANSWERS {
                if !self.feldera.busy() {
                    break;
                }
                self.apply(&Event::Answer { pick: 0, class: 0 });
                self.settle();
            }
            self.apply(&Event::TickAtDeadline(0));
            self.settle();
        }
        let status = self.pipeline.health();
        panic!(
            "the pipeline did not catch up in {CATCH_UP_ROUNDS} rounds of a healthy world: slot at {:?}, last commit {:?}, {status:?}",
            self.pg.confirmed(),
            self.pg.wal.last().map(|tx| tx.end)
        );
    }

    /// Every commit is confirmed to the slot, and nothing is left to send or to answer.
    fn caught_up(&self) -> bool {
        let status = self.pipeline.health();
        let last = self.pg.wal.last().map(|tx| tx.end);
        !self.feldera.busy()
            && status.buffered_rows == 0
            && status.batch_in_flight.is_none()
            && last.is_none_or(|end| self.pg.confirmed() >= Some(end))
            && (!self.snapshot || (status.streaming && self.promised()))
    }

    /// The oracle of a finished run: Feldera's tables equal PostgreSQL's as the publication
    /// publishes them (the rows inside its filter, without the columns its list leaves out),
    /// but for the rows outside the promise (changes that never reached a slot, see
    /// `Workload::lose`). With the snapshot phase nothing is outside the promise: the last
    /// copy covered every change before its consistent point, and the slot every one after
    /// it.
    fn compare_tables(&mut self) {
        let source = self
            .pg
            .workload
            .publication
            .view_rows(&self.pg.workload.tables());
        let target = &self.feldera.tables;
        let wrong: Vec<String> = source
            .keys()
            .chain(target.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|key| self.snapshot || !self.pg.workload.is_lost(key, None))
            .filter(|key| source.get(*key) != target.get(*key))
            .map(|key| {
                format!(
                    "{}[{}]: PostgreSQL {:?}, Feldera {:?}",
                    key.0,
                    key.1,
                    source.get(key),
                    target.get(key)
                )
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "caught up, but Feldera's tables differ from PostgreSQL's as the publication publishes them: {wrong:#?}"
        );
        self.run.converged = true;
    }

    /// Every row of Feldera holds a value PostgreSQL's key had at or after the slot's
    /// confirmed position (see the module docs). Only rows that can have become wrong
    /// since the last check are looked at: those Feldera changed, and those with a change
    /// the slot's position passed since (a position going back only allows more).
    fn check_tables(&mut self) {
        self.sync_life();
        let confirmed = self.pg.confirmed();
        if !self.promised() {
            // A copy is under way or due: Feldera may hold anything until it is complete,
            // which `check_complete` compares in full.
            self.feldera.take_touched();
            self.tables_checked = confirmed;
            return;
        }
        let mut keys: BTreeSet<workload::Key> = self.feldera.take_touched();
        if let Some(upto) = confirmed.filter(|c| Some(*c) > self.tables_checked) {
            keys.extend(self.pg.workload.changed_between(self.tables_checked, upto));
        }
        self.tables_checked = confirmed;
        for key in &keys {
            self.check_row(key, confirmed);
        }
    }

    fn check_row(&self, key: &workload::Key, confirmed: Option<Lsn>) {
        self.check_value(key, self.feldera.tables.get(key), confirmed);
    }

    /// `now`, what Feldera holds of `key`, is a value PostgreSQL's key had at or after
    /// `confirmed` (see `check_tables`).
    fn check_value(&self, key: &workload::Key, now: Option<&Value>, confirmed: Option<Lsn>) {
        let Some(versions) = self.pg.workload.history.get(key) else {
            assert!(
                now.is_none(),
                "Feldera holds {}[{}] = {now:?}, a key PostgreSQL never had",
                key.0,
                key.1
            );
            return;
        };
        let covered = confirmed.and_then(|c| versions.iter().rposition(|(end, _)| *end <= c));
        // A key whose changes never all reached a slot: nothing is promised until the slot
        // covers a later change of it.
        if let Some(until) = self.pg.workload.lost.get(key) {
            if covered.is_none_or(|i| versions[i].0 <= *until) {
                return;
            }
        }
        // What the publication published of each version: nothing of a row outside the
        // filter, none of the columns its list leaves out.
        let publication = &self.pg.workload.publication;
        let published: Vec<(Lsn, Option<Value>)> = versions
            .iter()
            .map(|(end, row)| (*end, row.as_ref().and_then(|r| publication.view(key.0, r))))
            .collect();
        let versions = &published;
        let allowed = &versions[covered.unwrap_or(0)..];
        let ok = allowed.iter().any(|(_, row)| row.as_ref() == now)
            || (covered.is_none() && now.is_none());
        assert!(
            ok,
            "Feldera holds {}[{}] = {now:?} with the slot at {confirmed:?}: the slot covers {:?}, so only {:?} may be there",
            key.0,
            key.1,
            covered.map(|i| &versions[i]),
            allowed.iter().map(|(_, row)| row).collect::<Vec<_>>()
        );
    }

    /// The server side ends a connection: the pipeline hears of it unless it closed it
    /// itself already.
    fn world_closes(&mut self, conn: ConnId, error: Option<ConnFailure>) {
        self.pg.close(conn);
        if self.closed.insert(conn) {
            self.feed(Input::PgClosed { conn, error });
        }
    }

    /// Hands an answer to the pipeline: whole, or, for a streamed request's success, in one
    /// to four pieces cut anywhere (inside a line too), each after the pipeline read on.
    fn deliver_answer(&mut self, id: HttpId, answer: Answer, class: u8) {
        let input = match answer {
            Answer::Done { status, body }
                if self.streamed.contains(&id)
                    && (200..300).contains(&status)
                    && !body.is_empty() =>
            {
                let count = 1 + usize::from(class.rotate_left(3)) % 4;
                let size = body.len().div_ceil(count).max(1);
                let mut pieces: VecDeque<Bytes> = body
                    .as_bytes()
                    .chunks(size)
                    .map(Bytes::copy_from_slice)
                    .collect();
                let first = pieces.pop_front().unwrap_or_default();
                self.streams.insert(id, pieces);
                Input::HttpChunk { id, bytes: first }
            }
            Answer::Done { status, body } => Input::HttpDone {
                id,
                status,
                body: Bytes::from(body),
            },
            Answer::Failed(error) => Input::HttpFailed { id, error },
        };
        self.feed(input);
    }

    /// Delivers what the world answers by itself until nothing is left.
    fn settle(&mut self) {
        for _ in 0..SETTLE_LIMIT {
            if let Some((conn, opened)) = self.queued.pop_front() {
                if opened {
                    self.feed(Input::PgConnected { conn });
                } else {
                    let refused = ConnFailure::new(ConnFailureKind::Connect, "connection refused");
                    self.world_closes(conn, Some(refused));
                }
            } else if let Some(input) = self.state_answers.pop_front() {
                self.feed(input);
            } else if let Some(input) = self.stream_answers.pop_front() {
                self.feed(input);
            } else if let Some((id, body)) = self.feldera.take_stats() {
                self.feed(Input::HttpDone {
                    id,
                    status: 200,
                    body: Bytes::from(body),
                });
            } else if let Some((conn, bytes)) = self.pg.take_auto() {
                self.judge_keepalives();
                self.feed(Input::PgBytes {
                    conn,
                    bytes: Bytes::from(bytes),
                });
            } else {
                return;
            }
        }
        panic!("the pipeline and the fake servers answered each other {SETTLE_LIMIT} times without a pause");
    }

    fn advance_to(&mut self, mono: Mono) {
        assert!(mono >= self.now.mono, "the harness moved time backwards");
        let delta = i64::try_from(mono.since(self.now.mono)).unwrap_or(i64::MAX);
        self.now = Now {
            mono,
            wall: PgTime(self.now.wall.0.saturating_add(delta)),
        };
    }

    fn feed(&mut self, input: Input) {
        if tracing() {
            eprintln!("<- {input:?}");
        }
        let Some(input) = self.in_process(input) else {
            panic!("an input for a dead process was about to be fed to the new one");
        };
        if let Some(command) = self.pipeline.poll_command() {
            panic!(
                "{command:?} was still queued when the next input came: the harness did not drain"
            );
        }
        self.pipeline.handle(self.now, input);
        self.drain();
        self.check();
    }

    fn drain(&mut self) {
        while let Some(command) = self.pipeline.poll_command() {
            if let Some(code) = self.exited {
                panic!("{command:?} after Exit({code})");
            }
            self.execute(command);
        }
    }

    fn execute(&mut self, command: Command) {
        let command = self.in_world(command);
        if tracing() {
            eprintln!("-> {command:?}");
        }
        match command {
            Command::PgConnect { conn, .. } => {
                assert!(self.conns.insert(conn), "connection id {conn} reused");
                let opened = self.pg.open(conn);
                self.queued.push_back((conn, opened));
            }
            Command::PgWrite { conn, bytes } => {
                self.assert_open(conn, "PgWrite");
                for flush in self.pg.write(conn, &bytes) {
                    self.on_status_update(conn, flush);
                }
                if self.pg.exports.len() > self.exports_seen {
                    self.exports_seen = self.pg.exports.len();
                    self.copy_floor = self.feldera.requests_made();
                }
            }
            Command::PgPauseRead { conn } => {
                self.assert_open(conn, "PgPauseRead");
                self.pg.set_paused(conn, true);
                self.run.pauses += 1;
            }
            Command::PgResumeRead { conn } => {
                self.assert_open(conn, "PgResumeRead");
                self.pg.set_paused(conn, false);
            }
            Command::PgClose { conn } => {
                assert!(self.conns.contains(&conn), "PgClose of unknown {conn}");
                self.closed.insert(conn);
                self.pg.close(conn);
            }
            Command::Http { id, request } => {
                assert!(self.requests.insert(id), "request id {id} reused");
                let publication = &self.pg.workload.publication;
                publication.assert_nothing_left_out(&format!("{id}'s URL"), &request.url);
                let body = String::from_utf8_lossy(&request.body);
                publication.assert_nothing_left_out(&format!("{id}'s body"), &body);
                if request.streamed {
                    self.streamed.insert(id);
                }
                if let Err(e) = self.feldera.request(id, request) {
                    panic!("{e}");
                }
            }
            Command::HttpRead { id } => {
                let next = self.streams.get_mut(&id).map(VecDeque::pop_front);
                let input = match next {
                    Some(Some(bytes)) => Input::HttpChunk { id, bytes },
                    Some(None) => {
                        self.streams.remove(&id);
                        Input::HttpDone {
                            id,
                            status: 200,
                            body: Bytes::new(),
                        }
                    }
                    None => panic!("{id}: read on, but no streamed answer of it is open"),
                };
                self.stream_answers.push_back(input);
            }
            Command::HttpCancel { id } => {
                assert!(self.requests.contains(&id), "HttpCancel of unknown {id}");
                if self.streams.remove(&id).is_some() || self.feldera.cancel(id) {
                    self.stream_answers.push_back(Input::HttpFailed {
                        id,
                        error: "cancelled".to_owned(),
                    });
                }
            }
            Command::PgStartTls { conn, .. } => {
                panic!("{conn}: TLS was asked for although sslmode=disable")
            }
            Command::ReadState { .. } => {
                let contents = match self.state_failure() {
                    Some(error) => Err(error),
                    None => Ok(self.disk.as_ref().map(|(b, _)| Bytes::from(b.clone()))),
                };
                self.state_answers.push_back(Input::StateRead { contents });
            }
            Command::WriteState { path, contents } => {
                assert!(
                    self.snapshot,
                    "SNAPSHOT_MODE=never wrote the state file {path}"
                );
                let result = self.write_state(&contents);
                self.state_answers.push_back(Input::StateWritten { result });
            }
            Command::Log { message, .. } => self.assert_no_secret(&message),
            Command::Print { .. } | Command::RemoveState { .. } => {
                panic!("the pipeline printed a report or removed the state file")
            }
            Command::Exit { code, reason } => {
                self.assert_no_secret(&reason);
                match code {
                    0 => assert!(
                        self.stop_requested,
                        "exit 0 without a stop request: {reason}"
                    ),
                    70 => assert!(self.crash_configured, "exit 70 without CRASH_AT: {reason}"),
                    1 | 69 => {}
                    other => panic!("unexpected exit code {other}: {reason}"),
                }
                self.exited = Some(code);
                self.run.exit = Some(code);
            }
        }
    }

    fn assert_open(&self, conn: ConnId, what: &str) {
        assert!(self.conns.contains(&conn), "{what} for unknown {conn}");
        assert!(
            !self.closed.contains(&conn),
            "{what} for {conn} after it was closed"
        );
    }

    fn assert_no_secret(&self, text: &str) {
        for secret in [PG_PASSWORD, API_KEY] {
            assert!(!text.contains(secret), "a secret in the output: {text}");
        }
    }

    /// A status update on `conn`. Its flush never goes backwards on one connection; a new
    /// session starts from the slot's own position, which may be behind what an earlier
    /// session reported (a status update lost with its connection).
    fn on_status_update(&mut self, conn: ConnId, flush: Lsn) {
        let before = self.reported.insert(conn, flush).unwrap_or(Lsn::ZERO);
        assert!(
            flush >= before,
            "a status update on {conn} reported flush {flush} after {before}: the flush position went backwards"
        );
        self.run.reported_flush = self.run.reported_flush.max(flush);
        self.run.status_updates += 1;
        self.check_flush(flush, "a status update");
        if self.pg.conn_life(conn) == Some(self.pg.life) {
            self.check_life_flush(flush, "a status update");
        }
    }

    /// A session streaming from the current slot reports only positions of that slot: at
    /// or after where it was created, and told in its life; never the flush of a slot
    /// before it, which may be higher (a server restored to an earlier position).
    fn check_life_flush(&self, flush: Lsn, source: &str) {
        let start = self.pg.life_start;
        let told = self.pg.life_told.contains(&flush)
            || self.pg.online.placed(flush, &self.pg.life_told, true);
        assert!(
            flush >= start && told,
            "{source} has flush {flush}, but the slot it streams from began at {start} and never told it {flush}: the position of an earlier slot?"
        );
        // Nothing of a copy is acknowledged: the slot stays at its consistent point until
        // the copy is durable and recorded complete (docs/snapshot.md, "Rows").
        let copied = self.pg.export_life == Some(self.pg.life);
        assert!(
            !copied || flush == start || self.copy_complete == Some(self.pg.life),
            "{source} has flush {flush}, past the consistent point {start} of a copy that was never recorded complete with every row durable"
        );
    }

    /// `flush` is a position the pipeline was told, a keepalive's only if it came between
    /// transactions, and every commit up to it is durable.
    fn check_flush(&mut self, flush: Lsn, source: &str) {
        self.sync_life();
        // An online copy's chunk is a transaction placed one byte past a position the
        // pipeline read, between two of the stream's transactions: what its flush covers is
        // checked below like any other.
        let placed = self.pg.online.placed(flush, &self.pg.told, false);
        assert!(
            self.pg.told.contains(&flush) || placed,
            "{source} has flush {flush}: not a commit end, idle keepalive or slot position the pipeline received"
        );
        assert!(
            self.pg.busy_positions.contains(&flush)
                || self.idle_keepalives.contains(&flush)
                || placed,
            "{source} has flush {flush}: a keepalive's position, but every keepalive there came while a transaction was open"
        );
        // A restart that emptied Feldera (no fault tolerance) voids what every earlier
        // acknowledgement stood for, and the pipeline answers it with a new copy from a new slot,
        // not from this one (docs/contract.md, "Feldera restarts"): until it notices, a TRUNCATE
        // rightly finds nothing to delete, and what this slot's flush passes is outside the
        // promise. The copy is then compared in full (`check_complete`).
        let void = self.snapshot && !self.promised_incarnation();
        while let Some(tx) = self.pg.wal.get(self.verified).filter(|tx| tx.end <= flush) {
            // A change of a route copied on its own before this commit is in that copy,
            // which `check_route_copies` compared; the stream rightly skips it.
            let copied = |table: &str| {
                self.disk.as_ref().is_some_and(|(_, file)| {
                    file.routes.iter().any(|route| {
                        route.target == table
                            && route
                                .consistent_point
                                .is_some_and(|point| tx.commit < point)
                    })
                })
            };
            // While a route is copied online Feldera holds only the keys copied or streamed
            // so far, and a TRUNCATE of it rightly deletes only those: its deletes of the
            // others are not due (the copy then reads none of them; the route's check at its
            // end, and the run's, see that none is left).
            let online = |table: &str| {
                self.online_copying(table)
                    || self
                        .online_done
                        .is_some_and(|(life, head)| life == self.pg.life && tx.end <= head)
            };
            for (table, marker) in tx
                .markers
                .iter()
                .filter(|_| !void)
                .filter(|(table, _)| !copied(table))
            {
                if online(table) && tx.retracted.iter().any(|(_, m)| m == marker) {
                    continue;
                }
                assert!(
                    self.feldera.holds(marker),
                    "{source} has flush {flush}, past the commit ending at {} whose change {marker} Feldera has not made durable",
                    tx.end
                );
            }
            self.verified += 1;
        }
    }

    fn check(&mut self) {
        let deadline = self.pipeline.poll_timeout();
        if let Some(code) = self.exited {
            assert!(
                deadline.is_none(),
                "a deadline ({deadline:?}) after Exit({code})"
            );
            return;
        }
        let status = self.pipeline.health();
        let (session, streaming, flush) = self.status_flush;
        let same_stream = status.sessions == session && status.streaming == streaming;
        // A slot created again starts a new history at its consistent point, which may lie
        // below the earlier slot's flush: once per slot, to exactly that point.
        let new_history = status.flush == self.pg.life_start && self.reset_life != self.pg.life;
        if same_stream && status.flush < flush && new_history {
            self.reset_life = self.pg.life;
        } else {
            assert!(
                !same_stream || status.flush >= flush,
                "health() flush went backwards within session {session}: {flush} -> {}",
                status.flush
            );
        }
        self.status_flush = (status.sessions, status.streaming, status.flush);
        // The flush of a session that streamed from an earlier slot (shown until the next
        // session streams: the server may have answered START_REPLICATION already) was only
        // ever a position of that slot.
        let session_life = self.pg.session().and_then(|c| self.pg.conn_life(c));
        if status.streaming && session_life == Some(self.pg.life) {
            self.streamed_life = Some(self.pg.life);
        }
        let current = if status.streaming {
            session_life == Some(self.pg.life)
        } else {
            self.streamed_life == Some(self.pg.life)
        };
        if current {
            self.check_flush(status.flush, "health()");
            if status.streaming {
                self.check_life_flush(status.flush, "health()");
            }
        } else {
            assert!(
                self.pg.told.contains(&status.flush)
                    || self.pg.online.placed(status.flush, &self.pg.told, false),
                "health() has flush {}: a position no slot ever told the pipeline",
                status.flush
            );
        }
        self.check_tables();
        let session = self.pg.session();
        let pending = [
            (status.buffered_rows > 0, "rows are buffered"),
            (status.batch_in_flight.is_some(), "a batch is in flight"),
            (
                session.is_some_and(|c| self.pg.open_tx(c)),
                "a transaction is open",
            ),
            (session.is_none(), "the session ended (backoff)"),
            (self.stop_requested, "a stop is under way"),
        ];
        if let Some((_, why)) = pending.iter().find(|(pending, _)| *pending) {
            assert!(deadline.is_some(), "no deadline while {why}: {status:?}");
        }
    }
}

mod snapshot;

#[cfg(test)]
mod seeds;
#[cfg(test)]
mod tests;
