//! The Starting phase itself: the session's connections and questions, and the decision about the
//! slot once the slot and the state file are known (see the module docs of `starting`).

use super::conversation::{Answer, Conversation, ConversationError};
use crate::conn::Event;
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::io::{Command, ConnFailure, ConnId, HttpId, Level, Topic};
use crate::pipeline::cx::Cx;
use crate::pipeline::handover::Next;
use crate::pipeline::handover::Ready;
use crate::pipeline::handover::StreamStart;
use crate::pipeline::handover::{AddedCopy, SnapshotStart};
use crate::pipeline::pg_link::{conn_failure, PgLink};
use crate::pipeline::policy::{Failure, FailureKind};
use crate::pipeline::streaming::Skips;
use crate::report::with_fix;
use crate::snapshot::plan::{Action, FelderaNow, Leftovers, StateRead};
use crate::snapshot::state::{
    rfc3339_utc, SnapshotPhase, StateError, StateFile, StateLeaf, StateRoute, WrittenUnder,
    FORMAT_VERSION,
};
use bytes::Bytes;

/// Where the decision about the slot stands.
#[derive(Debug)]
pub(super) enum Decision {
    /// Waiting for the slot's answer and the state file.
    Gathering,
    /// Snapshot: the state file is being rewritten `pending`.
    RecordingPending {
        drop_slot: bool,
        leftovers: Leftovers,
    },
    /// Snapshot: the old slot is being dropped.
    DroppingSlot { leftovers: Leftovers },
    /// Snapshot: the slot is being created with an exported snapshot.
    CreatingForSnapshot { leftovers: Leftovers },
    /// Snapshot: the slot exists; the state file is being written `pending` (a start that
    /// had no `complete` file to invalidate and no slot to drop writes it only now, so a
    /// start refused before the slot exists leaves nothing behind).
    RecordingPendingAfterSlot,
    /// Stream: the state file is being rewritten with leaf partitions the catalog shows
    /// and it did not record yet (docs/snapshot.md, "The state file").
    RecordingLeaves,
    /// Routes changed: the state file is being rewritten with them (`copy`: the routes to
    /// copy before streaming, by index).
    RecordingReroute {
        copy: Vec<usize>,
        leftovers: Leftovers,
    },
    /// Routes were added: their Feldera tables are counted to choose their online copy
    /// (`online`).
    Counting(Counting),
    /// Routes are copied online: the state file is being rewritten to say their copies
    /// began; then the stream starts.
    RecordingOnline,
    /// Routes were added: the temporary slot whose snapshot copies them is being created.
    CreatingTemporarySlot {
        copy: Vec<usize>,
        leftovers: Leftovers,
    },
    /// Stream only: the slot is being created with `SNAPSHOT 'nothing'`.
    CreatingToStream,
    /// `START_REPLICATION` was sent.
    Streaming,
}

/// Routes to copy online whose Feldera tables are being counted.
#[derive(Debug)]
pub(crate) struct Counting {
    pub(crate) copy: Vec<usize>,
    pub(crate) leftovers: Leftovers,
    pub(crate) online: Vec<crate::pipeline::handover::OnlineCopy>,
    /// The count asked of each route's Feldera table, and its answer.
    pub(crate) asked: Vec<(usize, HttpId, Option<u64>)>,
}

#[derive(Debug)]
pub(crate) struct Starting {
    pub(super) repl: PgLink,
    pub(super) conversation: Conversation,
    pub(super) schema_request: Option<HttpId>,
    /// `GET .../stats`, for the pipeline's incarnation.
    pub(super) stats_request: Option<HttpId>,
    /// The pipeline was not found (HTTP 404): the request for Feldera's list of pipelines,
    /// and the refusal that waits for it (`ask_pipelines`).
    pub(super) not_found: Option<(HttpId, String)>,
    /// The pipeline's incarnation, once `stats` answered.
    pub(super) incarnation: Option<crate::feldera::Incarnation>,
    /// The pipeline's fault tolerance or this run's durability changed: say so.
    pub(super) describe: bool,
    pub(super) state_read: Option<StateRead>,
    pub(super) slot_read: bool,
    pub(super) decision: Decision,
    /// The state file written for a snapshot (`pending`).
    pub(super) state: Option<StateFile>,
    /// The `pending` state file to write once the slot exists (see
    /// `Decision::RecordingPendingAfterSlot`).
    pub(super) unwritten: Option<StateFile>,
    /// That file's write was asked for and has not been confirmed.
    pub(super) awaiting_write: bool,
    /// The snapshot is ready to begin: the slot's consistent point, its exported snapshot
    /// (none under `inconsistent`) and what to do about leftovers.
    pub(super) pending_snapshot: Option<(crate::Lsn, Option<String>, Leftovers)>,
    /// With `pending_snapshot`: the copy is of added routes only, under a temporary slot.
    pub(super) added: Option<AddedCopy>,
    /// Routes the stream copies online (docs/online-copy.md).
    pub(super) online: Vec<crate::pipeline::handover::OnlineCopy>,
}

