//! Test-only crash injection (`CRASH_AT`, `CRASH_AFTER_BATCHES`): decides when the process
//! must exit with code 70 at a named boundary. The decision is the core's; the shell only
//! executes the `Exit` command (no unwinding, no final status update).

use crate::config::{CrashPoint, CrashSpec};

/// Counts arrivals at the configured point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashInjector {
    spec: Option<CrashSpec>,
    reached: u64,
}

impl CrashInjector {
    pub fn new(spec: Option<CrashSpec>) -> CrashInjector {
        CrashInjector { spec, reached: 0 }
    }

    /// The process reached `point`: true when this is the N-th time for the configured one.
    pub fn reached(&mut self, point: CrashPoint) -> bool {
        match self.spec {
            Some(spec) if spec.point == point => {
                self.reached += 1;
                self.reached == spec.after
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crashes_on_the_nth_arrival_at_the_configured_point_only() {
        let mut c = CrashInjector::new(Some(CrashSpec {
            point: CrashPoint::AfterSend,
            after: 3,
        }));
        assert!(!c.reached(CrashPoint::BeforeSend));
        assert!(!c.reached(CrashPoint::AfterSend));
        assert!(!c.reached(CrashPoint::AfterSend));
        assert!(!c.reached(CrashPoint::AfterAck));
        assert!(c.reached(CrashPoint::AfterSend));
    }

    #[test]
    fn no_spec_never_crashes() {
        let mut c = CrashInjector::new(None);
        assert!(CrashPoint::ALL.iter().all(|(p, _)| !c.reached(*p)));
    }
}
