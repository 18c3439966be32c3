//! The snapshot phase in the harness (`SNAPSHOT_MODE=initial`, docs/snapshot.md): the world
//! before the run (rows in PostgreSQL, the state file, what Feldera holds), the state file
//! as the shell keeps it, and the checks that belong to the copy.
//!
//! - A state file written `complete` names the consistent point of the slot that exists
//!   and exported the snapshot the copy read, and every row of that snapshot (as the
//!   publication publishes it) is then durable in Feldera from a record of this copy (with
//!   checkpoints: the last successful checkpoint holds it), while Feldera holds no other
//!   row: leftovers were retracted (`check_complete`). Without fault tolerance this is checked only while Feldera is
//!   still the incarnation the file records; another one came back empty, and the next
//!   start copies again.
//! - Until such a file exists for the current slot (and, without fault tolerance, for
//!   Feldera's current incarnation) the tables are outside the row checks: a copy is due
//!   or under way (`Harness::promised`). The run's end then needs it too: caught up means
//!   streaming after a complete copy.
//! - The slot's flush never passes the consistent point of a copy before the copy was so
//!   recorded (`Harness::check_life_flush`).
//! - A route copied on its own (added since the file's copy, `CompleteWithoutItems`) is
//!   recorded complete at the consistent point of the temporary slot whose snapshot it
//!   read, with exactly that snapshot's rows of its table durable from records of its copy
//!   (`check_route_copies`); until every route is copied, the tables are outside the row
//!   checks.
//! - A route copied online (`CompleteWithoutItemsEmpty`: Feldera's items counted empty) is
//!   recorded complete at a position the stream started from, with every key of its table
//!   holding, as a restart would bring it back, a value PostgreSQL's key had at or after
//!   the slot's position (`check_online_copies`); until then the tables are outside the
//!   row checks, and the streamed changes of it that a flush passes must be durable like
//!   any others.

use bytes::Bytes;
use std::collections::BTreeMap;

use super::feldera::FakeFeldera;
use super::input::{self, Setup};
use super::pg::{FakePg, START};
use super::workload::Key;
use super::{Harness, SnapshotPhase, StateFile, StateRoute, Value, FORMAT_VERSION};
use crate::snapshot::state::RoutePhase;

/// The state file a run finds, as an earlier run of slotline wrote it.
pub(super) fn state_file(phase: SnapshotPhase, incarnation: &str) -> StateFile {
    let route = |table: &str| StateRoute {
        source: format!("public.{table}"),
        target: table.to_owned(),
        phase: None,
        consistent_point: None,
        published: None,
        leaves: Vec::new(),
        oid: None,
        copied_through: None,
    };
    StateFile {
        version: FORMAT_VERSION,
        system_id: "7000000000000000001".to_owned(),
        database: "app".to_owned(),
        slot: "slotline_p".to_owned(),
        publication: "pub".to_owned(),
        pipeline: "p".to_owned(),
        routes: vec![route("users"), route("items")],
        phase,
        consistent_point: (phase == SnapshotPhase::Complete).then_some(START),
        updated_at: Some("2026-12-01T00:00:00Z".to_owned()),
        feldera_incarnation: Some(incarnation.to_owned()),
        feldera_written_under: None,
        delivered: None,
    }
}

/// The insert record of a row, as the pipeline writes it.
fn insert(row: &Value) -> String {
    format!("{{\"insert\":{row}}}")
}

