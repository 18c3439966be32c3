//! `slotline check`: everything a start verifies, and what it would do, without creating anything.
//! One replication connection runs the startup conversation as a survey (`Conversation::surveying`,
//! `pipeline/starting/survey.rs`: each refusal becomes a finding and the next question is asked),
//! then the questions only a check asks (`catalog::server`, the slot's health); Feldera is asked
//! for the pipeline and the state file is read, as at a start. The startup plan then says what a
//! start would do, and a snapshot's retraction is checked against the tables as a start would.
//!
//! The report goes out as one `Print`; the exit code is 0 when the setup would work, 1
//! when a finding failed. Nothing is ever created, dropped or written.

use crate::catalog::questions::Row;
use crate::catalog::{server, slot};
use crate::config::{Config, ConfigError, SnapshotMode};
use crate::conn::Event;
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::feldera::{
    classify_pipeline, classify_pipeline_list, classify_query, describe_pipelines, is_not_found,
    lifecycle, PipelineOutcome, QueryOutcome, Reply, PIPELINE_FIX, SCHEMA_FIX,
};
use crate::io::{exit, Command, Driver, HttpId, Input};
use crate::pipeline::env::Env;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::pipeline::starting::conversation::{
    retraction_fix, retraction_problems, Answer, Conversation,
};
use crate::report::{Format, Line, Report};
use crate::schema::Schema;
use crate::snapshot::plan::{Action, StateRead};
use crate::time::{Mono, Now};
use crate::timer::{Deadline, TimerKind};

/// How long a check waits for its answers before it reports what it has.
pub const CHECK_TIMEOUT_MS: u64 = 30_000;

/// The questions only a check asks, after the startup conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Extra {
    Settings,
    Select,
    Health,
}

