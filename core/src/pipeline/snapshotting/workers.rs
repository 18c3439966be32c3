//! The Snapshotting phase's workers: connections that import the exported snapshot, the
//! first one measuring the tables, each then copying the ranges it is handed; their COPY
//! rows become insert lines in the outbox, and every worker stops reading while the sink is
//! full and the outbox due.

use super::phase::{fail, row_text, Snapshotting, Stage, Step, Worker, WorkerStage};
use crate::catalog::checks;
use crate::catalog::questions::Row;
use crate::conn::Event;
use crate::convert::Converter;
use crate::io::{Level, Topic};
use crate::outbox::CutReason;
use crate::pgoutput::Relation;
use crate::pipeline::cx::Cx;
use crate::pipeline::handover::Next;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::policy::{Failure, FailureKind};
use crate::snapshot::ranges::{plan_ranges, worker_count, TableSize};
use crate::snapshot::sql;
use crate::wire::PgError;
use std::collections::VecDeque;

impl Snapshotting {
    pub(super) fn open_worker(&mut self, cx: &mut Cx<'_>) -> Step {
        let index = self.workers.len();
        let name = format!("slotline/{}/copy-{index}", cx.env.config.slot);
        let pg = cx.env.config.pg.at(cx.run.hosts.index);
        let link = PgLink::open(cx.queue, &pg, false, &name).map_err(|e| {
            Next::Fail(Failure::new(
                FailureKind::ConfigInvalid,
                format!("cannot connect to PostgreSQL: {e}"),
            ))
        })?;
        self.workers.push(Worker {
            link,
            stage: WorkerStage::Connecting,
            backlog: VecDeque::new(),
            paused: false,
            answer: Vec::new(),
            error: None,
        });
        Ok(())
    }

    /// Whether COPY rows must wait: the sink is full and the outbox is due by size.
    pub(super) fn blocked(&self, cx: &Cx<'_>) -> bool {
        !self.sink.has_room()
            && matches!(
                self.outbox.due(cx.now(), false),
                Some(CutReason::Rows | CutReason::Bytes)
            )
    }

    /// Handles the workers' backlogs until they are empty or must wait; pauses reading on
    /// every worker while blocked, resumes when not.
    pub(super) fn pump(&mut self, cx: &mut Cx<'_>) -> Step {
        for w in 0..self.workers.len() {
            while !self.blocked(cx) {
                let Some(event) = self.workers[w].backlog.pop_front() else {
                    break;
                };
                self.on_worker_event(cx, w, event)?;
            }
        }
        let blocked = self.blocked(cx);
        for worker in &mut self.workers {
            if worker.stage == WorkerStage::Closed {
                continue;
            }
            if blocked && !worker.paused {
                worker.paused = true;
                worker.link.pause_read(cx.queue);
            } else if !blocked && worker.paused {
                worker.paused = false;
                worker.link.resume_read(cx.queue);
            }
        }
        Ok(())
    }

    pub(super) fn on_worker_event(&mut self, cx: &mut Cx<'_>, w: usize, event: Event) -> Step {
        match event {
            Event::Ready => self.import(cx, w),
            Event::DataRow(row) => {
                let text = row_text(&row.columns);
                self.workers[w].answer.push(text);
                Ok(())
            }
            Event::CopyOutData(bytes) => self.on_copy_row(cx, w, &bytes),
            Event::QueryError(error) => {
                self.workers[w].error = Some(error);
                Ok(())
            }
            Event::QueryDone { .. } => self.on_worker_query_done(cx, w),
            Event::Notice(notice) => {
                cx.queue.log(Level::Info, format!("PostgreSQL: {notice}"));
                Ok(())
            }
            Event::Failed(error) => fail(
                FailureKind::PgUnreachable,
                format!("snapshot connection {w} failed: {error}"),
            ),
            _ => Ok(()),
        }
    }

    /// The worker is connected: check its session settings and import the snapshot.
    pub(super) fn import(&mut self, cx: &mut Cx<'_>, w: usize) -> Step {
        let link = &self.workers[w].link;
        let reported = |name: &str| link.parameter(name).unwrap_or("").to_owned();
        if let Err(refusal) = checks::pinned_settings(
            &reported("DateStyle"),
            &reported("TimeZone"),
            &reported("IntervalStyle"),
            &reported("client_encoding"),
        ) {
            return fail(
                FailureKind::SetupRefused,
                format!("refusing to start: {refusal}"),
            );
        }
        let Some(sql) = sql::import_snapshot(self.start.snapshot.as_deref()) else {
            return fail(
                FailureKind::PgProtocol,
                "the exported snapshot's name contains a NUL byte",
            );
        };
        self.send(cx, w, WorkerStage::Importing, &sql)
    }

