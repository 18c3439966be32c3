//! `slotline status`: one plain control connection, never a replication connection, and a
//! report: the slot as the server reports it (active, `confirmed_flush_lsn`, lag in bytes
//! to the current WAL, retained WAL, `wal_status`, `safe_wal_size`, and whether it was
//! invalidated), the state file, and Feldera's pipeline state. Exit 1 when something cannot
//! be read or the slot was invalidated.

use super::control::{
    connect_fix, deadline, now_of, with_rows, Control, Heard, OPERATION_TIMEOUT_MS,
};
use crate::catalog::slot;
use crate::config::{Config, ConfigError};
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::feldera::{classify_pipeline, PipelineOutcome, Reply, PIPELINE_FIX};
use crate::io::{exit, Command, Driver, HttpId, Input};
use crate::pipeline::env::Env;
use crate::pipeline::queue::Queue;
use crate::report::{Format, Line, Report};
use crate::time::{Mono, Now};
use crate::timer::Deadline;
use serde_json::json;

/// `slotline status` (see the module docs).
#[derive(Debug)]
pub struct Status {
    queue: Queue,
    env: Env,
    format: Format,
    deadline: Mono,
    control: Option<Control>,
    pg_lines: Option<Vec<Line>>,
    slot_fact: serde_json::Value,
    pipeline_request: HttpId,
    feldera_lines: Option<Vec<Line>>,
    /// `GET .../stats`: the pipeline's incarnation.
    stats_request: HttpId,
    incarnation_line: Option<Line>,
    incarnation: Option<String>,
    feldera_fact: serde_json::Value,
    state_line: Option<Line>,
    /// `GET /v0/pipelines` after the pipeline was not found, and the finding it completes.
    listing: Option<(HttpId, String)>,
}

impl Status {
    pub fn new(config: Config, now: Now, format: Format) -> Result<Status, ConfigError> {
        let env = Env::for_slot_operation(config)?;
        let mut queue = Queue::new(now);
        let (control, pg_lines) = match Control::open(&mut queue, &env, "slotline-status") {
            Ok(control) => (Some(control), None),
            Err(e) => (
                None,
                Some(vec![Line::fail(
                    "postgres",
                    format!("cannot connect: {e}"),
                    connect_fix(&env, &e),
                )]),
            ),
        };
        let pipeline_request = queue.http_id();
        let stats_request = queue.http_id();
        // Without FELDERA_PIPELINE (the slot named by PG_SLOT) Feldera is not asked.
        let ask_feldera = !env.config.feldera_pipeline.is_empty();
        if ask_feldera {
            queue.push(Command::Http {
                id: pipeline_request,
                request: env.endpoint.get_pipeline(QUESTION_TIMEOUT_MS),
            });
            queue.push(Command::Http {
                id: stats_request,
                request: env.endpoint.stats(QUESTION_TIMEOUT_MS),
            });
        }
        let (feldera_lines, incarnation_line) = match ask_feldera {
            true => (None, None),
            false => (
                Some(vec![Line::info(
                    "feldera",
                    "not asked: FELDERA_PIPELINE is not set",
                )]),
                Some(Line::info("feldera incarnation", "not asked")),
            ),
        };
        queue.push(Command::ReadState {
            path: env.state_path.clone(),
        });
        Ok(Status {
            deadline: now.mono.plus_ms(OPERATION_TIMEOUT_MS),
            queue,
            env,
            format,
            control,
            pg_lines,
            slot_fact: serde_json::Value::Null,
            pipeline_request,
            feldera_lines,
            stats_request,
            incarnation_line,
            incarnation: None,
            feldera_fact: serde_json::Value::Null,
            state_line: None,
            listing: None,
        })
    }

