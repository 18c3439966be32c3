//! The first SIGTERM reaches the core as `Input::Shutdown` in both shells, and the run
//! returns the code the core exits with; a second SIGTERM exits the process at once with
//! 143 even when the core keeps running.
//!
//! One test function runs both shells in turn: signal handlers are process-wide, and each
//! run must have unregistered its handlers before the next one raises a signal. The
//! second-signal test kills its process, so it runs the shell in a child: this test binary
//! re-executed with `SHELL_SIGNAL_CHILD` set.

use signal_hook::consts::SIGTERM;
use slotline_core::io::{Command, Driver, Input};
use slotline_core::time::Now;
use slotline_core::timer::Deadline;
use slotline_shell::{Clock, RunOptions};
use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Waits for `Shutdown`, then exits 0. Says when the shell first asked for commands (the
/// handlers are registered by then) and records any other input.
struct AwaitShutdown {
    started: Option<mpsc::Sender<()>>,
    exit: Option<Command>,
    others: Vec<String>,
    report: mpsc::Sender<Vec<String>>,
}

impl Driver for AwaitShutdown {
    fn handle(&mut self, _now: Now, input: Input) {
        match input {
            Input::Shutdown => {
                self.exit = Some(Command::Exit {
                    code: 0,
                    reason: "graceful stop".into(),
                });
                let _ = self.report.send(self.others.clone());
            }
            other => self.others.push(format!("{other:?}")),
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        if let Some(started) = self.started.take() {
            let _ = started.send(());
        }
        self.exit.take()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        None
    }
}

type Runner = fn(AwaitShutdown, Clock, RunOptions) -> i32;

fn first_signal_becomes_shutdown(name: &str, run: Runner) {
    let (started, has_started) = mpsc::channel();
    let (report, reports) = mpsc::channel();
    let (exited, codes) = mpsc::channel();
    let core = AwaitShutdown {
        started: Some(started),
        exit: None,
        others: Vec::new(),
        report,
    };
    std::thread::spawn(move || {
        let options = RunOptions {
            handle_signals: true,
            http_workers: 1,
            ..RunOptions::default()
        };
        let _ = exited.send(run(core, Clock::start(), options));
    });
    has_started
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{name}: the run loop started"));
    // No Shutdown yet: the core only waits.
    assert!(codes.recv_timeout(Duration::from_millis(100)).is_err());
    signal_hook::low_level::raise(SIGTERM).expect("raise");
    let code = codes
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{name}: the run returned after SIGTERM"));
    assert_eq!(code, 0, "{name}: the core's exit code");
    let others = reports.recv().expect("report");
    assert!(
        others.is_empty(),
        "{name}: only Shutdown was fed: {others:?}"
    );
}

#[test]
fn first_sigterm_is_fed_as_shutdown_in_both_shells() {
    first_signal_becomes_shutdown("blocking", slotline_blocking::run::<AwaitShutdown>);
    first_signal_becomes_shutdown("tokio", slotline::run::<AwaitShutdown>);
}

/// Ignores `Shutdown` (says so on stdout) and never exits: only a second signal ends it.
struct Stubborn {
    announced: bool,
}

impl Driver for Stubborn {
    fn handle(&mut self, _now: Now, input: Input) {
        if input == Input::Shutdown {
            println!("CHILD got shutdown");
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        if !self.announced {
            self.announced = true;
            println!("CHILD ready");
        }
        None
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        None
    }
}

const CHILD_ENV: &str = "SHELL_SIGNAL_CHILD";

/// In the child: runs a shell until the second signal ends the process.
fn child_main(shell: &str) {
    let core = Stubborn { announced: false };
    let options = RunOptions::default();
    let code = match shell {
        "blocking" => slotline_blocking::run(core, Clock::start(), options),
        _ => slotline::run(core, Clock::start(), options),
    };
    println!("CHILD run returned {code}");
}

fn second_signal_exits_at_once(shell: &str) {
    let mut child = Process::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "second_sigterm_exits_143_at_once", "--nocapture"])
        .env(CHILD_ENV, shell)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let await_line = |wanted: &str| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            match lines.recv_timeout(Duration::from_secs(10)) {
                Ok(line) if line.contains(wanted) => return,
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        panic!("{shell}: the child never said {wanted:?}");
    };
    let term = || {
        let status = Process::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    };
    await_line("CHILD ready");
    term();
    await_line("CHILD got shutdown");
    term();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{shell}: the second SIGTERM did not end the process"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(143), "{shell}");
}

#[test]
fn second_sigterm_exits_143_at_once() {
    match std::env::var(CHILD_ENV) {
        Ok(shell) => child_main(&shell),
        Err(_) => {
            second_signal_exits_at_once("blocking");
            second_signal_exits_at_once("tokio");
        }
    }
}
