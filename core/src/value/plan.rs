//! `plan`: the mapping table from (PostgreSQL type, Feldera column type) to a decoder.
//!
//! This is the one place that decides which pairs are supported. Every type may go to
//! VARCHAR (its text output as a string); the typed targets are the table in
//! docs/guide/types.md, which `value::tests::guide_table` checks against this module; a
//! domain is planned as its base type, arrays recurse on their element type and composites
//! on their members. Anything else is refused once, at contract time, naming both types and
//! what the PostgreSQL type does accept.

use super::array::MAX_DIMENSIONS;
use super::datetime::Temporal;
use super::decode::{Decode, MemberPlan, ValuePlan};
use super::oid;
use super::types::{Member, PgTypes, TypeKind, MAX_TYPE_DEPTH};
use crate::schema::{ColumnType, SqlType};
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

/// What the value decoders know a PostgreSQL type as (domains unwrapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Family<'t> {
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
    Array {
        element: u32,
        delimiter: u8,
    },
    Composite(&'t [Member]),
    /// A type slotline has only the text of (enums, ranges, network types, ...).
    Other,
    /// Neither builtin nor in the catalog answer read at startup.
    Unknown,
    /// A domain chain that does not end within [`MAX_TYPE_DEPTH`] (never from PostgreSQL).
    Endless,
}

impl<'t> Family<'t> {
    pub(super) fn of(types: &'t PgTypes, pg_type: u32) -> Family<'t> {
        let Some(resolved) = types.resolve(pg_type, -1) else {
            return Family::Endless;
        };
        let pg_type = resolved.oid;
        if let Some(family) = Family::builtin(pg_type) {
            return family;
        }
        match types.get(pg_type).map(|info| &info.kind) {
            Some(TypeKind::Array { element, delimiter }) => Family::Array {
                element: *element,
                delimiter: *delimiter,
            },
            Some(TypeKind::Composite { members }) => Family::Composite(members),
            Some(TypeKind::Text) => Family::Text,
            Some(TypeKind::Opaque { .. } | TypeKind::Domain { .. }) => Family::Other,
            None => Family::Unknown,
        }
    }

    fn builtin(pg_type: u32) -> Option<Family<'static>> {
        Some(match pg_type {
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
            oid::INTERVAL | oid::TIMETZ => Family::Other,
            _ => {
                return oid::array_element(pg_type).map(|element| Family::Array {
                    element,
                    delimiter: b',',
                })
            }
        })
    }

    pub(super) fn accepted(self) -> &'static str {
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
            Family::Composite(_) => {
                "a ROW type with the same member names, each member accepting its PostgreSQL \
                 member's type, or VARCHAR"
            }
            Family::Other => {
                "VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare \
                 the Feldera column VARCHAR and convert it in a Feldera view (CAST), or change \
                 the PostgreSQL column to a type slotline maps to it"
            }
            Family::Unknown => {
                "VARCHAR only: the catalog slotline read does not describe it (a type created \
                 since? a change naming it reads the catalog once more before it is refused)"
            }
            Family::Endless => "VARCHAR only: its catalog entry names domains without end",
        }
    }
}

/// Whether `pg_type` is builtin or described by `types` (the catalog answer a session read):
/// a type created after that read is neither, and the next session's catalog has it.
pub fn is_known(types: &PgTypes, pg_type: u32) -> bool {
    !matches!(Family::of(types, pg_type), Family::Unknown)
}

/// Chooses the decoder for a column of PostgreSQL type `pg_type` (a builtin OID, or one
/// `types` describes) and a Feldera column type, or says why the pair is not supported.
pub fn plan(types: &PgTypes, pg_type: u32, target: &ColumnType) -> Result<ValuePlan, Unsupported> {
    plan_at(types, pg_type, target, 0)
}

/// `plan` at `depth` levels inside a column type (array elements and composite members).
fn plan_at(
    types: &PgTypes,
    pg_type: u32,
    target: &ColumnType,
    depth: usize,
) -> Result<ValuePlan, Unsupported> {
    let decode = choose(types, pg_type, target, depth)?;
    Ok(ValuePlan {
        pg_type,
        pg_name: types.name(pg_type).into_owned(),
        target: target.clone(),
        decode,
    })
}

