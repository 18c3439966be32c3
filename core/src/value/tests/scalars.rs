//! Booleans, integers, floats, numerics, strings and bytea.

use super::*;
use crate::schema::SqlType;
use crate::value::oid;

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
fn integers_not_printed_canonically_are_reprinted_as_json_numbers() {
    use SqlType::{BigInt, Integer};
    check(vec![
        ok(oid::INT4, col(Integer), "0", "0"),
        ok(oid::INT4, col(Integer), "-0", "0"),
        ok(oid::INT4, col(Integer), "007", "7"),
        ok(oid::INT8, col(BigInt), "-0042", "-42"),
        ok(oid::INT8, col(BigInt), "00", "0"),
        ok(oid::INT8, col(BigInt), "-10", "-10"),
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
        // Widened exactly: read as a double, "3.14" would be another number than the float4.
        ok(oid::FLOAT4, col(Double), "3.14", "3.140000104904175"),
        ok(
            oid::FLOAT4,
            col(Double),
            "-3.4028235e+38",
            "-340282346638528860000000000000000000000",
        ),
        ok(oid::FLOAT4, col(Double), "NaN", "null"),
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
fn text_types_become_strings_unchanged_whatever_the_declared_length() {
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
        // Feldera stores a longer value as it is (no cut, no refusal): so does slotline.
        ok(oid::VARCHAR, varchar(3), "abc   ", r#""abc   ""#),
        ok(oid::VARCHAR, varchar(3), "äöü", r#""äöü""#),
        ok(oid::VARCHAR, varchar(3), "abcd", r#""abcd""#),
        ok(
            oid::BPCHAR,
            ColumnType::new(Char, true).with_precision(2),
            "abc  ",
            r#""abc  ""#,
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
        ok(
            oid::BYTEA,
            ColumnType::new(Varbinary, true).with_precision(2),
            r"\x010203",
            "[1,2,3]",
        ),
        ok(oid::BYTEA, col(Varchar), r"\x00ff", r#""\\x00ff""#),
    ]);
}
