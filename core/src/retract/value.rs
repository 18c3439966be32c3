//! One key column's values: read from Feldera's ad-hoc query answer or from slotline's own
//! ingress JSON, ordered as Feldera's query engine orders them, and written back in the
//! ingress encoding a delete event needs.
//!
//! Owns the per-type encodings (docs/retraction.md lists them): the query answer prints
//! timestamps with `T` and a `Z`, fractions in groups of 3, 6 or 9 digits, binary as a hex
//! string; the key scan casts DECIMAL keys to text so no JSON number parser can round
//! them. The ingress form is byte for byte what `value::ValuePlan` writes when PostgreSQL's
//! text is already canonical. Never sees SQL, rows or PostgreSQL.

use crate::schema::{ColumnType, SqlType};
use serde_json::Value as Json;
use std::fmt::Write as _;

/// Feldera's largest DECIMAL precision; an `i128` holds every such value.
pub const MAX_DECIMAL_PRECISION: u32 = 38;

/// How one key column's values are read and written, chosen from its Feldera type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    /// VARCHAR and CHAR: the string exactly as stored (Feldera neither pads nor trims on
    /// input).
    Text,
    Uuid,
    Decimal {
        precision: u32,
        scale: u32,
    },
    /// BINARY and VARBINARY.
    Binary,
    Date,
    /// Nanoseconds, as Feldera's TIME holds them.
    Time,
    /// Microseconds, wall time.
    Timestamp,
    /// Microseconds, UTC.
    TimestampTz,
}

impl KeyKind {
    /// The kind for a Feldera key column type, or why its values cannot be carried exactly
    /// from a query answer to a delete event.
    pub fn of(ty: &ColumnType) -> Result<KeyKind, String> {
        let int = |min: i64, max: i64| Ok(KeyKind::Int { min, max });
        match ty.sql {
            SqlType::TinyInt => int(i8::MIN.into(), i8::MAX.into()),
            SqlType::SmallInt => int(i16::MIN.into(), i16::MAX.into()),
            SqlType::Integer => int(i32::MIN.into(), i32::MAX.into()),
            SqlType::BigInt => int(i64::MIN, i64::MAX),
            SqlType::Boolean => Ok(KeyKind::Bool),
            SqlType::Char | SqlType::Varchar => Ok(KeyKind::Text),
            SqlType::Uuid => Ok(KeyKind::Uuid),
            SqlType::Binary | SqlType::Varbinary => Ok(KeyKind::Binary),
            SqlType::Date => Ok(KeyKind::Date),
            SqlType::Time => Ok(KeyKind::Time),
            SqlType::Timestamp => Ok(KeyKind::Timestamp),
            SqlType::TimestampTz => Ok(KeyKind::TimestampTz),
            SqlType::Decimal => decimal_kind(ty),
            SqlType::Real | SqlType::Double => Err(
                "floating-point keys are refused: the query answer prints them as JSON numbers, \
                 and a round trip through text and back is not proven exact (nor is -0 vs 0)"
                    .into(),
            ),
            SqlType::Variant | SqlType::Array | SqlType::Map | SqlType::Struct => Err(format!(
                "{} keys have no comparison slotline can page through",
                ty.sql
            )),
        }
    }
}

fn decimal_kind(ty: &ColumnType) -> Result<KeyKind, String> {
    let (Some(precision), Some(scale)) = (ty.precision, ty.scale) else {
        return Err("the schema gives this DECIMAL no precision and scale".into());
    };
    match (u32::try_from(precision), u32::try_from(scale)) {
        (Ok(p), Ok(s)) if (1..=MAX_DECIMAL_PRECISION).contains(&p) && s <= p => {
            Ok(KeyKind::Decimal {
                precision: p,
                scale: s,
            })
        }
        _ => Err(format!(
            "DECIMAL({precision}, {scale}) is outside Feldera's DECIMAL(1..=38, 0..=p)"
        )),
    }
}

/// A calendar date in Feldera's range (years 1 to 9999); field order makes `Ord`
/// chronological.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ymd {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

