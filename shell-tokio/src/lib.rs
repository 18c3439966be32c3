//! `slotline`: slotline on a tokio runtime.
//!
//! Only what depends on the runtime lives here: sockets (a task per connection), the input
//! channel and the wait for the next input (`block_on` of a receive raced against
//! `sleep_until` on a current-thread runtime, so connection tasks run while the loop
//! waits). The run loop, the command line, logging, signals, the HTTP executor (a thread
//! pool running ureq), the clock and the command mapping come from `slotline_shell`, so
//! both shells execute every command the same way.
#![forbid(unsafe_code)]

mod conn;

use conn::PgConn;
use slotline_core::io::{ConnId, Driver, Input, PgTarget};
use slotline_shell::conns::{COALESCE, COALESCE_BELOW};
use slotline_shell::http::Deliver;
use slotline_shell::{Clock, RunOptions, Runtime, INPUT_QUEUE};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Drives `core` on a new current-thread runtime until it emits `Exit`, and returns that
/// exit code (the binary passes it to `std::process::exit`). Returns 1 if the runtime or
/// the shell's own threads cannot be started.
pub fn run<D: Driver>(core: D, clock: Clock, options: RunOptions) -> i32 {
    // One thread is enough: the loop only moves bytes; HTTP runs on the shared pool.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return slotline_shell::cannot_start("the tokio runtime", &error),
    };
    let (inputs, queue) = mpsc::channel::<Input>(INPUT_QUEUE);
    slotline_shell::run(
        core,
        clock,
        options,
        Tokio {
            runtime,
            inputs,
            queue,
            coalesce: false,
        },
    )
}

/// The runtime and the input queue; connection tasks get a sender each.
struct Tokio {
    runtime: tokio::runtime::Runtime,
    inputs: mpsc::Sender<Input>,
    queue: mpsc::Receiver<Input>,
    /// The last input was a small read: before waiting for the next one, the loop's thread
    /// sleeps `COALESCE` so that the messages that follow arrive as one read
    /// (docs/architecture.md, "How both shells read a connection").
    coalesce: bool,
}

impl Tokio {
    fn wait(&mut self, until: Option<std::time::Instant>) -> Option<Input> {
        if self.coalesce {
            // Something already queued is taken without waiting.
            if let Ok(input) = self.queue.try_recv() {
                return Some(input);
            }
            // The thread sleeps outside the runtime: no task runs and, above all, the
            // runtime is not parked in epoll, where every message a walsender flushes on
            // its own would wake it (edge-triggered readiness fires per arrival, whether a
            // reader is waiting or not). Bytes gather in the socket meanwhile.
            let now = std::time::Instant::now();
            let wake = until.map_or(now + COALESCE, |until| until.min(now + COALESCE));
            std::thread::sleep(wake.saturating_duration_since(now));
        }
        let queue = &mut self.queue;
        // `self` holds a sender, so the queue never closes while we wait.
        self.runtime.block_on(async {
            match until {
                Some(until) => {
                    tokio::select! {
                        biased;
                        input = queue.recv() => input,
                        () = tokio::time::sleep_until(until.into()) => None,
                    }
                }
                None => queue.recv().await,
            }
        })
    }
}

impl Runtime for Tokio {
    type Conn = PgConn;

    fn deliver(&self) -> Deliver {
        let sender = self.inputs.clone();
        // HTTP workers and the signal listener are plain threads, outside the runtime: a
        // blocking send is allowed.
        Arc::new(move |input| {
            let _ = sender.blocking_send(input);
        })
    }

    fn open(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>) -> PgConn {
        let _runtime = self.runtime.enter();
        PgConn::open(conn, target, timeout, self.inputs.clone())
    }

    fn recv(&mut self, until: Option<std::time::Instant>) -> Option<Input> {
        let input = self.wait(until);
        // See `coalesce`: decided on what this wait returns, applied to the next one.
        self.coalesce =
            matches!(&input, Some(Input::PgBytes { bytes, .. }) if bytes.len() < COALESCE_BELOW);
        input
    }

    fn finish(&mut self, conns: Vec<PgConn>, deadline: std::time::Instant) {
        self.runtime.block_on(async {
            for conn in conns {
                conn.close_and_wait(deadline.into()).await;
            }
        });
    }
}
