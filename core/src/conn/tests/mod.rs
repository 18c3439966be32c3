//! Conversation scripts: a scripted server feeds messages, the trace records what the
//! connection reported (`  ` lines) and sent (`-> ` lines). Every script runs twice, once
//! with each step's bytes fed whole and once one byte at a time, and both traces must match.

mod auth;
mod query;
mod stream;
mod timeouts;
mod tls;

use bytes::Bytes;

use super::*;
use crate::wire::backend::{
    Authentication, BackendMessage, CopyResponse, DataRow, FieldDescription, RowDescription,
    TransactionStatus,
};
use crate::wire::testing::{decode_status_update, encode_backend, pg_error};

pub(super) fn config(password: Option<&str>) -> ConnectionConfig {
    ConnectionConfig {
        user: "alice".into(),
        database: "shop".into(),
        password: password.map(Password::new),
        application_name: "slotline".into(),
        replication: false,
        encryption: Encryption::Plain,
        keepalive: None,
    }
}

/// Drives one connection through a script and records the trace.
pub(super) struct Harness {
    pub(super) conn: Connection,
    bytewise: bool,
    pub(super) trace: Vec<String>,
    /// Every frontend message sent after the StartupMessage, as (tag, body).
    pub(super) sent: Vec<(u8, Bytes)>,
    startup_seen: bool,
}

impl Harness {
    pub(super) fn new(config: ConnectionConfig, bytewise: bool) -> Self {
        let mut harness = Harness {
            conn: Connection::new(config).unwrap(),
            bytewise,
            trace: Vec::new(),
            sent: Vec::new(),
            startup_seen: false,
        };
        harness.drain();
        harness
    }

    /// One step of the server: these messages, fed whole or byte by byte.
    pub(super) fn server(&mut self, messages: &[BackendMessage]) {
        let bytes: Vec<u8> = messages.iter().flat_map(encode_backend).collect();
        self.server_bytes(&bytes);
    }

    pub(super) fn server_bytes(&mut self, bytes: &[u8]) {
        if self.bytewise {
            let mut events = Vec::new();
            let mut sent = Vec::new();
            for byte in bytes {
                self.conn.handle_bytes(std::slice::from_ref(byte));
                events.extend(std::iter::from_fn(|| self.conn.poll_event()));
                sent.extend(std::iter::from_fn(|| self.conn.poll_transmit()));
            }
            self.record(events, sent);
        } else {
            self.conn.handle_bytes(bytes);
            self.drain();
        }
    }

    /// Records what the connection has to say after a command or input.
    pub(super) fn drain(&mut self) {
        let events: Vec<Event> = std::iter::from_fn(|| self.conn.poll_event()).collect();
        let sent: Vec<Bytes> = std::iter::from_fn(|| self.conn.poll_transmit()).collect();
        self.record(events, sent);
    }

    fn record(&mut self, events: Vec<Event>, sent: Vec<Bytes>) {
        self.trace
            .extend(events.iter().map(|e| format!("   {}", describe(e))));
        let mut bytes: Vec<u8> = sent.iter().flat_map(|b| b.iter().copied()).collect();
        if !self.startup_seen && !bytes.is_empty() {
            let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            let startup: Vec<u8> = bytes.drain(..len).collect();
            self.trace
                .push(format!("-> {}", describe_startup(&startup)));
            self.startup_seen = true;
        }
        let mut framer = Framer::new();
        framer.push(&bytes);
        while let Some(frame) = framer.next_frame().unwrap() {
            self.trace
                .push(format!("-> {}", describe_sent(frame.tag, &frame.body)));
            self.sent.push((frame.tag, frame.body));
        }
        assert_eq!(framer.buffered_len(), 0, "client sent a partial message");
    }

    pub(super) fn text(&self) -> String {
        self.trace.join("\n")
    }
}

/// Runs a script fed whole and byte by byte, checks both traces agree, returns the trace.
pub(super) fn run_both(script: impl Fn(bool) -> Harness) -> String {
    let whole = script(false).text();
    let bytewise = script(true).text();
    assert_eq!(whole, bytewise, "byte-at-a-time feeding changed the trace");
    whole
}

fn describe_startup(bytes: &[u8]) -> String {
    let words: Vec<&str> = bytes[8..]
        .split(|b| *b == 0)
        .map(|w| std::str::from_utf8(w).unwrap())
        .filter(|w| !w.is_empty())
        .collect();
    let pairs: Vec<String> = words.chunks(2).map(|p| p.join("=")).collect();
    format!("startup {}", pairs.join(" "))
}

fn describe_sent(tag: u8, body: &[u8]) -> String {
    let text = || String::from_utf8_lossy(body.strip_suffix(b"\0").unwrap_or(body)).into_owned();
    match tag {
        b'Q' => format!("Query {:?}", text()),
        b'p' => format!("Password/SASL {:?}", String::from_utf8_lossy(body)),
        b'd' => match decode_status_update(body) {
            Some(u) => format!(
                "StatusUpdate write={} flush={} apply={} time={} reply={}",
                u.write, u.flush, u.apply, u.client_time.0, u.reply_requested
            ),
            None => format!("CopyData {:?}", String::from_utf8_lossy(body)),
        },
        b'c' => "CopyDone".to_owned(),
        b'f' => format!("CopyFail {:?}", text()),
        b'X' => "Terminate".to_owned(),
        other => format!("unknown {:?}", char::from(other)),
    }
}

