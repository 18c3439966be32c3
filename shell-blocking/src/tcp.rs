//! PostgreSQL connections of the blocking shell: plain TCP with std::net, one writer
//! thread (which also connects) and one reader thread per connection.
//!
//! The writer thread owns the order of a connection's life: connect, then every queued
//! write, then the close, so a `PgClose` after a `PgWrite` still sends the bytes first.
//! A peer that stops taking bytes gets `CLOSE_GRACE` after the close to take them; then
//! the socket is shut down under the blocked write, so no thread or socket outlives it.
//! The reader hands chunks to the run loop and stops at a closed gate (`PgPauseRead`):
//! a read already in progress completes, and the run loop's router holds its chunk.

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use slotline_core::io::{ConnId, Input};
use slotline_shell::conns::{connect_error, read_error, write_error, CLOSE_GRACE, READ_CHUNK};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// What the writer thread does next.
#[derive(Debug)]
enum ConnOp {
    Write(Bytes),
    Close,
}

#[derive(Debug, Default)]
struct GateState {
    paused: bool,
    closed: bool,
}

/// What the run loop's handle, the writer and the reader share. The gate is where the
/// reader waits while reading is paused.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
    /// A second handle on the socket, to shut it down under a write that never ends.
    socket: OnceLock<TcpStream>,
    /// The writer thread has ended (the socket is closed or never opened).
    finished: AtomicBool,
}

impl Gate {
    fn update(&self, change: impl FnOnce(&mut GateState)) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut state);
        self.changed.notify_all();
    }

    /// Waits while paused; `false` once the connection is closed.
    fn wait_open(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.paused && !state.closed {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !state.closed
    }

    fn is_closed(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
    }
}

/// The run loop's side of one connection.
#[derive(Debug)]
pub struct TcpConn {
    ops: Sender<ConnOp>,
    gate: Arc<Gate>,
}

