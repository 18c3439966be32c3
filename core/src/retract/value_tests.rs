//! Inputs are written in Feldera's ad-hoc query encoding as its query engine prints them
//! (arrow-json over DataFusion): integers and booleans as JSON, strings and UUIDs (lowercase)
//! as JSON strings, BINARY as lowercase hex, DATE `YYYY-MM-DD`, TIME and TIMESTAMP with the
//! fraction in groups of 3, 6 or 9 digits and a `T`, TIMESTAMP_TZ ending in `Z`, DECIMAL as
//! the text `CAST(.. AS VARCHAR)` prints (exactly `scale` fraction digits).

use super::*;
use crate::schema::ColumnType;
use serde_json::json;

fn kind(sql: SqlType) -> KeyKind {
    KeyKind::of(&ColumnType::new(sql, false)).unwrap()
}

fn decimal(p: i64, s: i64) -> KeyKind {
    KeyKind::of(&ColumnType::decimal(p, s, false)).unwrap()
}

/// The ingress JSON a query value converts to, or the refusal.
fn ingress(kind: KeyKind, query: Json) -> String {
    match kind.from_query(&query) {
        Ok(value) => {
            let mut out = Vec::new();
            kind.write_ingress(&value, &mut out);
            String::from_utf8(out).unwrap()
        }
        Err(why) => format!("refused: {why}"),
    }
}

#[test]
fn integers_keep_every_value_of_their_width_and_refuse_the_rest() {
    let big = kind(SqlType::BigInt);
    assert_eq!(ingress(big, json!(i64::MIN)), "-9223372036854775808");
    assert_eq!(ingress(big, json!(i64::MAX)), "9223372036854775807");
    assert_eq!(ingress(big, json!(0)), "0");
    let tiny = kind(SqlType::TinyInt);
    assert_eq!(ingress(tiny, json!(-128)), "-128");
    assert_eq!(
        ingress(tiny, json!(128)),
        "refused: 128 is outside -128..=127"
    );
    assert_eq!(
        ingress(kind(SqlType::SmallInt), json!(1.5)),
        "refused: expected an integer, found 1.5"
    );
    assert_eq!(
        ingress(kind(SqlType::Integer), json!(-2147483648)),
        "-2147483648"
    );
    assert_eq!(
        ingress(big, json!("1")),
        "refused: expected an integer, found \"1\""
    );
}

#[test]
fn booleans_and_null() {
    let b = kind(SqlType::Boolean);
    assert_eq!(ingress(b, json!(true)), "true");
    assert_eq!(ingress(b, json!(false)), "false");
    for k in [
        b,
        kind(SqlType::Varchar),
        decimal(10, 2),
        kind(SqlType::Date),
    ] {
        assert_eq!(
            ingress(k, Json::Null),
            "refused: NULL in a primary key column"
        );
    }
}

#[test]
fn text_keeps_unicode_quotes_backslashes_and_control_characters() {
    let t = kind(SqlType::Varchar);
    assert_eq!(ingress(t, json!("")), "\"\"");
    assert_eq!(ingress(t, json!("héllo 😀")), "\"héllo 😀\"");
    assert_eq!(
        ingress(t, json!("it's \"q\" \\ back")),
        r#""it's \"q\" \\ back""#
    );
    assert_eq!(
        ingress(t, json!("a\nb\tc\u{1}\u{7f}")),
        "\"a\\nb\\tc\\u0001\u{7f}\""
    );
    assert_eq!(ingress(kind(SqlType::Char), json!("ab ")), "\"ab \"");
    assert_eq!(ingress(t, json!(5)), "refused: expected a string, found 5");
}

