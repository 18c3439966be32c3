//! `date`, `time`, `timestamp` and `timestamptz` text (DateStyle=ISO) to Feldera's DATE,
//! TIME, TIMESTAMP and TIMESTAMP_TZ JSON strings.
//!
//! PostgreSQL prints `YYYY-MM-DD` (year zero-padded to at least 4 digits, ` BC` appended for
//! BC dates), `HH:MM:SS[.f]` with 1 to 6 fractional digits and trailing zeros dropped, and for
//! timestamptz an offset `+HH`, `+HH:MM` or `+HH:MM:SS` (historical local mean time, e.g.
//! `+00:53:28`) for the session TimeZone, plus `infinity`/`-infinity`.
//!
//! Feldera's date-time types cover years 1 to 9999 (the SQL standard range), so BC dates,
//! years past 9999, infinities and the `time` value `24:00:00` have no representation: they
//! become `null` in nullable columns and are refused otherwise (the caller decides, from
//! `Outcome::Null`). Timestamptz is shifted to UTC with any offset; the range check happens
//! after the shift, so `10000-01-01 00:00:00+05` still arrives as 9999-12-31 19:00 UTC.
//! Calendar arithmetic is proleptic Gregorian on day numbers, the same calendar PostgreSQL
//! uses.

use super::error::ValueErrorKind;
use super::escape::{four_digits, two_digits};
use super::outcome::Outcome;

const DATE_EXPECTED: &str = "an ISO date `YYYY-MM-DD` (optionally ` BC`), infinity or -infinity";
const TIME_EXPECTED: &str = "a time `HH:MM:SS` with 0 to 6 fractional digits";
const OFFSET_EXPECTED: &str = "a UTC offset `+HH`, `+HH:MM` or `+HH:MM:SS`";
const END_EXPECTED: &str = "the end of the value (or ` BC`)";
const SECONDS_PER_DAY: i64 = 86_400;

/// A parsed date: astronomical year (1 BC = 0), month 1-12, day 1-31.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ymd {
    year: i64,
    month: u32,
    day: u32,
}

/// A parsed time of day; `frac` is the fractional digits (without the dot) as printed.
#[derive(Clone, Copy, Debug)]
struct Hms<'a> {
    hour: u32,
    minute: u32,
    second: u32,
    frac: &'a [u8],
}

/// Which text shape to expect and how to write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Temporal {
    Date,
    Time,
    Timestamp,
    /// timestamptz, shifted to UTC; `rfc3339` writes `T` and `+00:00` (TIMESTAMP_TZ),
    /// otherwise UTC wall time (TIMESTAMP).
    TimestampTz {
        rfc3339: bool,
    },
}

/// `YYYY-MM-DD`: a date printed with a four-digit year.
const DATE_LEN: usize = 10;

pub(crate) fn write_temporal(
    kind: Temporal,
    text: &[u8],
    out: &mut Vec<u8>,
) -> Result<Outcome, ValueErrorKind> {
    if copy_plain(kind, text, out) {
        return Ok(Outcome::Written);
    }
    write_parsed(kind, text, out)
}

