//! The startup plan: what a start does, decided from the state file as read, the slot as
//! found, the snapshot mode and what this run is configured for.
//!
//! Owns the startup rules (one function, `plan_startup`, pure and total) and the words of
//! their warnings and refusals. Every step of a decision leaves a line in the plan's trace
//! naming the rule it applied. Never executes anything: creating or dropping the slot,
//! copying, retracting and writing the state file are the pipeline's.
//!
//! `initial` and `inconsistent` (which differ only in how the copy is executed):
//!
//! | state file | slot | plan |
//! |---|---|---|
//! | unreadable | any | refuse: a file that exists and cannot be read is never an absence |
//! | for another slot | any | refuse: a copied or misplaced file |
//! | absent | absent | fresh copy; retract only in Feldera tables that hold rows |
//! | absent, `STATE_DIR` unset | present | refuse: the file may be in another directory; set `STATE_DIR`, or `drop-slot --yes` to copy again |
//! | absent | present | drop the slot, copy, retract leftovers (a slot is no proof of a seeded target) |
//! | pending | any | an interrupted copy: drop any slot, copy, retract leftovers |
//! | complete, another system id, database, pipeline or set of routes | any | drop any slot, copy, retract leftovers |
//! | complete | absent | the WAL since the last acknowledgement may be gone: copy, retract leftovers |
//! | complete | lost, or confirmed before the consistent point | drop it, copy, retract leftovers |
//! | complete, Feldera restarted without fault tolerance since | any | copy again, retract leftovers (`FELDERA_RESTART=resnapshot`), or refuse (`exit`) |
//! | complete, routes added or removed | present | copy only the added tables under a temporary slot's snapshot, record the removed ones, stream from the slot |
//! | complete | present | stream from the slot |
//!
//! `never` ignores the state file: it creates an absent slot with `SNAPSHOT 'nothing'`,
//! streams from a present one, and refuses a lost one (it has no copy to repair it with).
//! A Feldera pipeline that restarted without fault tolerance is only warned about (or,
//! with `FELDERA_RESTART=exit`, refused): `never` has no copy to seed it with.
//!
//! "Restarted without fault tolerance" compares the incarnation the copy was written to
//! (recorded in the state file, else the one an earlier session of this run saw) with the
//! pipeline's incarnation now: another one, on a pipeline whose restarts do not resume from
//! a checkpoint, came back with empty tables.

use super::state::{
    Delivered, RoutePhase, SnapshotPhase, StateError, StateFile, StateRoute, WrittenUnder,
};
use crate::catalog::questions::{SlotInfo, TimelineSwitch};
use crate::config::{FelderaRestart, SnapshotMode};
use std::collections::BTreeSet;
use std::fmt;

/// The state file as the shell found it.
// Read once per start, never held in bulk: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateRead {
    /// No file at the path.
    Absent,
    Present(StateFile),
    /// The file exists but could not be read or parsed: never the same as absent.
    Unreadable(StateError),
}

/// What this run is configured for, in the spelling a state file records.
#[derive(Clone, Copy, Debug)]
pub struct Configured<'a> {
    pub mode: SnapshotMode,
    /// Where the state file is (`state::state_path`), for messages.
    pub state_path: &'a str,
    /// `STATE_DIR` was set (`Config::state_dir_given`): a missing file in it is an
    /// absence, not a directory chosen by where the process was started.
    pub state_dir_given: bool,
    pub slot: &'a str,
    pub publication: &'a str,
    pub pipeline: &'a str,
    pub database: &'a str,
    pub routes: &'a [StateRoute],
    /// The Feldera pipeline as this start found it (`None`: not known).
    pub feldera: Option<FelderaNow<'a>>,
    /// The server's timeline as this start found it (`None`: not known).
    pub timeline: Option<TimelineNow<'a>>,
}

/// The server's timeline now, and how far in the WAL what Feldera holds may reach.
#[derive(Clone, Copy, Debug)]
pub struct TimelineNow<'a> {
    /// `IDENTIFY_SYSTEM`'s timeline.
    pub timeline: u32,
    /// The timelines it branched off from, with where each ended (`TIMELINE_HISTORY`;
    /// empty on timeline 1; `None`: the server could not say).
    pub history: Option<&'a [TimelineSwitch]>,
    /// What this run sent, with what earlier processes recorded (`None`: only the state
    /// file's record is known).
    pub delivered: Option<Delivered>,
}

