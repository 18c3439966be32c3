//! The whole `Pipeline` under the fuzzer.
//!
//! The input (see `input`) configures a pipeline and then decides, event by event, what
//! the world does: PostgreSQL commits transactions and sends keepalives, replication bytes
//! arrive in chunks of any size (with the occasional damaged frame), Feldera answers any
//! waiting request with any class of answer, time passes (ticks at, past and between
//! deadlines), connections break, the operator asks for a stop. The world is a fake
//! PostgreSQL (`pg`) and a fake Feldera (`feldera`) that answer through the pipeline's
//! public drive contract only (`Driver`, `status()`), so the harness does not depend on how
//! the pipeline is built inside.
//!
//! After every input the harness drains the commands, carries them out, and checks:
//! - the flush position (reported in status updates, and in `status()`) never decreases;
//! - it is always a position the pipeline was told it may acknowledge (the end of a commit
//!   it received, an idle keepalive, the slot's own position), and every commit ending at
//!   or before it has all its changes in bodies Feldera made durable, in any session;
//! - nothing follows `Exit`, and no deadline either; exit 0 only after a stop was asked
//!   for, exit 70 only with a crash point configured;
//! - commands are drained before the next input; ids are never reused; nothing is written
//!   to a closed connection; no log line names a secret;
//! - while work is pending (rows buffered, a batch in flight, a transaction open, a session
//!   ended and not yet replaced, a stop under way) `poll_timeout` gives a deadline;
//! - time never goes backwards, and the pipeline never panics.

mod feldera;
mod input;
mod pg;

use std::collections::{BTreeSet, VecDeque};

use bytes::Bytes;

use crate::config::Config;
use crate::io::{
    Command, ConnFailure, ConnId, Driver, FailureKind as ConnFailureKind, HttpId, Input,
};
use crate::pipeline::Pipeline;
use crate::time::{Mono, Now, PgTime};
use crate::Lsn;
use feldera::{Answer, FakeFeldera};
use input::{Cursor, Event, Setup};
use pg::FakePg;

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
    ("SNAPSHOT_MODE", "never"),
    ("TABLES", "users,items"),
    // The slot monitor's questions are not modelled by the fake server.
    ("SLOT_CHECK_INTERVAL_MS", "0"),
];

/// How many inputs the fake servers and the pipeline may exchange on their own between
/// two fuzz events before the harness calls it a livelock.
const SETTLE_LIMIT: usize = 10_000;

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
    /// Times the pipeline paused reading (backpressure or a stop).
    pub pauses: u32,
    pub exit: Option<i32>,
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
    harness.run.streams = harness.pg.streams_started;
    harness.run.durable_batches = harness.feldera.durable_batches;
    harness.run.commits = harness.feldera.commits;
    harness.run
}

