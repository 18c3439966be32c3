//! The streaming replication messages the server sends inside CopyData once
//! `START_REPLICATION` has switched the connection to CopyBoth: XLogData (`'w'`) and the
//! primary keepalive (`'k'`), as the manual's "Streaming Replication Protocol" lays them out.
//!
//! This module owns those two layouts. It never interprets the WAL payload (that is
//! `pgoutput`) and never decides what to acknowledge. The payload is a slice of the
//! received bytes, not a copy.

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::time::PgTime;
use crate::wire::Reader;
use crate::Lsn;

/// A replication message from the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationMessage {
    XLogData(XLogData),
    Keepalive(PrimaryKeepalive),
}

/// `'w'`: a chunk of WAL, here one pgoutput message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XLogData {
    /// Where this data starts in the WAL: the received position. Zero for messages that
    /// have no position of their own (a Relation message, for one): never move on a zero.
    pub wal_start: Lsn,
    /// The server's current end of WAL; not a position of this data.
    pub wal_end: Lsn,
    /// The server's clock when it sent the message.
    pub server_time: PgTime,
    pub data: Bytes,
}

/// `'k'`: the server's current end of WAL and whether it wants a status update now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrimaryKeepalive {
    pub wal_end: Lsn,
    pub server_time: PgTime,
    pub reply_requested: bool,
}

impl ReplicationMessage {
    /// Parses a CopyData payload received in CopyBoth mode. Offsets count from the payload's
    /// first byte (the sub-tag).
    pub fn parse(payload: &Bytes) -> Result<ReplicationMessage, DecodeError> {
        let mut r = Reader::new(payload);
        let at = r.offset();
        let message = match r.u8()? {
            b'w' => {
                let wal_start = Lsn(r.u64()?);
                let wal_end = Lsn(r.u64()?);
                let server_time = PgTime(r.i64()?);
                let start = r.offset();
                r.rest();
                ReplicationMessage::XLogData(XLogData {
                    wal_start,
                    wal_end,
                    server_time,
                    data: payload.slice(start..),
                })
            }
            b'k' => {
                let wal_end = Lsn(r.u64()?);
                let server_time = PgTime(r.i64()?);
                let flag_at = r.offset();
                let reply_requested = match r.u8()? {
                    0 => false,
                    1 => true,
                    other => {
                        return Err(DecodeError::protocol(
                            flag_at,
                            format!("keepalive reply flag is {other}; 0 or 1 are accepted"),
                        ))
                    }
                };
                ReplicationMessage::Keepalive(PrimaryKeepalive {
                    wal_end,
                    server_time,
                    reply_requested,
                })
            }
            tag => {
                return Err(DecodeError::new(
                    at,
                    DecodeErrorKind::UnknownTag {
                        context: "replication CopyData (w XLogData or k keepalive)",
                        tag,
                    },
                ))
            }
        };
        r.finish()?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xlog_data_fields_match_the_documented_layout() {
        // 'w', wal_start 0/16B3748, wal_end 0/16B3800, time 1_000_000 µs, payload "BEGIN".
        let mut bytes = vec![b'w'];
        bytes.extend_from_slice(&0x016B_3748u64.to_be_bytes());
        bytes.extend_from_slice(&0x016B_3800u64.to_be_bytes());
        bytes.extend_from_slice(&1_000_000i64.to_be_bytes());
        bytes.extend_from_slice(b"BEGIN");
        let payload = Bytes::from(bytes);
        let ReplicationMessage::XLogData(x) = ReplicationMessage::parse(&payload).unwrap() else {
            panic!("expected XLogData");
        };
        assert_eq!(x.wal_start.to_string(), "0/16B3748");
        assert_eq!(x.wal_end.to_string(), "0/16B3800");
        assert_eq!(x.server_time, PgTime(1_000_000));
        assert_eq!(&x.data[..], b"BEGIN");
        // Zero-copy: the payload points into the received buffer.
        assert_eq!(x.data.as_ptr(), payload[25..].as_ptr());
    }

    #[test]
    fn keepalive_fields_match_the_documented_layout() {
        let bytes =
            Bytes::from_static(&[b'k', 0, 0, 0, 1, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 5, 1]);
        assert_eq!(
            ReplicationMessage::parse(&bytes).unwrap(),
            ReplicationMessage::Keepalive(PrimaryKeepalive {
                wal_end: Lsn(0x1_0000_0020),
                server_time: PgTime(5),
                reply_requested: true,
            })
        );
    }

    #[test]
    fn unknown_sub_tags_short_bodies_and_odd_flags_are_errors() {
        let err = ReplicationMessage::parse(&Bytes::from_static(b"r")).unwrap_err();
        assert!(matches!(
            err.kind,
            DecodeErrorKind::UnknownTag { tag: b'r', .. }
        ));
        assert!(matches!(
            ReplicationMessage::parse(&Bytes::from_static(b"w\0\0"))
                .unwrap_err()
                .kind,
            DecodeErrorKind::UnexpectedEof { .. }
        ));
        assert!(ReplicationMessage::parse(&Bytes::new()).is_err());
        let mut keepalive = vec![b'k'];
        keepalive.extend_from_slice(&[0; 16]);
        keepalive.push(2);
        let err = ReplicationMessage::parse(&Bytes::from(keepalive.clone())).unwrap_err();
        assert_eq!(err.offset, 17);
        keepalive[17] = 0;
        keepalive.push(0);
        assert_eq!(
            ReplicationMessage::parse(&Bytes::from(keepalive))
                .unwrap_err()
                .kind,
            DecodeErrorKind::TrailingBytes { count: 1 }
        );
    }
}
