//! The client conversation machine: the TLS negotiation, startup, authentication, simple
//! queries, COPY and CopyBoth streaming over one PostgreSQL connection, without doing any
//! I/O itself.
//!
//! This module routes: it reads the server's unframed answer to an SSLRequest (`tls`),
//! frames and parses incoming bytes, handles the messages that may arrive at any time
//! (notices, parameter changes, notifications, FATAL errors), hands the rest to the phase
//! that owns them (`login`, `query`) and latches fatal errors.
//! It never decides what to query or when to acknowledge: the pipeline does.

mod config;
mod event;
mod login;
mod output;
mod query;
#[cfg(test)]
mod tests;
mod tls;

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

pub use config::{ConnectionConfig, Encryption, Password};
pub use event::{ConnError, Event, Phase, UsageError};
use tls::TlsSession;
pub use tls::{tls_server_end_point, Attempt, TlsPlan};

use crate::error::DecodeError;
use crate::wire::backend::{BackendKeyData, BackendMessage};
use crate::wire::framing::{Frame, Framer};
use crate::wire::frontend::{self, StartupParams, StatusUpdate};
use login::{Login, LoginStep};
use output::Output;
use query::{Query, QueryStep};

#[derive(Debug)]
enum State {
    /// SSLRequest sent: the server's one-byte answer is awaited.
    SslResponse {
        required: bool,
    },
    /// The server agreed to TLS: the shell's handshake is awaited, and no byte may arrive
    /// before it completes.
    TlsHandshake,
    Login(Login),
    Ready,
    Query(Query),
    Closed,
    Failed(ConnError),
}

/// One PostgreSQL connection as a sans-io state machine.
///
/// Drive contract (like quinn-proto's `Connection` or str0m's `Rtc`):
/// 1. `new` queues the StartupMessage, or an SSLRequest when TLS is asked for; write what
///    `poll_transmit` returns once the socket is open. After [`Event::TlsRequested`], run
///    the TLS handshake and call `tls_established`; the StartupMessage follows.
/// 2. Whenever bytes arrive, call `handle_bytes` (any chunking: whole reads, single bytes);
///    when the socket reports end of stream, call `handle_eof`.
/// 3. After every `handle_*` call and every command (`query`, `send_status_update`,
///    `finish_stream`, `close`), drain `poll_transmit` (write the bytes in order) and
///    `poll_event` until both return `None`.
///
/// Fatal errors latch: after [`Event::Failed`] the machine emits nothing else, drops
/// unsent bytes, ignores input and refuses every command with [`UsageError::Failed`];
/// close the socket.
#[derive(Debug)]
pub struct Connection {
    config: ConnectionConfig,
    framer: Framer,
    state: State,
    out: Output,
    parameters: BTreeMap<String, String>,
    backend_key: Option<BackendKeyData>,
    tls: Option<TlsSession>,
}

impl Connection {
    /// A connection in the startup phase with its StartupMessage queued.
    pub fn new(config: ConnectionConfig) -> Result<Connection, UsageError> {
        config.validate().map_err(UsageError::InvalidConfig)?;
        let state = match config.encryption {
            Encryption::Plain => State::Login(Login::AwaitRequest),
            Encryption::Request { required } => State::SslResponse { required },
        };
        let mut conn = Connection {
            config,
            framer: Framer::new(),
            state,
            out: Output::default(),
            parameters: BTreeMap::new(),
            backend_key: None,
            tls: None,
        };
        match conn.state {
            State::SslResponse { .. } => frontend::encode_ssl_request(&mut conn.out.transmit),
            _ => conn.queue_startup().map_err(UsageError::Encode)?,
        }
        Ok(conn)
    }

    fn queue_startup(&mut self) -> Result<(), crate::wire::EncodeError> {
        let keepalive = self
            .config
            .keepalive
            .map(|k| k.server_settings())
            .unwrap_or_default();
        let params = StartupParams {
            user: &self.config.user,
            database: &self.config.database,
            application_name: &self.config.application_name,
            replication: self.config.replication,
            keepalive: &keepalive,
        };
        frontend::encode_startup(&params, &mut self.out.transmit)
    }

    /// The shell's TLS handshake succeeded (`server_certificate`: the server's end-entity
    /// certificate, DER): the StartupMessage goes out, encrypted. Ignored unless the
    /// connection waits for exactly this.
    pub fn tls_established(&mut self, server_certificate: Option<&[u8]>) {
        if !matches!(self.state, State::TlsHandshake) {
            return;
        }
        self.tls = Some(TlsSession {
            end_point: server_certificate.and_then(tls_server_end_point),
        });
        self.state = State::Login(Login::AwaitRequest);
        if let Err(error) = self.queue_startup() {
            self.fail(ConnError::Encode(error));
        }
    }

