//! Typed SQL values held in the double's tables, and their two JSON encodings: the ingress
//! form (what a client sends, used for inspection) and Feldera's ad-hoc query form
//! (timestamps with `T` and fractions of 3, 6 or 9 digits, TIMESTAMP_TZ in UTC with `Z`,
//! binary as hex, decimals as numbers with their scale digits), plus the text a
//! `CAST(.. AS VARCHAR)` gives.
//!
//! Owns: the value model and its printing. Never parses client JSON (see `convert`).

use std::cmp::Ordering;

use serde_json::Value as Json;

use super::schema::{ColumnType, TypeKind};
use super::temporal::{
    format_date, format_time, format_time_query, format_timestamp, format_timestamp_query,
    format_timestamp_tz, format_timestamp_tz_query, Date, Time,
};

/// A value of some column type. Ordered so rows can key `BTreeMap`s deterministically.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(Float),
    Decimal(Decimal),
    Str(String),
    Bytes(Vec<u8>),
    Date(Date),
    Time(Time),
    Timestamp(Date, Time),
    /// TIMESTAMP_TZ as its UTC date and time.
    TimestampTz(Date, Time),
    /// Lowercase canonical text.
    Uuid(String),
    /// Canonical JSON text (object keys sorted).
    Variant(String),
    Array(Vec<Value>),
    /// Entries sorted by key, keys unique.
    Map(Vec<(Value, Value)>),
    Struct(Vec<Value>),
}

/// An `f64` with a total order, so rows holding floats can be compared and deduplicated.
#[derive(Debug, Clone, Copy)]
pub struct Float(pub f64);

impl PartialEq for Float {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for Float {}
impl PartialOrd for Float {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Float {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// An exact decimal, always held at its column's scale so equal values compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Decimal {
    pub unscaled: i128,
    pub scale: u32,
}

impl Decimal {
    /// Plain decimal text with exactly `scale` fraction digits (`-12.50`).
    pub fn to_text(self) -> String {
        let digits = self.unscaled.unsigned_abs().to_string();
        let sign = if self.unscaled < 0 { "-" } else { "" };
        let scale = self.scale as usize;
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{sign}{int}.{frac}")
    }
}

/// Ingress-form JSON: what a client would send for this value. Used by inspection so test
/// oracles compare against the rows they mean to deliver.
pub fn to_ingress_json(v: &Value, ct: &ColumnType) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => float_json(f.0, ct),
        Value::Decimal(d) => Json::String(d.to_text()),
        Value::Str(s) | Value::Uuid(s) => Json::String(s.clone()),
        Value::TimestampTz(d, t) => Json::String(format_timestamp_tz(d, t)),
        Value::Bytes(b) => Json::Array(b.iter().map(|x| Json::from(*x)).collect()),
        Value::Date(d) => Json::String(format_date(d)),
        Value::Time(t) => Json::String(format_time(t)),
        Value::Timestamp(d, t) => Json::String(format_timestamp(d, t, ' ')),
        Value::Variant(text) => serde_json::from_str(text).unwrap_or(Json::Null),
        Value::Array(items) => Json::Array(
            items
                .iter()
                .map(|x| to_ingress_json(x, sub(ct.component.as_deref(), ct)))
                .collect(),
        ),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, x)| {
                    (
                        map_key_text(k),
                        to_ingress_json(x, sub(ct.value.as_deref(), ct)),
                    )
                })
                .collect(),
        ),
        Value::Struct(members) => Json::Object(
            ct.fields
                .iter()
                .zip(members)
                .map(|(f, x)| (f.name.clone(), to_ingress_json(x, &f.columntype)))
                .collect(),
        ),
    }
}

