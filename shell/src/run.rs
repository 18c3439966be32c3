//! The run loop, written once for both shells.
//!
//! ```text
//! loop {
//!     while let Some(cmd) = core.poll_command() { dispatch(cmd) }   // Exit returns its code
//!     let input = held input ready? | runtime.recv(until the core's deadline)
//!     core.handle(clock.now(), input)
//! }
//! ```
//!
//! A shell differs from the other only in its `Runtime`: how a PostgreSQL connection is
//! opened and driven, how the loop waits for its next input, and how connections are let
//! flush before the process exits. The loop itself is synchronous; the tokio runtime
//! implements the wait with `block_on` on a current-thread runtime, so its connection tasks
//! run while the loop waits (docs/architecture.md, "The shells").

use crate::clock::Clock;
use crate::conns::ConnRouter;
use crate::dispatch::{dispatch, feed, ConnHandle, ConnTable, Executor, Flow};
use crate::http::{Deliver, HttpPool};
use crate::tls::{server_name, TlsSetup, TlsStart};
use crate::{http, logging, metrics, signals, tls};
use bytes::Bytes;
use slotline_core::feldera::HttpRequest;
use slotline_core::io::{ConnFailure, ConnId, Driver, HttpId, Input, PgTarget, TlsVerify};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a shell's runtime provides to the shared run loop.
pub trait Runtime {
    /// The run loop's side of one open PostgreSQL connection.
    type Conn: ConnHandle;

    /// Hands an input to the loop's queue, from any thread (HTTP workers, the signal
    /// listener), blocking while the queue is full.
    fn deliver(&self) -> Deliver;

    /// Starts opening a connection (giving up after `timeout`); its inputs (`PgConnected`
    /// first, or `PgClosed`) arrive through the queue.
    fn open(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>) -> Self::Conn;

    /// Waits for the next input, until `until` at most (for ever when `None`). `None`
    /// means the time came or the wait woke early: the loop checks the clock itself.
    fn recv(&mut self, until: Option<Instant>) -> Option<Input>;

    /// Before exiting: lets the connections write what they were handed, until
    /// `deadline` at most.
    fn finish(&mut self, conns: Vec<Self::Conn>, deadline: Instant);
}

/// Drives `core` until it emits `Exit`, and returns that exit code (the binary passes it
/// to `std::process::exit`). Returns 1 if the shell's own threads cannot be started.
pub fn run<D: Driver, R: Runtime>(
    mut core: D,
    clock: Clock,
    options: RunOptions,
    runtime: R,
) -> i32 {
    let deliver = runtime.deliver();
    let agent = crate::http::new_agent(options.tls.feldera_roots.as_deref());
    let http = match HttpPool::start(options.http_workers, agent, deliver.clone()) {
        Ok(http) => http,
        Err(error) => return cannot_start("the HTTP workers", &error),
    };
    let _signals = match shutdown_signals(&options, move || deliver(Input::Shutdown)) {
        Ok(listener) => listener,
        Err(code) => return code,
    };
    let mut shell = Shell {
        runtime,
        conns: ConnTable::default(),
        http,
        tls: options.tls.clone(),
    };
    let mut router = ConnRouter::default();
    let mut metrics = options.metrics.clone();
    loop {
        if let Some(metrics) = metrics.as_mut() {
            metrics.publish(|| core.health(), false);
        }
        while let Some(command) = core.poll_command() {
            if let Flow::Exit(code) = dispatch(command, &mut shell, &mut router) {
                if let Some(metrics) = metrics.as_mut() {
                    metrics.publish(|| core.health(), true);
                }
                let deadline = Instant::now() + crate::dispatch::EXIT_FLUSH;
                let conns = shell.conns.take_all();
                shell.runtime.finish(conns, deadline);
                return code;
            }
        }
        let publish_at = metrics.as_ref().and_then(|m| m.due());
        let input = match router.next_ready() {
            Some(input) => input,
            None => match wait(&mut shell.runtime, &clock, &core, &mut router, publish_at) {
                Some(input) => input,
                // Nothing for the core yet, but the status it published is stale.
                None => continue,
            },
        };
        feed(&mut core, clock.now(), input, &mut shell);
    }
}

