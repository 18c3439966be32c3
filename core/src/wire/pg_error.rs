//! The fields of ErrorResponse and NoticeResponse as one typed value, [`PgError`].
//!
//! This module owns parsing the field list and printing it for a log. It never decides what
//! an error means for a connection (that is `conn`). Field values are decoded lossily: an
//! error raised before `client_encoding` took effect may arrive in the server's encoding,
//! and a server's error must never be lost to a decoding failure of its own text.

use std::fmt;

use crate::error::DecodeError;
use crate::wire::Reader;

/// An error or notice reported by the server, with the fields PostgreSQL documents in
/// "Error and Notice Message Fields". Unknown field types are ignored, as the manual asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgError {
    /// `S`: ERROR, FATAL, PANIC, WARNING, NOTICE, DEBUG, INFO or LOG, possibly localized.
    pub severity: String,
    /// `V`: the same severity, never localized (PostgreSQL 9.6+).
    pub severity_nonlocalized: Option<String>,
    /// `C`: the SQLSTATE code, e.g. `42P01`.
    pub code: String,
    /// `M`: the primary message.
    pub message: String,
    /// `D`
    pub detail: Option<String>,
    /// `H`
    pub hint: Option<String>,
    /// `P`: 1-based character position in the query string.
    pub position: Option<u32>,
    /// `p`: position in an internally generated query (`q`).
    pub internal_position: Option<u32>,
    /// `q`
    pub internal_query: Option<String>,
    /// `W`: the context (call stack) of the error.
    pub where_: Option<String>,
    /// `s`, `t`, `c`, `d`, `n`: the object the error concerns.
    pub schema: Option<String>,
    pub table: Option<String>,
    pub column: Option<String>,
    pub data_type: Option<String>,
    pub constraint: Option<String>,
    /// `F`, `L`, `R`: where in the server's source the error was raised.
    pub file: Option<String>,
    pub line: Option<u32>,
    pub routine: Option<String>,
}

impl PgError {
    /// The severity to act on: the non-localized one when the server sent it.
    pub fn effective_severity(&self) -> &str {
        self.severity_nonlocalized
            .as_deref()
            .unwrap_or(&self.severity)
    }

    /// FATAL and PANIC end the session: the server closes the connection after sending them.
    pub fn is_fatal(&self) -> bool {
        matches!(self.effective_severity(), "FATAL" | "PANIC")
    }

    /// Parses the body of an ErrorResponse or NoticeResponse. `S`, `C` and `M` are required
    /// (the manual says they are always present); everything else is optional.
    pub fn parse(body: &[u8]) -> Result<PgError, DecodeError> {
        let mut r = Reader::new(body);
        let mut out = PgError::default();
        let (mut has_severity, mut has_code, mut has_message) = (false, false, false);
        loop {
            let at = r.offset();
            let field = r.u8()?;
            if field == 0 {
                break;
            }
            let value = String::from_utf8_lossy(r.cstr_bytes()?).into_owned();
            let number = || value.parse::<u32>().ok();
            match field {
                b'S' => (out.severity, has_severity) = (value, true),
                b'V' => out.severity_nonlocalized = Some(value),
                b'C' => (out.code, has_code) = (value, true),
                b'M' => (out.message, has_message) = (value, true),
                b'D' => out.detail = Some(value),
                b'H' => out.hint = Some(value),
                b'P' => out.position = Some(number().ok_or_else(|| bad_number(at, 'P'))?),
                b'p' => out.internal_position = Some(number().ok_or_else(|| bad_number(at, 'p'))?),
                b'q' => out.internal_query = Some(value),
                b'W' => out.where_ = Some(value),
                b's' => out.schema = Some(value),
                b't' => out.table = Some(value),
                b'c' => out.column = Some(value),
                b'd' => out.data_type = Some(value),
                b'n' => out.constraint = Some(value),
                b'F' => out.file = Some(value),
                // The line is informational; a strange value there is not worth an error.
                b'L' => out.line = number(),
                b'R' => out.routine = Some(value),
                _ => {}
            }
        }
        r.finish()?;
        for (present, name) in [
            (has_severity, "severity (S)"),
            (has_code, "SQLSTATE code (C)"),
            (has_message, "message (M)"),
        ] {
            if !present {
                return Err(DecodeError::protocol(
                    0,
                    format!("error/notice fields lack the required {name} field"),
                ));
            }
        }
        Ok(out)
    }
}

