//! Cutting the backend byte stream into frames: one tag byte, a 32-bit length that counts
//! itself, and the body.
//!
//! This module owns buffering and the length check. It never interprets a body (that is
//! `backend`), and it never reserves memory because a header said so: the buffer grows only
//! with bytes that actually arrived, so a header claiming 4 GiB costs five bytes until the
//! gigabytes show up, and a header above [`MAX_FRAME_LEN`] is refused at once.
//! `postgres_protocol::message::backend::Message::parse` is deliberately not used here: it
//! reserves the declared length and does not know CopyBothResponse (`'W'`).

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, DecodeErrorKind};

/// Largest accepted value of a frame's length field (which counts its own four bytes).
///
/// PostgreSQL builds every outgoing message in one `StringInfo`, which cannot exceed
/// `MaxAllocSize` (1 GiB - 1), so no real message is larger; the 1 MiB of slack keeps a
/// margin for headers without letting a corrupt length run away.
pub const MAX_FRAME_LEN: u32 = (1 << 30) + (1 << 20);

/// Size of the frame header: tag byte plus the 32-bit length.
pub const HEADER_LEN: usize = 5;

/// One complete backend message, not yet interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The message type byte (`'D'`, `'Z'`, `'W'`, ...).
    pub tag: u8,
    /// The body after the length field; a slice of the received bytes (no copy).
    pub body: Bytes,
    /// Stream offset of the tag byte: the number of bytes received before this frame.
    pub offset: u64,
}

/// Accumulates backend bytes pushed in arbitrary chunks and yields complete frames.
#[derive(Debug)]
pub struct Framer {
    buf: BytesMut,
    /// Stream offset of the first byte in `buf`.
    offset: u64,
    max_frame_len: u32,
    failed: Option<DecodeError>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new()
    }
}

impl Framer {
    /// A framer that accepts lengths up to [`MAX_FRAME_LEN`].
    pub fn new() -> Self {
        Framer::with_max_frame_len(MAX_FRAME_LEN)
    }

    /// A framer with a tighter cap on the length field (for connections whose messages
    /// are known to be small, and for tests). Values above [`MAX_FRAME_LEN`] are clamped.
    pub fn with_max_frame_len(max_frame_len: u32) -> Self {
        Framer {
            buf: BytesMut::new(),
            offset: 0,
            max_frame_len: max_frame_len.clamp(4, MAX_FRAME_LEN),
            failed: None,
        }
    }

