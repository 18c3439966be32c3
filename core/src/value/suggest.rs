//! `suggest`: the Feldera column type `slotline ddl` declares for a PostgreSQL column type,
//! read from the same families `plan` decides pairs by: the Feldera type that holds every
//! value of the PostgreSQL type (`int2` into SMALLINT, `oid` into BIGINT, `varchar(n)` into
//! VARCHAR(n)), within the pairs docs/guide/types.md lists.
//!
//! A suggestion is only a proposal: `ops::ddl` hands every table it builds to the column
//! mapping (`contract::plan_mapping`, what a start and `check` run), so a suggestion that
//! `plan` would refuse is caught there, not trusted. Never plans and never decodes.

use super::array::MAX_DIMENSIONS;
use super::oid;
use super::plan::Family;
use super::types::{PgTypes, MAX_TYPE_DEPTH};
use crate::schema::names::feldera_ident;
use crate::schema::{ColumnType, Field, SqlType};

/// The largest DECIMAL precision Feldera has (`SqlDecimal<38, _>`).
pub const MAX_DECIMAL_PRECISION: i64 = 38;
/// The scale declared for a `numeric` without one: values with more fraction digits are
/// refused on arrival (the mapping's narrowing caution says so in a comment).
pub const UNCONSTRAINED_NUMERIC_SCALE: i64 = 10;

/// A proposed Feldera column type, and what it loses (one note per reason, for a comment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suggestion {
    pub target: ColumnType,
    pub notes: Vec<String>,
}

/// The Feldera type for a column of PostgreSQL type `pg_type` with `type_modifier` and
/// `dimensions` (`pg_attribute.attndims`; 0 when PostgreSQL did not record any).
pub fn suggest(
    types: &PgTypes,
    pg_type: u32,
    type_modifier: i32,
    dimensions: usize,
    nullable: bool,
) -> Suggestion {
    let mut notes = Vec::new();
    let target = suggest_at(
        types,
        pg_type,
        type_modifier,
        dimensions,
        nullable,
        0,
        &mut notes,
    );
    Suggestion { target, notes }
}

fn suggest_at(
    types: &PgTypes,
    pg_type: u32,
    type_modifier: i32,
    dimensions: usize,
    nullable: bool,
    depth: usize,
    notes: &mut Vec<String>,
) -> ColumnType {
    let name = types.name(pg_type);
    let text_only = |notes: &mut Vec<String>, family: Family<'_>| {
        notes.push(format!(
            "refused as a typed column, declared VARCHAR (lossy: PostgreSQL's text output): \
             {name} is accepted by {}",
            family.accepted()
        ));
        ColumnType::new(SqlType::Varchar, nullable).with_precision(-1)
    };
    if depth > MAX_TYPE_DEPTH {
        return text_only(notes, Family::Endless);
    }
    let resolved = types.resolve(pg_type, type_modifier);
    let (base, modifier) = resolved.map_or((pg_type, type_modifier), |r| (r.oid, r.type_modifier));
    let family = Family::of(types, pg_type);
    let plain = |sql| ColumnType::new(sql, nullable);
    match family {
        Family::Bool => plain(SqlType::Boolean),
        Family::Int => plain(match base {
            oid::INT2 => SqlType::SmallInt,
            oid::INT4 => SqlType::Integer,
            _ => SqlType::BigInt, // int8, and oid (unsigned 32-bit)
        }),
        Family::Float4 => plain(SqlType::Real),
        Family::Float8 => plain(SqlType::Double),
        Family::Numeric => decimal(modifier, nullable),
        Family::Text => match (base, modifier) {
            (oid::VARCHAR, n) if n >= 4 => plain(SqlType::Varchar).with_precision(i64::from(n) - 4),
            (oid::BPCHAR, n) if n >= 4 => plain(SqlType::Char).with_precision(i64::from(n) - 4),
            _ => plain(SqlType::Varchar).with_precision(-1),
        },
        Family::Bytea => plain(SqlType::Varbinary).with_precision(-1),
        Family::Date => plain(SqlType::Date),
        Family::Time => plain(SqlType::Time),
        Family::Timestamp => plain(SqlType::Timestamp),
        Family::TimestampTz => plain(SqlType::TimestampTz),
        Family::Uuid => plain(SqlType::Uuid),
        Family::Json => plain(SqlType::Variant),
        Family::Array { element, .. } => {
            // Elements may be NULL whatever the column says.
            let mut column = suggest_at(types, element, modifier, 0, true, depth + 1, notes);
            for _ in 0..dimensions.clamp(1, MAX_DIMENSIONS) {
                column = ColumnType::array_of(column, true);
            }
            column.nullable = nullable;
            column
        }
        Family::Composite(members) => ColumnType {
            fields: members
                .iter()
                .map(|m| {
                    let mut inner = Vec::new();
                    let member = suggest_at(
                        types,
                        m.type_oid,
                        m.type_modifier,
                        0,
                        true,
                        depth + 1,
                        &mut inner,
                    );
                    notes.extend(inner.into_iter().map(|n| format!("member {}: {n}", m.name)));
                    Field::new(feldera_ident(&m.name), member)
                })
                .collect(),
            ..plain(SqlType::Struct)
        },
        Family::Other | Family::Unknown | Family::Endless => text_only(notes, family),
    }
}

