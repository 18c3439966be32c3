//! The one error type of every decoder: where in the input it failed, and why.
//!
//! Decoders are total: any byte string gives a value or a `DecodeError`, never a panic and
//! never an allocation sized by an untrusted length.

use std::fmt;

/// A decoding failure at a byte offset of the input that was being decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset (in bytes) from the start of the buffer handed to the decoder.
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

/// What was wrong. Every variant names what was expected where that helps a reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ended while `needed` more bytes were required.
    UnexpectedEof { needed: usize },
    /// A declared length is negative or larger than the limit for that field.
    BadLength { declared: i64, limit: usize },
    /// A tag byte that this position does not allow.
    UnknownTag { context: &'static str, tag: u8 },
    /// A string that is not NUL-terminated within the message.
    UnterminatedString,
    /// Text that is not UTF-8 where UTF-8 is required.
    InvalidUtf8,
    /// A message had bytes left over after its last field.
    TrailingBytes { count: usize },
    /// Structurally valid bytes that contradict the protocol (with an explanation).
    Protocol(String),
}

impl DecodeError {
    pub fn new(offset: usize, kind: DecodeErrorKind) -> Self {
        DecodeError { offset, kind }
    }

    pub fn protocol(offset: usize, message: impl Into<String>) -> Self {
        DecodeError::new(offset, DecodeErrorKind::Protocol(message.into()))
    }

    /// The same error, with its offset moved by `base` (for a buffer nested in another).
    pub fn shifted(mut self, base: usize) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeErrorKind::UnexpectedEof { needed } => {
                write!(f, "input ended; {needed} more byte(s) were needed")
            }
            DecodeErrorKind::BadLength { declared, limit } => {
                write!(f, "declared length {declared} is outside 0..={limit}")
            }
            DecodeErrorKind::UnknownTag { context, tag } => {
                write!(
                    f,
                    "unknown {context} tag {:?} (0x{tag:02X})",
                    char::from(*tag)
                )
            }
            DecodeErrorKind::UnterminatedString => write!(f, "string is not NUL-terminated"),
            DecodeErrorKind::InvalidUtf8 => write!(f, "text is not valid UTF-8"),
            DecodeErrorKind::TrailingBytes { count } => {
                write!(f, "{count} unexpected byte(s) after the last field")
            }
            DecodeErrorKind::Protocol(message) => f.write_str(message),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "decode error at byte {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for DecodeError {}
