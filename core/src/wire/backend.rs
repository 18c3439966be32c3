//! Typed backend messages, parsed from a [`Frame`].
//!
//! This module owns the layout of every backend message slotline can receive on a
//! simple-query or replication connection. It never decides whether a message is allowed at
//! this point of a conversation (that is `conn`). Parsing is total: a body that does not
//! match its layout is a [`DecodeError`] whose offset counts from the frame's tag byte.
//! Variable-length payloads (row values, CopyData) are slices of the frame (no copy).

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::wire::framing::{Frame, HEADER_LEN};
use crate::wire::pg_error::PgError;
use crate::wire::Reader;

/// A backend message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendMessage {
    Authentication(Authentication),
    ParameterStatus {
        name: String,
        value: String,
    },
    BackendKeyData(BackendKeyData),
    ReadyForQuery(TransactionStatus),
    RowDescription(RowDescription),
    DataRow(DataRow),
    CommandComplete {
        tag: String,
    },
    EmptyQueryResponse,
    /// Boxed: a PgError is large and rare next to DataRow and CopyData.
    ErrorResponse(Box<PgError>),
    NoticeResponse(Box<PgError>),
    NotificationResponse(Notification),
    CopyInResponse(CopyResponse),
    CopyOutResponse(CopyResponse),
    CopyBothResponse(CopyResponse),
    CopyData(Bytes),
    CopyDone,
    ParseComplete,
    BindComplete,
    CloseComplete,
    NoData,
    PortalSuspended,
}

/// The `'R'` family. Methods slotline cannot perform are kept apart from unknown codes so
/// the connection can name them in its error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authentication {
    Ok,
    CleartextPassword,
    Md5Password {
        salt: [u8; 4],
    },
    Sasl {
        mechanisms: Vec<String>,
    },
    SaslContinue(Bytes),
    SaslFinal(Bytes),
    /// Kerberos V5 (2), SCM credentials (6), GSSAPI (7, 8) or SSPI (9).
    Unsupported {
        code: i32,
        method: &'static str,
    },
}

/// `'K'`: what a CancelRequest needs. The key is 4 bytes in protocol 3.0 and up to 256 in
/// 3.2, so it is kept as bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendKeyData {
    pub process_id: i32,
    pub secret_key: Bytes,
}

/// The transaction status carried by ReadyForQuery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionStatus {
    /// `'I'`: not in a transaction block.
    Idle,
    /// `'T'`: in a transaction block.
    InTransaction,
    /// `'E'`: in a failed transaction block (statements are refused until it ends).
    Failed,
}

/// One column of a RowDescription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDescription {
    pub name: String,
    /// Oid of the table the column comes from, or 0.
    pub table_oid: u32,
    /// Attribute number of that column, or 0.
    pub column_id: i16,
    pub type_oid: u32,
    pub type_size: i16,
    pub type_modifier: i32,
    /// 0 text, 1 binary.
    pub format: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowDescription {
    pub fields: Vec<FieldDescription>,
}

/// One row of a result: each column's raw value (text format here), `None` for NULL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRow {
    pub columns: Vec<Option<Bytes>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    pub process_id: i32,
    pub channel: String,
    pub payload: String,
}

/// CopyIn/CopyOut/CopyBothResponse: overall format (0 text, 1 binary) and per-column formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyResponse {
    pub format: u8,
    pub column_formats: Vec<i16>,
}

/// Largest secret key protocol 3.2 allows.
const MAX_SECRET_KEY_LEN: usize = 256;

impl BackendMessage {
    /// Parses a frame. Offsets in errors count from the frame's tag byte.
    pub fn parse(frame: &Frame) -> Result<BackendMessage, DecodeError> {
        match parse_body(frame.tag, &frame.body) {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err(DecodeError::new(
                0,
                DecodeErrorKind::UnknownTag {
                    context: "backend message",
                    tag: frame.tag,
                },
            )),
            Err(err) => Err(err.shifted(HEADER_LEN)),
        }
    }

