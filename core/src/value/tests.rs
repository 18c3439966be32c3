//! Table-driven tests of the mapping (one row per case of POSTGRES.md's table and its edges),
//! plus properties over generated values.

use super::oid;
use super::*;
use crate::contract::SqlType;

fn col(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, true)
}

fn not_null(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, false)
}

fn array(component: ColumnType) -> ColumnType {
    ColumnType::array_of(component, true)
}

/// Decodes `text` and returns the JSON, or the error's Display.
fn decode(pg_type: u32, target: &ColumnType, text: &[u8]) -> Result<String, String> {
    let plan = plan(pg_type, target).map_err(|e| format!("unsupported: {e}"))?;
    let mut out = Vec::new();
    plan.write_json(text, &mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).expect("decoders write UTF-8"))
}

/// One case: type, column, input, and either the exact JSON or a piece of the error.
struct Case {
    pg_type: u32,
    target: ColumnType,
    text: &'static [u8],
    expected: Result<&'static str, &'static str>,
}

fn ok(pg_type: u32, target: ColumnType, text: &'static str, json: &'static str) -> Case {
    Case {
        pg_type,
        target,
        text: text.as_bytes(),
        expected: Ok(json),
    }
}

fn err(pg_type: u32, target: ColumnType, text: &'static str, message: &'static str) -> Case {
    Case {
        pg_type,
        target,
        text: text.as_bytes(),
        expected: Err(message),
    }
}