impl From<ConversationError> for Failure {
    fn from(error: ConversationError) -> Failure {
        // A question's own fix was added where the question is known (`on_query_done`).
        match error.fixed(None) {
            ConversationError::Busy(reason) => Failure::new(FailureKind::SlotBusy, reason),
            refused => Failure::new(
                FailureKind::SetupRefused,
                format!("refusing to start: {refused}"),
            ),
        }
    }
}

/// The host the session connected to is what `target_session_attrs` asks for (as the
/// server reports `in_hot_standby` and `default_transaction_read_only` at login, as libpq
/// reads them); else the session ends and the next host is tried.
fn session_attrs_met(cx: &Cx<'_>, repl: &PgLink) -> Result<(), Failure> {
    use crate::config::SessionAttrs;
    let pg = &cx.env.config.pg;
    let attrs = pg.target_session_attrs;
    if attrs == SessionAttrs::Any {
        return Ok(());
    }
    let on = |name: &str| repl.parameter(name) == Some("on");
    let (in_recovery, read_only) = (on("in_hot_standby"), on("default_transaction_read_only"));
    let round = cx.run.hosts.round_passed(pg.hosts.len());
    if attrs.accepts(in_recovery, read_only, round) {
        return Ok(());
    }
    let here = pg.at(cx.run.hosts.index);
    let what = match (in_recovery, read_only) {
        (true, _) => "a standby (in_hot_standby = on)",
        (false, true) => "read-only (default_transaction_read_only = on)",
        (false, false) => "a primary accepting writes",
    };
    Err(Failure::new(
        FailureKind::PgUnreachable,
        format!(
            "{}:{} is {what}, not what target_session_attrs={} asks for: trying the next host",
            here.host,
            here.port,
            attrs.name()
        ),
    ))
}

impl Starting {
    /// A new session: the replication connection and the schema request.
    pub(crate) fn begin(cx: &mut Cx<'_>) -> Result<Starting, Failure> {
        let config = &cx.env.config;
        cx.run.sessions += 1;
        cx.link.start_session(
            cx.run.sessions,
            config.feldera_transactions != crate::config::FelderaTransactions::Off,
        );
        let application_name = format!("slotline/{}", config.slot);
        let pg = config.pg.at(cx.run.hosts.index);
        if config.pg.hosts.len() > 1 {
            cx.queue.log(
                Level::Info,
                format!(
                    "session {}: connecting to {}:{} (host {} of {}; target_session_attrs={})",
                    cx.run.sessions,
                    pg.host,
                    pg.port,
                    cx.run.hosts.index + 1,
                    config.pg.hosts.len(),
                    config.pg.target_session_attrs.name()
                ),
            );
        }
        let repl = PgLink::open(cx.queue, &pg, true, &application_name).map_err(|e| {
            let why = format!("cannot connect to PostgreSQL: {e}");
            let fix = crate::pipeline::pg_link::connect_fix(&pg, &why);
            Failure::new(FailureKind::ConfigInvalid, with_fix(&why, &fix))
        })?;
        let conversation = Conversation::new(
            &config.publication,
            &config.slot,
            &config.pg.database,
            cx.env.routes.clone(),
            config.require_primary_key,
        )
        .with_failover(config.slot_failover)
        .with_copies(
            config.snapshot_mode != crate::config::SnapshotMode::Never,
            &config.pg.user,
        );
        let schema_request = cx.queue.http_id();
        cx.queue.push(Command::Http {
            id: schema_request,
            request: cx.env.endpoint.get_pipeline(QUESTION_TIMEOUT_MS),
        });
        let stats_request = cx.queue.http_id();
        cx.queue.push(Command::Http {
            id: stats_request,
            request: cx.env.endpoint.stats(QUESTION_TIMEOUT_MS),
        });
        cx.queue.push(Command::ReadState {
            path: cx.env.state_path.clone(),
        });
        cx.queue
            .log(Level::Info, format!("session {} starting", cx.run.sessions));
        Ok(Starting {
            repl,
            conversation,
            schema_request: Some(schema_request),
            stats_request: Some(stats_request),
            not_found: None,
            incarnation: None,
            describe: false,
            state_read: None,
            slot_read: false,
            decision: Decision::Gathering,
            state: None,
            pending_snapshot: None,
            unwritten: None,
            awaiting_write: false,
            added: None,
            online: Vec::new(),
        })
    }

