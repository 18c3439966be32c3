//! Encoders for backend messages and replication payloads, to build server input in tests
//! and fuzz seeds. Only compiled with the `testing` feature: slotline never plays a server.
//!
//! Each encoder writes the layout the PostgreSQL manual documents, independently of the
//! parsers in `backend` and `replication`, so round-trip tests check one against the other.

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::backend::{
    Authentication, BackendMessage, CopyResponse, FieldDescription, TransactionStatus,
};
use crate::wire::frontend::StatusUpdate;
use crate::wire::pg_error::PgError;
use crate::wire::replication::{PrimaryKeepalive, ReplicationMessage, XLogData};

/// A frame: tag, 32-bit length counting itself, body.
pub fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 5);
    out.push(tag);
    let len = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn cstr(buf: &mut BytesMut, s: &str) {
    buf.put_slice(s.as_bytes());
    buf.put_u8(0);
}

/// Encodes any backend message as a server would send it.
pub fn encode_backend(message: &BackendMessage) -> Vec<u8> {
    let mut b = BytesMut::new();
    let tag = match message {
        BackendMessage::Authentication(auth) => {
            encode_authentication(auth, &mut b);
            b'R'
        }
        BackendMessage::ParameterStatus { name, value } => {
            cstr(&mut b, name);
            cstr(&mut b, value);
            b'S'
        }
        BackendMessage::BackendKeyData(key) => {
            b.put_i32(key.process_id);
            b.put_slice(&key.secret_key);
            b'K'
        }
        BackendMessage::ReadyForQuery(status) => {
            b.put_u8(match status {
                TransactionStatus::Idle => b'I',
                TransactionStatus::InTransaction => b'T',
                TransactionStatus::Failed => b'E',
            });
            b'Z'
        }
        BackendMessage::ErrorResponse(err) => {
            encode_pg_error(err, &mut b);
            b'E'
        }
        BackendMessage::NoticeResponse(err) => {
            encode_pg_error(err, &mut b);
            b'N'
        }
        BackendMessage::NotificationResponse(n) => {
            b.put_i32(n.process_id);
            cstr(&mut b, &n.channel);
            cstr(&mut b, &n.payload);
            b'A'
        }
        result => encode_result(result, &mut b),
    };
    frame(tag, &b)
}

/// Query results and COPY messages; returns the tag.
fn encode_result(message: &BackendMessage, b: &mut BytesMut) -> u8 {
    match message {
        BackendMessage::RowDescription(desc) => {
            b.put_i16(desc.fields.len() as i16);
            desc.fields.iter().for_each(|f| encode_field(f, b));
            b'T'
        }
        BackendMessage::DataRow(row) => {
            b.put_i16(row.columns.len() as i16);
            for column in &row.columns {
                match column {
                    None => b.put_i32(-1),
                    Some(value) => {
                        b.put_i32(value.len() as i32);
                        b.put_slice(value);
                    }
                }
            }
            b'D'
        }
        BackendMessage::CommandComplete { tag } => {
            cstr(b, tag);
            b'C'
        }
        BackendMessage::CopyInResponse(c) => copy_response(b'G', c, b),
        BackendMessage::CopyOutResponse(c) => copy_response(b'H', c, b),
        BackendMessage::CopyBothResponse(c) => copy_response(b'W', c, b),
        BackendMessage::CopyData(data) => {
            b.put_slice(data);
            b'd'
        }
        BackendMessage::EmptyQueryResponse => b'I',
        BackendMessage::CopyDone => b'c',
        BackendMessage::ParseComplete => b'1',
        BackendMessage::BindComplete => b'2',
        BackendMessage::CloseComplete => b'3',
        BackendMessage::NoData => b'n',
        BackendMessage::PortalSuspended => b's',
        // Session messages are encoded by `encode_backend`, which never passes them here.
        BackendMessage::Authentication(_)
        | BackendMessage::ParameterStatus { .. }
        | BackendMessage::BackendKeyData(_)
        | BackendMessage::ReadyForQuery(_)
        | BackendMessage::ErrorResponse(_)
        | BackendMessage::NoticeResponse(_)
        | BackendMessage::NotificationResponse(_) => b'?',
    }
}

