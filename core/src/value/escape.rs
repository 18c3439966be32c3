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
        let escape = ESCAPES[usize::from(b)];
        if escape == 0 {
            continue;
        }
        // `copied <= i < len`: both come from this loop over `bytes`.
        out.extend_from_slice(&bytes[copied..i]);
        if escape == b'u' {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
        copied = i + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// For each byte, 0 when JSON takes it raw, else the letter after the backslash that escapes
/// it (`u` for the `\u00XX` form). One lookup per byte keeps the common case a single test.
static ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut control = 0;
    while control < 0x20 {
        table[control] = b'u';
        control += 1;
    }
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

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

/// `value` (below 100) as two decimal digits, zero-padded: for dates and times, written
/// with the digits around them in one copy.
pub(crate) fn two_digits(value: u32) -> [u8; 2] {
    [b'0' + (value / 10 % 10) as u8, b'0' + (value % 10) as u8]
}

/// `value` (below 10000) as four decimal digits, zero-padded.
pub(crate) fn four_digits(value: u32) -> [u8; 4] {
    let [a, b] = two_digits(value / 100);
    let [c, d] = two_digits(value % 100);
    [a, b, c, d]
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
        assert_eq!(&two_digits(7), b"07");
        assert_eq!(&two_digits(59), b"59");
        assert_eq!(&four_digits(0), b"0000");
        assert_eq!(&four_digits(987), b"0987");
        assert_eq!(&four_digits(9999), b"9999");
    }
}
