//! Both shells, driven in-process by the same scripted core, perform the same I/O and feed
//! back the same inputs: connect (TCP refused, Unix socket missing, accepted), bytes both ways,
//! pause/resume, end of stream, a write then close (bytes flushed, nothing reported after
//! the close, not even what the server sent first), HTTP 200/503/refused, a deadline, and
//! exit.
//!
//! The trace keeps what the contract fixes and drops what it leaves free (timing, how bytes
//! are chunked, the completion order of concurrent requests, ports).

mod shell_support;

use bytes::{Bytes, BytesMut};
use shell_support::{refused_port, HttpServer, PeerServer, SinkServer};
use slotline_core::feldera::{HttpRequest, Method};
use slotline_core::io::{Command, ConnId, Driver, HttpId, Input, PgTarget};
use slotline_core::time::{Mono, Now};
use slotline_core::timer::{Deadline, TimerKind};
use slotline_shell::{Clock, RunOptions};
use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Refused,
    Tls,
    Connected,
    Pong,
    PausedTick,
    Held,
    Eof,
    SinkConnected,
    Http,
    Timer,
    Done,
}

/// Where the scripted core sends things.
struct Targets {
    refused_port: u16,
    peer_port: u16,
    sink_port: u16,
    http_ok: String,
    http_fail: String,
}

/// A core that plays one fixed conversation and records what it was fed.
struct Scripted {
    step: Step,
    targets: Targets,
    commands: VecDeque<Command>,
    deadline: Option<Mono>,
    received: BytesMut,
    http: BTreeMap<u64, String>,
    trace: Vec<String>,
    done: mpsc::Sender<Vec<String>>,
}

const PEER: ConnId = ConnId(3);
const SINK: ConnId = ConnId(4);

impl Scripted {
    fn new(targets: Targets, done: mpsc::Sender<Vec<String>>) -> Scripted {
        let mut commands = VecDeque::new();
        commands.push_back(connect(1, targets.refused_port));
        Scripted {
            step: Step::Refused,
            targets,
            commands,
            deadline: None,
            received: BytesMut::new(),
            http: BTreeMap::new(),
            trace: Vec::new(),
            done,
        }
    }

    fn record(&mut self, line: String) {
        self.trace.push(line);
    }

    fn write(&mut self, text: &'static str) {
        self.commands.push_back(Command::PgWrite {
            conn: PEER,
            bytes: Bytes::from_static(text.as_bytes()),
        });
    }

    /// Accumulates bytes of the peer; true once they spell `expected` (then recorded).
    fn bytes_complete(&mut self, bytes: &Bytes, expected: &str) -> bool {
        self.received.extend_from_slice(bytes);
        if self.received.len() < expected.len() {
            return false;
        }
        let got = self.received.split().freeze();
        self.record(format!("pg#3 <- {:?}", String::from_utf8_lossy(&got)));
        true
    }

    fn requests(&mut self) {
        let get = |url: &str| HttpRequest {
            method: Method::Get,
            url: url.to_owned(),
            headers: vec![("X-Test", "yes".to_owned())],
            body: Bytes::new(),
            timeout_ms: 5_000,
            streamed: false,
        };
        let mut post = get(&self.targets.http_fail);
        post.method = Method::Post;
        post.body = Bytes::from_static(b"payload");
        let refused = get(&format!(
            "http://127.0.0.1:{}/ok",
            self.targets.refused_port
        ));
        for (id, request) in [(1, get(&self.targets.http_ok)), (2, post), (3, refused)] {
            let id = HttpId(id);
            self.commands.push_back(Command::Http { id, request });
        }
    }

