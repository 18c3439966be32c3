//! PostgreSQL record text (`record_out`, the text of a composite value) to a JSON object
//! keyed by the Feldera ROW's member names.
//!
//! Format, as `record_in` reads it: optional whitespace, `(`, the members in attribute order
//! separated by `,`, `)`, optional whitespace. A member with no characters at all is SQL
//! NULL (`(,)` is two NULLs); anything else is its type's text, where a double-quoted stretch
//! may hold `,`, `)`, `(` and whitespace, `""` inside quotes is one `"`, and a backslash
//! takes the next byte literally, inside or outside quotes. So `""` is the empty string, not
//! NULL, and whitespace is part of a member. `record_out` quotes a member that is empty or
//! holds `"`, `\`, `(`, `)`, `,` or whitespace, doubling `"` and `\` inside.
//!
//! Every member's text goes through that member's own plan (a nested composite or an array
//! member recurses), so a value decodes exactly as it would in a column of the member's type.

use super::decode::MemberPlan;
use super::error::ValueErrorKind;

const EXPECTED_OPEN: &str = "`(` starting the record text of a composite value";
const EXPECTED_MORE: &str =
    "`,` and another member (the record has fewer members than its composite type)";
const EXPECTED_CLOSE: &str = "`)` (the record has more members than its composite type)";

/// Appends `{"member":value,...}` for one non-null record text.
pub(crate) fn write_record(
    text: &[u8],
    members: &[MemberPlan],
    out: &mut Vec<u8>,
) -> Result<(), ValueErrorKind> {
    let malformed = |at: usize, expected| ValueErrorKind::malformed(text, at, expected);
    let mut pos = skip_ws(text, 0);
    if text.get(pos) != Some(&b'(') {
        return Err(malformed(pos, EXPECTED_OPEN));
    }
    pos += 1;
    out.push(b'{');
    // Unquoted, unescaped bytes of members that had quotes or backslashes; most members have
    // neither and are decoded straight from `text`.
    let mut scratch = Vec::new();
    for (i, member) in members.iter().enumerate() {
        if i > 0 {
            if text.get(pos) != Some(&b',') {
                return Err(malformed(pos, EXPECTED_MORE));
            }
            pos += 1;
            out.push(b',');
        }
        out.extend_from_slice(member.json_key.as_bytes());
        out.push(b':');
        let in_member = |kind| ValueErrorKind::InMember {
            name: member.name.clone(),
            kind: Box::new(kind),
        };
        let (end, special) = scan_member(text, pos)?;
        let raw = text.get(pos..end).unwrap_or_default();
        pos = end;
        if raw.is_empty() {
            member.plan.write_null_kind(out).map_err(in_member)?;
        } else if special {
            unquote(raw, &mut scratch);
            member.plan.write_value(&scratch, out).map_err(in_member)?;
        } else {
            member.plan.write_value(raw, out).map_err(in_member)?;
        }
    }
    if text.get(pos) != Some(&b')') {
        return Err(malformed(pos, EXPECTED_CLOSE));
    }
    pos = skip_ws(text, pos + 1);
    if pos != text.len() {
        return Err(malformed(pos, "the end of the record after `)`"));
    }
    out.push(b'}');
    Ok(())
}

fn skip_ws(text: &[u8], mut pos: usize) -> usize {
    while text.get(pos).is_some_and(u8::is_ascii_whitespace) {
        pos += 1;
    }
    pos
}

/// Finds the end of the member starting at `start` (the `,` or `)` after it, outside
/// quotes) and whether it has quotes or backslashes to undo.
fn scan_member(text: &[u8], start: usize) -> Result<(usize, bool), ValueErrorKind> {
    let mut pos = start;
    let mut quoted = false;
    let mut special = false;
    loop {
        match text.get(pos) {
            None if quoted => return Err(ValueErrorKind::malformed(text, pos, "a closing `\"`")),
            None => return Err(ValueErrorKind::malformed(text, pos, "`,` or `)`")),
            Some(b',' | b')') if !quoted => return Ok((pos, special)),
            Some(b'\\') => {
                special = true;
                if text.get(pos + 1).is_none() {
                    return Err(ValueErrorKind::malformed(
                        text,
                        pos,
                        "a character after `\\`",
                    ));
                }
                pos += 2;
            }
            Some(b'"') => {
                special = true;
                if quoted && text.get(pos + 1) == Some(&b'"') {
                    pos += 2;
                } else {
                    quoted = !quoted;
                    pos += 1;
                }
            }
            Some(_) => pos += 1,
        }
    }
}

/// The member's value with quotes and backslashes undone, into `scratch` (cleared first).
/// `raw` is a whole member as `scan_member` delimited it, so every backslash has a byte
/// after it.
fn unquote(raw: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    let mut quoted = false;
    let mut bytes = raw.iter().copied().peekable();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => scratch.extend(bytes.next()),
            b'"' if quoted && bytes.peek() == Some(&b'"') => {
                bytes.next();
                scratch.push(b'"');
            }
            b'"' => quoted = !quoted,
            _ => scratch.push(b),
        }
    }
}
