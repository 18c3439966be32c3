//! The one-to-one mapping of the core's commands onto a shell's I/O, written once for both
//! shells.
//!
//! The run loop implements `Executor` (open, write, pause, resume, close a socket; start a
//! TLS handshake; start an HTTP request) over a runtime's connections; `dispatch` does the
//! rest the same way everywhere: connection bookkeeping in the `ConnRouter`, logging, and
//! turning `Exit` into a code for the run loop to return. It never interprets what a
//! command means for the domain.

use crate::conns::{timeout_of, ConnRouter};
use crate::logging;
use crate::tls::TlsStart;
use bytes::Bytes;
use slotline_core::feldera::HttpRequest;
use slotline_core::io::{Command, ConnFailure, ConnId, Driver, HttpId, Input, PgTarget, TlsVerify};
use slotline_core::time::Now;
use std::time::Duration;

/// The runtime-specific half of executing commands. Every outcome comes back later as an
/// `Input` through the runtime's input queue; none of these calls waits for the network.
pub trait Executor {
    /// Start opening a connection; report `PgConnected` or `PgClosed`.
    fn connect(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>);
    /// Start a TLS handshake on the connection once the bytes queued before it are
    /// written; report `PgTlsReady` or `PgClosed`. `Err` when it cannot even start.
    fn start_tls(
        &mut self,
        conn: ConnId,
        server_name: &str,
        verify: TlsVerify,
        timeout: Option<Duration>,
    ) -> Result<(), ConnFailure>;
    /// Queue bytes for the connection, in order. A write to an unknown connection (closed
    /// or never opened) is dropped: the core has been or will be told it is closed.
    fn write(&mut self, conn: ConnId, bytes: Bytes);
    /// Stop reading from the socket until `resume`.
    fn pause(&mut self, conn: ConnId);
    fn resume(&mut self, conn: ConnId);
    /// Flush queued writes, then close the socket; report nothing more for it.
    fn close(&mut self, conn: ConnId);
    /// Start the request; report `HttpDone` or `HttpFailed` with the same id (a streamed
    /// one's success first in `HttpChunk` pieces).
    fn http(&mut self, id: HttpId, request: HttpRequest);
    /// Read the next piece of a streamed answer.
    fn http_read(&mut self, id: HttpId);
    /// Close a streamed answer; report its end unless it ended already.
    fn http_cancel(&mut self, id: HttpId);
}

/// How long an exiting shell waits for the bytes the core already asked it to write (the
/// status update of the `after_ack` crash point, a final status update): bounded, because
/// an orchestrator's next signal is SIGKILL.
pub const EXIT_FLUSH: std::time::Duration = std::time::Duration::from_secs(1);

/// The run loop's side of one PostgreSQL connection, as each runtime implements it.
pub trait ConnHandle {
    /// Queue bytes, in order.
    fn write(&self, bytes: Bytes);
    fn pause(&self);
    fn resume(&self);
    /// After the bytes queued so far: run a TLS handshake, then carry every byte over it.
    fn start_tls(&self, tls: TlsStart);
    /// Flush queued writes, then close (bounded by `conns::CLOSE_GRACE`).
    fn close(self);
}

/// The open connections of a shell, by id.
#[derive(Debug)]
pub struct ConnTable<C> {
    conns: std::collections::BTreeMap<ConnId, C>,
}

impl<C> Default for ConnTable<C> {
    fn default() -> Self {
        ConnTable {
            conns: std::collections::BTreeMap::new(),
        }
    }
}

impl<C> ConnTable<C> {
    pub fn insert(&mut self, conn: ConnId, handle: C) {
        self.conns.insert(conn, handle);
    }

    pub fn get(&self, conn: ConnId) -> Option<&C> {
        self.conns.get(&conn)
    }

    pub fn remove(&mut self, conn: ConnId) -> Option<C> {
        self.conns.remove(&conn)
    }

    /// Every open connection, leaving the table empty (before exiting).
    pub fn take_all(&mut self) -> Vec<C> {
        std::mem::take(&mut self.conns).into_values().collect()
    }
}

