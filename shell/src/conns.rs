//! Which PostgreSQL connections the core still wants to hear from, and the holding of
//! their inputs while reading is paused.
//!
//! Readers run concurrently with the core, so a chunk may already be on its way when the
//! core says `PgPauseRead`, and a reader may report bytes or an end of stream after
//! `PgClose`. The router makes both shells keep the contract exactly, in the same way:
//! - between `PgPauseRead` and `PgResumeRead` no input of that connection reaches the core
//!   (whatever arrived is held, in order, and released on resume);
//! - after `PgClose` or a delivered `PgClosed`, nothing more of that connection arrives;
//! - each connection ends with at most one `PgClosed`.
//!
//! The router never looks inside bytes and never decides to close or retry anything.

use bytes::Bytes;
use slotline_core::io::PgTarget;
use slotline_core::io::{ConnFailure, ConnId, FailureKind, Input};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Default)]
struct ConnState {
    paused: bool,
    /// Inputs received while paused, oldest first.
    held: VecDeque<Input>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct ConnRouter {
    conns: BTreeMap<ConnId, ConnState>,
    /// Inputs to feed before waiting for new ones (released on resume, or made by the
    /// shell itself), oldest first.
    ready: VecDeque<Input>,
}

impl ConnRouter {
    /// `PgConnect`: the connection's inputs are wanted from now on.
    pub fn open(&mut self, conn: ConnId) {
        self.conns.entry(conn).or_default();
    }

    /// `PgPauseRead`.
    pub fn pause(&mut self, conn: ConnId) {
        if let Some(state) = self.conns.get_mut(&conn) {
            state.paused = true;
        }
    }

    /// `PgResumeRead`: what was held becomes ready, in order.
    pub fn resume(&mut self, conn: ConnId) {
        if let Some(state) = self.conns.get_mut(&conn) {
            state.paused = false;
            self.ready.extend(state.held.drain(..));
        }
    }

    /// `PgClose`: everything held or still to come for the connection is dropped.
    pub fn close(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.ready.retain(|input| conn_of(input) != Some(conn));
    }

    /// An input the shell made itself (e.g. a refused `PgConnect`); it is fed before
    /// anything received later.
    pub fn inject(&mut self, input: Input) {
        self.ready.push_back(input);
    }

    /// An input received from a reader, a connector or a worker: returns it if the core
    /// should get it now, or `None` if it is held (paused) or unwanted (closed).
    pub fn admit(&mut self, input: Input) -> Option<Input> {
        let Some(conn) = conn_of(&input) else {
            return Some(input);
        };
        let state = self.conns.get_mut(&conn)?;
        if state.paused {
            state.held.push_back(input);
            return None;
        }
        if matches!(input, Input::PgClosed { .. }) {
            self.conns.remove(&conn);
        }
        Some(input)
    }

    /// The next input to feed without waiting, if any. Ready inputs of a connection that
    /// was paused again since they became ready go back to being held.
    pub fn next_ready(&mut self) -> Option<Input> {
        while let Some(input) = self.ready.pop_front() {
            if let Some(input) = self.admit(input) {
                return Some(input);
            }
        }
        None
    }

