//! The type-coverage workload: each value as PostgreSQL prints it under slotline's pinned
//! session settings (TimeZone=UTC, DateStyle=ISO, extra_float_digits=3, bytea_output=hex),
//! encoded by slotline, read back by Feldera, compared with what PostgreSQL holds.

use feldera_sqllib::{
    ByteArray, Date, SqlDecimal, SqlString, Time, Timestamp, TimestampTz, Uuid, Variant, F32, F64,
};
use feldera_types::format::json::JsonFlavor;
use feldera_types::serde_with_context::{DeserializeWithContext, SqlSerdeConfig};
use slotline_core::schema::{ColumnType, SqlType};
use slotline_core::value::{oid, plan, PgTypes};
use std::fmt::Debug;
use std::str::FromStr;
use std::sync::Arc;

/// What Feldera must read from slotline's JSON for one value.
pub(crate) type Check = Box<dyn Fn(&[u8]) -> Result<(), String>>;

/// One value: PostgreSQL type and text, the Feldera column type, and a check of what
/// Feldera reads from slotline's JSON.
pub(crate) struct Case {
    what: String,
    pg_type: u32,
    text: Option<String>,
    target: ColumnType,
    check: Check,
}

/// Reads `json` as Feldera's JSON input format reads a column of type `T`.
fn read<T>(json: &[u8]) -> Result<T, String>
where
    T: for<'de> DeserializeWithContext<'de, SqlSerdeConfig>,
{
    let config = SqlSerdeConfig::from(JsonFlavor::Default);
    let mut de = serde_json::Deserializer::from_slice(json);
    T::deserialize_with_context(&mut de, &config).map_err(|e| format!("Feldera refuses it: {e}"))
}

/// A check that Feldera reads a `T` equal to `expected`.
pub(crate) fn equals<T>(expected: T) -> Check
where
    T: for<'de> DeserializeWithContext<'de, SqlSerdeConfig> + PartialEq + Debug + 'static,
{
    Box::new(move |json| {
        let got: T = read(json)?;
        if got == expected {
            Ok(())
        } else {
            Err(format!(
                "Feldera reads {got:?}, PostgreSQL holds {expected:?}"
            ))
        }
    })
}

/// A check that Feldera reads a `T` whose `Display` is `expected` (dates and times, whose
/// constructors take Feldera's internal units).
fn shows<T>(expected: &'static str) -> Check
where
    T: for<'de> DeserializeWithContext<'de, SqlSerdeConfig> + std::fmt::Display + 'static,
{
    Box::new(move |json| {
        let got: Option<T> = read(json)?;
        match got {
            Some(v) if v.to_string() == expected => Ok(()),
            other => Err(format!(
                "Feldera reads {:?}, PostgreSQL holds {expected}",
                other.map(|v| v.to_string())
            )),
        }
    })
}

fn variant(json: &str) -> Variant {
    serde_json::from_str(json).expect("a JSON document")
}

pub(crate) fn case(
    what: &str,
    pg_type: u32,
    text: Option<&str>,
    target: ColumnType,
    check: Check,
) -> Case {
    Case {
        what: what.to_owned(),
        pg_type,
        text: text.map(str::to_owned),
        target,
        check,
    }
}

fn t(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, true)
}

fn dec(p: i64, s: i64) -> ColumnType {
    ColumnType::decimal(p, s, true)
}

fn s(text: &str) -> Option<SqlString> {
    Some(SqlString::from_ref(text))
}

