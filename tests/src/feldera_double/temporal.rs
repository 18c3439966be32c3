//! DATE, TIME and TIMESTAMP values: parsing Feldera's ingress text forms and printing both
//! the ingress form (space between date and time) and the ad-hoc query form (`T`).
//!
//! Owns: calendar validation and fractional-second formatting. Never sees JSON.

/// A calendar date; field order makes the derived `Ord` chronological.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    pub year: i32,
    pub month: u8,
    pub day: u8,
}

/// A time of day with nanosecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub nanos: u32,
}

/// Parses `YYYY-MM-DD` (four-digit year, as Feldera's `%Y-%m-%d` with chrono accepts).
pub fn parse_date(text: &str) -> Result<Date, String> {
    let bad = || format!("invalid DATE `{text}`: expected YYYY-MM-DD");
    let mut parts = text.splitn(3, '-');
    let (y, m, d) = match (parts.next(), parts.next(), parts.next()) {
        (Some(y), Some(m), Some(d)) => (y, m, d),
        _ => return Err(bad()),
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return Err(bad());
    }
    let year: i32 = digits(y).ok_or_else(bad)?;
    let month: u8 = digits(m).ok_or_else(bad)?;
    let day: u8 = digits(d).ok_or_else(bad)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(format!("invalid DATE `{text}`: no such calendar day"));
    }
    Ok(Date { year, month, day })
}

/// Parses `HH:MM:SS` with an optional fraction of up to nine digits.
pub fn parse_time(text: &str) -> Result<Time, String> {
    let bad = || format!("invalid TIME `{text}`: expected HH:MM:SS[.fraction]");
    let (hms, frac) = match text.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (text, None),
    };
    let mut parts = hms.split(':');
    let (h, m, s) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(m), Some(s), None) if h.len() == 2 && m.len() == 2 && s.len() == 2 => {
            (h, m, s)
        }
        _ => return Err(bad()),
    };
    let hour: u8 = digits(h).ok_or_else(bad)?;
    let minute: u8 = digits(m).ok_or_else(bad)?;
    let second: u8 = digits(s).ok_or_else(bad)?;
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("invalid TIME `{text}`: field out of range"));
    }
    let nanos = match frac {
        None => 0,
        Some(f) if f.is_empty() || f.len() > 9 => return Err(bad()),
        Some(f) => {
            let n: u32 = digits(f).ok_or_else(bad)?;
            n * 10u32.pow(9 - f.len() as u32)
        }
    };
    Ok(Time {
        hour,
        minute,
        second,
        nanos,
    })
}

/// Parses a TIMESTAMP the way Feldera's default JSON format does: RFC 3339 with the offset
/// optional, `T` or a space between date and time; an offset, when given, moves the value
/// to UTC.
pub fn parse_timestamp(text: &str) -> Result<(Date, Time), String> {
    let (date, time, offset) = parse_rfc3339(text, "TIMESTAMP")?;
    Ok(shift(date, time, offset.unwrap_or(0)))
}

/// Parses a TIMESTAMP_TZ: RFC 3339 with a mandatory offset (`Z` or `±HH:MM`), as Feldera's
/// default format (chrono's RFC 3339 parser) requires; held as UTC.
pub fn parse_timestamp_tz(text: &str) -> Result<(Date, Time), String> {
    let (date, time, offset) = parse_rfc3339(text, "TIMESTAMP_TZ")?;
    let offset = offset.ok_or_else(|| {
        format!("invalid TIMESTAMP_TZ `{text}`: RFC 3339 needs an offset (`Z` or `+HH:MM`)")
    })?;
    Ok(shift(date, time, offset))
}

/// `YYYY-MM-DD[Tt ]HH:MM:SS[.f][Z|z|±HH:MM]`: the date, the time and the offset in minutes.
fn parse_rfc3339(text: &str, what: &str) -> Result<(Date, Time, Option<i32>), String> {
    let bad =
        || format!("invalid {what} `{text}`: expected `YYYY-MM-DD HH:MM:SS[.fraction][offset]`");
    let date_part = text.get(..10).ok_or_else(bad)?;
    let sep = text.as_bytes().get(10).copied().ok_or_else(bad)?;
    if !matches!(sep, b'T' | b't' | b' ') {
        return Err(bad());
    }
    let rest = text.get(11..).ok_or_else(bad)?;
    let (time_part, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(at) => {
            let (time_part, zone) = rest.split_at(at);
            (time_part, Some(parse_offset(zone).ok_or_else(bad)?))
        }
        None => (rest, None),
    };
    Ok((parse_date(date_part)?, parse_time(time_part)?, offset))
}