    fn step(&mut self, now: Now, input: Input) -> Step {
        match (self.step, input) {
            (
                Step::Refused,
                Input::PgClosed {
                    conn: ConnId(1),
                    error,
                },
            ) => {
                let port = self.targets.refused_port.to_string();
                let error = error.map(|e| e.message).unwrap_or_default();
                let error = error.replace(&port, "PORT");
                self.record(format!("pg#1 closed: {error}"));
                let command = Command::PgConnect {
                    conn: ConnId(2),
                    target: PgTarget::Unix {
                        path: "/nonexistent/slotline/.s.PGSQL.5432".into(),
                    },
                    timeout_ms: None,
                };
                self.commands.push_back(command);
                Step::Tls
            }
            (
                Step::Tls,
                Input::PgClosed {
                    conn: ConnId(2),
                    error,
                },
            ) => {
                let error = error.map(|e| e.message).unwrap_or_default();
                self.record(format!("pg#2 closed: {error}"));
                let command = connect(3, self.targets.peer_port);
                self.commands.push_back(command);
                Step::Connected
            }
            (Step::Connected, Input::PgConnected { conn }) if conn == PEER => {
                self.record("pg#3 connected".into());
                self.write("ping\n");
                Step::Pong
            }
            (Step::Pong, Input::PgBytes { conn, bytes }) if conn == PEER => {
                if !self.bytes_complete(&bytes, "pong\n") {
                    return Step::Pong;
                }
                self.commands.push_back(Command::PgPauseRead { conn: PEER });
                self.write("paused\n");
                self.deadline = Some(now.mono.plus_ms(300));
                Step::PausedTick
            }
            (Step::PausedTick, Input::Tick) => {
                if self.deadline.is_some_and(|at| now.mono < at) {
                    return Step::PausedTick; // early (spurious) tick: harmless
                }
                self.deadline = None;
                self.record("tick while paused, nothing read".into());
                self.commands
                    .push_back(Command::PgResumeRead { conn: PEER });
                Step::Held
            }
            (Step::Held, Input::PgBytes { conn, bytes }) if conn == PEER => {
                if !self.bytes_complete(&bytes, "held\n") {
                    return Step::Held;
                }
                self.write("bye\n");
                Step::Eof
            }
            (Step::Eof, Input::PgClosed { conn, error }) if conn == PEER => {
                self.record(format!("pg#3 closed: {error:?}"));
                let command = connect(4, self.targets.sink_port);
                self.commands.push_back(command);
                Step::SinkConnected
            }
            (Step::SinkConnected, Input::PgConnected { conn: SINK }) => {
                self.record("pg#4 connected".into());
                self.commands.push_back(Command::PgWrite {
                    conn: SINK,
                    bytes: Bytes::from_static(b"last\n"),
                });
                self.commands.push_back(Command::PgClose { conn: SINK });
                self.requests();
                Step::Http
            }
            (Step::Http, Input::HttpDone { id, status, body }) => {
                let body = String::from_utf8_lossy(&body).into_owned();
                self.http
                    .insert(id.0, format!("{id} done {status} {body:?}"));
                self.http_step(now)
            }
            (Step::Http, Input::HttpFailed { id, error }) => {
                let nonempty = !error.is_empty();
                self.http
                    .insert(id.0, format!("{id} failed (error given: {nonempty})"));
                self.http_step(now)
            }
            (Step::Timer, Input::Tick) => {
                let at = self.deadline.take().expect("armed");
                self.record(format!("tick, not before the deadline: {}", now.mono >= at));
                self.commands.push_back(Command::Exit {
                    code: 3,
                    reason: "script done".into(),
                });
                let _ = self.done.send(self.trace.clone());
                Step::Done
            }
            (step, input) => {
                self.record(format!("unexpected in {step:?}: {input:?}"));
                step
            }
        }
    }

    fn http_step(&mut self, now: Now) -> Step {
        if self.http.len() < 3 {
            return Step::Http;
        }
        let results: Vec<String> = std::mem::take(&mut self.http).into_values().collect();
        self.trace.extend(results);
        self.deadline = Some(now.mono.plus_ms(150));
        Step::Timer
    }
}

fn connect(conn: u32, port: u16) -> Command {
    Command::PgConnect {
        conn: ConnId(conn),
        target: PgTarget::Tcp {
            host: "127.0.0.1".into(),
            port,
            keepalive: None,
        },
        timeout_ms: None,
    }
}

impl Driver for Scripted {
    fn handle(&mut self, now: Now, input: Input) {
        self.step = self.step(now, input);
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        self.deadline.map(|at| Deadline {
            at,
            why: TimerKind::Linger,
        })
    }
}

