//! A small blocking driver for `slotline_core::conn::Connection` over a real TCP socket:
//! the minimum shell needed to test the conversation machine against a real server.
//!
//! It follows the machine's drive contract (feed bytes, then drain transmit and events) and
//! nothing else: no retries, no decisions. Every wait has a timeout so a test fails instead
//! of hanging.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use slotline_core::conn::{Connection, ConnectionConfig, Event, Phase};

/// How long one read may block before the driver gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// One connection: a socket and the machine that speaks on it.
#[derive(Debug)]
pub struct Driver {
    stream: TcpStream,
    conn: Connection,
    events: VecDeque<Event>,
    eof: bool,
    /// Every byte received since `start_recording`, exactly as the server framed it.
    recording: Option<Vec<u8>>,
}

impl Driver {
    /// Connects, runs startup and authentication, and returns once the connection is ready
    /// with every startup event, or the failure as text.
    pub fn connect(port: u16, config: ConnectionConfig) -> Result<(Driver, Vec<Event>), String> {
        let conn = Connection::new(config).map_err(|e| e.to_string())?;
        let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut driver = Driver {
            stream,
            conn,
            events: VecDeque::new(),
            eof: false,
            recording: None,
        };
        let mut startup = Vec::new();
        loop {
            let event = driver.next_event()?;
            let done = matches!(event, Event::Ready);
            if let Event::Failed(err) = &event {
                return Err(err.to_string());
            }
            startup.push(event);
            if done {
                return Ok((driver, startup));
            }
        }
    }

    /// Starts keeping a copy of every byte received from now on (for capture fixtures).
    /// Call it when nothing is in flight, e.g. right before sending a query.
    pub fn start_recording(&mut self) {
        self.recording = Some(Vec::new());
    }

    /// The bytes received since `start_recording`; recording stops.
    pub fn take_recording(&mut self) -> Vec<u8> {
        self.recording.take().unwrap_or_default()
    }

    pub fn conn(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Writes everything the machine wants to send.
    pub fn flush(&mut self) -> Result<(), String> {
        while let Some(bytes) = self.conn.poll_transmit() {
            self.stream.write_all(&bytes).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The next event, reading from the socket as needed.
    pub fn next_event(&mut self) -> Result<Event, String> {
        loop {
            self.flush()?;
            self.events
                .extend(std::iter::from_fn(|| self.conn.poll_event()));
            if let Some(event) = self.events.pop_front() {
                return Ok(event);
            }
            if self.eof {
                return Err("end of stream with no event pending".to_owned());
            }
            self.read_some()?;
        }
    }

    fn read_some(&mut self) -> Result<(), String> {
        let mut buf = [0u8; 16 * 1024];
        match self.stream.read(&mut buf) {
            Ok(0) => {
                self.eof = true;
                self.conn.handle_eof();
                Ok(())
            }
            Ok(n) => {
                if let Some(recording) = &mut self.recording {
                    recording.extend_from_slice(&buf[..n]);
                }
                self.conn.handle_bytes(&buf[..n]);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(format!("read failed (phase {:?}): {e}", self.conn.phase())),
        }
    }

    /// Sends a query and returns every event up to and including `QueryDone` (or the
    /// failure). Errors are returned as events, so tests can assert on them.
    pub fn query(&mut self, sql: &str) -> Result<Vec<Event>, String> {
        self.conn.query(sql).map_err(|e| e.to_string())?;
        self.until(|event| matches!(event, Event::QueryDone { .. }))
    }

    /// Events up to and including the first that satisfies `last`.
    pub fn until(&mut self, last: impl Fn(&Event) -> bool) -> Result<Vec<Event>, String> {
        let mut out = Vec::new();
        loop {
            let event = self.next_event()?;
            let stop = last(&event) || matches!(event, Event::Failed(_));
            out.push(event);
            if stop {
                return Ok(out);
            }
        }
    }

    /// Sends Terminate and waits for the server to close the socket.
    pub fn close(mut self) -> Result<(), String> {
        self.conn.close();
        self.flush()?;
        while !self.eof {
            self.read_some()?;
        }
        match self.conn.phase() {
            Phase::Closed => Ok(()),
            other => Err(format!("connection ended in phase {other:?}")),
        }
    }
}

/// The rows of a query's events, as text (`None` for NULL).
pub fn rows(events: &[Event]) -> Vec<Vec<Option<String>>> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::DataRow(row) => Some(
                row.columns
                    .iter()
                    .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}
