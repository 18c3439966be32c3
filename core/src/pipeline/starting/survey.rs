//! The survey's side of the startup conversation (`slotline check`): a refusal becomes a finding
//! and the conversation goes on, and each table is mapped on its own so that each problem is its
//! own finding. It extends `Conversation` (`conversation.rs`), whose state it shares.

use super::conversation::{nul, Answer, Conversation, ConversationError, Step};
use crate::catalog::checks::{self};
use crate::catalog::questions::{self};
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::report::Line;

impl Conversation {
    /// Survey: `error` refused the answer to `step`; note it and ask what comes next.
    pub(super) fn survey_past(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        step: Step,
        error: ConversationError,
    ) -> Result<Answer, ConversationError> {
        let message = error.into_message();
        let publication = self.publication.clone();
        let (item, fix) = match step {
            Step::Identify | Step::WalSenderTimeout => (
                "replication connection".to_owned(),
                "connect as a role with REPLICATION to a server with wal_level = logical".to_owned(),
            ),
            Step::Publication => (
                "publication".to_owned(),
                format!("CREATE PUBLICATION {publication} FOR TABLE <the tables in TABLES>"),
            ),
            Step::PublishedTables => (
                "tables".to_owned(),
                format!(
                    "make TABLES and the publication agree (ALTER PUBLICATION {publication} ADD TABLE / DROP TABLE ..., or change TABLES)"
                ),
            ),
            Step::Relation(i) => (
                self.routes
                    .get(i)
                    .map_or("table".to_owned(), |r| format!("table {}", r.source)),
                "create the table or fix its name in TABLES; of a partitioned table, route only the table itself and publish every partition".to_owned(),
            ),
            Step::Types => (
                "column types".to_owned(),
                "let the role read pg_catalog.pg_type, pg_attribute, pg_depend and pg_extension \
                 (every role can unless it was revoked)"
                    .to_owned(),
            ),
            _ => (
                "slot".to_owned(),
                "drop the slot (slotline drop-slot --yes) or choose another PG_SLOT".to_owned(),
            ),
        };
        self.found(Line::fail(item, message, fix));
        let next = match step {
            Step::Identify => ("SHOW wal_sender_timeout".to_owned(), Step::WalSenderTimeout),
            Step::WalSenderTimeout => (
                questions::publication_query(&self.publication).ok_or_else(nul)?,
                Step::Publication,
            ),
            Step::Publication => (
                questions::published_tables_query(&self.publication).ok_or_else(nul)?,
                Step::PublishedTables,
            ),
            Step::PublishedTables => {
                self.ask_relation(queue, link, 0)?;
                return Ok(Answer::Asked);
            }
            Step::Relation(index) => {
                self.ask_relation(queue, link, index + 1)?;
                return Ok(Answer::Asked);
            }
            Step::Types => {
                self.after_columns(queue, link)?;
                return Ok(Answer::Asked);
            }
            _ => {
                self.step = Step::SlotRead;
                return Ok(Answer::SlotRead);
            }
        };
        self.step = next.1;
        self.ask(queue, link, next.0)?;
        Ok(Answer::Asked)
    }

    /// Survey: each table mapped on its own, so each problem is its own finding; only the
    /// tables that map stay in `relations` and `tables` (aligned).
    pub(super) fn survey_mappings(&mut self) {
        let Some(schema) = self.schema.clone() else {
            return;
        };
        let relations = std::mem::take(&mut self.relations);
        let mut findings = Vec::new();
        for relation in relations {
            let Some(route) = self
                .routes
                .iter()
                .find(|r| r.source.is(&relation.namespace, &relation.name))
                .cloned()
            else {
                continue;
            };
            let item = format!("table {}", route.source);
            let planned = checks::plan_routes(
                std::slice::from_ref(&route),
                std::slice::from_ref(&relation),
                &self.types,
                &schema,
                self.require_primary_key,
            );
            let planned = match planned {
                Ok(planned) => planned,
                Err(refusal) => {
                    findings.push(Line::fail(
                        item.clone(),
                        self.with_column_list_hint(
                            refusal.0,
                            self.routes.iter().position(|r| r.source == route.source),
                        ),
                        "make the PostgreSQL table, its REPLICA IDENTITY and the Feldera table agree as the message says",
                    ));
                    continue;
                }
            };
            let (Some(mapping), Some(table)) = (planned.mappings.first(), planned.tables.first())
            else {
                continue;
            };
            let leaves = self
                .routes
                .iter()
                .position(|r| r.source == route.source)
                .and_then(|i| self.partitions.get(i))
                .filter(|_| !self.via_root);
            if let Some(Err(refusal)) = leaves.map(|leaves| {
                checks::plan_partitions(
                    std::slice::from_ref(table),
                    std::slice::from_ref(leaves),
                    &self.types,
                    self.require_primary_key,
                )
            }) {
                findings.push(Line::fail(
                    item.clone(),
                    refusal.0,
                    "make every partition's columns and REPLICA IDENTITY agree with the Feldera table as the message says",
                ));
                continue;
            }
            findings.push(Line::ok(
                item.clone(),
                format!(
                    "{} -> {}: {} column(s) map; {}",
                    mapping.source,
                    mapping.table,
                    mapping.fields.len(),
                    mapping.key_coverage
                ),
            ));
            findings.extend(planned.warnings.iter().map(|w| Line::warn(item.clone(), w)));
            if self.truncate_published {
                if let Err(e) = crate::retract::plan_keys(table) {
                    findings.push(Line::fail(
                        format!("truncate {}", route.source),
                        format!("the publication publishes TRUNCATE, which retracts by reading keys back: {e}"),
                        format!(
                            "give Feldera table {} a primary key, or stop publishing TRUNCATE: ALTER PUBLICATION {} SET (publish = 'insert, update, delete')",
                            table.name, self.publication
                        ),
                    ));
                }
            }
            self.relations.push(relation);
            self.tables.push(table.clone());
        }
        for line in findings {
            self.found(line);
        }
    }
}
