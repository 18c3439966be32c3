use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

fn get(url: String, timeout_ms: u64) -> HttpRequest {
    HttpRequest {
        method: Method::Get,
        url,
        headers: vec![("Authorization", "Bearer k".to_owned())],
        body: Bytes::new(),
        timeout_ms,
        streamed: false,
    }
}

/// Reads one body-less request head; false at end of stream.
fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => return false,
            Ok(_) => head.push(byte[0]),
        }
    }
    true
}

/// Answers every request with `status` and `body`, keeping connections alive; counts
/// accepted connections.
fn keep_alive_server(status: &'static str, body: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/x", listener.local_addr().expect("addr"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                while read_head(&mut stream) {
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, accepted)
}

#[test]
fn client_error_statuses_are_answers_not_failures() {
    let (url, _) = keep_alive_server("404 Not Found", "no such pipeline");
    let result = perform(&new_agent(None), HttpId(7), &get(url, 5_000));
    assert_eq!(
        result,
        Input::HttpDone {
            id: HttpId(7),
            status: 404,
            body: Bytes::from_static(b"no such pipeline"),
        }
    );
}

#[test]
fn redirects_are_answers_too() {
    let (url, _) = keep_alive_server("307 Temporary Redirect\r\nlocation: /elsewhere", "");
    match perform(&new_agent(None), HttpId(1), &get(url, 5_000)) {
        Input::HttpDone { status, .. } => assert_eq!(status, 307),
        other => panic!("expected HttpDone, got {other:?}"),
    }
}

