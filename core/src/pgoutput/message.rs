//! The decoded form of one pgoutput (protocol 1) message, borrowing from the payload.
//!
//! This module owns the data types and the small questions a caller asks of them ("did this
//! UPDATE carry its old key?", "fill the TOAST holes from the old row"). It never reads bytes
//! (that is `parse`) and never looks a relation up (that is `cache`).

use smallvec::SmallVec;

use super::relation::Relation;
use crate::lsn::Lsn;
use crate::time::PgTime;

/// How many columns a tuple holds before its column list spills to the heap. Most tables
/// replicated by slotline are narrower than this, so a row costs no allocation.
pub const TUPLE_INLINE_COLUMNS: usize = 16;

/// One pgoutput message. Tuple values and names borrow from the XLogData payload; only a
/// Relation (rare, and kept by the cache) and a Truncate's OID list are owned.
///
/// An Update holds two inline tuples, so it is far larger than a Begin. Boxing it would
/// cost an allocation per replicated row, which the inline tuples exist to avoid; a
/// message lives for one row and is moved a handful of times, so the size is cheap.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Begin(Begin),
    Commit(Commit),
    Origin(Origin<'a>),
    Relation(Relation),
    Type(TypeMessage<'a>),
    Insert(Insert<'a>),
    Update(Update<'a>),
    Delete(Delete<'a>),
    Truncate(Truncate),
    /// `M`: a logical decoding message (`pg_logical_emit_message`, only with `messages 'true'`).
    Logical(LogicalMessage<'a>),
}

/// `B`: a transaction starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Begin {
    /// LSN of the transaction's commit record.
    pub final_lsn: Lsn,
    pub commit_time: PgTime,
    pub xid: u32,
}

/// `C`: a transaction ends. Acknowledge `end_lsn`, not `commit_lsn` (docs/postgres.md,
/// "Slots and positions").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Unused by protocol 1 (documented as 0); kept so nothing on the wire is dropped silently.
    pub flags: u8,
    pub commit_lsn: Lsn,
    /// First byte after the transaction.
    pub end_lsn: Lsn,
    pub commit_time: PgTime,
}

/// `O`: the transaction was replicated into this server from origin `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    /// LSN of the commit on the origin server.
    pub commit_lsn: Lsn,
    pub name: &'a str,
}

/// `Y`: a non-builtin type used by a following Relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeMessage<'a> {
    pub oid: u32,
    /// Schema name (empty for `pg_catalog`).
    pub namespace: &'a str,
    pub name: &'a str,
}

/// `I`: a new row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insert<'a> {
    pub relation_oid: u32,
    pub new: Tuple<'a>,
}

/// `U`: a changed row: an optional old image (`K` or `O`), then the new row (`N`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update<'a> {
    pub relation_oid: u32,
    pub old: Option<OldTuple<'a>>,
    pub new: Tuple<'a>,
}

/// `D`: a removed row, identified by its key (`K`) or its whole old row (`O`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete<'a> {
    pub relation_oid: u32,
    pub old: OldTuple<'a>,
}

/// `T`: one TRUNCATE statement over one or more relations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncate {
    pub cascade: bool,
    pub restart_identity: bool,
    pub relation_oids: SmallVec<[u32; 4]>,
}

/// `M`: a logical decoding message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogicalMessage<'a> {
    pub transactional: bool,
    pub lsn: Lsn,
    pub prefix: &'a str,
    pub content: &'a [u8],
}

/// Which old image an UPDATE or DELETE carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OldKind {
    /// `K`: replica identity columns only; every other column is null.
    Key,
    /// `O`: the whole old row (REPLICA IDENTITY FULL).
    Row,
}

impl OldKind {
    /// The tag byte that introduces this image on the wire.
    pub fn tag(self) -> u8 {
        match self {
            OldKind::Key => b'K',
            OldKind::Row => b'O',
        }
    }
}

/// The old image of an UPDATE or DELETE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OldTuple<'a> {
    pub kind: OldKind,
    pub tuple: Tuple<'a>,
}