    pub(super) fn send(
        &mut self,
        cx: &mut Cx<'_>,
        w: usize,
        stage: WorkerStage,
        sql: &str,
    ) -> Step {
        let worker = &mut self.workers[w];
        worker.stage = stage;
        worker.answer.clear();
        worker.error = None;
        worker.link.query(cx.queue, sql).map_err(|e| {
            Next::Fail(Failure::new(
                FailureKind::PgUnreachable,
                format!("snapshot connection {w}: {e}"),
            ))
        })
    }

    pub(super) fn on_worker_query_done(&mut self, cx: &mut Cx<'_>, w: usize) -> Step {
        let stage = self.workers[w].stage;
        if let Some(error) = self.workers[w].error.take() {
            return Err(Next::Fail(self.query_failure(stage, &error)));
        }
        match stage {
            WorkerStage::Importing => {
                if w == 0 {
                    let relations: Vec<&Relation> = self.start.relations.iter().collect();
                    let Some(sql) = sql::sizes_query(&relations) else {
                        return fail(FailureKind::PgProtocol, "a table name contains a NUL byte");
                    };
                    return self.send(cx, w, WorkerStage::Sizing, &sql);
                }
                self.workers[w].stage = WorkerStage::Idle;
                self.next_item(cx, w)
            }
            WorkerStage::Sizing => self.on_sizes(cx),
            WorkerStage::Checking => {
                let answer = std::mem::take(&mut self.workers[w].answer);
                let borrowed: Vec<Vec<Option<&str>>> = answer
                    .iter()
                    .map(|r| r.iter().map(|c| c.as_deref()).collect())
                    .collect();
                let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
                self.workers[w].stage = WorkerStage::Idle;
                let Some(retraction) = self.retraction.as_mut() else {
                    return Ok(());
                };
                let step = retraction.on_pg_answer(cx, &rows)?;
                self.on_retracted(cx, step)
            }
            WorkerStage::Copying(item) => {
                self.ranges_left[item.route] -= 1;
                self.progress.on_range_read(item.route);
                if self.ranges_left[item.route] == 0 {
                    self.cut(cx, CutReason::Drain)?;
                }
                self.workers[w].stage = WorkerStage::Idle;
                self.next_item(cx, w)
            }
            WorkerStage::Committing => {
                self.workers[w].stage = WorkerStage::Closed;
                self.workers[w].link.close(cx.queue);
                Ok(())
            }
            WorkerStage::Connecting | WorkerStage::Idle | WorkerStage::Closed => Ok(()),
        }
    }

    /// Why a worker's statement failed: a missing privilege refuses the start; anything else
    /// ends the session (the next one copies again).
    pub(super) fn query_failure(&self, stage: WorkerStage, error: &PgError) -> Failure {
        match stage {
            WorkerStage::Copying(item) if error.code.starts_with("42") => {
                let table = self.start.relations[item.route].qualified_name();
                let heap = self
                    .heaps
                    .get(item.heap)
                    .map_or_else(|| table.clone(), ToString::to_string);
                let what = if heap == table {
                    table
                } else {
                    format!("{heap} (a partition of {table})")
                };
                Failure::new(
                    FailureKind::SetupRefused,
                    format!(
                        "refusing to start: cannot copy {what}: {error} (the role needs SELECT on every routed table and on each of its partitions, \
                         which are copied directly: GRANT SELECT ON {heap} TO <role>)"
                    ),
                )
            }
            WorkerStage::Importing => Failure::new(
                FailureKind::PgUnreachable,
                format!("cannot import the exported snapshot: {error}"),
            ),
            _ => Failure::new(
                FailureKind::PgUnreachable,
                format!("the snapshot copy failed: {error}"),
            ),
        }
    }

