//! Client JSON → typed values, with Feldera's ingress validation: a value must parse into
//! its column type (integers in range, decimals as strings or numbers, timestamps as
//! `YYYY-MM-DD HH:MM:SS[.f]`, binary as byte arrays, ...), and NULL only where nullable.
//!
//! Owns: one value at a time and struct members. Never decides which columns a row needs
//! (see `row`). Deliberate choices: decimals with more fraction digits than the scale are
//! rounded half away from zero (SQL cast semantics); CHAR/VARCHAR lengths are not checked.

use serde_json::{Map, Value as Json};

use super::schema::{ColumnType, Field, TypeKind};
use super::temporal::{parse_date, parse_time, parse_timestamp, parse_timestamp_tz};
use super::value::{Decimal, Float, Value};

/// Decimal precision used when a schema leaves it out (Feldera's maximum).
const DEFAULT_DECIMAL_PRECISION: i64 = 38;

/// Parses one JSON value into `ct`. The error says what was found and what is accepted.
pub fn parse_value(ct: &ColumnType, j: &Json) -> Result<Value, String> {
    // JSON null in a NOT NULL VARIANT is the VARIANT null; in a nullable one it is SQL NULL.
    if j.is_null() && ct.kind == TypeKind::Variant && !ct.nullable {
        return Ok(Value::Variant("null".to_string()));
    }
    if j.is_null() {
        return if ct.nullable {
            Ok(Value::Null)
        } else {
            Err("null in a NOT NULL column".to_string())
        };
    }
    match ct.kind {
        TypeKind::Boolean => j
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| expected("a boolean", j)),
        TypeKind::TinyInt => int(j, i8::MIN.into(), i8::MAX.into(), "TINYINT"),
        TypeKind::SmallInt => int(j, i16::MIN.into(), i16::MAX.into(), "SMALLINT"),
        TypeKind::Integer => int(j, i32::MIN.into(), i32::MAX.into(), "INTEGER"),
        TypeKind::BigInt => int(j, i64::MIN, i64::MAX, "BIGINT"),
        TypeKind::Real | TypeKind::Double => float(j, ct.kind),
        TypeKind::Decimal => decimal(j, ct),
        TypeKind::Char | TypeKind::Varchar => text(j).map(|s| Value::Str(s.to_string())),
        TypeKind::Binary | TypeKind::Varbinary => bytes(j),
        TypeKind::Date => parse_date(text(j)?).map(Value::Date),
        TypeKind::Time => parse_time(text(j)?).map(Value::Time),
        TypeKind::Timestamp => parse_timestamp(text(j)?).map(|(d, t)| Value::Timestamp(d, t)),
        TypeKind::TimestampTz => {
            parse_timestamp_tz(text(j)?).map(|(d, t)| Value::TimestampTz(d, t))
        }
        TypeKind::Uuid => uuid(text(j)?),
        TypeKind::Variant => Ok(Value::Variant(j.to_string())),
        TypeKind::Array => array(j, ct),
        TypeKind::Map => map(j, ct),
        TypeKind::Struct => structure(j, &ct.fields),
    }
}

/// The value of `field` in a JSON object: names match per `Field::matches_json_key`; two
/// keys matching the same column is an error, as a duplicate field is for serde.
pub fn lookup<'a>(obj: &'a Map<String, Json>, field: &Field) -> Result<Option<&'a Json>, String> {
    let mut found = obj.iter().filter(|(k, _)| field.matches_json_key(k));
    let first = found.next();
    if let Some((dup, _)) = found.next() {
        return Err(format!(
            "duplicate field `{dup}` for column `{}`",
            field.name
        ));
    }
    Ok(first.map(|(_, v)| v))
}

fn expected(what: &str, j: &Json) -> String {
    let mut shown = j.to_string();
    if shown.len() > 60 {
        shown.truncate(60);
        shown.push('…');
    }
    format!("expected {what}, found {shown}")
}

fn text(j: &Json) -> Result<&str, String> {
    j.as_str().ok_or_else(|| expected("a string", j))
}

