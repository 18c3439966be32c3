//! Decoders for the simple scalar types: bool, integers, floats, strings, bytea and uuid.
//!
//! Each takes the exact text PostgreSQL's output function prints under the pinned session
//! settings and appends one JSON value, or says what it expected. They never write a
//! partial value on error (the caller truncates anyway) and never allocate on success.

use super::error::ValueErrorKind;
use super::escape;
use super::outcome::Outcome;

pub(crate) fn write_bool(text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    // `boolout` prints exactly `t` or `f`.
    match text {
        b"t" => out.extend_from_slice(b"true"),
        b"f" => out.extend_from_slice(b"false"),
        _ => return Err(ValueErrorKind::malformed(text, 0, "`t` or `f`")),
    }
    Ok(Outcome::Written)
}

/// Parses a decimal integer as `int2out`/`int4out`/`int8out`/`oidout` print it: an optional
/// `-` and digits. The value is re-printed, so odd spellings cannot reach the JSON.
pub(crate) fn write_int(
    text: &[u8],
    min: i64,
    max: i64,
    out: &mut Vec<u8>,
) -> Result<Outcome, ValueErrorKind> {
    const EXPECTED: &str = "a decimal integer (optional `-`, digits only)";
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return Err(ValueErrorKind::malformed(text, 0, EXPECTED));
    }
    // Accumulate negatively so i64::MIN parses; overflow means out of range, not malformed.
    let mut value: i64 = 0;
    let mut overflow = false;
    for (i, &b) in digits.iter().enumerate() {
        if !b.is_ascii_digit() {
            return Err(ValueErrorKind::malformed(
                text,
                i + usize::from(negative),
                EXPECTED,
            ));
        }
        let digit = i64::from(b - b'0');
        match value.checked_mul(10).and_then(|v| v.checked_sub(digit)) {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    let value = if negative {
        Some(value)
    } else {
        value.checked_neg()
    };
    match value {
        Some(v) if !overflow && (min..=max).contains(&v) => {
            // PostgreSQL prints integers canonically (no `+`, no leading zero, no `-0`),
            // which is already the JSON number: copied as is. Anything else is re-printed.
            let canonical = digits.first() != Some(&b'0') || (digits.len() == 1 && !negative);
            if canonical {
                out.extend_from_slice(text);
            } else {
                escape::write_i64(v, out);
            }
            Ok(Outcome::Written)
        }
        _ => Err(ValueErrorKind::out_of_range(text, format!("{min}..={max}"))),
    }
}

/// `float4out`/`float8out` with `extra_float_digits=3` print the shortest exact decimal,
/// `NaN`, `Infinity` or `-Infinity`. Finite values are already JSON numbers and are copied
/// verbatim (re-printing could change the digits); the grammar is checked so nothing else
/// can reach the JSON.
pub(crate) fn write_float(text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    match text {
        b"NaN" => return Ok(Outcome::Null { why: "NaN" }),
        b"Infinity" | b"-Infinity" => {
            return Ok(Outcome::Null {
                why: "infinite float",
            })
        }
        _ => {}
    }
    match json_number_end(text) {
        Some(end) if end == text.len() => {
            // float8out never prints a finite value past f64's range, and neither Feldera's
            // REAL nor DOUBLE could hold one: refuse rather than let it become infinity.
            let finite = surely_finite(text)
                || std::str::from_utf8(text)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    .is_some_and(f64::is_finite);
            if !finite {
                return Err(ValueErrorKind::out_of_range(
                    text,
                    "a finite IEEE double (about ±1.8e308)".into(),
                ));
            }
            out.extend_from_slice(text);
            Ok(Outcome::Written)
        }
        Some(end) => Err(ValueErrorKind::malformed(text, end, "a decimal number")),
        None => Err(ValueErrorKind::malformed(
            text,
            0,
            "a decimal number, NaN, Infinity or -Infinity",
        )),
    }
}

/// Whether a JSON number's text is below 10^308 (so below f64::MAX, about 1.8e308) by its
/// digit count and exponent alone: fewer integer digits than 309 once the exponent is
/// added. Spares parsing nearly every float; a text this cannot vouch for is parsed.
fn surely_finite(number: &[u8]) -> bool {
    let unsigned = number.strip_prefix(b"-").unwrap_or(number);
    let int_digits = unsigned.iter().take_while(|b| b.is_ascii_digit()).count();
    let exponent = match unsigned.iter().position(|&b| matches!(b, b'e' | b'E')) {
        None => 0,
        Some(at) => match std::str::from_utf8(unsigned.get(at + 1..).unwrap_or_default())
            .ok()
            .and_then(|e| e.parse::<i64>().ok())
        {
            Some(e) if e.abs() < 10_000 => e,
            _ => return false,
        },
    };
    i64::try_from(int_digits).is_ok_and(|digits| digits + exponent <= 308)
}

/// A float4 for a DOUBLE column. float4out prints the shortest text that reads back as the
/// same float4 (`3.14`), but read as a double that text is another number than the float4
/// PostgreSQL holds (3.1400001049041748...). So the text is read as a float4, widened
/// exactly, and written as the shortest text of that double.
pub(crate) fn write_float4_as_double(
    text: &[u8],
    out: &mut Vec<u8>,
) -> Result<Outcome, ValueErrorKind> {
    let start = out.len();
    let outcome = write_float(text, out)?;
    if outcome != Outcome::Written {
        return Ok(outcome);
    }
    let narrow = std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<f32>().ok())
        .filter(|f| f.is_finite())
        .ok_or_else(|| {
            ValueErrorKind::out_of_range(text, "a finite IEEE single (about ±3.4e38)".into())
        })?;
    out.truncate(start);
    out.extend_from_slice(f64::from(narrow).to_string().as_bytes());
    Ok(Outcome::Written)
}