    /// Whether the core still wants inputs of `conn`.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }
}

/// The connection an input belongs to.
fn conn_of(input: &Input) -> Option<ConnId> {
    match input {
        Input::PgConnected { conn }
        | Input::PgTlsReady { conn, .. }
        | Input::PgBytes { conn, .. }
        | Input::PgClosed { conn, .. } => Some(*conn),
        Input::HttpChunk { .. }
        | Input::HttpDone { .. }
        | Input::HttpFailed { .. }
        | Input::Tick
        | Input::Shutdown
        | Input::StateRead { .. }
        | Input::StateWritten { .. }
        | Input::StateRemoved { .. } => None,
    }
}

/// A connection that could not be opened (same in both shells).
pub fn connect_error(target: &PgTarget, error: &std::io::Error) -> ConnFailure {
    let kind = if error.kind() == std::io::ErrorKind::TimedOut {
        FailureKind::Timeout
    } else {
        FailureKind::Connect
    };
    ConnFailure::new(kind, format!("connect to {target}: {error}"))
}

/// A connection that took longer to open than `PgConnect` allowed.
pub fn connect_timeout(target: &PgTarget, timeout: Duration) -> ConnFailure {
    ConnFailure::new(
        FailureKind::Timeout,
        format!(
            "connect to {target}: timed out after {} ms",
            timeout.as_millis()
        ),
    )
}

/// A TLS handshake that took longer than `PgStartTls` allowed.
pub fn handshake_timeout(timeout: Duration) -> ConnFailure {
    ConnFailure::new(
        FailureKind::Timeout,
        format!("TLS handshake timed out after {} ms", timeout.as_millis()),
    )
}

/// A connection that broke while reading.
pub fn read_error(error: impl fmt::Display) -> ConnFailure {
    ConnFailure::new(FailureKind::Broken, format!("read: {error}"))
}

/// A connection that broke while writing.
pub fn write_error(error: impl fmt::Display) -> ConnFailure {
    ConnFailure::new(FailureKind::Broken, format!("write: {error}"))
}

/// A connection whose own thread or task could not be started.
pub fn cannot_start(what: &str, error: impl fmt::Display) -> ConnFailure {
    ConnFailure::new(
        FailureKind::Connect,
        format!("cannot start {what}: {error}"),
    )
}

/// How long a `PgConnect` or `PgStartTls` may take.
pub fn timeout_of(timeout_ms: Option<u64>) -> Option<Duration> {
    timeout_ms.map(Duration::from_millis)
}

/// How long a closed connection may take to flush its queued writes (a final status
/// update, a Terminate) before the socket is shut down under a peer that stopped reading.
/// Without it a stuck write would keep a socket and a thread or task until TCP gives up.
pub const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How much one read asks for. Each chunk is copied out at its real length, so a small
/// message does not pin a whole buffer while the core holds it.
pub const READ_CHUNK: usize = 64 * 1024;

/// PostgreSQL's walsender sends one small message per change and flushes each; handing
/// every one to the run loop costs a wake-up of the loop per message (measured as most of
/// the connector's CPU, and slowing the walsender, on a stream of one-row commits). So
/// after a read smaller than `COALESCE_BELOW` is handed over, the next read waits this
/// long, letting what follows gather in the socket: the blocking shell's reader sleeps, the
/// tokio shell's run loop sleeps outside its runtime (docs/architecture.md says why). A
/// chunk is never held back: the wait only delays the next read.
pub const COALESCE: std::time::Duration = std::time::Duration::from_millis(1);

/// A read this large means bytes are streaming (a COPY, a large transaction): the next
/// read follows at once.
pub const COALESCE_BELOW: usize = 16 * 1024;

/// How many bytes read from one connection may wait for the core (queued for the run
/// loop, held while reading is paused, or being handed over) before its reader stops
/// reading. The kernel's socket buffer holds the rest, and TCP pushes back on the server,
/// so memory does not grow with a burst, and a pause stops reading within this many bytes.
pub const READ_BUDGET: usize = 4 * READ_CHUNK;

/// The bytes of one connection read but not yet consumed, bounded by a limit: a chunk made
/// by `charge` counts until its last copy is dropped (the run loop drops it once the core
/// has handled it, or when it drops the connection's held input), whoever holds it.
pub struct ReadBudget {
    in_use: AtomicUsize,
    limit: usize,
    /// Called when a release brings the bytes in use back under the limit: the reader may
    /// be waiting for room.
    on_room: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for ReadBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadBudget")
            .field("in_use", &self.in_use.load(Ordering::Relaxed))
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl ReadBudget {
    /// A budget of `limit` bytes; `on_room` wakes a reader waiting for room.
    pub fn new(limit: usize, on_room: impl Fn() + Send + Sync + 'static) -> Arc<ReadBudget> {
        Arc::new(ReadBudget {
            in_use: AtomicUsize::new(0),
            limit,
            on_room: Box::new(on_room),
        })
    }

    /// Whether a reader may read more now.
    pub fn has_room(&self) -> bool {
        self.in_use.load(Ordering::Acquire) < self.limit
    }

    /// Bytes counted now.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }

    /// A copy of `bytes` that counts against the budget until dropped.
    pub fn charge(self: &Arc<Self>, bytes: &[u8]) -> Bytes {
        self.charge_vec(bytes.to_vec())
    }

    /// `data` as a chunk that counts against the budget (by its capacity) until dropped.
    pub fn charge_vec(self: &Arc<Self>, data: Vec<u8>) -> Bytes {
        let charged = data.capacity();
        self.in_use.fetch_add(charged, Ordering::AcqRel);
        Bytes::from_owner(Charged {
            data,
            charged,
            budget: self.clone(),
        })
    }

    fn release(&self, charged: usize) {
        let before = self.in_use.fetch_sub(charged, Ordering::AcqRel);
        if before >= self.limit && before - charged < self.limit {
            (self.on_room)();
        }
    }
}

/// The owner of a charged chunk's bytes.
struct Charged {
    data: Vec<u8>,
    charged: usize,
    budget: Arc<ReadBudget>,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        self.budget.release(self.charged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    const A: ConnId = ConnId(1);
    const B: ConnId = ConnId(2);

    fn bytes(conn: ConnId, text: &'static str) -> Input {
        Input::PgBytes {
            conn,
            bytes: Bytes::from_static(text.as_bytes()),
        }
    }

    fn closed(conn: ConnId) -> Input {
        Input::PgClosed { conn, error: None }
    }

    #[test]
    fn inputs_of_an_open_connection_pass_through() {
        let mut router = ConnRouter::default();
        router.open(A);
        assert_eq!(router.admit(bytes(A, "x")), Some(bytes(A, "x")));
        assert_eq!(router.admit(Input::Tick), Some(Input::Tick));
    }

    #[test]
    fn inputs_of_unknown_connections_are_dropped() {
        let mut router = ConnRouter::default();
        assert_eq!(router.admit(bytes(A, "x")), None);
    }

    #[test]
    fn paused_connection_holds_inputs_in_order_until_resumed() {
        let mut router = ConnRouter::default();
        router.open(A);
        router.open(B);
        router.pause(A);
        assert_eq!(router.admit(bytes(A, "1")), None);
        assert_eq!(router.admit(bytes(B, "b")), Some(bytes(B, "b")));
        assert_eq!(router.admit(closed(A)), None);
        assert_eq!(router.next_ready(), None);
        router.resume(A);
        assert_eq!(router.next_ready(), Some(bytes(A, "1")));
        assert_eq!(router.next_ready(), Some(closed(A)));
        assert_eq!(router.next_ready(), None);
        assert!(
            !router.is_open(A),
            "a delivered PgClosed ends the connection"
        );
    }

    #[test]
    fn pausing_again_while_released_inputs_wait_holds_them_again() {
        let mut router = ConnRouter::default();
        router.open(A);
        router.pause(A);
        router.admit(bytes(A, "1"));
        router.admit(bytes(A, "2"));
        router.resume(A);
        assert_eq!(router.next_ready(), Some(bytes(A, "1")));
        router.pause(A);
        assert_eq!(router.next_ready(), None);
        assert_eq!(router.admit(bytes(A, "3")), None);
        router.resume(A);
        assert_eq!(router.next_ready(), Some(bytes(A, "2")));
        assert_eq!(router.next_ready(), Some(bytes(A, "3")));
    }

    #[test]
    fn close_drops_held_ready_and_later_inputs() {
        let mut router = ConnRouter::default();
        router.open(A);
        router.pause(A);
        router.admit(bytes(A, "1"));
        router.resume(A);
        router.close(A);
        assert_eq!(router.next_ready(), None);
        assert_eq!(router.admit(closed(A)), None);
    }

    #[test]
    fn only_the_first_pg_closed_of_a_connection_is_delivered() {
        let mut router = ConnRouter::default();
        router.open(A);
        assert_eq!(router.admit(closed(A)), Some(closed(A)));
        let second = Input::PgClosed {
            conn: A,
            error: Some(read_error("reset")),
        };
        assert_eq!(router.admit(second), None);
    }

    #[test]
    fn a_charged_chunk_counts_until_its_last_copy_is_dropped() {
        let rooms = Arc::new(AtomicUsize::new(0));
        let counter = rooms.clone();
        let budget = ReadBudget::new(10, move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let first = budget.charge_vec(Vec::with_capacity(6));
        let second = budget.charge(b"12345");
        assert_eq!(&second[..], b"12345");
        assert_eq!(budget.in_use(), 11);
        assert!(!budget.has_room());
        let tail = second.slice(2..);
        drop(second);
        assert!(!budget.has_room(), "a slice still holds the chunk");
        assert_eq!(rooms.load(Ordering::SeqCst), 0);
        drop(tail);
        assert_eq!(budget.in_use(), 6);
        assert!(budget.has_room());
        assert_eq!(rooms.load(Ordering::SeqCst), 1, "room is announced once");
        drop(first);
        assert_eq!(budget.in_use(), 0);
        assert_eq!(
            rooms.load(Ordering::SeqCst),
            1,
            "no reader waits under the limit"
        );
    }

    #[test]
    fn injected_inputs_come_first_and_obey_the_same_rules() {
        let mut router = ConnRouter::default();
        router.open(A);
        router.inject(closed(A));
        router.inject(bytes(B, "never opened"));
        assert_eq!(router.next_ready(), Some(closed(A)));
        assert_eq!(router.next_ready(), None);
    }
}
