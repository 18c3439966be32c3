//! Waiting for Feldera to complete a batch: how often to ask, when to say it is slow, and
//! when to give up.
//!
//! Polls start a few milliseconds apart (a quick pipeline answers within one or two) and the
//! interval doubles up to a cap, so a slow pipeline is not hammered. A wait longer than
//! `SLOW_AFTER_US` is logged once; one longer than the configured timeout ends the session
//! without acknowledging (the batch will be replayed).

use crate::time::Mono;

pub const FIRST_POLL_US: u64 = 2_000;
pub const MAX_POLL_US: u64 = 200_000;
pub const SLOW_AFTER_US: u64 = 5_000_000;

/// The state of one completion wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletionWait {
    started: Mono,
    timeout_us: u64,
    next_interval_us: u64,
    polls: u32,
    slow_logged: bool,
}

/// What the wait wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitVerdict {
    /// Keep waiting; ask again at this instant.
    PollAt(Mono),
    /// Over the timeout: give up on this session.
    TimedOut { waited_us: u64 },
}

impl CompletionWait {
    pub fn new(started: Mono, timeout_ms: u64) -> CompletionWait {
        CompletionWait {
            started,
            timeout_us: timeout_ms.saturating_mul(1000),
            next_interval_us: FIRST_POLL_US,
            polls: 0,
            slow_logged: false,
        }
    }

    pub fn started(&self) -> Mono {
        self.started
    }

    pub fn polls(&self) -> u32 {
        self.polls
    }

    pub fn timeout_at(&self) -> Mono {
        self.started.plus_us(self.timeout_us)
    }

    pub fn slow_log_at(&self) -> Option<Mono> {
        (!self.slow_logged).then(|| self.started.plus_us(SLOW_AFTER_US))
    }

    /// An answer said "in progress" at `now`: when to ask again, or give up.
    pub fn in_progress(&mut self, now: Mono) -> WaitVerdict {
        let waited_us = now.since(self.started);
        if waited_us >= self.timeout_us {
            return WaitVerdict::TimedOut { waited_us };
        }
        self.polls += 1;
        let at = now.plus_us(self.next_interval_us).min(self.timeout_at());
        self.next_interval_us = (self.next_interval_us * 2).min(MAX_POLL_US);
        WaitVerdict::PollAt(at)
    }

    /// Whether the one "slow" log line is due now (true once).
    pub fn take_slow_log(&mut self, now: Mono) -> bool {
        if !self.slow_logged && now.since(self.started) >= SLOW_AFTER_US {
            self.slow_logged = true;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_interval_grows_from_milliseconds_to_the_cap() {
        let mut w = CompletionWait::new(Mono(0), 60_000);
        let mut now = Mono(0);
        let mut gaps = Vec::new();
        for _ in 0..10 {
            let WaitVerdict::PollAt(at) = w.in_progress(now) else {
                panic!("timed out early")
            };
            gaps.push(at.since(now) / 1000);
            now = at;
        }
        assert_eq!(gaps, [2, 4, 8, 16, 32, 64, 128, 200, 200, 200]);
    }

    #[test]
    fn wait_times_out_and_polls_never_pass_the_timeout() {
        let mut w = CompletionWait::new(Mono(0), 100);
        assert_eq!(
            w.in_progress(Mono(99_000)),
            WaitVerdict::PollAt(Mono(100_000))
        );
        assert_eq!(
            w.in_progress(Mono(100_000)),
            WaitVerdict::TimedOut { waited_us: 100_000 }
        );
    }

    #[test]
    fn slow_wait_is_logged_once() {
        let mut w = CompletionWait::new(Mono(1_000_000), 60_000);
        assert_eq!(w.slow_log_at(), Some(Mono(6_000_000)));
        assert!(!w.take_slow_log(Mono(5_999_999)));
        assert!(w.take_slow_log(Mono(6_000_000)));
        assert!(!w.take_slow_log(Mono(7_000_000)));
        assert_eq!(w.slow_log_at(), None);
    }
}
