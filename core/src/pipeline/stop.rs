//! Graceful stop: stop reading, send what is buffered, wait (bounded) until it is durable,
//! send the final status update, then read the slot's `confirmed_flush_lsn` on a second
//! connection until it shows the final position or `SHUTDOWN_CONFIRM_MS` passes. The
//! protocol has no acknowledgement of an acknowledgement: without this wait the last update
//! is often lost and the restart replays the last transaction.

use super::pg::{LinkClosed, PgLink};
use super::Pipeline;
use crate::conn::Event;
use crate::io::{exit, ConnFailure, ConnId, Level};
use crate::outbox::CutReason;
use crate::startup::catalog;
use crate::time::Mono;
use crate::Lsn;

/// How often the slot is asked again while confirming.
const CONFIRM_POLL_US: u64 = 100_000;

#[derive(Debug)]
pub(crate) struct Stop {
    control: Option<PgLink>,
    target: Lsn,
    confirm_deadline: Option<Mono>,
    query_at: Option<Mono>,
    rows: Vec<Vec<Option<String>>>,
    last_seen: Option<Lsn>,
}

impl Stop {
    pub(crate) fn deadline(&self) -> Option<Mono> {
        match (self.confirm_deadline, self.query_at) {
            (Some(d), Some(q)) => Some(d.min(q)),
            (d, q) => d.or(q),
        }
    }
}

impl Pipeline {
    pub(super) fn on_shutdown(&mut self) {
        if self.stop.is_some() {
            return;
        }
        let streaming = self.session.as_ref().is_some_and(|s| s.stream.is_some());
        if !streaming {
            if let Some(mut session) = self.session.take() {
                session.repl.close(&mut self.ctx);
            }
            return self.ctx.exit(
                exit::OK,
                "stopped before streaming started; nothing to confirm",
            );
        }
        self.ctx.log(
            Level::Info,
            "stopping: no more reading; sending what is buffered",
        );
        self.stop = Some(Stop {
            control: None,
            target: Lsn::ZERO,
            confirm_deadline: None,
            query_at: None,
            rows: Vec::new(),
            last_seen: None,
        });
        if let Some(session) = self.session.as_ref() {
            session.repl.pause_read(&mut self.ctx);
        }
        if self.in_flight.is_none() {
            self.continue_stop();
        }
    }

    /// Nothing is in flight: send what is left, or move on to confirming.
    pub(super) fn continue_stop(&mut self) {
        if !self.outbox.is_empty() {
            return self.cut_and_send(CutReason::Drain);
        }
        let target = self.ack.flush();
        let reported = self
            .session
            .as_ref()
            .and_then(|s| s.stream.as_ref())
            .and_then(|s| s.reported);
        if reported != Some(target) {
            self.send_status();
        }
        let already = self
            .session
            .as_ref()
            .and_then(|s| s.stream.as_ref())
            .map_or(Lsn::ZERO, |s| s.slot_confirmed_at_start);
        if target <= already || self.config.shutdown_confirm_ms == 0 {
            return self.finish_stop(format!("stopped at {target}"));
        }
        let link = match PgLink::open(&mut self.ctx, &self.config.pg, false, "slotline-confirm") {
            Ok(link) => link,
            Err(e) => return self.finish_stop(format!("stopped at {target}, unconfirmed: {e}")),
        };
        let deadline = self.ctx.now.mono.plus_ms(self.config.shutdown_confirm_ms);
        if let Some(stop) = self.stop.as_mut() {
            stop.control = Some(link);
            stop.target = target;
            stop.confirm_deadline = Some(deadline);
        }
    }

    fn finish_stop(&mut self, reason: String) {
        if let Some(stop) = self.stop.as_mut() {
            if let Some(control) = stop.control.as_mut() {
                control.close(&mut self.ctx);
            }
        }
        if let Some(mut session) = self.session.take() {
            session.repl.close(&mut self.ctx);
        }
        self.ctx.exit(exit::OK, reason);
    }

