//! Whether the routes a start copies are copied online, beside the stream
//! (docs/online-copy.md, "Which copies are online"), or under a temporary slot's exported
//! snapshot before it (docs/snapshot.md, "Adding and removing tables").
//!
//! A route is copied online when its chunks can be read and judged exactly: the source is
//! a primary (a standby cannot write the watermarks), the Feldera table has a primary key
//! (the chunk's rows upsert what the stream wrote), the PostgreSQL table's replica identity
//! is its primary key or a unique index (the key the chunks walk and the stream's changes
//! carry), its row filter is the table's own, and Feldera's table holds nothing the copy
//! would have to retract: it is empty, or holds an earlier online copy of it that the state
//! file records (`copied_through`), which the copy goes on from. Otherwise every route of
//! the start is copied the exported way, with a line saying why.

use super::phase::{Counting, Decision, Starting};
use crate::backfill::chunk::{Source, TableSpec};
use crate::backfill::key::KeyColumns;
use crate::catalog::questions::QualifiedName;
use crate::feldera::Reply;
use crate::io::{HttpId, Level};
use crate::pgoutput::ReplicaIdentity;
use crate::pipeline::cx::Cx;
use crate::pipeline::policy::Failure;
use crate::pipeline::retraction::{ask_count, read_count_answer};
use crate::pipeline::streaming::OnlineCopy;
use crate::retract::plan_keys;
use crate::snapshot::plan::Leftovers;
use crate::snapshot::state::{RoutePhase, StateRoute};

impl Starting {
    /// The online copy of `copy` (route indexes), or why it cannot be.
    fn online_copies(
        &self,
        cx: &Cx<'_>,
        copy: &[usize],
        leftovers: Leftovers,
    ) -> Result<Vec<OnlineCopy>, String> {
        let recorded = self.recorded_progress(cx);
        let resumed = |route: usize| recorded.iter().any(|(r, _)| *r == route);
        if leftovers != Leftovers::IfTargetNotEmpty && !copy.iter().all(|&r| resumed(r)) {
            // Feldera's table may hold rows PostgreSQL no longer has (a route added again,
            // an exported copy interrupted): only the exported copy retracts them.
            return Err("their Feldera tables' leftovers are to be retracted".into());
        }
        if self.repl.parameter("in_hot_standby") == Some("on") {
            return Err(
                "the source is a hot standby, which cannot write an online copy's watermarks"
                    .into(),
            );
        }
        let flush = self.conversation.server_version().unwrap_or(0) >= 170_000;
        let relations = self.conversation.relations();
        let tables = self.conversation.tables();
        let filters = self.conversation.row_filters();
        copy.iter()
            .map(|&route| {
                let (relation, table) = (&relations[route], &tables[route]);
                let name = format!("{}.{}", relation.namespace, relation.name);
                if table.primary_key.is_none() {
                    return Err(format!("Feldera table {} has no primary key", table.name));
                }
                if !matches!(
                    relation.replica_identity,
                    ReplicaIdentity::Default | ReplicaIdentity::Index
                ) {
                    return Err(format!(
                        "{name} has REPLICA IDENTITY {}, not its primary key or a unique index",
                        relation.replica_identity.as_str()
                    ));
                }
                let names: Vec<String> = relation
                    .columns
                    .iter()
                    .filter(|c| c.in_replica_identity)
                    .map(|c| c.name.clone())
                    .collect();
                let key = KeyColumns { names };
                let Some(positions) = key.positions(&relation.columns) else {
                    return Err(format!("{name} has no key the publication publishes"));
                };
                let filter = filters.get(route).cloned().unwrap_or_default();
                if !filter.leaves.is_empty() {
                    return Err(format!("{name}'s partitions have row filters of their own"));
                }
                Ok(OnlineCopy {
                    route,
                    spec: TableSpec {
                        relation: relation.clone(),
                        heap: QualifiedName {
                            schema: relation.namespace.clone(),
                            table: relation.name.clone(),
                        },
                        key: positions,
                        filter: filter.table,
                        limit: cx.env.config.copy_chunk_rows,
                    },
                    key,
                    after: recorded
                        .iter()
                        .find(|(r, _)| *r == route)
                        .and_then(|(_, after)| (!after.is_empty()).then(|| after.clone())),
                    resumed: resumed(route),
                    source: Source::Primary { flush },
                })
            })
            .collect()
    }

    /// Each route's online copy progress, as the state file read at this start records it
    /// for a route whose own copy is still pending.
    fn recorded_progress(&self, cx: &Cx<'_>) -> Vec<(usize, Vec<String>)> {
        let Some(crate::snapshot::plan::StateRead::Present(file)) = &self.state_read else {
            return Vec::new();
        };
        cx.env
            .routes
            .iter()
            .enumerate()
            .filter_map(|(index, route)| {
                let record = StateRoute::of(route);
                file.routes
                    .iter()
                    .find(|r| r.same_route(&record) && r.phase == Some(RoutePhase::Pending))
                    .and_then(|r| r.copied_through.clone())
                    .map(|after| (index, after))
            })
            .collect()
    }

