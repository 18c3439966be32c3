//! Encoding the frontend messages slotline sends, through
//! `postgres_protocol::message::frontend` (never a hand-rolled copy), plus the one message
//! that crate does not know: the Standby Status Update (`'r'`) carried in CopyData.
//!
//! This module owns the bytes of outgoing messages and the pinned session settings sent at
//! startup. It never decides when to send anything (that is `conn` and the pipeline).

use std::fmt;

use bytes::{BufMut, BytesMut};
use postgres_protocol::message::frontend;

use crate::time::PgTime;
use crate::Lsn;

/// Session settings sent as startup parameters on every connection, because pgoutput and
/// COPY render values with the session's output functions (docs/postgres.md, "Session
/// settings that change the bytes"): the replication session and the snapshot sessions must agree.
pub const PINNED_SESSION_SETTINGS: [(&str, &str); 6] = [
    ("DateStyle", "ISO"),
    ("TimeZone", "UTC"),
    ("IntervalStyle", "postgres"),
    ("bytea_output", "hex"),
    ("extra_float_digits", "3"),
    ("client_encoding", "UTF8"),
];

/// Server-side timeouts switched off on every connection, sent as startup parameters
/// (docs/postgres.md, "Session settings that change the bytes"). A role's or database's
/// defaults would otherwise end slotline's sessions while they wait by design: a COPY held
/// back by Feldera's pace, a worker idle between ranges, the replication connection that
/// must stay in its transaction while workers read its exported snapshot, a monitor idle
/// between checks. Each such end restarts the whole copy. A client's startup parameters take
/// precedence over `ALTER ROLE`/`ALTER DATABASE ... SET`.
/// `transaction_timeout` is not here: PostgreSQL 15 and 16 refuse an unknown startup
/// parameter with a FATAL error, so it is switched off after startup on 17 and newer
/// ([`TRANSACTION_TIMEOUT_SINCE`]).
pub const DISABLED_SERVER_TIMEOUTS: [(&str, &str); 4] = [
    ("statement_timeout", "0"),
    ("lock_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("idle_session_timeout", "0"),
];

/// Sent as a startup parameter on every connection: a query that row-level security would
/// filter fails (`42501`, "query would be affected by row-level security policy") instead
/// of returning only the rows the role's policies show. Startup refuses such a routed table
/// before copying (docs/snapshot.md, "Row-level security"); this makes a policy enabled
/// after that check end the copy loudly rather than leave Feldera without the hidden rows.
pub const ROW_SECURITY_OFF: (&str, &str) = ("row_security", "off");

/// The first `server_version_num` that has `transaction_timeout`.
pub const TRANSACTION_TIMEOUT_SINCE: u32 = 170_000;

/// Sent once startup is over on servers from [`TRANSACTION_TIMEOUT_SINCE`] on, for the same
/// reason as [`DISABLED_SERVER_TIMEOUTS`].
pub const DISABLE_TRANSACTION_TIMEOUT: &str = "SET transaction_timeout = 0";

/// What identifies a session at startup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupParams<'a> {
    pub user: &'a str,
    pub database: &'a str,
    pub application_name: &'a str,
    /// Sends `replication=database`: a logical replication connection (which also accepts
    /// simple-query SQL).
    pub replication: bool,
    /// The server's TCP keepalive settings (`tcp_keepalives_idle`, ...), sent after the
    /// others; empty for none.
    pub keepalive: &'a [(&'static str, String)],
}

/// An outgoing message could not be encoded (a string with a NUL byte, a message over the
/// protocol's 2 GiB length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError {
    /// Which message was being encoded.
    pub message: &'static str,
    pub reason: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot encode {}: {}", self.message, self.reason)
    }
}

impl std::error::Error for EncodeError {}

fn encode_error(message: &'static str) -> impl FnOnce(std::io::Error) -> EncodeError {
    move |err| EncodeError {
        message,
        reason: err.to_string(),
    }
}

/// StartupMessage (protocol 3.0) with the identity, [`PINNED_SESSION_SETTINGS`],
/// [`DISABLED_SERVER_TIMEOUTS`], [`ROW_SECURITY_OFF`] and the keepalive settings.
pub fn encode_startup(params: &StartupParams<'_>, buf: &mut BytesMut) -> Result<(), EncodeError> {
    let mut pairs = vec![
        ("user", params.user),
        ("database", params.database),
        ("application_name", params.application_name),
    ];
    if params.replication {
        pairs.push(("replication", "database"));
    }
    pairs.extend(PINNED_SESSION_SETTINGS);
    pairs.extend(DISABLED_SERVER_TIMEOUTS);
    pairs.push(ROW_SECURITY_OFF);
    pairs.extend(params.keepalive.iter().map(|(k, v)| (*k, v.as_str())));
    frontend::startup_message(pairs, buf).map_err(encode_error("StartupMessage"))
}

