//! Where each change of the stream belongs: a Relation message maps a routed table, or a
//! partition of one, onto its route's Feldera table (anything else is remembered, not
//! refused: an announcement is not a change), and a TRUNCATE becomes the retraction of the
//! routes it empties. A change this session's catalog cannot place ends the session so the
//! next one reads the catalog again, once per change (docs/postgres.md, "Partitioned
//! tables").
//!
//! Part of the Streaming phase: it shares the phase's state and owns none of its own.

use super::phase::{fail, Step, Streaming};
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::contract::partitions::TruncateScope;
use crate::contract::PgTable;
use crate::io::{Level, Topic};
use crate::pgoutput::{self, RelationChange, Truncate};
use crate::pipeline::cx::Cx;
use crate::pipeline::handover::Next;
use crate::pipeline::handover::TableJob;
use crate::pipeline::policy::FailureKind;
use crate::retract::plan_keys;
use crate::Lsn;
use std::collections::{BTreeMap, BTreeSet};

impl Streaming {
    /// A Relation message announces a relation; it is not a change. A routed table (by
    /// name) or a partition of one (by OID, `placement`) is mapped onto its route's table;
    /// anything else is remembered, and only a row of it is a problem (`unplaceable`). With
    /// `publish_via_partition_root = true`, pgoutput announces the partition a row was
    /// written to after the routed table, and the row comes under the routed table.
    ///
    /// A routed table's Relation naming a column type this session's catalog does not
    /// describe (a domain or enum created since it was read) gets one fresh catalog, as an
    /// unplaceable change does: the session ends and the next one reads the types again.
    pub(super) fn on_relation(&mut self, cx: &mut Cx<'_>, relation: pgoutput::Relation) -> Step {
        let config = &cx.env.config;
        let oid = relation.oid;
        self.unplaced.remove(&oid);
        self.unmappable.remove(&oid);
        self.retired.remove(&oid);
        let by_name = cx
            .env
            .routes
            .iter()
            .position(|r| r.source.is(&relation.namespace, &relation.name));
        let (route, partition) = match (by_name, self.placement.route_of(oid)) {
            (Some(route), _) => (route, false),
            (None, Some(route)) => (route, true),
            (None, None)
                if self
                    .skips
                    .is_removed(&relation.namespace, &relation.name, oid)
                    || self.skips.is_removed_leaf(oid) =>
            {
                cx.queue.note(
                    Level::Info,
                    Topic::General,
                    format!(
                        "{} (OID {oid}) is a removed route's table: the changes of it the slot still carries are skipped",
                        relation.qualified_name()
                    ),
                );
                self.mapped.remove(&oid);
                self.relations.apply(relation);
                self.retired.insert(oid);
                return Ok(());
            }
            (None, None) => {
                let name = relation.qualified_name();
                cx.queue.note(
                    Level::Debug,
                    Topic::General,
                    format!(
                        "{name} (OID {oid}) is announced; it is neither routed nor a partition of a routed table as this session read the catalog"
                    ),
                );
                self.mapped.remove(&oid);
                self.relations.apply(relation);
                self.unplaced.insert(oid, name);
                return Ok(());
            }
        };
        let options = MappingOptions {
            require_primary_key: config.require_primary_key,
        };
        let mapping = match plan_mapping(&relation, &self.tables[route], &self.types, options) {
            Ok(mapping) => mapping,
            Err(e) if partition => {
                // Refused when a row of it arrives: under publish_via_partition_root = true
                // the rows come under the routed table and this shape is never used.
                self.mapped.remove(&oid);
                self.relations.apply(relation);
                self.unmappable.insert(
                    oid,
                    (
                        route,
                        format!("partition changed in a way Feldera's schema does not accept: {e}"),
                    ),
                );
                return Ok(());
            }
            Err(e) if self.skipping.contains(&route) => {
                // An added route's transaction committed before its own copy's consistent
                // point: its rows are skipped (they are in the copy), so the shape they had
                // then is never used; refused only if a row of it is not skipped.
                self.mapped.remove(&oid);
                self.relations.apply(relation);
                self.unmappable.insert(
                    oid,
                    (
                        route,
                        format!("table changed in a way Feldera's schema does not accept: {e}"),
                    ),
                );
                return Ok(());
            }
            Err(e) => {
                let unknown = relation
                    .columns
                    .iter()
                    .find(|c| !crate::value::is_known(&self.types, c.type_oid));
                let at = self.transaction_at;
                if let Some(column) = unknown {
                    if cx.run.replans.first_chance(at, cx.run.ack.flush()) {
                        return fail(
                            FailureKind::CatalogChanged,
                            format!(
                                "{} in the transaction committed at {at} has column {} of type OID {}, which is not in the catalog this \
                                 session read (a type created since?); reading the catalog again. Nothing of \
                                 this transaction was acknowledged",
                                relation.qualified_name(),
                                column.name,
                                column.type_oid
                            ),
                        );
                    }
                }
                return fail(
                    FailureKind::DataRefused,
                    format!(
                        "table changed in a way Feldera's schema does not accept: {e}\n\
                         Nothing of this transaction was acknowledged"
                    ),
                );
            }
        };
        let change = self.relations.apply(relation);
        if change.is_shape_change() {
            cx.queue.log(
                Level::Info,
                format!(
                    "{} changed shape mid-stream; using its new columns",
                    mapping.source
                ),
            );
        }
        // Said once per shape (pgoutput re-sends a routed table's Relation before rows of
        // each of its partitions under publish_via_partition_root = true); a partition's
        // warnings are its table's, said when the routes were planned.
        let warnings = if partition || change == RelationChange::Unchanged {
            Vec::new()
        } else {
            mapping.warnings()
        };
        self.mapped.insert(oid, (route, mapping));
        for warning in warnings {
            cx.queue.log(Level::Warn, warning);
        }
        Ok(())
    }

