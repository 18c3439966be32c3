//! The startup conversation of a session, over the replication connection: pin and check
//! the session settings, `IDENTIFY_SYSTEM`, `SHOW wal_sender_timeout`, the publication and
//! its tables against the routes, each routed table's shape and replica identity, the
//! column types that are not builtin (only when there are some), all against Feldera's
//! schema, then the slot as it is. What happens to the slot (start, create, drop
//! and recreate for a snapshot) is the Starting phase's decision; this conversation only
//! carries it out (`drop_slot`, `create_slot`, `start_replication`).
//!
//! Every check happens before anything is created, so a refused start leaves nothing
//! behind. This module asks questions and records answers; the verdicts come from
//! `catalog::checks`.
//!
//! A survey (`slotline check`) runs the same conversation up to the slot, but a refusal
//! does not end it: each verdict becomes a report line (`Line`) and the next question is
//! asked, so every problem is found in one run and nothing is ever created
//! (`startup_survey.rs`).

use super::handover::Ready;
use super::pg::PgLink;
use super::queue::Queue;
use crate::catalog::checks::{self, StartupRefusal};
use crate::catalog::questions::{
    self, CatalogError, Partition, PublishedTable, QualifiedName, Row, SlotInfo,
};
use crate::catalog::types::{parse_types, types_query};
use crate::contract::partitions::Placement;
use crate::contract::routes::Route;
use crate::contract::schema::{Schema, Table};
use crate::pgoutput::Relation;
use crate::report::Line;
use crate::snapshot::plan::{plan_startup, Configured, FelderaNow, Plan, StateRead};
use crate::snapshot::state::StateRoute;
use crate::standby::parse_guc_duration_ms;
use crate::value::{oid, PgTypes};
use crate::wire::DataRow;
use crate::Lsn;

/// Where the conversation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Identify,
    WalSenderTimeout,
    Publication,
    PublishedTables,
    Relation(usize),
    /// The routed columns' types the decoders do not know by OID.
    Types,
    AwaitSchema,
    Slot,
    /// The slot is known; the Starting phase decides what comes next.
    SlotRead,
    DropSlot,
    CreateSlot,
    /// A temporary slot whose exported snapshot copies routes added to a running
    /// deployment; the slot streamed from stays as it is.
    CreateTemporarySlot,
    StartReplication,
    Streaming,
}

/// What a finished question means for the Starting phase.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The next question was asked; nothing to decide.
    Asked,
    /// The slot was looked up (`Startup::slot`): decide.
    SlotRead,
    /// `DROP_REPLICATION_SLOT` succeeded.
    SlotDropped,
    /// `CREATE_REPLICATION_SLOT` succeeded: its consistent point and exported snapshot.
    SlotCreated {
        consistent_point: Lsn,
        snapshot: Option<String>,
    },
    /// The temporary slot for added routes exists: its consistent point and snapshot.
    TemporarySlotCreated {
        consistent_point: Lsn,
        snapshot: String,
    },
}

/// How a step ended when it did not simply move on.
#[derive(Debug)]
pub(crate) enum StartupError {
    /// A contract, data or catalog problem: exit 1.
    Refused(String),
    /// A server error for a question: exit 1 with the server's words.
    Server(String),
    /// Something that may clear by itself (the slot is still held by a dead connection):
    /// end the session and retry after a backoff.
    Busy(String),
}

impl StartupError {
    /// The operator's words, whatever the kind.
    pub(crate) fn into_message(self) -> String {
        match self {
            StartupError::Refused(m) | StartupError::Server(m) | StartupError::Busy(m) => m,
        }
    }
}

