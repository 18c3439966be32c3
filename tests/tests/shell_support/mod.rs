//! Peers for the shell tests: a PostgreSQL stand-in that plays a fixed byte conversation,
//! a tiny HTTP server, and a port nobody listens on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A port on 127.0.0.1 that refuses connections (bound, then released).
pub fn refused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

/// Reads until the bytes received so far end with `needle`; returns them.
fn read_until(stream: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(needle) {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => panic!(
                "peer closed before {:?}; got {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&got)
            ),
            Ok(_) => got.push(byte[0]),
        }
    }
    got
}

/// The PostgreSQL stand-in: accepts one connection and plays
/// `ping` → `pong`, `paused` → `held`, `bye` → end of stream.
pub struct PeerServer {
    pub addr: SocketAddr,
    thread: JoinHandle<Vec<String>>,
}

impl PeerServer {
    pub fn start() -> PeerServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut heard = Vec::new();
            for (expect, reply) in [("ping\n", "pong\n"), ("paused\n", "held\n")] {
                let got = read_until(&mut stream, expect.as_bytes());
                heard.push(String::from_utf8_lossy(&got).into_owned());
                stream.write_all(reply.as_bytes()).expect("reply");
            }
            let got = read_until(&mut stream, b"bye\n");
            heard.push(String::from_utf8_lossy(&got).into_owned());
            heard // dropping the stream ends it
        });
        PeerServer { addr, thread }
    }

    /// What the peer received, message by message.
    pub fn heard(self) -> Vec<String> {
        self.thread.join().expect("peer thread")
    }
}

/// A PostgreSQL stand-in that greets (`greeting\n` at once, so a shell that let bytes
/// overtake `PgConnected` would show it), then reads the connection to its end.
pub struct SinkServer {
    pub addr: SocketAddr,
    thread: JoinHandle<Vec<u8>>,
}

impl SinkServer {
    pub fn start() -> SinkServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            stream.write_all(b"greeting\n").expect("greet");
            let mut got = Vec::new();
            stream.read_to_end(&mut got).expect("read to the end");
            got
        });
        SinkServer { addr, thread }
    }

    /// Everything received before the connection was closed.
    pub fn heard(self) -> Vec<u8> {
        self.thread.join().expect("sink thread")
    }
}

/// One request the HTTP server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Lower-case header names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A tiny HTTP/1.1 server: `/ok` answers 200 `fine`, `/fail` answers 503 `busy`, anything
/// else 404. Keeps connections alive, as a real server would.
pub struct HttpServer {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl HttpServer {
    pub fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let record = record.clone();
                std::thread::spawn(move || serve(stream, &record));
            }
        });
        HttpServer { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn serve(stream: TcpStream, record: &Mutex<Vec<Seen>>) {
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let (status, body) = match request.path.as_str() {
            "/ok" => ("200 OK", "fine"),
            "/fail" => ("503 Service Unavailable", "busy"),
            _ => ("404 Not Found", "no such path"),
        };
        record.lock().expect("lock").push(request);
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse::<usize>().expect("content-length"));
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        path,
        headers,
        body,
    })
}
