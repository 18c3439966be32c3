//! The startup conversation's answers: what each finished question means, and which
//! question comes next (the questions and the state are in `conversation`).

use super::conversation::{finding, nul, Answer, Conversation, ConversationError, Step};
use crate::catalog::checks::{self, Refusal};
use crate::catalog::published;
use crate::catalog::questions::{self, QualifiedName, Row};
use crate::catalog::types::{parse_types, types_query};
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::report::Line;
use crate::schema::program::Table;
use crate::standby::parse_guc_duration_ms;
use crate::value::oid;

impl Conversation {
    pub(super) fn answer(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<Answer, ConversationError> {
        if let Some(error) = self.query_error.take() {
            if self.step == Step::TimelineHistory {
                // Without the history a changed timeline is taken as a fork (the plan).
                queue.log(
                    crate::io::Level::Warn,
                    format!(
                        "{} failed: {error}; a timeline other than the one slotline delivered on counts as a fork",
                        self.step_name()
                    ),
                );
                self.step = Step::WalSenderTimeout;
                self.ask(queue, link, "SHOW wal_sender_timeout".to_owned())?;
                return Ok(Answer::Asked);
            }
            if self.step == Step::CreateTemporarySlot && error.contains(" 42710:") {
                // Held by this process's earlier connection, whose walsender the server
                // has not yet seen go (a temporary slot lives as long as its connection).
                return Err(ConversationError::Busy(format!(
                    "{} failed: {error}; the walsender of an earlier connection may still hold it: \
                     retrying once it is gone",
                    self.step_name()
                )));
            }
            // The fix for a server error is added with the question's (`fixed`).
            return Err(ConversationError::Server(format!(
                "{} failed: {error}",
                self.step_name()
            )));
        }
        let owned = std::mem::take(&mut self.rows);
        let borrowed: Vec<Vec<Option<&str>>> = owned
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        match self.step {
            Step::Identify => {
                let identity = questions::parse_identify_system(&rows)?;
                queue.log(
                    crate::io::Level::Debug,
                    format!(
                        "IDENTIFY_SYSTEM system={} timeline={} xlogpos={}",
                        identity.system_id, identity.timeline, identity.xlogpos
                    ),
                );
                self.system_id = identity.system_id;
                self.timeline = identity.timeline;
                if identity.timeline > 1 {
                    self.step = Step::TimelineHistory;
                    let command = questions::timeline_history_command(identity.timeline);
                    self.ask(queue, link, command)?;
                    return Ok(Answer::Asked);
                }
                self.history = Some(Vec::new());
                self.step = Step::WalSenderTimeout;
                self.ask(queue, link, "SHOW wal_sender_timeout".to_owned())?;
                Ok(Answer::Asked)
            }
            Step::TimelineHistory => {
                self.history = match questions::parse_timeline_history(&rows) {
                    Ok(history) => Some(history),
                    Err(error) => {
                        queue.log(
                            crate::io::Level::Warn,
                            format!("{error}; a timeline other than the one slotline delivered on counts as a fork"),
                        );
                        None
                    }
                };
                self.step = Step::WalSenderTimeout;
                self.ask(queue, link, "SHOW wal_sender_timeout".to_owned())?;
                Ok(Answer::Asked)
            }
            Step::WalSenderTimeout => {
                let text = rows
                    .first()
                    .and_then(|r| r.first().copied().flatten())
                    .unwrap_or("");
                self.wal_sender_timeout_ms = parse_guc_duration_ms(text).ok_or_else(|| {
                    ConversationError::refused(format!("cannot read wal_sender_timeout {text:?}"))
                })?;
                self.step = Step::Publication;
                self.ask(
                    queue,
                    link,
                    questions::publication_query(&self.publication).ok_or_else(nul)?,
                )?;
                Ok(Answer::Asked)
            }
            Step::Publication => {
                let lookup = questions::parse_publication(&rows, &self.publication)?;
                let (publication, warnings) = checks::publication(&self.publication, lookup)?;
                self.publication_found = true;
                self.found(Line::ok(
                    "publication",
                    format!("{} exists", self.publication),
                ));
                for warning in warnings {
                    self.warned(queue, "publication", warning);
                }
                self.truncate_published = publication.truncates;
                self.via_root = publication.via_root;
                self.step = Step::PublishedTables;
                self.ask(
                    queue,
                    link,
                    questions::published_tables_query(&self.publication).ok_or_else(nul)?,
                )?;
                Ok(Answer::Asked)
            }
            Step::PublishedTables => {
                let published = questions::parse_published_tables(&rows)?;
                self.published = published.clone();
                if self.survey.is_none() || self.publication_found {
                    checks::routes_match_publication(&self.publication, &self.routes, &published)?;
                    self.found(Line::ok(
                        "tables",
                        format!(
                            "publication {} and TABLES list the same {} table(s)",
                            self.publication,
                            self.routes.len()
                        ),
                    ));
                }
                self.ask_relation(queue, link, 0)?;
                Ok(Answer::Asked)
            }
            Step::Relation(index) => {
                let mut relation = questions::parse_relation(&rows)?;
                let mut partitions = questions::parse_partitions(&rows)?;
                let secured = questions::parse_row_security(&rows)?;
                if self.copies && !secured.is_empty() {
                    let table = self.route_table(index).ok_or_else(nul)?;
                    let refusal = checks::row_security(&self.role, &table.to_string(), &secured);
                    if self.survey.is_none() {
                        return Err(refusal.into());
                    }
                    self.found(finding(format!("table {table}"), refusal));
                }
                if self.published_routes.len() <= index {
                    self.published_routes.resize(index + 1, Default::default());
                }
                if self.survey.is_none() || self.publication_found {
                    checks::partitions_fit(
                        &self.publication,
                        &self.routes,
                        index,
                        relation.oid,
                        &partitions,
                        &self.published,
                    )?;
                    let table = self.route_table(index).ok_or_else(nul)?;
                    let what = published::published(&table, &self.published, &partitions)
                        .map_err(ConversationError::refused)?;
                    let left_out = published::narrow(&mut relation, &what);
                    for partition in &mut partitions {
                        published::narrow(&mut partition.relation, &what);
                    }
                    self.published_routes[index] = (what, left_out);
                }
                self.relations.push(relation);
                if self.partitions.len() <= index {
                    self.partitions.resize(index + 1, Vec::new());
                }
                self.partitions[index] = partitions;
                self.ask_relation(queue, link, index + 1)?;
                Ok(Answer::Asked)
            }
            Step::Types => {
                self.types = parse_types(&rows)?;
                self.after_columns(queue, link)?;
                Ok(Answer::Asked)
            }
            Step::Slot => {
                self.slot_info = questions::parse_slot(&rows)?;
                if let Some(slot) = &self.slot_info {
                    checks::existing_slot(slot, &self.database)?;
                    if let Some(busy) = checks::slot_in_use(slot) {
                        if self.survey.is_none() {
                            return Err(ConversationError::Busy(busy));
                        }
                        self.found(Line::warn(
                            "slot",
                            format!("{busy}; a start waits until it is free"),
                        ));
                    }
                }
                let found = match &self.slot_info {
                    None => format!("{} does not exist yet: a start creates it", self.slot),
                    Some(slot) => format!(
                        "{} exists, confirmed_flush_lsn {}, wal_status {}",
                        self.slot,
                        slot.confirmed_flush
                            .map_or_else(|| "none".to_owned(), |l| l.to_string()),
                        slot.wal_status.as_deref().unwrap_or("none")
                    ),
                };
                if self
                    .slot_info
                    .as_ref()
                    .is_none_or(|s| s.active_pid.is_none())
                {
                    self.found(Line::ok("slot", found));
                }
                self.step = Step::SlotRead;
                Ok(Answer::SlotRead)
            }
            Step::DropSlot => {
                queue.log(
                    crate::io::Level::Info,
                    format!("dropped replication slot {}", self.slot),
                );
                self.slot_info = None;
                self.step = Step::SlotRead;
                Ok(Answer::SlotDropped)
            }
            Step::CreateSlot => {
                let (consistent_point, snapshot) = questions::parse_created_slot(&rows)?;
                self.created_at = Some(consistent_point);
                self.step = Step::SlotRead;
                Ok(Answer::SlotCreated {
                    consistent_point,
                    snapshot,
                })
            }
            Step::CreateTemporarySlot => {
                let (consistent_point, snapshot) = questions::parse_created_slot(&rows)?;
                self.step = Step::SlotRead;
                let snapshot = snapshot.ok_or_else(|| {
                    ConversationError::refused(
                        "the temporary slot was created without an exported snapshot",
                    )
                })?;
                Ok(Answer::TemporarySlotCreated {
                    consistent_point,
                    snapshot,
                })
            }
            Step::AwaitSchema | Step::SlotRead | Step::StartReplication | Step::Streaming => {
                Err(ConversationError::refused(format!(
                    "unexpected end of a query while {}",
                    self.step_name()
                )))
            }
        }
    }

    pub(super) fn ask_relation(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        index: usize,
    ) -> Result<(), ConversationError> {
        if let Some(name) = self.route_table(index) {
            self.step = Step::Relation(index);
            return self.ask(
                queue,
                link,
                questions::relation_query(&name).ok_or_else(nul)?,
            );
        }
        self.partitions.resize(self.routes.len(), Vec::new());
        self.published_routes
            .resize(self.routes.len(), Default::default());
        self.note_partition_publishing(queue);
        self.note_publication_fidelity(queue);
        let unknown = self.unknown_types();
        if unknown.is_empty() {
            return self.after_columns(queue, link);
        }
        self.step = Step::Types;
        self.ask(queue, link, types_query(&unknown))
    }

    /// The routed columns' types that are not builtin, each once, in OID order.
    fn unknown_types(&self) -> Vec<u32> {
        let oids: std::collections::BTreeSet<u32> = self
            .relations
            .iter()
            .flat_map(|r| r.columns.iter().map(|c| c.type_oid))
            .filter(|t| !oid::is_builtin(*t))
            .collect();
        oids.into_iter().collect()
    }

    /// Every column and its types are known: plan the mappings once Feldera's schema is
    /// here, then read the slot.
    pub(super) fn after_columns(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), ConversationError> {
        if self.schema.is_none() && !self.schema_unavailable {
            self.step = Step::AwaitSchema;
            return Ok(());
        }
        if !self.schema_unavailable {
            self.plan_mappings(queue)?;
        }
        self.step = Step::Slot;
        self.ask(
            queue,
            link,
            questions::slot_query(&self.slot).ok_or_else(nul)?,
        )
    }

    /// Route `index`'s PostgreSQL table.
    fn route_table(&self, index: usize) -> Option<QualifiedName> {
        self.routes.get(index).map(|route| QualifiedName {
            schema: route.source.schema.clone(),
            table: route.source.name.clone(),
        })
    }

    /// What the publication's `publish_via_partition_root` means for the routed tables: a
    /// line of `check`, and of a start's log when a routed table is partitioned.
    fn note_partition_publishing(&mut self, queue: &mut Queue) {
        if self.survey.is_some() && !self.publication_found {
            return;
        }
        let partitioned: Vec<String> = self
            .routes
            .iter()
            .zip(&self.partitions)
            .filter(|(_, partitions)| !partitions.is_empty())
            .map(|(route, _)| route.source.to_string())
            .collect();
        let line = checks::partition_publishing(&self.publication, self.via_root, &partitioned);
        match self.survey.as_mut() {
            Some(findings) => findings.push(Line::ok("partitions", line)),
            None if !partitioned.is_empty() => queue.log(crate::io::Level::Info, line),
            None => {}
        }
    }

    /// What the publication's row filters and column lists mean for Feldera: a line of
    /// `check` for each routed table that has one, and of a start's log.
    fn note_publication_fidelity(&mut self, queue: &mut Queue) {
        if self.survey.is_some() && !self.publication_found {
            return;
        }
        let lines: Vec<String> = self
            .routes
            .iter()
            .zip(&self.published_routes)
            .flat_map(|(route, (what, left_out))| {
                checks::publication_fidelity(
                    &self.publication,
                    &route.source.to_string(),
                    what,
                    left_out,
                )
            })
            .collect();
        for line in lines {
            match self.survey.as_mut() {
                Some(findings) => findings.push(Line::ok("publication", line)),
                None => queue.log(crate::io::Level::Info, line),
            }
        }
    }

    /// A refusal of the mappings, with what the publication's column lists have to do with
    /// it: a Feldera column that needs a value while its PostgreSQL column is left out.
    /// `only`: the route the refusal is about (`None`: any of them).
    pub(super) fn with_column_list_hint(&self, refusal: String, only: Option<usize>) -> String {
        if !refusal.contains("has no PostgreSQL column") {
            return refusal;
        }
        let mut hinted = refusal;
        for (index, (route, (_, left_out))) in
            self.routes.iter().zip(&self.published_routes).enumerate()
        {
            if left_out.is_empty() || only.is_some_and(|only| only != index) {
                continue;
            }
            hinted.push_str(&format!(
                "\n  publication {} does not publish column(s) {} of {} (its column list leaves them out, or \
                 they are generated columns it does not publish), so their values never reach Feldera; accepted: \
                 publish them (ALTER PUBLICATION {} SET TABLE ... with them in the column list, or on \
                 PostgreSQL 18 publish_generated_columns = stored), or make the Feldera column nullable or \
                 give it a DEFAULT",
                self.publication,
                left_out.join(", "),
                route.source,
                self.publication
            ));
        }
        hinted
    }

    /// The publication publishes TRUNCATE, which retracts by reading the Feldera table's
    /// keys back: refused when they cannot be read.
    pub(super) fn truncate_retractable(&self, table: &Table) -> Result<(), Refusal> {
        crate::retract::plan_keys(table).map(|_| ()).map_err(|e| {
            Refusal::new(format!(
                "the publication publishes TRUNCATE, which retracts by reading keys back: {e}"
            ))
            .with_fix(format!(
                "give Feldera table {} a primary key, or stop publishing TRUNCATE: ALTER PUBLICATION {} SET (publish = 'insert, update, delete')",
                table.name, self.publication
            ))
        })
    }

    pub(super) fn plan_mappings(&mut self, queue: &mut Queue) -> Result<(), ConversationError> {
        if self.survey.is_some() {
            self.survey_mappings();
            return Ok(());
        }
        let schema = self
            .schema
            .as_ref()
            .ok_or_else(|| ConversationError::refused("no Feldera schema"))?;
        let planned = checks::plan_routes(
            &self.routes,
            &self.relations,
            &self.types,
            schema,
            self.require_primary_key,
        )
        .map_err(|refusal| {
            ConversationError::Refused(Refusal {
                message: self.with_column_list_hint(refusal.message, None),
                ..refusal
            })
        })?;
        for warning in &planned.warnings {
            queue.log(crate::io::Level::Warn, warning.clone());
        }
        if !self.via_root {
            checks::plan_partitions(
                &planned.tables,
                &self.partitions,
                &self.types,
                self.require_primary_key,
            )?;
        }
        if self.truncate_published {
            for table in &planned.tables {
                if let Err(refusal) = self.truncate_retractable(table) {
                    return Err(refusal.into());
                }
            }
        }
        self.tables = planned.tables;
        Ok(())
    }
}