/// The tables whose leftovers a snapshot could not retract (or whose emptiness it could not
/// check) exactly, with why: `relations` and `tables` are aligned, as `Startup` keeps them.
pub(crate) fn retraction_problems(
    relations: &[Relation],
    tables: &[Table],
    types: &PgTypes,
    leftovers: crate::snapshot::plan::Leftovers,
    require_primary_key: bool,
) -> Vec<(String, String)> {
    use crate::contract::mapping::{plan_mapping, MappingOptions};
    use crate::snapshot::plan::Leftovers;
    let options = MappingOptions {
        require_primary_key,
    };
    let mut problems = Vec::new();
    for (relation, table) in relations.iter().zip(tables) {
        let problem = match leftovers {
            Leftovers::IfTargetNotEmpty => crate::retract::plan_keys(table).err().map(|e| {
                format!(
                    "the initial copy must first check that Feldera table {} is empty: {e}",
                    table.name
                )
            }),
            Leftovers::Retract => match plan_mapping(relation, table, types, options) {
                Err(e) => Some(e.to_string()),
                Ok(mapping) => crate::retract::plan_leftovers(table, &mapping, relation)
                    .err()
                    .map(|e| e.to_string()),
            },
        };
        if let Some(problem) = problem {
            problems.push((table.name.to_string(), problem));
        }
    }
    problems
}

impl From<StartupRefusal> for StartupError {
    fn from(refusal: StartupRefusal) -> Self {
        StartupError::Refused(refusal.to_string())
    }
}

impl From<CatalogError> for StartupError {
    fn from(error: CatalogError) -> Self {
        StartupError::Refused(error.to_string())
    }
}

#[derive(Debug)]
pub(crate) struct Startup {
    step: Step,
    rows: Vec<Vec<Option<String>>>,
    query_error: Option<String>,
    publication: String,
    slot: String,
    database: String,
    routes: Vec<Route>,
    require_primary_key: bool,
    wal_sender_timeout_ms: u64,
    relations: Vec<Relation>,
    /// Each route's partitions, in route order (empty: not partitioned, or not read).
    partitions: Vec<Vec<Partition>>,
    /// What the publication publishes, partitions with their ancestors.
    published: Vec<PublishedTable>,
    /// The publication's `publish_via_partition_root`.
    via_root: bool,
    types: PgTypes,
    schema: Option<Schema>,
    tables: Vec<Table>,
    slot_info: Option<SlotInfo>,
    created_at: Option<Lsn>,
    system_id: String,
    truncate_published: bool,
    /// `PG_SLOT_FAILOVER`: create the slot as a failover slot (17+).
    failover: bool,
    /// `server_version_num` of the server, as its startup parameters report it.
    server_version: Option<u32>,
    /// A survey's findings (`None`: a start, where refusals end the conversation).
    survey: Option<Vec<Line>>,
    /// Survey: Feldera's schema cannot be had; the mappings are not checked.
    schema_unavailable: bool,
    /// Survey: the publication exists (else the routes are not compared with it).
    publication_found: bool,
}

/// Values come to the startup as text; invalid UTF-8 in a catalog answer is refused.
fn row_text(row: &DataRow) -> Result<Vec<Option<String>>, StartupError> {
    row.columns
        .iter()
        .map(|column| {
            column
                .as_ref()
                .map(|bytes| {
                    String::from_utf8(bytes.to_vec()).map_err(|_| {
                        StartupError::Refused("a catalog answer is not UTF-8".to_owned())
                    })
                })
                .transpose()
        })
        .collect()
}

impl Startup {
    /// The startup plan for what this conversation learned (the slot, the system id) and
    /// the state file's contents: what a start does, for `starting` and for `check`.
    pub(super) fn plan(
        &self,
        env: &super::env::Env,
        state: &StateRead,
        feldera: Option<FelderaNow<'_>>,
    ) -> Plan {
        let config = &env.config;
        let routes: Vec<StateRoute> = env.routes.iter().map(StateRoute::of).collect();
        let configured = Configured {
            mode: config.snapshot_mode,
            state_path: &env.state_path,
            slot: &config.slot,
            publication: &config.publication,
            pipeline: &config.feldera_pipeline,
            database: &config.pg.database,
            routes: &routes,
            feldera,
        };
        plan_startup(state, self.slot(), &configured, self.system_id())
    }