impl TcpConn {
    /// Starts connecting in the background; inputs go to `inputs`.
    pub fn open(conn: ConnId, host: String, port: u16, inputs: Sender<Input>) -> TcpConn {
        let (ops, queue) = crossbeam_channel::unbounded();
        let gate = Arc::new(Gate::default());
        let thread_gate = gate.clone();
        let thread_inputs = inputs.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("slotline-{conn}-writer"))
            .spawn(move || writer(conn, &host, port, &queue, &thread_gate, &thread_inputs));
        if let Err(error) = spawned {
            let _ = inputs.send(Input::PgClosed {
                conn,
                error: Some(format!("cannot start a connection thread: {error}")),
            });
        }
        TcpConn { ops, gate }
    }

    /// Closes after the queued writes, waiting for them until `deadline` at most.
    pub fn close_and_wait(self, deadline: std::time::Instant) {
        let _ = self.ops.send(ConnOp::Close);
        while !self.gate.finished.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl slotline_shell::dispatch::ConnHandle for TcpConn {
    fn write(&self, bytes: Bytes) {
        // A finished writer has reported (or been told of) the end: nothing to do.
        let _ = self.ops.send(ConnOp::Write(bytes));
    }

    fn pause(&self) {
        self.gate.update(|s| s.paused = true);
    }

    fn resume(&self) {
        self.gate.update(|s| s.paused = false);
    }

    /// Flushes queued writes, then closes (see the module docs on `CLOSE_GRACE`).
    fn close(self) {
        drop(self);
    }
}

impl Drop for TcpConn {
    fn drop(&mut self) {
        let _ = self.ops.send(ConnOp::Close);
        if self.gate.finished.load(Ordering::SeqCst) {
            return;
        }
        let Some(socket) = self.gate.socket.get().and_then(|s| s.try_clone().ok()) else {
            return;
        };
        let gate = self.gate.clone();
        let _ = std::thread::Builder::new()
            .name("slotline-pg-closer".into())
            .spawn(move || {
                std::thread::sleep(CLOSE_GRACE);
                if !gate.finished.load(Ordering::SeqCst) {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            });
    }
}

/// Connects, starts the reader, then performs queued writes until closed.
fn writer(
    conn: ConnId,
    host: &str,
    port: u16,
    queue: &Receiver<ConnOp>,
    gate: &Arc<Gate>,
    inputs: &Sender<Input>,
) {
    let mut stream = match TcpStream::connect((host, port)) {
        Ok(stream) => stream,
        Err(error) => {
            let error = Some(connect_error(host, port, error));
            let _ = inputs.send(Input::PgClosed { conn, error });
            gate.finished.store(true, Ordering::SeqCst);
            return;
        }
    };
    if let Ok(socket) = stream.try_clone() {
        let _ = gate.socket.set(socket);
    }
    // Protocol messages are small and latency-bound (status updates): no Nagle delay.
    let _ = stream.set_nodelay(true);
    // Connected goes first: no byte of the connection may reach the core before it.
    let _ = inputs.send(Input::PgConnected { conn });
    if let Err(error) = start_reader(conn, &stream, gate, inputs) {
        let error = Some(format!("cannot start a reader thread: {error}"));
        let _ = inputs.send(Input::PgClosed { conn, error });
        let _ = stream.shutdown(Shutdown::Both);
        gate.finished.store(true, Ordering::SeqCst);
        return;
    }
    // A disconnected queue means the run loop is gone: close as if asked to.
    while let Ok(ConnOp::Write(bytes)) = queue.recv() {
        if let Err(error) = stream.write_all(&bytes) {
            let error = Some(write_error(error));
            let _ = inputs.send(Input::PgClosed { conn, error });
            break;
        }
    }
    gate.update(|s| s.closed = true);
    let _ = stream.shutdown(Shutdown::Both);
    gate.finished.store(true, Ordering::SeqCst);
}

fn start_reader(
    conn: ConnId,
    stream: &TcpStream,
    gate: &Arc<Gate>,
    inputs: &Sender<Input>,
) -> std::io::Result<()> {
    let stream = stream.try_clone()?;
    let (gate, inputs) = (gate.clone(), inputs.clone());
    std::thread::Builder::new()
        .name(format!("slotline-{conn}-reader"))
        .spawn(move || reader(conn, stream, &gate, &inputs))?;
    Ok(())
}

/// How long the reader waits for more bytes after a read before handing the chunk over.
/// PostgreSQL sends one small message per row; handing each one to the run loop costs a
/// thread wake-up, so reads that follow each other within this window travel together.
const COALESCE: Duration = Duration::from_micros(200);

/// Reads until end of stream, error or close, handing over what arrived together.
fn reader(conn: ConnId, mut stream: TcpStream, gate: &Gate, inputs: &Sender<Input>) {
    let mut buffer = vec![0u8; READ_CHUNK];
    while gate.wait_open() {
        let input = match stream.read(&mut buffer) {
            Ok(0) => Input::PgClosed { conn, error: None },
            Ok(n) => {
                let (filled, end_of_stream) = read_more(&mut stream, &mut buffer, n);
                let bytes = Input::PgBytes {
                    conn,
                    bytes: Bytes::copy_from_slice(&buffer[..filled]),
                };
                if inputs.send(bytes).is_err() {
                    return;
                }
                if !end_of_stream {
                    continue;
                }
                Input::PgClosed { conn, error: None }
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            // Our own shutdown after PgClose: the core wants nothing more.
            Err(_) if gate.is_closed() => return,
            Err(error) => Input::PgClosed {
                conn,
                error: Some(read_error(error)),
            },
        };
        let last = matches!(input, Input::PgClosed { .. });
        if inputs.send(input).is_err() || last {
            return;
        }
    }
}

/// Tops up `buffer` (holding `filled` bytes) with whatever arrives within `COALESCE` of
/// the previous read. Returns the new length, and whether the stream ended.
fn read_more(stream: &mut TcpStream, buffer: &mut [u8], mut filled: usize) -> (usize, bool) {
    if stream.set_read_timeout(Some(COALESCE)).is_err() {
        return (filled, false);
    }
    let mut ended = false;
    while filled < buffer.len() {
        match stream.read(&mut buffer[filled..]) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => filled += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            // Timed out (nothing more for now) or failed: the next blocking read reports it.
            Err(_) => break,
        }
    }
    let _ = stream.set_read_timeout(None);
    (filled, ended)
}