fn check(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in &cases {
        let got = decode(case.pg_type, &case.target, case.text);
        let pass = match (&got, case.expected) {
            (Ok(json), Ok(want)) => json == want,
            (Err(message), Err(want)) => message.contains(want),
            _ => false,
        };
        if !pass {
            failures.push(format!(
                "{} {:?} -> {}: got {got:?}, want {:?}",
                oid::name(case.pg_type),
                String::from_utf8_lossy(case.text),
                case.target,
                case.expected
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn booleans_are_t_and_f_only() {
    use SqlType::Boolean;
    check(vec![
        ok(oid::BOOL, col(Boolean), "t", "true"),
        ok(oid::BOOL, col(Boolean), "f", "false"),
        err(oid::BOOL, col(Boolean), "true", "expected `t` or `f`"),
        err(oid::BOOL, col(Boolean), "", "expected `t` or `f`"),
    ]);
}

#[test]
fn integers_are_range_checked_against_the_column_width() {
    use SqlType::{BigInt, Integer, SmallInt, TinyInt};
    check(vec![
        ok(oid::INT2, col(TinyInt), "127", "127"),
        ok(oid::INT2, col(TinyInt), "-128", "-128"),
        err(oid::INT2, col(TinyInt), "128", "accepted -128..=127"),
        err(oid::INT4, col(TinyInt), "-129", "out of range"),
        ok(oid::INT2, col(SmallInt), "32767", "32767"),
        ok(oid::INT2, col(SmallInt), "-32768", "-32768"),
        err(oid::INT4, col(SmallInt), "32768", "accepted -32768..=32767"),
        ok(oid::INT4, col(Integer), "-2147483648", "-2147483648"),
        err(oid::INT8, col(Integer), "2147483648", "out of range"),
        ok(
            oid::INT8,
            col(BigInt),
            "9223372036854775807",
            "9223372036854775807",
        ),
        ok(
            oid::INT8,
            col(BigInt),
            "-9223372036854775808",
            "-9223372036854775808",
        ),
        err(
            oid::INT8,
            col(BigInt),
            "9223372036854775808",
            "out of range",
        ),
        err(
            oid::INT8,
            col(BigInt),
            "-9223372036854775809",
            "out of range",
        ),
        err(
            oid::INT8,
            col(BigInt),
            "99999999999999999999",
            "out of range",
        ),
        ok(oid::OID, col(BigInt), "4294967295", "4294967295"),
        err(oid::OID, col(Integer), "4294967295", "out of range"),
        ok(oid::INT4, col(BigInt), "0", "0"),
        err(oid::INT4, col(BigInt), "", "expected a decimal integer"),
        err(oid::INT4, col(BigInt), "-", "expected a decimal integer"),
        err(oid::INT4, col(BigInt), "+1", "expected a decimal integer"),
        err(oid::INT4, col(BigInt), "1.0", "at byte 1"),
        err(
            oid::INT4,
            col(BigInt),
            "123456789012345678901",
            "out of range",
        ),
    ]);
}

#[test]
fn floats_pass_exact_text_and_map_nan_and_infinity_to_null() {
    use SqlType::{Double, Real};
    check(vec![
        ok(oid::FLOAT8, col(Double), "1e+308", "1e+308"),
        ok(oid::FLOAT8, col(Double), "-0", "-0"),
        ok(oid::FLOAT8, col(Double), "1.5e-07", "1.5e-07"),
        ok(oid::FLOAT8, col(Double), "123456789012", "123456789012"),
        ok(
            oid::FLOAT8,
            col(Double),
            "1.7976931348623157e+308",
            "1.7976931348623157e+308",
        ),
        ok(oid::FLOAT4, col(Real), "0.1", "0.1"),
        ok(oid::FLOAT4, col(Double), "-3.4028235e+38", "-3.4028235e+38"),
        ok(oid::FLOAT8, col(Double), "NaN", "null"),
        ok(oid::FLOAT8, col(Double), "Infinity", "null"),
        ok(oid::FLOAT4, col(Real), "-Infinity", "null"),
        err(
            oid::FLOAT8,
            not_null(Double),
            "NaN",
            "no Feldera representation (NaN)",
        ),
        err(
            oid::FLOAT8,
            not_null(Double),
            "-Infinity",
            "only in a nullable column",
        ),
        err(oid::FLOAT8, col(Double), "1e400", "finite IEEE double"),
        err(oid::FLOAT8, col(Double), ".5", "malformed"),
        err(oid::FLOAT8, col(Double), "1.", "malformed"),
        err(oid::FLOAT8, col(Double), "nan", "malformed"),
        err(oid::FLOAT8, col(Double), "1e5x", "at byte 3"),
    ]);
}

#[test]
fn numerics_are_exact_strings_that_must_fit_the_decimal() {
    let d = |p, s| ColumnType::decimal(p, s, true);
    check(vec![
        ok(oid::NUMERIC, d(10, 2), "12.50", r#""12.50""#),
        ok(oid::NUMERIC, d(10, 2), "-0.50", r#""-0.50""#),
        ok(oid::NUMERIC, d(10, 2), "12.5", r#""12.5""#),
        ok(oid::NUMERIC, d(10, 2), "1.2300", r#""1.23""#),
        ok(oid::NUMERIC, d(10, 2), "12345678.99", r#""12345678.99""#),
        err(
            oid::NUMERIC,
            d(10, 2),
            "123456789",
            "at most 8 integer digit(s)",
        ),
        err(oid::NUMERIC, d(10, 2), "1.235", "refused, not rounded"),
        err(oid::NUMERIC, d(10, 2), "0.001", "at most 2 fractional"),
        ok(oid::NUMERIC, d(5, 0), "5.000", r#""5""#),
        ok(oid::NUMERIC, d(5, 0), "00012", r#""00012""#),
        ok(oid::NUMERIC, d(5, 0), "0.000", r#""0""#),
        ok(
            oid::NUMERIC,
            d(38, 10),
            "100000000000000000000",
            r#""100000000000000000000""#,
        ),
        ok(oid::NUMERIC, d(10, 2), "NaN", "null"),
        ok(oid::NUMERIC, d(10, 2), "Infinity", "null"),
        ok(oid::NUMERIC, d(10, 2), "-Infinity", "null"),
        err(
            oid::NUMERIC,
            ColumnType::decimal(10, 2, false),
            "NaN",
            "no Feldera representation",
        ),
        // numeric_out never prints an exponent: one is malformed, not reinterpreted.
        err(oid::NUMERIC, d(10, 2), "1e5", "positional notation"),
        err(oid::NUMERIC, d(10, 2), "1.", "malformed"),
        err(oid::NUMERIC, d(10, 2), ".5", "malformed"),
        err(oid::NUMERIC, d(10, 2), "", "malformed"),
        ok(
            oid::NUMERIC,
            col(SqlType::Decimal),
            "123.456",
            r#""123.456""#,
        ),
    ]);
}

#[test]
fn text_types_become_strings_with_sql_length_rules() {
    use SqlType::{Char, Varchar};
    let varchar = |n| ColumnType::new(Varchar, true).with_precision(n);
    check(vec![
        ok(
            oid::TEXT,
            col(Varchar),
            "héllo\n\t\"x\"\\",
            r#""héllo\n\t\"x\"\\""#,
        ),
        ok(oid::TEXT, varchar(-1), "\u{1}\u{1f}", r#""\u0001\u001f""#),
        ok(oid::VARCHAR, varchar(3), "abc", r#""abc""#),
        ok(oid::VARCHAR, varchar(3), "abc   ", r#""abc""#),
        ok(oid::VARCHAR, varchar(3), "äöü", r#""äöü""#),
        err(
            oid::VARCHAR,
            varchar(3),
            "abcd",
            "4 characters long, the column holds at most 3",
        ),
        ok(
            oid::BPCHAR,
            ColumnType::new(Char, true).with_precision(5),
            "ab   ",
            r#""ab   ""#,
        ),
        ok(oid::NAME, col(Char), "pg_class", r#""pg_class""#),
        ok(oid::CHAR, col(Char), "x", r#""x""#),
        ok(oid::TEXT, col(Varchar), "", r#""""#),
        Case {
            pg_type: oid::TEXT,
            target: col(Varchar),
            text: b"ab\xffcd",
            expected: Err("not valid UTF-8 at byte 2"),
        },
        Case {
            pg_type: oid::TEXT,
            target: col(Varchar),
            text: b"\xed\xa0\x80",
            expected: Err("not valid UTF-8 at byte 0"),
        },
    ]);
}

#[test]
fn bytea_hex_becomes_byte_arrays_and_escape_format_is_refused() {
    use SqlType::{Binary, Varbinary, Varchar};
    check(vec![
        ok(oid::BYTEA, col(Varbinary), r"\x00ff10", "[0,255,16]"),
        ok(oid::BYTEA, col(Binary), r"\xDEAD", "[222,173]"),
        ok(oid::BYTEA, col(Varbinary), r"\x", "[]"),
        err(
            oid::BYTEA,
            col(Varbinary),
            r"\x0",
            "even number of hex digits",
        ),
        err(oid::BYTEA, col(Varbinary), r"\x0g", "expected hex digits"),
        err(
            oid::BYTEA,
            col(Varbinary),
            r"\000abc",
            "bytea_output=hex is required",
        ),
        err(
            oid::BYTEA,
            ColumnType::new(Varbinary, true).with_precision(2),
            r"\x010203",
            "3 bytes long, the column holds at most 2",
        ),
        ok(oid::BYTEA, col(Varchar), r"\x00ff", r#""\\x00ff""#),
    ]);
}

#[test]
fn dates_pass_in_feldera_range_and_become_null_outside_it() {
    use SqlType::Date;
    check(vec![
        ok(oid::DATE, col(Date), "2024-02-29", r#""2024-02-29""#),
        ok(oid::DATE, col(Date), "0001-01-01", r#""0001-01-01""#),
        ok(oid::DATE, col(Date), "9999-12-31", r#""9999-12-31""#),
        ok(oid::DATE, col(Date), "10000-01-01", "null"),
        ok(oid::DATE, col(Date), "0001-01-01 BC", "null"),
        ok(oid::DATE, col(Date), "infinity", "null"),
        ok(oid::DATE, col(Date), "-infinity", "null"),
        err(
            oid::DATE,
            not_null(Date),
            "infinity",
            "no Feldera representation",
        ),
        err(
            oid::DATE,
            not_null(Date),
            "0044-03-15 BC",
            "years 1 to 9999",
        ),
        err(oid::DATE, not_null(Date), "10000-01-01", "years 1 to 9999"),
        err(
            oid::DATE,
            col(Date),
            "2023-02-29",
            "a day that exists in that month",
        ),
        err(oid::DATE, col(Date), "2024-13-01", "a month 01-12"),
        err(oid::DATE, col(Date), "24-01-01", "ISO date"),
        err(
            oid::DATE,
            col(Date),
            "2024-01-01 AD",
            "the end of the value",
        ),
        err(oid::DATE, col(Date), "01/02/2024", "ISO date"),
    ]);
}

#[test]
fn times_and_timestamps_keep_one_to_six_fractional_digits() {
    use SqlType::{Time, Timestamp};
    check(vec![
        ok(oid::TIME, col(Time), "12:00:00", r#""12:00:00""#),
        ok(oid::TIME, col(Time), "12:00:00.5", r#""12:00:00.5""#),
        ok(
            oid::TIME,
            col(Time),
            "23:59:59.999999",
            r#""23:59:59.999999""#,
        ),
        ok(oid::TIME, col(Time), "24:00:00", "null"),
        err(oid::TIME, not_null(Time), "24:00:00", "last TIME"),
        err(
            oid::TIME,
            col(Time),
            "12:00:00.1234567",
            "0 to 6 fractional digits",
        ),
        err(oid::TIME, col(Time), "12:60:00", "time of day"),
        err(oid::TIME, col(Time), "24:00:01", "time of day"),
        err(oid::TIME, col(Time), "12:00", "HH:MM:SS"),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00",
            r#""2024-01-01 12:00:00""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.1",
            r#""2024-01-01 12:00:00.1""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.12",
            r#""2024-01-01 12:00:00.12""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.123",
            r#""2024-01-01 12:00:00.123""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.1234",
            r#""2024-01-01 12:00:00.1234""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.12345",
            r#""2024-01-01 12:00:00.12345""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00.123456",
            r#""2024-01-01 12:00:00.123456""#,
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "10000-01-01 00:00:00",
            "null",
        ),
        ok(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 00:00:00 BC",
            "null",
        ),
        ok(oid::TIMESTAMP, col(Timestamp), "-infinity", "null"),
        err(
            oid::TIMESTAMP,
            not_null(Timestamp),
            "infinity",
            "no Feldera representation",
        ),
        err(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 24:00:00",
            "time of day",
        ),
        err(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01T12:00:00",
            "a space between",
        ),
        err(
            oid::TIMESTAMP,
            col(Timestamp),
            "2024-01-01 12:00:00+00",
            "the end of the value",
        ),
    ]);
}

#[test]
fn timestamptz_shifts_any_offset_to_utc() {
    use SqlType::{Timestamp, TimestampTz};
    check(vec![
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 12:00:00+00",
            r#""2024-01-01 12:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(TimestampTz),
            "2024-01-01 12:00:00+00",
            r#""2024-01-01T12:00:00+00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 07:00:00-05",
            r#""2024-01-01 12:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 17:30:00+05:30",
            r#""2024-01-01 12:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(TimestampTz),
            "2024-01-01 12:00:00.25+05:30",
            r#""2024-01-01T06:30:00.25+00:00""#,
        ),
        // Local mean time offsets carry seconds (America/New_York 1850, Europe/Amsterdam 1900).
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "1850-01-01 12:00:00-04:56:02",
            r#""1850-01-01 16:56:02""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "1900-01-01 12:00:00+00:19:32",
            r#""1900-01-01 11:40:28""#,
        ),
        // Day, month, year and leap-day boundaries crossed by the shift.
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-02-28 22:00:00-05",
            r#""2024-02-29 03:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-03-01 01:00:00+02",
            r#""2024-02-29 23:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2023-02-28 23:00:00-02",
            r#""2023-03-01 01:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2100-03-01 00:30:00+01",
            r#""2100-02-28 23:30:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2000-03-01 00:30:00+01",
            r#""2000-02-29 23:30:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(TimestampTz),
            "1999-12-31 23:30:00-01",
            r#""2000-01-01T00:30:00+00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2000-01-01 00:15:00+00:30",
            r#""1999-12-31 23:45:00""#,
        ),
        // The range check happens after the shift.
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "9999-12-31 23:00:00-05",
            "null",
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "10000-01-01 00:00:00+05",
            r#""9999-12-31 19:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "0001-01-01 00:00:00+01",
            "null",
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "0001-12-31 23:00:00-02 BC",
            r#""0001-01-01 01:00:00""#,
        ),
        ok(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "0044-03-15 12:00:00+00 BC",
            "null",
        ),
        ok(oid::TIMESTAMPTZ, col(TimestampTz), "infinity", "null"),
        err(
            oid::TIMESTAMPTZ,
            not_null(TimestampTz),
            "-infinity",
            "no Feldera representation",
        ),
        err(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 12:00:00",
            "UTC offset",
        ),
        err(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 12:00:00+5",
            "UTC offset",
        ),
        err(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 12:00:00+05:60",
            "UTC offset",
        ),
        err(
            oid::TIMESTAMPTZ,
            col(Timestamp),
            "2024-01-01 12:00:00 UTC",
            "UTC offset",
        ),
    ]);
}

#[test]
fn uuids_and_json_keep_their_values() {
    use SqlType::{Uuid, Varchar, Variant};
    check(vec![
        ok(
            oid::UUID,
            col(Uuid),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            r#""a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11""#,
        ),
        ok(
            oid::UUID,
            col(Varchar),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            r#""a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11""#,
        ),
        err(
            oid::UUID,
            col(Uuid),
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "8-4-4-4-12",
        ),
        err(
            oid::UUID,
            col(Uuid),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            "at byte 35",
        ),
        ok(
            oid::JSONB,
            col(Variant),
            r#"{"a": [1, 2], "b": 1}"#,
            r#"{"a":[1,2],"b":1}"#,
        ),
        ok(
            oid::JSON,
            col(Variant),
            "{\"b\":1,  \"a\":\n[1,2]}",
            r#"{"b":1,"a":[1,2]}"#,
        ),
        ok(
            oid::JSONB,
            col(Variant),
            "123456789012345678901234567890",
            "123456789012345678901234567890",
        ),
        ok(
            oid::JSONB,
            col(Variant),
            r#""a \"b\" \ud83d\ude00 \u0000""#,
            r#""a \"b\" \ud83d\ude00 \u0000""#,
        ),
        ok(oid::JSONB, col(Variant), " [ ] ", "[]"),
        ok(oid::JSONB, col(Variant), "null", "null"),
        err(oid::JSONB, col(Variant), r#"{"a": }"#, "a JSON value"),
        err(
            oid::JSONB,
            col(Variant),
            r#"{"a": 1} x"#,
            "end of the JSON document",
        ),
        err(oid::JSON, col(Variant), r#""\ud800""#, "low surrogate"),
        err(
            oid::JSON,
            col(Variant),
            "\"a\nb\"",
            "escaped control character",
        ),
        err(
            oid::JSON,
            col(Variant),
            "[01]",
            "at byte 1: expected a JSON value",
        ),
        err(oid::JSON, col(Variant), "[1 2]", "`,` or the end"),
        ok(oid::JSON, col(Varchar), "{\"a\":\n1}", r#""{\"a\":\n1}""#),
    ]);
}

#[test]
fn arrays_become_nested_json_arrays() {
    use SqlType::{BigInt, Integer, Timestamp, TinyInt, Varbinary, Varchar, Variant};
    let ints = array(col(Integer));
    let ints2 = array(array(col(Integer)));
    let not_null_ints = array(not_null(Integer));
    check(vec![
        ok(1007, ints.clone(), "{1,2,NULL}", "[1,2,null]"),
        ok(1007, ints.clone(), "{}", "[]"),
        ok(1007, ints2.clone(), "{}", "[]"),
        ok(1007, ints.clone(), "[0:1]={1,2}", "[1,2]"),
        ok(
            1007,
            ints2.clone(),
            "[0:1][1:2]={{1,2},{3,4}}",
            "[[1,2],[3,4]]",
        ),
        ok(1007, ints2.clone(), "{{1,2},{3,4}}", "[[1,2],[3,4]]"),
        ok(1007, ints.clone(), "{ 1 , 2 }", "[1,2]"),
        err(
            1007,
            ints.clone(),
            "{{1,2},{3,4}}",
            "array has 2 dimension(s)",
        ),
        err(1007, ints2.clone(), "{1,2}", "array has 1 dimension(s)"),
        err(
            1007,
            not_null_ints,
            "{1,NULL}",
            "array element 1: NULL cannot be sent",
        ),
        err(1007, ints.clone(), "{1,x}", "array element 1: malformed"),
        err(
            1005,
            array(col(TinyInt)),
            "{1,300}",
            "array element 1: value \"300\" is out of range",
        ),
        err(1007, ints.clone(), "{1,2", "`,` or `}`"),
        err(1007, ints2.clone(), "{{1,2},3}", "matching dimensions"),
        err(1007, ints.clone(), "{1,2}x", "the end of the array"),
        err(1007, ints.clone(), "1,2", "PostgreSQL array text"),
        err(1007, ints.clone(), "[0:1]{1,2}", "dimension bounds"),
        ok(
            1009,
            array(col(Varchar)),
            r#"{"a b","NULL",NULL,"x\"y\\z","","{}",null}"#,
            r#"["a b","NULL",null,"x\"y\\z","","{}",null]"#,
        ),
        ok(
            1016,
            array(col(BigInt)),
            "{-9223372036854775808}",
            "[-9223372036854775808]",
        ),
        ok(
            1185,
            array(col(Timestamp)),
            r#"{"2024-01-01 07:00:00-05",NULL}"#,
            r#"["2024-01-01 12:00:00",null]"#,
        ),
        ok(
            1001,
            array(col(Varbinary)),
            r#"{"\\x01ff","\\x"}"#,
            "[[1,255],[]]",
        ),
        ok(
            3807,
            array(col(Variant)),
            r#"{"{\"a\": 1}",NULL}"#,
            r#"[{"a":1},null]"#,
        ),
        ok(
            1231,
            array(ColumnType::decimal(5, 1, true)),
            "{1.5,NaN}",
            r#"["1.5",null]"#,
        ),
        ok(1007, array(col(Varchar)), "{1,NULL}", r#"["1",null]"#),
        ok(1007, col(Varchar), "{1,NULL}", r#""{1,NULL}""#),
        // _box uses `;` between elements but is not an array type of ours: VARCHAR only.
        ok(1020, col(Varchar), "{(3,4),(1,2)}", r#""{(3,4),(1,2)}""#),
    ]);
}

#[test]
fn other_types_go_to_varchar_only() {
    use SqlType::{BigInt, Time, Varchar};
    check(vec![
        ok(
            oid::INTERVAL,
            col(Varchar),
            "1 day 02:00:00",
            r#""1 day 02:00:00""#,
        ),
        ok(
            oid::TIMETZ,
            col(Varchar),
            "12:00:00+05:30",
            r#""12:00:00+05:30""#,
        ),
        ok(16_384, col(Varchar), "happy", r#""happy""#),
        err(
            oid::INTERVAL,
            col(Time),
            "02:00:00",
            "interval is accepted by VARCHAR only",
        ),
        err(
            16_384,
            col(BigInt),
            "1",
            "oid 16384 is accepted by VARCHAR only",
        ),
    ]);
}

#[test]
fn every_type_goes_to_varchar_as_its_text() {
    let oids = [
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
        oid::TIMETZ,
        oid::NUMERIC,
        oid::UUID,
        oid::JSONB,
        1007,
        1185,
        16_384,
    ];
    for pg_type in oids {
        assert_eq!(
            decode(pg_type, &col(SqlType::Varchar), b"infinity\t\"x\""),
            Ok(r#""infinity\t\"x\"""#.to_owned()),
            "{}",
            oid::name(pg_type)
        );
    }
}

#[test]
fn nulls_are_null_only_in_nullable_columns() {
    let nullable = plan(oid::INT4, &col(SqlType::Integer)).unwrap();
    let mut out = Vec::new();
    nullable.write_null(&mut out).unwrap();
    nullable.write_datum(Some(b"5"), &mut out).unwrap();
    assert_eq!(out, b"null5");
    let strict = plan(oid::INT4, &not_null(SqlType::Integer)).unwrap();
    let error = strict.write_datum(None, &mut out).unwrap_err();
    assert_eq!(error.kind, ValueErrorKind::NullNotAllowed);
    assert_eq!(out, b"null5", "a refused value writes nothing");
}

#[test]
fn a_refused_value_leaves_the_buffer_unchanged() {
    let plan = plan(1007, &array(col(SqlType::Integer))).unwrap();
    let mut out = b"{\"a\":".to_vec();
    assert!(plan.write_json(b"{1,2,x}", &mut out).is_err());
    assert_eq!(out, b"{\"a\":");
}

#[test]
fn column_errors_name_table_column_and_both_types() {
    let plan = plan(oid::INT4, &not_null(SqlType::SmallInt)).unwrap();
    let error = plan
        .write_json(b"40000", &mut Vec::new())
        .unwrap_err()
        .in_column("public.orders", "qty");
    insta::assert_snapshot!(error, @r#"table public.orders column qty (PostgreSQL int4 -> Feldera SMALLINT NOT NULL): value "40000" is out of range: accepted -32768..=32767"#);
    let error = plan
        .write_json(
            b"12 apples and more text than fits in a message",
            &mut Vec::new(),
        )
        .unwrap_err();
    insta::assert_snapshot!(error, @r#"PostgreSQL int4 value for Feldera SMALLINT NOT NULL: malformed value "12 apples and more text than fits in a m"... at byte 2: expected a decimal integer (optional `-`, digits only)"#);
}

#[test]
fn unsupported_pairs_name_both_types_and_what_is_accepted() {
    use SqlType::*;
    let pairs = [
        (oid::BOOL, col(Integer)),
        (oid::INT8, col(Double)),
        (oid::FLOAT8, col(Real)),
        (oid::TIMESTAMP, col(TimestampTz)),
        (oid::TEXT, col(Uuid)),
        (oid::JSONB, col(Map)),
        (1007, array(col(Boolean))),
        (1007, col(Integer)),
        (oid::INTERVAL, col(Time)),
        (16_384, col(Variant)),
    ];
    let report: Vec<String> = pairs
        .iter()
        .map(|(pg_type, target)| plan(*pg_type, target).unwrap_err().to_string())
        .collect();
    insta::assert_snapshot!(report.join("\n"), @r"
    PostgreSQL type bool cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; bool is accepted by BOOLEAN or VARCHAR
    PostgreSQL type int8 cannot be sent to a Feldera DOUBLE column: slotline has no conversion for this pair; int8 is accepted by TINYINT, SMALLINT, INTEGER or BIGINT (range-checked per value), or VARCHAR
    PostgreSQL type float8 cannot be sent to a Feldera REAL column: float8 values would be rounded to REAL's precision; float8 is accepted by DOUBLE or VARCHAR
    PostgreSQL type timestamp cannot be sent to a Feldera TIMESTAMP_TZ column: timestamp without time zone carries no offset to place it on the UTC line; timestamp is accepted by TIMESTAMP or VARCHAR
    PostgreSQL type text cannot be sent to a Feldera UUID column: slotline has no conversion for this pair; text is accepted by VARCHAR or CHAR
    PostgreSQL type jsonb cannot be sent to a Feldera MAP column: slotline has no conversion for this pair; jsonb is accepted by VARIANT or VARCHAR
    PostgreSQL type _int4 cannot be sent to a Feldera BOOLEAN ARRAY column: its elements cannot be decoded: PostgreSQL type int4 cannot be sent to a Feldera BOOLEAN column: slotline has no conversion for this pair; int4 is accepted by TINYINT, SMALLINT, INTEGER or BIGINT (range-checked per value), or VARCHAR
    PostgreSQL type _int4 cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; _int4 is accepted by an ARRAY whose element type accepts the element, or VARCHAR
    PostgreSQL type interval cannot be sent to a Feldera TIME column: slotline has no conversion for this pair; interval is accepted by VARCHAR only (the text PostgreSQL prints)
    PostgreSQL type oid 16384 cannot be sent to a Feldera VARIANT column: slotline has no conversion for this pair; oid 16384 is accepted by VARCHAR only (the text PostgreSQL prints)
    ");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn json_of(pg_type: u32, target: &ColumnType, text: &[u8]) -> Result<Vec<u8>, ValueError> {
        let plan = plan(pg_type, target).expect("planned");
        let mut out = Vec::new();
        plan.write_json(text, &mut out).map(|()| out)
    }

    proptest! {
        #[test]
        fn int8_text_round_trips_and_fits_exactly_the_column_range(v in any::<i64>()) {
            let text = v.to_string();
            let json = json_of(oid::INT8, &col(SqlType::BigInt), text.as_bytes()).unwrap();
            prop_assert_eq!(serde_json::from_slice::<i64>(&json).unwrap(), v);
            let small = json_of(oid::INT8, &col(SqlType::SmallInt), text.as_bytes());
            prop_assert_eq!(small.is_ok(), i16::try_from(v).is_ok());
        }

        #[test]
        fn uuids_round_trip(bytes in any::<[u8; 16]>()) {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let text = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
            let json = json_of(oid::UUID, &col(SqlType::Uuid), text.as_bytes()).unwrap();
            prop_assert_eq!(serde_json::from_slice::<String>(&json).unwrap(), text);
        }

        #[test]
        fn dates_in_range_round_trip(year in 1u32..=9999, month in 1u32..=12, day in 1u32..=28) {
            let text = format!("{year:04}-{month:02}-{day:02}");
            let json = json_of(oid::DATE, &col(SqlType::Date), text.as_bytes()).unwrap();
            prop_assert_eq!(serde_json::from_slice::<String>(&json).unwrap(), text);
        }

        /// Moving the local time and the offset together never changes the UTC result.
        #[test]
        fn timestamptz_offsets_cancel_out(
            hour in 0u32..24, minute in 0u32..60, offset_min in -(15 * 60i64)..=(15 * 60),
        ) {
            let base = format!("2024-03-01 {hour:02}:{minute:02}:07+00");
            let expected = json_of(oid::TIMESTAMPTZ, &col(SqlType::Timestamp), base.as_bytes()).unwrap();
            // Local wall time = UTC + offset, possibly on the previous or next day.
            let local_min = i64::from(hour * 60 + minute) + offset_min;
            let (day, m) = (local_min.div_euclid(1440), local_min.rem_euclid(1440));
            let date = match day { -1 => "2024-02-29", 0 => "2024-03-01", _ => "2024-03-02" };
            let sign = if offset_min < 0 { '-' } else { '+' };
            let off = offset_min.unsigned_abs();
            let text = format!("{date} {:02}:{:02}:07{sign}{:02}:{:02}", m / 60, m % 60, off / 60, off % 60);
            let got = json_of(oid::TIMESTAMPTZ, &col(SqlType::Timestamp), text.as_bytes()).unwrap();
            prop_assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(expected).unwrap());
        }

        #[test]
        fn text_always_becomes_the_same_string(s in any::<String>()) {
            let json = json_of(oid::TEXT, &col(SqlType::Varchar), s.as_bytes()).unwrap();
            prop_assert!(!json.contains(&b'\n'));
            prop_assert_eq!(serde_json::from_slice::<String>(&json).unwrap(), s);
        }

        /// Every plan either refuses or writes one valid JSON value (checked by the fuzz
        /// harness), over texts built from the characters value outputs are made of.
        #[test]
        fn every_plan_writes_valid_json_or_refuses(
            pick_type in any::<u8>(), pick_target in any::<u8>(),
            text in r#"[-+0-9.eE:{}\[\]",\\ NULLBCinfyatxa-f\n]{0,40}"#,
        ) {
            let mut data = vec![pick_type, pick_target];
            data.extend_from_slice(text.as_bytes());
            fuzz::fuzz_value(&data);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            fuzz::fuzz_value(&data);
        }
    }
}
