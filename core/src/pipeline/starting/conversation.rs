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
//! (`survey.rs`).

use crate::catalog::checks::{self, Refusal};
use crate::catalog::published::{Published, RowFilter};
use crate::catalog::questions::{self, CatalogError, PublishedTable, SlotInfo, TimelineSwitch};
use crate::contract::partitions::Partition;
use crate::contract::partitions::Placement;
use crate::contract::routes::Route;
use crate::pgoutput::Relation;
use crate::pipeline::handover::Ready;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::report::Line;
use crate::schema::program::{Schema, Table};
use crate::snapshot::plan::{plan_startup, Configured, FelderaNow, Plan, StateRead, TimelineNow};
use crate::snapshot::state::Delivered;
use crate::snapshot::state::StateRoute;
use crate::value::PgTypes;
use crate::wire::DataRow;
use crate::Lsn;

/// Where the conversation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Identify,
    /// The history of the server's timeline (asked only past timeline 1).
    TimelineHistory,
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
    /// The slot was looked up (`Conversation::slot`): decide.
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
pub(crate) enum ConversationError {
    /// A contract, data or catalog problem: exit 1, with the verdict's fix when it has one.
    Refused(Refusal),
    /// A server error for a question: exit 1 with the server's words.
    Server(String),
    /// Something that may clear by itself (the slot is still held by a dead connection):
    /// end the session and retry after a backoff.
    Busy(String),
}

impl ConversationError {
    /// A refusal whose fix, if any, is the question's (`Conversation::step_fix`).
    pub(crate) fn refused(message: impl Into<String>) -> ConversationError {
        ConversationError::Refused(Refusal::new(message))
    }

    /// The operator's words, whatever the kind (without a fix).
    pub(crate) fn into_message(self) -> String {
        match self {
            ConversationError::Refused(refusal) => refusal.message,
            ConversationError::Server(m) | ConversationError::Busy(m) => m,
        }
    }

    /// A refusal with how to fix it, as `check` reports it and a start refuses: the
    /// verdict's own fix, else the one for the server's error, else `question` (the fix of
    /// the question that was asked). `Busy` stays as it is: it is retried, not refused.
    pub(crate) fn fixed(self, question: Option<String>) -> ConversationError {
        match self {
            ConversationError::Refused(refusal) => {
                ConversationError::Refused(refusal.or_fix(question))
            }
            ConversationError::Server(message) => {
                let fix = crate::catalog::server::fix_for_server_error(&message);
                let fix = fix.map(str::to_owned).or(question);
                ConversationError::Refused(Refusal::new(message).or_fix(fix))
            }
            busy @ ConversationError::Busy(_) => busy,
        }
    }
}

/// How to fix a table that `retraction_problems` names (Feldera table `table`).
pub(crate) fn retraction_fix(table: &str) -> String {
    format!(
        "give Feldera table {table} a primary key it can be queried by, or seed it yourself with SNAPSHOT_MODE=never"
    )
}

/// The tables whose leftovers a snapshot could not retract (or whose emptiness it could not
/// check) exactly, with why: `relations` and `tables` are aligned, as `Conversation` keeps them.
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

/// The operator's words, with the fix of a refusal that has one (as a refused start says them).
impl std::fmt::Display for ConversationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConversationError::Refused(refusal) => refusal.fmt(f),
            ConversationError::Server(m) | ConversationError::Busy(m) => f.write_str(m),
        }
    }
}

impl From<Refusal> for ConversationError {
    fn from(refusal: Refusal) -> Self {
        ConversationError::Refused(refusal)
    }
}

impl From<CatalogError> for ConversationError {
    fn from(error: CatalogError) -> Self {
        ConversationError::refused(error.to_string())
    }
}

