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
pub mod env_warnings;
pub mod http;
pub mod launch;
pub mod logging;
mod machine;
pub mod metrics;
pub mod passfile;
pub mod run;
pub mod signals;
pub mod state_dir;
pub mod state_file;
pub mod tcp;
pub mod tls;

pub use clock::Clock;
pub use dispatch::{dispatch, feed, Executor, Flow};
pub use machine::Machine;
pub use run::{cannot_start, run, shutdown_signals, RunOptions, Runtime};

/// How many inputs may wait for the core before producers (socket readers, HTTP workers)
/// block. Bounds memory when the core is slower than the network: a reader that cannot
/// hand over its chunk stops reading, and TCP pushes back on the server.
pub const INPUT_QUEUE: usize = 256;
