//! Value decoding: a PostgreSQL value's text output to Feldera JSON, driven by the pair
//! (PostgreSQL type OID, Feldera column type). Shared by pgoutput and COPY, which print values
//! with the same output functions, so one decoder keeps a restart from "changing" rows.
//!
//! `plan` is called once per column when the contract is built and refuses unsupported pairs
//! with both types named and the accepted targets listed; `ValuePlan::write_json` is the hot
//! path, appending one JSON value to the caller's NDJSON buffer without allocating for
//! integers, floats, text, uuids and date-times. The text it expects is what PostgreSQL
//! prints under the pinned session settings (DateStyle=ISO, TimeZone=UTC,
//! IntervalStyle=postgres, bytea_output=hex, extra_float_digits=3, client_encoding=UTF8);
//! anything else is refused with what was expected, never guessed.
//!
//! This module never sees rows, tables or column names: the caller adds them to an error
//! with `ValueError::in_column`.

mod array;
mod datetime;
mod decimal;
pub mod error;
mod escape;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod json;
pub mod oid;
mod plan;
mod record;
mod scalar;
pub mod suggest;
#[cfg(test)]
mod tests;
pub mod types;

use crate::contract::ColumnType;
pub use error::{ColumnValueError, ValueError, ValueErrorKind};
pub use plan::{plan, Unsupported};
pub use types::PgTypes;

use datetime::Temporal;

/// How one column's values are turned into JSON; chosen once per (type OID, target) pair by
/// `plan`. `pg_type` and `target` are what it was planned for (read them, do not change them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    /// The column's own type (a domain's OID for a domain column).
    pub pg_type: u32,
    /// `pg_type` as messages name it (`PgTypes::name`).
    pub pg_name: String,
    pub target: ColumnType,
    decode: Decode,
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
enum Decode {
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

/// What a decoder did with a well-formed value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Written,
    /// The value has no Feldera representation (NaN, infinity, BC, ...): `null` if the column
    /// is nullable, refused otherwise. Nothing was written.
    Null {
        why: &'static str,
    },
}

impl ValuePlan {
    /// Appends the JSON for one non-null value's text. On error `out` is left as it was.
    pub fn write_json(&self, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
        let start = out.len();
        self.write_value(text, out).map_err(|kind| {
            out.truncate(start);
            self.error(kind)
        })
    }

    /// Appends `null` for a SQL NULL, or refuses it for a NOT NULL column.
    pub fn write_null(&self, out: &mut Vec<u8>) -> Result<(), ValueError> {
        self.write_null_kind(out).map_err(|kind| self.error(kind))
    }

    /// `write_json` or `write_null`, for a datum that may be NULL.
    pub fn write_datum(&self, datum: Option<&[u8]>, out: &mut Vec<u8>) -> Result<(), ValueError> {
        match datum {
            Some(text) => self.write_json(text, out),
            None => self.write_null(out),
        }
    }

    fn error(&self, kind: ValueErrorKind) -> ValueError {
        ValueError {
            pg_type: self.pg_name.clone(),
            target: self.target.to_string(),
            kind,
        }
    }

    pub(crate) fn write_null_kind(&self, out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
        if self.target.nullable {
            out.extend_from_slice(b"null");
            Ok(())
        } else {
            Err(ValueErrorKind::NullNotAllowed)
        }
    }

    /// Decodes into `out`; on error `out` may hold a partial value (callers truncate).
    pub(crate) fn write_value(&self, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
        let outcome = match &self.decode {
            Decode::Bool => scalar::write_bool(text, out)?,
            Decode::Int { min, max } => scalar::write_int(text, *min, *max, out)?,
            Decode::Float => scalar::write_float(text, out)?,
            Decode::Float4AsDouble => scalar::write_float4_as_double(text, out)?,
            Decode::Decimal { precision, scale } => {
                decimal::write_decimal(text, *precision, *scale, out)?
            }
            Decode::Text => scalar::write_text(text, out)?,
            Decode::Bytea => scalar::write_bytea(text, out)?,
            Decode::Temporal(kind) => datetime::write_temporal(*kind, text, out)?,
            Decode::Uuid => scalar::write_uuid(text, out)?,
            Decode::Variant => {
                json::write_variant(text, out)?;
                Outcome::Written
            }
            Decode::Array {
                dimensions,
                delimiter,
                element,
            } => {
                array::write_array(text, *dimensions, *delimiter, element, out)?;
                Outcome::Written
            }
            Decode::Composite { members } => {
                record::write_record(text, members, out)?;
                Outcome::Written
            }
        };
        match outcome {
            Outcome::Written => Ok(()),
            Outcome::Null { .. } if self.target.nullable => {
                out.extend_from_slice(b"null");
                Ok(())
            }
            Outcome::Null { why } => Err(ValueErrorKind::unrepresentable(text, why)),
        }
    }
}