#[derive(Debug)]
pub(crate) struct Conversation {
    pub(super) step: Step,
    pub(super) rows: Vec<Vec<Option<String>>>,
    pub(super) query_error: Option<String>,
    pub(super) publication: String,
    pub(super) slot: String,
    pub(super) database: String,
    pub(super) routes: Vec<Route>,
    pub(super) require_primary_key: bool,
    pub(super) wal_sender_timeout_ms: u64,
    pub(super) relations: Vec<Relation>,
    /// Each route's partitions, in route order (empty: not partitioned, or not read).
    pub(super) partitions: Vec<Vec<Partition>>,
    /// What the publication publishes, partitions with their ancestors.
    pub(super) published: Vec<PublishedTable>,
    /// What it publishes of each route's table, in route order (`relations` and
    /// `partitions` are narrowed to those columns), and the columns it leaves out.
    pub(super) published_routes: Vec<(Published, Vec<String>)>,
    /// The publication's `publish_via_partition_root`.
    pub(super) via_root: bool,
    pub(super) types: PgTypes,
    pub(super) schema: Option<Schema>,
    pub(super) tables: Vec<Table>,
    pub(super) slot_info: Option<SlotInfo>,
    pub(super) created_at: Option<Lsn>,
    pub(super) system_id: String,
    /// The server's timeline (`IDENTIFY_SYSTEM`).
    pub(super) timeline: u32,
    /// The timelines the server's branched off from, with where each ended (empty on
    /// timeline 1; `None`: the server could not say).
    pub(super) history: Option<Vec<TimelineSwitch>>,
    pub(super) truncate_published: bool,
    /// `PG_SLOT_FAILOVER`: create the slot as a failover slot (17+).
    pub(super) failover: bool,
    /// Copies read the routed tables (`SNAPSHOT_MODE` is not `never`): a routed table the
    /// role reads through row-level security is refused (`checks::row_security`).
    pub(super) copies: bool,
    /// The role slotline logs in as, for the refusals that name it.
    pub(super) role: String,
    /// `server_version_num` of the server, as its startup parameters report it.
    pub(super) server_version: Option<u32>,
    /// The stream carries logical decoding messages (an online copy's watermarks).
    pub(crate) messages: bool,
    /// A survey's findings (`None`: a start, where refusals end the conversation).
    pub(super) survey: Option<Vec<Line>>,
    /// Survey: Feldera's schema cannot be had; the mappings are not checked.
    pub(super) schema_unavailable: bool,
    /// Survey: the publication exists (else the routes are not compared with it).
    pub(super) publication_found: bool,
}

/// Values come to the startup as text; invalid UTF-8 in a catalog answer is refused.
fn row_text(row: &DataRow) -> Result<Vec<Option<String>>, ConversationError> {
    row.columns
        .iter()
        .map(|column| {
            column
                .as_ref()
                .map(|bytes| {
                    String::from_utf8(bytes.to_vec())
                        .map_err(|_| ConversationError::refused("a catalog answer is not UTF-8"))
                })
                .transpose()
        })
        .collect()
}

impl Conversation {
    /// The startup plan for what this conversation learned (the slot, the system id) and
    /// the state file's contents: what a start does, for `starting` and for `check`.
    pub(crate) fn plan(
        &self,
        env: &crate::pipeline::env::Env,
        state: &StateRead,
        feldera: Option<FelderaNow<'_>>,
        delivered: Option<Delivered>,
    ) -> Plan {
        let config = &env.config;
        let routes = self.state_routes(env);
        let configured = Configured {
            mode: config.snapshot_mode,
            state_path: &env.state_path,
            state_dir_given: config.state_dir_given,
            slot: &config.slot,
            publication: &config.publication,
            pipeline: &config.feldera_pipeline,
            database: &config.pg.database,
            routes: &routes,
            feldera,
            timeline: Some(TimelineNow {
                timeline: self.timeline,
                history: self.history.as_deref(),
                delivered,
            }),
        };
        plan_startup(state, self.slot(), &configured, self.system_id())
    }

    pub(crate) fn new(
        publication: &str,
        slot: &str,
        database: &str,
        routes: Vec<Route>,
        require_primary_key: bool,
    ) -> Conversation {
        Conversation {
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
            published_routes: Vec::new(),
            via_root: false,
            types: PgTypes::new(),
            schema: None,
            tables: Vec::new(),
            slot_info: None,
            created_at: None,
            system_id: String::new(),
            timeline: 0,
            history: None,
            truncate_published: false,
            failover: false,
            copies: true,
            role: String::new(),
            server_version: None,
            messages: false,
            survey: None,
            schema_unavailable: false,
            publication_found: false,
        }
    }

    /// Creates the slot as a failover slot (`PG_SLOT_FAILOVER=true`; refused before 17).
    pub(crate) fn with_failover(mut self, failover: bool) -> Conversation {
        self.failover = failover;
        self
    }

    /// Whether copies read the routed tables (`SNAPSHOT_MODE` is not `never`), as `role`.
    pub(crate) fn with_copies(mut self, copies: bool, role: &str) -> Conversation {
        self.copies = copies;
        self.role = role.to_owned();
        self
    }