    fn on_pg(&mut self, input: Input) {
        let Some(control) = self.control.as_mut() else {
            return;
        };
        match control.on_input(&mut self.queue, input) {
            Heard::Nothing => {}
            Heard::Ready => {
                let sql = slot::slot_health_query(&self.env.config.slot, control.server_version());
                if let Err(e) = sql
                    .ok_or_else(|| "the slot name contains a NUL byte".to_owned())
                    .and_then(|sql| control.ask(&mut self.queue, &sql))
                {
                    let fix = connect_fix(&self.env, &e);
                    self.pg_done(vec![Line::fail("postgres", e, fix)]);
                }
            }
            Heard::Answer(Ok(rows)) => {
                let mut lines = Vec::new();
                if self.env.config.pg.hosts.len() > 1 {
                    lines.push(Line::info(
                        "postgres",
                        format!(
                            "asked {} (target_session_attrs={}; of {} hosts)",
                            control.host(),
                            self.env.config.pg.target_session_attrs.name(),
                            self.env.config.pg.hosts.len()
                        ),
                    ));
                }
                lines.extend(self.slot_lines(&rows));
                self.pg_done(lines);
            }
            Heard::Answer(Err(error)) => self.pg_done(vec![Line::fail(
                "slot",
                format!("cannot read the slot: {error}"),
                "grant the role pg_monitor (or use one that may read pg_replication_slots)",
            )]),
            Heard::Gone(why) => self.pg_done(vec![Line::fail(
                "postgres",
                format!("cannot ask PostgreSQL: {why}"),
                connect_fix(&self.env, &why),
            )]),
        }
    }

    fn pg_done(&mut self, lines: Vec<Line>) {
        if let Some(mut control) = self.control.take() {
            control.close(&mut self.queue);
        }
        self.pg_lines.get_or_insert_with(Vec::new).extend(lines);
    }

    fn slot_lines(&mut self, rows: &[Vec<Option<String>>]) -> Vec<Line> {
        let health = match with_rows(rows, slot::parse_slot_health) {
            Ok(health) => health,
            Err(e) => {
                return vec![Line::fail(
                    "slot",
                    e.to_string(),
                    "report this answer as a bug",
                )]
            }
        };
        let name = self.env.config.slot.clone();
        let mut lines = vec![Line::info(
            "server WAL",
            format!("current position {}", health.current_wal),
        )];
        lines.extend(crate::catalog::server::judge_high_availability(
            &health.availability,
            self.env.config.slot_failover,
        ));
        let Some(state) = &health.slot else {
            self.slot_fact = json!({"name": name, "exists": false, "current_wal_lsn": health.current_wal.to_string()});
            lines.push(Line::info(
                "slot",
                format!("{name} does not exist yet (a first start will create it)"),
            ));
            return lines;
        };
        lines.push(Line::info("slot", format!("{name}: {state}")));
        if let Some(lag) = health.lag_bytes() {
            lines.push(Line::info(
                "lag",
                format!(
                    "{} from confirmed_flush_lsn to the server's current WAL position",
                    slot::bytes_exact(lag)
                ),
            ));
        }
        if let Some(retained) = health.retained_bytes() {
            lines.push(Line::info(
                "retained WAL",
                format!("{} from restart_lsn", slot::bytes_exact(retained)),
            ));
        }
        if let Some(why) = slot::invalidation(state) {
            lines.push(Line::fail(
                "slot",
                format!("{name} was invalidated ({why})"),
                slot::lost_action(&name),
            ));
        }
        let budget = slot::WalBudget {
            warn_bytes: self.env.config.slot_wal_warn_bytes,
        };
        if let Some(warning) = slot::wal_warning(&health, budget) {
            lines.push(Line::warn("retained WAL", warning));
        }
        let lsn = |l: Option<crate::Lsn>| l.map(|l| l.to_string());
        self.slot_fact = json!({
            "name": name,
            "exists": true,
            "active": state.active,
            "active_pid": state.active_pid,
            "confirmed_flush_lsn": lsn(state.confirmed_flush),
            "restart_lsn": lsn(state.restart_lsn),
            "current_wal_lsn": health.current_wal.to_string(),
            "lag_bytes": health.lag_bytes(),
            "retained_wal_bytes": health.retained_bytes(),
            "wal_status": state.wal_status,
            "safe_wal_size": state.safe_wal_size,
            "invalidation": slot::invalidation(state),
            "failover": state.failover,
        });
        lines
    }