/// One column of a tuple as pgoutput sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Datum<'a> {
    /// `n`: SQL NULL (or, in a `K` image, a column that is not part of the key).
    Null,
    /// `u`: an unchanged TOASTed value that was not sent. A hole, not a value: never read it
    /// as null or empty.
    Unchanged,
    /// `t`: the type's text output.
    Text(&'a [u8]),
    /// `b`: the type's binary send format (only with `binary 'true'`).
    Binary(&'a [u8]),
}

impl<'a> Datum<'a> {
    /// The tag byte of this kind on the wire.
    pub fn tag(&self) -> u8 {
        match self {
            Datum::Null => b'n',
            Datum::Unchanged => b'u',
            Datum::Text(_) => b't',
            Datum::Binary(_) => b'b',
        }
    }

    /// The sent bytes, for `t` and `b`.
    pub fn bytes(&self) -> Option<&'a [u8]> {
        match self {
            Datum::Text(bytes) | Datum::Binary(bytes) => Some(bytes),
            Datum::Null | Datum::Unchanged => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    pub fn is_unchanged(&self) -> bool {
        matches!(self, Datum::Unchanged)
    }
}

/// The column list of a tuple.
pub type Columns<'a> = SmallVec<[Datum<'a>; TUPLE_INLINE_COLUMNS]>;

/// A TupleData part: one datum per column of the relation, in relation order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tuple<'a> {
    pub columns: Columns<'a>,
}

impl<'a> Tuple<'a> {
    pub fn new(columns: Columns<'a>) -> Self {
        Tuple { columns }
    }

    pub fn len(&self) -> usize {
        self.columns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<&Datum<'a>> {
        self.columns.get(index)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Datum<'a>> {
        self.columns.iter()
    }

    /// Whether any column is an unchanged-TOAST hole.
    pub fn has_unchanged(&self) -> bool {
        self.columns.iter().any(Datum::is_unchanged)
    }
}

impl<'a> FromIterator<Datum<'a>> for Tuple<'a> {
    fn from_iter<I: IntoIterator<Item = Datum<'a>>>(iter: I) -> Self {
        Tuple {
            columns: iter.into_iter().collect(),
        }
    }
}

impl<'a> Update<'a> {
    /// Which old image the message carried, if any.
    pub fn old_kind(&self) -> Option<OldKind> {
        self.old.as_ref().map(|old| old.kind)
    }

    /// Whether the replica identity changed, decided only from what the message carried:
    /// `Some(true)` with a `K` image (PostgreSQL sends one only when the key changed),
    /// `Some(false)` with no old image, and `None` with an `O` image (REPLICA IDENTITY FULL
    /// sends the old row on every UPDATE, so the caller must compare the columns it keys on).
    pub fn key_changed_per_message(&self) -> Option<bool> {
        match self.old_kind() {
            None => Some(false),
            Some(OldKind::Key) => Some(true),
            Some(OldKind::Row) => None,
        }
    }

    /// The new row with every `u` hole filled from the old row when the message carried one
    /// (`O`, REPLICA IDENTITY FULL). Without an old row the holes stay: there is nothing
    /// honest to put there. Borrows the same payload; copies no value bytes.
    pub fn new_filled_from_old(&self) -> Tuple<'a> {
        let old_row = match &self.old {
            Some(OldTuple {
                kind: OldKind::Row,
                tuple,
            }) => tuple,
            _ => return self.new.clone(),
        };
        // The parser guarantees both images have the same column count; `get` keeps this
        // total for hand-built values too.
        self.new
            .iter()
            .enumerate()
            .map(|(i, datum)| match (datum, old_row.get(i)) {
                (Datum::Unchanged, Some(old)) => *old,
                _ => *datum,
            })
            .collect()
    }
}

impl Message<'_> {
    /// The relation a row message (Insert, Update, Delete) applies to.
    pub fn row_relation_oid(&self) -> Option<u32> {
        match self {
            Message::Insert(m) => Some(m.relation_oid),
            Message::Update(m) => Some(m.relation_oid),
            Message::Delete(m) => Some(m.relation_oid),
            _ => None,
        }
    }

    /// The wire tag of this message.
    pub fn tag(&self) -> u8 {
        match self {
            Message::Begin(_) => b'B',
            Message::Commit(_) => b'C',
            Message::Origin(_) => b'O',
            Message::Relation(_) => b'R',
            Message::Type(_) => b'Y',
            Message::Insert(_) => b'I',
            Message::Update(_) => b'U',
            Message::Delete(_) => b'D',
            Message::Truncate(_) => b'T',
            Message::Logical(_) => b'M',
        }
    }
}