    pub(crate) fn conn(&self) -> ConnId {
        self.repl.id
    }

    /// The replication connection, for the Streaming phase once the stream is open.
    pub(crate) fn into_repl(self) -> PgLink {
        self.repl
    }

    pub(crate) fn on_pg_connected(&mut self, cx: &mut Cx<'_>, conn: ConnId) -> Next {
        if conn == self.repl.id {
            self.repl.on_connected(cx.queue);
        }
        Next::Stay
    }

    pub(crate) fn on_pg_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let mut events = self.repl.on_bytes(cx.queue, bytes).into_iter();
        while let Some(event) = events.next() {
            match self.on_event(cx, event) {
                Ok(None) if self.pending_snapshot.is_some() => return self.snapshot_if_ready(cx),
                Ok(None) => {}
                Ok(Some(mut ready)) => {
                    ready.skips = self.skips(cx);
                    ready.placement.recall(self.recorded_leaves(cx));
                    return Next::Stream(Box::new(StreamStart {
                        ready,
                        pending: events.collect(),
                        record: self.recorded_file(cx).cloned(),
                        online: std::mem::take(&mut self.online),
                    }));
                }
                Err(failure) => return Next::Fail(failure),
            }
        }
        Next::Stay
    }

    /// What the stream skips, as the state file (rewritten or as read) records it; nothing
    /// under `SNAPSHOT_MODE=never`, which decides nothing from the file.
    pub(super) fn skips(&self, cx: &Cx<'_>) -> Skips {
        match self.recorded_file(cx) {
            Some(file) => Skips::of(file, &cx.env.routes),
            None => Skips::default(),
        }
    }

    /// The state file (rewritten or as read) whose records the stream goes by; none under
    /// `SNAPSHOT_MODE=never`, which decides nothing from the file.
    fn recorded_file<'a>(&'a self, cx: &Cx<'_>) -> Option<&'a StateFile> {
        if cx.env.config.snapshot_mode == crate::config::SnapshotMode::Never {
            return None;
        }
        match (&self.state, &self.state_read) {
            (Some(file), _) => Some(file),
            (None, Some(StateRead::Present(file))) => Some(file),
            _ => None,
        }
    }

    /// The leaf partitions the state file records of each configured route, `(oid,
    /// route, name)`: changes of a leaf since detached or dropped are placed by them.
    fn recorded_leaves(&self, cx: &Cx<'_>) -> Vec<(u32, usize, crate::contract::PgTable)> {
        let Some(file) = self.recorded_file(cx) else {
            return Vec::new();
        };
        let mut leaves = Vec::new();
        for (index, route) in cx.env.routes.iter().enumerate() {
            let configured = StateRoute::of(route);
            let recorded = file
                .routes
                .iter()
                .filter(|r| r.is_routed() && r.same_route(&configured));
            for leaf in recorded.flat_map(|r| &r.leaves) {
                let name = crate::contract::PgTable {
                    schema: leaf.schema.clone(),
                    name: leaf.name.clone(),
                };
                leaves.push((leaf.oid, index, name));
            }
        }
        leaves
    }

    /// Records in `routes` (a state file's) what the catalog shows of each configured
    /// route: its table's OID and its leaf partitions; whether anything was not recorded yet.
    fn learn_catalog(&self, cx: &Cx<'_>, routes: &mut [StateRoute]) -> bool {
        let catalog = self.conversation.placement().leaves();
        let mut learned = false;
        for (index, route) in cx.env.routes.iter().enumerate() {
            if let Some(relation) = self.conversation.relations.get(index) {
                let configured = StateRoute::of(route);
                for record in routes
                    .iter_mut()
                    .filter(|r| r.is_routed() && r.same_route(&configured))
                {
                    learned |= record.learn_oid(relation.oid);
                }
            }
            let seen: Vec<StateLeaf> = catalog
                .iter()
                .filter(|(of, _, _)| *of == index)
                .map(|(_, oid, name)| StateLeaf {
                    oid: *oid,
                    schema: name.schema.clone(),
                    name: name.name.clone(),
                })
                .collect();
            if seen.is_empty() {
                continue;
            }
            let configured = StateRoute::of(route);
            for record in routes
                .iter_mut()
                .filter(|r| r.is_routed() && r.same_route(&configured))
            {
                learned |= record.learn_leaves(&seen);
            }
        }
        learned
    }

    /// One startup event; `Some` once the stream is open.
    fn on_event(&mut self, cx: &mut Cx<'_>, event: Event) -> Result<Option<Ready>, Failure> {
        let conversation = &mut self.conversation;
        match event {
            Event::Ready => {
                session_attrs_met(cx, &self.repl)?;
                conversation.on_ready(cx.queue, &mut self.repl)?
            }
            Event::DataRow(row) => conversation.on_row(&row)?,
            Event::QueryError(error) => conversation.on_query_error(error.to_string()),
            Event::QueryDone { .. } => {
                let answer = conversation.on_query_done(cx.queue, &mut self.repl)?;
                return self.on_answer(cx, answer);
            }
            Event::StreamStarted(_) => return Ok(Some(conversation.on_stream_started()?)),
            Event::Notice(notice) => cx.queue.log(Level::Info, format!("PostgreSQL: {notice}")),
            Event::Failed(error) => {
                return Err(conn_failure(
                    &cx.env.config.pg.at(cx.run.hosts.index),
                    error,
                ))
            }
            Event::XLogData(_) | Event::Keepalive(_) => {
                return Err(Failure::new(
                    FailureKind::PgProtocol,
                    "protocol error: replication data before START_REPLICATION",
                ))
            }
            _ => {}
        }
        Ok(None)
    }

    /// A startup question finished: some answers move the slot decision on.
    fn on_answer(&mut self, cx: &mut Cx<'_>, answer: Answer) -> Result<Option<Ready>, Failure> {
        match answer {
            Answer::Asked => Ok(None),
            Answer::SlotRead => {
                self.slot_read = true;
                cx.run.hosts.served = true;
                self.decide(cx).map(|()| None)
            }
            Answer::SlotDropped => match self.decision {
                Decision::DroppingSlot { leftovers } => {
                    self.create_for_snapshot(cx, leftovers).map(|()| None)
                }
                _ => Ok(None),
            },
            Answer::SlotCreated {
                consistent_point,
                snapshot,
            } => {
                // A new slot starts a new acknowledgement history (docs/contract.md).
                cx.run.ages.clear();
                if let Some(earlier) = cx.run.ack.new_slot(consistent_point) {
                    cx.queue.log(
                        Level::Warn,
                        format!(
                            "slot {} starts at {consistent_point}, behind the position {earlier} an earlier session acknowledged \
                             (a server restored or failed over): a new acknowledgement history starts at the slot's position",
                            cx.env.config.slot
                        ),
                    );
                }
                match self.decision {
                    Decision::CreatingToStream => {
                        cx.queue.log(
                        Level::Info,
                        format!(
                            "created replication slot {} at {consistent_point} (SNAPSHOT 'nothing')",
                            cx.env.config.slot
                        ),
                    );
                        self.decision = Decision::Streaming;
                        self.conversation
                            .start_replication(cx.queue, &mut self.repl)?;
                        Ok(None)
                    }
                    Decision::CreatingForSnapshot { leftovers } => {
                        cx.queue.log(
                            Level::Info,
                            format!(
                            "created replication slot {} at {consistent_point} (SNAPSHOT 'export')",
                            cx.env.config.slot
                        ),
                        );
                        self.pending_snapshot = Some((consistent_point, snapshot, leftovers));
                        if let Some(state) = self.unwritten.take() {
                            cx.queue.push(Command::WriteState {
                                path: cx.env.state_path.clone(),
                                contents: Bytes::from(state.encode()),
                            });
                            self.state = Some(state);
                            self.awaiting_write = true;
                            self.decision = Decision::RecordingPendingAfterSlot;
                        }
                        Ok(None)
                    }
                    _ => Ok(None),
                }
            }
            Answer::TemporarySlotCreated {
                consistent_point,
                snapshot,
            } => {
                let Decision::CreatingTemporarySlot { copy, leftovers } =
                    std::mem::replace(&mut self.decision, Decision::Streaming)
                else {
                    return Ok(None);
                };
                let temporary_slot =
                    crate::catalog::questions::temporary_slot_name(&cx.env.config.slot);
                cx.queue.log(
                    Level::Info,
                    format!(
                        "created temporary replication slot {temporary_slot} at {consistent_point} (SNAPSHOT 'export') \
                         to copy the route(s) added or copied again; slot {} stays where it is",
                        cx.env.config.slot
                    ),
                );
                let slot_confirmed = self
                    .conversation
                    .slot()
                    .and_then(|slot| slot.confirmed_flush)
                    .unwrap_or(crate::Lsn::ZERO);
                self.added = Some(AddedCopy {
                    routes: copy,
                    temporary_slot,
                    slot_confirmed,
                });
                self.pending_snapshot = Some((consistent_point, Some(snapshot), leftovers));
                Ok(None)
            }
        }
    }

    /// The state file arrived.
    pub(crate) fn on_state_read(
        &mut self,
        cx: &mut Cx<'_>,
        contents: Result<Option<Bytes>, String>,
    ) -> Next {
        self.state_read = Some(match contents {
            Ok(None) => StateRead::Absent,
            Ok(Some(bytes)) => match StateFile::parse(&bytes) {
                Ok(state) => StateRead::Present(state),
                Err(e) => StateRead::Unreadable(e),
            },
            Err(e) => StateRead::Unreadable(StateError::Read(e)),
        });
        match self.decide(cx) {
            Ok(()) => Next::Stay,
            Err(failure) => Next::Fail(failure),
        }
    }

    /// The state file was rewritten `pending`: the snapshot may replace the slot (or,
    /// written after the slot was created, begin).
    pub(crate) fn on_state_written(&mut self, cx: &mut Cx<'_>, result: Result<(), String>) -> Next {
        let failed = |e: String| {
            Next::Fail(Failure::new(
                FailureKind::SetupRefused,
                format!(
                    "refusing to start: cannot write the state file {}: {e} (STATE_DIR must be a writable directory)",
                    cx.env.state_path
                ),
            ))
        };
        if let Decision::RecordingReroute { copy, leftovers } = &mut self.decision {
            if let Err(e) = result {
                return failed(e);
            }
            let (copy, leftovers) = (std::mem::take(copy), *leftovers);
            let step = if copy.is_empty() {
                self.decision = Decision::Streaming;
                self.conversation
                    .start_replication(cx.queue, &mut self.repl)
            } else if let Some(counting) = self.plan_online(cx, &copy, leftovers) {
                let asked = !counting.asked.is_empty();
                self.decision = Decision::Counting(counting);
                if asked {
                    return Next::Stay;
                }
                return match self.counted(cx) {
                    Ok(()) => Next::Stay,
                    Err(failure) => Next::Fail(failure),
                };
            } else {
                self.decision = Decision::CreatingTemporarySlot { copy, leftovers };
                self.conversation
                    .create_temporary_slot(cx.queue, &mut self.repl)
            };
            return match step {
                Ok(()) => Next::Stay,
                Err(error) => Next::Fail(error.into()),
            };
        }
        if let Decision::RecordingOnline = self.decision {
            if let Err(e) = result {
                return failed(e);
            }
            self.decision = Decision::Streaming;
            return match self
                .conversation
                .start_replication(cx.queue, &mut self.repl)
            {
                Ok(()) => Next::Stay,
                Err(error) => Next::Fail(error.into()),
            };
        }
        if let Decision::RecordingLeaves = self.decision {
            if let Err(e) = result {
                return failed(e);
            }
            self.decision = Decision::Streaming;
            return match self
                .conversation
                .start_replication(cx.queue, &mut self.repl)
            {
                Ok(()) => Next::Stay,
                Err(error) => Next::Fail(error.into()),
            };
        }
        if let Decision::RecordingPendingAfterSlot = self.decision {
            self.awaiting_write = false;
            return match result {
                Ok(()) => self.snapshot_if_ready(cx),
                Err(e) => failed(e),
            };
        }
        let Decision::RecordingPending {
            drop_slot,
            leftovers,
        } = self.decision
        else {
            return Next::Stay;
        };
        if let Err(e) = result {
            return failed(e);
        }
        let step = if drop_slot {
            self.decision = Decision::DroppingSlot { leftovers };
            self.conversation
                .drop_slot(cx.queue, &mut self.repl)
                .map_err(Failure::from)
        } else {
            self.create_for_snapshot(cx, leftovers)
        };
        match step {
            Ok(()) => self.snapshot_if_ready(cx),
            Err(failure) => Next::Fail(failure),
        }
    }

    /// Under `inconsistent` nothing is created before the copy.
    fn create_for_snapshot(
        &mut self,
        cx: &mut Cx<'_>,
        leftovers: Leftovers,
    ) -> Result<(), Failure> {
        if cx.env.config.snapshot_mode == crate::config::SnapshotMode::Inconsistent {
            self.pending_snapshot = Some((crate::Lsn::ZERO, None, leftovers));
            return Ok(());
        }
        self.decision = Decision::CreatingForSnapshot { leftovers };
        self.conversation
            .create_slot(cx.queue, &mut self.repl, true)
            .map_err(Failure::from)
    }

    /// The slot and its snapshot exist (or, `inconsistent`, will after the copy), and the
    /// state file says `pending`: hand over.
    fn snapshot_if_ready(&mut self, cx: &mut Cx<'_>) -> Next {
        if self.awaiting_write {
            // The `pending` state file is not written yet (`on_state_written`).
            return Next::Stay;
        }
        let Some((consistent_point, snapshot, leftovers)) = self.pending_snapshot.take() else {
            return Next::Stay;
        };
        let Some(state) = self.state.take() else {
            return Next::Stay;
        };
        let tables = self.conversation.tables().to_vec();
        Next::Snapshot(Box::new(SnapshotStart {
            ready: Ready {
                wal_sender_timeout_ms: self.conversation.wal_sender_timeout_ms(),
                tables,
                types: self.conversation.types().clone(),
                slot_confirmed: consistent_point,
                placement: {
                    let mut placement = self.conversation.placement();
                    placement.recall(self.recorded_leaves(cx));
                    placement
                },
                skips: Skips::default(),
            },
            relations: self.conversation.relations().to_vec(),
            row_filters: self.conversation.row_filters(),
            snapshot,
            leftovers,
            state,
            state_path: cx.env.state_path.clone(),
            added: self.added.take(),
        }))
    }

    /// With the slot and the state file known, the plan decides.
    pub(super) fn decide(&mut self, cx: &mut Cx<'_>) -> Result<(), Failure> {
        if !self.slot_read
            || !matches!(self.decision, Decision::Gathering)
            || self.schema_request.is_some()
        {
            return Ok(());
        }
        let (Some(state), Some(incarnation)) = (&self.state_read, &self.incarnation) else {
            return Ok(());
        };
        let config = &cx.env.config;
        if let Some(failure) = lost_while_running(cx, self.conversation.slot()) {
            return Err(failure);
        }
        let seen_before = cx.run.feldera.incarnation.clone();
        if seen_before.as_ref().is_some_and(|s| *s != incarnation.uuid) {
            cx.run.feldera.counts.incarnation_changes += 1;
        }
        let under_now = WrittenUnder {
            pipeline_id: cx.run.feldera.pipeline_id.clone(),
            fault_tolerance: cx
                .run
                .feldera
                .fault_tolerance
                .map(|ft| ft.name().to_owned()),
            initial_start_time: incarnation.initial_start_time,
        };
        let seen_under = cx.run.feldera.under.take();
        let feldera = FelderaNow {
            incarnation: &incarnation.uuid,
            seen_before: seen_before.as_deref(),
            keeps_state: cx.run.feldera.keeps_state(),
            on_restart: config.feldera_restart,
            pipeline_id: under_now.pipeline_id.as_deref(),
            resumed: incarnation.resumed(),
            initial_start_time: incarnation.initial_start_time,
            seen_under: seen_under.as_ref(),
        };
        // The run knows what it sent itself; earlier processes left only the file's bound.
        cx.run.sent.timeline = Some(self.conversation.timeline().0);
        if cx.run.sent.inherited.is_none() {
            if let StateRead::Present(file) = state {
                cx.run.sent.inherited = Some(file.delivered);
            }
        }
        let delivered = cx.run.sent.known();
        let plan = self
            .conversation
            .plan(cx.env, state, Some(feldera), delivered);
        if self.describe || seen_before.as_ref() != Some(&incarnation.uuid) {
            self.describe_feldera(cx, &incarnation.uuid);
        }
        cx.run.feldera.incarnation = Some(incarnation.uuid.clone());
        cx.run.feldera.under = Some(under_now);
        for line in &plan.trace {
            cx.queue.note(Level::Debug, Topic::Snapshot, line.clone());
        }
        for warning in &plan.warnings {
            cx.queue.note(Level::Warn, Topic::Snapshot, warning.clone());
        }
        cx.queue.note(
            Level::Info,
            Topic::Snapshot,
            format!("plan: {}", plan.action),
        );
        match plan.action {
            Action::Stream | Action::StreamOnly { create_slot: false } => {
                let recorded = match (&self.state_read, config.snapshot_mode) {
                    (_, crate::config::SnapshotMode::Never) => None,
                    (Some(StateRead::Present(file)), _) => Some(file),
                    _ => None,
                };
                if let Some(mut state) = recorded.cloned() {
                    if self.learn_catalog(cx, &mut state.routes) {
                        // Recorded before streaming: a leaf detached or dropped later is
                        // still placed by a later session, and a route removed later is
                        // known by its OID (docs/snapshot.md).
                        state.updated_at = Some(rfc3339_utc(cx.queue.now.wall));
                        cx.queue.push(Command::WriteState {
                            path: cx.env.state_path.clone(),
                            contents: Bytes::from(state.encode()),
                        });
                        self.state = Some(state);
                        self.decision = Decision::RecordingLeaves;
                        return Ok(());
                    }
                }
                self.decision = Decision::Streaming;
                Ok(self
                    .conversation
                    .start_replication(cx.queue, &mut self.repl)?)
            }
            Action::StreamOnly { create_slot: true } => {
                self.decision = Decision::CreatingToStream;
                Ok(self
                    .conversation
                    .create_slot(cx.queue, &mut self.repl, false)?)
            }
            Action::Snapshot {
                drop_slot,
                leftovers,
            } => {
                self.check_retractable(cx, leftovers)?;
                // A `complete` file must say `pending` before its slot may be replaced (a
                // crash between creating a slot and rewriting it would otherwise leave a
                // complete copy that names a slot it never was); so must anything before
                // an `inconsistent` copy, which creates no slot first. Otherwise the file is
                // written once the slot exists: a start refused before that (wal_level,
                // no free slot) leaves no state behind.
                let complete_file = matches!(
                    &self.state_read,
                    Some(StateRead::Present(file)) if file.phase == SnapshotPhase::Complete
                );
                let inconsistent =
                    config.snapshot_mode == crate::config::SnapshotMode::Inconsistent;
                let record_first = drop_slot || complete_file || inconsistent;
                let mut state = StateFile {
                    version: FORMAT_VERSION,
                    system_id: self.conversation.system_id().to_owned(),
                    database: config.pg.database.clone(),
                    slot: config.slot.clone(),
                    publication: config.publication.clone(),
                    pipeline: config.feldera_pipeline.clone(),
                    routes: self.conversation.state_routes(cx.env),
                    phase: SnapshotPhase::Pending,
                    consistent_point: None,
                    updated_at: Some(rfc3339_utc(cx.queue.now.wall)),
                    feldera_incarnation: cx.run.feldera.incarnation.clone(),
                    feldera_written_under: cx.run.feldera.under.clone(),
                    delivered: None,
                };
                self.learn_catalog(cx, &mut state.routes);
                if !record_first {
                    self.unwritten = Some(state);
                    return self.create_for_snapshot(cx, leftovers);
                }
                cx.queue.push(Command::WriteState {
                    path: cx.env.state_path.clone(),
                    contents: Bytes::from(state.encode()),
                });
                self.state = Some(state);
                self.decision = Decision::RecordingPending {
                    drop_slot,
                    leftovers,
                };
                Ok(())
            }
            Action::Reroute {
                copy,
                routes,
                leftovers,
                ..
            } => {
                let copy: Vec<usize> = cx
                    .env
                    .routes
                    .iter()
                    .enumerate()
                    .filter(|(_, route)| copy.iter().any(|c| c.same_route(&StateRoute::of(route))))
                    .map(|(index, _)| index)
                    .collect();
                self.check_retractable_routes(cx, leftovers, &copy)?;
                let Some(StateRead::Present(file)) = &self.state_read else {
                    return Err(Failure::new(
                        FailureKind::SetupRefused,
                        "refusing to start: a change of routes without a state file",
                    ));
                };
                let mut state = file.clone();
                state.routes = routes;
                self.learn_catalog(cx, &mut state.routes);
                state.updated_at = Some(rfc3339_utc(cx.queue.now.wall));
                if state.feldera_incarnation.is_none() {
                    state.feldera_incarnation = cx.run.feldera.incarnation.clone();
                }
                if state.feldera_written_under.is_none() {
                    state.feldera_written_under = cx.run.feldera.under.clone();
                }
                cx.queue.push(Command::WriteState {
                    path: cx.env.state_path.clone(),
                    contents: Bytes::from(state.encode()),
                });
                self.state = Some(state);
                self.decision = Decision::RecordingReroute { copy, leftovers };
                Ok(())
            }
            Action::Refuse(message) => Err(Failure::new(
                FailureKind::SetupRefused,
                format!("refusing to start: {message}"),
            )),
        }
    }

    /// `check_retractable` for the routes an added-route copy writes to only.
    fn check_retractable_routes(
        &self,
        cx: &Cx<'_>,
        leftovers: Leftovers,
        routes: &[usize],
    ) -> Result<(), Failure> {
        let tables = self.conversation.tables();
        let names: Vec<String> = routes
            .iter()
            .filter_map(|&route| tables.get(route))
            .map(|table| table.name.to_string())
            .collect();
        let problems = super::conversation::retraction_problems(
            self.conversation.relations(),
            tables,
            self.conversation.types(),
            leftovers,
            cx.env.config.require_primary_key,
        );
        match problems
            .into_iter()
            .find(|(table, _)| names.contains(table))
        {
            None => Ok(()),
            Some((table, problem)) => Err(retraction_refused(&table, &problem)),
        }
    }

    /// A snapshot that may need to retract leftovers (or to check that Feldera's tables are
    /// empty) refuses before it creates anything when a table's keys cannot be read and
    /// compared exactly.
    fn check_retractable(&self, cx: &Cx<'_>, leftovers: Leftovers) -> Result<(), Failure> {
        let problems = super::conversation::retraction_problems(
            self.conversation.relations(),
            self.conversation.tables(),
            self.conversation.types(),
            leftovers,
            cx.env.config.require_primary_key,
        );
        match problems.into_iter().next() {
            None => Ok(()),
            Some((table, problem)) => Err(retraction_refused(&table, &problem)),
        }
    }

    pub(crate) fn on_pg_closed(&mut self, cx: &mut Cx<'_>, error: Option<ConnFailure>) -> Next {
        self.repl.closed(
            cx.queue,
            &cx.env.config.pg.at(cx.run.hosts.index),
            error,
            "replication connection",
        )
    }
}

