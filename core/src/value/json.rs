//! `json`/`jsonb` text to a Feldera VARIANT: the same JSON value, validated and written
//! without insignificant whitespace.
//!
//! Why not serde_json: parsing into `serde_json::Value` turns numbers past `u64`/`f64` into
//! lossy floats or errors, while `numeric` inside jsonb can be any size; and the `json` type
//! keeps its input's whitespace, newlines included, which must not reach an NDJSON body.
//! So this walks the RFC 8259 grammar once, copying tokens verbatim and dropping whitespace.
//! Nesting is capped (`MAX_DEPTH`) so hostile input cannot exhaust the stack.

use super::error::ValueErrorKind;
use super::escape::utf8;
use super::scalar::{hex_digit, json_number_end};

/// Deepest object/array nesting accepted. PostgreSQL's own limit depends on its stack size;
/// real documents are far shallower.
pub(crate) const MAX_DEPTH: usize = 256;

pub(crate) fn write_variant(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
    utf8(text)?;
    let mut walker = Walker { text, pos: 0, out };
    walker.skip_ws();
    walker.value(0)?;
    walker.skip_ws();
    if walker.pos != text.len() {
        return Err(walker.error("the end of the JSON document"));
    }
    Ok(())
}

struct Walker<'a, 'o> {
    text: &'a [u8],
    pos: usize,
    out: &'o mut Vec<u8>,
}

impl Walker<'_, '_> {
    fn error(&self, expected: &'static str) -> ValueErrorKind {
        ValueErrorKind::malformed(self.text, self.pos, expected)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Copies `len` bytes from the current position to the output.
    fn copy(&mut self, len: usize) {
        let end = (self.pos + len).min(self.text.len());
        self.out
            .extend_from_slice(self.text.get(self.pos..end).unwrap_or_default());
        self.pos = end;
    }

    fn value(&mut self, depth: usize) -> Result<(), ValueErrorKind> {
        match self.peek() {
            Some(b'{') => self.container(depth, b'}', true),
            Some(b'[') => self.container(depth, b']', false),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => match self.text.get(self.pos..).and_then(json_number_end) {
                Some(len) => {
                    self.copy(len);
                    Ok(())
                }
                None => Err(self.error("a JSON value")),
            },
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), ValueErrorKind> {
        if self
            .text
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(word))
        {
            self.copy(word.len());
            Ok(())
        } else {
            Err(self.error("true, false or null"))
        }
    }

    /// An object (`is_object`: members `"key": value`) or an array, opening byte at `pos`.
    fn container(
        &mut self,
        depth: usize,
        close: u8,
        is_object: bool,
    ) -> Result<(), ValueErrorKind> {
        if depth >= MAX_DEPTH {
            return Err(self.error("JSON nested at most 256 levels deep"));
        }
        self.copy(1);
        self.skip_ws();
        if self.peek() == Some(close) {
            self.copy(1);
            return Ok(());
        }
        loop {
            if is_object {
                if self.peek() != Some(b'"') {
                    return Err(self.error("an object key (a string)"));
                }
                self.string()?;
                self.skip_ws();
                if self.peek() != Some(b':') {
                    return Err(self.error("`:` after an object key"));
                }
                self.copy(1);
                self.skip_ws();
            }
            self.value(depth + 1)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.copy(1);
                    self.skip_ws();
                }
                Some(b) if b == close => {
                    self.copy(1);
                    return Ok(());
                }
                _ => return Err(self.error("`,` or the end of the object/array")),
            }
        }
    }

    /// A string, opening quote at `pos`. The text is known UTF-8; escapes are checked,
    /// including that `\u` surrogates come in pairs (a lone one has no Unicode meaning and
    /// Feldera's parser refuses it).
    fn string(&mut self) -> Result<(), ValueErrorKind> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                None => return Err(self.error("a closing `\"`")),
                Some(b'"') => break,
                Some(0x00..=0x1f) => return Err(self.error("an escaped control character")),
                Some(b'\\') => self.escape()?,
                Some(_) => self.pos += 1,
            }
        }
        self.pos += 1;
        self.out
            .extend_from_slice(self.text.get(start..self.pos).unwrap_or_default());
        Ok(())
    }

    fn escape(&mut self) -> Result<(), ValueErrorKind> {
        match self.text.get(self.pos + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.pos += 2;
                Ok(())
            }
            Some(b'u') => {
                let unit = self.unicode_unit()?;
                if (0xDC00..0xE000).contains(&unit) {
                    return Err(self.error("a high surrogate before a low one"));
                }
                if (0xD800..0xDC00).contains(&unit) {
                    let low = if self.text.get(self.pos..self.pos + 2) == Some(b"\\u") {
                        self.unicode_unit()?
                    } else {
                        0
                    };
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(self.error("a low surrogate `\\uDC00`-`\\uDFFF`"));
                    }
                }
                Ok(())
            }
            _ => Err(self.error("an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX")),
        }
    }

    /// Reads `\uXXXX` at `pos` and returns the code unit.
    fn unicode_unit(&mut self) -> Result<u32, ValueErrorKind> {
        let hex = self
            .text
            .get(self.pos + 2..self.pos + 6)
            .unwrap_or_default();
        if hex.len() != 4 {
            return Err(self.error("four hex digits after \\u"));
        }
        let mut unit = 0u32;
        for &b in hex {
            match hex_digit(b) {
                Some(d) => unit = unit << 4 | u32::from(d),
                None => return Err(self.error("four hex digits after \\u")),
            }
        }
        self.pos += 6;
        Ok(unit)
    }
}