/// One key column's value. All values of a column have the variant its [`KeyKind`]
/// chooses, so the derived order is the query engine's ascending order for that type:
/// integers, booleans (false first), strings and bytes bytewise, decimals by value
/// (`Decimal` is the unscaled integer at the column's scale), dates and times in time.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyValue {
    Int(i64),
    Bool(bool),
    /// Text and UUID (lowercase, as Feldera prints it).
    Text(String),
    Decimal(i128),
    Binary(Vec<u8>),
    Date(Ymd),
    /// Nanoseconds since midnight.
    Time(u64),
    /// Date and nanoseconds since midnight (always whole microseconds).
    Timestamp(Ymd, u64),
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

impl KeyKind {
    /// Reads a value from the ad-hoc query answer of the key scan. `null` is refused: a
    /// primary key column is NOT NULL.
    pub fn from_query(self, json: &Json) -> Result<KeyValue, String> {
        match (self, json) {
            (_, Json::Null) => Err("NULL in a primary key column".into()),
            (KeyKind::Decimal { .. }, Json::Number(n)) => Err(format!(
                "DECIMAL key {n} arrived as a JSON number, which may have lost digits; \
                 accepted: its text (the key scan casts DECIMAL keys to VARCHAR)"
            )),
            (KeyKind::Binary, Json::String(hex)) => parse_hex(hex).map(KeyValue::Binary),
            (KeyKind::Binary, _) => Err(expected("a hex string", json)),
            (KeyKind::Timestamp, Json::String(text)) => {
                parse_timestamp(text, &['T', ' '], &[""]).map(|(d, t)| KeyValue::Timestamp(d, t))
            }
            (KeyKind::TimestampTz, Json::String(text)) => {
                parse_timestamp(text, &['T'], &["Z", "+00:00"])
                    .map(|(d, t)| KeyValue::Timestamp(d, t))
            }
            _ => self.common(json),
        }
    }

    /// Reads a value from slotline's ingress JSON (what `ValuePlan::write_json` wrote for a
    /// PostgreSQL value), to compare it with a value read from Feldera.
    pub fn from_ingress(self, json: &Json) -> Result<KeyValue, String> {
        match (self, json) {
            (_, Json::Null) => Err("NULL in a primary key column".into()),
            (KeyKind::Binary, Json::Array(items)) => items
                .iter()
                .map(|b| {
                    b.as_u64()
                        .and_then(|n| u8::try_from(n).ok())
                        .ok_or_else(|| expected("a byte 0..=255", b))
                })
                .collect::<Result<Vec<u8>, String>>()
                .map(KeyValue::Binary),
            (KeyKind::Binary, _) => Err(expected("an array of bytes", json)),
            (KeyKind::Timestamp, Json::String(text)) => {
                parse_timestamp(text, &[' '], &[""]).map(|(d, t)| KeyValue::Timestamp(d, t))
            }
            (KeyKind::TimestampTz, Json::String(text)) => {
                parse_timestamp(text, &['T'], &["+00:00"]).map(|(d, t)| KeyValue::Timestamp(d, t))
            }
            _ => self.common(json),
        }
    }

    /// The types both forms spell alike.
    fn common(self, json: &Json) -> Result<KeyValue, String> {
        match self {
            KeyKind::Int { min, max } => match json.as_i64() {
                Some(n) if (min..=max).contains(&n) => Ok(KeyValue::Int(n)),
                Some(n) => Err(format!("{n} is outside {min}..={max}")),
                None => Err(expected("an integer", json)),
            },
            KeyKind::Bool => json
                .as_bool()
                .map(KeyValue::Bool)
                .ok_or_else(|| expected("true or false", json)),
            KeyKind::Text => string(json).map(|s| KeyValue::Text(s.to_owned())),
            KeyKind::Uuid => parse_uuid(string(json)?).map(KeyValue::Text),
            KeyKind::Decimal { precision, scale } => {
                parse_decimal(string(json)?, precision, scale).map(KeyValue::Decimal)
            }
            KeyKind::Date => parse_date(string(json)?).map(KeyValue::Date),
            KeyKind::Time => parse_time(string(json)?).map(KeyValue::Time),
            KeyKind::Binary | KeyKind::Timestamp | KeyKind::TimestampTz => {
                Err(expected("a value of this column's type", json))
            }
        }
    }

