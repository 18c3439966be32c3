//! Injected faults: failing the next ingress calls with 503 before or after applying them,
//! reading the next ingress bodies of a table slowly, failing queries after streaming
//! started, and answering 503 on every `/v0` call for a while. (Pause and restart live in `state`,
//! because they change what the pipeline does rather than what one response says.)
//!
//! Owns: the fault queue and the unavailability window. Never builds HTTP responses.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Error code of injected ingress failures unless another is asked for: the manager's
/// answer when it cannot tell whether the pipeline took the data.
pub const DEFAULT_INGRESS_FAILURE_CODE: &str = "PipelineInteractionUnreachable";
/// Error code of the unavailability window unless another is asked for.
pub const DEFAULT_UNAVAILABLE_CODE: &str = "PipelineUnavailable";

/// Whether a failed ingress call was applied before the 503 went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Nothing is ingested; the 503 is honest.
    BeforeApply,
    /// The request is ingested (and will complete) but the client sees 503 and no token:
    /// the lost-response case.
    AfterApply,
}

/// One queued ingress failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressFailure {
    pub mode: FailMode,
    pub error_code: String,
}

/// The next `requests` ingress bodies of a table are read at about `bytes_per_sec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowRead {
    pub requests: usize,
    pub bytes_per_sec: u64,
}

/// All `/v0` calls answer 503 until `until` (or until cleared when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub until: Option<Instant>,
    pub error_code: String,
}

/// The current fault plan.
#[derive(Debug, Default)]
pub struct Faults {
    ingress: VecDeque<IngressFailure>,
    unavailable: Option<Unavailable>,
    /// Queries still to fail after their rows were streamed.
    query_midstream: usize,
    /// By input table index.
    slow_reads: BTreeMap<usize, SlowRead>,
}

/// More queued failures than this is a test bug, not a plan.
const MAX_QUEUED_FAILURES: usize = 1_000_000;

impl Faults {
    /// Queues `count` failures for the next ingress calls (after any already queued).
    pub fn fail_next_ingress(&mut self, count: usize, mode: FailMode, error_code: &str) {
        let room = MAX_QUEUED_FAILURES.saturating_sub(self.ingress.len());
        for _ in 0..count.min(room) {
            self.ingress.push_back(IngressFailure {
                mode,
                error_code: error_code.to_string(),
            });
        }
    }

    /// The failure planned for this ingress call, if any.
    pub fn take_ingress_failure(&mut self) -> Option<IngressFailure> {
        self.ingress.pop_front()
    }

    /// The next `requests` ingress bodies of `table` are read at `bytes_per_sec` (replacing
    /// any slow reading planned for it; zero requests ends it).
    pub fn read_slowly(&mut self, table: usize, requests: usize, bytes_per_sec: u64) {
        debug_assert!(bytes_per_sec > 0, "a rate of zero would never finish");
        if requests == 0 {
            self.slow_reads.remove(&table);
        } else {
            self.slow_reads.insert(
                table,
                SlowRead {
                    requests,
                    bytes_per_sec,
                },
            );
        }
    }

    /// The rate at which this ingress body of `table` is to be read, if slowly (consumes
    /// one planned request).
    pub fn take_slow_read(&mut self, table: usize) -> Option<u64> {
        let plan = self.slow_reads.get_mut(&table)?;
        let rate = plan.bytes_per_sec;
        plan.requests -= 1;
        if plan.requests == 0 {
            self.slow_reads.remove(&table);
        }
        Some(rate)
    }

    /// Slow reads still planned, as `(table index, plan)`.
    pub fn slow_reads(&self) -> Vec<(usize, SlowRead)> {
        self.slow_reads.iter().map(|(t, p)| (*t, *p)).collect()
    }

    /// The next `count` successful queries end with an `{"error": ...}` line.
    pub fn fail_next_queries(&mut self, count: usize) {
        self.query_midstream = self.query_midstream.saturating_add(count);
    }

    /// Whether this query is to fail mid-stream (consumes one planned failure).
    pub fn take_query_failure(&mut self) -> bool {
        let planned = self.query_midstream > 0;
        self.query_midstream = self.query_midstream.saturating_sub(1);
        planned
    }

    pub fn queued_ingress_failures(&self) -> usize {
        self.ingress.len()
    }

    pub fn set_unavailable(&mut self, now: Instant, duration: Option<Duration>, error_code: &str) {
        self.unavailable = Some(Unavailable {
            until: duration.map(|d| now + d),
            error_code: error_code.to_string(),
        });
    }

    pub fn clear_unavailable(&mut self) {
        self.unavailable = None;
    }

    /// The error code to answer with if `/v0` is unavailable at `now`; an elapsed window
    /// is dropped.
    pub fn unavailable_code(&mut self, now: Instant) -> Option<String> {
        match &self.unavailable {
            Some(u) if u.until.is_none_or(|t| now < t) => Some(u.error_code.clone()),
            Some(_) => {
                self.unavailable = None;
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_taken_in_order_and_the_window_closes() {
        let mut f = Faults::default();
        f.fail_next_ingress(1, FailMode::AfterApply, "X");
        f.fail_next_ingress(1, FailMode::BeforeApply, "Y");
        assert_eq!(
            f.take_ingress_failure().map(|x| x.mode),
            Some(FailMode::AfterApply)
        );
        assert_eq!(
            f.take_ingress_failure().map(|x| x.error_code),
            Some("Y".to_string())
        );
        assert_eq!(f.take_ingress_failure(), None);

        f.read_slowly(2, 2, 100);
        assert_eq!(f.take_slow_read(1), None, "another table");
        assert_eq!(f.take_slow_read(2), Some(100));
        assert_eq!(f.take_slow_read(2), Some(100));
        assert_eq!(f.take_slow_read(2), None, "two requests only");
        f.read_slowly(2, 5, 100);
        f.read_slowly(2, 0, 100);
        assert_eq!(f.take_slow_read(2), None, "zero requests ends it");

        let t0 = Instant::now();
        f.set_unavailable(t0, Some(Duration::from_millis(10)), "PipelineUnavailable");
        assert!(f.unavailable_code(t0).is_some());
        assert!(f.unavailable_code(t0 + Duration::from_millis(10)).is_none());
    }
}
