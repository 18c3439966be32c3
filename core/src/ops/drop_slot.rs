//! `slotline drop-slot`: refuses without `--yes` (exit 2, before connecting) and while the
//! slot is active (exit 1: stop the connector first); otherwise drops the slot over one
//! plain control connection, then removes the state file, and reports both.

use super::control::{
    connect_fix, deadline, now_of, with_rows, Control, Heard, OPERATION_TIMEOUT_MS,
};
use crate::catalog::questions::{self, quote_literal};
use crate::config::{Config, ConfigError};
use crate::io::{exit, Command, Driver, Input};
use crate::pipeline::env::Env;
use crate::pipeline::queue::Queue;
use crate::report::{Format, Line, Report};
use crate::time::{Mono, Now};
use crate::timer::Deadline;

/// Where a `drop-slot` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropStage {
    Connecting,
    ReadingSlot,
    DroppingSlot,
    RemovingState,
}

/// `slotline drop-slot` (see the module docs).
#[derive(Debug)]
pub struct DropSlot {
    queue: Queue,
    env: Env,
    format: Format,
    deadline: Mono,
    control: Option<Control>,
    stage: DropStage,
    report: Report,
}

impl DropSlot {
    /// `confirmed`: the operator passed `--yes`; without it nothing is touched (exit 2).
    pub fn new(
        config: Config,
        now: Now,
        format: Format,
        confirmed: bool,
    ) -> Result<DropSlot, ConfigError> {
        let env = Env::for_slot_operation(config)?;
        let mut drop = DropSlot {
            queue: Queue::new(now),
            deadline: now.mono.plus_ms(OPERATION_TIMEOUT_MS),
            format,
            control: None,
            stage: DropStage::Connecting,
            report: Report::default(),
            env,
        };
        let (slot, path) = (drop.env.config.slot.clone(), drop.env.state_path.clone());
        if !confirmed {
            drop.report.push(Line::fail(
                "drop-slot",
                format!("refusing to drop replication slot {slot} and the state file {path} without --yes"),
                "run again with --yes once the connector is stopped for good (its Feldera tables stop receiving changes)",
            ));
            drop.finish(exit::USAGE);
            return Ok(drop);
        }
        match Control::open(&mut drop.queue, &drop.env, "slotline-drop-slot") {
            Ok(control) => drop.control = Some(control),
            Err(e) => drop.fail_pg(format!("cannot connect: {e}")),
        }
        Ok(drop)
    }

    fn fail_pg(&mut self, why: String) {
        let fix = connect_fix(&self.env, &why);
        self.report.push(Line::fail("postgres", why, fix));
        self.finish(exit::FATAL);
    }

    fn finish(&mut self, code: i32) {
        if let Some(mut control) = self.control.take() {
            control.close(&mut self.queue);
        }
        self.queue.push(Command::Print {
            text: self.report.render("drop-slot", self.format),
        });
        let code = if code == exit::OK && !self.report.passed() {
            exit::FATAL
        } else {
            code
        };
        self.queue.exit(
            code,
            format!("drop-slot: {} problem(s)", self.report.problems()),
        );
    }

    fn remove_state(&mut self) {
        if let Some(mut control) = self.control.take() {
            control.close(&mut self.queue);
        }
        self.stage = DropStage::RemovingState;
        self.queue.push(Command::RemoveState {
            path: self.env.state_path.clone(),
        });
    }

