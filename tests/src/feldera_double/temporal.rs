//! DATE, TIME and TIMESTAMP values: parsing Feldera's ingress text forms and printing both
//! the ingress form (space between date and time, fraction without trailing zeros) and the
//! ad-hoc query form (`T`, fraction in groups of 3, 6 or 9 digits, TIMESTAMP_TZ in UTC with
//! `Z`, as Feldera's query engine prints them).
//!
//! Owns: calendar validation, UTC offsets and fractional-second formatting. Never sees JSON.

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

/// Parses Feldera's ingress TIMESTAMP form `YYYY-MM-DD HH:MM:SS[.fraction]`. A `T`
/// separator is rejected, as Feldera's default `%F %T%.f` format rejects it.
pub fn parse_timestamp(text: &str) -> Result<(Date, Time), String> {
    let (d, t) = text.split_once(' ').ok_or_else(|| {
        format!("invalid TIMESTAMP `{text}`: expected `YYYY-MM-DD HH:MM:SS[.fraction]`")
    })?;
    Ok((parse_date(d)?, parse_time(t)?))
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

/// Parses an RFC 3339 timestamp (`T` or space, then `Z` or `±HH:MM`) into UTC date and time.
pub fn parse_timestamp_tz(text: &str) -> Result<(Date, Time), String> {
    let bad = || {
        format!("invalid TIMESTAMP_TZ `{text}`: expected RFC 3339, e.g. 2024-01-02T03:04:05+00:00")
    };
    let date = text.get(..10).ok_or_else(bad)?;
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return Err(bad());
    }
    let rest = text.get(11..).ok_or_else(bad)?;
    let (time, offset_minutes) = if let Some(time) = rest.strip_suffix(['Z', 'z']) {
        (time, 0)
    } else {
        let at = rest.rfind(['+', '-']).ok_or_else(bad)?;
        let (time, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset[1..].split_once(':').ok_or_else(bad)?;
        let (h, m): (i64, i64) = match (digits(h), digits(m)) {
            (Some(hours), Some(minutes)) if h.len() == 2 && m.len() == 2 && minutes < 60 => {
                (hours, minutes)
            }
            _ => return Err(bad()),
        };
        (time, sign * (h * 60 + m))
    };
    let date = parse_date(date)?;
    let time = parse_time(time)?;
    Ok(shift_minutes(date, time, -offset_minutes))
}

/// Moves a date and time by `minutes` (used to bring a local time to UTC).
fn shift_minutes(d: Date, t: Time, minutes: i64) -> (Date, Time) {
    let minute_of_day = i64::from(t.hour) * 60 + i64::from(t.minute) + minutes;
    let days = days_from_civil(&d) + minute_of_day.div_euclid(1440);
    let minute_of_day = minute_of_day.rem_euclid(1440);
    let time = Time {
        hour: (minute_of_day / 60) as u8,
        minute: (minute_of_day % 60) as u8,
        ..t
    };
    (civil_from_days(days), time)
}

/// Days since 1970-01-01 (proleptic Gregorian; a 400-year cycle is 146097 days).
fn days_from_civil(d: &Date) -> i64 {
    let y = i64::from(d.year) - i64::from(d.month <= 2);
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400);
    let month = i64::from(d.month);
    let day_of_year =
        (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(d.day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> Date {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u8;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u8;
    let year = (year_of_era + era * 400 + i64::from(month <= 2)) as i32;
    Date { year, month, day }
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
    fn day_numbers_round_trip() {
        for days in (-800_000..3_000_000).step_by(997) {
            assert_eq!(days_from_civil(&civil_from_days(days)), days);
        }
        let d = Date {
            year: 2000,
            month: 3,
            day: 1,
        };
        assert_eq!(days_from_civil(&d), 11_017);
    }

    #[test]
    fn impossible_days_and_t_separator_are_rejected() {
        assert!(parse_date("2023-02-29").is_err());
        assert!(parse_date("2024-13-01").is_err());
        assert!(parse_timestamp("2024-01-01T00:00:00").is_err());
        assert!(parse_time("24:00:00").is_err());
        assert!(parse_time("10:00:00.1234567891").is_err());
    }
}