type Runner = fn(Scripted, Clock, RunOptions) -> i32;

/// Runs the script through one shell: the exit code, the trace, what the PostgreSQL
/// stand-ins heard and what the HTTP server saw.
fn play(run: Runner) -> Played {
    let peer = PeerServer::start();
    let sink = SinkServer::start();
    let http = HttpServer::start();
    let targets = Targets {
        refused_port: refused_port(),
        peer_port: peer.addr.port(),
        sink_port: sink.addr.port(),
        http_ok: http.url("/ok"),
        http_fail: http.url("/fail"),
    };
    let (done, traces) = mpsc::channel();
    let (exited, codes) = mpsc::channel();
    let core = Scripted::new(targets, done);
    std::thread::spawn(move || {
        let options = RunOptions {
            handle_signals: false,
            http_workers: 2,
            ..RunOptions::default()
        };
        let _ = exited.send(run(core, Clock::start(), options));
    });
    let code = codes
        .recv_timeout(Duration::from_secs(30))
        .expect("the shell finished the script within 30 s");
    let trace = traces.recv().expect("trace");
    let mut seen = http.seen.lock().expect("lock").clone();
    seen.sort_by(|a, b| a.path.cmp(&b.path));
    Played {
        code,
        trace,
        peer_heard: peer.heard(),
        sink_heard: sink.heard(),
        seen,
    }
}

struct Played {
    code: i32,
    trace: Vec<String>,
    peer_heard: Vec<String>,
    sink_heard: Vec<u8>,
    seen: Vec<shell_support::Seen>,
}

fn expected_trace() -> Vec<String> {
    [
        "pg#1 closed: connect to 127.0.0.1:PORT: Connection refused (os error 111)",
        "pg#2 closed: connect to /nonexistent/slotline/.s.PGSQL.5432: \
         No such file or directory (os error 2)",
        "pg#3 connected",
        "pg#3 <- \"pong\\n\"",
        "tick while paused, nothing read",
        "pg#3 <- \"held\\n\"",
        "pg#3 closed: None",
        "pg#4 connected",
        "http#1 done 200 \"fine\"",
        "http#2 done 503 \"busy\"",
        "http#3 failed (error given: true)",
        "tick, not before the deadline: true",
    ]
    .map(String::from)
    .to_vec()
}

fn check_shell(name: &str, run: Runner) -> Vec<String> {
    let Played {
        code,
        trace,
        peer_heard,
        sink_heard,
        seen,
    } = play(run);
    assert_eq!(code, 3, "{name}: run returns the Exit code");
    assert_eq!(trace, expected_trace(), "{name}");
    let expected_peer = ["ping\n", "paused\n", "bye\n"];
    assert_eq!(peer_heard, expected_peer, "{name}: bytes written in order");
    assert_eq!(
        sink_heard, b"last\n",
        "{name}: a write before PgClose is flushed"
    );
    let methods: Vec<(&str, &str)> = seen
        .iter()
        .map(|s| (s.method.as_str(), s.path.as_str()))
        .collect();
    assert_eq!(methods, [("POST", "/fail"), ("GET", "/ok")], "{name}");
    for request in &seen {
        let header = request.headers.iter().find(|(n, _)| n == "x-test");
        assert_eq!(header.map(|(_, v)| v.as_str()), Some("yes"), "{name}");
    }
    assert_eq!(seen[0].body, b"payload", "{name}: POST body sent as given");
    trace
}

#[test]
fn blocking_shell_plays_the_script() {
    check_shell("blocking", slotline_blocking::run::<Scripted>);
}

#[test]
fn tokio_shell_plays_the_script() {
    check_shell("tokio", slotline::run::<Scripted>);
}

#[test]
fn both_shells_feed_the_same_inputs_for_the_same_script() {
    let blocking = check_shell("blocking", slotline_blocking::run::<Scripted>);
    let tokio = check_shell("tokio", slotline::run::<Scripted>);
    assert_eq!(blocking, tokio);
}