    fn on_pg(&mut self, input: Input) {
        let Some(control) = self.control.as_mut() else {
            return;
        };
        let slot = self.env.config.slot.clone();
        match (self.stage, control.on_input(&mut self.queue, input)) {
            (_, Heard::Nothing) => {}
            (_, Heard::Gone(why)) => self.fail_pg(format!("cannot ask PostgreSQL: {why}")),
            (DropStage::Connecting, Heard::Ready) => {
                self.stage = DropStage::ReadingSlot;
                let asked = questions::slot_query(&slot)
                    .ok_or_else(|| "the slot name contains a NUL byte".to_owned())
                    .and_then(|sql| control.ask(&mut self.queue, &sql));
                if let Err(e) = asked {
                    self.fail_pg(e);
                }
            }
            (DropStage::ReadingSlot, Heard::Answer(answer)) => {
                let found = answer.and_then(|rows| {
                    with_rows(&rows, questions::parse_slot).map_err(|e| e.to_string())
                });
                match found {
                    Err(e) => self.fail_pg(format!("cannot read the slot: {e}")),
                    Ok(None) => {
                        self.report
                            .push(Line::info("slot", format!("{slot} does not exist")));
                        self.remove_state();
                    }
                    Ok(Some(info)) => match info.active_pid {
                        Some(pid) => {
                            self.report.push(Line::fail(
                                "slot",
                                format!(
                                    "{slot} is in use by PostgreSQL backend pid {pid} (the walsender streaming it to a connector); it was not dropped, nor the state file"
                                ),
                                "stop the connector (or whatever consumes the slot) first, then run drop-slot again",
                            ));
                            self.finish(exit::FATAL);
                        }
                        None => {
                            self.stage = DropStage::DroppingSlot;
                            let sql = quote_literal(&slot).map(|s| {
                                format!("SELECT pg_catalog.pg_drop_replication_slot({s})")
                            });
                            let asked = sql
                                .ok_or_else(|| "the slot name contains a NUL byte".to_owned())
                                .and_then(|sql| control.ask(&mut self.queue, &sql));
                            if let Err(e) = asked {
                                self.fail_pg(e);
                            }
                        }
                    },
                }
            }
            (DropStage::DroppingSlot, Heard::Answer(Ok(_))) => {
                self.report
                    .push(Line::ok("slot", format!("dropped replication slot {slot}")));
                self.remove_state();
            }
            (DropStage::DroppingSlot, Heard::Answer(Err(error))) => {
                self.report.push(Line::fail(
                    "slot",
                    format!("PostgreSQL refused to drop {slot}: {error}; the state file was kept"),
                    "stop whatever uses the slot, connect to the slot's database as a role with REPLICATION, and run drop-slot again",
                ));
                self.finish(exit::FATAL);
            }
            _ => {}
        }
    }

    fn on_removed(&mut self, result: Result<bool, String>) {
        let path = &self.env.state_path;
        self.report.push(match result {
            Ok(true) => Line::ok("state file", format!("removed {path}")),
            Ok(false) => Line::info("state file", format!("{path} did not exist")),
            Err(e) => Line::fail(
                "state file",
                format!("cannot remove {path}: {e}"),
                format!("remove {path} by hand"),
            ),
        });
        self.finish(exit::OK);
    }
}

impl Driver for DropSlot {
    fn handle(&mut self, now: Now, input: Input) {
        if self.queue.exited() {
            return;
        }
        now_of(&mut self.queue, now);
        match input {
            input if self.control.as_ref().is_some_and(|c| c.owns(&input)) => self.on_pg(input),
            Input::StateRemoved { result } if self.stage == DropStage::RemovingState => {
                self.on_removed(result)
            }
            Input::Shutdown if self.stage != DropStage::RemovingState => {
                let done = if self.stage == DropStage::DroppingSlot {
                    "the slot may or may not have been dropped (run status)"
                } else {
                    "nothing was dropped"
                };
                self.report.push(Line::fail(
                    "drop-slot",
                    format!("interrupted: {done}; the state file was kept"),
                    "run drop-slot --yes again",
                ));
                self.finish(exit::FATAL);
            }
            _ => {}
        }
        if !self.queue.exited() && self.queue.now.mono >= self.deadline {
            self.report.push(Line::fail(
                "postgres",
                format!("no answer within {} s", OPERATION_TIMEOUT_MS / 1000),
                connect_fix(&self.env, ""),
            ));
            self.finish(exit::FATAL);
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.queue.pop()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        deadline(&self.queue, self.deadline)
    }
}