/// The Feldera pipeline now, and what the run knew of it before.
#[derive(Clone, Copy, Debug)]
pub struct FelderaNow<'a> {
    /// `global_metrics.incarnation_uuid` now.
    pub incarnation: &'a str,
    /// The incarnation an earlier session of this run saw (the state file's takes
    /// precedence).
    pub seen_before: Option<&'a str>,
    /// A restart resumes from the last checkpoint (fault tolerance): it does not empty the
    /// tables.
    pub keeps_state: bool,
    /// `FELDERA_RESTART`.
    pub on_restart: FelderaRestart,
    /// The pipeline's `id` now.
    pub pipeline_id: Option<&'a str>,
    /// Whether the process now resumed from an earlier one's checkpoints
    /// (`Incarnation::resumed`; `None`: Feldera does not say).
    pub resumed: Option<bool>,
    /// `global_metrics.initial_start_time` now.
    pub initial_start_time: Option<u64>,
    /// What an earlier session of this run saw of the pipeline (the state file's record
    /// takes precedence).
    pub seen_under: Option<&'a WrittenUnder>,
}

/// What to do about rows a Feldera table may hold that the copy will not carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftovers {
    /// The target may hold rows from an earlier copy or stream: after the copy, retract
    /// every key Feldera holds that the copy lacks.
    Retract,
    /// A fresh start: ask Feldera how many rows each table holds; only a table that is not
    /// empty needs its leftovers retracted.
    IfTargetNotEmpty,
}

/// What the start does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stream from the slot as it is: its position is where Feldera's copy continues.
    Stream,
    /// `SNAPSHOT_MODE=never`: no copy and no state file. `create_slot`: the slot is absent
    /// and is created with `SNAPSHOT 'nothing'`.
    StreamOnly { create_slot: bool },
    /// Copy every routed table, then stream. `drop_slot`: a slot exists and is dropped
    /// first, because its position is no record of what Feldera holds.
    Snapshot {
        drop_slot: bool,
        leftovers: Leftovers,
    },
    /// The routes changed since the copy, and nothing else did: the state file is
    /// rewritten with `routes` first. The `copy` routes (added, added again after a
    /// removal, or whose own copy was interrupted) are then copied under a temporary slot's
    /// exported snapshot, and the stream continues from the slot, skipping their
    /// transactions committed before that snapshot; nothing of the other routes is sent
    /// again. `removed` routes are no longer streamed; their Feldera rows stay as they are.
    Reroute {
        copy: Vec<StateRoute>,
        removed: Vec<StateRoute>,
        routes: Vec<StateRoute>,
        leftovers: Leftovers,
    },
    /// Exit 1 with this message, changing nothing.
    Refuse(String),
}

/// `a, b`: routes as `TABLES` spells them.
fn route_list(routes: &[StateRoute]) -> String {
    routes
        .iter()
        .map(|route| format!("{}:{}", route.source, route.target))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Stream => f.write_str("stream from the slot"),
            Action::StreamOnly { create_slot: true } => {
                f.write_str("stream only: create the slot with SNAPSHOT 'nothing'")
            }
            Action::StreamOnly { create_slot: false } => {
                f.write_str("stream only: from the existing slot")
            }
            Action::Snapshot {
                drop_slot,
                leftovers,
            } => {
                f.write_str("snapshot: ")?;
                if *drop_slot {
                    f.write_str("drop the slot, ")?;
                }
                f.write_str("copy every table, ")?;
                f.write_str(match leftovers {
                    Leftovers::Retract => "retract leftovers",
                    Leftovers::IfTargetNotEmpty => "retract leftovers only in non-empty tables",
                })
            }
            Action::Reroute {
                copy,
                removed,
                leftovers,
                ..
            } => {
                if !copy.is_empty() {
                    write!(
                        f,
                        "copy only {} online or under a temporary slot's snapshot ({}), then ",
                        route_list(copy),
                        match leftovers {
                            Leftovers::Retract => "retract leftovers",
                            Leftovers::IfTargetNotEmpty =>
                                "retract leftovers only in non-empty tables",
                        }
                    )?;
                }
                f.write_str("stream from the slot")?;
                if !removed.is_empty() {
                    write!(
                        f,
                        "; no longer stream {} (their Feldera rows stay)",
                        route_list(removed)
                    )?;
                }
                Ok(())
            }
            Action::Refuse(message) => write!(f, "refuse: {message}"),
        }
    }
}

