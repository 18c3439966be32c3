//! PostgreSQL connections of the blocking shell: TCP or Unix sockets with std, one writer
//! thread (which also connects) and one reader thread per connection, and TLS with rustls.
//!
//! The writer thread owns the order of a connection's life: connect, then every queued
//! write, then the close, so a `PgClose` after a `PgWrite` still sends the bytes first.
//!
//! TLS runs on the same two threads: a rustls `ClientConnection` (its sans-io state
//! machine, not `StreamOwned`, which cannot read and write from two threads at once) sits
//! behind a mutex. Bytes to send are encrypted when they are queued, under that mutex, so
//! the records reach the writer in the order rustls made them; the reader feeds what it
//! reads into it and hands the plain text on. The handshake starts after the bytes queued
//! before `PgStartTls` (the SSLRequest) and is driven the same way.
//! A peer that stops taking bytes gets `CLOSE_GRACE` after the close to take them; then
//! the socket is shut down under the blocked write, so no thread or socket outlives it.
//! The reader hands chunks to the run loop and stops at a closed gate (`PgPauseRead`), or
//! while the connection's chunks not yet consumed reach `READ_BUDGET` bytes: a read already
//! in progress completes, and the run loop's router holds its chunk.

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use rustls::ClientConnection;
use slotline_core::io::{ConnFailure, ConnId, Input, PgTarget};
use slotline_shell::conns::{
    cannot_start, connect_error, connect_timeout, handshake_timeout, read_error, write_error,
    ReadBudget, CLOSE_GRACE, COALESCE, COALESCE_BELOW, READ_BUDGET, READ_CHUNK,
};
use slotline_shell::tcp;
use slotline_shell::tls::TlsStart;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use std::time::Instant;

/// What the writer thread does next.
#[derive(Debug)]
enum ConnOp {
    /// Bytes for the socket as they are (already encrypted once TLS is up).
    Write(Bytes),
    /// The handshake started: fail it if it has not completed by then.
    HandshakeDeadline(Instant, Duration),
    Close,
}

/// A connected socket of either family.
#[derive(Debug)]
enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn connect(target: &PgTarget, timeout: Option<Duration>) -> Result<Socket, ConnFailure> {
        match target {
            PgTarget::Unix { path } => UnixStream::connect(path)
                .map(Socket::Unix)
                .map_err(|e| connect_error(target, &e)),
            PgTarget::Tcp {
                host,
                port,
                keepalive,
            } => {
                let result = match timeout {
                    None => TcpStream::connect((host.as_str(), *port)),
                    Some(timeout) => connect_tcp_within(host, *port, timeout),
                };
                match result {
                    Ok(stream) => {
                        tcp::set_options(&stream, keepalive.as_ref())
                            .map_err(|e| tcp::options_error(target, &e))?;
                        Ok(Socket::Tcp(stream))
                    }
                    Err(e) if e.kind() == ErrorKind::TimedOut => {
                        Err(connect_timeout(target, timeout.unwrap_or_default()))
                    }
                    Err(e) => Err(connect_error(target, &e)),
                }
            }
        }
    }

    fn try_clone(&self) -> std::io::Result<Socket> {
        match self {
            Socket::Tcp(s) => s.try_clone().map(Socket::Tcp),
            Socket::Unix(s) => s.try_clone().map(Socket::Unix),
        }
    }

    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Unix(s) => s.shutdown(how),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.flush(),
            Socket::Unix(s) => s.flush(),
        }
    }
}

