//! Fuzz harness for the value decoders: any bytes pick a (type, column type) pair and a
//! value text; decoding must never panic, and whatever it writes must be one JSON value on
//! one line, while a refusal must leave the output buffer untouched.
//!
//! The types come from the builtins and from a catalog answer written here ([`catalog`]):
//! domains (over a domain too), enums, network types, ranges, citext, composites (nested,
//! with arrays inside, behind a domain) and arrays of all of them. A random column type
//! almost never matches a composite, so the type byte's high bit asks for the type's
//! natural column type instead ([`natural_target`]): a ROW with the composite's members.

use super::types::{Member, PgTypes, TypeKind};
use super::{oid, plan};
use crate::schema::{ColumnType, SqlType};

/// OIDs of the catalog types below (made up: any OID the builtins do not use will do).
pub mod oids {
    pub const MONEY12: u32 = 90_001;
    pub const MONEY12B: u32 = 90_002;
    pub const SHORT: u32 = 90_003;
    pub const POSINT: u32 = 90_004;
    pub const POSINT_ARRAY: u32 = 90_005;
    pub const MOOD: u32 = 90_006;
    pub const MOOD_ARRAY: u32 = 90_007;
    pub const CITEXT: u32 = 90_008;
    pub const CITEXT_ARRAY: u32 = 90_009;
    pub const ADDR: u32 = 90_010;
    pub const ADDR_ARRAY: u32 = 90_011;
    pub const PERSON: u32 = 90_012;
    pub const PERSON_ARRAY: u32 = 90_013;
    pub const ADDR_DOMAIN: u32 = 90_014;
    pub const INET: u32 = 869;
    pub const INET_ARRAY: u32 = 1041;
    pub const INT4RANGE: u32 = 3904;
    pub const INT4RANGE_ARRAY: u32 = 3905;
    pub const BOX: u32 = 603;
    pub const BOX_ARRAY: u32 = 1020;
}

/// Type OIDs worth fuzzing: every family, arrays, an unknown OID, then the catalog's types.
const OIDS: [u32; 48] = [
    oid::BOOL,
    oid::BYTEA,
    oid::CHAR,
    oid::NAME,
    oid::INT8,
    oid::INT2,
    oid::INT4,
    oid::TEXT,
    oid::OID,
    oid::JSON,
    oid::FLOAT4,
    oid::FLOAT8,
    oid::BPCHAR,
    oid::VARCHAR,
    oid::DATE,
    oid::TIME,
    oid::TIMESTAMP,
    oid::TIMESTAMPTZ,
    oid::INTERVAL,
    oid::NUMERIC,
    oid::UUID,
    oid::JSONB,
    1007,
    1009,
    1185,
    3807,
    1001,
    16_384,
    oids::MONEY12,
    oids::MONEY12B,
    oids::SHORT,
    oids::POSINT,
    oids::POSINT_ARRAY,
    oids::MOOD,
    oids::MOOD_ARRAY,
    oids::CITEXT,
    oids::CITEXT_ARRAY,
    oids::ADDR,
    oids::ADDR_ARRAY,
    oids::PERSON,
    oids::PERSON_ARRAY,
    oids::ADDR_DOMAIN,
    oids::INET,
    oids::INET_ARRAY,
    oids::INT4RANGE,
    oids::INT4RANGE_ARRAY,
    oids::BOX,
    oids::BOX_ARRAY,
];

/// What a catalog answer says about the types of [`oids`], shaped like a real one
/// (`catalog::types`): `person` is `(name text, home addr, tags text[], mood mood)`.
pub fn catalog() -> PgTypes {
    use oids::*;
    let mut types = PgTypes::new();
    let mut add = |oid: u32, name: &str, kind: TypeKind| types.add(oid, name, kind);
    let (domain, array, member) = (TypeKind::domain, TypeKind::array, Member::new);
    add(MONEY12, "money12", domain(oid::NUMERIC, 786_438));
    add(MONEY12B, "money12b", domain(MONEY12, -1));
    add(SHORT, "short", domain(oid::VARCHAR, 9));
    add(POSINT, "posint", domain(oid::INT4, -1));
    add(POSINT_ARRAY, "posint[]", array(POSINT));
    add(MOOD, "mood", TypeKind::Opaque { what: "enum" });
    add(MOOD_ARRAY, "mood[]", array(MOOD));
    add(CITEXT, "citext", TypeKind::Text);
    add(CITEXT_ARRAY, "citext[]", array(CITEXT));
    add(
        ADDR,
        "addr",
        TypeKind::Composite {
            members: vec![member("street", oid::TEXT), member("zip", oid::INT4)],
        },
    );
    add(ADDR_ARRAY, "addr[]", array(ADDR));
    add(
        PERSON,
        "person",
        TypeKind::Composite {
            members: vec![
                member("name", oid::TEXT),
                member("home", ADDR),
                member("tags", 1009),
                member("mood", MOOD),
            ],
        },
    );
    add(PERSON_ARRAY, "person[]", array(PERSON));
    add(ADDR_DOMAIN, "addr_d", domain(ADDR, -1));
    add(INET, "inet", TypeKind::Opaque { what: "base type" });
    add(INET_ARRAY, "inet[]", array(INET));
    add(INT4RANGE, "int4range", TypeKind::Opaque { what: "range" });
    add(INT4RANGE_ARRAY, "int4range[]", array(INT4RANGE));
    add(BOX, "box", TypeKind::Opaque { what: "base type" });
    add(
        BOX_ARRAY,
        "box[]",
        TypeKind::Array {
            element: BOX,
            delimiter: b';',
        },
    );
    types
}