/// PasswordMessage carrying a cleartext password or an `md5...` hash.
pub fn encode_password(password: &[u8], buf: &mut BytesMut) -> Result<(), EncodeError> {
    frontend::password_message(password, buf).map_err(encode_error("PasswordMessage"))
}

pub fn encode_sasl_initial_response(
    mechanism: &str,
    data: &[u8],
    buf: &mut BytesMut,
) -> Result<(), EncodeError> {
    frontend::sasl_initial_response(mechanism, data, buf)
        .map_err(encode_error("SASLInitialResponse"))
}

pub fn encode_sasl_response(data: &[u8], buf: &mut BytesMut) -> Result<(), EncodeError> {
    frontend::sasl_response(data, buf).map_err(encode_error("SASLResponse"))
}

/// Query (simple query protocol); the text may hold several statements.
pub fn encode_query(sql: &str, buf: &mut BytesMut) -> Result<(), EncodeError> {
    frontend::query(sql, buf).map_err(encode_error("Query"))
}

pub fn encode_copy_data(payload: &[u8], buf: &mut BytesMut) -> Result<(), EncodeError> {
    frontend::CopyData::new(payload)
        .map_err(encode_error("CopyData"))?
        .write(buf);
    Ok(())
}

pub fn encode_copy_done(buf: &mut BytesMut) {
    frontend::copy_done(buf);
}

pub fn encode_copy_fail(reason: &str, buf: &mut BytesMut) -> Result<(), EncodeError> {
    frontend::copy_fail(reason, buf).map_err(encode_error("CopyFail"))
}

/// SSLRequest: asks the server to switch to TLS before the startup message. The server
/// answers with one unframed byte, `S` or `N`.
pub fn encode_ssl_request(buf: &mut BytesMut) {
    frontend::ssl_request(buf);
}

pub fn encode_terminate(buf: &mut BytesMut) {
    frontend::terminate(buf);
}

/// Standby Status Update (`'r'`): what the client has written, flushed and applied.
/// Only `flush` moves a logical slot's `confirmed_flush_lsn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusUpdate {
    pub write: Lsn,
    pub flush: Lsn,
    pub apply: Lsn,
    /// The client's clock, µs since 2000-01-01.
    pub client_time: PgTime,
    /// Asks the server to answer at once (with a keepalive).
    pub reply_requested: bool,
}

/// Length of the `'r'` payload: tag, three LSNs, a timestamp and the flag.
pub const STATUS_UPDATE_LEN: usize = 1 + 8 + 8 + 8 + 8 + 1;

impl StatusUpdate {
    /// The `'r'` payload alone, as the manual lays it out.
    pub fn payload(&self) -> [u8; STATUS_UPDATE_LEN] {
        let mut out = [0u8; STATUS_UPDATE_LEN];
        let mut w = &mut out[..];
        w.put_u8(b'r');
        w.put_u64(self.write.0);
        w.put_u64(self.flush.0);
        w.put_u64(self.apply.0);
        w.put_i64(self.client_time.0);
        w.put_u8(u8::from(self.reply_requested));
        out
    }
}