    /// Appends the value in slotline's ingress encoding (the JSON an insert of the same
    /// PostgreSQL value carried).
    pub fn write_ingress(self, value: &KeyValue, out: &mut Vec<u8>) {
        match value {
            KeyValue::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
            KeyValue::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            KeyValue::Text(s) => write_json_string(s, out),
            KeyValue::Decimal(unscaled) => {
                write_json_string(&decimal_text(*unscaled, self.scale()), out)
            }
            KeyValue::Binary(bytes) => {
                out.push(b'[');
                for (i, b) in bytes.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b.to_string().as_bytes());
                }
                out.push(b']');
            }
            KeyValue::Date(d) => write_json_string(&date_text(*d), out),
            KeyValue::Time(t) => write_json_string(&time_text(*t), out),
            KeyValue::Timestamp(d, t) => {
                let text = if self == KeyKind::TimestampTz {
                    format!("{}T{}+00:00", date_text(*d), time_text(*t))
                } else {
                    format!("{} {}", date_text(*d), time_text(*t))
                };
                write_json_string(&text, out);
            }
        }
    }

    /// DECIMAL scale (0 for every other kind).
    pub fn scale(self) -> u32 {
        match self {
            KeyKind::Decimal { scale, .. } => scale,
            _ => 0,
        }
    }
}

