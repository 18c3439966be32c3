//! Tables quarantined because a request to them ended without the pipeline's own answer.
//!
//! A request's end is not always the end of its records. Feldera's endpoint reads a body
//! only while the pipeline runs: a request that arrives while it is paused waits unread, and
//! when the manager gives up on it (503 after its 30 s proxy timeout), or slotline does (a
//! timeout, a broken connection), the pipeline still holds what was sent and applies it at
//! the resume, however late (`transport/http/input.rs`, `complete_request`; measured on
//! Feldera's own server, docs/feldera.md, "Against Feldera's own server"). So a request that
//! ended without the pipeline's own answer (no answer, or a 5xx) quarantines its table,
//! whichever session sent it: nothing more is written to or read from that table until
//! `GET /stats` shows the pipeline `Running`, asked after that request ended, and then
//! [`QUARANTINE_SETTLE_MS`] more (the resumed endpoint reads what it holds at once). A
//! restarted pipeline answers `Running` too: the old process's connections died with it.
//!
//! Owns: the quarantined tables and the probe's state. Never sends anything itself: the
//! link asks `/stats` when [`Quarantine::on_timer`] says so.

use crate::io::HttpId;
use crate::time::Mono;
use std::collections::BTreeMap;

/// After `Running` is seen, how long a quarantined table still waits: the resumed endpoint
/// reads the bytes it holds and queues their records at once; this covers the scheduling.
pub(crate) const QUARANTINE_SETTLE_MS: u64 = 1_000;
/// How often `/stats` is asked while the pipeline does not run (or does not answer).
pub(crate) const QUARANTINE_PROBE_MS: u64 = 500;

/// The probe that frees quarantined tables.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Nothing asked; ask at once.
    #[default]
    Idle,
    /// Ask again at this instant.
    Waiting(Mono),
    /// `/stats` asked; it covers the tables quarantined before `generation`.
    Asked { id: HttpId, generation: u64 },
    /// `Running` seen: the tables quarantined before `generation` go at `until`.
    Settling { until: Mono, generation: u64 },
}

/// What the probe's timer wants.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Due {
    Nothing,
    /// Ask `/stats` now, and say so with [`Quarantine::asked`].
    Ask,
    /// These tables are free again.
    Freed(Vec<String>),
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    /// Each quarantined table with the generation at which it was quarantined.
    tables: BTreeMap<String, u64>,
    next_generation: u64,
    probe: Probe,
}

impl Quarantine {
    /// A request to `segment` ended without the pipeline's answer: true when the table was
    /// not quarantined before (said once per table while it is).
    pub(crate) fn hold(&mut self, segment: &str) -> bool {
        let new = !self.tables.contains_key(segment);
        self.tables.insert(segment.to_owned(), self.next_generation);
        self.next_generation += 1;
        new
    }

    /// Whether a request without the pipeline's answer may still write to `segment`.
    pub(crate) fn holds(&self, segment: &str) -> bool {
        self.tables.contains_key(segment)
    }

    /// When the probe wants the core back (`TimerKind::Quarantine`).
    pub(crate) fn deadline(&self) -> Option<Mono> {
        if self.tables.is_empty() {
            return None;
        }
        match self.probe {
            Probe::Idle => Some(Mono(0)),
            Probe::Waiting(at) => Some(at),
            Probe::Settling { until, .. } => Some(until),
            Probe::Asked { .. } => None,
        }
    }

    /// Whether `id` is the probe's `/stats` request.
    pub(crate) fn probe_owns(&self, id: HttpId) -> bool {
        matches!(self.probe, Probe::Asked { id: asked, .. } if asked == id)
    }

    /// The probe's timer: whether to ask `/stats`, or which tables' settling is over.
    pub(crate) fn on_timer(&mut self, now: Mono) -> Due {
        match self.probe {
            _ if self.tables.is_empty() => {
                self.probe = Probe::Idle;
                Due::Nothing
            }
            Probe::Idle => Due::Ask,
            Probe::Waiting(at) if now >= at => Due::Ask,
            Probe::Settling { until, generation } if now >= until => {
                self.probe = Probe::Idle;
                let freed: Vec<String> = self
                    .tables
                    .iter()
                    .filter(|(_, g)| **g < generation)
                    .map(|(segment, _)| segment.clone())
                    .collect();
                for segment in &freed {
                    self.tables.remove(segment);
                }
                Due::Freed(freed)
            }
            Probe::Waiting(_) | Probe::Asked { .. } | Probe::Settling { .. } => Due::Nothing,
        }
    }

    /// `/stats` was asked under `id`: its answer covers the tables quarantined so far.
    pub(crate) fn asked(&mut self, id: HttpId) {
        self.probe = Probe::Asked {
            id,
            generation: self.next_generation,
        };
    }

    /// The probe's answer, as the pipeline's state (`None`: no usable answer): `Running`
    /// starts the settling; anything else asks again a little later. False when no probe
    /// was out.
    pub(crate) fn on_state(&mut self, now: Mono, state: Option<&str>) -> bool {
        let Probe::Asked { generation, .. } = self.probe else {
            return false;
        };
        self.probe = if state == Some("Running") {
            Probe::Settling {
                until: now.plus_ms(QUARANTINE_SETTLE_MS),
                generation,
            }
        } else {
            Probe::Waiting(now.plus_ms(QUARANTINE_PROBE_MS))
        };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_freed_only_after_running_is_seen_by_a_probe_asked_after_its_request_ended() {
        let mut quarantine = Quarantine::default();
        assert_eq!(quarantine.deadline(), None);
        assert!(quarantine.hold("users"));
        assert!(!quarantine.hold("users"), "said once");
        assert_eq!(
            quarantine.deadline(),
            Some(Mono(0)),
            "the probe asks at once"
        );
        assert_eq!(quarantine.on_timer(Mono(0)), Due::Ask);
        quarantine.asked(HttpId(7));
        assert!(quarantine.probe_owns(HttpId(7)) && !quarantine.probe_owns(HttpId(8)));
        assert_eq!(quarantine.deadline(), None, "the answer wakes the core");
        // A table quarantined after the probe was asked is not covered by its answer.
        assert!(quarantine.hold("items"));
        assert!(quarantine.on_state(Mono(10), Some("Paused")));
        assert_eq!(
            quarantine.deadline(),
            Some(Mono(10).plus_ms(QUARANTINE_PROBE_MS))
        );
        assert_eq!(
            quarantine.on_timer(Mono(10).plus_ms(QUARANTINE_PROBE_MS)),
            Due::Ask
        );
        quarantine.asked(HttpId(9));
        assert!(quarantine.hold("orders"));
        assert!(quarantine.on_state(Mono(20), Some("Running")));
        let until = Mono(20).plus_ms(QUARANTINE_SETTLE_MS);
        assert_eq!(quarantine.on_timer(Mono(21)), Due::Nothing, "settling");
        assert_eq!(
            quarantine.on_timer(until),
            Due::Freed(vec!["items".to_owned(), "users".to_owned()])
        );
        assert!(quarantine.holds("orders") && !quarantine.holds("users"));
        assert!(
            !quarantine.on_state(Mono(30), Some("Running")),
            "no probe out"
        );
    }
}