/// Ad-hoc query JSON text for this value, in Feldera's query encoding. Returned as text
/// because decimals must keep their scale digits (`12.50`), which `serde_json::Number`
/// cannot carry.
pub fn to_query_json(v: &Value, ct: &ColumnType) -> String {
    match v {
        Value::Decimal(d) => d.to_text(),
        Value::Bytes(b) => Json::String(b.iter().map(|x| format!("{x:02x}")).collect()).to_string(),
        Value::Time(t) => Json::String(format_time_query(t)).to_string(),
        Value::Timestamp(d, t) => Json::String(format_timestamp_query(d, t)).to_string(),
        Value::TimestampTz(d, t) => Json::String(format_timestamp_tz_query(d, t)).to_string(),
        // Arrow has no VARIANT type: the value travels as its JSON text in a string.
        Value::Variant(text) => Json::String(text.clone()).to_string(),
        Value::Array(items) => {
            let inner: Vec<String> = items
                .iter()
                .map(|x| to_query_json(x, sub(ct.component.as_deref(), ct)))
                .collect();
            format!("[{}]", inner.join(","))
        }
        Value::Map(entries) => {
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, x)| {
                    let key = Json::String(map_key_text(k)).to_string();
                    format!("{key}:{}", to_query_json(x, sub(ct.value.as_deref(), ct)))
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Struct(members) => {
            let inner: Vec<String> = ct
                .fields
                .iter()
                .zip(members)
                .map(|(f, x)| {
                    let key = Json::String(f.name.clone()).to_string();
                    format!("{key}:{}", to_query_json(x, &f.columntype))
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        other => to_ingress_json(other, ct).to_string(),
    }
}

/// The text `CAST(value AS VARCHAR)` gives in an ad-hoc query: what the query encoding
/// prints, without JSON quotes. `None` for NULL; an error for values the double does not
/// cast (binary, floats and structured values).
pub fn to_query_text(v: &Value, ct: &ColumnType) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Bytes(_) | Value::Float(_) => Err(
            "the double casts only integer, boolean, decimal, text and date-time columns to VARCHAR"
                .to_owned(),
        ),
        Value::Variant(_) | Value::Array(_) | Value::Map(_) | Value::Struct(_) => Err(
            "the double casts only integer, boolean, decimal, text and date-time columns to VARCHAR"
                .to_owned(),
        ),
        other => Ok(Some(match serde_json::from_str(&to_query_json(other, ct)) {
            Ok(Json::String(s)) => s,
            _ => to_query_json(other, ct),
        })),
    }
}

/// JSON object keys are strings: string keys stay as they are, other keys print as their
/// ingress JSON text.
fn map_key_text(k: &Value) -> String {
    match k {
        Value::Str(s) => s.clone(),
        other => match to_ingress_json(other, &ColumnType::varchar()) {
            Json::String(s) => s,
            j => j.to_string(),
        },
    }
}

fn float_json(f: f64, ct: &ColumnType) -> Json {
    // REAL values are held widened; print them through f32 so 0.1 stays 0.1.
    let shown = if ct.kind == TypeKind::Real {
        (f as f32).to_string().parse::<f64>().unwrap_or(f)
    } else {
        f
    };
    serde_json::Number::from_f64(shown)
        .map(Json::Number)
        .unwrap_or_else(|| Json::String(format!("{f}")))
}

fn sub<'a>(inner: Option<&'a ColumnType>, outer: &'a ColumnType) -> &'a ColumnType {
    inner.unwrap_or(outer)
}

impl ColumnType {
    /// A nullable VARCHAR: the type used to print map keys.
    pub fn varchar() -> ColumnType {
        ColumnType {
            kind: TypeKind::Varchar,
            nullable: true,
            precision: None,
            scale: None,
            component: None,
            key: None,
            value: None,
            fields: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::temporal::parse_timestamp_tz;
    use super::*;

    #[test]
    fn decimal_text_keeps_scale_digits_and_sign() {
        let d = |unscaled, scale| Decimal { unscaled, scale }.to_text();
        assert_eq!(d(1250, 2), "12.50");
        assert_eq!(d(-5, 2), "-0.05");
        assert_eq!(d(7, 0), "7");
    }

    #[test]
    fn query_encoding_uses_hex_for_binary_and_t_for_timestamps() {
        let ct = ColumnType::varchar();
        assert_eq!(
            to_query_json(&Value::Bytes(vec![0, 171, 16]), &ct),
            "\"00ab10\""
        );
        let d = Date {
            year: 2024,
            month: 1,
            day: 2,
        };
        let t = Time {
            hour: 3,
            minute: 4,
            second: 5,
            nanos: 0,
        };
        assert_eq!(
            to_query_json(&Value::Timestamp(d, t), &ct),
            "\"2024-01-02T03:04:05\""
        );
        assert_eq!(to_query_json(&Value::Null, &ct), "null");
        let t = Time {
            nanos: 120_000_000,
            ..t
        };
        assert_eq!(
            to_query_json(&Value::Timestamp(d, t), &ct),
            "\"2024-01-02T03:04:05.120\"",
            "fractions in groups of three digits"
        );
        assert_eq!(to_query_json(&Value::Time(t), &ct), "\"03:04:05.120\"");
        assert_eq!(
            to_query_json(
                &{
                    let (d, t) = parse_timestamp_tz("2024-01-02T05:04:05.5+02:00").unwrap();
                    Value::TimestampTz(d, t)
                },
                &ct
            ),
            "\"2024-01-02T03:04:05.500Z\""
        );
    }

    #[test]
    fn cast_to_varchar_gives_the_query_text_unquoted() {
        let ct = ColumnType::varchar();
        let text = |v: Value| to_query_text(&v, &ct);
        let d = Decimal {
            unscaled: -5,
            scale: 2,
        };
        assert_eq!(text(Value::Decimal(d)), Ok(Some("-0.05".to_owned())));
        assert_eq!(text(Value::Int(7)), Ok(Some("7".to_owned())));
        assert_eq!(text(Value::Str("a'b".into())), Ok(Some("a'b".to_owned())));
        assert_eq!(text(Value::Null), Ok(None));
        assert!(text(Value::Bytes(vec![1])).is_err());
    }
}