    /// A survey: refusals become findings and the conversation goes on to the slot.
    pub(crate) fn surveying(mut self) -> Conversation {
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

    pub(super) fn found(&mut self, line: Line) {
        if let Some(findings) = self.survey.as_mut() {
            findings.push(line);
        }
    }

    /// Survey: a warning is a finding; a start logs it.
    pub(super) fn warned(&mut self, queue: &mut Queue, item: &str, warning: String) {
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

    /// The server's timeline and, when it could say, the timelines it branched off from.
    pub(crate) fn timeline(&self) -> (u32, Option<&[TimelineSwitch]>) {
        (self.timeline, self.history.as_deref())
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

    /// The configured routes as a state file records them, with what the publication
    /// publishes of each (once the catalog was read; a survey that found no publication
    /// records nothing of it).
    pub(crate) fn state_routes(&self, env: &crate::pipeline::env::Env) -> Vec<StateRoute> {
        env.routes
            .iter()
            .enumerate()
            .map(|(index, route)| {
                let published = self
                    .published_routes
                    .get(index)
                    .filter(|_| self.survey.is_none() || self.publication_found)
                    .map(|(what, left_out)| crate::catalog::published::fingerprint(what, left_out));
                StateRoute::of(route).with_published(published)
            })
            .collect()
    }

    /// The rows the publication publishes of each route's table, in route order.
    pub(crate) fn row_filters(&self) -> Vec<RowFilter> {
        self.published_routes
            .iter()
            .map(|(published, _)| published.rows.clone())
            .collect()
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
    ) -> Result<(), ConversationError> {
        let reported = |name: &str| link.parameter(name).unwrap_or("").to_owned();
        let version = reported("server_version");
        self.server_version = crate::wire::server_version::parse_server_version(&version);
        let verdicts = [
            (
                "server",
                checks::server_version(&version, self.failover)
                    .map(|()| format!("PostgreSQL {version}")),
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
            ),
        ];
        for (item, verdict) in verdicts {
            match (verdict, self.survey.is_some()) {
                (Ok(found), _) => self.found(Line::ok(item, found)),
                (Err(refusal), true) => self.found(finding(item, refusal)),
                (Err(refusal), false) => return Err(refusal.into()),
            }
        }
        self.ask(queue, link, questions::IDENTIFY_SYSTEM.to_owned())
    }

    pub(super) fn ask(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
        sql: String,
    ) -> Result<(), ConversationError> {
        self.rows.clear();
        self.query_error = None;
        link.query(queue, &sql).map_err(ConversationError::refused)
    }

    pub(crate) fn on_row(&mut self, row: &DataRow) -> Result<(), ConversationError> {
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
    ) -> Result<(), ConversationError> {
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
    ) -> Result<(), ConversationError> {
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
    ) -> Result<Answer, ConversationError> {
        let step = self.step;
        match self.answer(queue, link) {
            Err(error) if self.survey.is_some() => self.survey_past(queue, link, step, error),
            Err(error) => Err(error.fixed(self.step_fix(step))),
            answer => answer,
        }
    }

    /// `START_REPLICATION` from the slot's position.
    pub(crate) fn start_replication(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), ConversationError> {
        self.step = Step::StartReplication;
        let command =
            questions::start_replication_command(&self.slot, &self.publication, self.messages)
                .ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `DROP_REPLICATION_SLOT` (the slot is not in use: checked when it was read).
    pub(crate) fn drop_slot(
        &mut self,
        queue: &mut Queue,
        link: &mut PgLink,
    ) -> Result<(), ConversationError> {
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
    ) -> Result<(), ConversationError> {
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
    ) -> Result<(), ConversationError> {
        self.step = Step::CreateTemporarySlot;
        let name = questions::temporary_slot_name(&self.slot);
        let command = questions::create_temporary_slot_command(&name).ok_or_else(nul)?;
        self.ask(queue, link, command)
    }

    /// `START_REPLICATION` answered with CopyBoth: the stream is open.
    pub(crate) fn on_stream_started(&mut self) -> Result<Ready, ConversationError> {
        if self.step != Step::StartReplication {
            return Err(ConversationError::refused(
                "the server started streaming before it was asked",
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

    /// How to fix a refusal of the answer to `step` that has no fix of its own: what a
    /// survey's finding and a refused start both say. `None` past the slot's reading.
    pub(super) fn step_fix(&self, step: Step) -> Option<String> {
        Some(match step {
            Step::Identify | Step::TimelineHistory | Step::WalSenderTimeout => {
                "connect as a role with REPLICATION to a server with wal_level = logical".to_owned()
            }
            Step::Publication => checks::publication_fix(&self.publication),
            Step::PublishedTables => checks::tables_fix(&self.publication),
            Step::Relation(_) => checks::RELATION_FIX.to_owned(),
            Step::Types => {
                "let the role read pg_catalog.pg_type, pg_attribute, pg_depend and pg_extension \
                 (every role can unless it was revoked)"
                    .to_owned()
            }
            Step::AwaitSchema | Step::Slot | Step::SlotRead => checks::SLOT_FIX.to_owned(),
            Step::DropSlot
            | Step::CreateSlot
            | Step::CreateTemporarySlot
            | Step::StartReplication
            | Step::Streaming => return None,
        })
    }

    pub(super) fn step_name(&self) -> String {
        match self.step {
            Step::Identify => "IDENTIFY_SYSTEM".into(),
            Step::TimelineHistory => questions::timeline_history_command(self.timeline),
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

pub(super) fn nul() -> ConversationError {
    ConversationError::refused("a name contains a NUL byte")
}

/// A survey's finding for `refusal` about `item`: a failure, with its fix when it has one.
pub(super) fn finding(item: impl Into<String>, refusal: Refusal) -> Line {
    let line = Line::new(item, crate::report::Verdict::Fail, refusal.message);
    match refusal.fix {
        Some(fix) => line.with_fix(fix),
        None => line,
    }
}
