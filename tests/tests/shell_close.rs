//! `PgClose` on a connection whose peer stopped reading: the queued bytes get a grace
//! period, then the socket is shut down under the blocked write, in both shells. Without
//! it the socket and its thread or task would live until TCP gives up (many minutes).

use bytes::Bytes;
use slotline_core::io::{Command, ConnId, Driver, Input, PgTarget};
use slotline_core::time::{Mono, Now};
use slotline_core::timer::{Deadline, TimerKind};
use slotline_shell::conns::CLOSE_GRACE;
use slotline_shell::{Clock, RunOptions};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::time::Duration;

/// More than any socket buffers hold, so the write blocks on a peer that does not read.
const FLOOD_BYTES: usize = 64 * 1024 * 1024;

/// Connects, floods, closes, then waits long enough for the grace to pass and exits.
struct Flooder {
    port: u16,
    commands: VecDeque<Command>,
    exit_at: Option<Mono>,
    unexpected: Vec<String>,
}

impl Driver for Flooder {
    fn handle(&mut self, now: Now, input: Input) {
        match input {
            Input::PgConnected { conn } => {
                let bytes = Bytes::from(vec![b'x'; FLOOD_BYTES]);
                self.commands.push_back(Command::PgWrite { conn, bytes });
                self.commands.push_back(Command::PgClose { conn });
                let wait = CLOSE_GRACE + Duration::from_secs(4);
                self.exit_at = Some(now.mono.plus_ms(wait.as_millis() as u64));
            }
            Input::Tick if self.exit_at.is_some_and(|at| now.mono >= at) => {
                let code = if self.unexpected.is_empty() { 0 } else { 1 };
                self.commands.push_back(Command::Exit {
                    code,
                    reason: format!("{:?}", self.unexpected),
                });
            }
            Input::Tick => {}
            other => self.unexpected.push(format!("{other:?}")),
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        if self.port != 0 {
            let port = std::mem::take(&mut self.port);
            self.commands.push_back(Command::PgConnect {
                conn: ConnId(1),
                target: PgTarget::Tcp {
                    host: "127.0.0.1".into(),
                    port,
                    keepalive: None,
                },
                timeout_ms: None,
            });
        }
        self.commands.pop_front()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        self.exit_at.map(|at| Deadline {
            at,
            why: TimerKind::ShutdownConfirm,
        })
    }
}

type Runner = fn(Flooder, Clock, RunOptions) -> i32;

fn stuck_write_is_abandoned_after_the_grace(name: &str, run: Runner) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let peer = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        // Take nothing until the grace has passed.
        std::thread::sleep(CLOSE_GRACE + Duration::from_secs(1));
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut total = 0usize;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(format!("still open after {total} bytes"));
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(total),
                Err(e) => return Err(e.to_string()),
            }
        }
    });
    let core = Flooder {
        port,
        commands: VecDeque::new(),
        exit_at: None,
        unexpected: Vec::new(),
    };
    let options = RunOptions {
        handle_signals: false,
        http_workers: 1,
        ..RunOptions::default()
    };
    let code = run(core, Clock::start(), options);
    assert_eq!(code, 0, "{name}: no input after PgClose");
    let received = peer
        .join()
        .expect("peer")
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(received < FLOOD_BYTES, "{name}: the write was cut short");
}

#[test]
fn blocking_shell_abandons_a_stuck_write_after_the_close_grace() {
    stuck_write_is_abandoned_after_the_grace("blocking", slotline_blocking::run);
}

#[test]
fn tokio_shell_abandons_a_stuck_write_after_the_close_grace() {
    stuck_write_is_abandoned_after_the_grace("tokio", slotline::run);
}