    fn on_pipeline(&mut self, reply: Reply<'_>) {
        let pipeline = &self.env.config.feldera_pipeline;
        let line = match classify_pipeline(reply) {
            PipelineOutcome::Ready(info) => {
                let status = info
                    .deployment_status
                    .clone()
                    .unwrap_or_else(|| "unknown".into());
                let program = info
                    .program_status
                    .clone()
                    .unwrap_or_else(|| "unknown".into());
                let (_, verdict) =
                    crate::pipeline::durability::verdict(&self.env.config, info.fault_tolerance);
                self.feldera_fact = json!({
                    "pipeline": pipeline,
                    "deployment_status": status,
                    "program_status": program,
                    "fault_tolerance": info.fault_tolerance.name(),
                });
                Line::info(
                    "feldera",
                    format!(
                        "pipeline {pipeline}: deployment {status}, program {program}; {verdict}"
                    ),
                )
            }
            PipelineOutcome::NotCompiled { program_status } => {
                let program = program_status.unwrap_or_else(|| "unknown".into());
                self.feldera_fact = json!({"pipeline": pipeline, "program_status": program});
                Line::info(
                    "feldera",
                    format!("pipeline {pipeline}: no compiled program (program_status {program})"),
                )
            }
            PipelineOutcome::BadSchema(e) => Line::warn(
                "feldera",
                format!("pipeline {pipeline} answered, but its schema cannot be read: {e}"),
            ),
            PipelineOutcome::Fatal(e) if crate::feldera::is_not_found(&e) => {
                // The line waits for the list of pipelines (`on_listing`).
                let list = self.env.endpoint.list_pipelines(QUESTION_TIMEOUT_MS);
                let id = self.queue.http(list);
                self.listing = Some((id, format!("cannot read pipeline {pipeline}: {e}")));
                return;
            }
            PipelineOutcome::Transient(e) | PipelineOutcome::Fatal(e) => Line::fail(
                "feldera",
                format!("cannot read pipeline {pipeline}: {e}"),
                PIPELINE_FIX,
            ),
        };
        self.feldera_lines = Some(vec![line]);
    }

    fn on_state(&mut self, contents: Result<Option<bytes::Bytes>, String>) {
        let path = &self.env.state_path;
        self.state_line = Some(match contents {
            Ok(None) => Line::info("state file", format!("{path} is absent")),
            Ok(Some(bytes)) => match crate::snapshot::state::StateFile::parse(&bytes) {
                Ok(file) => Line::info(
                    "state file",
                    format!(
                        "{path}: {} copy for slot {}, consistent point {}{}",
                        file.phase,
                        file.slot,
                        file.consistent_point
                            .map_or_else(|| "none".to_owned(), |l| l.to_string()),
                        file.own_phases().map_or_else(String::new, |own| format!(
                            "; routes copied or removed since: {own}"
                        ))
                    ),
                ),
                Err(e) => Line::fail(
                    "state file",
                    format!("{path} cannot be read: {e}"),
                    "fix it, or delete it (the next start then copies every table again)",
                ),
            },
            Err(e) => Line::fail(
                "state file",
                format!("{path} cannot be read: {e}"),
                "fix its permissions",
            ),
        });
    }

    fn on_stats(&mut self, reply: Reply<'_>) {
        let pipeline = &self.env.config.feldera_pipeline;
        self.incarnation_line = Some(match crate::feldera::classify_stats(reply) {
            crate::feldera::StatsOutcome::Incarnation(incarnation) => {
                let line = Line::info(
                    "feldera incarnation",
                    format!(
                        "pipeline {pipeline} runs as incarnation {}",
                        incarnation.uuid
                    ),
                );
                self.incarnation = Some(incarnation.uuid);
                line
            }
            crate::feldera::StatsOutcome::Transient(e) | crate::feldera::StatsOutcome::Fatal(e) => {
                Line::warn("feldera incarnation", format!("cannot read it: {e}"))
            }
        });
    }