struct Harness {
    pipeline: Pipeline,
    now: Now,
    pg: FakePg,
    feldera: FakeFeldera,
    /// Connection attempts the world answers without a fuzz event: opened, or refused.
    queued: VecDeque<(ConnId, bool)>,
    /// Answers about the state file, fed once the connects are delivered.
    state_answers: VecDeque<Input>,
    conns: BTreeSet<ConnId>,
    closed: BTreeSet<ConnId>,
    requests: BTreeSet<HttpId>,
    crash_configured: bool,
    stop_requested: bool,
    exited: Option<i32>,
    /// The flush `status()` last showed, with its session and whether it streamed: it never
    /// goes backwards while a session streams; a session that starts streaming starts from
    /// the slot, which may be behind it (a status update lost with its connection, a slot
    /// created again).
    status_flush: (u32, bool, Lsn),
    /// How many transactions of the WAL, from the front, are known durable.
    verified: usize,
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
        let pipeline = match Pipeline::new(config, u64::from(setup.seed), now) {
            Ok(pipeline) => pipeline,
            Err(e) => panic!("the pipeline refused a valid configuration: {e}"),
        };
        let mut harness = Harness {
            pipeline,
            now,
            pg: FakePg::new(
                !setup.create_slot,
                setup.slot_busy,
                setup.slow_pg,
                setup.wal_sender_timeout(),
            ),
            feldera: FakeFeldera::new(setup.accepted),
            queued: VecDeque::new(),
            state_answers: VecDeque::new(),
            conns: BTreeSet::new(),
            closed: BTreeSet::new(),
            requests: BTreeSet::new(),
            crash_configured: setup.crash_configured(),
            stop_requested: false,
            exited: None,
            status_flush: (0, false, Lsn::ZERO),
            verified: 0,
            run: PipelineRun::default(),
        };
        harness.drain();
        harness.check();
        harness
    }

    fn apply(&mut self, event: &Event) {
        match event {
            Event::Tx(changes) => self.pg.commit(changes),
            Event::Deliver(max) => {
                if let Some((conn, bytes, eof)) = self.pg.deliver(usize::from(*max)) {
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
                    self.feed(match answer {
                        Answer::Done { status, body } => Input::HttpDone {
                            id,
                            status,
                            body: Bytes::from(body),
                        },
                        Answer::Failed(error) => Input::HttpFailed {
                            id,
                            error: error.to_owned(),
                        },
                    });
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
            Event::RefuseConnects(n) => self.pg.refuse(u32::from(n % 4)),
        }
    }

    /// The server side ends a connection: the pipeline hears of it unless it closed it
    /// itself already.
    fn world_closes(&mut self, conn: ConnId, error: Option<ConnFailure>) {
        self.pg.close(conn);
        if self.closed.insert(conn) {
            self.feed(Input::PgClosed { conn, error });
        }
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
            } else if let Some((conn, bytes)) = self.pg.take_auto() {
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
        match command {
            Command::PgConnect { conn, .. } => {
                assert!(self.conns.insert(conn), "connection id {conn} reused");
                let opened = self.pg.open(conn);
                self.queued.push_back((conn, opened));
            }
            Command::PgWrite { conn, bytes } => {
                self.assert_open(conn, "PgWrite");
                for flush in self.pg.write(conn, &bytes) {
                    self.on_status_update(flush);
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
                if let Err(e) = self.feldera.request(id, request) {
                    panic!("{e}");
                }
            }
            Command::PgStartTls { conn, .. } => {
                panic!("{conn}: TLS was asked for although sslmode=disable")
            }
            Command::ReadState { .. } => self
                .state_answers
                .push_back(Input::StateRead { contents: Ok(None) }),
            Command::WriteState { path, .. } => {
                panic!("SNAPSHOT_MODE=never wrote the state file {path}")
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

    fn on_status_update(&mut self, flush: Lsn) {
        let before = self.run.reported_flush;
        assert!(
            flush >= before,
            "a status update reported flush {flush} after {before}: the flush position went backwards"
        );
        self.run.reported_flush = flush;
        self.run.status_updates += 1;
        self.check_flush(flush, "a status update");
    }

    /// `flush` is a position the pipeline was told, and every commit up to it is durable.
    fn check_flush(&mut self, flush: Lsn, source: &str) {
        assert!(
            self.pg.told.contains(&flush),
            "{source} has flush {flush}: not a commit end, idle keepalive or slot position the pipeline received"
        );
        while let Some(tx) = self.pg.wal.get(self.verified).filter(|tx| tx.end <= flush) {
            for marker in &tx.markers {
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
        let status = self.pipeline.status();
        let (session, streaming, flush) = self.status_flush;
        let same_stream = status.sessions == session && status.streaming == streaming;
        assert!(
            !same_stream || status.flush >= flush,
            "status() flush went backwards within session {session}: {flush} -> {}",
            status.flush
        );
        self.status_flush = (status.sessions, status.streaming, status.flush);
        self.check_flush(status.flush, "status()");
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

#[cfg(test)]
mod seeds;
#[cfg(test)]
mod tests;