impl Extra {
    /// What the question asks, for the finding when it fails.
    fn name(self) -> &'static str {
        match self {
            Extra::Settings => "the server's replication settings and the role's attributes",
            Extra::Select => "the role's SELECT privileges on the routed tables",
            Extra::Health => "the slot's health",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pg {
    /// `PG_URL` lists several hosts: each is asked in turn what it is (`probes`).
    Probing(usize),
    /// The startup conversation (survey) runs.
    Conversation,
    Extra(Extra),
    Done,
}

/// The `check` machine (see the module docs). A `Driver` like the pipeline, so the shells
/// run it with the same loop.
#[derive(Debug)]
pub struct Check {
    queue: Queue,
    env: Env,
    format: Format,
    deadline: Mono,
    link: Option<PgLink>,
    conversation: Conversation,
    pg: Pg,
    rows: Vec<Vec<Option<String>>>,
    query_error: Option<String>,
    slot_read: bool,
    role: String,
    pg_lines: Vec<Line>,
    schema_request: Option<HttpId>,
    feldera_lines: Option<Vec<Line>>,
    /// The ad-hoc query probe (`retract::probe_query`) and the table it asks about, while
    /// its answer is awaited.
    probe: Option<(HttpId, String)>,
    /// The pipeline was not found (HTTP 404): the request for Feldera's list of pipelines,
    /// and the finding that waits for it to name them.
    listing: Option<(HttpId, String)>,
    state: Option<StateRead>,
    /// With several hosts, what each answered: in recovery and read-only by default, or
    /// why it could not be reached.
    probes: Vec<Result<(bool, bool), String>>,
    /// The host the survey runs on (as a start would choose it).
    host: usize,
}

impl Check {
    /// Starts a check: the connection, the pipeline request and the state file read go
    /// out at once.
    pub fn new(config: Config, now: Now, format: Format) -> Result<Check, ConfigError> {
        let env = Env::new(config)?;
        let config = &env.config;
        let conversation = Conversation::new(
            &config.publication,
            &config.slot,
            &config.pg.database,
            env.routes.clone(),
            config.require_primary_key,
        )
        .with_failover(config.slot_failover)
        .with_copies(
            config.snapshot_mode != crate::config::SnapshotMode::Never,
            &config.pg.user,
        )
        .surveying();
        let mut check = Check {
            queue: Queue::new(now),
            deadline: now.mono.plus_ms(CHECK_TIMEOUT_MS),
            format,
            link: None,
            conversation,
            pg: Pg::Conversation,
            rows: Vec::new(),
            query_error: None,
            slot_read: false,
            role: config.pg.user.clone(),
            pg_lines: Vec::new(),
            schema_request: None,
            feldera_lines: None,
            probe: None,
            listing: None,
            state: None,
            probes: Vec::new(),
            host: 0,
            env,
        };
        check.begin();
        Ok(check)
    }

    fn begin(&mut self) {
        if self.env.config.pg.hosts.len() > 1 {
            self.pg = Pg::Probing(0);
            self.open_link(0);
        } else {
            self.open_link(0);
        }
        let id = self.queue.http_id();
        self.schema_request = Some(id);
        self.queue.push(Command::Http {
            id,
            request: self.env.endpoint.get_pipeline(QUESTION_TIMEOUT_MS),
        });
        self.queue.push(Command::ReadState {
            path: self.env.state_path.clone(),
        });
    }

    /// A replication connection to the `index`-th host.
    fn open_link(&mut self, index: usize) {
        let config = &self.env.config;
        let name = format!("slotline-check/{}", config.slot);
        match PgLink::open(&mut self.queue, &config.pg.at(index), true, &name) {
            Ok(link) => self.link = Some(link),
            Err(e) => self.pg_failed(format!("cannot connect: {e}")),
        }
    }

    /// The `index`-th host answered (or not): ask the next, or, once each has, say what
    /// each is and survey the one a start would use.
    fn probed(&mut self, index: usize, answer: Result<(bool, bool), String>) {
        self.close_link();
        self.probes.push(answer);
        let pg = &self.env.config.pg;
        if index + 1 < pg.hosts.len() {
            self.pg = Pg::Probing(index + 1);
            self.open_link(index + 1);
            return;
        }
        let attrs = pg.target_session_attrs;
        let serves = |round: bool| {
            self.probes.iter().position(|p| {
                p.as_ref()
                    .is_ok_and(|&(recovery, read_only)| attrs.accepts(recovery, read_only, round))
            })
        };
        let chosen = serves(false).or_else(|| serves(true));
        let count = pg.hosts.len();
        for (i, probe) in self.probes.iter().enumerate() {
            let host = &pg.hosts[i];
            let item = "postgres";
            let at = format!("host {} of {count}, {}:{}", i + 1, host.host, host.port);
            let line = match probe {
                Ok((recovery, read_only)) => {
                    let what = match (recovery, read_only) {
                        (true, _) => "a standby",
                        (false, true) => "a primary, read-only by default",
                        (false, false) => "a primary accepting writes",
                    };
                    if Some(i) == chosen {
                        Line::ok(
                            item,
                            format!(
                                "{at}: {what}; a start uses it (target_session_attrs={})",
                                attrs.name()
                            ),
                        )
                    } else {
                        Line::info(
                            item,
                            format!(
                                "{at}: {what}; passed over (target_session_attrs={})",
                                attrs.name()
                            ),
                        )
                    }
                }
                Err(why) => Line::warn(item, format!("{at}: {why}; a start tries the next host")),
            };
            self.pg_lines.push(line);
        }
        match chosen {
            Some(index) => {
                self.host = index;
                self.pg = Pg::Conversation;
                self.open_link(index);
            }
            None => self.pg_failed(format!(
                "no host of PG_URL is what target_session_attrs={} asks for ({count} listed)",
                attrs.name()
            )),
        }
    }

    /// PostgreSQL cannot be asked (more): say so once, with how to fix it.
    fn pg_failed(&mut self, why: String) {
        if self.pg == Pg::Done {
            return;
        }
        // What a start refused for the same reason says (`pg_link::conn_failure`).
        let fix = crate::pipeline::pg_link::connect_fix(&self.env.config.pg, &why);
        self.pg_lines.extend(self.conversation.take_findings());
        self.pg_lines.push(Line::fail("postgres", why, fix));
        self.close_link();
        self.pg = Pg::Done;
    }

    fn close_link(&mut self) {
        if let Some(mut link) = self.link.take() {
            link.close(&mut self.queue);
        }
    }

    fn on_events(&mut self, events: Vec<Event>) {
        for event in events {
            if self.pg == Pg::Done {
                return;
            }
            let Some(link) = self.link.as_mut() else {
                return;
            };
            if let Pg::Probing(index) = self.pg {
                // The rest of this connection's events do not matter once it answered.
                match event {
                    Event::Ready => {
                        let on = |name: &str| link.parameter(name) == Some("on");
                        let answer = (on("in_hot_standby"), on("default_transaction_read_only"));
                        return self.probed(index, Ok(answer));
                    }
                    Event::Failed(error) => return self.probed(index, Err(error.to_string())),
                    _ => continue,
                }
            }
            let queue = &mut self.queue;
            let step = match (self.pg, event) {
                (Pg::Conversation, Event::Ready) => {
                    let pg = &self.env.config.pg.at(self.host);
                    let tls = if link.is_encrypted() { " over TLS" } else { "" };
                    self.pg_lines.push(Line::ok(
                        "postgres",
                        format!(
                            "connected to {}:{} database {} as {}{tls} (replication connection)",
                            pg.host, pg.port, pg.database, pg.user
                        ),
                    ));
                    self.conversation.on_ready(queue, link).map(|()| None)
                }
                (Pg::Conversation, Event::DataRow(row)) => {
                    self.conversation.on_row(&row).map(|()| None)
                }
                (Pg::Conversation, Event::QueryError(e)) => {
                    self.conversation.on_query_error(e.to_string());
                    Ok(None)
                }
                (Pg::Conversation, Event::QueryDone { .. }) => {
                    self.conversation.on_query_done(queue, link).map(Some)
                }
                (Pg::Extra(_), Event::DataRow(row)) => {
                    self.rows.push(
                        row.columns
                            .iter()
                            .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                            .collect(),
                    );
                    Ok(None)
                }
                (Pg::Extra(_), Event::QueryError(e)) => {
                    self.query_error = Some(e.to_string());
                    Ok(None)
                }
                (Pg::Extra(extra), Event::QueryDone { .. }) => {
                    self.on_extra(extra);
                    Ok(None)
                }
                (_, Event::Failed(error)) => {
                    let why = error.to_string();
                    self.pg_failed(why);
                    return;
                }
                _ => Ok(None),
            };
            match step {
                Ok(Some(Answer::SlotRead)) => {
                    self.slot_read = true;
                    self.pg_lines.extend(self.conversation.take_findings());
                    self.ask_extra(Extra::Settings);
                }
                Ok(_) => {}
                Err(error) => self.pg_failed(error.into_message()),
            }
        }
    }

    fn ask_extra(&mut self, extra: Extra) {
        let sql = match extra {
            Extra::Settings => Some(server::SETTINGS_QUERY.to_owned()),
            Extra::Select => server::select_privileges_query(&self.env.routes),
            Extra::Health => slot::slot_health_query(
                &self.env.config.slot,
                self.conversation
                    .server_version()
                    .unwrap_or(slot::MIN_SERVER_VERSION),
            ),
        };
        let (Some(sql), Some(link)) = (sql, self.link.as_mut()) else {
            return self.after_extra(extra);
        };
        self.rows.clear();
        self.query_error = None;
        self.pg = Pg::Extra(extra);
        if let Err(e) = link.query(&mut self.queue, &sql) {
            self.pg_failed(e);
        }
    }

    fn after_extra(&mut self, extra: Extra) {
        match extra {
            Extra::Settings => self.ask_extra(Extra::Select),
            Extra::Select => self.ask_extra(Extra::Health),
            Extra::Health => {
                self.pg = Pg::Done;
                self.close_link();
            }
        }
    }

    fn on_extra(&mut self, extra: Extra) {
        let owned = std::mem::take(&mut self.rows);
        let borrowed: Vec<Vec<Option<&str>>> = owned
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        if let Some(error) = self.query_error.take() {
            self.pg_lines.push(Line::warn(
                "postgres",
                format!("a check's own question ({}) failed: {error}", extra.name()),
            ));
            return self.after_extra(extra);
        }
        let lines = match extra {
            Extra::Settings => match server::parse_settings(&rows) {
                Ok(settings) => {
                    self.role = settings.role.clone();
                    server::judge_settings(&settings, self.conversation.slot().is_some())
                }
                Err(e) => vec![Line::warn("server settings", e.to_string())],
            },
            Extra::Select => {
                let needed = self.env.config.snapshot_mode != SnapshotMode::Never;
                server::judge_select(&rows, &self.env.routes, &self.role, needed)
            }
            Extra::Health => self.judge_health(&rows),
        };
        self.pg_lines.extend(lines);
        self.after_extra(extra);
    }

    fn judge_health(&self, rows: &[Row<'_>]) -> Vec<Line> {
        let health = match slot::parse_slot_health(rows) {
            Ok(health) => health,
            Err(e) => return vec![Line::warn("slot health", e.to_string())],
        };
        let name = &self.env.config.slot;
        let mut lines =
            server::judge_high_availability(&health.availability, self.env.config.slot_failover);
        let Some(state) = &health.slot else {
            return lines;
        };
        if let Some(why) = slot::invalidation(state) {
            lines.push(Line::warn(
                "slot health",
                format!("{name} was invalidated ({why}): the WAL it needed is gone"),
            ));
        }
        let budget = slot::WalBudget {
            warn_bytes: self.env.config.slot_wal_warn_bytes,
        };
        if let Some(warning) = slot::wal_warning(&health, budget) {
            lines.push(Line::warn("slot health", warning));
        }
        if let (true, Some(false)) = (self.env.config.slot_failover, state.failover) {
            lines.push(Line::warn(
                "slot health",
                format!(
                    "PG_SLOT_FAILOVER=true but {name} was created without failover; it keeps that setting \
                     (drop it to have it created as a failover slot, or ALTER_REPLICATION_SLOT {name} (FAILOVER true))"
                ),
            ));
        }
        lines
    }

    fn on_pipeline(&mut self, reply: Reply<'_>) {
        let pipeline = self.env.config.feldera_pipeline.clone();
        // Printed on stdout: never with user info (see `redact_userinfo`).
        let url = crate::feldera::redact_userinfo(&self.env.config.feldera_url).into_owned();
        let mut lines = Vec::new();
        let schema = match classify_pipeline(reply) {
            PipelineOutcome::Ready(info) => {
                lines.push(Line::ok(
                    "feldera",
                    format!("pipeline {pipeline} at {url} has a compiled program"),
                ));
                let (warn, verdict) =
                    crate::pipeline::durability::verdict(&self.env.config, info.fault_tolerance);
                lines.push(match warn {
                    true => Line::warn("feldera durability", verdict),
                    false => Line::ok("feldera durability", verdict),
                });
                let status = info.deployment_status.as_deref().unwrap_or("unknown");
                let desired = info.deployment_desired_status.as_deref();
                let advice = lifecycle::advice(status, desired, &url, &pipeline);
                if advice.is_none() {
                    self.send_probe(&info.schema);
                }
                lines.push(match advice {
                    None => Line::ok("feldera pipeline", "Running"),
                    Some(advice) => Line::fail(
                        "feldera pipeline",
                        format!("pipeline {pipeline} is {status}, not Running: ingress would not be processed"),
                        advice,
                    ),
                });
                Some(info.schema)
            }
            PipelineOutcome::NotCompiled { program_status } => {
                lines.push(Line::fail(
                    "feldera",
                    format!(
                        "pipeline {pipeline} has no compiled program (program_status {})",
                        program_status.as_deref().unwrap_or("unknown")
                    ),
                    "wait for its SQL to compile, or fix the compilation errors Feldera reports",
                ));
                None
            }
            PipelineOutcome::BadSchema(e) => {
                lines.push(Line::fail(
                    "feldera",
                    format!("cannot read the schema of pipeline {pipeline}: {e}"),
                    SCHEMA_FIX,
                ));
                None
            }
            PipelineOutcome::Fatal(e) if is_not_found(&e) => {
                // The finding waits for the list of pipelines (`on_listing`).
                let list = self.env.endpoint.list_pipelines(QUESTION_TIMEOUT_MS);
                let id = self.queue.http(list);
                self.listing = Some((id, format!("cannot read pipeline {pipeline} at {url}: {e}")));
                None
            }
            PipelineOutcome::Transient(e) | PipelineOutcome::Fatal(e) => {
                lines.push(Line::fail(
                    "feldera",
                    format!("cannot read pipeline {pipeline} at {url}: {e}"),
                    PIPELINE_FIX,
                ));
                None
            }
        };
        self.feldera_lines = Some(lines);
        if self.pg == Pg::Done {
            return;
        }
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let result = match schema {
            Some(schema) => self.conversation.on_schema(&mut self.queue, link, schema),
            None => self.conversation.without_schema(&mut self.queue, link),
        };
        if let Err(error) = result {
            self.pg_failed(error.into_message());
        }
    }

    /// Asks a running pipeline one free ad-hoc query of the first routed table it answers
    /// queries on: TRUNCATE retraction and a re-snapshot's leftover check read keys that
    /// way, in `format=json`, which Feldera marks deprecated in favour of `arrow_ipc`
    /// (docs/feldera.md, "Ad-hoc queries"). A table that cannot be queried at all is
    /// reported by the start plan's retraction lines instead.
    fn send_probe(&mut self, schema: &Schema) {
        let table = self.env.routes.iter().find_map(|route| {
            schema
                .inputs
                .iter()
                .find(|t| t.name.same_as(&route.destination))
                .filter(|t| t.queryable())
        });
        let Some(table) = table else {
            return;
        };
        let id = self.queue.http_id();
        let sql = crate::retract::probe_query(&table.name);
        self.probe = Some((id, table.name.canonical().into_owned()));
        self.queue.push(Command::Http {
            id,
            request: self.env.endpoint.query(&sql, QUESTION_TIMEOUT_MS),
        });
    }

    /// Feldera's list of pipelines, after the pipeline was not found: the finding names
    /// them (or says there are none, or why the list is unknown).
    fn on_listing(&mut self, finding: String, reply: Reply<'_>) {
        let listed = classify_pipeline_list(reply);
        let pipeline = &self.env.config.feldera_pipeline;
        let line = Line::fail(
            "feldera",
            format!("{finding}; {}", describe_pipelines(pipeline, &listed)),
            PIPELINE_FIX,
        );
        if let Some(lines) = self.feldera_lines.as_mut() {
            lines.push(line);
        }
    }

    /// The probe's answer, judged (see `send_probe`).
    fn on_probe(&mut self, table: &str, reply: Reply<'_>) {
        let why = |e: &dyn std::fmt::Display| {
            format!("an ad-hoc query of {table} in format=json failed: {e}")
        };
        let line = match classify_query(reply) {
            QueryOutcome::Rows(rows) if rows.is_empty() => Line::ok(
                "feldera queries",
                format!("ad-hoc queries of {table} are answered in JSON (format=json)"),
            ),
            QueryOutcome::Rows(rows) => Line::warn(
                "feldera queries",
                format!(
                    "Feldera answered a LIMIT 0 query of {table} with a row ({}): its JSON answers may have changed (format=json is deprecated in favour of arrow_ipc); TRUNCATE retraction and a re-snapshot's leftover check read keys this way",
                    serde_json::Value::Object(rows[0].clone())
                ),
            ),
            QueryOutcome::Interrupted(e) | QueryOutcome::Transient(e) | QueryOutcome::Fatal(e) => {
                let text = e.to_string().to_ascii_lowercase();
                let about_format = text.contains("deprecat") || text.contains("format");
                Line::warn(
                    "feldera queries",
                    match about_format {
                        true => format!(
                            "{}: this Feldera may no longer answer format=json (deprecated in favour of arrow_ipc), which TRUNCATE retraction and a re-snapshot's leftover check need; use a slotline release that speaks its query transport",
                            why(&e)
                        ),
                        false => format!(
                            "{}: TRUNCATE retraction and a re-snapshot's leftover check need ad-hoc queries",
                            why(&e)
                        ),
                    },
                )
            }
        };
        if let Some(lines) = self.feldera_lines.as_mut() {
            lines.push(line);
        }
    }

    fn on_state(&mut self, contents: Result<Option<bytes::Bytes>, String>) {
        self.state = Some(match contents {
            Ok(None) => StateRead::Absent,
            Ok(Some(bytes)) => match crate::snapshot::state::StateFile::parse(&bytes) {
                Ok(state) => StateRead::Present(state),
                Err(e) => StateRead::Unreadable(e),
            },
            Err(e) => StateRead::Unreadable(crate::snapshot::state::StateError::Read(e)),
        });
    }

    fn state_line(&self) -> Line {
        let path = &self.env.state_path;
        match &self.state {
            None => Line::warn("state file", format!("{path} was not read in time")),
            Some(StateRead::Absent) => Line::ok("state file", format!("{path} is absent")),
            Some(StateRead::Present(file)) => Line::ok(
                "state file",
                format!(
                    "{path}: {} copy for slot {}{}",
                    file.phase,
                    file.slot,
                    file.own_phases()
                        .map_or_else(String::new, |own| format!("; routes copied or removed since: {own}"))
                ),
            ),
            Some(StateRead::Unreadable(e)) => Line::fail(
                "state file",
                format!("{path} cannot be read: {e}"),
                "fix its permissions or contents, or delete it (the next start then copies every table again)",
            ),
        }
    }

    /// What a start would do (the startup plan), and whether a snapshot could retract.
    fn plan_lines(&self) -> Vec<Line> {
        let (Some(state), true) = (&self.state, self.slot_read) else {
            return Vec::new();
        };
        let plan = self.conversation.plan(&self.env, state, None, None);
        let mut lines: Vec<Line> = plan
            .warnings
            .iter()
            .map(|w| Line::warn("start", w.clone()))
            .collect();
        match &plan.action {
            Action::Refuse(message) => lines.push(Line::fail(
                "start",
                format!("a start would refuse: {message}"),
                "do what the message says before starting",
            )),
            Action::Snapshot { leftovers, .. } | Action::Reroute { leftovers, .. } => {
                lines.push(Line::ok("start", format!("a start would {}", plan.action)));
                let problems = retraction_problems(
                    self.conversation.relations(),
                    self.conversation.tables(),
                    self.conversation.types(),
                    *leftovers,
                    self.env.config.require_primary_key,
                );
                // An added-route copy writes only to the added routes' tables.
                let copied = |table: &String| match &plan.action {
                    Action::Reroute { copy, .. } => copy.iter().any(|r| &r.target == table),
                    _ => true,
                };
                for (table, problem) in problems.into_iter().filter(|(t, _)| copied(t)) {
                    let fix = retraction_fix(&table);
                    lines.push(Line::fail(format!("retract {table}"), problem, fix));
                }
            }
            action => lines.push(Line::ok("start", format!("a start would {action}"))),
        }
        lines
    }

    fn probe_is(&self, id: HttpId) -> bool {
        self.probe.as_ref().is_some_and(|(probe, _)| *probe == id)
    }

    fn listing_is(&self, id: HttpId) -> bool {
        self.listing
            .as_ref()
            .is_some_and(|(listing, _)| *listing == id)
    }

    /// Reports once every answer is in (or the deadline passed).
    fn finish_if_ready(&mut self, timed_out: bool) {
        if self.queue.exited() {
            return;
        }
        let ready = self.pg == Pg::Done
            && self.feldera_lines.is_some()
            && self.probe.is_none()
            && self.listing.is_none()
            && self.state.is_some();
        if !ready && !timed_out {
            return;
        }
        if timed_out && self.pg != Pg::Done {
            self.pg_failed(format!(
                "no complete answer within {} s",
                CHECK_TIMEOUT_MS / 1000
            ));
        }
        let mut report = Report::default();
        self.pg_lines.drain(..).for_each(|line| report.push(line));
        if let (Some((_, table)), Some(lines)) = (self.probe.take(), self.feldera_lines.as_mut()) {
            lines.push(Line::warn(
                "feldera queries",
                format!(
                    "an ad-hoc query of {table} had no answer within {} s",
                    CHECK_TIMEOUT_MS / 1000
                ),
            ));
        }
        if let (Some((_, finding)), Some(lines)) =
            (self.listing.take(), self.feldera_lines.as_mut())
        {
            lines.push(Line::fail(
                "feldera",
                format!(
                    "{finding}; the list of Feldera's pipelines had no answer within {} s",
                    CHECK_TIMEOUT_MS / 1000
                ),
                PIPELINE_FIX,
            ));
        }
        let feldera = self.feldera_lines.take().unwrap_or_else(|| {
            vec![Line::fail(
                "feldera",
                format!("no answer within {} s", CHECK_TIMEOUT_MS / 1000),
                "check FELDERA_URL and that Feldera is up",
            )]
        });
        feldera.into_iter().for_each(|line| report.push(line));
        report.push(self.state_line());
        self.plan_lines()
            .into_iter()
            .for_each(|line| report.push(line));
        self.close_link();
        self.queue.push(Command::Print {
            text: report.render("check", self.format),
        });
        let (code, reason) = if report.passed() {
            (exit::OK, "check: the setup would work".to_owned())
        } else {
            (
                exit::FATAL,
                format!("check: {} problem(s)", report.problems()),
            )
        };
        self.queue.exit(code, reason);
    }
}

impl Driver for Check {
    fn handle(&mut self, now: Now, input: Input) {
        if self.queue.exited() {
            return;
        }
        self.queue.now = Now {
            mono: self.queue.now.mono.max(now.mono),
            wall: now.wall,
        };
        let owns = |link: &Option<PgLink>, conn| link.as_ref().is_some_and(|l| l.id == conn);
        match input {
            Input::PgConnected { conn } if owns(&self.link, conn) => {
                if let Some(link) = self.link.as_mut() {
                    link.on_connected(&mut self.queue);
                }
            }
            Input::PgTlsReady {
                conn,
                server_certificate,
            } if owns(&self.link, conn) => {
                if let Some(link) = self.link.as_mut() {
                    link.on_tls_ready(&mut self.queue, server_certificate.as_deref());
                }
            }
            Input::PgBytes { conn, bytes } if owns(&self.link, conn) => {
                let events = match self.link.as_mut() {
                    Some(link) => link.on_bytes(&mut self.queue, &bytes),
                    None => Vec::new(),
                };
                self.on_events(events);
            }
            Input::PgClosed { conn, error } if owns(&self.link, conn) => {
                if let Some(link) = self.link.as_mut() {
                    match link.on_closed(&mut self.queue, error) {
                        crate::pipeline::pg_link::LinkClosed::Retrying => {}
                        crate::pipeline::pg_link::LinkClosed::Lost(why)
                        | crate::pipeline::pg_link::LinkClosed::Fatal(why) => {
                            link.abandon(&mut self.queue);
                            self.link = None;
                            match self.pg {
                                Pg::Probing(index) => self.probed(index, Err(why)),
                                _ => self.pg_failed(why),
                            }
                        }
                    }
                }
            }
            Input::HttpDone { id, status, body } if Some(id) == self.schema_request => {
                self.on_pipeline(Reply::Answered {
                    status,
                    body: &body,
                });
            }
            Input::HttpFailed { id, error } if Some(id) == self.schema_request => {
                self.on_pipeline(Reply::Failed { error: &error });
            }
            Input::HttpDone { id, status, body } if self.listing_is(id) => {
                if let Some((_, finding)) = self.listing.take() {
                    let reply = Reply::Answered {
                        status,
                        body: &body,
                    };
                    self.on_listing(finding, reply);
                }
            }
            Input::HttpFailed { id, error } if self.listing_is(id) => {
                if let Some((_, finding)) = self.listing.take() {
                    self.on_listing(finding, Reply::Failed { error: &error });
                }
            }
            Input::HttpDone { id, status, body } if self.probe_is(id) => {
                if let Some((_, table)) = self.probe.take() {
                    self.on_probe(
                        &table,
                        Reply::Answered {
                            status,
                            body: &body,
                        },
                    );
                }
            }
            Input::HttpFailed { id, error } if self.probe_is(id) => {
                if let Some((_, table)) = self.probe.take() {
                    self.on_probe(&table, Reply::Failed { error: &error });
                }
            }
            Input::StateRead { contents } => self.on_state(contents),
            // Interrupted: report what is known now.
            Input::Shutdown => self.deadline = self.queue.now.mono,
            _ => {}
        }
        let timed_out = self.queue.now.mono >= self.deadline;
        self.finish_if_ready(timed_out);
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.queue.pop()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        (!self.queue.exited()).then_some(Deadline {
            at: self.deadline,
            why: TimerKind::OperationDeadline,
        })
    }
}