pub(super) fn describe(event: &Event) -> String {
    let value = |v: &Option<Bytes>| match v {
        None => "NULL".to_owned(),
        Some(b) => String::from_utf8_lossy(b).into_owned(),
    };
    match event {
        Event::TlsRequested => "TLS requested".to_owned(),
        Event::Authenticated => "authenticated".to_owned(),
        Event::ParameterStatus { name, value } => format!("param {name}={value}"),
        Event::BackendKeyData(k) => format!("backend key pid={}", k.process_id),
        Event::Ready => "ready".to_owned(),
        Event::Notice(n) => format!("notice {n}"),
        Event::Notification(n) => format!("notification {} {:?}", n.channel, n.payload),
        Event::RowDescription(d) => {
            let cols: Vec<String> = d
                .fields
                .iter()
                .map(|f| format!("{}:{}", f.name, f.type_oid))
                .collect();
            format!("columns {}", cols.join(" "))
        }
        Event::DataRow(r) => {
            let cols: Vec<String> = r.columns.iter().map(value).collect();
            format!("row {}", cols.join(" | "))
        }
        Event::CommandComplete { tag } => format!("complete {tag}"),
        Event::EmptyQuery => "empty query".to_owned(),
        Event::QueryError(e) => format!("query error {e}"),
        Event::QueryDone { transaction } => format!("query done {transaction:?}"),
        Event::CopyOutStarted(c) => format!("copy out started columns={}", c.column_formats.len()),
        Event::CopyOutData(b) => format!("copy data {:?}", String::from_utf8_lossy(b)),
        Event::CopyOutDone => "copy out done".to_owned(),
        Event::StreamStarted(_) => "stream started".to_owned(),
        Event::XLogData(x) => format!(
            "xlog start={} end={} time={} data={:?}",
            x.wal_start,
            x.wal_end,
            x.server_time.0,
            String::from_utf8_lossy(&x.data)
        ),
        Event::Keepalive(k) => format!(
            "keepalive end={} time={} reply={}",
            k.wal_end, k.server_time.0, k.reply_requested
        ),
        Event::StreamServerDone => "stream server done".to_owned(),
        Event::Failed(e) => format!("FAILED {e}"),
    }
}

/// The messages a trusting server sends after the StartupMessage.
pub(super) fn trust_startup() -> Vec<BackendMessage> {
    vec![
        BackendMessage::Authentication(Authentication::Ok),
        param("server_version", "15.8"),
        param("TimeZone", "UTC"),
        BackendMessage::BackendKeyData(crate::wire::BackendKeyData {
            process_id: 77,
            secret_key: Bytes::from_static(&[1, 2, 3, 4]),
        }),
        ready(TransactionStatus::Idle),
    ]
}

pub(super) fn param(name: &str, value: &str) -> BackendMessage {
    BackendMessage::ParameterStatus {
        name: name.into(),
        value: value.into(),
    }
}

pub(super) fn ready(status: TransactionStatus) -> BackendMessage {
    BackendMessage::ReadyForQuery(status)
}

pub(super) fn complete(tag: &str) -> BackendMessage {
    BackendMessage::CommandComplete { tag: tag.into() }
}

pub(super) fn columns(names: &[(&str, u32)]) -> BackendMessage {
    BackendMessage::RowDescription(RowDescription {
        fields: names
            .iter()
            .map(|(name, type_oid)| FieldDescription {
                name: (*name).into(),
                table_oid: 0,
                column_id: 0,
                type_oid: *type_oid,
                type_size: -1,
                type_modifier: -1,
                format: 0,
            })
            .collect(),
    })
}

pub(super) fn row(values: &[Option<&str>]) -> BackendMessage {
    BackendMessage::DataRow(DataRow {
        columns: values
            .iter()
            .map(|v| v.map(|s| Bytes::copy_from_slice(s.as_bytes())))
            .collect(),
    })
}

pub(super) fn copy_response(columns: usize) -> CopyResponse {
    CopyResponse {
        format: 0,
        column_formats: vec![0; columns],
    }
}

pub(super) fn error(severity: &str, code: &str, message: &str) -> BackendMessage {
    BackendMessage::ErrorResponse(Box::new(pg_error(severity, code, message)))
}

/// A connection that has completed a trust startup, with the trace so far cleared.
pub(super) fn ready_harness(bytewise: bool, replication: bool) -> Harness {
    let mut cfg = config(None);
    cfg.replication = replication;
    let mut h = Harness::new(cfg, bytewise);
    h.server(&trust_startup());
    assert_eq!(h.conn.phase(), Phase::Ready);
    h.trace.clear();
    h
}
