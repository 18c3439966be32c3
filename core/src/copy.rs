//! COPY text-format rows (`COPY ... TO STDOUT`): fields split on tabs, `\N` for null, and
//! backslash escapes, feeding the same value decoder as pgoutput.
//!
//! Owns only the row syntax; it never interprets a value (that is `value::ValuePlan`, the
//! same one pgoutput's text datums go through, so a restart that re-copies a table produces
//! byte-identical JSON).
//!
//! Input contract, from PostgreSQL's `COPY ... TO STDOUT` in text format over protocol 3:
//! every CopyData message carries exactly one row terminated by `\n`, and the output escapes
//! backslash, tab, newline, carriage return, backspace, form feed and vertical tab
//! (`CopyAttributeOutText`). So a row without its final `\n`, or with a raw `\n`/`\r`
//! inside, is not a row PostgreSQL sent: it is refused with the offset, never repaired.
//! Decoding accepts every escape `COPY FROM` accepts: `\b \f \n \r \t \v \\`, octal `\NNN`
//! (1-3 digits, low 8 bits kept), hex `\xH[H]`, and `\c` for any other byte `c`. `\N` alone
//! as a whole field is NULL; `\N` inside a longer field is the letter `N`.

use crate::error::{DecodeError, DecodeErrorKind};

/// The most columns a PostgreSQL row can have (`MaxTupleAttributeNumber`); a row claiming
/// more fields is refused before its field list grows further.
pub const MAX_FIELDS: usize = 1664;

/// One decoded COPY row, reusable across rows: one buffer of unescaped field bytes plus each
/// field's range, so once warmed up a row costs no allocation per field.
#[derive(Clone, Debug, Default)]
pub struct CopyRow {
    buf: Vec<u8>,
    /// `Some((start, end))` into `buf`, or `None` for NULL.
    fields: Vec<Option<(usize, usize)>>,
}

impl CopyRow {
    pub fn new() -> CopyRow {
        CopyRow::default()
    }

    /// Decodes one CopyData payload holding one row of a table with `columns` columns,
    /// replacing the previous row. A table with no columns prints an empty line, which is
    /// why the column count is needed to tell it from one empty string.
    pub fn parse(&mut self, data: &[u8], columns: usize) -> Result<(), DecodeError> {
        self.buf.clear();
        self.fields.clear();
        let Some((&b'\n', body)) = data.split_last() else {
            return Err(DecodeError::protocol(
                data.len(),
                "a COPY text row must end with a newline (one row per CopyData message)",
            ));
        };
        if body == b"\\." {
            return Err(DecodeError::protocol(
                0,
                "end-of-data marker `\\.` inside a CopyData row (COPY TO STDOUT never sends it)",
            ));
        }
        if columns == 0 {
            return match body.is_empty() {
                true => Ok(()),
                false => Err(count_error(0, 1)),
            };
        }
        if let Some(at) = memchr::memchr2(b'\n', b'\r', body) {
            return Err(DecodeError::protocol(
                at,
                "raw newline or carriage return inside a COPY text row (PostgreSQL escapes \
                 them as \\n and \\r)",
            ));
        }
        // Runs between tabs and backslashes are copied whole; only escapes go byte by byte.
        self.buf.reserve(body.len());
        let mut field_start = 0;
        let mut buf_start = 0;
        let mut pos = 0;
        while let Some(found) = memchr::memchr2(b'\t', b'\\', body.get(pos..).unwrap_or_default()) {
            let at = pos + found;
            self.buf
                .extend_from_slice(body.get(pos..at).unwrap_or_default());
            if body.get(at) == Some(&b'\t') {
                self.end_field(body, field_start..at, buf_start)?;
                pos = at + 1;
                field_start = pos;
                buf_start = self.buf.len();
            } else {
                pos = self.unescape(body, at)?;
            }
        }
        self.buf
            .extend_from_slice(body.get(pos..).unwrap_or_default());
        self.end_field(body, field_start..body.len(), buf_start)?;
        if self.fields.len() != columns {
            return Err(count_error(columns, self.fields.len()));
        }
        Ok(())
    }