    /// The message's name as the PostgreSQL manual spells it, for errors and traces.
    pub fn name(&self) -> &'static str {
        match self {
            BackendMessage::Authentication(_) => "Authentication",
            BackendMessage::ParameterStatus { .. } => "ParameterStatus",
            BackendMessage::BackendKeyData(_) => "BackendKeyData",
            BackendMessage::ReadyForQuery(_) => "ReadyForQuery",
            BackendMessage::RowDescription(_) => "RowDescription",
            BackendMessage::DataRow(_) => "DataRow",
            BackendMessage::CommandComplete { .. } => "CommandComplete",
            BackendMessage::EmptyQueryResponse => "EmptyQueryResponse",
            BackendMessage::ErrorResponse(_) => "ErrorResponse",
            BackendMessage::NoticeResponse(_) => "NoticeResponse",
            BackendMessage::NotificationResponse(_) => "NotificationResponse",
            BackendMessage::CopyInResponse(_) => "CopyInResponse",
            BackendMessage::CopyOutResponse(_) => "CopyOutResponse",
            BackendMessage::CopyBothResponse(_) => "CopyBothResponse",
            BackendMessage::CopyData(_) => "CopyData",
            BackendMessage::CopyDone => "CopyDone",
            BackendMessage::ParseComplete => "ParseComplete",
            BackendMessage::BindComplete => "BindComplete",
            BackendMessage::CloseComplete => "CloseComplete",
            BackendMessage::NoData => "NoData",
            BackendMessage::PortalSuspended => "PortalSuspended",
        }
    }
}

fn parse_body(tag: u8, body: &Bytes) -> Result<Option<BackendMessage>, DecodeError> {
    let mut r = Reader::new(body);
    let message = match tag {
        b'R' => BackendMessage::Authentication(parse_authentication(&mut r, body)?),
        b'S' => BackendMessage::ParameterStatus {
            name: r.cstr()?.to_owned(),
            value: r.cstr()?.to_owned(),
        },
        b'K' => BackendMessage::BackendKeyData(parse_backend_key(&mut r, body)?),
        b'Z' => BackendMessage::ReadyForQuery(parse_transaction_status(&mut r)?),
        b'T' => BackendMessage::RowDescription(parse_row_description(&mut r)?),
        b'D' => BackendMessage::DataRow(parse_data_row(&mut r, body)?),
        b'C' => BackendMessage::CommandComplete {
            tag: r.cstr()?.to_owned(),
        },
        b'I' => BackendMessage::EmptyQueryResponse,
        b'E' => BackendMessage::ErrorResponse(Box::new(PgError::parse(r.rest())?)),
        b'N' => BackendMessage::NoticeResponse(Box::new(PgError::parse(r.rest())?)),
        b'A' => BackendMessage::NotificationResponse(Notification {
            process_id: r.i32()?,
            channel: r.cstr()?.to_owned(),
            payload: r.cstr()?.to_owned(),
        }),
        b'G' => BackendMessage::CopyInResponse(parse_copy_response(&mut r)?),
        b'H' => BackendMessage::CopyOutResponse(parse_copy_response(&mut r)?),
        b'W' => BackendMessage::CopyBothResponse(parse_copy_response(&mut r)?),
        b'd' => BackendMessage::CopyData(take_rest(&mut r, body)),
        b'c' => BackendMessage::CopyDone,
        b'1' => BackendMessage::ParseComplete,
        b'2' => BackendMessage::BindComplete,
        b'3' => BackendMessage::CloseComplete,
        b'n' => BackendMessage::NoData,
        b's' => BackendMessage::PortalSuspended,
        // Reported by the caller at the tag byte itself, not inside the body.
        _ => return Ok(None),
    };
    r.finish()?;
    Ok(Some(message))
}

/// A zero-copy slice of `body` covering the next `n` bytes of `r`.
fn take(r: &mut Reader<'_>, body: &Bytes, n: usize) -> Result<Bytes, DecodeError> {
    let start = r.offset();
    r.bytes(n)?;
    Ok(body.slice(start..start + n))
}

fn take_rest(r: &mut Reader<'_>, body: &Bytes) -> Bytes {
    let start = r.offset();
    r.rest();
    body.slice(start..)
}

fn parse_authentication(r: &mut Reader<'_>, body: &Bytes) -> Result<Authentication, DecodeError> {
    let at = r.offset();
    let code = r.i32()?;
    Ok(match code {
        0 => Authentication::Ok,
        3 => Authentication::CleartextPassword,
        5 => {
            let salt = r.bytes(4)?;
            Authentication::Md5Password {
                salt: [salt[0], salt[1], salt[2], salt[3]],
            }
        }
        10 => {
            let mut mechanisms = Vec::new();
            loop {
                let name = r.cstr()?;
                if name.is_empty() {
                    break;
                }
                mechanisms.push(name.to_owned());
            }
            Authentication::Sasl { mechanisms }
        }
        11 => Authentication::SaslContinue(take_rest(r, body)),
        12 => Authentication::SaslFinal(take_rest(r, body)),
        2 | 6 | 7 | 8 | 9 => {
            // GSS continuation data and the like follow; they are of no use to us.
            r.rest();
            let method = match code {
                2 => "Kerberos V5",
                6 => "SCM credentials",
                7 | 8 => "GSSAPI",
                _ => "SSPI",
            };
            Authentication::Unsupported { code, method }
        }
        other => {
            return Err(DecodeError::protocol(
                at,
                format!(
                    "unknown authentication request code {other} (known: 0 ok, 2 Kerberos V5, 3 cleartext, \
                     5 MD5, 6 SCM, 7-8 GSSAPI, 9 SSPI, 10-12 SASL)"
                ),
            ))
        }
    })
}