    pub(crate) fn new(
        publication: &str,
        slot: &str,
        database: &str,
        routes: Vec<Route>,
        require_primary_key: bool,
    ) -> Startup {
        Startup {
            step: Step::Identify,
            rows: Vec::new(),
            query_error: None,
            publication: publication.to_owned(),
            slot: slot.to_owned(),
            database: database.to_owned(),
            routes,
            require_primary_key,
            wal_sender_timeout_ms: 60_000,
            relations: Vec::new(),
            partitions: Vec::new(),
            published: Vec::new(),
            via_root: false,
            types: PgTypes::new(),
            schema: None,
            tables: Vec::new(),
            slot_info: None,
            created_at: None,
            system_id: String::new(),
            truncate_published: false,
            failover: false,
            server_version: None,
            survey: None,
            schema_unavailable: false,
            publication_found: false,
        }
    }

    /// Creates the slot as a failover slot (`PG_SLOT_FAILOVER=true`; refused before 17).
    pub(crate) fn with_failover(mut self, failover: bool) -> Startup {
        self.failover = failover;
        self
    }

    /// A survey: refusals become findings and the conversation goes on to the slot.
    pub(crate) fn surveying(mut self) -> Startup {
        self.survey = Some(Vec::new());
        self
    }

    /// The survey's findings so far (emptied).
    pub(crate) fn take_findings(&mut self) -> Vec<Line> {
        self.survey.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The server's `server_version_num` (once the connection is ready).
    pub(crate) fn server_version(&self) -> Option<u32> {
        self.server_version
    }

    fn found(&mut self, line: Line) {
        if let Some(findings) = self.survey.as_mut() {
            findings.push(line);
        }
    }

    /// Survey: a warning is a finding; a start logs it.
    fn warned(&mut self, queue: &mut Queue, item: &str, warning: String) {
        match self.survey.as_mut() {
            Some(findings) => findings.push(Line::warn(item, warning)),
            None => queue.log(crate::io::Level::Warn, warning),
        }
    }

    /// The slot as found (once `Answer::SlotRead`).
    pub(crate) fn slot(&self) -> Option<&SlotInfo> {
        self.slot_info.as_ref()
    }

    /// The server's system identifier (`IDENTIFY_SYSTEM`).
    pub(crate) fn system_id(&self) -> &str {
        &self.system_id
    }

    /// Each route's table as the catalog describes it, in route order.
    pub(crate) fn relations(&self) -> &[Relation] {
        &self.relations
    }

    /// What the catalog said about the routed columns' non-builtin types (empty when there
    /// are none).
    pub(crate) fn types(&self) -> &PgTypes {
        &self.types
    }

    /// Each route's Feldera table, in route order (once the mappings are planned).
    pub(crate) fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// The route of every partition of a routed table.
    pub(crate) fn placement(&self) -> Placement {
        Placement::new(&self.partitions)
    }

    pub(crate) fn wal_sender_timeout_ms(&self) -> u64 {
        self.wal_sender_timeout_ms
    }

    /// The connection is ready: check what the server says it applied, then ask the first
    /// question.
    pub(crate) fn on_ready(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        let reported = |name: &str| link.parameter(name).unwrap_or("").to_owned();
        let version = reported("server_version");
        self.server_version = crate::catalog::slot::parse_server_version(&version);
        let verdicts = [
            (
                "server",
                checks::server_version(&version, self.failover).map(|()| {
                    format!("PostgreSQL {version}")
                }),
                "upgrade to PostgreSQL 15 or newer (PG_SLOT_FAILOVER=true needs 17)",
            ),
            (
                "session settings",
                checks::pinned_settings(
                    &reported("DateStyle"),
                    &reported("TimeZone"),
                    &reported("IntervalStyle"),
                    &reported("client_encoding"),
                )
                .map(|()| "DateStyle ISO, TimeZone UTC, IntervalStyle postgres, UTF8".to_owned()),
                "remove whatever overrides the session settings slotline sends (ALTER ROLE/DATABASE ... SET, PGOPTIONS)",
            ),
        ];
        for (item, verdict, fix) in verdicts {
            match (verdict, self.survey.is_some()) {
                (Ok(found), _) => self.found(Line::ok(item, found)),
                (Err(refusal), true) => self.found(Line::fail(item, refusal.0, fix)),
                (Err(refusal), false) => return Err(refusal.into()),
            }
        }
        self.ask(queue, link, questions::IDENTIFY_SYSTEM.to_owned())
    }

    fn ask(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        sql: String,
    ) -> Result<(), StartupError> {
        self.rows.clear();
        self.query_error = None;
        link.query(queue, &sql).map_err(StartupError::Refused)
    }

    pub(crate) fn on_row(&mut self, row: &DataRow) -> Result<(), StartupError> {
        self.rows.push(row_text(row)?);
        Ok(())
    }

    pub(crate) fn on_query_error(&mut self, message: String) {
        self.query_error = Some(message);
    }

    /// Survey: Feldera's schema cannot be had (its own finding says why); the conversation
    /// goes on without the mappings.
    pub(crate) fn without_schema(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.schema_unavailable = true;
        if self.step == Step::AwaitSchema {
            self.step = Step::Slot;
            self.ask(
                queue,
                link,
                questions::slot_query(&self.slot).ok_or_else(nul)?,
            )?;
        }
        Ok(())
    }

    /// Feldera's schema arrived.
    pub(crate) fn on_schema(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        schema: Schema,
    ) -> Result<(), StartupError> {
        self.schema = Some(schema);
        if self.step == Step::AwaitSchema {
            self.plan_mappings(queue)?;
            self.step = Step::Slot;
            self.ask(
                queue,
                link,
                questions::slot_query(&self.slot).ok_or_else(nul)?,
            )?;
        }
        Ok(())
    }

    /// The current question was answered (ReadyForQuery): read the answer, ask the next.
    /// A survey notes a refusal and asks the next question anyway.
    pub(crate) fn on_query_done(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<Answer, StartupError> {
        let step = self.step;
        match self.answer(queue, link) {
            Err(error) if self.survey.is_some() => self.survey_past(queue, link, step, error),
            answer => answer,
        }
    }

    fn answer(&mut self, queue: &mut Queue, link: &mut PgLink) -> Result<Answer, StartupError> {
        if let Some(error) = self.query_error.take() {
            if self.step == Step::CreateTemporarySlot && error.contains(" 42710:") {
                // Held by this process's earlier connection, whose walsender the server
                // has not yet seen go (a temporary slot lives as long as its connection).
                return Err(StartupError::Busy(format!(
                    "{} failed: {error}; the walsender of an earlier connection may still hold it: \
                     retrying once it is gone",
                    self.step_name()
                )));
            }
            let fix = crate::catalog::server::fix_for_server_error(&error)
                .map(|fix| format!(" (fix: {fix})"))
                .unwrap_or_default();
            return Err(StartupError::Server(format!(
                "{} failed: {error}{fix}",
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
                    StartupError::Refused(format!("cannot read wal_sender_timeout {text:?}"))
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
                let relation = questions::parse_relation(&rows)?;
                let partitions = questions::parse_partitions(&rows)?;
                if self.survey.is_none() || self.publication_found {
                    checks::partitions_fit(
                        &self.publication,
                        &self.routes,
                        index,
                        relation.oid,
                        &partitions,
                        &self.published,
                    )?;
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
                            return Err(StartupError::Busy(busy));
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
                    StartupError::Refused(
                        "the temporary slot was created without an exported snapshot".into(),
                    )
                })?;
                Ok(Answer::TemporarySlotCreated {
                    consistent_point,
                    snapshot,
                })
            }
            Step::AwaitSchema | Step::SlotRead | Step::StartReplication | Step::Streaming => {
                Err(StartupError::Refused(format!(
                    "unexpected end of a query while {}",
                    self.step_name()
                )))
            }
        }
    }

    fn ask_relation(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        index: usize,
    ) -> Result<(), StartupError> {
        if let Some(name) = self.route_table(index) {
            self.step = Step::Relation(index);
            return self.ask(
                queue,
                link,
                questions::relation_query(&name).ok_or_else(nul)?,
            );
        }
        self.partitions.resize(self.routes.len(), Vec::new());
        self.note_partition_publishing(queue);
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
    fn after_columns(&mut self, queue: &mut Queue, link: &mut PgLink) -> Result<(), StartupError> {
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

    fn plan_mappings(&mut self, queue: &mut Queue) -> Result<(), StartupError> {
        if self.survey.is_some() {
            self.survey_mappings();
            return Ok(());
        }
        let schema = self
            .schema
            .as_ref()
            .ok_or_else(|| StartupError::Refused("no Feldera schema".into()))?;
        let planned = checks::plan_routes(
            &self.routes,
            &self.relations,
            &self.types,
            schema,
            self.require_primary_key,
        )?;
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
                crate::retract::plan_keys(table).map_err(|e| {
                    StartupError::Refused(format!(
                        "{e}\n  Or stop publishing TRUNCATE: ALTER PUBLICATION {} SET (publish = 'insert, update, delete')",
                        self.publication
                    ))
                })?;
            }
        }
        self.tables = planned.tables;
        Ok(())
    }

    /// `START_REPLICATION` from the slot's position.
    pub(crate) fn start_replication(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.step = Step::StartReplication;
        let command =
            questions::start_replication_command(&self.slot, &self.publication).ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `DROP_REPLICATION_SLOT` (the slot is not in use: checked when it was read).
    pub(crate) fn drop_slot(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.step = Step::DropSlot;
        let command = questions::drop_slot_command(&self.slot).ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `CREATE_REPLICATION_SLOT`, exporting a snapshot or not (`SNAPSHOT 'nothing'`).
    pub(crate) fn create_slot(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        export: bool,
    ) -> Result<(), StartupError> {
        self.step = Step::CreateSlot;
        let command = questions::create_slot_command_with(&self.slot, export, self.failover)
            .ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `CREATE_REPLICATION_SLOT <slot>_add TEMPORARY ... (SNAPSHOT 'export')`: a snapshot
    /// for routes added since the copy, taken without touching the slot streamed from.
    pub(crate) fn create_temporary_slot(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.step = Step::CreateTemporarySlot;
        let name = questions::temporary_slot_name(&self.slot);
        let command = questions::create_temporary_slot_command(&name).ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `START_REPLICATION` answered with CopyBoth: the stream is open.
    pub(crate) fn on_stream_started(&mut self) -> Result<Ready, StartupError> {
        if self.step != Step::StartReplication {
            return Err(StartupError::Refused(
                "the server started streaming before it was asked".into(),
            ));
        }
        self.step = Step::Streaming;
        let slot_confirmed = match (&self.slot_info, self.created_at) {
            (_, Some(created_at)) => created_at,
            (Some(slot), None) => slot.confirmed_flush.unwrap_or(Lsn::ZERO),
            (None, None) => Lsn::ZERO,
        };
        Ok(Ready {
            wal_sender_timeout_ms: self.wal_sender_timeout_ms,
            tables: std::mem::take(&mut self.tables),
            types: self.types.clone(),
            slot_confirmed,
            placement: self.placement(),
            skips: Default::default(),
        })
    }

    fn step_name(&self) -> String {
        match self.step {
            Step::Identify => "IDENTIFY_SYSTEM".into(),
            Step::WalSenderTimeout => "SHOW wal_sender_timeout".into(),
            Step::Publication => format!("reading publication {}", self.publication),
            Step::PublishedTables => {
                format!("listing the tables of publication {}", self.publication)
            }
            Step::Relation(i) => match self.routes.get(i) {
                Some(route) => format!("reading the columns of {}", route.source),
                None => "reading table columns".into(),
            },
            Step::Types => "reading the types of the routed columns".into(),
            Step::AwaitSchema => "waiting for Feldera's schema".into(),
            Step::Slot | Step::SlotRead => format!("reading replication slot {}", self.slot),
            Step::DropSlot => format!("DROP_REPLICATION_SLOT {}", self.slot),
            Step::CreateSlot => format!("CREATE_REPLICATION_SLOT {}", self.slot),
            Step::CreateTemporarySlot => format!(
                "CREATE_REPLICATION_SLOT {} TEMPORARY",
                questions::temporary_slot_name(&self.slot)
            ),
            Step::StartReplication => format!("START_REPLICATION SLOT {}", self.slot),
            Step::Streaming => "streaming".into(),
        }
    }
}

#[path = "startup_survey.rs"]
mod survey;

fn nul() -> StartupError {
    StartupError::Refused("a name contains a NUL byte".into())
}