fn parse_offset(zone: &str) -> Option<i32> {
    if zone.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = zone.get(1..)?.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (i32, i32) = (digits(h)?, digits(m)?);
    (h <= 23 && m <= 59).then_some(sign * (h * 60 + m))
}

/// The UTC instant of a local date and time at `offset_minutes` east of UTC.
fn shift(date: Date, time: Time, offset_minutes: i32) -> (Date, Time) {
    if offset_minutes == 0 {
        return (date, time);
    }
    let local = days_from_civil(date) * 1440 + i64::from(time.hour) * 60 + i64::from(time.minute)
        - i64::from(offset_minutes);
    let (days, minutes) = (local.div_euclid(1440), local.rem_euclid(1440));
    let time = Time {
        hour: (minutes / 60) as u8,
        minute: (minutes % 60) as u8,
        ..time
    };
    (civil_from_days(days), time)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(d: Date) -> i64 {
    let y = i64::from(d.year) - i64::from(d.month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(d.month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d.day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> Date {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    Date { year, month, day }
}

/// RFC 3339 in UTC: `YYYY-MM-DDTHH:MM:SS[.f]+00:00`, the TIMESTAMP_TZ ingress form.
pub fn format_timestamp_tz(d: &Date, t: &Time) -> String {
    format!("{}T{}+00:00", format_date(d), format_time(t))
}

pub fn format_date(d: &Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

/// `HH:MM:SS` plus the fraction without trailing zeros, if any.
pub fn format_time(t: &Time) -> String {
    let mut out = format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second);
    if t.nanos != 0 {
        let frac = format!("{:09}", t.nanos);
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out
}

/// `sep` is `' '` for the ingress form and `'T'` for ad-hoc query output.
pub fn format_timestamp(d: &Date, t: &Time, sep: char) -> String {
    format!("{}{sep}{}", format_date(d), format_time(t))
}

/// The fraction as the query engine prints it: none, or 3, 6 or 9 digits, whichever is the
/// shortest that is exact.
fn query_fraction(nanos: u32) -> String {
    if nanos == 0 {
        String::new()
    } else if nanos % 1_000_000 == 0 {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    }
}

/// TIME in the ad-hoc query form.
pub fn format_time_query(t: &Time) -> String {
    format!(
        "{:02}:{:02}:{:02}{}",
        t.hour,
        t.minute,
        t.second,
        query_fraction(t.nanos)
    )
}

/// TIMESTAMP in the ad-hoc query form (`YYYY-MM-DDTHH:MM:SS[.fff]`).
pub fn format_timestamp_query(d: &Date, t: &Time) -> String {
    format!("{}T{}", format_date(d), format_time_query(t))
}

/// TIMESTAMP_TZ in the ad-hoc query form: UTC, ending in `Z`.
pub fn format_timestamp_tz_query(d: &Date, t: &Time) -> String {
    format!("{}Z", format_timestamp_query(d, t))
}

/// A moment as chrono serializes a `DateTime<Utc>` (RFC 3339 in UTC ending in `Z`, with
/// none or 3, 6 or 9 fraction digits): how Feldera writes `failed_at`, `delayed_since` and
/// `started_at`.
pub fn format_system_time(t: std::time::SystemTime) -> String {
    let since = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let rem = secs.rem_euclid(86_400);
    let time = Time {
        hour: (rem / 3600) as u8,
        minute: (rem % 3600 / 60) as u8,
        second: (rem % 60) as u8,
        nanos: since.subsec_nanos(),
    };
    format_timestamp_tz_query(&civil_from_days(secs.div_euclid(86_400)), &time)
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_with_space_parses_and_prints_both_forms() {
        let (d, t) = parse_timestamp("2024-02-29 13:05:09.120").unwrap();
        assert_eq!(format_timestamp(&d, &t, ' '), "2024-02-29 13:05:09.12");
        assert_eq!(format_timestamp(&d, &t, 'T'), "2024-02-29T13:05:09.12");
    }

    #[test]
    fn timestamps_take_t_or_space_and_an_optional_offset_that_moves_them_to_utc() {
        let ts = |s| parse_timestamp(s).map(|(d, t)| format_timestamp(&d, &t, ' '));
        assert_eq!(ts("2024-01-01T00:00:00"), Ok("2024-01-01 00:00:00".into()));
        assert_eq!(
            ts("2024-01-01 05:30:00+05:30"),
            Ok("2024-01-01 00:00:00".into())
        );
        assert_eq!(
            ts("2024-03-01T00:10:00.5+01:00"),
            Ok("2024-02-29 23:10:00.5".into())
        );
        assert!(ts("2024-01-01X00:00:00").is_err());
    }

    #[test]
    fn timestamp_tz_needs_an_rfc3339_offset() {
        let tz = |s| parse_timestamp_tz(s).map(|(d, t)| format_timestamp_tz(&d, &t));
        assert_eq!(
            tz("2000-01-01T00:00:00.5-08:00"),
            Ok("2000-01-01T08:00:00.5+00:00".into())
        );
        assert_eq!(
            tz("1970-01-01 00:00:00Z"),
            Ok("1970-01-01T00:00:00+00:00".into())
        );
        assert!(tz("2024-06-01 12:00:00").is_err(), "no offset");
        assert!(
            tz("2024-06-01 12:00:00+0530").is_err(),
            "offset needs a colon"
        );
    }

    #[test]
    fn impossible_days_are_rejected() {
        assert!(parse_date("2023-02-29").is_err());
        assert!(parse_date("2024-13-01").is_err());
        assert!(parse_time("24:00:00").is_err());
        assert!(parse_time("10:00:00.1234567891").is_err());
    }

    #[test]
    fn query_form_prints_fractions_in_groups_of_three_digits() {
        let (d, t) = parse_timestamp("2024-02-29 13:05:09.120").unwrap();
        assert_eq!(format_timestamp_query(&d, &t), "2024-02-29T13:05:09.120");
        let t = |s: &str| format_time_query(&parse_time(s).unwrap());
        assert_eq!(t("00:00:00"), "00:00:00");
        assert_eq!(t("00:00:00.5"), "00:00:00.500");
        assert_eq!(t("00:00:00.1234"), "00:00:00.123400");
        assert_eq!(t("00:00:00.000000001"), "00:00:00.000000001");
    }

    #[test]
    fn timestamp_tz_is_brought_to_utc() {
        let utc = |s: &str| {
            let (d, t) = parse_timestamp_tz(s).unwrap();
            format_timestamp_tz_query(&d, &t)
        };
        assert_eq!(utc("2024-01-02T03:04:05+00:00"), "2024-01-02T03:04:05Z");
        assert_eq!(utc("2024-01-02T03:04:05.5Z"), "2024-01-02T03:04:05.500Z");
        assert_eq!(utc("2024-01-01T01:30:00+02:00"), "2023-12-31T23:30:00Z");
        assert_eq!(utc("2024-02-28 23:00:00-01:30"), "2024-02-29T00:30:00Z");
        assert_eq!(
            utc("9999-12-31T23:59:59.999999+00:00"),
            "9999-12-31T23:59:59.999999Z"
        );
        assert!(parse_timestamp_tz("2024-01-02 03:04:05").is_err());
        assert!(parse_timestamp_tz("2024-01-02T03:04:05+0100").is_err());
    }

    #[test]
    fn system_times_print_as_chrono_prints_a_utc_datetime() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 120_000_000);
        assert_eq!(format_system_time(t), "2023-11-14T22:13:20.120Z");
        assert_eq!(
            format_system_time(std::time::UNIX_EPOCH),
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn day_numbers_round_trip() {
        for days in (-800_000..3_000_000).step_by(997) {
            assert_eq!(days_from_civil(civil_from_days(days)), days);
        }
        let d = Date {
            year: 2000,
            month: 3,
            day: 1,
        };
        assert_eq!(days_from_civil(d), 11_017);
    }
}