/// Length of the JSON number (RFC 8259 grammar) at the start of `text`, or `None` if it does
/// not start with one.
pub(crate) fn json_number_end(text: &[u8]) -> Option<usize> {
    let digits_from = |from: usize| -> usize {
        text.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let mut pos = usize::from(text.first() == Some(&b'-'));
    let int_digits = digits_from(pos);
    if int_digits == 0 || (int_digits > 1 && text.get(pos) == Some(&b'0')) {
        return None;
    }
    pos += int_digits;
    if text.get(pos) == Some(&b'.') {
        let frac = digits_from(pos + 1);
        if frac == 0 {
            return None;
        }
        pos += 1 + frac;
    }
    if matches!(text.get(pos), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(text.get(pos + 1), Some(b'+' | b'-')));
        let exp = digits_from(pos + 1 + sign);
        if exp == 0 {
            return None;
        }
        pos += 1 + sign + exp;
    }
    Some(pos)
}

/// Text as a JSON string, whatever its length: Feldera does not enforce a column's declared
/// length on input (a CHAR(n)/VARCHAR(n) value longer than n is stored as it is), so
/// neither does slotline; the column mapping warns once per column where PostgreSQL allows
/// longer values (see docs/feldera.md).
pub(crate) fn write_text(text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    let s = escape::utf8(text)?;
    escape::write_str(s, out);
    Ok(Outcome::Written)
}

/// `byteaout` with `bytea_output=hex`: `\x` then two hex digits per byte. Written as a JSON
/// array of byte numbers, which is what Feldera's BINARY/VARBINARY JSON input takes. Like
/// text, never cut or refused for a declared length (Feldera does not check it).
pub(crate) fn write_bytea(text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    let Some(hex) = text.strip_prefix(b"\\x") else {
        return Err(ValueErrorKind::malformed(
            text,
            0,
            "hex format `\\x...` (bytea_output=hex is required; escape format is refused)",
        ));
    };
    if hex.len() % 2 != 0 {
        return Err(ValueErrorKind::malformed(
            text,
            text.len(),
            "an even number of hex digits after `\\x`",
        ));
    }
    let start = out.len();
    out.reserve(2 + hex.len() * 2);
    out.push(b'[');
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let (Some(hi), Some(lo)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
            out.truncate(start);
            return Err(ValueErrorKind::malformed(text, 2 + 2 * i, "hex digits"));
        };
        if i > 0 {
            out.push(b',');
        }
        escape::write_u8(hi << 4 | lo, out);
    }
    out.push(b']');
    Ok(Outcome::Written)
}

pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `uuid_out`: 8-4-4-4-12 hex digits. Copied as a JSON string.
pub(crate) fn write_uuid(text: &[u8], out: &mut Vec<u8>) -> Result<Outcome, ValueErrorKind> {
    const EXPECTED: &str = "a UUID as 8-4-4-4-12 hex digits";
    if text.len() != 36 {
        return Err(ValueErrorKind::malformed(text, 0, EXPECTED));
    }
    for (i, &b) in text.iter().enumerate() {
        let ok = match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        };
        if !ok {
            return Err(ValueErrorKind::malformed(text, i, EXPECTED));
        }
    }
    out.push(b'"');
    out.extend_from_slice(text);
    out.push(b'"');
    Ok(Outcome::Written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// What the digit count vouches for parses as finite, every time.
        #[test]
        fn a_number_surely_finite_parses_finite(
            text in "-?[0-9]{1,320}(\\.[0-9]{1,5})?([eE][+-]?[0-9]{1,4})?",
        ) {
            if surely_finite(text.as_bytes()) {
                prop_assert!(text.parse::<f64>().unwrap().is_finite(), "{}", text);
            }
        }
    }

    #[test]
    fn the_digit_count_vouches_below_the_edge_and_leaves_the_edge_to_parsing() {
        for (text, sure) in [
            ("3.14", true),
            ("-1.5e-300", true),
            ("1e307", true),
            ("1.2345678901234567e+29", true),
            ("1e308", false),
            ("1.7976931348623157e308", false),
            ("2e308", false),
            ("1e99999", false),
        ] {
            assert_eq!(surely_finite(text.as_bytes()), sure, "{text}");
        }
    }
}
