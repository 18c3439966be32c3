//! Writing JSON strings and small numbers into the caller's buffer.
//!
//! Owns JSON string escaping for the whole crate's value output. Input is validated as
//! UTF-8 first: PostgreSQL sends UTF-8 under the pinned `client_encoding`, so invalid bytes
//! are an error, never replaced. Nothing here allocates beyond growing `out`.

use super::error::ValueErrorKind;

/// Checks `text` is UTF-8 and returns it as `str`.
pub(crate) fn utf8(text: &[u8]) -> Result<&str, ValueErrorKind> {
    std::str::from_utf8(text).map_err(|e| ValueErrorKind::InvalidUtf8 {
        offset: e.valid_up_to(),
    })
}

/// Appends `s` as a JSON string literal. Escapes `"`, `\` and every control character below
/// U+0020 (the ones JSON forbids raw); everything else, including U+2028/U+2029 and DEL, is
/// valid raw in JSON and copied as is.
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut copied = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        // `copied <= i < len`: both come from this loop over `bytes`.
        out.extend_from_slice(&bytes[copied..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
        copied = i + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Appends an unsigned byte as a decimal JSON number.
pub(crate) fn write_u8(value: u8, out: &mut Vec<u8>) {
    if value >= 100 {
        out.push(b'0' + value / 100);
    }
    if value >= 10 {
        out.push(b'0' + (value / 10) % 10);
    }
    out.push(b'0' + value % 10);
}

/// Appends a signed integer as a decimal JSON number (no allocation).
pub(crate) fn write_i64(value: i64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut n = value.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        // `n % 10 < 10` fits a u8; 20 digits hold u64::MAX, so `start` never underflows.
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[start..]);
}

/// Appends `value` zero-padded to `width` digits (for dates and times; `value` fits).
pub(crate) fn write_padded(value: u32, width: usize, out: &mut Vec<u8>) {
    let mut digits = [b'0'; 10];
    let mut n = value;
    let mut pos = digits.len();
    while n > 0 && pos > 0 {
        pos -= 1;
        digits[pos] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let used = digits.len() - pos;
    let start = digits.len() - used.max(width).min(digits.len());
    out.extend_from_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> String {
        let mut out = Vec::new();
        write_str(s, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_escape_quotes_backslashes_and_every_control_character() {
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(string("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(string("\u{0}\u{1f}"), r#""\u0000\u001f""#);
        assert_eq!(string("é\u{2028}\u{7f}😀"), "\"é\u{2028}\u{7f}😀\"");
        for c in 0u8..0x20 {
            let s = char::from(c).to_string();
            let json = string(&s);
            assert_eq!(serde_json::from_str::<String>(&json).unwrap(), s);
        }
    }

    #[test]
    fn invalid_utf8_is_refused_at_its_offset() {
        assert_eq!(
            utf8(b"ab\xffc"),
            Err(ValueErrorKind::InvalidUtf8 { offset: 2 })
        );
        assert_eq!(utf8("é".as_bytes()), Ok("é"));
    }

    #[test]
    fn numbers_print_like_std() {
        for v in [0, 1, -1, 9, 10, 99, 100, i64::MAX, i64::MIN, -32768] {
            let mut out = Vec::new();
            write_i64(v, &mut out);
            assert_eq!(out, v.to_string().into_bytes());
        }
        for v in 0..=255u8 {
            let mut out = Vec::new();
            write_u8(v, &mut out);
            assert_eq!(out, v.to_string().into_bytes());
        }
        let mut out = Vec::new();
        write_padded(7, 2, &mut out);
        write_padded(0, 4, &mut out);
        write_padded(12345, 4, &mut out);
        assert_eq!(out, b"07000012345");
    }
}
