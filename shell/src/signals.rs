//! SIGINT and SIGTERM, for both shells (signal-hook: no async runtime needed).
//!
//! The first signal asks for a graceful stop: the listener hands `Input::Shutdown` to the
//! run loop, and the core decides how to stop (it exits 0 once the final position is
//! confirmed or its wait expired). A second signal means the operator is done waiting: the
//! process exits at once with the shell convention `128 + signal number`, i.e. **130** for
//! SIGINT and **143** for SIGTERM, without waiting for the core (nothing is acknowledged
//! that was not durable, so an abrupt stop is safe, only slower to resume).

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use std::io;
use std::thread::JoinHandle;

/// The exit code of a second signal: `128 + signo` (130 for SIGINT, 143 for SIGTERM).
pub fn second_signal_exit_code(signal: i32) -> i32 {
    128 + signal
}

/// A thread listening for SIGINT/SIGTERM while the run loop runs. Dropping it (or `stop`)
/// unregisters the handlers, so the default actions apply again.
#[derive(Debug)]
pub struct SignalListener {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl SignalListener {
    /// Registers the handlers; `on_first` runs (on the listener thread) for the first
    /// signal and must hand `Input::Shutdown` to the run loop.
    pub fn start(on_first: impl FnOnce() + Send + 'static) -> io::Result<SignalListener> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("slotline-signals".into())
            .spawn(move || {
                let mut on_first = Some(on_first);
                for signal in signals.forever() {
                    match on_first.take() {
                        Some(request_shutdown) => {
                            tracing::info!(
                                "signal {signal} received: stopping gracefully \
                                 (a second signal stops at once)"
                            );
                            request_shutdown();
                        }
                        None => {
                            let code = second_signal_exit_code(signal);
                            crate::logging::exit_reason(
                                code,
                                &format!("second signal {signal}: stopping at once, without waiting for the final confirmation"),
                            );
                            std::process::exit(code);
                        }
                    }
                }
            })?;
        Ok(SignalListener {
            handle,
            thread: Some(thread),
        })
    }

    /// Unregisters the handlers and waits for the listener thread to end.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for SignalListener {
    fn drop(&mut self) {
        self.shut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_signal_codes_follow_the_shell_convention() {
        assert_eq!(second_signal_exit_code(SIGINT), 130);
        assert_eq!(second_signal_exit_code(SIGTERM), 143);
    }
}