/// Waits for the next input the core should get, or for its deadline to pass; `None`
/// when `publish_at` (the metrics publisher's `due`) comes first.
fn wait<D: Driver, R: Runtime>(
    runtime: &mut R,
    clock: &Clock,
    core: &D,
    router: &mut ConnRouter,
    publish_at: Option<Instant>,
) -> Option<Input> {
    let deadline = core.poll_timeout();
    let until = deadline.map(|d| clock.instant_at(d.at));
    let until = match (until, publish_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    loop {
        match runtime.recv(until) {
            Some(input) => {
                if let Some(input) = router.admit(input) {
                    return Some(input);
                }
            }
            None => {
                if deadline.is_some_and(|d| clock.reached(d.at)) {
                    return Some(Input::Tick);
                }
                if publish_at.is_some_and(|at| Instant::now() >= at) {
                    return None;
                }
            }
        }
    }
}

/// A runtime with the connection table and the HTTP pool: the `Executor` of `dispatch`.
struct Shell<R: Runtime> {
    runtime: R,
    conns: ConnTable<R::Conn>,
    http: HttpPool,
    tls: Arc<TlsSetup>,
}

impl<R: Runtime> Executor for Shell<R> {
    fn connect(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>) {
        let handle = self.runtime.open(conn, target, timeout);
        self.conns.insert(conn, handle);
    }

    fn start_tls(
        &mut self,
        conn: ConnId,
        host: &str,
        verify: TlsVerify,
        timeout: Option<Duration>,
    ) -> Result<(), ConnFailure> {
        let start = TlsStart {
            config: self.tls.pg.config(verify)?,
            server_name: server_name(host, verify)?,
            timeout,
        };
        if let Some(handle) = self.conns.get(conn) {
            handle.start_tls(start);
        }
        Ok(())
    }

    fn write(&mut self, conn: ConnId, bytes: Bytes) {
        if let Some(handle) = self.conns.get(conn) {
            handle.write(bytes);
        }
    }

    fn pause(&mut self, conn: ConnId) {
        if let Some(handle) = self.conns.get(conn) {
            handle.pause();
        }
    }

    fn resume(&mut self, conn: ConnId) {
        if let Some(handle) = self.conns.get(conn) {
            handle.resume();
        }
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(handle) = self.conns.remove(conn) {
            handle.close();
        }
    }

    fn http(&mut self, id: HttpId, request: HttpRequest) {
        self.http.submit(id, request);
    }

    fn http_read(&mut self, id: HttpId) {
        self.http.read_more(id);
    }

    fn http_cancel(&mut self, id: HttpId) {
        self.http.cancel(id);
    }
}

/// How a run loop is set up. The binaries use the default with the TLS setup `launch`
/// prepared; in-process tests turn signal handling off (it is process-wide) unless they
/// test it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Install the SIGINT/SIGTERM handlers (see `signals`).
    pub handle_signals: bool,
    /// Threads executing HTTP requests concurrently.
    pub http_workers: usize,
    /// Certificates and client configurations, read and built before the run.
    pub tls: std::sync::Arc<tls::TlsSetup>,
    /// Where the core's status goes for `/metrics` and `/readyz` (`METRICS_ADDR`).
    pub metrics: Option<metrics::Publisher>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            handle_signals: true,
            http_workers: http::DEFAULT_WORKERS,
            tls: std::sync::Arc::default(),
            metrics: None,
        }
    }
}

/// Says why a shell's own machinery could not start (whatever `RUST_LOG` says, see
/// `logging::exit_reason`) and gives the exit code for it.
pub fn cannot_start(what: &str, error: &std::io::Error) -> i32 {
    let code = slotline_core::io::exit::FATAL;
    logging::exit_reason(code, &format!("cannot start {what}: {error}"));
    code
}

/// Starts the SIGINT/SIGTERM listener when `options` ask for it; `on_first` delivers
/// `Input::Shutdown` to the shell's queue. `Err` carries the exit code when it cannot start.
pub fn shutdown_signals(
    options: &RunOptions,
    on_first: impl FnOnce() + Send + 'static,
) -> Result<Option<signals::SignalListener>, i32> {
    if !options.handle_signals {
        return Ok(None);
    }
    signals::SignalListener::start(on_first)
        .map(Some)
        .map_err(|error| cannot_start("the signal handlers", &error))
}