/// A snapshot cannot retract (or check) Feldera table `table`: `problem`, with the fix
/// `check` gives.
fn retraction_refused(table: &str, problem: &str) -> Failure {
    let fix = super::conversation::retraction_fix(table);
    Failure::new(
        FailureKind::SetupRefused,
        format!("refusing to start: {}", with_fix(problem, &fix)),
    )
}

/// A slot an earlier session of this run used, found invalidated now: it was lost while
/// slotline ran (PostgreSQL ends the walsender of a slot it invalidates, so this is how a
/// loss while streaming is usually seen). Never recreated silently: the run exits with the
/// action to take; a fresh start's plan decides about a slot that was lost before it.
fn lost_while_running(
    cx: &Cx<'_>,
    slot: Option<&crate::catalog::questions::SlotInfo>,
) -> Option<Failure> {
    let slot = slot.filter(|s| s.wal_status.as_deref() == Some("lost"))?;
    if !cx.run.slot_seen_valid {
        return None;
    }
    Some(Failure::new(
        FailureKind::SlotLost,
        format!(
            "replication slot {} was invalidated while slotline ran (wal_status = lost): {}",
            slot.name,
            crate::catalog::slot::lost_action(&slot.name)
        ),
    ))
}

impl Starting {
    /// Ends the phase's connection.
    pub(crate) fn close(mut self, queue: &mut crate::pipeline::queue::Queue) {
        self.repl.close(queue);
    }
}
