//! The boundary between the core and a shell: what a shell feeds in (`Input`), what it
//! must carry out (`Command`), and the drive contract (`Driver`).
//!
//! The drive contract, as in quinn and str0m: after constructing the core and after every
//! `handle`, drain `poll_command` until it returns `None` and execute each command in order
//! (each maps 1:1 to an I/O operation); then ask `poll_timeout` and wait for the first of:
//! bytes or EOF on a PostgreSQL connection, an HTTP result, the deadline, a signal. Feed that
//! back with the current time. A shell never branches on what a command means for the
//! domain (LSNs, batches, retries): every such decision is the core's.

use crate::config::TcpKeepalive;
use crate::feldera::HttpRequest;
use crate::time::Now;
use crate::timer::Deadline;
use bytes::Bytes;
use std::fmt;

/// Identifies one PostgreSQL connection for its whole life. Never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pg#{}", self.0)
    }
}

/// Identifies one HTTP request. Never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpId(pub u64);

impl fmt::Display for HttpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http#{}", self.0)
    }
}

/// Something that happened, reported by a shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The connection asked for by `Command::PgConnect` is open.
    PgConnected { conn: ConnId },
    /// The TLS handshake asked for by `Command::PgStartTls` succeeded: every byte from now
    /// on travels encrypted. `server_certificate` is the server's end-entity certificate
    /// (DER), for SCRAM channel binding.
    PgTlsReady {
        conn: ConnId,
        server_certificate: Option<Bytes>,
    },
    /// Bytes read from a PostgreSQL connection, in order, in any chunking (decrypted, once
    /// TLS is up).
    PgBytes { conn: ConnId, bytes: Bytes },
    /// The connection could not be opened, or its TLS handshake failed, or it broke, or
    /// the server closed it (`error` is `None` on a clean end of stream). No further input
    /// arrives for it.
    PgClosed {
        conn: ConnId,
        error: Option<ConnFailure>,
    },
    /// A piece of the body of a streamed request's successful (2xx) answer
    /// (`HttpRequest::streamed`), in order. After each piece the shell reads no more of the
    /// body until `Command::HttpRead` for the same id; the answer then ends with `HttpDone`
    /// (an empty body: every byte came in pieces) or `HttpFailed`. A streamed request whose
    /// answer is not a success comes whole, as `HttpDone`, like any other.
    HttpChunk { id: HttpId, bytes: Bytes },
    /// An HTTP request finished with a status and a body (any status, 5xx included).
    HttpDone {
        id: HttpId,
        status: u16,
        body: Bytes,
    },
    /// An HTTP request failed without an answer (refused, reset, timed out).
    HttpFailed { id: HttpId, error: String },
    /// A deadline from `poll_timeout` passed (the core compares times itself; a spurious
    /// tick is harmless).
    Tick,
    /// The operator asked for a graceful stop (SIGINT/SIGTERM).
    Shutdown,
    /// The answer to `Command::ReadState`: the file's bytes, `None` when it does not exist,
    /// or why it could not be read (which is never the same as absent).
    StateRead {
        contents: Result<Option<Bytes>, String>,
    },
    /// The answer to `Command::WriteState`: the new contents are durable, or why not.
    StateWritten { result: Result<(), String> },
    /// The answer to `Command::RemoveState`: whether a file was there to remove, or why it
    /// could not be removed.
    StateRemoved { result: Result<bool, String> },
}

/// Where a PostgreSQL server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgTarget {
    Tcp {
        host: String,
        port: u16,
        /// The socket's keepalive; `None` leaves it off (`keepalives=0`).
        keepalive: Option<TcpKeepalive>,
    },
    /// The socket file itself (`<directory>/.s.PGSQL.<port>`).
    Unix { path: String },
}

impl fmt::Display for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgTarget::Tcp { host, port, .. } => write!(f, "{host}:{port}"),
            PgTarget::Unix { path } => f.write_str(path),
        }
    }
}

/// How much of the server's certificate a TLS handshake checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVerify {
    /// Nothing: the session is encrypted, the server is not authenticated.
    None,
    /// The chain up to a trusted root, not the host name (`verify-ca`).
    Chain,
    /// The chain and that the certificate names the host (`verify-full`).
    Full,
}

/// Why a connection ended, as far as the shell can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// It could not be opened (refused, unreachable, no such host or socket).
    Connect,
    /// Opening it or its TLS handshake took longer than the command allowed.
    Timeout,
    /// The TLS handshake failed for another reason than the certificate.
    Tls,
    /// The server's certificate was refused (unknown CA, wrong host name, expired).
    TlsVerification,
    /// It broke while reading or writing.
    Broken,
}

