//! Properties over generated values: round trips, offsets, and JSON validity of every plan.

use super::*;
use crate::schema::SqlType;
use crate::value::{fuzz, oid, plan, ValueError};
use proptest::prelude::*;

fn json_of(pg_type: u32, target: &ColumnType, text: &[u8]) -> Result<Vec<u8>, ValueError> {
    let plan = plan(&PgTypes::new(), pg_type, target).expect("planned");
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

    /// A UTC text is copied, any other offset is computed and printed: both give the same
    /// JSON for the same instant, in both Feldera target types.
    #[test]
    fn utc_texts_copied_equal_shifted_texts_printed(
        year in 1u32..=9998, month in 1u32..=12, day in 1u32..=28, hour in 0u32..23,
        minute in 0u32..60, second in 0u32..60, frac in "(\\.[0-9]{1,6})?", rfc3339 in any::<bool>(),
    ) {
        let target = if rfc3339 { SqlType::TimestampTz } else { SqlType::Timestamp };
        let utc = format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}{frac}+00");
        let east = format!("{year:04}-{month:02}-{day:02} {:02}:{minute:02}:{second:02}{frac}+01", hour + 1);
        let copied = json_of(oid::TIMESTAMPTZ, &col(target), utc.as_bytes()).unwrap();
        let printed = json_of(oid::TIMESTAMPTZ, &col(target), east.as_bytes()).unwrap();
        prop_assert_eq!(String::from_utf8(copied).unwrap(), String::from_utf8(printed).unwrap());
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
