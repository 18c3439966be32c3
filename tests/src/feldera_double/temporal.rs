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
    fn impossible_days_and_t_separator_are_rejected() {
        assert!(parse_date("2023-02-29").is_err());
        assert!(parse_date("2024-13-01").is_err());
        assert!(parse_timestamp("2024-01-01T00:00:00").is_err());
        assert!(parse_time("24:00:00").is_err());
        assert!(parse_time("10:00:00.1234567891").is_err());
    }
}
