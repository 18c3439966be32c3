//! The slot monitor: while a slot exists for this run (snapshot, streaming, retraction,
//! stop), a control connection of its own samples the slot's health every
//! `SLOT_CHECK_INTERVAL_MS`. Each sample feeds the metrics (the server's WAL position,
//! retained WAL, lag) and two rules:
//!
//! - an invalidated slot (`wal_status = 'lost'`, a conflict with recovery, an invalidation
//!   reason) is a `SlotLost` failure: the policy exits 1 with the action to take, because
//!   the WAL the slot needed is gone and only a new copy can repair that;
//! - retained WAL past a share of `max_slot_wal_keep_size` or `SLOT_WAL_WARN_BYTES` is
//!   logged once as a warning (and once more when it is back under).
//!
//! The run's first sample also logs what a failover slot or a standby source puts at risk
//! (`catalog::server::judge_high_availability`), once per run.
//!
//! The monitor never ends a session by itself for its own trouble: a control connection
//! that breaks or a question that fails is logged and tried again at the next sample.
//! `NO_PROGRESS_TIMEOUT_SECS` stays the last guard.

use super::cx::Cx;
use super::handover::Next;
use super::pg_link::{LinkClosed, PgLink};
use super::policy::{Failure, FailureKind};
use super::queue::Queue;
use crate::catalog::questions::Row;
use crate::catalog::slot::{self, SlotHealth, WalBudget};
use crate::conn::Event;
use crate::io::{ConnFailure, ConnId, Level};
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};

/// Where the monitor's sampling stands.
#[derive(Debug, PartialEq, Eq)]
enum Stage {
    /// The control connection is being opened; the first question follows.
    Connecting,
    /// A question is out.
    Asking,
    /// Waiting for the next sample.
    Waiting { until: Mono },
}

#[derive(Debug)]
pub(crate) struct Monitor {
    interval_ms: u64,
    link: Option<PgLink>,
    stage: Stage,
    rows: Vec<Vec<Option<String>>>,
    query_error: Option<String>,
    /// The latest sample.
    last: Option<SlotHealth>,
    /// The retained-WAL warning was logged and still holds.
    warning: bool,
}

impl Monitor {
    /// Starts sampling (the first sample at once), unless `SLOT_CHECK_INTERVAL_MS=0`.
    pub(crate) fn start(cx: &mut Cx<'_>) -> Option<Monitor> {
        let interval_ms = cx.env.config.slot_check_interval_ms;
        if interval_ms == 0 {
            return None;
        }
        let mut monitor = Monitor {
            interval_ms,
            link: None,
            stage: Stage::Waiting { until: cx.now() },
            rows: Vec::new(),
            query_error: None,
            last: None,
            warning: false,
        };
        monitor.connect(cx);
        Some(monitor)
    }

    fn connect(&mut self, cx: &mut Cx<'_>) {
        let name = format!("slotline-monitor/{}", cx.env.config.slot);
        let pg = cx.env.config.pg.at(cx.run.hosts.index);
        match PgLink::open(cx.queue, &pg, false, &name) {
            Ok(link) => {
                self.link = Some(link);
                self.stage = Stage::Connecting;
            }
            Err(e) => {
                cx.queue
                    .log(Level::Debug, format!("slot monitor cannot connect: {e}"));
                self.wait(cx.now());
            }
        }
    }

    fn wait(&mut self, now: Mono) {
        self.stage = Stage::Waiting {
            until: now.plus_ms(self.interval_ms),
        };
    }

    pub(crate) fn owns(&self, conn: ConnId) -> bool {
        self.link.as_ref().is_some_and(|l| l.id == conn)
    }

    /// The latest sample and whether the retained-WAL warning holds.
    pub(crate) fn sample(&self) -> (Option<&SlotHealth>, bool) {
        (self.last.as_ref(), self.warning)
    }

    pub(crate) fn arm(&self, timers: &mut TimerTable) {
        if let Stage::Waiting { until } = self.stage {
            timers.set(TimerKind::SlotMonitor, until);
        }
    }

    pub(crate) fn close(mut self, queue: &mut Queue) {
        if let Some(link) = self.link.as_mut() {
            link.close(queue);
        }
    }

