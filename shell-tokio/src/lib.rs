//! `slotline`: slotline on a tokio runtime.
//!
//! Only what depends on the runtime lives here: sockets (a task per connection), the input
//! channel and the wait for the core's deadline (`sleep_until`). The command line, logging,
//! signals, the HTTP executor (a thread pool running ureq, shared with the blocking shell),
//! the clock and the command mapping come from `slotline_shell`, so both shells execute
//! every command the same way.
#![forbid(unsafe_code)]

mod tcp;

use slotline_core::feldera::HttpRequest;
use slotline_core::io::{ConnId, Driver, HttpId, Input};
use slotline_shell::conns::ConnRouter;
use slotline_shell::dispatch::{ConnTable, ShellIo};
use slotline_shell::http::{Deliver, HttpPool};
use slotline_shell::{dispatch, feed, Clock, Flow, RunOptions, INPUT_QUEUE};
use std::sync::Arc;
use tcp::TcpConn;
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
    runtime.block_on(drive(core, clock, options))
}

async fn drive<D: Driver>(mut core: D, clock: Clock, options: RunOptions) -> i32 {
    let (inputs, mut queue) = mpsc::channel::<Input>(INPUT_QUEUE);
    let mut io = match TokioIo::start(&inputs, options.http_workers) {
        Ok(io) => io,
        Err(error) => return slotline_shell::cannot_start("the HTTP workers", &error),
    };
    let sender = inputs.clone();
    let _signals = match slotline_shell::shutdown_signals(&options, move || {
        let _ = sender.blocking_send(Input::Shutdown);
    }) {
        Ok(listener) => listener,
        Err(code) => return code,
    };
    let mut router = ConnRouter::default();
    loop {
        while let Some(command) = core.poll_command() {
            if let Flow::Exit(code) = dispatch(command, &mut io, &mut router) {
                io.finish().await;
                return code;
            }
        }
        let input = match router.next_ready() {
            Some(input) => input,
            None => wait(&mut queue, &clock, &core, &mut router).await,
        };
        feed(&mut core, clock.now(), input, &mut io);
    }
}

/// Waits for the next input the core should get, or for its deadline to pass.
async fn wait<D: Driver>(
    queue: &mut mpsc::Receiver<Input>,
    clock: &Clock,
    core: &D,
    router: &mut ConnRouter,
) -> Input {
    let deadline = core.poll_timeout();
    loop {
        // `TokioIo` holds a sender, so the queue never closes while we wait.
        let received = match deadline {
            Some(deadline) => {
                let at = tokio::time::Instant::from_std(clock.instant_at(deadline.at));
                tokio::select! {
                    biased;
                    input = queue.recv() => input,
                    () = tokio::time::sleep_until(at) => None,
                }
            }
            None => queue.recv().await,
        };
        match received {
            Some(input) => {
                if let Some(input) = router.admit(input) {
                    return input;
                }
            }
            None => {
                if deadline.is_some_and(|d| clock.reached(d.at)) {
                    return Input::Tick;
                }
            }
        }
    }
}

/// The tokio `Executor`: connection tasks and the shared HTTP pool.
struct TokioIo {
    inputs: mpsc::Sender<Input>,
    conns: ConnTable<TcpConn>,
    http: HttpPool,
}

impl TokioIo {
    fn start(inputs: &mpsc::Sender<Input>, http_workers: usize) -> std::io::Result<TokioIo> {
        let sender = inputs.clone();
        // HTTP workers are plain threads, outside the runtime: a blocking send is allowed.
        let deliver: Deliver = Arc::new(move |input| {
            let _ = sender.blocking_send(input);
        });
        Ok(TokioIo {
            inputs: inputs.clone(),
            conns: ConnTable::default(),
            http: HttpPool::start(http_workers, deliver)?,
        })
    }
}

impl TokioIo {
    /// Before exiting: the bytes already handed over reach their sockets (bounded).
    async fn finish(&mut self) {
        let deadline = tokio::time::Instant::now() + slotline_shell::dispatch::EXIT_FLUSH;
        for conn in self.conns.take_all() {
            conn.close_and_wait(deadline).await;
        }
    }
}

impl ShellIo for TokioIo {
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
