//! What `plan` chooses for a column: the decoder for its values and what it was planned
//! for. Plain data; `write` runs it.

use super::datetime::Temporal;
use crate::schema::ColumnType;

/// How one column's values are turned into JSON; chosen once per (type OID, target) pair by
/// `plan`. `pg_type` and `target` are what it was planned for (read them, do not change them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    /// The column's own type (a domain's OID for a domain column).
    pub pg_type: u32,
    /// `pg_type` as messages name it (`PgTypes::name`).
    pub pg_name: String,
    pub target: ColumnType,
    pub(super) decode: Decode,
}

/// One member of a composite value: where its value goes in the ROW and how it is decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberPlan {
    /// The PostgreSQL member name, for messages.
    pub(crate) name: String,
    /// The Feldera ROW member's name as a JSON string literal, quotes included.
    pub(crate) json_key: String,
    pub(crate) plan: ValuePlan,
}

/// The decoder chosen by `plan`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decode {
    Bool,
    /// Integer text range-checked against the column's width.
    Int {
        min: i64,
        max: i64,
    },
    Float,
    /// float4 into DOUBLE: the float4's exact value as a double, not its shortest text (which
    /// a double reader would take for a different number).
    Float4AsDouble,
    Decimal {
        precision: Option<u32>,
        scale: Option<u32>,
    },
    /// The text as a JSON string (every type into VARCHAR; text types into CHAR).
    Text,
    Bytea,
    Temporal(Temporal),
    Uuid,
    Variant,
    /// `dimensions` levels of `{...}`, elements separated by `delimiter` (the element type's
    /// `typdelim`), each decoded by `element`.
    Array {
        dimensions: usize,
        delimiter: u8,
        element: Box<ValuePlan>,
    },
    /// Record text `(...)`, one plan per member in attribute order, into a JSON object.
    Composite {
        members: Vec<MemberPlan>,
    },
}