fn encode_authentication(auth: &Authentication, b: &mut BytesMut) {
    match auth {
        Authentication::Ok => b.put_i32(0),
        Authentication::CleartextPassword => b.put_i32(3),
        Authentication::Md5Password { salt } => {
            b.put_i32(5);
            b.put_slice(salt);
        }
        Authentication::Sasl { mechanisms } => {
            b.put_i32(10);
            mechanisms.iter().for_each(|m| cstr(b, m));
            b.put_u8(0);
        }
        Authentication::SaslContinue(data) => {
            b.put_i32(11);
            b.put_slice(data);
        }
        Authentication::SaslFinal(data) => {
            b.put_i32(12);
            b.put_slice(data);
        }
        Authentication::Unsupported { code, .. } => b.put_i32(*code),
    }
}

fn encode_field(f: &FieldDescription, b: &mut BytesMut) {
    cstr(b, &f.name);
    b.put_u32(f.table_oid);
    b.put_i16(f.column_id);
    b.put_u32(f.type_oid);
    b.put_i16(f.type_size);
    b.put_i32(f.type_modifier);
    b.put_i16(f.format);
}

fn copy_response(tag: u8, c: &CopyResponse, b: &mut BytesMut) -> u8 {
    b.put_u8(c.format);
    b.put_i16(c.column_formats.len() as i16);
    c.column_formats.iter().for_each(|f| b.put_i16(*f));
    tag
}

fn encode_pg_error(err: &PgError, b: &mut BytesMut) {
    let mut field = |code: u8, value: &str| {
        b.put_u8(code);
        cstr(b, value);
    };
    field(b'S', &err.severity);
    let optional = [
        (b'V', err.severity_nonlocalized.clone()),
        (b'C', Some(err.code.clone())),
        (b'M', Some(err.message.clone())),
        (b'D', err.detail.clone()),
        (b'H', err.hint.clone()),
        (b'P', err.position.map(|p| p.to_string())),
        (b'p', err.internal_position.map(|p| p.to_string())),
        (b'q', err.internal_query.clone()),
        (b'W', err.where_.clone()),
        (b's', err.schema.clone()),
        (b't', err.table.clone()),
        (b'c', err.column.clone()),
        (b'd', err.data_type.clone()),
        (b'n', err.constraint.clone()),
        (b'F', err.file.clone()),
        (b'L', err.line.map(|l| l.to_string())),
        (b'R', err.routine.clone()),
    ];
    for (code, value) in optional {
        if let Some(value) = value {
            field(code, &value);
        }
    }
    b.put_u8(0);
}

/// A PgError with just the three required fields.
pub fn pg_error(severity: &str, code: &str, message: &str) -> PgError {
    PgError {
        severity: severity.to_owned(),
        code: code.to_owned(),
        message: message.to_owned(),
        ..PgError::default()
    }
}

/// The CopyData payload of a replication message (without the CopyData frame).
pub fn encode_replication(message: &ReplicationMessage) -> Bytes {
    let mut b = BytesMut::new();
    match message {
        ReplicationMessage::XLogData(XLogData {
            wal_start,
            wal_end,
            server_time,
            data,
        }) => {
            b.put_u8(b'w');
            b.put_u64(wal_start.0);
            b.put_u64(wal_end.0);
            b.put_i64(server_time.0);
            b.put_slice(data);
        }
        ReplicationMessage::Keepalive(PrimaryKeepalive {
            wal_end,
            server_time,
            reply_requested,
        }) => {
            b.put_u8(b'k');
            b.put_u64(wal_end.0);
            b.put_i64(server_time.0);
            b.put_u8(u8::from(*reply_requested));
        }
    }
    b.freeze()
}

/// A replication message wrapped in a CopyData frame, as it arrives on the socket.
pub fn replication_frame(message: &ReplicationMessage) -> Vec<u8> {
    frame(b'd', &encode_replication(message))
}

/// Parses a Standby Status Update payload back (for tests that read what a client sent).
pub fn decode_status_update(payload: &[u8]) -> Option<StatusUpdate> {
    let mut r = crate::wire::Reader::new(payload);
    (r.u8().ok()? == b'r').then_some(())?;
    let update = StatusUpdate {
        write: crate::Lsn(r.u64().ok()?),
        flush: crate::Lsn(r.u64().ok()?),
        apply: crate::Lsn(r.u64().ok()?),
        client_time: crate::time::PgTime(r.i64().ok()?),
        reply_requested: r.u8().ok()? == 1,
    };
    r.finish().ok()?;
    Some(update)
}
