//! Tables quarantined because Feldera may still hold the body of a request to them that
//! nobody waits for any more.
//!
//! A request's end is not always the end of its records. Feldera's endpoint reads a body
//! only while it runs (the pipeline running, the endpoint not paused, its queue not full):
//! a request that arrives while it does not waits unread, and when the manager gives up on
//! it (503 after its 30 s proxy timeout), or slotline does (a timeout, a broken
//! connection), or the process that sent it dies, the pipeline still holds what was sent
//! and applies it once the endpoint runs, however late (`transport/http/input.rs`,
//! `complete_request`; measured on Feldera's own server, docs/feldera.md, "Bodies that
//! outlive their request"). So a table is quarantined when a request to it ends without
//! the pipeline's own answer (no answer, or a 5xx), whichever session sent it, and at a
//! start when `/stats` shows an endpoint of it that does not run (a process before this
//! one may have left a body there: nothing on disk could say so, since it may have died
//! before writing anything). Nothing more is written to or read from a quarantined table
//! until Feldera's own counters show it holds nothing: two `/stats` answers at least
//! [`QUARANTINE_SETTLE_MS`] apart that both show every endpoint of the table running (or
//! none at all: a restarted pipeline has none) and its `total_records` and `total_bytes`
//! unchanged (an endpoint that runs reads what it holds at once).
//!
//! A Feldera whose `/stats` lists no `inputs` gives no such evidence: there a table goes
//! [`QUARANTINE_SETTLE_MS`] after a `Running` answer asked after it was quarantined, and
//! a start that finds the pipeline not running quarantines every table.
//!
//! Owns: the quarantined tables and the probe's state. Never sends anything itself: the
//! link asks `/stats` when [`Quarantine::on_timer`] says so.

use crate::feldera::ingress_stats::{IngressStats, TableIngress};
use crate::io::HttpId;
use crate::time::Mono;
use std::collections::BTreeMap;

/// How far apart the two `/stats` answers that free a table must be (with evidence), or
/// how long a table still waits after `Running` is seen (without): an endpoint that runs
/// reads what it holds and queues its records at once; this covers the scheduling (and
/// Feldera's 1 s wait for each piece of a body).
pub(crate) const QUARANTINE_SETTLE_MS: u64 = 1_000;
/// How often `/stats` is asked while a table's endpoints do not run (or no answer comes).
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
    /// `Running` seen on a Feldera without endpoint evidence: the tables quarantined
    /// before `generation` go at `until`.
    Settling { until: Mono, generation: u64 },
}

/// One quarantined table (or every table).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    /// When it was quarantined (a probe asked before covers it not).
    generation: u64,
    /// The earliest answer since which its endpoints ran and read nothing: what it showed
    /// and when it came.
    still_since: Option<(TableIngress, Mono)>,
}

/// Tables the quarantine lets go.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Freed {
    pub(crate) tables: Vec<String>,
    /// The start's quarantine of every table (a Feldera without endpoint evidence).
    pub(crate) every_table: bool,
}

impl Freed {
    pub(crate) fn is_empty(&self) -> bool {
        self.tables.is_empty() && !self.every_table
    }
}

/// What the probe's timer wants.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Due {
    Nothing,
    /// Ask `/stats` now, and say so with [`Quarantine::asked`].
    Ask,
    /// These tables are free again.
    Freed(Freed),
}

/// What one table's view in an answer means for it.
enum Verdict {
    /// Its endpoints do not run (or a table may be written to by them yet).
    Busy,
    /// They run and read nothing since this answer or an earlier one.
    Still,
    /// They ran and read nothing for at least [`QUARANTINE_SETTLE_MS`].
    Free,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    tables: BTreeMap<String, Held>,
    every_table: Option<Held>,
    next_generation: u64,
    probe: Probe,
}

impl Quarantine {
    /// A request to `segment` ended without the pipeline's answer, or an endpoint of it
    /// does not run at a start: true when the table was not quarantined before (said once
    /// per table while it is).
    pub(crate) fn hold(&mut self, segment: &str) -> bool {
        let held = self.new_held();
        self.tables.insert(segment.to_owned(), held).is_none()
    }

    /// A start found a pipeline that does not run and gives no endpoint evidence: every
    /// table waits (true when they did not already).
    fn hold_every_table(&mut self) -> bool {
        let held = self.new_held();
        self.every_table.replace(held).is_none()
    }

    fn new_held(&mut self) -> Held {
        let generation = self.next_generation;
        self.next_generation += 1;
        Held {
            generation,
            still_since: None,
        }
    }

    /// A start's `/stats` answer: the tables whose endpoints do not run are quarantined
    /// (every table, when the answer lists no endpoints and the pipeline does not run).
    /// Returns those newly quarantined.
    pub(crate) fn seed(&mut self, stats: &IngressStats) -> Freed {
        let mut seeded = Freed::default();
        match &stats.tables {
            Some(tables) => {
                for (segment, view) in tables {
                    if !view.idle(stats.running) && self.hold(segment) {
                        seeded.tables.push(segment.clone());
                    }
                }
            }
            None if !stats.running => seeded.every_table = self.hold_every_table(),
            None => {}
        }
        seeded
    }

