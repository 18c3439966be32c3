//! PostgreSQL array text (`array_out`) to nested JSON arrays.
//!
//! Format: an optional dimension decoration `[lo:hi][lo:hi]=` (printed when a lower bound is
//! not 1; bounds carry no meaning in JSON and are skipped), then `{...}` nested once per
//! dimension. Elements are separated by the element type's delimiter (`typdelim`: `,` for
//! every type but `box`, which uses `;`). An element is either double-quoted, with
//! `\"` and `\\` escapes, or bare; bare `NULL` (any case) is SQL NULL while `"NULL"` is the
//! string. Whitespace around elements is ignored, as `array_in` does.
//!
//! The Feldera column fixes the number of dimensions (one per ARRAY nesting level); a value
//! with another number of dimensions is refused, except `{}` (PostgreSQL's only empty array,
//! which has zero dimensions) which is `[]` for any nesting.

use super::decode::ValuePlan;
use super::error::ValueErrorKind;

/// PostgreSQL's MAXDIM: no array has more dimensions.
pub(crate) const MAX_DIMENSIONS: usize = 6;

const EXPECTED: &str = "PostgreSQL array text `{a,b}` (elements bare or double-quoted)";

pub(crate) fn write_array(
    text: &[u8],
    dimensions: usize,
    delimiter: u8,
    element: &ValuePlan,
    out: &mut Vec<u8>,
) -> Result<(), ValueErrorKind> {
    let mut parser = Parser {
        text,
        delimiter,
        pos: skip_decoration(text)?,
        index: 0,
        scratch: Vec::new(),
    };
    parser.skip_ws();
    let body = text.get(parser.pos..).unwrap_or_default();
    let found = body.iter().take_while(|&&b| b == b'{').count();
    if found == 0 {
        return Err(parser.error(EXPECTED));
    }
    let empty = body.get(found..).and_then(|rest| rest.first()) == Some(&b'}') && found == 1;
    if found != dimensions && !empty {
        return Err(ValueErrorKind::Dimensions {
            found,
            expected: dimensions,
        });
    }
    parser.level(1, dimensions, element, out)?;
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(parser.error("the end of the array"));
    }
    Ok(())
}

/// Skips `[lo:hi]...=` and returns where the braces start.
fn skip_decoration(text: &[u8]) -> Result<usize, ValueErrorKind> {
    if text.first() != Some(&b'[') {
        return Ok(0);
    }
    match text.iter().position(|&b| b == b'=') {
        Some(eq)
            if text
                .get(..eq)
                .unwrap_or_default()
                .iter()
                .all(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b':' | b'[' | b']')) =>
        {
            Ok(eq + 1)
        }
        _ => Err(ValueErrorKind::malformed(
            text,
            0,
            "dimension bounds `[lo:hi]=` before the array",
        )),
    }
}

struct Parser<'a> {
    text: &'a [u8],
    /// Between elements: `,`, or the element type's own `typdelim`.
    delimiter: u8,
    pos: usize,
    /// Elements seen so far, in text order (for error messages).
    index: usize,
    /// Unescaped element bytes, used only for elements that contain backslashes.
    scratch: Vec<u8>,
}

impl Parser<'_> {
    fn error(&self, expected: &'static str) -> ValueErrorKind {
        ValueErrorKind::malformed(self.text, self.pos, expected)
    }

    /// What may follow an element, for messages.
    fn after_element(&self) -> &'static str {
        match self.delimiter {
            b',' => "`,` or `}`",
            b';' => "`;` or `}`",
            _ => "the element type's delimiter or `}`",
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// One `{...}` at nesting `level` (1-based) of `dimensions`.
    fn level(
        &mut self,
        level: usize,
        dimensions: usize,
        element: &ValuePlan,
        out: &mut Vec<u8>,
    ) -> Result<(), ValueErrorKind> {
        if self.peek() != Some(b'{') {
            return Err(self.error("`{` (sub-arrays must have matching dimensions)"));
        }
        self.pos += 1;
        out.push(b'[');
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            out.push(b']');
            return Ok(());
        }
        loop {
            self.skip_ws();
            if level < dimensions {
                self.level(level + 1, dimensions, element, out)?;
            } else {
                self.element(element, out)?;
            }
            self.skip_ws();
            match self.peek() {
                Some(b) if b == self.delimiter => {
                    self.pos += 1;
                    out.push(b',');
                }
                Some(b'}') => {
                    self.pos += 1;
                    out.push(b']');
                    return Ok(());
                }
                _ => return Err(self.error(self.after_element())),
            }
        }
    }

    fn element(&mut self, plan: &ValuePlan, out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
        let index = self.index;
        self.index += 1;
        let (start, end, escaped, quoted) = match self.peek() {
            Some(b'"') => self.quoted()?,
            Some(b'{') => {
                return Err(self.error("an element (sub-arrays must have matching dimensions)"))
            }
            _ => self.bare()?,
        };
        let raw = self.text.get(start..end).unwrap_or_default();
        let in_element = |kind| ValueErrorKind::InElement {
            index,
            kind: Box::new(kind),
        };
        if !quoted && !escaped && raw.eq_ignore_ascii_case(b"NULL") {
            return plan.write_null_kind(out).map_err(in_element);
        }
        if !escaped {
            return plan.write_value(raw, out).map_err(in_element);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let mut bytes = raw.iter();
        while let Some(&b) = bytes.next() {
            // A backslash takes the next byte literally; the scanners guarantee one follows.
            scratch.push(if b == b'\\' {
                bytes.next().copied().unwrap_or(b)
            } else {
                b
            });
        }
        let result = plan.write_value(&scratch, out).map_err(in_element);
        self.scratch = scratch;
        result
    }

    /// A double-quoted element at `pos`: returns (start, end, has escapes, quoted=true) of the
    /// content between the quotes.
    fn quoted(&mut self) -> Result<(usize, usize, bool, bool), ValueErrorKind> {
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            match self.peek() {
                None => return Err(self.error("a closing `\"`")),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    if self.text.get(self.pos + 1).is_none() {
                        return Err(self.error("a character after `\\`"));
                    }
                    self.pos += 2;
                }
                Some(_) => self.pos += 1,
            }
        }
        let end = self.pos;
        self.pos += 1;
        Ok((start, end, escaped, true))
    }

    /// A bare element at `pos`, up to the delimiter or `}`, trailing whitespace excluded.
    fn bare(&mut self) -> Result<(usize, usize, bool, bool), ValueErrorKind> {
        let start = self.pos;
        let mut escaped = false;
        let mut end = start;
        loop {
            match self.peek() {
                None => return Err(self.error(self.after_element())),
                Some(b'}') => break,
                Some(b) if b == self.delimiter => break,
                Some(b'{' | b'"') => return Err(self.error("a bare element without `{` or `\"`")),
                Some(b'\\') => {
                    escaped = true;
                    if self.text.get(self.pos + 1).is_none() {
                        return Err(self.error("a character after `\\`"));
                    }
                    self.pos += 2;
                    end = self.pos;
                }
                Some(b) => {
                    self.pos += 1;
                    if !b.is_ascii_whitespace() {
                        end = self.pos;
                    }
                }
            }
        }
        if end == start {
            return Err(self.error("an element (bare elements cannot be empty: use \"\")"));
        }
        Ok((start, end, escaped, false))
    }
}