fn cases() -> Vec<Case> {
    use SqlType as S;
    let big_text: String = "ab€\u{1F600}".repeat(300 * 1024 / 9);
    let big = big_text.clone();
    vec![
        case(
            "bool true",
            oid::BOOL,
            Some("t"),
            t(S::Boolean),
            equals(Some(true)),
        ),
        case(
            "bool false",
            oid::BOOL,
            Some("f"),
            t(S::Boolean),
            equals(Some(false)),
        ),
        case(
            "NULL into a nullable column",
            oid::BOOL,
            None,
            t(S::Boolean),
            equals(None::<bool>),
        ),
        case(
            "int2 min",
            oid::INT2,
            Some("-32768"),
            t(S::SmallInt),
            equals(Some(i16::MIN)),
        ),
        case(
            "int4 min",
            oid::INT4,
            Some("-2147483648"),
            t(S::Integer),
            equals(Some(i32::MIN)),
        ),
        case(
            "int8 min",
            oid::INT8,
            Some("-9223372036854775808"),
            t(S::BigInt),
            equals(Some(i64::MIN)),
        ),
        case(
            "int8 max",
            oid::INT8,
            Some("9223372036854775807"),
            t(S::BigInt),
            equals(Some(i64::MAX)),
        ),
        case(
            "oid max",
            oid::OID,
            Some("4294967295"),
            t(S::BigInt),
            equals(Some(4_294_967_295i64)),
        ),
        case(
            "float4",
            oid::FLOAT4,
            Some("0.1"),
            t(S::Real),
            equals(Some(F32::new(0.1))),
        ),
        case(
            "float4 into DOUBLE",
            oid::FLOAT4,
            Some("0.1"),
            t(S::Double),
            equals(Some(F64::new(f64::from(0.1f32)))),
        ),
        case(
            "float4 max into DOUBLE",
            oid::FLOAT4,
            Some("-3.4028235e+38"),
            t(S::Double),
            equals(Some(F64::new(f64::from(f32::MIN)))),
        ),
        case(
            "float8",
            oid::FLOAT8,
            Some("2.718281828459045"),
            t(S::Double),
            equals(Some(F64::new(std::f64::consts::E))),
        ),
        case(
            "float8 tiny",
            oid::FLOAT8,
            Some("5e-324"),
            t(S::Double),
            equals(Some(F64::new(5e-324))),
        ),
        case(
            "float8 NaN becomes NULL",
            oid::FLOAT8,
            Some("NaN"),
            t(S::Double),
            equals(None::<F64>),
        ),
        case(
            "float8 Infinity becomes NULL",
            oid::FLOAT8,
            Some("Infinity"),
            t(S::Double),
            equals(None::<F64>),
        ),
        case(
            "numeric(12,3)",
            oid::NUMERIC,
            Some("-12.345"),
            dec(12, 3),
            equals(SqlDecimal::<12, 3>::from_str("-12.345").ok()),
        ),
        case(
            "numeric(12,3) with fewer digits",
            oid::NUMERIC,
            Some("0.5"),
            dec(12, 3),
            equals(SqlDecimal::<12, 3>::from_str("0.500").ok()),
        ),
        case(
            "numeric with 36 digits",
            oid::NUMERIC,
            Some("1234567890123456789012345678901234.56"),
            dec(38, 2),
            equals(SqlDecimal::<38, 2>::from_str("1234567890123456789012345678901234.56").ok()),
        ),
        case(
            "numeric -36 digits",
            oid::NUMERIC,
            Some("-999999999999999999999999999999999999"),
            dec(38, 0),
            equals(SqlDecimal::<38, 0>::from_str("-999999999999999999999999999999999999").ok()),
        ),
        case(
            "numeric NaN becomes NULL",
            oid::NUMERIC,
            Some("NaN"),
            dec(10, 2),
            equals(None::<SqlDecimal<10, 2>>),
        ),
        case(
            "text with escapes",
            oid::TEXT,
            Some("quote\" back\\ nl\n tab\t é ☃ \u{1}"),
            t(S::Varchar),
            equals(s("quote\" back\\ nl\n tab\t é ☃ \u{1}")),
        ),
        case(
            "empty text",
            oid::TEXT,
            Some(""),
            t(S::Varchar),
            equals(s("")),
        ),
        case(
            "300 KB text",
            oid::TEXT,
            Some(&big_text),
            t(S::Varchar),
            Box::new(move |json| {
                let got: Option<SqlString> = read(json)?;
                match got {
                    Some(v) if v.str() == big => Ok(()),
                    other => Err(format!(
                        "Feldera reads {} bytes",
                        other.map_or(0, |v| v.str().len())
                    )),
                }
            }),
        ),
        case(
            "varchar(20)",
            oid::VARCHAR,
            Some("varying"),
            t(S::Varchar),
            equals(s("varying")),
        ),
        case(
            "varchar longer than VARCHAR(3) stays whole",
            oid::VARCHAR,
            Some("abcdef"),
            t(S::Varchar).with_precision(3),
            equals(s("abcdef")),
        ),
        case(
            "char(5) keeps its padding",
            oid::BPCHAR,
            Some("ab   "),
            t(S::Char).with_precision(5),
            equals(s("ab   ")),
        ),
        case(
            "name",
            oid::NAME,
            Some("a_name"),
            t(S::Varchar),
            equals(s("a_name")),
        ),
        case(
            "uuid into VARCHAR",
            oid::UUID,
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"),
            t(S::Varchar),
            equals(s("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12")),
        ),
        case(
            "enum into VARCHAR",
            90_000,
            Some("happy"),
            t(S::Varchar),
            equals(s("happy")),
        ),
        case(
            "interval into VARCHAR",
            oid::INTERVAL,
            Some("1 day 02:03:04"),
            t(S::Varchar),
            equals(s("1 day 02:03:04")),
        ),
        case(
            "jsonb into VARCHAR",
            oid::JSONB,
            Some("{\"k\": [1, {\"x\": \"y\"}]}"),
            t(S::Varchar),
            equals(s("{\"k\": [1, {\"x\": \"y\"}]}")),
        ),
        case(
            "bytea",
            oid::BYTEA,
            Some("\\x0102ff"),
            t(S::Varbinary),
            equals(Some(ByteArray::new(&[1, 2, 255]))),
        ),
        case(
            "empty bytea",
            oid::BYTEA,
            Some("\\x"),
            t(S::Varbinary),
            equals(Some(ByteArray::new(&[]))),
        ),
        case(
            "bytea into BINARY(4)",
            oid::BYTEA,
            Some("\\xdeadbeef"),
            t(S::Binary).with_precision(4),
            equals(Some(ByteArray::new(&[0xde, 0xad, 0xbe, 0xef]))),
        ),
        case(
            "date",
            oid::DATE,
            Some("2000-02-29"),
            t(S::Date),
            shows::<Date>("2000-02-29"),
        ),
        case(
            "date 0001-01-01",
            oid::DATE,
            Some("0001-01-01"),
            t(S::Date),
            shows::<Date>("1-01-01"),
        ),
        case(
            "date 9999-12-31",
            oid::DATE,
            Some("9999-12-31"),
            t(S::Date),
            shows::<Date>("9999-12-31"),
        ),
        case(
            "BC date becomes NULL",
            oid::DATE,
            Some("0044-03-15 BC"),
            t(S::Date),
            equals(None::<Date>),
        ),
        case(
            "time",
            oid::TIME,
            Some("13:14:15"),
            t(S::Time),
            shows::<Time>("13:14:15"),
        ),
        case(
            "time with micros",
            oid::TIME,
            Some("23:59:59.999999"),
            t(S::Time),
            shows::<Time>("23:59:59.999999000"),
        ),
        case(
            "timestamp",
            oid::TIMESTAMP,
            Some("2024-06-01 13:14:15"),
            t(S::Timestamp),
            shows::<Timestamp>("2024-06-01 13:14:15"),
        ),
        case(
            "timestamp micros",
            oid::TIMESTAMP,
            Some("1999-12-31 23:59:59.000001"),
            t(S::Timestamp),
            shows::<Timestamp>("1999-12-31 23:59:59.000001"),
        ),
        case(
            "timestamp 0001-01-01",
            oid::TIMESTAMP,
            Some("0001-01-01 00:00:00"),
            t(S::Timestamp),
            equals(Some(Timestamp::from_microseconds(-62_135_596_800_000_000))),
        ),
        case(
            "timestamp 9999-12-31",
            oid::TIMESTAMP,
            Some("9999-12-31 23:59:59.999999"),
            t(S::Timestamp),
            shows::<Timestamp>("9999-12-31 23:59:59.999999"),
        ),
        case(
            "timestamptz into TIMESTAMP (UTC)",
            oid::TIMESTAMPTZ,
            Some("2024-06-01 12:00:00+00"),
            t(S::Timestamp),
            shows::<Timestamp>("2024-06-01 12:00:00"),
        ),
        case(
            "timestamptz into TIMESTAMP_TZ",
            oid::TIMESTAMPTZ,
            Some("2000-01-01 08:00:00.5+00"),
            t(S::TimestampTz),
            equals(Some(TimestampTz::from_microseconds(946_713_600_500_000))),
        ),
        case(
            "timestamptz epoch into TIMESTAMP_TZ",
            oid::TIMESTAMPTZ,
            Some("1970-01-01 00:00:00+00"),
            t(S::TimestampTz),
            equals(Some(TimestampTz::from_microseconds(0))),
        ),
        case(
            "uuid",
            oid::UUID,
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            t(S::Uuid),
            shows::<Uuid>("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ),
        case(
            "json keeps its document",
            oid::JSON,
            Some("{\"b\": 1,   \"a\": [1, 2]}"),
            t(S::Variant),
            equals(Some(variant("{\"a\":[1,2],\"b\":1}"))),
        ),
        case(
            "jsonb with nulls inside",
            oid::JSONB,
            Some("{\"a\": null, \"z\": true}"),
            t(S::Variant),
            equals(Some(variant("{\"a\":null,\"z\":true}"))),
        ),
        case(
            "jsonb with a 23-digit integer",
            oid::JSONB,
            Some("{\"n\": 12345678901234567890123}"),
            t(S::Variant),
            equals(Some(variant("{\"n\":12345678901234567890123}"))),
        ),
        case(
            "jsonb null into a NOT NULL VARIANT is the VARIANT null",
            oid::JSONB,
            Some("null"),
            ColumnType::new(S::Variant, false),
            equals(Variant::VariantNull),
        ),
        case(
            "jsonb null into a nullable VARIANT is SQL NULL (warned)",
            oid::JSONB,
            Some("null"),
            t(S::Variant),
            equals(None::<Variant>),
        ),
        case(
            "int4[]",
            oid::array_of(oid::INT4).unwrap_or_default(),
            Some("{1,NULL,3}"),
            ColumnType::array_of(t(S::Integer), true),
            equals(Some(Arc::new(vec![Some(1i32), None, Some(3)]))),
        ),
        case(
            "int4[][] into ARRAY ARRAY",
            oid::array_of(oid::INT4).unwrap_or_default(),
            Some("{{1,2},{3,4}}"),
            ColumnType::array_of(ColumnType::array_of(t(S::Integer), true), true),
            equals(Some(Arc::new(vec![
                Some(Arc::new(vec![Some(1i32), Some(2)])),
                Some(Arc::new(vec![Some(3), Some(4)])),
            ]))),
        ),
        case(
            "text[] with quotes and NULL",
            oid::array_of(oid::TEXT).unwrap_or_default(),
            Some("{a,\"b c\",\"with \\\"quote\\\"\",NULL}"),
            ColumnType::array_of(t(S::Varchar), true),
            equals(Some(Arc::new(vec![
                s("a"),
                s("b c"),
                s("with \"quote\""),
                None,
            ]))),
        ),
        case(
            "empty array",
            oid::array_of(oid::INT4).unwrap_or_default(),
            Some("{}"),
            ColumnType::array_of(t(S::Integer), true),
            equals(Some(Arc::new(Vec::<Option<i32>>::new()))),
        ),
    ]
}

pub fn run() -> Vec<(String, Result<(), String>)> {
    run_cases(&PgTypes::new(), cases())
}

/// Each case's name and outcome, its PostgreSQL type described by `types` when not builtin.
pub(crate) fn run_cases(types: &PgTypes, cases: Vec<Case>) -> Vec<(String, Result<(), String>)> {
    cases
        .into_iter()
        .map(|c| {
            let name = format!(
                "value {} ({} -> {})",
                c.what,
                types.name(c.pg_type),
                c.target
            );
            (name, check(types, &c))
        })
        .collect()
}

fn check(types: &PgTypes, c: &Case) -> Result<(), String> {
    let plan =
        plan(types, c.pg_type, &c.target).map_err(|e| format!("slotline has no plan: {e}"))?;
    let mut json = Vec::new();
    plan.write_datum(c.text.as_deref().map(str::as_bytes), &mut json)
        .map_err(|e| format!("slotline refuses the value: {e}"))?;
    (c.check)(&json).map_err(|e| {
        format!(
            "{e}; slotline sent {}",
            String::from_utf8_lossy(&json[..json.len().min(120)])
        )
    })
}
