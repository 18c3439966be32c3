//! The builtin PostgreSQL type OIDs the value decoders know, and their names for messages.
//!
//! OIDs below 10000 are fixed by PostgreSQL's catalog (`pg_type.dat`) and identical on every
//! server; user types (enums, domains, composites, extension types) get OIDs assigned at
//! creation, and what they are comes from the catalog at startup (`value::types`). The list was checked against `pg_type` of a
//! PostgreSQL 15 server (`select oid, typname, typarray from pg_type`).

use std::borrow::Cow;

pub const BOOL: u32 = 16;
pub const BYTEA: u32 = 17;
/// The one-byte internal `"char"` type, not `char(n)` (that is `BPCHAR`).
pub const CHAR: u32 = 18;
pub const NAME: u32 = 19;
pub const INT8: u32 = 20;
pub const INT2: u32 = 21;
pub const INT4: u32 = 23;
pub const TEXT: u32 = 25;
pub const OID: u32 = 26;
pub const JSON: u32 = 114;
pub const FLOAT4: u32 = 700;
pub const FLOAT8: u32 = 701;
pub const BPCHAR: u32 = 1042;
pub const VARCHAR: u32 = 1043;
pub const DATE: u32 = 1082;
pub const TIME: u32 = 1083;
pub const TIMESTAMP: u32 = 1114;
pub const TIMESTAMPTZ: u32 = 1184;
pub const INTERVAL: u32 = 1186;
pub const TIMETZ: u32 = 1266;
pub const NUMERIC: u32 = 1700;
pub const UUID: u32 = 2950;
pub const JSONB: u32 = 3802;

/// Each known scalar type: (OID, name, OID of its array type).
const SCALARS: [(u32, &str, u32); 23] = [
    (BOOL, "bool", 1000),
    (BYTEA, "bytea", 1001),
    (CHAR, "char", 1002),
    (NAME, "name", 1003),
    (INT8, "int8", 1016),
    (INT2, "int2", 1005),
    (INT4, "int4", 1007),
    (TEXT, "text", 1009),
    (OID, "oid", 1028),
    (JSON, "json", 199),
    (FLOAT4, "float4", 1021),
    (FLOAT8, "float8", 1022),
    (BPCHAR, "bpchar", 1014),
    (VARCHAR, "varchar", 1015),
    (DATE, "date", 1182),
    (TIME, "time", 1183),
    (TIMESTAMP, "timestamp", 1115),
    (TIMESTAMPTZ, "timestamptz", 1185),
    (INTERVAL, "interval", 1187),
    (TIMETZ, "timetz", 1270),
    (NUMERIC, "numeric", 1231),
    (UUID, "uuid", 2951),
    (JSONB, "jsonb", 3807),
];

/// The element type of a known array type (`_int4` 1007 → `int4` 23), or `None` when the
/// OID is not the array of a type listed here (the Relation message carries no element
/// type: every other array's element comes from the catalog, `value::types`).
pub fn array_element(oid: u32) -> Option<u32> {
    SCALARS
        .iter()
        .find(|(_, _, array)| *array == oid)
        .map(|(element, _, _)| *element)
}

/// Whether the decoders know `oid` without asking the catalog: one of the scalars listed
/// here or its array type.
pub fn is_builtin(oid: u32) -> bool {
    SCALARS
        .iter()
        .any(|(scalar, _, array)| *scalar == oid || *array == oid)
}

/// The array type of a known scalar type.
pub fn array_of(element: u32) -> Option<u32> {
    SCALARS
        .iter()
        .find(|(scalar, _, _)| *scalar == element)
        .map(|(_, _, array)| *array)
}

/// The name used in messages: `int4`, `_int4` for arrays, `oid 16384` for anything else.
pub fn name(oid: u32) -> Cow<'static, str> {
    if let Some((_, name, _)) = SCALARS.iter().find(|(scalar, _, _)| *scalar == oid) {
        return Cow::Borrowed(name);
    }
    if let Some(element) = array_element(oid) {
        return Cow::Owned(format!("_{}", name(element)));
    }
    Cow::Owned(format!("oid {oid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_scalars_arrays_and_unknown_oids() {
        assert_eq!(name(INT4), "int4");
        assert_eq!(name(TIMESTAMPTZ), "timestamptz");
        assert_eq!(name(1007), "_int4");
        assert_eq!(name(3807), "_jsonb");
        assert_eq!(name(16384), "oid 16384");
    }

    #[test]
    fn array_oids_round_trip_through_their_elements() {
        for (scalar, _, array) in SCALARS {
            assert_eq!(array_element(array), Some(scalar));
            assert_eq!(array_of(scalar), Some(array));
            assert_eq!(array_element(scalar), None, "{scalar} is not an array");
            assert!(is_builtin(scalar) && is_builtin(array));
        }
        assert_eq!(array_element(1020), None, "_box is not one of ours");
        assert!(
            !is_builtin(1020) && !is_builtin(869),
            "_box and inet come from the catalog"
        );
    }
}