    /// A TRUNCATE: the truncated routes' unsent rows of this transaction are dropped
    /// (PostgreSQL dropped them too; rows of earlier commits go out before the retraction
    /// and are deleted by it) and the stream holds here while the Retracting phase empties their Feldera
    /// tables; the rest of the transaction follows once that is durable and verified.
    /// A TRUNCATE that leaves some partitions of a routed table full cannot be told apart
    /// in Feldera's table, which holds every partition's rows: it is refused
    /// (`partial_truncate`).
    pub(super) fn on_truncate(&mut self, cx: &mut Cx<'_>, truncate: &Truncate, at: Lsn) -> Step {
        let relations = match self.relations.truncated(truncate) {
            Ok(relations) => relations,
            Err(e) => return fail(FailureKind::PgProtocol, format!("protocol error: {e}")),
        };
        let mut routes: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
        let mut unplaced = None;
        for relation in relations {
            let oid = relation.oid;
            if self.retired.contains(&oid) {
                continue;
            }
            let route = self
                .mapped
                .get(&oid)
                .map(|(route, _)| *route)
                .or_else(|| self.unmappable.get(&oid).map(|(route, _)| *route));
            match route {
                // In the route's own copy already (committed before its consistent point).
                Some(route) if self.skipping.contains(&route) => {}
                Some(route) => {
                    routes.entry(route).or_default().insert(oid);
                    if let Some(copier) = self.copier.as_mut() {
                        copier.on_truncate(route);
                    }
                }
                None if self.unplaced.contains_key(&oid) => {
                    unplaced.get_or_insert_with(|| relation.qualified_name());
                }
                None => {
                    return fail(
                        FailureKind::PgProtocol,
                        format!(
                            "protocol error: TRUNCATE of {} before its Relation message",
                            relation.qualified_name()
                        ),
                    )
                }
            }
        }
        if let Some(name) = unplaced {
            return self.unplaceable(cx, at, &format!("a TRUNCATE of {name}"), &name);
        }
        let mut jobs: Vec<TableJob> = Vec::new();
        for (route, oids) in routes {
            if let TruncateScope::Partial { truncated, kept } = self.placement.scope(route, &oids) {
                return self.partial_truncate(cx, at, route, &truncated, &kept);
            }
            let table = &self.tables[route];
            let keys = match plan_keys(table) {
                Ok(keys) => keys,
                Err(e) => {
                    return fail(
                        FailureKind::DataRefused,
                        format!("TRUNCATE of {} cannot be propagated: {e}. Nothing after the previous commit was acknowledged", cx.env.routes[route].source),
                    )
                }
            };
            jobs.push(TableJob {
                route,
                keys,
                leftovers: None,
            });
        }
        if jobs.is_empty() {
            // Every truncated table was a removed route's, or is in its own copy already.
            return Ok(());
        }
        for job in &jobs {
            self.outbox.discard_transaction_rows(job.route);
        }
        Err(Next::Retract(jobs))
    }