/// The general case: every shape PostgreSQL prints, parsed field by field.
fn write_parsed(kind: Temporal, text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    if kind != Temporal::Time && matches!(text, b"infinity" | b"-infinity") {
        return Ok(Outcome::Null {
            why: "infinite date/time",
        });
    }
    let mut cursor = Cursor { text, pos: 0 };
    if kind == Temporal::Time {
        let time = cursor.time(true)?;
        cursor.end(false)?;
        if time.hour == 24 {
            return Ok(Outcome::Null {
                why: "24:00:00 is after Feldera's last TIME",
            });
        }
        out.push(b'"');
        write_time(&time, out);
        out.push(b'"');
        return Ok(Outcome::Written);
    }
    let mut date = cursor.date()?;
    let four_digit_year = cursor.pos == DATE_LEN;
    let time = if kind == Temporal::Date {
        None
    } else {
        cursor.expect(b' ', "a space between date and time")?;
        Some(cursor.time(false)?)
    };
    let printed = text.get(..cursor.pos).unwrap_or_default();
    let offset = match kind {
        Temporal::TimestampTz { .. } => cursor.offset()?,
        _ => 0,
    };
    let bc = cursor.end(true)?;
    if bc {
        date.year = 1 - date.year;
    }
    let mut time = time;
    if let Some(t) = time.as_mut().filter(|_| offset != 0) {
        shift(&mut date, t, offset);
    }
    if !(1..=9999).contains(&date.year) {
        return Ok(Outcome::Null {
            why: "Feldera dates cover years 1 to 9999",
        });
    }
    let rfc3339 = kind == Temporal::TimestampTz { rfc3339: true };
    if offset == 0 && !bc && four_digit_year {
        // Already in UTC, as the pinned TimeZone prints it: the date and time text is what
        // would be written (two-digit fields, fraction as printed), so it is copied.
        out.push(b'"');
        match printed.split_at_checked(DATE_LEN) {
            Some((day, rest)) if rfc3339 => {
                out.extend_from_slice(day);
                out.push(b'T');
                out.extend_from_slice(rest.get(1..).unwrap_or_default());
                out.extend_from_slice(b"+00:00");
            }
            _ => out.extend_from_slice(printed),
        }
        out.push(b'"');
        return Ok(Outcome::Written);
    }
    out.push(b'"');
    write_date(date, out);
    if let Some(t) = &time {
        out.push(if rfc3339 { b'T' } else { b' ' });
        write_time(t, out);
        if rfc3339 {
            out.extend_from_slice(b"+00:00");
        }
    }
    out.push(b'"');
    Ok(Outcome::Written)
}

/// The shape nearly every value has: a four-digit year and, for timestamptz, the UTC
/// offset `+00` (the pinned TimeZone). Checked at fixed positions and copied, it costs a
/// fraction of the general parse; it writes exactly what `write_parsed` writes for the same
/// text (a property test holds the two together) and declines anything else (returns
/// false, writing nothing), which then takes the general path.
fn copy_plain(kind: Temporal, text: &[u8], out: &mut Vec<u8>) -> bool {
    let (date, time, frac) = match kind {
        Temporal::Time => return false,
        Temporal::Date => match text.first_chunk::<DATE_LEN>() {
            Some(date) if text.len() == DATE_LEN => (date, None, &[][..]),
            _ => return false,
        },
        Temporal::Timestamp | Temporal::TimestampTz { .. } => {
            let text = match kind {
                Temporal::Timestamp => text,
                _ => match text.strip_suffix(b"+00") {
                    Some(local) => local,
                    None => return false,
                },
            };
            let Some((date, rest)) = text.split_first_chunk::<DATE_LEN>() else {
                return false;
            };
            let Some((&b' ', rest)) = rest.split_first() else {
                return false;
            };
            let Some((time, frac)) = rest.split_first_chunk::<8>() else {
                return false;
            };
            (date, Some(time), frac)
        }
    };
    if !plain_date(date) || !time.is_none_or(plain_time) || !plain_fraction(frac) {
        return false;
    }
    let rfc3339 = kind == Temporal::TimestampTz { rfc3339: true };
    out.push(b'"');
    out.extend_from_slice(date);
    if let Some(time) = time {
        out.push(if rfc3339 { b'T' } else { b' ' });
        out.extend_from_slice(time);
        out.extend_from_slice(frac);
        if rfc3339 {
            out.extend_from_slice(b"+00:00");
        }
    }
    out.push(b'"');
    true
}

/// Two ASCII digits as a number.
fn two(a: u8, b: u8) -> Option<u32> {
    let (a, b) = (a.wrapping_sub(b'0'), b.wrapping_sub(b'0'));
    (a < 10 && b < 10).then(|| u32::from(a) * 10 + u32::from(b))
}

