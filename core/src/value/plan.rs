//! `plan`: the mapping table from (PostgreSQL type, Feldera column type) to a decoder.
//!
//! This is the one place that decides which pairs are supported. Every type may go to
//! VARCHAR (its text output as a string); the typed targets follow the table in
//! POSTGRES.md; arrays recurse on their element type. Anything else is refused once, at
//! contract time, naming both types and what the PostgreSQL type does accept.

use super::array::MAX_DIMENSIONS;
use super::datetime::Temporal;
use super::{oid, Decode, ValuePlan};
use crate::contract::{ColumnType, SqlType};
use std::fmt;

/// The pair cannot be mapped: names both types, why, and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub pg_type: String,
    pub target: String,
    pub why: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PostgreSQL type {} cannot be sent to a Feldera {} column: {}",
            self.pg_type, self.target, self.why
        )
    }
}

impl std::error::Error for Unsupported {}

/// What the value decoders know a PostgreSQL type as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Bool,
    Int,
    Float4,
    Float8,
    Numeric,
    Text,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Uuid,
    Json,
    Array { element: u32 },
    Other,
}

impl Family {
    fn of(pg_type: u32) -> Family {
        match pg_type {
            oid::BOOL => Family::Bool,
            oid::INT2 | oid::INT4 | oid::INT8 | oid::OID => Family::Int,
            oid::FLOAT4 => Family::Float4,
            oid::FLOAT8 => Family::Float8,
            oid::NUMERIC => Family::Numeric,
            oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR => Family::Text,
            oid::BYTEA => Family::Bytea,
            oid::DATE => Family::Date,
            oid::TIME => Family::Time,
            oid::TIMESTAMP => Family::Timestamp,
            oid::TIMESTAMPTZ => Family::TimestampTz,
            oid::UUID => Family::Uuid,
            oid::JSON | oid::JSONB => Family::Json,
            _ => match oid::array_element(pg_type) {
                Some(element) => Family::Array { element },
                None => Family::Other,
            },
        }
    }

    fn accepted(self) -> &'static str {
        match self {
            Family::Bool => "BOOLEAN or VARCHAR",
            Family::Int => {
                "TINYINT, SMALLINT, INTEGER or BIGINT (range-checked per value), or VARCHAR"
            }
            Family::Float4 => "REAL, DOUBLE or VARCHAR",
            Family::Float8 => "DOUBLE or VARCHAR",
            Family::Numeric => "DECIMAL(p, s) or VARCHAR",
            Family::Text => "VARCHAR or CHAR",
            Family::Bytea => "BINARY, VARBINARY or VARCHAR",
            Family::Date => "DATE or VARCHAR",
            Family::Time => "TIME or VARCHAR",
            Family::Timestamp => "TIMESTAMP or VARCHAR",
            Family::TimestampTz => "TIMESTAMP (UTC wall time), TIMESTAMP_TZ or VARCHAR",
            Family::Uuid => "UUID or VARCHAR",
            Family::Json => "VARIANT or VARCHAR",
            Family::Array { .. } => "an ARRAY whose element type accepts the element, or VARCHAR",
            Family::Other => "VARCHAR only (the text PostgreSQL prints)",
        }
    }
}

/// Chooses the decoder for a PostgreSQL type OID and a Feldera column type, or says why the
/// pair is not supported.
pub fn plan(pg_type: u32, target: &ColumnType) -> Result<ValuePlan, Unsupported> {
    let decode = choose(pg_type, target)?;
    Ok(ValuePlan {
        pg_type,
        target: target.clone(),
        decode,
    })
}

