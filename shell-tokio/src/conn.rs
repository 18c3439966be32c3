//! PostgreSQL connections of the tokio shell: TCP or Unix sockets with tokio::net, TLS
//! with tokio-rustls, one task per connection that connects and then writes, and one
//! reader task.
//!
//! Same life as the blocking shell's threads: connect, every queued write in order, then
//! the close (a peer that stops taking bytes gets `CLOSE_GRACE` after the close, then the
//! write is abandoned); the reader stops at a closed gate (`PgPauseRead`) or while the
//! connection's chunks not yet consumed reach `READ_BUDGET` bytes, and a chunk already
//! read is held by the run loop's router. `PgStartTls` is an operation in the same
//! queue: after the writes before it, the connection task takes the socket back from its
//! reader (a read in progress is cancelled without losing bytes), runs the handshake and
//! starts a reader on the TLS stream.

use bytes::Bytes;
use slotline_core::io::{ConnFailure, ConnId, Input, PgTarget};
use slotline_shell::conns::{
    connect_error, connect_timeout, handshake_timeout, read_error, write_error, ReadBudget,
    CLOSE_GRACE, READ_BUDGET, READ_CHUNK,
};
use slotline_shell::tcp;
use slotline_shell::tls::TlsStart;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::time::Instant;

/// A connection's byte stream: a socket of either family, or TLS over one.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}
type Io = Box<dyn Stream>;

/// What the connection task does next.
#[derive(Debug)]
enum ConnOp {
    Write(Bytes),
    StartTls(TlsStart),
    Close,
}

/// The run loop's side of one connection.
#[derive(Debug)]
pub struct PgConn {
    ops: mpsc::UnboundedSender<ConnOp>,
    task: tokio::task::JoinHandle<()>,
    /// `true` while reading is paused.
    paused: watch::Sender<bool>,
}

impl PgConn {
    /// Starts connecting in a task; inputs go to `inputs`. Must be called on the runtime.
    pub fn open(
        conn: ConnId,
        target: PgTarget,
        timeout: Option<Duration>,
        inputs: mpsc::Sender<Input>,
    ) -> PgConn {
        let (ops, queue) = mpsc::unbounded_channel();
        let (paused, gate) = watch::channel(false);
        let task = tokio::spawn(connection(conn, target, timeout, queue, gate, inputs));
        PgConn { ops, task, paused }
    }

    /// Closes after the queued writes, waiting for them until `deadline` at most.
    pub async fn close_and_wait(self, deadline: tokio::time::Instant) {
        let _ = self.ops.send(ConnOp::Close);
        let _ = tokio::time::timeout_at(deadline, self.task).await;
    }
}

impl slotline_shell::dispatch::ConnHandle for PgConn {
    fn write(&self, bytes: Bytes) {
        // A finished task has reported (or been told of) the end: nothing to do.
        let _ = self.ops.send(ConnOp::Write(bytes));
    }

    fn pause(&self) {
        self.paused.send_replace(true);
    }

    fn resume(&self) {
        self.paused.send_replace(false);
    }

    fn start_tls(&self, tls: TlsStart) {
        let _ = self.ops.send(ConnOp::StartTls(tls));
    }

    /// Flushes queued writes, then closes (see the module docs on `CLOSE_GRACE`).
    fn close(self) {
        let _ = self.ops.send(ConnOp::Close);
    }
}

async fn open_socket(target: &PgTarget, timeout: Option<Duration>) -> Result<Io, ConnFailure> {
    let connect = async {
        match target {
            PgTarget::Tcp {
                host,
                port,
                keepalive,
            } => {
                let stream = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(|e| connect_error(target, &e))?;
                tcp::set_options(&stream, keepalive.as_ref())
                    .map_err(|e| tcp::options_error(target, &e))?;
                Ok::<Io, ConnFailure>(Box::new(stream))
            }
            PgTarget::Unix { path } => match UnixStream::connect(path).await {
                Ok(stream) => Ok(Box::new(stream) as Io),
                Err(e) => Err(connect_error(target, &e)),
            },
        }
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, connect)
            .await
            .unwrap_or_else(|_| Err(connect_timeout(target, limit))),
        None => connect.await,
    }
}

/// A running reader: stopping it gives the read half back (`None` if it already ended).
struct Reader {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Option<ReadHalf<Io>>>,
}

impl Reader {
    fn start(
        conn: ConnId,
        half: ReadHalf<Io>,
        gate: watch::Receiver<bool>,
        inputs: mpsc::Sender<Input>,
    ) -> Reader {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(reader(conn, half, gate, inputs, stopped));
        Reader { stop, task }
    }

    async fn take_back(self) -> Option<ReadHalf<Io>> {
        let _ = self.stop.send(());
        self.task.await.ok().flatten()
    }
}