/// `YYYY-MM-DD` naming a day that exists, in years 1 to 9999.
fn plain_date(&[y0, y1, y2, y3, dash1, m0, m1, dash2, d0, d1]: &[u8; DATE_LEN]) -> bool {
    let (Some(century), Some(year), Some(month), Some(day)) =
        (two(y0, y1), two(y2, y3), two(m0, m1), two(d0, d1))
    else {
        return false;
    };
    let year = i64::from(century * 100 + year);
    dash1 == b'-'
        && dash2 == b'-'
        && year >= 1
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
}

/// `HH:MM:SS` from 00:00:00 to 23:59:59.
fn plain_time(&[h0, h1, colon1, m0, m1, colon2, s0, s1]: &[u8; 8]) -> bool {
    let (Some(hour), Some(minute), Some(second)) = (two(h0, h1), two(m0, m1), two(s0, s1)) else {
        return false;
    };
    colon1 == b':' && colon2 == b':' && hour <= 23 && minute <= 59 && second <= 59
}

/// Nothing, or `.` and 1 to 6 digits.
fn plain_fraction(frac: &[u8]) -> bool {
    match frac.split_first() {
        None => true,
        Some((b'.', digits)) => {
            (1..=6).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit)
        }
        Some(_) => false,
    }
}

fn write_date(date: Ymd, out: &mut Vec<u8>) {
    // The caller checked 1 <= year <= 9999.
    let [y0, y1, y2, y3] = four_digits(date.year as u32);
    let [m0, m1] = two_digits(date.month);
    let [d0, d1] = two_digits(date.day);
    out.extend_from_slice(&[y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1]);
}

fn write_time(time: &Hms<'_>, out: &mut Vec<u8>) {
    let [h0, h1] = two_digits(time.hour);
    let [m0, m1] = two_digits(time.minute);
    let [s0, s1] = two_digits(time.second);
    out.extend_from_slice(&[h0, h1, b':', m0, m1, b':', s0, s1]);
    if !time.frac.is_empty() {
        out.push(b'.');
        out.extend_from_slice(time.frac);
    }
}