fn choose(pg_type: u32, target: &ColumnType) -> Result<Decode, Unsupported> {
    let family = Family::of(pg_type);
    let refuse = |why: &str| Unsupported {
        pg_type: oid::name(pg_type).into_owned(),
        target: target.to_string(),
        why: format!(
            "{why}; {} is accepted by {}",
            oid::name(pg_type),
            family.accepted()
        ),
    };
    let int = |min: i64, max: i64| Decode::Int { min, max };
    use SqlType as T;
    Ok(match (family, target.sql) {
        (_, T::Varchar) => Decode::Text,
        (Family::Bool, T::Boolean) => Decode::Bool,
        (Family::Int, T::TinyInt) => int(i8::MIN.into(), i8::MAX.into()),
        (Family::Int, T::SmallInt) => int(i16::MIN.into(), i16::MAX.into()),
        (Family::Int, T::Integer) => int(i32::MIN.into(), i32::MAX.into()),
        (Family::Int, T::BigInt) => int(i64::MIN, i64::MAX),
        (Family::Float4, T::Real) | (Family::Float8, T::Double) => Decode::Float,
        (Family::Float4, T::Double) => Decode::Float4AsDouble,
        (Family::Float8, T::Real) => {
            return Err(refuse("float8 values would be rounded to REAL's precision"))
        }
        (Family::Numeric, T::Decimal) => decimal(target).map_err(refuse)?,
        (Family::Text, T::Char) => Decode::Text,
        (Family::Bytea, T::Binary | T::Varbinary) => Decode::Bytea,
        (Family::Date, T::Date) => Decode::Temporal(Temporal::Date),
        (Family::Time, T::Time) => Decode::Temporal(Temporal::Time),
        (Family::Timestamp, T::Timestamp) => Decode::Temporal(Temporal::Timestamp),
        (Family::Timestamp, T::TimestampTz) => {
            return Err(refuse(
                "timestamp without time zone carries no offset to place it on the UTC line",
            ))
        }
        (Family::TimestampTz, T::Timestamp) => {
            Decode::Temporal(Temporal::TimestampTz { rfc3339: false })
        }
        (Family::TimestampTz, T::TimestampTz) => {
            Decode::Temporal(Temporal::TimestampTz { rfc3339: true })
        }
        (Family::Uuid, T::Uuid) => Decode::Uuid,
        (Family::Json, T::Variant) => Decode::Variant,
        (Family::Array { element }, T::Array) => array(pg_type, element, target)?,
        _ => return Err(refuse("slotline has no conversion for this pair")),
    })
}

fn decimal(target: &ColumnType) -> Result<Decode, &'static str> {
    let param = |value: Option<i64>| match value {
        None => Ok(None),
        Some(v) => u32::try_from(v)
            .map(Some)
            .map_err(|_| "the column's DECIMAL precision/scale is negative or too large"),
    };
    let precision = param(target.precision)?;
    let scale = param(target.scale)?;
    if let (Some(p), Some(s)) = (precision, scale) {
        if s > p {
            return Err("the column's DECIMAL scale exceeds its precision");
        }
    }
    Ok(Decode::Decimal { precision, scale })
}

/// An ARRAY column: one PostgreSQL dimension per ARRAY nesting level, the innermost
/// component planned against the element type.
fn array(pg_type: u32, element: u32, target: &ColumnType) -> Result<Decode, Unsupported> {
    let refuse = |why: String| Unsupported {
        pg_type: oid::name(pg_type).into_owned(),
        target: target.to_string(),
        why,
    };
    let mut dimensions = 0;
    let mut leaf = target;
    while leaf.sql == SqlType::Array {
        dimensions += 1;
        if dimensions > MAX_DIMENSIONS {
            return Err(refuse(format!(
                "PostgreSQL arrays have at most {MAX_DIMENSIONS} dimensions"
            )));
        }
        leaf = leaf
            .component
            .as_deref()
            .ok_or_else(|| refuse("the ARRAY column has no component type".into()))?;
    }
    let element = plan(element, leaf)
        .map_err(|inner| refuse(format!("its elements cannot be decoded: {inner}")))?;
    Ok(Decode::Array {
        dimensions,
        element: Box::new(element),
    })
}