#[test]
fn sequential_requests_reuse_one_connection() {
    let (url, accepted) = keep_alive_server("200 OK", "ok");
    let agent = new_agent(None);
    for id in 0..3 {
        let result = perform(&agent, HttpId(id), &get(url.clone(), 5_000));
        assert!(
            matches!(result, Input::HttpDone { status: 200, .. }),
            "{result:?}"
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn a_silent_server_fails_the_request_at_its_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/slow", listener.local_addr().expect("addr"));
    // Accepts, then never answers (the stream stays open until the thread ends).
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let start = Instant::now();
    let result = perform(&new_agent(None), HttpId(2), &get(url, 300));
    let waited = start.elapsed();
    match result {
        Input::HttpFailed { id, error } => {
            assert_eq!(id, HttpId(2));
            assert!(error.to_lowercase().contains("timeout"), "{error}");
        }
        other => panic!("expected HttpFailed, got {other:?}"),
    }
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

#[test]
fn the_pool_runs_requests_concurrently_and_delivers_each_result_once() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/slow", listener.local_addr().expect("addr"));
    // Answers each request after 300 ms: four in a row would take 1.2 s.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                while read_head(&mut stream) {
                    std::thread::sleep(Duration::from_millis(300));
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    let (results, received) = crossbeam_channel::unbounded();
    let pool = HttpPool::start(
        4,
        new_agent(None),
        Arc::new(move |input| {
            let _ = results.send(input);
        }),
    )
    .expect("pool");
    let start = Instant::now();
    for id in 0..4 {
        pool.submit(HttpId(id), get(url.clone(), 5_000));
    }
    let mut ids: Vec<u64> = (0..4)
        .map(|_| match received.recv_timeout(Duration::from_secs(5)) {
            Ok(Input::HttpDone {
                id, status: 200, ..
            }) => id.0,
            other => panic!("{other:?}"),
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3]);
    // One after the other would take at least 1.2 s.
    assert!(
        start.elapsed() < Duration::from_millis(1200),
        "{:?}",
        start.elapsed()
    );
    assert!(received.recv_timeout(Duration::from_millis(100)).is_err());
}

fn wrapped(error: rustls::Error) -> ureq::Error {
    ureq::Error::Io(io::Error::new(io::ErrorKind::InvalidData, error))
}

#[test]
fn an_unknown_issuer_names_feldera_ca_cert_as_the_fix() {
    let text = describe(&wrapped(rustls::Error::InvalidCertificate(
        CertificateError::UnknownIssuer,
    )));
    assert_eq!(
        text,
        "Feldera's TLS certificate is not trusted: no trusted CA signed it (invalid peer \
         certificate: UnknownIssuer); if a private CA signed it, set FELDERA_CA_CERT to a PEM \
         file holding that CA"
    );
}

#[test]
fn a_name_mismatch_names_the_host_of_feldera_url() {
    let text = describe(&ureq::Error::Rustls(rustls::Error::InvalidCertificate(
        CertificateError::NotValidForName,
    )));
    assert!(
        text.starts_with("Feldera's TLS certificate does not name the host of FELDERA_URL"),
        "{text}"
    );
    assert!(!text.contains("FELDERA_CA_CERT"), "{text}");
}

#[test]
fn other_tls_failures_say_tls_and_other_errors_keep_ureqs_text() {
    let expired = describe(&wrapped(rustls::Error::InvalidCertificate(
        CertificateError::Expired,
    )));
    assert!(
        expired.starts_with(
            "Feldera's TLS certificate was refused (invalid peer certificate: Expired"
        ),
        "{expired}"
    );
    let handshake = describe(&wrapped(rustls::Error::HandshakeNotComplete));
    assert!(
        handshake.starts_with("TLS handshake with Feldera failed: "),
        "{handshake}"
    );
    let plain = ureq::Error::Io(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
    assert_eq!(describe(&plain), plain.to_string());
}

/// Answers one request with a chunked 200 body of `total` bytes of NDJSON-like lines,
/// counting the bytes the socket accepted; `closed` turns true when a write fails (the
/// client closed the connection).
fn streaming_server(
    total: usize,
) -> (String, Arc<AtomicUsize>, Arc<std::sync::atomic::AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/q", listener.local_addr().expect("addr"));
    let written = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (count, gone) = (written.clone(), closed.clone());
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        read_head(&mut stream);
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let line = b"{\"k0\":1234567890}\n";
        let piece: Vec<u8> = line.iter().copied().cycle().take(8 * 1024).collect();
        let mut sent = 0;
        while sent < total {
            let n = piece.len().min(total - sent);
            let chunk = [format!("{n:x}\r\n").as_bytes(), &piece[..n], b"\r\n"].concat();
            if stream.write_all(&chunk).is_err() {
                gone.store(true, Ordering::SeqCst);
                return;
            }
            sent += n;
            count.store(sent, Ordering::SeqCst);
        }
        let _ = stream.write_all(b"0\r\n\r\n");
    });
    (url, written, closed)
}

/// A pool whose inputs arrive on the returned channel.
fn pool() -> (HttpPool, Receiver<Input>) {
    let (to_test, inputs) = crossbeam_channel::unbounded();
    let deliver: Deliver = Arc::new(move |input| {
        let _ = to_test.send(input);
    });
    (
        HttpPool::start(2, new_agent(None), deliver).expect("pool"),
        inputs,
    )
}

fn next(inputs: &Receiver<Input>) -> Input {
    inputs
        .recv_timeout(Duration::from_secs(20))
        .expect("an input within 20 s")
}

#[test]
fn a_streamed_answer_comes_in_pieces_each_read_only_when_asked_for() {
    const TOTAL: usize = 64 << 20;
    let (url, written, _) = streaming_server(TOTAL);
    let (pool, inputs) = pool();
    let mut request = get(url, 60_000);
    request.streamed = true;
    pool.submit(HttpId(3), request);
    let Input::HttpChunk { id, bytes } = next(&inputs) else {
        panic!("a piece first")
    };
    assert_eq!(id, HttpId(3));
    assert!((STREAM_PIECE_MIN..=STREAM_PIECE_MAX).contains(&bytes.len()));
    // Nothing more is read until asked for: the server stalls once the socket buffers
    // are full, far short of the whole answer.
    std::thread::sleep(Duration::from_millis(300));
    assert!(inputs.is_empty(), "no piece before HttpRead");
    let stalled = written.load(Ordering::SeqCst);
    assert!(
        stalled < TOTAL / 2,
        "the server wrote {stalled} of {TOTAL} bytes"
    );
    let mut received = bytes.len();
    loop {
        pool.read_more(HttpId(3));
        match next(&inputs) {
            Input::HttpChunk { bytes, .. } => {
                assert!(bytes.len() <= STREAM_PIECE_MAX);
                received += bytes.len();
            }
            Input::HttpDone { status, body, .. } => {
                assert_eq!((status, body.len()), (200, 0));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(received, TOTAL);
}

#[test]
fn a_cancelled_stream_closes_its_connection_and_ends_once() {
    let (url, _, closed) = streaming_server(64 << 20);
    let (pool, inputs) = pool();
    let mut request = get(url, 60_000);
    request.streamed = true;
    pool.submit(HttpId(4), request);
    assert!(matches!(next(&inputs), Input::HttpChunk { .. }));
    pool.cancel(HttpId(4));
    match next(&inputs) {
        Input::HttpFailed { id, error } => {
            assert_eq!(id, HttpId(4));
            assert!(error.contains("cancelled"), "{error}");
        }
        other => panic!("expected HttpFailed, got {other:?}"),
    }
    let start = Instant::now();
    while !closed.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        closed.load(Ordering::SeqCst),
        "the server saw the connection closed"
    );
    pool.read_more(HttpId(4));
    pool.cancel(HttpId(4));
    assert!(
        inputs.recv_timeout(Duration::from_millis(300)).is_err(),
        "nothing more after the end"
    );
}

#[test]
fn a_streamed_request_answered_with_an_error_comes_whole() {
    let (url, _) = keep_alive_server("503 Service Unavailable", "{\"error_code\":\"x\"}");
    let (pool, inputs) = pool();
    let mut request = get(url, 5_000);
    request.streamed = true;
    pool.submit(HttpId(5), request);
    assert_eq!(
        next(&inputs),
        Input::HttpDone {
            id: HttpId(5),
            status: 503,
            body: Bytes::from_static(b"{\"error_code\":\"x\"}"),
        }
    );
}