/// Moves a local wall time `offset_s` seconds east of UTC to UTC.
fn shift(date: &mut Ymd, time: &mut Hms<'_>, offset_s: i64) {
    let second_of_day =
        i64::from(time.hour) * 3600 + i64::from(time.minute) * 60 + i64::from(time.second);
    let utc = second_of_day - offset_s;
    let day_delta = utc.div_euclid(SECONDS_PER_DAY);
    let rest = utc.rem_euclid(SECONDS_PER_DAY);
    // 0 <= rest < 86400, so each part fits u32.
    time.hour = (rest / 3600) as u32;
    time.minute = (rest / 60 % 60) as u32;
    time.second = (rest % 60) as u32;
    if day_delta != 0 {
        *date = civil_from_days(days_from_civil(*date) + day_delta);
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's era arithmetic: a 400-year
/// era has exactly 146097 days, and counting from March puts the leap day last).
fn days_from_civil(date: Ymd) -> i64 {
    let year = if date.month <= 2 {
        date.year - 1
    } else {
        date.year
    };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = i64::from((date.month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(date.day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> Ymd {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    // Ranges: day_of_year 0..=365, month_from_march 0..=11, so the casts are exact.
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    Ymd { year, month, day }
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A position in the value's text; every read is checked.
struct Cursor<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn error(&self, expected: &'static str) -> ValueErrorKind {
        ValueErrorKind::malformed(self.text, self.pos, expected)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8, expected: &'static str) -> Result<(), ValueErrorKind> {
        if self.peek() != Some(byte) {
            return Err(self.error(expected));
        }
        self.pos += 1;
        Ok(())
    }

    /// Reads between `min` and `max` ASCII digits as a number.
    fn digits(
        &mut self,
        min: usize,
        max: usize,
        expected: &'static str,
    ) -> Result<u32, ValueErrorKind> {
        let mut value: u32 = 0;
        let mut count = 0;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            if count == max {
                return Err(self.error(expected));
            }
            value = value * 10 + u32::from(b - b'0');
            count += 1;
            self.pos += 1;
        }
        if count < min {
            return Err(self.error(expected));
        }
        Ok(value)
    }

    /// Years have at least 4 digits; 7 covers PostgreSQL's largest date (5874897 AD).
    fn date(&mut self) -> Result<Ymd, ValueErrorKind> {
        let year = self.digits(4, 7, DATE_EXPECTED)?;
        self.expect(b'-', DATE_EXPECTED)?;
        let month_at = self.pos;
        let month = self.digits(2, 2, DATE_EXPECTED)?;
        self.expect(b'-', DATE_EXPECTED)?;
        let day = self.digits(2, 2, DATE_EXPECTED)?;
        let year = i64::from(year);
        if !(1..=12).contains(&month) {
            return Err(ValueErrorKind::malformed(
                self.text,
                month_at,
                "a month 01-12",
            ));
        }
        if day == 0 || day > days_in_month(year, month) {
            return Err(ValueErrorKind::malformed(
                self.text,
                month_at + 3,
                "a day that exists in that month",
            ));
        }
        Ok(Ymd { year, month, day })
    }

    /// `HH:MM:SS[.f{1,6}]`; hour 24 only as `24:00:00` and only where `allow_24` (type `time`).
    fn time(&mut self, allow_24: bool) -> Result<Hms<'a>, ValueErrorKind> {
        let start = self.pos;
        let hour = self.digits(2, 2, TIME_EXPECTED)?;
        self.expect(b':', TIME_EXPECTED)?;
        let minute = self.digits(2, 2, TIME_EXPECTED)?;
        self.expect(b':', TIME_EXPECTED)?;
        let second = self.digits(2, 2, TIME_EXPECTED)?;
        let mut frac: &[u8] = &[];
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let from = self.pos;
            self.digits(1, 6, TIME_EXPECTED)?;
            frac = self.text.get(from..self.pos).unwrap_or_default();
        }
        let midnight_24 =
            hour == 24 && minute == 0 && second == 0 && frac.iter().all(|&b| b == b'0');
        if (hour > 23 && !(allow_24 && midnight_24)) || minute > 59 || second > 59 {
            return Err(ValueErrorKind::malformed(
                self.text,
                start,
                "a time of day 00:00:00-23:59:59 (24:00:00 only for type time)",
            ));
        }
        Ok(Hms {
            hour,
            minute,
            second,
            frac,
        })
    }

    /// `+HH[:MM[:SS]]` in seconds east of UTC.
    fn offset(&mut self) -> Result<i64, ValueErrorKind> {
        let sign = match self.peek() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return Err(self.error(OFFSET_EXPECTED)),
        };
        self.pos += 1;
        let mut seconds = i64::from(self.digits(2, 2, OFFSET_EXPECTED)?) * 3600;
        for unit in [60, 1] {
            if self.peek() != Some(b':') {
                break;
            }
            self.pos += 1;
            let part = self.digits(2, 2, OFFSET_EXPECTED)?;
            if part > 59 {
                return Err(self.error(OFFSET_EXPECTED));
            }
            seconds += i64::from(part) * unit;
        }
        Ok(sign * seconds)
    }

    /// The end of the text, after an optional ` BC` where `bc_allowed`; says whether it was BC.
    fn end(&mut self, bc_allowed: bool) -> Result<bool, ValueErrorKind> {
        let rest = self.text.get(self.pos..).unwrap_or_default();
        match rest {
            b"" => Ok(false),
            b" BC" if bc_allowed => Ok(true),
            _ => Err(self.error(END_EXPECTED)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [Temporal; 4] = [
        Temporal::Date,
        Temporal::Timestamp,
        Temporal::TimestampTz { rfc3339: false },
        Temporal::TimestampTz { rfc3339: true },
    ];

    /// What the general parse writes, or None where it writes nothing usable by the copy.
    fn parsed(kind: Temporal, text: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        match write_parsed(kind, text, &mut out) {
            Ok(Outcome::Written) => Some(out),
            _ => None,
        }
    }

    proptest! {
        /// Whenever the fixed-position copy takes a text, it writes byte for byte what the
        /// general parse writes; and it takes every plain in-range UTC text.
        #[test]
        fn the_plain_copy_writes_what_the_parse_writes(
            text in "[0-9]{4}-(0[0-9]|1[0-3])-([0-2][0-9]|3[0-2])( ([01][0-9]|2[0-5]):[0-6][0-9]:[0-6][0-9](\\.[0-9]{0,7})?(\\+00|-00|\\+01|\\+00:00)?)?( BC)?",
            mutate in proptest::option::of((0usize..32, any::<u8>())),
        ) {
            let mut text = text.into_bytes();
            if let Some((at, byte)) = mutate {
                if let Some(b) = text.get_mut(at) {
                    *b = byte;
                }
            }
            for kind in KINDS {
                let mut fast = Vec::new();
                if copy_plain(kind, &text, &mut fast) {
                    prop_assert_eq!(Some(fast), parsed(kind, &text), "{:?} {:?}", kind, String::from_utf8_lossy(&text));
                } else {
                    prop_assert!(fast.is_empty());
                }
            }
        }

        #[test]
        fn plain_utc_texts_take_the_copy(
            year in 1u32..=9999, month in 1u32..=12, day in 1u32..=28, hour in 0u32..24,
            minute in 0u32..60, second in 0u32..60, frac in "(\\.[0-9]{1,6})?",
        ) {
            let date = format!("{year:04}-{month:02}-{day:02}");
            let stamp = format!("{date} {hour:02}:{minute:02}:{second:02}{frac}");
            prop_assert!(copy_plain(Temporal::Date, date.as_bytes(), &mut Vec::new()));
            prop_assert!(copy_plain(Temporal::Timestamp, stamp.as_bytes(), &mut Vec::new()));
            let utc = format!("{stamp}+00");
            let tz = Temporal::TimestampTz { rfc3339: true };
            prop_assert!(copy_plain(tz, utc.as_bytes(), &mut Vec::new()));
        }
    }

    #[test]
    fn the_plain_copy_declines_what_it_cannot_prove() {
        for (kind, text) in [
            (Temporal::Date, "0000-01-01"),
            (Temporal::Date, "2023-02-29"),
            (Temporal::Date, "2024-13-01"),
            (Temporal::Date, "2024-01-01 BC"),
            (Temporal::Date, "10000-01-01"),
            (Temporal::Timestamp, "2024-01-01 24:00:00"),
            (Temporal::Timestamp, "2024-01-01 12:00:00."),
            (Temporal::Timestamp, "2024-01-01 12:00:00.1234567"),
            (
                Temporal::TimestampTz { rfc3339: true },
                "2024-01-01 12:00:00+01",
            ),
            (
                Temporal::TimestampTz { rfc3339: true },
                "2024-01-01 12:00:00",
            ),
            (
                Temporal::TimestampTz { rfc3339: false },
                "2024-01-01 12:00:00+00:00",
            ),
            (Temporal::Time, "12:00:00"),
        ] {
            let mut out = Vec::new();
            assert!(
                !copy_plain(kind, text.as_bytes(), &mut out),
                "{kind:?} {text}"
            );
            assert!(out.is_empty());
        }
    }

    #[test]
    fn day_numbers_round_trip_and_match_known_dates() {
        let ymd = |year, month, day| Ymd { year, month, day };
        assert_eq!(days_from_civil(ymd(1970, 1, 1)), 0);
        assert_eq!(days_from_civil(ymd(2000, 3, 1)), 11_017);
        assert_eq!(days_from_civil(ymd(1, 1, 1)), -719_162);
        for days in (-3_000_000..3_000_000).step_by(997) {
            assert_eq!(days_from_civil(civil_from_days(days)), days);
        }
        assert_eq!(civil_from_days(11_016), ymd(2000, 2, 29));
    }
}
