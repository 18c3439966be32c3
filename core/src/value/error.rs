//! Errors of value decoding: what was wrong with one value's text, what is accepted, and
//! (wrapped with `in_column`) which table and column it belonged to.
//!
//! Messages never guess: each names the PostgreSQL type, the Feldera column type, what the
//! text looked like and what would have been accepted. They quote at most a short prefix of
//! the value so a log line stays bounded.

use std::fmt;

/// Longest prefix of an offending value quoted in a message, in bytes.
const EXCERPT_MAX_BYTES: usize = 40;

/// One value could not be turned into JSON for its column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueError {
    /// PostgreSQL type name (`int4`, `_text`, `addr (composite)`, `oid 16384`).
    pub pg_type: String,
    /// Feldera column type as SQL spells it (`SMALLINT NOT NULL`).
    pub target: String,
    pub kind: ValueErrorKind,
}

/// What was wrong with the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueErrorKind {
    /// SQL NULL for a NOT NULL column (or a NULL element of an array whose elements are NOT NULL).
    NullNotAllowed,
    /// The text is not UTF-8 (the session pins `client_encoding=UTF8`, so this is corruption).
    InvalidUtf8 { offset: usize },
    /// The text is not what this type's output function prints.
    Malformed {
        offset: usize,
        excerpt: String,
        expected: &'static str,
    },
    /// A well-formed value outside the column's range (integers, decimals).
    OutOfRange { excerpt: String, accepted: String },
    /// A value Feldera has no representation for (NaN, infinity, BC or year > 9999 dates,
    /// `24:00:00`), sent to a NOT NULL column; a nullable column receives `null` instead.
    Unrepresentable { excerpt: String, why: &'static str },
    /// An array whose number of dimensions does not match the nesting of the ARRAY column.
    Dimensions { found: usize, expected: usize },
    /// The error of one array element (index counts elements in text order from 0).
    InElement {
        index: usize,
        kind: Box<ValueErrorKind>,
    },
    /// The error of one member of a composite value (named as PostgreSQL names it).
    InMember {
        name: String,
        kind: Box<ValueErrorKind>,
    },
}

impl ValueErrorKind {
    pub(crate) fn malformed(text: &[u8], offset: usize, expected: &'static str) -> Self {
        ValueErrorKind::Malformed {
            offset,
            excerpt: excerpt(text),
            expected,
        }
    }

    pub(crate) fn unrepresentable(text: &[u8], why: &'static str) -> Self {
        ValueErrorKind::Unrepresentable {
            excerpt: excerpt(text),
            why,
        }
    }

    pub(crate) fn out_of_range(text: &[u8], accepted: String) -> Self {
        ValueErrorKind::OutOfRange {
            excerpt: excerpt(text),
            accepted,
        }
    }
}

/// A short, printable rendering of a value for messages: lossy UTF-8, escaped by `Debug`,
/// cut at `EXCERPT_MAX_BYTES`.
pub(crate) fn excerpt(text: &[u8]) -> String {
    let cut = text.len().min(EXCERPT_MAX_BYTES);
    let head = String::from_utf8_lossy(text.get(..cut).unwrap_or(text));
    if cut < text.len() {
        format!("{head:?}...")
    } else {
        format!("{head:?}")
    }
}

impl fmt::Display for ValueErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueErrorKind::NullNotAllowed => {
                f.write_str("NULL cannot be sent to a NOT NULL column")
            }
            ValueErrorKind::InvalidUtf8 { offset } => write!(
                f,
                "text is not valid UTF-8 at byte {offset} (the session pins client_encoding=UTF8)"
            ),
            ValueErrorKind::Malformed {
                offset,
                excerpt,
                expected,
            } => write!(
                f,
                "malformed value {excerpt} at byte {offset}: expected {expected}"
            ),
            ValueErrorKind::OutOfRange { excerpt, accepted } => {
                write!(f, "value {excerpt} is out of range: accepted {accepted}")
            }
            ValueErrorKind::Unrepresentable { excerpt, why } => write!(
                f,
                "value {excerpt} has no Feldera representation ({why}); it becomes null only \
                 in a nullable column"
            ),
            ValueErrorKind::Dimensions { found, expected } => write!(
                f,
                "array has {found} dimension(s), the column's ARRAY nesting accepts {expected} \
                 (or an empty array)"
            ),
            ValueErrorKind::InElement { index, kind } => {
                write!(f, "array element {index}: {kind}")
            }
            ValueErrorKind::InMember { name, kind } => write!(f, "member {name}: {kind}"),
        }
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PostgreSQL {} value for Feldera {}: {}",
            self.pg_type, self.target, self.kind
        )
    }
}

impl std::error::Error for ValueError {}

impl ValueError {
    /// Names the table and column the value belonged to.
    pub fn in_column(
        self,
        table: impl Into<String>,
        column: impl Into<String>,
    ) -> ColumnValueError {
        ColumnValueError {
            table: table.into(),
            column: column.into(),
            error: self,
        }
    }
}

/// A `ValueError` with the table and column it happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnValueError {
    pub table: String,
    pub column: String,
    pub error: ValueError,
}

impl fmt::Display for ColumnValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {} column {} (PostgreSQL {} -> Feldera {}): {}",
            self.table, self.column, self.error.pg_type, self.error.target, self.error.kind
        )
    }
}

impl std::error::Error for ColumnValueError {}
