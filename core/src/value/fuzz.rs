//! Fuzz harness for the value decoders: any bytes pick a (type OID, column type) pair and a
//! value text; decoding must never panic, and whatever it writes must be one JSON value on
//! one line, while a refusal must leave the output buffer untouched.

use super::{oid, plan};
use crate::contract::{ColumnType, SqlType};

/// Type OIDs worth fuzzing: every family, arrays, and an unknown OID.
const OIDS: [u32; 28] = [
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
];

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

/// Decodes `data[2..]` as the text of type `data[0]` for column type `data[1]`.
pub fn fuzz_value(data: &[u8]) {
    let [pick_type, pick_target, text @ ..] = data else {
        return;
    };
    let pg_type = OIDS[usize::from(*pick_type) % OIDS.len()];
    let Ok(plan) = plan(pg_type, &column_type(*pick_target)) else {
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
        Err(_) => assert_eq!(out, prefix, "a refused value left bytes behind"),
    }
    let mut null_out = Vec::new();
    let null = plan.write_null(&mut null_out);
    assert_eq!(null.is_ok(), plan.target.nullable);
}