/// A connection's failure: its kind, and a message for the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl ConnFailure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> ConnFailure {
        ConnFailure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConnFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Log levels of `Command::Log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// What a log line is about. Decision lines (`Ack`, `Policy`) say why the pipeline did
/// something; shells map each topic to its own `tracing` target (`slotline::ack`, ...), so an
/// operator can ask for exactly those (`RUST_LOG=slotline::ack=debug`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Topic {
    /// Everything else: sessions, startup, warnings.
    General,
    /// Why the flush position moved (which commit through which batch, or an idle keepalive).
    Ack,
    /// Which policy rule decided the reaction to a failure, and the reaction.
    Policy,
    /// Batches cut, sent, durable.
    Batch,
    /// The initial snapshot's progress.
    Snapshot,
    /// Retraction of keys Feldera holds (TRUNCATE, re-snapshot leftovers).
    Retract,
    /// The periodic progress line (`PROGRESS_INTERVAL_SECS`).
    Progress,
}

impl Topic {
    pub const ALL: [Topic; 7] = [
        Topic::General,
        Topic::Ack,
        Topic::Policy,
        Topic::Batch,
        Topic::Snapshot,
        Topic::Retract,
        Topic::Progress,
    ];

    /// The short word traces and log targets use.
    pub fn name(self) -> &'static str {
        match self {
            Topic::General => "log",
            Topic::Ack => "ack",
            Topic::Policy => "policy",
            Topic::Batch => "batch",
            Topic::Snapshot => "snapshot",
            Topic::Retract => "retract",
            Topic::Progress => "progress",
        }
    }
}

/// Something a shell must do, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Open a connection (TCP or Unix socket) and report `PgConnected` or `PgClosed`,
    /// giving up after `timeout_ms` if set. The shell only moves bytes: the core speaks
    /// the protocol, including the TLS negotiation and authentication.
    PgConnect {
        conn: ConnId,
        target: PgTarget,
        timeout_ms: Option<u64>,
    },
    /// Run a TLS handshake over the open connection (the server agreed to TLS), checking
    /// the server as `verify` says, and report `PgTlsReady` or `PgClosed` (with
    /// `FailureKind::TlsVerification` when the server's certificate is refused), giving up
    /// after `timeout_ms` if set. Bytes written after this command are encrypted.
    PgStartTls {
        conn: ConnId,
        server_name: String,
        verify: TlsVerify,
        timeout_ms: Option<u64>,
    },
    /// Write these bytes to the connection, in order.
    PgWrite {
        conn: ConnId,
        bytes: Bytes,
    },
    /// Stop reading from the connection (backpressure) until `PgResumeRead`.
    PgPauseRead {
        conn: ConnId,
    },
    PgResumeRead {
        conn: ConnId,
    },
    /// Close the connection; no input for it is wanted any more.
    PgClose {
        conn: ConnId,
    },
    /// Perform the request and report `HttpDone` or `HttpFailed` with the same id. Requests
    /// may run concurrently; the core orders what must be ordered.
    Http {
        id: HttpId,
        request: HttpRequest,
    },
    /// Read the next piece of a streamed answer's body (after an `HttpChunk` for `id`).
    HttpRead {
        id: HttpId,
    },
    /// Stop a streamed answer: close its connection and report `HttpFailed` for `id` (if
    /// it has not ended already). Nothing more of its body is wanted.
    HttpCancel {
        id: HttpId,
    },
    /// A line for the operator's log (already free of secrets).
    Log {
        level: Level,
        topic: Topic,
        message: String,
    },
    /// Read the state file at `path` and report `StateRead` (absent is not an error).
    ReadState {
        path: String,
    },
    /// Replace the state file at `path` with `contents` atomically and durably (a temporary
    /// file in the same directory, fsync, rename over `path`, fsync of the directory;
    /// create the directory when missing) and report `StateWritten`.
    WriteState {
        path: String,
        contents: Bytes,
    },
    /// Remove the state file at `path` (absent is not an error: report `false`) and report
    /// `StateRemoved`.
    RemoveState {
        path: String,
    },
    /// Write `text` to standard output as it is: the report an operator's command
    /// (`slotline check`, `status`, `drop-slot`) asked for.
    Print {
        text: String,
    },
    /// Exit the process now with this code, without any further I/O.
    Exit {
        code: i32,
        reason: String,
    },
}

/// Exit codes (docs/contract.md, "Exit codes").
pub mod exit {
    /// Graceful stop.
    pub const OK: i32 = 0;
    /// Fatal data or contract error.
    pub const FATAL: i32 = 1;
    /// Usage or configuration error, before any side effect.
    pub const USAGE: i32 = 2;
    /// No durable progress within `NO_PROGRESS_TIMEOUT_SECS`.
    pub const NO_PROGRESS: i32 = 69;
    /// Crash injected by `CRASH_AT`.
    pub const CRASH: i32 = 70;
}

/// The drive contract a shell relies on (see the module docs). The core's `Pipeline`
/// implements it; shells are generic over it so they can be tested with a scripted core.
pub trait Driver {
    /// Feeds one input that happened at `now`.
    fn handle(&mut self, now: Now, input: Input);
    /// The next command to execute, or `None` when drained.
    fn poll_command(&mut self) -> Option<Command>;
    /// When to wake the core with `Input::Tick` if nothing else happens first.
    fn poll_timeout(&self) -> Option<Deadline>;
    /// What the core publishes for metrics and health checks (`None`: nothing, as for the
    /// operator's one-shot commands).
    fn health(&self) -> Option<crate::health::Health> {
        None
    }
}
