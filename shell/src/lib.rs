//! What both slotline shells share: the command line, logging, signals, the HTTP executor,
//! the clock, the mapping of commands onto I/O and the run loop itself.
//!
//! A shell is a byte pipe, an HTTP executor, a timer and `exit`: it executes the core's
//! commands one to one and feeds every I/O result back as an input (the drive contract is
//! documented on `slotline_core::io`). Everything here is independent of the runtime that
//! waits for I/O: each shell (`slotline` on tokio, `slotline-blocking` on std threads)
//! brings only a `run::Runtime` (its sockets and its wait) and calls `run::run`.
//!
//! Never here: any decision about the domain (LSNs, batches, retries, Feldera answers),
//! any async runtime (`cargo tree -p slotline-shell -e normal` shows no tokio).
#![forbid(unsafe_code)]

pub mod cli;
pub mod clock;
pub mod conns;
pub mod dispatch;
pub mod http;
pub mod launch;
pub mod logging;
pub mod metrics;
pub mod passfile;
pub mod run;
pub mod signals;
pub mod state_file;
pub mod tls;

pub use clock::Clock;
pub use dispatch::{dispatch, feed, Executor, Flow};
pub use run::{run, Runtime};

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

/// What a binary drives: the pipeline, or one of the operator's commands (`check`,
/// `status`, `drop-slot`, `ddl`), all through the same run loop.
#[derive(Debug)]
pub enum Machine {
    Pipeline(Box<slotline_core::pipeline::Pipeline>),
    Check(Box<slotline_core::ops::Check>),
    Status(Box<slotline_core::ops::Status>),
    DropSlot(Box<slotline_core::ops::DropSlot>),
    Ddl(Box<slotline_core::ops::Ddl>),
}

impl Machine {
    fn driver(&self) -> &dyn slotline_core::io::Driver {
        match self {
            Machine::Pipeline(m) => &**m,
            Machine::Check(m) => &**m,
            Machine::Status(m) => &**m,
            Machine::DropSlot(m) => &**m,
            Machine::Ddl(m) => &**m,
        }
    }

    fn driver_mut(&mut self) -> &mut dyn slotline_core::io::Driver {
        match self {
            Machine::Pipeline(m) => &mut **m,
            Machine::Check(m) => &mut **m,
            Machine::Status(m) => &mut **m,
            Machine::DropSlot(m) => &mut **m,
            Machine::Ddl(m) => &mut **m,
        }
    }
}

impl slotline_core::io::Driver for Machine {
    fn handle(&mut self, now: slotline_core::time::Now, input: slotline_core::io::Input) {
        self.driver_mut().handle(now, input);
    }

    fn poll_command(&mut self) -> Option<slotline_core::io::Command> {
        self.driver_mut().poll_command()
    }

    fn poll_timeout(&self) -> Option<slotline_core::timer::Deadline> {
        self.driver().poll_timeout()
    }

    fn health(&self) -> Option<slotline_core::health::Health> {
        self.driver().health()
    }
}

/// How many inputs may wait for the core before producers (socket readers, HTTP workers)
/// block. Bounds memory when the core is slower than the network: a reader that cannot
/// hand over its chunk stops reading, and TCP pushes back on the server.
pub const INPUT_QUEUE: usize = 256;

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