    /// Whether a request without the pipeline's answer may still write to `segment`.
    pub(crate) fn holds(&self, segment: &str) -> bool {
        self.every_table.is_some() || self.tables.contains_key(segment)
    }

    fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.every_table.is_none()
    }

    /// When the probe wants the core back (`TimerKind::Quarantine`).
    pub(crate) fn deadline(&self) -> Option<Mono> {
        if self.is_empty() {
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
            _ if self.is_empty() => {
                self.probe = Probe::Idle;
                Due::Nothing
            }
            Probe::Idle => Due::Ask,
            Probe::Waiting(at) if now >= at => Due::Ask,
            Probe::Settling { until, generation } if now >= until => {
                self.probe = Probe::Idle;
                let mut freed = Freed::default();
                self.tables.retain(|segment, held| {
                    let go = held.generation < generation;
                    if go {
                        freed.tables.push(segment.clone());
                    }
                    !go
                });
                if self.every_table.as_ref().map(|h| h.generation < generation) == Some(true) {
                    self.every_table = None;
                    freed.every_table = true;
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

    /// The probe's answer at `now` (`None`: no usable answer). With endpoint evidence the
    /// tables whose endpoints ran and read nothing for [`QUARANTINE_SETTLE_MS`] go at once;
    /// without it `Running` starts the settling. Anything left asks again a little later.
    /// `None` when no probe was out.
    pub(crate) fn on_answer(&mut self, now: Mono, stats: Option<&IngressStats>) -> Option<Freed> {
        let Probe::Asked { generation, .. } = self.probe else {
            return None;
        };
        let Some(stats) = stats.filter(|s| s.tables.is_some()) else {
            let running = stats.is_some_and(|s| s.running);
            self.probe = if running {
                Probe::Settling {
                    until: now.plus_ms(QUARANTINE_SETTLE_MS),
                    generation,
                }
            } else {
                Probe::Waiting(now.plus_ms(QUARANTINE_PROBE_MS))
            };
            return Some(Freed::default());
        };
        let mut freed = Freed::default();
        let mut still = false;
        for (segment, held) in &mut self.tables {
            if held.generation >= generation {
                continue;
            }
            match judge(held, stats.table(segment), stats.running, now) {
                Verdict::Free => freed.tables.push(segment.clone()),
                Verdict::Still => still = true,
                Verdict::Busy => {}
            }
        }
        for segment in &freed.tables {
            self.tables.remove(segment);
        }
        if let Some(held) = self
            .every_table
            .as_mut()
            .filter(|h| h.generation < generation)
        {
            match judge(held, stats.all(), stats.running, now) {
                Verdict::Free => freed.every_table = true,
                Verdict::Still => still = true,
                Verdict::Busy => {}
            }
        }
        if freed.every_table {
            self.every_table = None;
        }
        self.probe = match self.is_empty() {
            true => Probe::Idle,
            false if still => Probe::Waiting(now.plus_ms(QUARANTINE_SETTLE_MS)),
            false => Probe::Waiting(now.plus_ms(QUARANTINE_PROBE_MS)),
        };
        Some(freed)
    }
}

/// One table's view in an answer at `now`: busy forgets any stillness seen; a view equal
/// to the one it was still since, [`QUARANTINE_SETTLE_MS`] or more ago, frees it.
fn judge(held: &mut Held, view: TableIngress, running: bool, now: Mono) -> Verdict {
    if !view.idle(running) {
        held.still_since = None;
        return Verdict::Busy;
    }
    match &held.still_since {
        Some((before, since)) if before.still(&view) => {
            if now >= since.plus_ms(QUARANTINE_SETTLE_MS) {
                Verdict::Free
            } else {
                Verdict::Still
            }
        }
        _ => {
            held.still_since = Some((view, now));
            Verdict::Still
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer without endpoint evidence.
    fn bare(running: bool) -> IngressStats {
        IngressStats {
            running,
            tables: None,
        }
    }

    /// An answer listing `users`'s endpoint (when `records` is given).
    fn with_users(running: bool, records: Option<u64>, busy: bool) -> IngressStats {
        let mut tables = BTreeMap::new();
        if let Some(records) = records {
            tables.insert(
                "users".to_owned(),
                TableIngress {
                    endpoints: 1,
                    busy,
                    records,
                    bytes: records * 10,
                },
            );
        }
        IngressStats {
            running,
            tables: Some(tables),
        }
    }

    fn tables(names: &[&str]) -> Freed {
        Freed {
            tables: names.iter().map(|n| (*n).to_owned()).collect(),
            every_table: false,
        }
    }

    #[test]
    fn without_endpoint_evidence_a_table_goes_a_settle_after_running_is_seen_by_a_later_probe() {
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
        assert_eq!(
            quarantine.on_answer(Mono(10), Some(&bare(false))),
            Some(Freed::default())
        );
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
        assert_eq!(
            quarantine.on_answer(Mono(20), Some(&bare(true))),
            Some(Freed::default())
        );
        let until = Mono(20).plus_ms(QUARANTINE_SETTLE_MS);
        assert_eq!(quarantine.on_timer(Mono(21)), Due::Nothing, "settling");
        assert_eq!(
            quarantine.on_timer(until),
            Due::Freed(tables(&["items", "users"]))
        );
        assert!(quarantine.holds("orders") && !quarantine.holds("users"));
        assert_eq!(
            quarantine.on_answer(Mono(30), Some(&bare(true))),
            None,
            "no probe out"
        );
    }

    /// `ms` milliseconds after the start.
    fn ms(ms: u64) -> Mono {
        Mono(0).plus_ms(ms)
    }

    /// Answers the probe `at` ms with `stats`, asking first.
    fn probe(quarantine: &mut Quarantine, at: u64, stats: &IngressStats) -> Freed {
        assert_eq!(quarantine.on_timer(ms(at)), Due::Ask, "due at {at}");
        quarantine.asked(HttpId(at));
        quarantine
            .on_answer(ms(at), Some(stats))
            .expect("the probe was out")
    }

    #[test]
    fn with_endpoint_evidence_a_table_goes_only_once_its_endpoints_ran_and_read_nothing_for_a_settle(
    ) {
        let mut quarantine = Quarantine::default();
        quarantine.hold("users");
        // Paused: the body waits unread, whatever the counters say.
        assert!(probe(&mut quarantine, 0, &with_users(false, Some(5), false)).is_empty());
        assert_eq!(quarantine.deadline(), Some(ms(QUARANTINE_PROBE_MS)));
        // Running, but the queue is full: still held.
        assert!(probe(&mut quarantine, 500, &with_users(true, Some(5), true)).is_empty());
        // Running and reading: the counters move, so a settle is counted from the last move.
        assert!(probe(&mut quarantine, 1_000, &with_users(true, Some(8), false)).is_empty());
        assert_eq!(
            quarantine.deadline(),
            Some(ms(1_000 + QUARANTINE_SETTLE_MS)),
            "the next look is a settle later"
        );
        assert!(probe(&mut quarantine, 2_000, &with_users(true, Some(9), false)).is_empty());
        assert!(quarantine.holds("users"));
        assert_eq!(
            probe(&mut quarantine, 3_000, &with_users(true, Some(9), false)),
            tables(&["users"])
        );
        assert!(!quarantine.holds("users"));
        assert_eq!(quarantine.deadline(), None);
    }

    #[test]
    fn a_table_without_endpoints_goes_after_two_answers_even_while_paused_and_a_new_hold_starts_over(
    ) {
        let mut quarantine = Quarantine::default();
        quarantine.hold("users");
        quarantine.hold("items");
        let paused_no_items = with_users(false, Some(3), false);
        assert!(probe(&mut quarantine, 0, &paused_no_items).is_empty());
        // Stillness seen for items; users is held anew meanwhile (another 503): its
        // stillness starts over.
        assert_eq!(
            probe(&mut quarantine, 1_000, &paused_no_items),
            tables(&["items"])
        );
        assert!(quarantine.holds("users"));
        quarantine.hold("users");
        let running = with_users(true, Some(3), false);
        assert!(probe(&mut quarantine, 2_000, &running).is_empty());
        assert_eq!(probe(&mut quarantine, 3_000, &running), tables(&["users"]));
    }

    #[test]
    fn a_start_quarantines_the_tables_whose_endpoints_do_not_run() {
        let mut quarantine = Quarantine::default();
        assert!(quarantine
            .seed(&with_users(true, Some(3), false))
            .is_empty());
        assert!(quarantine.seed(&with_users(true, None, false)).is_empty());
        assert!(quarantine.seed(&bare(true)).is_empty());
        assert_eq!(quarantine.deadline(), None, "nothing held: no probe");
        assert_eq!(
            quarantine.seed(&with_users(false, Some(3), false)),
            tables(&["users"])
        );
        assert!(quarantine.holds("users") && !quarantine.holds("items"));
        assert!(
            quarantine
                .seed(&with_users(false, Some(3), false))
                .is_empty(),
            "said once"
        );

        // Without endpoint evidence a start before the pipeline runs holds every table,
        // until Running is seen and a settle passed.
        let mut blind = Quarantine::default();
        assert_eq!(
            blind.seed(&bare(false)),
            Freed {
                tables: Vec::new(),
                every_table: true
            }
        );
        assert!(blind.holds("users") && blind.holds("anything"));
        assert!(probe(&mut blind, 0, &bare(false)).is_empty());
        assert!(probe(&mut blind, 500, &bare(true)).is_empty());
        assert_eq!(
            blind.on_timer(ms(500 + QUARANTINE_SETTLE_MS)),
            Due::Freed(Freed {
                tables: Vec::new(),
                every_table: true
            })
        );
        assert!(!blind.holds("users"));
    }
}