    /// Whether a TLS session carries the connection.
    pub fn is_encrypted(&self) -> bool {
        self.tls.is_some()
    }

    /// The authentication method the server asked for (`trust`, `md5`,
    /// `SCRAM-SHA-256-PLUS`, ...), once it asked.
    pub fn authentication_method(&self) -> Option<&'static str> {
        self.out.method
    }

    /// Feeds bytes received from the server.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if matches!(self.state, State::Closed | State::Failed(_)) {
            return;
        }
        let bytes = match self.state {
            State::SslResponse { required } => match self.handle_ssl_response(required, bytes) {
                Some(rest) => rest,
                None => return,
            },
            State::TlsHandshake => {
                // Nothing may come between `S` and the handshake: such bytes were not
                // encrypted and may have been injected by a man in the middle.
                return self.fail(ConnError::Tls(tls::UNENCRYPTED_AFTER_S.to_owned()));
            }
            _ => bytes,
        };
        self.framer.push(bytes);
        loop {
            let frame = match self.framer.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(error) => return self.fail(framing_error(error)),
            };
            if let Err(err) = self.handle_frame(frame) {
                return self.fail(err);
            }
            if matches!(self.state, State::Closed | State::Failed(_)) {
                return;
            }
        }
    }

    /// The server's answer to SSLRequest is one unframed byte; returns what follows it to
    /// be framed, or `None` when nothing more is to be read now.
    fn handle_ssl_response<'a>(&mut self, required: bool, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let (&answer, rest) = bytes.split_first()?;
        match tls::read_ssl_response(answer, required) {
            Ok(tls::SslAnswer::Tls) if rest.is_empty() => {
                self.state = State::TlsHandshake;
                self.out.events.push_back(Event::TlsRequested);
                None
            }
            Ok(tls::SslAnswer::Tls) => {
                self.fail(ConnError::Tls(tls::UNENCRYPTED_AFTER_S.to_owned()));
                None
            }
            Ok(tls::SslAnswer::Plain) => {
                self.state = State::Login(Login::AwaitRequest);
                if let Err(error) = self.queue_startup() {
                    self.fail(ConnError::Encode(error));
                    return None;
                }
                Some(rest)
            }
            // An error message instead of an answer: frame it, startup reports it.
            Ok(tls::SslAnswer::Error) => {
                self.state = State::Login(Login::AwaitRequest);
                Some(bytes)
            }
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// The server closed the stream. Expected only after `close`; otherwise fatal.
    pub fn handle_eof(&mut self) {
        let during = self.phase_name();
        if !matches!(self.state, State::Closed | State::Failed(_)) {
            self.fail(ConnError::ClosedByServer { during });
        }
    }

    /// Bytes to write to the server, in order; `None` when there are none.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        if self.out.transmit.is_empty() {
            return None;
        }
        Some(self.out.transmit.split().freeze())
    }

    /// The next event; `None` when there are none.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.events.pop_front()
    }

    /// Sends a simple query (one or more statements separated by `;`). Needs `Phase::Ready`.
    pub fn query(&mut self, sql: &str) -> Result<(), UsageError> {
        match &self.state {
            State::Ready => {}
            State::Failed(err) => return Err(UsageError::Failed(err.clone())),
            _ => {
                return Err(UsageError::NotReady {
                    phase: self.phase(),
                })
            }
        }
        // Encode aside: a refused query must not leave half a message in the queue.
        let mut message = BytesMut::new();
        frontend::encode_query(sql, &mut message).map_err(UsageError::Encode)?;
        self.out.transmit.extend_from_slice(&message);
        self.state = State::Query(Query::AwaitResult);
        Ok(())
    }

    /// Sends a Standby Status Update. Needs `Phase::Streaming` and no `finish_stream` yet.
    pub fn send_status_update(&mut self, update: StatusUpdate) -> Result<(), UsageError> {
        let phase = self.phase();
        stream_of(&mut self.state, phase)?.send_status_update(&update, &mut self.out.transmit)
    }

    /// Ends the client's half of the stream (CopyDone). The server answers with its own
    /// CopyDone (if it has not sent one), CommandComplete and ReadyForQuery.
    pub fn finish_stream(&mut self) -> Result<(), UsageError> {
        let phase = self.phase();
        stream_of(&mut self.state, phase)?.finish(&mut self.out.transmit)
    }

    /// Queues Terminate and stops reading. Idempotent; does nothing after a failure.
    pub fn close(&mut self) {
        if matches!(self.state, State::Closed | State::Failed(_)) {
            return;
        }
        frontend::encode_terminate(&mut self.out.transmit);
        self.state = State::Closed;
    }

    pub fn phase(&self) -> Phase {
        match &self.state {
            State::SslResponse { .. } | State::TlsHandshake | State::Login(_) => Phase::Login,
            State::Ready => Phase::Ready,
            State::Query(Query::CopyBoth(_)) => Phase::Streaming,
            State::Query(_) => Phase::Busy,
            State::Closed => Phase::Closed,
            State::Failed(_) => Phase::Failed,
        }
    }

    /// Run-time parameters the server reported (ParameterStatus), latest value per name.
    pub fn parameters(&self) -> &BTreeMap<String, String> {
        &self.parameters
    }

    /// Process id and secret key for a CancelRequest, once the server sent them.
    pub fn backend_key(&self) -> Option<&BackendKeyData> {
        self.backend_key.as_ref()
    }

    /// The latched fatal error, if any.
    pub fn error(&self) -> Option<&ConnError> {
        match &self.state {
            State::Failed(err) => Some(err),
            _ => None,
        }
    }

    fn phase_name(&self) -> &'static str {
        match &self.state {
            State::SslResponse { .. } => "the TLS negotiation (SSLRequest sent)",
            State::TlsHandshake => "the TLS handshake",
            State::Login(_) => "startup",
            State::Ready => "idle (no query running)",
            State::Query(query) => query.name(),
            State::Closed => "close",
            State::Failed(_) => "failure",
        }
    }

    fn handle_frame(&mut self, frame: Frame) -> Result<(), ConnError> {
        let message = BackendMessage::parse(&frame).map_err(|error| ConnError::Decode {
            stream_offset: frame.offset,
            error,
        })?;
        let message = match message {
            BackendMessage::NoticeResponse(notice) => {
                self.out.events.push_back(Event::Notice(notice));
                return Ok(());
            }
            BackendMessage::ParameterStatus { name, value } => {
                self.parameters.insert(name.clone(), value.clone());
                self.out
                    .events
                    .push_back(Event::ParameterStatus { name, value });
                return Ok(());
            }
            BackendMessage::NotificationResponse(notification) => {
                self.out.events.push_back(Event::Notification(notification));
                return Ok(());
            }
            // The server closes the session right after a FATAL, whatever it was doing.
            BackendMessage::ErrorResponse(err) if err.is_fatal() => {
                return Err(ConnError::Server(err))
            }
            message => message,
        };
        let during = self.phase_name();
        match &mut self.state {
            State::Login(login) => {
                let binding = login::Binding::of(self.tls.as_ref());
                let version = self.parameters.get("server_version").map(String::as_str);
                match login.handle(message, &self.config, binding, version, &mut self.out)? {
                    LoginStep::Continue => {}
                    LoginStep::KeyData(key) => self.backend_key = Some(key),
                    LoginStep::Ready => self.state = State::Ready,
                }
            }
            State::Query(query) => {
                if let QueryStep::Done(transaction) =
                    query.handle(message, frame.offset, &mut self.out)?
                {
                    self.out.events.push_back(Event::QueryDone { transaction });
                    self.state = State::Ready;
                }
            }
            State::SslResponse { .. }
            | State::TlsHandshake
            | State::Ready
            | State::Closed
            | State::Failed(_) => {
                return Err(ConnError::Unexpected {
                    message: message.name(),
                    during,
                })
            }
        }
        Ok(())
    }

    /// Latches a fatal error: unsent bytes are dropped, the error is the last event.
    fn fail(&mut self, err: ConnError) {
        self.out.transmit.clear();
        self.out.events.push_back(Event::Failed(err.clone()));
        self.state = State::Failed(err);
        self.framer = Framer::new();
    }
}

/// The CopyBoth state when streaming; the usage error to report otherwise.
fn stream_of(state: &mut State, phase: Phase) -> Result<&mut query::CopyBoth, UsageError> {
    match state {
        State::Query(query) => query.stream_mut().ok_or(UsageError::NotStreaming { phase }),
        State::Failed(err) => Err(UsageError::Failed(err.clone())),
        _ => Err(UsageError::NotStreaming { phase }),
    }
}

/// A framing error is at the length field, one byte after the frame's tag.
fn framing_error(error: DecodeError) -> ConnError {
    let tag_at = error.offset.saturating_sub(1);
    ConnError::Decode {
        stream_offset: tag_at as u64,
        error: DecodeError::new(1, error.kind),
    }
}