    /// Closes the field whose raw text is `body[raw]` and whose unescaped bytes are
    /// `buf[buf_start..]`.
    fn end_field(
        &mut self,
        body: &[u8],
        raw: std::ops::Range<usize>,
        buf_start: usize,
    ) -> Result<(), DecodeError> {
        if self.fields.len() == MAX_FIELDS {
            return Err(DecodeError::new(
                raw.start,
                DecodeErrorKind::BadLength {
                    declared: (MAX_FIELDS + 1) as i64,
                    limit: MAX_FIELDS,
                },
            ));
        }
        let field = if body.get(raw) == Some(b"\\N") {
            // The escape decoded to `N`: drop it from the buffer.
            self.buf.truncate(buf_start);
            None
        } else {
            Some((buf_start, self.buf.len()))
        };
        self.fields.push(field);
        Ok(())
    }

    /// Decodes the escape whose backslash is at `body[pos]`; returns the position after it.
    fn unescape(&mut self, body: &[u8], pos: usize) -> Result<usize, DecodeError> {
        let Some(&c) = body.get(pos + 1) else {
            return Err(DecodeError::protocol(
                pos,
                "backslash at the end of a COPY text row (an escape needs a character after it)",
            ));
        };
        let byte = match c {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            b'0'..=b'7' => {
                let digits = digits_while(body, pos + 1, 3, |b| (b'0'..=b'7').contains(&b));
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                self.buf.push((value & 0xff) as u8);
                return Ok(pos + 1 + digits.len());
            }
            b'x' => {
                let digits = digits_while(body, pos + 2, 2, |b| b.is_ascii_hexdigit());
                if digits.is_empty() {
                    self.buf.push(b'x');
                    return Ok(pos + 2);
                }
                let value = digits.iter().fold(0u8, |v, &d| v << 4 | hex_value(d));
                self.buf.push(value);
                return Ok(pos + 2 + digits.len());
            }
            other => other,
        };
        self.buf.push(byte);
        Ok(pos + 2)
    }

    /// Number of fields in the row.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Field `index`: `None` past the last field, `Some(None)` for NULL, else the unescaped
    /// bytes (the value's text output, ready for `ValuePlan::write_json`).
    pub fn field(&self, index: usize) -> Option<Option<&[u8]>> {
        let field = self.fields.get(index)?;
        Some(field.and_then(|(start, end)| self.buf.get(start..end)))
    }

    /// Every field in order, as `field` returns them.
    pub fn fields(&self) -> impl Iterator<Item = Option<&[u8]>> + '_ {
        self.fields
            .iter()
            .map(|field| field.and_then(|(start, end)| self.buf.get(start..end)))
    }
}

fn count_error(expected: usize, found: usize) -> DecodeError {
    DecodeError::protocol(
        0,
        format!("COPY row has {found} field(s), the relation has {expected} column(s)"),
    )
}

/// Up to `max` bytes from `body[from..]` satisfying `accept`.
fn digits_while(body: &[u8], from: usize, max: usize, accept: impl Fn(u8) -> bool) -> &[u8] {
    let rest = body.get(from..).unwrap_or_default();
    let count = rest.iter().take(max).take_while(|&&b| accept(b)).count();
    rest.get(..count).unwrap_or_default()
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

/// Encodes one row the way `COPY ... TO STDOUT` (text format) prints it: `\N` for NULL,
/// `\\ \b \f \n \r \t \v` escaped, tab-separated, newline-terminated.
#[cfg(feature = "testing")]
pub fn encode_row(fields: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        let Some(bytes) = field else {
            out.extend_from_slice(b"\\N");
            continue;
        };
        for &b in *bytes {
            let escaped = match b {
                b'\\' => b'\\',
                0x08 => b'b',
                0x0c => b'f',
                b'\n' => b'n',
                b'\r' => b'r',
                b'\t' => b't',
                0x0b => b'v',
                _ => {
                    out.push(b);
                    continue;
                }
            };
            out.extend_from_slice(&[b'\\', escaped]);
        }
    }
    out.push(b'\n');
    out
}