fn int(j: &Json, min: i64, max: i64, name: &str) -> Result<Value, String> {
    let n = j.as_i64().ok_or_else(|| match j {
        Json::Number(_) => format!("{j} is not a {name} (integers only, {min}..={max})"),
        _ => expected(&format!("an integer for {name}"), j),
    })?;
    if n < min || n > max {
        return Err(format!("{n} is out of range for {name} ({min}..={max})"));
    }
    Ok(Value::Int(n))
}

fn float(j: &Json, kind: TypeKind) -> Result<Value, String> {
    let f = j.as_f64().ok_or_else(|| expected("a number", j))?;
    if kind == TypeKind::Real && f.is_finite() && (f as f32).is_infinite() {
        return Err(format!("{f} is out of range for REAL"));
    }
    Ok(Value::Float(Float(f)))
}

fn bytes(j: &Json) -> Result<Value, String> {
    let items = j
        .as_array()
        .ok_or_else(|| expected("an array of bytes (0..=255)", j))?;
    items
        .iter()
        .map(|b| {
            b.as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| expected("a byte (0..=255)", b))
        })
        .collect::<Result<Vec<u8>, String>>()
        .map(Value::Bytes)
}

fn uuid(s: &str) -> Result<Value, String> {
    let ok = s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if ok {
        Ok(Value::Uuid(s.to_ascii_lowercase()))
    } else {
        Err(format!(
            "invalid UUID `{s}`: expected 8-4-4-4-12 hex digits"
        ))
    }
}

fn array(j: &Json, ct: &ColumnType) -> Result<Value, String> {
    let items = j.as_array().ok_or_else(|| expected("an array", j))?;
    let component = ct
        .component
        .as_deref()
        .ok_or("ARRAY without a component type")?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| parse_value(component, x).map_err(|e| format!("element {i}: {e}")))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

fn map(j: &Json, ct: &ColumnType) -> Result<Value, String> {
    let obj = j.as_object().ok_or_else(|| expected("an object", j))?;
    let (kt, vt) = match (ct.key.as_deref(), ct.value.as_deref()) {
        (Some(k), Some(v)) => (k, v),
        _ => return Err("MAP without key and value types".to_string()),
    };
    let mut entries = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let key = match kt.kind {
            TypeKind::Char | TypeKind::Varchar => Value::Str(k.clone()),
            _ => {
                let parsed: Json =
                    serde_json::from_str(k).unwrap_or_else(|_| Json::String(k.clone()));
                parse_value(kt, &parsed).map_err(|e| format!("map key `{k}`: {e}"))?
            }
        };
        let value = parse_value(vt, v).map_err(|e| format!("map value at `{k}`: {e}"))?;
        entries.push((key, value));
    }
    entries.sort();
    Ok(Value::Map(entries))
}