/// Tries each address of `host` for at most `timeout` each.
fn connect_tcp_within(host: &str, port: u16, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(ErrorKind::NotFound, "the host has no address");
    for address in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// The TLS side of a connection, shared by the run loop's handle and the reader.
#[derive(Debug, Default)]
struct Tls {
    session: Option<ClientConnection>,
    /// `PgTlsReady` was delivered.
    reported: bool,
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
    socket: OnceLock<Socket>,
    tls: Mutex<Tls>,
    /// The writer thread has ended (the socket is closed or never opened).
    finished: AtomicBool,
}

impl Gate {
    fn update(&self, change: impl FnOnce(&mut GateState)) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut state);
        self.changed.notify_all();
    }

    /// Waits while paused or while `budget` has no room; `false` once the connection is
    /// closed.
    fn wait_readable(&self, budget: &ReadBudget) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // A release re-checked under this lock cannot slip between the check and the
        // wait: the budget's room callback takes the lock to notify.
        while (state.paused || !budget.has_room()) && !state.closed {
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
pub struct PgConn {
    conn: ConnId,
    ops: Sender<ConnOp>,
    gate: Arc<Gate>,
    inputs: Sender<Input>,
}

/// What the writer thread is given.
struct Plan {
    conn: ConnId,
    target: PgTarget,
    timeout: Option<Duration>,
    queue: Receiver<ConnOp>,
    /// For the reader: the records its TLS session must send.
    ops: Sender<ConnOp>,
}

impl PgConn {
    /// Starts connecting in the background; inputs go to `inputs`.
    pub fn open(
        conn: ConnId,
        target: PgTarget,
        timeout: Option<Duration>,
        inputs: Sender<Input>,
    ) -> PgConn {
        let (ops, queue) = crossbeam_channel::unbounded();
        let gate = Arc::new(Gate::default());
        let plan = Plan {
            conn,
            target,
            timeout,
            queue,
            ops: ops.clone(),
        };
        let thread_gate = gate.clone();
        let thread_inputs = inputs.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("slotline-{conn}-writer"))
            .spawn(move || writer(plan, &thread_gate, &thread_inputs));
        if let Err(error) = spawned {
            let _ = inputs.send(Input::PgClosed {
                conn,
                error: Some(cannot_start("a connection thread", error)),
            });
        }
        PgConn {
            conn,
            ops,
            gate,
            inputs,
        }
    }

    /// Closes after the queued writes, waiting for them until `deadline` at most.
    pub fn close_and_wait(self, deadline: std::time::Instant) {
        let _ = self.ops.send(ConnOp::Close);
        while !self.gate.finished.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl slotline_shell::dispatch::ConnHandle for PgConn {
    fn write(&self, bytes: Bytes) {
        let mut tls = self.gate.tls.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(session) = tls.session.as_mut() else {
            // A finished writer has reported (or been told of) the end: nothing to do.
            let _ = self.ops.send(ConnOp::Write(bytes));
            return;
        };
        if session.writer().write_all(&bytes).is_ok() {
            send_records(session, &self.ops);
        }
    }

    fn start_tls(&self, start: TlsStart) {
        let mut tls = self.gate.tls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut session = match ClientConnection::new(start.config, start.server_name) {
            Ok(session) => session,
            Err(error) => {
                let error = Some(slotline_shell::tls::failure(&error));
                let _ = self.inputs.send(Input::PgClosed {
                    conn: self.conn,
                    error,
                });
                return;
            }
        };
        send_records(&mut session, &self.ops);
        tls.session = Some(session);
        if let Some(timeout) = start.timeout {
            let at = Instant::now() + timeout;
            let _ = self.ops.send(ConnOp::HandshakeDeadline(at, timeout));
        }
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

/// Queues what rustls has to send, in the order it made it (the caller holds the mutex).
fn send_records(session: &mut ClientConnection, ops: &Sender<ConnOp>) {
    let mut records = Vec::new();
    while session.wants_write() {
        if session.write_tls(&mut records).is_err() {
            break;
        }
    }
    if !records.is_empty() {
        let _ = ops.send(ConnOp::Write(Bytes::from(records)));
    }
}

impl Drop for PgConn {
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
fn writer(plan: Plan, gate: &Arc<Gate>, inputs: &Sender<Input>) {
    let conn = plan.conn;
    let mut stream = match Socket::connect(&plan.target, plan.timeout) {
        Ok(stream) => stream,
        Err(error) => {
            let error = Some(error);
            let _ = inputs.send(Input::PgClosed { conn, error });
            gate.finished.store(true, Ordering::SeqCst);
            return;
        }
    };
    if let Ok(socket) = stream.try_clone() {
        let _ = gate.socket.set(socket);
    }
    // Connected goes first: no byte of the connection may reach the core before it.
    let _ = inputs.send(Input::PgConnected { conn });
    if let Err(error) = start_reader(conn, &stream, gate, inputs, &plan.ops) {
        let error = Some(cannot_start("a reader thread", error));
        let _ = inputs.send(Input::PgClosed { conn, error });
        let _ = stream.shutdown(Shutdown::Both);
        gate.finished.store(true, Ordering::SeqCst);
        return;
    }
    drop(plan.ops);
    write_until_closed(conn, &mut stream, &plan.queue, gate, inputs);
    gate.update(|s| s.closed = true);
    let _ = stream.shutdown(Shutdown::Both);
    gate.finished.store(true, Ordering::SeqCst);
}

/// Writes what is queued until the close (or the run loop is gone), failing a TLS
/// handshake that outlives its deadline.
fn write_until_closed(
    conn: ConnId,
    stream: &mut Socket,
    queue: &Receiver<ConnOp>,
    gate: &Gate,
    inputs: &Sender<Input>,
) {
    let mut handshake: Option<(Instant, Duration)> = None;
    loop {
        let op = match handshake {
            Some((at, _)) => queue.recv_deadline(at).ok(),
            // A disconnected queue means the run loop is gone: close as if asked to.
            None => queue.recv().ok(),
        };
        let bytes = match op {
            Some(ConnOp::Write(bytes)) => bytes,
            Some(ConnOp::HandshakeDeadline(at, timeout)) => {
                handshake = Some((at, timeout));
                continue;
            }
            Some(ConnOp::Close) => return,
            None => match handshake.take() {
                Some((at, timeout)) if Instant::now() >= at => {
                    if still_handshaking(gate) {
                        let error = Some(handshake_timeout(timeout));
                        let _ = inputs.send(Input::PgClosed { conn, error });
                        return;
                    }
                    continue;
                }
                Some(pending) => {
                    handshake = Some(pending);
                    continue;
                }
                None => return,
            },
        };
        if let Err(error) = stream.write_all(&bytes) {
            let error = Some(write_error(error));
            let _ = inputs.send(Input::PgClosed { conn, error });
            return;
        }
    }
}

fn still_handshaking(gate: &Gate) -> bool {
    let tls = gate.tls.lock().unwrap_or_else(PoisonError::into_inner);
    tls.session.as_ref().is_some_and(|s| s.is_handshaking())
}

fn start_reader(
    conn: ConnId,
    stream: &Socket,
    gate: &Arc<Gate>,
    inputs: &Sender<Input>,
    ops: &Sender<ConnOp>,
) -> std::io::Result<()> {
    let stream = stream.try_clone()?;
    let (gate, inputs, ops) = (gate.clone(), inputs.clone(), ops.clone());
    std::thread::Builder::new()
        .name(format!("slotline-{conn}-reader"))
        .spawn(move || reader(conn, stream, &gate, &inputs, &ops))?;
    Ok(())
}

/// Reads until end of stream, error or close, handing over what arrived together, while
/// the connection's unconsumed chunks stay under `READ_BUDGET`.
fn reader(
    conn: ConnId,
    mut stream: Socket,
    gate: &Arc<Gate>,
    inputs: &Sender<Input>,
    ops: &Sender<ConnOp>,
) {
    let waker = gate.clone();
    let budget = ReadBudget::new(READ_BUDGET, move || waker.update(|_| {}));
    let mut buffer = vec![0u8; READ_CHUNK];
    while gate.wait_readable(&budget) {
        let input = match stream.read(&mut buffer) {
            Ok(0) => Input::PgClosed { conn, error: None },
            Ok(n) => {
                match receive(conn, gate, &budget, &buffer[..n], ops) {
                    Ok(delivered) => {
                        for input in delivered {
                            if inputs.send(input).is_err() {
                                return;
                            }
                        }
                    }
                    Err(closed) => {
                        let _ = inputs.send(closed);
                        return;
                    }
                }
                if n < COALESCE_BELOW {
                    // Let what follows gather in the socket rather than wake the loop for
                    // each small message.
                    std::thread::sleep(COALESCE);
                }
                continue;
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

/// What `bytes` read from the socket mean for the core: themselves in plain text, or,
/// once TLS started, the end of the handshake and the decrypted text. `Err`: the TLS
/// session failed (its alert is queued) and the connection ends with this input.
fn receive(
    conn: ConnId,
    gate: &Gate,
    budget: &Arc<ReadBudget>,
    mut bytes: &[u8],
    ops: &Sender<ConnOp>,
) -> Result<Vec<Input>, Input> {
    let mut tls = gate.tls.lock().unwrap_or_else(PoisonError::into_inner);
    let Tls { session, reported } = &mut *tls;
    let Some(session) = session.as_mut() else {
        return Ok(vec![Input::PgBytes {
            conn,
            bytes: budget.charge(bytes),
        }]);
    };
    let mut plain = Vec::new();
    while !bytes.is_empty() {
        if session.read_tls(&mut bytes).is_err() {
            break;
        }
        if let Err(error) = session.process_new_packets() {
            send_records(session, ops);
            return Err(Input::PgClosed {
                conn,
                error: Some(slotline_shell::tls::failure(&error)),
            });
        }
        // Reads until rustls has no more plain text for now (`WouldBlock`).
        let _ = session.reader().read_to_end(&mut plain);
    }
    send_records(session, ops);
    let mut delivered = Vec::new();
    if !*reported && !session.is_handshaking() {
        *reported = true;
        let server_certificate = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| Bytes::copy_from_slice(leaf.as_ref()));
        delivered.push(Input::PgTlsReady {
            conn,
            server_certificate,
        });
    }
    if !plain.is_empty() {
        delivered.push(Input::PgBytes {
            conn,
            bytes: budget.charge_vec(plain),
        });
    }
    Ok(delivered)
}
