//! Test-input encoders: the bytes pgoutput protocol 1 would send for a message, so tests
//! can script a replication stream without a server.
//!
//! Only built with the `testing` feature; the shells never encode pgoutput. The layout is
//! written from the manual, independently of `parse`, and the hand-written byte tests in
//! `tests.rs` pin both to the documented layout. Values outside what the wire can carry
//! (more than 32,767 columns, a value over 2 GiB) are programming errors in a test and
//! panic with that explanation.

use super::message::{
    Begin, Commit, Datum, Delete, Insert, LogicalMessage, Message, OldKind, OldTuple, Origin,
    Truncate, Tuple, TypeMessage, Update,
};
use super::relation::Relation;
use crate::lsn::Lsn;
use crate::time::PgTime;

/// The payload bytes of `message`.
pub fn encode(message: &Message<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(message, &mut out);
    out
}

/// Appends the payload bytes of `message` to `out`.
pub fn encode_into(message: &Message<'_>, out: &mut Vec<u8>) {
    out.push(message.tag());
    match message {
        Message::Begin(m) => {
            out.extend_from_slice(&m.final_lsn.0.to_be_bytes());
            out.extend_from_slice(&m.commit_time.0.to_be_bytes());
            out.extend_from_slice(&m.xid.to_be_bytes());
        }
        Message::Commit(m) => {
            out.push(m.flags);
            out.extend_from_slice(&m.commit_lsn.0.to_be_bytes());
            out.extend_from_slice(&m.end_lsn.0.to_be_bytes());
            out.extend_from_slice(&m.commit_time.0.to_be_bytes());
        }
        Message::Origin(m) => {
            out.extend_from_slice(&m.commit_lsn.0.to_be_bytes());
            put_cstr(out, m.name);
        }
        Message::Relation(r) => put_relation(out, r),
        Message::Type(m) => {
            out.extend_from_slice(&m.oid.to_be_bytes());
            put_cstr(out, m.namespace);
            put_cstr(out, m.name);
        }
        Message::Insert(m) => {
            out.extend_from_slice(&m.relation_oid.to_be_bytes());
            out.push(b'N');
            put_tuple(out, &m.new);
        }
        Message::Update(m) => {
            out.extend_from_slice(&m.relation_oid.to_be_bytes());
            if let Some(old) = &m.old {
                out.push(old.kind.tag());
                put_tuple(out, &old.tuple);
            }
            out.push(b'N');
            put_tuple(out, &m.new);
        }
        Message::Delete(m) => {
            out.extend_from_slice(&m.relation_oid.to_be_bytes());
            out.push(m.old.kind.tag());
            put_tuple(out, &m.old.tuple);
        }
        Message::Truncate(m) => put_truncate(out, m),
        Message::Logical(m) => {
            out.push(u8::from(m.transactional));
            out.extend_from_slice(&m.lsn.0.to_be_bytes());
            put_cstr(out, m.prefix);
            put_len_prefixed(out, m.content);
        }
    }
}

fn put_cstr(out: &mut Vec<u8>, s: &str) {
    assert!(
        !s.contains('\0'),
        "a pgoutput string cannot contain NUL: {s:?}"
    );
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

fn put_len_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = i32::try_from(bytes.len()).expect("a pgoutput value is at most i32::MAX bytes");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_count_i16(out: &mut Vec<u8>, count: usize) {
    let count = i16::try_from(count).expect("pgoutput counts columns in an i16");
    out.extend_from_slice(&count.to_be_bytes());
}

fn put_relation(out: &mut Vec<u8>, r: &Relation) {
    out.extend_from_slice(&r.oid.to_be_bytes());
    put_cstr(out, &r.namespace);
    put_cstr(out, &r.name);
    out.push(r.replica_identity.tag());
    put_count_i16(out, r.columns.len());
    for column in &r.columns {
        out.push(u8::from(column.in_replica_identity));
        put_cstr(out, &column.name);
        out.extend_from_slice(&column.type_oid.to_be_bytes());
        out.extend_from_slice(&column.type_modifier.to_be_bytes());
    }
}

fn put_tuple(out: &mut Vec<u8>, tuple: &Tuple<'_>) {
    put_count_i16(out, tuple.len());
    for datum in tuple.iter() {
        out.push(datum.tag());
        if let Some(bytes) = datum.bytes() {
            put_len_prefixed(out, bytes);
        }
    }
}

fn put_truncate(out: &mut Vec<u8>, m: &Truncate) {
    let count = i32::try_from(m.relation_oids.len()).expect("truncate counts relations in an i32");
    out.extend_from_slice(&count.to_be_bytes());
    out.push(u8::from(m.cascade) | (u8::from(m.restart_identity) << 1));
    for oid in &m.relation_oids {
        out.extend_from_slice(&oid.to_be_bytes());
    }
}

/// A `t` datum from text.
pub fn text(s: &str) -> Datum<'_> {
    Datum::Text(s.as_bytes())
}

/// A tuple from optional texts: `None` is SQL NULL.
pub fn row<'a>(values: &[Option<&'a str>]) -> Tuple<'a> {
    values.iter().map(|v| v.map_or(Datum::Null, text)).collect()
}

pub fn begin(final_lsn: Lsn, commit_time: PgTime, xid: u32) -> Vec<u8> {
    encode(&Message::Begin(Begin {
        final_lsn,
        commit_time,
        xid,
    }))
}

pub fn commit(commit_lsn: Lsn, end_lsn: Lsn, commit_time: PgTime) -> Vec<u8> {
    encode(&Message::Commit(Commit {
        flags: 0,
        commit_lsn,
        end_lsn,
        commit_time,
    }))
}

pub fn origin(commit_lsn: Lsn, name: &str) -> Vec<u8> {
    encode(&Message::Origin(Origin { commit_lsn, name }))
}

pub fn relation(relation: &Relation) -> Vec<u8> {
    let mut out = vec![b'R'];
    put_relation(&mut out, relation);
    out
}

pub fn type_message(oid: u32, namespace: &str, name: &str) -> Vec<u8> {
    encode(&Message::Type(TypeMessage {
        oid,
        namespace,
        name,
    }))
}

pub fn insert(relation_oid: u32, new: Tuple<'_>) -> Vec<u8> {
    encode(&Message::Insert(Insert { relation_oid, new }))
}

pub fn update<'a>(relation_oid: u32, old: Option<(OldKind, Tuple<'a>)>, new: Tuple<'a>) -> Vec<u8> {
    encode(&Message::Update(Update {
        relation_oid,
        old: old.map(|(kind, tuple)| OldTuple { kind, tuple }),
        new,
    }))
}

pub fn delete(relation_oid: u32, kind: OldKind, old: Tuple<'_>) -> Vec<u8> {
    encode(&Message::Delete(Delete {
        relation_oid,
        old: OldTuple { kind, tuple: old },
    }))
}

pub fn truncate(relation_oids: &[u32], cascade: bool, restart_identity: bool) -> Vec<u8> {
    encode(&Message::Truncate(Truncate {
        cascade,
        restart_identity,
        relation_oids: relation_oids.iter().copied().collect(),
    }))
}

pub fn logical_message(transactional: bool, lsn: Lsn, prefix: &str, content: &[u8]) -> Vec<u8> {
    encode(&Message::Logical(LogicalMessage {
        transactional,
        lsn,
        prefix,
        content,
    }))
}