#[test]
fn uuids_are_lowercase_text() {
    let u = kind(SqlType::Uuid);
    assert_eq!(
        ingress(u, json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
        "\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\""
    );
    assert_eq!(
        ingress(u, json!("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")),
        "\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\""
    );
    assert!(ingress(u, json!("a0eebc999c0b4ef8bb6d6bb9bd380a11")).starts_with("refused"));
}

#[test]
fn decimals_are_exact_at_the_column_scale_even_past_f64() {
    let d = decimal(10, 2);
    assert_eq!(ingress(d, json!("1.10")), "\"1.10\"");
    assert_eq!(ingress(d, json!("-0.05")), "\"-0.05\"");
    assert_eq!(ingress(d, json!("0.00")), "\"0.00\"");
    assert_eq!(ingress(d, json!("-0.00")), "\"0.00\"", "no negative zero");
    assert_eq!(ingress(d, json!("12345678.99")), "\"12345678.99\"");
    assert!(
        ingress(d, json!("123456789.00")).starts_with("refused"),
        "9 integer digits"
    );
    assert!(
        ingress(d, json!("1.123")).starts_with("refused"),
        "past the scale"
    );
    assert!(ingress(d, json!("1.")).starts_with("refused"));
    assert!(ingress(d, json!(".5")).starts_with("refused"));
    assert!(ingress(d, json!("1e2")).starts_with("refused"));
    let wide = decimal(38, 0);
    let max = "99999999999999999999999999999999999999";
    assert_eq!(ingress(wide, json!(max)), format!("\"{max}\""));
    assert_eq!(
        ingress(wide, json!(format!("-{max}"))),
        format!("\"-{max}\"")
    );
    let fine = decimal(38, 38);
    let tiny = "0.00000000000000000000000000000000000001";
    assert_eq!(ingress(fine, json!(tiny)), format!("\"{tiny}\""));
    assert_eq!(
        ingress(d, json!(1.1)),
        "refused: DECIMAL key 1.1 arrived as a JSON number, which may have lost digits; \
         accepted: its text (the key scan casts DECIMAL keys to VARCHAR)"
    );
}

#[test]
fn decimal_values_order_by_value_not_by_text() {
    let d = decimal(10, 2);
    let v = |s: &str| d.from_query(&json!(s)).unwrap();
    assert!(v("-10.00") < v("-9.50"));
    assert!(v("-0.01") < v("0.00"));
    assert!(v("9.00") < v("10.00"), "text order would say otherwise");
}

#[test]
fn binary_arrives_as_hex_and_leaves_as_a_byte_array() {
    let b = kind(SqlType::Varbinary);
    assert_eq!(ingress(b, json!("00ab10ff")), "[0,171,16,255]");
    assert_eq!(ingress(b, json!("")), "[]");
    assert_eq!(ingress(kind(SqlType::Binary), json!("0A")), "[10]");
    assert!(
        ingress(b, json!("abc")).starts_with("refused"),
        "odd length"
    );
    assert!(ingress(b, json!("zz")).starts_with("refused"));
    assert!(
        ingress(b, json!([1, 2])).starts_with("refused"),
        "ingress form, not query form"
    );
}

#[test]
fn dates_cover_years_1_to_9999() {
    let d = kind(SqlType::Date);
    assert_eq!(ingress(d, json!("0001-01-01")), "\"0001-01-01\"");
    assert_eq!(ingress(d, json!("9999-12-31")), "\"9999-12-31\"");
    assert_eq!(ingress(d, json!("2024-02-29")), "\"2024-02-29\"");
    for bad in [
        "2023-02-29",
        "0000-01-01",
        "+10000-01-01",
        "2024-1-01",
        "2024-13-01",
    ] {
        assert!(ingress(d, json!(bad)).starts_with("refused"), "{bad}");
    }
}

#[test]
fn times_read_three_six_or_nine_digits_and_write_postgres_form() {
    let t = kind(SqlType::Time);
    assert_eq!(ingress(t, json!("00:00:00")), "\"00:00:00\"");
    assert_eq!(ingress(t, json!("12:34:56.500")), "\"12:34:56.5\"");
    assert_eq!(ingress(t, json!("12:34:56.123456")), "\"12:34:56.123456\"");
    assert_eq!(
        ingress(t, json!("23:59:59.999999999")),
        "\"23:59:59.999999999\""
    );
    for bad in [
        "24:00:00",
        "12:60:00",
        "12:34:56.",
        "12:34:56.1234567890",
        "1:02:03",
    ] {
        assert!(ingress(t, json!(bad)).starts_with("refused"), "{bad}");
    }
}

#[test]
fn timestamps_arrive_with_t_and_leave_with_a_space() {
    let ts = kind(SqlType::Timestamp);
    assert_eq!(
        ingress(ts, json!("2024-01-02T03:04:05")),
        "\"2024-01-02 03:04:05\""
    );
    assert_eq!(
        ingress(ts, json!("2024-01-02T03:04:05.120")),
        "\"2024-01-02 03:04:05.12\""
    );
    assert_eq!(
        ingress(ts, json!("0001-01-01T00:00:00")),
        "\"0001-01-01 00:00:00\""
    );
    assert_eq!(
        ingress(ts, json!("9999-12-31T23:59:59.999999")),
        "\"9999-12-31 23:59:59.999999\""
    );
    assert!(
        ingress(ts, json!("2024-01-02T03:04:05.123456789")).contains("finer than"),
        "a Feldera TIMESTAMP holds microseconds"
    );
    assert!(ingress(ts, json!("2024-01-02T03:04:05Z")).starts_with("refused"));
}

#[test]
fn timestamp_tz_arrives_in_utc_with_z_and_leaves_as_rfc3339() {
    let tz = kind(SqlType::TimestampTz);
    assert_eq!(
        ingress(tz, json!("2024-01-02T03:04:05.123456Z")),
        "\"2024-01-02T03:04:05.123456+00:00\""
    );
    assert_eq!(
        ingress(tz, json!("2024-01-02T03:04:05+00:00")),
        "\"2024-01-02T03:04:05+00:00\""
    );
    assert!(
        ingress(tz, json!("2024-01-02T03:04:05+01:00")).starts_with("refused"),
        "the query engine prints UTC; another offset is not its answer"
    );
    assert!(ingress(tz, json!("2024-01-02 03:04:05")).starts_with("refused"));
}

#[test]
fn ingress_forms_read_back_to_the_same_values() {
    let cases = [
        (kind(SqlType::BigInt), json!(-5), json!(-5)),
        (kind(SqlType::Varbinary), json!("0102"), json!([1, 2])),
        (decimal(10, 2), json!("1.10"), json!("1.1")),
        (
            kind(SqlType::Timestamp),
            json!("2024-01-02T03:04:05.500"),
            json!("2024-01-02 03:04:05.5"),
        ),
        (
            kind(SqlType::TimestampTz),
            json!("2024-01-02T03:04:05Z"),
            json!("2024-01-02T03:04:05+00:00"),
        ),
        (
            kind(SqlType::Time),
            json!("10:00:00.100"),
            json!("10:00:00.1"),
        ),
    ];
    for (k, query, ingress) in cases {
        assert_eq!(
            k.from_query(&query).unwrap(),
            k.from_ingress(&ingress).unwrap(),
            "{query} vs {ingress}"
        );
    }
    assert!(kind(SqlType::Varbinary)
        .from_ingress(&json!([256]))
        .is_err());
}

#[test]
fn floats_and_structured_types_are_refused_as_keys() {
    for sql in [SqlType::Real, SqlType::Double, SqlType::Variant] {
        assert!(KeyKind::of(&ColumnType::new(sql, false)).is_err(), "{sql}");
    }
    assert!(KeyKind::of(&ColumnType::decimal(39, 0, false)).is_err());
    assert!(KeyKind::of(&ColumnType::decimal(5, 6, false)).is_err());
    assert!(KeyKind::of(&ColumnType::new(SqlType::Decimal, false)).is_err());
}

proptest::proptest! {
    #[test]
    fn decimal_text_round_trips(unscaled in -(10i128.pow(18))..10i128.pow(18), scale in 0u32..=18) {
        let kind = KeyKind::Decimal { precision: 38, scale };
        let text = decimal_text(unscaled, scale);
        proptest::prop_assert_eq!(kind.from_query(&json!(text)), Ok(KeyValue::Decimal(unscaled)));
    }

    #[test]
    fn hostile_strings_never_panic(text in "\\PC{0,40}") {
        for k in [KeyKind::Date, KeyKind::Time, KeyKind::Timestamp, KeyKind::TimestampTz,
                  KeyKind::Uuid, KeyKind::Binary, KeyKind::Decimal { precision: 10, scale: 2 }] {
            let _ = k.from_query(&json!(text));
            let _ = k.from_ingress(&json!(text));
        }
    }
}