/// A column type from one byte: the low 5 bits pick the SQL type, bit 5 nullability, bits 6-7
/// a length/precision variant; ARRAY gets a component chosen from the next bits.
pub fn column_type(byte: u8) -> ColumnType {
    let named = SqlType::NAMED;
    let (sql, _) = named[usize::from(byte & 0x1f) % named.len()];
    let nullable = byte & 0x20 != 0;
    let variant = i64::from(byte >> 6);
    let mut ty = ColumnType::new(sql, nullable);
    match sql {
        SqlType::Decimal => {
            ty.precision = Some(variant * 6 + 2);
            ty.scale = Some(variant);
        }
        SqlType::Char | SqlType::Varchar | SqlType::Binary | SqlType::Varbinary => {
            ty.precision = Some(if variant == 0 { -1 } else { variant * 3 });
        }
        SqlType::Array => {
            let component = column_type(byte.rotate_left(3) & !0x12);
            ty.component = Some(Box::new(if variant == 3 {
                ColumnType::array_of(component, true)
            } else {
                component
            }));
        }
        _ => {}
    }
    ty
}

/// The column type `ddl` would declare for `pg_type` (`suggest`: a ROW with the
/// composite's members, an ARRAY of the element's, the base type's for a domain); `byte`'s
/// bits decide nullability, level by level, so NOT NULL members and elements get fuzzed too.
pub fn natural_target(types: &PgTypes, pg_type: u32, byte: u8) -> ColumnType {
    with_nullability(
        super::suggest::suggest(types, pg_type, -1, 0, true).target,
        byte,
    )
}

/// `column` with its nullability, and its elements' and members', taken from `byte`'s bits.
fn with_nullability(mut column: ColumnType, byte: u8) -> ColumnType {
    column.nullable = byte & 1 == 0;
    let next = byte.rotate_right(1);
    if let Some(component) = column.component.take() {
        column.component = Some(Box::new(with_nullability(*component, next)));
    }
    for (i, field) in column.fields.iter_mut().enumerate() {
        let member = std::mem::replace(
            &mut field.columntype,
            ColumnType::new(SqlType::Varchar, true),
        );
        field.columntype = with_nullability(member, next.rotate_right(i as u32));
    }
    column
}

/// The plan `data` picks (the type from `data[0]`'s low 7 bits; the column type from
/// `data[1]`, or the type's natural one when `data[0]`'s high bit is set, `data[1]` then
/// deciding nullability) and the value text `data[2..]`; `None` when the pair has no plan.
fn pick<'d>(types: &PgTypes, data: &'d [u8]) -> Option<(super::ValuePlan, &'d [u8])> {
    let [pick_type, pick_target, text @ ..] = data else {
        return None;
    };
    let pg_type = OIDS[usize::from(*pick_type & 0x7f) % OIDS.len()];
    let target = if pick_type & 0x80 == 0 {
        column_type(*pick_target)
    } else {
        natural_target(types, pg_type, *pick_target)
    };
    match plan(types, pg_type, &target) {
        Ok(plan) => Some((plan, text)),
        Err(e) => {
            assert!(
                pick_type & 0x80 == 0,
                "{} has no plan for its natural type {target}: {e}",
                types.name(pg_type)
            );
            None
        }
    }
}

/// What the harness makes of `data`: the JSON written, or the refusal's message; `None`
/// when the pair has no plan (for the corpus tests that check what a seed exercises).
pub fn outcome(data: &[u8]) -> Option<Result<String, String>> {
    let types = catalog();
    let (plan, text) = pick(&types, data)?;
    let mut out = Vec::new();
    Some(
        plan.write_json(text, &mut out)
            .map(|()| String::from_utf8_lossy(&out).into_owned())
            .map_err(|e| e.to_string()),
    )
}

/// Decodes the value `data` picks (see [`pick`]): never a panic, one JSON value on one
/// line or a refusal that leaves the buffer untouched, NULL accepted exactly when the
/// column is nullable.
pub fn fuzz_value(data: &[u8]) {
    let types = catalog();
    let Some((plan, text)) = pick(&types, data) else {
        return;
    };
    let prefix = b"{\"c\":";
    let mut out = prefix.to_vec();
    match plan.write_json(text, &mut out) {
        Ok(()) => {
            let json = &out[prefix.len()..];
            assert!(!json.contains(&b'\n'), "a value broke the NDJSON line");
            // `IgnoredAny` checks the grammar without converting numbers (jsonb numbers may
            // exceed f64, and are still valid JSON).
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(json) {
                panic!("invalid JSON {:?}: {e}", String::from_utf8_lossy(json));
            }
        }
        Err(error) => {
            assert_eq!(out, prefix, "a refused value left bytes behind");
            let _ = error.to_string();
        }
    }
    let mut null_out = Vec::new();
    let null = plan.write_null(&mut null_out);
    assert_eq!(null.is_ok(), plan.target.nullable);
}