    /// Feldera's pipelines, after the pipeline was not found: the line names them (or says
    /// there are none, or why the list is unknown).
    fn on_listing(&mut self, finding: String, reply: Reply<'_>) {
        let listed = crate::feldera::classify_pipeline_list(reply);
        let pipeline = &self.env.config.feldera_pipeline;
        self.feldera_lines = Some(vec![Line::fail(
            "feldera",
            format!(
                "{finding}; {}",
                crate::feldera::describe_pipelines(pipeline, &listed)
            ),
            PIPELINE_FIX,
        )]);
    }

    fn finish_if_ready(&mut self) {
        if self.queue.exited() {
            return;
        }
        let timed_out = self.queue.now.mono >= self.deadline;
        let ready = self.pg_lines.is_some()
            && self.feldera_lines.is_some()
            && self.incarnation_line.is_some()
            && self.state_line.is_some();
        if !ready && !timed_out {
            return;
        }
        let late = |what: &str| {
            vec![Line::fail(
                what,
                format!("no answer within {} s", OPERATION_TIMEOUT_MS / 1000),
                "check that it is up and reachable",
            )]
        };
        if self.pg_lines.is_none() {
            self.pg_done(late("postgres"));
        }
        let mut report = Report::default();
        for line in self.pg_lines.take().unwrap_or_default() {
            report.push(line);
        }
        for line in self.feldera_lines.take().unwrap_or_else(|| late("feldera")) {
            report.push(line);
        }
        report.push(
            self.incarnation_line
                .take()
                .unwrap_or_else(|| Line::warn("feldera incarnation", "not read in time")),
        );
        if let (Some(incarnation), Some(fact)) =
            (self.incarnation.take(), self.feldera_fact.as_object_mut())
        {
            fact.insert("incarnation".into(), json!(incarnation));
        }
        report.push(
            self.state_line
                .take()
                .unwrap_or_else(|| Line::warn("state file", "not read in time")),
        );
        if self.slot_fact["exists"] == json!(false) {
            report.not_yet = Some(format!("slot {} does not exist yet", self.env.config.slot));
        }
        report.fact("slot", self.slot_fact.take());
        report.fact("feldera", self.feldera_fact.take());
        self.queue.push(Command::Print {
            text: report.render("status", self.format),
        });
        let code = if report.passed() {
            exit::OK
        } else {
            exit::FATAL
        };
        self.queue
            .exit(code, format!("status: {} problem(s)", report.problems()));
    }
}

impl Driver for Status {
    fn handle(&mut self, now: Now, input: Input) {
        if self.queue.exited() {
            return;
        }
        now_of(&mut self.queue, now);
        match input {
            input if self.control.as_ref().is_some_and(|c| c.owns(&input)) => self.on_pg(input),
            Input::HttpDone { id, status, body } if id == self.pipeline_request => {
                self.on_pipeline(Reply::Answered {
                    status,
                    body: &body,
                });
            }
            Input::HttpFailed { id, error } if id == self.pipeline_request => {
                self.on_pipeline(Reply::Failed { error: &error });
            }
            Input::HttpDone { id, status, body } if id == self.stats_request => {
                self.on_stats(Reply::Answered {
                    status,
                    body: &body,
                });
            }
            Input::HttpFailed { id, error } if id == self.stats_request => {
                self.on_stats(Reply::Failed { error: &error });
            }
            Input::HttpDone { id, status, body }
                if self.listing.as_ref().is_some_and(|(l, _)| *l == id) =>
            {
                let finding = self.listing.take().map(|(_, f)| f).unwrap_or_default();
                self.on_listing(
                    finding,
                    Reply::Answered {
                        status,
                        body: &body,
                    },
                );
            }
            Input::HttpFailed { id, error }
                if self.listing.as_ref().is_some_and(|(l, _)| *l == id) =>
            {
                let finding = self.listing.take().map(|(_, f)| f).unwrap_or_default();
                self.on_listing(finding, Reply::Failed { error: &error });
            }
            Input::StateRead { contents } => self.on_state(contents),
            // Interrupted: report what is known now.
            Input::Shutdown => self.deadline = self.queue.now.mono,
            _ => {}
        }
        self.finish_if_ready();
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.queue.pop()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        deadline(&self.queue, self.deadline)
    }
}
