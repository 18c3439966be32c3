//! Opt-in capture of request bodies (`DoubleConfig::with_body_capture`): a copy of every byte
//! a `/v0` handler read from a request's body, kept with the request's number and path, so
//! a test can assert on what went over the wire and not only on the tables it produced (a
//! column the publication leaves out must never be sent, even if a later change would have
//! overwritten it).
//!
//! The copy is taken as the handler reads, frame by frame, so capturing changes nothing of
//! how a body is read (records still queue as their lines arrive). An ingress handler reads
//! its body to the end, or up to the drain limit when it answered early, so an ingress
//! body is captured whole; a body no handler reads (none of slotline's other requests has
//! one) is not captured. Requests with an empty body are not kept.
//!
//! Owns: the tee around a request body and the captured copies. Never parses a body.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::Frame;

/// One captured request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedBody {
    /// The request's number in the request log (`RequestRecord::seq`).
    pub seq: u64,
    /// Path and query as received (still percent-encoded).
    pub path: String,
    /// Every byte of the body the handler read, in order.
    pub body: Vec<u8>,
}

impl CapturedBody {
    /// Whether the body holds `needle` anywhere (a split across frames included).
    pub fn contains(&self, needle: &[u8]) -> bool {
        !needle.is_empty() && self.body.windows(needle.len()).any(|w| w == needle)
    }

    /// The body as text (invalid UTF-8 replaced), for failure messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Where the bytes read of one body go while its handler runs.
pub type Sink = Arc<Mutex<Vec<u8>>>;

/// A request body that copies every data frame it yields into its sink.
struct Tee {
    inner: Body,
    sink: Sink,
}

impl http_body::Body for Tee {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.sink
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(data);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// `body` wrapped so that what is read of it lands in the returned sink as well.
pub fn tee(body: Body) -> (Body, Sink) {
    let sink = Sink::default();
    let body = Body::new(Tee {
        inner: body,
        sink: sink.clone(),
    });
    (body, sink)
}

/// The captured bodies of one double, in the order their handlers finished.
#[derive(Debug, Default)]
pub struct Captured {
    bodies: Mutex<Vec<CapturedBody>>,
}

impl Captured {
    /// Keeps what the handler of request `seq` read of its body (nothing when empty).
    pub fn keep(&self, seq: u64, path: String, sink: &Sink) {
        let body = std::mem::take(&mut *sink.lock().unwrap_or_else(PoisonError::into_inner));
        if body.is_empty() {
            return;
        }
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(CapturedBody { seq, path, body });
    }

    pub fn bodies(&self) -> Vec<CapturedBody> {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn clear(&self) {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    /// A body that yields its pieces one frame each.
    struct Frames(VecDeque<&'static str>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(
                self.0
                    .pop_front()
                    .map(|piece| Ok(Frame::data(Bytes::from_static(piece.as_bytes())))),
            )
        }
    }

    #[test]
    fn a_tee_copies_every_frame_read_and_a_needle_split_across_frames_is_found() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let pieces = VecDeque::from(["{\"insert\": {\"s\": \"SEC", "RET-1\"}}\n"]);
        let (mut body, sink) = tee(Body::new(Frames(pieces)));
        let read = runtime.block_on(async {
            let mut read = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                read.extend_from_slice(frame.data_ref().expect("a data frame"));
            }
            read
        });
        assert_eq!(read, b"{\"insert\": {\"s\": \"SECRET-1\"}}\n");
        let captured = Captured::default();
        captured.keep(7, "/v0/pipelines/p/ingress/t".to_owned(), &sink);
        captured.keep(8, "/v0/pipelines/p/stats".to_owned(), &Sink::default());
        let bodies = captured.bodies();
        assert_eq!(bodies.len(), 1, "empty bodies are not kept");
        assert_eq!(bodies[0].seq, 7);
        assert_eq!(bodies[0].body, read);
        assert!(bodies[0].contains(b"SECRET-1"));
        assert!(!bodies[0].contains(b"SECRET-2"));
        captured.clear();
        assert!(captured.bodies().is_empty());
    }
}
