//! What a [`Connection`](super::Connection) reports: events, the fatal error that latches,
//! and the usage errors its callers can make.

use std::fmt;

use bytes::Bytes;

use crate::error::DecodeError;
use crate::wire::{
    BackendKeyData, CopyResponse, DataRow, EncodeError, Notification, PgError, PrimaryKeepalive,
    RowDescription, TransactionStatus, XLogData,
};

/// Something that happened on the connection, in the order the server said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The server agreed to TLS (it answered `S` to SSLRequest): run the handshake, then
    /// call `Connection::tls_established`.
    TlsRequested,
    /// The server accepted the credentials (AuthenticationOk).
    Authenticated,
    /// A run-time parameter the server reports (at startup and whenever it changes).
    ParameterStatus {
        name: String,
        value: String,
    },
    BackendKeyData(BackendKeyData),
    /// Startup finished: the connection accepts queries.
    Ready,
    Notice(Box<PgError>),
    Notification(Notification),
    /// A statement of the running query returns rows with these columns.
    RowDescription(RowDescription),
    DataRow(DataRow),
    /// A statement finished; `tag` is e.g. `SELECT 3`, `COPY 10`, `IDENTIFY_SYSTEM`.
    CommandComplete {
        tag: String,
    },
    /// The query string held no statement.
    EmptyQuery,
    /// The running query failed; the connection is usable again after `QueryDone`.
    QueryError(Box<PgError>),
    /// The query finished (ReadyForQuery); the connection accepts the next one.
    QueryDone {
        transaction: TransactionStatus,
    },
    /// `COPY ... TO STDOUT` started.
    CopyOutStarted(CopyResponse),
    /// One CopyData of a COPY OUT: in text format, one row with its newline.
    CopyOutData(Bytes),
    /// The server finished sending COPY data (CommandComplete follows).
    CopyOutDone,
    /// `START_REPLICATION` switched the connection to CopyBoth streaming.
    StreamStarted(CopyResponse),
    XLogData(XLogData),
    Keepalive(PrimaryKeepalive),
    /// The server sent CopyDone: it ends the stream (answer with `finish_stream`).
    StreamServerDone,
    /// The connection is dead; nothing follows this event.
    Failed(ConnError),
}

/// A fatal connection error. Once one happens the machine latches it: no more events,
/// no more bytes to send, every call refuses with [`UsageError::Failed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// The server reported an error during startup or authentication, or a FATAL/PANIC
    /// at any time.
    Server(Box<PgError>),
    /// A backend message that does not parse. `stream_offset` is the stream position of
    /// the message's tag byte; the inner offset counts from that tag.
    Decode {
        stream_offset: u64,
        error: DecodeError,
    },
    /// A well-formed message the conversation does not allow at this point.
    Unexpected {
        message: &'static str,
        during: &'static str,
    },
    /// The server asks for an authentication method slotline does not implement.
    UnsupportedAuthentication { method: String },
    /// The server asks for a password but the configuration holds none.
    PasswordRequired { method: &'static str },
    /// SCRAM failed on the client side (bad server nonce, wrong server signature, ...).
    Scram(String),
    /// An outgoing message could not be encoded.
    Encode(EncodeError),
    /// The peer closed the connection (end of stream) without being asked to.
    ClosedByServer { during: &'static str },
    /// The server answered `N` to SSLRequest, and the connection may not go on in plain
    /// text.
    TlsNotOffered,
    /// The TLS negotiation broke the protocol (an answer that is neither `S` nor `N`,
    /// bytes before the handshake).
    Tls(String),
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnError::Server(err) => write!(f, "server error: {err}"),
            ConnError::Decode {
                stream_offset,
                error,
            } => write!(
                f,
                "malformed backend message at stream byte {stream_offset}: {error}"
            ),
            ConnError::Unexpected { message, during } => write!(
                f,
                "protocol violation: the server sent {message} during {during}"
            ),
            ConnError::UnsupportedAuthentication { method } => write!(
                f,
                "the server requires {method} authentication; slotline supports trust, \
                 password (cleartext), md5 and scram-sha-256"
            ),
            ConnError::PasswordRequired { method } => write!(
                f,
                "the server requires {method} authentication but no password is configured"
            ),
            ConnError::Scram(reason) => write!(f, "SCRAM-SHA-256 authentication failed: {reason}"),
            ConnError::Encode(err) => write!(f, "{err}"),
            ConnError::ClosedByServer { during } => {
                write!(f, "the server closed the connection during {during}")
            }
            ConnError::TlsNotOffered => f.write_str(
                "the server does not accept TLS connections (it answered N to SSLRequest), \
                 but sslmode requires TLS",
            ),
            ConnError::Tls(reason) => write!(f, "TLS negotiation failed: {reason}"),
        }
    }
}

impl std::error::Error for ConnError {}

/// Where the conversation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Startup and authentication: no query may be sent yet.
    Login,
    /// Idle: a query may be sent.
    Ready,
    /// A query is running.
    Busy,
    /// CopyBoth replication streaming.
    Streaming,
    /// `close` was called; Terminate has been queued.
    Closed,
    /// A fatal error latched.
    Failed,
}

/// A call that the connection cannot honour in its current state. These are the caller's
/// mistakes (or races the caller must order), never the server's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageError {
    /// `query` needs `Phase::Ready`.
    NotReady {
        phase: Phase,
    },
    /// Status updates and `finish_stream` need `Phase::Streaming`.
    NotStreaming {
        phase: Phase,
    },
    /// `finish_stream` was already called (CopyDone sent): no more CopyData may follow.
    StreamAlreadyFinished,
    /// The configuration cannot be sent (a NUL byte in a name or password, ...).
    InvalidConfig(String),
    Encode(EncodeError),
    /// The connection failed earlier with this error.
    Failed(ConnError),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::NotReady { phase } => {
                write!(f, "cannot send a query: the connection is {phase:?}, not Ready")
            }
            UsageError::NotStreaming { phase } => write!(
                f,
                "not streaming: the connection is {phase:?}; status updates and CopyDone need Streaming"
            ),
            UsageError::StreamAlreadyFinished => {
                write!(f, "the stream was already finished (CopyDone sent)")
            }
            UsageError::InvalidConfig(reason) => write!(f, "invalid connection settings: {reason}"),
            UsageError::Encode(err) => write!(f, "{err}"),
            UsageError::Failed(err) => write!(f, "the connection has failed: {err}"),
        }
    }
}

impl std::error::Error for UsageError {}