fn choose(
    types: &PgTypes,
    pg_type: u32,
    target: &ColumnType,
    depth: usize,
) -> Result<Decode, Unsupported> {
    let family = Family::of(types, pg_type);
    let name = types.name(pg_type);
    let refuse = |why: &str| Unsupported {
        pg_type: name.clone().into_owned(),
        target: target.to_string(),
        why: format!("{why}; {name} is accepted by {}", family.accepted()),
    };
    if depth > MAX_TYPE_DEPTH {
        return Err(refuse(&format!(
            "its type nests arrays, domains and composites deeper than {MAX_TYPE_DEPTH} levels"
        )));
    }
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
        (Family::Array { element, delimiter }, T::Array) => {
            array(types, pg_type, element, delimiter, target, depth)?
        }
        (Family::Composite(members), T::Struct) => {
            composite(types, pg_type, members, target, depth)?
        }
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
fn array(
    types: &PgTypes,
    pg_type: u32,
    element: u32,
    delimiter: u8,
    target: &ColumnType,
    depth: usize,
) -> Result<Decode, Unsupported> {
    let refuse = |why: String| Unsupported {
        pg_type: types.name(pg_type).into_owned(),
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
    let element = plan_at(types, element, leaf, depth + 1)
        .map_err(|inner| refuse(format!("its elements cannot be decoded: {inner}")))?;
    Ok(Decode::Array {
        dimensions,
        delimiter,
        element: Box::new(element),
    })
}

/// A ROW column fed by a composite type: every PostgreSQL member matches one ROW member by
/// name (the exact spelling first, then case-insensitively, as columns match) and is planned
/// against it; a member on one side only is refused, since record text carries every
/// member in order and Feldera's ROW needs each of its own.
fn composite(
    types: &PgTypes,
    pg_type: u32,
    members: &[Member],
    target: &ColumnType,
    depth: usize,
) -> Result<Decode, Unsupported> {
    let name = types.name(pg_type);
    let fields = &target.fields;
    let mut claimed = vec![false; fields.len()];
    let mut plans = Vec::with_capacity(members.len());
    let mut problems = Vec::new();
    for member in members {
        let exact = fields.iter().position(|f| f.name.name == member.name);
        let folded: Vec<usize> = fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name.matches(&member.name))
            .map(|(i, _)| i)
            .collect();
        let index = match (exact, folded.as_slice()) {
            (Some(i), _) | (None, &[i]) => i,
            (None, []) => {
                problems.push(format!(
                    "member {} has no ROW member of that name",
                    member.name
                ));
                continue;
            }
            (None, _) => {
                problems.push(format!(
                    "member {} matches several ROW members differing only in case",
                    member.name
                ));
                continue;
            }
        };
        let (Some(field), Some(taken)) = (fields.get(index), claimed.get_mut(index)) else {
            continue;
        };
        if std::mem::replace(taken, true) {
            problems.push(format!(
                "member {} matches ROW member {}, which another member matched already",
                member.name, field.name
            ));
            continue;
        }
        match plan_at(types, member.type_oid, &field.columntype, depth + 1) {
            Ok(plan) => plans.push(MemberPlan {
                name: member.name.clone(),
                json_key: field.name.json_key(),
                plan,
            }),
            Err(inner) => problems.push(format!("member {}: {inner}", member.name)),
        }
    }
    for (field, taken) in fields.iter().zip(&claimed) {
        if !taken {
            problems.push(format!(
                "ROW member {} is not a member of {name}",
                field.name
            ));
        }
    }
    if problems.is_empty() {
        return Ok(Decode::Composite { members: plans });
    }
    Err(Unsupported {
        pg_type: name.clone().into_owned(),
        target: target.to_string(),
        why: format!(
            "the members do not match ({}); {name} is accepted by {}",
            problems.join("; "),
            Family::Composite(members).accepted()
        ),
    })
}