    /// The sample is due: ask (connecting first when the last connection is gone).
    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>) {
        let Stage::Waiting { until } = self.stage else {
            return;
        };
        if cx.now() < until {
            return;
        }
        match self.link.as_mut() {
            None => self.connect(cx),
            Some(_) => self.ask(cx),
        }
    }

    fn ask(&mut self, cx: &mut Cx<'_>) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let version = link
            .parameter("server_version")
            .and_then(crate::wire::server_version::parse_server_version)
            .unwrap_or(slot::MIN_SERVER_VERSION);
        let Some(sql) = slot::slot_health_query(&cx.env.config.slot, version) else {
            return self.wait(cx.now());
        };
        self.rows.clear();
        self.query_error = None;
        match link.query(cx.queue, &sql) {
            Ok(()) => self.stage = Stage::Asking,
            Err(e) => {
                cx.queue
                    .log(Level::Debug, format!("slot monitor cannot ask: {e}"));
                self.wait(cx.now());
            }
        }
    }

    pub(crate) fn on_connected(&mut self, cx: &mut Cx<'_>) {
        if let Some(link) = self.link.as_mut() {
            link.on_connected(cx.queue);
        }
    }

    pub(crate) fn on_tls_ready(&mut self, cx: &mut Cx<'_>, certificate: Option<&[u8]>) {
        if let Some(link) = self.link.as_mut() {
            link.on_tls_ready(cx.queue, certificate);
        }
    }

    /// The control connection ended: sample again later, on a new one.
    pub(crate) fn on_closed(&mut self, cx: &mut Cx<'_>, error: Option<ConnFailure>) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let why = match link.on_closed(cx.queue, error) {
            LinkClosed::Retrying => return,
            LinkClosed::Lost(why) | LinkClosed::Fatal(why) => why,
        };
        link.abandon(cx.queue);
        self.link = None;
        cx.queue.log(
            Level::Debug,
            format!("slot monitor connection ended ({why}); sampling again later"),
        );
        self.wait(cx.now());
    }

    pub(crate) fn on_bytes(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) -> Next {
        let Some(link) = self.link.as_mut() else {
            return Next::Stay;
        };
        for event in link.on_bytes(cx.queue, bytes) {
            match event {
                Event::Ready if self.stage == Stage::Connecting => self.ask(cx),
                Event::DataRow(row) => self.rows.push(
                    row.columns
                        .iter()
                        .map(|c| c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()))
                        .collect(),
                ),
                Event::QueryError(error) => self.query_error = Some(error.to_string()),
                Event::QueryDone { .. } if self.stage == Stage::Asking => {
                    self.wait(cx.now());
                    if let Some(failure) = self.on_answer(cx) {
                        return Next::Fail(failure);
                    }
                }
                Event::Failed(error) => {
                    cx.queue.log(
                        Level::Debug,
                        format!("slot monitor connection failed: {error}"),
                    );
                    if let Some(mut link) = self.link.take() {
                        link.close(cx.queue);
                    }
                    self.wait(cx.now());
                    return Next::Stay;
                }
                _ => {}
            }
        }
        Next::Stay
    }

    /// A sample arrived: a lost slot fails the run; retained WAL may warn.
    fn on_answer(&mut self, cx: &mut Cx<'_>) -> Option<Failure> {
        if let Some(error) = self.query_error.take() {
            cx.queue.log(
                Level::Debug,
                format!("slot monitor question failed: {error}"),
            );
            return None;
        }
        let owned = std::mem::take(&mut self.rows);
        let borrowed: Vec<Vec<Option<&str>>> = owned
            .iter()
            .map(|r| r.iter().map(|c| c.as_deref()).collect())
            .collect();
        let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
        let health = match slot::parse_slot_health(&rows) {
            Ok(health) => health,
            Err(e) => {
                cx.queue.log(Level::Debug, format!("slot monitor: {e}"));
                return None;
            }
        };
        let name = &cx.env.config.slot;
        if !cx.run.availability_said {
            // Once per run: what a failover or a standby source puts at risk, as `check`
            // and `status` say it.
            cx.run.availability_said = true;
            let lines = crate::catalog::server::judge_high_availability(
                &health.availability,
                cx.env.config.slot_failover,
            );
            for line in lines {
                let level = match line.verdict {
                    crate::report::Verdict::Warn | crate::report::Verdict::Fail => Level::Warn,
                    _ => Level::Info,
                };
                let text = match &line.fix {
                    Some(fix) => crate::report::with_fix(&line.message, fix),
                    None => line.message.clone(),
                };
                cx.queue.log(level, text);
            }
        }
        if let Some(why) = health.slot.as_ref().and_then(slot::invalidation) {
            return Some(Failure::new(
                FailureKind::SlotLost,
                format!(
                    "replication slot {name} was invalidated while slotline ran ({why}): {}",
                    slot::lost_action(name)
                ),
            ));
        }
        let budget = WalBudget {
            warn_bytes: cx.env.config.slot_wal_warn_bytes,
        };
        match (slot::wal_warning(&health, budget), self.warning) {
            (Some(warning), false) => {
                cx.queue.log(
                    Level::Warn,
                    format!(
                        "replication slot {name}: {warning}; it is released only as Feldera completes batches \
                         (NO_PROGRESS_TIMEOUT_SECS ends a run that stopped progressing)"
                    ),
                );
                self.warning = true;
            }
            (None, true) => {
                cx.queue.log(
                    Level::Info,
                    format!("replication slot {name}: retained WAL is back under its limits"),
                );
                self.warning = false;
            }
            _ => {}
        }
        cx.run
            .report
            .on_server_position(health.current_wal, cx.now());
        self.last = Some(health);
        None
    }
}