/// What the run loop does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Return this exit code (the binary then calls `std::process::exit`).
    Exit(i32),
}

/// Executes one command (see the module docs).
pub fn dispatch<E: Executor>(command: Command, exec: &mut E, router: &mut ConnRouter) -> Flow {
    match command {
        Command::PgConnect {
            conn,
            target,
            timeout_ms,
        } => {
            router.open(conn);
            tracing::debug!("{conn}: connecting to {target}");
            exec.connect(conn, target, timeout_of(timeout_ms));
        }
        Command::PgStartTls {
            conn,
            server_name,
            verify,
            timeout_ms,
        } => {
            tracing::debug!("{conn}: starting TLS with {server_name} ({verify:?})");
            if let Err(error) = exec.start_tls(conn, &server_name, verify, timeout_of(timeout_ms)) {
                router.inject(Input::PgClosed {
                    conn,
                    error: Some(error),
                });
            }
        }
        Command::PgWrite { conn, bytes } => exec.write(conn, bytes),
        Command::PgPauseRead { conn } => {
            router.pause(conn);
            exec.pause(conn);
        }
        Command::PgResumeRead { conn } => {
            router.resume(conn);
            exec.resume(conn);
        }
        Command::PgClose { conn } => {
            router.close(conn);
            exec.close(conn);
        }
        Command::Http { id, request } => {
            // Through `redact_userinfo`: a URL's user info is a credential.
            tracing::debug!(
                "{id}: {} {}",
                request.method,
                slotline_core::feldera::redact_userinfo(&request.url)
            );
            exec.http(id, request);
        }
        Command::HttpRead { id } => exec.http_read(id),
        Command::HttpCancel { id } => {
            tracing::debug!("{id}: cancelled");
            exec.http_cancel(id);
        }
        Command::Log {
            level,
            topic,
            message,
        } => logging::emit(level, topic, &message),
        Command::ReadState { path } => {
            tracing::debug!("reading the state file {path}");
            router.inject(Input::StateRead {
                contents: crate::state_file::read(&path),
            });
        }
        Command::WriteState { path, contents } => {
            tracing::debug!("writing the state file {path}");
            router.inject(Input::StateWritten {
                result: crate::state_file::write_atomic(&path, &contents),
            });
        }
        Command::RemoveState { path } => {
            tracing::debug!("removing the state file {path}");
            router.inject(Input::StateRemoved {
                result: crate::state_file::remove(&path),
            });
        }
        Command::Print { text } => {
            use std::io::Write;
            logging::note_report();
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
        Command::Exit { code, reason } => {
            logging::exit_reason(code, &reason);
            return Flow::Exit(code);
        }
    }
    Flow::Continue
}

/// Feeds one input to the core. A connection that ended by itself (`PgClosed`) is released
/// in the runtime too, so its remaining task or thread ends and its handle is dropped.
pub fn feed<D: Driver, E: Executor>(core: &mut D, now: Now, input: Input, exec: &mut E) {
    if let Input::PgClosed { conn, .. } = &input {
        exec.close(*conn);
    }
    core.handle(now, input);
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotline_core::io::{FailureKind, Level};

    /// Records what reached the runtime.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
    }

    impl Executor for Recorder {
        fn connect(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>) {
            self.calls
                .push(format!("connect {conn} {target} {timeout:?}"));
        }
        fn start_tls(
            &mut self,
            conn: ConnId,
            server_name: &str,
            verify: TlsVerify,
            _timeout: Option<Duration>,
        ) -> Result<(), ConnFailure> {
            if verify == TlsVerify::Full {
                return Err(ConnFailure::new(FailureKind::TlsVerification, "no roots"));
            }
            self.calls.push(format!("tls {conn} {server_name}"));
            Ok(())
        }
        fn write(&mut self, conn: ConnId, bytes: Bytes) {
            self.calls.push(format!("write {conn} {bytes:?}"));
        }
        fn pause(&mut self, conn: ConnId) {
            self.calls.push(format!("pause {conn}"));
        }
        fn resume(&mut self, conn: ConnId) {
            self.calls.push(format!("resume {conn}"));
        }
        fn close(&mut self, conn: ConnId) {
            self.calls.push(format!("close {conn}"));
        }
        fn http(&mut self, id: HttpId, _request: HttpRequest) {
            self.calls.push(format!("http {id}"));
        }

        fn http_read(&mut self, id: HttpId) {
            self.calls.push(format!("http read {id}"));
        }

        fn http_cancel(&mut self, id: HttpId) {
            self.calls.push(format!("http cancel {id}"));
        }
    }

    fn connect(conn: u32) -> Command {
        Command::PgConnect {
            conn: ConnId(conn),
            target: PgTarget::Tcp {
                host: "db".into(),
                port: 5432,
                keepalive: None,
            },
            timeout_ms: Some(2000),
        }
    }

    fn start_tls(conn: u32, verify: TlsVerify) -> Command {
        Command::PgStartTls {
            conn: ConnId(conn),
            server_name: "db".into(),
            verify,
            timeout_ms: None,
        }
    }

    #[test]
    fn connect_reaches_the_runtime_with_its_timeout_and_opens_the_route() {
        let (mut exec, mut router) = (Recorder::default(), ConnRouter::default());
        let flow = dispatch(connect(1), &mut exec, &mut router);
        assert_eq!(flow, Flow::Continue);
        assert_eq!(exec.calls, ["connect pg#1 db:5432 Some(2s)"]);
        assert!(router.is_open(ConnId(1)));
        assert_eq!(router.next_ready(), None);
    }

    #[test]
    fn a_handshake_that_cannot_start_is_answered_with_pg_closed() {
        let (mut exec, mut router) = (Recorder::default(), ConnRouter::default());
        dispatch(connect(2), &mut exec, &mut router);
        dispatch(start_tls(2, TlsVerify::None), &mut exec, &mut router);
        assert_eq!(exec.calls[1], "tls pg#2 db");
        assert_eq!(router.next_ready(), None);
        dispatch(start_tls(2, TlsVerify::Full), &mut exec, &mut router);
        match router.next_ready() {
            Some(Input::PgClosed { conn, error }) => {
                assert_eq!(conn, ConnId(2));
                assert_eq!(error.map(|e| e.kind), Some(FailureKind::TlsVerification));
            }
            other => panic!("expected PgClosed, got {other:?}"),
        }
    }

    #[test]
    fn exit_returns_its_code_and_log_touches_no_io() {
        let (mut exec, mut router) = (Recorder::default(), ConnRouter::default());
        let log = Command::Log {
            level: Level::Warn,
            topic: slotline_core::io::Topic::General,
            message: "hello".into(),
        };
        assert_eq!(dispatch(log, &mut exec, &mut router), Flow::Continue);
        let exit = Command::Exit {
            code: 69,
            reason: "no progress".into(),
        };
        assert_eq!(dispatch(exit, &mut exec, &mut router), Flow::Exit(69));
        assert!(exec.calls.is_empty());
    }

    #[test]
    fn pause_resume_close_reach_both_router_and_runtime() {
        let (mut exec, mut router) = (Recorder::default(), ConnRouter::default());
        dispatch(connect(1), &mut exec, &mut router);
        let conn = ConnId(1);
        dispatch(Command::PgPauseRead { conn }, &mut exec, &mut router);
        assert_eq!(router.admit(Input::PgConnected { conn }), None, "held");
        dispatch(Command::PgResumeRead { conn }, &mut exec, &mut router);
        assert_eq!(router.next_ready(), Some(Input::PgConnected { conn }));
        dispatch(Command::PgClose { conn }, &mut exec, &mut router);
        assert!(!router.is_open(conn));
        assert_eq!(
            exec.calls,
            [
                "connect pg#1 db:5432 Some(2s)",
                "pause pg#1",
                "resume pg#1",
                "close pg#1"
            ]
        );
    }
}