fn bad_number(at: usize, field: char) -> DecodeError {
    DecodeError::protocol(
        at,
        format!("error field '{field}' must be a decimal position"),
    )
}

/// One line for a log: `ERROR 42P01: relation "x" does not exist (detail: ...; hint: ...)`.
///
/// The position (`P`) is left out: it counts characters of the query string, and every
/// query is slotline's own (its catalog questions, its replication commands, its COPY), which
/// the operator never wrote nor saw; the message around the error names the question that
/// failed instead.
impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.effective_severity(),
            self.code,
            self.message
        )?;
        let mut extras: Vec<String> = Vec::new();
        let mut push = |label: &str, value: &Option<String>| {
            if let Some(value) = value {
                extras.push(format!("{label}: {value}"));
            }
        };
        push("detail", &self.detail);
        push("hint", &self.hint);
        push("where", &self.where_);
        push("schema", &self.schema);
        push("table", &self.table);
        push("column", &self.column);
        push("constraint", &self.constraint);
        if !extras.is_empty() {
            write!(f, " ({})", extras.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DecodeErrorKind;

    fn fields(pairs: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (tag, value) in pairs {
            out.push(*tag);
            out.extend_from_slice(value);
            out.push(0);
        }
        out.push(0);
        out
    }

    #[test]
    fn parses_documented_fields_and_prints_a_log_line() {
        let body = fields(&[
            (b'S', b"ERREUR"),
            (b'V', b"ERROR"),
            (b'C', b"42P01"),
            (b'M', b"relation \"nope\" does not exist"),
            (b'P', b"15"),
            (b'H', b"check the name"),
            (b'F', b"parse_relation.c"),
            (b'L', b"1392"),
            (b'R', b"parserOpenTable"),
            (b'Z', b"unknown fields are ignored"),
        ]);
        let err = PgError::parse(&body).unwrap();
        assert_eq!(err.severity, "ERREUR");
        assert_eq!(err.effective_severity(), "ERROR");
        assert_eq!(err.code, "42P01");
        assert_eq!(err.position, Some(15));
        assert_eq!(err.line, Some(1392));
        assert!(!err.is_fatal());
        // The position points into slotline's own SQL: kept, never printed.
        assert_eq!(
            err.to_string(),
            "ERROR 42P01: relation \"nope\" does not exist (hint: check the name)"
        );
    }

    #[test]
    fn fatal_and_panic_are_fatal() {
        for severity in ["FATAL", "PANIC"] {
            let body = fields(&[(b'S', severity.as_bytes()), (b'C', b"57P01"), (b'M', b"x")]);
            assert!(PgError::parse(&body).unwrap().is_fatal());
        }
    }

    #[test]
    fn non_utf8_text_is_kept_lossily() {
        let body = fields(&[(b'S', b"FATAL"), (b'C', b"28P01"), (b'M', b"caf\xe9")]);
        assert_eq!(PgError::parse(&body).unwrap().message, "caf\u{FFFD}");
    }

    #[test]
    fn missing_required_fields_and_broken_lists_are_errors() {
        let no_code = fields(&[(b'S', b"ERROR"), (b'M', b"x")]);
        let err = PgError::parse(&no_code).unwrap_err();
        assert!(err.to_string().contains("SQLSTATE"), "{err}");

        let unterminated = b"SERROR\0CXX000";
        assert_eq!(
            PgError::parse(unterminated).unwrap_err().kind,
            DecodeErrorKind::UnterminatedString
        );

        let mut trailing = fields(&[(b'S', b"ERROR"), (b'C', b"XX000"), (b'M', b"x")]);
        trailing.push(1);
        assert_eq!(
            PgError::parse(&trailing).unwrap_err().kind,
            DecodeErrorKind::TrailingBytes { count: 1 }
        );

        let bad_position = fields(&[(b'S', b"E"), (b'C', b"X"), (b'M', b"x"), (b'P', b"-1")]);
        // "SE\0", "CX\0", "Mx\0": the P field starts at byte 9.
        assert_eq!(PgError::parse(&bad_position).unwrap_err().offset, 9);
    }
}