fn parse_backend_key(r: &mut Reader<'_>, body: &Bytes) -> Result<BackendKeyData, DecodeError> {
    let process_id = r.i32()?;
    let len = r.remaining();
    if !(4..=MAX_SECRET_KEY_LEN).contains(&len) {
        return Err(r.protocol_error(format!(
            "BackendKeyData secret key is {len} bytes; 4 to {MAX_SECRET_KEY_LEN} are accepted"
        )));
    }
    Ok(BackendKeyData {
        process_id,
        secret_key: take(r, body, len)?,
    })
}

fn parse_transaction_status(r: &mut Reader<'_>) -> Result<TransactionStatus, DecodeError> {
    let at = r.offset();
    match r.u8()? {
        b'I' => Ok(TransactionStatus::Idle),
        b'T' => Ok(TransactionStatus::InTransaction),
        b'E' => Ok(TransactionStatus::Failed),
        tag => Err(DecodeError::new(
            at,
            DecodeErrorKind::UnknownTag {
                context: "ReadyForQuery transaction status (I, T or E)",
                tag,
            },
        )),
    }
}

/// A count field, refused when negative; the capacity reserved for it is bounded by the
/// bytes that could actually hold that many entries of `min_entry_len` bytes.
fn count(r: &mut Reader<'_>, min_entry_len: usize) -> Result<(usize, usize), DecodeError> {
    let at = r.offset();
    let declared = r.i16()?;
    let n = usize::try_from(declared).map_err(|_| {
        DecodeError::new(
            at,
            DecodeErrorKind::BadLength {
                declared: i64::from(declared),
                limit: i16::MAX as usize,
            },
        )
    })?;
    Ok((n, n.min(r.remaining() / min_entry_len)))
}

fn parse_row_description(r: &mut Reader<'_>) -> Result<RowDescription, DecodeError> {
    // A field is at least a NUL name plus 18 bytes of fixed fields.
    let (n, capacity) = count(r, 19)?;
    let mut fields = Vec::with_capacity(capacity);
    for _ in 0..n {
        fields.push(FieldDescription {
            name: r.cstr()?.to_owned(),
            table_oid: r.u32()?,
            column_id: r.i16()?,
            type_oid: r.u32()?,
            type_size: r.i16()?,
            type_modifier: r.i32()?,
            format: r.i16()?,
        });
    }
    Ok(RowDescription { fields })
}

fn parse_data_row(r: &mut Reader<'_>, body: &Bytes) -> Result<DataRow, DecodeError> {
    let (n, capacity) = count(r, 4)?;
    let mut columns = Vec::with_capacity(capacity);
    for _ in 0..n {
        let at = r.offset();
        let declared = r.i32()?;
        if declared == -1 {
            columns.push(None);
            continue;
        }
        let len = usize::try_from(declared)
            .ok()
            .filter(|len| *len <= r.remaining())
            .ok_or_else(|| {
                DecodeError::new(
                    at,
                    DecodeErrorKind::BadLength {
                        declared: i64::from(declared),
                        limit: r.remaining(),
                    },
                )
            })?;
        columns.push(Some(take(r, body, len)?));
    }
    Ok(DataRow { columns })
}

fn parse_copy_response(r: &mut Reader<'_>) -> Result<CopyResponse, DecodeError> {
    let at = r.offset();
    let format = r.u8()?;
    if format > 1 {
        return Err(DecodeError::protocol(
            at,
            format!("COPY format {format}; 0 (text) and 1 (binary) are accepted"),
        ));
    }
    let (n, capacity) = count(r, 2)?;
    let mut column_formats = Vec::with_capacity(capacity);
    for _ in 0..n {
        column_formats.push(r.i16()?);
    }
    Ok(CopyResponse {
        format,
        column_formats,
    })
}

#[cfg(test)]
mod tests;