    /// A change the session's catalog cannot place (`what`, of relation `name`): the first
    /// time, the session ends so the next one reads the catalog again (a partition attached
    /// since this one read it is placed then) and replays the change from the slot; met
    /// again after that, it exits. Nothing of its transaction was acknowledged either way.
    pub(super) fn unplaceable(&mut self, cx: &mut Cx<'_>, at: Lsn, what: &str, name: &str) -> Step {
        let change = format!(
            "{what} arrived at {at} but {name} is neither routed nor a partition of a routed table"
        );
        if cx.run.replans.first_chance(at, cx.run.ack.flush()) {
            return fail(
                FailureKind::CatalogChanged,
                format!(
                    "{change} as this session read the catalog (a partition attached since?); \
                     reading the catalog again. Nothing of this transaction was acknowledged"
                ),
            );
        }
        fail(
            FailureKind::DataRefused,
            format!(
                "{change}, also after reading the catalog again; add it to TABLES (for a partition, \
                 route its partitioned table) or remove it from publication {}. \
                 Nothing of this transaction was acknowledged",
                cx.env.config.publication
            ),
        )
    }

    /// A TRUNCATE of some partitions of route `route`'s table while others keep their rows:
    /// Feldera's table holds the rows of every partition and cannot tell which came from
    /// the truncated ones, so it cannot be propagated exactly. A catalog read before a
    /// partition was detached also makes a TRUNCATE of the whole table look like this, so
    /// the first time the catalog is read again; then it exits, acknowledging nothing.
    fn partial_truncate(
        &mut self,
        cx: &mut Cx<'_>,
        at: Lsn,
        route: usize,
        truncated: &[PgTable],
        kept: &[PgTable],
    ) -> Step {
        let list = |names: &[PgTable]| {
            names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let source = &cx.env.routes[route].source;
        let what = format!(
            "a TRUNCATE at {at} of partition(s) {} of {source} leaves partition(s) {} with their rows",
            list(truncated),
            list(kept)
        );
        if cx.run.replans.first_chance(at, cx.run.ack.flush()) {
            return fail(
                FailureKind::CatalogChanged,
                format!(
                    "{what} as this session read the catalog (a partition detached since?); \
                     reading the catalog again. Nothing of this transaction was acknowledged"
                ),
            );
        }
        fail(
            FailureKind::DataRefused,
            format!(
                "{what}: Feldera table {} holds the rows of every partition of {source} and cannot tell \
                 which came from the truncated ones, so the TRUNCATE cannot be propagated. Nothing of \
                 this transaction was acknowledged. To go on, copy again: stop slotline, delete its state \
                 file {} and start it (the copy replaces what Feldera holds and skips this TRUNCATE)",
                self.tables[route].name, cx.env.state_path
            ),
        )
    }
}
