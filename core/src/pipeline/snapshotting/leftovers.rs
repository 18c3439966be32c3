//! The Snapshotting phase's leftovers: which Feldera tables may hold rows the copy will not
//! carry (all of them for a re-snapshot; for a fresh start, those Feldera says are not
//! empty), their retraction on worker 0 under the snapshot, and the counts that check the
//! result once the copy is durable.

use super::phase::{fail, Snapshotting, Stage, Step, WorkerStage};
use crate::feldera::Reply;
use crate::io::{Level, Topic};
use crate::pipeline::cx::Cx;
use crate::pipeline::handover::Next;
use crate::pipeline::handover::TableJob;
use crate::pipeline::policy::{Failure, FailureKind};
use crate::pipeline::retraction::{ask_count, read_count_answer, Retracted, Retraction};
use crate::retract::{plan_keys, plan_leftovers};
use crate::snapshot::plan::Leftovers;

impl Snapshotting {
    /// Decides which tables need their leftovers retracted: all of them for a re-snapshot;
    /// for a fresh start, those Feldera says are not empty (asked here).
    pub(super) fn plan_leftovers(&mut self, cx: &mut Cx<'_>) -> Step {
        match self.start.leftovers {
            Leftovers::Retract => {
                let routes: Vec<usize> = (0..self.mappings.len()).collect();
                self.retract_routes(cx, routes)
            }
            Leftovers::IfTargetNotEmpty => {
                for (route, table) in self.start.ready.tables.iter().enumerate() {
                    let plan = plan_keys(table).map_err(|e| {
                        Next::Fail(Failure::new(
                            FailureKind::SetupRefused,
                            format!("refusing to start: cannot check that Feldera table {} is empty before the initial copy: {e}", table.name),
                        ))
                    })?;
                    let http = ask_count(cx, &plan);
                    self.counts.push((route, http));
                }
                Ok(())
            }
        }
    }

    /// Sets up the retraction of `routes` (every one of them must be retractable exactly).
    pub(super) fn retract_routes(&mut self, cx: &mut Cx<'_>, routes: Vec<usize>) -> Step {
        let mut jobs = Vec::with_capacity(routes.len());
        for &route in &routes {
            let table = &self.start.ready.tables[route];
            let mut plan =
                plan_leftovers(table, &self.mappings[route], &self.start.relations[route])
                    .map_err(|e| {
                        Next::Fail(Failure::new(
                            FailureKind::SetupRefused,
                            format!("refusing to start: {e}"),
                        ))
                    })?;
            // A row the publication does not publish is not in the copy: a Feldera row
            // whose key PostgreSQL holds only outside the filter is a leftover too.
            plan.published_rows = self
                .start
                .row_filters
                .get(route)
                .and_then(|rows| rows.predicate());
            jobs.push(TableJob {
                route,
                keys: plan.keys.clone(),
                leftovers: Some(plan),
            });
        }
        self.retraction_decided = true;
        if !jobs.is_empty() {
            cx.queue.note(
                Level::Info,
                Topic::Retract,
                format!(
                    "Feldera may hold rows this copy does not carry in {}: retracting them",
                    routes
                        .iter()
                        .map(|r| self.names[*r].to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            self.retraction = Some(Retraction::new(cx, jobs, self.names.clone()));
        }
        self.retracted_routes = routes;
        self.maybe_start_retraction(cx)
    }

    /// Worker 0, once it has measured the tables, runs the retraction before it copies.
    pub(super) fn maybe_start_retraction(&mut self, cx: &mut Cx<'_>) -> Step {
        if self.stage != Stage::Copying
            || self.workers.first().map(|w| w.stage) != Some(WorkerStage::Idle)
        {
            return Ok(());
        }
        if !self.retraction_decided {
            return Ok(());
        }
        let Some(retraction) = self.retraction.as_mut() else {
            return self.next_item(cx, 0);
        };
        let step = retraction.start(cx)?;
        self.on_retracted(cx, step)
    }

    pub(super) fn on_retracted(&mut self, cx: &mut Cx<'_>, step: Retracted) -> Step {
        match step {
            Retracted::Waiting => Ok(()),
            Retracted::AskPg(sql) => self.send(cx, 0, WorkerStage::Checking, &sql),
            Retracted::Done => {
                cx.queue
                    .note(Level::Info, Topic::Retract, "leftovers retracted");
                self.next_item(cx, 0)
            }
        }
    }

    /// A Feldera count answered (before the copy: is the table empty; after: does it hold
    /// exactly the rows copied).
    pub(super) fn on_count(&mut self, cx: &mut Cx<'_>, index: usize, reply: Reply<'_>) -> Step {
        let (route, _) = self.counts.remove(index);
        let table = self.names[route].clone();
        let count = read_count_answer(&table, reply).map_err(Next::Fail)?;
        if self.stage == Stage::Verifying {
            let copied = self.copied[route];
            if count != copied {
                return fail(
                    FailureKind::Unverified,
                    format!(
                        "after the initial copy and the retraction of leftovers, Feldera table {table} holds {count} rows but the snapshot has {copied}; \
                         the state file stays pending and nothing was acknowledged"
                    ),
                );
            }
            cx.run.ack.on_feldera_state_relied_on();
            cx.queue.note(
                Level::Info,
                Topic::Retract,
                format!("{table}: Feldera holds exactly the {count} rows copied"),
            );
            return self.maybe_finish(cx);
        }
        if count > 0 {
            cx.queue.note(
                Level::Warn,
                Topic::Retract,
                format!("Feldera table {table} already holds {count} rows before the initial copy"),
            );
            self.retracted_routes.push(route);
        }
        if self.counts.is_empty() {
            let routes = std::mem::take(&mut self.retracted_routes);
            return self.retract_routes(cx, routes);
        }
        Ok(())
    }
}