    pub(super) fn stop_on_pg_connected(&mut self, conn: ConnId) {
        if let Some(control) = self
            .stop
            .as_mut()
            .and_then(|s| s.control.as_mut())
            .filter(|c| c.id == conn)
        {
            control.on_connected(&mut self.ctx);
        }
    }

    pub(super) fn stop_on_pg_tls_ready(&mut self, conn: ConnId, certificate: Option<&[u8]>) {
        if let Some(control) = self.stop.as_mut().and_then(|s| s.control.as_mut()) {
            if control.id == conn {
                control.on_tls_ready(&mut self.ctx, certificate);
            }
        }
    }

    pub(super) fn stop_on_pg_closed(&mut self, conn: ConnId, error: Option<ConnFailure>) {
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        let Some(control) = stop.control.as_mut().filter(|c| c.id == conn) else {
            return;
        };
        let why = match control.on_closed(&mut self.ctx, error) {
            LinkClosed::Retrying => return,
            LinkClosed::Lost(why) | LinkClosed::Fatal(why) => why,
        };
        let target = stop.target;
        self.finish_stop(format!(
            "stopped at {target}, unconfirmed: the control connection closed ({why})"
        ));
    }

    pub(super) fn stop_on_pg_bytes(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        let Some(control) = stop.control.as_mut().filter(|c| c.id == conn) else {
            return;
        };
        for event in control.on_bytes(&mut self.ctx, bytes) {
            match event {
                Event::Ready => self.ask_slot(),
                Event::DataRow(row) => {
                    let text = row
                        .columns
                        .iter()
                        .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                        .collect();
                    if let Some(stop) = self.stop.as_mut() {
                        stop.rows.push(text);
                    }
                }
                Event::QueryDone { .. } => self.on_slot_answer(),
                Event::Failed(error) => {
                    let target = self.stop.as_ref().map_or(Lsn::ZERO, |s| s.target);
                    return self.finish_stop(format!("stopped at {target}, unconfirmed: {error}"));
                }
                _ => {}
            }
            if self.ctx.exited() {
                return;
            }
        }
    }

    fn ask_slot(&mut self) {
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        let Some(control) = stop.control.as_mut() else {
            return;
        };
        stop.rows.clear();
        stop.query_at = None;
        if let Some(sql) = catalog::slot_query(&self.config.slot) {
            let _ = control.query(&mut self.ctx, &sql);
        }
    }

    fn on_slot_answer(&mut self) {
        let now = self.ctx.now.mono;
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        let rows = std::mem::take(&mut stop.rows);
        let borrowed: Vec<Vec<Option<&str>>> = rows
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let views: Vec<catalog::Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        let confirmed = catalog::parse_slot(&views)
            .ok()
            .flatten()
            .and_then(|s| s.confirmed_flush);
        stop.last_seen = confirmed;
        let target = stop.target;
        if confirmed.is_some_and(|c| c >= target) {
            return self.finish_stop(format!("stopped; the slot confirmed {target}"));
        }
        stop.query_at = Some(now.plus_us(CONFIRM_POLL_US));
    }

    pub(super) fn on_stop_timer(&mut self) {
        let now = self.ctx.now.mono;
        let Some(stop) = self.stop.as_ref() else {
            return;
        };
        if stop.confirm_deadline.is_some_and(|d| now >= d) {
            let seen = stop
                .last_seen
                .map_or("nothing".to_owned(), |l| l.to_string());
            let target = stop.target;
            self.ctx.log(
                Level::Warn,
                format!("the slot did not show {target} within SHUTDOWN_CONFIRM_MS (last seen {seen}); a restart may replay from there"),
            );
            return self.finish_stop(format!("stopped at {target}, unconfirmed"));
        }
        if stop.query_at.is_some_and(|q| now >= q) {
            self.ask_slot();
        }
    }
}