/// Sets up PostgreSQL's rows, Feldera's tables and the state file before a snapshot run;
/// returns the file. Stale rows (an older value, keys PostgreSQL never had) are put in
/// Feldera only where the run begins with a copy that must replace them.
pub(super) fn before_the_run(
    setup: &Setup,
    pg: &mut FakePg,
    feldera: &mut FakeFeldera,
) -> Option<(Vec<u8>, StateFile)> {
    let (users, skus) = setup.pre_existing();
    pg.with_snapshot(users, skus, setup.blocks_per_row());
    let rows = pg.workload.tables();
    // An earlier complete copy read what the publication publishes; an interrupted one
    // left any rows (columns and rows outside the publication too), leftovers to retract.
    let published = pg.workload.publication.view_rows(&rows);
    let slot_exists = !setup.create_slot;
    let (file, held, streams) = match setup.state_file() {
        input::StateFile::Absent => (None, Vec::new(), false),
        input::StateFile::Pending => {
            let half = rows.values().step_by(2).cloned().collect();
            (
                Some(state_file(SnapshotPhase::Pending, "incarnation-0")),
                half,
                false,
            )
        }
        input::StateFile::Complete => {
            let all = published.values().cloned().collect();
            let file = state_file(SnapshotPhase::Complete, "incarnation-0");
            (Some(file), all, slot_exists)
        }
        input::StateFile::CompleteWithoutItems | input::StateFile::CompleteWithoutItemsEmpty => {
            let users = published
                .iter()
                .filter(|(key, _)| key.0 == "users")
                .map(|(_, row)| row.clone())
                .collect();
            let mut file = state_file(SnapshotPhase::Complete, "incarnation-0");
            file.routes.retain(|route| route.target == "users");
            (Some(file), users, slot_exists)
        }
        input::StateFile::CompleteEarlierIncarnation => {
            let file = state_file(SnapshotPhase::Complete, "incarnation-earlier");
            // Without fault tolerance the restart emptied the tables; with it they
            // resumed from the checkpoint that held the copy.
            let all = match setup.fault_tolerance {
                true => published.values().cloned().collect(),
                false => Vec::new(),
            };
            (Some(file), all, slot_exists && setup.fault_tolerance)
        }
    };
    let mut records: Vec<(&'static str, String)> = held
        .iter()
        .map(|row| {
            let table = if row.get("sku").is_some() {
                "items"
            } else {
                "users"
            };
            (table, insert(row))
        })
        .collect();
    if setup.state_file() == input::StateFile::CompleteWithoutItems && streams {
        // Only items is copied (its own copy), and must replace these.
        records.push(("items", insert(&serde_json::json!({"sku": "s3", "qty": 0}))));
        records.push((
            "items",
            insert(&serde_json::json!({"sku": "s90", "qty": 9})),
        ));
    } else if setup.stale && !streams {
        records.push((
            "users",
            insert(&serde_json::json!({"id": 1, "name": "stale"})),
        ));
        records.push((
            "users",
            insert(&serde_json::json!({"id": 1000, "name": "ghost"})),
        ));
        records.push(("items", insert(&serde_json::json!({"sku": "s3", "qty": 0}))));
    }
    feldera.seed(&records, !setup.fault_tolerance);
    file.map(|file| (file.encode(), file))
}

impl Harness {
    /// Whether Feldera's tables are within the promise now (see the module docs): always
    /// without the snapshot phase; with it, once the current slot's copy is recorded
    /// complete (without fault tolerance, for the incarnation Feldera still is).
    pub(super) fn promised(&self) -> bool {
        if !self.snapshot {
            return true;
        }
        let Some((_, file)) = &self.disk else {
            return false;
        };
        file.phase == SnapshotPhase::Complete
            && file.consistent_point == Some(self.pg.life_start)
            && self.pg.confirmed().is_some()
            && self.promised_incarnation()
            && file.routes.len() == 2
            && file.routes.iter().all(|route| route.is_copied(file.phase))
    }

    /// Whether Feldera still holds what the state file's copy was written to: with fault
    /// tolerance a restart resumes from a checkpoint; without it only the incarnation the
    /// file names does (a later one started empty).
    pub(super) fn promised_incarnation(&self) -> bool {
        let Some((_, file)) = &self.disk else {
            return false;
        };
        self.feldera.keeps_state()
            || file.feldera_incarnation.as_deref() == Some(&self.feldera.incarnation_name())
    }

    /// The error a state-file read or write gets, if one is due.
    pub(super) fn state_failure(&mut self) -> Option<String> {
        if self.state_failures == 0 {
            return None;
        }
        self.state_failures -= 1;
        self.run.state_failures += 1;
        Some("No space left on device (os error 28)".to_owned())
    }

    /// The shell writes the state file: the write is checked, then it fails (the old file
    /// stays, as an atomic replace leaves it) or replaces the file.
    pub(super) fn write_state(&mut self, contents: &Bytes) -> Result<(), String> {
        let file = match StateFile::parse(contents) {
            Ok(file) => file,
            Err(e) => panic!("the pipeline wrote a state file it cannot read back: {e}"),
        };
        // The same record again, with only what the catalog shows added (the tables' OIDs,
        // their leaves) before a session streams: no copy completed.
        if self
            .disk
            .as_ref()
            .is_some_and(|(_, old)| catalog_blind(old) == catalog_blind(&file))
        {
            if let Some(error) = self.state_failure() {
                return Err(error);
            }
            self.disk = Some((contents.to_vec(), file));
            return Ok(());
        }
        // A route's own copy just recorded complete, or none.
        let newly_copied: Vec<String> = file
            .routes
            .iter()
            .filter(|route| route.phase == Some(RoutePhase::Complete))
            .filter(|route| {
                !self.disk.as_ref().is_some_and(|(_, old)| {
                    old.routes
                        .iter()
                        .any(|o| o.same_route(route) && o.phase == route.phase)
                })
            })
            .map(|route| route.target.clone())
            .collect();
        // Of those, the ones the file recorded as copied online (`copied_through`).
        let (online, exported): (Vec<String>, Vec<String>) =
            newly_copied.iter().cloned().partition(|table| {
                self.disk.as_ref().is_some_and(|(_, old)| {
                    old.routes
                        .iter()
                        .any(|o| o.target == *table && o.copied_through.is_some())
                })
            });
        let own_copy = file.routes.iter().any(|route| route.phase.is_some());
        if file.phase == SnapshotPhase::Complete {
            match own_copy {
                false => self.check_complete(&file),
                true => {
                    self.check_route_copies(&file, &exported);
                    self.check_online_copies(&file, &online);
                }
            }
        }
        if let Some(error) = self.state_failure() {
            return Err(error);
        }
        if file.phase == SnapshotPhase::Complete && !own_copy {
            self.copy_complete = Some(self.pg.life);
            self.run.completes += 1;
        }
        if !newly_copied.is_empty() {
            self.run.completes += 1;
        }
        self.run.online_completes += online.len() as u32;
        if !online.is_empty() {
            self.online_done = Some((self.pg.life, self.pg.head()));
        }
        self.disk = Some((contents.to_vec(), file));
        Ok(())
    }

    /// Routes copied on their own (added since the file's copy) and just recorded
    /// complete: each names the consistent point of the temporary slot whose snapshot this
    /// copy read, and its Feldera table holds exactly that snapshot's rows of it, durable,
    /// from records of this copy. The file's own copy and its other routes are untouched.
    fn check_route_copies(&self, file: &StateFile, tables: &[String]) {
        if let Some((_, old)) = &self.disk {
            assert_eq!(
                (old.consistent_point, old.phase),
                (file.consistent_point, file.phase),
                "a route's own copy rewrote the file's own copy"
            );
        }
        if tables.is_empty() {
            return;
        }
        let export = self
            .pg
            .exports
            .last()
            .expect("a route recorded copied, but no snapshot was ever exported");
        assert!(
            export.temporary,
            "a route's own copy recorded against the slot's own snapshot, not a temporary slot's"
        );
        for route in file.routes.iter().filter(|r| tables.contains(&r.target)) {
            assert_eq!(
                route.consistent_point,
                Some(export.point),
                "route {route} records another consistent point than its temporary slot's"
            );
        }
        let checkpointing = self.feldera.checkpointing();
        if !checkpointing
            && file.feldera_incarnation.as_deref() != Some(&self.feldera.incarnation_name())
        {
            return;
        }
        let durable = self.feldera.durable_tables();
        let inserted = self.feldera.durable_inserts_since(self.copy_floor);
        let copied = |key: &&Key| tables.iter().any(|t| *t == key.0);
        let rows = self.pg.workload.publication.view_rows(&export.rows);
        let wrong = differences(&rows, &durable, copied);
        assert!(
            wrong.is_empty(),
            "route(s) {tables:?} recorded copied at {}, but Feldera does not hold exactly their snapshot: {wrong:#?}",
            export.point
        );
        for (key, row) in rows.iter().filter(|(key, _)| copied(key)) {
            assert!(
                inserted.iter().any(|(k, r)| k == key && r == row),
                "route {} recorded copied, but its row [{}] = {row} is in no durable record of its copy",
                key.0,
                key.1
            );
        }
    }

    /// Routes copied online (the file recorded their copy begun, `copied_through`) and just
    /// recorded complete: each names a position a session of the slot streamed from, and
    /// every key of its Feldera table, as a restart would bring it back, holds a value
    /// PostgreSQL's key had at or after the slot's position (or none where that allows
    /// none): no key the chunks missed, no chunk's value older than a change the slot
    /// passed, no key PostgreSQL never had.
    fn check_online_copies(&self, file: &StateFile, tables: &[String]) {
        if tables.is_empty() {
            return;
        }
        for route in file.routes.iter().filter(|r| tables.contains(&r.target)) {
            assert!(
                route
                    .consistent_point
                    .is_some_and(|point| self.pg.stream_starts.contains(&point)),
                "route {route} recorded copied online at {:?}, which no stream started from",
                route.consistent_point
            );
        }
        let checkpointing = self.feldera.checkpointing();
        if !checkpointing
            && file.feldera_incarnation.as_deref() != Some(&self.feldera.incarnation_name())
        {
            return;
        }
        let durable = self.feldera.durable_tables();
        let keys: std::collections::BTreeSet<&Key> = self
            .pg
            .workload
            .history
            .keys()
            .chain(durable.keys())
            .filter(|key| tables.iter().any(|t| *t == key.0))
            .collect();
        let confirmed = self.pg.confirmed();
        for key in keys {
            self.check_value(key, durable.get(key), confirmed);
        }
    }

    /// Whether the state file records `table`'s online copy as under way.
    pub(super) fn online_copying(&self, table: &str) -> bool {
        self.disk.as_ref().is_some_and(|(_, file)| {
            file.routes.iter().any(|route| {
                route.target == table
                    && route.copied_through.is_some()
                    && route.phase != Some(RoutePhase::Complete)
            })
        })
    }

    /// A copy recorded `complete` (see the module docs).
    fn check_complete(&self, file: &StateFile) {
        let life = self.pg.life;
        assert!(
            self.pg.export_life == Some(life) && self.pg.confirmed().is_some(),
            "the state file says complete, but the slot that exists (life {life}) exported no snapshot"
        );
        let Some(export) = self.pg.exports.last() else {
            return;
        };
        assert_eq!(
            file.consistent_point,
            Some(export.point),
            "the state file records another consistent point than the slot's"
        );
        let checkpointing = self.feldera.checkpointing();
        if !checkpointing
            && file.feldera_incarnation.as_deref() != Some(&self.feldera.incarnation_name())
        {
            // Feldera restarted since the plan: the next start copies again.
            return;
        }
        let durable = self.feldera.durable_tables();
        let rows = self.pg.workload.publication.view_rows(&export.rows);
        let wrong = differences(&rows, &durable, |_| true);
        assert!(
            wrong.is_empty(),
            "the state file says complete (consistent point {}), but Feldera's tables{} are not the snapshot: {wrong:#?}",
            export.point,
            if checkpointing { " as the last checkpoint holds them" } else { "" }
        );
        let inserted = self.feldera.durable_inserts_since(self.copy_floor);
        for (key, row) in &rows {
            assert!(
                inserted.iter().any(|(k, r)| k == key && r == row),
                "the state file says complete, but the copy's row {}[{}] = {row} is in no record of the copy that is durable{}",
                key.0,
                key.1,
                if checkpointing { " and held by a checkpoint" } else { "" }
            );
        }
    }
}

/// The keys (of those `within` keeps) whose row differs between a snapshot and what
/// Feldera holds durably, each as `table[key]: snapshot .., Feldera ..`.
fn differences(
    snapshot: &BTreeMap<Key, Value>,
    durable: &BTreeMap<Key, Value>,
    within: impl Fn(&&Key) -> bool,
) -> Vec<String> {
    snapshot
        .keys()
        .chain(durable.keys())
        .filter(within)
        .filter(|key| snapshot.get(*key) != durable.get(*key))
        .map(|key| {
            format!(
                "{}[{}]: snapshot {:?}, Feldera {:?}",
                key.0,
                key.1,
                snapshot.get(key),
                durable.get(key)
            )
        })
        .collect()
}

/// `file` without what a start records from the catalog (the tables' OIDs, their leaves)
/// and without its time: what is left says what was copied, and when.
fn catalog_blind(file: &StateFile) -> StateFile {
    let mut blind = file.clone();
    blind.updated_at = None;
    // The stream's bound on the WAL Feldera may hold moves without any copy.
    blind.delivered = None;
    for route in &mut blind.routes {
        route.oid = None;
        route.leaves.clear();
    }
    blind
}