fn structure(j: &Json, fields: &[Field]) -> Result<Value, String> {
    let obj = j.as_object().ok_or_else(|| expected("an object", j))?;
    fields
        .iter()
        .map(|f| match lookup(obj, f)? {
            Some(x) => {
                parse_value(&f.columntype, x).map_err(|e| format!("member `{}`: {e}", f.name))
            }
            None if f.columntype.nullable => Ok(Value::Null),
            None => Err(format!("missing member `{}`", f.name)),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Struct)
}

fn decimal(j: &Json, ct: &ColumnType) -> Result<Value, String> {
    let text = match j {
        Json::String(s) => s.trim().to_string(),
        Json::Number(n) => n.to_string(),
        _ => return Err(expected("a decimal as a string or a number", j)),
    };
    let precision = ct
        .precision
        .unwrap_or(DEFAULT_DECIMAL_PRECISION)
        .clamp(1, 38) as u32;
    let scale = ct.scale.unwrap_or(0).clamp(0, precision as i64) as u32;
    let unscaled = scale_decimal(&text, scale)
        .ok_or_else(|| format!("invalid DECIMAL `{text}`: expected [-]digits[.digits][e±n]"))?;
    let limit = 10i128.pow(precision);
    if unscaled.unsigned_abs() >= limit.unsigned_abs() {
        return Err(format!(
            "`{text}` is out of range for DECIMAL({precision}, {scale})"
        ));
    }
    Ok(Value::Decimal(Decimal { unscaled, scale }))
}

/// `text` as an integer count of `10^-scale`, rounded half away from zero; `None` when it
/// is not a decimal literal or does not fit in 38 digits.
fn scale_decimal(text: &str, scale: u32) -> Option<i128> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    // Position of the decimal point, counted in digits from the right of `digits`.
    let point = frac.len() as i64 - exponent as i64;
    let shift = scale as i64 - point;
    let value = if digits.is_empty() {
        0
    } else if shift >= 0 {
        let base: i128 = digits.parse().ok()?;
        base.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?
    } else {
        let cut = usize::try_from(-shift).ok()?;
        if cut > digits.len() {
            0
        } else {
            let (keep, dropped) = digits.split_at(digits.len() - cut.min(digits.len()));
            let kept: i128 = if keep.is_empty() {
                0
            } else {
                keep.parse().ok()?
            };
            let round_up = dropped.as_bytes().first().is_some_and(|b| *b >= b'5');
            kept.checked_add(i128::from(round_up))?
        }
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ct(kind: TypeKind, nullable: bool) -> ColumnType {
        ColumnType {
            kind,
            nullable,
            ..ColumnType::varchar()
        }
    }

    fn dec(p: i64, s: i64) -> ColumnType {
        ColumnType {
            precision: Some(p),
            scale: Some(s),
            ..ct(TypeKind::Decimal, true)
        }
    }

    #[test]
    fn integers_must_fit_their_type() {
        assert_eq!(
            parse_value(&ct(TypeKind::TinyInt, false), &json!(127)),
            Ok(Value::Int(127))
        );
        assert!(parse_value(&ct(TypeKind::TinyInt, false), &json!(128)).is_err());
        assert!(parse_value(&ct(TypeKind::Integer, false), &json!(1.5)).is_err());
        assert!(parse_value(&ct(TypeKind::BigInt, false), &json!("1")).is_err());
    }

    #[test]
    fn decimals_accept_strings_and_numbers_at_column_scale() {
        let d = |j: Json| match parse_value(&dec(10, 2), &j) {
            Ok(Value::Decimal(d)) => Ok(d.to_text()),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(d(json!("12.5")), Ok("12.50".to_string()));
        assert_eq!(d(json!(12.5)), Ok("12.50".to_string()));
        assert_eq!(d(json!("-0.005")), Ok("-0.01".to_string()));
        assert_eq!(d(json!("1.2e2")), Ok("120.00".to_string()));
        assert!(
            d(json!("123456789")).is_err(),
            "9 integer digits exceed DECIMAL(10,2)"
        );
        assert!(d(json!("1.2.3")).is_err());
    }

    #[test]
    fn null_only_where_nullable() {
        assert_eq!(
            parse_value(&ct(TypeKind::Varchar, true), &Json::Null),
            Ok(Value::Null)
        );
        assert!(parse_value(&ct(TypeKind::Varchar, false), &Json::Null).is_err());
    }

    #[test]
    fn binary_is_a_byte_array_and_uuid_is_validated() {
        assert_eq!(
            parse_value(&ct(TypeKind::Varbinary, false), &json!([1, 255])),
            Ok(Value::Bytes(vec![1, 255]))
        );
        assert!(parse_value(&ct(TypeKind::Varbinary, false), &json!([256])).is_err());
        assert!(parse_value(&ct(TypeKind::Varbinary, false), &json!("AQI=")).is_err());
        assert!(parse_value(&ct(TypeKind::Uuid, false), &json!("not-a-uuid")).is_err());
        assert_eq!(
            parse_value(
                &ct(TypeKind::Uuid, false),
                &json!("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")
            ),
            Ok(Value::Uuid(
                "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".to_string()
            ))
        );
    }
}