    /// The first worker measured the tables: plan the ranges and open the other workers.
    pub(super) fn on_sizes(&mut self, cx: &mut Cx<'_>) -> Step {
        let answer = std::mem::take(&mut self.workers[0].answer);
        let borrowed: Vec<Vec<Option<&str>>> = answer
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        let routes = self.start.relations.len();
        let heaps = match sql::parse_sizes(&rows, routes) {
            Ok(heaps) => heaps,
            Err(e) => return fail(FailureKind::PgProtocol, e),
        };
        let sizes: Vec<TableSize> = heaps
            .iter()
            .enumerate()
            .map(|(heap, h)| TableSize {
                route: h.route,
                heap,
                blocks: h.blocks,
                estimated_rows: h.estimated_rows,
            })
            .collect();
        let items = plan_ranges(&sizes, cx.env.config.snapshot_workers);
        for route in 0..routes {
            let mut estimates = heaps.iter().filter(|h| h.route == route);
            let estimate = estimates.try_fold(0u64, |sum, h| {
                h.estimated_rows.map(|rows| sum.saturating_add(rows))
            });
            self.progress.set_estimate(route, estimate);
        }
        for item in &items {
            self.ranges_left[item.route] += 1;
        }
        for (route, &ranges) in self.ranges_left.iter().enumerate() {
            self.progress.set_ranges(route, ranges as u64);
        }
        self.planned_workers = worker_count(cx.env.config.snapshot_workers, items.len());
        let partitions = heaps
            .iter()
            .filter(|h| {
                let own = &self.start.relations[h.route];
                h.table.schema != own.namespace || h.table.table != own.name
            })
            .count();
        let partitions = match partitions {
            0 => String::new(),
            n => format!(" (through {n} leaf partition(s))"),
        };
        cx.queue.note(
            Level::Info,
            Topic::Snapshot,
            format!(
                "copying {routes} table(s){partitions} in {} range(s) with {} worker(s)",
                items.len(),
                self.planned_workers
            ),
        );
        self.heaps = heaps.into_iter().map(|h| h.table).collect();
        self.queue = items.into();
        self.stage = Stage::Copying;
        while self.workers.len() < self.planned_workers {
            self.open_worker(cx)?;
        }
        self.workers[0].stage = WorkerStage::Idle;
        if self.retraction.is_some() || !self.retraction_decided {
            return self.maybe_start_retraction(cx);
        }
        self.next_item(cx, 0)
    }

    /// Hands worker `w` its next range, or ends its transaction when none is left.
    pub(super) fn next_item(&mut self, cx: &mut Cx<'_>, w: usize) -> Step {
        if self.stage != Stage::Copying {
            return Ok(());
        }
        match self.queue.pop_front() {
            Some(item) => {
                let relation = &self.start.relations[item.route];
                let Some(heap) = self.heaps.get(item.heap) else {
                    return fail(FailureKind::PgProtocol, "a range of a heap never measured");
                };
                let filter = self
                    .start
                    .row_filters
                    .get(item.route)
                    .and_then(|rows| rows.for_heap(heap));
                let Some(sql) = sql::copy_range(relation, heap, item.range, filter) else {
                    return fail(FailureKind::PgProtocol, "a column name contains a NUL byte");
                };
                self.send(cx, w, WorkerStage::Copying(item), &sql)
            }
            None => self.send(cx, w, WorkerStage::Committing, "COMMIT"),
        }
    }

    pub(super) fn on_copy_row(&mut self, cx: &mut Cx<'_>, w: usize, data: &[u8]) -> Step {
        let WorkerStage::Copying(item) = self.workers[w].stage else {
            return fail(
                FailureKind::PgProtocol,
                "protocol error: COPY data outside a COPY",
            );
        };
        let route = item.route;
        let columns = self.start.relations[route].columns.len();
        if let Err(e) = self.row.parse(data, columns) {
            return fail(
                FailureKind::PgProtocol,
                format!("a COPY row of {} does not parse: {e}", self.names_of(route)),
            );
        }
        let converter = Converter::new(&self.mappings[route]);
        let (mark, body) = self.outbox.start_line(route);
        match converter.snapshot_row(&self.row, body) {
            Ok(lines) => self.outbox.finish_lines(mark, lines, cx.now()),
            Err(e) => {
                self.outbox.abandon_line(mark);
                return fail(
                    FailureKind::DataRefused,
                    format!("{e}. The snapshot was not completed; nothing was acknowledged"),
                );
            }
        }
        self.copied[route] += 1;
        self.maybe_flush(cx)
    }

    pub(super) fn names_of(&self, route: usize) -> String {
        let r = &self.start.relations[route];
        format!("{}.{}", r.namespace, r.name)
    }
}
