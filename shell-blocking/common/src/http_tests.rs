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
