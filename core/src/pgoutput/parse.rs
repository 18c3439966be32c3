//! Parsing the XLogData payload of pgoutput protocol 1 into a borrowed `Message`.
//!
//! This module owns the byte layout (PostgreSQL manual, "Logical Replication Message
//! Formats", protocol version 1) and nothing else: it never consults the relation cache, so
//! a tuple's column count is checked against its relation by `cache`, not here.
//!
//! Totality: every read goes through `Reader`, which checks lengths first; a declared count
//! is compared with what the remaining bytes could hold before anything is reserved; bytes
//! left over after a message are an error.

use smallvec::SmallVec;

use super::message::{
    Begin, Columns, Commit, Datum, Delete, Insert, LogicalMessage, Message, OldKind, OldTuple,
    Origin, Truncate, Tuple, TypeMessage, Update,
};
use super::relation::{Relation, RelationColumn, ReplicaIdentity};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::lsn::Lsn;
use crate::time::PgTime;
use crate::wire::Reader;

/// Smallest encoding of one Relation column: flags, an empty name's NUL, type OID, typmod.
const MIN_RELATION_COLUMN_BYTES: usize = 1 + 1 + 4 + 4;
/// Smallest encoding of one tuple column: its kind byte (`n` or `u`).
const MIN_TUPLE_COLUMN_BYTES: usize = 1;
/// Truncate option bits defined by protocol 1.
const TRUNCATE_CASCADE: u8 = 1;
const TRUNCATE_RESTART_IDENTITY: u8 = 2;
/// Relation column flag: part of the replica identity.
const COLUMN_IN_REPLICA_IDENTITY: u8 = 1;

/// Parses one pgoutput protocol 1 message. Offsets in errors are from the payload start.
pub fn parse(payload: &[u8]) -> Result<Message<'_>, DecodeError> {
    let mut r = Reader::new(payload);
    let tag = r.u8()?;
    let message = match tag {
        b'B' => Message::Begin(parse_begin(&mut r)?),
        b'C' => Message::Commit(parse_commit(&mut r)?),
        b'O' => Message::Origin(parse_origin(&mut r)?),
        b'R' => Message::Relation(parse_relation(&mut r)?),
        b'Y' => Message::Type(parse_type(&mut r)?),
        b'I' => Message::Insert(parse_insert(&mut r)?),
        b'U' => Message::Update(parse_update(&mut r)?),
        b'D' => Message::Delete(parse_delete(&mut r)?),
        b'T' => Message::Truncate(parse_truncate(&mut r)?),
        b'M' => Message::Logical(parse_logical(&mut r)?),
        other => return Err(unknown_message_tag(other)),
    };
    r.finish()?;
    Ok(message)
}

fn unknown_message_tag(tag: u8) -> DecodeError {
    // Streaming (protocol 2), two-phase (3) and stream-prepare (4) messages only arrive when
    // the client asked for a newer protocol; naming that points at a misconfigured START.
    let context = match tag {
        b'S' | b'E' | b'c' | b'A' | b'b' | b'P' | b'K' | b'r' | b'p' => {
            "pgoutput message (this tag needs protocol 2 or later; slotline requests 1)"
        }
        _ => "pgoutput protocol 1 message (B, C, O, R, Y, I, U, D, T or M)",
    };
    DecodeError::new(0, DecodeErrorKind::UnknownTag { context, tag })
}

fn lsn(r: &mut Reader<'_>) -> Result<Lsn, DecodeError> {
    r.u64().map(Lsn)
}

fn parse_begin(r: &mut Reader<'_>) -> Result<Begin, DecodeError> {
    Ok(Begin {
        final_lsn: lsn(r)?,
        commit_time: PgTime(r.i64()?),
        xid: r.u32()?,
    })
}

fn parse_commit(r: &mut Reader<'_>) -> Result<Commit, DecodeError> {
    Ok(Commit {
        flags: r.u8()?,
        commit_lsn: lsn(r)?,
        end_lsn: lsn(r)?,
        commit_time: PgTime(r.i64()?),
    })
}