/// The decision, its warnings (to log loudly) and the trace of how it was reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub action: Action,
    pub warnings: Vec<String>,
    pub trace: Vec<String>,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "plan     {}", self.action)?;
        for warning in &self.warnings {
            writeln!(f, "warning  {warning}")?;
        }
        for line in &self.trace {
            writeln!(f, "trace    {line}")?;
        }
        Ok(())
    }
}

/// The tail of every re-snapshot warning: what the start does about it.
const RECOPY: &str = "copying every table again and retracting the rows the copy does not carry";

/// Decides what a start does. `system_id` is the server's, from `IDENTIFY_SYSTEM`.
pub fn plan_startup(
    state: &StateRead,
    slot: Option<&SlotInfo>,
    configured: &Configured<'_>,
    system_id: &str,
) -> Plan {
    let mut planner = Planner {
        configured,
        slot,
        warnings: Vec::new(),
        trace: Vec::new(),
    };
    planner.trace.push(mode_line(configured.mode));
    planner.trace.push(state_line(configured.state_path, state));
    planner.trace.push(slot_line(configured.slot, slot));
    let action = match configured.mode {
        SnapshotMode::Never => planner.stream_only(state),
        SnapshotMode::Initial | SnapshotMode::Inconsistent => planner.seeded(state, system_id),
    };
    Plan {
        action,
        warnings: planner.warnings,
        trace: planner.trace,
    }
}

fn mode_line(mode: SnapshotMode) -> String {
    match mode {
        SnapshotMode::Initial => "mode initial: copy under the slot's exported snapshot, then stream from its consistent point",
        SnapshotMode::Inconsistent => "mode inconsistent: same rules as initial, but the copy runs first and the slot is created after it, \
             so commits in between are lost (the mode exists to show that)",
        SnapshotMode::Never => "mode never: stream only; no copy and no state file written (an existing one is read only to warn about an interrupted copy)",
    }
    .to_owned()
}

fn state_line(path: &str, state: &StateRead) -> String {
    match state {
        StateRead::Absent => format!("state {path}: absent"),
        StateRead::Unreadable(error) => format!("state {path}: unreadable: {error}"),
        StateRead::Present(file) => format!(
            "state {path}: {} for slot {}, system {}, database {}, pipeline {}, {} route(s), consistent point {}",
            file.phase,
            file.slot,
            file.system_id,
            file.database,
            file.pipeline,
            file.routes.len(),
            file.consistent_point
                .map_or_else(|| "none".to_owned(), |lsn| lsn.to_string()),
        ),
    }
}

fn slot_line(name: &str, slot: Option<&SlotInfo>) -> String {
    match slot {
        None => format!("slot {name}: absent"),
        Some(slot) => format!(
            "slot {name}: present, confirmed_flush {}, wal_status {}",
            slot.confirmed_flush
                .map_or_else(|| "none".to_owned(), |lsn| lsn.to_string()),
            slot.wal_status.as_deref().unwrap_or("none"),
        ),
    }
}

fn is_lost(slot: &SlotInfo) -> bool {
    slot.wal_status.as_deref() == Some("lost")
}

struct Planner<'a> {
    configured: &'a Configured<'a>,
    slot: Option<&'a SlotInfo>,
    warnings: Vec<String>,
    trace: Vec<String>,
}

