//! `numeric` to Feldera DECIMAL(p, s): the exact decimal text as a JSON string.
//!
//! `numeric_out` prints plain positional notation (never an exponent), `NaN`, `Infinity` or
//! `-Infinity`. The value is sent as a string so no JSON parser on the way turns it into a
//! binary float.
//!
//! Fitting DECIMAL(p, s): at most `p - s` integer digits (leading zeros do not count) and at
//! most `s` *significant* fractional digits. Fractional digits past `s` are cut only when
//! they are all zeros (`1.2300` into DECIMAL(10, 2) is `1.23`, exact); a value that would
//! have to be rounded is refused, because rounding in transit would make Feldera disagree
//! with PostgreSQL without anyone having asked for it.

use super::error::ValueErrorKind;
use super::outcome::Outcome;

const EXPECTED: &str = "a decimal in positional notation (`-12.50`), NaN, Infinity or -Infinity";

/// The parts of a finite numeric text.
struct Parts<'a> {
    negative: bool,
    int: &'a [u8],
    frac: &'a [u8],
}

fn parse(text: &[u8]) -> Result<Parts<'_>, ValueErrorKind> {
    let (negative, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let sign_len = usize::from(negative);
    let (int, frac) = match body.iter().position(|&b| b == b'.') {
        Some(dot) => (&body[..dot], &body[dot + 1..]),
        None => (body, &body[body.len()..]),
    };
    let has_dot = int.len() < body.len();
    if int.is_empty() || (has_dot && frac.is_empty()) {
        return Err(ValueErrorKind::malformed(text, sign_len, EXPECTED));
    }
    if let Some(bad) = int.iter().position(|b| !b.is_ascii_digit()) {
        return Err(ValueErrorKind::malformed(text, sign_len + bad, EXPECTED));
    }
    if let Some(bad) = frac.iter().position(|b| !b.is_ascii_digit()) {
        return Err(ValueErrorKind::malformed(
            text,
            sign_len + int.len() + 1 + bad,
            EXPECTED,
        ));
    }
    Ok(Parts {
        negative,
        int,
        frac,
    })
}

pub(crate) fn write_decimal(
    text: &[u8],
    precision: Option<u32>,
    scale: Option<u32>,
    out: &mut Vec<u8>,
) -> Result<Outcome, ValueErrorKind> {
    match text {
        b"NaN" => return Ok(Outcome::Null { why: "numeric NaN" }),
        b"Infinity" | b"-Infinity" => {
            return Ok(Outcome::Null {
                why: "infinite numeric",
            })
        }
        _ => {}
    }
    let parts = parse(text)?;
    let int_digits = parts.int.iter().skip_while(|&&b| b == b'0').count();
    let significant_frac =
        parts.frac.len() - parts.frac.iter().rev().take_while(|&&b| b == b'0').count();
    let frac_kept = match scale {
        Some(s) => {
            let s = s as usize;
            if significant_frac > s {
                return Err(ValueErrorKind::out_of_range(
                    text,
                    format!("at most {s} fractional digit(s) (the value is refused, not rounded)"),
                ));
            }
            parts.frac.len().min(s)
        }
        None => parts.frac.len(),
    };
    if let Some(p) = precision {
        let max_int = p.saturating_sub(scale.unwrap_or(0)) as usize;
        if int_digits > max_int {
            return Err(ValueErrorKind::out_of_range(
                text,
                format!("at most {max_int} integer digit(s)"),
            ));
        }
    }
    out.push(b'"');
    if parts.negative {
        out.push(b'-');
    }
    out.extend_from_slice(parts.int);
    if frac_kept > 0 {
        out.push(b'.');
        out.extend_from_slice(&parts.frac[..frac_kept]);
    }
    out.push(b'"');
    Ok(Outcome::Written)
}