fn parse_origin<'a>(r: &mut Reader<'a>) -> Result<Origin<'a>, DecodeError> {
    Ok(Origin {
        commit_lsn: lsn(r)?,
        name: r.cstr()?,
    })
}

fn parse_type<'a>(r: &mut Reader<'a>) -> Result<TypeMessage<'a>, DecodeError> {
    Ok(TypeMessage {
        oid: r.u32()?,
        namespace: r.cstr()?,
        name: r.cstr()?,
    })
}

/// A non-negative i16 count that the remaining bytes can hold at `min_bytes` per item.
fn count_i16(r: &mut Reader<'_>, min_bytes: usize) -> Result<usize, DecodeError> {
    let at = r.offset();
    let declared = r.i16()?;
    bounded_count(at, i64::from(declared), r.remaining() / min_bytes)
}

fn bounded_count(at: usize, declared: i64, limit: usize) -> Result<usize, DecodeError> {
    usize::try_from(declared)
        .ok()
        .filter(|count| *count <= limit)
        .ok_or(DecodeError::new(
            at,
            DecodeErrorKind::BadLength { declared, limit },
        ))
}

fn parse_relation(r: &mut Reader<'_>) -> Result<Relation, DecodeError> {
    let oid = r.u32()?;
    let namespace = r.cstr()?.to_owned();
    let name = r.cstr()?.to_owned();
    let replica_identity = match r.u8()? {
        b'd' => ReplicaIdentity::Default,
        b'n' => ReplicaIdentity::Nothing,
        b'f' => ReplicaIdentity::Full,
        b'i' => ReplicaIdentity::Index,
        tag => {
            return Err(DecodeError::new(
                r.offset().saturating_sub(1),
                DecodeErrorKind::UnknownTag {
                    context: "relation replica identity (d, n, f or i)",
                    tag,
                },
            ))
        }
    };
    let count = count_i16(r, MIN_RELATION_COLUMN_BYTES)?;
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        columns.push(parse_relation_column(r)?);
    }
    Ok(Relation {
        oid,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn parse_relation_column(r: &mut Reader<'_>) -> Result<RelationColumn, DecodeError> {
    let flags_at = r.offset();
    let flags = r.u8()?;
    if flags & !COLUMN_IN_REPLICA_IDENTITY != 0 {
        return Err(DecodeError::protocol(
            flags_at,
            format!("relation column flags 0x{flags:02X}: protocol 1 defines only 0 and 1 (part of the replica identity)"),
        ));
    }
    Ok(RelationColumn {
        in_replica_identity: flags == COLUMN_IN_REPLICA_IDENTITY,
        name: r.cstr()?.to_owned(),
        type_oid: r.u32()?,
        type_modifier: r.i32()?,
    })
}

/// A TupleData part: an i16 column count, then one kind byte (and value) per column.
fn parse_tuple<'a>(r: &mut Reader<'a>) -> Result<Tuple<'a>, DecodeError> {
    let count = count_i16(r, MIN_TUPLE_COLUMN_BYTES)?;
    let mut columns = Columns::with_capacity(count);
    for _ in 0..count {
        columns.push(parse_datum(r)?);
    }
    Ok(Tuple { columns })
}

fn parse_datum<'a>(r: &mut Reader<'a>) -> Result<Datum<'a>, DecodeError> {
    let tag = r.u8()?;
    match tag {
        b'n' => Ok(Datum::Null),
        b'u' => Ok(Datum::Unchanged),
        b't' => Ok(Datum::Text(length_prefixed(r)?)),
        b'b' => Ok(Datum::Binary(length_prefixed(r)?)),
        _ => Err(DecodeError::new(
            r.offset().saturating_sub(1),
            DecodeErrorKind::UnknownTag {
                context: "tuple column kind (n, u, t or b)",
                tag,
            },
        )),
    }
}

fn length_prefixed<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    // The value can be at most what follows its 4-byte length.
    let len = r.len_i32(r.remaining().saturating_sub(4))?;
    r.bytes(len)
}