/// Connects, starts the reader, then performs queued operations until closed.
async fn connection(
    conn: ConnId,
    target: PgTarget,
    timeout: Option<Duration>,
    mut queue: mpsc::UnboundedReceiver<ConnOp>,
    gate: watch::Receiver<bool>,
    inputs: mpsc::Sender<Input>,
) {
    let io = match open_socket(&target, timeout).await {
        Ok(io) => io,
        Err(error) => {
            let _ = inputs
                .send(Input::PgClosed {
                    conn,
                    error: Some(error),
                })
                .await;
            return;
        }
    };
    let (read_half, mut write_half) = tokio::io::split(io);
    // Connected goes first: no byte of the connection may reach the core before it.
    let _ = inputs.send(Input::PgConnected { conn }).await;
    let mut reader = Some(Reader::start(conn, read_half, gate.clone(), inputs.clone()));
    // A closed queue means the run loop is gone: close as if asked to.
    let mut dropped = gate.clone();
    let mut give_up_at = None;
    while let Some(op) = queue.recv().await {
        let bytes = match op {
            ConnOp::Write(bytes) => bytes,
            ConnOp::Close => break,
            ConnOp::StartTls(start) => {
                let Some(running) = reader.take() else { break };
                let Some(read_half) = running.take_back().await else {
                    break; // the reader ended and reported why
                };
                match handshake(read_half.unsplit(write_half), start).await {
                    Ok((io, server_certificate)) => {
                        let ready = Input::PgTlsReady {
                            conn,
                            server_certificate,
                        };
                        let _ = inputs.send(ready).await;
                        let (read_half, tls_write_half) = tokio::io::split(io);
                        write_half = tls_write_half;
                        reader = Some(Reader::start(conn, read_half, gate.clone(), inputs.clone()));
                        continue;
                    }
                    Err(error) => {
                        let _ = inputs
                            .send(Input::PgClosed {
                                conn,
                                error: Some(error),
                            })
                            .await;
                        return;
                    }
                }
            }
        };
        let result = tokio::select! {
            result = write_half.write_all(&bytes) => result,
            () = grace_after_drop(&mut dropped, &mut give_up_at) => break,
        };
        if let Err(error) = result {
            let error = Some(write_error(error));
            let _ = inputs.send(Input::PgClosed { conn, error }).await;
            break;
        }
    }
    if let Some(reader) = reader {
        reader.task.abort();
    }
    let _ = write_half.shutdown().await;
}

/// Runs the TLS handshake over `io`: the TLS stream and the server's certificate (DER).
async fn handshake(io: Io, start: TlsStart) -> Result<(Io, Option<Bytes>), ConnFailure> {
    let connector = tokio_rustls::TlsConnector::from(start.config);
    let connect = connector.connect(start.server_name, io);
    let result = match start.timeout {
        Some(limit) => match tokio::time::timeout(limit, connect).await {
            Ok(result) => result,
            Err(_) => return Err(handshake_timeout(limit)),
        },
        None => connect.await,
    };
    match result {
        Ok(tls) => {
            let certificate = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|leaf| Bytes::copy_from_slice(leaf.as_ref()));
            Ok((Box::new(tls), certificate))
        }
        Err(error) => Err(
            match error
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(tls_error) => slotline_shell::tls::failure(tls_error),
                None => ConnFailure::new(
                    slotline_core::io::FailureKind::Tls,
                    format!("TLS handshake failed: {error}"),
                ),
            },
        ),
    }
}

/// Completes `CLOSE_GRACE` after the run loop dropped the connection's handle (the gate's
/// sender), never before.
async fn grace_after_drop(gate: &mut watch::Receiver<bool>, give_up_at: &mut Option<Instant>) {
    if give_up_at.is_none() {
        while gate.changed().await.is_ok() {}
        *give_up_at = Some(Instant::now() + CLOSE_GRACE);
    }
    if let Some(at) = *give_up_at {
        tokio::time::sleep_until(at).await;
    }
}

/// Reads until end of stream or error within the connection's budget, handing each chunk
/// over at its length; gives the read half back when told to stop.
async fn reader(
    conn: ConnId,
    mut stream: ReadHalf<Io>,
    mut gate: watch::Receiver<bool>,
    inputs: mpsc::Sender<Input>,
    mut stop: oneshot::Receiver<()>,
) -> Option<ReadHalf<Io>> {
    let room = Arc::new(Notify::new());
    let waker = room.clone();
    let budget = ReadBudget::new(READ_BUDGET, move || waker.notify_one());
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        let open = tokio::select! {
            biased;
            _ = &mut stop => return Some(stream),
            open = readable(&mut gate, &budget, &room) => open,
        };
        if !open {
            return None; // the run loop dropped the connection
        }
        let read = tokio::select! {
            biased;
            _ = &mut stop => return Some(stream),
            read = stream.read(&mut buffer) => read,
        };
        let input = match read {
            Ok(0) => Input::PgClosed { conn, error: None },
            Ok(n) => Input::PgBytes {
                conn,
                bytes: budget.charge(&buffer[..n]),
            },
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => Input::PgClosed {
                conn,
                error: Some(read_error(error)),
            },
        };
        let last = matches!(input, Input::PgClosed { .. });
        if inputs.send(input).await.is_err() || last {
            return None;
        }
        // After a small read the run loop's thread, not this task, waits before the next
        // (the runtime's `wait` in lib.rs).
    }
}

/// Waits until reading is not paused and `budget` has room; `false` when the run loop
/// dropped the connection.
async fn readable(gate: &mut watch::Receiver<bool>, budget: &ReadBudget, room: &Notify) -> bool {
    loop {
        if gate.wait_for(|paused| !*paused).await.is_err() {
            return false;
        }
        if budget.has_room() {
            return true;
        }
        // A release between the check and this wait leaves a permit: no wake-up is lost.
        room.notified().await;
    }
}
