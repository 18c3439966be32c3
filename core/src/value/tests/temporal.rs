//! Dates, times, timestamps and the timestamptz shift to UTC.

use super::*;
use crate::schema::SqlType;
use crate::value::oid;

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