fn expected(what: &str, json: &Json) -> String {
    let mut shown = json.to_string();
    if shown.len() > 60 {
        let cut = (0..=60)
            .rev()
            .find(|i| shown.is_char_boundary(*i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push('…');
    }
    format!("expected {what}, found {shown}")
}

fn string(json: &Json) -> Result<&str, String> {
    json.as_str().ok_or_else(|| expected("a string", json))
}

/// JSON string escaping as slotline's value encoder writes it: `"` and `\` escaped, the
/// control characters below U+0020 as `\n`-style or `\u00xx` escapes, everything else raw.
pub(crate) fn write_json_string(s: &str, out: &mut Vec<u8>) {
    // serde_json writes exactly that set of escapes, with lowercase hex.
    out.extend_from_slice(Json::String(s.to_owned()).to_string().as_bytes());
}

fn parse_uuid(text: &str) -> Result<String, String> {
    let ok = text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if ok {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(format!(
            "`{}` is not a UUID (8-4-4-4-12 hex digits)",
            excerpt(text)
        ))
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    if text.len() % 2 != 0 {
        return Err(format!("`{}` is not hex bytes (odd length)", excerpt(text)));
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => Err(format!("`{}` is not hex bytes", excerpt(text))),
        })
        .collect()
}

/// `[-]digits[.digits]` at exactly `scale` (fewer fraction digits are padded), fitting
/// DECIMAL(precision, scale).
fn parse_decimal(text: &str, precision: u32, scale: u32) -> Result<i128, String> {
    let bad = || {
        format!(
            "`{}` is not a DECIMAL({precision}, {scale}) value ([-]digits[.digits])",
            excerpt(text)
        )
    };
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits_only(int) || !digits_only(frac) || body.ends_with('.') {
        return Err(bad());
    }
    let int = int.trim_start_matches('0');
    if frac.len() > scale as usize || int.len() > (precision - scale) as usize {
        return Err(bad());
    }
    let mut unscaled: i128 = 0;
    let padding = scale as usize - frac.len();
    for b in int
        .bytes()
        .chain(frac.bytes())
        .chain("0".repeat(padding).bytes())
    {
        // At most 38 digits: never overflows.
        unscaled = unscaled * 10 + i128::from(b - b'0');
    }
    Ok(if negative { -unscaled } else { unscaled })
}

/// Decimal text with exactly `scale` fraction digits, as the query engine prints it.
pub(crate) fn decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Exactly `len` ASCII digits at the start of `text`, as a number.
fn fixed_digits(text: &str, len: usize) -> Option<u32> {
    let part = text.get(..len)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// `YYYY-MM-DD` with a four-digit year 0001-9999 and a day that exists.
fn parse_date(text: &str) -> Result<Ymd, String> {
    let bad = || {
        format!(
            "`{}` is not a date YYYY-MM-DD in years 1-9999",
            excerpt(text)
        )
    };
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let (Some(year), Some(month), Some(day)) = (
        fixed_digits(text, 4),
        text.get(5..).and_then(|t| fixed_digits(t, 2)),
        text.get(8..).and_then(|t| fixed_digits(t, 2)),
    ) else {
        return Err(bad());
    };
    let (year, month, day) = (year as u16, month as u8, day as u8);
    if year == 0 || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad());
    }
    Ok(Ymd { year, month, day })
}

/// `HH:MM:SS` with an optional fraction of 1 to 9 digits, as nanoseconds since midnight.
fn parse_time(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{}` is not a time HH:MM:SS[.fraction of up to 9 digits]",
            excerpt(text)
        )
    };
    let (hms, frac) = text.split_once('.').unwrap_or((text, ""));
    let b = hms.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' || (text.contains('.') && frac.is_empty()) {
        return Err(bad());
    }
    let (Some(h), Some(m), Some(s)) = (
        fixed_digits(hms, 2),
        hms.get(3..).and_then(|t| fixed_digits(t, 2)),
        hms.get(6..).and_then(|t| fixed_digits(t, 2)),
    ) else {
        return Err(bad());
    };
    if h > 23 || m > 59 || s > 59 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let frac_nanos = if frac.is_empty() {
        0
    } else {
        let value: u64 = frac.parse().map_err(|_| bad())?;
        value * 10u64.pow(9 - frac.len() as u32)
    };
    Ok((u64::from(h) * 3600 + u64::from(m) * 60 + u64::from(s)) * NANOS_PER_SECOND + frac_nanos)
}

/// A date and time separated by one of `separators`, ending with one of `suffixes`, in
/// whole microseconds (Feldera's TIMESTAMP resolution).
fn parse_timestamp(
    text: &str,
    separators: &[char],
    suffixes: &[&str],
) -> Result<(Ymd, u64), String> {
    let bad = || {
        format!(
            "`{}` is not a timestamp YYYY-MM-DD{}HH:MM:SS[.fraction]{}",
            excerpt(text),
            separators.first().copied().unwrap_or(' '),
            suffixes.first().copied().unwrap_or("")
        )
    };
    let stripped = suffixes
        .iter()
        .filter(|suffix| !suffix.is_empty())
        .find_map(|suffix| text.strip_suffix(suffix));
    let body = match stripped {
        Some(body) => body,
        None if suffixes.contains(&"") => text,
        None => return Err(bad()),
    };
    let separator = body.as_bytes().get(10).map(|b| char::from(*b));
    if !separator.is_some_and(|c| separators.contains(&c)) {
        return Err(bad());
    }
    let date = parse_date(body.get(..10).ok_or_else(bad)?)?;
    let time = parse_time(body.get(11..).ok_or_else(bad)?)?;
    if time % 1_000 != 0 {
        return Err(format!(
            "`{}` is finer than the microseconds a Feldera timestamp holds",
            excerpt(text)
        ));
    }
    Ok((date, time))
}

pub(crate) fn date_text(d: Ymd) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

/// `HH:MM:SS` and, when not zero, the fraction without trailing zeros (PostgreSQL's form).
pub(crate) fn time_text(nanos: u64) -> String {
    let seconds = nanos / NANOS_PER_SECOND;
    let frac = nanos % NANOS_PER_SECOND;
    let mut text = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        let _ = write!(text, ".{}", digits.trim_end_matches('0'));
    }
    text
}

/// A bounded, char-safe prefix of a value for messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    if text.chars().count() <= MAX_CHARS {
        return text.escape_debug().to_string();
    }
    let head: String = text.chars().take(MAX_CHARS).collect();
    format!("{}…", head.escape_debug())
}

#[cfg(test)]
#[path = "value_tests.rs"]
mod tests;
