//! pgoutput payload builders for scripts.

use super::fake_pg::FakeTable;
use crate::pgoutput::{encode, OldKind};
use crate::time::PgTime;
use crate::Lsn;

/// A Begin whose record starts 0x100 bytes before the commit record at `final_lsn`.
pub fn begin(final_lsn: u64, xid: u32) -> (Lsn, Vec<u8>) {
    (
        Lsn(final_lsn - 0x100),
        encode::begin(Lsn(final_lsn), PgTime(0), xid),
    )
}

/// A Begin (as [`begin`]) of a transaction that committed at `commit_time`.
pub fn begin_at(final_lsn: u64, xid: u32, commit_time: PgTime) -> (Lsn, Vec<u8>) {
    (
        Lsn(final_lsn - 0x100),
        encode::begin(Lsn(final_lsn), commit_time, xid),
    )
}

pub fn commit(commit_lsn: u64, end_lsn: u64) -> (Lsn, Vec<u8>) {
    (
        Lsn(commit_lsn),
        encode::commit(Lsn(commit_lsn), Lsn(end_lsn), PgTime(0)),
    )
}

pub fn relation(table: &FakeTable) -> (Lsn, Vec<u8>) {
    (Lsn::ZERO, encode::relation(&table.relation))
}

pub fn insert(at: u64, oid: u32, values: &[Option<&str>]) -> (Lsn, Vec<u8>) {
    (Lsn(at), encode::insert(oid, encode::row(values)))
}

pub fn update(
    at: u64,
    oid: u32,
    old: Option<(OldKind, &[Option<&str>])>,
    new: &[Option<&str>],
) -> (Lsn, Vec<u8>) {
    (
        Lsn(at),
        encode::update(oid, old.map(|(k, v)| (k, encode::row(v))), encode::row(new)),
    )
}

/// An update whose new row has an unchanged-TOAST hole at `hole`.
pub fn update_with_hole(
    at: u64,
    oid: u32,
    old: Option<(OldKind, &[Option<&str>])>,
    new: &[Option<&str>],
    hole: usize,
) -> (Lsn, Vec<u8>) {
    let mut row = encode::row(new);
    row.columns[hole] = crate::pgoutput::Datum::Unchanged;
    (
        Lsn(at),
        encode::update(oid, old.map(|(k, v)| (k, encode::row(v))), row),
    )
}

pub fn delete(at: u64, oid: u32, kind: OldKind, old: &[Option<&str>]) -> (Lsn, Vec<u8>) {
    (Lsn(at), encode::delete(oid, kind, encode::row(old)))
}

pub fn truncate(at: u64, oids: &[u32]) -> (Lsn, Vec<u8>) {
    (Lsn(at), encode::truncate(oids, false, false))
}
