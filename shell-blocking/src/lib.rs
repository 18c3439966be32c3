//! The blocking runtime of `slotline-blocking`: std threads and crossbeam channels, no
//! async runtime.
//!
//! The shared run loop (`slotline_shell::run`) owns the core. Socket readers, connection
//! writers, HTTP workers and the signal listener run on their own threads and hand inputs
//! to a bounded channel; the loop waits on it with `recv_deadline` until the core's
//! deadline.
//!
//! Never here: any async runtime (`cargo tree -p slotline-blocking -e normal` shows none).
#![forbid(unsafe_code)]

mod conn;

use conn::PgConn;
use crossbeam_channel::{Receiver, Sender};
use slotline_core::io::{ConnId, Driver, Input, PgTarget};
use slotline_shell::http::Deliver;
use slotline_shell::{Clock, RunOptions, Runtime, INPUT_QUEUE};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Drives `core` until it emits `Exit`, and returns that exit code (the binary passes it
/// to `std::process::exit`). Returns 1 if the shell's own threads cannot be started.
pub fn run<D: Driver>(core: D, clock: Clock, options: RunOptions) -> i32 {
    let (inputs, queue) = crossbeam_channel::bounded::<Input>(INPUT_QUEUE);
    slotline_shell::run(core, clock, options, Blocking { inputs, queue })
}

/// The input queue; connections get a sender each.
struct Blocking {
    inputs: Sender<Input>,
    queue: Receiver<Input>,
}

impl Runtime for Blocking {
    type Conn = PgConn;

    fn deliver(&self) -> Deliver {
        let sender = self.inputs.clone();
        Arc::new(move |input| {
            let _ = sender.send(input);
        })
    }

    fn open(&mut self, conn: ConnId, target: PgTarget, timeout: Option<Duration>) -> PgConn {
        PgConn::open(conn, target, timeout, self.inputs.clone())
    }

    fn recv(&mut self, until: Option<Instant>) -> Option<Input> {
        // `self` holds a sender, so the queue never disconnects while we wait.
        match until {
            Some(until) => self.queue.recv_deadline(until).ok(),
            None => self.queue.recv().ok(),
        }
    }

    fn finish(&mut self, conns: Vec<PgConn>, deadline: Instant) {
        for conn in conns {
            conn.close_and_wait(deadline);
        }
    }
}