/// Fuzz harness: `data[0] % 9` is the column count, the rest one CopyData payload. Parsing
/// must not panic; a parsed row must survive re-encoding unchanged and every field must
/// decode as VARCHAR into valid JSON or be refused as invalid UTF-8.
#[cfg(feature = "fuzzing")]
pub fn fuzz_copy_row(data: &[u8]) {
    use crate::schema::{ColumnType, SqlType};
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let columns = usize::from(pick % 9);
    let mut row = CopyRow::new();
    if row.parse(payload, columns).is_err() {
        return;
    }
    assert_eq!(row.len(), columns);
    let fields: Vec<Option<Vec<u8>>> = row.fields().map(|f| f.map(<[u8]>::to_vec)).collect();
    let borrowed: Vec<Option<&[u8]>> = fields.iter().map(|f| f.as_deref()).collect();
    let reencoded = encode_row(&borrowed);
    let mut again = CopyRow::new();
    if let Err(e) = again.parse(&reencoded, columns) {
        panic!("re-encoded row {reencoded:?} does not parse: {e}");
    }
    assert!(again.fields().eq(row.fields()), "re-encoded row differs");
    let varchar = ColumnType::new(SqlType::Varchar, true);
    let types = crate::value::PgTypes::new();
    let Ok(text_plan) = crate::value::plan(&types, crate::value::oid::TEXT, &varchar) else {
        panic!("text into VARCHAR must be planned");
    };
    for field in row.fields() {
        let mut out = Vec::new();
        if text_plan.write_datum(field, &mut out).is_ok() {
            assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnType, SqlType};
    use crate::value::{oid, plan, PgTypes};
    use proptest::prelude::*;

    fn parse(data: &[u8], columns: usize) -> Result<Vec<Option<Vec<u8>>>, DecodeError> {
        let mut row = CopyRow::new();
        row.parse(data, columns)?;
        Ok(row.fields().map(|f| f.map(<[u8]>::to_vec)).collect())
    }

    fn some(s: &[u8]) -> Option<Vec<u8>> {
        Some(s.to_vec())
    }

    #[test]
    fn fields_split_on_tabs_with_null_and_empty_distinct() {
        assert_eq!(
            parse(b"1\t\\N\t\tx\n", 4).unwrap(),
            vec![some(b"1"), None, some(b""), some(b"x")]
        );
        assert_eq!(parse(b"\\N\n", 1).unwrap(), vec![None]);
        assert_eq!(parse(b"\n", 1).unwrap(), vec![some(b"")]);
        assert_eq!(parse(b"\n", 0).unwrap(), vec![]);
    }

    #[test]
    fn escapes_decode_like_copy_from() {
        let cases: [(&[u8], &[u8]); 12] = [
            (b"a\\tb\\nc\\rd\n", b"a\tb\nc\rd"),
            (b"\\b\\f\\v\\\\\n", b"\x08\x0c\x0b\\"),
            (b"\\101\\0\\7\n", b"A\x00\x07"),
            (b"\\1012\n", b"A2"),
            (b"\\777\n", b"\xff"),
            (b"\\x41\\x4\\x4G\n", b"A\x04\x04G"),
            (b"\\xg\n", b"xg"),
            (b"\\N\\N\n", b"NN"),
            (b"x\\N\n", b"xN"),
            (b"\\q\\.\n", b"q."),
            (b"\\x414\n", b"A4"),
            ("é\\\\ü\n".as_bytes(), "é\\ü".as_bytes()),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input, 1).unwrap(), vec![some(want)], "{input:?}");
        }
    }

    #[test]
    fn malformed_rows_are_refused_with_offsets() {
        let offset = |data: &[u8], columns| parse(data, columns).unwrap_err().offset;
        assert_eq!(offset(b"1\t2", 2), 3, "missing newline");
        assert_eq!(offset(b"", 1), 0, "empty payload");
        assert_eq!(offset(b"1\n2\n", 1), 1, "two rows in one message");
        assert_eq!(offset(b"1\r\n", 1), 1, "raw carriage return");
        assert_eq!(offset(b"ab\\\n", 1), 2, "dangling backslash");
        assert_eq!(offset(b"\\.\n", 1), 0, "end-of-data marker");
        let error = parse(b"1\t2\n", 3).unwrap_err();
        assert!(error.to_string().contains("2 field(s), the relation has 3"));
        assert!(parse(b"x\n", 0).is_err());
    }

    #[test]
    fn field_count_is_capped() {
        let row = vec![b'\t'; MAX_FIELDS]
            .into_iter()
            .chain([b'\n'])
            .collect::<Vec<_>>();
        let error = parse(&row, MAX_FIELDS + 1).unwrap_err();
        assert!(matches!(error.kind, DecodeErrorKind::BadLength { .. }));
        assert_eq!(parse(&row[1..], MAX_FIELDS).unwrap().len(), MAX_FIELDS);
    }

    #[test]
    fn a_warm_row_reuses_its_buffers() {
        let mut row = CopyRow::new();
        row.parse(b"aaaa\tbbbb\t\\N\n", 3).unwrap();
        let capacity = (row.buf.capacity(), row.fields.capacity());
        row.parse(b"cc\t\\N\tdd\n", 3).unwrap();
        assert_eq!((row.buf.capacity(), row.fields.capacity()), capacity);
        assert_eq!(row.field(0), Some(Some(&b"cc"[..])));
        assert_eq!(row.field(1), Some(None));
        assert_eq!(row.field(2), Some(Some(&b"dd"[..])));
        assert_eq!(row.field(3), None);
    }

    /// The texts PostgreSQL prints for these types; each goes through a COPY row and as a
    /// pgoutput text datum, and must give identical JSON.
    #[test]
    fn copy_and_pgoutput_texts_give_identical_json() {
        let varchar = ColumnType::new(SqlType::Varchar, true);
        let cases: Vec<(u32, ColumnType, &str)> = vec![
            (oid::INT4, ColumnType::new(SqlType::Integer, true), "-42"),
            (
                oid::TEXT,
                varchar.clone(),
                "tab\there\nnew \\ line\u{b}\u{8}\u{c}\r",
            ),
            (
                oid::BYTEA,
                ColumnType::new(SqlType::Varbinary, true),
                "\\x00ff",
            ),
            (
                oid::TIMESTAMPTZ,
                ColumnType::new(SqlType::TimestampTz, true),
                "2024-01-01 07:00:00-05",
            ),
            (
                oid::JSONB,
                ColumnType::new(SqlType::Variant, true),
                "{\"a\": \"x\\\\ty\"}",
            ),
            (
                1009,
                ColumnType::array_of(varchar.clone(), true),
                "{\"a\\\\b\",\"c\\\"d\",NULL}",
            ),
            (oid::NUMERIC, ColumnType::decimal(10, 2, true), "12.50"),
            (oid::INTERVAL, varchar, "1 day 02:00:00"),
        ];
        for (pg_type, target, text) in cases {
            let plan = plan(&PgTypes::new(), pg_type, &target).unwrap();
            let mut direct = Vec::new();
            plan.write_json(text.as_bytes(), &mut direct).unwrap();
            let mut row = CopyRow::new();
            row.parse(&encode_row(&[Some(b"1"), Some(text.as_bytes()), None]), 3)
                .unwrap();
            let mut copied = Vec::new();
            plan.write_datum(row.field(1).flatten(), &mut copied)
                .unwrap();
            assert_eq!(copied, direct, "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn encoded_rows_parse_back_to_the_same_fields(
            fields in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)), 1..6),
        ) {
            let borrowed: Vec<Option<&[u8]>> = fields.iter().map(|f| f.as_deref()).collect();
            let parsed = parse(&encode_row(&borrowed), fields.len()).unwrap();
            prop_assert_eq!(parsed, fields);
        }

        #[test]
        fn copy_and_pgoutput_agree_on_any_text(text in any::<String>()) {
            let varchar = ColumnType::new(SqlType::Varchar, true);
            let plan = plan(&PgTypes::new(), oid::TEXT, &varchar).unwrap();
            let mut direct = Vec::new();
            plan.write_json(text.as_bytes(), &mut direct).unwrap();
            let mut row = CopyRow::new();
            row.parse(&encode_row(&[Some(text.as_bytes())]), 1).unwrap();
            let mut copied = Vec::new();
            plan.write_datum(row.field(0).flatten(), &mut copied).unwrap();
            prop_assert_eq!(copied, direct);
        }

        #[test]
        fn arbitrary_payloads_never_panic(data in proptest::collection::vec(any::<u8>(), 0..48)) {
            fuzz_copy_row(&data);
        }
    }
}
