//! The startup conversation of a session, over the replication connection: pin and check
//! the session settings, `IDENTIFY_SYSTEM`, `SHOW wal_sender_timeout`, the publication and
//! its tables against the routes, each routed table's shape and replica identity against
//! Feldera's schema, then the slot as it is. What happens to the slot (start, create, drop
//! and recreate for a snapshot) is the Starting phase's decision; this conversation only
//! carries it out (`drop_slot`, `create_slot`, `start_replication`).
//!
//! Every check happens before anything is created, so a refused start leaves nothing
//! behind. This module asks questions and records answers; the verdicts come from
//! `startup::checks`.

use super::ctx::Ctx;
use super::pg::PgLink;
use crate::contract::routes::Route;
use crate::contract::schema::{Schema, Table};
use crate::pgoutput::Relation;
use crate::startup::catalog::{self, CatalogError, QualifiedName, Row, SlotInfo};
use crate::startup::checks::{self, StartupRefusal};
use crate::status::parse_guc_duration_ms;
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
    AwaitSchema,
    Slot,
    /// The slot is known; the Starting phase decides what comes next.
    SlotRead,
    DropSlot,
    CreateSlot,
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
}

/// What the session learnt before streaming.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) wal_sender_timeout_ms: u64,
    pub(crate) tables: Vec<Table>,
    pub(crate) slot_confirmed: Lsn,
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
    schema: Option<Schema>,
    tables: Vec<Table>,
    slot_info: Option<SlotInfo>,
    created_at: Option<Lsn>,
    system_id: String,
    truncate_published: bool,
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
            schema: None,
            tables: Vec::new(),
            slot_info: None,
            created_at: None,
            system_id: String::new(),
            truncate_published: false,
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

    /// Each route's Feldera table, in route order (once the mappings are planned).
    pub(crate) fn tables(&self) -> &[Table] {
        &self.tables
    }

    pub(crate) fn wal_sender_timeout_ms(&self) -> u64 {
        self.wal_sender_timeout_ms
    }

    /// The connection is ready: check what the server says it applied, then ask the first
    /// question.
    pub(crate) fn on_ready(
        &mut self,
        ctx: &mut Ctx,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        let reported = |name: &str| link.parameter(name).unwrap_or("").to_owned();
        checks::pinned_settings(
            &reported("DateStyle"),
            &reported("TimeZone"),
            &reported("IntervalStyle"),
            &reported("client_encoding"),
        )?;
        self.ask(ctx, link, catalog::IDENTIFY_SYSTEM.to_owned())
    }

    fn ask(&mut self, ctx: &mut Ctx, link: &mut PgLink, sql: String) -> Result<(), StartupError> {
        self.rows.clear();
        self.query_error = None;
        link.query(ctx, &sql).map_err(StartupError::Refused)
    }

    pub(crate) fn on_row(&mut self, row: &DataRow) -> Result<(), StartupError> {
        self.rows.push(row_text(row)?);
        Ok(())
    }

    pub(crate) fn on_query_error(&mut self, message: String) {
        self.query_error = Some(message);
    }

    /// Feldera's schema arrived.
    pub(crate) fn on_schema(
        &mut self,
        ctx: &mut Ctx,
        link: &mut PgLink,
        schema: Schema,
    ) -> Result<(), StartupError> {
        self.schema = Some(schema);
        if self.step == Step::AwaitSchema {
            self.plan_mappings(ctx)?;
            self.step = Step::Slot;
            self.ask(ctx, link, catalog::slot_query(&self.slot).ok_or_else(nul)?)?;
        }
        Ok(())
    }

    /// The current question was answered (ReadyForQuery): read the answer, ask the next.
    pub(crate) fn on_query_done(
        &mut self,
        ctx: &mut Ctx,
        link: &mut PgLink,
    ) -> Result<Answer, StartupError> {
        if let Some(error) = self.query_error.take() {
            return Err(StartupError::Server(format!(
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
                let identity = catalog::parse_identify_system(&rows)?;
                ctx.log(
                    crate::io::Level::Debug,
                    format!(
                        "IDENTIFY_SYSTEM system={} timeline={} xlogpos={}",
                        identity.system_id, identity.timeline, identity.xlogpos
                    ),
                );
                self.system_id = identity.system_id;
                self.step = Step::WalSenderTimeout;
                self.ask(ctx, link, "SHOW wal_sender_timeout".to_owned())?;
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
                    ctx,
                    link,
                    catalog::publication_query(&self.publication).ok_or_else(nul)?,
                )?;
                Ok(Answer::Asked)
            }
            Step::Publication => {
                let publication = catalog::parse_publication(&rows)?;
                for warning in checks::publication(&self.publication, publication.as_ref())? {
                    ctx.log(crate::io::Level::Warn, warning);
                }
                self.truncate_published = publication.is_some_and(|p| p.truncates);
                self.step = Step::PublishedTables;
                self.ask(
                    ctx,
                    link,
                    catalog::published_tables_query(&self.publication).ok_or_else(nul)?,
                )?;
                Ok(Answer::Asked)
            }
            Step::PublishedTables => {
                let published = catalog::parse_published_tables(&rows)?;
                checks::routes_match_publication(&self.publication, &self.routes, &published)?;
                self.ask_relation(ctx, link, 0)?;
                Ok(Answer::Asked)
            }
            Step::Relation(index) => {
                self.relations.push(catalog::parse_relation(&rows)?);
                self.ask_relation(ctx, link, index + 1)?;
                Ok(Answer::Asked)
            }
            Step::Slot => {
                self.slot_info = catalog::parse_slot(&rows)?;
                if let Some(slot) = &self.slot_info {
                    checks::existing_slot(slot, &self.database)?;
                    if let Some(busy) = checks::slot_in_use(slot) {
                        return Err(StartupError::Busy(busy));
                    }
                }
                self.step = Step::SlotRead;
                Ok(Answer::SlotRead)
            }
            Step::DropSlot => {
                ctx.log(
                    crate::io::Level::Info,
                    format!("dropped replication slot {}", self.slot),
                );
                self.slot_info = None;
                self.step = Step::SlotRead;
                Ok(Answer::SlotDropped)
            }
            Step::CreateSlot => {
                let (consistent_point, snapshot) = catalog::parse_created_slot(&rows)?;
                self.created_at = Some(consistent_point);
                self.step = Step::SlotRead;
                Ok(Answer::SlotCreated {
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
        ctx: &mut Ctx,
        link: &mut PgLink,
        index: usize,
    ) -> Result<(), StartupError> {
        if let Some(route) = self.routes.get(index) {
            self.step = Step::Relation(index);
            let name = QualifiedName {
                schema: route.source.schema.clone(),
                table: route.source.name.clone(),
            };
            return self.ask(ctx, link, catalog::relation_query(&name).ok_or_else(nul)?);
        }
        if self.schema.is_none() {
            self.step = Step::AwaitSchema;
            return Ok(());
        }
        self.plan_mappings(ctx)?;
        self.step = Step::Slot;
        self.ask(ctx, link, catalog::slot_query(&self.slot).ok_or_else(nul)?)
    }

    fn plan_mappings(&mut self, ctx: &mut Ctx) -> Result<(), StartupError> {
        let schema = self
            .schema
            .as_ref()
            .ok_or_else(|| StartupError::Refused("no Feldera schema".into()))?;
        let planned = checks::plan_routes(
            &self.routes,
            &self.relations,
            schema,
            self.require_primary_key,
        )?;
        for warning in &planned.warnings {
            ctx.log(crate::io::Level::Warn, warning.clone());
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
        ctx: &mut Ctx,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.step = Step::StartReplication;
        let command =
            catalog::start_replication_command(&self.slot, &self.publication).ok_or_else(nul)?;
        self.ask(ctx, link, command)
    }

    /// `DROP_REPLICATION_SLOT` (the slot is not in use: checked when it was read).
    pub(crate) fn drop_slot(
        &mut self,
        ctx: &mut Ctx,
        link: &mut PgLink,
    ) -> Result<(), StartupError> {
        self.step = Step::DropSlot;
        let command = catalog::drop_slot_command(&self.slot).ok_or_else(nul)?;
        self.ask(ctx, link, command)
    }

    /// `CREATE_REPLICATION_SLOT`, exporting a snapshot or not (`SNAPSHOT 'nothing'`).
    pub(crate) fn create_slot(
        &mut self,
        ctx: &mut Ctx,
        link: &mut PgLink,
        export: bool,
    ) -> Result<(), StartupError> {
        self.step = Step::CreateSlot;
        let command = catalog::create_slot_command(&self.slot, export).ok_or_else(nul)?;
        self.ask(ctx, link, command)
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
            slot_confirmed,
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
            Step::AwaitSchema => "waiting for Feldera's schema".into(),
            Step::Slot | Step::SlotRead => format!("reading replication slot {}", self.slot),
            Step::DropSlot => format!("DROP_REPLICATION_SLOT {}", self.slot),
            Step::CreateSlot => format!("CREATE_REPLICATION_SLOT {}", self.slot),
            Step::StartReplication => format!("START_REPLICATION SLOT {}", self.slot),
            Step::Streaming => "streaming".into(),
        }
    }
}

fn nul() -> StartupError {
    StartupError::Refused("a name contains a NUL byte".into())
}
