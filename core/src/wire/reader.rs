//! A bounds-checked cursor over untrusted bytes.
//!
//! Every read checks the remaining length first and reports the offset it failed at, so the
//! decoders built on it are total without a single index or `unwrap` on wire data.

use crate::error::{DecodeError, DecodeErrorKind};

/// Reads big-endian integers, byte strings and C strings from a slice.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Offset of the next byte to read, from the start of the slice.
    pub fn offset(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// An error at the current offset.
    pub fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError::new(self.pos, kind)
    }

    /// A protocol error at the current offset.
    pub fn protocol_error(&self, message: impl Into<String>) -> DecodeError {
        DecodeError::protocol(self.pos, message)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let available = self.remaining();
        if n > available {
            return Err(self.error(DecodeErrorKind::UnexpectedEof {
                needed: n - available,
            }));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A length-prefixed field whose declared length must be in `0..=limit`; the limit is
    /// checked before anything is read so a hostile length never drives an allocation.
    pub fn len_i32(&mut self, limit: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let declared = self.i32()?;
        usize::try_from(declared)
            .ok()
            .filter(|len| *len <= limit)
            .ok_or(DecodeError::new(
                at,
                DecodeErrorKind::BadLength {
                    declared: i64::from(declared),
                    limit,
                },
            ))
    }

    /// A NUL-terminated string (without the NUL), which must be UTF-8.
    pub fn cstr(&mut self) -> Result<&'a str, DecodeError> {
        let start = self.pos;
        let rest = &self.buf[self.pos..];
        let nul = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or(DecodeError::new(start, DecodeErrorKind::UnterminatedString))?;
        let text = std::str::from_utf8(&rest[..nul])
            .map_err(|_| DecodeError::new(start, DecodeErrorKind::InvalidUtf8))?;
        self.pos += nul + 1;
        Ok(text)
    }

    /// A NUL-terminated byte string (without the NUL), in whatever encoding it came.
    pub fn cstr_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        let rest = &self.buf[self.pos..];
        let nul = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or(DecodeError::new(start, DecodeErrorKind::UnterminatedString))?;
        self.pos += nul + 1;
        Ok(&rest[..nul])
    }

    /// Everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(self.error(DecodeErrorKind::TrailingBytes { count })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_fields_and_cstrings() {
        let data = [0, 0, 0, 7, b'h', b'i', 0, 0xFF, 0xFE];
        let mut r = Reader::new(&data);
        assert_eq!(r.i32().unwrap(), 7);
        assert_eq!(r.cstr().unwrap(), "hi");
        assert_eq!(r.i16().unwrap(), -2);
        r.finish().unwrap();
    }

    #[test]
    fn short_input_reports_offset_and_missing_bytes() {
        let mut r = Reader::new(&[1, 2, 3]);
        r.u8().unwrap();
        let err = r.i32().unwrap_err();
        assert_eq!(err.offset, 1);
        assert_eq!(err.kind, DecodeErrorKind::UnexpectedEof { needed: 2 });
    }

    #[test]
    fn hostile_length_is_refused_before_reading() {
        let mut r = Reader::new(&[0x7F, 0xFF, 0xFF, 0xFF]);
        let err = r.len_i32(1024).unwrap_err();
        assert_eq!(err.offset, 0);
        assert!(matches!(
            err.kind,
            DecodeErrorKind::BadLength {
                declared: 2_147_483_647,
                ..
            }
        ));
        let mut r = Reader::new(&[0xFF, 0xFF, 0xFF, 0xFE]);
        assert!(matches!(
            r.len_i32(1024).unwrap_err().kind,
            DecodeErrorKind::BadLength { declared: -2, .. }
        ));
    }

    #[test]
    fn unterminated_and_non_utf8_strings_are_errors() {
        assert_eq!(
            Reader::new(b"abc").cstr().unwrap_err().kind,
            DecodeErrorKind::UnterminatedString
        );
        assert_eq!(
            Reader::new(&[0xC3, 0x28, 0]).cstr().unwrap_err().kind,
            DecodeErrorKind::InvalidUtf8
        );
    }

    #[test]
    fn byte_cstrings_accept_any_encoding_and_need_a_nul() {
        let mut r = Reader::new(&[0xE9, b'a', 0, b'b']);
        assert_eq!(r.cstr_bytes().unwrap(), &[0xE9, b'a']);
        assert_eq!(
            r.cstr_bytes().unwrap_err(),
            DecodeError::new(3, DecodeErrorKind::UnterminatedString)
        );
    }

    #[test]
    fn trailing_bytes_are_reported() {
        let mut r = Reader::new(&[1, 2]);
        r.u8().unwrap();
        assert_eq!(
            r.finish().unwrap_err().kind,
            DecodeErrorKind::TrailingBytes { count: 1 }
        );
    }
}
