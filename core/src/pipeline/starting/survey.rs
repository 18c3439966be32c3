//! The survey's side of the startup conversation (`slotline check`): a refusal becomes a finding
//! and the conversation goes on, and each table is mapped on its own so that each problem is its
//! own finding. It extends `Conversation` (`conversation.rs`), whose state it shares.

use super::conversation::{finding, nul, Answer, Conversation, ConversationError, Step};
use crate::catalog::checks::{self, Refusal};
use crate::catalog::questions::{self};
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::report::{Line, Verdict};

impl Conversation {
    /// Survey: `error` refused the answer to `step`; note it and ask what comes next.
    pub(super) fn survey_past(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        step: Step,
        error: ConversationError,
    ) -> Result<Answer, ConversationError> {
        let item = match step {
            Step::Identify | Step::WalSenderTimeout => "replication connection".to_owned(),
            Step::Publication => "publication".to_owned(),
            Step::PublishedTables => "tables".to_owned(),
            Step::Relation(i) => self
                .routes
                .get(i)
                .map_or("table".to_owned(), |r| format!("table {}", r.source)),
            Step::Types => "column types".to_owned(),
            _ => "slot".to_owned(),
        };
        // The fix a start refuses with too (`on_query_done`).
        let line = match error.fixed(self.step_fix(step)) {
            ConversationError::Refused(refusal) => finding(item, refusal),
            other => Line::new(item, Verdict::Fail, other.into_message()),
        };
        self.found(line);
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
                    let only = self.routes.iter().position(|r| r.source == route.source);
                    let refusal = Refusal {
                        message: self.with_column_list_hint(refusal.message, only),
                        ..refusal
                    };
                    findings.push(finding(item.clone(), refusal));
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
                findings.push(finding(item.clone(), refusal));
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
                if let Err(refusal) = self.truncate_retractable(table) {
                    findings.push(finding(format!("truncate {}", route.source), refusal));
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
