//! The blocking runtime of `slotline-blocking`: std threads and crossbeam channels, no
//! async runtime.
//!
//! One main loop owns the core. Socket readers, connection writers, HTTP workers and the
//! signal listener run on their own threads and hand inputs to a bounded channel; the loop
//! waits on it with `recv_deadline` until the core's deadline, and feeds `Tick` only once
//! the clock says the deadline has passed.

mod tcp;

use crate::conns::ConnRouter;
use crate::dispatch::{dispatch, feed, ConnTable, Flow, ShellIo};
use crate::http::HttpPool;
use crate::{Clock, RunOptions, INPUT_QUEUE};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use slotline_core::feldera::HttpRequest;
use slotline_core::io::{ConnId, Driver, HttpId, Input};
use std::sync::Arc;
use tcp::TcpConn;

/// Drives `core` until it emits `Exit`, and returns that exit code (the binary passes it
/// to `std::process::exit`). Returns 1 if the shell's own threads cannot be started.
pub fn run<D: Driver>(mut core: D, clock: Clock, options: RunOptions) -> i32 {
    let (inputs, queue) = crossbeam_channel::bounded::<Input>(INPUT_QUEUE);
    let mut io = match BlockingIo::start(&inputs, options.http_workers) {
        Ok(io) => io,
        Err(error) => return crate::cannot_start("the HTTP workers", &error),
    };
    let sender = inputs.clone();
    let _signals = match crate::shutdown_signals(&options, move || {
        let _ = sender.send(Input::Shutdown);
    }) {
        Ok(listener) => listener,
        Err(code) => return code,
    };
    let mut router = ConnRouter::default();
    loop {
        while let Some(command) = core.poll_command() {
            if let Flow::Exit(code) = dispatch(command, &mut io, &mut router) {
                io.finish();
                return code;
            }
        }
        let input = match router.next_ready() {
            Some(input) => input,
            None => wait(&queue, &clock, &core, &mut router),
        };
        feed(&mut core, clock.now(), input, &mut io);
    }
}

/// Waits for the next input the core should get, or for its deadline to pass.
fn wait<D: Driver>(
    queue: &Receiver<Input>,
    clock: &Clock,
    core: &D,
    router: &mut ConnRouter,
) -> Input {
    let deadline = core.poll_timeout();
    loop {
        let received = match deadline {
            Some(deadline) => queue.recv_deadline(clock.instant_at(deadline.at)),
            // `BlockingIo` holds a sender, so the queue never disconnects while we wait.
            None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(input) => {
                if let Some(input) = router.admit(input) {
                    return input;
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                if deadline.is_some_and(|d| clock.reached(d.at)) {
                    return Input::Tick;
                }
            }
        }
    }
}

/// The blocking `Executor`: connection threads and the HTTP pool.
struct BlockingIo {
    inputs: Sender<Input>,
    conns: ConnTable<TcpConn>,
    http: HttpPool,
}

impl BlockingIo {
    fn start(inputs: &Sender<Input>, http_workers: usize) -> std::io::Result<BlockingIo> {
        let sender = inputs.clone();
        let deliver: crate::http::Deliver = Arc::new(move |input| {
            let _ = sender.send(input);
        });
        Ok(BlockingIo {
            inputs: inputs.clone(),
            conns: ConnTable::default(),
            http: HttpPool::start(http_workers, deliver)?,
        })
    }
}

impl BlockingIo {
    /// Before exiting: the bytes already handed over reach their sockets (bounded).
    fn finish(&mut self) {
        let deadline = std::time::Instant::now() + crate::dispatch::EXIT_FLUSH;
        for conn in self.conns.take_all() {
            conn.close_and_wait(deadline);
        }
    }
}

impl ShellIo for BlockingIo {
    type Conn = TcpConn;

    fn conns(&mut self) -> &mut ConnTable<TcpConn> {
        &mut self.conns
    }

    fn open(&mut self, conn: ConnId, host: String, port: u16) -> TcpConn {
        TcpConn::open(conn, host, port, self.inputs.clone())
    }

    fn submit_http(&mut self, id: HttpId, request: HttpRequest) {
        self.http.submit(id, request);
    }
}