/// Reads a tag byte that must be one of `allowed`.
fn expect_tag(
    r: &mut Reader<'_>,
    allowed: &[u8],
    context: &'static str,
) -> Result<u8, DecodeError> {
    let tag = r.u8()?;
    if allowed.contains(&tag) {
        Ok(tag)
    } else {
        Err(DecodeError::new(
            r.offset().saturating_sub(1),
            DecodeErrorKind::UnknownTag { context, tag },
        ))
    }
}

fn parse_insert<'a>(r: &mut Reader<'a>) -> Result<Insert<'a>, DecodeError> {
    let relation_oid = r.u32()?;
    expect_tag(r, b"N", "insert tuple marker (N)")?;
    Ok(Insert {
        relation_oid,
        new: parse_tuple(r)?,
    })
}

fn old_kind(tag: u8) -> Option<OldKind> {
    match tag {
        b'K' => Some(OldKind::Key),
        b'O' => Some(OldKind::Row),
        _ => None,
    }
}

fn parse_update<'a>(r: &mut Reader<'a>) -> Result<Update<'a>, DecodeError> {
    let relation_oid = r.u32()?;
    let first = expect_tag(r, b"KON", "update tuple marker (K, O or N)")?;
    let old = match old_kind(first) {
        Some(kind) => {
            let tuple = parse_tuple(r)?;
            expect_tag(r, b"N", "update new tuple marker (N) after the old tuple")?;
            Some(OldTuple { kind, tuple })
        }
        None => None,
    };
    let new_at = r.offset();
    let new = parse_tuple(r)?;
    if let Some(old) = &old {
        // Both images come from the same tuple descriptor; different counts mean the
        // stream is corrupt, and filling holes by position would pair the wrong columns.
        if old.tuple.len() != new.len() {
            return Err(DecodeError::protocol(
                new_at,
                format!(
                    "update of relation {relation_oid}: old tuple has {} columns but new tuple has {}",
                    old.tuple.len(),
                    new.len()
                ),
            ));
        }
    }
    Ok(Update {
        relation_oid,
        old,
        new,
    })
}

fn parse_delete<'a>(r: &mut Reader<'a>) -> Result<Delete<'a>, DecodeError> {
    let relation_oid = r.u32()?;
    let tag = expect_tag(r, b"KO", "delete tuple marker (K or O)")?;
    let kind = if tag == b'K' {
        OldKind::Key
    } else {
        OldKind::Row
    };
    Ok(Delete {
        relation_oid,
        old: OldTuple {
            kind,
            tuple: parse_tuple(r)?,
        },
    })
}

fn parse_truncate(r: &mut Reader<'_>) -> Result<Truncate, DecodeError> {
    let count_at = r.offset();
    let declared = r.i32()?;
    let options_at = r.offset();
    let options = r.u8()?;
    let count = bounded_count(count_at, i64::from(declared), r.remaining() / 4)?;
    if options & !(TRUNCATE_CASCADE | TRUNCATE_RESTART_IDENTITY) != 0 {
        return Err(DecodeError::protocol(
            options_at,
            format!("truncate option bits 0x{options:02X}: protocol 1 defines only 1 (CASCADE) and 2 (RESTART IDENTITY)"),
        ));
    }
    let mut relation_oids = SmallVec::with_capacity(count);
    for _ in 0..count {
        relation_oids.push(r.u32()?);
    }
    Ok(Truncate {
        cascade: options & TRUNCATE_CASCADE != 0,
        restart_identity: options & TRUNCATE_RESTART_IDENTITY != 0,
        relation_oids,
    })
}

fn parse_logical<'a>(r: &mut Reader<'a>) -> Result<LogicalMessage<'a>, DecodeError> {
    let flags_at = r.offset();
    let transactional = match r.u8()? {
        0 => false,
        1 => true,
        flags => {
            return Err(DecodeError::protocol(
                flags_at,
                format!("logical message flags 0x{flags:02X}: protocol 1 defines only 0 and 1 (transactional)"),
            ))
        }
    };
    Ok(LogicalMessage {
        transactional,
        lsn: lsn(r)?,
        prefix: r.cstr()?,
        content: length_prefixed(r)?,
    })
}