impl Planner<'_> {
    /// `SNAPSHOT_MODE=never`: the slot alone decides.
    fn stream_only(&mut self, state: &StateRead) -> Action {
        match state {
            StateRead::Absent => {}
            StateRead::Present(file) => {
                self.trace.push(format!(
                    "state file exists ({}): ignored, mode never decides nothing from it",
                    file.phase
                ));
                if file.phase == SnapshotPhase::Pending {
                    self.warnings.push(format!(
                        "{} records an interrupted copy (pending): Feldera may hold part of a copy; \
                         SNAPSHOT_MODE=never streams without repairing that",
                        self.configured.state_path
                    ));
                }
            }
            StateRead::Unreadable(_) => self.trace.push(
                "state file exists but cannot be read: ignored, mode never decides nothing from it"
                    .to_owned(),
            ),
        }
        let name = self.configured.slot;
        match self.slot {
            None => {
                self.trace.push(
                    "mode never + slot absent: create it with SNAPSHOT 'nothing' and stream from its start \
                     (Feldera must already hold what PostgreSQL holds)"
                        .to_owned(),
                );
                Action::StreamOnly { create_slot: true }
            }
            Some(slot) if is_lost(slot) => {
                self.trace.push(
                    "mode never + slot lost: refuse (there is no copy to repair the missing WAL)"
                        .to_owned(),
                );
                Action::Refuse(format!(
                    "replication slot {name} was invalidated (wal_status = lost): the WAL it needed is gone and \
                     SNAPSHOT_MODE=never copies nothing to make up for it. Start with SNAPSHOT_MODE=initial \
                     (drops the slot and copies every table again), or drop the slot \
                     (SELECT pg_drop_replication_slot('{name}')) and re-seed Feldera yourself"
                ))
            }
            Some(slot) => {
                if let Some(lost) = self.feldera_lost(None) {
                    self.trace.push(format!(
                        "mode never + Feldera {lost}: its tables are empty, and there is nothing to copy them again with"
                    ));
                    if let Some(refusal) = self.refuse_on_restart(&lost) {
                        return refusal;
                    }
                    self.warnings.push(format!(
                        "Feldera pipeline {} {lost}: its tables lost what slotline delivered, and SNAPSHOT_MODE=never \
                         cannot copy it again; start with SNAPSHOT_MODE=initial (with the state file deleted) to re-seed it",
                        self.configured.pipeline
                    ));
                }
                self.warn_if_unreserved(slot);
                self.trace
                    .push("mode never + slot present: stream from it".to_owned());
                Action::StreamOnly { create_slot: false }
            }
        }
    }

    /// Why the pipeline's tables no longer hold what slotline delivered, when they do not:
    /// "restarted without fault tolerance (incarnation A -> B)" and the like. Compared
    /// with what the copy was written to (the state file's record) or, without a file, with
    /// what an earlier session of this run saw. A restart with fault tolerance is trusted
    /// only on Feldera's evidence that the process resumed from the line of checkpoints the
    /// copy was written under (docs/snapshot.md, "A restarted pipeline").
    fn feldera_lost(&mut self, file: Option<&StateFile>) -> Option<String> {
        let feldera = self.configured.feldera?;
        let under = file
            .and_then(|f| f.feldera_written_under.as_ref())
            .or(feldera.seen_under);
        let then_id = under.and_then(|u| u.pipeline_id.as_deref());
        if let (Some(then), Some(now)) = (then_id, feldera.pipeline_id) {
            if then != now {
                return Some(format!(
                    "was deleted and created again (pipeline id {then} -> {now})"
                ));
            }
        }
        let before = file
            .and_then(|f| f.feldera_incarnation.as_deref())
            .or(feldera.seen_before)?;
        if before == feldera.incarnation {
            return None;
        }
        let change = format!("incarnation {before} -> {}", feldera.incarnation);
        if !feldera.keeps_state {
            return Some(format!("restarted without fault tolerance ({change})"));
        }
        match feldera.resumed {
            Some(false) => {
                let why = if under.and_then(|u| u.fault_tolerance.as_deref()) == Some("none") {
                    "it ran without fault tolerance when slotline wrote to it, so no checkpoint held what it received"
                } else {
                    "its storage was cleared, or no checkpoint held what slotline wrote"
                };
                return Some(format!(
                    "restarted with nothing to resume from ({change}; its initial_start_time is its own start time: {why})"
                ));
            }
            None => {
                self.trace.push(format!(
                    "Feldera restarted with fault tolerance ({change}) and does not report initial_start_time: \
                     trusted on its configuration"
                ));
                self.warnings.push(format!(
                    "Feldera pipeline {} restarted ({change}); it does not report whether it resumed from a checkpoint \
                     (global_metrics.initial_start_time, Feldera v0.125 and later), so slotline trusts the fault \
                     tolerance setting and streams on; upgrade Feldera so that a restart that came back empty is noticed",
                    self.configured.pipeline
                ));
                return None;
            }
            Some(true) => {}
        }
        let then_line = under.and_then(|u| u.initial_start_time);
        if let (Some(then), Some(now)) = (then_line, feldera.initial_start_time) {
            if then != now {
                return Some(format!(
                    "restarted from checkpoints of another line ({change}; initial_start_time {then} -> {now}): \
                     its storage was replaced"
                ));
            }
        }
        self.trace.push(format!(
            "Feldera restarted with fault tolerance ({change}) and resumed from its checkpoints \
             (initial_start_time {} before its start time): its tables kept what they held",
            feldera
                .initial_start_time
                .map_or_else(|| "unknown".to_owned(), |t| t.to_string())
        ));
        None
    }

    /// `FELDERA_RESTART=exit`: the refusal, naming what happened and what to do.
    fn refuse_on_restart(&mut self, lost: &str) -> Option<Action> {
        if self.configured.feldera?.on_restart != FelderaRestart::Exit {
            return None;
        }
        self.trace
            .push("FELDERA_RESTART=exit: refuse instead of copying again".to_owned());
        Some(Action::Refuse(format!(
            "Feldera pipeline {} {lost}: its tables no longer hold what slotline delivered, and the slot is past it. \
             FELDERA_RESTART=exit stops here: start with FELDERA_RESTART=resnapshot to copy every table again \
             (or delete {} to do the same)",
            self.configured.pipeline, self.configured.state_path
        )))
    }

    /// `SNAPSHOT_MODE=initial` (and `inconsistent`, which differs only in execution).
    fn seeded(&mut self, state: &StateRead, system_id: &str) -> Action {
        let path = self.configured.state_path;
        let file = match state {
            StateRead::Unreadable(error) => {
                self.trace.push(
                    "state unreadable: refuse (a file that exists and cannot be read is never taken as absent)"
                        .to_owned(),
                );
                return Action::Refuse(format!(
                    "cannot use state file {path}: {error}. A state file that exists and cannot be read is never \
                     taken as absent: fix it, or delete it to copy every table again (rows the copy does not \
                     carry are then retracted)"
                ));
            }
            StateRead::Absent => None,
            StateRead::Present(file) => Some(file),
        };
        if let Some(file) = file.filter(|file| file.slot != self.configured.slot) {
            self.trace.push(format!(
                "state written for slot {}, not {}: refuse (a copied or misplaced file)",
                file.slot, self.configured.slot
            ));
            return Action::Refuse(format!(
                "state file {path} records slot {}, not {}: it was copied or moved from another connector. \
                 Put it back where it belongs, or delete it to copy every table again",
                file.slot, self.configured.slot
            ));
        }
        let lost = self.slot.is_some_and(is_lost);
        if lost {
            self.trace.push(
                "slot lost (wal_status = lost): never stream from it; it is dropped and the copy redone"
                    .to_owned(),
            );
            self.warnings.push(format!(
                "replication slot {} was invalidated (wal_status = lost): the WAL it needed is gone; {RECOPY}",
                self.configured.slot
            ));
        }
        match file {
            None => self.without_state(),
            Some(file) if file.phase == SnapshotPhase::Pending => self.after_pending(),
            Some(file) => self.after_complete(file, system_id, lost),
        }
    }

    fn recopy(&self) -> Action {
        Action::Snapshot {
            drop_slot: self.slot.is_some(),
            leftovers: Leftovers::Retract,
        }
    }

    fn without_state(&mut self) -> Action {
        let Some(slot) = self.slot else {
            let how = match self.configured.mode {
                SnapshotMode::Inconsistent => "copy every table, then create the slot",
                _ => "create the slot with SNAPSHOT 'export' and copy every table under it",
            };
            self.trace.push(format!(
                "state absent + slot absent: a fresh start: {how}; retract leftovers only in a Feldera table \
                 that already holds rows"
            ));
            return Action::Snapshot {
                drop_slot: false,
                leftovers: Leftovers::IfTargetNotEmpty,
            };
        };
        if !self.configured.state_dir_given && !is_lost(slot) {
            self.trace.push(
                "state absent + slot present + STATE_DIR unset: refuse (the state file may be in another \
                 directory; copying every table again must be asked for)"
                    .to_owned(),
            );
            let slot = self.configured.slot;
            let path = self.configured.state_path;
            return Action::Refuse(format!(
                "replication slot {slot} exists but its state file {path} does not, and STATE_DIR is not set: \
                 the state may be in another directory (an earlier run with another STATE_DIR, working directory \
                 or user). Nothing was changed. Either set STATE_DIR to the directory that holds \
                 {slot}.state.json, or, to copy every table again, run `slotline drop-slot --yes` (it drops the \
                 slot) and start again (or set STATE_DIR explicitly to this directory: a start then drops the \
                 slot and copies every table again)"
            ));
        }
        self.trace.push(
            "state absent + slot present: a slot is no proof the target was seeded: drop it, copy again, \
             retract leftovers"
                .to_owned(),
        );
        if !is_lost(slot) {
            self.warnings.push(format!(
                "replication slot {} exists but {} does not: a slot is no proof that Feldera was seeded; \
                 dropping the slot, {RECOPY}",
                self.configured.slot, self.configured.state_path
            ));
        }
        self.recopy()
    }

    fn after_pending(&mut self) -> Action {
        let slot = if self.slot.is_some() {
            "present"
        } else {
            "absent"
        };
        self.trace.push(format!(
            "state pending + slot {slot}: an interrupted copy: {}copy again, retract leftovers",
            self.drop_clause()
        ));
        self.warnings.push(format!(
            "{} records a copy that never finished (pending): Feldera may hold part of it; {RECOPY}",
            self.configured.state_path
        ));
        self.recopy()
    }

    fn after_complete(&mut self, file: &StateFile, system_id: &str, lost: bool) -> Action {
        let mut changes = self.changes(file, system_id);
        let rerouted = !changes.is_empty() || self.slot.is_none() || lost;
        let reroute = self.reroute(file);
        if rerouted {
            // Copying everything again anyway: name the route change with the others.
            changes.extend(self.route_change(file));
        }
        for change in &changes {
            self.trace.push(format!("state complete + {change}"));
        }
        self.note_publication(file);
        if !changes.is_empty() {
            self.warnings.push(format!(
                "{} records a complete copy made for something else: {}; {RECOPY}",
                self.configured.state_path,
                changes.join("; ")
            ));
            self.trace.push(format!(
                "state complete but for another setup: {}copy again, retract leftovers",
                self.drop_clause()
            ));
            return self.recopy();
        }
        let Some(slot) = self.slot else {
            self.trace.push(
                "state complete + slot absent: the WAL since the last acknowledgement may be gone: copy again, \
                 retract leftovers"
                    .to_owned(),
            );
            let promoted = match (self.configured.timeline, self.delivered(file)) {
                (Some(now), Some(then)) if now.timeline != then.timeline => format!(
                    " (the server is on timeline {}, slotline delivered on timeline {}: a standby promoted \
                     without the slot synchronised to it, PG_SLOT_FAILOVER and sync_replication_slots)",
                    now.timeline, then.timeline
                ),
                _ => String::new(),
            };
            self.warnings.push(format!(
                "replication slot {} is gone although {} records a complete copy{promoted}: changes since the \
                 last acknowledgement may be lost with it; {RECOPY}",
                self.configured.slot, self.configured.state_path
            ));
            return self.recopy();
        };
        if lost || self.slot_older_than_copy(slot, file) || self.timeline_forked(file) {
            return self.recopy();
        }
        if let Some(restarted) = self.feldera_lost(Some(file)) {
            self.trace.push(format!(
                "state complete + Feldera {restarted}: its tables are empty: {}copy again, retract leftovers",
                self.drop_clause()
            ));
            if let Some(refusal) = self.refuse_on_restart(&restarted) {
                return refusal;
            }
            self.warnings.push(format!(
                "Feldera pipeline {} {restarted}: its tables lost what slotline delivered; {RECOPY} (FELDERA_RESTART=resnapshot)",
                self.configured.pipeline
            ));
            return self.recopy();
        }
        self.warn_if_unreserved(slot);
        if let Some(action) = reroute {
            self.note_reroute(&action, file);
            return action;
        }
        self.trace.push(
            "state complete + slot present + same system, database, pipeline and routes: stream from the slot"
                .to_owned(),
        );
        Action::Stream
    }

    /// The routes configured now against those recorded: `Some` when one was added (or
    /// added again), removed, or its own copy never finished. Traces and warns only when
    /// it is what the start will do (`after_complete` decides that).
    fn reroute(&self, file: &StateFile) -> Option<Action> {
        let wanted = self.configured.routes;
        let mut copy = Vec::new();
        let mut routes = Vec::new();
        let mut retract = false;
        for route in wanted {
            match file.routes.iter().find(|r| r.same_route(route)) {
                Some(recorded)
                    if recorded.is_routed()
                        && recorded.is_copied(file.phase)
                        && !recorded.publication_changed(route) =>
                {
                    let mut kept = recorded.clone();
                    if kept.published.is_none() {
                        kept.published = route.published.clone();
                    }
                    routes.push(kept);
                }
                // A changed row filter or column list: Feldera holds what the publication
                // published before, so the table is copied again and its leftovers
                // retracted (below).
                recorded => {
                    // Pending: part of a copy may be there. Removed: its stale rows are.
                    retract |= recorded.is_some();
                    copy.push(route.with_phase(None, None));
                    routes.push(route.with_phase(Some(RoutePhase::Pending), None));
                }
            }
        }
        let mut removed = Vec::new();
        for recorded in &file.routes {
            if wanted.iter().any(|w| w.same_route(recorded)) {
                continue;
            }
            if recorded.is_routed() {
                removed.push(recorded.with_phase(None, None));
            }
            routes.push(recorded.with_phase(Some(RoutePhase::Removed), None));
        }
        if copy.is_empty() && removed.is_empty() {
            return None;
        }
        Some(Action::Reroute {
            copy,
            removed,
            routes,
            leftovers: if retract {
                Leftovers::Retract
            } else {
                Leftovers::IfTargetNotEmpty
            },
        })
    }

    /// Traces and warns about a route change the start carries out.
    fn note_reroute(&mut self, action: &Action, file: &StateFile) {
        let Action::Reroute { copy, removed, .. } = action else {
            return;
        };
        let republished: Vec<(&StateRoute, &StateRoute)> = copy
            .iter()
            .filter_map(|now| {
                let then = file.routes.iter().find(|r| r.same_route(now))?;
                (then.is_routed() && then.is_copied(file.phase) && then.publication_changed(now))
                    .then_some((then, now))
            })
            .collect();
        for (then, now) in &republished {
            let said = |r: &StateRoute| r.published.clone().unwrap_or_default();
            self.trace.push(format!(
                "state complete + slot present + what the publication publishes of {} changed since its copy \
                 ({} -> {}): copy it again under a temporary slot's exported snapshot and retract its leftovers",
                now.source,
                said(then),
                said(now)
            ));
            self.warnings.push(format!(
                "publication {} publishes other rows or columns of {} than when it was copied ({} -> {}): \
                 copying it again so Feldera holds what the publication publishes now",
                self.configured.publication,
                now.source,
                said(then),
                said(now)
            ));
        }
        let copy: Vec<StateRoute> = copy
            .iter()
            .filter(|c| !republished.iter().any(|(_, now)| now.same_route(c)))
            .cloned()
            .collect();
        if !copy.is_empty() {
            self.trace.push(format!(
                "state complete + slot present + route(s) {} not copied yet (added, added again, or their own copy \
                 interrupted): copy only them, online beside the stream when they can be (docs/online-copy.md), else \
                 under a temporary slot's exported snapshot, whose transactions committed before it the stream skips; \
                 nothing of the other routes is sent again",
                route_list(&copy)
            ));
        }
        if !removed.is_empty() {
            self.trace.push(format!(
                "state complete + slot present + route(s) {} removed: no longer streamed; changes of them the slot \
                 still carries are skipped",
                route_list(removed)
            ));
            self.warnings.push(format!(
                "route(s) {} are no longer in TABLES: their Feldera tables keep the rows they hold, which will \
                 not change any more (stale); delete those rows in Feldera if they are not wanted",
                route_list(removed)
            ));
        }
    }

    /// A publication of another name is noted, not a reason to copy again: the routes are
    /// what the copy holds, and startup checks them against the publication.
    fn note_publication(&mut self, file: &StateFile) {
        let (recorded, configured) = (&file.publication, self.configured.publication);
        if recorded != configured {
            self.trace.push(format!(
                "publication {recorded} -> {configured}: not a reason to copy again (the routes say what the copy holds)"
            ));
            self.warnings.push(format!(
                "the publication changed since the copy ({recorded} -> {configured}); the routes are what the copy covers"
            ));
        }
    }

    /// A slot's confirmed position only moves forward from the consistent point it was
    /// created at; one behind the copy's means the database went back in time (restored
    /// from a backup with its slot), and Feldera holds rows the database no longer has.
    fn slot_older_than_copy(&mut self, slot: &SlotInfo, file: &StateFile) -> bool {
        let (Some(confirmed), Some(point)) = (slot.confirmed_flush, file.consistent_point) else {
            return false;
        };
        if confirmed >= point {
            return false;
        }
        self.trace.push(format!(
            "state complete + slot confirmed {confirmed} before the copy's consistent point {point}: \
             the slot is older than the copy (a database restored to an earlier point): drop it, \
             copy again, retract leftovers"
        ));
        self.warnings.push(format!(
            "replication slot {} has confirmed only up to {confirmed}, before the copy's consistent \
             point {point} (recorded in {}): the database is older than the copy (restored from a \
             backup?); dropping the slot, {RECOPY}",
            self.configured.slot, self.configured.state_path
        ));
        true
    }

    /// How far what Feldera holds may reach: what this run knows, else the state file's
    /// record.
    fn delivered(&self, file: &StateFile) -> Option<Delivered> {
        self.configured
            .timeline
            .and_then(|now| now.delivered)
            .or(file.delivered)
    }

    /// The server's timeline branched off the one slotline read at a point behind what it
    /// sent (a standby promoted without WAL the primary had, a restore to an earlier
    /// point): Feldera may hold changes the server never had, and the slot's position may
    /// skip some it has.
    fn timeline_forked(&mut self, file: &StateFile) -> bool {
        let (Some(now), Some(then)) = (self.configured.timeline, self.delivered(file)) else {
            return false;
        };
        if now.timeline == then.timeline {
            return false;
        }
        let (from, to, through) = (then.timeline, now.timeline, then.through);
        let switch = now
            .history
            .and_then(|history| history.iter().find(|s| s.timeline == from))
            .map(|s| s.switch_point);
        let why = match (now.history, switch) {
            (_, Some(point)) if through <= point => {
                self.trace.push(format!(
                    "state complete + timeline {from} -> {to}, which left {from} at {point}, after everything sent \
                     (up to {through}): the same history: stream from the slot"
                ));
                return false;
            }
            (_, Some(point)) => format!(
                "the server's timeline {to} left timeline {from} at {point}, behind what slotline sent (up to \
                 {through})"
            ),
            (Some(_), None) => format!(
                "the server's timeline {to} did not branch off timeline {from}, which slotline sent from (up to \
                 {through})"
            ),
            (None, None) => format!(
                "the server is on timeline {to}, slotline sent from timeline {from} (up to {through}), and the \
                 server's timeline history could not be read"
            ),
        };
        self.trace.push(format!(
            "state complete + {why}: a fork: Feldera may hold changes the server never had: drop the slot, copy \
             again, retract leftovers"
        ));
        self.warnings.push(format!(
            "{why} (a standby promoted without WAL the primary had, or a restore to an earlier point): Feldera may \
             hold changes this server never had, and miss some it has; dropping replication slot {}, {RECOPY}",
            self.configured.slot
        ));
        true
    }

    fn drop_clause(&self) -> &'static str {
        if self.slot.is_some() {
            "drop the slot, "
        } else {
            ""
        }
    }

    /// What differs between the run a complete copy was made for and this one, each as
    /// `what old -> new`.
    fn changes(&self, file: &StateFile, system_id: &str) -> Vec<String> {
        let configured = self.configured;
        let mut changes = Vec::new();
        if file.system_id != system_id {
            changes.push(format!(
                "system identifier {} -> {system_id} (another cluster: restored or failed over)",
                file.system_id
            ));
        }
        if file.database != configured.database {
            changes.push(format!(
                "database {} -> {}",
                file.database, configured.database
            ));
        }
        if file.pipeline != configured.pipeline {
            changes.push(format!(
                "Feldera pipeline {} -> {}",
                file.pipeline, configured.pipeline
            ));
        }
        changes
    }

    /// The routes recorded (and routed) against those configured, as `routes removed ...,
    /// added ...`; `None` when they are the same.
    fn route_change(&self, file: &StateFile) -> Option<String> {
        let recorded: BTreeSet<StateRoute> = file
            .routes
            .iter()
            .filter(|route| route.is_routed())
            .map(StateRoute::bare)
            .collect();
        let wanted: BTreeSet<StateRoute> = self
            .configured
            .routes
            .iter()
            .map(StateRoute::bare)
            .collect();
        let wanted: BTreeSet<&StateRoute> = wanted.iter().collect();
        let recorded: BTreeSet<&StateRoute> = recorded.iter().collect();
        if recorded != wanted {
            let list = |routes: Vec<&&StateRoute>| {
                routes
                    .iter()
                    .map(|route| route.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let removed = list(recorded.difference(&wanted).collect());
            let added = list(wanted.difference(&recorded).collect());
            let mut change = "routes".to_owned();
            if !removed.is_empty() {
                change.push_str(&format!(" removed {removed}"));
            }
            if !added.is_empty() {
                if !removed.is_empty() {
                    change.push(',');
                }
                change.push_str(&format!(" added {added}"));
            }
            return Some(change);
        }
        None
    }

    fn warn_if_unreserved(&mut self, slot: &SlotInfo) {
        if slot.wal_status.as_deref() == Some("unreserved") {
            self.warnings.push(format!(
                "replication slot {} is at risk (wal_status = unreserved): PostgreSQL removes WAL it still \
                 needs at the next checkpoint unless it catches up (max_slot_wal_keep_size)",
                self.configured.slot
            ));
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