    /// The state file was rewritten with the changed routes: copy `copy` online when it
    /// can be (after counting the Feldera tables it does not resume), else the exported way.
    /// `None`: the exported way.
    pub(super) fn plan_online(
        &mut self,
        cx: &mut Cx<'_>,
        copy: &[usize],
        leftovers: Leftovers,
    ) -> Option<Counting> {
        let online = match self.online_copies(cx, copy, leftovers) {
            Ok(online) => online,
            Err(why) => {
                cx.queue.log(
                    Level::Warn,
                    format!(
                        "copying {} under a temporary slot's exported snapshot, before the stream: {why}. \
                         While it runs the other tables' changes wait in the slot and VACUUM's horizon is held (docs/online-copy.md)",
                        self.route_names(copy)
                    ),
                );
                return None;
            }
        };
        let mut asked = Vec::new();
        for copy in online.iter().filter(|c| !c.resumed) {
            let table = &self.conversation.tables()[copy.route];
            let Ok(plan) = plan_keys(table) else {
                return None;
            };
            asked.push((copy.route, ask_count(cx, &plan), None));
        }
        Some(Counting {
            copy: copy.to_vec(),
            leftovers,
            online,
            asked,
        })
    }

    /// Whether `id` is a count this start asked.
    pub(super) fn counts(&self, id: HttpId) -> bool {
        matches!(&self.decision, Decision::Counting(c) if c.asked.iter().any(|(_, asked, _)| *asked == id))
    }

    /// A count of a Feldera table an online copy would write: once every one answered, the
    /// stream starts (online) or the temporary slot is created (exported).
    pub(super) fn on_count(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Option<Result<(), Failure>> {
        let Decision::Counting(counting) = &mut self.decision else {
            return None;
        };
        let index = counting
            .asked
            .iter()
            .position(|(_, asked, _)| *asked == id)?;
        let route = counting.asked[index].0;
        let table = self.conversation.tables()[route].name.clone();
        match read_count_answer(&table, reply) {
            Ok(count) => counting.asked[index].2 = Some(count),
            Err(failure) => return Some(Err(failure)),
        }
        if counting.asked.iter().any(|(_, _, count)| count.is_none()) {
            return Some(Ok(()));
        }
        Some(self.counted(cx))
    }

    /// Begins what `counting` decided, when it has nothing left to ask.
    pub(super) fn counted(&mut self, cx: &mut Cx<'_>) -> Result<(), Failure> {
        let Decision::Counting(counting) =
            std::mem::replace(&mut self.decision, Decision::Streaming)
        else {
            return Ok(());
        };
        let holding: Vec<usize> = counting
            .asked
            .iter()
            .filter(|(_, _, count)| count.is_some_and(|c| c > 0))
            .map(|(route, _, _)| *route)
            .collect();
        if !holding.is_empty() {
            cx.queue.log(
                Level::Warn,
                format!(
                    "copying {} under a temporary slot's exported snapshot, before the stream: Feldera's {} already holds rows, \
                     whose leftovers only that copy retracts. While it runs the other tables' changes wait in the slot",
                    self.route_names(&counting.copy),
                    self.route_names(&holding)
                ),
            );
            self.decision = Decision::CreatingTemporarySlot {
                copy: counting.copy,
                leftovers: counting.leftovers,
            };
            return self
                .conversation
                .create_temporary_slot(cx.queue, &mut self.repl)
                .map_err(Failure::from);
        }
        cx.queue.log(
            Level::Info,
            format!(
                "copying {} online, in chunks beside the stream (docs/online-copy.md)",
                self.route_names(&counting.copy)
            ),
        );
        self.online = counting.online;
        self.conversation.messages = true;
        // Each route's record says its online copy began (on an empty Feldera table, or
        // going on from the key it records) before anything of it is sent: a restart then
        // goes on with it rather than copying it the exported way.
        let Some(mut state) = self.state.take() else {
            return self
                .conversation
                .start_replication(cx.queue, &mut self.repl)
                .map_err(Failure::from);
        };
        for copy in &self.online {
            let record = StateRoute::of(&cx.env.routes[copy.route]);
            if let Some(route) = state.routes.iter_mut().find(|r| r.same_route(&record)) {
                route.copied_through = Some(copy.after.clone().unwrap_or_default());
            }
        }
        state.updated_at = Some(crate::snapshot::state::rfc3339_utc(cx.queue.now.wall));
        cx.queue.push(crate::io::Command::WriteState {
            path: cx.env.state_path.clone(),
            contents: bytes::Bytes::from(state.encode()),
        });
        self.state = Some(state);
        self.decision = Decision::RecordingOnline;
        Ok(())
    }

    fn route_names(&self, routes: &[usize]) -> String {
        let relations = self.conversation.relations();
        routes
            .iter()
            .filter_map(|&r| relations.get(r))
            .map(|r| format!("{}.{}", r.namespace, r.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