    /// Appends received bytes. After an error the bytes are dropped: nothing after a broken
    /// frame can be trusted.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes received but not yet handed out as frames.
    pub fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed. Errors latch: once a
    /// header is refused, every later call returns the same error.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let Some(len) = self.check_header() else {
            return Ok(None);
        };
        let len = match len {
            Ok(len) => len,
            Err(err) => {
                self.buf = BytesMut::new();
                self.failed = Some(err.clone());
                return Err(err);
            }
        };
        // `len` counts the length field itself but not the tag.
        let total = len + 1;
        if self.buf.len() < total {
            return Ok(None);
        }
        let mut frame = self.buf.split_to(total).freeze();
        let tag = frame.split_to(HEADER_LEN).first().copied().unwrap_or(0);
        let offset = self.offset;
        self.offset += total as u64;
        Ok(Some(Frame {
            tag,
            body: frame,
            offset,
        }))
    }

    /// The declared frame length once a whole header is buffered, checked against the cap.
    fn check_header(&self) -> Option<Result<usize, DecodeError>> {
        let header: [u8; HEADER_LEN] = self.buf.get(..HEADER_LEN)?.try_into().ok()?;
        let declared = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        if !(4..=self.max_frame_len).contains(&declared) {
            let at = usize::try_from(self.offset + 1).unwrap_or(usize::MAX);
            return Some(Err(DecodeError::new(
                at,
                DecodeErrorKind::BadLength {
                    declared: i64::from(declared),
                    limit: self.max_frame_len as usize,
                },
            )));
        }
        Some(Ok(declared as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame_bytes(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn drain(framer: &mut Framer) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(frame) = framer.next_frame().unwrap() {
            out.push(frame);
        }
        out
    }

    #[test]
    fn yields_tag_body_and_stream_offset() {
        let mut framer = Framer::new();
        let mut bytes = frame_bytes(b'Z', b"I");
        bytes.extend(frame_bytes(b'c', b""));
        framer.push(&bytes);
        let frames = drain(&mut framer);
        assert_eq!(frames.len(), 2);
        assert_eq!(
            (frames[0].tag, &frames[0].body[..], frames[0].offset),
            (b'Z', &b"I"[..], 0)
        );
        assert_eq!(
            (frames[1].tag, &frames[1].body[..], frames[1].offset),
            (b'c', &b""[..], 6)
        );
        assert_eq!(framer.buffered_len(), 0);
    }

    #[test]
    fn copy_both_response_is_framed_like_any_other_tag() {
        let mut framer = Framer::new();
        framer.push(&frame_bytes(b'W', &[0, 0, 0]));
        let frame = framer.next_frame().unwrap().unwrap();
        assert_eq!(frame.tag, b'W');
        assert_eq!(&frame.body[..], &[0, 0, 0]);
    }

    #[test]
    fn four_gib_header_is_refused_without_allocating() {
        let mut framer = Framer::new();
        framer.push(&[b'D', 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]);
        let err = framer.next_frame().unwrap_err();
        assert_eq!(err.offset, 1);
        assert_eq!(
            err.kind,
            DecodeErrorKind::BadLength {
                declared: 0xFFFF_FFFF,
                limit: MAX_FRAME_LEN as usize
            }
        );
        assert!(framer.buf.capacity() < 1024, "{}", framer.buf.capacity());
    }

    #[test]
    fn header_just_under_the_cap_waits_without_reserving_the_declared_length() {
        let mut framer = Framer::new();
        let mut bytes = vec![b'D'];
        bytes.extend_from_slice(&MAX_FRAME_LEN.to_be_bytes());
        bytes.extend_from_slice(&[7; 100]);
        framer.push(&bytes);
        assert_eq!(framer.next_frame().unwrap(), None);
        assert!(
            framer.buf.capacity() < 64 * 1024,
            "{}",
            framer.buf.capacity()
        );
        framer.push(&[b'D', 0x00]);
        assert_eq!(framer.next_frame().unwrap(), None);
    }

    #[test]
    fn length_one_above_the_cap_is_refused() {
        let mut framer = Framer::new();
        let mut bytes = vec![b'D'];
        bytes.extend_from_slice(&(MAX_FRAME_LEN + 1).to_be_bytes());
        framer.push(&bytes);
        assert!(matches!(
            framer.next_frame().unwrap_err().kind,
            DecodeErrorKind::BadLength { .. }
        ));
    }

    #[test]
    fn lengths_below_four_are_refused_and_the_error_latches() {
        for declared in 0u32..4 {
            let mut framer = Framer::new();
            let mut bytes = vec![b'Z'];
            bytes.extend_from_slice(&declared.to_be_bytes());
            framer.push(&bytes);
            let err = framer.next_frame().unwrap_err();
            framer.push(&frame_bytes(b'Z', b"I"));
            assert_eq!(framer.next_frame().unwrap_err(), err);
            assert_eq!(framer.buffered_len(), 0);
        }
    }

    #[test]
    fn a_tighter_cap_is_honoured_and_reported() {
        let mut framer = Framer::with_max_frame_len(16);
        framer.push(&frame_bytes(b'd', &[0; 12]));
        assert!(framer.next_frame().unwrap().is_some());
        framer.push(&frame_bytes(b'd', &[0; 13]));
        let err = framer.next_frame().unwrap_err();
        assert_eq!(err.offset, 18);
        assert_eq!(
            err.kind,
            DecodeErrorKind::BadLength {
                declared: 17,
                limit: 16
            }
        );
    }

    fn arb_frames() -> impl Strategy<Value = Vec<(u8, Vec<u8>)>> {
        proptest::collection::vec(
            (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..40)),
            0..8,
        )
    }

    proptest! {
        #[test]
        fn chunking_never_changes_the_frames(frames in arb_frames(), cuts in proptest::collection::vec(any::<usize>(), 0..10)) {
            let stream: Vec<u8> = frames.iter().flat_map(|(t, b)| frame_bytes(*t, b)).collect();

            let mut whole = Framer::new();
            whole.push(&stream);
            let expected = drain(&mut whole);
            prop_assert_eq!(expected.len(), frames.len());
            for (frame, (tag, body)) in expected.iter().zip(&frames) {
                prop_assert_eq!(frame.tag, *tag);
                prop_assert_eq!(&frame.body[..], &body[..]);
            }

            let mut bytewise = Framer::new();
            let mut got = Vec::new();
            for byte in &stream {
                bytewise.push(std::slice::from_ref(byte));
                got.extend(drain(&mut bytewise));
            }
            prop_assert_eq!(&got, &expected);

            let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut chunked = Framer::new();
            let mut got = Vec::new();
            let mut start = 0;
            for point in points.into_iter().chain([stream.len()]) {
                chunked.push(&stream[start..point]);
                got.extend(drain(&mut chunked));
                start = point;
            }
            prop_assert_eq!(&got, &expected);
        }

        #[test]
        fn split_at_every_boundary_gives_the_same_frames(frames in arb_frames()) {
            let stream: Vec<u8> = frames.iter().flat_map(|(t, b)| frame_bytes(*t, b)).collect();
            let mut whole = Framer::new();
            whole.push(&stream);
            let expected = drain(&mut whole);
            for split in 0..=stream.len() {
                let mut framer = Framer::new();
                framer.push(&stream[..split]);
                let mut got = drain(&mut framer);
                framer.push(&stream[split..]);
                got.extend(drain(&mut framer));
                prop_assert_eq!(&got, &expected);
            }
        }
    }
}