/// `DECIMAL(p, s)` for `numeric(p, s)`'s type modifier, within Feldera's precision; a
/// `numeric` without one gets `DECIMAL(38, 10)`.
fn decimal(modifier: i32, nullable: bool) -> ColumnType {
    let declared = modifier
        .checked_sub(4)
        .filter(|_| modifier >= 4)
        .map(|packed| {
            let precision = i64::from((packed >> 16) & 0xFFFF);
            // 11 bits, signed: PostgreSQL 15 accepts negative scales and scales above p.
            let scale = i64::from(((packed & 0x7FF) ^ 0x400) - 0x400);
            (precision, scale)
        });
    let (precision, scale) = match declared {
        None => (MAX_DECIMAL_PRECISION, UNCONSTRAINED_NUMERIC_SCALE),
        // numeric(5, -2) holds up to 7 integer digits and no fraction.
        Some((p, s)) if s < 0 => (p - s, 0),
        // numeric(2, 5) holds 5 fraction digits and no integer digit.
        Some((p, s)) => (p.max(s), s),
    };
    let precision = precision.min(MAX_DECIMAL_PRECISION);
    ColumnType::decimal(precision, scale.min(precision), nullable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::types::{Member, TypeKind};

    fn target(types: &PgTypes, pg_type: u32, modifier: i32) -> String {
        suggest(types, pg_type, modifier, 0, true)
            .target
            .to_string()
    }

    #[test]
    fn builtins_get_the_first_feldera_type_of_their_row() {
        let t = PgTypes::new();
        assert_eq!(target(&t, oid::INT2, -1), "SMALLINT");
        assert_eq!(target(&t, oid::OID, -1), "BIGINT");
        assert_eq!(target(&t, oid::VARCHAR, 14), "VARCHAR(10)");
        assert_eq!(target(&t, oid::BPCHAR, 7), "CHAR(3)");
        assert_eq!(target(&t, oid::TEXT, -1), "VARCHAR");
        assert_eq!(
            target(&t, oid::NUMERIC, (12 << 16 | 2) + 4),
            "DECIMAL(12, 2)"
        );
        assert_eq!(target(&t, oid::NUMERIC, -1), "DECIMAL(38, 10)");
        assert_eq!(
            target(&t, oid::NUMERIC, (60 << 16 | 4) + 4),
            "DECIMAL(38, 4)"
        );
        assert_eq!(target(&t, oid::TIMESTAMPTZ, -1), "TIMESTAMP_TZ");
        assert_eq!(target(&t, oid::JSONB, -1), "VARIANT");
    }

    #[test]
    fn negative_and_oversized_numeric_scales_keep_every_digit_they_allow() {
        // numeric(5, -2): scale -2 is 0x7FE in 11 bits.
        assert_eq!(
            decimal(((5 << 16) | 0x7FE) + 4, true).to_string(),
            "DECIMAL(7, 0)"
        );
        assert_eq!(
            decimal(((2 << 16) | 5) + 4, true).to_string(),
            "DECIMAL(5, 5)"
        );
    }

    #[test]
    fn text_only_types_go_to_varchar_with_a_note() {
        let s = suggest(&PgTypes::new(), oid::INTERVAL, -1, 0, false);
        assert_eq!(s.target.to_string(), "VARCHAR NOT NULL");
        assert_eq!(s.notes.len(), 1);
        assert!(s.notes[0].contains("interval is accepted by VARCHAR only"));
    }

    #[test]
    fn arrays_nest_once_per_recorded_dimension_and_composites_name_their_members() {
        let mut types = PgTypes::new();
        types.add(
            50_000,
            "addr",
            TypeKind::Composite {
                members: vec![
                    Member::new("street", oid::TEXT),
                    Member::new("Zip", oid::INT4),
                ],
            },
        );
        let int4_array = oid::array_of(oid::INT4).unwrap_or(0);
        let s = suggest(&types, int4_array, -1, 2, true);
        assert_eq!(s.target.to_string(), "INTEGER ARRAY ARRAY");
        let s = suggest(&types, 50_000, -1, 0, true);
        assert_eq!(s.target.to_string(), "ROW(street VARCHAR, \"Zip\" INTEGER)");
    }
}
