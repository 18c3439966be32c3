//! PostgreSQL connections of the tokio shell: plain TCP with tokio::net, one task per
//! connection that connects and then writes, and one reader task.
//!
//! Same life as the blocking shell's threads: connect, every queued write in order, then
//! the close (a peer that stops taking bytes gets `CLOSE_GRACE` after the close, then the
//! write is abandoned); the reader stops at a closed gate (`PgPauseRead`) and a chunk
//! already read is held by the run loop's router.

use bytes::Bytes;
use slotline_core::io::{ConnId, Input};
use slotline_shell::conns::{connect_error, read_error, write_error, CLOSE_GRACE, READ_CHUNK};
use std::io::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What the connection task does next.
#[derive(Debug)]
enum ConnOp {
    Write(Bytes),
    Close,
}

/// The run loop's side of one connection.
#[derive(Debug)]
pub struct TcpConn {
    ops: mpsc::UnboundedSender<ConnOp>,
    task: tokio::task::JoinHandle<()>,
    /// `true` while reading is paused.
    paused: watch::Sender<bool>,
}

impl TcpConn {
    /// Starts connecting in a task; inputs go to `inputs`. Must be called on the runtime.
    pub fn open(conn: ConnId, host: String, port: u16, inputs: mpsc::Sender<Input>) -> TcpConn {
        let (ops, queue) = mpsc::unbounded_channel();
        let (paused, gate) = watch::channel(false);
        let task = tokio::spawn(connection(conn, host, port, queue, gate, inputs));
        TcpConn { ops, task, paused }
    }

    /// Closes after the queued writes, waiting for them until `deadline` at most.
    pub async fn close_and_wait(self, deadline: tokio::time::Instant) {
        let _ = self.ops.send(ConnOp::Close);
        let _ = tokio::time::timeout_at(deadline, self.task).await;
    }
}

impl slotline_shell::dispatch::ConnHandle for TcpConn {
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

    /// Flushes queued writes, then closes (see the module docs on `CLOSE_GRACE`).
    fn close(self) {
        let _ = self.ops.send(ConnOp::Close);
    }
}

/// Connects, starts the reader, then performs queued writes until closed.
async fn connection(
    conn: ConnId,
    host: String,
    port: u16,
    mut queue: mpsc::UnboundedReceiver<ConnOp>,
    gate: watch::Receiver<bool>,
    inputs: mpsc::Sender<Input>,
) {
    let stream = match TcpStream::connect((host.as_str(), port)).await {
        Ok(stream) => stream,
        Err(error) => {
            let error = Some(connect_error(&host, port, error));
            let _ = inputs.send(Input::PgClosed { conn, error }).await;
            return;
        }
    };
    // Protocol messages are small and latency-bound (status updates): no Nagle delay.
    let _ = stream.set_nodelay(true);
    let (read_half, mut write_half) = stream.into_split();
    let gate_for_close = gate.clone();
    // Connected goes first: no byte of the connection may reach the core before it.
    let _ = inputs.send(Input::PgConnected { conn }).await;
    let reader = tokio::spawn(reader(conn, read_half, gate, inputs.clone()));
    // A closed queue means the run loop is gone: close as if asked to.
    let mut dropped = gate_for_close;
    let mut give_up_at = None;
    while let Some(ConnOp::Write(bytes)) = queue.recv().await {
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
    reader.abort();
    close(write_half).await;
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

async fn close(mut write_half: OwnedWriteHalf) {
    let _ = write_half.shutdown().await;
}

/// Reads until end of stream or error, handing each chunk over at its length.
async fn reader(
    conn: ConnId,
    mut stream: OwnedReadHalf,
    mut gate: watch::Receiver<bool>,
    inputs: mpsc::Sender<Input>,
) {
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        if gate.wait_for(|paused| !*paused).await.is_err() {
            return; // the run loop dropped the connection
        }
        let input = match stream.read(&mut buffer).await {
            Ok(0) => Input::PgClosed { conn, error: None },
            Ok(n) => Input::PgBytes {
                conn,
                bytes: Bytes::copy_from_slice(&buffer[..n]),
            },
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => Input::PgClosed {
                conn,
                error: Some(read_error(error)),
            },
        };
        let last = matches!(input, Input::PgClosed { .. });
        if inputs.send(input).await.is_err() || last {
            return;
        }
    }
}