/// The status update wrapped in a CopyData message, ready to write.
pub fn encode_status_update(update: &StatusUpdate, buf: &mut BytesMut) {
    // `CopyData::new` fails only when the length overflows an i32; 34 bytes cannot.
    if let Ok(data) = frontend::CopyData::new(&update.payload()[..]) {
        data.write(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cstrings(bytes: &[u8]) -> Vec<&str> {
        bytes
            .split(|b| *b == 0)
            .map(|s| std::str::from_utf8(s).unwrap())
            .collect()
    }

    #[test]
    fn startup_carries_identity_replication_pinned_settings_disabled_timeouts_and_row_security_off()
    {
        let mut buf = BytesMut::new();
        let params = StartupParams {
            user: "alice",
            database: "shop",
            application_name: "slotline",
            replication: true,
            keepalive: &[],
        };
        encode_startup(&params, &mut buf).unwrap();
        assert_eq!(&buf[0..4], &(buf.len() as u32).to_be_bytes());
        assert_eq!(&buf[4..8], &[0, 3, 0, 0]);
        let words = cstrings(&buf[8..]);
        assert_eq!(
            words,
            [
                "user",
                "alice",
                "database",
                "shop",
                "application_name",
                "slotline",
                "replication",
                "database",
                "DateStyle",
                "ISO",
                "TimeZone",
                "UTC",
                "IntervalStyle",
                "postgres",
                "bytea_output",
                "hex",
                "extra_float_digits",
                "3",
                "client_encoding",
                "UTF8",
                "statement_timeout",
                "0",
                "lock_timeout",
                "0",
                "idle_in_transaction_session_timeout",
                "0",
                "idle_session_timeout",
                "0",
                "row_security",
                "off",
                "",
                ""
            ]
        );
    }

    #[test]
    fn startup_without_replication_omits_it_and_nul_in_a_name_is_refused() {
        let mut buf = BytesMut::new();
        let mut params = StartupParams {
            user: "u",
            database: "d",
            application_name: "a",
            replication: false,
            keepalive: &[],
        };
        encode_startup(&params, &mut buf).unwrap();
        assert!(!cstrings(&buf[8..]).contains(&"replication"));
        params.user = "bad\0user";
        let err = encode_startup(&params, &mut BytesMut::new()).unwrap_err();
        assert_eq!(err.message, "StartupMessage");
    }

    /// The settings after the disabled timeouts, as `name=value`.
    fn settings_after_the_timeouts(keepalive: &[(&'static str, String)]) -> Vec<String> {
        let params = StartupParams {
            user: "u",
            database: "d",
            application_name: "a",
            replication: true,
            keepalive,
        };
        let mut buf = BytesMut::new();
        encode_startup(&params, &mut buf).unwrap();
        let words = cstrings(&buf[8..]);
        let after = words
            .iter()
            .position(|w| *w == "idle_session_timeout")
            .unwrap();
        words[after + 2..]
            .chunks(2)
            .filter(|pair| !pair[0].is_empty())
            .map(|pair| format!("{}={}", pair[0], pair[1]))
            .collect()
    }

    #[test]
    fn keepalive_settings_follow_the_disabled_timeouts() {
        let keepalive = [
            ("tcp_keepalives_idle", "60".to_owned()),
            ("tcp_user_timeout", "120000".to_owned()),
        ];
        assert_eq!(
            settings_after_the_timeouts(&keepalive),
            [
                "row_security=off",
                "tcp_keepalives_idle=60",
                "tcp_user_timeout=120000"
            ]
        );
        assert_eq!(settings_after_the_timeouts(&[]), ["row_security=off"]);
    }

    #[test]
    fn status_update_matches_the_manual_byte_for_byte() {
        // CopyData 'd', Int32 length 38 (4 + 34), then Byte1('r'), Int64 write, Int64 flush,
        // Int64 apply, Int64 client time (µs since 2000-01-01), Byte1 reply flag.
        let update = StatusUpdate {
            write: "0/1A0".parse().unwrap(),
            flush: "0/190".parse().unwrap(),
            apply: "1/2".parse().unwrap(),
            client_time: PgTime(0x0102_0304_0506_0708),
            reply_requested: true,
        };
        let mut buf = BytesMut::new();
        encode_status_update(&update, &mut buf);
        #[rustfmt::skip]
        let expected: [u8; 39] = [
            b'd', 0, 0, 0, 38,
            b'r',
            0, 0, 0, 0, 0, 0, 0x01, 0xA0,
            0, 0, 0, 0, 0, 0, 0x01, 0x90,
            0, 0, 0, 1, 0, 0, 0, 2,
            1, 2, 3, 4, 5, 6, 7, 8,
            1,
        ];
        assert_eq!(&buf[..], &expected[..]);
    }

    #[test]
    fn simple_messages_have_their_documented_bytes() {
        let mut buf = BytesMut::new();
        encode_query("SELECT 1", &mut buf).unwrap();
        assert_eq!(&buf[..], b"Q\0\0\0\x0dSELECT 1\0");
        buf.clear();
        encode_copy_done(&mut buf);
        encode_terminate(&mut buf);
        assert_eq!(&buf[..], b"c\0\0\0\x04X\0\0\0\x04");
        buf.clear();
        encode_sasl_initial_response("SCRAM-SHA-256", b"n,,n=,r=x", &mut buf).unwrap();
        assert_eq!(&buf[..], b"p\0\0\0\x1fSCRAM-SHA-256\0\0\0\0\x09n,,n=,r=x");
        buf.clear();
        encode_copy_data(b"hi", &mut buf).unwrap();
        assert_eq!(&buf[..], b"d\0\0\0\x06hi");
    }
}
